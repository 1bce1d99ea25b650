"""Red team on policies as code in the service (issue 47): "the policies that judge a plan
are the prod branch's as in force, and nobody walks around them".

Each test is an attack by someone with write access (push to a PR, comment, approve) or
by a prod writer's careless file, on the in-memory forge and SQLite with no Spark
(tests/helpers/policy_world.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.flow import audit, policies, trust
from sluice.bot.flow.ledger import PinnedSettings
from sluice.core.errors import ConfigError
from sluice.core.policy.load import MAX_FILE_CHARS, MAX_POLICIES
from tests.helpers.policy_world import (
    HARD,
    KEY,
    NOW,
    POLICIES,
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
MAIN2 = "2" * 40


@pytest.fixture(scope="module")
def built() -> Built:
    """Prod with the policies of tests/helpers/policy_world.py, built once for the module
    (tests/helpers/kept_world.py)."""
    return {}


@pytest.fixture
def world(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A copy of its own of that prod."""
    made = copy_of(built, tmp_path_factory.mktemp)
    yield made
    made.close()


def outside_code(markdown: str) -> str:
    """``markdown`` without its fenced blocks and code spans (inert: GitHub renders
    nothing inside them)."""
    markdown = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1\s*$", "", markdown)
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", markdown)


def add_model(head: Path) -> None:
    (head / "models" / "extra.sql").write_text(
        "MODEL (name jaffle.extra, kind FULL);\nSELECT 1 AS one\n"
    )


# -- a PR's own policies never judge it; changing them is a settings change ---------------


def test_a_pr_that_rewrites_the_policies_is_judged_by_prods_and_the_change_needs_approval(
    world: World,
) -> None:
    def loosen(head: Path) -> None:
        edit_orders(head)
        (head / "policies" / "soft.yaml").write_text(SOFT.replace("!(", "true || !("))
        (head / "policies" / "allow.yaml").write_text(
            "name: allow\ndescription: d\nlevel: advisory\nrule: 'true'\n"
        )

    world.head(A, loosen)
    world.open(7, A)
    review = world.build(7)
    assert ("orders-need-finance", "fail", "") in review.policies  # prod's rule, not the PR's
    assert "allow" not in {name for name, _, _ in review.policies}
    check = world.check(A)
    assert check is not None and check.conclusion == "failure"
    # The change of the policies is the settings item its gate must approve.
    assert [name for name, _ in review.items if name == trust.SETTINGS_ITEM] == [
        trust.SETTINGS_ITEM
    ]


def test_a_pr_deleting_a_hard_policy_it_breaks_cannot_be_promoted_even_approved(
    world: World,
) -> None:
    def drop_hard(head: Path) -> None:
        (head / "policies" / "hard.yaml").unlink()
        add_model(head)

    world.head(A, drop_hard)
    world.open(7, A)
    review = world.build(7)
    assert ("no-new-models", "fail", "") in review.policies
    world.approve_all(7, A, review)  # every item, the settings change too
    outcome = world.promote(A, 7)
    assert not outcome.ok and "`no-new-models`" in outcome.summary
    # prod's settings in force did not move: the hard policy still stands.
    job = world.job()
    try:
        assert "policies/hard.yaml" in dict(trust.for_repository(job).policies)
    finally:
        job.close()


def test_a_policy_removed_on_prod_past_the_gate_stays_in_force(world: World) -> None:
    world.head(A, edit_orders)
    world.open(7, A)
    world.build(7)  # pins prod's settings, both policies in them
    files = files_of(world.prod)
    del files["policies/soft.yaml"]
    world.forge.commit(MAIN2, files, parents=(ROOT,), branch="main")  # an admin's push
    job = world.job()
    try:
        settings = trust.for_repository(job)
    finally:
        job.close()
    assert "policies/soft.yaml" in dict(settings.policies)
    assert settings.note is not None and "no `sluice/approval` gate approved" in settings.note


def test_approvals_and_overrides_under_old_policies_are_void_once_they_change(
    world: World,
) -> None:
    world.head(A, edit_orders)
    world.open(7, A)
    review = world.build(7)
    world.comment(7, "fin", "/sluice override orders-need-finance agreed")
    check = world.check(A)
    assert check is not None and check.conclusion == "success"
    # Another PR's change of the policies is promoted: the settings in force move.
    job = world.job()
    try:
        old = trust.for_repository(job)
        source = dict(old.policies)
        source["policies/hard.yaml"] = HARD.replace("No new model", "No new models")
        parsed = trust.parsed_settings(old.sluice, tuple(sorted(source.items())))
        trust.pin(world.ledger, KEY, MAIN2, parsed, "main", NOW + 1)
    finally:
        job.close()
    job = world.job()
    try:
        settings = trust.for_repository(job)
        assert settings.generation != review.generation
        judgement = policies.judgement_of(job, settings, review, 7)
    finally:
        job.close()
    assert judgement is not None and judgement.blocks
    assert all(row.outcome == "error" for row in judgement.rows)
    [reply] = world.comment(7, "fin", "/sluice override orders-need-finance again")
    assert "changed since this plan was made" in reply


# -- overrides: who, which level, which plan ------------------------------------------------


def test_an_override_by_a_writer_the_policy_does_not_name_is_refused(world: World) -> None:
    world.head(A, edit_orders)
    world.open(7, A)
    world.build(7)
    [reply] = world.comment(7, "eve", "/sluice override orders-need-finance trust me")
    assert reply == (
        "@eve you may not override `orders-need-finance`: its `override_by` names @octo/finance."
    )
    check = world.check(A)
    assert check is not None and check.conclusion == "failure"
    assert world.audit(audit.POLICY_OVERRIDE) == []
    [refused] = [e for e in world.audit(audit.REFUSAL) if e.outcome == "policy override refused"]
    assert refused.actor == "eve"


def test_the_author_named_by_the_policy_is_still_named_but_a_row_from_elsewhere_is_not(
    world: World,
) -> None:
    world.head(A, edit_orders)
    world.open(7, A)
    review = world.build(7)
    # A row nobody allowed could have written (a bug elsewhere, a hand edit): eve's.
    world.ledger.append(
        audit.Entry(NOW, KEY, audit.POLICY_OVERRIDE, "eve", audit.OVERRODE + "orders-need-finance" + policies.UNDER + review.generation,
                    ref="#7", plan_id=review.fingerprint, detail="x")
    )  # fmt: skip
    job = world.job()
    try:
        judgement = policies.judgement_of(job, trust.for_repository(job), review, 7)
    finally:
        job.close()
    assert judgement is not None and judgement.blocking == ["orders-need-finance"]


def test_a_hard_policy_cannot_be_overridden_even_by_an_admin(world: World) -> None:
    world.head(A, add_model)
    world.open(7, A)
    world.build(7)
    [reply] = world.comment(7, "carol", "/sluice override no-new-models it is fine")
    assert reply.startswith("@carol `no-new-models` is hard: only a soft policy can be overridden")
    check = world.check(A)
    assert check is not None and check.conclusion == "failure"
    assert world.audit(audit.POLICY_OVERRIDE) == []


def test_an_override_is_void_once_a_push_changes_the_plan(world: World) -> None:
    world.head(A, edit_orders)
    world.open(7, A)
    first = world.build(7)
    world.comment(7, "fin", "/sluice override orders-need-finance ok for this one")
    assert world.check(A).conclusion == "success"  # type: ignore[union-attr]

    def more(head: Path) -> None:
        edit_orders(head)
        path = head / "models" / "orders.sql"
        path.write_text(path.read_text().replace("SELECT", "SELECT 2 AS another_marker,", 1))

    world.head(B, more, parent=A)
    world.open(7, B)
    second = world.build(7)
    assert second.fingerprint != first.fingerprint
    check = world.check(B)
    assert check is not None and check.conclusion == "failure"
    [row] = world.audit(audit.POLICY_OVERRIDE)
    assert row.plan_id == first.fingerprint


def test_an_override_of_a_passing_policy_or_an_unknown_one_changes_nothing(world: World) -> None:
    world.head(A, add_model)  # orders-need-finance passes; no-new-models fails
    world.open(7, A)
    world.build(7)
    [reply] = world.comment(7, "fin", "/sluice override no-such-policy because")
    assert "no policy in force is called `no-such-policy`" in reply
    [reply] = world.comment(7, "fin", "/sluice override orders-need-finance just in case")
    assert reply == "@fin `orders-need-finance` passes on this plan: nothing to override."
    assert world.audit(audit.POLICY_OVERRIDE) == []


# -- hostile text and expensive rules --------------------------------------------------------


def test_a_policy_name_with_html_blocks_and_is_shown_escaped(tmp_path: Path) -> None:
    evil = "name: <img src=x onerror=alert(1)>\ndescription: d\nlevel: hard\nrule: 'true'\n"
    world = World(tmp_path, {"policies/evil.yaml": evil, "policies/soft.yaml": SOFT})
    try:
        world.head(A, edit_orders)
        world.open(7, A)
        world.build(7)
        check = world.check(A)
        assert check is not None and check.conclusion == "failure"
        assert check.title == "Policies could not be read"
        assert "policies/evil.yaml:1" in check.summary
        for text in (check.summary, check.text or "", world.forge.bot_comments(7)[0]):
            assert "<img" not in outside_code(text)
        assert "&lt;img" in check.summary
    finally:
        world.close()


def test_a_description_and_a_reason_with_markdown_are_escaped(tmp_path: Path) -> None:
    hostile = SOFT.replace(
        "A change to jaffle.orders needs the finance team's word.",
        "'</details><img src=x> @octo/everyone [x](http://e.vil)'",
    )
    world = World(tmp_path, {"policies/soft.yaml": hostile})
    try:
        world.head(A, edit_orders)
        world.open(7, A)
        world.build(7)
        [reply] = world.comment(
            7, "fin", "/sluice override orders-need-finance <b>ok</b> @octo/all [y](http://e.vil)"
        )
        check = world.check(A)
        assert check is not None and check.text is not None
        for text in (check.text, world.forge.bot_comments(7)[0], reply):
            shown = outside_code(text)
            assert "<img" not in shown and "<b>" not in shown and "[x](http://" not in shown
            assert "@octo/everyone" not in shown and "@octo/all" not in shown
        assert "&lt;b&gt;ok&lt;/b&gt;" in check.text
    finally:
        world.close()


def test_a_command_naming_a_policy_with_markdown_is_a_usage_error_quoted_as_code(
    world: World,
) -> None:
    world.head(A, edit_orders)
    world.open(7, A)
    world.build(7)
    [reply] = world.comment(7, "fin", "/sluice override <img/src=x> because")
    assert "is not a policy name" in reply
    assert "<img" not in outside_code(reply)


def test_an_expensive_rule_is_refused_at_load_and_blocks_naming_file_and_line(
    tmp_path: Path,
) -> None:
    nested = (
        "name: pairs\ndescription: d\nlevel: hard\nrule: >-\n  plan.models.all(a, plan.models."
        "all(b, plan.models.all(c, a.name != b.name || c.name != '')))\n"
    )
    world = World(tmp_path, {"policies/pairs.yaml": nested})
    try:
        world.head(A, edit_orders)
        world.open(7, A)
        world.build(7)
        check = world.check(A)
        assert check is not None and check.conclusion == "failure"
        assert "policies/pairs.yaml:4" in check.summary and "nests 3 list macros" in check.summary
    finally:
        world.close()


def test_a_missing_fact_blocks_naming_file_and_line(tmp_path: Path) -> None:
    typo = "name: typo\ndescription: d\nlevel: advisory\nrule: plan.nope.size() == 0\n"
    world = World(tmp_path, {"policies/typo.yaml": typo})
    try:
        world.head(A, edit_orders)
        world.open(7, A)
        review = world.build(7)
        [(name, outcome, error)] = review.policies
        assert (name, outcome) == ("typo", "error") and "policies/typo.yaml:4" in error
        check = world.check(A)
        assert check is not None and check.conclusion == "failure"  # even an advisory one
        assert check.text is not None and "could not be evaluated (blocks)" in check.text
    finally:
        world.close()


# -- bounds: a huge policies/ must not hang the service -------------------------------------


def test_too_many_policy_files_on_prod_are_refused_before_any_is_read(tmp_path: Path) -> None:
    many = {
        f"policies/p{i:03}.yaml": f"name: p{i}\ndescription: d\nlevel: hard\nrule: 'true'\n"
        for i in range(MAX_POLICIES + 1)
    }
    world = World(tmp_path, many)
    try:
        job = world.job()
        try:
            with pytest.raises(ConfigError, match=f"{MAX_POLICIES + 1} policy files"):
                trust.for_repository(job)
        finally:
            job.close()
        reads = [args for name, args in world.forge.calls if name == "read_file"]
        assert not any(str(args[1]).startswith("policies/") for args in reads)
    finally:
        world.close()


def test_a_huge_policy_file_on_prod_is_refused_by_its_listed_size_unread(
    tmp_path: Path,
) -> None:
    huge = "# " + "x" * (4 * MAX_FILE_CHARS + 10) + "\n" + HARD
    world = World(tmp_path, {"policies/huge.yaml": huge})
    try:
        job = world.job()
        try:
            with pytest.raises(ConfigError, match=r"policies/huge\.yaml: the policy file is"):
                trust.for_repository(job)
        finally:
            job.close()
        assert ("read_file", ("main", "policies/huge.yaml")) not in world.forge.calls
    finally:
        world.close()


def test_a_linked_policy_file_in_a_tree_is_refused(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "elsewhere.yaml").write_text(HARD)
    (tmp_path / "policies" / "hard.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    with pytest.raises(ConfigError, match="must be a regular file, not a link"):
        trust.tree_source(tmp_path, "config.yaml")


# -- the pin: policies are kept as read, and settings without any keep their digest --------


def test_settings_without_policies_keep_the_digest_they_had() -> None:
    parsed = trust.parse(trust.Source.of_config("sluice: {project: a}\n", "config.yaml"))
    assert parsed.digest == trust.digest(parsed.sluice, parsed.gate, parsed.deploy)
    assert "policies" not in json.loads(trust.pinned_text(parsed, "main"))


def test_the_pin_keeps_the_policies_as_read() -> None:
    source = trust.Source.of_config("sluice: {project: a}\n", "config.yaml")
    files = tuple(sorted(POLICIES.items()))
    parsed = trust.parse(trust.Source(**{**source.__dict__, "policies": files}))
    assert parsed.digest != trust.digest(parsed.sluice, parsed.gate, parsed.deploy)
    pinned = PinnedSettings("c" * 40, parsed.digest, trust.pinned_text(parsed, "main"),
                            trust.PINNED_FILE, NOW)  # fmt: skip
    again, branch = trust._from_pin(pinned, "config.yaml")
    assert (again.policies, again.digest, branch) == (files, parsed.digest, "main")


def test_an_override_on_one_pr_does_not_lift_another_pr_with_the_same_plan(
    world: World,
) -> None:
    world.head(A, edit_orders)
    world.open(7, A, author="alice")
    first = world.build(7)
    world.comment(7, "fin", "/sluice override orders-need-finance for alice's fix")
    assert world.check(A).conclusion == "success"  # type: ignore[union-attr]
    # eve opens the very same change as her own pull request.
    world.head(B, edit_orders)
    world.open(8, B, author="eve")
    second = world.build(8)
    assert second.fingerprint == first.fingerprint
    check = world.check(B)
    assert check is not None and check.conclusion == "failure"
    assert check.summary == "Blocked by `orders-need-finance`."


def test_a_pr_renaming_a_prod_models_owner_is_still_judged_as_prods_owner(
    tmp_path: Path,
) -> None:
    owned = (
        "name: finance-owned\ndescription: Finance's models change through finance.\n"
        "level: hard\nrule: '!plan.models.exists(m, m.owner == \"finance\")'\n"
    )
    world = World(tmp_path, {"policies/owned.yaml": owned})
    try:

        def take_over(head: Path) -> None:
            edit_orders(head)
            path = head / "models" / "orders.sql"
            path.write_text(path.read_text().replace("owner finance,", "owner alice,"))

        world.head(A, take_over)
        world.open(7, A)
        review = world.build(7)
        assert review.policies == (("finance-owned", "fail", ""),)
    finally:
        world.close()
