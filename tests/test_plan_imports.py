"""A ``sluice plan`` process imports only what planning needs (issue 21): not the service
(FastAPI, the forges' clients, the job queue's ORM), not Spark, not the templates of other
commands. Each case runs the real command in a fresh interpreter and reads its
``sys.modules`` at exit, so a new top-level import anywhere on the path fails here."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from sluice.core import workflow
from sluice.core.state import EnvironmentRecord, open_state

# Packages (or package prefixes) a plan must not import. pydantic stays: config.yaml is
# validated with it. SQLAlchemy too: a plan reads a SQLite state with sqlite3.
FORBIDDEN = (
    "sqlalchemy",
    "fastapi",
    "starlette",
    "uvicorn",
    "httpx",
    "requests",
    "github",
    "gitlab",
    "pyspark",
    "py4j",
    "pandas",
    "numpy",
    "psycopg",
    "jinja2",
    "pygments",
    "sluice.bot",
)

RUN = """
import json, sys
from sluice.cli import main
sys.argv = ["sluice", *sys.argv[2:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
with open(MODULES, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def _project(root: Path) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n")
    (root / "external_models.yaml").write_text(
        "- name: raw.orders\n  columns:\n    id: int\n    amount: int\n    ds: date\n"
    )
    (root / "models" / "orders.sql").write_text(
        textwrap.dedent(
            """\
            MODEL (name shop.orders, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));
            SELECT id, amount, ds FROM raw.orders WHERE ds BETWEEN @start_ds AND @end_ds
            """
        )
    )
    (root / "models" / "totals.sql").write_text(
        "MODEL (name shop.totals, kind FULL);\n"
        "SELECT ds, SUM(amount) AS total FROM shop.orders GROUP BY ds\n"
    )
    return root


def _run(tmp_path: Path, *args: str) -> tuple[int, list[str], str]:
    """``sluice ARGS`` in a fresh interpreter: exit code, modules imported, output."""
    modules = tmp_path / "modules.json"
    script = RUN.replace("MODULES", repr(str(modules)))
    done = subprocess.run(
        [sys.executable, "-c", script, "-", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,  # the exit code is read from the report
    )
    report = json.loads(modules.read_text())
    return report["code"], report["modules"], done.stdout + done.stderr


def _forbidden(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]


def test_sluice_plan_imports_nothing_of_the_service_or_spark(tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    state = f"sqlite:///{tmp_path / 'state.db'}"
    code, modules, output = _run(
        tmp_path, "plan", "prod", "--project", str(project), "--state", state
    )
    assert code == 0, output
    assert "shop.totals" in output and "shop.orders" in output  # it really planned
    assert "sluice.core.workflow" in modules
    assert _forbidden(modules) == []
    assert "croniter" not in modules  # @daily is arithmetic; croniter is for other crons


def test_a_plan_with_a_cron_of_its_own_imports_croniter_and_plans_by_it(tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    totals = project / "models" / "totals.sql"
    totals.write_text(totals.read_text().replace("kind FULL", "kind FULL, cron '0 6 * * *'"))
    state = f"sqlite:///{tmp_path / 'state.db'}"
    args = ("plan", "prod", "--project", str(project), "--state", state, "--json")
    args += ("--start", "2024-01-01", "--end", "2024-01-03")
    code, modules, output = _run(tmp_path, *args)
    assert code == 0, output
    assert "croniter" in modules
    totals_backfill = next(
        b
        for b in json.loads(output[output.index("{") :])["backfill"]
        if b["model"] == "shop.totals"
    )
    # Daily at 06:00: the last whole interval before --end's day is over ends at 06:00.
    assert totals_backfill["end"] == "2024-01-03 06:00:00", totals_backfill


def test_sluice_plan_on_an_existing_state_reads_it_without_sqlalchemy(tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    state = f"sqlite:///{tmp_path / 'state.db'}"
    # A state an apply left: prod holds shop.orders as the project has it now.
    store = open_state(state)
    loaded = workflow.load_project(project)
    planned = workflow.plan_environment(loaded, store, "prod", end=10**12, execution_time=10**12)
    orders = next(s for s in planned.snapshots if s.name == "shop.orders")
    store.push_snapshots([orders.to_stored()])
    store.update_environment(EnvironmentRecord("prod", (orders.ref,), "p1", updated_ts=1), None)
    store.close()
    code, modules, output = _run(
        tmp_path, "plan", "prod", "--project", str(project), "--state", state
    )
    assert code == 0, output
    assert _forbidden(modules) == []
    assert "sqlite3" in modules  # the state was read, through the standard library
    # prod was read: not a new environment, and shop.orders is not added again.
    assert "Plan for environment prod\n" in output and "Added (2)" in output, output
    assert "│   ├── raw.orders\n│   └── shop.totals\n" in output, output


def test_a_warm_plan_loads_no_sql_dialect(tmp_path: Path) -> None:
    """Once the parse cache answers every model, nothing is parsed: config.yaml's dialect
    is checked against sqlglot's list of dialects without loading one (Spark's is most
    of sqlglot's dialect code); an unknown one is still refused with its line."""
    project = _project(tmp_path / "project")
    state = f"sqlite:///{tmp_path / 'state.db'}"
    args = ("plan", "prod", "--project", str(project), "--state", state)
    code, cold, output = _run(tmp_path, *args)
    assert code == 0 and "sqlglot.dialects.spark" in cold, output
    code, warm, output = _run(tmp_path, *args)
    assert code == 0 and "shop.totals" in output, output
    assert [
        m for m in warm if m.startswith("sqlglot.dialects.") and m != "sqlglot.dialects.dialect"
    ] == []
    config = project / "config.yaml"
    config.write_text(config.read_text().replace("dialect: spark", "dialect: sparkk"))
    code, _, output = _run(tmp_path, *args)
    assert code == 1 and "unknown SQL dialect 'sparkk'" in output and "config.yaml" in output, (
        output
    )


def test_sluice_plan_json_imports_nothing_of_the_service_or_spark(tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    state = f"sqlite:///{tmp_path / 'state.db'}"
    args = ("plan", "prod", "--project", str(project), "--state", state, "--json")
    code, modules, output = _run(tmp_path, *args)
    assert code == 0, output
    assert json.loads(output[output.index("{") :])["added"], output
    assert _forbidden(modules) == []


def test_a_service_command_still_loads_its_modules_when_run(tmp_path: Path) -> None:
    """The other side: ``sluice jobs --help`` registers the bot's command on demand (and
    this check sees what it imports), and ``sluice --help`` lists every command."""
    code, modules, output = _run(tmp_path, "jobs", "--help")
    assert code == 0, output
    assert "sluice.bot.entry.jobs" in modules
    assert _forbidden(modules) != []
    code, _, output = _run(tmp_path, "--help")
    assert code == 0, output
    for command in ("plan", "apply", "serve", "pr", "action", "demo", "jobs", "spark"):
        assert f"  {command} " in output, command


def test_an_unknown_command_is_still_refused(tmp_path: Path) -> None:
    code, modules, output = _run(tmp_path, "plann")
    assert code == 2 and "No such command 'plann'" in output, output
    assert _forbidden(modules) == []
