"""Policies as code: rules over a plan, kept on the prod branch in ``policies/*.yaml``.

A policy is a name, a description, a level and a rule written in CEL (Google's Common
Expression Language: no I/O, no loops beyond its macros over the facts' lists). The rule
says what a plan must satisfy; it sees the plan as facts (:mod:`.facts`). Levels:
``advisory`` (shown), ``soft`` (blocks until one of ``override_by`` overrides it for that
plan), ``hard`` (blocks). A policy that cannot be read or evaluated blocks, naming its
file and line (fail closed).

- :mod:`.load`: the files' text to :class:`~.load.Policy` values (errors with file:line);
- :mod:`.cel`: the one user of cel-python: a rule compiled, bounded and evaluated;
- :mod:`.facts`: a plan (and who proposes it, what files it changes) as the rules see it;
- :mod:`.verdict`: policies evaluated on facts, one :class:`~.verdict.Verdict` each.

>>> from sluice.core.policy.load import parse_policy
>>> from sluice.core.policy.verdict import evaluate
>>> policy = parse_policy("policies/no_full.yaml", '''
... name: no-big-full
... description: No FULL model over 100 GB.
... level: hard
... rule: plan.models.all(m, m.kind != "FULL" || m.estimated_bytes <= 100 * 1000 * 1000 * 1000)
... ''')
>>> facts = {"plan": {"models": [{"kind": "FULL", "estimated_bytes": 2 * 10**11}]}}
>>> [(v.policy.name, v.outcome) for v in evaluate([policy], facts)]
[('no-big-full', 'fail')]
"""
