"""SQLMesh's built-in audits, as Spark SQL (pure).

Each audit of SQLMesh 0.236.4's ``sqlmesh/core/audit/builtin.py`` is here with the same
name, the same arguments (and defaults) and the same meaning: its query returns the rows
that violate it, and zero rows means it passed. Every one also exists as
``<name>_non_blocking`` (the parser strips the suffix and marks the use non-blocking),
and every one takes ``blocking := false``, as in SQLMesh.

The arguments are pull-request content that reaches SQL, so nothing is pasted as text:
each argument (Spark SQL the header parser wrote, :func:`sluice.core.model.parse._arg_sql`)
is parsed with sqlglot, checked against the kind of value its audit takes (a column is a
column name, a value a literal, a threshold a number...), and the query is built as a
sqlglot tree from those checked trees. A ``${`` anywhere in an argument is refused (Spark
would replace it before parsing the query, see :mod:`.fileaccess`).

Where SQLMesh's own query cannot run as written (``kl_divergence`` joins its two columns
``USING`` the first one's name, so it only runs when both are the same column;
``chi_square`` counts with correlated subqueries), the query here computes the same
statistic in a way Spark runs; the differences are noted at each audit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

# --- argument kinds ---------------------------------------------------------------------


class ArgumentError(ValueError):
    """An argument of a built-in audit is missing, unknown or not of its kind."""

    def __init__(self, message: str, hint: str, argument: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.argument = argument


@dataclass(frozen=True)
class Kind:
    """What an argument must be: described for messages, checked on its parsed tree."""

    description: str
    example: str
    check: Callable[[exp.Expr], str | None]
    """None when the tree is of this kind, else what is wrong with it."""


def _items(tree: exp.Expr) -> list[exp.Expr]:
    """The items of a list argument: ``(a, b)``, ``[a, b]``, ``(a)`` or a lone ``a``."""
    if isinstance(tree, exp.Tuple | exp.Array):
        return list(tree.expressions)
    if isinstance(tree, exp.Paren):
        return [tree.this]
    return [tree]


def _is_column(tree: exp.Expr) -> bool:
    return (
        isinstance(tree, exp.Column)
        and isinstance(tree.this, exp.Identifier)
        and not tree.table
        and bool(tree.name)
    )


def _column_problem(tree: exp.Expr) -> str | None:
    if _is_column(tree):
        return None
    if isinstance(tree, exp.Literal) and tree.is_string:
        return "a string is not a column name: write the name without quotes (or in double quotes)"
    if isinstance(tree, exp.Column | exp.Dot):
        return "name a column of the model alone, without a table or struct before it"
    return "it is not a column name"


def _each_problem(tree: exp.Expr, check: Callable[[exp.Expr], str | None]) -> str | None:
    """What is wrong with a one-or-list argument: empty, or the first item ``check``
    refuses, named."""
    items = _items(tree)
    if not items:
        return "the list is empty"
    for item in items:
        problem = check(item)
        if problem is not None:
            return f"'{item.sql('spark')}': {problem}"
    return None


def _columns_problem(tree: exp.Expr) -> str | None:
    return _each_problem(tree, _column_problem)


def _number(tree: exp.Expr) -> Decimal | None:
    """The value of a number literal (``-`` allowed), else None."""
    negative = isinstance(tree, exp.Neg)
    inner = tree.this if negative else tree
    if not isinstance(inner, exp.Literal) or inner.is_string:
        return None
    try:
        value = Decimal(str(inner.this))
    except InvalidOperation:
        return None
    return -value if negative else value


def _is_constant(tree: exp.Expr) -> bool:
    """A literal: a number, a string, TRUE/FALSE, NULL, or a typed literal like DATE '...'."""
    if isinstance(tree, exp.Literal | exp.Boolean | exp.Null) or _number(tree) is not None:
        return True
    return (
        isinstance(tree, exp.Cast)
        and isinstance(tree.this, exp.Literal)
        and isinstance(tree.to, exp.DataType)
    )


def _values_problem(tree: exp.Expr) -> str | None:
    items = _items(tree)
    if not items:
        return "the list is empty"
    for item in items:
        if not _is_constant(item):
            return f"'{item.sql('spark')}' is not a literal value"
    return None


def _patterns_problem(tree: exp.Expr) -> str | None:
    items = _items(tree)
    if not items:
        return "the list is empty"
    for item in items:
        if not (isinstance(item, exp.Literal) and item.is_string):
            return f"'{item.sql('spark')}' is not a quoted string"
    return None


def _number_problem(tree: exp.Expr) -> str | None:
    return None if _number(tree) is not None else "it is not a number"


def _count_problem(tree: exp.Expr) -> str | None:
    value = _number(tree)
    if value is None or value != value.to_integral_value() or value < 0:
        return "it is not a whole number of 0 or more"
    if value >= _MAX_COUNT:
        return f"it is not below {_MAX_COUNT} (Spark's LIMIT and lengths are 32-bit)"
    return None


_MAX_COUNT = 2**31 - 1


def _constant_problem(tree: exp.Expr) -> str | None:
    return None if _is_constant(tree) else "it is not a literal value"


def _boolean_problem(tree: exp.Expr) -> str | None:
    return None if isinstance(tree, exp.Boolean) else "it is not true or false"


def _condition_problem(tree: exp.Expr) -> str | None:
    if isinstance(tree, exp.Literal) and tree.is_string:
        return "a string is not a condition: write the SQL without quotes"
    if isinstance(tree, exp.Tuple | exp.Array):
        return "a list is not one condition: join them with AND"
    if isinstance(tree, exp.Query):
        return "a query is not a condition"
    return None


def _criteria_problem(tree: exp.Expr) -> str | None:
    return _each_problem(tree, _condition_problem)


def _partition_problem(tree: exp.Expr) -> str | None:
    if isinstance(tree, exp.Boolean) and not tree.this:
        return None
    return _columns_problem(tree)


COLUMN = Kind("a column name", "id", _column_problem)
COLUMNS = Kind("a column name or a list of them", "(id, ds)", _columns_problem)
VALUES = Kind("a literal value or a list of them", "('a', 'b')", _values_problem)
PATTERNS = Kind("a quoted string or a list of them", "('^a.*', '.*z$')", _patterns_problem)
NUMBER = Kind("a number", "0.5", _number_problem)
COUNT = Kind("a whole number of 0 or more", "10", _count_problem)
CONSTANT = Kind("a literal value (a number, a string, a date...)", "0", _constant_problem)
BOOLEAN = Kind("true or false", "false", _boolean_problem)
CONDITION = Kind("a SQL condition on the model's columns", "ds > '2024-01-01'", _condition_problem)
CRITERIA = Kind("a SQL condition or a list of them", "(price > 0, qty < 10)", _criteria_problem)
PARTITION = Kind(
    "false, or the column(s) to partition the ranges by", "(account_id)", _partition_problem
)


# --- the audits ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Args:
    """A use's checked arguments, parsed (defaults filled in), and the audited table."""

    trees: Mapping[str, exp.Expr]
    table: str

    def model(self) -> exp.Table:
        return exp.to_table(self.table)

    def has(self, name: str) -> bool:
        tree = self.trees.get(name)
        return tree is not None and not isinstance(tree, exp.Null)

    def tree(self, name: str) -> exp.Expr:
        return self.trees[name].copy()

    def column(self, name: str) -> exp.Column:
        tree = self.tree(name)
        assert isinstance(tree, exp.Column)
        return tree

    def columns(self, name: str) -> list[exp.Column]:
        columns = [item.copy() for item in _items(self.trees[name])]
        assert all(isinstance(c, exp.Column) for c in columns)
        return columns  # type: ignore[return-value]

    def items(self, name: str) -> list[exp.Expr]:
        return [item.copy() for item in _items(self.trees[name])]

    def flag(self, name: str) -> bool:
        tree = self.trees[name]
        assert isinstance(tree, exp.Boolean)
        return bool(tree.this)

    def condition(self) -> exp.Expr | None:
        """The ``condition`` argument (parenthesised), None when not given (TRUE)."""
        tree = self.trees.get("condition")
        if tree is None or (isinstance(tree, exp.Boolean) and tree.this):
            return None
        return exp.Paren(this=tree.copy())


def _where(violation: exp.Expr, args: _Args) -> exp.Expr:
    """``violation AND (condition)``: SQLMesh's ``@AND(violation, @condition)``."""
    condition = args.condition()
    violation = exp.Paren(this=violation) if isinstance(violation, exp.Connector) else violation
    return violation if condition is None else exp.and_(violation, condition)


def _rows(violation: exp.Expr, args: _Args) -> exp.Select:
    """The model's rows for which ``violation`` holds (and the condition)."""
    return exp.select("*").from_(args.model()).where(_where(violation, args))


def _fill(template: str, args: _Args, **parts: exp.Expr) -> exp.Query:
    """``template`` (Spark SQL) with the table ``__model`` as the audited table, the
    column ``__condition`` as the condition (TRUE when none) and each column named as a
    key of ``parts`` as that tree. What is put in is not searched again, so an argument
    can never be mistaken for a placeholder."""
    condition = args.condition()
    parts = {"__condition": condition if condition is not None else exp.true(), **parts}

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name in parts:
            return parts[node.name].copy()
        if isinstance(node, exp.Table) and node.name == "__model" and not node.db:
            table = args.model()
            if node.alias:
                table.set("alias", node.args["alias"].copy())
            return table
        return node

    query = sqlglot.parse_one(template, read="spark").transform(swap)
    assert isinstance(query, exp.Query)
    return query


def _alias(name: str, taken: list[exp.Column]) -> str:
    """``name``, or a variant no column in ``taken`` has (aliases beside model columns)."""
    names = {c.name.lower() for c in taken}
    while name.lower() in names:
        name = f"_{name}"
    return name


def _range(value: exp.Expr, args: _Args) -> exp.Expr | None:
    """Where ``value`` is outside [min_v, max_v] (open ends when ``inclusive := false``);
    None when neither bound is given."""
    inclusive = args.flag("inclusive")
    outside: list[exp.Expr] = []
    if args.has("min_v"):
        low = exp.LT if inclusive else exp.LTE
        outside.append(low(this=value.copy(), expression=args.tree("min_v")))
    if args.has("max_v"):
        high = exp.GT if inclusive else exp.GTE
        outside.append(high(this=value.copy(), expression=args.tree("max_v")))
    return exp.or_(*outside) if outside else None


def _not_null(args: _Args) -> exp.Query:
    nulls = [exp.Is(this=c, expression=exp.Null()) for c in args.columns("columns")]
    return _rows(exp.or_(*nulls), args)


def _unique_values(args: _Args) -> exp.Query:
    # One group per duplicated value of each column: its name, the value, how many rows.
    # NULL counts as a value, as in SQLMesh (its ROW_NUMBER() OVER (PARTITION BY column)).
    parts: list[exp.Query] = []
    for column in args.columns("columns"):
        select = exp.select(
            exp.alias_(exp.Literal.string(column.name), "column_name"),
            exp.alias_(exp.cast(column.copy(), "STRING"), "value"),
            exp.alias_(exp.Count(this=exp.Star()), "n"),
        ).from_(args.model())
        condition = args.condition()
        if condition is not None:
            select = select.where(condition)
        parts.append(select.group_by(column.copy()).having("COUNT(*) > 1"))
    query = parts[0]
    for part in parts[1:]:
        query = exp.union(query, part, distinct=False)
    return query


def _accepted_values(args: _Args) -> exp.Query:
    member = exp.In(this=args.column("column"), expressions=args.items("is_in"))
    return _rows(exp.not_(member), args)


def _not_accepted_values(args: _Args) -> exp.Query:
    return _rows(exp.In(this=args.column("column"), expressions=args.items("is_in")), args)


def _number_of_rows(args: _Args) -> exp.Query:
    # Fails unless the table has more than `threshold` rows (SQLMesh: HAVING COUNT(*) <=
    # threshold), counting no further than threshold + 1.
    value = _number(args.trees["threshold"])
    assert value is not None
    threshold = int(value)
    return _fill(
        f"SELECT COUNT(*) AS n FROM (SELECT 1 AS one FROM __model WHERE __condition "
        f"LIMIT {threshold + 1}) AS _sample HAVING COUNT(*) <= {threshold}",
        args,
    )


def _forall(args: _Args) -> exp.Query:
    failed = [exp.not_(exp.Paren(this=c)) for c in args.items("criteria")]
    return _rows(exp.or_(*failed), args)


def _accepted_range(args: _Args) -> exp.Query:
    outside = _range(args.column("column"), args)
    assert outside is not None
    return _rows(outside, args)


def _at_least_one(args: _Args) -> exp.Query:
    # GROUP BY a constant: an empty table (or no row meeting the condition) has no group,
    # so it passes, as in SQLMesh.
    return _fill(
        "SELECT 1 AS one FROM __model WHERE __condition GROUP BY 1 HAVING COUNT(__column) = 0",
        args,
        __column=args.column("column"),
    )


def _not_constant(args: _Args) -> exp.Query:
    return _fill(
        "SELECT * FROM (SELECT COUNT(DISTINCT __column) AS t_cardinality FROM __model "
        "WHERE __condition) AS r WHERE r.t_cardinality <= 1",
        args,
        __column=args.column("column"),
    )


def _not_empty_string(args: _Args) -> exp.Query:
    return _rows(exp.EQ(this=args.column("column"), expression=exp.Literal.string("")), args)


def _not_null_proportion(args: _Args) -> exp.Query:
    # As SQLMesh's query: fails when the share of non-NULL values is at most `threshold`.
    return _fill(
        "SELECT * FROM (SELECT COUNT(*) AS cnt_tot, COUNT(__column) AS cnt_not_null, "
        "COUNT(*) - COUNT(__column) AS cnt_null FROM __model WHERE __condition) AS s "
        "WHERE s.cnt_not_null <= s.cnt_tot * __threshold",
        args,
        __column=args.column("column"),
        __threshold=args.tree("threshold"),
    )


def _sequential_values(args: _Args) -> exp.Query:
    column = args.column("column")
    previous = _alias("prv", [column])
    return _fill(
        f"WITH windowed AS (SELECT __column, LAG(__column) OVER (ORDER BY __column) AS "
        f"{previous} FROM __model WHERE __condition) "
        f"SELECT * FROM windowed WHERE NOT (__column = {previous} + __interval)",
        args,
        __column=column,
        __interval=args.tree("interval"),
    )


def _unique_combination_of_columns(args: _Args) -> exp.Query:
    columns = args.columns("columns")
    select = exp.select(*columns).from_(args.model())
    condition = args.condition()
    if condition is not None:
        select = select.where(condition)
    return select.group_by(*(c.copy() for c in columns)).having("COUNT(*) > 1")


def _mutually_exclusive_ranges(args: _Args) -> exp.Query:
    # `partition_clause`: SQLMesh pastes it before ORDER BY in the windows; here it is the
    # column(s) to PARTITION BY (false, the default: one range set for the whole table).
    partition = args.tree("partition_clause")
    by = "" if isinstance(partition, exp.Boolean) else "PARTITION BY __partition "
    parts: dict[str, exp.Expr] = {
        "__lower": args.column("lower_bound_column"),
        "__upper": args.column("upper_bound_column"),
    }
    if by:
        parts["__partition"] = exp.Tuple(expressions=args.columns("partition_clause"))
    query = _fill(
        "WITH window_functions AS (SELECT __lower AS lower_bound, __upper AS upper_bound, "
        f"LEAD(__lower) OVER ({by}ORDER BY __lower, __upper) AS next_lower_bound, "
        f"ROW_NUMBER() OVER ({by}ORDER BY __lower DESC, __upper DESC) = 1 AS is_last_record "
        "FROM __model WHERE __condition), "
        "calc AS (SELECT *, COALESCE(lower_bound <= upper_bound, FALSE) AS "
        "lower_bound_lte_upper_bound, COALESCE(upper_bound <= next_lower_bound, "
        "is_last_record, FALSE) AS upper_bound_lte_next_lower_bound FROM window_functions), "
        "validation_errors AS (SELECT * FROM calc WHERE NOT (lower_bound_lte_upper_bound "
        "AND upper_bound_lte_next_lower_bound)) SELECT * FROM validation_errors",
        args,
        **parts,
    )
    if by:
        # PARTITION BY takes the columns one by one, not as one tuple.
        for window in query.find_all(exp.Window):
            spec = window.args.get("partition_by") or []
            window.set(
                "partition_by",
                [
                    c
                    for item in spec
                    for c in (item.expressions if isinstance(item, exp.Tuple) else [item])
                ],
            )
    return query


UUID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
URL_PATTERN = r"^(https?|ftp)://[^\s/$.?#].[^\s]*$"
EMAIL_PATTERN = r"^[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9-.]+$"
HTTP_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT")


def _matches(value: exp.Expr, pattern: str | exp.Expr) -> exp.Expr:
    """``value RLIKE pattern`` (Spark's REGEXP_LIKE: a Java regular expression, found
    anywhere in the value unless anchored)."""
    literal = exp.Literal.string(pattern) if isinstance(pattern, str) else pattern
    return exp.RegexpLike(this=value, expression=literal)


def _valid_uuid(args: _Args) -> exp.Query:
    lowered = exp.Lower(this=args.column("column"))
    return _rows(exp.not_(_matches(lowered, UUID_PATTERN)), args)


def _valid_url(args: _Args) -> exp.Query:
    return _rows(exp.not_(_matches(args.column("column"), URL_PATTERN)), args)


def _valid_email(args: _Args) -> exp.Query:
    return _rows(exp.not_(_matches(args.column("column"), EMAIL_PATTERN)), args)


def _valid_http_method(args: _Args) -> exp.Query:
    methods = [exp.Literal.string(m) for m in HTTP_METHODS]
    return _rows(exp.not_(exp.In(this=args.column("column"), expressions=methods)), args)


def _match_regex_pattern_list(args: _Args) -> exp.Query:
    column = args.column("column")
    misses = [exp.not_(_matches(column.copy(), p)) for p in args.items("patterns")]
    return _rows(exp.and_(*misses), args)


def _not_match_regex_pattern_list(args: _Args) -> exp.Query:
    column = args.column("column")
    return _rows(exp.or_(*(_matches(column.copy(), p) for p in args.items("patterns"))), args)


def _match_like_pattern_list(args: _Args) -> exp.Query:
    column = args.column("column")
    misses = [exp.not_(exp.Like(this=column.copy(), expression=p)) for p in args.items("patterns")]
    return _rows(exp.and_(*misses), args)


def _not_match_like_pattern_list(args: _Args) -> exp.Query:
    column = args.column("column")
    hits = [exp.Like(this=column.copy(), expression=p) for p in args.items("patterns")]
    return _rows(exp.or_(*hits), args)


def _z_score(args: _Args) -> exp.Query:
    # The statistics are of the rows meeting the condition; every row is scored, as in
    # SQLMesh. The model's rows and the statistics are qualified (no name can collide).
    column = args.column("column")
    row_value = column.copy()
    row_value.set("table", exp.to_identifier("_model"))
    return _fill(
        "WITH stats AS (SELECT AVG(__column) AS mean_value, STDDEV(__column) AS "
        "stddev_value FROM __model WHERE __condition) "
        "SELECT __row_value, (__row_value - _stats.mean_value) / "
        "NULLIF(_stats.stddev_value, 0) AS z_score FROM __model AS _model CROSS JOIN stats "
        "AS _stats WHERE ABS((__row_value - _stats.mean_value) / "
        "NULLIF(_stats.stddev_value, 0)) > __threshold",
        args,
        __column=column,
        __row_value=row_value,
        __threshold=args.tree("threshold"),
    )


def _string_length_between(args: _Args) -> exp.Query:
    outside = _range(exp.Length(this=args.column("column")), args)
    assert outside is not None
    return _rows(outside, args)


def _string_length_equal(args: _Args) -> exp.Query:
    length = exp.Length(this=args.column("column"))
    return _rows(exp.NEQ(this=length, expression=args.tree("v")), args)


def _aggregate_in_range(function: str, alias: str) -> Callable[[_Args], exp.Query]:
    def build(args: _Args) -> exp.Query:
        outside = _range(exp.column(alias), args)
        assert outside is not None
        return _fill(
            f"SELECT * FROM (SELECT {function}(__column) AS {alias} FROM __model "
            "WHERE __condition) AS _stats WHERE __outside",
            args,
            __column=args.column("column"),
            __outside=outside,
        )

    return build


def _kl_divergence(args: _Args) -> exp.Query:
    # Per value, the symmetrised Kullback-Leibler divergence term (p - q) * ln(p / q) of
    # the two columns' distributions (p: share of rows with that value in source_column,
    # q: in target_column), as SQLMesh's query computes it (p*LOG(p/q) + q*LOG(q/p) summed
    # per value); a value found in one column only has no term (NULL there too). SQLMesh
    # joins the distributions USING (source_column), which runs only when both arguments
    # are the same column: here they are joined on the value. The logarithm is natural.
    return _fill(
        "WITH source_counts AS (SELECT __source AS value, COUNT(*) AS num_rows FROM __model "
        "WHERE __condition GROUP BY __source), "
        "target_counts AS (SELECT __target AS value, COUNT(*) AS num_rows FROM __model "
        "WHERE __condition GROUP BY __target), "
        "source_p AS (SELECT value, num_rows / SUM(num_rows) OVER () AS p FROM source_counts), "
        "target_q AS (SELECT value, num_rows / SUM(num_rows) OVER () AS q FROM target_counts), "
        "joined AS (SELECT COALESCE(a.value, b.value) AS value, COALESCE(a.p, 0) AS p, "
        "COALESCE(b.q, 0) AS q FROM source_p AS a FULL OUTER JOIN target_q AS b "
        "ON a.value = b.value), "
        "terms AS (SELECT value, p, q, p * LN(p / NULLIF(q, 0)) + q * LN(q / NULLIF(p, 0)) "
        "AS kl_divergence FROM joined) "
        "SELECT * FROM terms WHERE kl_divergence > __threshold",
        args,
        __source=args.column("source_column"),
        __target=args.column("target_column"),
        __threshold=args.tree("threshold"),
    )


def _chi_square(args: _Args) -> exp.Query:
    # SQLMesh's statistic over the observed (column_a, column_b) pairs of non-NULL values:
    # SUM((observed - E)^2 / E), E = rows with that a * rows with that b / all rows; it
    # fails when the statistic is not above critical_value (dependent := true, the
    # default) or is above it (dependent := false). SQLMesh counts the row and column
    # totals with correlated subqueries; here with window sums, which Spark runs.
    a, b = args.column("column_a"), args.column("column_b")
    both = exp.and_(
        exp.not_(exp.Is(this=a, expression=exp.Null())),
        exp.not_(exp.Is(this=b.copy(), expression=exp.Null())),
    )
    verdict = "chi_square > __critical" if args.flag("dependent") else "chi_square <= __critical"
    return _fill(
        "WITH samples AS (SELECT __a AS x_a, __b AS x_b FROM __model WHERE __both AND "
        "__condition), "
        "contingency_table AS (SELECT x_a, x_b, COUNT(*) AS observed FROM samples "
        "GROUP BY x_a, x_b), "
        "expected AS (SELECT x_a, x_b, observed, SUM(observed) OVER (PARTITION BY x_a) * "
        "SUM(observed) OVER (PARTITION BY x_b) / SUM(observed) OVER () AS e "
        "FROM contingency_table) "
        "SELECT * FROM (SELECT (COUNT(DISTINCT x_a) - 1) * (COUNT(DISTINCT x_b) - 1) AS "
        "degrees_of_freedom, SUM((observed - e) * (observed - e) / e) AS chi_square "
        f"FROM expected) AS _result WHERE NOT ({verdict})",
        args,
        __a=args.column("column_a"),
        __b=args.column("column_b"),
        __both=exp.Paren(this=both),
        __critical=args.tree("critical_value"),
    )


_CONDITION = {"condition": CONDITION}
_RANGE = {"inclusive": BOOLEAN, "condition": CONDITION}


@dataclass(frozen=True)
class BuiltinAudit:
    """A built-in audit: its arguments (required ones, optional ones with SQLMesh's
    default), what it checks, and how its query is built."""

    summary: str
    required: Mapping[str, Kind]
    optional: Mapping[str, Kind]
    defaults: Mapping[str, str]  # Spark SQL of the optional arguments' defaults
    build: Callable[[_Args], exp.Query]
    one_of: tuple[str, ...] = ()  # of the optional ones, at least one must be given
    notes: Mapping[str, str] = field(default_factory=dict)  # argument -> hint if unknown

    @property
    def arguments(self) -> frozenset[str]:
        return frozenset(self.required) | frozenset(self.optional)


def _audit(
    summary: str,
    build: Callable[[_Args], exp.Query],
    required: Mapping[str, Kind],
    optional: Mapping[str, Kind] | None = None,
    defaults: Mapping[str, str] | None = None,
    one_of: tuple[str, ...] = (),
    notes: Mapping[str, str] | None = None,
) -> BuiltinAudit:
    optional = dict(_CONDITION if optional is None else optional)
    return BuiltinAudit(
        summary, required, optional, dict(defaults or {}), build, one_of, dict(notes or {})
    )


_BOUNDS = {"min_v": CONSTANT, "max_v": CONSTANT, **_RANGE}
_LENGTHS = {"min_v": COUNT, "max_v": COUNT, **_RANGE}
_NUMBERS = {"min_v": NUMBER, "max_v": NUMBER, **_RANGE}
_RANGE_DEFAULTS = {"inclusive": "TRUE"}

BUILTIN_AUDITS: dict[str, BuiltinAudit] = {
    "forall": _audit("every row meets every criterion", _forall, {"criteria": CRITERIA}),
    "number_of_rows": _audit(
        "the table has more than `threshold` rows", _number_of_rows, {"threshold": COUNT}
    ),
    "not_null": _audit("no NULL in the columns", _not_null, {"columns": COLUMNS}),
    "at_least_one": _audit(
        "the column has a non-NULL value (an empty table passes)",
        _at_least_one,
        {"column": COLUMN},
    ),
    "not_null_proportion": _audit(
        "the share of non-NULL values is above `threshold`",
        _not_null_proportion,
        {"column": COLUMN, "threshold": NUMBER},
    ),
    "not_constant": _audit(
        "the column has at least two distinct non-NULL values",
        _not_constant,
        {"column": COLUMN},
    ),
    "unique_values": _audit(
        "each column's values are unique (NULL counts as a value)",
        _unique_values,
        {"columns": COLUMNS},
    ),
    "unique_combination_of_columns": _audit(
        "no two rows have the same values in all the columns",
        _unique_combination_of_columns,
        {"columns": COLUMNS},
    ),
    "accepted_values": _audit(
        "the column's values are in `is_in` (NULL passes)",
        _accepted_values,
        {"column": COLUMN, "is_in": VALUES},
    ),
    "not_accepted_values": _audit(
        "the column's values are not in `is_in`",
        _not_accepted_values,
        {"column": COLUMN, "is_in": VALUES},
    ),
    "sequential_values": _audit(
        "each value, in order, is the previous one plus `interval`",
        _sequential_values,
        {"column": COLUMN},
        {"interval": NUMBER, "condition": CONDITION},
        {"interval": "1"},
    ),
    "accepted_range": _audit(
        "the column's values are within [min_v, max_v]",
        _accepted_range,
        {"column": COLUMN},
        _BOUNDS,
        _RANGE_DEFAULTS,
        ("min_v", "max_v"),
    ),
    "mutually_exclusive_ranges": _audit(
        "no two rows' [lower, upper] ranges overlap",
        _mutually_exclusive_ranges,
        {"lower_bound_column": COLUMN, "upper_bound_column": COLUMN},
        {"partition_clause": PARTITION, "condition": CONDITION},
        {"partition_clause": "FALSE"},
    ),
    "not_empty_string": _audit(
        "no value is the empty string", _not_empty_string, {"column": COLUMN}
    ),
    "string_length_equal": _audit(
        "every value has `v` characters",
        _string_length_equal,
        {"column": COLUMN, "v": COUNT},
    ),
    "string_length_between": _audit(
        "every value has between min_v and max_v characters",
        _string_length_between,
        {"column": COLUMN},
        _LENGTHS,
        _RANGE_DEFAULTS,
        ("min_v", "max_v"),
    ),
    "valid_uuid": _audit("every non-NULL value is a UUID", _valid_uuid, {"column": COLUMN}),
    "valid_email": _audit(
        "every non-NULL value is an email address", _valid_email, {"column": COLUMN}
    ),
    "valid_url": _audit("every non-NULL value is a URL", _valid_url, {"column": COLUMN}),
    "valid_http_method": _audit(
        "every non-NULL value is an HTTP method",
        _valid_http_method,
        {"column": COLUMN},
        {},
        notes={
            "condition": "SQLMesh's valid_http_method has no condition (it checks every "
            "row); remove it, or use accepted_values(column := ..., is_in := ('GET', "
            "'POST', ...), condition := ...)"
        },
    ),
    "match_regex_pattern_list": _audit(
        "every non-NULL value matches one of the regular expressions",
        _match_regex_pattern_list,
        {"column": COLUMN, "patterns": PATTERNS},
    ),
    "not_match_regex_pattern_list": _audit(
        "no value matches any of the regular expressions",
        _not_match_regex_pattern_list,
        {"column": COLUMN, "patterns": PATTERNS},
    ),
    "match_like_pattern_list": _audit(
        "every non-NULL value is LIKE one of the patterns",
        _match_like_pattern_list,
        {"column": COLUMN, "patterns": PATTERNS},
    ),
    "not_match_like_pattern_list": _audit(
        "no value is LIKE any of the patterns",
        _not_match_like_pattern_list,
        {"column": COLUMN, "patterns": PATTERNS},
    ),
    "mean_in_range": _audit(
        "the column's mean is within [min_v, max_v]",
        _aggregate_in_range("AVG", "mean_value"),
        {"column": COLUMN},
        _NUMBERS,
        _RANGE_DEFAULTS,
        ("min_v", "max_v"),
    ),
    "stddev_in_range": _audit(
        "the column's standard deviation is within [min_v, max_v]",
        _aggregate_in_range("STDDEV", "stddev_value"),
        {"column": COLUMN},
        _NUMBERS,
        _RANGE_DEFAULTS,
        ("min_v", "max_v"),
    ),
    "z_score": _audit(
        "no value's absolute z-score exceeds `threshold`",
        _z_score,
        {"column": COLUMN, "threshold": NUMBER},
    ),
    "kl_divergence": _audit(
        "no value's symmetrised KL divergence term between the columns exceeds `threshold`",
        _kl_divergence,
        {"source_column": COLUMN, "target_column": COLUMN, "threshold": NUMBER},
        notes={
            "column": "SQLMesh 0.236.4's kl_divergence reads source_column (its "
            "documentation says column): write source_column := ...",
        },
    ),
    "chi_square": _audit(
        "the chi-square statistic of two columns is above `critical_value` "
        "(dependent := false: not above it)",
        _chi_square,
        {"column_a": COLUMN, "column_b": COLUMN, "critical_value": NUMBER},
        {"dependent": BOOLEAN, "condition": CONDITION},
        {"dependent": "TRUE"},
        notes={
            "column": "SQLMesh 0.236.4's chi_square reads column_a and column_b (its "
            "documentation says column and target_column): write column_a := ..., "
            "column_b := ...",
            "target_column": "SQLMesh 0.236.4's chi_square reads column_a and column_b "
            "(its documentation says column and target_column): write column_a := ..., "
            "column_b := ...",
        },
    ),
}

# In SQLMesh's source but commented out ("awaiting a first class way to express
# cross-model audits"): SQLMesh 0.236.4 does not define them either.
NOT_IN_SQLMESH = frozenset(
    {"cardinality_equality", "relationship", "equality", "equal_row_count", "fewer_rows_than"}
)


def usage(name: str) -> str:
    """How to call a built-in audit, e.g. ``accepted_range(column := id, min_v := 0)``."""
    audit = BUILTIN_AUDITS[name]
    shown = list(audit.required.items()) + [
        (k, v) for k, v in audit.optional.items() if k in audit.one_of
    ]
    return f"{name}({', '.join(f'{k} := {kind.example}' for k, kind in shown)})"


def check_arguments(name: str, args: Mapping[str, str]) -> dict[str, exp.Expr]:
    """The parsed arguments of a use of built-in audit ``name`` (Spark SQL each),
    defaults filled in.

    Raises:
        ArgumentError: an argument is missing, unknown, or not of its kind; a ``${``.
    """
    audit = BUILTIN_AUDITS[name]
    unknown = sorted(set(args) - audit.arguments)
    if unknown:
        takes = ", ".join([*audit.required, *audit.optional, "blocking"])
        raise ArgumentError(
            f"takes no argument {unknown[0]}",
            audit.notes.get(unknown[0], f"{name} takes {takes}; e.g. {usage(name)}"),
            unknown[0],
        )
    missing = [a for a in audit.required if a not in args]
    if missing:
        kind = audit.required[missing[0]]
        raise ArgumentError(
            f"needs {missing[0]} ({kind.description})", f"write {usage(name)}", missing[0]
        )
    trees: dict[str, exp.Expr] = {}
    kinds = {**audit.required, **audit.optional}
    for key, sql in {**audit.defaults, **args}.items():
        kind = kinds[key]
        if "${" in sql:
            raise ArgumentError(
                f"argument {key} writes '${{', which Spark replaces with a setting, a "
                "system property or an environment variable before it runs the query",
                "write it without '${'",
                key,
            )
        try:
            tree = sqlglot.parse_one(sql, read="spark")
        except (ParseError, TokenError):
            tree = None
        problem = "it does not parse" if tree is None else kind.check(tree)
        if tree is None or problem is not None:
            raise ArgumentError(
                f"argument {key} must be {kind.description}, got '{sql}' ({problem})",
                f"write {key} := {kind.example}",
                key,
            )
        trees[key] = tree
    if audit.one_of and all(isinstance(trees.get(a, exp.Null()), exp.Null) for a in audit.one_of):
        raise ArgumentError(
            f"needs {' or '.join(audit.one_of)} (not NULL)",
            f"give at least one bound, e.g. {usage(name)}; without one SQLMesh's query "
            "reports every row (or its statistic) as a violation",
            audit.one_of[0],
        )
    return trees


def render_builtin(name: str, args: Mapping[str, str], table: str) -> str:
    """The Spark query of built-in audit ``name`` over ``table`` (rows returned =
    violations), its arguments checked (:func:`check_arguments`)."""
    trees = check_arguments(name, args)
    query = BUILTIN_AUDITS[name].build(_Args(trees, table))
    return query.sql("spark", comments=False)
