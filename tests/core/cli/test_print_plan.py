"""``sluice plan``'s human output: a verdict first, the columns each change touches, what
reaches what, who is unaffected, "full refresh" for models rebuilt whole, plurals right,
and the command that applies it."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from rich.console import Console

from sluice.core.cli.plan import print_plan
from sluice.core.cli.tree import Node, print_tree
from sluice.core.plan.plan import Plan
from sluice.core.timeutil import to_ms
from tests.core.helpers import load, plan_of

END = to_ms("2024-01-03")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
PROJECT = {
    "config.yaml": """
        model_defaults:
          dialect: spark
          start: '2024-01-01'
          cron: '@daily'
    """,
    "models/orders.sql": """
        MODEL (name s.orders, kind FULL);
        SELECT 1 AS id, 5 AS amount, 'paid' AS status
    """,
    "models/paid.sql": """
        MODEL (name s.paid, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));
        SELECT id, amount, '2024-01-01' AS ds FROM s.orders WHERE status = 'paid'
    """,
    "models/ids.sql": """
        MODEL (name s.ids, kind FULL);
        SELECT id FROM s.orders
    """,
}


def _plan(project_files: dict[str, str], root: Path, base: Plan | None = None) -> Plan:
    return plan_of(load(root, project_files), base, "pr_1" if base else "prod", end=END)


def _text(plan: Plan, next_step: str | None = None) -> str:
    console = Console(width=200, record=True, color_system=None)
    print_plan(plan, console, next_step=next_step)
    return console.export_text()


def test_a_new_environment_says_what_is_added_and_full_refresh_for_full_models(
    tmp_path: Path,
) -> None:
    text = _text(_plan(PROJECT, tmp_path), next_step="sluice apply prod --project p")
    assert text.splitlines()[0] == "✓ 3 models added: 3 tables to build"
    assert "s.orders: full refresh" in text and "s.ids: full refresh" in text
    assert "s.paid: 2024-01-01 .. 2024-01-02 (2 intervals in 1 batch)" in text
    assert text.rstrip().endswith("Next: sluice apply prod --project p")


def test_a_breaking_change_leads_and_names_its_columns_and_reach(tmp_path: Path) -> None:
    prod = _plan(PROJECT, tmp_path / "1")
    edited = {**PROJECT, "models/orders.sql": PROJECT["models/orders.sql"].replace(
        "5 AS amount", "7 AS amount")}  # fmt: skip
    text = _text(_plan(edited, tmp_path / "2", prod))
    assert text.splitlines()[0] == (
        "⚠ 1 breaking change; it reaches 2 models downstream: 3 tables to build"
    )
    assert "s.orders [breaking] (~amount)" in text
    assert "s.paid [breaking] via s.orders reads s.orders.amount" in text
    assert "s.ids [breaking] via s.orders" in text and "Next:" not in text


def test_a_non_breaking_change_lists_the_children_that_read_none_of_it(tmp_path: Path) -> None:
    prod = _plan(PROJECT, tmp_path / "1")
    edited = {**PROJECT, "models/orders.sql": PROJECT["models/orders.sql"].replace(
        "'paid' AS status", "'paid' AS status, 'EUR' AS currency")}  # fmt: skip
    text = _text(_plan(edited, tmp_path / "2", prod))
    assert text.splitlines()[0] == "✓ No breaking change: 1 table to build"
    assert "s.orders [non-breaking] (+currency)" in text
    assert "Unaffected (2): they read none of the changed columns" in text
    assert "Indirectly modified" not in text


def test_sluice_plan_warns_above_the_backfill_budget(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from sluice.core.cli import cli

    config = (
        "model_defaults:\n  dialect: spark\n  start: '2018-01-01'\n  cron: '@daily'\n"
        "sluice:\n  gate:\n    backfill:\n      max_intervals: 365\n      approver: dana\n"
    )
    root = tmp_path / "p"
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text(config)
    (root / "models" / "events.sql").write_text(
        "MODEL (name s.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));\n"
        "SELECT DATE '2018-01-01' AS ds WHERE ds BETWEEN @start_ds AND @end_ds\n"
    )
    args = ["plan", "--project", str(root), "--state", f"sqlite:///{tmp_path / 's.db'}"]
    over = CliRunner().invoke(cli, [*args, "--end", "2023-12-31"])
    assert over.exit_code == 0, over.output
    said = " ".join(over.output.split())
    assert "this plan's backfill of 2,191 intervals (budget 365) is over" in said
    assert "budget's approver, dana" in said
    under = CliRunner().invoke(cli, [*args, "--end", "2018-06-30"])
    assert under.exit_code == 0 and "sluice.gate.backfill" not in under.output


def test_sluice_plan_shows_what_the_backfill_reads_and_warns_above_a_byte_budget(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    from sluice.core.cli import cli
    from sluice.core.state import TableSize, open_state

    config = "model_defaults:\n  dialect: spark\n  start: '2023-01-01'\n  cron: '@daily'\n"
    root = tmp_path / "p"
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text(config)
    (root / "sluice.yaml").write_text(
        "gate:\n  backfill:\n    max_bytes: 1 GB\n    approver: dana\n"
    )
    (root / "models" / "raw.sql").write_text("MODEL (name s.raw, kind FULL);\nSELECT 1 AS id\n")
    (root / "models" / "daily.sql").write_text(
        "MODEL (name s.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1));\n"
        "SELECT id, DATE '2023-01-01' AS ds FROM s.raw WHERE ds BETWEEN @start_ds AND @end_ds\n"
    )
    url = f"sqlite:///{tmp_path / 's.db'}"
    args = ["plan", "--project", str(root), "--state", url, "--end", "2023-01-10", "--json"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["scan_bytes"] == 0  # nothing measured yet
    raw = next(b for b in json.loads(first.output)["backfill"] if b["model"] == "s.raw")
    store = open_state(url)
    store.set_table_size("s.raw", raw["version"], TableSize(200 * 1024**2, measured_ts=1))
    store.close()
    shown = CliRunner().invoke(cli, args[:-1])
    assert shown.exit_code == 0, shown.output
    # Ten daily batches, each reading the 200 MB of s.raw.
    assert "reads about 2.0 GB" in shown.output
    said = " ".join(shown.output.split())
    assert "backfill of about 2.0 GB to read (budget 1.0 GB) is over" in said
    assert "budget's approver, dana" in said


def _printed(plan: Plan, file: io.TextIOBase, **console: object) -> str:
    print_plan(plan, Console(file=file, width=40, **console))  # type: ignore[arg-type]
    file.seek(0)
    return file.read()


def test_piped_output_is_the_same_text_as_a_terminal_shows_and_keeps_long_lines_whole(
    tmp_path: Path,
) -> None:
    prod = _plan(PROJECT, tmp_path / "1")
    edited = {**PROJECT, "models/orders.sql": PROJECT["models/orders.sql"].replace(
        "5 AS amount", "7 AS amount")}  # fmt: skip
    plan = _plan(edited, tmp_path / "2", prod)
    piped = _printed(plan, io.StringIO(), color_system=None)
    coloured = _printed(plan, io.StringIO(), color_system="truecolor", force_terminal=True)
    assert "\x1b[" not in piped and "\x1b[" in coloured
    assert piped.splitlines() == [_ANSI.sub("", line) for line in coloured.splitlines()]
    # Lines longer than the console's 40 columns are not wrapped.
    assert "│   └── s.paid [breaking] via s.orders reads s.orders.amount" in piped.splitlines()
    # The SQL diff sits under its model, indented past the guides, one line per line.
    lines = piped.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("│   └── s.orders [breaking]"))
    diff = lines[at + 1 : at + 1 + 8]
    assert diff[0].startswith("│       └── ") and all(
        d.startswith("│           ") for d in diff[1:]
    )
    assert any(d.endswith("-  5 AS amount,") for d in diff), diff
    assert any(d.endswith("+  7 AS amount,") for d in diff), diff


def test_a_console_without_box_characters_gets_ascii_guides() -> None:
    root = Node("plan")
    added = root.add("Added (2)")
    added.add("s.a").add("first line\nsecond line")
    added.add("s.b")
    root.add("Backfill").add("s.a: full refresh")
    ascii_file = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    print_tree(root, Console(file=ascii_file, color_system=None))
    ascii_file.seek(0)
    assert ascii_file.read().splitlines() == [
        "plan",
        "+-- Added (2)",
        "|   +-- s.a",
        "|   |   `-- first line",
        "|   |       second line",
        "|   `-- s.b",
        "`-- Backfill",
        "    `-- s.a: full refresh",
    ]


def test_markup_in_a_name_or_diff_is_shown_as_written(tmp_path: Path) -> None:
    files = {**PROJECT, "models/ids.sql": "MODEL (name s.ids, kind FULL);\nSELECT id FROM s.orders"}
    prod = _plan(files, tmp_path / "1")
    edited = {**files, "models/ids.sql": files["models/ids.sql"] + " WHERE id <> '[red]x[/]'"}
    text = _printed(_plan(edited, tmp_path / "2", prod), io.StringIO(), color_system=None)
    assert "'[red]x[/]'" in text
