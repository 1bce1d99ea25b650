"""The Spark driver runs SQL from untrusted pull requests: it holds no credential able to
change a gate decision or another environment, and every job has a time limit.

Hostile cases: a PR's SQL reading the driver's environment through Java reflection
(``reflect('java.lang.System', 'getenv')``, one name at a time, base64-encoded, the JVM's
command line and home); a job spec carrying a state URL or a secret; a driver (a stand-in
for one a PR took over: a real process speaking the event protocol) forging writes to
state: intervals of a model or version its job does not build or over ranges it did not
ask for, an environment record, another job's or plan's results; and a job that runs past
its limit. The writes are checked and applied by the service side (``JobWrites``), never
by the driver, which gets no state URL.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.core.config import SparkSettings
from sluice.core.errors import ExecutionError
from sluice.core.plan.plan import VIEW_MARKER
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.submit import (
    JOB_TIMEOUT_S,
    InProcessRunner,
    SubmitRunner,
    child_environment,
    run_recorded,
)
from sluice.core.spark.writes import JobWrites, WriteRefused
from sluice.core.state import EnvironmentRecord, StateStore, open_state
from tests.helpers.isolation import PROBES, SECRETS, leaks

DAY = 86_400_000
D0 = 1_704_067_200_000  # 2024-01-01


@pytest.fixture(scope="module")
def spark_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An embedded metastore and warehouse for this module's spark-submit jobs."""
    return tmp_path_factory.mktemp("isolation-spark")


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    return SECRETS


# --- a PR's SQL reading the driver's environment (real spark-submit) ------------------


@pytest.mark.spark
def test_a_prs_sql_finds_no_secret_in_the_drivers_environment(
    secrets: dict[str, str], spark_root: Path, tmp_path: Path
) -> None:
    paths = SparkPaths(root=spark_root, logs=tmp_path / "logs")
    seen: list[dict[str, Any]] = []
    runner = SubmitRunner(SparkSettings(master="local[1]"), paths, on_event=seen.append)
    steps = [{"type": "sql", "label": f"probe {i}", "statements": [sql]}
             for i, sql in enumerate(PROBES)]  # fmt: skip
    spec = {"job_id": "probe-env", "kind": "test", "steps": steps}
    store = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        result = run_recorded(runner, spec, state=store)
        stored = store.get_results(job_id="probe-env")
    finally:
        store.close()
    rows = {key: value["rows"][0] for key, value in result.results.items()}
    # The probes ran and saw the environment: it just holds nothing of ours.
    everything = rows["0"]["everything"]
    assert "PATH=" in everything and "SPARK_LOCAL_IP=127.0.0.1" in everything
    # reflect() shows a Java null as the text "null" (base64: "bnVsbA==").
    assert {rows["1"][name.lower()] for name in SECRETS} == {"null"}
    assert {rows["2"][name.lower()] for name in SECRETS} == {"bnVsbA=="}
    assert not any(f"{name}=" in everything for name in SECRETS)
    assert "SLUICE_" not in everything and "GITHUB" not in everything
    # HOME, for the driver and for the JVM, is the job's own folder, not the service's.
    home = rows["3"]["home"]
    assert home == rows["3"]["home_env"]
    assert home != os.environ.get("HOME") and Path(home).is_relative_to(paths.logs)
    # No substitution: the text stays as written (spark.sql.variable.substitute=false).
    assert rows["4"] == {"env_path": "${env:PATH}", "home_prop": "${system:user.home}",
                         "warehouse": "${spark.sql.warehouse.dir}"}  # fmt: skip
    assert result.log_path is not None
    log = result.log_path.read_text()
    spec_file = paths.logs / "probe-env.json"
    written = json.loads(spec_file.read_text())
    assert "state_url" not in written
    for where, text in [
        ("events", json.dumps(seen)),
        ("results", json.dumps(result.results)),
        ("stored results", json.dumps([r.payload for r in stored])),
        ("log", log),
        ("spec", spec_file.read_text()),
    ]:
        assert leaks(text) == [], f"{where} hold a secret"
    # The job's private home is removed once the job is over.
    assert not Path(home).exists()


PROBE_MODEL = """
import os
import sys
from pathlib import Path

from sqlmesh import model


@model("probe.env", kind="FULL", columns={"n": "int"})
def execute(context, start, end, execution_time, **kwargs):
    # What a PR's Python model body could look for: the environment, the service's home
    # and working folder, a state database beside them.
    for name, value in sorted(os.environ.items()):
        print(f"PROBE env {name}={value}", file=sys.stderr)
    print(f"PROBE home {Path.home()}", file=sys.stderr)
    print(f"PROBE cwd {Path.cwd()}", file=sys.stderr)
    found = sorted(p.name for p in Path.cwd().iterdir())
    print(f"PROBE databases {found}", file=sys.stderr)
    return context.spark.createDataFrame([(1,)], "n int")
"""


@pytest.mark.spark
def test_a_python_model_body_finds_no_secret_and_no_state_in_the_driver(
    secrets: dict[str, str], spark_root: Path, tmp_path: Path
) -> None:
    from sluice.core import workflow
    from sluice.core.model.loader import load_project

    root = tmp_path / "project"
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n")
    (root / "models" / "probe.py").write_text(PROBE_MODEL)
    project = load_project(root, use_cache=False)
    paths = SparkPaths(root=spark_root, logs=tmp_path / "logs")
    runner = SubmitRunner(SparkSettings(master="local[1]"), paths)
    store = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        plan = workflow.plan_environment(project, store, "pr_9", end=D0, execution_time=D0)
        result = workflow.apply_plan(project, store, plan, runner, now=D0)
    finally:
        store.close()
    assert result.tables_built == 1  # the body ran
    assert result.job is not None and result.job.log_path is not None
    log = result.job.log_path.read_text()
    probes = [line for line in log.splitlines() if line.startswith("PROBE ")]
    env = [line.removeprefix("PROBE env ") for line in probes if line.startswith("PROBE env ")]
    assert any(line.startswith("PATH=") for line in env), probes  # it saw an environment
    assert not [line for line in env if line.startswith(("SLUICE_", "GITHUB_"))]
    assert leaks(log) == []
    home = next(line.removeprefix("PROBE home ") for line in probes if "PROBE home " in line)
    assert home != os.environ.get("HOME") and Path(home).is_relative_to(paths.logs)
    found = next(line for line in probes if line.startswith("PROBE databases "))
    assert "state.db" not in found  # the state database is nowhere it looks


def test_the_child_environment_is_an_allow_list(
    secrets: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hostile = {
        "GITLAB_TOKEN": "glpat-xyz", "CI_JOB_TOKEN": "ci-job-token", "GH_TOKEN": "gh-xyz",
        "AWS_SECRET_ACCESS_KEY": "aws-secret", "PGPASSWORD": "pg-secret",
        "JAVA_TOOL_OPTIONS": "-javaagent:/tmp/evil.jar", "_JAVA_OPTIONS": "-Xmx1m",
        "SPARK_SUBMIT_OPTS": "-Dsecret=1", "PYTHONPATH": "/tmp/evil", "LD_PRELOAD": "/tmp/x.so",
        "PYSPARK_SUBMIT_ARGS": "--jars /tmp/evil.jar pyspark-shell",
        "LC_ALL": "C.UTF-8", "TZ": "UTC", "HADOOP_CONF_DIR": "/etc/hadoop",
    }  # fmt: skip
    for name, value in hostile.items():
        monkeypatch.setenv(name, value)
    home = tmp_path / "job-home"
    env = child_environment(home)
    allowed = {"PATH", "JAVA_HOME", "LANG", "TZ", "TMPDIR", "SPARK_LOCAL_IP", "SPARK_HOME",
               "HADOOP_CONF_DIR", "YARN_CONF_DIR", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
               "PYTHONUNBUFFERED", "HOME", "SPARK_SUBMIT_OPTS"}  # fmt: skip
    assert set(env) - allowed == {n for n in env if n.startswith("LC_")}
    assert env["LC_ALL"] == "C.UTF-8" and env["TZ"] == "UTC"
    assert env["HADOOP_CONF_DIR"] == "/etc/hadoop"
    assert env["HOME"] == str(home)
    # Ours, not the service's: the JVM's user.home is the job's home too.
    assert env["SPARK_SUBMIT_OPTS"] == f"-Duser.home={home}"
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == sys.executable
    assert env["PYTHONUNBUFFERED"] == "1"
    assert leaks(json.dumps(env)) == []
    assert not {
        v for k, v in hostile.items() if k not in ("LC_ALL", "TZ", "HADOOP_CONF_DIR")
    } & set(env.values())


@pytest.mark.parametrize(
    ("spec", "refused"),
    [
        ({"state_url": "postgresql://sluice:hunter2@db/sluice"}, "a state URL"),
        ({"state_url": "sqlite:////var/lib/sluice/state.db"}, "a state URL"),
        ({"steps": [{"type": "sql", "label": "x",
                     "statements": [f"SELECT '{SECRETS['SLUICE_WEBHOOK_SECRET']}'"]}]},
         "the value of SLUICE_WEBHOOK_SECRET"),
        ({"plan_id": SECRETS["SLUICE_DATABASE_URL"]}, "the value of SLUICE_DATABASE_URL"),
    ],
)  # fmt: skip
def test_a_spec_carrying_a_state_url_or_a_secret_is_refused_before_the_driver_starts(
    secrets: dict[str, str], tmp_path: Path, spec: dict[str, Any], refused: str
) -> None:
    paths = SparkPaths(root=tmp_path / "spark", logs=tmp_path / "logs")
    job = {"job_id": "leaky", "kind": "test",
           "steps": [{"type": "sql", "label": "one", "statements": ["SELECT 1"]}], **spec}  # fmt: skip
    for runner in (SubmitRunner(SparkSettings(master="local[1]"), paths),
                   InProcessRunner(SparkSettings(master="local[1]"), paths)):  # fmt: skip
        with pytest.raises(ExecutionError) as caught:
            runner.run(job)
        assert refused in caught.value.message
        assert leaks(str(caught.value)) == []
    assert not (paths.logs / "leaky.json").exists()  # nothing written for the driver to read


# --- writes checked against the job's spec (real SQLite, no Spark) ---------------------

SPEC: dict[str, Any] = {
    "job_id": "apply-pr_1-plan1-1000",
    "kind": "apply",
    "environment": "pr_1",
    "plan_id": "plan1",
    "base_plan_id": None,
    "steps": [
        {"type": "build", "label": "build s.a", "model": "s.a", "version": "va",
         "batches": [{"start": D0, "end": D0 + 2 * DAY, "sql": "SELECT 1"},
                     {"start": D0 + 2 * DAY, "end": D0 + 3 * DAY, "sql": "SELECT 1"}],
         "intervals": [[D0, D0 + DAY], [D0 + DAY, D0 + 2 * DAY], [D0 + 2 * DAY, D0 + 3 * DAY]],
         "restate": [[D0, D0 + 3 * DAY]]},
        {"type": "audit", "label": "audit s.a: not_null", "model": "s.a", "version": "va",
         "audit": "not_null", "blocking": True, "sql": "SELECT 1"},
        {"type": "build", "label": "build s.v", "model": "s.v", "version": "vv",
         "view_sql": "SELECT 1", "batches": [], "restate": []},
        {"type": "unit_test", "label": "test t_a", "name": "t_a", "model": "s.a"},
        {"type": "table_diff", "label": "table diff s.a", "name": "s.a"},
        {"type": "views", "label": "views", "environment": "pr_1", "views": [], "drop": []},
    ],
}  # fmt: skip


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    state = open_state(f"sqlite:///{tmp_path / 'state.db'}")
    yield state
    state.close()


def _write(op: str, **fields: Any) -> dict[str, Any]:
    return {"event": "write", "op": op, **fields}


def test_writes_the_spec_asked_for_are_applied(store: StateStore) -> None:
    writes = JobWrites(SPEC, store)
    writes.apply(_write("remove_intervals", model="s.a", version="va", start=D0, end=D0 + 3 * DAY))
    writes.apply(_write("add_intervals", model="s.a", version="va",
                        intervals=[[D0, D0 + DAY], [D0 + DAY, D0 + 2 * DAY]]))  # fmt: skip
    writes.apply(_write("add_intervals", model="s.v", version="vv", intervals=[list(VIEW_MARKER)]))
    writes.apply(_write("save_result", kind="audit", name="s.a:not_null", passed=True,
                        payload={"violations": 0}))  # fmt: skip
    writes.apply(_write("save_result", kind="unit_test", name="t_a", passed=False, payload={},
                        job_id=SPEC["job_id"], plan_id="plan1"))  # fmt: skip
    writes.apply(_write("save_result", kind="table_diff", name="s.a", passed=True, payload={}))
    writes.apply(_write("table_size", model="s.a", version="va", bytes=4096))
    writes.apply(
        _write("table_size", model="s.a", version="va", bytes=8192, rows=12)
    )  # the last counts
    assert store.get_intervals([("s.a", "va")]) == {("s.a", "va"): [(D0, D0 + 2 * DAY)]}
    [(key, size)] = store.get_table_sizes(["s.a"]).items()
    assert key == ("s.a", "va") and (size.bytes, size.rows) == (8192, 12)
    assert store.get_intervals([("s.v", "vv")]) == {("s.v", "vv"): [VIEW_MARKER]}
    results = store.get_results(job_id=SPEC["job_id"])
    assert [(r.kind, r.name, r.passed, r.plan_id) for r in results] == [
        ("audit", "s.a:not_null", True, "plan1"),
        ("unit_test", "t_a", False, "plan1"),
        ("table_diff", "s.a", True, "plan1"),
    ]


def test_a_model_is_recorded_filled_only_once_its_blocking_audits_passed(
    store: StateStore,
) -> None:
    writes = JobWrites(SPEC, store)
    writes.apply(_write("add_intervals", model="s.a", version="va", intervals=[[D0, D0 + DAY]]))
    writes.apply(_write("add_intervals", model="s.v", version="vv", intervals=[list(VIEW_MARKER)]))
    # s.a's audit has not run yet: were the driver to die now, s.a is built again.
    assert store.get_intervals([("s.a", "va")]) == {}
    assert store.get_intervals([("s.v", "vv")]) == {("s.v", "vv"): [VIEW_MARKER]}  # no audit
    writes.apply(_write("save_result", kind="audit", name="s.a:not_null", passed=True,
                        payload={"violations": 0}))  # fmt: skip
    assert store.get_intervals([("s.a", "va")]) == {("s.a", "va"): [(D0, D0 + DAY)]}


def test_a_failed_blocking_audit_leaves_its_model_unfilled_so_the_next_run_audits_again(
    store: StateStore,
) -> None:
    writes = JobWrites(SPEC, store)
    writes.apply(_write("add_intervals", model="s.a", version="va",
                        intervals=[[D0, D0 + DAY], [D0 + DAY, D0 + 2 * DAY]]))  # fmt: skip
    writes.apply(_write("save_result", kind="audit", name="s.a:not_null", passed=False,
                        payload={"violations": 3}))  # fmt: skip
    assert store.get_intervals([("s.a", "va")]) == {}
    [result] = store.get_results(job_id=SPEC["job_id"])
    assert (result.name, result.passed) == ("s.a:not_null", False)


def test_a_non_blocking_audit_holds_nothing_back(store: StateStore) -> None:
    spec = {**SPEC, "steps": [
        {**step, "blocking": False} if step["type"] == "audit" else step
        for step in SPEC["steps"]
    ]}  # fmt: skip
    writes = JobWrites(spec, store)
    writes.apply(_write("add_intervals", model="s.a", version="va", intervals=[[D0, D0 + DAY]]))
    assert store.get_intervals([("s.a", "va")]) == {("s.a", "va"): [(D0, D0 + DAY)]}


def _environment(name: str, plan_id: str) -> dict[str, Any]:
    return {"name": name, "snapshots": [], "plan_id": plan_id, "previous_plan_id": None,
            "start": None, "end": 0, "expiration_ts": None, "updated_ts": 0}  # fmt: skip


FORGED = [
    (_write("add_intervals", model="s.other", version="va", intervals=[[D0, D0 + DAY]]),
     "intervals of s.other@va: this job builds no such model version"),
    (_write("add_intervals", model="s.a", version="prod-version", intervals=[[D0, D0 + DAY]]),
     "intervals of s.a@prod-version: this job builds no such model version"),
    (_write("add_intervals", model="s.a", version="va", intervals=[[D0, D0 + 30 * DAY]]),
     "is outside the batches this job asked for"),
    (_write("add_intervals", model="s.a", version="va", intervals=[[D0 - DAY, D0]]),
     "is outside the batches this job asked for"),
    (_write("add_intervals", model="s.a", version="va", intervals=[list(VIEW_MARKER)]),
     "is outside the batches this job asked for"),
    (_write("add_intervals", model="s.a", version="va", intervals=[[D0 + DAY, D0]]),
     "not a range"),
    (_write("add_intervals", model="s.a", version="va", intervals=[[True, D0]]),
     "not a range"),
    (_write("add_intervals", model="s.a", version="va", intervals="all"), "not a range"),
    (_write("remove_intervals", model="s.a", version="va", start=0, end=2**62),
     "is not a range this job restates"),
    (_write("remove_intervals", model="s.v", version="vv", start=0, end=1),
     "is not a range this job restates"),
    (_write("table_size", model="s.other", version="va", bytes=1),
     "the size of s.other@va: this job builds no such model version"),
    (_write("table_size", model="s.a", version="prod-version", bytes=1),
     "the size of s.a@prod-version: this job builds no such model version"),
    (_write("table_size", model="s.a", version="va", bytes=-1), "is not a number of bytes"),
    (_write("table_size", model="s.a", version="va", bytes="1 GB"), "is not a number of bytes"),
    (_write("table_size", model="s.a", version="va", bytes=True), "is not a number of bytes"),
    (_write("table_size", model="s.a", version="va", bytes=1, rows=-3), "is not a number of rows"),
    (_write("table_size", model="s.a", version="va", bytes=1, rows=2.5), "is not a number of rows"),
    (_write("table_size", model="s.a", version="va", bytes=1, rows=False), "is not a number of rows"),
    (_write("table_size", model="s.other", version="va", bytes=1, rows=1),
     "the size of s.other@va: this job builds no such model version"),
    (_write("update_environment", record=_environment("prod", "evil"), expected_plan_id=None),
     "the driver writes no environment"),
    (_write("commit", record=_environment("pr_1", "plan1"), expected_plan_id=None),
     "the driver writes no environment"),
    (_write("invalidate_environment", name="prod"), "the driver writes no environment"),
    (_write("delete_environment", name="prod"), "the driver writes no environment"),
    (_write("save_plan", plan_id="evil"), "unknown write 'save_plan'"),
    (_write("save_result", kind="audit", name="s.a:not_null", passed=True, payload={},
            job_id="promote-prod-1"), "results of job 'promote-prod-1'"),
    (_write("save_result", kind="audit", name="s.a:not_null", passed=True, payload={},
            plan_id="the-approved-plan"), "results of plan 'the-approved-plan'"),
    (_write("save_result", kind="audit", name="s.b:not_null", passed=True, payload={}),
     "audit result 's.b:not_null': this job runs no such audit"),
    (_write("save_result", kind="unit_test", name="t_other", passed=True, payload={}),
     "unit_test result 't_other': this job runs no such unit test"),
    (_write("save_result", kind="approval", name="alice", passed=True, payload={}),
     "result of kind 'approval'"),
    (_write("save_result", kind="audit", name="s.a:not_null", passed="yes", payload={}),
     "passed must be true or false"),
]  # fmt: skip


@pytest.mark.parametrize(("event", "message"), FORGED)
def test_a_write_outside_the_spec_is_refused_and_changes_nothing(
    store: StateStore, event: dict[str, Any], message: str
) -> None:
    store.update_environment(EnvironmentRecord(
        name="prod", snapshots=(), plan_id="the-approved-plan", previous_plan_id=None,
        start=None, end=0, expiration_ts=None, updated_ts=0,
    ), expected_plan_id=None)  # fmt: skip
    writes = JobWrites(SPEC, store)
    with pytest.raises(WriteRefused) as caught:
        writes.apply(event)
    text = str(caught.value)
    assert message in text, text
    assert text.startswith(f"refused a write from the Spark driver of job {SPEC['job_id']}: ")
    assert caught.value.hint and "nothing of it was written" in caught.value.hint
    assert writes.refused is caught.value
    assert store.get_intervals([("s.a", "va"), ("s.other", "va"), ("s.a", "prod-version")]) == {}
    assert store.get_results(job_id=SPEC["job_id"]) == []
    assert store.get_results(job_id="promote-prod-1") == []
    assert store.get_table_sizes(["s.a", "s.other"]) == {}
    [prod] = store.list_environments()
    assert prod.plan_id == "the-approved-plan"


def test_a_job_without_a_store_checks_its_writes_all_the_same() -> None:
    writes = JobWrites(SPEC, None)
    writes.apply(_write("add_intervals", model="s.a", version="va", intervals=[[D0, D0 + DAY]]))
    with pytest.raises(WriteRefused, match="the driver writes no environment"):
        writes.apply(_write("update_environment", record=_environment("prod", "x")))


# --- a driver that forges writes, speaking the real protocol over real pipes ----------

_FORGER = """
import json, sys, time
spec = json.load(open(sys.argv[1]))
def say(event):
    print("@@sluice " + json.dumps(event), flush=True)
say({"event": "job_start", "job_id": spec["job_id"], "steps": len(spec["steps"])})
say({"event": "step_start", "index": 0, "type": "build", "label": "build s.a"})
say({"event": "write", "op": "add_intervals", "model": "s.v", "version": "vv",
     "intervals": [[0, 1]]})
say(json.loads(sys.argv[2]))
time.sleep(120)
say({"event": "job_done", "job_id": spec["job_id"], "results": {}})
"""


class _Forger(SubmitRunner):
    """spark-submit's place taken by a process a PR controls: it prints what it likes."""

    forged: dict[str, Any] = {}

    def command(
        self, spec_path: Path, job_id: str, kind: str, java_flags: list[str] | None = None
    ) -> list[str]:
        return [sys.executable, "-c", _FORGER, str(spec_path), json.dumps(self.forged)]


@pytest.mark.parametrize(("event", "message"), [FORGED[0], FORGED[10], FORGED[15]])
def test_a_driver_forging_a_write_is_stopped_and_the_job_fails(
    secrets: dict[str, str], store: StateStore, tmp_path: Path, event: dict[str, Any], message: str
) -> None:
    paths = SparkPaths(root=tmp_path / "spark", logs=tmp_path / "logs")
    runner = _Forger(SparkSettings(master="local[1]"), paths)
    runner.forged = event
    began = time.monotonic()
    with pytest.raises(WriteRefused) as caught:
        run_recorded(runner, SPEC, state=store)
    assert time.monotonic() - began < 30  # killed at once, not after its sleep
    assert message in str(caught.value)
    # What it wrote before the forgery, within its spec, stays (a view it did create).
    assert store.get_intervals([("s.v", "vv")]) == {("s.v", "vv"): [VIEW_MARKER]}
    assert store.list_environments() == []
    assert store.get_results(job_id="promote-prod-1") == []


# --- the time limit -------------------------------------------------------------------


def test_the_default_time_limit_is_the_modules_and_none_means_no_limit(tmp_path: Path) -> None:
    paths = SparkPaths(root=tmp_path, logs=tmp_path / "logs")
    assert JOB_TIMEOUT_S == 2 * 60 * 60
    assert SubmitRunner(SparkSettings(), paths).timeout == JOB_TIMEOUT_S
    assert InProcessRunner(SparkSettings(), paths).timeout == JOB_TIMEOUT_S
    assert SubmitRunner(SparkSettings(), paths, timeout=None).timeout is None


def _processes_of(spec: Path) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            args = Path("/proc", entry, "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if str(spec).encode() in args:
            found.append(int(entry))
    return found


@pytest.mark.spark
def test_a_job_past_its_limit_is_killed_whole_and_says_so(
    secrets: dict[str, str], spark_root: Path, tmp_path: Path
) -> None:
    paths = SparkPaths(root=spark_root, logs=tmp_path / "logs")
    runner = SubmitRunner(SparkSettings(master="local[1]"), paths, timeout=1)
    spec = {"job_id": "too-long", "kind": "test", "steps": [{"type": "sql", "label": "sleep",
            "statements": ["SELECT java_method('java.lang.Thread', 'sleep', 600000L)"]}]}  # fmt: skip
    began = time.monotonic()
    with pytest.raises(ExecutionError) as caught:
        runner.run(spec)
    assert time.monotonic() - began < 30
    error = caught.value
    assert error.message == (
        "the Spark job ran longer than its limit of 1 s (set by the service: "
        "SLUICE_JOB_TIMEOUT_SECONDS)"
    )
    assert error.hint is not None and "SLUICE_JOB_TIMEOUT_SECONDS" in error.hint
    assert str(paths.logs / "too-long.log") in error.hint
    # Nothing of the job is left running: spark-submit's JVM and the Python driver it starts.
    assert _processes_of(paths.logs / "too-long.json") == []


# --- the launching process keeps its own memory and environment from its drivers ------

_PARENT = """
import os, subprocess, sys
from sluice.core.sandbox import keep_from_children
if sys.argv[1] == "guarded":
    keep_from_children()
# A driver: same OS user, reading its parent's environment and memory through /proc.
child = subprocess.run(
    [sys.executable, "-c", "import os, sys; p = os.getppid(); "
     "out = b''\\n"
     "for name in ('environ', 'mem'):\\n"
     "    try: out += open(f'/proc/{p}/' + name, 'rb').read(4096)\\n"
     "    except OSError as e: sys.stderr.write(type(e).__name__ + ' ' + name + chr(10))\\n"
     "sys.stdout.write(out.decode('latin-1'))"],
    capture_output=True, text=True, check=False,
)
print(child.stdout.replace(chr(0), chr(10)))
print(child.stderr, file=sys.stderr)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="/proc and prctl are Linux's")
@pytest.mark.parametrize("mode", ["guarded", "unguarded"])
def test_a_driver_cannot_read_the_environment_of_the_process_that_started_it(mode: str) -> None:
    import shutil
    import subprocess

    env = {**os.environ, "SLUICE_GITHUB_TOKEN": "ghp_parentOnlySecret0123456789"}
    # Root's capabilities open /proc whatever the guard: as root (a container), service and
    # driver run without them, as processes of one ordinary user would.
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv (util-linux) to drop capabilities")
        prefix = [setpriv, "--inh-caps=-all", "--bounding-set=-all", "--"]
    parent = subprocess.run([*prefix, sys.executable, "-c", _PARENT, mode],
                            capture_output=True, text=True, env=env, check=True, timeout=60)  # fmt: skip
    if mode == "guarded":
        assert "ghp_parentOnlySecret" not in parent.stdout
        assert "PermissionError environ" in parent.stderr
    else:  # the control: without the guard, the same read finds the token
        assert "ghp_parentOnlySecret0123456789" in parent.stdout
