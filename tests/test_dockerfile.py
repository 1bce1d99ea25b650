"""The Dockerfile: no Docker engine runs here, so read it and check it against what CI does."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        pending += line
        word, _, args = pending.partition(" ")
        out.append((word.upper(), args.strip()))
        pending = ""
    assert not pending, "the Dockerfile ends with a continuation line"
    return out


def _all(name: str) -> list[str]:
    return [args for word, args in _instructions() if word == name]


def _one(name: str) -> str:
    found = _all(name)
    assert len(found) == 1, f"expected one {name}, found {found}"
    return found[0]


def _exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list)
    return [str(v) for v in value]


def _served_port() -> int:
    cmd = _exec_form(_one("CMD"))
    assert "--port" in cmd
    return int(cmd[cmd.index("--port") + 1])


def _base_image() -> str:
    """The FROM image, with a `${NAME}` taken from the default of the ARG before FROM."""
    base = _all("FROM")
    assert len(base) == 1
    image = base[0].split()[0]
    match = re.fullmatch(r"\$\{?(\w+)\}?", image)
    if match:
        steps = _instructions()
        before = steps[: steps.index(("FROM", base[0]))]
        defaults = dict(a.partition("=")[::2] for w, a in before if w == "ARG")
        image = defaults.get(match.group(1), "")
    return image


def test_base_image_is_python_311_slim_not_alpine() -> None:
    image = _base_image()
    assert image.startswith("python:3.11-slim"), image
    assert "alpine" not in image


def test_base_image_is_pinned_by_digest() -> None:
    # the tag says what it is, the digest fixes which build: a rebuild gets the same base
    assert re.fullmatch(r"python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}", _base_image())


def test_tini_is_pid_1_and_runs_the_command() -> None:
    runs = " ; ".join(_all("RUN"))
    assert re.search(r"apt-get install\b[^;&]*--no-install-recommends[^;&]*\btini\b", runs)
    assert _exec_form(_one("ENTRYPOINT")) == ["tini", "--"]


def test_the_proxy_ca_is_a_build_secret_not_part_of_the_image() -> None:
    steps = _instructions()
    assert ("ARG", "PIP_CERT") in steps  # no default: unset unless --build-arg gives it
    assert not any("PIP_CERT" in a or "REQUESTS_CA_BUNDLE" in a for w, a in steps if w == "ENV")
    deps = next(r for r in _all("RUN") if "runtime.lock" in r)
    assert deps.startswith("--mount=type=secret,id=pip_cert ")


def test_installs_a_java_17_runtime_with_apt_and_cleans_up() -> None:
    runs = " ; ".join(_all("RUN"))
    assert re.search(r"apt-get install\b[^;&]*--no-install-recommends[^;&]*openjdk-17-jre", runs)
    assert "rm -rf /var/lib/apt/lists/*" in runs
    # the same package scripts/ensure-java.sh installs for CI
    assert "openjdk-17-jre-headless" in (ROOT / "scripts" / "ensure-java.sh").read_text()


def test_installs_the_hashed_lock_before_the_source() -> None:
    installs = [r for r in _all("RUN") if "pip install" in r]
    assert len(installs) == 2
    deps = shlex.split(installs[0])
    assert deps[deps.index("-r") + 1] == "requirements/runtime.lock"
    assert "--require-hashes" in deps and "--no-cache-dir" in deps
    own = shlex.split(installs[1].split("&&")[0])
    assert {"--no-deps", "--no-build-isolation", "--no-cache-dir"} <= set(own)
    # the lock is copied alone before the dependencies' layer; the source only after it
    steps = [f"{w} {a}" for w, a in _instructions()]
    lock_copy = next(i for i, s in enumerate(steps) if s.startswith("COPY") and "runtime.lock" in s)
    deps_run = steps.index(f"RUN {installs[0]}")
    source_copy = next(
        i for i, s in enumerate(steps) if s.startswith("COPY") and "sluice" in s.split()
    )
    assert lock_copy < deps_run < source_copy
    assert steps[lock_copy].split()[1:-1] == ["requirements/runtime.lock"]


def test_runs_as_a_non_root_user_after_installing() -> None:
    words = [w for w, _ in _instructions()]
    user = _one("USER").split(":")[0]
    assert user not in ("root", "0")
    assert words.index("USER") > max(
        i for i, (w, a) in enumerate(_instructions()) if w == "RUN" and "pip install" in a
    )
    assert any(user in r and "useradd" in r for r in _all("RUN"))


def test_workdir_setting_points_at_a_writable_volume() -> None:
    env = " ".join(_all("ENV"))
    match = re.search(r"SLUICE_WORKDIR=(\S+)", env)
    assert match, "SLUICE_WORKDIR is not set"
    path = match.group(1)
    assert path in _one("VOLUME")
    assert any("chown" in r and path in r for r in _all("RUN"))


def test_exposes_the_port_the_command_serves_and_checks_health_there() -> None:
    port = _served_port()
    assert _one("EXPOSE").split() == [str(port)]
    health = _one("HEALTHCHECK")
    assert health.split()[0] != "NONE"
    probe = _exec_form(health[health.index("CMD") + len("CMD") :].strip())
    assert probe[0] == "python"  # no curl in the slim image
    urls = re.findall(r"https?://[^'\" ]+", " ".join(probe))
    assert urls == [f"http://127.0.0.1:{port}/healthz"]


def test_the_default_command_is_sluice_serve_on_all_interfaces() -> None:
    cmd = _exec_form(_one("CMD"))
    assert cmd[:2] == ["sluice", "serve"]
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0"


def test_the_served_port_is_the_service_default() -> None:
    from click.testing import CliRunner

    from sluice.cli import cli

    help_text = CliRunner().invoke(cli, ["serve", "--help"]).output
    assert re.search(rf"--port\s+INTEGER\s+Port to listen on.\s+\[default:\s*{_served_port()}\]",
                     help_text), help_text  # fmt: skip


@pytest.mark.parametrize("ignored", [".venv", ".git", ".sluice", ".pytest_cache", ".mypy_cache"])
def test_dockerignore_keeps_local_state_out_of_the_context(ignored: str) -> None:
    patterns = [
        line.strip().rstrip("/").rstrip("*")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
    ]
    assert ignored in patterns
