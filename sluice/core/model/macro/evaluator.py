"""Evaluate SQLMesh macros on a parsed tree (pure).

The tree comes from :func:`sluice.core.model.macro.lexer.lex` then sqlglot. Calls run the
operator registered under their name (``registry.OPERATORS``) or a function a ``@DEF``
bound; ``@name`` takes the value of a ``@DEF``, a lambda argument or a config variable.
The date macros and ``@this_model`` stay as placeholders: they are filled in when the
model runs, so a model's fingerprint never depends on the run's dates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from sluice.core.errors import ModelError
from sluice.core.model.macro import clause, constant, external, lexer
from sluice.core.model.macro.registry import OPERATORS, MacroError, Result
from sluice.core.model.scan import LineIndex

_TIME_SUFFIXES = ("ds", "ts", "tstz", "date", "dt", "dtntz", "epoch", "millis", "hour")
TIME_VARIABLES = frozenset(
    f"{prefix}_{suffix}" for prefix in ("start", "end", "execution") for suffix in _TIME_SUFFIXES
)
RUNTIME_VARIABLES = TIME_VARIABLES | {"this_model"}

MAX_DEPTH = 40
"""Macro calls nested deeper than this (a @DEF function calling itself) are refused."""
MAX_NODES = 200_000
"""A query growing past this many nodes (nested @EACH over long lists) is refused."""

ColumnsOf = Callable[[str], Sequence[tuple[str, str]] | None]
"""(name, Spark type) columns of a table, or None when unknown; a type may be "" (unknown).

The callable may also have an ``unknown_hint(table) -> str`` method saying why a table's
columns are unknown and how to make them known (the loader's does)."""


@dataclass
class MacroEnv:
    """What macros may see: the file, its dialect, config variables, known columns."""

    path: str = "<sql>"
    dialect: str = "spark"
    variables: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    """The text macros were lexed from (for file:line of errors)."""
    line_offset: int = 0
    """Lines of the file before ``source``."""
    lexed: lexer.Lexed | None = None
    columns_of: ColumnsOf | None = None
    keep_unknown: bool = False
    """Leave an unknown ``@name`` as a placeholder (an audit's argument) instead of failing."""
    max_depth: int = MAX_DEPTH
    max_nodes: int = MAX_NODES


class Evaluator:
    """Expands the macros of one model, audit or header value."""

    def __init__(self, env: MacroEnv) -> None:
        self.env = env
        self.scopes: list[dict[str, exp.Expr]] = [{}]
        self.bare: list[frozenset[str]] = [frozenset()]
        """Names of lambda arguments in scope: a bare column of that name is the argument."""
        self.depth = 0
        self.nodes = 0
        self.used_columns = False
        if env.lexed is not None and env.lexed.source:
            env.source = env.lexed.source
        self._lines = LineIndex(env.source)
        self._variables = {str(k).lower(): v for k, v in env.variables.items()}
        self._site: tuple[int, int] | None = None
        self.clause_source: lexer.Lexed | None = env.lexed
        """The text whose clause operators (``Lexed.clauses``) the markers number."""
        self.clauses_seen: set[int] = set()

    # -- errors ----------------------------------------------------------------------

    def fail(
        self, message: str, hint: str | None = None, site: lexer.Site | None = None
    ) -> ModelError:
        line: int | None = None
        col: int | None = None
        if site is not None and self.env.source:
            line, col = self._lines.position(site.start)
            line += self.env.line_offset
        elif self._site is not None:
            line, col = self._site
        return ModelError(message, path=self.env.path, line=line, col=col, hint=hint)

    def _name_site(self, name: str) -> lexer.Site | None:
        if self.env.lexed is None:
            return None
        return next((s for s in self.env.lexed.names if s.name == name.lower()), None)

    # -- statements ------------------------------------------------------------------

    def statements(self, statements: Sequence[exp.Expr]) -> list[exp.Expr]:
        """Run ``@DEF`` statements (binding their names) and expand the rest."""
        out: list[exp.Expr] = []
        written = clause.markers(self, statements)
        for statement in statements:
            call = self._call_name(statement)
            if call is not None and call[1].upper() == "DEF":
                self._define(statement, call[0])
                continue
            result = self.expand(statement)
            out.extend(self._as_list(result))
        clause.check_all_placed(self, written)
        return out

    def _define(self, node: exp.Expr, index: int) -> None:
        site = self._call_site(index)
        args = list(node.expressions)
        if len(args) != 2:
            raise self.fail(
                f"@DEF takes a name and a value, got {len(args)} arguments",
                "write @DEF(name, value);",
                site,
            )
        target = args[0]
        if not isinstance(target, exp.Column) or target.table:
            raise self.fail(
                f"@DEF: '{target.sql()}' is not a name",
                "write @DEF(name, value); with a plain name",
                site,
            )
        name = target.name.lower()
        if name.startswith(lexer.PREFIX):
            name = name[len(lexer.PREFIX) :]
        value = args[1]
        if not isinstance(value, exp.Lambda):
            expanded = self.expand(value)
            value = self._one(expanded, "@DEF", site)
        self.scopes[0][name] = value

    # -- the walk --------------------------------------------------------------------

    def expand(self, node: exp.Expr) -> Result:
        """``node`` with its macros evaluated: one expression, several, or none."""
        if node.comments:
            index = clause.marker(node)
            if index is not None and not clause.kept(self, node, index):
                return None
        call = self._call_name(node)
        if call is not None and isinstance(node, exp.Anonymous):
            return self.call(node, call[0], call[1])
        if isinstance(node, exp.Column) and not node.table:
            name = node.name
            if name.lower().startswith(lexer.PREFIX):
                return self.variable(name[len(lexer.PREFIX) :].lower())
            if node.this and not node.this.quoted and name.lower() in self.bare[-1]:
                return self.lookup(name.lower())
        if (
            isinstance(node, exp.Table)
            and node.name.lower().startswith(lexer.PREFIX)
            and not node.db
        ):
            return self._table_variable(node)
        if isinstance(node, exp.Literal) and node.is_string and lexer.EMBED_START in node.name:
            # A double-quoted "...@{x}..." is a string in dialects such as Spark.
            text = lexer.EMBEDDED.sub(lambda m: self.text(m.group(1).lower()), node.name)
            return exp.Literal.string(text)
        if isinstance(node, exp.Anonymous) and str(node.this).lower() == lexer.ALIAS_FN:
            return self._alias(node)
        if isinstance(node, exp.Identifier):
            if (
                not node.quoted
                and node.name.lower() in self.bare[-1]
                and not isinstance(node.parent, exp.Column | exp.Table | exp.Dot)
            ):
                if isinstance(node.parent, exp.Alias | exp.TableAlias):
                    return exp.to_identifier(self.text(node.name.lower()))
                return self.lookup(node.name.lower())
            return self._identifier(node)
        for key, value in list(node.args.items()):
            if isinstance(value, list):
                items: list[Any] = []
                for item in value:
                    if isinstance(item, exp.Expr):
                        items.extend(self._as_list(self.expand(item)))
                    else:
                        items.append(item)
                node.set(key, items)
            elif isinstance(value, exp.Expr):
                result = self.expand(value)
                if result is None:
                    if key == "this" and not isinstance(node, exp.Query):
                        return None
                    if isinstance(node, exp.Connector):
                        other = node.expression if key == "this" else node.this
                        return self.expand(other) if other is not None else None
                    node.set(key, None)
                elif isinstance(result, list):
                    if len(result) == 1:
                        node.set(key, result[0])
                    elif isinstance(node, exp.Paren | exp.Tuple):
                        return exp.Tuple(expressions=result)
                    elif not result:
                        node.set(key, None)
                    else:
                        raise self.fail(
                            f"a macro gives {len(result)} expressions where SQL takes one: "
                            + ", ".join(r.sql(self.env.dialect) for r in result[:3]),
                            "use it in a list (SELECT columns, IN (...), [...]) or combine "
                            "the values with @REDUCE",
                        )
                else:
                    node.set(key, result)
        return node

    def _alias(self, node: exp.Anonymous) -> Result:
        body, name = node.expressions
        value = self._one(self.expand(body), "an aliased expression")
        target = self._one(self.expand(name), "an alias")
        if isinstance(target, exp.Literal):
            alias = str(target.this)
        elif isinstance(target, exp.Column | exp.Identifier):
            alias = target.name
        else:
            alias = target.sql(self.env.dialect)
        return exp.alias_(value, alias)

    def _as_list(self, result: Result) -> list[exp.Expr]:
        if result is None:
            return []
        return result if isinstance(result, list) else [result]

    def _one(self, result: Result, what: str, site: lexer.Site | None = None) -> exp.Expr:
        items = self._as_list(result)
        if len(items) != 1:
            raise self.fail(
                f"{what} needs one value, got {len(items)}",
                "pass a single expression",
                site,
            )
        return items[0]

    # -- names -----------------------------------------------------------------------

    def lookup(self, name: str) -> exp.Expr | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name].copy()
        return None

    def variable(self, name: str) -> Result:
        """The value of ``@name``."""
        value = self.lookup(name)
        if value is not None:
            return self.expand(value) if not isinstance(value, exp.Lambda) else value
        if name in RUNTIME_VARIABLES:
            return exp.column(lexer.PREFIX + name)
        if name in self._variables:
            return constant.to_expression(self._variables[name])
        if self.env.keep_unknown:
            return exp.column(lexer.PREFIX + name)
        raise self._unknown_variable(name)

    def _unknown_variable(self, name: str) -> ModelError:
        return self.fail(
            f"unknown macro @{name}",
            "Sluice supports @start_ds/@end_ds, @start_date, @start_ts, @execution_ds "
            "(and the other date forms), @this_model, @VAR('name') and the config's "
            "variables; a @DEF or a Python macro defines a name before it is used",
            self._name_site(name),
        )

    def text(self, name: str) -> str:
        """``@name`` as text inside a name (``col_@x``)."""
        if name in RUNTIME_VARIABLES:
            raise self.fail(
                f"@{name} is known only when the model runs; it cannot be part of a name",
                "use it as a value, e.g. WHERE ds = @start_ds",
                self._name_site(name),
            )
        result = self.variable(name)
        value = self._one(result, f"@{name} in a name", self._name_site(name))
        if isinstance(value, exp.Literal):
            return str(value.this)
        if isinstance(value, exp.Column | exp.Identifier | exp.Table):
            return value.sql(self.env.dialect).replace('"', "").replace("`", "")
        if isinstance(value, exp.Boolean):
            return "true" if value.this else "false"
        return value.sql(self.env.dialect)

    def _identifier(self, node: exp.Identifier) -> exp.Expr:
        name = node.name
        if name.lower().startswith(lexer.PREFIX):
            return exp.to_identifier(
                self.text(name[len(lexer.PREFIX) :].lower()), quoted=node.quoted
            )
        if lexer.EMBED_START in name.lower():
            replaced = lexer.EMBEDDED.sub(lambda m: self.text(m.group(1).lower()), name)
            return exp.to_identifier(replaced, quoted=node.quoted)
        return node

    def _table_variable(self, node: exp.Table) -> exp.Expr:
        name = node.name[len(lexer.PREFIX) :].lower()
        if name in RUNTIME_VARIABLES or (
            self.env.keep_unknown and self.lookup(name) is None and name not in self._variables
        ):
            return node
        value = self._one(self.variable(name), f"@{name} as a table", self._name_site(name))
        if isinstance(value, exp.Literal) and value.is_string:
            table = exp.to_table(str(value.this), dialect=self.env.dialect)
        elif isinstance(value, exp.Column):
            table = exp.to_table(value.sql(self.env.dialect), dialect=self.env.dialect)
        elif isinstance(value, exp.Table):
            table = value
        else:
            raise self.fail(
                f"@{name} is {value.sql(self.env.dialect)}, not a table name",
                "give it a table name such as schema.table",
                self._name_site(name),
            )
        if node.alias:
            table.set("alias", node.args["alias"])
        return table

    # -- calls -----------------------------------------------------------------------

    def _call_name(self, node: exp.Expr) -> tuple[int, str] | None:
        if not isinstance(node, exp.Anonymous) or not isinstance(node.this, str):
            return None
        match = lexer.FN_NAME.match(node.this)
        if match is None:
            return None
        return int(match.group(1)), match.group(2)

    def _call_site(self, index: int) -> lexer.Site | None:
        if self.env.lexed is None or index >= len(self.env.lexed.calls):
            return None
        return self.env.lexed.calls[index]

    def call(self, node: exp.Anonymous, index: int, name: str) -> Result:
        site = self._call_site(index)
        self.depth += 1
        try:
            if self.depth > self.env.max_depth:
                raise self.fail(
                    f"macros nest more than {self.env.max_depth} deep (at @{name})",
                    "a @DEF function probably calls itself; macros cannot recurse",
                    site,
                )
            try:
                result = self._run(node, name, site)
            except MacroError as exc:
                raise self.fail(exc.message, exc.hint, site) from None
            self._count(result, name, site)
            return result
        finally:
            self.depth -= 1

    def _run(self, node: exp.Anonymous, name: str, site: lexer.Site | None) -> Result:
        args = list(node.expressions)
        bound = self.lookup(name.lower())
        if isinstance(bound, exp.Lambda):
            values = [self._one(self.expand(a), f"an argument of @{name}", site) for a in args]
            return self.apply(bound, values, f"@{name}")
        op = OPERATORS.get(name.upper())
        python = external.ACTIVE.get()
        if op is None and python is not None and name.lower() in python.names:
            return self._external(python, node, name, site)
        if op is None:
            if name.upper() in lexer.CLAUSE_KEYWORDS:
                raise MacroError(
                    f"@{name.upper()}'s parenthesis is never closed",
                    f"write @{name.upper()}(condition) followed by the clause",
                )
            known = ", ".join(f"@{n}" for n in sorted(OPERATORS))
            raise MacroError(
                f"unknown macro @{name}",
                f"the macros Sluice knows are {known}, @DEF functions, the date variables "
                "and the Python macros of macros/*.py (registered with @macro())",
            )
        bound_args, rest = op.bind(args)
        return op.run(self, bound_args, rest)

    def _external(
        self, python: external.External, node: exp.Anonymous, name: str, site: lexer.Site | None
    ) -> Result:
        """A Python macro: its arguments expanded here, sent as SQL, its SQL parsed back."""
        dialect = self.env.dialect
        args: list[str] = []
        kwargs: dict[str, str] = {}
        for arg in node.expressions:
            if isinstance(arg, exp.PropertyEQ | exp.Kwarg):
                value = self._one(self.expand(arg.expression), f"an argument of @{name}", site)
                kwargs[arg.this.name.lower()] = value.sql(dialect)
            else:
                args.append(
                    self._one(self.expand(arg), f"an argument of @{name}", site).sql(dialect)
                )
        out: list[exp.Expr] = []
        for text in python.call(name, args, kwargs, dialect):
            try:
                out.append(sqlglot.parse_one(text, read=dialect))
            except (ParseError, TokenError) as exc:
                raise MacroError(
                    f"@{name} returned SQL that does not parse ({dialect}): {text[:200]!r}: "
                    f"{str(exc).splitlines()[0]}",
                    "return a sqlglot expression, or SQL text of one expression",
                ) from None
        return out[0] if len(out) == 1 else (out or None)

    def _count(self, result: Result, name: str, site: lexer.Site | None) -> None:
        for item in self._as_list(result):
            self.nodes += sum(1 for _ in item.walk())
        if self.nodes > self.env.max_nodes:
            raise self.fail(
                f"macros expand to more than {self.env.max_nodes} SQL nodes (at @{name})",
                "the expansion is too large; shorten the lists given to @EACH",
                site,
            )

    # -- helpers for operators -------------------------------------------------------

    def value(self, node: exp.Expr | None, what: str = "argument") -> exp.Expr:
        """One expanded expression."""
        if node is None:
            raise MacroError(f"{what} is missing")
        result = self.expand(node.copy())
        items = self._as_list(result)
        if len(items) != 1:
            raise MacroError(f"{what} must be one expression, got {len(items)}")
        return items[0]

    def items(self, node: exp.Expr, what: str = "the list") -> list[exp.Expr]:
        """An expanded list argument: ``[a, b]``, ``(a, b)``, or a macro giving several."""
        result = self.expand(node.copy())
        if isinstance(result, list):
            return result
        if result is None:
            return []
        if isinstance(result, exp.Array | exp.Tuple):
            return list(result.expressions)
        if isinstance(result, exp.Paren):
            return [result.this]
        return [result]

    def constant(self, node: exp.Expr | None, what: str) -> Any:
        """The Python value of an argument that must be known when the model loads."""
        value = self.value(node, what)
        try:
            return constant.evaluate(value)
        except constant.NotConstant as exc:
            runtime = [
                c.name[len(lexer.PREFIX) :]
                for c in value.find_all(exp.Column)
                if c.name.lower().startswith(lexer.PREFIX)
            ]
            if runtime:
                raise MacroError(
                    f"{what} uses @{runtime[0]}, known only when the model runs",
                    "Sluice evaluates macros when it loads the model; compare the dates in "
                    "the SQL instead, e.g. CASE WHEN @start_ds > '2024-01-01' THEN ... END",
                ) from None
            raise MacroError(
                f"{what} must be evaluable when the model loads; "
                f"'{exc.node.sql(self.env.dialect)}' is not",
                "use literals, macro variables and operators such as =, <, AND, IN, BETWEEN",
            ) from None

    def truth(self, node: exp.Expr | None, what: str) -> bool:
        value = self.constant(node, what)
        if value is None or isinstance(value, bool):
            return bool(value)
        raise MacroError(f"{what} must be TRUE or FALSE, got {value!r}", "write a comparison")

    def apply(self, function: exp.Expr, args: Sequence[exp.Expr], what: str) -> Result:
        """Call a lambda ``x -> ...`` or ``(x, y) -> ...`` with ``args``."""
        if not isinstance(function, exp.Lambda):
            raise MacroError(
                f"{what} needs a function such as x -> x + 1, got {function.sql(self.env.dialect)}",
                "write a lambda: name -> expression, or (a, b) -> expression",
            )
        params = [p.name.lower() for p in function.expressions]
        if len(params) != len(args):
            raise MacroError(
                f"{what}: the function takes {len(params)} argument"
                f"{'s' if len(params) != 1 else ''}, given {len(args)}",
                "match the names left of -> to the values passed",
            )
        self.depth += 1
        if self.depth > self.env.max_depth:
            raise MacroError(
                f"macros nest more than {self.env.max_depth} deep (in {what})",
                "a @DEF function probably calls itself; macros cannot recurse",
            )
        self.scopes.append(dict(zip(params, (a.copy() for a in args), strict=True)))
        self.bare.append(self.bare[-1] | frozenset(params))
        try:
            return self.expand(function.this.copy())
        finally:
            self.scopes.pop()
            self.bare.pop()
            self.depth -= 1

    def columns(self, relation: exp.Expr, op: str) -> list[tuple[str, str]]:
        """The (name, type) columns of a relation, as the loader knows them: a model's
        declared columns, a seed's, an external table's, or an upstream query's output."""
        name = (
            relation.sql("spark").replace("`", "").lower()
            if not isinstance(relation, exp.Literal)
            else str(relation.this).lower()
        )
        known = self.env.columns_of
        found = known(name) if known is not None else None
        if not found:
            why = getattr(known, "unknown_hint", None)
            raise MacroError(
                f"@{op} needs the columns of {name}, which Sluice does not know",
                why(name)
                if callable(why)
                else f"declare {name}'s columns: `columns (...)` in its MODEL, or `columns:` "
                "in external_models.yaml",
            )
        self.used_columns = True
        return [(c.lower(), t) for c, t in found]

    def parse(self, sql: str, what: str) -> exp.Expr:
        """Parse SQL text given to a macro (``@SQL``), expanding macros inside it."""
        lexed = lexer.lex(sql)
        try:
            parsed = sqlglot.parse_one(lexed.text, read=self.env.dialect)
        except (ParseError, TokenError) as exc:
            raise MacroError(
                f"{what}: cannot parse '{sql}': {str(exc).splitlines()[0]}",
                f"write SQL of the model's dialect ({self.env.dialect})",
            ) from None
        # Calls inside the text have their own numbering: they point at the @SQL call.
        saved = self.env.lexed, self.clause_source, self.clauses_seen
        self.env.lexed, self.clause_source, self.clauses_seen = None, lexed, set()
        try:
            written = clause.markers(self, [parsed])
            result = self._one(self.expand(parsed), what)
            clause.check_all_placed(self, written)
            return result
        finally:
            self.env.lexed, self.clause_source, self.clauses_seen = saved
