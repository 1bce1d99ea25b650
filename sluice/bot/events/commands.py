"""Pull-request comments -> Sluice commands (pure).

:func:`~sluice.bot.events.command_line.command_line` finds the line that holds a command (the
rule of where a ``/sluice`` line counts is there); :func:`parse_line` reads its arguments.
Who may run
commands (write permission) is checked by the flow through the forge, not here.
Replies quote what people wrote only as code spans (:func:`sluice.core.markdown.code`)
and name them through :func:`sluice.core.markdown.mention`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Literal

from sluice.bot.events.command_line import PREFIX, command_line
from sluice.core import markdown as md
from sluice.core.errors import SluiceError

WHERE_LIMIT = 2000
"""Longest ``--where`` text accepted, in characters."""
SCAN_LIMIT = 65_536
"""Characters of a comment read for a command (GitHub's own limit on a comment)."""
QUOTE_LIMIT = 80
"""Longest text of a user's that a reply quotes, in characters."""
_NESTING = 32
"""Quotes and list items nested deeper than this hide the rest of a comment."""

CommandName = Literal["plan", "deploy", "diff", "rollback", "override", "help"]

USAGE: dict[str, str] = {
    "plan": "`/sluice plan`",
    "deploy": "`/sluice deploy`",
    "diff": "`/sluice diff schema.table [--where SQL condition]`",
    "rollback": "`/sluice rollback [plan id]`",
    "override": "`/sluice override POLICY reason...`",
    "help": "`/sluice help`",
}

HELP = """\
**Sluice commands.** Write one on a line of its own in a comment on this pull request, \
best after a blank line. Only users with write permission on the repository may run them; \
commands in code, quotes, lists or HTML are ignored, and editing a comment does not run it \
again.

| Command | What it does |
|---|---|
| `/sluice plan` | Plan this pull request again and rebuild its environment (also starts \
a pull request from a fork). |
| `/sluice deploy` | Promote this pull request's plan to prod now, when the \
`sluice/approval` check passes; then merge the pull request if `merge_method` is set. |
| `/sluice diff schema.table [--where SQL condition]` | Compare a model's table in this \
pull request's environment with prod, optionally only the rows matching the condition, \
e.g. `/sluice diff sales.orders --where order_date >= '2024-01-01'`. |
| `/sluice rollback [plan id]` | On a merged pull request: point prod's views back at \
the tables of its plan before the current one (or of the plan named), by virtual update: \
no data is computed. Only a required approver of the gate may run it. |
| `/sluice override POLICY reason...` | Lift a soft policy that fails on this pull \
request's plan, for that plan only (a push that changes the plan voids it); only someone \
the policy's `override_by` names may, and the reason goes to the audit log. |
| `/sluice help` | Show this help. |
"""

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_MODEL = re.compile(rf"^{_IDENT}\.{_IDENT}$")
_PLAN_ID = re.compile(r"^[0-9a-fA-F]{7,64}$")
_WHERE = re.compile(r"(?:^|\s)--where(?:=|\s+|$)")


_PLAIN: dict[str, CommandName] = {"plan": "plan", "deploy": "deploy", "help": "help"}


class CommandError(SluiceError):
    """A command with bad arguments; ``message`` is the command's usage line and
    ``hint`` what was wrong (anything of the user's in it quoted as a code span)."""


@dataclass(frozen=True)
class Command:
    """A parsed ``/sluice`` command.

    Attributes:
        name: ``plan``, ``deploy``, ``diff``, ``rollback``, ``override`` or ``help``.
        model: ``diff`` only: the model, ``schema.table`` lower-cased.
        where: ``diff`` only: the SQL condition after ``--where``, as written (without
            enclosing quotes); the table diff parses it.
        unknown: For a ``help`` the user did not ask for: the subcommand that was not
            recognised (``""`` for a bare ``/sluice``), so the reply can say so.
    """

    name: CommandName
    model: str | None = None
    where: str | None = None
    unknown: str | None = None
    plan: str | None = None
    """``rollback`` only: the plan id (or its first 7+ hex digits) to go back to."""
    policy: str | None = None
    """``override`` only: the policy's name."""
    reason: str | None = None
    """``override`` only: why, as written (on one line)."""


def parse_command(body: str) -> Command | None:
    """The command in a PR comment, or None when the comment holds none.

    Raises:
        CommandError: the command's arguments are wrong (the message is its usage).
    """
    line = command_line(body)
    return None if line is None else parse_line(line)


def parse_line(line: str) -> Command:
    """The command on a command line (from :func:`command_line`).

    Raises:
        CommandError: the command's arguments are wrong (the message is its usage).
    """
    rest = line.strip()[len(PREFIX) :].strip()
    if not rest:
        return Command("help", unknown="")
    sub, *more = rest.split(None, 1)
    args = more[0].strip() if more else ""
    name = sub.lower()
    if name == "diff":
        return _diff(args)
    if name == "rollback":
        return _rollback(args)
    if name == "override":
        return _override(args)
    if name in _PLAIN:
        if args:
            raise CommandError(USAGE[name], hint=f"`/sluice {name}` takes no arguments")
        return Command(_PLAIN[name])
    return Command("help", unknown=sub)


def _diff(args: str) -> Command:
    usage = USAGE["diff"]
    found = _WHERE.search(args)
    head = args[: found.start()] if found else args
    where: str | None = None
    if found:
        where = _unquote(args[found.end() :].strip())
        if not where:
            raise CommandError(usage, hint="`--where` needs a SQL condition after it")
        if len(where) > WHERE_LIMIT:
            raise CommandError(
                usage,
                hint=f"the `--where` condition is {len(where)} characters; at most "
                f"{WHERE_LIMIT} are accepted",
            )
    try:
        words = shlex.split(head)
    except ValueError as exc:
        raise CommandError(usage, hint=f"cannot read the arguments: {exc}") from None
    options = [w for w in words if w.startswith("-")]
    if options:
        raise CommandError(usage, hint=f"unknown option {md.code(options[0], QUOTE_LIMIT)}")
    if len(words) != 1:
        hint = "name the model to compare" if not words else "name exactly one model"
        raise CommandError(usage, hint=hint)
    model = words[0]
    if not _MODEL.match(model):
        raise CommandError(
            usage,
            hint=f"{md.code(model, QUOTE_LIMIT)} is not a model name: write it as schema.table "
            "(letters, digits and underscores)",
        )
    return Command("diff", model=model.lower(), where=where)


def _rollback(args: str) -> Command:
    words = args.split()
    if not words:
        return Command("rollback")
    if len(words) > 1 or not _PLAN_ID.match(words[0]):
        raise CommandError(
            USAGE["rollback"],
            hint=f"{md.code(args, QUOTE_LIMIT)} is not a plan id: give the id of one plan (7 "
            "or more of its hex digits), as the comment's footer or `sluice rollback --list` "
            "shows it, or nothing for the plan before the current one",
        )
    return Command("rollback", plan=words[0].lower())


REASON_LIMIT = 300
"""Longest override reason accepted, in characters (an audit row's detail)."""
_POLICY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def _override(args: str) -> Command:
    usage = USAGE["override"]
    words = args.split(None, 1)
    if not words:
        raise CommandError(usage, hint="name the policy to override, then say why")
    name, reason = words[0], (words[1].strip() if len(words) > 1 else "")
    if not _POLICY.match(name):
        raise CommandError(
            usage,
            hint=f"{md.code(name, QUOTE_LIMIT)} is not a policy name (letters, digits, - and "
            "_, as its file's `name:` says)",
        )
    if not reason:
        raise CommandError(usage, hint="say why after the policy's name: the audit log keeps it")
    if len(reason) > REASON_LIMIT:
        raise CommandError(
            usage, hint=f"the reason is {len(reason)} characters; at most {REASON_LIMIT}"
        )
    return Command("override", policy=name, reason=reason)


def _unquote(text: str) -> str:
    """Drop one pair of quotes around the whole condition (quotes are optional)."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in {"'", '"'}:
        inner = text[1:-1]
        if text[0] not in inner:  # `'a' = 'b'` is a condition, not a quoted one
            return inner.strip()
    return text
