"""SQLMesh's macro language, evaluated on sqlglot's tree (pure).

Built like sqlglot's optimizer: :mod:`.lexer` spells macros as names sqlglot parses,
:mod:`.evaluator` walks the parsed tree, and each operator (``@EACH``, ``@IF``, ...) is a
module of its own, named for it, registered in :mod:`.registry`.

>>> expand_sql("@DEF(cols, [a, b]); SELECT @EACH(@cols, c -> MAX(c) AS max_@c) FROM t")
'SELECT MAX(a) AS max_a, MAX(b) AS max_b FROM t'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlglot
from sqlglot import exp

from sluice.core.errors import ModelError
from sluice.core.model.macro import (  # noqa: F401  (each registers its operator)
    and_,
    date_spine,
    deduplicate,
    def_,
    each,
    eval_,
    filter_,
    generate_surrogate_key,
    haversine_distance,
    if_,
    or_,
    pivot,
    reduce,
    resolve_template,
    safe_add,
    safe_div,
    safe_sub,
    sql,
    star,
    union,
    var,
)
from sluice.core.model.macro.evaluator import ColumnsOf, Evaluator, MacroEnv
from sluice.core.model.macro.lexer import Lexed, lex
from sluice.core.model.macro.registry import OPERATORS

__all__ = ["OPERATORS", "ColumnsOf", "Evaluator", "Lexed", "MacroEnv", "expand_sql", "lex"]


def expand_sql(
    sql_text: str,
    dialect: str = "spark",
    variables: Mapping[str, Any] | None = None,
    columns: Mapping[str, Sequence[tuple[str, str]]] | None = None,
) -> str:
    """Expand the macros of one query and return it as Spark SQL (for docs and tests).

    Raises:
        ModelError: a macro is wrong, naming the line.
    """
    lexed = lex(sql_text)
    known = {k.lower(): v for k, v in (columns or {}).items()}
    env = MacroEnv(
        dialect=dialect,
        variables=variables or {},
        source=sql_text,
        lexed=lexed,
        columns_of=known.get,
    )
    statements = [s for s in sqlglot.parse(lexed.text, read=dialect) if s is not None]
    out = Evaluator(env).statements(statements)
    if len(out) != 1:
        raise ModelError(f"expected one statement after the macros, got {len(out)}")
    query: exp.Expr = out[0]
    return query.sql("spark")
