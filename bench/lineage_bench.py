"""Benchmark: the lineage page (issue 44, item 3) at 100 and 1,000 models: the API's
server time and the page's time to interactive, against the Models page and, where its
virtualenv has the ``web`` extra, SQLMesh's own web server on the same project.

Usage: python bench/lineage_bench.py [--sizes 100,1000] [--reps 5] [--against-sqlmesh VENV]

Each size is ``tests/helpers/lineage_world.py``'s project (``bench/plan_bench.py``'s
generated models, layers of 50 reading one to three earlier models, ten external tables)
planned into a fresh SQLite state without Spark: prod, and ``pr_1`` with one model
changed. ``sluice ui``'s app is served by a real uvicorn on loopback and asked over HTTP
(httpx, one connection): "first" is the first request of a fresh server (prod's
snapshots decoded, the queries parsed and analysed), "warm" the median of ``--reps``
more. What is timed:

- ``graph``: ``GET /api/v1/lineage`` (every model and edge); ``graph+plan``: with
  ``pr_1``'s plan colouring it; ``focus``: cut two steps around the changed model;
  ``column``: ``GET /api/v1/lineage/columns`` of the changed model's ``v0`` (its sources
  and everything it reaches); ``column of a leaf``: the last model's ``v0`` (nothing
  reads it: its sources only, what SQLMesh's column lineage answers);
- the baseline, the Models page's own API, ``GET /api/v1/models?limit=200``, and the page
  ``/ui/models`` (one page of 50), on a server of their own;
- in Debian's Chromium (Playwright): from navigation start to the graph laid out and
  painted (the page's ``data-ready-ms``, ``performance.now()`` at the frame after the
  layout), for the whole graph and for a focus on the changed model, against the Models
  page's load event; "first" with an empty cache, "warm" the median of ``--reps``
  (the scripts cached, as a person's second visit).

``--against-sqlmesh VENV`` (default: ``~/.cache/sluice/sqlmesh-0.236.4`` when it has
``fastapi``, the ``web`` extra: ``uv pip install 'sqlmesh[web]==0.236.4'``) serves the
same project with SQLMesh's web server (``web.server.app:app`` under uvicorn, a DuckDB
gateway) and asks ``GET /api/models`` (the model list its UI draws its graph from) and
``GET /api/lineage/{model}/{column}`` (its column lineage) the same way; "first" is after
the context is loaded (its first ``/api/models`` loads the project: reported apart).
SQLMesh's UI itself is not timed (a single-page app whose graph is drawn after several
API calls and a route of its own; see docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from sluice.bot.web.standalone import ui_app  # noqa: E402
from tests.helpers.lineage_world import LineageWorld, lineage_world  # noqa: E402
from tests.helpers.web import chromium, served  # noqa: E402

SQLMESH_VENV = Path.home() / ".cache" / "sluice" / "sqlmesh-0.236.4"
READY = "[data-testid=lineage-graph][data-ready=true]"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f}"


def timed_get(client: httpx.Client, url: str, **params: Any) -> float:
    began = time.perf_counter()
    answer = client.get(url, params=params)
    took = time.perf_counter() - began
    if answer.status_code != 200:
        raise SystemExit(f"{url} {params}: HTTP {answer.status_code}: {answer.text[:300]}")
    return took


def first_and_warm(ask: Callable[[], float], reps: int) -> tuple[float, float]:
    first = ask()
    return first, statistics.median(ask() for _ in range(reps))


@contextmanager
def server(world: LineageWorld) -> Iterator[httpx.Client]:
    with served(ui_app(world.site())) as origin, httpx.Client(base_url=origin) as client:
        yield client


def api_times(world: LineageWorld, reps: int) -> dict[str, tuple[float, float]]:
    found: dict[str, tuple[float, float]] = {}
    with server(world) as client:
        found["graph"] = first_and_warm(lambda: timed_get(client, "/api/v1/lineage"), reps)
        found["graph+plan"] = first_and_warm(
            lambda: timed_get(client, "/api/v1/lineage", plan=world.plan_id), reps
        )
        found["focus"] = first_and_warm(
            lambda: timed_get(client, "/api/v1/lineage", focus=world.changed, up=2, down=2), reps
        )
        found["column"] = first_and_warm(
            lambda: timed_get(client, "/api/v1/lineage/columns", model=world.changed, column="v0"),
            reps,
        )
        found["column of a leaf"] = first_and_warm(
            lambda: timed_get(
                client, "/api/v1/lineage/columns", model=world.names[-1], column="v0"
            ),
            reps,
        )
    with server(world) as client:  # the baseline on a fresh server: it decodes prod too
        found["models API"] = first_and_warm(
            lambda: timed_get(client, "/api/v1/models", limit=200), reps
        )
        found["models page"] = first_and_warm(lambda: timed_get(client, "/ui/models"), reps)
    return found


def page_times(world: LineageWorld, reps: int) -> dict[str, tuple[float, float]]:
    found: dict[str, tuple[float, float]] = {}
    with server(world) as client, chromium() as browser:
        origin = str(client.base_url).rstrip("/")
        context = browser.new_context(viewport={"width": 1400, "height": 900})

        def lineage(query: str) -> float:
            page = context.new_page()
            page.goto(f"{origin}/ui/lineage{query}")
            page.wait_for_selector(READY, timeout=120_000)
            ready = float(page.get_attribute("[data-testid=lineage-graph]", "data-ready-ms"))
            page.close()
            return ready / 1000

        def models() -> float:
            page = context.new_page()
            page.goto(f"{origin}/ui/models")
            took = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
            page.close()
            return float(took) / 1000

        found["whole graph"] = first_and_warm(lambda: lineage(""), reps)
        found["focus"] = first_and_warm(lambda: lineage(f"?focus={world.changed}"), reps)
        found["models page"] = first_and_warm(models, reps)
        context.close()
    return found


SQLMESH_CONFIG = """gateways:
  local:
    connection:
      type: duckdb
      database: {db}
default_gateway: local
model_defaults:
  dialect: spark
  start: '2024-01-01'
  cron: '@daily'
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sqlmesh_times(
    venv: Path, world: LineageWorld, project: Path, reps: int
) -> dict[str, tuple[float, float]]:
    """SQLMesh's web server on a copy of ``project``: its load, model list and lineage."""
    folder = Path(tempfile.mkdtemp(prefix="sqlmesh-lineage-"))
    copy = folder / "project"
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns(".sluice"))
    (copy / "config.yaml").write_text(SQLMESH_CONFIG.format(db=folder / "state.duckdb"))
    port = free_port()
    env = {**os.environ, "PROJECT_PATH": str(copy), "UI_MODE": "ide"}
    command = [str(venv / "bin" / "python"), "-m", "uvicorn", "web.server.app:app"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    log = open(folder / "server.log", "w")  # noqa: SIM115 - closed below
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=copy)
    found: dict[str, tuple[float, float]] = {}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
            deadline = time.monotonic() + 60
            while True:
                try:
                    client.get("/api/meta")
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise SystemExit(
                            f"SQLMesh's server did not start: {folder}/server.log"
                        ) from None
                    time.sleep(0.2)
            load = timed_get(client, "/api/models")  # loads the project's context
            found["load (first /api/models)"] = (load, load)
            found["models"] = first_and_warm(lambda: timed_get(client, "/api/models"), reps)
            found["column"] = first_and_warm(
                lambda: timed_get(client, f"/api/lineage/{world.changed}/v0"), reps
            )
            found["column of a leaf"] = first_and_warm(
                lambda: timed_get(client, f"/api/lineage/{world.names[-1]}/v0"), reps
            )
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
    return found


def has_web(venv: Path) -> bool:
    python = venv / "bin" / "python"
    if not python.exists():
        return False
    check = [str(python), "-c", "import fastapi, web.server.app"]
    return subprocess.run(check, capture_output=True, check=False).returncode == 0


def show(title: str, rows: dict[str, tuple[float, float]]) -> None:
    print(f"  {title}")
    print(f"    {'':28} {'first ms':>8} {'warm ms':>8}")
    for name, (first, warm) in rows.items():
        print(f"    {name:28} {ms(first)} {ms(warm)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--against-sqlmesh", type=Path, default=None, metavar="VENV")
    parser.add_argument("--no-browser", action="store_true", help="the API's times only")
    parser.add_argument("--no-sqlmesh", action="store_true", help="leave SQLMesh out")
    args = parser.parse_args()
    venv = args.against_sqlmesh or SQLMESH_VENV
    sqlmesh = has_web(venv) and not args.no_sqlmesh
    if args.against_sqlmesh and not sqlmesh:
        raise SystemExit(f"{venv}: no SQLMesh web server (uv pip install 'sqlmesh[web]')")
    if not sqlmesh:
        print(f"(SQLMesh's web server not found at {venv}: its times are left out)")
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix=f"lineage-{size}-") as tmp:
            began = time.perf_counter()
            world = lineage_world(Path(tmp), size)
            print(
                f"\n{size} models (+ 10 external, + 1): built in {time.perf_counter() - began:.1f} s"
            )
            api = api_times(world, args.reps)
            show("Sluice API (server, over loopback HTTP)", api)
            graph, baseline = api["graph"][1], api["models API"][1]
            print(f"    graph / models API (warm): {graph / baseline:.2f}x")
            if not args.no_browser:
                pages = page_times(world, args.reps)
                show("Sluice pages, navigation start to interactive (Chromium)", pages)
                whole, focus, models = (
                    pages[k][1] for k in ("whole graph", "focus", "models page")
                )
                print(
                    f"    whole graph / models page (warm): {whole / models:.2f}x; "
                    f"focus / models page: {focus / models:.2f}x"
                )
            if sqlmesh:
                theirs = sqlmesh_times(venv, world, Path(tmp) / "project", args.reps)
                show(f"SQLMesh's web server ({venv.name})", theirs)
                print(
                    f"    Sluice graph / SQLMesh /api/models (warm): "
                    f"{api['graph'][1] / theirs['models'][1]:.3f}x; "
                    f"Sluice column / SQLMesh column lineage: first "
                    f"{api['column'][0] / theirs['column'][0]:.3f}x, warm "
                    f"{api['column'][1] / theirs['column'][1]:.3f}x; of a leaf: first "
                    f"{api['column of a leaf'][0] / theirs['column of a leaf'][0]:.3f}x, "
                    f"warm {api['column of a leaf'][1] / theirs['column of a leaf'][1]:.3f}x"
                )


if __name__ == "__main__":
    main()
