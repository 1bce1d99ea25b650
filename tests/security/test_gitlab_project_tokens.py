"""Each GitLab project's webhook holds a token of its own (names red team round 4,
findings 1 and 2): ``HMAC-SHA256(SLUICE_GITLAB_WEBHOOK_SECRET, "sluice-gitlab-project:<id>")``
in hex, checked in constant time against the body's ``project.id``
(``intake/verify.py``, ``entry/app.py`` ``_receive``).

The attacker maintains one served project, so she holds its webhook token (GitLab shows
it to every maintainer of the project), and can send the service any body she likes. She
does not hold the service's secret, nor another project's token. Driven through the whole
service: the real app, real Merge Request Hook bodies, python-gitlab against ``FakeGitLab``
at the wire, the queue. No Spark: the merge request changes no model.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses
from click.testing import CliRunner
from fastapi.testclient import TestClient

from sluice.bot.entry.app import create_app
from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.intake import verify
from sluice.cli import cli
from tests.helpers.cases import load_case
from tests.helpers.gitlab_service import TOKEN, GitLabService, gitlab_settings, project_token
from tests.helpers.gitlab_wire import FakeGitLab

V_PATH, V_ID = "data/warehouse", 4242  # the victim project (FakeGitLab's)
M_PATH, M_ID = "data/mallory", 7777  # the attacker's project, served too
HOOK = "Merge Request Hook"
HEAD = "c0ffee" + "0" * 34


def _serve(root: Path, **more: Any) -> Iterator[GitLabService]:
    settings = gitlab_settings(root, **{"repositories": ("gitlab:data/*",), **more})
    gitlab = FakeGitLab(project=V_PATH, project_id=V_ID)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        gitlab.install(mock)
        with TestClient(create_app(settings)) as client:
            yield GitLabService(client, gitlab, settings)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[GitLabService]:
    yield from _serve(tmp_path)


def _opened(
    service: GitLabService, root: Path, path: str = V_PATH, project_id: Any = V_ID
) -> dict[str, Any]:
    """A real Merge Request Hook body: MR !3 opened in ``path`` (id ``project_id``), whose
    head (an empty project: no model) GitLab has."""
    payload = load_case("gitlab/merge_request_open.json")
    payload["project"].update(id=project_id, path_with_namespace=path)
    attrs = payload["object_attributes"]
    attrs.update(source_project_id=V_ID, target_project_id=V_ID, target_branch="main")
    for side in ("source", "target"):
        attrs[side].update(id=V_ID, path_with_namespace=V_PATH)
    attrs["last_commit"]["id"] = HEAD
    src = root / "src"
    (src / "models").mkdir(parents=True, exist_ok=True)
    (src / "config.yaml").write_text("sluice:\n  project: demo\n")
    service.gitlab.add_mr(3, sha=HEAD, source_branch=attrs["source_branch"],
                          target_branch="main", author="someone")  # fmt: skip
    service.gitlab.add_tree(HEAD, src)
    return payload


def _wrote(gitlab: FakeGitLab) -> list[tuple[str, str]]:
    return [(m, p) for m, p in gitlab.requests if m != "GET"]


def _refused(response: Any, project: int | None) -> None:
    """401, naming the command that prints the token expected, and no token."""
    assert response.status_code == 401, response.text
    said = response.json()["error"]
    assert said.startswith("missing or wrong X-Gitlab-Token: ")
    shown = "<project id>" if project is None else str(project)
    assert f"`sluice gitlab-webhook-token {shown}`" in said, said
    for secret in (TOKEN, project_token(V_ID), project_token(M_ID)):
        assert secret not in response.text


def test_another_served_project_s_token_is_refused_for_this_project(
    service: GitLabService, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """mallory holds data/mallory's token; a body of V's (id and path) carrying it is
    refused before anything is stored or asked of GitLab, and so is her own project's id
    with V's path when the token is V's (which she does not hold: the id decides)."""
    caplog.set_level(logging.INFO)
    body = _opened(service, tmp_path)
    _refused(service.deliver(HOOK, body, token=project_token(M_ID)), V_ID)
    swapped = _opened(service, tmp_path, V_PATH, M_ID)
    _refused(service.deliver(HOOK, swapped, token=project_token(V_ID)), M_ID)
    assert service.counts() == {} and service.gitlab.requests == []
    assert project_token(M_ID) not in caplog.text and TOKEN not in caplog.text


@pytest.mark.parametrize(
    "repositories",
    [
        ("gitlab:data/*",),  # a pattern
        (),  # any repository
        ("gitlab:data/warehouse", "gitlab:data/mallory"),  # two projects
        ("gitlab:data/warehouse", "acme/warehouse"),  # an unprefixed entry may be GitLab's
        ("gitlab:data/warehouse?",),
    ],
)
def test_the_bare_secret_is_refused_as_a_project_s_token(
    tmp_path: Path, repositories: tuple[str, ...]
) -> None:
    """The secret every project's webhook held before per-project tokens: whoever saw it
    in any project's settings could sign any project's hooks. Refused unless the service
    serves exactly one GitLab project named without a pattern."""
    for service in _serve(tmp_path, repositories=repositories):
        assert not service.settings.gitlab_shared_secret()
        _refused(service.deliver(HOOK, _opened(service, tmp_path), token=TOKEN), None)
        assert service.counts() == {} and service.gitlab.requests == []


def test_a_service_of_one_project_still_takes_the_bare_secret_for_that_project_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The legacy case: ``SLUICE_REPOSITORIES`` names one GitLab project, no pattern (and
    maybe GitHub repositories, whose secret is another). The secret's holders are that
    project's maintainers; another project's body carrying it is still refused (403, not
    served)."""
    caplog.set_level(logging.INFO)
    served = ("gitlab:data/warehouse", "github:acme/warehouse")
    for service in _serve(tmp_path, repositories=served):
        assert service.settings.gitlab_shared_secret()
        assert "its webhook may hold SLUICE_GITLAB_WEBHOOK_SECRET itself" in caplog.text
        other = service.deliver(HOOK, _opened(service, tmp_path, M_PATH, M_ID), token=TOKEN)
        assert other.status_code == 403, other.text
        response = service.deliver(HOOK, _opened(service, tmp_path), token=TOKEN)
        assert response.status_code == 202, response.text
        # The project's own token works there too (a webhook moved to it early).
        again = service.deliver(HOOK, _opened(service, tmp_path), token=project_token(V_ID))
        assert again.status_code in (200, 202), again.text


@pytest.mark.parametrize(
    "project",
    [
        None,
        {},
        {"id": None},
        {"id": "4242"},
        {"id": True},
        {"id": 0},
        {"id": -4242},
        {"id": 4242.0},
        [4242],
        "4242",
    ],
)
def test_a_body_without_a_project_id_is_refused(
    service: GitLabService, tmp_path: Path, project: Any
) -> None:
    """No ``project.id`` (or one that is no positive integer: ``true`` is 1 to Python, so a
    token of project 1 must not pass for it): no project whose token could sign it."""
    body = _opened(service, tmp_path)
    if project is None:
        del body["project"]
    else:
        body["project"] = project
    for token in (project_token(V_ID), project_token(1), TOKEN):
        _refused(service.deliver(HOOK, body, token=token), None)
    assert service.counts() == {} and service.gitlab.requests == []


def test_a_project_s_token_with_another_project_s_path_runs_nothing(
    service: GitLabService, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """mallory signs a body with her own project's token and id, but V's path (to reach
    V's state and namespace by the name the service keys them by): the intake lets it on
    (the token is her project's), and the flow refuses it (``dispatch._confirmed``: GitLab
    says her id is data/mallory), before anything is bound, recorded, built or posted. The
    same MR delivered as V's own then builds: the refusal, not the setup, stopped it."""
    caplog.set_level(logging.INFO)
    service.gitlab.taken[M_PATH] = M_ID  # GitLab: id 7777 is data/mallory
    forged = _opened(service, tmp_path, V_PATH, M_ID)
    response = service.deliver(HOOK, forged, token=project_token(M_ID))
    assert response.status_code == 202, response.text
    service.idle(timeout=120)
    refused = [r.getMessage() for r in caplog.records if "job refused" in r.getMessage()]
    assert refused, [r.getMessage() for r in caplog.records][-20:]
    assert _wrote(service.gitlab) == [] and service.gitlab.notes == {}
    assert service.counts().get("failed", 0) == 0

    response = service.deliver(HOOK, _opened(service, tmp_path))  # V's token, V's body
    assert response.status_code == 202, response.text
    service.idle(timeout=120)
    assert service.gitlab.statuses_on(HEAD)["sluice/pr-environment"]["state"] == "success"


def test_the_token_is_compared_in_constant_time(
    service: GitLabService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every project token check goes through ``hmac.compare_digest`` with the token
    derived for the body's id (a ``==`` would leak, byte by byte, how much of a guessed
    token is right)."""
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def recording(a: Any, b: Any) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(verify.hmac, "compare_digest", recording)
    guess = project_token(V_ID)[:-1] + ("0" if project_token(V_ID)[-1] != "0" else "1")
    _refused(service.deliver(HOOK, _opened(service, tmp_path), token=guess), V_ID)
    assert (project_token(V_ID).encode(), guess.encode()) in compared
    compared.clear()
    assert service.deliver(HOOK, _opened(service, tmp_path)).status_code == 202
    assert (project_token(V_ID).encode(), project_token(V_ID).encode()) in compared


def test_the_derivation_is_the_documented_one() -> None:
    """HMAC-SHA256 of ``sluice-gitlab-project:<id>`` under the secret, lower-case hex: what
    README says, so an operator can derive it without Sluice; distinct for each id."""
    want = hmac.new(TOKEN.encode(), b"sluice-gitlab-project:4242", "sha256").hexdigest()
    assert verify.gitlab_project_token(TOKEN, 4242) == want
    assert verify.gitlab_project_token(TOKEN, 42) != verify.gitlab_project_token(TOKEN, 420)
    for bad in (0, -1, True):
        with pytest.raises(ValueError):
            verify.gitlab_project_token(TOKEN, bad)
    with pytest.raises(ValueError):
        verify.gitlab_project_token("", 4242)


def test_the_cli_prints_the_token_the_service_takes(service: GitLabService, tmp_path: Path) -> None:
    """``sluice gitlab-webhook-token <id>`` reads the secret from the environment as the
    service does and prints the project's token, which the service then accepts."""
    runner = CliRunner()
    env = {"SLUICE_GITLAB_WEBHOOK_SECRET": TOKEN}
    result = runner.invoke(cli, ["gitlab-webhook-token", str(V_ID)], env=env)
    assert result.exit_code == 0, result.output
    printed = result.output.strip()
    assert printed == project_token(V_ID) and TOKEN not in result.output
    response = service.deliver(HOOK, _opened(service, tmp_path), token=printed)
    assert response.status_code == 202, response.text

    unset = runner.invoke(cli, ["gitlab-webhook-token", "4242"],
                          env={"SLUICE_GITLAB_WEBHOOK_SECRET": ""})  # fmt: skip
    assert unset.exit_code == 1 and "SLUICE_GITLAB_WEBHOOK_SECRET is not set" in unset.output
    for bad in ("0", "-3", "data/warehouse"):
        refused = runner.invoke(cli, ["gitlab-webhook-token", bad], env=env)
        assert refused.exit_code == 2, (bad, refused.output)


def test_the_legacy_rule_reads_the_setting_as_documented(tmp_path: Path) -> None:
    def shared(*entries: str) -> bool:
        settings = ServiceSettings(workdir=tmp_path, gitlab_webhook_secret="s",
                                   repositories=entries)  # fmt: skip
        return settings.gitlab_shared_secret()

    assert shared("gitlab:data/warehouse") and shared("data/warehouse")
    assert shared("github:acme/*", "gitlab:data/warehouse")
    assert not shared() and not shared("gitlab:data/*") and not shared("data/[wx]arehouse")
    assert not shared("gitlab:data/a", "gitlab:data/b") and not shared("acme/a", "gitlab:d/b")
    assert not shared("github:acme/a")  # no GitLab project at all
