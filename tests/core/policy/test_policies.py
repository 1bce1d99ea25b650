"""Policies as code (issue 47, point 1): files read with their errors at file:line, rules
bounded and failing closed, facts from real plans, the shipped examples on their fixtures
through ``sluice policy test``, and ``sluice plan`` printing the verdicts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from sluice.cli import cli
from sluice.core.errors import ConfigError
from sluice.core.policy.cel import MAX_SECONDS, MAX_STEPS, compile_rule
from sluice.core.policy.facts import FACT_NAMES, plan_facts
from sluice.core.policy.load import parse_policies, parse_policy
from sluice.core.policy.verdict import blocking, evaluate
from tests.core.helpers import BASIC, load, plan_of, write_project

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "policies"
END = 1_735_689_600_000  # 2025-01-01


def policy_text(rule: str, level: str = "hard", extra: str = "") -> str:
    return f"name: p\ndescription: a policy\nlevel: {level}\n{extra}rule: {rule}\n"


# --- reading -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("name: p\ndescription: d\nlevel: hard\nrule: '1 +'\n", 4, "not valid CEL"),
        ("name: p\ndescription: d\nlevel: hardd\nrule: 'true'\n", 3, "is not one of"),
        ("name: p\ndescription: d\nlevel: soft\nrule: 'true'\n", 3, "needs override_by"),
        ("name: p\ndescription: d\nlevel: hard\noverride_by: [a]\nrule: 'true'\n", 4, "for soft"),
        ("name: p\ndescripton: d\nlevel: hard\nrule: 'true'\n", 2, "unknown key 'descripton'"),
        ("name: 'p q'\ndescription: d\nlevel: hard\nrule: 'true'\n", 1, "is not letters"),
        ("name: p\ndescription: d\nlevel: hard\n", 1, "has no 'rule'"),
        ("- name: p\n", 1, "is a mapping"),
        ("name: p\ndescription: d\nlevel: soft\noverride_by: ['a b']\nrule: 'true'\n", 4, "users"),
        (
            "name: p\ndescription: d\nlevel: hard\nrule: 'a.all(x, a.all(y, a.all(z, true)))'\n",
            4,
            "nests 3 list macros",
        ),
        (f"name: p\ndescription: d\nlevel: hard\nrule: '{'1 + ' * 1500}1 == 1'\n", 4, "characters"),
    ],
)
def test_a_policy_that_cannot_be_read_names_its_file_and_line(
    text: str, line: int, says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_policy("policies/p.yaml", text)
    assert caught.value.path == "policies/p.yaml"
    assert caught.value.line == line, caught.value
    assert says in caught.value.message, caught.value


def test_two_policies_of_one_name_are_an_error_naming_both() -> None:
    files = {
        "policies/a.yaml": policy_text("true"),
        "policies/b.yml": policy_text("false"),
        "models/x.yaml": "not a policy",
        "policies/sub/c.yaml": "neither",
    }
    with pytest.raises(ConfigError, match=r"also defined in policies/a.yaml:1") as caught:
        parse_policies(files)
    assert caught.value.path == "policies/b.yml"
    only = parse_policies({"policies/a.yaml": policy_text("true"), "models/x.yaml": "x"})
    assert [p.path for p in only] == ["policies/a.yaml"]


# --- evaluating: fail closed -------------------------------------------------------------


def test_a_missing_fact_or_a_result_not_boolean_blocks_naming_the_file() -> None:
    misspelt = parse_policy("policies/p.yaml", policy_text("plan.addedd.size() == 0", "advisory"))
    [verdict] = evaluate([misspelt], {"plan": {"added": []}})
    assert verdict.outcome == "error" and verdict.blocks, "even an advisory policy"
    assert "policies/p.yaml:4" in verdict.error and "addedd" in verdict.error
    number = parse_policy("policies/p.yaml", policy_text("plan.added.size()"))
    [verdict] = evaluate([number], {"plan": {"added": []}})
    assert verdict.outcome == "error" and "not true or false" in verdict.error
    dividing = parse_policy("policies/p.yaml", policy_text("1 / size(plan.added) == 1"))
    assert evaluate([dividing], {"plan": {"added": []}})[0].outcome == "error"


def test_an_expensive_rule_is_refused_before_it_runs() -> None:
    pairs = compile_rule("xs.all(a, xs.exists(b, a == b))", "policies/p.yaml", 4)
    small = {"xs": list(range(10))}  # 100 steps: within the clock however loaded the machine
    assert pairs.evaluate(small) is True
    side = int(MAX_STEPS**0.5) + 1
    policy = parse_policy("policies/p.yaml", policy_text("xs.all(a, xs.exists(b, a == b))"))
    [verdict] = evaluate([policy], {"xs": list(range(side))})
    assert verdict.outcome == "error" and verdict.blocks
    assert f"over the {MAX_STEPS:,} a rule may take" in verdict.error


def test_a_list_literal_counts_in_the_step_bound() -> None:
    items = ",".join(["1"] * (int(MAX_STEPS**0.5) + 1))
    with pytest.raises(ConfigError, match="steps, over the"):
        compile_rule(f"[{items}].all(a, [{items}].all(b, a == b))", "policies/p.yaml", 4)
    short = compile_rule("xs.all(a, [1, 2].exists(b, a == b))", "policies/p.yaml", 4)
    assert short.evaluate({"xs": [1, 2]}) is True


def test_a_rule_building_long_lists_is_stopped_by_the_clock() -> None:
    # Within the step bound on the facts (40 items), but each side concatenates the list
    # six times: 240^2 steps, many seconds of cel-python; the clock stops it, fail closed.
    xs = "(xs + xs + xs + xs + xs + xs)"
    rule = f"{xs}.all(a, {xs}.exists(b, b == -1))"
    policy = parse_policy("policies/slow.yaml", policy_text(rule))
    [verdict] = evaluate([policy], {"xs": list(range(40))})
    assert verdict.outcome == "error" and verdict.blocks
    assert f"ran for over {MAX_SECONDS:g} s" in verdict.error
    assert "policies/slow.yaml:4" in verdict.error


def test_levels_and_overrides() -> None:
    files = {
        "policies/a.yaml": policy_text("false", "advisory").replace("name: p", "name: a"),
        "policies/s.yaml": policy_text("false", "soft", "override_by: [octo/leads]\n").replace(
            "name: p", "name: s"
        ),
        "policies/h.yaml": policy_text("false").replace("name: p", "name: h"),
        "policies/ok.yaml": policy_text("true").replace("name: p", "name: ok"),
    }
    policies = parse_policies(files)
    verdicts = {v.policy.name: v for v in evaluate(policies, {})}
    assert [v.policy.name for v in blocking(list(verdicts.values()))] == ["h", "s"]
    assert verdicts["a"].outcome == "fail" and not verdicts["a"].blocks
    lifted = {v.policy.name: v for v in evaluate(policies, {}, {"s": "ann", "h": "ann"})}
    assert not lifted["s"].blocks and lifted["s"].summary == "overridden by ann"
    assert lifted["h"].blocks, "a hard policy cannot be overridden"


# --- facts of a real plan ----------------------------------------------------------------


def test_the_facts_of_a_real_plan(tmp_path: Path) -> None:
    files = {
        **BASIC,
        "models/a.sql": "MODEL (name s.a, kind FULL, tags [pii], owner ann);\n"
        "SELECT 1 AS id, 'x' AS name\n",
    }
    first = load(tmp_path / "v1", files)
    prod = plan_of(first, end=END)
    facts = plan_facts(prod, first.models, author="alice")
    assert set(facts) == set(FACT_NAMES[""])
    assert set(facts["plan"]) == set(FACT_NAMES["plan"])
    assert facts["plan"]["added"] == ["s.a", "s.b", "s.c"]
    by_name = {m["name"]: m for m in facts["plan"]["models"]}
    assert set(by_name["s.b"]) == set(FACT_NAMES["plan.models[]"])
    assert by_name["s.a"]["owner"] == "ann" and by_name["s.a"]["tags"] == ["pii"]
    assert by_name["s.b"]["reads_tags"] == ["pii"] and by_name["s.c"]["reads_tags"] == ["pii"]
    assert by_name["s.c"]["kind"] == "FULL" and by_name["s.c"]["change"] == "added"
    # A change of s.b's query: breaking, s.c indirectly.
    second = load(tmp_path / "v2", {**files, "models/b.sql": "MODEL (name s.b, kind FULL);\n"
                                    "SELECT id, name || '!' AS name FROM s.a\n"})  # fmt: skip
    change = plan_facts(plan_of(second, prod, end=END), second.models, first.models)
    assert change["plan"]["modified"] == ["s.b"] and change["plan"]["indirect"] == ["s.c"]
    changed = {m["name"]: m for m in change["plan"]["models"]}
    assert changed["s.b"]["change"] == "breaking" and changed["s.b"]["direct"] is True
    assert changed["s.c"]["change"] == "indirect-breaking"
    [pii] = parse_policies(
        {"policies/pii.yaml": (EXAMPLES / "policies" / "pii-stays-tagged.yaml").read_text()}
    )
    assert [v.outcome for v in evaluate([pii], change)] == ["fail"], "s.b reads s.a (pii)"


def test_a_backfill_never_estimated_is_not_measured(tmp_path: Path) -> None:
    """A plan whose scan was never estimated says 0 bytes: bytes_measured is false (the
    plan's and each backfilled model's), so 'bytes_measured && bytes <= N' refuses it; an
    estimate with every parent measured, and a plan with no backfill, are measured."""
    import dataclasses

    from sluice.core.plan.plan import ScanEstimate

    project = load(tmp_path, BASIC)
    plan = plan_of(project, end=END)
    assert plan.scan is None and plan.backfill_intervals > 0
    facts = plan_facts(plan, project.models)["plan"]
    assert facts["backfill"]["bytes"] == 0 and facts["backfill"]["bytes_measured"] is False
    assert any(m["backfill_intervals"] for m in facts["models"])
    assert all(not m["bytes_measured"] for m in facts["models"] if m["backfill_intervals"])
    estimated = dataclasses.replace(
        plan, scan=ScanEstimate({b.name: 10 for b in plan.backfill}, {})
    )
    facts = plan_facts(estimated, project.models)["plan"]
    assert facts["backfill"]["bytes_measured"] is True
    assert all(m["bytes_measured"] for m in facts["models"])
    idle = dataclasses.replace(plan, backfill=())  # reads nothing: nothing to estimate
    assert plan_facts(idle, project.models)["plan"]["backfill"]["bytes_measured"] is True


# --- the shipped examples, and the CLI ---------------------------------------------------


def test_the_shipped_policies_give_each_fixture_its_expected_verdicts() -> None:
    fixtures = sorted(str(p) for p in (EXAMPLES / "fixtures").glob("*.json"))
    assert len(fixtures) >= 6
    result = CliRunner().invoke(cli, ["policy", "test", "--project", str(EXAMPLES), *fixtures])
    assert result.exit_code == 0, result.output
    assert ", 0 unexpected." in result.output
    # Every policy shipped (not a list kept by hand: a new example without fixtures fails
    # here) is seen to fail on one fixture and pass on another.
    shipped = sorted(
        yaml.safe_load(path.read_text())["name"] for path in (EXAMPLES / "policies").glob("*.yaml")
    )
    assert shipped == [
        "finance-breaking", "no-big-full", "no-destructive-fridays", "pii-stays-tagged",
    ]  # fmt: skip
    for name in shipped:
        assert f"{name} fail (expected fail)" in result.output, name
        assert f"{name} pass (expected pass)" in result.output, name


def test_a_fixture_expecting_another_verdict_fails_the_command(tmp_path: Path) -> None:
    data = json.loads((EXAMPLES / "fixtures" / "big-full.json").read_text())
    data["expect"] = {"no-big-full": "pass"}
    fixture = tmp_path / "wrong.json"
    fixture.write_text(json.dumps(data))
    result = CliRunner().invoke(cli, ["policy", "test", "--project", str(EXAMPLES), str(fixture)])
    assert result.exit_code == 1
    assert "UNEXPECTED" in result.output and "no-big-full fail (expected pass)" in result.output
    data["expect"] = {"no-such-policy": "pass"}
    fixture.write_text(json.dumps(data))
    result = CliRunner().invoke(cli, ["policy", "test", "--project", str(EXAMPLES), str(fixture)])
    assert result.exit_code == 1 and "which no policy is named" in result.output


def test_sluice_plan_prints_the_verdicts_of_the_projects_policies(tmp_path: Path) -> None:
    root = write_project(tmp_path / "project", BASIC)
    (root / "policies").mkdir()
    shutil.copy(EXAMPLES / "policies" / "no-big-full.yaml", root / "policies")
    (root / "policies" / "few.yaml").write_text(
        "name: few-new-models\ndescription: At most two new models at once.\nlevel: advisory\n"
        "rule: plan.added.size() <= 2\n"
    )
    state = f"sqlite:///{tmp_path / 'state.db'}"
    result = CliRunner().invoke(cli, ["plan", "--project", str(root), "--state", state, "--json"])
    assert result.exit_code == 0, result.output
    verdicts = {v["policy"]: v for v in json.loads(result.stdout)["policies"]}
    assert verdicts["few-new-models"]["outcome"] == "fail"
    assert verdicts["few-new-models"]["blocks"] is False
    # A fresh state has measured no table: a FULL model's read is unknown, not 0 bytes.
    assert verdicts["no-big-full"]["outcome"] == "fail" and verdicts["no-big-full"]["blocks"]
    text = CliRunner().invoke(cli, ["plan", "--project", str(root), "--state", state])
    assert text.exit_code == 0, text.output
    assert "Policies" in text.output and "few-new-models (advisory): failed" in text.output
    (root / "policies" / "few.yaml").write_text("name: few\nlevel: hard\nrule: '1 +'\n")
    broken = CliRunner().invoke(cli, ["plan", "--project", str(root), "--state", state])
    assert broken.exit_code == 1 and "few.yaml" in broken.output
