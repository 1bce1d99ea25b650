"""Read SQLMesh Python models without running them (pure, ``ast`` only).

A Python model is a function decorated ``@model("schema.name", columns={...}, kind=...,
...)``. Sluice reads the decorator's arguments as literals (strings, numbers, lists,
dicts, ``dict(...)``, ``ModelKindName.X``, module-level constants), the parents from
``depends_on`` or from every ``context.resolve_table("schema.model")`` /
``context.table(...)`` call in the function and the helpers it uses, and the *code* of
the model: the function and the project-local functions, classes and constants it uses
(in the same file or imported from a project module), each written back by
``ast.unparse`` without comments or docstrings. That code is what the fingerprint covers:
editing a helper is a change, editing a comment is not.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from sluice.core.config import ModelDefaults
from sluice.core.errors import ModelError
from sluice.core.model.definition import AuditCall, Kind, KindName, Model
from sluice.core.timeutil import to_ms

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
    }
)
"""``@model(...)`` arguments Sluice reads; others are noted and ignored."""
_KINDS = {k.value for k in KindName} - {
    KindName.EXTERNAL.value,
    KindName.SEED.value,
    KindName.VIEW.value,
    KindName.SCD_TYPE_2_BY_TIME.value,  # SCD type 2: SQL models only, for now
    KindName.SCD_TYPE_2_BY_COLUMN.value,
}
_CONTEXTS = frozenset({"context", "ctx", "execution_context"})
"""Names the context argument goes by, for ``context.table("...")``."""


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


def _module(path: str, text: str) -> _Module:
    try:
        tree = ast.parse(text, filename=path)
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
    return _Module(path, tree, defs, imports)


def _literal(node: ast.AST, module: _Module) -> Any:
    """The value of a decorator argument written as a literal."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [_literal(e, module) for e in node.elts]
    if isinstance(node, ast.Dict):
        result: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                result.update(_literal(value, module))
            else:
                result[_literal(key, module)] = _literal(value, module)
        return result
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return {k.arg: _literal(k.value, module) for k in node.keywords if k.arg}
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in ("ModelKindName", "kind")
    ):
        return node.attr
    if isinstance(node, ast.Name):
        found = module.defs.get(node.id)
        if isinstance(found, ast.Assign | ast.AnnAssign) and found.value is not None:
            return _literal(found.value, module)
    raise _NotLiteral(node)


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


def read_text(
    text: str,
    path: str,
    root: str,
    defaults: ModelDefaults | None = None,
    read: Callable[[str], str | None] | None = None,
    variables: Mapping[str, Any] | None = None,
) -> list[Model]:
    """The Python models of one file. ``read``: the text of another project file by path
    relative to ``root`` (for project-local imports), None when it does not exist;
    ``variables``: config.yaml's, for ``context.var``.

    Raises:
        ModelError: a decorator argument is not a literal, a property is wrong, or the
            parents cannot be found, naming the line.
    """
    defaults = defaults or ModelDefaults()
    module = _module(path, text)
    found: list[Model] = []
    for node in module.tree.body:
        deco = _decorator(node)
        if deco is None:
            continue
        assert isinstance(node, ast.FunctionDef)
        found.extend(_model(node, deco, module, root, defaults, read or _no_files, variables or {}))
    return found


def _no_files(_: str) -> str | None:
    return None


def _model(
    node: ast.FunctionDef,
    deco: ast.Call,
    module: _Module,
    root: str,
    defaults: ModelDefaults,
    read: Callable[[str], str | None],
    variables: Mapping[str, Any],
) -> list[Model]:
    def fail(message: str, at: ast.AST, hint: str) -> ModelError:
        return ModelError(
            message, path=module.path, line=getattr(at, "lineno", node.lineno), hint=hint
        )

    def value(at: ast.AST, what: str) -> Any:
        try:
            return _literal(at, module)
        except _NotLiteral as exc:
            raise fail(
                f"@model {what}: '{ast.unparse(exc.node)}' is not a literal",
                exc.node,
                "Sluice reads Python models without running them: write the argument as a "
                "string, number, list or dict (or a module-level constant holding one)",
            ) from None

    if not deco.args:
        raise fail("@model needs the model's name first", deco, 'write @model("schema.name", ...)')
    name = value(deco.args[0], "name")
    if not isinstance(name, str) or name.count(".") != 1:
        raise fail(
            f"@model name {name!r} must be 'schema.table'",
            deco.args[0],
            'e.g. @model("shop.customers", ...)',
        )
    args: dict[str, Any] = {}
    notes: list[str] = []
    for keyword in deco.keywords:
        if keyword.arg is None:
            raise fail("@model(**...) cannot be read", keyword.value, "name each argument")
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
    if not isinstance(columns, dict) or not columns:
        raise fail(
            f"Python model {name} needs columns={{name: type}}",
            deco,
            'declare every output column, e.g. columns={"id": "int", "name": "string"}',
        )
    spark_columns: list[tuple[str, str]] = []
    for column, type_text in columns.items():
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
    kind = _kind(args.get("kind"), defaults, lambda m: fail(m, deco, _KIND_HINT))
    code, calls, names = _code(node, module, root, read)
    known = {str(k).lower(): v for k, v in variables.items()}
    used = sorted(known) if None in names else sorted({n.lower() for n in names if n} & set(known))
    if "depends_on" in args:
        depends_on = tuple(sorted({str(d).lower() for d in args["depends_on"]}))
    else:
        bad = [c for c in calls if c is None]
        if bad:
            raise fail(
                f"{name}: context.resolve_table() is called with a name that is not a string "
                "literal, so Sluice cannot tell the model's parents",
                node,
                'write the name as a literal, or give depends_on=["schema.model", ...]',
            )
        depends_on = tuple(sorted({c.lower() for c in calls if c}))
    start = args.get("start", defaults.start)
    grain = args.get("grain", args.get("grains", ()))
    return [
        Model(
            name=name.lower(),
            kind=kind,
            dialect=dialect,
            query_sql=None,
            columns=tuple(spark_columns),
            depends_on=depends_on,
            cron=str(args.get("cron") or defaults.cron),
            start=to_ms(str(start)) if start is not None else None,
            end=to_ms(str(args["end"])) if args.get("end") is not None else None,
            grain=tuple(str(g).lower() for g in ([grain] if isinstance(grain, str) else grain)),
            owner=args.get("owner", defaults.owner),
            tags=tuple(str(t) for t in args.get("tags", ())),
            description=args.get("description"),
            column_descriptions=tuple(
                (str(k).lower(), str(v)) for k, v in (args.get("column_descriptions") or {}).items()
            ),
            audits=tuple(AuditCall(str(a).lower()) for a in args.get("audits", ())),
            forward_only=bool(args.get("forward_only", defaults.forward_only)),
            on_destructive_change=str(
                args.get("on_destructive_change", defaults.on_destructive_change)
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
            python_entry=node.name,
            python_variables=tuple((n, known[n]) for n in used),
            path=module.path,
            line=node.lineno,
            warnings=tuple(notes),
        )
    ]


_KIND_HINT = (
    'e.g. kind="FULL" or kind=dict(name=ModelKindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds")'
)


def _kind(given: Any, defaults: ModelDefaults, fail: Callable[[str], ModelError]) -> Kind:
    if given is None:
        return Kind(KindName.FULL)  # SQLMesh's default for Python models
    params = dict(given) if isinstance(given, dict) else {"name": given}
    name = str(params.pop("name", "")).upper()
    if name not in _KINDS:
        raise fail(f"kind {name or given!r} is not a kind a Python model can have")
    time_column = params.pop("time_column", None)
    if isinstance(time_column, list):
        time_column = time_column[0] if time_column else None
    unique_key = params.pop("unique_key", ())
    kind = Kind(
        KindName(name),
        time_column=str(time_column).lower() if time_column else None,
        unique_key=tuple(
            str(k).lower() for k in ([unique_key] if isinstance(unique_key, str) else unique_key)
        ),
        batch_size=params.pop("batch_size", defaults.batch_size),
        lookback=int(params.pop("lookback", 0)),
    )
    if kind.name == KindName.INCREMENTAL_BY_TIME_RANGE and not kind.time_column:
        raise fail("an INCREMENTAL_BY_TIME_RANGE Python model needs time_column")
    if kind.name == KindName.INCREMENTAL_BY_UNIQUE_KEY and not kind.unique_key:
        raise fail("an INCREMENTAL_BY_UNIQUE_KEY Python model needs unique_key")
    return kind


def _clean(node: ast.stmt) -> str:
    """A definition as code: no comments (ast drops them), no docstrings, no decorators
    of the model itself (its arguments are the model's properties)."""
    copy = ast.parse(ast.unparse(node)).body[0]
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
                literal = first.value if isinstance(first, ast.Constant) else None
                found = calls if _table_call(item) else names
                found.append(literal if isinstance(literal, str) else None)
    return "\n\n".join(parts), calls, names


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
                cache[dotted] = _module(str(Path(root) / rel), text)
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
    path: Path, root: Path, defaults: ModelDefaults, variables: Mapping[str, Any]
) -> list[Model]:
    text = path.read_text(encoding="utf-8")
    if not has_models(text):
        return []
    return read_text(text, str(path), str(root), defaults, project_reader(root), variables)


def all_columns_added(old: Mapping[str, str], new: Mapping[str, str]) -> bool:
    """Whether ``new`` is ``old`` with columns added (the one non-breaking Python change)."""
    return len(new) > len(old) and all(new.get(k) == v for k, v in old.items())
