"""The verdict on top of the PR comment, and its next steps: one line of risk and state,
what merging does, what the PR built, and what a reader can do now.

The comment's main body is written by a build; reviews, merges and closes come later and
know nothing of it. So the verdict is not written into the body: the body holds two
placeholder (:data:`VERDICT` under the headline: the verdict lines, the sections, then
the next steps; :data:`NEXT`, where bodies written before them put the next steps, is
removed) and each
part of the story is kept as facts (:class:`BuildFacts`, :class:`GateFacts`,
:class:`LifeFacts`, JSON in the sticky comment's sections, names :data:`FACTS`), from which
:func:`compose` words the headline, the verdict lines and the next steps after every event.

Every user value (model names, logins, view names) is escaped here with
:mod:`sluice.core.markdown`.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sluice.core import markdown as md
from sluice.core.words import duration, plural, size

VERDICT = "<!-- sluice:verdict -->"
"""Where the verdict lines and the sections go (the line under the headline)."""
NEXT = "<!-- sluice:next -->"
"""Where older bodies put the next steps (now under the verdict)."""
CHECKS_FROM, CHECKS_TO = "<!-- sluice:checks -->", "<!-- /sluice:checks -->"
"""Around the head's checks table: dropped once the PR is merged or closed."""
BUILD, GATE, LIFE = "facts.build", "facts.gate", "facts.life"
FACTS = (BUILD, GATE, LIFE)
"""Section names holding facts (JSON), never shown as they are."""

MAX_MENTIONS = 3
MAX_VIEWS = 8


@dataclass(frozen=True)
class Backfill:
    """One table prod computes on merge: ``intervals`` of it, or a ``full`` refresh."""

    model: str
    intervals: int
    full: bool


@dataclass(frozen=True)
class BuildFacts:
    """What a finished build of the PR found: risk, cost, what to query."""

    environment: str
    project: str | None
    failure: str | None  # what failed (None: the build succeeded)
    changes_models: bool
    breaking: tuple[str, ...] = ()  # directly modified breaking models, and removed ones
    reached: tuple[str, ...] = ()  # models a breaking change reaches downstream
    non_breaking: tuple[str, ...] = ()  # non-breaking and forward-only, direct or not
    added: tuple[str, ...] = ()
    metadata: tuple[str, ...] = ()
    tables_built: int = 0
    views: int = 0
    seconds: float = 0.0
    rows_written: int | None = None
    bytes_written: int | None = None
    merge: tuple[Backfill, ...] | None = None  # None: not known (no prod plan)
    merge_changes: bool = True
    merge_bytes: int | None = None  # what the merge's backfill reads (estimate)
    merge_rows: int | None = None  # ... and writes (estimate; None: not measured)
    merge_written: int | None = None
    merge_into: str = "prod"  # the environment a merge promotes (a tier before prod)
    query_views: tuple[str, ...] = ()
    diff_models: tuple[str, ...] = ()
    checks_url: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> BuildFacts:
        data = json.loads(text)
        merge = data.get("merge")
        data["merge"] = None if merge is None else tuple(Backfill(**b) for b in merge)
        return cls(**_tuples(data))


@dataclass(frozen=True)
class GateFacts:
    """The approval gate at the PR's head."""

    ok: bool
    requires_approval: bool
    missing: int = 0
    eligible: tuple[str, ...] = ()
    owners_missing: tuple[tuple[str, str], ...] = ()  # (model, owner)
    approved_by: tuple[str, ...] = ()
    stale: bool = False
    into_prod: bool = True

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> GateFacts:
        data = _tuples(json.loads(text))
        data["owners_missing"] = tuple(tuple(pair) for pair in data.get("owners_missing", ()))
        return cls(**data)


@dataclass(frozen=True)
class LifeFacts:
    """What became of the PR: ``promoted``, ``promotion_failed``, ``waiting_for_tag``,
    ``closed`` or ``merged_elsewhere``; ``detail``: the promotion's title, the tag pattern."""

    event: str
    detail: str = ""
    removed: bool = False  # the PR's environment was removed

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LifeFacts:
        return cls(**json.loads(text))


def _tuples(data: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}


@dataclass(frozen=True)
class Facts:
    """The facts kept with a comment (any may be missing)."""

    build: BuildFacts | None = None
    gate: GateFacts | None = None
    life: LifeFacts | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, sections: Mapping[str, str]) -> Facts:
        def load(name: str, kind: Any) -> Any:
            text = sections.get(name)
            if not text:
                return None
            try:
                return kind.from_json(text)
            except (ValueError, TypeError, KeyError):
                return None  # facts of an older Sluice: the comment shows what it has

        return cls(load(BUILD, BuildFacts), load(GATE, GateFacts), load(LIFE, LifeFacts))


# -- words ---------------------------------------------------------------------------------


def _names(names: Sequence[str], limit: int = 3) -> str:
    """The first ``limit`` of ``names`` (in the order given: riskiest first where the
    caller has an order, else natural), then how many more."""
    shown = ", ".join(md.code(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _who(gate: GateFacts) -> str:
    """Whom the gate waits for, as mentions (never more than a few)."""
    people = [md.mention(owner, team="/" in owner) for _m, owner in gate.owners_missing]
    people += [md.mention(login) for login in gate.eligible]
    people = list(dict.fromkeys(people))
    if not people:
        return "an approval"
    shown = (
        " or ".join(people[:MAX_MENTIONS])
        if not gate.owners_missing
        else ", ".join(people[:MAX_MENTIONS])
    )
    more = len(people) - MAX_MENTIONS
    return shown + (f" (or {plural(more, 'other')})" if more > 0 else "")


def _risk(build: BuildFacts) -> str:
    """What the PR changes, worst first, in a few words."""
    if build.breaking:
        text = plural(len(build.breaking), "breaking change")
        if build.reached:
            text += f" {'reaches' if len(build.breaking) == 1 else 'reach'} " + plural(
                len(build.reached), "model"
            )
        return text
    parts = []
    if build.non_breaking:
        parts.append(plural(len(build.non_breaking), "non-breaking change"))
    if build.added:
        parts.append(plural(len(build.added), "new model"))
    if build.metadata:
        parts.append(plural(len(build.metadata), "metadata change"))
    return ", ".join(parts) or "no model changed"


def summary(build: BuildFacts) -> md.Markdown:
    """What the build found, without the gate: its failure, then its risk."""
    risk = _risk(build)
    if build.failure is None:
        return md.Markdown(risk)
    return md.Markdown(
        f"{md.trusted(build.failure)} ({risk})" if build.changes_models else build.failure
    )


def headline(facts: Facts) -> tuple[str, md.Markdown]:
    """(icon, Markdown) of the comment's first line, true to the PR's state."""
    build, gate, life = facts.build, facts.gate, facts.life
    if build is None:
        return "ℹ️", md.Markdown("no build yet")  # noqa: RUF001
    env = md.code(build.environment)
    if life is not None:
        if life.event == "promoted":
            return "🚀", md.Markdown(f"promoted to prod: {_risk(build)}")
        if life.event == "promotion_failed":
            return "❌", md.Markdown("merged, but the promotion failed: prod is unchanged")
        if life.event == "waiting_for_tag":
            return "⏳", md.Markdown("merged; prod is promoted by the next release tag")
        if life.event == "merged_elsewhere":
            return "ℹ️", md.Markdown("merged into another branch than prod: not promoted")  # noqa: RUF001
        removed = f"; {env} is removed" if life.removed else ""
        return "⏹️", md.Markdown(f"closed without merging{removed}")
    risk = _risk(build)
    if build.failure is not None:
        return "❌", summary(build)
    if not build.changes_models:
        return "✅", md.Markdown("no model changed; nothing to review")
    icon = "⚠️" if build.breaking else "ℹ️"  # noqa: RUF001
    if gate is None:
        return icon, md.Markdown(f"{risk}; checking approvals")
    if gate.ok:
        return "✅", md.Markdown(f"ready to merge: {risk}")
    return icon, md.Markdown(f"{risk}; waiting for {_who(gate)}")


def merge_line(build: BuildFacts) -> md.Markdown | None:
    """What merging does to the environment it promotes (prod, or the first tier of
    ``sluice.deploy.environments``), in numbers."""
    if build.merge is None:
        return None
    if not build.merge_changes and not build.merge:
        into = build.merge_into
        return md.Markdown(f"**Merging** changes nothing in {into}: {into} already has this state.")
    if not build.merge:
        return md.Markdown(
            f"**Merging** is a virtual update: 0 rows written; {build.merge_into}'s views switch to the "
            f"tables built in {md.code(build.environment)}."
        )
    full = [b.model for b in build.merge if b.full]
    ranged = [b for b in build.merge if not b.full]
    parts = []
    if full:
        parts.append(f"a full refresh of {_names(full)}")
    if ranged:
        intervals = sum(b.intervals for b in ranged)
        parts.append(f"{plural(intervals, 'interval')} of {_names([b.model for b in ranged])}")
    costs = [f"reading about {size(build.merge_bytes)}"] if build.merge_bytes else []
    if build.merge_written is not None:
        rows = "" if build.merge_rows is None else f"{plural(build.merge_rows, 'row')} "
        written = size(build.merge_written)
        costs.append(f"writing about {rows}({written})" if rows else f"writing about {written}")
    cost = f", {' and '.join(costs)}" if costs else ""
    return md.Markdown(f"**Merging** computes {' and '.join(parts)} in {build.merge_into}{cost}.")


def built_line(build: BuildFacts) -> md.Markdown | None:
    """What the PR's build wrote, and how long Spark took."""
    if not build.changes_models or (build.failure is not None and not build.tables_built):
        return None
    held = [] if build.rows_written is None else [plural(build.rows_written, "row")]
    held += [] if build.bytes_written is None else [size(build.bytes_written)]
    tables = plural(build.tables_built, "table") + (f" ({', '.join(held)})" if held else "")
    took = f" in {duration(build.seconds)} of Spark" if build.seconds else ""
    return md.Markdown(
        f"**This PR built** {tables} and {plural(build.views, 'view')} in "
        f"{md.code(build.environment)}{took}."
    )


def verdict_lines(facts: Facts) -> list[md.Markdown]:
    """The lines under the headline (the sections follow them)."""
    build, life = facts.build, facts.life
    if build is None:
        return []
    lines: list[md.Markdown | None] = []
    if life is None:
        lines.append(merge_line(build))
        lines.append(built_line(build))
    elif life.event == "closed":
        lines.append(md.Markdown("Nothing was merged; prod is unchanged."))
    return [line for line in lines if line]


def query_line(environment: str, view: str) -> md.Markdown:
    """A copy-paste shell command that shows ten rows of ``view`` in ``environment``."""
    sql = f"SELECT * FROM {_sql_name(view)} LIMIT 10"
    return md.code(f"sluice query {shlex.quote(environment)} {shlex.quote(sql)}")


def _sql_name(name: str) -> str:
    """``schema.table`` for Spark SQL, quoting any part that is not a plain identifier."""
    parts = name.split(".")
    return ".".join(
        p if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p) else "`" + p.replace("`", "``") + "`"
        for p in parts
    )


def next_steps(facts: Facts) -> str:
    """The "Next steps" block: what applies now (nothing once the PR is merged or closed)."""
    build, gate, life = facts.build, facts.gate, facts.life
    if build is None or life is not None:
        return ""
    env = md.code(build.environment)
    items: list[str] = []
    if build.query_views:
        items.append(f"Query the PR's data: {query_line(build.environment, build.query_views[0])}")
        views = ", ".join(md.code(v) for v in build.query_views[:MAX_VIEWS])
        more = len(build.query_views) - MAX_VIEWS
        items.append(f"Views of {env}: {views}" + (f" and {more} more" if more > 0 else ""))
    if build.diff_models:
        example = md.code(f"/sluice diff {build.diff_models[0]} --where <SQL condition>")
        items.append(f"Compare a table again, on some rows: {example}")
    if build.failure is not None:
        items.append("Fix the failure and push, or comment `/sluice plan` to build again.")
    elif gate is not None and not gate.ok and build.changes_models:
        items.append(
            f"Approve: {_who(gate)} reviews this PR, or clicks **Approve this plan** on the "
            "`sluice/approval` check."
        )
    elif gate is not None and gate.ok and gate.into_prod and build.changes_models:
        items.append("Merge, or comment `/sluice deploy` to promote this plan to prod now.")
    items.append("Comment `/sluice plan` to rebuild, `/sluice help` for every command.")
    if build.checks_url:
        items.append(f"[The checks]({_url(build.checks_url)}) hold the full plan and table diffs.")
    return "#### Next steps\n\n" + "\n".join(f"- {item}" for item in items) + "\n"


def _url(url: str) -> str:
    """A link target the forge gave (never user text): only http(s), no spaces or parens."""
    return url if re.fullmatch(r"https?://[^\s()<>]+", url) else "#"


def compose(body: str, sections: Mapping[str, str], shown: Sequence[str]) -> str:
    """``body`` with its headline, verdict lines, ``shown`` sections and next steps made
    true to the facts in ``sections``; a body without placeholders (a progress comment, an
    older one) gets the ``shown`` sections under its headline."""
    facts = Facts.of(sections)
    lines = body.split("\n")
    at = next((i for i, line in enumerate(lines) if line.startswith("### ")), None)
    if facts.build is not None and VERDICT in lines and at is not None:
        icon, words = headline(facts)
        project = f" · {md.code(facts.build.project)}" if facts.build.project else ""
        lines[at] = f"### {icon} Sluice{project}: {words}"
        lines_text = "\n".join(lines)
        # The next steps right under the verdict and its sections, where a reader looks
        # first (a body written before they moved has its placeholder at the bottom).
        steps = next_steps(facts).rstrip("\n")
        verdict = "\n\n".join(x for x in [*verdict_lines(facts), *shown, steps] if x)
        lines_text = lines_text.replace(VERDICT, verdict, 1)
        lines_text = lines_text.replace(f"\n{NEXT}\n\n", "\n", 1).replace(NEXT, "", 1)
        return _checks(lines_text, keep=facts.life is None)
    if not shown:
        return body
    cut = at + 1 if at is not None else len(lines)
    return "\n".join([*lines[:cut], "", "\n\n".join(shown), *lines[cut:]])


def _checks(text: str, *, keep: bool) -> str:
    """``text`` without the markers around its checks table, and without the table too
    unless ``keep`` (the head's checks say nothing more once the PR is merged or closed)."""
    start, end = text.find(CHECKS_FROM), text.find(CHECKS_TO)
    if start < 0 or end < start:
        return text
    inner = text[start + len(CHECKS_FROM) : end].strip("\n")
    tail = text[end + len(CHECKS_TO) :].lstrip("\n")
    head = text[:start].rstrip("\n")
    middle = f"\n\n{inner}\n\n" if keep and inner else "\n\n"
    return head + middle + tail
