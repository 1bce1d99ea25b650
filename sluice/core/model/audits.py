"""Audits: the built-in ones, the project's audits/*.sql files, and checking their use (pure).

An audit is a query that returns the rows violating it; zero rows means it passed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from sluice.core.errors import ModelError, did_you_mean
from sluice.core.model import fileaccess, macros
from sluice.core.model.builtin_audits import (
    BUILTIN_AUDITS,
    NOT_IN_SQLMESH,
    ArgumentError,
    check_arguments,
    render_builtin,
)
from sluice.core.model.definition import Audit, AuditCall, Model
from sluice.core.model.header import Node, parse_header
from sluice.core.model.names import NO_CATALOGS, Catalogs, drop_default_catalogs
from sluice.core.model.nesting import nesting_guard
from sluice.core.model.parse import inline_audits_start, syntax_error
from sluice.core.model.scan import LineIndex, statement_starts


def builtin_audit_sql(call: AuditCall, table: str) -> str:
    """The Spark query of a built-in audit over ``table`` (rows returned = violations):
    SQLMesh's built-in audits, :mod:`.builtin_audits`."""
    return render_builtin(call.name, dict(call.args), table)


@nesting_guard
def parse_audits(
    text: str,
    path: str,
    dialect: str,
    variables: Mapping[str, Any],
    *,
    allowed_paths: Sequence[str] = (),
    start: int = 0,
    catalogs: Catalogs = NO_CATALOGS,
) -> list[Audit]:
    """Parse an audits/*.sql file: one or more ``AUDIT (...)`` headers, each with a query.

    Blocks may be separated by comments and empty statements (``;;``). ``start``: where
    the first block begins (the inline audits after a model's query). ``allowed_paths``
    are the globs of paths a query may read directly (``sluice.allowed_paths``); any
    other file read, Java call or script is refused. A table named in one of the
    ``catalogs``' default catalogs is read as ``schema.table`` (:mod:`.names`).

    Raises:
        ModelError: with file:line for a bad header or query.
    """
    lines = LineIndex(text)
    audits: list[Audit] = []
    offset = start
    while True:
        header = parse_header(text[offset:], path, "AUDIT", LineIndex(text[offset:]))
        if header is None:
            if not audits:
                raise ModelError(
                    "not an audit file: it must start with AUDIT (name ...)",
                    path=path,
                    line=1,
                    hint="start it with AUDIT (name assert_something); followed by its query",
                )
            break
        start_line = lines.position(offset)[0]
        props = header.properties
        standalone = _flag(props, "standalone", False, path, start_line)
        for key, node in header.keys.items():
            if key in AUDIT_PROPERTIES or (standalone and key in STANDALONE_PROPERTIES):
                continue
            hint = f"audits take {', '.join(sorted(AUDIT_PROPERTIES))}"
            if key in STANDALONE_PROPERTIES:
                hint = f"'{key}' is for standalone audits only: add `standalone true`"
            raise ModelError(
                f"unknown audit property '{key}'",
                path=path,
                line=node.line + start_line - 1,
                hint=hint,
            )
        if "name" not in props:
            raise ModelError(
                "the audit has no name",
                path=path,
                line=header.line + start_line - 1,
                hint="add `name assert_something` to AUDIT (...)",
            )
        body_start = offset + header.body_start
        nxt = next(statement_starts(text, "AUDIT", body_start), None)
        body_end = nxt if nxt is not None else len(text)
        name = props["name"].value.lower()
        audit_dialect = props["dialect"].value if "dialect" in props else dialect
        query, subst = _audit_query(
            name, text, body_start, body_end, path, audit_dialect, variables, allowed_paths
        )
        query = drop_default_catalogs(query, catalogs)
        subject = f"audit {name}"
        defaults: list[tuple[str, str]] = []
        for item in props["defaults"].items if "defaults" in props else ():
            if item.type != "pair":
                continue
            value = item.items[0]
            value_text = value.text(text[offset:])
            where = value.line + start_line - 1
            try:
                parsed = sqlglot.parse_one(value_text, read=audit_dialect)
            except (ParseError, TokenError):
                raise ModelError(
                    f"audit {name}: cannot parse the default of {item.value.lower()}, "
                    f"'{value_text}'",
                    path=path,
                    line=where,
                    col=value.col,
                    hint="write the default as a SQL expression, e.g. `threshold = 10`",
                ) from None
            # Checked as the audit's query is, and kept as the Spark SQL that was checked
            # (the run parses it as Spark SQL, whatever the audit's dialect).
            parsed = fileaccess.resolve_identifiers(parsed)
            accesses = fileaccess.find_in_tree(parsed, references_checked=False)
            found = fileaccess.placed(accesses, where, value.col)
            fileaccess.refuse(found, allowed_paths, subject, path, where)
            defaults.append((item.value.lower(), parsed.sql("spark", normalize=True)))
        # A standalone audit is non-blocking unless it says otherwise (as in SQLMesh).
        blocking = _flag(props, "blocking", not standalone, path, start_line)
        audits.append(
            Audit(
                name=name,
                query_sql=query.sql("spark", comments=False, normalize=True),
                parameters=frozenset(subst.used - macros.BUILTIN_VARIABLES),
                defaults=tuple(defaults),
                blocking=blocking,
                path=path,
                line=header.line + start_line - 1,
                standalone=standalone,
            )
        )
        if nxt is None:
            break
        offset = nxt
    return audits


AUDIT_PROPERTIES = frozenset({"name", "dialect", "blocking", "defaults", "standalone"})
# A standalone audit is a node of its own: it may say when and after what it runs.
STANDALONE_PROPERTIES = frozenset(
    {"depends_on", "owner", "description", "cron", "start", "end", "tags", "stamp"}
)


def _flag(props: Mapping[str, Node], key: str, default: bool, path: str, start_line: int) -> bool:
    node = props.get(key)
    if node is None:
        return default
    if node.type in ("bool", "word", "string") and node.value.lower() in ("true", "false"):
        return node.value.lower() == "true"
    raise ModelError(
        f"audit property '{key}' must be true or false, got '{node.value}'",
        path=path,
        line=node.line + start_line - 1,
        hint=f"write `{key} true` or `{key} false`",
    )


def _audit_query(
    name: str,
    text: str,
    body_start: int,
    body_end: int,
    path: str,
    dialect: str,
    variables: Mapping[str, Any],
    allowed_paths: Sequence[str],
) -> tuple[exp.Query, macros.Substituted]:
    """Parse and check the query of one audit: ``text[body_start:body_end]``."""
    lines = LineIndex(text)
    body = text[body_start:body_end]
    origin_line = lines.position(body_start)[0]  # the line `body` starts on
    code = body.lstrip(" \t\r\n;")
    # Messages about the query point at its first line of code.
    body_line = lines.position(body_end - len(code))[0] if code else origin_line
    subst = macros.substitute(body, variables, path, allowed=_ANY, line_offset=origin_line - 1)

    def locate(line: int, col: int) -> tuple[int, int]:
        line, col = subst.source_position(line, col)
        return line + origin_line - 1, col

    def refuse(found: list[fileaccess.FileAccess]) -> None:
        found = fileaccess.relocate(found, locate)
        fileaccess.refuse(found, allowed_paths, f"audit {name}", path, body_line)

    try:
        # Empty statements (`;;`) and a comment after the last `;` are no statements.
        statements = [
            s
            for s in sqlglot.parse(subst.text, read=dialect)
            if s is not None and not isinstance(s, exp.Semicolon)
        ]
    except (ParseError, TokenError) as exc:
        refuse(fileaccess.find_in_text(subst.text))
        if isinstance(exc, TokenError):
            description, line, col = "a quote or comment is never closed", None, None
        else:
            description, line, col = syntax_error(exc)
        where = locate(line, col or 1) if line else (body_line, None)
        raise ModelError(
            f"cannot parse audit {name}: {description}",
            path=path,
            line=where[0],
            col=where[1] if col else None,
            hint=f"check the SQL near here; it is read as the '{dialect}' dialect",
        ) from None
    statements = macros.expand(statements, subst, variables, dialect, keep_unknown=True)
    query = statements[0] if len(statements) == 1 else None
    if not isinstance(query, exp.Query):
        refuse(fileaccess.find_in_text(subst.text))
        raise ModelError(
            f"audit {name} has no query"
            if not statements
            else f"audit {name} must be one SELECT query"
            + (f", found {len(statements)} statements" if len(statements) > 1 else ""),
            path=path,
            line=body_line,
            hint="write the query that returns the rows violating the audit",
        )
    # An audit's tables are not checked against the project's: see references_checked.
    query = fileaccess.resolve_identifiers(query)
    refuse(fileaccess.find_in_tree(query, references_checked=False))
    return query, subst


def parse_inline_audits(
    text: str,
    path: str,
    dialect: str,
    variables: Mapping[str, Any],
    *,
    allowed_paths: Sequence[str] = (),
    catalogs: Catalogs = NO_CATALOGS,
) -> list[Audit]:
    """The ``AUDIT (...)`` blocks a model file defines after its query (none: [])."""
    header = parse_header(text, path, "MODEL")
    if header is None:
        return []
    start = inline_audits_start(text, header.body_start)
    if start == len(text):
        return []
    return parse_audits(
        text,
        path,
        dialect,
        variables,
        allowed_paths=allowed_paths,
        start=start,
        catalogs=catalogs,
    )


class _AnyName(frozenset[str]):
    """Audit bodies may use any @name: it is an argument the model supplies."""

    def __contains__(self, item: object) -> bool:
        return True


_ANY = _AnyName()


def check_audit_calls(model: Model, audits: Mapping[str, Audit]) -> None:
    """Check each audit a model uses exists and gets the arguments it needs.

    A project audit named like a built-in one is the one used (as in SQLMesh, whose
    project audits override its built-ins; the query run is the project's too).

    Raises:
        ModelError: naming the model file, the audit and, for a built-in audit, the
        argument that is missing, unknown or not of its kind.
    """
    for call in model.audits:
        audit = audits.get(call.name)
        if audit is None and call.name in BUILTIN_AUDITS:
            try:
                check_arguments(call.name, dict(call.args))
            except ArgumentError as error:
                raise ModelError(
                    f"audit {call.name} on {model.name}: {error.message}",
                    path=model.path,
                    line=call.line or model.line,
                    col=call.col or None,
                    hint=error.hint,
                ) from None
            continue
        if audit is not None and audit.standalone:
            raise ModelError(
                f"model {model.name} uses standalone audit '{call.name}' "
                f"(defined in {audit.path}:{audit.line})",
                path=model.path,
                line=call.line or model.line,
                col=call.col or None,
                hint="a standalone audit runs on its own: remove `standalone true` from its "
                "AUDIT header to attach it to models, or drop it from the model's audits",
            )
        if audit is None:
            close = did_you_mean(call.name, set(BUILTIN_AUDITS) | set(audits))
            own = sorted(a for a, v in audits.items() if not v.standalone)
            hint = (
                (f"{close} " if close else "")
                + f"define it in audits/{call.name}.sql, or use "
                + (f"one of the project's audits ({', '.join(own)}) or " if own else "")
                + f"one of SQLMesh's {len(BUILTIN_AUDITS)} built-in audits (not_null, "
                "unique_values, accepted_values, ...: the README lists them)"
            )
            if call.name in NOT_IN_SQLMESH:
                hint = (
                    f"SQLMesh 0.236.4 has no built-in {call.name} either (its source keeps "
                    f"it commented out): define it in audits/{call.name}.sql"
                )
            raise ModelError(
                f"model {model.name} uses unknown audit '{call.name}'",
                path=model.path,
                line=call.line or model.line,
                col=call.col or None,
                hint=hint,
            )
        missing = audit.parameters - {k for k, _ in call.args} - {k for k, _ in audit.defaults}
        if missing:
            raise ModelError(
                f"audit {call.name} on {model.name} needs {', '.join(sorted(missing))}",
                path=model.path,
                line=call.line or model.line,
                col=call.col or None,
                hint=f"pass them: {call.name}({', '.join(f'{m} := ...' for m in sorted(missing))})",
            )
