"""Unit tests and ad-hoc queries rendered as driver steps (pure: no Spark here).

A unit test becomes one ``unit_test`` step: its input rows (JSON, with the Spark type of
every column), the model's query reading temp views instead of its parents, and the rows
it must return. A query becomes one ``query`` step, once it is known to only read.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, date, datetime, time
from decimal import Decimal
from fnmatch import fnmatchcase
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from sluice.core.errors import ModelError, PlanError
from sluice.core.model import macros
from sluice.core.model.definition import Model, Project, UnitTest
from sluice.core.model.fileaccess import CODE_FUNCTIONS, FILE_FORMATS
from sluice.core.model.names import NO_CATALOGS, Catalogs, drop_default_catalogs
from sluice.core.spark.render import python_spec, resolve_tables
from sluice.core.spark.spec import QueryStep, UnitTestCte, UnitTestInput, UnitTestStep
from sluice.core.timeutil import DAY_MS, to_ms

VIEW_PREFIX = "__sluice_test_"
HOUR_MS = 3_600_000
_HOURLY = frozenset({"@hourly", "0 * * * *"})
_TIME_VARS = ("start", "end", "execution_time")


def unit_test_steps(
    project: Project, pattern: str | None, execution_time: int
) -> list[UnitTestStep]:
    """Steps for the tests whose name matches ``pattern`` (like ``pytest -k``), in file order.

    ``pattern`` is a case-insensitive substring, or a glob when it has ``*``, ``?`` or ``[``.
    """
    return [
        unit_test_step(test, project, execution_time)
        for test in project.tests
        if pattern is None or _matches(test.name, pattern)
    ]


def _matches(name: str, pattern: str) -> bool:
    name, pattern = name.lower(), pattern.lower()
    if any(c in pattern for c in "*?["):
        return fnmatchcase(name, pattern)
    return pattern in name


def unit_test_step(test: UnitTest, project: Project, execution_time: int) -> UnitTestStep:
    """The ``unit_test`` step of one test.

    Raises:
        ModelError: at the test's file:line, when the test cannot be run as written (a
            parent without rows or known columns, an unknown CTE, a bad ``vars`` date).
    """
    model = project.models[test.model]
    where = f"{test.path}:{test.line}"

    def fail(message: str, hint: str | None = None) -> ModelError:
        return ModelError(f"test {test.name}: {message}", path=test.path, line=test.line, hint=hint)

    prefix = (
        VIEW_PREFIX
        + hashlib.sha1(f"{where} {test.name}".encode(), usedforsecurity=False).hexdigest()[:8]
        + "_"
    )
    given = dict(test.inputs)
    inputs: list[UnitTestInput] = []
    views: dict[str, str] = {}
    if model.python_code is not None:
        if test.ctes:
            raise fail(f"{model.name} is a Python model: it has no CTEs to test")
        # The function may resolve any parent it declares.
        query: exp.Expr = exp.select("*").from_(prefix + "out")
        tables = list(model.depends_on)
    elif model.query is None:
        raise fail(f"{model.name} is a {model.kind.name} model: it has no query to test")
    else:
        query = model.query.copy()
        read = {_table_key(t) for t in query.find_all(exp.Table)}
        reads_itself = model.name in read or macros.PREFIX + "this_model" in read
        # Only the parents the query reads: `depends_on` may name more.
        tables = [t for t in model.depends_on if t in read]
        tables += [model.name] if reads_itself else []
    for table in tables:
        view = f"{prefix}{len(inputs) + 1}"
        declared = project.models[table].columns if table in project.models else ()
        rows = given.get(table)
        if rows is None:
            if table == model.name and not declared:
                declared = _own_columns(model, test)
            if not declared:
                raise fail(
                    f"no rows for {table}, and its columns are unknown",
                    hint=f"declare the `columns` of {table}"
                    if table == model.name
                    else f"add `{table}:` with `rows:` under `inputs:` (`rows: []` needs "
                    "the model to declare `columns`)",
                )
            rows = ()
        columns = _columns(rows, declared)
        inputs.append(
            {
                "view": view,
                "table": table,
                "columns": [list(c) for c in columns],
                "rows": [[_json_value(row.get(name)) for name, _ in columns] for row in rows],
            }
        )
        views[table] = view
    query = resolve_tables(query, views)
    start, end, execution, notes = _times(test, model, execution_time, fail)
    values: dict[str, exp.Expr | str] = {**macros.time_values(start, end, execution)}
    values["this_model"] = views.get(model.name, model.name)
    rendered = macros.render(query, values)
    assert isinstance(rendered, exp.Query)
    ctes: list[UnitTestCte] = []
    for name, rows in test.ctes:
        sql = _cte_query(rendered, name)
        if sql is None:
            if not any(c.alias_or_name.lower() == name for c in rendered.find_all(exp.CTE)):
                known = ", ".join(c.alias_or_name for c in rendered.find_all(exp.CTE))
                raise fail(
                    f"{model.name} has no CTE named {name}",
                    hint=f"its CTEs: {known or 'none'}",
                )
            notes.append(f"CTE {name} is not checked: only top-level WITH CTEs can be tested")
            continue
        ctes.append({"name": name, "query": sql, "expected": _json_rows(rows)})
    step: UnitTestStep = {
        "type": "unit_test",
        "label": f"test {test.name}",
        "name": test.name,
        "model": model.name,
        "path": test.path,
        "line": test.line,
        "inputs": inputs,
        "query": rendered.sql(dialect="spark"),
        "expected": _json_rows(test.outputs) if test.output_query else None,
        "ctes": ctes,
        "grain": list(model.grain),
        "notes": notes,
    }
    if model.python_code is not None:
        step["python"] = {
            "model": python_spec(model, project.path, views),
            "view": prefix + "out",
            "start": start,
            "end": end - 1,
            "execution": execution,
        }
    return step


def _own_columns(model: Model, test: UnitTest) -> tuple[tuple[str, str], ...]:
    """The columns of an empty @this_model: the query's, typed by the expected rows."""
    assert model.query is not None
    names = [n.lower() for n in model.query.named_selects]
    if not names or "*" in names:
        return ()
    typed = dict(_columns(test.outputs))
    return tuple((name, typed.get(name, "STRING")) for name in names)


def _table_key(table: exp.Table) -> str:
    """The name a query's table has among the models (``[catalog.]schema.table``)."""
    return ".".join(p.name for p in table.parts).lower() if table.db else table.name.lower()


def _times(
    test: UnitTest, model: Model, execution_time: int, fail: Callable[..., ModelError]
) -> tuple[int, int, int, list[str]]:
    """(start, exclusive end, execution time) from the test's ``vars`` (SQLMesh's names).

    By default the interval is the day (the hour, for hourly models) of the execution time.
    An ``end`` given as a date includes that whole day, as in SQLMesh; a timestamp ``end``
    is the last instant included.
    """
    variables = dict(test.variables)
    ms: dict[str, int] = {}
    for key in _TIME_VARS:
        if variables.get(key) is not None:
            try:
                ms[key] = to_ms(variables[key])
            except ValueError as exc:
                raise fail(f"vars.{key}: {exc}") from None
    execution = ms.get("execution_time", execution_time)
    period = HOUR_MS if model.cron in _HOURLY else DAY_MS
    start = ms.get("start")
    if start is None:
        anchor = ms.get("end", execution)
        start = anchor - anchor % period
    if "end" not in ms:
        end = start - start % period + period
    elif _is_date(variables["end"]):
        end = ms["end"] + DAY_MS
    else:
        end = ms["end"] + 1
    if end <= start:
        raise fail("vars.end is before vars.start", hint="give end on or after start")
    others = sorted(str(k) for k in variables if k not in _TIME_VARS)
    notes = []
    if others:
        notes.append(f"vars {', '.join(others)} are not used: @VAR values come from config.yaml")
    return start, end, execution, notes


def _is_date(value: Any) -> bool:
    if isinstance(value, datetime):
        return False
    return isinstance(value, date) or (isinstance(value, str) and len(value.strip()) == 10)


def _cte_query(query: exp.Query, name: str) -> str | None:
    """``WITH <the query's CTEs> SELECT * FROM name``, or None for a CTE not at the top."""
    with_ = query.args.get("with_")
    if with_ is None or not any(c.alias_or_name.lower() == name for c in query.ctes):
        return None
    select = exp.select("*").from_(exp.to_table(name))
    select.set("with_", with_.copy())
    return select.sql(dialect="spark")


def _columns(
    rows: Iterable[Mapping[str, Any]], declared: Iterable[tuple[str, str]] = ()
) -> tuple[tuple[str, str], ...]:
    """Declared columns first, then the other keys of ``rows`` with types from their values."""
    out = {name.lower(): type_ for name, type_ in declared}
    values: dict[str, list[Any]] = {}
    for row in rows:
        for key, value in row.items():
            values.setdefault(key, []).append(value)
    for key, seen in values.items():
        if key not in out:
            out[key] = infer_type(seen)
    return tuple(out.items())


def infer_type(values: Iterable[Any]) -> str:
    """The Spark type of a YAML column: BIGINT, DOUBLE, BOOLEAN, DATE, TIMESTAMP, STRING,
    ARRAY<...> or STRUCT<...>; a column of nulls (or of mixed values) is STRING."""
    kinds = set()
    present = [v for v in values if v is not None]
    for value in present:
        if isinstance(value, bool):
            kinds.add("BOOLEAN")
        elif isinstance(value, int):
            kinds.add("BIGINT")
        elif isinstance(value, float | Decimal):
            kinds.add("DOUBLE")
        elif isinstance(value, datetime):
            kinds.add("TIMESTAMP")
        elif isinstance(value, date):
            kinds.add("DATE")
        elif isinstance(value, list | tuple):
            kinds.add("ARRAY")
        elif isinstance(value, dict):
            kinds.add("STRUCT")
        else:
            kinds.add("STRING")
    if kinds == {"BIGINT", "DOUBLE"}:
        return "DOUBLE"
    if kinds == {"DATE", "TIMESTAMP"}:
        return "TIMESTAMP"
    if len(kinds) != 1:
        return "STRING"
    kind = kinds.pop()
    if kind == "ARRAY":
        return f"ARRAY<{infer_type(x for v in present for x in v)}>"
    if kind == "STRUCT":
        fields = _columns(present)
        return "STRUCT<" + ", ".join(f"`{n}`: {t}" for n, t in fields) + ">"
    return kind


def _json_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{key: _json_value(value) for key, value in row.items()} for row in rows]


def _json_value(value: Any) -> Any:
    """A YAML value as JSON: dates and times as ISO strings (UTC, no offset)."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.isoformat(sep=" ")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN/Infinity; Spark casts 'NaN' and 'inf' back
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    return value


_QUERY_HINT = (
    "`sluice query` runs one read-only query: SELECT, WITH ... SELECT, UNION, VALUES; "
    "change data with models and `sluice plan`"
)


def query_step(
    sql: str, resolve: Mapping[str, str], limit: int, catalogs: Catalogs = NO_CATALOGS
) -> QueryStep:
    """The ``query`` step of a read-only query; model names read ``resolve``'s targets.

    Tables ``schema.table`` that are keys of ``resolve`` are rewritten to its values (CTE
    names and other tables are left as written); the result has at most ``limit`` rows.
    A table named in one of the ``catalogs``' default catalogs (``local.sch.tbl``) is the
    model ``sch.tbl``, as in the project's files.

    Raises:
        PlanError: the text is not one read-only Spark SQL query; the message says why.
    """
    try:
        parsed = sqlglot.parse(sql, read="spark")
        # A trailing `;` (and a comment after it) is no statement.
        statements = [s for s in parsed if s is not None and not isinstance(s, exp.Semicolon)]
    except ParseError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "syntax error"
        raise PlanError(
            f"the query is not valid Spark SQL: {first}", hint="check the SQL near that point"
        ) from None
    if not statements:
        raise PlanError("the query is empty", hint="give a SELECT statement")
    if len(statements) > 1:
        raise PlanError(
            f"the text has {len(statements)} statements; a query is exactly one",
            hint="run one SELECT at a time (remove the other statements and the `;`)",
        )
    query = statements[0]
    if not isinstance(query, exp.Query | exp.Values):
        raise PlanError(f"{_keyword(query)} is not a read-only query", hint=_QUERY_HINT)
    query = drop_default_catalogs(query, catalogs)
    resolved = {key.lower() for key in resolve}
    for node in query.walk():
        _check_read_only(node, resolved)
    rewritten = resolve_tables(query, {k.lower(): v for k, v in resolve.items()})
    limited = _with_limit(rewritten, limit)
    return {"type": "query", "label": "query", "sql": limited.sql(dialect="spark"), "limit": limit}


def _check_read_only(node: exp.Expr, resolved: set[str]) -> None:
    """Raise PlanError for a part of a query that writes, runs code or reads files."""
    if isinstance(node, exp.DDL | exp.DML | exp.Command):
        raise PlanError(
            f"the query contains {_keyword(node)}, which is not a read", hint=_QUERY_HINT
        )
    if isinstance(node, exp.QueryTransform):
        raise PlanError(
            "TRANSFORM ... USING runs a script on the cluster; a query may not",
            hint="compute the column with SQL functions",
        )
    if isinstance(node, exp.Func):
        name = node.name if isinstance(node, exp.Anonymous) else node.sql_name()
        if name.lower() in CODE_FUNCTIONS:
            raise PlanError(
                f"{name.lower()}() calls Java methods; a query may not",
                hint="compute the column with SQL functions",
            )
    if (
        isinstance(node, exp.Table)
        and node.db.lower() in FILE_FORMATS
        and not node.args.get("catalog")
        and _table_key(node) not in resolved
    ):
        raise PlanError(
            f"{node.sql(dialect='spark')} reads files directly; a query reads tables",
            hint="query the models (schema.table) or tables in the catalog",
        )


def _keyword(statement: exp.Expr) -> str:
    """The statement's leading keyword(s) for messages: DROP, INSERT, SET, ADD..."""
    if isinstance(statement, exp.Command):
        return str(statement.this).upper()
    words = statement.sql(dialect="spark").split(None, 1)
    first = words[0].upper() if words else statement.key.upper()
    return statement.key.upper() if first == "WITH" else first


def _with_limit(query: exp.Expr, limit: int) -> exp.Expr:
    """``query`` returning at most ``limit`` rows; its own smaller LIMIT stays."""
    if isinstance(query, exp.Select | exp.SetOperation):
        own = query.args.get("limit")
        if own is None:
            return query.limit(limit)
        value = own.expression
        if isinstance(value, exp.Literal) and value.is_int:
            return query if int(value.this) <= limit else query.limit(limit)
    # A parenthesised query, VALUES, or a computed LIMIT: cap it from outside.
    text = f"SELECT * FROM ({query.sql(dialect='spark')}) AS _sluice_query LIMIT {limit}"
    return sqlglot.parse_one(text, read="spark")
