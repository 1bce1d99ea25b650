"""Render a project's Jinja (models' JINJA blocks, macros/*.sql, config.yaml) in a sandbox.

Everything rendered here comes from a repository, a pull request's included, so the
templates get only what is offered: ``var()`` (the project's variables), ``env_var()``
(only the values the caller offers, never the process environment), the project's
``{% macro %}`` definitions and SQLMesh's predefined variables, which render as the
``@name`` macro Sluice fills in at run time. The environment is jinja2's
``ImmutableSandboxedEnvironment`` (no ``_``-attributes) with :class:`StrictUndefined`
and the extensions and filters SQLMesh's own Jinja environment has (``{% do %}``,
``{% break %}`` and ``{% continue %}``, ``b64encode`` and ``b64decode``). One thing it
allows that jinja2's immutable sandbox does not, because ``{% do %}`` is for it: a
template may change the plain lists and dicts it builds (``{% do cols.append(c) %}``).
Nothing else it reaches is one (``var()`` hands out a copy), so no change reaches the
project's variables or another load (a list a macros file builds at its top level is
shared by the templates of one load, all of one project), and a list or dict a change
makes too large is an error like any other value.
Rendering is capped: output size, string and number sizes, ``range()`` length, macro
nesting, and the template lines run (a line tracer counts them, so loops without output
are capped too) and the time taken.

:func:`main` is the entry point of the child process :mod:`.jinja` starts: it sets its
own memory and CPU limits first, so a template that still gets past the caps above ends
a disposable process, not the service.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from traceback import walk_tb
from types import FrameType
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.runtime import Context, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment
from jinja2.utils import Namespace

MAX_OUTPUT = 1_000_000
"""Most characters one template (a block, a macros file, config.yaml) may render to."""
MAX_FILE_OUTPUT = 1_000_000
"""Most characters the JINJA blocks of one model file may render to all together, unless
the file is large: then :data:`FILE_OUTPUT_FACTOR` times its size (:func:`file_cap`).
Every block is its own template, so :data:`MAX_OUTPUT` alone would let a file of 300
blocks render 300 times as much."""
FILE_OUTPUT_FACTOR = 4
"""How many times its own size a large model file's blocks may render to (see above)."""
MAX_PROJECT_OUTPUT = 20_000_000
"""Most characters all the JINJA blocks of a project may render to together."""
MAX_STRING = 1_000_000
"""Longest string an operation or call inside a template may build or receive."""
MAX_NUMBER_BITS = 256
"""Largest integer (in bits) arithmetic may produce (``10 ** 10 ** 9`` is refused)."""
MAX_RANGE = 10_000
"""Longest ``range()``."""
MAX_DEPTH = 50
"""Deepest nesting of macro calls (a macro calling itself)."""
MAX_STEPS = 1_000_000
"""Most template lines one template may run, loops and macros included."""
MAX_SECONDS = 5.0
"""Longest time one template may take."""
MEMORY_BYTES = 1024 * 1024 * 1024
"""Address space of the child process that renders (``RLIMIT_AS``)."""
CPU_SECONDS = 60
"""CPU time of the child process (``RLIMIT_CPU``)."""

MACRO_VARIABLE = "__sluice_jinja_macro__"
"""Prefix of what SQLMesh's predefined variables render as, before they become ``@name``."""
_SENTINEL = re.compile(rf"'?{MACRO_VARIABLE}(\w+?)__'?")


class RenderError(Exception):
    """A template failed: what, on which line of which template, and how to fix it."""

    def __init__(
        self, message: str, name: str, line: int | None, hint: str, cap: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.name = name
        self.line = line
        self.hint = hint
        self.cap = cap  # the output cap it went past: Allowance.cap


class _Cap(Exception):
    """A cap was reached (raised inside the template, so its line is known)."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


_NO_DEFAULT: Any = object()
"""What ``var()`` and ``env_var()`` are called without a default (None is a default)."""


class _Budget:
    """Lines run and time spent by one template."""

    def __init__(self, steps: int = MAX_STEPS, seconds: float = MAX_SECONDS) -> None:
        self.steps = steps
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.depth = 0

    def tick(self) -> None:
        self.steps -= 1
        if self.steps < 0:
            raise _Cap(
                f"the template runs more than {MAX_STEPS:,} steps",
                "a loop or a recursive macro runs too often; make it smaller",
            )
        if self.steps % 1024 == 0 and time.monotonic() > self.deadline:
            raise _Cap(
                f"rendering took more than {self.seconds:g} seconds",
                "a loop or a recursive macro runs too long; make it smaller",
            )


def _check_size(value: Any) -> None:
    if isinstance(value, str | list | tuple | dict) and len(value) > MAX_STRING:
        raise _Cap(
            f"a value of {len(value):,} items or characters is built (the limit is {MAX_STRING:,})",
            "render less: Sluice caps what a template may build",
        )
    if isinstance(value, int) and value.bit_length() > MAX_NUMBER_BITS:
        raise _Cap(
            f"a number of {value.bit_length():,} bits is built (the limit is {MAX_NUMBER_BITS})",
            "use smaller numbers",
        )


EXTENSIONS = ("jinja2.ext.do", "jinja2.ext.loopcontrols")
"""The extensions SQLMesh's Jinja environment enables (``sqlmesh.utils.jinja.environment``):
``{% do expression %}`` (an expression run for what it does, evaluated by this sandbox like
any other) and ``{% break %}`` / ``{% continue %}`` in loops."""

_CHANGES: dict[type, frozenset[str]] = {
    list: frozenset({"append", "extend", "insert", "pop", "remove", "clear", "reverse", "sort"}),
    dict: frozenset({"update", "setdefault", "pop", "popitem", "clear"}),
}
"""The methods a template may call to change a plain list or dict: the ones jinja2's
immutable sandbox refuses (``jinja2.sandbox._mutable_spec``), allowed on exactly these two
types, which is what a template's own ``[...]``, ``{...}`` and ``dict()`` build."""


def _b64decode(value: str | bytes) -> str:
    """SQLMesh's ``b64decode`` filter: base64 text decoded, as UTF-8 text."""
    data = value.encode("utf-8") if isinstance(value, str) else value
    return base64.b64decode(data).decode("utf-8")


def _b64encode(value: str | bytes) -> str:
    """SQLMesh's ``b64encode`` filter: UTF-8 text base64-encoded."""
    data = value.encode("utf-8") if isinstance(value, str) else value
    return base64.b64encode(data).decode("utf-8")


class _Sandbox(ImmutableSandboxedEnvironment):
    """jinja2's immutable sandbox with every call and size-changing operator checked, in
    which a template may change the plain lists and dicts it builds (:data:`_CHANGES`)."""

    intercepted_binops = frozenset({"*", "**", "+", "%", "//", "-"})

    def __init__(self, budget: _Budget) -> None:
        super().__init__(
            undefined=StrictUndefined,
            autoescape=False,
            keep_trailing_newline=True,
            extensions=EXTENSIONS,
        )
        self.budget = budget
        self.globals["range"] = self._range
        self.globals["namespace"] = _Namespace
        del self.globals["lipsum"]  # random text of any length: nothing a query needs
        # A text must render the same each time it is read: a config.yaml rendered to a
        # different gate on each read would make the settings a reviewer approved and
        # those in force differ (red team, sluice.yaml round). jinja2's only filter that
        # is not a function of its input is `random`.
        del self.filters["random"]
        self.filters["b64decode"] = _b64decode
        self.filters["b64encode"] = _b64encode
        for name, function in list(self.filters.items()):
            self.filters[name] = _checked(function, name in _SIZED_FILTERS)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # jinja2 returns an undefined value that fails only when used; one that is not
        # used (``{% do x._y %}``, ``{% set z = x._y %}``) would pass unnoticed.
        raise SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe"
        )

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if attr in _CHANGES.get(type(obj), frozenset()):
            # jinja2's sandbox rules (no _-attribute, ...) without the immutable one.
            return SandboxedEnvironment.is_safe_attribute(self, obj, attr, value)
        return super().is_safe_attribute(obj, attr, value)

    def _range(self, *args: int) -> range:
        result = range(*args)
        if len(result) > MAX_RANGE:
            raise _Cap(
                f"range() of {len(result):,} numbers (the limit is {MAX_RANGE:,})",
                "loop over fewer values",
            )
        return result

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        self.budget.tick()
        if operator == "**" and isinstance(right, int) and abs(right) > MAX_NUMBER_BITS:
            raise _Cap(
                f"the power {right} is too large (the limit is {MAX_NUMBER_BITS})",
                "use smaller numbers",
            )
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                sized = isinstance(seq, str | list | tuple) and isinstance(times, int)
                if sized and len(seq) * times > MAX_STRING:
                    raise _Cap(
                        f"repeating a value {times:,} times builds more than "
                        f"{MAX_STRING:,} items or characters",
                        "repeat it fewer times",
                    )
        result = super().call_binop(context, operator, left, right)
        if isinstance(result, set | frozenset):
            # A set's order follows the process's hash seed: a text rendered twice would
            # read differently (red team, settings round 2: a gate that flips).
            raise _Cap(
                "a set (such as `a.keys() - b.keys()`) has no order a template can rely on",
                "build a list instead, e.g. with the `reject` or `select` filter",
            )
        _check_size(result)
        return result

    def call(
        __self,  # noqa: N805 - jinja2's own spelling, kept for the override
        __context: Context,
        __obj: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        budget = __self.budget
        budget.tick()
        for value in (*args, *kwargs.values()):
            _check_size(value)
        if not isinstance(__obj, Macro):
            changed = getattr(__obj, "__self__", None)
            if type(changed) not in _CHANGES:
                return super().call(__context, __obj, *args, **kwargs)
            key = kwargs.get("key")
            if key is not None:  # list.sort(key=f): f is called through the sandbox too
                kwargs["key"] = lambda item: __self.call(__context, key, item)
            result = super().call(__context, __obj, *args, **kwargs)
            _check_size(changed)  # a list or dict grown by the call
            _check_size(result)
            return result
        budget.depth += 1
        try:
            if budget.depth > MAX_DEPTH:
                raise _Cap(
                    f"macros call each other more than {MAX_DEPTH} levels deep",
                    "end the recursion sooner",
                )
            result = super().call(__context, __obj, *args, **kwargs)
        finally:
            budget.depth -= 1
        _check_size(result)
        return result


_SIZED_FILTERS = frozenset({"batch", "center", "format", "indent", "slice", "truncate", "wordwrap"})
"""Filters whose number arguments are widths or counts: each is capped at MAX_RANGE."""


class _Namespace(Namespace):
    """``namespace()``, the one object a loop can grow a value in: each value is capped."""

    def __setitem__(self, name: str, value: Any) -> None:
        _check_size(value)
        super().__setitem__(name, value)


def _checked(function: Callable[..., Any], sized: bool) -> Callable[..., Any]:
    """A filter whose result (and, for ``sized``, integer arguments) is capped."""
    skip = 2 if hasattr(function, "jinja_pass_arg") else 1  # the context, the value

    def run(*args: Any, **kwargs: Any) -> Any:
        for value in (*args[skip:], *kwargs.values()) if sized else ():
            if isinstance(value, int) and not isinstance(value, bool) and value > MAX_RANGE:
                raise _Cap(
                    f"a filter argument of {value:,} (the limit is {MAX_RANGE:,})",
                    "use a smaller width or count",
                )
        result = function(*args, **kwargs)
        _check_size(result)
        return result

    # jinja2 passes the context or environment to filters marked for it.
    if hasattr(function, "jinja_pass_arg"):
        run.jinja_pass_arg = function.jinja_pass_arg  # type: ignore[attr-defined]
    return run


def file_cap(size: int) -> int:
    """Most characters the JINJA blocks of a model file of ``size`` characters may render
    to all together: :data:`MAX_FILE_OUTPUT`, or :data:`FILE_OUTPUT_FACTOR` times its size.

    >>> file_cap(100), file_cap(1_000_000)
    (1000000, 4000000)
    """
    return max(FILE_OUTPUT_FACTOR * size, MAX_FILE_OUTPUT)


@dataclass(frozen=True)
class Allowance:
    """How many characters one template may still render to, and the error past them."""

    chars: int
    message: str
    hint: str
    cap: str  # whose: "template", "file" or "project"


_ONE_TEMPLATE = Allowance(
    MAX_OUTPUT,
    f"the template renders to more than {MAX_OUTPUT:,} characters",
    "render less: a loop or a macro repeats too much",
    "template",
)


@dataclass(frozen=True)
class Source:
    """One template: ``name`` for messages (a file), ``first_line`` where it starts."""

    name: str
    text: str
    first_line: int = 1


class Renderer:
    """Renders a project's templates: its macros are loaded once, then each template."""

    def __init__(
        self,
        variables: Mapping[str, Any],
        env: Mapping[str, str],
        macros: list[Source] | None = None,
        macro_variables: frozenset[str] = frozenset(),
        unset_env: str | None = None,
    ) -> None:
        self.variables = {str(k).lower(): v for k, v in variables.items()}
        self.env = dict(env)
        # config.yaml: ``env_var('NAME')`` with no default renders to ``unset_env`` + NAME
        # + "__", refused by its reader only where Sluice reads the value.
        self.unset_env = unset_env
        self.sandbox = _Sandbox(_Budget())
        self.sources: dict[str, Source] = {}
        # One globals dict for every template: macros of one file may call another's.
        self.registry: dict[str, Any] = {
            "var": self._var,
            "env_var": self._env_var,
            **{name: f"{MACRO_VARIABLE}{name}__" for name in macro_variables},
        }
        for source in macros or []:
            module = self._run(source, module=True)
            for key in dir(module):
                value = getattr(module, key)
                if isinstance(value, Macro):
                    self.registry[key] = value

    def render(self, source: Source, allowance: Allowance = _ONE_TEMPLATE) -> str:
        """``source`` rendered, predefined variables turned into ``@name``; rendering
        stops as soon as it goes past ``allowance`` (at most :data:`MAX_OUTPUT`).

        Raises:
            RenderError: naming the template's line.
        """
        if allowance.chars > MAX_OUTPUT:
            allowance = _ONE_TEMPLATE
        text = str(self._run(source, module=False, allowance=allowance))
        return _SENTINEL.sub(lambda m: "@" + m.group(1), text)

    def _var(self, name: str, default: Any = _NO_DEFAULT) -> Any:
        key = str(name).lower()
        if key in self.variables:
            # A copy: a template may change its own lists and dicts, never the project's.
            return copy.deepcopy(self.variables[key])
        if default is not _NO_DEFAULT:
            return default
        raise _Cap(
            f"variable '{key}' is not defined",
            f"add '{key}' under 'variables:' in config.yaml or give a default: "
            f"{{{{ var('{key}', value) }}}}",
        )

    def _env_var(self, name: str, default: Any = _NO_DEFAULT) -> Any:
        if str(name) in self.env:
            return self.env[str(name)]
        if default is not _NO_DEFAULT:
            return default
        if self.unset_env is not None:
            return f"{self.unset_env}{name}__"
        raise _Cap(
            f"environment variable '{name}' is not available to the project",
            f"give a default, {{{{ env_var('{name}', 'value') }}}}: Sluice never hands its "
            "own environment to a project (see docs/security.md)",
        )

    def _run(self, source: Source, *, module: bool, allowance: Allowance = _ONE_TEMPLATE) -> Any:
        budget = self.sandbox.budget = _Budget()
        key = f"{source.name}#jinja{source.first_line}"
        self.sources[key] = source
        tracer = _Tracer(budget, self.sources)
        previous = sys.gettrace()
        try:
            sandbox = self.sandbox
            code = sandbox.compile(source.text, name=key, filename=key)
            template = sandbox.template_class.from_code(
                sandbox, code, sandbox.make_globals(self.registry), None
            )
            sys.settrace(tracer.trace)
            try:
                if module:
                    return template.make_module()
                size = 0
                chunks: list[str] = []
                for chunk in template.generate():
                    size += len(chunk)
                    if size > allowance.chars:
                        raise RenderError(
                            allowance.message,
                            source.name,
                            source.first_line,
                            allowance.hint,
                            allowance.cap,
                        )
                    chunks.append(chunk)
                    budget.tick()
                return "".join(chunks)
            finally:
                sys.settrace(previous)
        except RenderError:
            raise
        except TemplateSyntaxError as exc:
            raise self._error(exc.message or str(exc), exc, exc.lineno, key) from None
        except RecursionError as exc:
            raise self._error("macros call each other too deeply", exc, None, key) from None
        except MemoryError as exc:
            raise self._error("rendering ran out of memory", exc, None, key) from None
        except Exception as exc:  # any failure of user code, named by its line
            raise self._error(str(exc), exc, None, key) from None

    def _error(self, message: str, exc: BaseException, line: int | None, key: str) -> RenderError:
        """A failure as (file, line): the innermost template frame of its traceback."""
        where_key, where_line = key, line
        if line is None:
            for tb, lineno in walk_tb(exc.__traceback__):
                if tb.f_code.co_filename in self.sources:
                    where_key, where_line = tb.f_code.co_filename, lineno
        source = self.sources.get(where_key, self.sources[key])
        absolute = source.first_line + where_line - 1 if where_line else source.first_line
        hint = "check the Jinja on this line"
        if isinstance(exc, _Cap):
            hint = exc.hint
            message = exc.message
        elif isinstance(exc, SecurityError) or "unsafe" in message:
            message = f"refused by the sandbox: {message}"
            hint = (
                "templates may not reach Python internals (attributes starting with _, "
                "or changing anything but the lists and dicts they build); write the SQL "
                "with variables and macros"
            )
        elif isinstance(exc, UndefinedError):
            hint = (
                "define it with {% set %}, pass it to the macro, or read a project "
                "variable with var('name')"
            )
        elif isinstance(exc, TemplateSyntaxError):
            message = f"Jinja syntax error: {message}"
            hint = "check the {% ... %} and {{ ... }} tags on this line"
        elif isinstance(exc, RecursionError | MemoryError):
            hint = "make the template's loops and recursion smaller"
        return RenderError(message, source.name, absolute, hint)


class _Tracer:
    """Counts the lines of templates run, so a loop with no output or calls is capped."""

    def __init__(self, budget: _Budget, templates: Mapping[str, Source]) -> None:
        self.budget = budget
        self.templates = templates

    def trace(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "call" and frame.f_code.co_filename in self.templates:
            return self.lines
        return None

    def lines(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "line":
            self.budget.tick()
        return self.lines


class Totals:
    """What the templates rendered so far add up to, by file and for the whole batch:
    the allowance of the next template, and the error of one not rendered after a cap."""

    def __init__(self, caps: Mapping[str, Any]) -> None:
        self.files: Mapping[str, int] = caps.get("files") or {}
        self.project = min(int(caps.get("project") or MAX_PROJECT_OUTPUT), MAX_PROJECT_OUTPUT)
        self.used: dict[str, int] = {}
        self.total = 0
        self.full: dict[str, str] = {}  # file -> where its cap was crossed (file:line)
        self.stopped: str | None = None  # where the project's cap was crossed

    def cap_of(self, name: str) -> int:
        return min(int(self.files.get(name) or MAX_FILE_OUTPUT), MAX_PROJECT_OUTPUT)

    def allowance(self, name: str) -> Allowance:
        file_left = self.cap_of(name) - self.used.get(name, 0)
        project_left = self.project - self.total
        if min(file_left, project_left) >= MAX_OUTPUT:
            return _ONE_TEMPLATE
        if file_left <= project_left:
            return Allowance(
                file_left,
                f"the JINJA blocks of this file render to more than {self.cap_of(name):,} "
                f"characters all together (a file's cap is {FILE_OUTPUT_FACTOR} times its "
                f"size, at least {MAX_FILE_OUTPUT:,}); this block went over",
                "render less: fewer or smaller JINJA blocks, loops and repeated strings",
                "file",
            )
        return Allowance(
            project_left,
            f"the JINJA blocks of the project render to more than {self.project:,} "
            "characters all together; this block went over",
            "render less: fewer or smaller JINJA blocks, loops and repeated strings "
            "across the project's models",
            "project",
        )

    def add(self, name: str, chars: int) -> None:
        self.used[name] = self.used.get(name, 0) + chars
        self.total += chars

    def crossed(self, error: RenderError) -> None:
        """Note the cap ``error`` reports, so that later templates are not rendered."""
        where = f"{error.name}:{error.line}"
        if error.cap == "project":
            self.stopped = where
        elif error.cap == "file":
            self.full[error.name] = where

    def check(self, source: Source, text: str) -> RenderError | None:
        """Count ``text``, what ``source`` rendered to, or the error of the cap it goes
        over (for the parent, which checks the child's answers again)."""
        refused = self.refused(source)
        if refused is not None:
            return refused
        allowance = self.allowance(source.name)
        if len(text) > allowance.chars:
            error = RenderError(
                allowance.message, source.name, source.first_line, allowance.hint, allowance.cap
            )
            self.crossed(error)
            return error
        self.add(source.name, len(text))
        return None

    def refused(self, source: Source) -> RenderError | None:
        """The error of a template left unrendered because a cap was crossed before it."""
        if self.stopped is not None:
            return RenderError(
                f"not rendered: the JINJA blocks of the project rendered more than "
                f"{self.project:,} characters before this one (the cap was crossed at "
                f"{self.stopped})",
                source.name,
                source.first_line,
                f"make the templates up to {self.stopped} render less",
            )
        if source.name in self.full:
            return RenderError(
                "not rendered: an earlier block of this file went over the file's cap "
                f"(at {self.full[source.name]})",
                source.name,
                source.first_line,
                "make that block render less",
            )
        return None


def render_batch(request: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Render every template of ``request`` (the child's JSON input), one answer each.

    ``request``: ``variables``, ``env``, ``macro_variables`` (names), ``macros`` and
    ``templates`` (lists of ``[name, text, first_line]``), and ``caps``: ``files`` (name
    -> most characters that file's templates render to together, :func:`file_cap`;
    :data:`MAX_FILE_OUTPUT` for a name not there) and ``project`` (most characters of all
    templates, at most :data:`MAX_PROJECT_OUTPUT`). An answer is ``{"text": ...}`` or
    ``{"error": {message, path, line, hint}}``; a broken macros file is one answer
    ``{"macros_error": ...}`` instead of them all. The template that goes past a cap
    stops rendering there and is an error; the templates after it (of its file, or of
    the project) are errors without being rendered.
    """
    try:
        renderer = Renderer(
            request.get("variables") or {},
            request.get("env") or {},
            [Source(*m) for m in request.get("macros") or []],
            frozenset(request.get("macro_variables") or ()),
            unset_env=request.get("unset_env"),
        )
    except RenderError as exc:
        yield {"macros_error": as_dict(exc)}
        return
    totals = Totals(request.get("caps") or {})
    for item in request.get("templates") or []:
        source = Source(*item)
        refused = totals.refused(source)
        if refused is not None:
            yield {"error": as_dict(refused)}
            continue
        try:
            text = renderer.render(source, totals.allowance(source.name))
        except RenderError as exc:
            totals.crossed(exc)
            yield {"error": as_dict(exc)}
            continue
        totals.add(source.name, len(text))
        yield {"text": text}


def as_dict(exc: RenderError) -> dict[str, Any]:
    """``exc`` as the child answers it (and :mod:`.jinja` reads it back)."""
    return {"message": exc.message, "path": exc.name, "line": exc.line, "hint": exc.hint}


def _limit_self() -> None:
    # Not sluice.core.sandbox: the child imports as little as it can before its limits.
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
        resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        resource.setrlimit(resource.RLIMIT_NPROC, (16, 16))
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):  # not Linux: the in-process caps remain
        pass


def main() -> None:
    """The child process: limits first, then JSON in on stdin, one JSON line out per
    answer on stdout (flushed, so the parent knows which template a crash stopped at)."""
    _limit_self()
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    out = sys.stdout.buffer
    for answer in render_batch(request):
        # UTF-8 (at most 4 bytes a character: the parent reads a bounded number of
        # bytes); a lone surrogate becomes its JSON escape, \udXXX.
        line = json.dumps(answer, ensure_ascii=False).encode("utf-8", "backslashreplace")
        out.write(line + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
