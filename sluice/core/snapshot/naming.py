"""Names of physical tables and environment views (pure).

Physical table per model version: ``sluice__<schema>.<schema>__<table>__<version>``.
Prod view: ``<schema>.<table>``. Environment view: ``<schema>__<env>.<table>``.

A model in a configured catalog other than Spark's current one (its canonical name is
``<catalog>.<schema>.<table>``, see :mod:`sluice.core.model.names`) has all of these in
that catalog: ``<catalog>.sluice__<schema>.<schema>__<table>__<version>``,
``<catalog>.<schema>__<env>.<table>``. A model in a default catalog (name
``<schema>.<table>``) has them in Spark's current catalog, as two-part names.
"""

from __future__ import annotations

import re

from sluice.core.errors import PlanError
from sluice.core.model.names import split

MARK_PREFIX = "sluice."
"""Table properties with this prefix are Sluice's (the mark of a table it created, see
:mod:`sluice.core.spark.steps.build`): a model or a project statement may not set them."""

PROD = "prod"
PHYSICAL_PREFIX = "sluice__"
_ENV_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


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
    return _in(catalog, PHYSICAL_PREFIX + schema)


def physical_table(model_name: str, version: str) -> str:
    """The fully qualified physical table of one model version."""
    catalog, schema, table = split(model_name)
    return _in(catalog, f"{PHYSICAL_PREFIX}{schema}.{schema}__{table}__{version}")


def view_schema(schema: str, environment: str) -> str:
    """The schema of an environment's views for models of ``schema`` (``[catalog.]schema``)."""
    return schema if environment == PROD else f"{schema}__{environment}"


def model_view_schema(model_name: str, environment: str) -> str:
    """The schema (in the model's catalog) of the view through which ``environment``
    exposes a model."""
    return view_schema(model_name.rsplit(".", 1)[0], environment)


def view_name(model_name: str, environment: str) -> str:
    """The fully qualified view through which ``environment`` exposes a model."""
    schema, table = model_name.rsplit(".", 1)
    return f"{view_schema(schema, environment)}.{table}"
