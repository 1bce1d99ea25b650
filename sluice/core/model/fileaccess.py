"""SQL that reaches past the catalog: files read by path, Java calls, scripts (pure).

A model reads tables. Spark SQL can also read files by path (``parquet.`/data/x```),
call any Java method (``reflect``), run a script (``TRANSFORM ... USING``), and load or
write files (``LOAD DATA``, ``ADD JAR``, ``INSERT OVERWRITE DIRECTORY``). A pull request
could use any of these to read what the Spark cluster can read, so they are found here,
on sqlglot's tree where the SQL parses and in the text where it does not, and the project
is refused at load time. Literal paths that match a glob of ``sluice.allowed_paths`` pass.

Two ways of naming things are worked out by Spark, not written in the text:

- ``IDENTIFIER(expr)`` names a table (or column, or function) by a constant expression
  Spark evaluates when the query runs, so ``IDENTIFIER('text.`' || '/etc/passwd`')`` reads
  a file although no table in the tree says so. Only one quoted string naming a table of
  one to three parts passes; :func:`resolve_identifiers` turns it into that table, so it
  is a dependency like any other. Anything computed is refused.
- Spark replaces ``${name}``, ``${env:X}``, ``${system:x}``, ``${hiveconf:x}`` anywhere in
  the text (string literals included) before it parses it, so ``'${env:SECRET}'`` is the
  driver's environment and ``text.`${system:user.dir}/x``` a path. Any ``${`` is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import TypeVar

from sqlglot import exp

from sluice.core.errors import ModelError
from sluice.core.model.scan import LineIndex, find_code
from sluice.core.snapshot.naming import reserved_schema

_Tree = TypeVar("_Tree", bound=exp.Expr)

# Spark reads `format`.`path` as the files at `path` (spark.sql.runSQLOnFiles).
FILE_FORMATS = frozenset(
    {
        "parquet",
        "text",
        "csv",
        "json",
        "orc",
        "avro",
        "binaryfile",
        "delta",
        "hive",
        "xml",
        "image",
        "libsvm",
        "iceberg",
        "hudi",
        "protobuf",
    }
)
# Functions that call Java methods: no allow-list can make them safe. (Spark with Hive
# support also resolves Hive's built-ins, hence reflect2 and in_file below.)
CODE_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect", "reflect2"})
# Functions that read a file, and the position of their path argument. Any table function
# named read_* is one too (Databricks' read_files, DuckDB's read_parquet, ...).
PATH_FUNCTIONS = {
    "cloud_files": 0,
    "glob": 0,
    "parquet_scan": 0,
    "pg_read_file": 0,
    "pg_read_binary_file": 0,
    "from_protobuf": 2,
    "to_protobuf": 2,
    "in_file": 1,
}

ALLOW_HINT = (
    "read data through a model, a seed or a table declared in external_models.yaml; "
    "to allow this path, add a glob that matches it to `allowed_paths` under `sluice:` "
    "in config.yaml"
)
_DOTDOT_HINT = "write the path without '..': a path with '..' is never allowed"
_CODE_HINT = "compute the value with SQL functions; calling Java cannot be allowed"
_SCRIPT_HINT = "compute the columns with SQL functions; running a script cannot be allowed"
_REPOSITORY_HINT = (
    "read your own models by their names and your sources by theirs; the schemas Sluice "
    "makes for a repository are that repository's alone"
)
_STATEMENT_HINT = (
    "a model or audit is one SELECT query; load files with a SEED model, or declare the "
    "table in external_models.yaml"
)
_IDENTIFIER_HINT = (
    "name the table directly (schema.table), or give IDENTIFIER one quoted string such as "
    "IDENTIFIER('schema.table'); files are read through tables, or through a path listed "
    "in sluice.allowed_paths on the prod branch"
)
_IDENTIFIER_FILE_HINT = (
    "name the table directly (schema.table); files are read through tables, or through a "
    "path listed in sluice.allowed_paths on the prod branch, written as format.`path` "
    "without IDENTIFIER so that it can be checked"
)
_RELATIVE_HINT = (
    "name a model, or a table declared in external_models.yaml, whose schema is not the "
    "name of a file format; an audit reads its model as @this_model"
)
_SUBSTITUTION_HINT = (
    "write it without '${' (to keep the characters, split them: '$' || '{...}'); Sluice's "
    "own variables are written @VAR('name')"
)
_BACKSLASH_HINT = (
    "write the path with '/' and without '\\': Spark reads '\\.' as '.', so a path with "
    "'\\' is never allowed"
)
# A quoted name with one of these in it is a path, whatever its schema.
_PATH_CHARS = re.compile(r"[/\\:]")
_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What a literal IDENTIFIER('...') may name: one to three parts, each plain or quoted with
# backticks (no path characters, quotes or backslashes, whose reading could differ).
_NAME_PART = r"(?:[A-Za-z0-9_]+|`(?:[^`\\'/:\n]|``)+`)"
_TABLE_NAME = re.compile(rf"{_NAME_PART}(?:\.{_NAME_PART}){{0,2}}")
# format.`path` written inside IDENTIFIER('...'), to name the file in messages.
_LITERAL_FILE = re.compile(r"`?[A-Za-z_]\w*`?\.`((?:[^`]|``)*)`")
# Spark's variable substitution: ${name}, ${env:NAME}, ${system:name}, ...
_SUBSTITUTION = re.compile(r"\$\{[^}\n]{0,60}\}?")


@dataclass(frozen=True)
class FileAccess:
    """One piece of SQL that reaches past the catalog.

    Attributes:
        what: What it does, to follow a subject: "reads the file '/x' directly (...)".
        path: The literal path it reads, when ``sluice.allowed_paths`` may permit it.
        hint: How to fix it.
        line: 1-based line in the text that was parsed (0 when unknown).
        col: 1-based column (0 when unknown).
    """

    what: str
    path: str | None
    hint: str
    line: int = 0
    col: int = 0

    def allowed(self, allowed_paths: Sequence[str]) -> bool:
        """Whether ``allowed_paths`` (fnmatch globs) permit this access."""
        return self.path is not None and path_allowed(self.path, allowed_paths)


def _reads(path: str, how: str, line: int, col: int) -> FileAccess:
    hint = _DOTDOT_HINT if _has_dotdot(path) else _BACKSLASH_HINT if "\\" in path else ALLOW_HINT
    return FileAccess(f"reads the file '{path}' directly ({how})", path, hint, line, col)


def _literal_needed(name: str, line: int, col: int) -> FileAccess:
    return FileAccess(
        f"calls {name}() with a path that is not a string literal",
        None,
        "write the path as a quoted string, so that it can be checked against "
        "`allowed_paths` under `sluice:` in config.yaml",
        line,
        col,
    )


def _has_dotdot(path: str) -> bool:
    return ".." in re.split(r"[/\\]", path)


def path_allowed(path: str, allowed_paths: Sequence[str]) -> bool:
    """Whether ``path`` matches one of the globs.

    A path with a '..' segment never does, nor one with a backslash: Hadoop reads ``\\.``
    as ``.``, so ``/data/.\\./x`` is ``/data/../x``.
    """
    if _has_dotdot(path) or "\\" in path:
        return False
    return any(fnmatchcase(path, pattern) for pattern in allowed_paths)


def is_file_table(table: exp.Table) -> bool:
    """Whether Spark reads ``table`` as files: ``format.`path``` or a path-like name."""
    if isinstance(table.this, exp.Func) or not table.db:
        return False
    name = table.name
    return bool(
        (table.db.lower() in FILE_FORMATS and not _PLAIN.match(name)) or _PATH_CHARS.search(name)
    )


def find_in_tree(tree: exp.Expr, *, references_checked: bool = True) -> list[FileAccess]:
    """Every file read, Java call and script in a parsed query, in text order.

    Args:
        tree: The parsed SQL, after :func:`resolve_identifiers` where the caller keeps it.
        references_checked: Whether the tables the SQL reads are checked elsewhere to be
            the project's models and declared tables (a model's query). When they are not
            (audits and their arguments), a table in a schema named like a file format
            (``text.notes``) is refused too: Spark reads it as the files at the relative
            path ``notes`` when the catalog has no such table.
    """
    found = _walk(tree, references_checked)
    return sorted(found, key=lambda a: (a.line == 0, a.line, a.col))


def resolve_identifiers(tree: _Tree) -> _Tree:
    """``tree`` with each ``IDENTIFIER('schema.table')`` read as a table turned into it.

    Only one quoted string naming a table (see the module's docstring) is turned; anything
    else is left for :func:`find_in_tree` to refuse. The tree is changed in place: the
    query Spark runs, its fingerprint and its dependencies then name the table itself.
    """
    for table in list(tree.find_all(exp.Table)):
        clause = table.this
        if not is_identifier_clause(clause):
            continue
        literal = _identifier_literal(clause)
        named = _table_named(literal) if literal is not None else None
        if named is None or _file_like(named):
            continue
        line, col = _start(clause.meta, "IDENTIFIER")
        parts = [named.args.get(k) for k in ("catalog", "db", "this")]
        first = next(p for p in parts if isinstance(p, exp.Identifier))
        if line:
            # Messages about the table point where IDENTIFIER starts.
            width = len(first.name) + (2 if first.quoted else 0)
            first.meta.update(line=line, col=col + width - 1)
        for key in ("catalog", "db", "this"):
            table.set(key, named.args.get(key))
    return tree


def is_identifier_clause(node: exp.Expr | None) -> bool:
    """Whether ``node`` is ``IDENTIFIER(...)``: a name Spark works out when it runs."""
    return isinstance(node, exp.DynamicIdentifier) or (
        isinstance(node, exp.Anonymous) and node.name.upper() == "IDENTIFIER"
    )


def _identifier_literal(clause: exp.Expr) -> str | None:
    """The string an IDENTIFIER clause names, when it is one string literal."""
    args = [clause.this] if isinstance(clause, exp.DynamicIdentifier) else list(clause.expressions)
    if len(args) != 1:
        return None
    arg = args[0]
    while isinstance(arg, exp.Paren):
        arg = arg.this
    return arg.this if isinstance(arg, exp.Literal) and arg.is_string else None


def _table_named(text: str) -> exp.Table | None:
    """The table ``text`` names (``a``, ``a.b``, ``a.`b c```), or None if it is no name."""
    if not _TABLE_NAME.fullmatch(text):
        return None
    parts = [
        exp.to_identifier(p[1:-1].replace("``", "`"), quoted=True)
        if p.startswith("`")
        else exp.to_identifier(p)
        for p in re.findall(_NAME_PART, text)
    ]
    keys = ("catalog", "db", "this")[-len(parts) :]
    return exp.Table(**dict(zip(keys, parts, strict=True)))


def _file_like(table: exp.Table) -> bool:
    """Whether Spark may read ``table`` as files: a path, or a name in a format's schema."""
    return is_file_table(table) or _format_schema(table)


def _format_schema(table: exp.Table) -> bool:
    """``text.notes``: Spark reads the relative path ``notes`` if the catalog lacks it."""
    return (
        not isinstance(table.this, exp.Func)
        and not table.args.get("catalog")
        and table.db.lower() in FILE_FORMATS
    )


def _identifier(clause: exp.Expr) -> FileAccess | None:
    """What a refused IDENTIFIER clause does (None for one that names a table or column)."""
    where = _start(clause.meta, "IDENTIFIER")
    literal = _identifier_literal(clause)
    in_from = isinstance(clause.parent, exp.Table) and clause.arg_key == "this"
    if literal is None:
        args = [clause.this] if isinstance(clause, exp.DynamicIdentifier) else clause.expressions
        shown = _short(", ".join(a.sql("spark") for a in args if isinstance(a, exp.Expr)))
        return FileAccess(
            f"uses IDENTIFIER() with a name computed when the query runs ({shown}), which "
            "can name a file",
            None,
            _IDENTIFIER_HINT,
            *where,
        )
    if not in_from:
        return None  # a column named by a literal: no file
    named = _table_named(literal)
    shown = f"IDENTIFIER('{_short(literal)}')"
    file = _LITERAL_FILE.fullmatch(literal)
    if named is None and file is not None:
        path = file.group(1).replace("``", "`")
        return FileAccess(
            f"reads the file '{path}' directly ({shown})", None, _IDENTIFIER_FILE_HINT, *where
        )
    if named is None:
        return FileAccess(
            f"uses {shown}, which is not a table name of one to three parts",
            None,
            _IDENTIFIER_HINT,
            *where,
        )
    if is_file_table(named):
        return FileAccess(
            f"reads the file '{named.name}' directly ({shown})", None, _IDENTIFIER_FILE_HINT, *where
        )
    if _format_schema(named):
        return _relative(named, shown, where)
    return None


def _relative(table: exp.Table, shown: str, where: tuple[int, int]) -> FileAccess:
    return FileAccess(
        f"reads {shown}, which Spark reads as the {table.db.lower()} files at the relative "
        f"path '{table.name}' when the catalog has no such table",
        None,
        _RELATIVE_HINT,
        *where,
    )


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _substitution(node: exp.Expr) -> FileAccess | None:
    """``${...}`` in a literal or a quoted name, or a ``${x}`` parameter."""
    if isinstance(node, exp.Parameter):
        return _substituted(node.sql("spark"), 0, 0)
    value = node.this if isinstance(node, exp.Literal | exp.Identifier | exp.Var) else None
    if not isinstance(value, str) or "${" not in value:
        return None
    quoted = isinstance(node, exp.Literal) or (isinstance(node, exp.Identifier) and node.quoted)
    quote = ("'" if isinstance(node, exp.Literal) else "`") if quoted else ""
    where = _start(node.meta, f"{quote}{value}{quote}")
    match = _SUBSTITUTION.search(value)
    return _substituted(match.group() if match else "${", *where)


def _substituted(text: str, line: int, col: int) -> FileAccess:
    return FileAccess(
        f"writes '{text}', which Spark replaces with a setting, a system property or an "
        "environment variable before it runs the query",
        None,
        _SUBSTITUTION_HINT,
        line,
        col,
    )


def find_substitutions(text: str) -> list[FileAccess]:
    """Every ``${`` in SQL text, literals and comments included (Spark replaces them all)."""
    lines = LineIndex(text)
    return [
        _substituted(match.group(), *lines.position(match.start()))
        for match in _SUBSTITUTION.finditer(text)
    ]


def _walk(tree: exp.Expr, references_checked: bool = True) -> Iterator[FileAccess]:
    for node in tree.walk():
        substitution = _substitution(node)
        if substitution is not None:
            yield substitution
        if isinstance(node, exp.Table) and reserved_schema(node.db):
            # A repository's namespace (issue 46): only Sluice names it, for its repository.
            what = f"reads '{node.db}.{node.name}', in a schema Sluice keeps for a repository"
            yield FileAccess(what, None, _REPOSITORY_HINT, *_schema_start(node))
        elif isinstance(node, exp.Table) and is_file_table(node):
            yield _reads(node.name, f"{node.db}.`{node.name}`", *_schema_start(node))
        elif isinstance(node, exp.Table) and not references_checked and _format_schema(node):
            yield _relative(node, f"{node.db}.{node.name}", _schema_start(node))
        elif is_identifier_clause(node):
            access = _identifier(node)
            if access is not None:
                yield access
        elif isinstance(node, exp.QueryTransform):
            # The node itself has no position; its first column is on the same line.
            inner = next((n.meta for n in node.walk() if n.meta.get("line")), {})
            where = (inner["line"], 0) if inner else (0, 0)
            yield FileAccess("runs a script with TRANSFORM ... USING", None, _SCRIPT_HINT, *where)
        elif isinstance(node, exp.Func):
            access = _function(node)
            if access is not None:
                yield access


def _function(node: exp.Func) -> FileAccess | None:
    name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
    where = _start(node.meta, name)
    if name in CODE_FUNCTIONS:
        return FileAccess(f"calls {name}(), which runs any Java method", None, _CODE_HINT, *where)
    table_function = name.startswith("read_") and isinstance(node.parent, exp.Table)
    if name not in PATH_FUNCTIONS and not table_function:
        return None
    index = PATH_FUNCTIONS.get(name, 0)
    args = list(node.iter_expressions())
    if len(args) <= index:
        # from_protobuf(data, 'Message') names a class on the classpath: no file.
        return _literal_needed(name, *where) if index == 0 else None
    arg = args[index]
    if isinstance(arg, exp.Literal) and arg.is_string:
        return _reads(arg.this, f"{name}()", *where)
    return _literal_needed(name, *where)


def _schema_start(table: exp.Table) -> tuple[int, int]:
    """Where ``table``'s schema starts (its opening backtick, when quoted)."""
    db = table.args.get("db")
    if not isinstance(db, exp.Identifier):
        return 0, 0
    return _start(db.meta, f"`{db.name}`" if db.quoted else db.name)


def _start(meta: dict[str, object], word: str) -> tuple[int, int]:
    """sqlglot's meta gives a token's last column; messages point at its first."""
    line, col = meta.get("line"), meta.get("col")
    if not isinstance(line, int) or not isinstance(col, int):
        return 0, 0
    return line, max(col - len(word) + 1, 1)


_FORMATS = "|".join(sorted(FILE_FORMATS))
_PATH_NAMES = "|".join(sorted(PATH_FUNCTIONS))
# (pattern, message, hint): {0} is the matched words in upper case, {1} in lower case.
_TEXT_RULES: tuple[tuple[str, str, str], ...] = (
    (r"LOAD\s+DATA\b", "uses LOAD DATA, which reads files into a table", _STATEMENT_HINT),
    (
        r"(?:ADD|LIST)\s+(?:JAR|FILE|ARCHIVE)S?\b",
        "uses {0}, which reaches the file system",
        _STATEMENT_HINT,
    ),
    (
        r"INSERT\s+OVERWRITE\s+(?:LOCAL\s+)?DIRECTORY\b",
        "uses INSERT OVERWRITE DIRECTORY, which writes files",
        _STATEMENT_HINT,
    ),
    (
        r"LOCATION\s*(?=['\"])",
        "sets a LOCATION, which reads or writes files at a path",
        _STATEMENT_HINT,
    ),
    (r"USING\s*(?=['\"])", "runs a script with TRANSFORM ... USING", _SCRIPT_HINT),
    (
        r"SET\s+[A-Za-z_][\w.]*\s*=",
        "uses SET, which changes Spark's settings (such as spark.sql.runSQLOnFiles)",
        _STATEMENT_HINT,
    ),
    (r"OPTIONS\s*\(", "sets OPTIONS, which can point a table or view at a path", _STATEMENT_HINT),
    (
        r"CACHE\s+(?:LAZY\s+)?TABLE\b",
        "uses CACHE TABLE, a statement that can read files",
        _STATEMENT_HINT,
    ),
    (
        r"EXECUTE\s+IMMEDIATE\b",
        "uses EXECUTE IMMEDIATE, which runs SQL built from a string",
        _STATEMENT_HINT,
    ),
    (
        # Anything but IDENTIFIER('a.b'): a computed name, or IDENTIFIER('f')(...), which
        # calls the function f (java_method, say).
        r"IDENTIFIER\s*\((?!\s*'[\w.`]*'\s*\)(?!\s*\())",
        "uses IDENTIFIER() with a computed name or as a function's name, which can reach a "
        "file or a Java method",
        _IDENTIFIER_HINT,
    ),
    (
        r"(?:reflect2?|java_method|try_reflect)\s*\(",
        "calls {1}(), which runs any Java method",
        _CODE_HINT,
    ),
)
_TEXT_TABLE = rf"\b(?i:(?P<fmt>{_FORMATS}))\s*\.\s*`(?P<path>(?:[^`]|``)*)`"
_TEXT_FUNCTION = rf"\b(?i:(?P<fn>{_PATH_NAMES}|read_\w+))\s*\(\s*(?:'(?P<path>[^']*)')?"


def find_in_text(text: str) -> list[FileAccess]:
    """Every file read, Java call and script in SQL that sqlglot cannot parse, in order.

    Conservative: it reads the words outside literals and comments, so it may find more
    than Spark would run, never less of what its patterns describe.
    """
    lines = LineIndex(text)
    found: list[tuple[int, FileAccess]] = []
    for pattern, what, hint in _TEXT_RULES:
        for match in find_code(text, rf"\b(?i:{pattern})"):
            words = " ".join(match.group("hit").split()).upper().rstrip("( ")
            access = FileAccess(what.format(words, words.lower()), None, hint)
            found.append((match.start("hit"), access))
    for match in find_code(text, _TEXT_TABLE):
        path = match.group("path").replace("``", "`")
        access = _reads(path, f"{match.group('fmt')}.`{path}`", 0, 0)
        found.append((match.start("hit"), access))
    for match in find_code(text, _TEXT_FUNCTION):
        name, path = match.group("fn").lower(), match.group("path")
        access = (
            _reads(path, f"{name}()", 0, 0) if path is not None else _literal_needed(name, 0, 0)
        )
        found.append((match.start("hit"), access))
    for match in _SUBSTITUTION.finditer(text):
        found.append((match.start(), _substituted(match.group(), 0, 0)))
    found.sort(key=lambda item: item[0])
    return [FileAccess(a.what, a.path, a.hint, *lines.position(offset)) for offset, a in found]


def relocate(
    accesses: Iterable[FileAccess], locate: Callable[[int, int], tuple[int, int]]
) -> list[FileAccess]:
    """``accesses`` with their positions mapped by ``locate`` (those without one kept)."""
    moved = []
    for access in accesses:
        if not access.line:
            moved.append(access)
            continue
        line, col = locate(access.line, access.col or 1)
        moved.append(replace(access, line=line, col=col if access.col else 0))
    return moved


def placed(accesses: Iterable[FileAccess], line: int, col: int) -> list[FileAccess]:
    """``accesses`` found in a snippet of SQL that starts at (line, col) of a file."""

    def locate(at_line: int, at_col: int) -> tuple[int, int]:
        return line + at_line - 1, at_col + col - 1 if at_line == 1 else at_col

    return relocate(accesses, locate)


def refuse(
    accesses: Iterable[FileAccess],
    allowed_paths: Sequence[str],
    subject: str,
    path: str,
    fallback_line: int,
) -> None:
    """Raise for the first access ``allowed_paths`` do not permit.

    Args:
        accesses: What :func:`find_in_tree` or :func:`find_in_text` found.
        allowed_paths: The globs of ``sluice.allowed_paths``.
        subject: Who does it, to start the message: "model s.a", "audit x".
        path: The file the SQL is in; accesses' positions are positions in it (see
            :func:`relocate` and :func:`placed`).
        fallback_line: The line to name when an access has none.

    Raises:
        ModelError: naming what was found, where, and how to fix it.
    """
    for access in accesses:
        if access.allowed(allowed_paths):
            continue
        raise ModelError(
            f"{subject} {access.what}",
            path=path,
            line=access.line or fallback_line,
            col=(access.col or None) if access.line else None,
            hint=access.hint,
        )
