"""``sluice drift --repair`` judged by policies (issue 47), through the CLI, without Spark:
prod of the example project built on the scripted warehouse (:mod:`sluice.core.spark.scripted`,
the command's runner replaced by it), then changed by hand (a view redefined: a repoint;
a table dropped: a rebuild). The repair plan is judged by the checkout's ``policies/`` on
the facts the service's gate judges a repair on; ``--apply`` is refused (exit 4, nothing
applied) while a hard policy fails, or a soft one not named by ``--override``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from sluice.core import workflow
from sluice.core.cli import cli
from sluice.core.config import SETTINGS_FILES
from sluice.core.model.loader import load_project
from sluice.core.snapshot.naming import PROD
from sluice.core.spark.scripted import Warehouse
from sluice.core.state import open_state

REPO_ROOT = Path(__file__).resolve().parents[3]
NOW = 1_800_000_000_000
CONFIG = (
    "model_defaults:\n  dialect: spark\n  start: '2018-01-01'\n  cron: '@daily'\n"
    "variables:\n  revenue_statuses: completed\nsluice:\n  project: jaffle\n"
)
NO_DROPS = """\
name: no-drops
description: No table of prod is dropped by hand-made repairs.
level: hard
rule: plan.destructive.size() == 0
"""
VIEWS_NEED_LEADS = """\
name: views-need-leads
description: Making a view of prod again needs a lead's word.
level: soft
override_by: [octo/leads]
rule: '!plan.models.exists(m, m.change == "repoint")'
"""
NAMED = """\
name: someone-asks
description: A repair is asked for by someone.
level: advisory
rule: author != "" && pushers == [author]
"""


class Prod:
    """The example project's prod on the scripted warehouse, at ``root`` (a checkout)."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root / "project"
        shutil.copytree(REPO_ROOT / "examples" / "jaffle_shop", self.root,
                        ignore=shutil.ignore_patterns(".sluice", *SETTINGS_FILES))  # fmt: skip
        (self.root / "config.yaml").write_text(CONFIG)
        self.url = f"sqlite:///{root / 'state.db'}"
        self.warehouse = Warehouse()
        project = load_project(self.root, use_cache=False)
        store = open_state(self.url)
        try:
            plan = workflow.plan_environment(project, store, PROD, end=NOW, execution_time=NOW)
            workflow.apply_plan(project, store, plan, self.warehouse.runner(), now=NOW)
        finally:
            store.close()
        self.sluices = dict(self.warehouse.views)
        monkeypatch.setattr(workflow, "make_runner", lambda *a, **k: self.warehouse.runner())

    def policies(self, **files: str) -> None:
        folder = self.root / "policies"
        folder.mkdir(exist_ok=True)
        for name, text in files.items():
            (folder / f"{name}.yaml").write_text(text)

    def redefine(self) -> None:
        self.warehouse.views["jaffle.customers"] = "SELECT 'by hand' AS id"

    def drop_orders(self) -> None:
        orders = next(t for t, v in self.warehouse.tables.items() if v.model == "jaffle.orders")
        del self.warehouse.tables[orders]

    def drift(self, *args: str) -> Result:
        return CliRunner().invoke(
            cli, ["drift", *args, "--project", str(self.root), "--state", self.url]
        )

    def applies(self) -> int:
        return sum(1 for job in self.warehouse.jobs if job["kind"] == "apply")


@pytest.fixture
def prod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Prod:
    return Prod(tmp_path, monkeypatch)


def _verdicts(result: Result) -> dict[str, dict[str, Any]]:
    repair = json.loads(result.stdout)["repair"]
    return {v["policy"]: v for v in repair["policies"]}


def test_a_hard_policy_refuses_the_apply_and_no_flag_lifts_it(prod: Prod) -> None:
    prod.policies(**{"no-drops": NO_DROPS, "someone-asks": NAMED})
    prod.drop_orders()  # its repair rebuilds orders: a table dropped first, destructive
    built = prod.applies()
    shown = prod.drift("--repair", "--json", "--author", "alice")
    assert shown.exit_code == 3, shown.output  # drift, the plan shown
    verdicts = _verdicts(shown)
    assert verdicts["no-drops"]["outcome"] == "fail" and verdicts["no-drops"]["blocks"]
    assert verdicts["no-drops"]["file"] == "policies/no-drops.yaml:1"
    # the facts are the service's: who asks is `author` and the one pusher
    assert verdicts["someone-asks"]["outcome"] == "pass"
    repair = json.loads(shown.stdout)["repair"]
    assert repair["policies_from"] == str(prod.root / "policies")
    assert repair["refused"].startswith("blocked by no-drops (hard, policies/no-drops.yaml:1)")
    refused = prod.drift("--repair", "--apply", "--author", "alice")
    assert refused.exit_code == 4, refused.output
    assert "Not repaired:" in refused.stdout and "no-drops" in refused.stdout
    assert "this checkout's policies" in refused.stdout
    assert "Repaired prod" not in refused.stdout and "Next:" not in refused.stdout
    assert prod.applies() == built  # nothing ran
    hard = prod.drift("--repair", "--apply", "--override", "no-drops", "--reason", "sure")
    assert hard.exit_code == 2 and "only a soft policy is overridden" in hard.output
    assert prod.applies() == built
    # without an author, the advisory rule fails, and says so, but blocks nothing
    anonymous = _verdicts(prod.drift("--repair", "--json"))["someone-asks"]
    assert (anonymous["outcome"], anonymous["blocks"]) == ("fail", False)


def test_a_soft_policy_holds_the_apply_until_overridden_with_a_reason(prod: Prod) -> None:
    prod.policies(**{"views-need-leads": VIEWS_NEED_LEADS})
    prod.redefine()
    built = prod.applies()
    held = prod.drift("--repair", "--apply")
    assert held.exit_code == 4, held.output
    assert "views-need-leads" in held.stdout and "failed (blocks until overridden)" in held.stdout
    assert prod.applies() == built
    no_reason = prod.drift("--repair", "--apply", "--override", "views-need-leads")
    assert no_reason.exit_code == 2 and "--override needs --reason" in no_reason.output
    typo = prod.drift("--repair", "--apply", "--override", "views", "--reason", "r")
    assert typo.exit_code == 2 and "views-need-leads" in typo.output  # the names listed
    assert prod.applies() == built
    done = prod.drift(
        "--repair", "--apply", "--json", "--author", "ann",
        "--override", "views-need-leads", "--reason", "ticket OPS-1",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    verdict = _verdicts(done)["views-need-leads"]
    assert verdict["outcome"] == "fail" and not verdict["blocks"]
    assert verdict["overridden_by"].startswith("ann (--override: ticket OPS-1")
    assert json.loads(done.stdout)["repair"]["applied"] is True
    assert prod.applies() == built + 1
    assert prod.warehouse.views["jaffle.customers"] == prod.sluices["jaffle.customers"]


def test_without_policies_it_says_nothing_judged_it_here(prod: Prod) -> None:
    prod.redefine()
    shown = prod.drift("--repair")
    assert shown.exit_code == 3, shown.output
    assert "No policies in" in shown.stdout and "nothing judges the repair here" in shown.stdout
    assert "Next: sluice drift prod --repair --apply" in shown.stdout


def test_a_policy_that_does_not_parse_refuses_before_anything_runs(prod: Prod) -> None:
    prod.policies(broken="name: broken\nlevel: hard\nrule: 'plan.('\n")
    prod.redefine()
    built = prod.applies()
    result = prod.drift("--repair", "--apply")
    assert result.exit_code == 1, result.output
    assert "policies/broken.yaml" in result.output
    assert prod.applies() == built
