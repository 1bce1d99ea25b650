"""YAML reading that remembers where each value came from (the only user of PyYAML).

Errors about config.yaml, unit tests or external models must name file:line, so values
are loaded together with a map from their key path to the line they start on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sluice.core.errors import ConfigError, SluiceError

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class LocatedYaml:
    """A parsed YAML document and the 1-based line of every value in it."""

    path: str
    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line_of(self, key_path: KeyPath) -> int | None:
        """The line of the value at ``key_path``, or of its nearest located ancestor."""
        path = tuple(key_path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys instead of silently keeping the last."""


def _construct(
    loader: _Loader, node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int], file: str
) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if isinstance(key, list | dict):
                raise ConfigError(
                    "a mapping key must be a plain value",
                    path=file,
                    line=key_node.start_mark.line + 1,
                )
            if key in result:
                raise ConfigError(
                    f"duplicate key '{key}'",
                    path=file,
                    line=key_node.start_mark.line + 1,
                    hint="remove one of the two entries",
                )
            child = (*path, str(key))
            result[key] = _construct(loader, value_node, child, lines, file)
            lines[child] = key_node.start_mark.line + 1  # people look for the key
        return result
    if isinstance(node, yaml.SequenceNode):
        return [
            _construct(loader, item, (*path, index), lines, file)
            for index, item in enumerate(node.value)
        ]
    return loader.construct_object(node, deep=True)


def parse_yaml(text: str, path: str, error_type: type[SluiceError] = ConfigError) -> LocatedYaml:
    """Parse ``text`` (the contents of ``path``) into a :class:`LocatedYaml`.

    Raises:
        error_type: with the file and line of the first syntax problem.
    """
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        lines: dict[KeyPath, int] = {}
        data = _construct(loader, node, (), lines, path) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise error_type(
            f"invalid YAML: {exc.problem or exc.context}",
            path=path,
            line=mark.line + 1 if mark else None,
            col=mark.column + 1 if mark else None,
            hint="check the indentation and quoting near this line",
        ) from None
    except yaml.YAMLError as exc:
        raise error_type(f"invalid YAML: {exc}", path=path) from None
    except ConfigError as exc:
        if error_type is ConfigError:
            raise
        raise error_type(exc.message, path=exc.path, line=exc.line, hint=exc.hint) from None
    finally:
        loader.dispose()
    return LocatedYaml(path=path, data=data, lines=lines)


def read_yaml(path: Path, error_type: type[SluiceError] = ConfigError) -> LocatedYaml:
    """Read and parse a YAML file."""
    return parse_yaml(path.read_text(encoding="utf-8"), str(path), error_type)
