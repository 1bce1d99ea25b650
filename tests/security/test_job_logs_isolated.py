"""The web UI's job logs with repositories isolated (issue 46): each repository's Spark
jobs write their logs in its own Spark root's folder (``logs/spark/`` for the state
owner, ``logs/<name>/`` for each other repository: ``Checkout.spark_at``), and its
reader lists and serves that folder alone. A log of another repository's job, or of an
unknown one, is not found (404), on ``/api/v1`` and ``/ui`` alike, even when both
repositories have a job of the same id."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import responses

from sluice.bot.flow import tenancy
from sluice.bot.flow.checkout import Checkout
from sluice.bot.flow.ledger import Ledger
from sluice.core.spark.events import PREFIX
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.oauth import FakeUser, fake_github, sign_in
from tests.helpers.web import web_world
from tests.helpers.web_actions import service
from tests.security.github_bot import NOW, OWNER

OTHER = "acme/b"
SAME = "janitor-1800000000000"  # a job id both repositories have
DONE = PREFIX + json.dumps({"event": "job_done"})  # a log's last line: its stream ends


def test_each_reader_lists_and_reads_its_own_repository_s_job_logs_alone(
    tmp_path: Path,
) -> None:
    world = web_world(tmp_path)
    work = Checkout(world.root / "work")
    mine, theirs = work.spark.logs, work.spark_at(tenancy.spark_root(f"github:{OTHER}")).logs
    assert mine != theirs and mine.parent == theirs.parent == world.logs
    for folder, who in ((mine, "A"), (theirs, "B")):
        folder.mkdir(parents=True)
        (folder / f"apply-prod-{who.lower()}-1.log").write_text(f"{who}'s rows: 42\n")
        (folder / f"{SAME}.log").write_text(f"{who}'s janitor\n{DONE}\n")
    (world.logs / "legacy-1.log").write_text("an older service's, of no known repository\n")
    ledger = Ledger(world.bot.url)
    try:
        ledger.seen(f"github:{OTHER}", None, NOW)
    finally:
        ledger.close()
    alice = FakeUser("alice", code="code-a", token="gho_aliceToken000000000", readable={OWNER})
    bob = FakeUser("bob", code="code-b", token="gho_bobToken00000000000", readable={OTHER})
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake_github(rsps, alice, bob, served=[OWNER, OTHER], ids={CASE_REPOSITORY_ID: OWNER})
        for user, own, other, who in ((alice, OWNER, OTHER, "A"), (bob, OTHER, OWNER, "B")):
            client = service(world, isolate_repositories=True, repositories=(OWNER, OTHER))
            with client:
                sign_in(client, user)
                repo = quote(f"github:{own}", safe="")
                listed = client.get(f"/api/v1/jobs?repo={repo}").json()["logs"]["items"]
                ids = sorted(j["job_id"] for j in listed)
                assert ids == sorted([f"apply-prod-{who.lower()}-1", SAME]), ids
                read = client.get(f"/api/v1/jobs/{SAME}/log?repo={repo}")
                assert read.status_code == 200 and f"{who}'s janitor" in read.text, read.text
                seen = client.get(f"/ui/jobs/apply-prod-{who.lower()}-1?repo={repo}")
                assert seen.status_code == 200, seen.text
                their = "b" if who == "A" else "a"
                for job in (f"apply-prod-{their}-1", "legacy-1", "unknown-1"):
                    api = client.get(f"/api/v1/jobs/{job}/log?repo={repo}")
                    assert api.status_code == 404 and "rows" not in api.text, api.text
                    assert client.get(f"/ui/jobs/{job}?repo={repo}").status_code == 404
                page = client.get(f"/ui/jobs?repo={repo}").text
                assert f"apply-prod-{their}-1" not in page and "legacy-1" not in page
                other_repo = quote(f"github:{other}", safe="")
                refused = client.get(f"/api/v1/jobs/{SAME}/log?repo={other_repo}")
                assert refused.status_code == 404, refused.text
    world.close()
