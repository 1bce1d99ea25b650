"""Turn the text of one model file into a :class:`Model` (pure: no file reads, no clock).

The query is parsed in the model's dialect, checked, and kept as canonical Spark SQL:
comments dropped, keywords upper case, unquoted names lower case. That string is what
fingerprints hash, so formatting and comments never change a model's version.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ErrorLevel, ParseError, TokenError, UnsupportedError
from sqlglot.tokenizer_core import TokenType

from sluice.core.config import ModelDefaults
from sluice.core.errors import ModelError, did_you_mean
from sluice.core.model import column_check, fileaccess, macros, names, properties
from sluice.core.model.definition import AuditCall, Kind, KindName, Model, TableRef
from sluice.core.model.header import Header, Node, call_as_pair, parse_header
from sluice.core.model.nesting import nesting_guard
from sluice.core.model.scan import LineIndex, statement_starts, unclosed
from sluice.core.model.scd import (
    KIND_ALIASES,
    SCD_KIND_PROPERTIES,
    check_scd_outputs,
    listed_columns,
    read_scd,
)
from sluice.core.model.seeds import CSV_OPTIONS
from sluice.core.model.values import (
    read_bool,
    read_choice,
    read_column,
    read_columns,
    read_cron,
    read_date,
    read_int,
    read_names,
    read_pairs,
    read_start_date,
    read_string,
    read_word_or_string,
)
from sluice.core.plan import statements as project_statements
from sluice.core.timeutil import read_start

MODEL_PROPERTIES = frozenset(
    {
        "name",
        "kind",
        "dialect",
        "cron",
        "start",
        "end",
        "grain",
        "grains",
        "owner",
        "tags",
        "description",
        "column_descriptions",
        "audits",
        "forward_only",
        "on_destructive_change",
        "batch_size",
        "columns",
        "partitioned_by",
        "stamp",
        "enabled",
        "depends_on",
    }
    | properties.PROPERTIES
)
KIND_PROPERTIES: dict[KindName, frozenset[str]] = {
    KindName.FULL: frozenset(),
    KindName.VIEW: frozenset({"materialized"}),
    KindName.INCREMENTAL_BY_TIME_RANGE: frozenset(
        {"time_column", "batch_size", "lookback", "forward_only", "on_destructive_change"}
    ),
    KindName.INCREMENTAL_BY_UNIQUE_KEY: frozenset(
        {"unique_key", "batch_size", "lookback", "forward_only", "on_destructive_change"}
    ),
    KindName.SEED: frozenset({"path", "csv_settings", "batch_size"}),
    KindName.EMBEDDED: frozenset(),
    KindName.CUSTOM: frozenset(
        {
            "materialization",
            "materialization_properties",
            "batch_size",
            "lookback",
            "forward_only",
            "on_destructive_change",
        }
    ),
}
KIND_PROPERTIES.update(SCD_KIND_PROPERTIES)
DESTRUCTIVE_CHOICES = ("error", "warn", "allow")
_PLAIN_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


@dataclass(frozen=True)
class _Ctx:
    source: str
    path: str
    allowed_paths: tuple[str, ...] = ()
    columns_of: macros.ColumnsOf | None = None
    """Known columns of other tables, for macros such as @STAR."""
    catalogs: names.Catalogs = names.NO_CATALOGS

    def error(self, message: str, node: Node | None, hint: str | None = None) -> ModelError:
        return ModelError(
            message,
            path=self.path,
            line=node.line if node else None,
            col=node.col if node else None,
            hint=hint,
        )


def valid_dialect(name: str) -> bool:
    """Whether sqlglot knows the dialect ``name``."""
    try:
        Dialect.get_or_raise(name)
    except ValueError:
        return False
    return True


@nesting_guard
def parse_model(
    text: str,
    path: str,
    defaults: ModelDefaults,
    variables: Mapping[str, Any],
    *,
    allowed_paths: Sequence[str] = (),
    inferred_name: str | None = None,
    columns_of: macros.ColumnsOf | None = None,
    catalogs: names.Catalogs = names.NO_CATALOGS,
    header: Header | None = None,
) -> Model | None:
    """Parse a model file. Returns None for a model declared ``enabled false``.

    Args:
        text: The file's contents.
        path: The file, for messages.
        defaults: ``model_defaults`` of config.yaml.
        variables: ``variables`` of config.yaml, for ``@VAR``.
        allowed_paths: Globs of the paths the query may read directly (``sluice.allowed_paths``).
        inferred_name: The name from the file's path (``model_naming.infer_names``): used
            when the header names none, and a file without a header is then a model too.
        catalogs: The catalogs names may carry (:mod:`.names`): a name in a default
            catalog is kept as schema.table, one in another configured catalog as
            catalog.schema.table.
        header: The file's MODEL header, when the caller has read it (``parse_header``
            gives the same for every blueprint of the file); None: read here.

    Raises:
        ModelError: with file:line:col and a hint.
    """
    lines = LineIndex(text)
    if header is None:
        header = parse_header(text, path, "MODEL", lines)
    if header is None and inferred_name is not None:
        header = Header("MODEL")  # SQLMesh: the whole file is the query
    if header is None:
        raise ModelError(
            "not a model: the file must start with a MODEL (...) header",
            path=path,
            line=1,
            hint="start it with MODEL (name schema.table, kind FULL);",
        )
    ctx = _Ctx(text, path, tuple(allowed_paths), columns_of, catalogs)
    props = header.properties
    _refuse_substitutions(ctx, header)
    for key, key_node in header.keys.items():
        if key not in MODEL_PROPERTIES:
            raise ctx.error(
                f"unknown model property '{key}'", key_node, _suggest(key, MODEL_PROPERTIES)
            )
    if "name" not in props and inferred_name is None:
        raise ModelError(
            "the model has no name",
            path=path,
            line=header.line,
            hint="add `name schema.table` to MODEL (...), or set "
            "`model_naming: {infer_names: true}` in config.yaml to name it after its path",
        )
    if read_bool(ctx, props.get("enabled"), True) is False:
        return None
    if "name" in props:
        name = _model_name(ctx, props["name"], variables)
    else:
        assert inferred_name is not None
        name = _inferred_name(ctx, inferred_name, header.line)
    dialect = (
        read_word_or_string(ctx, props["dialect"]).lower()
        if "dialect" in props
        else defaults.dialect
    )
    if not valid_dialect(dialect):
        raise ctx.error(
            f"unknown SQL dialect '{dialect}'",
            props.get("dialect"),
            "use a sqlglot dialect such as spark, duckdb, bigquery, snowflake, postgres",
        )
    kind = _kind(ctx, props.get("kind"), header, dialect)
    forward_only = read_bool(ctx, props.get("forward_only"), defaults.forward_only)
    if kind.value.is_scd_type_2 and "forward_only" not in props:
        forward_only = True  # SQLMesh's default for these kinds: their history is kept
    destructive: str = defaults.on_destructive_change
    if "on_destructive_change" in props:
        destructive = read_choice(ctx, props["on_destructive_change"], DESTRUCTIVE_CHOICES)
    kind_forward = kind.extra.get("forward_only")
    if kind_forward is not None:
        forward_only = kind_forward
    destructive = kind.extra.get("on_destructive_change", destructive)
    batch_size = (
        read_int(ctx, props["batch_size"]) if "batch_size" in props else kind.value.batch_size
    )
    if batch_size is None:
        batch_size = defaults.batch_size
    start, start_relative = (
        read_start_date(ctx, props["start"])
        if "start" in props
        else (read_start(defaults.start) if defaults.start else (None, None))
    )
    end = read_date(ctx, props["end"], inclusive_day=True) if "end" in props else None
    start_notes = (
        [no_start_note(name, path, header.line)]
        if kind.value.is_incremental_by_time and start is None
        else []
    )
    columns = _columns(ctx, props["columns"], dialect) if "columns" in props else ()

    # SQLMesh lets a model file define audits after its query: `AUDIT (...); SELECT ...`.
    body = text[header.body_start : inline_audits_start(text, header.body_start)]
    origin_line = lines.position(header.body_start)[0]  # line where `body` begins
    code = body.lstrip(" \t\r\n;")
    # Messages about the body point at its first line of code (or just past the header).
    body_line = lines.position(len(text) - len(code))[0] if code else origin_line + 1
    query_sql: str | None = None
    refs: tuple[TableRef, ...] = ()
    outputs: tuple[str, ...] | None = None
    column_uses: str | None = None
    around = Statements(name)
    if kind.value.name == KindName.SEED:
        if body.strip().strip(";").strip():
            raise ModelError(
                "a SEED model has no query",
                path=path,
                line=body_line,
                hint="remove the SQL after the MODEL header",
            )
    else:
        query_sql, refs, outputs, column_uses = _query(
            ctx, body, origin_line, body_line, dialect, variables, name, around
        )
    extra_deps = _model_names(ctx, props["depends_on"]) if "depends_on" in props else ()
    depends = sorted({r.name for r in refs} | set(extra_deps))
    if name in depends and kind.value.name in (KindName.FULL, KindName.EMBEDDED):
        own = next((r for r in refs if r.name == name), None)
        embedded = kind.value.name == KindName.EMBEDDED
        raise ModelError(
            f"model {name} reads itself"
            + (": an embedded model cannot read itself (it has no table)" if embedded else ""),
            path=path,
            line=own.line if own else header.line,
            col=own.col if own else None,
            hint="an EMBEDDED model's query is inlined where another model reads it: read "
            "another model, or make it an incremental model reading its own table via "
            "@this_model"
            if embedded
            else "only incremental models may read their own table, via @this_model",
        )
    this_model = macros.PREFIX + "this_model"
    if kind.value.name == KindName.EMBEDDED and this_model in (query_sql or "").lower():
        raise ModelError(
            f"model {name} reads @this_model: an embedded model has no table (its query is "
            "inlined where another model reads it, where @this_model is that model's table)",
            path=path,
            line=body_line,
            hint="read the model's parents by name, or make it an incremental model",
        )
    grain_node = props.get("grain") or props.get("grains")
    if query_sql is not None:
        named = [
            ("time column", kind.params.get("time_column")),
            ("unique key", kind.params.get("unique_key")),
            ("updated_at column", kind.params.get("updated_at_name")),
            ("compared column", listed_columns(kind.params.get("columns"))),
            ("partition column", props.get("partitioned_by")),
        ]
        _check_outputs(ctx, name, outputs, [(what, n) for what, n in named if n is not None])
        if kind.value.scd is not None:
            check_scd_outputs(ctx, name, outputs or (), kind, header)
    grain, warnings = _grain(ctx, name, grain_node, outputs)
    fields, notes = properties.read_properties(text, path, props, header.keys, dialect, name)
    return Model(
        name=name,
        kind=Kind(**{**kind.value.__dict__, "batch_size": batch_size}),
        dialect=dialect,
        query_sql=query_sql,
        columns=columns,
        depends_on=tuple(d for d in depends if d != name),
        references=refs,
        cron=read_cron(ctx, props["cron"]) if "cron" in props else defaults.cron,
        start=start,
        start_relative=start_relative,
        end=end,
        grain=grain,
        owner=read_word_or_string(ctx, props["owner"]) if "owner" in props else defaults.owner,
        tags=read_names(ctx, props["tags"]) if "tags" in props else (),
        column_descriptions=read_pairs(ctx, props["column_descriptions"])
        if "column_descriptions" in props
        else (),
        audits=_audits(ctx, props["audits"], dialect) if "audits" in props else (),
        forward_only=forward_only,
        on_destructive_change=destructive,
        path=path,
        line=header.line,
        stamp=read_word_or_string(ctx, props["stamp"]) if "stamp" in props else None,
        warnings=(
            *start_notes,
            *kind.notes,
            *around.notes(path, name, kind.value.name, header.line),
            *warnings,
            *notes,
        ),
        pre_statements=tuple(around.pre),
        post_statements=tuple(around.post),
        statement_refusals=tuple(around.refused),
        column_uses=column_uses,
        **fields,
    )


def no_start_note(name: str, path: str, line: int) -> str:
    """The warning of an incremental-by-time model without ``start``: SQLMesh accepts it
    and so does Sluice, inferring where its backfill begins as SQLMesh does
    (:func:`sluice.core.plan.build.inferred_start`)."""
    return (
        f"{path}:{line}: model {name} is incremental by time but has no start date: its "
        "backfill begins where its parents' does, or (no parent) at its last complete cron "
        "interval, as in SQLMesh; earlier data is never built\n"
        "  hint: set `start '2024-01-01'` in MODEL (...) or model_defaults.start in "
        "config.yaml to backfill from that date"
    )


def _refuse_substitutions(ctx: _Ctx, header: Header) -> None:
    """No ``${`` in any value of the header. Its values reach Spark SQL (descriptions,
    column descriptions and comments, table and view properties, session properties,
    grain, kind parameters), and Spark replaces ``${...}`` in a statement's text (string
    literals included) with a setting, a system property or an environment variable
    before it parses it, after Sluice quoted the value."""
    for key, node in header.properties.items():
        if key == "audits":
            continue  # each argument is refused with its own words (_arg_sql)
        found = fileaccess.find_substitutions(node.text(ctx.source))
        where = fileaccess.placed(found, node.line, node.col)
        fileaccess.refuse(where, (), f"model property '{key}'", ctx.path, node.line)


def inline_audits_start(text: str, body_start: int) -> int:
    """Where the ``AUDIT (...)`` blocks after a model's query begin (the end: none)."""
    return next(statement_starts(text, "AUDIT", body_start), len(text))


def _known_kinds(word: str) -> str:
    kinds = [k.value for k in KindName if k != KindName.EXTERNAL] + list(KIND_ALIASES)
    close = did_you_mean(word.upper(), kinds, n=2)
    return (f"{close} " if close else "") + (
        "use one of FULL, VIEW, INCREMENTAL_BY_TIME_RANGE, INCREMENTAL_BY_UNIQUE_KEY, SEED, "
        "SCD_TYPE_2, SCD_TYPE_2_BY_TIME, SCD_TYPE_2_BY_COLUMN, EMBEDDED "
        "(external tables go in external_models.yaml)"
    )


def _suggest(key: str, known: frozenset[str]) -> str:
    return did_you_mean(key, known) or f"supported properties: {', '.join(sorted(known))}"


def _model_name(ctx: _Ctx, node: Node, variables: Mapping[str, Any] | None = None) -> str:
    if node.type not in ("word", "string"):
        raise ctx.error(
            "the model name must be schema.table", node, "for example `name jaffle.orders`"
        )
    value = macros.resolve_name(node.value, variables or {}, ctx.path, node.line or 1)
    try:
        return names.canonical(names.split_text(value), ctx.catalogs)
    except names.NameProblem as exc:
        raise ctx.error(f"model name {exc.message}", node, exc.hint) from None


def _model_names(ctx: _Ctx, node: Node) -> tuple[str, ...]:
    """Names of models or tables (``depends_on``), in their canonical form."""
    items = node.elements()
    found = []
    for item, written in zip(items, read_names(ctx, node), strict=True):
        try:
            found.append(names.canonical(names.split_text(written), ctx.catalogs))
        except names.NameProblem as exc:
            raise ctx.error(f"depends_on {exc.message}", item, exc.hint) from None
    return tuple(found)


@dataclass(frozen=True)
class KindResult:
    value: Kind
    extra: dict[str, Any]
    params: dict[str, Node] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _kind(ctx: _Ctx, node: Node | None, header: Header, dialect: str = "spark") -> KindResult:
    if node is None:
        return KindResult(Kind(KindName.VIEW), {})
    if node.type not in ("word", "call"):
        raise ctx.error(
            "kind must be a word such as FULL, optionally with (parameters)",
            node,
            "for example `kind FULL` or `kind INCREMENTAL_BY_TIME_RANGE (time_column ds)`",
        )
    try:
        name = KIND_ALIASES.get(node.value.upper()) or KindName(node.value.upper())
    except ValueError:
        raise ctx.error(
            f"unknown model kind '{node.value}'",
            node,
            _known_kinds(node.value),
        ) from None
    if name == KindName.EXTERNAL:
        raise ctx.error(
            "EXTERNAL is not a model kind here",
            node,
            "declare external tables in external_models.yaml",
        )
    params: dict[str, Node] = {}
    for item in (call_as_pair(i, ctx.source) for i in node.items):
        if item.type != "pair":
            raise ctx.error(
                f"'{item.text(ctx.source)}' is not a kind parameter",
                item,
                "write parameters as `name value`",
            )
        key = item.value.lower()
        if key not in KIND_PROPERTIES[name]:
            allowed = KIND_PROPERTIES[name]
            raise ctx.error(
                f"kind {name} has no parameter '{key}'",
                item,
                _suggest(key, allowed) if allowed else f"kind {name} takes no parameters",
            )
        params[key] = item.items[0]
    extra: dict[str, Any] = {}
    if "forward_only" in params:
        extra["forward_only"] = read_bool(ctx, params["forward_only"], False)
    if "on_destructive_change" in params:
        extra["on_destructive_change"] = read_choice(
            ctx, params["on_destructive_change"], DESTRUCTIVE_CHOICES
        )
    kwargs: dict[str, Any] = {"name": name}
    if name == KindName.INCREMENTAL_BY_TIME_RANGE:
        if "time_column" not in params:
            raise ctx.error(
                "INCREMENTAL_BY_TIME_RANGE needs a time_column",
                node,
                "write INCREMENTAL_BY_TIME_RANGE (time_column event_date)",
            )
        column = params["time_column"]
        if column.type == "list":
            if not column.items or len(column.items) > 2:
                raise ctx.error(
                    "time_column is (column) or (column, 'format')",
                    column,
                    "for example `time_column (ds, '%Y-%m-%d')`",
                )
            kwargs["time_column_format"] = (
                read_string(ctx, column.items[1]) if len(column.items) == 2 else None
            )
            column = column.items[0]
        kwargs["time_column"] = read_column(ctx, column)
    if name == KindName.INCREMENTAL_BY_UNIQUE_KEY:
        if "unique_key" not in params:
            raise ctx.error(
                "INCREMENTAL_BY_UNIQUE_KEY needs a unique_key",
                node,
                "write INCREMENTAL_BY_UNIQUE_KEY (unique_key id)",
            )
        kwargs["unique_key"] = read_columns(ctx, params["unique_key"])
    if name == KindName.SEED:
        if "path" not in params:
            raise ctx.error(
                "a SEED model needs a path", node, "write SEED (path '../seeds/file.csv')"
            )
        kwargs["seed_path"] = read_string(ctx, params["path"])
        if "csv_settings" in params:
            settings = read_pairs(ctx, params["csv_settings"])
            for item in params["csv_settings"].items:
                if item.value.lower() not in CSV_OPTIONS:
                    raise ctx.error(
                        f"unknown csv setting '{item.value.lower()}'",
                        item,
                        f"supported: {', '.join(sorted(CSV_OPTIONS))}",
                    )
            kwargs["csv_settings"] = settings
    notes: list[str] = []
    if name == KindName.CUSTOM:
        if "materialization" not in params:
            raise ctx.error(
                "kind CUSTOM needs a materialization",
                node,
                "write CUSTOM (materialization 'name'), naming the custom materialization",
            )
        kwargs["materialization"] = read_string(ctx, params["materialization"])
        if "materialization_properties" in params:
            at = params["materialization_properties"]
            notes.append(
                f"{ctx.path}:{at.line}: materialization_properties are the settings of "
                "SQLMesh's custom materialization class, which Sluice does not run: not used"
            )
    if name in (KindName.SCD_TYPE_2_BY_TIME, KindName.SCD_TYPE_2_BY_COLUMN):
        kwargs["unique_key"], kwargs["scd"] = read_scd(ctx, name, node, params, dialect)
    if "batch_size" in params:
        kwargs["batch_size"] = read_int(ctx, params["batch_size"])
    if "lookback" in params:
        kwargs["lookback"] = read_int(ctx, params["lookback"], minimum=0)
    return KindResult(Kind(**kwargs), extra, params, tuple(notes))


def read_query(
    sql: str,
    path: str,
    line: int,
    dialect: str,
    variables: Mapping[str, Any],
    name: str,
    *,
    allowed_paths: Sequence[str] = (),
    columns_of: macros.ColumnsOf | None = None,
    catalogs: names.Catalogs = names.NO_CATALOGS,
) -> tuple[str, tuple[TableRef, ...], tuple[str, ...] | None]:
    """A query given as text (an ``is_sql`` Python model's) read as a model file's query
    is: macros expanded, every check made, as Spark SQL with the tables it reads and its
    output names. Positions count from ``line`` of ``path``."""
    ctx = _Ctx(sql, path, tuple(allowed_paths), columns_of, catalogs)
    return _query(ctx, sql, line, line, dialect, variables, name)[:3]


def _query(
    ctx: _Ctx,
    body: str,
    origin_line: int,
    body_line: int,
    dialect: str,
    variables: Mapping[str, Any],
    name: str,
    around: Statements | None = None,
) -> tuple[str, tuple[TableRef, ...], tuple[str, ...] | None, str | None]:
    """The model's query as Spark SQL, the tables it reads, the names of the columns it
    returns when it says them all (None: ``SELECT *``, an expression without a name), and
    the columns it references (:func:`.column_check.extract`). ``around``: where the
    statements before and after the query go (pre- and post-statements); None: the body
    holds the query alone."""
    if not body.strip().strip(";").strip():
        raise ModelError(
            f"model {name} has no query",
            path=ctx.path,
            line=body_line,
            hint="write a SELECT after the MODEL (...) header",
        )
    subst = macros.substitute(body, variables, ctx.path, line_offset=origin_line - 1)
    subject = f"model {name}"

    def locate(line: int, col: int) -> tuple[int, int]:
        """A position in the parsed text (macros replaced) as one in the file."""
        line, col = subst.source_position(line, col)
        return line + origin_line - 1, col

    def refuse(found: list[fileaccess.FileAccess]) -> None:
        found = fileaccess.relocate(found, locate)
        fileaccess.refuse(found, ctx.allowed_paths, subject, ctx.path, body_line)

    def refuse_text() -> None:
        # SQL sqlglot cannot read as one query may still be SQL Spark runs: say what it
        # would reach before saying it does not parse.
        refuse(fileaccess.find_in_text(subst.text))

    try:
        # Empty statements (`;;`) and a comment after the last `;` are no statements.
        parsed = sqlglot.parse(subst.text, read=dialect)
        statements = [s for s in parsed if s is not None and not isinstance(s, exp.Semicolon)]
        if len(statements) > 1 and around is not None:  # where each statement starts
            _mark_lines(parsed, subst.text, dialect)
    except ParseError as exc:
        refuse_text()
        description, line, col = syntax_error(exc)
        where = locate(line, col or 1) if line else (body_line, None)
        raise ModelError(
            f"cannot parse the query of {name} ({dialect}): {description}",
            path=ctx.path,
            line=where[0],
            col=where[1] if col else None,
            hint=f"check the SQL near here; it is read as the '{dialect}' dialect",
        ) from None
    except TokenError:
        refuse_text()
        raise _unreadable(ctx, f"the query of {name}", body, origin_line, body_line) from None
    statements = macros.expand(statements, subst, variables, dialect, columns_of=ctx.columns_of)
    queries = [i for i, s in enumerate(statements) if isinstance(s, exp.Query)]
    if around is not None and len(queries) == 1 and len(statements) > 1:
        # SQLMesh's pre-statements (before the query) and post-statements (after it).
        at = queries[0]
        for index, statement in enumerate(statements):
            if index != at:
                line = locate(statement.meta.get(_LINE, 1), 1)[0]
                around.add(ctx, statement, line, dialect, post=index > at)
        statements = [statements[at]]
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        refuse_text()
        what = (
            "no query"
            if not statements
            else f"{len(statements)} statements"
            if len(statements) > 1
            else f"a {statements[0].key.upper()} statement"
        )
        raise ModelError(
            f"model {name} must hold exactly one SELECT query, found {what}",
            path=ctx.path,
            line=body_line,
            hint="a model holds one query; pre- and post-statements go before and after it",
        )
    query = fileaccess.resolve_identifiers(statements[0])
    refuse(fileaccess.find_in_tree(query))
    refs = _references(ctx, query, locate, name)
    try:
        # The parsed tree is ours alone, so the generator need not copy it first.
        spark_sql = query.sql(
            dialect="spark",
            copy=False,
            comments=False,
            normalize=True,
            unsupported_level=ErrorLevel.RAISE,
        )
    except UnsupportedError as exc:
        raise ModelError(
            f"the query of {name} cannot be written as Spark SQL: {exc}",
            path=ctx.path,
            line=body_line,
            hint="rewrite that part with functions Spark has",
        ) from None
    # Check what Spark will run, too: transpiling may turn a function into a file read
    # (DuckDB's read_parquet('x') becomes parquet.`x`), and Spark replaces any `${...}` in
    # the text, however the dialect wrote it.
    found = fileaccess.find_substitutions(spark_sql)
    # The tree of what Spark runs: the query's own in Spark's dialect (the text was written
    # from it), else the generated text read back as Spark SQL.
    spark_tree = query if dialect == "spark" else sqlglot.parse_one(spark_sql, read="spark")
    if dialect != "spark":
        found += fileaccess.find_in_tree(spark_tree)
    unplaced = [replace(a, line=0, col=0) for a in found]  # lines of generated SQL
    fileaccess.refuse(unplaced, ctx.allowed_paths, subject, ctx.path, body_line)
    outputs = output_names(spark_tree)
    # Lines as the file's (the body's own offset); columns as the text read, whose macros
    # are longer names: the check finds a column's place in the file when it reports one.
    uses = column_check.extract(spark_tree, query, lambda line, col: (line + origin_line - 1, col))
    return spark_sql, refs, None if outputs is None else tuple(outputs), uses


_LINE = "sluice_line"
"""The key of a parsed statement's ``meta`` holding its first line in the parsed text."""


def _mark_lines(parsed: Sequence[exp.Expr | None], text: str, dialect: str) -> None:
    """Put in each statement's ``meta`` the line it starts on (``_LINE``), splitting the
    tokens on semicolons as sqlglot's parser does (a statement a macro makes anew has
    none: the body's first line stands for it)."""
    tokens = Dialect.get_or_raise(dialect).tokenize(text)
    chunks: list[list[Any]] = [[]]
    for i, token in enumerate(tokens):
        if token.token_type == TokenType.SEMICOLON:
            if token.comments:
                chunks.append([token])
            if i < len(tokens) - 1:
                chunks.append([])
        else:
            chunks[-1].append(token)
    if len(chunks) != len(parsed):
        return
    for statement, chunk in zip(parsed, chunks, strict=True):
        if statement is not None and chunk:
            statement.meta[_LINE] = chunk[0].line


MODEL_STATEMENT_HINT = (
    "a model's pre- and post-statements run in its build, a pull request's too, before "
    "anyone approved it, so Sluice runs only CREATE SCHEMA, TABLE or VIEW ... IF NOT EXISTS "
    "and queries there (e.g. `CREATE VIEW IF NOT EXISTS s.v AS SELECT ...` for `DROP VIEW "
    "s.v; CREATE VIEW s.v AS ...`); do the rest outside Sluice"
)


@dataclass
class Statements:
    """A model's pre- and post-statements as Spark SQL, and why any of them is not one
    Sluice runs: ``refused`` holds (line, what, hint). Each is checked as config.yaml's
    ``before_all`` are (:func:`sluice.core.plan.statements.check`): a statement outside
    that allow-list is kept (it is part of the model's version) and named, and the
    model's build is refused (:func:`sluice.core.spark.render.build_steps`)."""

    name: str = ""
    pre: list[str] = field(default_factory=list)
    post: list[str] = field(default_factory=list)
    refused: list[tuple[int, str, str]] = field(default_factory=list)

    def add(self, ctx: _Ctx, statement: exp.Expr, line: int, dialect: str, *, post: bool) -> None:
        which = self.post if post else self.pre
        subject = f"{'post' if post else 'pre'}-statement {len(which) + 1}"
        found = [
            *fileaccess.find_in_text(statement.sql(dialect, comments=False)),
            *fileaccess.find_in_tree(statement, references_checked=False),
        ]
        unplaced = [replace(a, line=0, col=0) for a in found]
        fileaccess.refuse(
            unplaced, ctx.allowed_paths, f"model {self.name} {subject}", ctx.path, line
        )
        try:
            spark_sql = statement.sql(
                "spark", unsupported_level=ErrorLevel.RAISE, comments=False, normalize=True
            )
        except UnsupportedError as exc:
            raise ModelError(
                f"{subject} cannot be written as Spark SQL: {exc}",
                path=ctx.path,
                line=line,
                hint="rewrite it with Spark's syntax",
            ) from None
        which.append(spark_sql)
        refused = project_statements.check(spark_sql, queries=True)
        if refused is not None:
            shown = " ".join(spark_sql.split())
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            what = f"{subject} ({shown}): {refused.what}"
            if not project_statements.changes_existing(sqlglot.parse_one(spark_sql, "spark")):
                raise ModelError(what, path=ctx.path, line=line, hint=MODEL_STATEMENT_HINT)
            self.refused.append((line, what, MODEL_STATEMENT_HINT))

    def notes(self, path: str, name: str, kind: KindName, line: int) -> list[str]:
        """The plan's notes of the refused statements (file:line, what, what to do)."""
        if kind == KindName.EMBEDDED and (self.pre or self.post):
            return [
                f"{path}:{line}: model {name} is EMBEDDED: never built, so its pre- and "
                "post-statements never run (as in SQLMesh)"
            ]
        return [
            f"{path}:{line}: model {name}: {what}; Sluice does not run it and refuses the "
            f"model's build\n  hint: {MODEL_STATEMENT_HINT}"
            for line, what, _ in self.refused
        ]


def read_statements(
    texts: Sequence[str],
    path: str,
    line: int,
    dialect: str,
    variables: Mapping[str, Any],
    around: Statements,
    *,
    post: bool,
    allowed_paths: Sequence[str] = (),
    catalogs: names.Catalogs = names.NO_CATALOGS,
) -> None:
    """A Python model's ``pre_statements`` / ``post_statements`` (SQL strings, macros
    evaluated) read into ``around`` as a SQL model's are; ``line``: the argument's."""
    for text in texts:
        ctx = _Ctx(text, path, tuple(allowed_paths), None, catalogs)
        subst = macros.substitute(text, variables, path, line_offset=line - 1)
        try:
            parsed = [s for s in sqlglot.parse(subst.text, read=dialect) if s is not None]
        except (ParseError, TokenError) as exc:
            raise ModelError(
                f"cannot parse the statement {text!r} ({dialect}): {str(exc).splitlines()[0]}",
                path=path,
                line=line,
                hint="check the SQL",
            ) from None
        parsed = [s for s in parsed if not isinstance(s, exp.Semicolon)]
        for statement in macros.expand(parsed, subst, variables, dialect):
            around.add(ctx, statement, line, dialect, post=post)


def syntax_error(exc: ParseError) -> tuple[str, int | None, int | None]:
    """sqlglot's first syntax error as (what, line, column), in a user's words."""
    first = exc.errors[0] if exc.errors else {}
    description = str(first.get("description") or str(exc).strip().split("\n")[0])
    # "Required keyword: 'this' missing for <class 'sqlglot.expressions.query.Where'>"
    missing = re.match(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>", description)
    if missing:
        clause = re.sub(r"(?<!^)(?=[A-Z])", " ", missing.group(2)).upper()
        description = f"incomplete {clause}" + (
            f" (its {missing.group(1)} is missing)" if missing.group(1) != "this" else ""
        )
    line, col = first.get("line"), first.get("col")
    return (
        description,
        line if isinstance(line, int) else None,
        col if isinstance(col, int) else None,
    )


def _unreadable(ctx: _Ctx, what: str, text: str, origin_line: int, fallback: int) -> ModelError:
    """sqlglot cannot split ``text`` into tokens: almost always a quote left open."""
    offset = unclosed(text)
    if offset is None:
        return ModelError(
            f"cannot read {what}: it has a character SQL does not allow",
            path=ctx.path,
            line=fallback,
            hint="check the query for stray characters",
        )
    line, col = LineIndex(text).position(offset)
    mark = text[offset : offset + 2] if text[offset] == "/" else text[offset]
    return ModelError(
        f"cannot read {what}: the {mark} opened here is never closed",
        path=ctx.path,
        line=line + origin_line - 1,
        col=col,
        hint=f"close it with {'*/' if mark == '/*' else mark}",
    )


def _references(
    ctx: _Ctx, query: exp.Expr, locate: Callable[[int, int], tuple[int, int]], name: str
) -> tuple[TableRef, ...]:
    """The tables ``query`` reads; on the way, unquote plain names (one walk of the tree)."""
    ctes: set[str] = set()
    tables: list[exp.Table] = []
    for node in query.walk():
        if isinstance(node, exp.Identifier):
            # Spark names are case-insensitive: `Orders`, "orders" and orders are one name.
            if node.quoted and _PLAIN_NAME.match(node.name.lower()):
                node.set("quoted", False)
                node.meta["unquoted"] = True  # where it starts counts its quotes
        elif isinstance(node, exp.Table):
            tables.append(node)
        elif isinstance(node, exp.CTE):
            ctes.add(node.alias_or_name.lower())
    refs: dict[str, TableRef] = {}
    for table in tables:
        if not table.name or table.name.startswith(macros.PREFIX):
            continue
        if isinstance(table.this, exp.Func | exp.Anonymous):
            continue  # table-valued function, e.g. range(10)
        if fileaccess.is_file_table(table):
            continue  # a path sluice.allowed_paths permits (the others were refused)
        if table.args.get("catalog"):
            _place(ctx, table, locate)
        if not table.db:
            if table.name.lower() in ctes:
                continue
            where = _ref_node(table, locate)
            raise ModelError(
                f"table '{table.name}' in {name} has no schema",
                path=ctx.path,
                line=where.line,
                col=where.col,
                hint="write schema.table; refer to models and external tables by their full name",
            )
        ref_name = ".".join(p.name for p in table.parts).lower()
        if ref_name not in refs:
            where = _ref_node(table, locate)
            refs[ref_name] = TableRef(ref_name, where.line, where.col)
    return tuple(refs.values())


def _place(ctx: _Ctx, table: exp.Table, locate: Callable[[int, int], tuple[int, int]]) -> None:
    """A three-part reference: a default catalog is dropped from the query (so writing it
    changes no fingerprint), a configured one kept, any other refused."""
    parts = [p.name for p in table.parts]
    try:
        canonical = names.canonical(parts, ctx.catalogs)
    except names.NameProblem as exc:
        raise ctx.error(exc.message, _ref_node(table, locate), exc.hint) from None
    if canonical.count(".") == 1:
        table.set("catalog", None)
    else:
        table.set("catalog", exp.to_identifier(parts[0].lower()))


def _check_outputs(
    ctx: _Ctx, name: str, outputs: tuple[str, ...] | None, named: list[tuple[str, Node]]
) -> None:
    """Columns the header names (time column, grain, ...) must be columns the query returns
    (``outputs``: see :func:`_query`)."""
    if not named:
        return
    if outputs is None:
        return  # `SELECT *` or an expression without a name: Spark will tell
    for what, node in named:
        for item in node.elements():
            if item.type != "word":
                continue  # time_column's format string, or a value other checks refuse
            column = item.value.strip('"`').lower()
            if column not in outputs:
                raise ctx.error(
                    f"{what} '{column}' is not a column of {name}'s query",
                    item,
                    f"the query returns: {', '.join(outputs)}; name one of them "
                    "(or alias the expression in the query)",
                )


def _grain(
    ctx: _Ctx, name: str, node: Node | None, outputs: tuple[str, ...] | None
) -> tuple[tuple[str, ...], list[str]]:
    """The grain's columns, and warnings for the entries that are not columns the query
    returns by name. SQLMesh does not check a grain, so neither refuses the model: an
    entry that is not a plain name is left out of the grain (Sluice compares rows by
    plain columns), one the query does not return is kept (Spark will tell)."""
    if node is None:
        return (), []
    grain: list[str] = []
    warnings: list[str] = []
    for item in node.elements():
        where = f"{ctx.path}:{item.line}:{item.col}"
        if item.type not in ("word", "string"):
            warnings.append(
                f"{where}: grain '{item.text(ctx.source)}' of {name} is not a column name; "
                "it is left out of the grain\n  hint: alias the expression in the query "
                "and name that column in `grain`"
            )
            continue
        column = item.value.strip('"`').lower() if item.type == "word" else item.value.lower()
        if outputs is not None and column not in outputs:
            warnings.append(
                f"{where}: grain '{column}' is not a column of {name}'s query\n"
                f"  hint: the query returns: {', '.join(outputs)}; name one of them "
                "(or alias the expression in the query)"
            )
        grain.append(column)
    return tuple(grain), warnings


def _inferred_name(ctx: _Ctx, inferred: str, line: int) -> str:
    try:
        return names.canonical(inferred.lower().split("."), ctx.catalogs)
    except names.NameProblem as exc:
        raise ModelError(
            f"the model has no name, and the one inferred from its path, '{inferred}', "
            + (
                f"names the unknown catalog '{exc.catalog}'"
                if exc.catalog
                else "is not schema.table"
            ),
            path=ctx.path,
            line=line,
            hint="put the file at models/<schema>/<table>.sql, or add `name schema.table` "
            "to its MODEL (...)" + (f"; {exc.hint}" if exc.catalog else ""),
        ) from None


def output_names(query: exp.Expr) -> list[str] | None:
    """The names of the columns ``query`` returns, lower case, when it says them all. The
    header's checks (time column, unique key, grain, SCD columns) all read them from the
    tree the query was parsed into: a parse is most of a check's cost."""
    while isinstance(query, exp.Subquery | exp.SetOperation):
        query = query.this if isinstance(query, exp.Subquery) else query.left
    if not isinstance(query, exp.Select):
        return None
    names = []
    for projection in query.expressions:
        if isinstance(projection, exp.Star) or projection.is_star or not projection.alias_or_name:
            return None
        names.append(projection.alias_or_name.lower())
    return names


def _ref_node(table: exp.Table, locate: Callable[[int, int], tuple[int, int]]) -> Node:
    """Where ``table`` starts: its first part (sqlglot records where each part ends)."""
    parts = [table.args.get(key) for key in ("catalog", "db", "this")]
    first = next((p for p in parts if isinstance(p, exp.Identifier) and p.meta.get("line")), None)
    if first is None:
        line, col = locate(1, 1)
        return Node("word", table.name, line=line, col=col)
    width = len(first.name) + (2 if first.quoted or first.meta.get("unquoted") else 0)
    named = [p for p in parts if isinstance(p, exp.Identifier)]
    if len(named) > 1 and all(p.meta.get("col") == first.meta.get("col") for p in named):
        # BigQuery's `project.dataset.table`: one quoted token split into its parts
        width = len(".".join(p.name for p in named)) + 2
    line, col = locate(int(first.meta["line"]), max(int(first.meta.get("col", 1)) - width + 1, 1))
    return Node("word", table.name, line=line, col=col)


def _columns(ctx: _Ctx, node: Node, dialect: str) -> tuple[tuple[str, str], ...]:
    if node.type != "list":
        raise ctx.error(
            "columns must be a list like (id INT, name STRING)",
            node,
            "put `name TYPE` entries in parentheses, separated by commas",
        )
    result = []
    for item in node.items:
        if item.type != "pair":
            raise ctx.error(
                f"column '{item.text(ctx.source)}' needs a type",
                item,
                "write `name TYPE`, e.g. `id INT`",
            )
        type_text = (
            item.items[0].text(ctx.source)
            if item.items[0].type != "word" or item.items[0].end > item.items[0].start
            else item.items[0].value
        )
        try:
            spark_type = exp.DataType.build(type_text, dialect=dialect).sql("spark")
        except (ParseError, ValueError, TokenError):
            raise ctx.error(
                f"unknown type '{type_text}' for column {item.value}",
                item.items[0],
                "use a type of the model's dialect, such as INT, BIGINT, DOUBLE, "
                "DECIMAL(10, 2), STRING, DATE, TIMESTAMP",
            ) from None
        result.append((item.value.strip('"`').lower(), spark_type))
    return tuple(result)


def _audits(ctx: _Ctx, node: Node, dialect: str) -> tuple[AuditCall, ...]:
    items = node.elements()
    calls = []
    for item in items:
        if item.type not in ("word", "call"):
            raise ctx.error(
                f"'{item.text(ctx.source)}' is not an audit",
                item,
                "write audits (name, other_name(arg := value))",
            )
        name = item.value.lower()
        blocking = True
        if name.endswith("_non_blocking"):
            name, blocking = name.removesuffix("_non_blocking"), False
        args = []
        for arg in item.items:
            if arg.type != "pair":
                raise ctx.error(
                    f"audit {name}: arguments are named, as `column := value`",
                    arg,
                    f"write {name}(column := value)",
                )
            if arg.value.lower() == "blocking":
                blocking = read_bool(ctx, arg.items[0], True)
                continue
            args.append((arg.value.lower(), _arg_sql(ctx, arg.items[0], dialect)))
        calls.append(AuditCall(name, tuple(args), blocking, item.line, item.col))
    return tuple(calls)


def _arg_sql(ctx: _Ctx, node: Node, dialect: str) -> str:
    if node.type == "list":
        return "(" + ", ".join(_arg_sql(ctx, i, dialect) for i in node.items) + ")"
    if node.type == "string":
        literal = exp.Literal.string(node.value)
        subject = f"audit argument '{node.text(ctx.source)}'"
        found = fileaccess.placed(fileaccess.find_in_tree(literal), node.line, node.col)
        fileaccess.refuse(found, ctx.allowed_paths, subject, ctx.path, node.line)
        return literal.sql("spark")
    text = node.text(ctx.source)
    try:
        parsed = sqlglot.parse_one(text, read=dialect)
    except (ParseError, TokenError):
        raise ctx.error(
            f"cannot parse audit argument '{text}'",
            node,
            "write the argument as a SQL expression, e.g. `column := id` or `is_in := (1, 2)`",
        ) from None
    # An audit's tables are not checked against the project's: see references_checked.
    parsed = fileaccess.resolve_identifiers(parsed)
    accesses = fileaccess.find_in_tree(parsed, references_checked=False)
    found = fileaccess.placed(accesses, node.line, node.col)
    fileaccess.refuse(found, ctx.allowed_paths, f"audit argument '{text}'", ctx.path, node.line)
    return parsed.sql("spark", normalize=True)
