"""The GitHub Action: action.yml against its entry point, and the entry point run as a
workflow job would run it (a subprocess, GitHub's API faked at the wire)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.bot.entry import action
from tests.helpers.action_run import (
    HEAD,
    ROOT,
    TOKEN,
    fake_github,
    job_env,
    make_project,
    pr_payload,
    refused_here,
    run_action,
)
from tests.helpers.cases import load_case
from tests.helpers.github_wire import FakeGitHub


def _action() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "action.yml").read_text())
    assert isinstance(data, dict)
    return data


def _env_name(input_name: str) -> str:
    return "INPUT_" + input_name.upper().replace("-", "_")


def _run_step() -> dict[str, Any]:
    steps = [s for s in _action()["runs"]["steps"] if "sluice action" in s.get("run", "")]
    assert len(steps) == 1
    step: dict[str, Any] = steps[0]
    return step


# --- action.yml and the code agree ---------------------------------------------------


def test_every_declared_input_is_passed_to_the_run_step_and_read_by_the_code() -> None:
    inputs = _action()["inputs"]
    env = _run_step()["env"]
    source = Path(action.__file__).read_text()
    for name in inputs:
        assert env.get(_env_name(name)) == f"${{{{ inputs.{name} }}}}", name
        assert f'"{_env_name(name)}"' in source, f"{_env_name(name)} is not read"


def test_every_input_the_code_reads_is_declared() -> None:
    declared = {_env_name(name) for name in _action()["inputs"]}
    read = set(re.findall(r"\bINPUT_[A-Z0-9_]+", Path(action.__file__).read_text()))
    assert read and read <= declared, read - declared


def test_the_documented_defaults_and_outputs() -> None:
    data = _action()
    inputs = data["inputs"]
    assert inputs["project-path"]["default"] == "."
    assert inputs["token"]["default"] == "${{ github.token }}"
    assert inputs["spark-master"]["default"] == "local[*]"
    assert data["runs"]["using"] == "composite"
    uses = [s.get("uses", "") for s in data["runs"]["steps"]]
    assert "actions/setup-java@v4" in uses and "actions/setup-python@v5" in uses
    java = next(s for s in data["runs"]["steps"] if s.get("uses") == "actions/setup-java@v4")
    assert java["with"] == {"distribution": "temurin", "java-version": "17"}
    outputs = data["outputs"]
    assert outputs["environment"]["value"] == "${{ steps.sluice.outputs.environment }}"
    assert _run_step()["id"] == "sluice"
    for check in ("tests", "pr-environment", "prod-plan", "approval", "deploy"):
        key = check.replace("-", "_")
        assert outputs[key]["value"] == f"${{{{ steps.sluice.outputs.{key} }}}}"


def _step(name: str) -> dict[str, Any]:
    steps = [s for s in _action()["runs"]["steps"] if s.get("name") == name]
    assert len(steps) == 1, name
    step: dict[str, Any] = steps[0]
    return step


def _expand(text: str, outputs: dict[str, str]) -> str:
    """The `${{ steps.<id>.outputs.<name> }}` expressions of a step, as the runner fills them."""
    return re.sub(r"\$\{\{\s*steps\.([\w-]+)\.outputs\.([\w-]+)\s*\}\}",
                  lambda m: outputs[f"{m[1]}.{m[2]}"], text)  # fmt: skip


def test_sluice_runs_in_its_own_environment_cached_by_the_lock(tmp_path: Path) -> None:
    # the naming step, run as the runner runs it: a key of the lock's hash, the runner and
    # the exact Python; a path in the runner's tool cache named by that key
    name = _step("Name Sluice's environment")
    assert name["id"] == "env"
    output = tmp_path / "output"
    script = _expand(name["run"], {"python.python-version": "3.11.9"})
    env = {**os.environ, "GITHUB_ACTION_PATH": str(ROOT), "GITHUB_OUTPUT": str(output),
           "RUNNER_OS": "Linux", "RUNNER_ARCH": "X64", "RUNNER_TOOL_CACHE": str(tmp_path)}  # fmt: skip
    subprocess.run(["bash", "-e", "-c", script], env=env, check=True)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    digest = hashlib.sha256((ROOT / "requirements" / "runtime.lock").read_bytes()).hexdigest()
    assert outputs["key"] == f"sluice-env-Linux-X64-py3.11.9-{digest[:16]}"
    assert outputs["path"] == f"{tmp_path}/sluice/{outputs['key']}"
    cache = _step("Restore Sluice's environment")
    assert cache["uses"] == "actions/cache@v4" and cache["id"] == "cache"
    assert cache["with"] == {"path": "${{ steps.env.outputs.path }}",
                             "key": "${{ steps.env.outputs.key }}"}  # fmt: skip
    # a miss installs every locked package, hashes checked, into that environment only
    deps = _step("Install Sluice's dependencies (requirements/runtime.lock)")
    assert deps["if"] == "steps.cache.outputs.cache-hit != 'true'"
    assert deps["env"]["SLUICE_ENV"] == "${{ steps.env.outputs.path }}"
    assert 'python -m venv "$SLUICE_ENV"' in deps["run"]
    assert (
        '"$SLUICE_ENV/bin/pip" install --quiet --require-hashes -r "$GITHUB_ACTION_PATH/requirements/runtime.lock"'
        in deps["run"]
    )
    # every run: Sluice alone (no dependency resolved), its bin first on the job's PATH
    own = _step("Install Sluice")
    assert "if" not in own
    assert '--no-deps --no-build-isolation "$GITHUB_ACTION_PATH"' in own["run"]
    assert 'echo "$SLUICE_ENV/bin" >> "$GITHUB_PATH"' in own["run"]
    # nothing is installed into the job's own Python
    for step in _action()["runs"]["steps"]:
        for line in step.get("run", "").splitlines():
            assert "pip install" not in line or '"$SLUICE_ENV/bin/pip"' in line, line
    order = [s.get("name") for s in _action()["runs"]["steps"]]
    assert order.index("Install Sluice") < order.index("Run Sluice")


def test_the_example_workflow_is_ready_to_copy() -> None:
    flow = yaml.safe_load((ROOT / "examples" / "github-workflow.yml").read_text())
    triggers = flow[True]  # YAML 1.1 reads the bare key `on` as true
    assert set(triggers) == {"pull_request", "pull_request_review", "issue_comment",
                             "check_run", "push", "release"}  # fmt: skip
    assert triggers["push"] == {"tags": ["*"]}
    assert flow["permissions"] == {
        "checks": "write", "pull-requests": "write", "contents": "write",
        "deployments": "write", "statuses": "write", "issues": "write",
    }  # fmt: skip
    group = flow["concurrency"]["group"]
    assert group.startswith("sluice-${{ github.event.pull_request.number ||")
    assert "github.event_name == 'pull_request'" in flow["concurrency"]["cancel-in-progress"]
    steps = next(iter(flow["jobs"].values()))["steps"]
    checkout = next(s for s in steps if str(s.get("uses", "")).startswith("actions/checkout"))
    assert "github.event.pull_request.head.sha" in checkout["with"]["ref"]
    sluice = next(s for s in steps if s.get("id") == "sluice")
    assert set(sluice["with"]) <= set(_action()["inputs"])


# --- pieces -----------------------------------------------------------------------------


def test_spark_conf_lines_or_commas() -> None:
    assert action.parse_spark_conf("a.b=1\n c = x,y \n\n") == {"a.b": "1", "c": "x,y"}
    assert action.parse_spark_conf("a=1, b=2") == {"a": "1", "b": "2"}
    assert action.parse_spark_conf("") == {}
    with pytest.raises(action.ActionError, match="'nope' is not key=value"):
        action.parse_spark_conf("nope")


def test_project_python_is_prod_unless_the_workflow_says_on_or_off() -> None:
    base = {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": "/tmp/event.json"}
    assert action.read_inputs(base).project_python == "prod"
    assert action.read_inputs({**base, "INPUT_PROJECT_PYTHON": ""}).project_python == "prod"
    assert action.read_inputs({**base, "INPUT_PROJECT_PYTHON": " ON "}).project_python == "on"
    with pytest.raises(action.ActionError, match="INPUT_PROJECT_PYTHON is 'yes': give one of"):
        action.read_inputs({**base, "INPUT_PROJECT_PYTHON": "yes"})
    assert _action()["inputs"]["project-python"]["default"] == "prod"


def test_config_override_merges_into_the_sluice_section() -> None:
    text = (
        "model_defaults:\n  dialect: duckdb\nsluice:\n  project: demo\n  pr:\n    diff_limit: 4\n"
    )
    override = action.parse_override("sluice:\n  pr:\n    backfill_days: 2\n")
    merged = yaml.safe_load(action.override_config(text, override) or "")
    assert merged == {
        "model_defaults": {"dialect": "duckdb"},
        "sluice": {"project": "demo", "pr": {"diff_limit": 4, "backfill_days": 2}},
    }
    assert action.override_config(text, {}) == text
    assert yaml.safe_load(action.override_config(None, {"project": "x"}) or "") == {
        "sluice": {"project": "x"}
    }
    with pytest.raises(action.ActionError, match="mapping"):
        action.parse_override("- a list")


def test_config_override_goes_into_sluice_yaml_where_the_settings_are(tmp_path: Path) -> None:
    from sluice.bot.flow import trust
    from sluice.bot.forge.memory import MemoryForge

    inner = MemoryForge("o/r", name="github")
    config = "model_defaults:\n  dialect: spark\n"
    settings = "project: demo\npr:\n  diff_limit: 4\n"
    inner.commit("a" * 40, {"config.yaml": config, "sluice.yaml": settings}, branch="main")
    inner.commit("b" * 40, {"config.yaml": config + "sluice:\n  project: demo\n"}, branch="old")
    override = action.parse_override("pr:\n  backfill_days: 2\n")
    forge = action.WorkspaceForge(inner, tmp_path, None, "config.yaml", override)
    # Where sluice.yaml holds the settings, the override is merged there, config.yaml kept
    # (a `sluice:` section added to it would make the two places an error).
    assert forge.read_file("main", "config.yaml") == config
    assert yaml.safe_load(forge.read_file("main", "sluice.yaml") or "") == {
        "project": "demo",
        "pr": {"diff_limit": 4, "backfill_days": 2},
    }
    source = trust.read_source(lambda name: forge.read_file("main", name), "config.yaml")
    assert trust.parse(source).sluice.pr.backfill_days == 2
    # Without one, into config.yaml's section as before.
    old = yaml.safe_load(forge.read_file("old", "config.yaml") or "")
    assert old["sluice"] == {"project": "demo", "pr": {"backfill_days": 2}}
    assert forge.read_file("old", "sluice.yaml") is None
    # And in a fetched tree.
    forge.fetch_tree("a" * 40, tmp_path / "tree")
    assert (tmp_path / "tree" / "config.yaml").read_text() == config
    fetched = yaml.safe_load((tmp_path / "tree" / "sluice.yaml").read_text())
    assert fetched["pr"] == {"diff_limit": 4, "backfill_days": 2}


def test_config_override_reaches_settings_however_the_path_is_spelt(tmp_path: Path) -> None:
    # Red team: `./warehouse` as project path missed sluice.yaml, and a config.yaml in a
    # Jinja block dropped the override silently.
    import posixpath

    from sluice.bot.flow import trust
    from sluice.bot.forge.memory import MemoryForge

    class Wire(MemoryForge):  # GitHub over HTTP: `./a/b` is read as `a/b`
        def read_file(self, ref: str, path: str) -> str | None:
            return super().read_file(ref, posixpath.normpath(path))

    inner = Wire("o/r", name="github")
    inner.commit(
        "a" * 40,
        {
            "warehouse/config.yaml": "model_defaults:\n  dialect: spark\n",
            "warehouse/sluice.yaml": "project: demo\n",
            "jinja/config.yaml": "{% if true %}sluice:\n  project: demo\n{% endif %}\n",
        },
        branch="main",
    )
    override = action.parse_override("pr:\n  backfill_days: 2\n")
    for spelt in ["warehouse/config.yaml", "./warehouse/config.yaml", "warehouse/./config.yaml"]:
        forge = action.WorkspaceForge(inner, tmp_path, None, spelt, override)
        for path in ["warehouse/sluice.yaml", trust.settings_beside(spelt)]:
            merged = yaml.safe_load(forge.read_file("main", path) or "")
            assert merged == {"project": "demo", "pr": {"backfill_days": 2}}, (spelt, path)
    forge = action.WorkspaceForge(inner, tmp_path, None, "jinja/config.yaml", override)
    merged = yaml.safe_load(forge.read_file("main", "jinja/config.yaml") or "")
    assert merged["sluice"] == {"project": "demo", "pr": {"backfill_days": 2}}


def test_outputs_name_each_check_without_the_prefix() -> None:
    from sluice.bot.forge.base import Check

    checks = {
        "sluice/pr-environment": Check("sluice/pr-environment", "completed", "t", "s", "success"),
        "sluice/approval": Check("sluice/approval", "in_progress", "t", "s"),
    }
    assert action.output_lines("pr_3", checks) == [
        "environment=pr_3", "pr_environment=success", "approval=in_progress",
    ]  # fmt: skip


# --- the entry point as a workflow job runs it -------------------------------------------


def _outputs(tmp_path: Path) -> dict[str, str]:
    lines = (tmp_path / "output.txt").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines)


def test_a_pull_request_is_built_from_the_workspace_and_reported(tmp_path: Path) -> None:
    payload = pr_payload()
    number = payload["pull_request"]["number"]
    # The prod branch (the repository's default, master) names the project: its `sluice:`
    # settings are the ones used, not the head's.
    fake_github(tmp_path, number, **{"config.yaml": "sluice:\n  project: demo\n"})
    make_project(tmp_path / "workspace", "sluice:\n  project: from_the_head\n")
    (tmp_path / "workspace" / ".git").mkdir()  # not a repository: the PR's head is used
    (tmp_path / "workspace" / ".git" / "secret").write_text("never copied")

    done = run_action(tmp_path, job_env(tmp_path, "pull_request", payload))
    assert done.returncode == 0, done.stderr
    github = FakeGitHub(state_file=tmp_path / "github.json")
    assert not [u for _, u in github.requests if "/tarball/" in u], "the workspace is the head"
    assert all(u.startswith("https://api.github.com") for _, u in github.requests)
    checks = github.checks_on(HEAD)
    assert set(checks) == {
        "sluice/tests", "sluice/pr-environment", "sluice/prod-plan", "sluice/approval"
    }  # fmt: skip
    assert {c["conclusion"] for c in checks.values()} == {"success"}
    assert checks["sluice/pr-environment"]["output"]["title"] == "This PR changes no model"
    assert checks["sluice/approval"]["output"]["title"] == "No approval required"
    comments = github.comments_on(number)
    assert len(comments) == 1
    assert comments[0]["body"].startswith("<!-- sluice:pr-comment -->\n### ✅ Sluice · `demo`")
    assert _outputs(tmp_path) == {
        "environment": f"pr_{number}", "tests": "success", "pr_environment": "success",
        "prod_plan": "success", "approval": "success",
    }  # fmt: skip
    # No database-url: the state is SQLite in the workspace, and the log says it is lost.
    assert "every run starts from an empty prod" in done.stdout
    assert (tmp_path / "workspace" / ".sluice" / "action" / "state.db").is_file()
    trees = list((tmp_path / "workspace" / ".sluice" / "action" / "trees").rglob(HEAD))
    assert len(trees) == 1 and not (trees[0] / ".git").exists()
    assert TOKEN not in done.stdout + done.stderr


def test_a_pending_gate_is_not_a_failed_job_and_the_override_applies(tmp_path: Path) -> None:
    payload = pr_payload()
    number = payload["pull_request"]["number"]
    fake_github(tmp_path, number, **{"wh/config.yaml": "sluice:\n  project: demo\n"})
    make_project(tmp_path / "workspace" / "wh")
    override = "sluice:\n  project: overridden\n  gate:\n    required_approvers:\n      users: [bob]\n"  # fmt: skip
    state = f"sqlite:///{tmp_path / 'shared.db'}"
    env = job_env(tmp_path, "pull_request", payload, INPUT_PROJECT_PATH="wh",
               INPUT_CONFIG_OVERRIDE=override, INPUT_DATABASE_URL=state,
               INPUT_SPARK_CONF="spark.sql.shuffle.partitions=2")  # fmt: skip
    done = run_action(tmp_path, env)
    assert done.returncode == 0, done.stderr
    github = FakeGitHub(state_file=tmp_path / "github.json")
    checks = github.checks_on(HEAD)
    approval = checks["sluice/approval"]
    assert approval["conclusion"] != "success", approval  # bob has not approved
    assert "bob" in json.dumps(approval["output"])
    assert "`overridden`" in github.comments_on(number)[0]["body"]  # the head's config
    outputs = _outputs(tmp_path)
    assert outputs["approval"] == (approval["conclusion"] or approval["status"])
    assert outputs["pr_environment"] == "success"
    assert (tmp_path / "shared.db").is_file()
    assert "empty prod" not in done.stdout


def test_an_event_sluice_does_not_handle_is_nothing_to_do(tmp_path: Path) -> None:
    payload = load_case("github/installation/created.payload.json")
    done = refused_here(tmp_path, job_env(tmp_path, "installation", payload, INPUT_TOKEN=""))
    assert done.returncode == 0, done.stderr
    assert "nothing to do for event installation" in done.stdout
    assert not (tmp_path / "output.txt").exists()


def test_a_missing_token_fails_the_job_clearly(tmp_path: Path) -> None:
    fake_github(tmp_path, 2)
    done = refused_here(tmp_path, job_env(tmp_path, "pull_request", pr_payload(), INPUT_TOKEN=""))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("::error title=Sluice::sluice action: no GitHub token")
    assert FakeGitHub(state_file=tmp_path / "github.json").requests == []


def test_the_job_token_is_the_fallback(tmp_path: Path) -> None:
    payload = pr_payload()
    fake_github(tmp_path, payload["pull_request"]["number"])
    make_project(tmp_path / "workspace")
    env = job_env(tmp_path, "pull_request", payload, INPUT_TOKEN="", GITHUB_TOKEN=TOKEN)
    assert run_action(tmp_path, env).returncode == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read the event file"), ("{not json", "is not JSON"),
     ("[1, 2]", "does not hold a JSON object")],
)  # fmt: skip
def test_an_unreadable_event_file_fails_the_job(
    tmp_path: Path, content: str | None, message: str
) -> None:
    env = job_env(tmp_path, "pull_request", None)
    if content is not None:
        Path(env["GITHUB_EVENT_PATH"]).write_text(content)
    done = refused_here(tmp_path, env)
    assert done.returncode == 1
    assert message in done.stderr.strip().splitlines()[-1]


def test_a_payload_missing_what_sluice_needs_fails_the_job(tmp_path: Path) -> None:
    payload = pr_payload()
    del payload["pull_request"]["head"]
    done = refused_here(tmp_path, job_env(tmp_path, "pull_request", payload))
    assert done.returncode == 1
    assert "event file is not usable" in done.stderr


def test_the_command_is_registered() -> None:
    from click.testing import CliRunner

    from sluice.cli import cli

    result = CliRunner().invoke(cli, ["action", "--help"])
    assert result.exit_code == 0 and "GitHub Action" in result.output


def test_a_failed_check_fails_the_job_with_an_annotation_and_a_summary(tmp_path: Path) -> None:
    payload = pr_payload()
    number = payload["pull_request"]["number"]
    fake_github(tmp_path, number, **{"wh/config.yaml": "sluice:\n  project: demo\n"})
    project = make_project(tmp_path / "workspace" / "wh")
    (project / "models" / "broken.sql").write_text(
        "MODEL (name demo.broken, kind FULL);\n\nSELECT 1 AS id FROM FROM nowhere\n"
    )
    summary = tmp_path / "summary.md"
    env = job_env(tmp_path, "pull_request", payload, INPUT_PROJECT_PATH="wh",
               GITHUB_STEP_SUMMARY=str(summary))  # fmt: skip
    done = run_action(tmp_path, env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert _outputs(tmp_path)["pr_environment"] == "failure"
    errors = [line for line in done.stdout.splitlines() if line.startswith("::error file=")]
    assert errors and errors[0].startswith("::error file=wh/models/broken.sql,line=3"), errors
    assert (
        "::error title=Sluice::sluice/tests, sluice/pr-environment, sluice/prod-plan failed"
        in done.stdout
    )
    text = summary.read_text()
    assert text.startswith(f"## Sluice: `pr_{number}`")
    assert "| `sluice/pr-environment` | failure |" in text
    # Relaxed by the input: the checks say it, the job stays green.
    (tmp_path / "output.txt").unlink()
    relaxed = run_action(tmp_path, {**env, "INPUT_FAIL_ON_FAILED_CHECK": "false"})
    assert relaxed.returncode == 0, relaxed.stdout + relaxed.stderr
    assert "::error file=wh/models/broken.sql,line=3" in relaxed.stdout


def test_annotations_name_only_project_files_and_escape_the_message(tmp_path: Path) -> None:
    from sluice.bot.entry.action import error_annotations
    from sluice.bot.forge.base import Check

    root = make_project(tmp_path / "repo" / "p")
    (root / "models" / "a.sql").write_text("x")
    summary = (
        "```text\nmodels/a.sql:2:7: bad, very: bad 100%\n  hint: fix it\n"
        "models/ghost.sql:1: no such file\n../../etc/passwd:1: outside\n```"
    )
    checks = {
        "sluice/pr-environment": Check("sluice/pr-environment", "completed", "t", summary, "failure"),
        "sluice/approval": Check("sluice/approval", "completed", "t", "models/a.sql:9: x", "failure"),
    }  # fmt: skip
    expected = ["::error file=p/models/a.sql,line=2,col=7,title=Sluice::bad, very: bad 100%25"]
    assert error_annotations(checks, tmp_path / "repo", "p") == expected  # project-relative
    repo_relative = {"sluice/tests": Check("sluice/tests", "completed", "t",
                                           "p/models/a.sql:2:7: bad, very: bad 100%", "failure")}  # fmt: skip
    assert error_annotations(repo_relative, tmp_path / "repo", "p") == expected


def test_a_shared_state_beside_a_runner_local_catalog_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    fake_github(tmp_path, 2)
    make_project(tmp_path / "workspace")
    state = "postgresql://sluice:s3cr3t-pw@db.invalid:5432/sluice"
    done = refused_here(
        tmp_path, job_env(tmp_path, "pull_request", pr_payload(), INPUT_DATABASE_URL=state)
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("::error title=Sluice::sluice action: database-url is a state")
    assert "the metastore is this runner's embedded Derby database" in last
    assert "the warehouse is a folder of this runner's workspace" in last
    assert "s3cr3t-pw" not in done.stdout + done.stderr
    assert FakeGitHub(state_file=tmp_path / "github.json").requests == []


def test_what_counts_as_a_shared_catalog() -> None:
    from sluice.bot.entry.action import ActionError, check_shared_catalog
    from sluice.core.config import SparkSettings

    shared = {
        "spark.hadoop.javax.jdo.option.ConnectionURL": "jdbc:postgresql://db/metastore",
        "spark.sql.warehouse.dir": "s3a://lake/warehouse",
    }
    postgres = "postgresql://sluice@db/sluice"
    check_shared_catalog(postgres, SparkSettings(conf=shared))  # all three shared
    check_shared_catalog(None, SparkSettings())  # the runner's own SQLite: plan-only
    check_shared_catalog("sqlite:////mnt/shared/state.db", SparkSettings())  # the user's call
    thrift = {"spark.hadoop.hive.metastore.uris": "thrift://hms:9083"}
    with pytest.raises(ActionError, match="warehouse is a folder") as refused:
        check_shared_catalog(postgres, SparkSettings(conf=thrift))
    assert "embedded Derby" not in str(refused.value)  # a metastore service is shared
    with pytest.raises(ActionError, match="embedded Derby"):
        check_shared_catalog(postgres, SparkSettings(conf={"spark.sql.warehouse.dir": "/nfs/w"}))


def test_passwords_given_in_spark_conf_are_scrubbed_like_the_token() -> None:
    inputs = action.read_inputs({
        "GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": "/dev/null", "INPUT_TOKEN": "ghs_tok",
        "INPUT_SPARK_CONF": "spark.hadoop.javax.jdo.option.ConnectionPassword=hive-pw-42\n"
                            "spark.driver.memory=2g\nfs.s3a.secret.key=AKIAxyz\n",
        "INPUT_DATABASE_URL": "postgresql://u:db-pw-7@db/s",
    })  # fmt: skip
    assert set(action._secrets(inputs)) == {"ghs_tok", "hive-pw-42", "AKIAxyz", "db-pw-7"}
