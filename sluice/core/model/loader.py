"""Load a project from disk: the only module of the model package that reads files.

Every broken file is reported at once (a user fixes them in one pass); the graph is
checked only when every file parsed. Parsed models are cached by file content, so a
re-plan after editing one model parses one model.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot.errors import ErrorLevel, ParseError, TokenError, UnsupportedError

from sluice import __version__
from sluice.core.config import (
    CONFIG_FILES,
    PYTHON_CONFIG,
    SETTINGS_FILES,
    ProjectConfig,
    SluiceSettings,
    config_path,
    load_config,
    read_config_doc,
)
from sluice.core.errors import ConfigError, ModelError, ProjectErrors, SluiceError
from sluice.core.model import column_check, fileaccess, jinja, prefetch, properties
from sluice.core.model.audits import check_audit_calls, parse_audits, parse_inline_audits
from sluice.core.model.blueprints import parse_models
from sluice.core.model.definition import (
    Audit,
    Kind,
    KindName,
    Model,
    Project,
    UnitTest,
    fresh_start,
)
from sluice.core.model.fileaccess import FILE_FORMATS
from sluice.core.model.graph import check_references, topological_order
from sluice.core.model.known_columns import KnownColumns, Pending, Placeholder
from sluice.core.model.macros import BUILTIN_VARIABLES
from sluice.core.model.names import Catalogs, NameProblem, canonical, split_text
from sluice.core.model.pycode import Refusal
from sluice.core.model.pycode import config_file as pycode_config
from sluice.core.model.pycode import files as pycode_files
from sluice.core.model.pycode import macros as pycode_macros
from sluice.core.model.pycode import models as pycode_models
from sluice.core.model.scan import find_code
from sluice.core.model.seeds import seed_columns
from sluice.core.model.unittests import parse_unit_tests
from sluice.core.plan import statements as project_statements
from sluice.core.yamlio import LocatedYaml, read_yaml

log = logging.getLogger(__name__)

CACHE_FILE = Path(".sluice") / "cache" / "models.json"
EXTERNAL_FILES = ("external_models.yaml", "external_models.yml", "schema.yaml")
EXTERNAL_FOLDER = "external_models"  # any number of YAML files of external models
ROOT_MARKER = "$root"  # a seed path starting with it is relative to the project
MAX_FILE_BYTES = 4 * 1024 * 1024
"""Largest model, macro or audit file read (``models/``, ``macros/``, ``audits/``), in
bytes: a larger one is refused unread. Real models are a few kilobytes; YAML files have
their own cap, :data:`sluice.core.yamlio.MAX_CHARS`."""

PROJECT_FILES: dict[str, tuple[str, tuple[str, ...]]] = {
    "config": ("", CONFIG_FILES),
    "settings": ("", SETTINGS_FILES),
    "python_config": ("", (PYTHON_CONFIG,)),
    "sql_models": ("models", ("*.sql",)),
    "python_models": ("models", ("*.py",)),
    "sql_macros": ("macros", ("*.sql",)),
    "python_macros": ("macros", ("*.py",)),
    "audits": ("audits", ("*.sql",)),
    "unit_tests": ("tests", ("*.yaml", "*.yml")),
    "external_models": ("", EXTERNAL_FILES),
    "external_models_folder": (EXTERNAL_FOLDER, ("*.yaml", "*.yml")),
    "seeds": ("", ()),
    "parse_cache": ("", (CACHE_FILE.as_posix(),)),
}
"""Every kind of file a project load reads, by name: (folder, patterns). A folder's files
are found at any depth (``models/a/b.sql``); a kind with no folder is the named files of
the project folder itself. ``seeds`` are the CSV files SEED models name (their ``path``,
inside the project); ``parse_cache`` is Sluice's own, never read for a pull request
(``use_cache=False``). docs/security.md classifies each kind
(``tests/security/test_inputs_classified.py``). ``config`` is
:data:`sluice.core.config.CONFIG_FILES`; ``settings`` (Sluice's own, beside it) is
:data:`sluice.core.config.SETTINGS_FILES`; ``python_config`` (SQLMesh's config.py) is run in
the sandboxed process (:mod:`.pycode.config_file`); ``python_macros`` are found by
:func:`sluice.core.model.pycode.macros.macro_files`."""


def project_files(root: Path, kind: str) -> list[Path]:
    """The files of ``kind`` (a key of :data:`PROJECT_FILES`) under ``root``, sorted."""
    folder, patterns = PROJECT_FILES[kind]
    if not folder:
        return [root / name for name in patterns]
    base = root / folder
    return sorted(path for pattern in patterns for path in base.rglob(pattern))


def load_project(
    project_dir: Path | str,
    *,
    use_cache: bool = True,
    sluice: SluiceSettings | None = None,
    env: Mapping[str, str] | None = None,
    python: Refusal | None = None,
) -> Project:
    """Load and validate the project in ``project_dir``.

    ``sluice``: settings to use instead of the project's own (its sluice.yaml, or the
    ``sluice:`` section of its config.yaml; the service passes the prod branch's: a pull
    request's config.yaml decides its models' defaults and variables, never Sluice's
    settings).

    ``env``: the only values Jinja's ``env_var()`` may read, in config.yaml and models
    (none by default: ``env_var('X', 'default')`` renders its default). The process
    environment is never read: it holds the service's secrets.

    ``python``: None to read Python models and run Python macros (in a child process, see
    :mod:`.pycode`); otherwise why this caller runs no project Python, and a project that
    has some is refused with it, at the first file that decided it.

    Raises:
        SluiceError: a single problem, or ProjectErrors listing several.
    """
    root = Path(project_dir)
    if not (root / "models").is_dir():
        raise ModelError(
            f"no models/ folder in {root}",
            hint="point --project at the folder that holds config.yaml and models/",
        )
    # Before anything is read: no link out of the project, nothing Python would import
    # but reviewed source (pycode.files).
    refused = pycode_files.check_tree(root)
    if refused:
        raise refused[0] if len(refused) == 1 else ProjectErrors(list(refused))
    # The macro process starts first: its Python and sqlglot load while this reads.
    spawned = pycode_macros.spawn(root) if python is None else None
    try:
        return _load(root, use_cache, sluice, env, python, spawned)
    finally:
        if spawned is not None:
            spawned.close()


def _load(
    root: Path,
    use_cache: bool,
    sluice: SluiceSettings | None,
    env: Mapping[str, str] | None,
    python: Refusal | None,
    spawned: pycode_macros.PythonMacros | None,
) -> Project:
    config, config_doc = _config(root, env, python)
    if sluice is not None:
        config = config.model_copy(update={"sluice": sluice})
    notes = list(config.notes)
    cache = _Cache(root / CACHE_FILE, config) if use_cache else None
    errors: list[SluiceError] = []
    models: dict[str, Model] = {}

    def add(model: Model) -> None:
        model = fresh_start(model)  # a relative start counts from today, cached or not
        if model.name in models:
            other = models[model.name]
            errors.append(
                ModelError(
                    f"model {model.name} is defined twice (also in {other.path}:{other.line})",
                    path=model.path,
                    line=model.line,
                    hint="rename one of them",
                )
            )
        else:
            models[model.name] = model

    inline: list[Audit] = []
    files = sorted(project_files(root, "sql_models"), key=_path_order)
    python_files = [p for p in project_files(root, "python_models") if _has_code(p)]
    if python is not None and (python_files or pycode_macros.macro_files(root)):
        found = [p.relative_to(root).as_posix() for p in python_files]
        found += [p.relative_to(root).as_posix() for p in pycode_macros.macro_files(root)]
        named = list(python.files) or found
        raise ModelError(
            f"this project's Python ({_listed(named)}) is not run for this commit",
            path=str(root / named[0]),
            line=1,
            hint=python.reason,
        )
    sources = _sources(files)
    rendered = _render_jinja(root, sources, config, env, errors)
    # What each file's models are read from, each file read once: its text, Jinja rendered.
    texts = {**sources, **rendered.texts}
    externals = _externals(root, errors, config.catalogs, config.default_gateway, notes)
    known = KnownColumns(externals)
    # The macro process reads ahead the files the cache does not answer (pycode.macros).
    parsed = [f for f in files if cache is None or not cache.has(f, texts)]
    with pycode_macros.active(
        root,
        config.variables,
        read_ahead=parsed,
        dialect=config.model_defaults.dialect,
        spawned=spawned,
    ) as macros:
        if macros is not None:
            macros.columns_of = known  # evaluator.columns_to_types
        python_models: list[Model] = []
        # What only the project's code gives (a computed constant, an is_sql query) is
        # evaluated in the macro process, or one like it started at the first need.
        model_python = pycode_macros.ModelPython(
            root,
            config.variables,
            dialect=config.model_defaults.dialect,
            macros=macros,
            columns_of=known,
        )

        def read_python(files: Sequence[Path]) -> list[Path]:
            """Read Python model files in passes (an is_sql model's function may ask for
            another model's columns); the files still waiting for a model not read."""
            pending = list(files)
            while pending:
                waiting: list[Path] = []
                for file in pending:
                    try:
                        _check_size(file)
                        found = pycode_models.read_file(
                            file,
                            root,
                            config.model_defaults,
                            config.variables,
                            python=model_python,
                            inferred_name=_inferred_name(root, file)
                            if config.model_naming.infer_names
                            else None,
                            allowed_paths=config.sluice.allowed_paths,
                            catalogs=config.catalogs,
                        )
                    except Pending as wait:
                        waiting.append(file)
                        known.waits[str(file)] = wait.table
                        continue
                    except SluiceError as exc:
                        errors.append(exc)
                        continue
                    known.learn(found)
                    python_models.extend(found)
                if len(waiting) == len(pending):
                    return waiting
                pending = waiting
            return []

        try:
            python_waiting = read_python(python_files)
        except BaseException:
            model_python.close()
            raise
        # Models are read in passes: a file whose @STAR/@UNION names a model not read yet
        # waits for the next pass (parents before children); when a pass reads nothing
        # new, the last one reads the rest with the columns known (a cycle, or a table
        # whose columns nobody declares, then fails with what to declare).
        pending = [f for f in files if str(f) not in rendered.errors]
        errors.extend(rendered.errors[str(f)] for f in files if str(f) in rendered.errors)
        child = None
        if macros is None and cache is not None:  # a cold load parses on two cores
            child = prefetch.start(
                [f for f in parsed if str(f) not in rendered.errors],
                lambda f: _load_models(root, f, config, cache, texts.get(str(f)), known),
                cache.entries,
            )
        try:
            while pending:
                waiting: list[Path] = []
                for file in pending:
                    if child is not None and cache is not None and str(file) in child.files:
                        cache.take(child)  # the child parsed the rest: they are cache hits now
                        child = None
                    text = texts.get(str(file))
                    try:
                        loaded = _load_models(root, file, config, cache, text, known)
                        if loaded:
                            inline += _inline_audits(file, loaded[0], config, text)
                    except Pending as wait:
                        waiting.append(file)
                        known.waits[str(file)] = wait.table
                        continue
                    except SluiceError as exc:
                        errors.append(exc)
                        continue
                    known.learn(loaded)
                    for model in loaded:
                        add(model)
                        notes.extend(model.warnings)
                        notes.extend(
                            properties.layout_notes(model, config.sluice.spark.table_format)
                        )
                if len(waiting) == len(pending):
                    known.last_pass(_waiting_names(root, waiting, config, texts))
                pending = waiting
        finally:
            if child is not None:  # the load failed before it reached the child's files
                child.stop()
            try:
                if python_waiting:  # waiting for a SQL model's columns: read them now
                    if not known.final:
                        known.last_pass({})
                    read_python(python_waiting)
            finally:
                model_python.close()
        for model in python_models:
            add(model)
            notes.extend(model.warnings)
        audits = _audits(root, config, errors, inline)
    for external in externals:
        add(external)
        notes.extend(external.warnings)
    notes.extend(
        f"{a.path}:{a.line}: standalone audit {a.name} is loaded but not run: Sluice runs "
        "audits after the model they are attached to"
        for a in audits.values()
        if a.standalone
    )
    before_all = _statements(root, config, "before_all", errors, env, config_doc, notes)
    after_all = _statements(root, config, "after_all", errors, env, config_doc, notes)
    for model in models.values():
        try:
            check_audit_calls(model, audits)
        except SluiceError as exc:
            errors.append(exc)
    if errors:
        raise errors[0] if len(errors) == 1 else ProjectErrors(errors)
    if not config.sluice.require_declared_sources:
        for external in _undeclared(models):
            models[external.name] = external
            notes.extend(external.warnings)
    check_references(models)
    _check_embedded_readers(models)
    ordered = {name: models[name] for name in topological_order(models)}
    # Every column a query names is one its tables have, as far as they are known.
    unresolved = column_check.check(ordered, sources).errors
    if unresolved:
        raise unresolved[0] if len(unresolved) == 1 else ProjectErrors(list(unresolved))
    tests = _tests(root, ordered, notes, config.catalogs)
    if cache is not None:
        cache.save()
    return Project(
        str(root),
        ordered,
        audits,
        tuple(tests),
        tuple(notes),
        config,
        before_all=before_all,
        after_all=after_all,
    )


def _config(
    root: Path, env: Mapping[str, str] | None, python: Refusal | None
) -> tuple[ProjectConfig, LocatedYaml | None]:
    """The project's config, and config.py's located data when it is configured there
    (None for config.yaml). config.py is the project's Python: it runs in the sandboxed
    process (:mod:`.pycode.config_file`) only where the caller lets the project's Python
    run (``python`` None), and is refused with the caller's reason otherwise."""
    read: list[LocatedYaml] = []

    def run(folder: Path) -> LocatedYaml:
        if python is not None:
            named = list(python.files) or [PYTHON_CONFIG]
            raise ConfigError(
                f"this project's Python ({_listed(named)}) is not run for this commit, and "
                "its configuration is config.py",
                path=str(folder / PYTHON_CONFIG),
                line=1,
                hint=python.reason,
            )
        doc = pycode_config.read(folder)
        read.append(doc)
        return doc

    config = load_config(root, env=env, python=run)
    return config, (read[0] if read else None)


def _has_code(path: Path) -> bool:
    """Whether a Python model file holds more than blanks (a file too large to read is
    kept, and refused by :func:`_check_size` when it is loaded)."""
    if not path.exists():
        return False
    with path.open("rb") as file:
        head = file.read(MAX_FILE_BYTES + 1)
    return len(head) > MAX_FILE_BYTES or bool(head.strip())


def _path_order(path: Path) -> tuple[str, ...]:
    """The order of ``sorted(paths)`` (folder by folder), its key computed once a path."""
    return path.parts


def _sources(files: list[Path]) -> dict[str, str]:
    """The text of each file (by its path), read once for the whole load; a file that is
    not UTF-8 text is left out, and reported when its models are loaded."""
    texts: dict[str, str] = {}
    for file in files:
        try:
            texts[str(file)] = _read(file)
        except SluiceError:
            continue
    return texts


def _render_jinja(
    root: Path,
    sources: Mapping[str, str],
    config: ProjectConfig,
    env: Mapping[str, str] | None,
    errors: list[SluiceError],
) -> jinja.Rendered:
    """The model files with JINJA blocks (``sources``: path -> text), rendered with the
    ``{% macro %}`` definitions of macros/*.sql (see :mod:`.jinja`); the other files are
    not in the result."""
    texts = {path: text for path, text in sources.items() if jinja.has_blocks(text)}
    if not texts:
        return jinja.Rendered({}, {})
    macros: dict[str, str] = {}
    for file in project_files(root, "sql_macros"):
        try:
            macros[str(file)] = _read(file)
        except SluiceError as exc:
            errors.append(exc)
    return jinja.render_models(
        texts, macros, config.variables, env=env, macro_variables=BUILTIN_VARIABLES
    )


def _load_models(
    root: Path,
    file: Path,
    config: ProjectConfig,
    cache: _Cache | None,
    text: str | None = None,
    known: KnownColumns | None = None,
) -> list[Model]:
    """The models of one file (several with ``blueprints``, none when disabled);
    ``text``: its contents with Jinja rendered, when it has Jinja; ``known``: other
    tables' columns, for @STAR and @UNION.

    Raises:
        Pending: the file's macros need the columns of a model not read yet.
    """
    display = str(file)
    text = _read(file) if text is None else text
    models = cache.get(display, text) if cache else None
    if models is None:
        asked = known.asked if known is not None else 0
        models = parse_models(
            text,
            display,
            config.model_defaults,
            config.variables,
            allowed_paths=config.sluice.allowed_paths,
            inferred_name=_inferred_name(root, file) if config.model_naming.infer_names else None,
            columns_of=known,
            catalogs=config.catalogs,
        )
        # A model built from other tables' columns is parsed again on every load: the
        # cache is keyed by the file's text alone.
        if cache is not None and (known is None or known.asked == asked):
            cache.put(display, text, models)
    return [
        _with_seed(root, file, m)
        if m.kind.name == KindName.SEED
        else _custom(m, config.sluice.materializations)
        if m.kind.name == KindName.CUSTOM
        else m
        for m in models
    ]


def _check_embedded_readers(models: Mapping[str, Model]) -> None:
    """A Python model's function reads its parents' tables (``context.resolve_table``):
    an EMBEDDED model has none (its query is inlined into SQL readers only).

    Raises:
        ModelError: naming the Python model's file and line and the embedded parent.
    """
    for model in models.values():
        if model.python_code is None:
            continue
        for parent in model.depends_on:
            found = models.get(parent)
            if found is not None and found.kind.name == KindName.EMBEDDED:
                raise ModelError(
                    f"Python model {model.name} reads {parent}, an EMBEDDED model, which has "
                    "no table: its query is inlined into the SQL models that read it",
                    path=model.path,
                    line=model.line,
                    hint=f"give {parent} a kind with a table or a view (VIEW, FULL), or read "
                    "its parents instead",
                )


def _custom(model: Model, materializations: Mapping[str, str]) -> Model:
    """A model of a SQLMesh custom materialization (``kind CUSTOM``): of the built-in
    kind the trusted ``sluice.materializations`` maps it to, else kept as CUSTOM (planned,
    its build refused: :func:`sluice.core.spark.render.build_steps`), with a note."""
    name = model.kind.materialization or ""
    where = f"{model.path}:{model.line}"
    mapped = materializations.get(name.lower())
    if mapped is not None:
        kind = replace(model.kind, name=KindName(mapped))
        note = (
            f"{where}: model {model.name}: custom materialization '{name}' is built as "
            f"kind {mapped}, as the trusted sluice.materializations says"
        )
        return replace(model, kind=kind, warnings=(*model.warnings, note))
    note = (
        f"{where}: model {model.name} has kind CUSTOM (materialization '{name}'): a SQLMesh "
        "custom materialization is a Python class that writes the table through SQLMesh's "
        "engine adapter, which Sluice does not run on Spark, so the model is planned but "
        "its build is refused\n"
        f"  hint: if it builds what a built-in kind builds, map it in the prod branch's "
        f"config.yaml: `sluice: {{materializations: {{{name}: "
        "FULL}}` (or VIEW); else give the model a built-in kind"
    )
    return replace(model, warnings=(*model.warnings, note))


def _waiting_names(
    root: Path, files: Sequence[Path], config: ProjectConfig, texts: Mapping[str, str]
) -> dict[str, str]:
    """Model name -> its file, for the files that wait (those whose models cannot be
    read even with placeholder columns are left out)."""
    waits = {}
    for file in files:
        text = texts.get(str(file))
        try:
            models = parse_models(
                _read(file) if text is None else text,
                str(file),
                config.model_defaults,
                config.variables,
                allowed_paths=config.sluice.allowed_paths,
                inferred_name=_inferred_name(root, file)
                if config.model_naming.infer_names
                else None,
                columns_of=Placeholder(),
            )
        except (SluiceError, Pending):  # (a Python macro asking for columns not known)
            continue
        for model in models:
            waits[model.name] = file
    return {name: str(file) for name, file in waits.items()}


def _inferred_name(root: Path, file: Path) -> str:
    """SQLMesh's name for a model file: its folders under models/ and its stem, the last
    three joined by dots (models/sales/orders.sql is sales.orders)."""
    rel = file.relative_to(root / "models")
    return ".".join([*rel.parent.parts, rel.stem][-3:])


def _inline_audits(
    file: Path, model: Model, config: ProjectConfig, text: str | None = None
) -> list[Audit]:
    """The ``AUDIT (...)`` blocks after a model's query, in the model's dialect."""
    text = _read(file) if text is None else text
    if next(find_code(text, r"(?i:\baudit\b)\s*\("), None) is None:
        return []  # most model files: no need to read the header again
    return parse_inline_audits(
        text,
        str(file),
        model.dialect,
        config.variables,
        allowed_paths=config.sluice.allowed_paths,
        catalogs=config.catalogs,
    )


def _with_seed(root: Path, file: Path, model: Model) -> Model:
    assert model.kind.seed_path is not None
    marker, *rest = Path(model.kind.seed_path).parts or ("",)
    if marker.lower() == ROOT_MARKER:
        # SQLMesh: `$root/seeds/x.csv` is relative to the project, not to the model file.
        seed = root.joinpath(*rest).resolve()
    else:
        seed = (file.parent / model.kind.seed_path).resolve()
    if not seed.is_relative_to(root.resolve()) or seed.is_relative_to(
        root.resolve() / pycode_files.STATE_FOLDER
    ):
        where = (
            "outside the project" if not seed.is_relative_to(root.resolve()) else "into .sluice/"
        )
        raise ModelError(
            f"seed {model.name}: path '{model.kind.seed_path}' leads {where}",
            path=model.path,
            line=model.line,
            hint="keep seed files inside the project, e.g. seeds/",
        )
    if not seed.is_file():
        raise ModelError(
            f"seed {model.name}: file '{model.kind.seed_path}' not found (looked for {seed})",
            path=model.path,
            line=model.line,
            hint="the path is relative to the model file (or, after $root/, to the project)",
        )
    raw = seed.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ModelError(
            f"seed {model.name}: {seed} is not UTF-8 text",
            path=model.path,
            line=model.line,
            hint="save the CSV file as UTF-8",
        ) from None
    columns = seed_columns(text, str(seed), model.name, model.columns, model.kind.csv_settings)
    rel = seed.relative_to(root.resolve()).as_posix()
    kind = Kind(**{**model.kind.__dict__, "seed_path": rel})
    return Model(
        **{
            **model.__dict__,
            "kind": kind,
            "columns": columns,
            "seed_hash": hashlib.sha256(raw).hexdigest(),
        }
    )


def _externals(
    root: Path,
    errors: list[SluiceError],
    catalogs: Catalogs,
    gateway: str | None = None,
    notes: list[str] | None = None,
) -> list[Model]:
    """The external models (``external_models.yaml``, ``external_models/``); one declared
    for a gateway (``gateway: prod``) other than the project's (``gateway``) is left out
    with a note, as SQLMesh leaves it out."""
    found = []
    files = project_files(root, "external_models")
    files += project_files(root, "external_models_folder")
    for path in files:
        if not path.is_file():
            continue
        try:
            doc = read_yaml(path, ModelError)
        except SluiceError as exc:
            errors.append(exc)
            continue
        entries = doc.data or []
        if not isinstance(entries, list):
            errors.append(
                ModelError(
                    "external models are a list of {name, columns}",
                    path=str(path),
                    line=doc.line_of(()) or 1,
                    hint="write `- name: schema.table` entries, each with `columns: {name: type}`",
                )
            )
            continue
        for index, entry in enumerate(entries):
            line = doc.line_of((index,))
            if not isinstance(entry, dict) or "name" not in entry:
                errors.append(
                    ModelError(
                        "each external model needs a name",
                        path=str(path),
                        line=line,
                        hint="- name: schema.table",
                    )
                )
                continue
            table = str(entry["name"]).strip('"`').lower()
            scoped = entry.get("gateway")
            if scoped is not None and str(scoped).lower() != (gateway or ""):
                if notes is not None:
                    notes.append(
                        f"{path}:{line or 1}: external model {table} is declared for gateway "
                        f"'{scoped}', not the project's ({gateway or 'none'}): not loaded, as "
                        "in SQLMesh"
                    )
                continue
            # A path is not a table: Spark would read `parquet./data/x` as files.
            try:
                if any(c in table for c in "/\\:"):
                    raise NameProblem(f"'{table}' must be schema.table or catalog.schema.table", "")
                table = canonical(split_text(table), catalogs)
            except NameProblem as exc:
                errors.append(
                    ModelError(
                        f"external table {exc.message}",
                        path=str(path),
                        line=doc.line_of((index, "name")),
                        hint=exc.hint
                        if exc.catalog
                        else "name a table of the catalog, e.g. `- name: raw.events`",
                    )
                )
                continue
            if table.split(".")[0] in FILE_FORMATS:
                # Spark reads `text.notes` as the file `notes` when no such table exists.
                errors.append(
                    ModelError(
                        f"external table '{table}' is in a schema named like a file format "
                        f"('{table.split('.')[0]}'), which Spark reads as a file path",
                        path=str(path),
                        line=doc.line_of((index, "name")),
                        hint="files are read through tables of the catalog: register the data "
                        "as a table in another schema and name that one",
                    )
                )
                continue
            columns = entry.get("columns") or {}
            if not isinstance(columns, dict):
                errors.append(
                    ModelError(
                        f"columns of {table} must map names to types",
                        path=str(path),
                        line=doc.line_of((index, "columns")),
                        hint="write `columns:` with one `name: type` line per column",
                    )
                )
                continue
            found.append(
                Model(
                    name=table,
                    kind=Kind(KindName.EXTERNAL),
                    columns=tuple((str(c).lower(), str(t)) for c, t in columns.items()),
                    description=entry.get("description"),
                    path=str(path),
                    line=line or 1,
                    warnings=(
                        f"{path}:{doc.line_of((index, 'audits')) or line or 1}: the audits of "
                        f"external model {table} are not run: Sluice runs a model's audits "
                        "after it builds it, and an external table is not built\n  hint: "
                        "audit the data in the first model that reads it",
                    )
                    if entry.get("audits")
                    else (),
                )
            )
    return found


def _undeclared(models: Mapping[str, Model]) -> list[Model]:
    """The tables queries read that are neither a model nor a declared external table,
    as external tables of unknown columns, each with a note naming it (SQLMesh reads them
    so too). Never in a schema Sluice manages (its physical schemas, an environment's,
    the schema of the project's own models, where an unknown name is most likely a
    model's misspelt) nor one named like a file format: those stay errors, with the
    closest model's name (``graph.check_references``)."""
    own = {m.schema for m in models.values() if m.kind.name != KindName.EXTERNAL}
    found: dict[str, Model] = {}
    for model in models.values():
        for ref in model.references:
            if ref.name in models or ref.name in found:
                continue
            schema = ref.name.split(".")[-2]
            if schema in FILE_FORMATS or project_statements.managed(schema, own):
                continue
            found[ref.name] = Model(
                name=ref.name,
                kind=Kind(KindName.EXTERNAL),
                path=model.path,
                line=ref.line,
                warnings=(
                    f"{model.path}:{ref.line}: {model.name} reads {ref.name}, which is neither "
                    "a model nor declared in external_models.yaml: read as an external table "
                    "of unknown columns\n  hint: declare it with its columns (columns are then "
                    "checked), or set sluice.require_declared_sources to refuse it",
                ),
            )
    return sorted(found.values(), key=lambda m: m.name)


def _audits(
    root: Path, config: ProjectConfig, errors: list[SluiceError], inline: list[Audit]
) -> dict[str, Audit]:
    """The audits of audits/*.sql and those model files define after their query: one
    namespace (the same audit text in two model files is one audit)."""
    audits: dict[str, Audit] = {}
    parsed: list[Audit] = []
    for file in project_files(root, "audits"):
        try:
            parsed += parse_audits(
                _read(file),
                str(file),
                config.model_defaults.dialect,
                config.variables,
                allowed_paths=config.sluice.allowed_paths,
                catalogs=config.catalogs,
            )
        except SluiceError as exc:
            errors.append(exc)
    inline_files = {a.path for a in inline}
    for audit in [*parsed, *inline]:
        other = audits.get(audit.name)
        if other is None:
            audits[audit.name] = audit
        elif other.path in inline_files and audit.path in inline_files and _same(other, audit):
            continue  # two model files define the same inline audit: one audit
        else:
            errors.append(
                ModelError(
                    f"audit {audit.name} is defined twice (also in {other.path}:{other.line})",
                    path=audit.path,
                    line=audit.line,
                    hint="rename one of them",
                )
            )
    return audits


def _same(one: Audit, other: Audit) -> bool:
    return (one.query_sql, one.defaults, one.blocking, one.standalone) == (
        other.query_sql,
        other.defaults,
        other.blocking,
        other.standalone,
    )


def _statements(
    root: Path,
    config: ProjectConfig,
    key: str,
    errors: list[SluiceError],
    env: Mapping[str, str] | None = None,
    python_doc: LocatedYaml | None = None,
    notes: list[str] | None = None,
) -> tuple[str, ...]:
    """config.yaml's ``before_all`` or ``after_all`` as Spark SQL, each statement checked
    (``python_doc``: config.py's located data, when the project is configured there).

    A statement of a shape outside the allow-list (``DROP VIEW``, a ``CREATE`` without
    ``IF NOT EXISTS``) is kept (it is part of the plan's id and of what an approval
    covers) and named in ``notes`` with its file:line: no job of the project runs until
    it is rewritten (:func:`sluice.core.jobs.check_statements` refuses the job). Anything
    that reaches past the catalog (files, Java, ...) is an error, as in a model.

    They run in every job of the project, a pull request's too, so each statement is
    allow-listed whole (:mod:`sluice.core.plan.statements`: ``CREATE SCHEMA|TABLE|VIEW
    ... IF NOT EXISTS`` of a plain name, columns or a query, ``USING`` parquet, orc,
    delta or iceberg, no OPTIONS, LOCATION, SERDE, ...), and neither its text nor its tree
    may reach past the catalog, as a model's query may not (files are read only by paths
    ``sluice.allowed_paths`` allow). What runs is the Spark SQL sqlglot writes of it,
    without comments, and that is checked again the way the driver checks it.
    """
    given: tuple[str, ...] = getattr(config, key)
    if not given:
        return ()
    yaml_path = config_path(root)
    doc = read_config_doc(yaml_path, env) if yaml_path is not None else python_doc
    path = yaml_path if yaml_path is not None or python_doc is None else Path(python_doc.path)
    result: list[str] = []
    for index, text in enumerate(given):
        line = (doc.line_of((key, index)) if doc else None) or 1
        subject = f"{key} statement {index + 1}"

        def fail(message: str, hint: str, subject: str = subject, line: int = line) -> None:
            errors.append(ConfigError(f"{subject}: {message}", path=path, line=line, hint=hint))

        if next(find_code(text, "@"), None) is not None:
            fail(
                "it uses a macro (@...), which Sluice does not evaluate in config.yaml",
                "write the statement as plain SQL",
            )
            continue
        dialect = config.model_defaults.dialect
        try:
            parsed = [s for s in sqlglot.parse(text, read=dialect) if s is not None]
        except (ParseError, TokenError) as exc:
            fail(f"cannot parse it ({dialect}): {str(exc).splitlines()[0]}", "check the SQL")
            continue
        if len(parsed) != 1:
            fail(
                f"expected one statement, found {len(parsed)}",
                "give each statement its own `- ` line",
            )
            continue
        statement = parsed[0]

        def later(what: str, hint: str, subject: str = subject, line: int = line) -> None:
            if notes is not None:
                notes.append(
                    f"{path}:{line}: {subject}: {what}; Sluice does not run it and refuses "
                    f"every job of the project until it is rewritten\n  hint: {hint}"
                )

        refused = project_statements.shape(statement)
        if refused is not None:
            if not project_statements.changes_existing(statement):
                fail(refused.what, refused.hint)
                continue
            later(refused.what, refused.hint)
        try:
            found = [
                *fileaccess.find_in_text(text),
                *fileaccess.find_in_tree(statement, references_checked=False),
            ]
            fileaccess.refuse(
                # Positions inside one YAML string: the statement's line says where.
                [replace(a, line=0, col=0) for a in found],
                config.sluice.allowed_paths,
                subject,
                str(path),
                line,
            )
            spark_sql = statement.sql("spark", unsupported_level=ErrorLevel.RAISE, comments=False)
        except SluiceError as exc:
            errors.append(exc)
            continue
        except UnsupportedError as exc:
            fail(f"cannot be written as Spark SQL: {exc}", "rewrite it with Spark's syntax")
            continue
        # What runs is sqlglot's Spark SQL: the driver checks it with the same rule.
        again = project_statements.check(spark_sql) if refused is None else None
        if again is not None:
            fail(f"as Spark SQL ({_short(spark_sql)}) it {again.what}", again.hint)
            continue
        result.append(spark_sql)
    return tuple(result)


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _tests(
    root: Path, models: dict[str, Model], notes: list[str], catalogs: Catalogs
) -> list[UnitTest]:
    tests: list[UnitTest] = []
    errors: list[SluiceError] = []
    files = project_files(root, "unit_tests")
    for file in files:
        try:
            tests.extend(parse_unit_tests(read_yaml(file, ModelError), models, notes, catalogs))
        except SluiceError as exc:
            errors.append(exc)
    if errors:
        raise errors[0] if len(errors) == 1 else ProjectErrors(errors)
    return tests


def _texts(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(f"{path}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _read(path: Path) -> str:
    """The text of a model, macro or audit file (at most :data:`MAX_FILE_BYTES`).

    Raises:
        ModelError: the file is larger, or not UTF-8 text.
    """
    with path.open("rb") as file:
        raw = file.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise _too_large(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ModelError(
            "the file is not UTF-8 text", path=str(path), line=1, hint="save it as UTF-8"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # as read_text() reads it


def _check_size(path: Path) -> None:
    """Refuse a file larger than :data:`MAX_FILE_BYTES` (before another module reads it)."""
    if path.stat().st_size > MAX_FILE_BYTES:
        raise _too_large(path)


def _too_large(path: Path) -> ModelError:
    return ModelError(
        f"the file is larger than {MAX_FILE_BYTES:,} bytes, the most Sluice reads as a "
        "model, macro or audit file",
        path=str(path),
        line=1,
        hint="split it into several files, or keep large data in seeds (CSV)",
    )


def _listed(names: Sequence[str], most: int = 3) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


class _Cache:
    """Parsed models by file content, in one JSON file under .sluice/cache/."""

    def __init__(self, path: Path, config: ProjectConfig) -> None:
        self.path = path
        self.salt = json.dumps(
            [
                __version__,
                config.model_defaults.model_dump(),
                config.variables,
                # A model cached under a wider allow-list must be checked again.
                config.sluice.allowed_paths,
                config.model_naming.infer_names,
                # Names are kept in their canonical form for these catalogs.
                config.catalogs.key(),
                # What a model's query references, as the column check reads it.
                column_check.FORMAT,
                # A model's expansion depends on the Python macros it calls.
                _texts(pycode_macros.macro_files(path.parents[2])),
            ],
            sort_keys=True,
            default=str,
        )
        self.entries: dict[str, Any] = {}
        self.dirty = False
        try:
            self.entries = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.entries = {}

    def _key(self, display: str, text: str) -> str:
        return hashlib.sha256(f"{self.salt}\0{display}\0{text}".encode()).hexdigest()

    def has(self, file: Path, texts: Mapping[str, str]) -> bool:
        """Whether the models of ``file`` are cached as the file is now (``texts``: the
        load's text of each file it could read, Jinja rendered)."""
        entry = self.entries.get(str(file))
        text = texts.get(str(file))
        if entry is None or text is None:
            return False
        return bool(entry.get("key") == self._key(str(file), text))

    def get(self, display: str, text: str) -> list[Model] | None:
        entry = self.entries.get(display)
        if entry is None or entry.get("key") != self._key(display, text):
            return None
        # One model (most files) under "model"; a file's blueprints, or none, under "models".
        stored = [entry["model"]] if entry.get("model") is not None else entry.get("models")
        if not isinstance(stored, list):
            return None
        try:
            return [Model.from_dict(m) for m in stored]
        except (KeyError, TypeError, ValueError):
            return None

    def put(self, display: str, text: str, models: list[Model]) -> None:
        entry: dict[str, Any] = {"key": self._key(display, text)}
        if len(models) == 1:
            entry["model"] = models[0].to_dict()
        else:
            entry["models"] = [m.to_dict() for m in models]
        self.entries[display] = entry
        self.dirty = True

    def take(self, child: prefetch.Child) -> None:
        """Add the entries a parsing child made (:mod:`sluice.core.model.prefetch`)."""
        if child.join(self.entries):
            self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.entries, separators=(",", ":")), encoding="utf-8")
            tmp.replace(self.path)
        except OSError as exc:  # a read-only checkout still loads, just without a cache
            log.debug("cannot write the model cache %s: %s", self.path, exc)
