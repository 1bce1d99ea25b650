"""sluice.yaml on the trusted side (issue 41; docs/security.md, "Who decides"): Sluice's
settings may live in a sluice.yaml beside config.yaml, and the prod branch's, as in force,
decide; a pull request's sluice.yaml is a change like its config.yaml's `sluice:` was.

Each test is an attack by someone with write access (or an admin) and what Sluice says.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.flow import trust
from sluice.bot.flow.job import Job
from sluice.bot.flow.ledger import Ledger
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.present import checks
from sluice.core.errors import ConfigError
from tests.helpers.cases import record_prod
from tests.security.github_bot import (
    KEY,
    NOW,
    OWNER,
    PREAMBLE,
    A,
    B,
    Bot,
    C,
    D,
    merged,
    opened,
    review,
)

GATE = "project: jaffle\ngate:\n  required_approvers:\n    users: [bob]\n"
UNGATED = "project: jaffle\n"


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    github = MemoryForge(OWNER, name="github")
    github.roles.update({"alice": "write", "bob": "write", "carol": "admin"})
    made = Bot(tmp_path, github)
    made.commit(C, PREAMBLE, files={"sluice.yaml": GATE})  # prod: the gate in sluice.yaml
    github.refs["main"] = C
    yield made
    made.close()


def _in_force(bot: Bot) -> trust.Settings:
    return trust.for_repository(Job.start(bot.deps, bot.forge()))


def test_the_prod_branchs_sluice_yaml_is_the_gate(bot: Bot) -> None:
    settings = _in_force(bot)
    assert settings.gate.required_approvers.users == ("bob",)
    pinned = bot.ledger.settings_in_force(KEY)
    # Kept as parsed, never as a text to read again (red team, settings round 2).
    assert pinned is not None and pinned.file == trust.PINNED_FILE
    kept = json.loads(pinned.text)
    assert kept["branch"] == "main" and kept["sluice"]["project"] == "jaffle"
    assert kept["sluice"]["gate"]["required_approvers"]["users"] == ["bob"]


def test_a_pr_that_drops_the_gate_in_its_sluice_yaml_is_still_gated(bot: Bot) -> None:
    bot.commit(A, PREAMBLE, files={"sluice.yaml": UNGATED}, parents=(C,))
    bot.pull(7, A, author="alice")
    bot.deliver("pull_request", opened(7, A))
    body = "\n".join(bot.github.bot_comments(7))
    assert "This PR changes Sluice's settings in `sluice.yaml`" in body
    assert "Its settings ask for no approval" in body
    # alice approves her own PR's plan as best she can: bob's approval is still required.
    bot.github.add_review(7, "alice", "APPROVED", A)
    bot.deliver("pull_request_review", review(7, "alice", A, 5001))
    assert bot.approval(A).conclusion != "success"
    assert _in_force(bot).gate.required_approvers.users == ("bob",)


def test_a_pr_that_deletes_sluice_yaml_changes_the_settings(bot: Bot) -> None:
    # Deleting the file is dropping the gate: a settings change to approve, not "no file".
    bot.commit(A, PREAMBLE, parents=(C,))
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    body = "\n".join(bot.github.bot_comments(7))
    assert "This PR changes Sluice's settings in `config.yaml`" in body
    assert "Its settings ask for no approval" in body


def test_moving_the_section_to_sluice_yaml_unchanged_is_no_settings_change(
    bot: Bot, tmp_path: Path
) -> None:
    section = PREAMBLE + "sluice:\n" + "".join(f"  {line}\n" for line in GATE.splitlines())
    same = trust.parse(trust.Source.of_config(section, "config.yaml"))
    moved = trust.parse(trust.Source("config.yaml", PREAMBLE, "sluice.yaml", GATE))
    assert same.digest == moved.digest
    bot.commit(A, section, parents=(C,))  # back into config.yaml, same settings
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    assert "changes Sluice's settings" not in "\n".join(bot.github.bot_comments(7))


def test_a_pr_with_settings_in_both_places_does_not_load(bot: Bot) -> None:
    bot.commit(A, PREAMBLE + "sluice:\n  project: jaffle\n", files={"sluice.yaml": UNGATED})
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    assert not bot.runner.projects  # nothing ran
    env = bot.checks_on(A)[checks.ENVIRONMENT]
    assert env.conclusion == "failure" and env.title == checks.PROJECT_DOES_NOT_LOAD
    assert "both sluice.yaml and the `sluice:` section of config.yaml" in env.summary


def test_a_prod_branch_with_settings_in_both_places_runs_nothing(bot: Bot) -> None:
    # An admin pushes a second, ungated copy: which one counts? Neither: refused, and
    # nothing is built on settings Sluice cannot decide.
    bot.commit(D, PREAMBLE + "sluice:\n  project: jaffle\n", files={"sluice.yaml": GATE})
    bot.github.refs["main"] = D
    bot.commit(A, PREAMBLE, files={"sluice.yaml": GATE}, parents=(D,))
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    assert not bot.runner.projects
    env = bot.checks_on(A)[checks.ENVIRONMENT]
    assert env.conclusion == "failure" and env.title == checks.SETTINGS_INVALID
    assert "main:config.yaml:7: Sluice's settings are in both sluice.yaml" in env.summary


def test_a_push_past_the_gate_to_sluice_yaml_is_not_in_force(bot: Bot) -> None:
    _in_force(bot)  # pinned: bob must approve
    bot.github.write_file("main", "sluice.yaml", UNGATED)  # an admin's push
    settings = _in_force(bot)
    assert settings.gate.required_approvers.users == ("bob",)
    assert settings.note is not None and "changed in commits no" in settings.note


def test_a_sluice_yml_added_beside_sluice_yaml_on_prod_is_refused(bot: Bot) -> None:
    _in_force(bot)
    bot.github.write_file("main", "sluice.yml", UNGATED)
    with pytest.raises(Exception, match=r"both sluice\.yaml and sluice\.yml"):
        _in_force(bot)


def test_a_config_py_project_holds_a_gate_in_sluice_yaml(bot: Bot, tmp_path: Path) -> None:
    # A project configured in config.py had no place for a gate; sluice.yaml is one.
    config_py = (
        "from sqlmesh.core.config import Config, ModelDefaultsConfig\n"
        "config = Config(model_defaults=ModelDefaultsConfig(dialect='spark', "
        "start='2018-01-01', cron='@daily'), variables={'revenue_statuses': 'completed'})\n"
    )
    src = bot.commit(D, "", files={"sluice.yaml": GATE, "config.py": config_py})
    (src / "config.yaml").unlink()
    bot.github.commit_folder(D, src)
    bot.github.refs["main"] = D
    github = bot.github
    fresh = Bot(tmp_path / "fresh", github)
    try:
        settings = trust.for_repository(Job.start(fresh.deps, fresh.forge()))
        assert settings.gate.required_approvers.users == ("bob",)
    finally:
        fresh.close()


def test_a_promotion_moves_the_pin_to_sluice_yaml_and_a_legacy_pin_still_reads(
    bot: Bot, tmp_path: Path
) -> None:
    # Prod was pinned by a Sluice from before sluice.yaml (the file column NULL): its
    # text is a config.yaml's, and still governs.
    url = f"sqlite:///{tmp_path / 'legacy.db'}"
    legacy = Ledger(url)
    gated = PREAMBLE + "sluice:\n  project: jaffle\n  gate:\n    owners_must_approve: direct\n"
    digest = trust.parse(trust.Source.of_config(gated, "config.yaml")).digest
    legacy.pin_settings(KEY, C, digest, gated, "config.yaml", NOW, replace=True)
    legacy.close()
    with sqlite3.connect(tmp_path / "legacy.db") as conn:
        conn.execute("UPDATE sluice_prod_settings SET config_file = NULL")
    again = Ledger(url)
    try:
        pinned = again.settings_in_force(KEY)
        assert pinned is not None and pinned.file is None
        old = trust.parse(trust.Source.of_pin(pinned.file, pinned.text, "config.yaml"))
        assert old.digest == digest and old.gate.owners_must_approve == "direct"
    finally:
        again.close()
    # And a promotion of a commit whose settings are in sluice.yaml pins that file.
    forge = bot.forge()
    in_force = trust.for_repository(Job.start(bot.deps, forge))
    new = GATE.replace("[bob]", "[bob, carol]")
    parsed = trust.parse(trust.Source("config.yaml", PREAMBLE, "sluice.yaml", new))
    src = bot.commit(D, PREAMBLE, files={"sluice.yaml": new}, parents=(C,))
    bot.ledger.approve(KEY, 8, B, [in_force.change_to(parsed.digest)], ["bob"], NOW)  # type: ignore[list-item]
    bot.github.refs["main"] = D
    record_prod(src, bot.url, NOW)  # prod has D's models: nothing left but the settings
    bot.pull(8, B)
    bot.github.close_pull(8, merged=True)
    bot.deliver("pull_request", merged(8, B, D))
    deploy = bot.checks_on(D)["sluice/deploy"]
    assert deploy.conclusion == "success", deploy.summary
    pinned = bot.ledger.settings_in_force(KEY)
    assert pinned is not None and pinned[0] == D and pinned[1] == parsed.digest
    assert pinned.file == trust.PINNED_FILE
    assert json.loads(pinned.text)["sluice"]["gate"]["required_approvers"]["users"] == [
        "bob",
        "carol",
    ]


# -- red team, the sluice.yaml round ----------------------------------------------------

E = "e" * 40


def test_settings_read_the_same_whenever_they_are_read(bot: Bot) -> None:
    # A coin-flip gate (jinja2's `random`) made the settings approved, pinned and in
    # force differ from read to read. sluice.yaml is plain YAML; config.yaml's Jinja has
    # no `random`.
    flip = (
        "project: jaffle\ngate:\n  required_approvers:\n    users: {{ [['bob'], []] | random }}\n"
    )
    with pytest.raises(ConfigError, match="invalid YAML"):
        trust.parse(trust.Source("config.yaml", PREAMBLE, "sluice.yaml", flip))
    in_config = PREAMBLE + "sluice:\n" + "".join(f"  {line}\n" for line in flip.splitlines())
    with pytest.raises(ConfigError, match="random"):
        trust.parse(trust.Source.of_config(in_config, "config.yaml"))
    jinja_free = "project: \"{{ 'jaffle' }}\"\n"  # a text, never rendered
    with pytest.raises(ConfigError, match=r"sluice\.project"):
        trust.parse(trust.Source("config.yaml", PREAMBLE, "sluice.yaml", jinja_free))


def test_a_prod_branch_pushed_past_the_gate_is_not_followed(bot: Bot) -> None:
    # An admin adds deploy.prod_branch: scratch (an unprotected branch holding a copy of
    # prod's settings) to main. The prod branch in force is the pin's, and the redirect is
    # a change no gate approved.
    assert _in_force(bot).branch == "main"
    redirect = GATE + "deploy:\n  prod_branch: scratch\n"
    bot.commit(D, PREAMBLE, files={"sluice.yaml": redirect}, parents=(C,))
    bot.github.refs["main"] = D
    bot.commit(E, PREAMBLE, files={"sluice.yaml": GATE}, parents=(C,))
    bot.github.refs["scratch"] = E
    after = _in_force(bot)
    assert after.branch == "main" and after.deploy.prod_branch == "main"
    assert after.note is not None and "changed in commits no" in after.note
    bot.github.write_file("scratch", "sluice.yaml", UNGATED)
    assert _in_force(bot).branch == "main"


def test_settings_approved_once_and_replaced_since_do_not_come_back(bot: Bot) -> None:
    weak = trust.parse(trust.Source("config.yaml", PREAMBLE, "sluice.yaml", GATE))
    strong_text = (
        "project: jaffle\ngate:\n  required_approvers:\n    users: [bob, carol]\n    count: 2\n"
    )
    strong = trust.parse(trust.Source("config.yaml", PREAMBLE, "sluice.yaml", strong_text))
    first = _in_force(bot)  # pinned at C (the weaker gate)
    # The weaker settings were approved as a change from these once (a PR built then).
    bot.ledger.approve(
        KEY, 3, "3" * 40, [first.change_to(weak.digest) or ("-", "-")], ["bob"], NOW - 5
    )
    src = bot.commit(D, PREAMBLE, files={"sluice.yaml": strong_text}, parents=(C,))
    bot.ledger.approve(KEY, 8, B, [first.change_to(strong.digest)], ["bob"], NOW)  # type: ignore[list-item]
    bot.github.refs["main"] = D
    record_prod(src, bot.url, NOW)
    bot.pull(8, B)
    bot.github.close_pull(8, merged=True)
    bot.deliver("pull_request", merged(8, B, D))
    assert bot.checks_on(D)["sluice/deploy"].conclusion == "success"
    assert _in_force(bot).gate.required_approvers.count == 2
    # An admin pushes the weaker settings back: approved once, before the pin; not now.
    bot.commit(E, PREAMBLE, files={"sluice.yaml": GATE}, parents=(D,))
    bot.github.refs["main"] = E
    after = _in_force(bot)
    assert after.gate.required_approvers.count == 2 and after.note is not None
    # And a promotion of that commit lists the settings as unapproved.
    bot.pull(9, E)
    bot.github.close_pull(9, merged=True)
    bot.deliver("pull_request", merged(9, E, E))
    deploy = bot.checks_on(E)["sluice/deploy"]
    assert deploy.conclusion == "failure" and "Sluice's settings" in deploy.summary


def test_a_symlinked_settings_file_is_refused_in_a_tree(bot: Bot, tmp_path: Path) -> None:
    # The forge's API reads a link as its target's name, the tree as its target: two
    # readers, two settings. A link is refused where a tree is read.
    tree = tmp_path / "linked"
    tree.mkdir()
    (tree / "real.yaml").write_text(GATE)
    (tree / "sluice.yaml").symlink_to("real.yaml")
    with pytest.raises(ConfigError, match="symbolic link"):
        trust.tree_source(tree, "config.yaml")
