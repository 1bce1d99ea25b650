"""YAML reading that remembers where each value came from (the only user of PyYAML).

Errors about config.yaml, unit tests or external models must name file:line, so values
are loaded together with a map from their key path to the line they start on.

Every one of those files can come from a pull request, so reading one is bounded: a file
of at most :data:`MAX_CHARS` characters, values nested at most :data:`MAX_DEPTH` deep, at
most :data:`MAX_VALUES` values all told and at most :data:`MAX_ALIAS_VALUES` of them
repeated by aliases. PyYAML shares an anchored value between its aliases, but the located
loader below builds each alias's copy (with its own lines), so ten lines of aliases of
aliases (a "billion laughs") would otherwise be 10**9 values. Aliases are counted as the
document is composed, before anything is built, and the error names the alias that went
over. An alias inside the value it names, and a value Python refuses to convert (a date
like 2024-13-01, an integer of 5,000 digits), are errors with their line too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sluice.core.errors import ConfigError, SluiceError

KeyPath = tuple[str | int, ...]

MAX_CHARS = 4 * 1024 * 1024
"""Longest YAML file read, in characters (bytes, for a file on disk)."""
MAX_DEPTH = 100
"""Deepest nesting of lists and mappings (real files nest fewer than ten)."""
MAX_VALUES = 200_000
"""Most values (scalars, lists, mappings) a document may expand to, aliases included."""
MAX_ALIAS_VALUES = 100_000
"""Most of those values that aliases may repeat (``<<: *defaults`` repeats a few)."""

_ALIAS_HINT = (
    "write the repeated part out, or use fewer anchors (&name) whose aliases (*name) "
    "repeat other aliases"
)


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
    """SafeLoader that counts what the document expands to while composing it.

    Duplicate keys are refused by :func:`_construct`, which builds the located values.
    """

    def __init__(self, stream: str, path: str) -> None:
        super().__init__(stream)
        self._path = path
        self._depth = 0
        self._values = 0  # values the document expands to so far, aliases counted in full
        self._aliased = 0  # of those, the ones aliases repeat
        self._sizes: dict[str, int] = {}  # anchor -> values its node expands to

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped stub
        mark = event.start_mark
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        anchor: str | None = getattr(event, "anchor", None)
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            size = self._sizes.get(str(anchor))
            if size is None:
                # The anchored node is still being composed: the alias is inside it.
                raise ConfigError(
                    f"the alias *{anchor} is inside the value it names",
                    path=self._path,
                    line=line,
                    col=col,
                    hint=f"a value cannot contain itself: remove *{anchor} from it",
                )
            self._aliased += size
            self._values += size
            if self._aliased > MAX_ALIAS_VALUES:
                raise ConfigError(
                    f"YAML aliases here repeat more than {MAX_ALIAS_VALUES:,} values "
                    f"(*{anchor} stands for {size:,})",
                    path=self._path,
                    line=line,
                    col=col,
                    hint=_ALIAS_HINT,
                )
            self._check_total(line, col)
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ConfigError(
                f"values nested more than {MAX_DEPTH} deep",
                path=self._path,
                line=line,
                col=col,
                hint="flatten the structure; Sluice's files nest a few levels at most",
            )
        before = self._values
        node = super().compose_node(parent, index)
        self._depth -= 1
        self._values += 1
        if anchor is not None:
            self._sizes[anchor] = self._values - before
        self._check_total(line, col)
        return node

    def _check_total(self, line: int | None, col: int | None) -> None:
        if self._values > MAX_VALUES:
            raise ConfigError(
                f"the document holds more than {MAX_VALUES:,} values",
                path=self._path,
                line=line,
                col=col,
                hint="split the data over several files, or keep large data in seeds (CSV)",
            )


def _scalar(loader: _Loader, node: yaml.Node, file: str) -> Any:
    """A scalar's value; one Python cannot convert is an error at its line."""
    try:
        return loader.construct_object(node, deep=True)
    except (ValueError, OverflowError) as exc:
        raise ConfigError(
            f"cannot read the value: {exc}",
            path=file,
            line=node.start_mark.line + 1,
            col=node.start_mark.column + 1,
            hint="quote it to keep it as text, or write a valid date or number",
        ) from None


def _construct(
    loader: _Loader, node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int], file: str
) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _scalar(loader, key_node, file)
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
    return _scalar(loader, node, file)


def parse_yaml(text: str, path: str, error_type: type[SluiceError] = ConfigError) -> LocatedYaml:
    """Parse ``text`` (the contents of ``path``) into a :class:`LocatedYaml`.

    Raises:
        error_type: with the file and line of the first syntax problem, or of what goes
            over the limits in the module's docstring.
    """
    if len(text) > MAX_CHARS:
        raise _too_large(path, error_type)
    loader = _Loader(text, path)
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
        raise error_type(
            exc.message, path=exc.path, line=exc.line, col=exc.col, hint=exc.hint
        ) from None
    finally:
        loader.dispose()
    return LocatedYaml(path=path, data=data, lines=lines)


def _too_large(path: str, error_type: type[SluiceError]) -> SluiceError:
    return error_type(
        f"the file is larger than {MAX_CHARS:,} characters, the most Sluice reads as YAML",
        path=path,
        hint="split it over several files, or keep large data in seeds (CSV)",
    )


def read_yaml(path: Path, error_type: type[SluiceError] = ConfigError) -> LocatedYaml:
    """Read and parse a YAML file (refused unread when it is larger than the limit)."""
    if path.stat().st_size > MAX_CHARS:
        raise _too_large(str(path), error_type)
    return parse_yaml(path.read_text(encoding="utf-8"), str(path), error_type)


def dump_yaml(data: Any) -> str:
    """``data`` as YAML text, keys in their order (for files Sluice writes itself)."""
    text: str = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    return text
