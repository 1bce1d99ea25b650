"""SQLMesh's config.py: run in the sandboxed macro process, its Config taken back as the
data a config.yaml holds (with config.py's lines), validated as config.yaml is; bounded and
refused where it reaches past the project; never a source of Sluice's trusted settings."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from sluice.core.config import SluiceSettings, load_config, parse_config
from sluice.core.errors import ConfigError, SluiceError
from sluice.core.gate_settings import GateSettings
from sluice.core.model.loader import load_project
from sluice.core.model.pycode import Refusal, config_file
from sluice.core.model.pycode import files as pycode_files

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "sqlmesh_config_py"
SUSHI = FIXTURES / "sushi_config.py"
MODEL = "MODEL (name s.a, kind FULL);\nSELECT 1 AS id\n"


def _project(tmp_path: Path, config: str, name: str = "p") -> Path:
    root = tmp_path / name
    (root / "models").mkdir(parents=True)
    (root / "models" / "a.sql").write_text(MODEL)
    (root / "config.py").write_text(textwrap.dedent(config))
    return root


def _sushi(tmp_path: Path) -> Path:
    root = tmp_path / "sushi"
    (root / "models").mkdir(parents=True)
    (root / "models" / "a.sql").write_text(MODEL)
    shutil.copy(SUSHI, root / "config.py")
    return root


def _error(root: Path) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        config_file.read(root)
    return caught.value


def _line_of(root: Path, text: str) -> int:
    lines = (root / "config.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


# --- conversion -------------------------------------------------------------------------


def test_sushi_config_is_the_data_its_yaml_would_be(tmp_path: Path) -> None:
    root = _sushi(tmp_path)
    doc = config_file.read(root)
    assert doc.data["gateways"] == {
        "duckdb": {"connection": {"type": "duckdb"}},
        "duckdb_persistent": {
            "connection": {"type": "duckdb", "database": f"{root.resolve()}/data/duckdb.db"}
        },
    }
    assert doc.data["default_gateway"] == "duckdb"
    assert doc.data["model_defaults"] == {"dialect": "duckdb"}
    assert doc.data["linter"]["enabled"] is False
    assert doc.data["before_all"][0] == "CREATE SCHEMA IF NOT EXISTS raw"
    # Each key at the line config.py writes it on; a nested object's keys at its own call.
    assert doc.line_of(()) == _line_of(root, "config = Config(")
    assert doc.line_of(("default_gateway",)) == _line_of(root, 'default_gateway="duckdb"')
    assert doc.line_of(("model_defaults", "dialect")) == _line_of(
        root, "model_defaults = ModelDefaultsConfig(**defaults)"
    )
    assert doc.line_of(("gateways", "duckdb_persistent", "connection", "database")) == (
        _line_of(root, "DuckDBConnectionConfig(database=")
    )
    # A list given by name: each item at the line the list writes it on.
    assert doc.line_of(("before_all", 1)) == _line_of(root, '"DROP VIEW IF EXISTS')
    config = parse_config(doc)
    assert config.model_defaults.dialect == "duckdb"
    assert config.default_catalog == "memory"  # the default gateway's in-memory DuckDB
    assert any("ignored gateways" in note for note in config.notes)


@pytest.mark.parametrize(
    ("name", "key", "expected"),
    [
        ("test_config", "plan", {"auto_categorize_changes": {"sql": "semi", "python": "off"}}),
        ("test_config_virtual_environment_mode_dev_only", "virtual_environment_mode", "dev_only"),
        (
            "test_config_virtual_environment_mode_dev_only",
            "plan",
            {
                "auto_categorize_changes": {
                    "external": "full",
                    "python": "full",
                    "sql": "full",
                    "seed": "full",
                }
            },
        ),
        ("environment_suffix_catalog_config", "environment_suffix_target", "catalog"),
        (
            "local_catalogs",
            "default_connection",
            {"type": "duckdb", "catalogs": {"in_memory": ":memory:", "other_catalog": ":memory:"}},
        ),
        ("hash_md5_naming_config", "physical_table_naming_convention", "hash_md5"),
        ("map_config", "physical_schema_mapping", {"^sushi$": "company_internal"}),
    ],
)
def test_sushi_configs_by_name(tmp_path: Path, name: str, key: str, expected: object) -> None:
    doc = config_file.read(_sushi(tmp_path), name)
    assert doc.data[key] == expected
    assert doc.data["model_defaults"] == {"dialect": "duckdb"}  # kept through copies


def test_sushi_users_and_notification_targets(tmp_path: Path) -> None:
    doc = config_file.read(_sushi(tmp_path), "required_approvers_config")
    (admin,) = doc.data["users"]
    assert admin["username"] == "admin"
    assert admin["roles"] == ["required_approver"]
    assert admin["notification_targets"][0]["type"] == "slack_api"
    assert admin["notification_targets"][0]["token"] is None  # no environment in the sandbox
    kinds = [t["type"] for t in doc.data["notification_targets"]]
    assert kinds == ["slack_webhook", "smtp"]


def test_a_copy_keeps_the_lines_of_what_it_does_not_change(tmp_path: Path) -> None:
    root = _sushi(tmp_path)
    doc = config_file.read(root, "table_only_naming_config")
    assert doc.data["physical_table_naming_convention"] == "table_only"
    assert doc.line_of(("physical_table_naming_convention",)) == _line_of(
        root, '"physical_table_naming_convention": TableNamingConvention.TABLE_ONLY'
    )
    assert doc.line_of(("default_gateway",)) == _line_of(root, 'default_gateway="duckdb"')


def test_a_project_loads_with_its_config_py(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        """\
        from datetime import date
        from sqlmesh.core.config import (
            Config, DuckDBConnectionConfig, GatewayConfig, ModelDefaultsConfig,
            NameInferenceConfig,
        )

        START = date(2024, 1, 1)
        config = Config(
            model_defaults=ModelDefaultsConfig(dialect="duckdb", start=START, cron="@hourly"),
            variables={"region": "eu", "limits": (1, 2)},
            gateways={
                "local": GatewayConfig(
                    connection=DuckDBConnectionConfig(database="db/Warehouse.db"),
                    variables={"region": "us"},
                ),
            },
            model_naming=NameInferenceConfig(infer_names=False),
            before_all=["CREATE SCHEMA IF NOT EXISTS raw"],
        )
        """,
    )
    project = load_project(root, use_cache=False)
    config = project.config
    assert config.model_defaults.dialect == "duckdb"
    assert config.model_defaults.start == "2024-01-01"
    assert config.model_defaults.cron == "@hourly"
    assert config.variables == {"region": "us", "limits": [1, 2]}  # the gateway's wins
    assert config.default_catalog == "warehouse"
    assert project.before_all == ("CREATE SCHEMA IF NOT EXISTS raw",)
    assert list(project.models) == ["s.a"]


def test_classes_by_their_modules_and_the_github_bot(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        """\
        from sqlmesh.core.config import Config
        from sqlmesh.core.config.connection import SnowflakeConnectionConfig
        from sqlmesh.core.config.gateway import GatewayConfig
        from sqlmesh.integrations.github.cicd.config import GithubCICDBotConfig, MergeMethod

        config = Config(
            gateways={"sf": GatewayConfig(connection=SnowflakeConnectionConfig(account="a"))},
            cicd_bot=GithubCICDBotConfig(merge_method=MergeMethod.SQUASH),
        )
        """,
    )
    data = config_file.read(root).data
    assert data["gateways"] == {"sf": {"connection": {"type": "snowflake", "account": "a"}}}
    assert data["cicd_bot"] == {"type": "github", "merge_method": "squash"}


def test_attached_duckdb_catalogs_and_a_config_from_a_mapping(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        """\
        from sqlmesh.core.config import Config, GatewayConfig, LinterConfig
        from sqlmesh.core.config.connection import DuckDBAttachOptions, DuckDBConnectionConfig

        lake = DuckDBAttachOptions(type="ducklake", path="lake/catalog.db", data_path="lake/data")
        config = Config.parse_obj(
            {
                "gateways": {
                    "main": GatewayConfig(
                        connection=DuckDBConnectionConfig(catalogs={"Lake": lake}),
                    )
                },
                "linter": LinterConfig(enabled=True, rules={"noselectstar", "ambiguousorinvalidcolumn"}),
                "variables": {"n": 1},
            }
        )
        """,
    )
    doc = config_file.read(root)
    catalogs = doc.data["gateways"]["main"]["connection"]["catalogs"]
    assert catalogs == {
        "Lake": {"type": "ducklake", "path": "lake/catalog.db", "data_path": "lake/data"}
    }
    assert doc.data["linter"]["rules"] == [
        "ambiguousorinvalidcolumn",
        "noselectstar",
    ]  # a set, sorted
    config = parse_config(doc)
    assert (config.default_catalog, config.variables) == ("lake", {"n": 1})


def test_an_error_in_a_module_config_py_imports_names_both(tmp_path: Path) -> None:
    root = _project(tmp_path, "from settings import START\n")
    (root / "settings.py").write_text("X = 1\nSTART = 1 / 0\n")
    error = _error(root)
    assert (error.line, error.message) == (
        1,
        "running config.py: ZeroDivisionError: division by zero (in settings.py:2)",
    )
    error = _error(_project(tmp_path, "from sqlmesh.core.config import Config\n", "q"))
    assert error.message == "running config.py: config.py defines no config named 'config'"


def test_an_invalid_value_is_named_at_its_line(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        """\
        from sqlmesh.core.config import Config, ModelDefaultsConfig

        defaults = ModelDefaultsConfig(
            dialect="nosuchsql",
        )
        config = Config(model_defaults=defaults)
        """,
    )
    with pytest.raises(ConfigError) as caught:
        load_project(root, use_cache=False)
    assert caught.value.path == str(root / "config.py")
    assert caught.value.line == 4
    assert "unknown SQL dialect 'nosuchsql'" in caught.value.message


def test_an_unknown_section_is_named_at_its_line(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        """\
        from sqlmesh.core.config import Config

        config = Config(
            variables={},
            modle_defaults={},
        )
        """,
    )
    with pytest.raises(ConfigError) as caught:
        load_config(root, python=config_file.read)
    assert (caught.value.line, caught.value.message) == (5, "unknown section 'modle_defaults'")
    assert "model_defaults" in (caught.value.hint or "")


def test_a_before_all_statement_is_checked_at_config_py(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        """\
        from sqlmesh.core.config import Config

        config = Config(
            before_all=["ADD JAR /tmp/x.jar"],
        )
        """,
    )
    with pytest.raises(SluiceError) as caught:
        load_project(root, use_cache=False)
    assert f"{root / 'config.py'}:4: before_all statement 1" in str(caught.value)
    # A DROP loads, named at its line: no job runs it (tests/security/test_model_statements.py).
    (root / "config.py").write_text(
        (root / "config.py").read_text().replace("ADD JAR /tmp/x.jar", "DROP TABLE s.a")
    )
    project = load_project(root, use_cache=False)
    assert any(
        n.startswith(f"{root / 'config.py'}:4: before_all statement 1") for n in project.notes
    )


# --- what config.py may not use -----------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "line", "words"),
    [
        (
            "from sqlmesh.core.config import Config, NoSuchConfig\nconfig = Config()\n",
            1,
            "Sluice's stand-in for sqlmesh.core.config has no NoSuchConfig",
        ),
        (
            "from sqlmesh.core.config import Config, ModelDefaultsConfig\n"
            "d = ModelDefaultsConfig(dialect='duckdb')\n"
            "config = Config(model_defaults=d, variables={'start': d.start})\n",
            3,
            "ModelDefaultsConfig.start was not given",
        ),
        (
            "from sqlmesh.core.config import Config\nconfig = Config(\n"
            "    variables={'f': lambda: 1},\n)\n",
            3,
            "variables.f is a builtins.function, which Sluice cannot read as configuration",
        ),
        (
            "from sqlmesh.core.config import Config\nconfig = Config('x')\n",
            2,
            "Config() takes keyword arguments only",
        ),
        ("config = {}\n", 1, "'config' in config.py is a dict, not a Config"),
        (
            "from sqlmesh.core.config import Config\nprod = Config()\n",
            1,
            "config.py defines no config named 'config'; its Config objects: prod",
        ),
        (
            "from sqlmesh.dbt.loader import sqlmesh_config\nconfig = sqlmesh_config('.')\n",
            1,
            "Sluice's stand-in for SQLMesh has no module sqlmesh.dbt",
        ),
        (
            "from sqlmesh.core.config.connection import NoSuchConnectionConfig\n",
            1,
            "Sluice's stand-in for sqlmesh.core.config has no NoSuchConnectionConfig",
        ),
        ("import os\nname = os.getenv('ENV') or input('env? ')\n", 2, "EOFError"),
        ("x = 1\nraise RuntimeError('boom')\n", 2, "RuntimeError: boom"),
        ("import sys\nsys.exit(3)\n", 2, "SystemExit: 3"),
    ],
)
def test_what_config_py_may_not_do_is_named_at_its_line(
    tmp_path: Path, source: str, line: int, words: str
) -> None:
    error = _error(_project(tmp_path, source))
    assert error.line == line
    assert words in error.message
    assert error.message.startswith("running config.py: ")


# --- hostile config.py ----------------------------------------------------------------


def test_it_cannot_read_files_outside_the_project(tmp_path: Path) -> None:
    secret = tmp_path / "service-secret.txt"
    secret.write_text("TOKEN-4f1d")
    root = _project(
        tmp_path,
        f"""\
        from sqlmesh.core.config import Config
        text = open({str(secret)!r}).read()
        config = Config(variables={{"stolen": text}})
        """,
    )
    error = _error(root)
    assert error.line == 2
    assert "TOKEN-4f1d" not in str(error)
    assert "PermissionError" in error.message or "FileNotFoundError" in error.message


def test_it_sees_no_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_TEST_SECRET", "hunter2")
    root = _project(
        tmp_path,
        """\
        import os
        from sqlmesh.core.config import Config
        config = Config(variables={"seen": os.environ.get("SLUICE_TEST_SECRET", "nothing")})
        """,
    )
    assert config_file.read(root).data["variables"] == {"seen": "nothing"}


def test_it_opens_no_socket(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        """\
        from sqlmesh.core.config import Config
        import socket
        socket.create_connection(("127.0.0.1", 9), timeout=1)
        config = Config()
        """,
    )
    error = _error(root)
    assert error.line == 3
    assert "PermissionError: project Python may not do socket." in error.message


def test_its_memory_is_bounded(tmp_path: Path) -> None:
    error = _error(_project(tmp_path, "x = 1\nbig = 'y' * (3 << 30)\n"))
    assert (error.line, error.message) == (2, "running config.py: MemoryError:")


def test_an_endless_loop_is_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_file, "SECONDS", 1.0)
    root = _project(tmp_path, "while True:\n    pass\n")
    error = _error(root)
    assert error.line == 1
    assert "it took more than 1 s" in error.message


def test_printing_is_kept_out_of_the_answer(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        """\
        from sqlmesh.core.config import Config
        for _ in range(20_000):
            print("x" * 1_000)
        config = Config(variables={"ok": True})
        """,
    )
    assert config_file.read(root).data == {"variables": {"ok": True}}


def test_writing_past_print_is_bounded(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        """\
        import os
        os.write(1, b"x" * (6 << 20))
        """,
    )
    error = _error(root)
    assert "standard output" in error.message
    assert len(str(error)) < 2_000


def test_a_huge_error_message_is_cut(tmp_path: Path) -> None:
    error = _error(_project(tmp_path, "raise RuntimeError('x' * 1_000_000)\n"))
    assert error.line == 1
    assert error.message.startswith("running config.py: RuntimeError: xxx")
    assert error.message.endswith("…")
    assert len(error.message) <= len("running config.py: ") + config_file.MESSAGE_CHARS


def test_an_answer_of_another_shape_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.py"
    for value in ({"data": [], "lines": []}, {"data": {}}, "config", None):
        with pytest.raises(ConfigError, match="an answer that is not a config"):
            config_file.located(path, value)


# --- trust ------------------------------------------------------------------------------


def test_config_py_never_sets_sluices_own_settings(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        """\
        from sqlmesh.core.config import Config
        config = Config(
            variables={},
            sluice={"gate": {"required_approvers": {"count": 0}}, "allowed_paths": ["/*"]},
        )
        """,
    )
    error = _error(root)
    assert (error.line, error.message) == (
        4,
        "config.py sets 'sluice', which Sluice never takes from a project's code",
    )
    # Nor when the sandboxed process (the project's code) forges its answer.
    forged = {"data": {"sluice": {"allowed_paths": ["/*"]}}, "lines": []}
    with pytest.raises(ConfigError, match="never takes from a project's code"):
        config_file.located(root / "config.py", forged)


def test_a_pull_requests_project_keeps_the_trusted_settings(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        """\
        from sqlmesh.core.config import Config, ModelDefaultsConfig
        config = Config(model_defaults=ModelDefaultsConfig(dialect="spark"))
        """,
    )
    gate = GateSettings.model_validate({"owners_must_approve": "breaking"})
    trusted = SluiceSettings(allowed_paths=("/data/*",), keep_prod_plans=5, gate=gate)
    project = load_project(root, use_cache=False, sluice=trusted)
    assert project.config.sluice == trusted
    assert project.config.model_defaults.dialect == "spark"  # the PR's own model defaults


def test_config_py_is_not_run_where_the_projects_python_is_refused(tmp_path: Path) -> None:
    root = _project(tmp_path, "raise RuntimeError('config.py ran')\n")
    refusal = Refusal("this service runs no project Python (SLUICE_PROJECT_PYTHON=off)")
    with pytest.raises(ConfigError) as caught:
        load_project(root, use_cache=False, python=refusal)
    assert caught.value.path == str(root / "config.py")
    assert caught.value.hint == refusal.reason
    assert "config.py ran" not in str(caught.value)
    # Under SLUICE_PROJECT_PYTHON=prod, config.py is among the Python a pull request's is
    # compared with prod's (bot/flow/trust.python_refusal).
    assert "config.py" in pycode_files.sources(root)


def test_config_py_and_config_yaml_together_are_refused(tmp_path: Path) -> None:
    root = _project(tmp_path, "config = None\n")
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n")
    with pytest.raises(ConfigError, match=r"the project has both config\.yaml and config\.py"):
        load_project(root, use_cache=False)


def test_without_the_sandboxed_reader_config_py_is_an_error(tmp_path: Path) -> None:
    root = _project(tmp_path, "config = None\n")
    with pytest.raises(ConfigError, match="which is the project's Python"):
        load_config(root)


def test_the_cli_reads_the_config_it_names(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from sluice.core.cli import cli
    from sluice.core.model.pycode.config_file import NAME

    root = _project(
        tmp_path,
        """\
        from sqlmesh.core.config import Config, ModelDefaultsConfig
        config = Config(model_defaults=ModelDefaultsConfig(dialect="nosuchsql"))
        spark = Config(model_defaults=ModelDefaultsConfig(dialect="spark"))
        """,
    )
    state = f"sqlite:///{tmp_path / 'state.db'}"
    plan = ["plan", "--project", str(root), "--state", state]
    default = CliRunner().invoke(cli, plan)
    token = NAME.set(NAME.get())  # the option sets it for the rest of this context
    try:
        named = CliRunner().invoke(cli, ["--config", "spark", *plan])
    finally:
        NAME.reset(token)
    assert default.exit_code == 1
    assert "unknown SQL dialect 'nosuchsql'" in default.output
    assert named.exit_code == 0, named.output


_OWN_ANSWER = """\
import os
deep = "[" * 900 + "]" * 900
os.write(1, ('{"id": 1, "value": {"data": {"variables": {"x": ' + deep + '}, '
             '"model_defaults": {"dialect": "spark"}}, '
             '"lines": [[["model_defaults"], 424242]]}}\\n').encode())
os._exit(0)
"""


def test_an_answer_config_py_writes_itself_is_held_to_config_yaml_s_bounds(
    tmp_path: Path,
) -> None:
    # Red team, round 3: config.py runs in the process that answers, so it can write an
    # answer of its own past the child's checks (900 levels deep, made-up lines).
    root = _project(tmp_path, _OWN_ANSWER)
    with pytest.raises(ConfigError) as caught:
        config_file.read(root)
    # 900 deep: past what the service reads of any value (macros.VALUE_DEPTH, 128), a
    # breach of the protocol, said in config.py's words ...
    assert "wrote to the process's standard output past Python's print" in str(caught.value)
    # ... 110 deep: read, and held to config.yaml's own bound.
    with pytest.raises(ConfigError) as caught:
        config_file.read(_project(tmp_path, _OWN_ANSWER.replace("900", "110"), name="d"))
    assert "nests values more than 100 deep" in str(caught.value)
    shallow = _OWN_ANSWER.replace("900", "3")
    doc = config_file.read(_project(tmp_path, shallow, name="q"))
    assert doc.line_of(("model_defaults",)) is None  # config.py has no line 424242
