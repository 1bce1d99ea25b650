"""Read SQLMesh Python models without running them (``ast``; project code only in the
sandboxed Python process).

A Python model is a function decorated ``@model("schema.name", columns={...}, kind=...,
...)``. Sluice reads the decorator's arguments from the file's syntax tree: literals
(strings, numbers, lists, tuples, dicts, ``dict(...)``), ``ModelKindName.X``, SQLMesh's
kind objects (``IncrementalByTimeRangeKind(time_column=TimeColumn("ds", "%Y-%m-%d"))``
and the rest of :data:`KIND_CLASSES`, read as the kinds a MODEL header names), and names
of module-level constants, in the file or imported from a project module. A value only
the project's code can give (``DATA_START = date(2022, 6, 1).isoformat()``, a call of a
project function) is an :class:`Evaluation`: the statements of its module it needs are
run in the sandboxed Python process (:class:`ProjectPython`, the one that runs Python
macros, under the same policy), which answers with plain data; without that process it
is an error naming the argument. The parents come from ``depends_on`` or from every
``context.resolve_table("schema.model")`` / ``context.table(...)`` call in the function
and the helpers it uses, and the *code* of the model is the function and the
project-local functions, classes and constants it uses (in the same file or imported from
a project module), each written back by ``ast.unparse`` without comments or docstrings.
That code is what the fingerprint covers: editing a helper is a change, editing a comment
is not.

An ``is_sql=True`` model's function returns its SQL query: it is run (in that process,
with a macro evaluator) when the project loads, and the model is a SQL model with that
query, as in SQLMesh.

>>> import textwrap
>>> src = textwrap.dedent('''
...     from sqlmesh import model
...     RATE = 2  # a comment
...     def double(df):
...         return df.withColumn("v", df.v * RATE)
...     @model("shop.doubled", columns={"v": "int"}, kind="FULL")
...     def execute(context, start, end, execution_time, **kwargs):
...         return double(context.spark.table(context.resolve_table("shop.raw")))
... ''')
>>> [m.name for m in read_text(src, "models/doubled.py", "/p")], read_text(src, "m.py", "/p")[0].depends_on
(['shop.doubled'], ('shop.raw',))
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from sluice.core.config import ModelDefaults
from sluice.core.errors import ModelError
from sluice.core.model import fileaccess, names
from sluice.core.model.definition import AuditCall, Kind, KindName, Model, TableRef
from sluice.core.model.parse import Statements, no_start_note, read_query, read_statements
from sluice.core.model.pycode import slices
from sluice.core.model.values import plain_column
from sluice.core.timeutil import read_start, to_ms

SUPPORTED = frozenset(
    {
        "columns",
        "kind",
        "depends_on",
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
        "partitioned_by",
        "clustered_by",
        "forward_only",
        "on_destructive_change",
        "enabled",
        "dialect",
        "table_format",
        "storage_format",
        "physical_properties",
        "virtual_properties",
        "pre_statements",
        "post_statements",
    }
)
"""``@model(...)`` arguments Sluice reads; others are noted and ignored."""
_PYTHON_KINDS = frozenset(
    {KindName.FULL, KindName.INCREMENTAL_BY_TIME_RANGE, KindName.INCREMENTAL_BY_UNIQUE_KEY}
)
"""Kinds a Python model can have (SCD type 2: SQL models only, for now)."""
_SQL_KINDS = _PYTHON_KINDS | {KindName.VIEW, KindName.EMBEDDED}
"""Kinds an ``is_sql`` model can have (a SQL model: SQLMesh's default is VIEW; EMBEDDED
as a MODEL header's, its query inlined into its children)."""
_CONTEXTS = frozenset({"context", "ctx", "execution_context"})
"""Names the context argument goes by, for ``context.table("...")``."""
KIND_CLASSES: dict[str, str] = {
    "FullKind": "FULL",
    "ViewKind": "VIEW",
    "IncrementalByTimeRangeKind": "INCREMENTAL_BY_TIME_RANGE",
    "IncrementalByUniqueKeyKind": "INCREMENTAL_BY_UNIQUE_KEY",
    "IncrementalByPartitionKind": "INCREMENTAL_BY_PARTITION",
    "IncrementalUnmanagedKind": "INCREMENTAL_UNMANAGED",
    "SeedKind": "SEED",
    "ExternalKind": "EXTERNAL",
    "EmbeddedKind": "EMBEDDED",
    "SCDType2ByTimeKind": "SCD_TYPE_2_BY_TIME",
    "SCDType2ByColumnKind": "SCD_TYPE_2_BY_COLUMN",
    "CustomKind": "CUSTOM",
    "ManagedKind": "MANAGED",
}
"""SQLMesh's kind classes (``sqlmesh.core.model.kind``), each with the kind it makes: a
call ``IncrementalByTimeRangeKind(time_column=..., batch_size=...)`` is read as the dict
``{"name": "INCREMENTAL_BY_TIME_RANGE", "time_column": ..., "batch_size": ...}``, the
parameters a MODEL header's ``kind INCREMENTAL_BY_TIME_RANGE (...)`` gives."""
_TIME_COLUMN = "TimeColumn"
"""``TimeColumn(column, format)``, read as ``{"column": ..., "format": ...}``."""
_KIND_USED = frozenset(
    {
        "name",
        "time_column",
        "unique_key",
        "batch_size",
        "lookback",
        "forward_only",
        "on_destructive_change",
    }
)
"""The kind parameters Sluice reads from a Python model; others are noted and ignored."""


@dataclass(frozen=True)
class Evaluation:
    """A decorator value only the project's code can give: ``expression`` (its source, at
    ``line`` of ``file``, a module named ``module``), evaluated after the module-level
    statements it needs (:func:`.slices.needed`; a name imported from another project
    module the same way, from that module's statements)."""

    file: str  # relative to the project
    module: str
    expression: str
    line: int


@dataclass(frozen=True)
class SqlQuery:
    """An ``is_sql`` model: its file (relative to the project), the function that
    returns its query, and the model's dialect."""

    file: str
    entry: str
    dialect: str
    line: int


class ProjectPython(Protocol):
    """The sandboxed process that runs the project's Python (``pycode.macros``)."""

    def evaluate(self, request: Evaluation) -> Any:
        """The value as plain data (str, number, bool, None, lists, dicts; a date as ISO
        text; a SQLMesh kind as its dict). Raises ModelError naming the file and line."""
        ...

    def query(self, request: SqlQuery) -> list[str]:
        """What the function returns, as SQL statements in the model's dialect. Raises
        ModelError naming the file and line."""
        ...


class _NotLiteral(Exception):
    def __init__(self, node: ast.AST) -> None:
        super().__init__(ast.unparse(node))
        self.node = node


@dataclass
class _Module:
    """One parsed Python file of the project."""

    path: str
    tree: ast.Module
    defs: dict[str, ast.stmt]
    imports: dict[str, tuple[str, str]]  # local name -> (module, name)
    bindings: dict[str, list[int]]  # name -> the module-level statements that bind it
    rel: str | None = None  # relative to the project (None: not the project's)

    @property
    def dotted(self) -> str:
        """The module's name as an import names it (``models.src.shared``)."""
        rel = (self.rel or Path(self.path).name).removesuffix(".py").removesuffix("/__init__")
        return rel.replace("/", ".")


# CPython 3.11 keeps the AST constructor's recursion depth in state every thread shares:
# two threads parsing at once can fail with "SystemError: AST constructor recursion depth
# mismatch" (python/cpython#106905, seen once in the soak, issue 45). The service's
# workers load projects in threads, so this process parses one text at a time.
_AST = threading.Lock()


def _parse(text: str, path: str = "<unknown>") -> ast.Module:
    """``ast.parse`` of ``text``, one thread at a time."""
    with _AST:
        return ast.parse(text, filename=path)


def _module(path: str, text: str, rel: str | None = None) -> _Module:
    try:
        tree = _parse(text, path)
    except SyntaxError as exc:
        raise ModelError(
            f"the Python file does not parse: {exc.msg}",
            path=path,
            line=exc.lineno,
            hint="fix the syntax (Sluice reads Python models without running them)",
        ) from None
    defs: dict[str, ast.stmt] = {}
    imports: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defs[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    defs[target.id] = node
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                imports[alias.asname or alias.name] = (node.module, alias.name)
    return _Module(path, tree, defs, imports, slices.bindings(tree), rel)


class _Reader:
    """Reads decorator values in the project's modules: structurally where ``ast`` can,
    else by :class:`Evaluation` in ``python`` (None: such a value is an error)."""

    def __init__(
        self,
        root: str,
        read: Callable[[str], str | None],
        python: ProjectPython | None,
    ) -> None:
        self.root = root
        self.read = read
        self.python = python
        self.modules: dict[str, _Module | None] = {}
        self._resolving: set[tuple[str, str]] = set()

    def load(self, dotted: str) -> _Module | None:
        return _load(dotted, self.root, self.read, self.modules)

    def literal(self, node: ast.AST, module: _Module) -> Any:
        """The value of a decorator argument (structurally, or evaluated)."""
        if isinstance(node, ast.Constant):
            return node.value
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.USub | ast.UAdd)
            and isinstance(node.operand, ast.Constant)
            and isinstance(node.operand.value, int | float)
            and not isinstance(node.operand.value, bool)
        ):
            number = node.operand.value
            return -number if isinstance(node.op, ast.USub) else number
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return self.fallback(node, module)
            return [self.literal(e, module) for e in node.elts]
        if isinstance(node, ast.Dict):
            result: dict[Any, Any] = {}
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:
                    spread = self.literal(value, module)
                    if not isinstance(spread, dict):
                        raise _NotLiteral(value)
                    result.update(spread)
                else:
                    result[self.literal(key, module)] = self.literal(value, module)
            return result
        if isinstance(node, ast.Call):
            called = _vocabulary(node.func, module)
            if called is not None and not node.args and all(k.arg for k in node.keywords):
                if called == "dict":
                    return {k.arg: self.literal(k.value, module) for k in node.keywords}
                if called in KIND_CLASSES:
                    params = {str(k.arg): self.literal(k.value, module) for k in node.keywords}
                    return {**params, "name": KIND_CLASSES[called]}
            if called == _TIME_COLUMN and len(node.args) <= 2 and all(k.arg for k in node.keywords):
                given = dict(zip(("column", "format"), node.args, strict=False))
                given.update({str(k.arg): k.value for k in node.keywords})
                return {k: self.literal(v, module) for k, v in given.items()}
        if _is_kind_name(node, module):
            assert isinstance(node, ast.Attribute)
            return node.attr
        if isinstance(node, ast.Name):
            return self.name(node.id, module, node)
        return self.fallback(node, module)

    def name(self, name: str, module: _Module, at: ast.AST) -> Any:
        """The value of a module-level name: its constant's, followed into the project
        module it is imported from."""
        key = (module.path, name)
        if key in self._resolving:  # a cycle: the project's code says what it means
            return self.fallback(at, module)
        self._resolving.add(key)
        try:
            found = module.defs.get(name)
            if (
                isinstance(found, ast.Assign | ast.AnnAssign)
                and found.value is not None
                and len(module.bindings.get(name, ())) == 1
            ):
                return self.literal(found.value, module)
            target = module.imports.get(name)
            if target is not None and name not in module.defs:
                other = self.load(target[0])
                if other is not None and target[1] in other.bindings:
                    bound = other.defs.get(target[1])
                    return self.name(target[1], other, bound if bound is not None else at)
            return self.fallback(at, module)
        finally:
            self._resolving.discard(key)

    def fallback(self, node: ast.AST, module: _Module) -> Any:
        """A value only running the project's code gives."""
        if self.python is None or module.rel is None or not isinstance(node, ast.expr):
            raise _NotLiteral(node)
        return self.python.evaluate(
            Evaluation(module.rel, module.dotted, ast.unparse(node), getattr(node, "lineno", 1))
        )


def _vocabulary(func: ast.expr, module: _Module) -> str | None:
    """``dict``, a SQLMesh kind class or ``TimeColumn`` when ``func`` names one (as a
    name the module does not define itself, or an attribute such as ``kind.FullKind``)."""
    if isinstance(func, ast.Name):
        name = func.id
        if name in module.defs:
            return None
        if name in module.imports and not _sqlmesh(module.imports[name][0]):
            return None
        if name == "dict":
            return name
    elif isinstance(func, ast.Attribute):
        name = func.attr
    else:
        return None
    return name if name in KIND_CLASSES or name == _TIME_COLUMN else None


def _sqlmesh(dotted: str) -> bool:
    return dotted == "sqlmesh" or dotted.startswith("sqlmesh.")


def _is_kind_name(node: ast.AST, module: _Module) -> bool:
    """``ModelKindName.X`` (or ``kind.ModelKindName.X``, or ``kind.X`` as before)."""
    if not isinstance(node, ast.Attribute):
        return False
    owner = node.value
    if isinstance(owner, ast.Name):
        return owner.id in ("ModelKindName", "kind") and owner.id not in module.defs
    return isinstance(owner, ast.Attribute) and owner.attr == "ModelKindName"


def _decorator(node: ast.stmt) -> ast.Call | None:
    if not isinstance(node, ast.FunctionDef):
        return None
    for deco in node.decorator_list:
        if isinstance(deco, ast.Call):
            func = deco.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name == "model":
                return deco
    return None


def has_models(text: str) -> bool:
    """Whether a Python file may define models (cheap check before parsing)."""
    return "@model" in text or "model(" in text


class SqlText(str):
    """A value the project's code gave as a sqlglot expression, as SQL text in the
    model's dialect (an audit argument is then that SQL, not a string)."""

    __slots__ = ()


def read_text(
    text: str,
    path: str,
    root: str,
    defaults: ModelDefaults | None = None,
    read: Callable[[str], str | None] | None = None,
    variables: Mapping[str, Any] | None = None,
    *,
    python: ProjectPython | None = None,
    inferred_name: str | None = None,
    allowed_paths: Sequence[str] = (),
    catalogs: names.Catalogs = names.NO_CATALOGS,
) -> list[Model]:
    """The Python models of one file. ``read``: the text of another project file by path
    relative to ``root`` (for project-local imports), None when it does not exist;
    ``variables``: config.yaml's, for ``context.var``; ``python``: the process that
    evaluates what only the project's code gives (None: such a value is an error);
    ``inferred_name``: the model's name when the decorator gives none
    (``model_naming.infer_names``); ``allowed_paths`` and ``catalogs`` as for a SQL model
    (an ``is_sql`` model's query, audit arguments).

    Raises:
        ModelError: a decorator argument cannot be read, a property is wrong, or the
            parents cannot be found, naming the line.
    """
    defaults = defaults or ModelDefaults()
    module = _module(path, text, _relative(path, root))
    reader = _Reader(root, read or _no_files, python)
    found: list[Model] = []
    for node in module.tree.body:
        deco = _decorator(node)
        if deco is None:
            continue
        assert isinstance(node, ast.FunctionDef)
        file = _File(module, reader, defaults, variables or {}, tuple(allowed_paths), catalogs)
        found.extend(_model(node, deco, file, inferred_name))
    return found


def _relative(path: str, root: str) -> str | None:
    """``path`` relative to the project (None: outside it)."""
    given = Path(path)
    if not given.is_absolute():
        return given.as_posix()
    try:
        return given.resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return None


def _no_files(_: str) -> str | None:
    return None


@dataclass(frozen=True)
class _File:
    """What reading one file's models needs."""

    module: _Module
    reader: _Reader
    defaults: ModelDefaults
    variables: Mapping[str, Any]
    allowed_paths: tuple[str, ...]
    catalogs: names.Catalogs


_NOT_LITERAL_HINT = (
    "Sluice reads Python models without running them: write the argument as a string, "
    "number, list or dict (or a module-level constant holding one)"
)


def _model(
    node: ast.FunctionDef, deco: ast.Call, file: _File, inferred_name: str | None
) -> list[Model]:
    module, reader, defaults = file.module, file.reader, file.defaults

    def fail(message: str, at: ast.AST, hint: str) -> ModelError:
        return ModelError(
            message, path=module.path, line=getattr(at, "lineno", node.lineno), hint=hint
        )

    def value(at: ast.AST, what: str) -> Any:
        try:
            return reader.literal(at, module)
        except _NotLiteral as exc:
            hint = _NOT_LITERAL_HINT
            if reader.python is None:
                hint += "; other values are computed by the project's Python process, which "
                hint += "this caller does not start"
            raise fail(
                f"@model {what}: '{ast.unparse(exc.node)}' is not a literal", exc.node, hint
            ) from None
        except ModelError as exc:
            raise ModelError(
                f"@model {what}: {exc.message}",
                path=exc.path or module.path,
                line=exc.line if exc.path else getattr(at, "lineno", node.lineno),
                hint=exc.hint,
            ) from None

    keywords = {k.arg: k.value for k in deco.keywords if k.arg is not None}
    name_node = deco.args[0] if deco.args else keywords.get("name")
    if name_node is None:
        if inferred_name is None:
            raise fail(
                "@model needs the model's name",
                deco,
                'write @model("schema.name", ...) or @model(name="schema.name", ...), or set '
                "`model_naming: {infer_names: true}` in config.yaml to name it after its path",
            )
        name: Any = inferred_name
    else:
        name = value(name_node, "name")
    if not isinstance(name, str) or name.count(".") != 1:
        raise fail(
            f"@model name {name!r} must be 'schema.table'",
            name_node or deco,
            'e.g. @model("shop.customers", ...)',
        )
    is_sql = bool(value(keywords["is_sql"], "is_sql")) if "is_sql" in keywords else False
    args: dict[str, Any] = {}
    notes: list[str] = []
    for keyword in deco.keywords:
        if keyword.arg is None:
            raise fail("@model(**...) cannot be read", keyword.value, "name each argument")
        if keyword.arg in ("name", "is_sql"):
            continue
        if keyword.arg not in SUPPORTED:
            notes.append(
                f"{module.path}:{keyword.value.lineno}: @model argument '{keyword.arg}' is not "
                "used by Sluice"
            )
            continue
        args[keyword.arg] = value(keyword.value, keyword.arg)
    if args.get("enabled") is False:
        return []
    dialect = str(args.get("dialect") or defaults.dialect)
    columns = args.get("columns")
    if not is_sql and (not isinstance(columns, dict) or not columns):
        raise fail(
            f"Python model {name} needs columns={{name: type}}",
            deco,
            'declare every output column, e.g. columns={"id": "int", "name": "string"}',
        )
    spark_columns: list[tuple[str, str]] = []
    for column, type_text in (columns or {}).items():
        try:
            spark_columns.append(
                (
                    str(column).lower(),
                    exp.DataType.build(str(type_text), dialect=dialect).sql("spark"),
                )
            )
        except (ParseError, TokenError, ValueError):
            raise fail(
                f"unknown type '{type_text}' for column {column} of {name}",
                deco,
                "use a type of the model's dialect, such as int, bigint, double, string, date",
            ) from None
    kind_at = keywords.get("kind", deco)
    kind, kind_extra, unused = _kind(
        args.get("kind"), defaults, lambda m: fail(m, kind_at, _KIND_HINT), is_sql
    )
    notes += [
        f"{module.path}:{kind_at.lineno}: kind parameter '{p}' is not used by Sluice"
        for p in unused
    ]
    start: Any = args.get("start", defaults.start)
    start_relative: str | None = None
    try:
        if start is not None:
            start, start_relative = read_start(start)
        end = to_ms(args["end"]) if args.get("end") is not None else None
    except ValueError as exc:
        at = keywords.get("start" if "end" not in str(exc) else "end", deco)
        raise fail(f"@model {name}: {exc}", at, 'e.g. start="2024-01-01"') from None
    if kind.is_incremental_by_time and start is None:
        notes.insert(0, no_start_note(name.lower(), module.path, node.lineno))
    audits = _audit_calls(args.get("audits", ()), dialect, file, keywords.get("audits", deco))
    if is_sql:
        code: str | None = None
        entry: str | None = None
        used: list[str] = []
        query_sql, refs, depends_on = _sql_query(node, file, name.lower(), dialect, args)
    else:
        query_sql, refs = None, ()
        code, calls, var_names = _code(node, module, reader.root, reader.read)
        entry = node.name
        known = {str(k).lower(): v for k, v in file.variables.items()}
        used = (
            sorted(known)
            if None in var_names
            else sorted({n.lower() for n in var_names if n} & set(known))
        )
        if "depends_on" in args:
            depends_on = tuple(sorted({str(d).lower() for d in args["depends_on"]}))
        else:
            bad = [c for c in calls if c is None]
            if bad:
                raise fail(
                    f"{name}: context.resolve_table() is called with a name that is not a "
                    "string literal, so Sluice cannot tell the model's parents",
                    node,
                    'write the name as a literal, or give depends_on=["schema.model", ...]',
                )
            # Its own table read (a model reading what it built before) is no parent.
            depends_on = tuple(sorted({c.lower() for c in calls if c} - {name.lower()}))
    around = Statements(name.lower())
    for key in ("pre_statements", "post_statements"):
        given = args.get(key) or ()
        if not isinstance(given, list | tuple) or not all(isinstance(t, str) for t in given):
            raise fail(f"@model {key} must be a list of SQL strings", keywords[key], 'e.g. ["..."]')
        read_statements(
            given,
            module.path,
            keywords[key].lineno if key in keywords else node.lineno,
            dialect,
            file.variables,
            around,
            post=key == "post_statements",
            allowed_paths=file.allowed_paths,
            catalogs=file.catalogs,
        )
    notes += around.notes(module.path, name.lower(), kind.name, node.lineno)
    known_vars = {str(k).lower(): v for k, v in file.variables.items()}
    grain = args.get("grain", args.get("grains", ()))
    return [
        Model(
            name=name.lower(),
            kind=kind,
            dialect=dialect,
            query_sql=query_sql,
            columns=tuple(spark_columns),
            depends_on=depends_on,
            references=refs,
            cron=str(args.get("cron") or defaults.cron),
            start=start,
            start_relative=start_relative,
            end=end,
            grain=tuple(str(g).lower() for g in ([grain] if isinstance(grain, str) else grain)),
            owner=args.get("owner", defaults.owner),
            tags=tuple(str(t) for t in args.get("tags", ())),
            description=args.get("description"),
            column_descriptions=tuple(
                (str(k).lower(), str(v)) for k, v in (args.get("column_descriptions") or {}).items()
            ),
            audits=audits,
            forward_only=bool(
                kind_extra.get("forward_only", args.get("forward_only", defaults.forward_only))
            ),
            on_destructive_change=str(
                kind_extra.get(
                    "on_destructive_change",
                    args.get("on_destructive_change", defaults.on_destructive_change),
                )
            ),
            partitioned_by=tuple(str(p) for p in args.get("partitioned_by", ())),
            clustered_by=tuple(str(p) for p in args.get("clustered_by", ())),
            table_format=args.get("table_format"),
            storage_format=args.get("storage_format"),
            physical_properties=tuple(
                (str(k), str(v)) for k, v in (args.get("physical_properties") or {}).items()
            ),
            virtual_properties=tuple(
                (str(k), str(v)) for k, v in (args.get("virtual_properties") or {}).items()
            ),
            python_code=code,
            python_entry=entry,
            python_variables=tuple((n, known_vars[n]) for n in used),
            pre_statements=tuple(around.pre),
            post_statements=tuple(around.post),
            statement_refusals=tuple(around.refused),
            path=module.path,
            line=node.lineno,
            warnings=tuple(notes),
        )
    ]


def _sql_query(
    node: ast.FunctionDef, file: _File, name: str, dialect: str, args: Mapping[str, Any]
) -> tuple[str, tuple[TableRef, ...], tuple[str, ...]]:
    """An ``is_sql`` model's query (its function run in the project's Python process),
    the tables it reads and the model's parents."""
    module = file.module
    if file.reader.python is None or module.rel is None:
        raise ModelError(
            f"{name} is an is_sql model: its query is what its function returns, and this "
            "caller runs no project Python",
            path=module.path,
            line=node.lineno,
            hint="load the project where its Python may run (see the README's 'Python in "
            "projects')",
        )
    statements = [
        s
        for s in file.reader.python.query(SqlQuery(module.rel, node.name, dialect, node.lineno))
        if s.strip().strip(";").strip()
    ]
    if len(statements) != 1:
        raise ModelError(
            f"the function of is_sql model {name} returned {len(statements)} SQL statements; "
            "it returns one query",
            path=module.path,
            line=node.lineno,
            hint="return the query as a string or a sqlglot expression",
        )
    query_sql, refs, _ = read_query(
        statements[0],
        module.path,
        node.lineno,
        dialect,
        file.variables,
        name,
        allowed_paths=file.allowed_paths,
        catalogs=file.catalogs,
    )
    given = {str(d).lower() for d in args.get("depends_on", ())}
    depends = tuple(sorted(({r.name for r in refs} | given) - {name}))
    return query_sql, refs, depends


def _audit_calls(given: Any, dialect: str, file: _File, at: ast.AST) -> tuple[AuditCall, ...]:
    """``audits=["name", ("name", {"argument": value}), ...]`` as a SQL model's audit
    calls: a value is what SQLMesh's ``exp.convert`` makes of it (a string is a string
    literal, a list a tuple), a sqlglot expression the project's code gave is its SQL."""
    path, line = file.module.path, getattr(at, "lineno", 1)
    hint = 'write audits=["name", ("name", {"column": "id"})]'
    calls: list[AuditCall] = []
    for item in [given] if isinstance(given, str) else given or ():
        if isinstance(item, str):
            audit, arguments = item, {}
        elif (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], dict)
        ):
            audit, arguments = item
        else:
            raise ModelError(
                f"@model audits: {item!r} is not an audit name or (name, {{argument: value}})",
                path=path,
                line=line,
                hint=hint,
            )
        audit = audit.lower()
        blocking = True
        if audit.endswith("_non_blocking"):
            audit, blocking = audit.removesuffix("_non_blocking"), False
        sql_args: list[tuple[str, str]] = []
        for key, value in arguments.items():
            if str(key).lower() == "blocking":
                blocking = bool(value)
                continue
            subject = f"audit {audit} argument {key}"
            try:
                tree = fileaccess.resolve_identifiers(_expression(value, dialect))
            except (ParseError, TokenError, ValueError) as exc:
                raise ModelError(f"{subject}: {exc}", path=path, line=line, hint=hint) from None
            sql = tree.sql("spark", normalize=True)
            found = fileaccess.find_in_tree(tree, references_checked=False)
            found += fileaccess.find_substitutions(sql)
            fileaccess.refuse(
                fileaccess.placed(found, line, 1), file.allowed_paths, subject, path, line
            )
            sql_args.append((str(key).lower(), sql))
        calls.append(AuditCall(audit, tuple(sql_args), blocking, line, 1))
    return tuple(calls)


def _expression(value: Any, dialect: str) -> exp.Expr:
    """A decorator value as SQL (SQLMesh's ``exp.convert``, lists as tuples)."""
    if isinstance(value, SqlText):
        return sqlglot.parse_one(str(value), read=dialect)
    if isinstance(value, list):
        return exp.Tuple(expressions=[_expression(v, dialect) for v in value])
    if isinstance(value, dict):
        raise ValueError("a dict is not an audit argument")
    return exp.convert(value)


_KIND_HINT = (
    'e.g. kind="FULL", kind=dict(name=ModelKindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds") '
    'or kind=IncrementalByTimeRangeKind(time_column="ds")'
)


def _kind(
    given: Any, defaults: ModelDefaults, fail: Callable[[str], ModelError], is_sql: bool
) -> tuple[Kind, dict[str, Any], list[str]]:
    """The kind, the model properties it sets (``forward_only``,
    ``on_destructive_change``) and the parameters Sluice does not use."""
    if given is None:  # SQLMesh's defaults: a Python model is FULL, a SQL model a VIEW
        return Kind(KindName.VIEW if is_sql else KindName.FULL), {}, []
    params = dict(given) if isinstance(given, dict) else {"name": given}
    name = str(params.get("name", "")).upper()
    if name == "SCD_TYPE_2":
        name = KindName.SCD_TYPE_2_BY_TIME.value
    allowed = _SQL_KINDS if is_sql else _PYTHON_KINDS
    if name not in allowed:
        which = "an is_sql" if is_sql else "a Python"
        raise fail(
            f"kind {name or given!r} is not a kind {which} model can have (Sluice reads "
            f"{', '.join(sorted(allowed))})"
        )
    time_column = params.get("time_column")
    time_format = None
    if isinstance(time_column, dict):  # TimeColumn(column, format)
        time_format, time_column = time_column.get("format"), time_column.get("column")
    elif isinstance(time_column, list):  # ("ds", "%Y-%m-%d")
        time_format = time_column[1] if len(time_column) > 1 else None
        time_column = time_column[0] if time_column else None
    unique_key = params.get("unique_key", ())
    batch_size = params.get("batch_size", defaults.batch_size)
    lookback = params.get("lookback") or 0
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise fail(f"kind {name}: batch_size {batch_size!r} is not a positive whole number")
    if not isinstance(lookback, int) or lookback < 0:
        raise fail(f"kind {name}: lookback {lookback!r} is not a whole number")
    kind = Kind(
        KindName(name),
        time_column=str(time_column).lower() if time_column else None,
        time_column_format=str(time_format) if time_format else None,
        unique_key=tuple(
            str(k).lower() for k in ([unique_key] if isinstance(unique_key, str) else unique_key)
        ),
        batch_size=batch_size,
        lookback=lookback,
    )
    for column in (kind.time_column, *kind.unique_key):
        if column is not None and not plain_column(column):
            raise fail(
                f"kind {name}: {column!r} is not a column name Sluice can use (letters, "
                "digits and underscores: Sluice writes it into the job's SQL)"
            )
    if kind.name == KindName.INCREMENTAL_BY_TIME_RANGE and not kind.time_column:
        raise fail(
            f"an INCREMENTAL_BY_TIME_RANGE {'' if is_sql else 'Python '}model needs time_column"
        )
    if kind.name == KindName.INCREMENTAL_BY_UNIQUE_KEY and not kind.unique_key:
        raise fail(
            f"an INCREMENTAL_BY_UNIQUE_KEY {'' if is_sql else 'Python '}model needs unique_key"
        )
    extra = {k: params[k] for k in ("forward_only", "on_destructive_change") if k in params}
    if "on_destructive_change" in extra:
        extra["on_destructive_change"] = str(extra["on_destructive_change"]).lower()
    unused = [k for k in params if k not in _KIND_USED and k != "materialized"]
    return kind, extra, unused


def _clean(node: ast.stmt) -> str:
    """A definition as code: no comments (ast drops them), no docstrings, no decorators
    of the model itself (its arguments are the model's properties)."""
    copy = _parse(ast.unparse(node)).body[0]
    for item in ast.walk(copy):
        body = getattr(item, "body", None)
        if (
            isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            item.body = body[1:] or [ast.Pass()]
    if isinstance(copy, ast.FunctionDef) and _decorator(copy) is not None:
        copy.decorator_list = [d for d in copy.decorator_list if _decorator_name(d) != "model"]
    return ast.unparse(copy)


def _decorator_name(node: ast.expr) -> str | None:
    func = node.func if isinstance(node, ast.Call) else node
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def _code(
    entry: ast.FunctionDef, module: _Module, root: str, read: Callable[[str], str | None]
) -> tuple[str, list[str | None], list[str | None]]:
    """The model's code (entry first, then what it uses, by file and name), the names
    given to ``context.resolve_table`` / ``context.table`` and those given to
    ``context.var`` (None when not a literal)."""
    parts: list[str] = []
    calls: list[str | None] = []
    names: list[str | None] = []
    seen: set[tuple[str, str]] = set()
    modules: dict[str, _Module | None] = {}
    todo: list[tuple[_Module, str]] = [(module, entry.name)]
    while todo:
        where, name = todo.pop(0)
        if (where.path, name) in seen:
            continue
        seen.add((where.path, name))
        node = where.defs.get(name)
        if node is None:
            target = where.imports.get(name)
            if target is None:
                continue
            other = _load(target[0], root, read, modules)
            if other is not None:
                todo.append((other, target[1]))
            continue
        tag = f"# {Path(where.path).name}:{name}" if where is not module else f"# {name}"
        parts.append(f"{tag}\n{_clean(node)}")
        for item in ast.walk(node):
            if isinstance(item, ast.Name) and isinstance(item.ctx, ast.Load):
                todo.append((where, item.id))
            elif isinstance(item, ast.Call) and (_table_call(item) or _var_call(item)):
                first = item.args[0]
                if _table_call(item):
                    calls.append(_text(first, where, node))
                else:
                    literal = first.value if isinstance(first, ast.Constant) else None
                    names.append(literal if isinstance(literal, str) else None)
    return "\n\n".join(parts), calls, names


def _text(value: ast.expr, module: _Module, scope: ast.stmt) -> str | None:
    """The text ``value`` names: a string literal, or a name of ``module`` bound once, at
    its top level, to a string literal (``ITEMS = "sushi.items"``; SQLMesh's sushi example
    names a parent so) and bound nowhere else: not in ``scope`` (the function reading it)
    nor through ``global``. None: anything else."""
    if isinstance(value, ast.Constant):
        return value.value if isinstance(value.value, str) else None
    if not isinstance(value, ast.Name) or len(module.bindings.get(value.id, ())) != 1:
        return None
    bound = module.defs.get(value.id)
    given = bound.value if isinstance(bound, ast.Assign | ast.AnnAssign) else None
    if not (isinstance(given, ast.Constant) and isinstance(given.value, str)):
        return None
    stored = {
        n.id for n in ast.walk(scope) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    stored |= {n.arg for n in ast.walk(scope) if isinstance(n, ast.arg)}
    if value.id in stored:
        return None
    if any(
        isinstance(node, ast.Global | ast.Nonlocal) and value.id in node.names
        for node in ast.walk(module.tree)
    ):
        return None
    return given.value


def _table_call(call: ast.Call) -> bool:
    """``<x>.resolve_table(...)``, or ``context.table(...)`` (not ``spark.table``)."""
    func = call.func
    if not isinstance(func, ast.Attribute) or not call.args:
        return False
    if func.attr == "resolve_table":
        return True
    return func.attr == "table" and isinstance(func.value, ast.Name) and func.value.id in _CONTEXTS


def _var_call(call: ast.Call) -> bool:
    """``context.var(...)``."""
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "var"
        and bool(call.args)
        and isinstance(func.value, ast.Name)
        and func.value.id in _CONTEXTS
    )


def _load(
    dotted: str, root: str, read: Callable[[str], str | None], cache: dict[str, _Module | None]
) -> _Module | None:
    """A project-local module by its dotted name (None: not the project's, e.g. pandas)."""
    if dotted not in cache:
        cache[dotted] = None
        base = dotted.replace(".", "/")
        for rel in (f"{base}.py", f"{base}/__init__.py", f"models/{base}.py"):
            text = read(rel)
            if text is not None:
                cache[dotted] = _module(str(Path(root) / rel), text, rel)
                break
    return cache[dotted]


def project_reader(root: Path) -> Callable[[str], str | None]:
    """Read a project file by relative path (never outside ``root``)."""
    base = root.resolve()

    def read(rel: str) -> str | None:
        path = (base / rel).resolve()
        if not path.is_relative_to(base) or not path.is_file():
            return None
        return path.read_text(encoding="utf-8")

    return read


def read_file(
    path: Path,
    root: Path,
    defaults: ModelDefaults,
    variables: Mapping[str, Any],
    *,
    python: ProjectPython | None = None,
    inferred_name: str | None = None,
    allowed_paths: Sequence[str] = (),
    catalogs: names.Catalogs = names.NO_CATALOGS,
) -> list[Model]:
    text = path.read_text(encoding="utf-8")
    if not has_models(text):
        return []
    return read_text(
        text,
        str(path),
        str(root),
        defaults,
        project_reader(root),
        variables,
        python=python,
        inferred_name=inferred_name,
        allowed_paths=allowed_paths,
        catalogs=catalogs,
    )


def all_columns_added(old: Mapping[str, str], new: Mapping[str, str]) -> bool:
    """Whether ``new`` is ``old`` with columns added (the one non-breaking Python change)."""
    return len(new) > len(old) and all(new.get(k) == v for k, v in old.items())
