"""SQLMesh's Jinja (issue 20 item 2): JINJA_QUERY_BEGIN / JINJA_STATEMENT_BEGIN blocks,
``{% macro %}`` files under macros/, ``var()``, ``env_var()`` (config.yaml and models),
and the sandbox around all of it: a template from a pull request reaches no Python
internals, no environment variable it is not offered, and no more memory or CPU than
the caps allow."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from sluice.core.errors import ConfigError, ModelError, ProjectErrors, SluiceError
from sluice.core.model import jinja_sandbox
from sluice.core.model.definition import Project
from sluice.core.model.loader import load_project
from sluice.core.plan.build import PlanRequest, build_plan
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.fingerprint import fingerprint_models
from sluice.core.timeutil import to_ms

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "sqlmesh_projects"

CONFIG = "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\nvariables:\n  region: eu\n"
RAW = "MODEL (name raw.orders, kind FULL);\nSELECT 1 AS id, 'card' AS method, 2.0 AS amount\n"


def project(tmp_path: Path, files: dict[str, str], **kwargs: object) -> Project:
    """A project of ``files`` (path -> text) beside raw.orders and the config above."""
    all_files = {"config.yaml": CONFIG, "models/raw.sql": RAW, **files}
    for name, text in all_files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return load_project(tmp_path, use_cache=False, **kwargs)  # type: ignore[arg-type]


def refused(tmp_path: Path, files: dict[str, str], **kwargs: object) -> SluiceError:
    with pytest.raises(SluiceError) as caught:
        project(tmp_path, files, **kwargs)
    error = caught.value
    assert not isinstance(error, ProjectErrors), str(error)
    return error


def model(query: str, name: str = "mart.m", header: str = "kind FULL") -> str:
    return f"MODEL (name {name}, {header});\n\nJINJA_QUERY_BEGIN;\n{query}\nJINJA_END;\n"


def test_a_query_with_a_loop_and_an_if(tmp_path: Path) -> None:
    query = """\
        {% set methods = ['card', 'cash'] %}
        SELECT
          {% for m in methods %}
          SUM(CASE WHEN method = '{{ m }}' THEN amount ELSE 0 END) AS {{ m }}_amount,
          {% endfor %}
          {% if false %}secret_column,{% endif %}
          COUNT(*) AS n
        FROM raw.orders"""
    loaded = project(tmp_path, {"models/m.sql": model(textwrap.dedent(query))})
    assert loaded.models["mart.m"].query_sql == (
        "SELECT SUM(CASE WHEN method = 'card' THEN amount ELSE 0 END) AS card_amount, "
        "SUM(CASE WHEN method = 'cash' THEN amount ELSE 0 END) AS cash_amount, "
        "COUNT(*) AS n FROM raw.orders"
    )
    assert loaded.models["mart.m"].depends_on == ("raw.orders",)


def test_a_trailing_comma_left_by_a_loop_is_dropped(tmp_path: Path) -> None:
    # SQLMesh's documentation: the comma after the last column of a loop is removed.
    query = "SELECT\n{% for c in ['id', 'amount'] %}  {{ c }},\n{% endfor %}FROM raw.orders"
    loaded = project(tmp_path, {"models/m.sql": model(query)})
    assert loaded.models["mart.m"].query_sql == "SELECT id, amount FROM raw.orders"


def test_a_macro_from_the_macros_folder(tmp_path: Path) -> None:
    macros = """\
        {% macro alias(expression, alias) %}{{ expression }} AS {{ alias }}{% endmacro %}
        {% macro doubled(column) %}{{ alias(column ~ ' * 2', column ~ '_x2') }}{% endmacro %}
        """
    loaded = project(
        tmp_path,
        {
            "macros/util.sql": macros,
            "models/m.sql": model(
                "SELECT {{ doubled('amount') }}, {{ alias(\"'x'\", 'k') }}\nFROM raw.orders"
            ),
        },
    )
    assert (
        loaded.models["mart.m"].query_sql
        == "SELECT amount * 2 AS amount_x2, 'x' AS k FROM raw.orders"
    )


def test_do_and_loop_controls_as_sqlmesh_enables_them(tmp_path: Path) -> None:
    # SQLMesh's Jinja environment enables jinja2.ext.do and jinja2.ext.loopcontrols;
    # a macro builds a list with {% do %} (as a real project's safe_hash does).
    macros = """\
        {% macro safe_hash(columns) %}
            {% set coalesced = [] %}
            {% for column in columns %}
                {% do coalesced.append("COALESCE(LOWER(" ~ column ~ "), '')") %}
            {% endfor %}
            MD5({{ coalesced | join(' || ') }})
        {% endmacro %}
        """
    query = """\
        {% set seen = {} %}
        {% do seen.update(first='method') %}
        SELECT {{ safe_hash(['method', 'CAST(id AS STRING)']) }} AS h,
          {% for c in ['id', 'skipped', 'amount', 'never'] -%}
          {%- if c == 'skipped' %}{% continue %}{% endif -%}
          {%- if c == 'never' %}{% break %}{% endif -%}
          {{ c }},
          {% endfor %}
          {{ seen['first'] }}
        FROM raw.orders"""
    loaded = project(
        tmp_path, {"macros/hash.sql": macros, "models/m.sql": model(textwrap.dedent(query))}
    )
    assert loaded.models["mart.m"].query_sql == (
        "SELECT MD5(COALESCE(LOWER(method), '') || COALESCE(LOWER(CAST(id AS STRING)), '')) "
        "AS h, id, amount, method FROM raw.orders"
    )


def test_sqlmesh_base64_filters(tmp_path: Path) -> None:
    query = "SELECT '{{ 'eu' | b64encode }}' AS e, '{{ 'ZXU=' | b64decode }}' AS d FROM raw.orders"
    loaded = project(tmp_path, {"models/m.sql": model(query)})
    assert loaded.models["mart.m"].query_sql == "SELECT 'ZXU=' AS e, 'eu' AS d FROM raw.orders"


def test_a_template_changes_a_copy_of_a_variable_never_the_project_s(tmp_path: Path) -> None:
    # A template may change the lists it builds, and what var() hands it is its own copy:
    # one model's {% do %} does not change what the next model (or macro) reads.
    config = CONFIG + "  columns: [id]\n"
    grow = "{% set c = var('columns') %}{% do c.append('amount') %}SELECT {{ c | join(', ') }}"
    files = {
        "config.yaml": config,
        "models/a.sql": model(grow + " FROM raw.orders", name="mart.a"),
        "models/b.sql": model(grow + " FROM raw.orders", name="mart.b"),
        "models/c.sql": model("SELECT {{ var('columns') | join(', ') }} FROM raw.orders"),
    }
    loaded = project(tmp_path, files)
    for name in ("mart.a", "mart.b"):
        assert loaded.models[name].query_sql == "SELECT id, amount FROM raw.orders"
    assert loaded.models["mart.m"].query_sql == "SELECT id FROM raw.orders"
    assert loaded.config.variables["columns"] == ["id"]


def test_var_with_and_without_default(tmp_path: Path) -> None:
    query = "SELECT '{{ var('region') }}' AS r, {{ var('missing', 7) }} AS d, '{{ var('REGION') }}' AS u"
    loaded = project(tmp_path, {"models/m.sql": model(query + "\nFROM raw.orders")})
    assert (
        loaded.models["mart.m"].query_sql == "SELECT 'eu' AS r, 7 AS d, 'eu' AS u FROM raw.orders"
    )


def test_a_missing_var_names_the_file_and_line(tmp_path: Path) -> None:
    text = model("SELECT id,\n  {{ var('nowhere') }} AS x\nFROM raw.orders")
    error = refused(tmp_path, {"models/m.sql": text})
    assert isinstance(error, ModelError)
    assert error.path is not None and error.path.endswith("models/m.sql")
    assert error.line == 5  # MODEL, blank, JINJA_QUERY_BEGIN, SELECT id, the var line
    assert "variable 'nowhere' is not defined" in error.message
    assert error.hint is not None and "var('nowhere', value)" in error.hint


def test_a_syntax_error_names_the_line_and_lines_after_a_block_keep_their_number(
    tmp_path: Path,
) -> None:
    error = refused(tmp_path, {"models/m.sql": model("SELECT 1 AS a\n{% for x in %}\n")})
    assert error.line == 5 and "Jinja syntax error" in error.message
    # Rendered with fewer lines than it was written: the audit after it keeps its line.
    text = model("{% set a = 1 %}\n{% set b = 2 %}\nSELECT {{ a + b }} AS c FROM raw.orders")
    text += "\nSELECT nope(\n"
    error = refused(tmp_path / "two", {"models/m.sql": text})
    assert error.line is not None and error.line >= 8


def test_an_error_in_a_macro_names_the_macro_file(tmp_path: Path) -> None:
    files = {
        "macros/bad.sql": "{% macro broken() %}\n{{ 1 / 0 }}\n{% endmacro %}\n",
        "models/m.sql": model("SELECT {{ broken() }} AS x FROM raw.orders"),
    }
    error = refused(tmp_path, files)
    assert error.path is not None and error.path.endswith("macros/bad.sql")
    assert error.line == 2


def test_an_unclosed_block_is_refused(tmp_path: Path) -> None:
    text = "MODEL (name mart.m, kind FULL);\nJINJA_QUERY_BEGIN;\nSELECT 1 AS a\n"
    error = refused(tmp_path, {"models/m.sql": text})
    assert error.line == 2 and "has no JINJA_END" in error.message


def test_statement_blocks(tmp_path: Path) -> None:
    # Pre- and post-statement blocks that render to nothing load (a comment, a set).
    text = (
        "MODEL (name mart.m, kind FULL);\n"
        "JINJA_STATEMENT_BEGIN;\n{# nothing to run before #}{% set unused = 1 %}\nJINJA_END;\n"
        "JINJA_QUERY_BEGIN;\nSELECT {{ 40 + 2 }} AS answer FROM raw.orders;\nJINJA_END;\n"
        "JINJA_STATEMENT_BEGIN;\n{% if false %}CACHE TABLE x AS SELECT 1{% endif %}\nJINJA_END;\n"
    )
    loaded = project(tmp_path, {"models/m.sql": text})
    assert loaded.models["mart.m"].query_sql == "SELECT 42 AS answer FROM raw.orders"
    # One that renders to SQL is a post-statement, checked as the same statement written
    # without Jinja (tests/security/test_model_statements.py), never dropped.
    statement = "JINJA_STATEMENT_BEGIN;\nCREATE SCHEMA IF NOT EXISTS {{ 'raw' }};\nJINJA_END;\n"
    post = project(tmp_path / "post", {"models/m.sql": text + statement})
    assert post.models["mart.m"].post_statements == ("CREATE SCHEMA IF NOT EXISTS raw",)
    statement = "JINJA_STATEMENT_BEGIN;\nCACHE TABLE {{ 'x' }} AS SELECT 1;\nJINJA_END;\n"
    error = refused(tmp_path / "pre", {"models/m.sql": text + statement})
    assert "post-statement 1" in str(error)
    assert error.path is not None and error.path.endswith("models/m.sql")


def test_jinja_mixed_with_sqlmesh_macros(tmp_path: Path) -> None:
    query = """\
        @DEF(lower_bound, 1);
        SELECT id, '{{ start_ds }}' AS first_day, @VAR('region') AS region, {{ var('region') | upper | tojson }} AS up
        FROM raw.orders
        WHERE id >= @lower_bound AND id < @end_millis AND '{{ this_model }}' <> ''"""
    header = "kind INCREMENTAL_BY_TIME_RANGE (time_column first_day)"
    loaded = project(tmp_path, {"models/m.sql": model(textwrap.dedent(query), header=header)})
    assert loaded.models["mart.m"].query_sql == (
        "SELECT id, __sluice_macro__start_ds AS first_day, 'eu' AS region, 'EU' AS up "
        "FROM raw.orders WHERE id >= 1 AND id < __sluice_macro__end_millis "
        "AND __sluice_macro__this_model <> ''"
    )


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__.__mro__ }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ self._TemplateReference__context }}",
        "{{ range.__self__ }}",
        # {% do %} runs an expression through the same sandbox as {{ }}.
        "{% do ''.__class__.__mro__ %}",
        "{% do cycler.__init__.__globals__ %}",
        "{% do var.__func__.__globals__ %}",
        "{% do self._TemplateReference__context %}",
        "{% set c = self._TemplateReference__context %}",
        "{% set l = [] %}{% do l.append.__self__.__class__ %}",
        "{% set l = [] %}{% do l.append(l.__class__.__base__.__subclasses__()) %}",
        "{% set d = {} %}{% do d.update(x=d.__class__) %}",
        "{% do namespace.__init__.__globals__ %}",
        "{% do [].sort(key=''.__class__) %}",
    ],
)
def test_escapes_from_the_sandbox_are_refused(tmp_path: Path, template: str) -> None:
    error = refused(tmp_path, {"models/m.sql": model(f"SELECT 1 AS a, '{template}' AS b")})
    assert error.line == 4
    assert "sandbox" in error.message or "undefined" in error.message, error.message


@pytest.mark.parametrize(
    ("template", "message"),
    [
        # Nested loops with no output and no calls: the line tracer counts them.
        (
            "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}"
            "{% endfor %}{% endfor %}{% endfor %}",
            "more than 1,000,000 steps",
        ),
        ("{% for i in range(10 ** 9) %}{% endfor %}", "range() of 1,000,000,000 numbers"),
        ("{{ 'x' * 10 ** 9 }}", "repeating a value"),
        ("{{ 'x' | center(10 ** 9) }}", "a filter argument"),
        ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "50 levels deep"),
        (
            "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
            "{% endfor %}",
            "a value of",
        ),
        (
            # A list a template changes is capped like any other value it builds.
            "{% set l = [1] %}{% for i in range(64) %}{% do l.extend(l) %}{% endfor %}",
            "a value of",
        ),
        (
            "{% set d = {} %}{% for i in range(2000) %}"
            "{% do d.update(dict.fromkeys(range(i * 1000, i * 1000 + 1000))) %}{% endfor %}",
            "a value of",
        ),
        (
            # list.sort's key is called through the sandbox: the macro depth counts.
            "{% macro k(x) %}{% do [1, 2].sort(key=k) %}{% endmacro %}{{ k(0) }}",
            "50 levels deep",
        ),
        (
            # Strings the in-process caps let through one by one, kept in a macro's
            # buffer: the rendering process runs out of its memory, not the service.
            "{% set big = 'x' * 900000 %}{% macro m() %}{% for i in range(9000) %}{{ big }}"
            "{% endfor %}{% endmacro %}{{ m() | length }}",
            "ran out of memory",
        ),
    ],
)
def test_hostile_templates_are_capped(tmp_path: Path, template: str, message: str) -> None:
    error = refused(tmp_path, {"models/m.sql": model(f"SELECT 1 AS a -- {template}")})
    assert message in error.message, error.message
    assert error.path is not None and error.path.endswith("models/m.sql")


def test_output_size_is_capped(tmp_path: Path) -> None:
    template = "{% for i in range(9000) %}{{ 'x' * 200 }}{% endfor %}"
    error = refused(tmp_path, {"models/m.sql": model(f"SELECT 1 AS a -- {template}")})
    assert f"more than {jinja_sandbox.MAX_OUTPUT:,} characters" in error.message


def test_env_var_never_reads_the_service_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICE_TEST_SECRET", "s3cr3t-token")
    query = "SELECT '{{ env_var('SLUICE_TEST_SECRET', 'none') }}' AS s FROM raw.orders"
    config = CONFIG + "  leaked: \"{{ env_var('SLUICE_TEST_SECRET', 'none') }}\"\n"
    loaded = project(tmp_path, {"config.yaml": config, "models/m.sql": model(query)})
    assert loaded.models["mart.m"].query_sql == "SELECT 'none' AS s FROM raw.orders"
    assert loaded.config.variables["leaked"] == "none"
    # Without a default it is an error naming the line, in models and in config.yaml.
    error = refused(
        tmp_path / "model",
        {"models/m.sql": model("SELECT '{{ env_var('SLUICE_TEST_SECRET') }}' AS s")},
    )
    assert "not available to the project" in error.message and "s3cr3t" not in str(error)
    config = CONFIG + "  leaked: {{ env_var('SLUICE_TEST_SECRET') }}\n"
    error = refused(tmp_path / "config", {"config.yaml": config})
    assert isinstance(error, ConfigError)
    assert error.path is not None and error.path.endswith("config.yaml") and error.line == 6
    assert "s3cr3t" not in str(error)


def test_env_var_without_a_value_is_an_error_only_where_sluice_reads_it(tmp_path: Path) -> None:
    """A gateway's connection (a section Sluice ignores) may name variables only its own
    deployment sets (issue 41): nothing is evaluated there; in a section Sluice reads,
    the same is an error at its line."""
    gateway = (
        "gateways:\n  warehouse:\n    connection:\n      type: postgres\n"
        "      password: {{ env_var('WAREHOUSE_PASSWORD') }}\n"
    )
    loaded = project(tmp_path / "ok", {"config.yaml": CONFIG + gateway})
    assert "WAREHOUSE_PASSWORD" not in repr(loaded.config)
    config = CONFIG + "  schema: x{{ env_var('WAREHOUSE_PASSWORD') }}\n" + gateway
    error = refused(tmp_path / "used", {"config.yaml": config})
    assert isinstance(error, ConfigError) and error.line == 6
    assert "'WAREHOUSE_PASSWORD' is not available to the project" in error.message


def test_env_var_reads_what_the_caller_offers(tmp_path: Path) -> None:
    config = CONFIG + "  schema: {{ env_var('TARGET_SCHEMA', 'dev') }}\n"
    query = "SELECT '{{ env_var('TARGET_SCHEMA') }}' AS s, '@schema' AS v FROM raw.orders"
    files = {"config.yaml": config, "models/m.sql": model(query)}
    loaded = project(tmp_path, files, env={"TARGET_SCHEMA": "prod"})
    assert loaded.config.variables["schema"] == "prod"
    assert (loaded.models["mart.m"].query_sql or "").startswith("SELECT 'prod' AS s")


def fingerprint(tmp_path: Path, query: str, macros: str = "") -> str:
    files = {"models/m.sql": model(query)}
    if macros:
        files["macros/m.sql"] = macros
    loaded = project(tmp_path, files)
    return fingerprint_models(loaded.models, loaded.audits)["mart.m"].data_hash


def test_fingerprints_follow_the_rendered_query(tmp_path: Path) -> None:
    # Sluice fingerprints the rendered query as canonical SQL (as for plain SQL models):
    # formatting of the Jinja that renders to the same query changes nothing.
    base = fingerprint(
        tmp_path / "a", "SELECT {% for c in ['id'] %}{{ c }}{% endfor %} FROM raw.orders"
    )
    spaced = fingerprint(
        tmp_path / "b",
        "SELECT\n  {%- for c in [ 'id' ] %}\n   {{c}}\n{% endfor %}\nFROM   raw.orders",
    )
    assert spaced == base
    other = fingerprint(
        tmp_path / "c", "SELECT {% for c in ['id', 'amount'] %}{{ c }},{% endfor %} FROM raw.orders"
    )
    assert other != base
    # A macro is part of what renders: changing its output changes the fingerprint.
    one = fingerprint(
        tmp_path / "d", "SELECT {{ col() }} FROM raw.orders", "{% macro col() %}id{% endmacro %}"
    )
    two = fingerprint(
        tmp_path / "e",
        "SELECT {{ col() }} FROM raw.orders",
        "{% macro col() %}amount{% endmacro %}",
    )
    assert one == base and two != base


def plan_of(loaded: Project) -> Plan:
    """The first plan of ``loaded`` into an empty prod (as the corpus tests plan)."""
    end = to_ms("2026-01-01")
    return build_plan(
        PlanRequest(
            environment="prod",
            models=loaded.models,
            fingerprints=fingerprint_models(loaded.models, loaded.audits),
            base={},
            base_plan_id=None,
            end=end,
            execution_time=end,
        )
    )


def test_the_jinja_fixture_project_loads_and_plans() -> None:
    loaded = load_project(CORPUS / "jinja", use_cache=False)
    # SQLMesh's model set for this project: every model file (not run under SQLMesh here).
    assert set(loaded.models) == {"shop.orders", "shop.payment_mix", "shop.daily_orders"}
    assert set(plan_of(loaded).added) == set(loaded.models)
    mix = loaded.models["shop.payment_mix"].query_sql or ""
    assert "AS voucher_share" in mix and "COUNT(*) AS orders" in mix and "amount >= 5" in mix
    daily = loaded.models["shop.daily_orders"].query_sql or ""
    assert "__sluice_macro__start_ds" in daily and "region = 'eu'" in daily
    assert loaded.config.variables["min_amount"] == 5
