"""``@DATE_SPINE(datepart, start_date, end_date)``: one row per day/week/month/quarter/year.

Both ends are included; the column is ``date_<datepart>``.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("@DATE_SPINE('month', '2024-01-01', '2024-03-01')")
"SELECT date_month FROM (SELECT EXPLODE(SEQUENCE(CAST('2024-01-01' AS DATE), CAST('2024-03-01' AS DATE), INTERVAL '1' MONTH)) AS date_month) AS _exploded"
"""

from __future__ import annotations

import datetime

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import MacroError, Result, operator, text_of

_STEP = {
    "day": (1, "DAY"),
    "week": (1, "WEEK"),
    "month": (1, "MONTH"),
    "quarter": (3, "MONTH"),
    "year": (1, "YEAR"),
}


@operator("DATE_SPINE", ("datepart", "start_date", "end_date"))
def date_spine(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    part = text_of(ev.value(args["datepart"]), "datepart", "DATE_SPINE").lower()
    if part not in _STEP:
        raise MacroError(
            f"@DATE_SPINE: unknown datepart '{part}'", f"use one of {', '.join(_STEP)}"
        )
    dates = []
    for key in ("start_date", "end_date"):
        text = text_of(ev.value(args[key]), key, "DATE_SPINE")
        try:
            dates.append(datetime.date.fromisoformat(text))
        except ValueError:
            raise MacroError(
                f"@DATE_SPINE: {key} '{text}' is not a date", "write it as 'YYYY-MM-DD'"
            ) from None
    if dates[1] < dates[0]:
        raise MacroError("@DATE_SPINE: end_date is before start_date", "swap them")
    count, unit = _STEP[part]
    column = f"date_{part}"
    sequence = exp.func(
        "SEQUENCE",
        exp.cast(exp.Literal.string(dates[0].isoformat()), "DATE"),
        exp.cast(exp.Literal.string(dates[1].isoformat()), "DATE"),
        exp.Interval(this=exp.Literal.string(str(count)), unit=exp.var(unit)),
    )
    inner = exp.select(exp.alias_(exp.Explode(this=sequence), column))
    return exp.select(column).from_(inner.subquery("_exploded"))
