"""A policy's rule in CEL, compiled and evaluated (the only user of cel-python).

A rule is bounded before it runs: at most :data:`MAX_CHARS` characters and at most
:data:`MAX_NESTING` macros over lists (``all``, ``exists``, ``exists_one``, ``map``,
``filter``) inside one another; and when it runs, the facts' longest list raised to that
nesting may be at most :data:`MAX_STEPS` (a rule over every pair of 3,000 models would be
9 million steps of a tree-walking interpreter); the longest list literal the rule writes
counts as a list too (refused at load when it alone is over the bound). CEL itself has no
I/O, no assignment and no loop but those macros; what a rule builds beyond that
(concatenations, ``map`` results) is bounded by a clock: an evaluation taking over
:data:`MAX_SECONDS` stops with an error naming the policy's file and line (fail closed).

>>> rule = compile_rule("plan.models.exists(m, m.change == 'breaking')", "p.yaml", 3)
>>> rule.evaluate({"plan": {"models": [{"change": "breaking"}]}})
True
>>> compile_rule("1 +", "p.yaml", 3)
Traceback (most recent call last):
...
sluice.core.errors.ConfigError: p.yaml:3: the rule is not valid CEL: ...
"""

from __future__ import annotations

import datetime as dt
import functools
import time
from dataclasses import dataclass
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, Evaluator
from lark import Tree

from sluice.core.errors import ConfigError, SluiceError

MAX_CHARS = 4_000
"""Longest rule, in characters."""
MAX_NESTING = 2
"""Most list macros nested inside one another."""
MAX_STEPS = 2_500
"""Most steps a rule may take: the longest list in the facts (or written in the rule)
raised to its nesting (cel-python takes about 150 us a nested step: well under a second)."""
MAX_SECONDS = 1.0
"""Longest one evaluation of a rule may run before it stops with an error (blocks)."""
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})


@functools.cache
def _environment() -> celpy.Environment:
    """CEL's environment, made when the first rule is compiled: making it builds
    cel-python's parser (about 0.25 s of CPU), which a process that compiles no rule (the
    service starting, a command that reads no policy) need not pay on import."""
    return celpy.Environment()


class PolicyError(SluiceError):
    """A policy that cannot be evaluated on these facts (it then blocks: fail closed)."""


@dataclass(frozen=True)
class Rule:
    """A compiled rule, and where it was written."""

    text: str
    path: str
    line: int | None
    nesting: int
    _program: Any
    literal: int = 0  # the longest list literal the rule writes

    def evaluate(self, facts: dict[str, Any]) -> bool:
        """Whether the facts satisfy the rule.

        Raises:
            PolicyError: a fact it names is missing or of another type, its result is
                not a boolean, it would take more than :data:`MAX_STEPS` steps, or it ran
                for more than :data:`MAX_SECONDS`.
        """
        longest = max(_longest_list(facts), self.literal)
        if self.nesting and longest**self.nesting > MAX_STEPS:
            raise PolicyError(
                f"the rule nests {self.nesting} list macros over a list of {longest} items: "
                f"{longest}^{self.nesting} steps, over the {MAX_STEPS:,} a rule may take",
                path=self.path,
                line=self.line,
                hint="nest fewer macros (a fact such as `m.reads_tags` often replaces an "
                "inner exists)",
            )
        runner = self._program
        evaluator = _Clocked(runner.ast, runner.new_activation())
        evaluator.deadline = time.monotonic() + MAX_SECONDS
        context: Any = json_to_cel(_plain(facts))
        try:
            result = evaluator.evaluate(context)
        except _OutOfTime:
            raise PolicyError(
                f"the rule ran for over {MAX_SECONDS:g} s and was stopped",
                path=self.path,
                line=self.line,
                hint="nest fewer macros, over shorter lists",
            ) from None
        except CELEvalError as exc:
            raise _eval_error(self, exc) from None
        except (TypeError, ValueError, KeyError, RecursionError) as exc:
            raise PolicyError(
                f"the rule could not be evaluated: {exc}", path=self.path, line=self.line
            ) from None
        if isinstance(result, CELEvalError):
            raise _eval_error(self, result)
        if not isinstance(result, celtypes.BoolType):
            raise PolicyError(
                f"the rule gave {type(result).__name__.removesuffix('Type').lower()} "
                f"{str(result)[:80]!r}, not true or false",
                path=self.path,
                line=self.line,
                hint="a rule is a condition the plan must satisfy, e.g. `plan.added.size() < 10`",
            )
        return bool(result)


def compile_rule(text: str, path: str, line: int | None) -> Rule:
    """``text`` compiled as a rule written at ``path``:``line``.

    Raises:
        ConfigError: it is too long, not valid CEL, or nests too many macros.
    """
    if len(text) > MAX_CHARS:
        raise ConfigError(
            f"the rule is {len(text):,} characters long, over the {MAX_CHARS:,} allowed",
            path=path,
            line=line,
            hint="split it into several policies",
        )
    try:
        ast = _environment().compile(text)
    except CELParseError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "syntax error"
        raise ConfigError(
            f"the rule is not valid CEL: {first}",
            path=path,
            line=line,
            hint="see https://github.com/google/cel-spec/blob/master/doc/langdef.md",
        ) from None
    except RecursionError:
        raise ConfigError("the rule nests too deeply", path=path, line=line) from None
    nesting = _nesting(ast)
    if nesting > MAX_NESTING:
        raise ConfigError(
            f"the rule nests {nesting} list macros (all, exists, map, filter) inside one "
            f"another; at most {MAX_NESTING} are allowed",
            path=path,
            line=line,
            hint="a fact such as `m.reads_tags` often replaces an inner macro",
        )
    literal = _longest_literal(ast)
    if nesting and literal**nesting > MAX_STEPS:
        raise ConfigError(
            f"the rule nests {nesting} list macros and writes a list of {literal} items: "
            f"{literal}^{nesting} steps, over the {MAX_STEPS:,} a rule may take",
            path=path,
            line=line,
            hint="write shorter lists, or nest fewer macros",
        )
    return Rule(text, path, line, nesting, _environment().program(ast), literal)


class _OutOfTime(Exception):
    """An evaluation ran past its deadline."""


class _Clocked(Evaluator):
    """cel-python's evaluator, stopping once past ``deadline`` (its macros' too)."""

    deadline = 0.0

    def visit(self, tree: Tree[Any]) -> Any:
        if time.monotonic() > self.deadline:
            raise _OutOfTime
        return super().visit(tree)

    def sub_evaluator(self, ast: Tree[Any]) -> Evaluator:
        sub = _Clocked(ast, activation=self.activation)
        sub.deadline = self.deadline
        return sub


def _longest_literal(tree: Tree[Any]) -> int:
    """The most items of a list literal in ``tree``."""
    longest, stack = 0, [tree]
    while stack:
        node = stack.pop()
        if node.data == "list_lit":
            for child in node.children:
                if isinstance(child, Tree) and child.data == "exprlist":
                    longest = max(longest, len(child.children))
        stack.extend(child for child in node.children if isinstance(child, Tree))
    return longest


def _nesting(tree: Tree[Any]) -> int:
    """The most list macros nested inside one another in ``tree``."""
    deepest = 0
    stack: list[tuple[Tree[Any], int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if node.data == "member_dot_arg" and any(
            getattr(child, "value", None) in _MACROS for child in node.children
        ):
            depth += 1
            deepest = max(deepest, depth)
        stack.extend((child, depth) for child in node.children if isinstance(child, Tree))
    return deepest


def _longest_list(value: Any) -> int:
    longest, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            longest = max(longest, len(item))
            stack.extend(item)
    return longest


def _plain(value: Any) -> Any:
    """Facts as JSON values for cel-python: tuples as lists; times as RFC 3339 text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return value


def _eval_error(rule: Rule, exc: CELEvalError) -> PolicyError:
    what = exc.args[0] if exc.args else str(exc)
    hint = None
    if "no such member" in str(what) or "no such key" in str(what):
        hint = "`sluice policy facts` lists every fact a rule can use; check the spelling"
    return PolicyError(
        f"the rule could not be evaluated: {what}", path=rule.path, line=rule.line, hint=hint
    )
