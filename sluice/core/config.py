"""Project configuration (config.yaml) as frozen pydantic models.

The file is SQLMesh's: ``model_defaults`` and ``variables`` are honoured, the sections
that configure SQLMesh's own engines (``gateways`` and friends) are ignored with a note,
and Sluice's own settings live in ``sluice.yaml`` beside it (:data:`SETTINGS_FILES`: SQLMesh
refuses a config.yaml with a ``sluice:`` section, and a config.py project has no section to
give), or, as before, under ``sluice:``; not in both. Anything else is a typo and an error.
Its Jinja (SQLMesh's ``{{ env_var('NAME') }}``) is rendered in a sandbox before the YAML
is read; ``env_var`` never reads the process environment (see :func:`read_config_doc`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal, TypeGuard, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlglot.dialects import DIALECT_MODULE_NAMES
from sqlglot.dialects.dialect import Dialect

from sluice.core.errors import ConfigError, PlanError, did_you_mean
from sluice.core.gate_settings import DeploySettings, GateSettings
from sluice.core.intervals import check_cron
from sluice.core.model.names import Catalogs, catalogs_of, gateway_catalog
from sluice.core.timeutil import read_start
from sluice.core.yamlio import MAX_CHARS, LocatedYaml, parse_yaml, read_yaml

# Top-level keys of a SQLMesh config.yaml that configure SQLMesh itself. Sluice runs on
# Spark with its own state, so these are read past, with a note saying so.
SQLMESH_ONLY_KEYS = frozenset(
    {
        "gateways",
        "default_gateway",
        "default_connection",
        "default_test_connection",
        "default_scheduler",
        "linter",
        "project",
        "plan",
        "run",
        "ui",
        "format",
        "notification_targets",
        "users",
        "physical_schema_mapping",
        "physical_schema_override",
        "environment_suffix_target",
        "environment_catalog_mapping",
        "default_target_environment",
        "cicd_bot",
        "janitor",
        "log_limit",
        "cache_dir",
        "env_vars",
        "migration",
        "snapshot_ttl",
        "environment_ttl",
        "ignore_patterns",
        "time_column_format",
        "infer_python_dependencies",
        "disable_anonymized_analytics",
    }
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _check_date(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, date | datetime | str | int):
        read_start(value)  # raises ValueError with the accepted formats
        return value.isoformat() if isinstance(value, date | datetime) else str(value)
    raise ValueError(f"expected a date, got {value!r}")


def _check_dialect(value: str) -> str:
    if value in DIALECT_MODULE_NAMES:
        return value  # one of sqlglot's own, known without loading it
    try:
        Dialect.get_or_raise(value)
    except ValueError:
        raise ValueError(
            f"unknown SQL dialect '{value}'; use a sqlglot dialect such as spark, duckdb, "
            "bigquery, snowflake, postgres"
        ) from None
    return value


def _check_cron(value: str) -> str:
    try:
        return check_cron(value)
    except PlanError as exc:
        raise ValueError(f"{exc.message}; {exc.hint}") from None


def _check_globs(value: tuple[str, ...]) -> tuple[str, ...]:
    for glob in value:
        if not glob.strip():
            raise ValueError("an empty glob would allow nothing; remove it")
        if ".." in glob.replace("\\", "/").split("/"):
            raise ValueError(f"'{glob}' has a '..' segment; write the path it means")
    return value


class ModelDefaults(_Frozen):
    """Defaults applied to every model that does not set the property itself."""

    dialect: str = "spark"
    start: str | None = None
    cron: str = "@daily"
    owner: str | None = None
    batch_size: int | None = Field(default=None, ge=1)
    forward_only: bool = False
    on_destructive_change: Literal["error", "warn", "allow"] = "error"

    _start = field_validator("start", mode="before")(_check_date)
    _dialect = field_validator("dialect")(_check_dialect)
    _cron = field_validator("cron")(_check_cron)


class SparkSettings(_Frozen):
    """Where and how Spark work runs."""

    master: str = "local[*]"
    deploy_mode: Literal["client", "cluster"] | None = None
    conf: dict[str, str] = Field(default_factory=dict)
    table_format: str = "parquet"
    mode: Literal["submit", "connect"] = "submit"
    """How jobs reach Spark: ``submit``, one ``spark-submit`` per job; ``connect``, a child
    per job on a warm Spark Connect server (sluice.core.spark.connect). Service-only."""
    concurrent_tasks: int = Field(default=4, ge=1, le=32)
    """How many models of one job build at once in its Spark application (each in a Spark
    session of its own, in a FAIR scheduler pool): independent models build concurrently,
    a model once its parents are built and audited. 1: one at a time. The service caps it
    with its own setting (``SLUICE_SPARK_CONCURRENT_TASKS``)."""
    remote: str | None = Field(default=None, pattern=r"^sc://\S+$")
    """With ``mode: connect``, the user's Spark Connect endpoint (``sc://host:port/;...``),
    used as is; None: a server the service starts on 127.0.0.1. Service-only."""


class StateSettings(_Frozen):
    """Where Sluice keeps its state (SQLAlchemy URL); default: .sluice/state.db."""

    url: str | None = None


class PreviewSettings(_Frozen):
    """What a pull request's environment builds and compares (``sluice.pr``)."""

    backfill_days: int | None = Field(default=7, ge=0)
    """Incremental models are built for this many recent days only (None: everything)."""
    diff_limit: int = Field(default=10, ge=0)
    """At most this many models are table-diffed against prod."""
    diff_sample: int = Field(default=5, ge=0)
    decimals: int = Field(default=3, ge=0)


def _empty_is_default(value: Any) -> Any:
    """A section written with nothing under it (``gate:``) has its defaults."""
    return {} if value is None else value


def _lower_keys(value: dict[str, str]) -> dict[str, str]:
    """Names as SQLMesh matches them (case-insensitively), lower case."""
    return {k.lower(): v for k, v in value.items()}


class SluiceSettings(_Frozen):
    """Sluice's own section of config.yaml."""

    project: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]*$")
    state: StateSettings = Field(default_factory=StateSettings)
    spark: SparkSettings = Field(default_factory=SparkSettings)
    environment_ttl_days: int = Field(default=7, ge=0)
    table_ttl_days: float = Field(default=1, ge=0)
    keep_prod_plans: int = Field(default=2, ge=0)
    """The janitor keeps the tables of this many plans prod was at before its current one,
    however long unused, so `sluice rollback` to them is a view swap."""
    pr: PreviewSettings = Field(default_factory=PreviewSettings)
    allowed_paths: tuple[str, ...] = ()
    """fnmatch globs of the paths queries may read directly, e.g. ``parquet.`/data/x```."""
    require_declared_sources: bool = False
    """A table a query reads that is neither a model nor in external_models.yaml is an
    error; false (SQLMesh's way, the default): it is read as an external table of unknown
    columns, named in the plan's notes."""
    materializations: dict[str, Literal["FULL", "VIEW"]] = Field(default_factory=dict)
    """SQLMesh custom materializations (``kind CUSTOM (materialization 'name')``, a Python
    class Sluice does not run) by name, each with the built-in kind Sluice builds it as
    (``custom_full: FULL``). A model whose materialization is not here is planned and its
    build refused. In force as the prod branch has it, never as a pull request does."""
    gate: GateSettings = Field(default_factory=GateSettings)
    """Who approves a pull request's plan (:mod:`sluice.core.gate_settings`); in force as
    the prod branch has it (:mod:`sluice.bot.flow.trust`), never as a pull request does."""
    deploy: DeploySettings = Field(default_factory=DeploySettings)
    """What a merge or a tag promotes, and where (tiers); in force as the prod branch has it."""

    _allowed_paths = field_validator("allowed_paths")(_check_globs)
    _materializations = field_validator("materializations")(_lower_keys)
    _empty_sections = field_validator("gate", "deploy", mode="before")(_empty_is_default)


class ModelNaming(_Frozen):
    """``model_naming``: with ``infer_names``, a model without a name is named after its
    path under models/ (models/<schema>/<name>.sql is schema.name)."""

    infer_names: bool = False


def _check_statements(value: tuple[str, ...]) -> tuple[str, ...]:
    for statement in value:
        if not statement.strip().strip(";").strip():
            raise ValueError("an empty statement runs nothing; remove it")
    return value


class ProjectConfig(_Frozen):
    """The whole config.yaml."""

    model_defaults: ModelDefaults = Field(default_factory=ModelDefaults)
    variables: dict[str, Any] = Field(default_factory=dict)
    model_naming: ModelNaming = Field(default_factory=ModelNaming)
    before_all: tuple[str, ...] = ()
    """SQL statements the Spark job runs before its steps (SQLMesh's ``before_all``)."""
    after_all: tuple[str, ...] = ()
    """SQL statements the Spark job runs after its steps (SQLMesh's ``after_all``)."""
    sluice: SluiceSettings = Field(default_factory=SluiceSettings)
    _empty_sluice = field_validator("sluice", mode="before")(_empty_is_default)
    default_catalog: str | None = None
    """SQLMesh's default catalog of the project, read from the default gateway's
    connection (not a section of its own): names in it are Spark's current catalog
    (sluice.core.model.names)."""
    default_gateway: str | None = None
    """The name of SQLMesh's gateway the project runs on (``default_gateway``, else its
    first gateway; not a section of its own): an external model declared for another
    gateway (``gateway: prod``) is not loaded, as in SQLMesh."""
    notes: tuple[str, ...] = ()

    _before_all = field_validator("before_all", "after_all")(_check_statements)

    @property
    def catalogs(self) -> Catalogs:
        """The catalogs its model names may carry: its default catalog and the catalogs
        of ``sluice.spark.conf`` (the service's settings when the service loads a pull
        request's project: the loader is given them in place of the PR's)."""
        return catalogs_of(self.sluice.spark.conf, self.default_catalog)


CONFIG_FILE = "config.yaml"
CONFIG_FILES = ("config.yaml", "config.yml")
"""The names SQLMesh reads a YAML project config from; a project has one of them."""
PYTHON_CONFIG = "config.py"
"""SQLMesh's Python config: the project's code, run only in the sandboxed process
(:mod:`sluice.core.model.pycode.config_file`); a project has it or a YAML one, not both."""


SETTINGS_FILES = ("sluice.yaml", "sluice.yml")
"""The names Sluice reads its own settings from, beside the project's config (the content
of a ``sluice:`` section: ``gate:``, ``deploy:``, ``spark:``...): a file SQLMesh never
reads, so the project stays valid for SQLMesh. A project has one of them, or a ``sluice:``
section in config.yaml, or neither (all defaults). Plain YAML: no Jinja is rendered in it
(a text that decides the gate means one thing, whoever reads it and when)."""


def settings_path(project_dir: Path) -> Path | None:
    """The project's sluice.yaml (or sluice.yml), if it has one.

    Raises:
        ConfigError: when both exist (which one counts?).
    """
    found = _one_of(project_dir, SETTINGS_FILES)
    return found[0] if found else None


def _one_of(project_dir: Path, names: tuple[str, ...]) -> list[Path]:
    """Those of ``names`` (one file's two spellings) that are files in ``project_dir``.

    Raises:
        ConfigError: both are (which one counts?).
    """
    found = [project_dir / name for name in names if (project_dir / name).is_file()]
    if len(found) > 1:
        raise ConfigError(
            f"the project has both {found[0].name} and {found[1].name}",
            path=found[1],
            line=1,
            hint=f"keep one: merge {found[1].name} into {found[0].name} and delete it",
        )
    return found


def config_path(project_dir: Path) -> Path | None:
    """The project's YAML config file, if it has one.

    Raises:
        ConfigError: when both config.yaml and config.yml exist (which one counts?).
    """
    found = _one_of(project_dir, CONFIG_FILES)
    python = project_dir / PYTHON_CONFIG
    if found and python.is_file():
        raise ConfigError(
            f"the project has both {found[0].name} and {PYTHON_CONFIG}",
            path=python,
            line=1,
            hint=f"keep one (SQLMesh refuses a folder with both): move {found[0].name}'s "
            f"settings into {PYTHON_CONFIG}'s Config, or the other way round",
        )
    return found[0] if found else None


def read_config_doc(path: Path, env: Mapping[str, str] | None = None) -> LocatedYaml:
    """A config file parsed, after its Jinja (SQLMesh's ``{{ env_var('NAME') }}``) is
    rendered in the sandbox of :mod:`sluice.core.model.jinja`.

    ``env_var`` reads only ``env``, never the process environment: a config.yaml may come
    from a pull request, and the service's environment holds its secrets. Without ``env``
    (the default) ``env_var('NAME', 'default')`` is its default and ``env_var('NAME')`` an
    error naming the line.
    """
    from sluice.core.model import jinja  # the model package imports this module

    if path.stat().st_size > MAX_CHARS:
        return read_yaml(path)  # refused unread, with the limit in the message
    text = path.read_text(encoding="utf-8")
    return parse_yaml(jinja.render_config(text, str(path), env), str(path))


def load_config(
    project_dir: Path,
    env: Mapping[str, str] | None = None,
    python: Callable[[Path], LocatedYaml] | None = None,
) -> ProjectConfig:
    """Read ``config.yaml`` (or ``config.yml``) from ``project_dir`` (an absent file means
    all defaults); ``env``: see :func:`read_config_doc`. A project configured in
    config.py is read with ``python`` (the loader's: it runs config.py in the sandboxed
    process and gives its data and lines, :mod:`sluice.core.model.pycode.config_file`),
    and validated as a config.yaml's data is; without it, such a project is an error.
    Sluice's own settings come from the project's sluice.yaml when it has one
    (:func:`parse_config`)."""
    path = config_path(project_dir)
    found = settings_path(project_dir)
    settings = read_yaml(found) if found is not None else None  # plain YAML: no Jinja
    if path is None:
        if (project_dir / PYTHON_CONFIG).is_file():
            if python is None:
                raise ConfigError(
                    "this project is configured in config.py, which is the project's Python: "
                    "Sluice runs it only where it loads the project with its Python",
                    path=project_dir / PYTHON_CONFIG,
                    line=1,
                    hint="load the project (sluice plan), or write the same settings as "
                    "config.yaml (model_defaults, variables)",
                )
            return parse_config(python(project_dir), settings)
        if settings is None:
            return ProjectConfig()
        return parse_config(LocatedYaml(str(project_dir / CONFIG_FILE), {}), settings)
    return parse_config(read_config_doc(path, env), settings)


def _unset_env_used(doc: LocatedYaml, data: dict[Any, Any]) -> None:
    """Refuse an ``env_var('NAME')`` with no value in a section Sluice reads (its Jinja
    marker, :data:`sluice.core.model.jinja.UNSET_ENV`)."""
    from sluice.core.model.jinja import UNSET_ENV  # the model package imports this module

    unset = re.compile(re.escape(UNSET_ENV) + r"(.*?)__")

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, (*path, key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, (*path, index))
        elif isinstance(value, str) and (found := unset.search(value)):
            name = found.group(1)
            raise ConfigError(
                f"environment variable '{name}' is not available to the project",
                path=doc.path,
                line=doc.line_of(path),
                hint=f"give a default, {{{{ env_var('{name}', 'value') }}}}: Sluice never "
                "hands its own environment to a project (see docs/security.md)",
            )

    for key, value in data.items():
        if key not in SQLMESH_ONLY_KEYS:
            walk(value, (key,))


def settings_section(settings: LocatedYaml) -> LocatedYaml:
    """A parsed sluice.yaml as the ``sluice:`` section of a config, its lines kept, so a
    setting's error names sluice.yaml and its line.

    Raises:
        ConfigError: it is not a mapping, or it wraps its settings in ``sluice:``.

    >>> doc = settings_section(parse_yaml("gate:\\n  owners_must_approve: never\\n", "sluice.yaml"))
    >>> doc.data, doc.line_of(("sluice", "gate", "owners_must_approve"))
    ({'sluice': {'gate': {'owners_must_approve': 'never'}}}, 2)
    """
    data = settings.data if settings.data is not None else {}
    name = Path(settings.path).name
    if not isinstance(data, dict):
        raise ConfigError(
            f"{name} must be a mapping of Sluice's settings",
            path=settings.path,
            line=settings.line_of(()),
            hint="write settings such as `gate:` and `deploy:` at the top level, each with "
            "its values indented under it (the README's configuration table lists them)",
        )
    if "sluice" in data:
        raise ConfigError(
            f"{name} holds Sluice's settings themselves, not a `sluice:` section",
            path=settings.path,
            line=settings.line_of(("sluice",)),
            hint="remove the `sluice:` line and move what was under it to the top level",
        )
    lines = {("sluice", *key): line for key, line in settings.lines.items()}
    lines[("sluice",)] = settings.line_of(()) or 1
    return LocatedYaml(settings.path, {"sluice": data}, lines)


def parse_config(doc: LocatedYaml, settings: LocatedYaml | None = None) -> ProjectConfig:
    """Validate a parsed config.yaml; ``settings``: the project's parsed sluice.yaml, whose
    content is then the ``sluice:`` section (the config must not have one too)."""
    data = doc.data if doc.data is not None else {}
    section = settings_section(settings) if settings is not None else None
    if section is not None and isinstance(data, dict) and "sluice" in data:
        raise ConfigError(
            f"Sluice's settings are in both {Path(section.path).name} and the `sluice:` "
            f"section of {Path(doc.path).name}: which ones count?",
            path=doc.path,
            line=doc.line_of(("sluice",)),
            hint=f"keep one: move the section's settings into {Path(section.path).name} "
            "(SQLMesh refuses a `sluice:` section) and delete the section",
        )
    if isinstance(data, dict):
        _unset_env_used(doc, data)
    if section is not None:
        _unset_env_used(section, section.data)
    if not isinstance(data, dict):
        raise ConfigError(
            "config.yaml must be a mapping of sections",
            path=doc.path,
            line=doc.line_of(()),
            hint="write `section:` lines such as `model_defaults:` and `variables:`, each "
            "with its settings indented under it",
        )
    known = set(ProjectConfig.model_fields) - {"notes", "default_catalog", "default_gateway"}
    ignored: list[str] = []
    kept: dict[str, Any] = {}
    if section is not None:
        kept["sluice"] = section.data["sluice"]
    for key, value in data.items():
        if key in known:
            kept[key] = value
        elif key in SQLMESH_ONLY_KEYS:
            ignored.append(f"{key} (line {doc.line_of((key,))})")
        else:
            raise ConfigError(
                f"unknown section '{key}'",
                path=doc.path,
                line=doc.line_of((key,)),
                hint=did_you_mean(str(key), known | SQLMESH_ONLY_KEYS)
                or f"known sections: {', '.join(sorted(known))}",
            )
    notes = []
    if ignored:
        notes.append(
            f"{doc.path}: ignored {', '.join(ignored)}: "
            f"{'it configures' if len(ignored) == 1 else 'they configure'} SQLMesh itself"
            + (
                ""
                if doc.path.endswith(PYTHON_CONFIG)
                else f"; Sluice's own settings go in {SETTINGS_FILES[0]} beside it"
            )
        )
    if section is None and "sluice" in kept and not doc.path.endswith(PYTHON_CONFIG):
        notes.append(
            f"{doc.path}:{doc.line_of(('sluice',))}: SQLMesh refuses a `sluice:` section: "
            f"move its settings to {SETTINGS_FILES[0]} beside {Path(doc.path).name} (the "
            "same settings at its top level) to keep the project valid for SQLMesh"
        )
    _gateway_variables(data, kept)
    default_catalog = gateway_catalog(data)
    if default_catalog:
        notes.append(
            f"{doc.path}: the project's default catalog is '{default_catalog}' (its default "
            "gateway's connection): names in it are read as Spark's current catalog"
        )
    try:
        config = ProjectConfig(
            **kept,
            default_catalog=default_catalog,
            default_gateway=_gateway_name(data),
            notes=tuple(notes),
        )
    except ValidationError as exc:
        where = (
            section if section is not None and exc.errors()[0]["loc"][:1] == ("sluice",) else doc
        )
        raise _config_error(exc, where) from None
    _check_schemas(config, doc)
    return config


def _check_schemas(config: ProjectConfig, doc: LocatedYaml) -> None:
    """No ``before_all`` / ``after_all`` statement names a schema Sluice manages by its
    form (``sluice__*``, ``<schema>__<environment>``); the schemas of the models' views
    are checked when the job is made (:func:`sluice.core.jobs.apply_job`)."""
    from sluice.core.plan import statements  # sqlglot's dialects load only when needed

    for key in ("before_all", "after_all"):
        for index, sql in enumerate(getattr(config, key)):
            problem = statements.refusal(sql, set(), config.model_defaults.dialect)
            if problem is not None:
                raise ConfigError(
                    f"{key} statement {index + 1} {problem}",
                    path=doc.path,
                    line=doc.line_of((key, index)),
                    hint=statements.HINT,
                )


def _gateway_name(data: dict[Any, Any]) -> str | None:
    """SQLMesh's gateway of the project: ``default_gateway``, else the first of
    ``gateways`` (None: no gateway is configured)."""
    gateways = data.get("gateways")
    given = data.get("default_gateway")
    if isinstance(given, str) and given:
        return given.lower()
    if isinstance(gateways, dict) and gateways:
        return str(next(iter(gateways))).lower()
    return None


def _gateway_variables(data: dict[Any, Any], kept: dict[str, Any]) -> None:
    """SQLMesh's ``gateways: {name: {variables: ...}}``: the default gateway's variables
    override top-level ``variables`` of the same name."""
    gateways = data.get("gateways")
    if not isinstance(gateways, dict) or not gateways:
        return
    name = data.get("default_gateway") or next(iter(gateways))
    gateway = gateways.get(name)
    scoped = gateway.get("variables") if isinstance(gateway, dict) else None
    if isinstance(scoped, dict) and isinstance(kept.get("variables", {}), dict):
        kept["variables"] = {**kept.get("variables", {}), **scoped}


# pydantic's words for a value of the wrong type, in the words of a YAML file.
_EXPECTED = {
    "int_parsing": "a whole number",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "float_parsing": "a number",
    "float_type": "a number",
    "bool_parsing": "true or false",
    "bool_type": "true or false",
    "string_type": "a text value",
    "tuple_type": "a list",
    "list_type": "a list",
    "dict_type": "a mapping of `name: value` lines",
    "model_type": "a mapping of `name: value` lines",
}

# Settings whose rule reads better in words than as pydantic's constraint.
_EXPECTED_AT = {
    "sluice.project": "a name of lower-case letters, digits and underscores, starting with a letter",
}


def _settings_at(loc: tuple[str, ...]) -> tuple[str, ...]:
    """The setting names a config section at ``loc`` (a validation error's path) accepts."""
    model: type[BaseModel] = ProjectConfig
    for part in loc:
        if part.isdigit():
            continue  # an item of a list: its model is the current one
        field = model.model_fields.get(part)
        if field is None:
            return ()  # under a mapping key (e.g. a gateway name): no list to suggest from
        inner = next(
            (t for t in (field.annotation, *get_args(field.annotation)) if _is_model(t)), None
        )
        if inner is None:
            return ()
        model = inner
    return tuple(model.model_fields)


def _is_model(annotation: object) -> TypeGuard[type[BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _config_error(exc: ValidationError, doc: LocatedYaml) -> ConfigError:
    first = exc.errors()[0]
    loc = tuple(str(p) for p in first["loc"])
    dotted = ".".join(loc)
    line = _line(doc, loc)
    if first["type"] == "extra_forbidden":
        known = _settings_at(loc[:-1])
        close = did_you_mean(loc[-1], known)
        listed = f"known settings here: {', '.join(sorted(known))}; " if known else ""
        return ConfigError(
            f"unknown setting '{dotted}'",
            path=doc.path,
            line=line,
            hint=close
            or f"{listed}remove it or check its spelling against the README's configuration table",
        )
    context = first.get("ctx") or {}
    expected = _EXPECTED_AT.get(dotted) or _EXPECTED.get(first["type"])
    if first["type"] == "literal_error":
        expected = str(context.get("expected"))
    elif first["type"] in ("greater_than_equal", "greater_than"):
        at_least = context.get("ge", context.get("gt"))
        expected = f"a number {'of at least' if 'ge' in context else 'above'} {at_least}"
    message = (
        f"expected {expected}, got {first['input']!r}"
        if expected
        else str(first["msg"]).removeprefix("Value error, ")
    )
    return ConfigError(
        f"invalid setting '{dotted}': {message}",
        path=doc.path,
        line=line,
        hint="see the README's configuration table for the accepted values",
    )


def _line(doc: LocatedYaml, loc: tuple[str, ...]) -> int | None:
    """The line of the value at ``loc``: YAML 1.1 reads a bare ``on:`` key as the boolean
    true, so ``sluice.deploy.on`` (and a tier's) was stored under ``True``."""
    if loc not in doc.lines and "on" in loc:
        alias = tuple("True" if part == "on" else part for part in loc)
        for end in range(len(alias), 0, -1):
            if alias[:end] in doc.lines:
                return doc.line_of(alias[:end])
    return doc.line_of(loc)
