"""SQL that reaches past the catalog: files read by path, Java calls, scripts (pure).

A model reads tables. Spark SQL can also read files by path (``parquet.`/data/x```),
call any Java method (``reflect``), run a script (``TRANSFORM ... USING``), and load or
write files (``LOAD DATA``, ``ADD JAR``, ``INSERT OVERWRITE DIRECTORY``). A pull request
could use any of these to read what the Spark cluster can read, so they are found here,
on sqlglot's tree where the SQL parses and in the text where it does not, and the project
is refused at load time. Literal paths that match a glob of ``sluice.allowed_paths`` pass.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase

from sqlglot import exp

from sluice.core.errors import ModelError
from sluice.core.model.scan import LineIndex, find_code

# Spark reads `format`.`path` as the files at `path` (spark.sql.runSQLOnFiles).
FILE_FORMATS = frozenset(
    {
        "parquet", "text", "csv", "json", "orc", "avro", "binaryfile", "delta", "hive",
        "xml", "image", "libsvm", "iceberg", "hudi", "protobuf",
    }
)  # fmt: skip
# Functions that call Java methods: no allow-list can make them safe. (Spark with Hive
# support also resolves Hive's built-ins, hence reflect2 and in_file below.)
CODE_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect", "reflect2"})
# Functions that read a file, and the position of their path argument. Any table function
# named read_* is one too (Databricks' read_files, DuckDB's read_parquet, ...).
PATH_FUNCTIONS = {
    "cloud_files": 0, "glob": 0, "parquet_scan": 0, "pg_read_file": 0,
    "pg_read_binary_file": 0, "from_protobuf": 2, "to_protobuf": 2, "in_file": 1,
}  # fmt: skip

ALLOW_HINT = (
    "read data through a model, a seed or a table declared in external_models.yaml; "
    "to allow this path, add a glob that matches it to `allowed_paths` under `sluice:` "
    "in config.yaml"
)
_DOTDOT_HINT = "write the path without '..': a path with '..' is never allowed"
_CODE_HINT = "compute the value with SQL functions; calling Java cannot be allowed"
_SCRIPT_HINT = "compute the columns with SQL functions; running a script cannot be allowed"
_STATEMENT_HINT = (
    "a model or audit is one SELECT query; load files with a SEED model, or declare the "
    "table in external_models.yaml"
)
# A quoted name with one of these in it is a path, whatever its schema.
_PATH_CHARS = re.compile(r"[/\\:]")
_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
    hint = _DOTDOT_HINT if _has_dotdot(path) else ALLOW_HINT
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
    """Whether ``path`` matches one of the globs; a path with a '..' segment never does."""
    if _has_dotdot(path):
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


def find_in_tree(tree: exp.Expr) -> list[FileAccess]:
    """Every file read, Java call and script in a parsed query, in text order."""
    return sorted(_walk(tree), key=lambda a: (a.line == 0, a.line, a.col))


def _walk(tree: exp.Expr) -> Iterator[FileAccess]:
    for node in tree.walk():
        if isinstance(node, exp.Table) and is_file_table(node):
            db = node.args.get("db")
            where = _start(db.meta if isinstance(db, exp.Expr) else {}, node.db)
            yield _reads(node.name, f"{node.db}.`{node.name}`", *where)
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
