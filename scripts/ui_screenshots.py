"""Screenshots of the web UI's pages on the demo, for the docs and the README (issue 44).

    .venv/bin/python scripts/ui_screenshots.py [--project .sluice-demo] [--out docs/screenshots]

Serves the demo's repository with ``sluice ui --project DIR`` (127.0.0.1, read only, no
sign-in: what the README's one-step command opens), opens each page in Debian's Chromium
driven by Playwright (no browser download: installed as scripts/ensure-mermaid.sh does,
launched as tests/helpers/web.py launches it) at 1280x800, and writes one PNG a page
(the viewport, not the whole page: each stays small). A project that does not exist yet
is made first by ``sluice demo --keep --dir DIR`` (minutes: it runs the whole flow on
local Spark). The lineage page is taken last, and only when the service has one.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLUICE = ROOT / ".venv" / "bin" / "sluice"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
VIEWPORT = {"width": 1280, "height": 800}
MAX_BYTES = 150 * 1024
PAGES = (
    ("environments", "/ui/environments"),
    ("environment", "/ui/environments/pr_1"),
    ("pull-request", "/ui/pulls/1"),
    ("table-diff", "/ui/pulls/1/table-diffs/jaffle.orders?kind=source_only"),
    ("jobs", "/ui/jobs"),
    ("job-log", "/ui/jobs/{job}"),
    ("history", "/ui/history"),
    ("intervals", "/ui/environments/prod/intervals"),
    ("models", "/ui/models"),
    ("model", "/ui/models/jaffle.customers"),
    ("audit", "/ui/audit"),
)
LINEAGE = ("lineage", "/ui/lineage")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def _serve(project: Path, port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [str(SLUICE), "ui", "--project", str(project), "--port", str(port)],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"sluice ui exited with {server.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return server
        except OSError:
            time.sleep(0.2)
    server.terminate()
    raise SystemExit("sluice ui did not start within 60 s")


def _first_job(project: Path) -> str | None:
    """A job's log to show: prod's first apply (its steps, one a line), else the pull
    request's build (its last lines are long JSON results), else any."""
    logs = sorted((project / ".sluice" / "logs").glob("*.log"))
    for prefix in ("apply-", "preview-", ""):
        found = [p for p in logs if p.name.startswith(prefix)]
        if found:
            return found[0].name.removesuffix(".log")
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project", type=Path, default=ROOT / ".sluice-demo")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    if not (args.project / ".sluice" / "state.db").is_file():
        print(f"no demo at {args.project}: running `sluice demo --keep` first (minutes)")
        subprocess.run([str(SLUICE), "demo", "--keep", "--dir", str(args.project)], check=True)
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    origin = f"http://127.0.0.1:{port}"
    server = _serve(args.project, port)
    job = _first_job(args.project)
    pages = [(n, p.format(job=job)) for n, p in PAGES if job is not None or "{job}" not in p]
    try:
        if _status(f"{origin}{LINEAGE[1]}") == 200:
            pages.append(LINEAGE)  # last: built beside this script, taken when it is there
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            for name, path in pages:
                answer = page.goto(f"{origin}{path}", wait_until="networkidle")
                if answer is None or answer.status != 200:
                    raise SystemExit(f"{path}: {answer.status if answer else 'no answer'}")
                target = args.out / f"{name}.png"
                page.screenshot(path=str(target))
                size = target.stat().st_size
                flag = "" if size <= MAX_BYTES else f" (over {MAX_BYTES // 1024} KiB)"
                print(f"{target}: {path}, {size // 1024} KiB{flag}")
            browser.close()
        if errors:
            raise SystemExit("console errors:\n" + "\n".join(errors))
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
