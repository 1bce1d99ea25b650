import shutil
from pathlib import Path

import pytest

from sluice.core.errors import ConfigError, GraphError, ModelError, ProjectErrors, SluiceError
from sluice.core.model.definition import KindName
from sluice.core.model.loader import CACHE_FILE, load_project
from tests.core.helpers import BASIC, load, write_project

REPO = Path(__file__).resolve().parents[3]
SQLMESH_INIT = REPO / "tests" / "fixtures" / "sqlmesh_init_duckdb"
EXAMPLE = REPO / "examples" / "jaffle_shop"


def test_the_sqlmesh_init_project_loads_unmodified() -> None:
    project = load_project(SQLMESH_INIT, use_cache=False)
    assert list(project.models) == [
        "sqlmesh_example.seed_model",
        "sqlmesh_example.incremental_model",
        "sqlmesh_example.full_model",
    ]
    seed = project.models["sqlmesh_example.seed_model"]
    assert seed.kind.name == KindName.SEED and seed.kind.seed_path == "seeds/seed_data.csv"
    assert seed.columns == (("id", "INT"), ("item_id", "INT"), ("event_date", "DATE"))
    full = project.models["sqlmesh_example.full_model"]
    assert full.dialect == "duckdb" and full.grain == ("item_id",)
    assert [a.name for a in full.audits] == ["assert_positive_order_ids"]
    assert "assert_positive_order_ids" in project.audits
    assert [t.name for t in project.tests] == ["test_example_full_model"]
    assert any("gateways" in note and "linter" in note for note in project.notes)


def test_the_example_project_loads() -> None:
    project = load_project(EXAMPLE, use_cache=False)
    kinds = {m.kind.name for m in project.models.values()}
    assert kinds >= {
        KindName.SEED,
        KindName.VIEW,
        KindName.FULL,
        KindName.INCREMENTAL_BY_TIME_RANGE,
    }
    assert project.models["jaffle.orders"].grain == ("order_id",)
    assert project.tests and project.audits
    assert project.models["jaffle.daily_revenue"].dialect == "duckdb"


def test_external_models_and_seed_inference(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            "external_models.yaml": "- name: raw.events\n  columns:\n    id: int\n    ts: timestamp\n",
            "seeds/s.csv": "id,price,day,label\r\n1,2.5,2024-01-01,a\r\n2,3,2024-01-02,\r\n",
            "models/s.sql": "MODEL (name s.s, kind SEED (path '../seeds/s.csv'));",
            "models/e.sql": "MODEL (name s.e, kind FULL);\nSELECT id FROM raw.events",
        },
    )
    assert project.models["raw.events"].kind.name == KindName.EXTERNAL
    assert project.models["s.s"].columns == (
        ("id", "BIGINT"),
        ("price", "DOUBLE"),
        ("day", "DATE"),
        ("label", "STRING"),
    )
    assert project.models["s.s"].seed_hash


def error_of(tmp_path: Path, files: dict[str, str]) -> SluiceError:
    with pytest.raises(SluiceError) as info:
        load(tmp_path, {**BASIC, **files})
    return info.value


def test_unknown_table_names_file_and_line(tmp_path: Path) -> None:
    error = error_of(tmp_path, {"models/d.sql": "MODEL (name s.d);\nSELECT *\nFROM s.nope"})
    assert isinstance(error, GraphError)
    assert error.path and error.path.endswith("models/d.sql") and error.line == 3
    assert "s.nope" in str(error) and "external_models.yaml" in str(error)


def test_an_undeclared_source_is_read_as_an_external_table_and_named(tmp_path: Path) -> None:
    """SQLMesh reads a table that is neither a model nor declared as an external table
    (issue 41, item 4): so does Sluice, with a note naming it and its file:line."""
    files = {**BASIC, "models/d.sql": "MODEL (name s.d);\nSELECT *\nFROM raw.events"}
    project = load(tmp_path / "ok", files)
    events = project.models["raw.events"]
    assert events.kind.name == KindName.EXTERNAL and events.columns == ()
    assert "s.d" in project.models and "raw.events" in project.models["s.d"].depends_on
    [note] = [n for n in project.notes if "raw.events" in n]
    assert "models/d.sql:3: s.d reads raw.events" in note
    assert "sluice.require_declared_sources" in note
    # Trusted settings may require declarations: then it is the error it was.
    config = "model_defaults:\n  dialect: spark\nsluice:\n  require_declared_sources: true\n"
    error = error_of(
        tmp_path / "strict", {"config.yaml": config, "models/d.sql": files["models/d.sql"]}
    )
    assert isinstance(error, GraphError) and "raw.events" in str(error)


@pytest.mark.parametrize(
    "table",
    [
        "s.nope",  # the schema of the project's own models: a misspelt model, most likely
        "sluice__s.s__a__0123456789ab",  # a physical table of Sluice's
        "s__pr_7.a",  # an environment's view
        "parquet.orders",  # files at a relative path
    ],
)
def test_an_unknown_table_where_sluice_manages_names_stays_an_error(
    tmp_path: Path, table: str
) -> None:
    error = error_of(tmp_path, {"models/d.sql": f"MODEL (name s.d);\nSELECT *\nFROM {table}"})
    assert isinstance(error, GraphError) and table in str(error)


def test_cycle_lists_the_models(tmp_path: Path) -> None:
    error = error_of(
        tmp_path,
        {
            "models/x.sql": "MODEL (name s.x);\nSELECT * FROM s.z",
            "models/y.sql": "MODEL (name s.y);\nSELECT * FROM s.x",
            "models/z.sql": "MODEL (name s.z);\nSELECT * FROM s.y",
        },
    )
    assert isinstance(error, GraphError)
    assert "s.x -> s.y -> s.z -> s.x" in str(error)


def test_duplicate_model_name_names_both_files(tmp_path: Path) -> None:
    error = error_of(tmp_path, {"models/a2.sql": "MODEL (name s.a, kind FULL);\nSELECT 2 AS id"})
    assert "defined twice" in str(error) and "a.sql" in str(error) and "a2.sql" in str(error)


def test_missing_seed_file(tmp_path: Path) -> None:
    error = error_of(
        tmp_path, {"models/s.sql": "MODEL (name s.s, kind SEED (path '../seeds/none.csv'));"}
    )
    assert isinstance(error, ModelError) and "not found" in str(error) and error.line == 1


def test_seed_outside_the_project_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret.csv").write_text("a\n1\n")
    error = error_of(
        tmp_path / "p", {"models/s.sql": "MODEL (name s.s, kind SEED (path '../../secret.csv'));"}
    )
    assert "outside the project" in str(error)


def test_seed_columns_must_match_the_header(tmp_path: Path) -> None:
    error = error_of(
        tmp_path,
        {
            "seeds/s.csv": "id,name\n1,a\n",
            "models/s.sql": "MODEL (name s.s, kind SEED (path '../seeds/s.csv'), columns (id INT, nme STRING));",
        },
    )
    assert "nme" in str(error) and "id, name" in str(error)


@pytest.mark.parametrize(
    ("config", "line", "fragment"),
    [
        ("model_defaults:\n  dialect: spark\n   start: x\n", 3, "invalid YAML"),
        (
            "model_defaults:\n  dialect: spark\nmodel_defualts: {}\n",
            3,
            "did you mean 'model_defaults'",
        ),
        (
            "model_defaults:\n  dialect: spark\n  cronn: '@daily'\n",
            3,
            "unknown setting 'model_defaults.cronn'",
        ),
        ("model_defaults:\n  start: someday\n", 2, "not a date"),
        ("sluice:\n  spark:\n    deploy_mode: sideways\n", 3, "deploy_mode"),
        ("model_defaults: {}\nmodel_defaults: {}\n", 2, "duplicate key"),
    ],
)
def test_bad_config(tmp_path: Path, config: str, line: int, fragment: str) -> None:
    error = error_of(tmp_path, {"config.yaml": config})
    assert isinstance(error, ConfigError)
    assert error.path and error.path.endswith("config.yaml")
    assert error.line == line, str(error)
    assert fragment in str(error)


def test_bad_model_dialect_in_defaults(tmp_path: Path) -> None:
    error = error_of(tmp_path, {"config.yaml": "model_defaults:\n  dialect: nosuch\n"})
    assert "nosuch" in str(error)


def test_every_broken_file_is_reported_at_once(tmp_path: Path) -> None:
    error = error_of(
        tmp_path,
        {
            "models/bad1.sql": "MODEL (name s.bad1, kind NOPE);\nSELECT 1",
            "models/bad2.sql": "MODEL (name s.bad2, colour red);\nSELECT 1",
        },
    )
    assert isinstance(error, ProjectErrors)
    text = str(error)
    assert "bad1.sql:1" in text and "bad2.sql:1" in text


def test_audits_and_unit_tests_are_validated(tmp_path: Path) -> None:
    bad_audit = error_of(
        tmp_path / "1", {"models/d.sql": "MODEL (name s.d, audits (no_such_audit));\nSELECT 1 AS x"}
    )
    assert "unknown audit 'no_such_audit'" in str(bad_audit)
    missing_arg = error_of(
        tmp_path / "2", {"models/d.sql": "MODEL (name s.d, audits (not_null));\nSELECT 1 AS x"}
    )
    assert "needs columns" in str(missing_arg)
    bad_file = error_of(tmp_path / "3", {"audits/x.sql": "AUDIT (name x);\nSELECT FROM WHERE"})
    assert isinstance(bad_file, ModelError) and bad_file.line == 2
    needs_param = error_of(
        tmp_path / "4",
        {
            "audits/x.sql": "AUDIT (name positive);\nSELECT * FROM @this_model WHERE @column <= 0",
            "models/d.sql": "MODEL (name s.d, audits (positive));\nSELECT 1 AS x",
        },
    )
    assert "needs column" in str(needs_param)
    bad_test = error_of(
        tmp_path / "5",
        {
            "tests/t.yaml": "t1:\n  model: s.b\n  inputs:\n    s.c:\n      rows: []\n  outputs:\n    query: []\n"
        },
    )
    assert "input 's.c' is not read by s.b" in str(bad_test) and bad_test.line == 4
    # A test of a model that is gone is skipped with a note (SQLMesh loads the project).
    project = load(
        tmp_path / "6", {**BASIC, "tests/t.yaml": "t1:\n  model: s.zz\n  outputs: {query: []}\n"}
    )
    assert project.tests == ()
    assert any("model 's.zz' does not exist; the test is skipped" in n for n in project.notes)


def test_a_project_audit_with_a_parameter_is_accepted(tmp_path: Path) -> None:
    project = load(
        tmp_path,
        {
            **BASIC,
            "audits/x.sql": "AUDIT (name positive, defaults (threshold = 0));\nSELECT * FROM @this_model WHERE @column <= @threshold",
            "models/d.sql": "MODEL (name s.d, audits (positive(column := x)));\nSELECT 1 AS x",
        },
    )
    assert project.audits["positive"].parameters == {"column", "threshold"}


def test_cache_reuses_unchanged_files_and_notices_edits(tmp_path: Path) -> None:
    root = write_project(tmp_path, BASIC)
    first = load_project(root)
    assert (root / CACHE_FILE).exists()
    again = load_project(root)
    assert again.models == first.models
    (root / "models" / "b.sql").write_text("MODEL (name s.b, kind FULL);\nSELECT id FROM s.a")
    edited = load_project(root)
    assert edited.models["s.b"].query_sql == "SELECT id FROM s.a"
    assert edited.models["s.a"] == first.models["s.a"]


def test_a_load_reads_each_model_file_once_cold_and_warm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_project(
        tmp_path,
        {
            **BASIC,
            # Jinja, and inline audits after the query: both once read the file again.
            "models/j.sql": "MODEL (name s.j, kind FULL);\nJINJA_QUERY_BEGIN;\n"
            "SELECT {{ 1 + 1 }} AS id\nJINJA_END;",
            "models/c.sql": "MODEL (name s.c, kind FULL, audits (positive));\n"
            "SELECT id FROM s.a;\nAUDIT (name positive);\nSELECT * FROM @this_model "
            "WHERE id < 0",
        },
    )
    reads: dict[str, int] = {}
    open_file = Path.open

    def opening(path: Path, *args: object, **kwargs: object) -> object:
        # Every read of a file opens it: the loader's bounded reads and read_text()'s.
        if path.suffix == ".sql":
            reads[path.name] = reads.get(path.name, 0) + 1
        return open_file(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "open", opening)
    for cache in ("cold", "warm"):
        reads.clear()
        project = load_project(root)
        assert {"s.a", "s.b", "s.c", "s.j"} <= set(project.models), cache
        assert reads and set(reads.values()) == {1}, (cache, reads)


def test_model_files_load_in_the_order_of_their_folders(tmp_path: Path) -> None:
    # As sorted paths compare (folder by folder), not as their text does ('-' < '/'): the
    # file read second is the one a duplicate model is reported in.
    root = write_project(
        tmp_path,
        {
            f"models/{folder}/x.sql": "MODEL (name s.same, kind VIEW);\nSELECT 1 AS id"
            for folder in ("a-b", "a")
        },
    )
    with pytest.raises(ModelError) as caught:
        load_project(root, use_cache=False)
    assert sorted(root.glob("models/*/x.sql"))[1] == root / "models" / "a-b" / "x.sql"
    assert caught.value.path == str(root / "models" / "a-b" / "x.sql")
    assert f"also in {root / 'models' / 'a' / 'x.sql'}:1" in caught.value.message


def test_no_models_folder(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no models/ folder"):
        load_project(tmp_path)


def test_fixture_copy_is_pristine(tmp_path: Path) -> None:
    # Loading writes only the cache, never into models/ or seeds/.
    copy = tmp_path / "p"
    shutil.copytree(SQLMESH_INIT, copy)
    before = sorted(
        p.relative_to(copy).as_posix() for p in copy.rglob("*") if ".sluice" not in p.parts
    )
    load_project(copy)
    after = sorted(
        p.relative_to(copy).as_posix() for p in copy.rglob("*") if ".sluice" not in p.parts
    )
    assert before == after


def test_gate_and_deploy_sections_load_even_with_a_bare_on_key(tmp_path: Path) -> None:
    # YAML 1.1 reads `on:` as the boolean true; the deploy settings give it its meaning.
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "a.sql").write_text("MODEL (name s.a, kind FULL);\nSELECT 1 AS x")
    (tmp_path / "config.yaml").write_text(
        "sluice:\n  gate:\n    required_approvers: {users: [bob]}\n"
        "  deploy:\n    on: tag\n    tag_pattern: 'v*'\n"
    )
    project = load_project(tmp_path, use_cache=False)
    deploy = project.config.sluice.deploy
    assert (deploy.on, deploy.tag_pattern) == ("tag", "v*")
    assert project.config.sluice.gate.required_approvers.users == ("bob",)
    # A bad value there names its line, `on:` included.
    (tmp_path / "config.yaml").write_text("sluice:\n  deploy:\n    on: push\n")
    with pytest.raises(ConfigError) as info:
        load_project(tmp_path, use_cache=False)
    assert info.value.line == 3 and "'sluice.deploy.on'" in str(info.value)


def test_files_nested_too_deeply_are_errors_not_crashes(tmp_path: Path) -> None:
    # Found by tests/fuzz: sqlglot recursed until RecursionError, which no caller expected.
    deep = "(" * 3_000 + "1" + ")" * 3_000
    audit = error_of(
        tmp_path / "1", {"audits/x.sql": f"AUDIT (name x);\nSELECT * FROM @this_model WHERE {deep}"}
    )
    model = error_of(tmp_path / "2", {"models/d.sql": f"MODEL (name s.d);\nSELECT {deep} AS x"})
    for error, file in ((audit, "audits/x.sql"), (model, "models/d.sql")):
        assert isinstance(error, ModelError) and "too deeply" in str(error)
        assert error.path is not None and error.path.endswith(file)
