"""Each step's result, as typed values, and the parser that reads one from the driver (pure).

A step's handler (:mod:`sluice.core.spark.steps`, and the scripted double's,
:mod:`sluice.core.spark.scripted`) returns one of the ``TypedDict``\\ s below, tagged by
its ``step`` key: the type of the step it is the result of (:data:`StepResult` is their
union, so mypy narrows on ``result["step"] == "query"`` and checks the keys read after
it). The runner gets them in the driver's ``step_done`` events (one result) and its
``job_done`` event (every step's, by the step's id: its index as text unless the step
names one), which are read as untrusted lines (:mod:`sluice.core.spark.events`).

A result is tied to its step in two places, each checking what it can know:

- :func:`parse_result` reads a result as the kind it claims (its ``step``): only that
  kind's keys, each of its type, names of at most :data:`MAX_NAME_CHARS` characters, at
  most :data:`MAX_ROWS` rows of at most :data:`MAX_COLUMNS` values, JSON nested at most
  :data:`MAX_DEPTH` deep; a text longer than :data:`MAX_TEXT_CHARS` (a unit test's diff,
  a note) is cut, as it is only shown, and so is a text value in rows (a query's, a
  ``sql`` step's, a sample's) longer than :data:`MAX_VALUE_CHARS`. It needs no job, so a
  line parses the same wherever it is read.
- The runner then checks the claim against the job's spec, which it wrote and the
  driver's output cannot change: it hands the spec's steps to the event parser
  (:func:`sluice.core.spark.events.decode`), which calls :func:`check` on a
  ``step_done`` event's result (its step by index) and :func:`check_all` on a
  ``job_done`` event's (by id). A result for a step the job does not have, of another
  kind than its step, naming another model, version, table, audit, test or environment
  than its step (a table diff: other tables, labels or keys), or with more rows than its
  step asked for is refused as any malformed event line is: noted in the job's log, not
  believed; so is a ``job_done`` event that lacks the result of one of the job's steps
  (the driver reports it only once every step ran, and every step returns one).

The kind is written in the result, not only looked up in the spec, because a result is
read far from its job (from a :class:`~sluice.core.spark.submit.JobResult`, by the
workflow, the preview, the PR comment and the CLI), where there is no spec at hand: mypy
narrows on the tag there, and :func:`result_of` checks it at run time. The spec's check
is done by the runners that read the driver's lines (spark-submit, Spark Connect, and the
scripted double, which reads its events back as lines); the in-process runner's driver is
this process, whose results are trusted as its other events are.

No ``from __future__ import annotations`` here: on Python 3.11 a ``NotRequired`` inside a
string annotation is not seen by ``TypedDict`` (see :mod:`sluice.core.spark.spec`).
"""

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict, cast, final, overload

from sluice.core.errors import ExecutionError
from sluice.core.spark.spec import Step
from sluice.core.tablediff.result import TableDiffJson
from sluice.core.words import plural

MAX_NAME_CHARS = 4096
"""The longest name or id in an event or a result (a label, a model, a column, a test)."""
MAX_TEXT_CHARS = 64 * 1024
"""The longest message, error or diff kept whole; a longer one is cut, saying by how much."""
MAX_DEPTH = 64
"""How deep a result's JSON may nest (a query's rows of structs of arrays...)."""
MAX_ROWS = 100_000
"""The most rows a result carries (a query's, a ``sql`` step's, a sample's); with the
spec known, a query's and a ``sql`` step's also at most their step's ``limit``."""
MAX_COLUMNS = 10_000
"""The most columns a result's rows have (and names in any list of a result)."""
MAX_VALUE_CHARS = 1024 * 1024
"""The longest text value in a result's rows kept whole; a longer one is cut, saying by
how much (a row is only shown)."""
SQL_LIMIT = 100
"""The rows of its last statement a ``sql`` step returns unless its ``limit`` says."""
AUDIT_SAMPLE = 5
"""The violating rows an audit's result shows."""


class BadResult(ValueError):
    """A step result the runner refuses; the message says what was wrong."""


# --- the results --------------------------------------------------------------------------


@final
class SqlResult(TypedDict):
    """A ``sql`` step's: the first rows of its last statement, by column name."""

    step: Literal["sql"]
    rows: list[dict[str, Any]]


@final
class SkipOutcome(TypedDict):
    """A scheduled run's rebuild (a build step with a ``skip`` check): whether it ran,
    and the version of each table it reads as the driver read it before deciding."""

    ran: bool
    inputs: list[list[str | None]]


@final
class BuildResult(TypedDict):
    """A ``build`` step's: the model version built, its table, the batches written (none
    when a run skipped it: its ``skip``)."""

    step: Literal["build"]
    model: str
    version: str
    table: str
    batches: int
    skip: NotRequired[SkipOutcome]


@final
class AuditResult(TypedDict):
    """An ``audit`` step's (also a build batch's audit's, kept in state): how many rows
    violate it, the first :data:`AUDIT_SAMPLE` of them (JSON values)."""

    step: Literal["audit"]
    model: str
    audit: str
    passed: bool
    violations: int
    sample: list[Any]
    blocking: bool
    batch: NotRequired[list[int]]
    """``[start, end]``: the build batch it audited, when it audited one."""


@final
class ViewsResult(TypedDict):
    """A ``views`` step's: the environment pointed, views (re)made and dropped."""

    step: Literal["views"]
    environment: str
    swapped: int
    dropped: int


@final
class DropResult(TypedDict):
    """A ``drop`` step's (the janitor's): views and tables dropped, schemas emptied."""

    step: Literal["drop"]
    views: int
    schemas: list[str]
    tables: int


@final
class UnitTestResult(TypedDict):
    """A ``unit_test`` step's: ``diff`` says what differs (empty when it passed)."""

    step: Literal["unit_test"]
    name: str
    passed: bool
    diff: str
    notes: list[str]


@final
class QueryResult(TypedDict):
    """A ``query`` step's: column names, Spark types, rows (one value per column; dates,
    timestamps and decimals as strings)."""

    step: Literal["query"]
    columns: list[str]
    types: list[str]
    rows: list[list[Any]]


@final
class InspectedView(TypedDict):
    """What the catalog holds under a view's name (an ``inspect`` step's): whether
    anything is there, its type (``VIEW``, ``MANAGED``, ``EXTERNAL``), its text (a view's
    query as the catalog keeps it) and when its definition last changed (the metastore's
    ``transient_lastDdlTime``, epoch ms); ``error``: it could not be read."""

    name: str
    exists: bool
    type: str | None
    text: str | None
    ddl_ms: int | None
    error: str | None


@final
class InspectedTable(TypedDict):
    """What the catalog holds under a physical table's name (an ``inspect`` step's).

    ``columns``: its ``[name, type]``; ``expected``: the columns the model's query has,
    analysed against its parents (None: not analysed); ``mark``: Sluice's
    ``sluice.created_by`` property; ``rows``, ``bytes``, ``files`` and ``newest_ms`` (its
    last write, epoch ms) as ``source`` read them: ``files`` (the data files' listing),
    ``delta`` (its history and details), ``catalog`` (the statistics the catalog keeps,
    never computed here) or ``none``; ``partitions``: the time column's values (None: not
    listed)."""

    name: str
    exists: bool
    type: str | None
    provider: str | None
    mark: str | None
    columns: list[list[str]]
    expected: list[list[str]] | None
    rows: int | None
    bytes: int | None
    files: int | None
    newest_ms: int | None
    ddl_ms: int | None
    source: str
    partitions: list[str] | None
    error: str | None


@final
class InspectResult(TypedDict):
    """An ``inspect`` step's (``sluice drift``): each of its views and tables, in order."""

    step: Literal["inspect"]
    views: list[InspectedView]
    tables: list[InspectedTable]


@final
class TableDiffDone(TableDiffJson):
    """A ``table_diff`` step's: what the diff found
    (:meth:`~sluice.core.tablediff.result.TableDiffResult.to_json`)."""

    step: Literal["table_diff"]


class DiffProblem(TypedDict):
    """Input the user got wrong that only the schemas revealed, and how to fix it."""

    message: str
    hint: str | None


@final
class TableDiffRefused(TypedDict):
    """A ``table_diff`` step's when the diff cannot run as asked (no result is stored)."""

    step: Literal["table_diff"]
    error: DiffProblem


TableDiffOutcome: TypeAlias = TableDiffDone | TableDiffRefused
StepResult: TypeAlias = (
    SqlResult
    | BuildResult
    | AuditResult
    | ViewsResult
    | DropResult
    | UnitTestResult
    | QueryResult
    | TableDiffDone
    | TableDiffRefused
    | InspectResult
)
"""Any step's result; its ``step`` says which."""


def table_diff_result(found: TableDiffJson) -> TableDiffDone:
    """A table diff's JSON as its step's result."""
    return {"step": "table_diff", **found}


@overload
def result_of(
    results: Mapping[str, StepResult], key: str, kind: Literal["query"]
) -> QueryResult: ...
@overload
def result_of(
    results: Mapping[str, StepResult], key: str, kind: Literal["unit_test"]
) -> UnitTestResult: ...
@overload
def result_of(
    results: Mapping[str, StepResult], key: str, kind: Literal["table_diff"]
) -> TableDiffOutcome: ...
@overload
def result_of(
    results: Mapping[str, StepResult], key: str, kind: Literal["inspect"]
) -> InspectResult: ...
def result_of(results: Mapping[str, StepResult], key: str, kind: str) -> StepResult:
    """The result of step ``key`` of a job, a ``kind`` step's.

    Raises:
        ExecutionError: the job reported no result for that step, or one of another kind
            (a runner that checked no results against the spec: a test's, a custom one).
    """
    result = results.get(key)
    if result is None:
        raise ExecutionError(f"the Spark job reported no result for its step {key!r}")
    if result["step"] != kind:
        raise ExecutionError(
            f"the Spark job reported a {result['step']} result for its {kind} step {key!r}"
        )
    return result


# --- reading one from the driver ----------------------------------------------------------

Check = Callable[[Any], Any]


def kind_of(value: object) -> str:
    """What a JSON value is, for a message (``a list``, ``null``...)."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


def shown(value: object) -> str:
    """``value`` for a message: short, whatever it is."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _name(value: Any) -> str:
    if not isinstance(value, str):
        raise BadResult(f"is {kind_of(value)}, not a string")
    if len(value) > MAX_NAME_CHARS:
        raise BadResult(f"is longer than {MAX_NAME_CHARS} characters")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise BadResult(f"is {kind_of(value)}, not a string")
    if len(value) <= MAX_TEXT_CHARS:
        return value
    return value[:MAX_TEXT_CHARS] + f"... ({len(value) - MAX_TEXT_CHARS} more characters)"


def _maybe_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _integer(value: Any) -> int:
    if type(value) is not int:  # JSON's true is not a number
        raise BadResult(f"is {kind_of(value)}, not an integer")
    return value


def _count(value: Any) -> int:
    if _integer(value) < 0:
        raise BadResult(f"is {value}, not a count")
    return cast(int, value)


def _maybe_count(value: Any) -> int | None:
    return None if value is None else _count(value)


def _maybe_number(value: Any) -> float | None:
    if value is None:
        return None
    if type(value) not in (int, float) or not math.isfinite(value):
        raise BadResult(f"is {shown(value)}, not a number")
    return cast(float, value)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise BadResult(f"is {kind_of(value)}, not true or false")
    return value


def _tag(name: str) -> Check:
    def check(value: Any) -> str:
        if value != name:
            raise BadResult(f"is {shown(value)}, not {name!r}")
        return name

    return check


def _list(value: Any, most: int, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise BadResult(f"is {kind_of(value)}, not a list of {what}")
    if len(value) > most:
        raise BadResult(f"holds {len(value)} {what}, more than {most}")
    return value


def _names(value: Any) -> list[str]:
    items = _list(value, MAX_COLUMNS, "names")
    for item in items:
        try:
            _name(item)
        except BadResult as exc:
            raise BadResult(f"holds a name that {exc}") from None
    return items


def _pair(value: Any) -> list[int]:
    if not isinstance(value, list) or len(value) != 2:
        raise BadResult(f"is {shown(value)}, not a [start, end] pair")
    return [_integer(value[0]), _integer(value[1])]


def values(value: Any, depth: int = 0) -> Any:
    """``value`` (JSON values: json.loads gives no other) with each text longer than
    :data:`MAX_VALUE_CHARS` cut, saying by how much.

    Raises:
        BadResult: it nests deeper than :data:`MAX_DEPTH`, or an object's key is longer
            than :data:`MAX_NAME_CHARS`.
    """
    if depth > MAX_DEPTH:
        raise BadResult(f"nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        if len(value) <= MAX_VALUE_CHARS:
            return value
        return value[:MAX_VALUE_CHARS] + f"... ({len(value) - MAX_VALUE_CHARS} more characters)"
    if isinstance(value, dict):
        for key in value:
            if len(key) > MAX_NAME_CHARS:
                raise BadResult(f"holds a key longer than {MAX_NAME_CHARS} characters")
        return {key: values(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [values(item, depth + 1) for item in value]
    return value


def _row_object(value: Any) -> dict[str, Any]:
    """A row as an object: at most :data:`MAX_COLUMNS` values, named."""
    if not isinstance(value, dict):
        raise BadResult(f"holds a row that is {kind_of(value)}, not an object")
    if len(value) > MAX_COLUMNS:
        raise BadResult(f"holds a row of {len(value)} columns, more than {MAX_COLUMNS}")
    for key in value:
        _name(key)
    return cast(dict[str, Any], values(value, 1))


def _object_rows(value: Any) -> list[dict[str, Any]]:
    return [_row_object(row) for row in _list(value, MAX_ROWS, "rows")]


def _sample(value: Any) -> list[Any]:
    """An audit's violating rows (JSON values: objects from Spark's rows)."""
    return cast(list[Any], values(_list(value, MAX_ROWS, "rows")))


def joined(subject: str, problem: str) -> str:
    """``subject`` and what is wrong with it, as one phrase (``model is a list...``,
    ``schema: added holds...``)."""
    follows = ("is ", "with ", "without ", "holds ", "nests ", "names ", "of ")
    return f"{subject} {problem}" if problem.startswith(follows) else f"{subject}: {problem}"


def _record(raw: Any, required: Mapping[str, Check], optional: Mapping[str, Check]) -> Any:
    """``raw`` as an object of these keys only, each checked."""
    if not isinstance(raw, dict):
        raise BadResult(f"is {kind_of(raw)}, not an object")
    record: dict[str, Any] = {}
    for key, value in raw.items():
        check = required.get(key) or optional.get(key)
        if check is None:
            raise BadResult(f"with an unknown key {shown(key)}")
        try:
            record[key] = check(value)
        except BadResult as exc:
            raise BadResult(joined(key, str(exc))) from None
    missing = [key for key in required if key not in record]
    if missing:
        raise BadResult(f"without {', '.join(missing)}")
    return record


def _nested(required: Mapping[str, Check]) -> Check:
    """An object of ``required`` keys inside a result."""
    return lambda value: _record(value, required, {})


def _each(check: Check, most: int, what: str) -> Check:
    def each(value: Any) -> list[Any]:
        return [check(item) for item in _list(value, most, what)]

    return each


_SIDES = _nested({"source": _maybe_count, "target": _maybe_count})
_COLUMN = _nested({"name": _name, "type": _name})
_RETYPED = _nested({"name": _name, "source_type": _name, "target_type": _name})
_SCHEMA = _nested(
    {
        "added": _each(_COLUMN, MAX_COLUMNS, "columns"),
        "removed": _each(_COLUMN, MAX_COLUMNS, "columns"),
        "changed": _each(_RETYPED, MAX_COLUMNS, "columns"),
    },
)
_STATS = _nested({"matched": _count, "differed": _count, "match_rate": _maybe_number})


def _column_stats(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadResult(f"is {kind_of(value)}, not an object")
    if len(value) > MAX_COLUMNS:
        raise BadResult(f"holds {len(value)} columns, more than {MAX_COLUMNS}")
    for name, stats in value.items():
        try:
            _name(name)
            _STATS(stats)
        except BadResult as exc:
            raise BadResult(joined(f"of column {shown(name)}", str(exc))) from None
    return value


_SAMPLES = _nested(
    {"source_only": _object_rows, "target_only": _object_rows, "differing": _object_rows},
)
_PROBLEM = _nested({"message": _text, "hint": _maybe_text})


def _maybe_names(value: Any) -> list[str] | None:
    return None if value is None else _names(value)


def _typed_column(value: Any) -> list[str]:
    if not isinstance(value, list) or len(value) != 2:
        raise BadResult(f"is {shown(value)}, not a [name, type] pair")
    return [_name(value[0]), _name(value[1])]


_TYPED_COLUMNS = _each(_typed_column, MAX_COLUMNS, "columns")


def _maybe_columns(value: Any) -> list[list[str]] | None:
    return None if value is None else cast(list[list[str]], _TYPED_COLUMNS(value))


def _maybe_integer(value: Any) -> int | None:
    return None if value is None else _integer(value)


_INSPECTED_VIEW = _nested(
    {
        "name": _name,
        "exists": _flag,
        "type": _maybe_text,
        "text": _maybe_text,
        "ddl_ms": _maybe_integer,
        "error": _maybe_text,
    }
)
_INSPECTED_TABLE = _nested(
    {
        "name": _name,
        "exists": _flag,
        "type": _maybe_text,
        "provider": _maybe_text,
        "mark": _maybe_text,
        "columns": _TYPED_COLUMNS,
        "expected": _maybe_columns,
        "rows": _maybe_count,
        "bytes": _maybe_count,
        "files": _maybe_count,
        "newest_ms": _maybe_integer,
        "ddl_ms": _maybe_integer,
        "source": _name,
        "partitions": _maybe_names,
        "error": _maybe_text,
    }
)


def _query_rows(value: Any) -> list[list[Any]]:
    rows = _list(value, MAX_ROWS, "rows")
    for row in rows:
        if not isinstance(row, list):
            raise BadResult(f"holds a row that is {kind_of(row)}, not a list")
        if len(row) > MAX_COLUMNS:
            raise BadResult(f"holds a row of {len(row)} values, more than {MAX_COLUMNS}")
    return cast(list[list[Any]], values(rows))


def _input_version(value: Any) -> list[str | None]:
    if not isinstance(value, list) or len(value) != 2:
        raise BadResult(f"is {shown(value)}, not a [table, version] pair")
    return [_name(value[0]), None if value[1] is None else _name(value[1])]


def _skip_outcome(value: Any) -> dict[str, Any]:
    from sluice.core.skip_rule import MAX_INPUTS

    if not isinstance(value, dict) or set(value) != {"ran", "inputs"}:
        raise BadResult(f"is {shown(value)}, not an object of ran and inputs")
    found = [_input_version(pair) for pair in _list(value["inputs"], MAX_INPUTS, "inputs")]
    return {"ran": _flag(value["ran"]), "inputs": found}


KEYS: dict[str, tuple[dict[str, Check], dict[str, Check]]] = {
    "sql": ({"step": _tag("sql"), "rows": _object_rows}, {}),
    "build": (
        {
            "step": _tag("build"),
            "model": _name,
            "version": _name,
            "table": _name,
            "batches": _count,
        },
        {"skip": _skip_outcome},
    ),
    "audit": (
        {
            "step": _tag("audit"),
            "model": _name,
            "audit": _name,
            "passed": _flag,
            "violations": _count,
            "sample": _sample,
            "blocking": _flag,
        },
        {"batch": _pair},
    ),
    "views": (
        {"step": _tag("views"), "environment": _name, "swapped": _count, "dropped": _count},
        {},
    ),
    "drop": (
        {"step": _tag("drop"), "views": _count, "schemas": _names, "tables": _count},
        {},
    ),
    "unit_test": (
        {
            "step": _tag("unit_test"),
            "name": _name,
            "passed": _flag,
            "diff": _text,
            "notes": _each(_text, MAX_ROWS, "notes"),
        },
        {},
    ),
    "query": (
        {"step": _tag("query"), "columns": _names, "types": _names, "rows": _query_rows},
        {},
    ),
    "table_diff": (
        {
            "step": _tag("table_diff"),
            "name": _name,
            "source": _name,
            "target": _name,
            "source_table": _name,
            "target_table": _name,
            "keys": _names,
            "decimals": _count,
            "tolerance": _maybe_number,
            "where": _maybe_text,
            "skipped": _names,
            "same_table": _flag,
            "identical": _flag,
            "source_rows": _maybe_count,
            "target_rows": _maybe_count,
            "row_change_pct": _maybe_number,
            "joined": _maybe_count,
            "source_only": _maybe_count,
            "target_only": _maybe_count,
            "differing_rows": _maybe_count,
            "null_keys": _SIDES,
            "duplicate_keys": _SIDES,
            "duplicate_rows": _SIDES,
            "schema": _SCHEMA,
            "columns": _column_stats,
            "samples": _SAMPLES,
            "note": _maybe_text,
        },
        {},
    ),
    "inspect": (
        {
            "step": _tag("inspect"),
            "views": _each(_INSPECTED_VIEW, MAX_ROWS, "views"),
            "tables": _each(_INSPECTED_TABLE, MAX_ROWS, "tables"),
        },
        {},
    ),
}
"""Each step type's result: its keys' checks, required and optional (as its
``TypedDict``); a ``table_diff`` step's refusal is :data:`REFUSED_KEYS`."""

REFUSED_KEYS: dict[str, Check] = {"step": _tag("table_diff"), "error": _PROBLEM}

TYPES: dict[str, Any] = {
    "sql": SqlResult,
    "build": BuildResult,
    "audit": AuditResult,
    "views": ViewsResult,
    "drop": DropResult,
    "unit_test": UnitTestResult,
    "query": QueryResult,
    "table_diff": TableDiffDone,
    "inspect": InspectResult,
}
"""Each step type's result ``TypedDict`` (:class:`TableDiffRefused` besides)."""


def parse_result(raw: object) -> StepResult:
    """``raw`` (a decoded JSON value) as the result of the step kind it claims.

    Raises:
        BadResult: ``raw`` is not an object, claims no known kind, or a key is missing,
            unknown or of the wrong type, or a value is out of bounds.
    """
    if not isinstance(raw, dict):
        raise BadResult(f"is {kind_of(raw)}, not an object")
    kind = raw.get("step")
    if not isinstance(kind, str) or kind not in KEYS:
        raise BadResult(f"is of no known step type (its step is {shown(kind)})")
    if kind == "table_diff" and "error" in raw:
        keys: tuple[Mapping[str, Check], Mapping[str, Check]] = (REFUSED_KEYS, {})
    else:
        keys = KEYS[kind]
    try:
        return cast(StepResult, _record(raw, *keys))
    except BadResult as exc:
        raise BadResult(joined(f"a {kind} step's result", str(exc))) from None


def parse_results(raw: object) -> dict[str, StepResult]:
    """A ``job_done`` event's results: step id -> :func:`parse_result`.

    Raises:
        BadResult: as :func:`parse_result`, naming the step.
    """
    if not isinstance(raw, dict):
        raise BadResult(f"is {kind_of(raw)}, not an object")
    results: dict[str, StepResult] = {}
    for key, result in raw.items():
        try:
            _name(key)
            results[key] = parse_result(result)
        except BadResult as exc:
            raise BadResult(joined(f"of step {shown(key)}", str(exc))) from None
    return results


# --- tied to the job's steps --------------------------------------------------------------


def result_key(index: int, step: Step) -> str:
    """The key of step ``index``'s result in the job's results (its id, or its index)."""
    return step.get("id", str(index))


def check(result: StepResult, index: int, steps: Sequence[Step]) -> None:
    """Refuse ``result`` unless it can be step ``index``'s of ``steps`` (the job's spec):
    that step exists, is of the result's kind, and the result names what it names.

    Raises:
        BadResult: saying which step, and what does not match.
    """
    if not 0 <= index < len(steps):
        raise BadResult(
            f"is for step {index}, which the job does not have (it has {plural(len(steps), 'step')})"
        )
    step = steps[index]
    what = f"step {index} ({shown(step.get('label', step.get('type')))})"
    if result["step"] != step.get("type"):
        raise BadResult(
            f"is a {result['step']} step's result, but {what} is a {step.get('type')} step"
        )
    for key, claimed, asked in _claims(result, step):
        if claimed != asked:
            raise BadResult(f"names {key} {shown(claimed)}, but {what} has {shown(asked)}")
    most = _row_limit(step)
    if most is not None and "rows" in result and len(result["rows"]) > most:
        raise BadResult(f"holds {len(result['rows'])} rows, but {what} asked for at most {most}")


def check_all(results: Mapping[str, StepResult], steps: Sequence[Step]) -> None:
    """Refuse ``results`` (a ``job_done`` event's) unless each is for a step of ``steps``
    (by its id, or its index as text), :func:`check` passes, and every step has one.

    Raises:
        BadResult: naming the step, and what does not match.
    """
    index = {result_key(i, step): i for i, step in enumerate(steps)}
    for key, result in results.items():
        if key not in index:
            raise BadResult(f"of step {shown(key)}: the job has no step of that id")
        try:
            check(result, index[key], steps)
        except BadResult as exc:
            raise BadResult(joined(f"of step {shown(key)}", str(exc))) from None
    missing = [key for key in index if key not in results]
    if missing:
        more = f" (and {plural(len(missing) - 1, 'other step')})" if len(missing) > 1 else ""
        raise BadResult(
            f"without a result of step {shown(missing[0])}{more}: a job that ran to its end "
            "reports a result of every step"
        )


def _claims(result: StepResult, step: Any) -> list[tuple[str, object, object]]:
    """(key, what the result says, what its step says) of what both name."""
    fields: dict[str, Any] = dict(step)
    if result["step"] == "build":
        outcome = result.get("skip")
        ran = outcome is None or outcome["ran"]
        return [
            ("model", result["model"], fields.get("model")),
            ("version", result["version"], fields.get("version")),
            ("table", result["table"], fields.get("table")),
            ("batches", result["batches"], len(fields.get("batches", ())) if ran else 0),
            *_skip_claims(outcome, fields.get("skip")),
        ]
    if result["step"] == "audit":
        return [
            ("model", result["model"], fields.get("model")),
            ("audit", result["audit"], fields.get("audit")),
            ("blocking", result["blocking"], fields.get("blocking")),
            ("batch", result.get("batch"), fields.get("batch")),
        ]
    if result["step"] == "views":
        return [
            ("environment", result["environment"], fields.get("environment")),
            ("swapped", result["swapped"], len(fields.get("views", ()))),
            ("dropped", result["dropped"], len(fields.get("drop", ()))),
        ]
    if result["step"] == "drop":
        asked = set(fields.get("schemas", ()))
        return [
            ("views", result["views"], len(fields.get("views", ()))),
            ("tables", result["tables"], len(fields.get("tables", ()))),
            ("schemas", result["schemas"], [s for s in result["schemas"] if s in asked]),
        ]
    if result["step"] == "unit_test":
        return [("name", result["name"], fields.get("name"))]
    if result["step"] == "inspect":
        return [
            ("views", [v["name"] for v in result["views"]], list(fields.get("views", ()))),
            (
                "tables",
                [t["name"] for t in result["tables"]],
                [t.get("table") for t in fields.get("tables", ())],
            ),
        ]
    if result["step"] == "table_diff" and "name" in result:
        # As the diff names them: its labels default to the tables, its keys are the
        # step's, each once, in lower case.
        keys = [str(k).lower() for k in fields.get("keys", ())]
        return [
            ("name", result["name"], fields.get("name")),
            ("source_table", result["source_table"], fields.get("source")),
            ("target_table", result["target_table"], fields.get("target")),
            ("source", result["source"], fields.get("source_label") or fields.get("source")),
            ("target", result["target"], fields.get("target_label") or fields.get("target")),
            ("keys", [k.lower() for k in result["keys"]], list(dict.fromkeys(keys))),
        ]
    return []


def _skip_claims(outcome: SkipOutcome | None, check: Any) -> list[tuple[str, object, object]]:
    """A rebuild's outcome against its step's check: the tables it read are the check's,
    and whether it ran is what the rule (:func:`sluice.core.skip.decide`) says of the
    versions it reports (a driver cannot skip what changed and say it did not)."""
    if outcome is None:
        return []
    if check is None:
        return [("skip", "an outcome", "no check")]
    from sluice.core.skip_rule import decide, seen_of

    read = {str(t): v for t, v in outcome["inputs"]}
    rule = decide(str(check["key"]), seen_of(check.get("last")), read).ran
    return [
        ("inputs", sorted(read), sorted(check.get("inputs", ()))),
        ("ran", outcome["ran"], rule),
    ]


def _row_limit(step: Any) -> int | None:
    if step.get("type") == "query":
        return int(step.get("limit", MAX_ROWS))
    if step.get("type") == "sql":
        return int(step.get("limit", SQL_LIMIT))
    return None
