"""The settings in force, attacked again (red team, settings round 2): a config.yaml that
renders differently for each reader or each render, an approval stamped again after the
pin moved, the Action's override smuggled out, a prod branch that changes after the first
read. Each test is the attack and what Sluice does now."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.entry.action import ActionError, WorkspaceForge
from sluice.bot.flow import trust
from sluice.bot.flow.job import Job
from sluice.bot.forge.memory import MemoryForge
from sluice.core.errors import ConfigError
from sluice.core.spark.scripted import Warehouse
from tests.helpers.cases import record_prod
from tests.security.github_bot import KEY, OWNER, PREAMBLE, A, B, Bot, C, D, merged, opened, review

GATE = "project: jaffle\ngate:\n  required_approvers:\n    users: [bob]\n"


def _config(section: str) -> str:
    return PREAMBLE + "sluice:\n" + section


def test_a_config_that_reads_who_renders_it_reads_the_same_for_every_reader() -> None:
    # `{{ self }}` names the template: it was `config.yaml` for a commit's tree and
    # `main:config.yaml` for the prod branch, so a gate shown to the PR build and the
    # promotion was absent from the settings in force.
    text = _config(
        "  project: jaffle\n"
        "{% if ':' not in (self | string) %}  gate: {required_approvers: {users: [bob]}}"
        "{% endif %}\n"
    )
    tree = trust.parse(trust.Source.of_config(text, "config.yaml"))
    branch = trust.parse(trust.Source("config.yaml", text, "sluice.yaml", None, where="main"))
    assert tree.digest == branch.digest


def test_a_set_whose_order_would_change_from_render_to_render_is_refused() -> None:
    # A set's order follows the rendering process's hash seed.
    text = _config(
        "  project: jaffle\n  gate:\n    required_approvers:\n"
        "      users: {{ (({'bob': 0, 'carol': 0}.keys() - {}.keys()) | list)[:1] }}\n"
    )
    with pytest.raises(ConfigError, match="has no order a template can rely on"):
        trust.parse(trust.Source.of_config(text, "config.yaml"))


def test_the_pin_is_the_settings_as_parsed_never_a_text_rendered_again(tmp_path: Path) -> None:
    github = MemoryForge(OWNER, name="github")
    bot = Bot(tmp_path, github)
    try:
        # Renders fine on every read of a commit or a branch; would fail if rendered under
        # another name (as a pin once was): now nothing renders the pin at all.
        text = _config(
            "  project: jaffle\n  gate:\n    required_approvers:\n      users: [bob]\n"
            "{% if (self | string).count(':') > 0 %}{{ no_such_thing }}{% endif %}\n"
        )
        bot.commit(C, text)
        github.refs["main"] = C
        first = trust.for_repository(Job.start(bot.deps, bot.forge()))
        pinned = bot.ledger.settings_in_force(KEY)
        assert pinned is not None and pinned.file == trust.PINNED_FILE
        again = trust.for_repository(Job.start(bot.deps, bot.forge()))
        assert again.digest == first.digest and again.gate.required_approvers.users == ("bob",)
    finally:
        bot.close()


@pytest.fixture
def timed(tmp_path: Path) -> Iterator[tuple[Bot, list[int]]]:
    github = MemoryForge(OWNER, name="github")
    github.roles.update({"alice": "write", "bob": "write", "carol": "admin"})
    made = Bot(tmp_path, github, runner_for=Warehouse().runner)
    clock = [1_000]
    object.__setattr__(made.deps, "clock", lambda: clock[0])
    src = made.commit(C, PREAMBLE, files={"sluice.yaml": GATE})
    github.refs["main"] = C
    record_prod(src, made.url, 1_000)
    yield made, clock
    made.close()


def test_an_approval_given_before_the_pin_stays_older_than_the_pin(
    timed: tuple[Bot, list[int]],
) -> None:
    bot, clock = timed
    weak = GATE + "allowed_paths: ['/etc/*', '/etc/**']\n"
    strict = GATE + "table_ttl_days: 3\n"
    trust.for_repository(Job.start(bot.deps, bot.forge()))  # pinned at t=1000
    clock[0] = 2_000  # bob approves PR 3 (the weaker settings); it stays open
    bot.commit(A, PREAMBLE, files={"sluice.yaml": weak}, parents=(C,))
    bot.pull(3, A)
    bot.deliver("pull_request", opened(3, A))
    bot.github.add_review(3, "bob", "APPROVED", A)
    bot.deliver("pull_request_review", review(3, "bob", A, 5001))
    assert bot.approval(A).conclusion == "success"
    clock[0] = 3_000  # PR 5 (stricter) approved and promoted: the pin moves
    bot.commit(B, PREAMBLE, files={"sluice.yaml": strict}, parents=(C,))
    bot.pull(5, B)
    bot.deliver("pull_request", opened(5, B))
    bot.github.add_review(5, "bob", "APPROVED", B)
    bot.deliver("pull_request_review", review(5, "bob", B, 5002))
    bot.github.refs["main"] = B
    bot.github.close_pull(5, merged=True)
    bot.deliver("pull_request", merged(5, B, B))
    assert bot.checks_on(B)["sluice/deploy"].conclusion == "success"
    clock[0] = 4_000  # carol pushes the weaker settings past the gate
    bot.commit(D, PREAMBLE, files={"sluice.yaml": weak}, parents=(B,))
    bot.github.refs["main"] = D
    clock[0] = 5_000  # the gate of PR 3 evaluated again (bob edits his review of t=2000)
    bot.deliver("pull_request_review", review(3, "bob", A, 5003))
    # PR 3's plan was made under the settings before the pin moved: its gate asks for a
    # new plan (red team, approval round 2) ...
    assert bot.approval(A).title == "The settings in force changed: plan again"
    after = trust.for_repository(Job.start(bot.deps, bot.forge()))
    # ... and what it approved is a change from settings no longer in force: void.
    assert after.sluice.allowed_paths == () and after.note is not None


def test_under_a_gate_of_owners_a_settings_change_needs_every_owner(tmp_path: Path) -> None:
    # Red team, settings round 3: the settings item has no owner, so a PR changing only
    # sluice.yaml (dropping the gate) passed a gate of owners with nobody's approval.
    github = MemoryForge(OWNER, name="github")
    github.roles.update({"alice": "write", "bob": "write"})
    bot = Bot(tmp_path, github, runner_for=Warehouse().runner)
    try:
        owners = "project: jaffle\ngate:\n  owners_must_approve: direct\n"
        src = bot.commit(C, PREAMBLE, files={"sluice.yaml": owners})
        github.refs["main"] = C
        record_prod(src, bot.url, 1_000)
        bot.commit(A, PREAMBLE, files={"sluice.yaml": "project: jaffle\n"}, parents=(C,))
        bot.pull(7, A)
        bot.deliver("pull_request", opened(7, A))
        check = bot.approval(A)
        assert check.conclusion != "success", check.summary
        assert "Owners still to approve" in check.summary
    finally:
        bot.close()


OVERRIDE = {"gate": {"required_approvers": {"teams": ["octo/security"], "count": 1}}}


def _overridden(tmp_path: Path, config: str) -> trust.Parsed:
    inner = MemoryForge(OWNER, name="github")
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "config.yaml").write_text(config)
    inner.commit_folder(C, src, branch="main")
    forge = WorkspaceForge(inner, tmp_path, None, "config.yaml", OVERRIDE)
    parsed, _branch, _sha = trust.read_prod(forge, "main", "config.yaml")  # type: ignore[arg-type]
    return parsed


def test_the_actions_override_is_applied_or_the_run_refused(tmp_path: Path) -> None:
    plain = _overridden(tmp_path, _config("  project: jaffle\n"))
    assert plain.gate.required_approvers.teams == ("octo/security",)
    # Values that render to `{#` and `#}` would comment the override out when the merged
    # text is rendered again; a text that cannot be rendered would drop it.
    smuggled = (
        "variables:\n  o: \"{{ '{#' }}\"\nsluice:\n  project: jaffle\n  spark:\n    conf:\n"
        "      x: \"{{ '#}' }}\"\nmodel_defaults:\n  dialect: spark\n"
    )
    with pytest.raises(ActionError, match="Jinja markers"):
        _overridden(tmp_path, smuggled)
    with pytest.raises(ActionError, match="cannot be merged"):
        _overridden(tmp_path, _config("  project: jaffle\n{{ no_such_thing }}\n"))


def test_a_prod_branch_named_on_the_first_read_must_name_itself(tmp_path: Path) -> None:
    github = MemoryForge(OWNER, name="github")
    bot = Bot(tmp_path, github)
    try:
        bot.commit(C, PREAMBLE, files={"sluice.yaml": GATE + "deploy:\n  prod_branch: release\n"})
        github.refs["main"] = C
        bot.commit(D, PREAMBLE, files={"sluice.yaml": GATE})  # release names no branch
        github.refs["release"] = D
        with pytest.raises(ConfigError, match="the prod branch is ambiguous"):
            trust.for_repository(Job.start(bot.deps, bot.forge()))
        bot.github.write_file("release", "sluice.yaml", GATE + "deploy:\n  prod_branch: release\n")
        first = trust.for_repository(Job.start(bot.deps, bot.forge()))
        second = trust.for_repository(Job.start(bot.deps, bot.forge()))
        assert first.branch == second.branch == "release" and second.note is None
    finally:
        bot.close()
