"""Benchmark: the promotion window, how long readers can see prod's views half swapped.

Usage: python bench/promotion_window.py [--models 50] [--rounds 4] [--readers 3] [--seed 7]

A promotion re-points prod's views one statement at a time (the views step,
``core/spark/steps/environment.py``), so between its first and its last statement a reader
can see some views at the new versions and some at the old. This generates a project of
``--models`` SQL models in one graph (``w.m00`` the root, every other model reading one or
two earlier ones, all downstream of the root), plans prod with Sluice's own planner, then a
breaking change of the root (every model gets a new version), and makes each version's
physical table a one-row table holding its version (1 or 2) with one SQL script, on local
Spark in this process (Sluice's own session settings, embedded metastore). Then, in rounds,
the real views step (``run_views`` with the step ``view_steps`` made) swaps all the views
from one version to the other while ``--readers`` threads query without pause, each query
joining a model's view with one of its parents' (both read by one query, as a report
reading two tables does).

Each round is run in three orders of the same step: **parents first** (the step's own
order), **children first** (its reverse) and **shuffled** (a seeded random order, as a
step listing views by name or hash would be). Per order it prints the step's time, the
window the readers saw (from the first read showing a new view to the last read showing
an old one), the reads that saw a mix of old and new, and among them the reads that saw a
model's new view beside an older parent (what the order is for); and, as the yardstick,
one view's swap alone (a one-statement step). The step re-points a view that exists by
``ALTER VIEW ... AS`` (one metastore update); ``--replace`` adds a fourth order, parents first
by ``CREATE OR REPLACE VIEW``, as the step did before issue 45 (Spark runs it as a drop and a
create: a reader between the two finds no view), to compare.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FAILED = -1  # a read that failed (a view not found while it was replaced)
REPLACE = "OR REPLACE"


@dataclass
class Read:
    began: float
    ended: float
    child: str
    parent: str
    child_ver: int
    parent_ver: int


@dataclass
class Round:
    order: str
    new: int  # the version the round swaps to
    began: float = 0.0
    ended: float = 0.0
    reads: list[Read] = field(default_factory=list)

    @property
    def step_seconds(self) -> float:
        return self.ended - self.began

    def during(self) -> list[Read]:
        """Reads that overlapped the step and answered."""
        return [
            r
            for r in self.reads
            if r.ended >= self.began and r.began <= self.ended and r.child_ver != FAILED
        ]

    def failed(self) -> int:
        """Reads during the step that failed."""
        return sum(
            1
            for r in self.reads
            if r.ended >= self.began and r.began <= self.ended and r.child_ver == FAILED
        )

    def window(self) -> float:
        """From the start of the first read seeing a new view to the end of the last read
        seeing an old one, among the reads overlapping the step (0: no read saw a mix)."""
        reads = self.during()
        new = [r.began for r in reads if self.new in (r.child_ver, r.parent_ver)]
        old = [r.ended for r in reads if (3 - self.new) in (r.child_ver, r.parent_ver)]
        mixed = [r for r in reads if r.child_ver != r.parent_ver]
        if not new or not old or not mixed:
            return 0.0
        return max(0.0, max(old) - min(new))

    def mixed(self) -> int:
        return sum(1 for r in self.during() if r.child_ver != r.parent_ver)

    def child_ahead(self) -> int:
        """Reads that saw a model's new view beside its parent's old one."""
        return sum(1 for r in self.during() if r.child_ver == self.new and r.parent_ver != self.new)


def generate(root: Path, models: int, seed: int) -> dict[str, list[str]]:
    """The project (v1) under ``root``; each model's parents."""
    pick = random.Random(seed)
    parents: dict[str, list[str]] = {"w.m00": []}
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text(
        "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n  cron: '@daily'\n"
    )
    (root / "models" / "m00.sql").write_text("MODEL (name w.m00, kind FULL);\nSELECT 1 AS ver")
    for i in range(1, models):
        name = f"w.m{i:02d}"
        chosen = [f"w.m{pick.randrange(max(0, i - 5), i):02d}"]
        if i > 1 and pick.random() < 0.3:
            chosen.append(f"w.m{pick.randrange(0, i):02d}")
        chosen = sorted(set(chosen))
        parents[name] = chosen
        first, *rest = chosen
        joins = "".join(f" JOIN {p} AS p{k} ON p{k}.ver = p0.ver" for k, p in enumerate(rest, 1))
        (root / "models" / f"m{i:02d}.sql").write_text(
            f"MODEL (name {name}, kind FULL);\nSELECT p0.ver FROM {first} AS p0{joins}"
        )
    return parents


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=4, help="rounds per order")
    parser.add_argument("--readers", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--replace",
        action="store_true",
        help="also swap parents first by CREATE OR REPLACE VIEW (the step before issue 45)",
    )
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    sys.path.insert(0, str(ROOT))

    from sluice.core import workflow
    from sluice.core.config import SparkSettings
    from sluice.core.model.loader import load_project
    from sluice.core.model.names import sql_name
    from sluice.core.snapshot.naming import view_name
    from sluice.core.spark.render import view_steps
    from sluice.core.spark.session import SparkPaths, local_session
    from sluice.core.spark.steps.context import StepContext
    from sluice.core.spark.steps.environment import run_views
    from sluice.core.spark.steps.script import run_all
    from sluice.core.state import open_state
    from sluice.core.timeutil import to_ms

    work = Path(tempfile.mkdtemp(prefix="sluice-promotion-window-"))
    parents = generate(work / "v1", args.models, args.seed)
    v2 = work / "v2"
    v2.mkdir()
    (v2 / "models").mkdir()
    for path in (work / "v1").rglob("*.*"):
        target = v2 / path.relative_to(work / "v1")
        target.write_text(path.read_text())
    (v2 / "models" / "m00.sql").write_text(
        "MODEL (name w.m00, kind FULL);\nSELECT 2 AS ver WHERE 2 > 1"
    )
    end = to_ms("2024-01-02")
    store = open_state(f"sqlite:///{work / 'state.db'}")
    plan1 = workflow.plan_environment(
        load_project(work / "v1", use_cache=False), store, "prod", end=end, execution_time=end
    )
    workflow.commit_plan(store, plan1, now=end)
    plan2 = workflow.plan_environment(
        load_project(v2, use_cache=False), store, "prod", end=end, execution_time=end
    )
    store.close()
    old = {s.name: s.version for s in plan1.snapshots}
    rebuilt = [s.name for s in plan2.snapshots if old[s.name] != s.version]
    assert len(rebuilt) == args.models, f"the root's change rebuilt {len(rebuilt)} models"
    steps = {1: view_steps(plan1, {s.name: s.version for s in plan2.snapshots}),
             2: view_steps(plan2, old)}  # fmt: skip
    assert all(len(s["views"]) == args.models for s in steps.values())

    spark = local_session(
        SparkSettings(master="local[2]", conf={"spark.ui.showConsoleProgress": "false"}),
        SparkPaths(root=work / "spark", logs=work / "logs"),
    )
    spark.sparkContext.setLogLevel("ERROR")
    made = time.monotonic()
    schemas = sorted(
        {sql_name(s.table).rsplit(".", 1)[0] for p in (plan1, plan2) for s in p.snapshots}
    )
    run_all(spark, [f"CREATE DATABASE IF NOT EXISTS {schema}" for schema in schemas] + [
        f"CREATE TABLE IF NOT EXISTS {sql_name(s.table)} USING parquet AS SELECT {ver} AS ver"
        for ver, plan in ((1, plan1), (2, plan2)) for s in plan.snapshots
    ])  # fmt: skip
    ctx = StepContext(job={}, emit=lambda _event: None)
    run_views(spark, steps[1], ctx)  # prod at v1, as before the promotion
    print(
        f"promotion window: {args.models} models ({sum(map(len, parents.values()))} edges), "
        f"{2 * args.models} one-row tables made in {time.monotonic() - made:.1f} s; "
        f"{args.readers} readers; Spark {spark.version}, local[2], embedded metastore"
    )

    edges = [(child, parent) for child, ps in parents.items() for parent in ps]
    reads: list[Read] = []
    failures: list[str] = []
    stop = threading.Event()

    def reader(seed: int) -> None:
        pick = random.Random(seed)
        while not stop.is_set():
            child, parent = pick.choice(edges)
            began = time.monotonic()
            try:
                row = spark.sql(
                    f"SELECT c.ver, p.ver FROM {view_name(child, 'prod')} AS c CROSS JOIN "
                    f"(SELECT ver FROM {view_name(parent, 'prod')} LIMIT 1) AS p LIMIT 1"
                ).collect()[0]
            except Exception as exc:  # a view not found mid-swap: counted, not fatal
                failures.append(str(exc).strip().splitlines()[0][:160])
                reads.append(Read(began, time.monotonic(), child, parent, FAILED, FAILED))
                continue
            reads.append(Read(began, time.monotonic(), child, parent, row[0], row[1]))

    threads = [threading.Thread(target=reader, args=(n,), daemon=True) for n in range(args.readers)]
    for thread in threads:
        thread.start()
    time.sleep(3)  # readers warmed up

    shuffle = random.Random(args.seed)
    orders: dict[str, Any] = {
        "parents first": list,
        "children first": lambda views: list(reversed(views)),
        "shuffled": lambda views: shuffle.sample(views, len(views)),
    }
    if args.replace:
        orders[REPLACE] = list

    def swap(order: str, step: Any) -> None:
        if order != REPLACE:
            run_views(spark, step, ctx)
            return
        # The step before issue 45: CREATE OR REPLACE VIEW, which drops the view and
        # creates it again, where the step now re-points it by ALTER VIEW ... AS.
        run_all(spark, [f"CREATE OR REPLACE VIEW {v['view']} AS {v['sql']}" for v in step["views"]])

    rounds: list[Round] = []
    at = 1
    for _ in range(args.rounds):
        for order, arrange in orders.items():
            new = 3 - at
            step = {**steps[new], "views": arrange(steps[new]["views"])}
            done = Round(order, new)
            time.sleep(0.5)
            done.began = time.monotonic()
            swap(order, step)
            done.ended = time.monotonic()
            time.sleep(0.5)
            done.reads = [r for r in reads if r.ended >= done.began - 0.5]
            rounds.append(done)
            at = new
    one: list[float] = []
    for _ in range(args.rounds * 3):
        new = 3 - at
        single = {**steps[new], "views": steps[new]["views"][:1]}
        began = time.monotonic()
        run_views(spark, single, ctx)  # type: ignore[arg-type]
        one.append(time.monotonic() - began)
        at = new
    stop.set()
    for thread in threads:
        thread.join()

    swap_one = statistics.median(one)
    print(f"  one view's swap alone:  p50 {swap_one * 1000:.0f} ms ({len(one)} swaps)")
    print(
        f"  {'order':<15} {'rounds':>6} {'step p50':>9} {'step max':>9} {'window p50':>11} "
        f"{'window max':>11} {'reads':>6} {'mixed':>6} {'new child, old parent':>22} "
        f"{'window / one swap':>18} {'failed reads':>13}"
    )
    for order in orders:
        mine = [r for r in rounds if r.order == order]
        steps_s = [r.step_seconds for r in mine]
        windows = [r.window() for r in mine]
        reads_n = sum(len(r.during()) for r in mine)
        print(
            f"  {order:<15} {len(mine):>6} {statistics.median(steps_s):>8.2f}s "
            f"{max(steps_s):>8.2f}s {statistics.median(windows):>10.2f}s {max(windows):>10.2f}s "
            f"{reads_n:>6} {sum(r.mixed() for r in mine):>6} "
            f"{sum(r.child_ahead() for r in mine):>22} "
            f"{statistics.median(windows) / swap_one:>17.1f}x "
            f"{sum(r.failed() for r in mine):>13}"
        )
    for message, count in Counter(failures).most_common(3):
        print(f"  failed reads: {count} x {message}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
