"""The SQL clause operators ``@WITH``, ``@JOIN``, ``@WHERE``, ``@GROUP_BY``, ``@HAVING``,
``@ORDER_BY`` and ``@LIMIT``: the clause written after them is kept when their condition
is TRUE, and dropped when it is FALSE (or NULL).

The lexer spells ``@WHERE(cond)`` as ``WHERE /*__sluice_clause_<k>__*/``, so sqlglot
parses the clause itself and keeps the comment on its node (a ``Where``, a ``Join``, ...);
the evaluator meets that node and asks :func:`kept`. A ``JOIN``'s side and kind written
before the operator (``LEFT OUTER @JOIN(cond) u ON ...``) belong to the join and go with it.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("@DEF(size, 1); SELECT a FROM t @WHERE(@size > 0) a > @size @LIMIT(1 > 2) 5")
'SELECT a FROM t WHERE a > 1'
>>> expand_sql("SELECT * FROM t LEFT OUTER @JOIN(FALSE) u ON t.id = u.id @ORDER_BY(TRUE) t.id")
'SELECT * FROM t ORDER BY t.id'
>>> expand_sql("@WITH(TRUE) c AS (SELECT 1 AS x) SELECT x FROM c @GROUP_BY(TRUE) x @HAVING(FALSE) x > 1")
'WITH c AS (SELECT 1 AS x) SELECT x FROM c GROUP BY x'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from sluice.core.errors import ModelError
from sluice.core.model.macro import lexer
from sluice.core.model.macro.registry import MacroError

if TYPE_CHECKING:
    from sluice.core.model.macro.evaluator import Evaluator

NODES: dict[str, type[exp.Expr]] = {
    "WITH": exp.With,
    "JOIN": exp.Join,
    "WHERE": exp.Where,
    "GROUP_BY": exp.Group,
    "HAVING": exp.Having,
    "ORDER_BY": exp.Order,
    "LIMIT": exp.Limit,
}
"""The node sqlglot builds for each clause."""


def marker(node: exp.Expr) -> int | None:
    """The ``k`` of the clause operator whose comment ``node`` carries, if any."""
    for comment in node.comments or ():
        match = lexer.CLAUSE_COMMENT.match(comment)
        if match is not None:
            return int(match.group(1))
    return None


def kept(ev: Evaluator, node: exp.Expr, index: int) -> bool:
    """Whether the clause ``node`` stays; its marker comment is removed.

    Raises:
        ModelError: the operator is not in front of its clause, or its condition is not
            a TRUE or FALSE known when the model loads.
    """
    node.comments = [c for c in node.comments or () if not lexer.CLAUSE_COMMENT.match(c)] or None
    source = ev.clause_source
    if source is None or index >= len(source.clauses):
        raise ev.fail(
            "a clause operator comment is in the query but no clause operator was written",
            "do not write comments named __sluice_clause_...__",
        )
    clause = source.clauses[index]
    ev.clauses_seen.add(index)
    keyword = lexer.CLAUSE_KEYWORDS[clause.name]
    if not isinstance(node, NODES[clause.name]):
        raise misplaced(ev, clause)
    what = f"@{clause.name}'s condition"
    if not clause.condition.strip():
        raise ev.fail(
            f"@{clause.name} needs a condition",
            f"write @{clause.name}(condition) {keyword} ..., e.g. @{clause.name}(@flag = 1)",
            clause.site,
        )
    sub = lexer.lex(clause.condition)
    try:
        parsed = sqlglot.parse(sub.text, read=ev.env.dialect)
    except (ParseError, TokenError) as exc:
        raise ev.fail(
            f"{what} does not parse: {str(exc).splitlines()[0]}",
            f"write one SQL condition, e.g. @{clause.name}(@x > 1)",
            clause.site,
        ) from None
    conditions = [p for p in parsed if p is not None]
    if len(conditions) != 1:
        raise ev.fail(
            f"@{clause.name} takes one condition, got {len(conditions)}",
            f"write @{clause.name}(condition) {keyword} ...",
            clause.site,
        )
    # Calls inside the condition have their own numbering: errors point at the operator.
    saved = ev.env.lexed, ev.clause_source
    ev.env.lexed, ev.clause_source = None, sub
    try:
        return ev.truth(conditions[0], what)
    except MacroError as exc:
        raise ev.fail(exc.message, exc.hint, clause.site) from None
    except ModelError as exc:
        if exc.line is not None:
            raise
        raise ev.fail(exc.message, exc.hint, clause.site) from None
    finally:
        ev.env.lexed, ev.clause_source = saved


def misplaced(ev: Evaluator, clause: lexer.Clause) -> Exception:
    keyword = lexer.CLAUSE_KEYWORDS[clause.name]
    return ev.fail(
        f"@{clause.name}(...) is not in front of a {keyword} clause of a query",
        f"write it where the {keyword} keyword would stand, e.g. "
        + (
            "SELECT * FROM t LEFT @JOIN(@flag) u ON t.id = u.id"
            if clause.name == "JOIN"
            else "@WITH(@flag) c AS (SELECT ...) SELECT * FROM c"
            if clause.name == "WITH"
            else f"SELECT * FROM t @{clause.name}(@flag) ..."
        ),
        clause.site,
    )


def markers(ev: Evaluator, statements: Sequence[exp.Expr]) -> set[int]:
    """The clause markers of parsed statements, before any macro runs."""
    if ev.clause_source is None or not ev.clause_source.clauses:
        return set()
    return {
        index
        for statement in statements
        for node in statement.walk()
        if node.comments and (index := marker(node)) is not None
    }


def check_all_placed(ev: Evaluator, written: set[int]) -> None:
    """Every clause operator of the text met its clause. ``written``: the markers the parsed
    text held (one a macro discarded, in an @IF branch not taken, was placed)."""
    source = ev.clause_source
    if source is None:
        return
    for index, clause in enumerate(source.clauses):
        if index not in ev.clauses_seen and index not in written:
            raise misplaced(ev, clause)
