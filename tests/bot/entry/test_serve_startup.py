"""`sluice serve` at start-up: one summary of what runs (never a password), and no start
without forge credentials unless SLUICE_NO_FORGE says so. uvicorn is not run: the command
is stopped where it would start it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from click.testing import CliRunner

from sluice import __version__
from sluice.bot.entry.settings import ServiceSettings, redacted_spark_remote, redacted_url
from sluice.cli import cli

PASSWORD = "pw-S3cret-never-logged"
TOKEN = "ghp_" + "t" * 36


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """No SLUICE_* setting but the test's; uvicorn.run recorded instead of run; the root
    logger as it was after (the command points it at the runner's stream)."""
    import os

    for name in list(os.environ):
        if name.startswith("SLUICE_") and name != "SLUICE_SANDBOX":
            monkeypatch.delenv(name)
    monkeypatch.setenv("SLUICE_WORKDIR", str(tmp_path / "work"))
    started: dict[str, Any] = {}

    def run(app: Any, **kwargs: Any) -> None:
        started.update(kwargs, app=app)

    monkeypatch.setattr(uvicorn, "run", run)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield started
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def _serve(*args: str) -> Any:
    return CliRunner().invoke(cli, ["serve", *args])


def test_start_up_prints_one_summary_without_the_password(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SLUICE_WEBHOOK_SECRET", "hook-secret")
    monkeypatch.setenv("SLUICE_GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv(
        "SLUICE_DATABASE_URL", f"postgresql+psycopg://sluice:{PASSWORD}@db.internal:5432/sluice"
    )
    monkeypatch.setenv("SLUICE_REPOSITORIES", "acme/warehouse gitlab:data/*")
    monkeypatch.setenv("SLUICE_SPARK_MODE", "submit")
    monkeypatch.setenv("SLUICE_SPARK_MASTER", "spark://master:7077")
    # Two repositories on a cluster's Spark: kept apart by name only, as accepted here.
    monkeypatch.setenv("SLUICE_ISOLATE_ACCEPT_SHARED_SPARK", "true")
    monkeypatch.setenv("SLUICE_WORKERS", "3")
    result = _serve("--port", "8123")
    assert result.exit_code == 0, result.output
    assert env["port"] == 8123 and env["access_log"] is False
    out = result.output
    assert out.count(f"Sluice {__version__} starting") == 1, out
    block = out[out.index("Sluice ") :]
    for expected in (
        "forge:        github (token, https://api.github.com)",
        "repositories: acme/warehouse, gitlab:data/*",
        "spark:        submit: one spark-submit per job, master spark://master:7077; "
        "repositories share it (SLUICE_ISOLATE_ACCEPT_SHARED_SPARK)",
        "workers:      3",
        "state:        postgresql+psycopg://sluice:***@db.internal:5432/sluice",
        f"workdir:      {(tmp_path / 'work').resolve()}",
        "sandbox:      ",
        "listening:    http://127.0.0.1:8123",
    ):
        assert expected in block, (expected, out)
    for secret in (PASSWORD, TOKEN, "hook-secret"):
        assert secret not in out


def test_the_summary_names_the_warm_spark_and_any_repository(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SLUICE_GITLAB_WEBHOOK_SECRET", "hook-secret")
    monkeypatch.setenv("SLUICE_GITLAB_TOKEN", "glpat-secret-token")
    monkeypatch.setenv("SLUICE_GITLAB_URL", "https://gitlab.example")
    result = _serve()
    assert result.exit_code == 0, result.output
    out = result.output
    assert "forge:        gitlab (token, https://gitlab.example)" in out
    assert "repositories: any (SLUICE_REPOSITORIES is not set)" in out
    assert "spark:        connect: the service's own Spark Connect server on 127.0.0.1" in out
    assert f"state:        sqlite:///{(tmp_path / 'work' / 'state.db').resolve()}" in out
    assert "workers:      1" in out
    assert "glpat-secret-token" not in out


def test_a_remote_connect_endpoints_token_and_a_urls_secrets_are_hidden() -> None:
    settings = ServiceSettings(
        webhook_secret="s", github_app_id="42", github_private_key="-----BEGIN KEY-----",
        spark_remote="sc://spark.example:15002/;token=abc123;user_id=me",
        database_url=f"postgresql://u:{PASSWORD}@h/db?sslmode=require&sslpassword={PASSWORD}",
    )  # type: ignore[arg-type]  # fmt: skip
    text = settings.summary("sandbox: bubblewrap")
    assert "forge:        github (App 42, https://api.github.com)" in text
    assert (
        "connect: the Spark Connect server at sc://spark.example:15002/;token=***;user_id=me"
        in text
    )
    assert "sslmode=require" in text and "sandbox:      bubblewrap" in text
    assert PASSWORD not in text and "abc123" not in text and "BEGIN KEY" not in text
    assert redacted_url(f"mysql://root:{PASSWORD}@x/y") == "mysql://root:***@x/y"
    assert PASSWORD not in redacted_url(f"not a url://a:{PASSWORD}@b")
    assert redacted_spark_remote("sc://h:1") == "sc://h:1"
    # A forge URL with a user and password (or a token as its user) in it: neither shown.
    gitlab = ServiceSettings(
        webhook_secret="s", gitlab_webhook_secret="g", gitlab_token="glpat-x",
        gitlab_url=f"https://oauth2:{PASSWORD}@gitlab.example.com",
    )  # type: ignore[arg-type]  # fmt: skip
    assert "https://***@gitlab.example.com" in gitlab.summary("")
    assert PASSWORD not in gitlab.summary("")


@pytest.mark.parametrize(
    ("setting", "missing", "fix"),
    [
        ("SLUICE_WEBHOOK_SECRET", "no GitHub credentials", "SLUICE_GITHUB_TOKEN"),
        ("SLUICE_GITLAB_WEBHOOK_SECRET", "no GitLab credentials", "SLUICE_GITLAB_TOKEN"),
    ],
)
def test_no_start_without_the_forges_credentials(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch, setting: str, missing: str, fix: str
) -> None:
    monkeypatch.setenv(setting, "hook-secret")
    result = _serve()
    assert result.exit_code == 1, result.output
    assert missing in result.output and fix in result.output, result.output
    assert "SLUICE_NO_FORGE=1" in result.output and "hint:" in result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    assert env == {}  # uvicorn never started


def test_both_forges_each_need_their_credentials(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICE_WEBHOOK_SECRET", "a")
    monkeypatch.setenv("SLUICE_GITLAB_WEBHOOK_SECRET", "b")
    monkeypatch.setenv("SLUICE_GITHUB_TOKEN", TOKEN)
    refused = _serve()
    assert refused.exit_code == 1 and "no GitLab credentials" in refused.output
    monkeypatch.setenv("SLUICE_GITLAB_TOKEN", "glpat-x")
    started = _serve()
    assert started.exit_code == 0, started.output
    assert "forge:        github (token, https://api.github.com), gitlab (token, " in started.output


def test_insecure_without_any_credentials_is_refused_too(env: dict[str, Any]) -> None:
    result = _serve("--insecure")
    assert result.exit_code == 1
    assert "no forge credentials" in result.output and "SLUICE_NO_FORGE=1" in result.output
    assert env == {}


def test_sluice_no_forge_starts_without_credentials_and_says_so(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICE_WEBHOOK_SECRET", "a")
    monkeypatch.setenv("SLUICE_NO_FORGE", "1")
    result = _serve()
    assert result.exit_code == 0, result.output
    assert "forge:        none (SLUICE_NO_FORGE" in result.output
    assert env["app"] is not None
    insecure = _serve("--insecure")
    assert insecure.exit_code == 0, insecure.output
    assert "webhook signatures NOT checked" in insecure.output
