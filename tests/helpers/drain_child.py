"""A service process for the drain and rolling-restart tests: the real app on uvicorn (its
intake, queue, workers, flow and shutdown), GitHub in memory, Spark scripted and slow.

Run as ``python -m tests.helpers.drain_child CONFIG_JSON``; CONFIG_JSON is an object:
``port``, ``workdir``, ``url`` (the state database), ``name`` (of this process),
``record`` (a JSON-lines file), ``job_seconds`` (how long each Spark job takes),
``drain_seconds`` (``SLUICE_DRAIN_SECONDS``), ``prs`` (the pull requests to serve).

Every process builds the same in-memory GitHub (:class:`~sluice.bot.forge.memory.MemoryForge`,
so it starts empty of comments and checks on every start): ``main`` at ``C``, the example
project, and pull request ``n`` at head ``n:040x``, the example with ``orders.sql`` changed
(a build of its own). Each Spark job runs on a :class:`~sluice.core.spark.scripted.Warehouse`
after sleeping ``job_seconds``; the runs are appended to ``record`` (fsync'd), as
``{"t": "start"|"end", "proc", "env", "kind", "at"}``, with ``"signal"`` lines when SIGTERM
arrives and ``"exit"`` once the service stopped.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.events.neutral import Event
from sluice.bot.forge.base import Forge
from sluice.bot.forge.memory import MemoryForge
from sluice.core.model.definition import Project
from sluice.core.spark.scripted import Warehouse
from sluice.core.spark.submit import JobResult, OnEvent
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.fold_settings import fold_settings

ROOT = Path(__file__).resolve().parents[2]
OWNER = "octo/warehouse"
SECRET = "drain-test-secret"
C = "c" * 40
CONFIG = (
    "model_defaults:\n  dialect: spark\n  start: '2018-01-01'\n  cron: '@daily'\n"
    "variables:\n  revenue_statuses: completed\nsluice:\n  project: jaffle\n"
)


def head_of(number: int) -> str:
    return f"{number:040x}"


class Record:
    def __init__(self, path: Path, process: str) -> None:
        self.path, self.process, self.lock = path, process, threading.Lock()

    def write(self, **row: Any) -> None:
        line = json.dumps({"proc": self.process, "pid": os.getpid(), "at": time.time(), **row})
        with self.lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())


class SlowRunner:
    """The scripted runner of one job, ``seconds`` slower, its runs recorded."""

    def __init__(self, inner: Any, seconds: float, record: Record) -> None:
        self.inner, self.seconds, self.record = inner, seconds, record

    def run(self, spec: Any) -> JobResult:
        env = spec.get("environment") or spec.get("job_id")
        self.record.write(t="start", env=env, kind=spec["kind"])
        time.sleep(self.seconds)
        result: JobResult = self.inner.run(spec)
        self.record.write(t="end", env=env, kind=spec["kind"])
        return result


def forge(workdir: Path, prs: list[int]) -> MemoryForge:
    github = MemoryForge(OWNER, name="github")
    github.repositories[CASE_REPOSITORY_ID] = OWNER  # the id the bodies carry
    github.roles.update({"alice": "write"})
    src = workdir / "tree-main"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(
        ROOT / "examples" / "jaffle_shop", src, ignore=shutil.ignore_patterns(".sluice")
    )
    fold_settings(src)  # the example's sluice.yaml into config.yaml
    (src / "config.yaml").write_text(CONFIG)
    github.commit_folder(C, src, branch="main")
    for number in prs:
        head = workdir / f"tree-{number}"
        shutil.rmtree(head, ignore_errors=True)
        shutil.copytree(src, head)
        orders = head / "models" / "orders.sql"
        orders.write_text(orders.read_text().replace("SELECT", f"SELECT /* pr {number} */", 1))
        github.commit_folder(head_of(number), head, parents=(C,))
        github.open_pull(number, head_sha=head_of(number), base="main", author="alice")
    return github


def main(config: dict[str, Any]) -> None:
    workdir = Path(config["workdir"])
    record = Record(Path(config["record"]), str(config["name"]))
    github = forge(workdir, [int(n) for n in config["prs"]])
    warehouse = Warehouse()
    seconds = float(config["job_seconds"])

    def forge_for(_event: Event) -> Forge:
        return github

    def runner_for(project: Project, tree: Path, on_event: OnEvent) -> Any:
        return SlowRunner(warehouse.runner(project, tree, on_event), seconds, record)

    settings = ServiceSettings(
        webhook_secret=SECRET, github_token="ghp_drainTestToken", workdir=workdir / "work",
        database_url=config["url"], github_request_interval=0, github_write_interval=0,
        janitor_interval_seconds=0, drain_seconds=float(config["drain_seconds"]),
        repositories=(OWNER,), spark_mode="submit",
    )  # fmt: skip
    app = create_app(settings, forge_for=forge_for, runner_for=runner_for)
    # uvicorn's own handler stops the server (then the app's lifespan drains the workers);
    # this one, chained before it, notes when the signal came.
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=int(config["port"]), log_level="warning")
    )
    handle_exit = server.handle_exit

    def noted(signum: int, frame: FrameType | None) -> None:
        record.write(t="signal", signal=signum)
        handle_exit(signum, frame)

    server.handle_exit = noted  # type: ignore[method-assign,assignment]
    # uvicorn raises the signal again once it has stopped, under the handler it found:
    # this one, so that the process still gets to say it exited.
    signal.signal(signal.SIGTERM, lambda *_: None)
    server.run()
    record.write(t="exit")


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
