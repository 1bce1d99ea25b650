"""Names of physical tables and environment views (pure).

Physical table per model version: ``sluice__<schema>.<schema>__<table>__<version>``.
Prod view: ``<schema>.<table>``. Environment view: ``<schema>__<env>.<table>``.

A model in a configured catalog other than Spark's current one (its canonical name is
``<catalog>.<schema>.<table>``, see :mod:`sluice.core.model.names`) has all of these in
that catalog: ``<catalog>.sluice__<schema>.<schema>__<table>__<version>``,
``<catalog>.<schema>__<env>.<table>``. A model in a default catalog (name
``<schema>.<table>``) has them in Spark's current catalog, as two-part names.

A service serving several repositories gives each its own schemas: inside
:func:`schema_prefix` every schema made here starts with that repository's prefix
(``sluice_r_<name>__``, derived by the service: :mod:`sluice.bot.flow.tenancy`), after the
catalog: ``<prefix>sluice__<schema>``, ``<prefix><schema>``, ``<prefix><schema>__<env>``.
Outside it (the CLI, the Action, a service of one repository) there is none.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from sluice.core.errors import PlanError
from sluice.core.model.names import split

MARK_PREFIX = "sluice."
"""Table properties with this prefix are Sluice's (the mark of a table it created, see
:mod:`sluice.core.spark.steps.build`): a model or a project statement may not set them."""

PROD = "prod"
PHYSICAL_PREFIX = "sluice__"
_ENV_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")

REPOSITORY_MARK = "sluice_r_"
"""How every repository's prefixed schema starts: a schema a project names with it is
refused (:func:`reserved_schema`), so no repository reads or names another's."""
_PREFIX_FORM = re.compile(r"^sluice_r_[a-z0-9]+(?:_[a-z0-9]+)*__$")
_PREFIX: ContextVar[str] = ContextVar("sluice_schema_prefix", default="")


@contextmanager
def schema_prefix(prefix: str) -> Iterator[None]:
    """Every schema named inside starts with ``prefix`` ("" : none). A context variable, so
    the prefix of one thread's job never reaches another thread's names.

    Raises:
        ValueError: ``prefix`` is neither empty nor of the service's form
            (``sluice_r_<name>__``, lower-case letters, digits and single underscores).
    """
    if prefix and not _PREFIX_FORM.match(prefix):
        raise ValueError(f"{prefix!r} is not a repository's schema prefix")
    token = _PREFIX.set(prefix)
    try:
        yield
    finally:
        _PREFIX.reset(token)


def current_prefix() -> str:
    """The schema prefix names are made with here ("" outside :func:`schema_prefix`)."""
    return _PREFIX.get()


def reserved_schema(schema: str) -> bool:
    """Whether ``schema`` (``[catalog.]schema``, any case) is in the repositories'
    namespaces: only Sluice makes such schemas, each for one repository."""
    return schema.rsplit(".", 1)[-1].lower().startswith(REPOSITORY_MARK)


def _prefixed(schema: str) -> str:
    """``[catalog.]schema`` with the current prefix before its schema part."""
    prefix = _PREFIX.get()
    if not prefix:
        return schema
    catalog, dot, name = schema.rpartition(".")
    return f"{catalog}{dot}{prefix}{name}"


def check_environment_name(name: str) -> str:
    """Return ``name`` if it is a valid environment name.

    Raises:
        PlanError: naming the rule it breaks.
    """
    if not _ENV_NAME.match(name) or "__" in name:
        raise PlanError(
            f"'{name}' is not a valid environment name",
            hint="use lower-case letters, digits and single underscores, starting with a "
            "letter (for example dev or pr_12)",
        )
    return name


def pr_environment(number: int, project: str | None = None) -> str:
    """The environment of pull request ``number`` (prefixed when a repo has several projects)."""
    return f"{project}_pr_{number}" if project else f"pr_{number}"


def merge_group_environment(sha: str) -> str:
    """The environment of a merge queue's group whose head is commit ``sha`` (hex)."""
    return check_environment_name(f"merge_group_{sha[:12].lower()}")


def _in(catalog: str | None, name: str) -> str:
    return f"{catalog}.{name}" if catalog else name


def physical_schema(model_name: str) -> str:
    """The schema that holds every version of the model's tables (in its catalog)."""
    catalog, schema, _ = split(model_name)
    return _in(catalog, _prefixed(PHYSICAL_PREFIX + schema))


def physical_table(model_name: str, version: str) -> str:
    """The fully qualified physical table of one model version."""
    catalog, schema, table = split(model_name)
    return _in(catalog, f"{_prefixed(PHYSICAL_PREFIX + schema)}.{schema}__{table}__{version}")


def view_schema(schema: str, environment: str) -> str:
    """The schema of an environment's views for models of ``schema`` (``[catalog.]schema``)."""
    return _prefixed(schema if environment == PROD else f"{schema}__{environment}")


def model_view_schema(model_name: str, environment: str) -> str:
    """The schema (in the model's catalog) of the view through which ``environment``
    exposes a model."""
    return view_schema(model_name.rsplit(".", 1)[0], environment)


def view_name(model_name: str, environment: str) -> str:
    """The fully qualified view through which ``environment`` exposes a model."""
    schema, table = model_name.rsplit(".", 1)
    return f"{view_schema(schema, environment)}.{table}"
