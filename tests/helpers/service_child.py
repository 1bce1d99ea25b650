"""A service process for the restart test: the real app on uvicorn, GitHub faked at the wire.

Run as ``python -m tests.helpers.service_child PORT WORKDIR DATABASE_URL GITHUB_STATE TREES``.
The fake GitHub keeps its state in the GITHUB_STATE file, so what this process posted
survives ``kill -9``; TREES holds ``<sha>.tar.gz`` archives the fake serves.

With ``CHAOS_INSPECT=1`` in its environment the app also answers ``POST /_chaos/inspect``
(``{"queries": {name: sql}}``, loopback only): the Spark catalog and the queries' rows,
read by a Connect client child (``tests/helpers/catalog_inspect.py``) on the service's own
warm server, with the token only this process knows; 404 when no server of the service
runs. So the crash bench checks the catalog without stopping the service and its server
(which holds the embedded metastore) and starting both again after each trial.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import responses
import uvicorn

from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from sluice.core.spark import connect
from tests.helpers.github_wire import FakeGitHub

SECRET = "restart-test-secret"
REPO = Path(__file__).resolve().parents[2]


def add_inspect_route(app: Any, workdir: Path) -> None:
    """``POST /_chaos/inspect``: the catalog through the service's running Connect server."""
    from fastapi.responses import JSONResponse

    root = (workdir / "spark").resolve()

    def inspect(body: dict[str, Any]) -> JSONResponse:
        server = connect._SERVERS.get(root)  # the service's own, never one made here
        if server is None or not server.running():
            return JSONResponse({"error": "no Spark Connect server runs"}, status_code=404)
        url, token = server.connection()
        with tempfile.TemporaryDirectory(prefix="chaos-inspect-") as tmp:
            request, out = Path(tmp, "request.json"), Path(tmp, "out.json")
            request.write_text(json.dumps({"queries": body.get("queries") or {}}))
            env = {**os.environ, connect.REMOTE_ENV: url, connect.TOKEN_ENV: token}
            done = subprocess.run(
                [sys.executable, "-m", "tests.helpers.catalog_inspect", str(request), str(out)],
                cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False,
            )  # fmt: skip
            if done.returncode != 0 or not out.exists():
                tail = "\n".join(done.stderr.splitlines()[-20:])
                return JSONResponse({"error": tail}, status_code=500)
            return JSONResponse(json.loads(out.read_text()))

    app.add_api_route("/_chaos/inspect", inspect, methods=["POST"])


def main(port: int, workdir: str, url: str, state: str, trees: str) -> None:
    settings = ServiceSettings(
        webhook_secret=SECRET, github_token="ghp_restartTestToken", workdir=Path(workdir),
        database_url=url, job_lease_seconds=4, github_request_interval=0, github_write_interval=0,
    )  # type: ignore[arg-type]  # fmt: skip
    github = FakeGitHub(state_file=Path(state))
    github.trees = {
        p.name.removesuffix(".tar.gz"): p.read_bytes() for p in Path(trees).glob("*.tar.gz")
    }
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_passthru("http://127.0.0.1")
        github.install(mock)
        app = create_app(settings)
        if os.environ.get("CHAOS_INSPECT") == "1":
            add_inspect_route(app, Path(workdir))
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]), *sys.argv[2:6])
