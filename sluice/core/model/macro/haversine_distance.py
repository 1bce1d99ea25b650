"""``@HAVERSINE_DISTANCE(lat1, lon1, lat2, lon2[, unit])``: great-circle distance, 'mi' or 'km'.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("SELECT @HAVERSINE_DISTANCE(y1, x1, y2, x2) AS d FROM t")
'SELECT 7922 * ASIN(SQRT((POWER(SIN(RADIANS((y2 - y1) / 2)), 2)) + (COS(RADIANS(y1)) * COS(RADIANS(y2)) * POWER(SIN(RADIANS((x2 - x1) / 2)), 2)))) * 1.0 AS d FROM t'
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import MacroError, Result, operator, text_of

EARTH_DIAMETER_MI = 7922
_UNITS = {"mi": "1.0", "km": "1.60934"}


def _f(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.func(name, *args)


@operator("HAVERSINE_DISTANCE", ("lat1", "lon1", "lat2", "lon2", "unit"), 4)
def haversine_distance(ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]) -> Result:
    lat1, lon1, lat2, lon2 = (ev.value(args[k], k) for k in ("lat1", "lon1", "lat2", "lon2"))
    unit = text_of(ev.value(args["unit"]), "unit", "HAVERSINE_DISTANCE") if "unit" in args else "mi"
    if unit.lower() not in _UNITS:
        raise MacroError(
            f"@HAVERSINE_DISTANCE: unknown unit '{unit}'", "write 'mi' (miles) or 'km' (kilometres)"
        )

    def half_sin_squared(a: exp.Expr, b: exp.Expr) -> exp.Expr:
        half = exp.Div(
            this=exp.paren(exp.Sub(this=b.copy(), expression=a.copy())),
            expression=exp.Literal.number(2),
        )
        return _f("POWER", _f("SIN", _f("RADIANS", half)), exp.Literal.number(2))

    cosines = exp.Mul(
        this=exp.Mul(
            this=_f("COS", _f("RADIANS", lat1.copy())),
            expression=_f("COS", _f("RADIANS", lat2.copy())),
        ),
        expression=half_sin_squared(lon1, lon2),
    )
    inner = exp.Add(this=exp.paren(half_sin_squared(lat1, lat2)), expression=exp.paren(cosines))
    distance = exp.Mul(
        this=exp.Literal.number(EARTH_DIAMETER_MI), expression=_f("ASIN", _f("SQRT", inner))
    )
    return exp.Mul(this=distance, expression=exp.Literal.number(_UNITS[unit.lower()]))
