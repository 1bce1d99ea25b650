"""The macro operators, by name, and how their arguments are bound (pure).

Each operator lives in its own module, named for it, and registers itself here with
:func:`operator`; :mod:`sluice.core.model.macro` imports them all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp

if TYPE_CHECKING:
    from sluice.core.model.macro.evaluator import Evaluator

Result = exp.Expr | list[exp.Expr] | None


class MacroError(Exception):
    """A macro call is wrong; the evaluator adds the file and line of the call."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message)


@dataclass(frozen=True)
class Operator:
    name: str
    params: tuple[str, ...]
    """Positional parameters, in order (each may also be given as ``name := value``)."""
    required: int
    run: Callable[[Evaluator, dict[str, exp.Expr], list[exp.Expr]], Result]
    varargs: str | None = None
    """Name of the extra positional arguments, when the operator takes any number."""
    min_rest: int = 0
    keywords: tuple[str, ...] = ()
    """Parameters given only as ``name := value``."""
    aliases: tuple[tuple[str, str], ...] = ()
    """Other spellings of keyword arguments: (alias, parameter)."""

    def bind(self, args: Sequence[exp.Expr]) -> tuple[dict[str, exp.Expr], list[exp.Expr]]:
        """Arguments by parameter name, and the extra positional ones."""
        aliases = dict(self.aliases)
        named = [isinstance(a, exp.PropertyEQ | exp.Kwarg) for a in args]
        if any(named) and not all(named[named.index(True) :]):
            raise MacroError(
                f"@{self.name}: a positional argument follows a named one",
                f"put named arguments (name := value) last: {self.usage()}",
            )
        positional = [a for a, n in zip(args, named, strict=True) if not n]
        if len(positional) > len(self.params) and self.varargs is None:
            raise MacroError(
                f"@{self.name} takes at most {len(self.params)} arguments, got {len(positional)}",
                self.usage(),
            )
        bound: dict[str, exp.Expr] = dict(zip(self.params, positional, strict=False))
        rest = positional[len(self.params) :]
        for keyword in (a for a, n in zip(args, named, strict=True) if n):
            key = keyword.this.name.lower()
            key = aliases.get(key, key)
            if key not in self.params and key not in self.keywords:
                raise MacroError(f"@{self.name} has no argument '{key}'", self.usage())
            if key in bound:
                raise MacroError(f"@{self.name}: argument '{key}' is given twice", self.usage())
            bound[key] = keyword.expression
        missing = [p for p in self.params[: self.required] if p not in bound]
        if missing or len(rest) < self.min_rest:
            raise MacroError(
                f"@{self.name} is missing "
                + (
                    f"its {missing[0]}" if missing else f"{self.varargs} (at least {self.min_rest})"
                ),
                self.usage(),
            )
        return bound, rest

    def usage(self) -> str:
        shown = [p if i < self.required else f"[{p}]" for i, p in enumerate(self.params)]
        if self.varargs:
            shown.append(f"{self.varargs}...")
        shown += [f"[{k} := ...]" for k in self.keywords]
        return f"write @{self.name}({', '.join(shown)})"


OPERATORS: dict[str, Operator] = {}

Run = Callable[["Evaluator", dict[str, exp.Expr], list[exp.Expr]], Result]


def operator(
    name: str,
    params: Sequence[str],
    required: int | None = None,
    *,
    varargs: str | None = None,
    min_rest: int = 0,
    keywords: Sequence[str] = (),
    aliases: Sequence[tuple[str, str]] = (),
) -> Callable[[Run], Run]:
    """Register an operator ``@name`` taking ``params`` (the first ``required`` needed)."""

    def register(run: Run) -> Run:
        OPERATORS[name] = Operator(
            name,
            tuple(params),
            len(params) if required is None else required,
            run,
            varargs,
            min_rest,
            tuple(keywords),
            tuple(aliases),
        )
        return run

    return register


def text_of(node: exp.Expr | None, what: str, op: str) -> str:
    """A string argument written as a literal, e.g. ``'ALL'``."""
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this)
    raise MacroError(
        f"@{op}: {what} must be a quoted string, got {node.sql() if node is not None else 'nothing'}",
        f"write {what} in single quotes",
    )


def flag(value: Any, what: str, op: str) -> bool:
    if isinstance(value, bool):
        return value
    raise MacroError(f"@{op}: {what} must be TRUE or FALSE, got {value!r}", "write TRUE or FALSE")
