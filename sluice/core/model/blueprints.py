"""One model file, many models: SQLMesh's ``blueprints`` property (pure).

A file whose MODEL header has ``blueprints ((name := a, ...), (name := b, ...))`` is
parsed once per entry, with that entry's variables (``@name``, ``@{name}``,
``@VAR('name')``) substituted in the model's name, header and query. A file without
blueprints is one model, as :func:`sluice.core.model.parse.parse_model` reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sluice.core.config import ModelDefaults
from sluice.core.errors import ModelError
from sluice.core.model import macros
from sluice.core.model.definition import Model
from sluice.core.model.header import parse_header
from sluice.core.model.names import NO_CATALOGS, Catalogs
from sluice.core.model.parse import parse_model, valid_dialect
from sluice.core.model.properties import blueprint_variables
from sluice.core.model.scan import LineIndex


def parse_models(
    text: str,
    path: str,
    defaults: ModelDefaults,
    variables: Mapping[str, Any],
    *,
    allowed_paths: Sequence[str] = (),
    inferred_name: str | None = None,
    columns_of: macros.ColumnsOf | None = None,
    catalogs: Catalogs = NO_CATALOGS,
) -> list[Model]:
    """The models of one file: none (``enabled false``), one, or one per blueprint.

    Raises:
        ModelError: with file:line:col and a hint.
    """
    header = parse_header(text, path, "MODEL", LineIndex(text))
    node = header.properties.get("blueprints") if header else None
    if node is None:
        model = parse_model(
            text,
            path,
            defaults,
            variables,
            allowed_paths=allowed_paths,
            inferred_name=inferred_name,
            columns_of=columns_of,
            catalogs=catalogs,
            header=header,
        )
        return [] if model is None else [model]
    assert header is not None
    dialect_node = header.properties.get("dialect")
    dialect = dialect_node.value.lower() if dialect_node is not None else defaults.dialect
    if not valid_dialect(dialect):
        dialect = defaults.dialect  # parse_model reports the unknown dialect
    models: list[Model] = []
    for entry in blueprint_variables(text, path, node, dialect):
        model = parse_model(
            text,
            path,
            defaults,
            {**variables, **entry},
            allowed_paths=allowed_paths,
            inferred_name=inferred_name,
            columns_of=columns_of,
            catalogs=catalogs,
            header=header,
        )
        if model is None:
            continue
        other = next((m for m in models if m.name == model.name), None)
        if other is not None:
            raise ModelError(
                f"two blueprints of this file make the model {model.name}",
                path=path,
                line=node.line,
                col=node.col,
                hint="use the blueprint's variables in the model's name, e.g. "
                "name @customer.orders",
            )
        models.append(model)
    return models
