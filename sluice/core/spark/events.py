"""The line protocol between the driver and the runner, as typed values (pure).

The driver prints one line per event to stdout: ``@@sluice `` followed by a JSON object.
Everything else on stdout or stderr is Spark's or Python's own output, kept in the log.

Each kind of event is a ``TypedDict`` below, tagged by its ``event`` key (:data:`Event` is
their union, so mypy narrows on ``event["event"] == "step_done"`` and checks the keys
read after it); on the wire they are the same JSON objects as ever. Besides progress
(``job_start``, ``session_ready``, ``session_opened``, ``step_start``, ``log``,
``step_done``, ``step_failed``, ``job_done``, ``job_failed``), the driver reports what it
wants kept in state as ``write`` events, tagged again by ``op`` (:data:`WriteEvent`): it has
no state store of its own. The runner checks each against the job's spec and applies it
(:mod:`sluice.core.spark.writes`).

The driver runs a pull request's SQL and Python, which can print to the same stdout, so a
line read from it is untrusted: :func:`decode` (:func:`parse` for a JSON value) accepts
only the kinds and keys below, each of its type, names and ids of at most
:data:`MAX_NAME_CHARS` characters, results nested at most :data:`MAX_DEPTH` deep, lines of
at most :data:`MAX_LINE_CHARS` for the two kinds that carry results (``step_done``,
``job_done``) and :data:`MAX_EVENT_CHARS` for any other (:func:`line_limit`); a message or
an error longer than :data:`MAX_TEXT_CHARS` is cut (it is only shown). A step's result (a ``step_done`` event's, each of a
``job_done`` event's) is read by :mod:`sluice.core.spark.results` as the kind of result it
claims; given the job's steps (the runner gives them), also as a result of the step it is
for (:func:`sluice.core.spark.results.check`). Anything else is refused with
:class:`BadEvent`, which says what was wrong. Nothing of a line is ever evaluated: it is
JSON, read by ``json.loads``.

No ``from __future__ import annotations`` here: on Python 3.11 a ``NotRequired`` inside a
string annotation is not seen by ``TypedDict`` (see :mod:`sluice.core.spark.spec`).
"""

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict, cast

from sluice.core.spark import results as step_results
from sluice.core.spark.results import (
    MAX_DEPTH,
    MAX_NAME_CHARS,
    MAX_TEXT_CHARS,
    Check,
    StepResult,
    kind_of,
    shown,
)
from sluice.core.spark.spec import Step

PREFIX = "@@sluice "

# Exit codes of the driver: 0 done; STEP_FAILED a step failed (the event says which);
# BAD_SPEC the job spec could not be read; anything else is a crash (JVM, Python).
STEP_FAILED = 3
BAD_SPEC = 4

MAX_LINE_CHARS = 32 * 1024 * 1024
"""The longest event line read: a ``step_done``'s or a ``job_done``'s (which carries every
step's result); any other is held to :data:`MAX_EVENT_CHARS`."""
MAX_EVENT_CHARS = 2 * 1024 * 1024
"""The longest line of an event that carries no step result (room for a ``write``'s
payload of at most 1 MiB, :data:`sluice.core.spark.writes.MAX_PAYLOAD_CHARS`, and its
names)."""
# How such a line begins (the event's kind first, as the driver's encode() writes it; a
# line that names its kind later is held to the shorter limit). Read before json.loads,
# so a long line of another kind is refused unparsed.
_RESULT_LINE = re.compile(r'\{\s*"event"\s*:\s*"(?:step_done|job_done)"')
_WRITE_LINE = re.compile(r'\{\s*"event"\s*:\s*"write"')


# --- progress -----------------------------------------------------------------------------


class JobStart(TypedDict):
    """The job began (``steps``: how many it has)."""

    event: Literal["job_start"]
    job_id: str | None
    steps: int


class SessionReady(TypedDict):
    """The driver's Spark session is up (a Connect client's: its server-side id)."""

    event: Literal["session_ready"]
    session_id: NotRequired[str | None]


class SessionOpened(TypedDict):
    """A Connect client opened another server-side session (a concurrent build's)."""

    event: Literal["session_opened"]
    session_id: str


class About(TypedDict, total=False):
    """Whose a step's events are: ``model`` and its ``source`` (``file:line``) for a build,
    an audit, a unit test; ``worker``: the concurrent build slot running it."""

    model: str
    source: str
    worker: int


class StepStart(About):
    """Step ``index`` began."""

    event: Literal["step_start"]
    index: int
    type: str
    label: str


class StepDone(About):
    """Step ``index`` finished in ``seconds`` with ``result`` (None: it returns none)."""

    event: Literal["step_done"]
    index: int
    label: str
    seconds: float
    result: StepResult | None


class StepFailure(About):
    """Step ``index`` failed with ``error`` (Spark's error, one line when it has a class)."""

    event: Literal["step_failed"]
    index: int
    type: str
    label: str
    error: str
    error_class: str


class LogLine(TypedDict):
    """Progress worth showing (``model``: the model it is about)."""

    event: Literal["log"]
    message: str
    model: NotRequired[str]


class JobDone(TypedDict):
    """The job finished: each step's result by its id (its index, as text, by default)."""

    event: Literal["job_done"]
    job_id: str | None
    results: dict[str, StepResult]


class JobFailure(TypedDict):
    """The job failed outside any step (the spec unreadable, no Spark session...)."""

    event: Literal["job_failed"]
    error: str


# --- writes to state ----------------------------------------------------------------------


class AddIntervals(TypedDict):
    """Record ``intervals`` (``[start, end]`` pairs) of a model version as filled."""

    event: Literal["write"]
    op: Literal["add_intervals"]
    model: str
    version: str
    intervals: list[list[int]]


class RemoveIntervals(TypedDict):
    """Forget ``[start, end)`` of a model version (a restatement)."""

    event: Literal["write"]
    op: Literal["remove_intervals"]
    model: str
    version: str
    start: int
    end: int


class SaveResult(TypedDict):
    """Keep an audit's, a unit test's or a table diff's result (``batch``: the build batch
    an audit checked; ``job_id``, ``plan_id``: must be the job's own when given)."""

    event: Literal["write"]
    op: Literal["save_result"]
    kind: str
    name: str
    passed: bool
    payload: dict[str, Any]
    batch: NotRequired[list[int]]
    job_id: NotRequired[str]
    plan_id: NotRequired[str | None]


class TableSizeWrite(TypedDict):
    """The size a build left its table at (``rows``: when Spark knows them)."""

    event: Literal["write"]
    op: Literal["table_size"]
    model: str
    version: str
    bytes: int
    rows: NotRequired[int | None]


WriteEvent: TypeAlias = AddIntervals | RemoveIntervals | SaveResult | TableSizeWrite
Event: TypeAlias = (
    JobStart
    | SessionReady
    | SessionOpened
    | StepStart
    | StepDone
    | StepFailure
    | LogLine
    | WriteEvent
    | JobDone
    | JobFailure
)
OnEvent: TypeAlias = Callable[[Event], None]
"""What a runner hands each event to, as it arrives (a command's progress, a comment's)."""

WRITE = "write"
ENVIRONMENT_OPS = frozenset(
    {"commit", "update_environment", "invalidate_environment", "delete_environment", "environment"}
)
"""Writes a driver may never ask for, named so that the refusal says why."""


class BadEvent(ValueError):
    """An event line the runner refuses (``kind``: its ``event``, when that was a known one)."""

    def __init__(self, problem: str, kind: str | None = None) -> None:
        super().__init__(problem)
        self.kind = kind


def encode(event: Event) -> str:
    """One event as a line (no newline)."""
    return PREFIX + json.dumps(event, separators=(",", ":"), default=str)


def decode(line: str, steps: Sequence[Step] | None = None) -> Event | None:
    """The event in ``line``, or None when the line is ordinary output; ``steps``: the
    job's (its spec's), which the results it reports must be of (:func:`parse`).

    Raises:
        BadEvent: the line is an event line (it starts with :data:`PREFIX`) that is not
            one of the events above, saying why.
    """
    if not line.startswith(PREFIX):
        return None
    text = line[len(PREFIX) :]
    limit = line_limit(text)
    if len(text) > limit:
        raise too_long(text, limit)
    try:
        raw = json.loads(text)
    except RecursionError:
        raise BadEvent(f"an event line nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise BadEvent(f"an event line that is not JSON ({exc})") from None
    return parse(raw, steps)


def line_limit(text: str) -> int:
    """The most characters ``text`` (an event line, its prefix removed) may have:
    :data:`MAX_LINE_CHARS` for a ``step_done`` or a ``job_done`` line (by how it begins),
    :data:`MAX_EVENT_CHARS` (no more than :data:`MAX_LINE_CHARS`) for any other."""
    if _RESULT_LINE.match(text):
        return MAX_LINE_CHARS
    return min(MAX_EVENT_CHARS, MAX_LINE_CHARS)


def too_long(text: str, limit: int) -> BadEvent:
    """The refusal of an event line (``text``: without its prefix; maybe cut) longer than
    ``limit``; a ``write``'s is tagged as one, so that the runner stops the job."""
    kind = WRITE if _WRITE_LINE.match(text) else None
    only = (
        f" (only a step_done or a job_done line may be longer, up to {MAX_LINE_CHARS})"
        if limit < MAX_LINE_CHARS
        else ""
    )
    return BadEvent(f"an event line longer than {limit} characters{only}", kind)


def parse(raw: object, steps: Sequence[Step] | None = None) -> Event:
    """``raw`` (a decoded JSON value) as the event it is; with the job's ``steps``, its
    results also as results of those steps (:func:`sluice.core.spark.results.check`).

    Raises:
        BadEvent: ``raw`` is not an object, its ``event`` is not a known kind, a key is
            missing, unknown or of the wrong type, or a value is out of bounds; or a
            result is for a step ``steps`` does not have, or not of that step.
    """
    if not isinstance(raw, dict):
        raise BadEvent(f"an event that is not a JSON object but {kind_of(raw)}")
    kind = raw.get("event")
    if not isinstance(kind, str) or kind not in FIELDS:
        raise BadEvent(f"an event of unknown kind {shown(kind)}")
    if kind == WRITE:
        op = raw.get("op")
        if not isinstance(op, str) or op not in WRITE_FIELDS:
            if isinstance(op, str) and op in ENVIRONMENT_OPS:
                raise BadEvent(
                    f"'{op}': the driver writes no environment (the service commits the "
                    "environment record itself once the job has succeeded)",
                    kind,
                )
            raise BadEvent(f"unknown write {shown(op)}", kind)
        required, optional = WRITE_FIELDS[op]
        what = f"a write {op!r}"
    else:
        required, optional = FIELDS[kind]
        what = f"a {kind!r} event"
    event: dict[str, Any] = {}
    for key, value in raw.items():
        check = required.get(key) or optional.get(key)
        if check is None:
            raise BadEvent(f"{what} with an unknown key {shown(key)}", kind)
        try:
            event[key] = check(value)
        except BadEvent as exc:
            raise BadEvent(f"{what}: {step_results.joined(key, str(exc))}", kind) from None
    missing = [key for key in required if key not in event]
    if missing:
        raise BadEvent(f"{what} without {', '.join(missing)}", kind)
    if steps is not None:
        try:
            if kind == "step_done" and event["result"] is not None:
                step_results.check(event["result"], event["index"], steps)
            elif kind == "job_done":
                step_results.check_all(event["results"], steps)
        except step_results.BadResult as exc:
            key = "result" if kind == "step_done" else "results"
            raise BadEvent(f"{what}: {step_results.joined(key, str(exc))}", kind) from None
    return cast(Event, event)


# --- the checks of each key ---------------------------------------------------------------


def _tag(name: str) -> Check:
    def check(value: Any) -> str:
        if value != name:
            raise BadEvent(f"is {shown(value)}, not {name!r}")
        return name

    return check


def _name(value: Any) -> str:
    if not isinstance(value, str):
        raise BadEvent(f"is {kind_of(value)}, not a string")
    if len(value) > MAX_NAME_CHARS:
        raise BadEvent(f"is longer than {MAX_NAME_CHARS} characters")
    return value


def _maybe_name(value: Any) -> str | None:
    return None if value is None else _name(value)


def _text(value: Any) -> str:
    """A message or an error: any length, cut to :data:`MAX_TEXT_CHARS`."""
    if not isinstance(value, str):
        raise BadEvent(f"is {kind_of(value)}, not a string")
    if len(value) <= MAX_TEXT_CHARS:
        return value
    return value[:MAX_TEXT_CHARS] + f"... ({len(value) - MAX_TEXT_CHARS} more characters)"


def _integer(value: Any) -> int:
    if type(value) is not int:  # JSON's true is not a number
        raise BadEvent(f"is {kind_of(value)}, not an integer")
    return value


def _count(value: Any) -> int:
    if _integer(value) < 0:
        raise BadEvent(f"is {value}, not a count")
    return cast(int, value)


def _seconds(value: Any) -> float:
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise BadEvent(f"is {shown(value)}, not a number of seconds")
    return cast(float, value)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise BadEvent(f"is {kind_of(value)}, not true or false")
    return value


def _json(value: Any, depth: int = 0) -> None:
    """Refuse JSON nested deeper than :data:`MAX_DEPTH` (json.loads gives JSON values only)."""
    if depth > MAX_DEPTH:
        raise BadEvent(f"nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for item in value.values():
            _json(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _json(item, depth + 1)


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadEvent(f"is {kind_of(value)}, not an object")
    _json(value)
    return value


def _maybe_result(value: Any) -> StepResult | None:
    if value is None:
        return None
    try:
        return step_results.parse_result(value)
    except step_results.BadResult as exc:
        raise BadEvent(str(exc)) from None


def _results(value: Any) -> dict[str, StepResult]:
    try:
        return step_results.parse_results(value)
    except step_results.BadResult as exc:
        raise BadEvent(str(exc)) from None


def _pair(value: Any) -> list[int]:
    if not isinstance(value, list) or len(value) != 2:
        raise BadEvent(f"holds {shown(value)}, not a [start, end] pair")
    return [_integer(value[0]), _integer(value[1])]


def _pairs(value: Any) -> list[list[int]]:
    if not isinstance(value, list):
        raise BadEvent(f"is {kind_of(value)}, not a list of [start, end] pairs")
    return [_pair(item) for item in value]


def _maybe_integer(value: Any) -> int | None:
    return None if value is None else _integer(value)


_ABOUT: dict[str, Check] = {"model": _name, "source": _name, "worker": _count}

FIELDS: dict[str, tuple[dict[str, Check], dict[str, Check]]] = {
    "job_start": ({"event": _tag("job_start"), "job_id": _maybe_name, "steps": _count}, {}),
    "session_ready": ({"event": _tag("session_ready")}, {"session_id": _maybe_name}),
    "session_opened": ({"event": _tag("session_opened"), "session_id": _name}, {}),
    "step_start": (
        {"event": _tag("step_start"), "index": _count, "type": _name, "label": _name},
        _ABOUT,
    ),
    "step_done": (
        {
            "event": _tag("step_done"),
            "index": _count,
            "label": _name,
            "seconds": _seconds,
            "result": _maybe_result,
        },
        _ABOUT,
    ),
    "step_failed": (
        {
            "event": _tag("step_failed"),
            "index": _count,
            "type": _name,
            "label": _name,
            "error": _text,
            "error_class": _name,
        },
        _ABOUT,
    ),
    "log": ({"event": _tag("log"), "message": _text}, {"model": _name}),
    WRITE: ({"event": _tag(WRITE), "op": _name}, {}),  # by op: WRITE_FIELDS
    "job_done": ({"event": _tag("job_done"), "job_id": _maybe_name, "results": _results}, {}),
    "job_failed": ({"event": _tag("job_failed"), "error": _text}, {}),
}
"""Each kind of event: its keys' checks, required and optional (as its ``TypedDict``)."""

_MODEL_VERSION: dict[str, Check] = {"event": _tag(WRITE), "model": _name, "version": _name}

WRITE_FIELDS: dict[str, tuple[dict[str, Check], dict[str, Check]]] = {
    "add_intervals": (
        {**_MODEL_VERSION, "op": _tag("add_intervals"), "intervals": _pairs},
        {},
    ),
    "remove_intervals": (
        {**_MODEL_VERSION, "op": _tag("remove_intervals"), "start": _integer, "end": _integer},
        {},
    ),
    "save_result": (
        {
            "event": _tag(WRITE),
            "op": _tag("save_result"),
            "kind": _name,
            "name": _name,
            "passed": _flag,
            "payload": _object,
        },
        {"batch": _pair, "job_id": _name, "plan_id": _maybe_name},
    ),
    "table_size": (
        {**_MODEL_VERSION, "op": _tag("table_size"), "bytes": _integer},
        {"rows": _maybe_integer},
    ),
}
"""Each op of a ``write`` event: its keys' checks. Values are checked for their types
here; whether the spec allows them (a count not negative, a range it restates) is for
:class:`~sluice.core.spark.writes.JobWrites`, which says so in its own words."""

KINDS: dict[str, Any] = {
    "job_start": JobStart,
    "session_ready": SessionReady,
    "session_opened": SessionOpened,
    "step_start": StepStart,
    "step_done": StepDone,
    "step_failed": StepFailure,
    "log": LogLine,
    "job_done": JobDone,
    "job_failed": JobFailure,
}
"""Each kind of event but ``write``: its ``TypedDict`` (:data:`WRITE_OPS` for writes)."""

WRITE_OPS: dict[str, Any] = {
    "add_intervals": AddIntervals,
    "remove_intervals": RemoveIntervals,
    "save_result": SaveResult,
    "table_size": TableSizeWrite,
}
