"""The ``unit_test`` step: fixed input rows as temp views, the model's query, a comparison.

A failing test is a result, not a crash: the step returns ``passed: False`` and a diff,
also when the query itself does not run. As in SQLMesh, only the columns the expected
rows name are compared, rows in any order.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from sluice.core.model.pycode import run as pycode_run
from sluice.core.spark.results import UnitTestResult
from sluice.core.spark.spec import UnitTestInput, UnitTestPython, UnitTestStep
from sluice.core.spark.steps.context import StepContext, spark_error
from sluice.core.spark.steps.query import collect_json
from sluice.core.timeutil import to_datetime

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession
    from pyspark.sql.types import DataType

MAX_LISTED = 20  # rows listed per kind of problem; the rest are counted
MAX_TABLE = 30  # rows beyond which the side-by-side table is left out
_NUMERIC = re.compile(r"^(tinyint|smallint|int|bigint|float|double|decimal.*)$")


def run_unit_test(spark: SparkSession, step: UnitTestStep, ctx: StepContext) -> UnitTestResult:
    """Run one test rendered by :func:`sluice.core.spark.testing.unit_test_step`.

    Returns:
        Its name, whether it passed, the diff (empty when it passed), its notes.
    """
    lines: list[str] = []
    created: list[str] = []
    try:
        for spec in step["inputs"]:
            try:
                _create_view(spark, spec)
            except Exception as exc:  # bad input values are the test's problem
                lines.append(f"input {spec['table']}: {_first_lines(spark_error(exc))}")
                break
            created.append(spec["view"])
        else:
            if "python" in step:
                failure = _run_python(spark, step["model"], step["python"])
                if failure:
                    lines.append(failure)
                else:
                    created.append(step["python"]["view"])
            checks = [("", step["query"], step["expected"])] if step["expected"] is not None else []
            checks = [] if lines else checks
            checks += [(f"CTE {c['name']}: ", c["query"], c["expected"]) for c in step["ctes"]]
            for prefix, sql, expected in checks:
                try:
                    columns, types, rows = collect_json(spark.sql(sql))
                except Exception as exc:  # a broken model fails its test
                    lines.append(f"{prefix}the query failed: {_first_lines(spark_error(exc))}")
                    continue
                found = compare_rows(expected, columns, types, rows, grain=step.get("grain", ()))
                lines += [prefix + line for line in found]
    finally:
        for view in created:
            spark.catalog.dropTempView(view)
    passed = not lines
    diff = ""
    if not passed:
        header = f"{step['name']} ({step['path']}:{step['line']}) FAILED"
        diff = "\n".join([header, *("  " + line for line in "\n".join(lines).splitlines())])
    return {
        "step": "unit_test",
        "name": step["name"],
        "passed": passed,
        "diff": diff,
        "notes": step.get("notes", []),
    }


def _run_python(spark: SparkSession, model: str, run: UnitTestPython) -> str | None:
    """Run a Python model's function on the test's inputs into ``run["view"]``; the
    first lines of its error when it fails (a broken model fails its test)."""
    try:
        rows = pycode_run.frame(
            spark,
            model,
            run["model"],
            to_datetime(run["start"]),
            to_datetime(run["end"]),
            to_datetime(run["execution"]),
        )
        rows.createOrReplaceTempView(run["view"])
    except Exception as exc:
        return f"the model's function failed: {_first_lines(spark_error(exc))}"
    return None


def _first_lines(text: str, count: int = 6) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[:count] + (["..."] if len(lines) > count else []))


def _create_view(spark: SparkSession, spec: UnitTestInput) -> None:
    """A temp view of the input rows with the declared column types.

    Numbers, booleans and strings go in as Python values of their type; dates and
    timestamps as ISO strings cast by Spark (in the session time zone); arrays, maps and
    structs as JSON read back with ``from_json``.
    """
    from pyspark.sql import functions as sf
    from pyspark.sql.types import (
        BooleanType,
        DataType,
        DecimalType,
        FractionalType,
        IntegralType,
        StringType,
        StructField,
        StructType,
    )

    fields: list[StructField] = []
    columns: list[Column] = []
    converters: list[Callable[[Any], Any]] = []
    for i, (name, ddl) in enumerate(spec["columns"]):
        dtype = DataType.fromDDL(ddl)
        staged = f"_c{i}"
        column: Column = sf.col(staged)
        if isinstance(dtype, IntegralType | FractionalType | DecimalType | BooleanType):
            converters.append(_converter(dtype))
        elif type(dtype) is StringType:
            converters.append(_to_string)
        else:
            complex_ = _is_complex(dtype)
            converters.append(_to_json if complex_ else _to_string)
            column = sf.from_json(column, ddl) if complex_ else column.cast(ddl)
            dtype = StringType()
        fields.append(StructField(staged, dtype, nullable=True))
        columns.append(column.alias(name))
    rows = []
    for number, values in enumerate(spec["rows"], start=1):
        row = []
        for (name, ddl), convert, value in zip(spec["columns"], converters, values, strict=True):
            try:
                row.append(None if value is None else convert(value))
            except (ValueError, TypeError, InvalidOperation):
                raise ValueError(f"row {number}, {name}: {value!r} is not a {ddl}") from None
        rows.append(tuple(row))
    df = spark.createDataFrame(rows, StructType(fields))
    df.select(*columns).createOrReplaceTempView(spec["view"])


def _converter(dtype: DataType) -> Callable[[Any], Any]:
    from pyspark.sql.types import BooleanType, DecimalType, IntegralType

    if isinstance(dtype, BooleanType):
        return _to_bool
    if isinstance(dtype, DecimalType):
        return lambda v: Decimal(str(v))
    if isinstance(dtype, IntegralType):
        return _to_int
    return _to_float


def _to_int(value: Any) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(value)
    return int(value)


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(value)
    return float(value)


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false", "1", "0"):
        raise ValueError(value)
    return text in ("true", "1")


def _to_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value)
    return str(value)


def _to_json(value: Any) -> str:
    return json.dumps(value)


def _is_complex(dtype: DataType) -> bool:
    from pyspark.sql.types import ArrayType, MapType, StructType

    return isinstance(dtype, ArrayType | MapType | StructType)


# --- comparison (pure) ---


def compare_rows(
    expected: Sequence[dict[str, Any]],
    columns: Sequence[str],
    types: Sequence[str],
    rows: Sequence[Sequence[Any]],
    grain: Sequence[str] = (),
) -> list[str]:
    """What differs between the expected rows and the query's, as lines; [] when equal.

    Only the columns the expected rows name are compared; rows match in any order. A row
    that differs is reported column by column when a row of the other side has the same
    ``grain`` values (without a compared grain: agrees on most columns, or is the only
    one left); otherwise it is a missing or unexpected row.
    Numbers match within a relative 1e-9 or when the actual value rounds to the expected
    one at the precision written (15.33 matches 15.3333); dates and timestamps compare
    as ISO text; null matches only null.
    """
    lines: list[str] = []
    index: dict[str, int] = {}
    for i, name in enumerate(columns):
        index.setdefault(name.lower(), i)
    # No expected rows name no columns: then unexpected rows are shown whole.
    wanted = list(dict.fromkeys(key for row in expected for key in row)) or list(index)
    absent = [c for c in wanted if c not in index]
    if absent:
        lines.append(
            f"column {', '.join(absent)} not in the query's output "
            f"(it returns: {', '.join(columns) or 'nothing'})"
        )
    cols = [c for c in wanted if c in index]
    kinds = [_kind(types[index[c]]) for c in cols]
    exp_rows = [tuple(row.get(c) for c in cols) for row in expected]
    act_rows = [tuple(row[index[c]] for c in cols) for row in rows]
    if len(exp_rows) != len(act_rows):
        lines.append(f"expected {len(exp_rows)} rows, got {len(act_rows)}")

    def same(e: tuple[Any, ...], a: tuple[Any, ...]) -> list[bool]:
        return [_same(x, y, k) for x, y, k in zip(e, a, kinds, strict=True)]

    order = sorted(range(len(exp_rows)), key=lambda i: _sort_key(exp_rows[i]))
    left = sorted(range(len(act_rows)), key=lambda j: _sort_key(act_rows[j]))
    matched: list[tuple[int, int]] = []
    for i in order:
        j = next((j for j in left if all(same(exp_rows[i], act_rows[j]))), None)
        if j is not None:
            left.remove(j)
            matched.append((i, j))
    missing = [i for i in order if i not in {m[0] for m in matched}]
    paired: list[tuple[int, int]] = []
    keys = [k for k, c in enumerate(cols) if c in {g.lower() for g in grain}]

    def counterpart(e: tuple[Any, ...], a: tuple[Any, ...]) -> int:
        """How well ``a`` pairs with ``e`` (0: not at all)."""
        equal = same(e, a)
        if keys:
            return sum(equal) + 1 if all(equal[k] for k in keys) else 0
        alone = len(missing) == len(left) == 1  # the one row left must be the one meant
        return sum(equal) + 1 if alone or 2 * sum(equal) >= len(cols) else 0

    for i in list(missing):
        scores = [(counterpart(exp_rows[i], act_rows[j]), j) for j in left]
        best = max(scores, key=lambda s: s[0], default=(0, -1))
        if best[0] > 0:
            paired.append((i, best[1]))
            left.remove(best[1])
            missing.remove(i)
    for i, j in sorted(paired):
        wrong = [
            f"{c}: expected {_show(e)}, got {_show(a)}"
            for c, e, a, ok in zip(
                cols, exp_rows[i], act_rows[j], same(exp_rows[i], act_rows[j]), strict=True
            )
            if not ok
        ]
        lines.append(f"row {i + 1}: " + "; ".join(wrong))
    lines += _listed("missing row", [_show_row(cols, exp_rows[i]) for i in sorted(missing)])
    lines += _listed("unexpected row", [_show_row(cols, act_rows[j]) for j in left])
    if lines and cols and len(exp_rows) + len(act_rows) <= MAX_TABLE:
        table = [(" ", exp_rows[i]) for i, _ in sorted(matched)]
        for i, j in sorted(paired):
            table += [("-", exp_rows[i]), ("+", act_rows[j])]
        table += [("-", exp_rows[i]) for i in sorted(missing)] + [("+", act_rows[j]) for j in left]
        lines.append("expected (-) and actual (+) rows:")
        lines += _table(cols, table)
    return lines


def _kind(spark_type: str) -> str:
    if _NUMERIC.match(spark_type):
        return "number"
    if spark_type in ("date", "timestamp", "timestamp_ntz"):
        return spark_type.removesuffix("_ntz")
    return "other"


def _same(expected: Any, actual: Any, kind: str) -> bool:
    if expected is None or actual is None:
        return expected is None and actual is None
    if kind == "number" or (_is_number(expected) and _is_number(actual)):
        return _same_number(expected, actual)
    if kind in ("date", "timestamp"):
        return _time_text(expected, kind) == _time_text(actual, kind)
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(
            _same(v, actual[k], "other") for k, v in expected.items()
        )
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(
            _same(e, a, "other") for e, a in zip(expected, actual, strict=True)
        )
    if isinstance(expected, str) != isinstance(actual, str):
        return _text(expected) == _text(actual)  # `1` expected of a STRING column
    return bool(expected == actual)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def _same_number(expected: Any, actual: Any) -> bool:
    try:
        e, a = float(expected), float(actual)
    except (TypeError, ValueError):
        return _text(expected) == _text(actual)
    if math.isnan(e) or math.isnan(a):
        return math.isnan(e) and math.isnan(a)
    if e == a or math.isclose(e, a, rel_tol=1e-9, abs_tol=1e-12):
        return True
    written = str(expected)
    digits = len(written.split(".", 1)[1]) if "." in written and "e" not in written.lower() else 0
    return digits > 0 and not e.is_integer() and round(a, digits) == round(e, digits)


def _time_text(value: Any, kind: str) -> str:
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed.date().isoformat() if kind == "date" else parsed.isoformat(sep=" ")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _sort_key(row: tuple[Any, ...]) -> tuple[tuple[bool, str], ...]:
    return tuple((v is None, "" if v is None else _text(v)) for v in row)


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value)
    return _text(value)


def _show_row(cols: Sequence[str], row: tuple[Any, ...]) -> str:
    return "{" + ", ".join(f"{c}: {_show(v)}" for c, v in zip(cols, row, strict=True)) + "}"


def _listed(label: str, rows: list[str]) -> list[str]:
    lines = [f"{label}: {row}" for row in rows[:MAX_LISTED]]
    if len(rows) > MAX_LISTED:
        lines.append(f"... and {len(rows) - MAX_LISTED} more {label}s")
    return lines


def _table(cols: Sequence[str], rows: list[tuple[str, tuple[Any, ...]]]) -> list[str]:
    cells = [list(cols)] + [[_show(v) for v in row] for _, row in rows]
    widths = [max(len(r[k]) for r in cells) for k in range(len(cols))]
    marks = [" "] + [mark for mark, _ in rows]
    return [
        f"{mark} " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for mark, row in zip(marks, cells, strict=True)
    ]
