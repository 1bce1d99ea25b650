"""Red team, repository isolation (round 2): per-repository Spark roots, the Connect
server pool, prod's jobs on the commit prod's plan records, and the web UI's drift forms.

The attacker has write access to repository A and a signed-in account on the web UI that
reads A; repository B on the same service is not theirs. Each test asserts what a sound
service does: an attack that works is a strict xfail naming the finding and its fix; one
that is defended passes. No Spark: the pool is driven with servers never started, the
flows on the in-memory forge and the scripted warehouse."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import quote

import pytest
import responses

from sluice.bot.entry.settings import ServiceSettings
from sluice.bot.flow import checkout, drift_view, tenancy
from sluice.bot.flow.checkout import OWN_SPARK, SPARK_ROOTS, Checkout
from sluice.bot.flow.ledger import Ledger
from sluice.bot.forge.archive import extract
from sluice.bot.forge.base import UnusableTree
from sluice.bot.forge.memory import MemoryForge
from sluice.bot.queue.schema import NewJob
from sluice.bot.queue.store import JobQueue
from sluice.core import sandbox
from sluice.core.config import SparkSettings
from sluice.core.errors import ConfigError, ExecutionError
from sluice.core.model.pycode import files as pycode_files
from sluice.core.plan.plan import Plan
from sluice.core.spark import connect, jvm
from sluice.core.spark.events import PREFIX
from sluice.core.spark.scripted import Warehouse
from sluice.core.spark.session import SparkPaths
from sluice.core.spark.spec import JobSpec
from sluice.core.spark.submit import SubmitRunner
from sluice.core.state import open_state
from sluice.core.state.records import PlanRecord
from sluice.core.workflow import carried_commit
from tests.helpers.cases import CASE_REPOSITORY_ID
from tests.helpers.oauth import FakeUser, fake_github, sign_in
from tests.helpers.web import web_world
from tests.helpers.web_actions import forms, jobs, service
from tests.security.github_bot import GATED, KEY, NOW, OWNER, Bot, C, opened

WEB_OWNER = OWNER  # the web world's repository (tests.helpers.web): the state owner

A = "github:mallory/a"
B = "github:acme/b"


# --- the roots: names A controls ---------------------------------------------------------


@pytest.mark.parametrize(
    "lookalike",
    [
        "github:ACME/B",  # case: the same repository (the forge folds it), so B's own root
        "github:acme/b.",  # slugs like B
        "github:acme-b/",
        "github:acme/b_",
        "github:acme__b",
        "gitlab:acme/b",  # another forge's B is another repository
        "github:acme/b/../b",
    ],
)
def test_a_lookalike_name_never_gets_b_s_root_or_state(lookalike: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    b = tenancy.isolated(B, url)
    other = tenancy.isolated(lookalike, url)
    same = lookalike.casefold() == B.casefold()
    assert (other.spark == b.spark) == same
    assert (other.state_url == b.state_url) == same
    assert (other.schema_prefix == b.schema_prefix) == same
    work = Checkout(tmp_path)
    root = work.spark_at(other.spark).root
    assert root.parent == (tmp_path / SPARK_ROOTS).resolve()  # never above, never nested
    if not same:
        assert root != work.spark_at(b.spark).root


def test_a_name_never_maps_to_the_owner_s_root_or_another_s_service_folder(
    tmp_path: Path,
) -> None:
    """A repository named like the owner's root (``spark``) or like another root's service
    folder (``<name>.sluice``, where its Connect server's token-holding home and class
    archive are) gets neither: names are ``[a-z0-9_]`` and carry the digest."""
    url = f"sqlite:///{tmp_path}/state.db"
    work = Checkout(tmp_path)
    b = work.spark_at(tenancy.isolated(B, url).spark)
    owner = work.spark_at(OWN_SPARK)
    for name in ("github:spark", "github:x/spark", f"github:{b.root.name}.sluice", "github:x/."):
        mine = work.spark_at(tenancy.isolated(name, url).spark)
        for theirs in (b, owner):
            assert mine.root not in (theirs.root, theirs.service, theirs.connect)
            assert theirs.root not in mine.root.parents
            assert mine.root not in theirs.service.parents
            assert mine.class_archives != theirs.class_archives


def test_only_the_recorded_owner_gets_the_owner_s_namespace(tmp_path: Path) -> None:
    """B is the state owner (recorded before isolation): A, whatever its name's case or
    look, gets a namespace of its own, never the configured database or ``spark``."""
    url = f"sqlite:///{tmp_path}/state.db"
    ledger = Ledger(url)
    try:
        ledger.belongs_to(f"{B}#.", 1)
        assert tenancy.namespace_of("github:Acme/B", ledger, url, isolate=True).spark == OWN_SPARK
        for name in (A, "github:acme/b#.", "github:acme/b ", "github:acme/bb", "gitlab:acme/b"):
            namespace = tenancy.namespace_of(name, ledger, url, isolate=True)
            assert namespace.spark != OWN_SPARK and namespace.state_url != url, name
    finally:
        ledger.close()


# --- the Connect server pool ---------------------------------------------------------------


@pytest.fixture
def pool() -> Iterator[None]:
    connect.stop_all()
    yield
    connect.stop_all()
    connect.configure_pool(None, 0)


def _paths(tmp_path: Path, repo: str) -> SparkPaths:
    return Checkout(tmp_path).spark_at(tenancy.spark_root(repo))


def test_the_pool_never_lends_a_root_another_root_s_server(tmp_path: Path, pool: None) -> None:
    """With one server allowed and A's running a job, B's job waits (then gives up), and
    is never handed A's server; once A's is let go, B's job stops it and gets its own."""
    connect.configure_pool(1, 0)
    settings = SparkSettings()
    a, b = _paths(tmp_path, A), _paths(tmp_path, B)
    waited: list[str] = []
    with connect.leased(settings, a) as server_a:
        assert server_a.paths.root == a.root
        refused = pytest.raises(ExecutionError, match="no Spark Connect server came free")
        with refused, connect.leased(settings, b, timeout=0.2, on_wait=waited.append):
            pass  # pragma: no cover - never lent
        assert waited and "waiting for a Spark Connect server" in waited[0]
    with connect.leased(settings, b) as server_b:
        assert server_b is not server_a and server_b.paths.root == b.root
        # A's server was stopped for B's: a later job of A gets a new one of A's root.
    with connect.leased(settings, a) as again:
        assert again is not server_a and again.paths.root == a.root


def test_the_pool_keyed_by_the_resolved_root_a_link_does_not_alias(
    tmp_path: Path, pool: None
) -> None:
    """A's root reached through a symbolic link (A's driver may write its own root, but
    not the workdir's ``spark-repositories``) is keyed as where it leads: the pool keys
    servers by the resolved root, so no two paths share a server by accident."""
    connect.configure_pool(4, 0)
    settings = SparkSettings()
    a, b = _paths(tmp_path, A), _paths(tmp_path, B)
    a.root.mkdir(parents=True)
    b.root.mkdir(parents=True)
    with connect.leased(settings, a) as server_a, connect.leased(settings, b) as server_b:
        assert server_a is not server_b
        assert server_a.paths.connect != server_b.paths.connect


def test_eviction_racing_a_new_lease_of_the_evicted_root(tmp_path: Path, pool: None) -> None:
    """One server allowed. A's idle server is being stopped for B's job while A's next job
    asks for its server: A's job waits for the stop (it still counts), then B's job holds
    the pool; A's job never gets B's server, B's never A's."""
    connect.configure_pool(1, 0)
    settings = SparkSettings()
    a, b = _paths(tmp_path, A), _paths(tmp_path, B)
    with connect.leased(settings, a):
        pass
    got: dict[str, Any] = {}
    release = threading.Event()

    def job(name: str, paths: SparkPaths) -> None:
        try:
            with connect.leased(settings, paths, timeout=5) as server:
                got[name] = server.paths.root
                release.wait(2)
        except ExecutionError as exc:
            got[name] = exc

    threads = [threading.Thread(target=job, args=(n, p)) for n, p in (("b", b), ("a", a))]
    for thread in threads:
        thread.start()
    threads[0].join(0.5)
    release.set()
    for thread in threads:
        thread.join(10)
    assert got == {"b": b.root.resolve(), "a": a.root.resolve()}


# --- the drift view's row 0 ----------------------------------------------------------------


def test_the_drift_view_row_is_the_repository_s_own(tmp_path: Path) -> None:
    """Row 0 of the sticky comments is keyed by repository: A's view never shows as B's,
    a sticky comment A's PR writes never replaces B's view, and B's view is not A's."""
    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.db")
    try:
        drift_view.save(ledger, B, {"head": "b" * 40, "repair": {"fingerprint": "f" * 32}})
        drift_view.save(ledger, A, {"head": "a" * 40, "repair": {"fingerprint": "e" * 32}})
        ledger.save_comment(A, 0, "mallory", {"drift": '{"head": "' + "0" * 40 + '"}'})
        view_b = drift_view.load(ledger, B)
        assert view_b is not None and view_b["head"] == "b" * 40
        assert view_b["repair"]["fingerprint"] == "f" * 32
        view_a = drift_view.load(ledger, A)
        assert view_a is not None and view_a["head"] == "0" * 40  # A's own row, A's own doing
        assert drift_view.load(ledger, "github:mallory/b") is None
    finally:
        ledger.close()


# --- the commit prod's plan records -----------------------------------------------------------


def _plan(changes: bool, base: str | None) -> Plan:
    return cast(Plan, SimpleNamespace(changes_models=changes, base_plan_id=base))


def test_a_carried_commit_comes_from_the_repository_s_own_state(tmp_path: Path) -> None:
    """A plan of A's that changes no model, whose base plan id is one of B's prod plans
    (a plan id A learned from B's check or page), carries no commit: A's state has no such
    plan, and B's records stay B's."""
    configured = f"sqlite:///{tmp_path}/state.db"
    url_a, url_b = tenancy.state_url(configured, A), tenancy.state_url(configured, B)
    assert url_a != url_b
    store_b = open_state(url_b)
    try:
        store_b.save_plan(PlanRecord("plan-of-b", "prod", None, 1, {}, "b" * 40))
        assert carried_commit(store_b, _plan(False, "plan-of-b")) == "b" * 40
    finally:
        store_b.close()
    store_a = open_state(url_a)
    try:
        assert carried_commit(store_a, _plan(False, "plan-of-b")) is None
        assert carried_commit(store_a, _plan(True, "plan-of-b")) is None
        assert store_a.get_plan("plan-of-b") is None
    finally:
        store_a.close()


# --- a repository that takes B's name ------------------------------------------------------

OTHER = "acme/b"
OTHER_KEY = f"github:{OTHER}"
HEAD_B, HEAD_X = "b2" * 20, "e5" * 20
CONFIG = GATED + "  pr:\n    backfill_days: null\n"


def _named_b(payload: dict[str, Any], repository_id: int) -> dict[str, Any]:
    repository = {**payload["repository"], "full_name": OTHER, "id": repository_id}
    pull = dict(payload["pull_request"])
    pull["head"] = {**pull["head"], "repo": {**pull["head"]["repo"], "full_name": OTHER}}
    return {**payload, "repository": repository, "pull_request": pull}


def test_a_repository_taking_b_s_old_name_does_not_inherit_b_s_namespace(
    tmp_path: Path,
) -> None:
    made: list[tuple[str, str | None]] = []
    warehouse = Warehouse()

    def runner_for(project: Any, tree: Path, on_event: Any) -> Any:
        made.append((tree.name, checkout.current_spark()))
        return warehouse.runner(project, tree, on_event)

    github = MemoryForge(OWNER, name="github")
    bot = Bot(tmp_path, github, runner_for=runner_for, isolate=True)
    try:
        bot.ledger.belongs_to(f"{KEY}#.", NOW)
        bot.prod(C, CONFIG)
        other = bot.repository(OTHER)
        bot.commit(C, CONFIG, forge=other)
        other.refs["main"] = C
        other.roles.update({"alice": "write"})
        for number, head in ((9, HEAD_B), (11, HEAD_X)):
            src = bot.commit(head, CONFIG, parents=(C,), forge=other)
            orders = src / "models" / "orders.sql"
            orders.write_text(orders.read_text() + f"\n-- {head[:4]}\n")
            other.commit_folder(head, src, parents=(C,))
            other.open_pull(number, head_sha=head, base="main", author="alice")
        # B (repository 424242) builds its PR.
        other.repositories[424242] = OTHER
        bot.deliver("pull_request", _named_b(opened(9, HEAD_B), 424242))
        assert other.checks[HEAD_B]["sluice/pr-environment"].conclusion == "success"
        # B is renamed away; a new repository (another id) is created under B's old name.
        other.repositories.update({424242: f"{OTHER}-renamed", 990001: OTHER})
        bot.deliver("pull_request", _named_b(opened(11, HEAD_X), 990001))
        b_root = tenancy.spark_root(OTHER_KEY)
        roots = {sha: root for sha, root in made if sha in (HEAD_B, HEAD_X)}
        assert roots[HEAD_B] == b_root
        # Sound: the successor is refused, or runs in a namespace of its own.
        assert roots.get(HEAD_X) != b_root
    finally:
        bot.close()


# --- the web UI's drift forms naming B ----------------------------------------------------

OTHER_PAGE = f"/ui/drift?repo={quote(OTHER_KEY, safe='')}"


def test_a_drift_form_naming_b_is_refused_to_a_reader_of_a(tmp_path: Path) -> None:
    """Signed in with read access to A (the state owner) only, on a service that isolates
    A and B: B's drift page is 404, and each drift form (CSRF token of A's page, B's
    prod head and repair plan as B's view holds them) sent with ``repo`` naming B, or
    its case variant, is refused (404) before anything is queued; the same form naming A
    is refused as from an older page (A's view holds another plan), nothing queued."""
    world = web_world(tmp_path)
    reader = FakeUser("mallory", code="code-mal", token="gho_malToken00000000000",
                      readable={WEB_OWNER})  # fmt: skip
    world.github.roles["mallory"] = "write"
    ledger = Ledger(world.bot.url)
    head_b, plan_b = "b" * 40, "c" * 32
    try:
        ledger.seen(OTHER_KEY, None, NOW)
        drift_view.save(ledger, OTHER_KEY, {"head": head_b, "repair": {"fingerprint": plan_b}})
    finally:
        ledger.close()
    try:
        with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
            fake_github(
                rsps, reader, served=[WEB_OWNER, OTHER], ids={CASE_REPOSITORY_ID: WEB_OWNER}
            )
            client = service(world, isolate_repositories=True,
                             repositories=(WEB_OWNER, OTHER))  # fmt: skip
            with client:
                sign_in(client, reader)
                page = client.get(f"/ui/pulls/7?repo={quote(f'github:{WEB_OWNER}', safe='')}")
                assert page.status_code == 200, page.text
                csrf = next(v["csrf"] for _a, v in forms(page.text).values() if "csrf" in v)
                assert client.get(OTHER_PAGE).status_code == 404
                before = len(jobs(world))
                fields = {"csrf": csrf, "head": head_b, "plan": plan_b, "reason": "mine now"}
                for action in ("request", "approve", "override"):
                    for repo in (OTHER_KEY, "github:ACME/B"):
                        answer = client.post(
                            f"/ui/drift/{action}?repo={quote(repo, safe='')}",
                            data={**fields, "nonce": f"n{action}{len(repo)}".ljust(16, "x")},
                            follow_redirects=False,
                        )
                        assert answer.status_code == 404, (action, repo, answer.text)
                own = client.post(
                    f"/ui/drift/request?repo={quote(f'github:{WEB_OWNER}', safe='')}",
                    data={**fields, "nonce": "own-repo-nonce-01"},
                    follow_redirects=False,
                )
                assert own.status_code == 303, own.text
                assert len(jobs(world)) == before
    finally:
        world.close()


# --- the roots without bubblewrap ------------------------------------------------------------


def test_under_the_uid_drop_a_driver_of_a_cannot_read_b_s_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("the uid drop needs a root service with setpriv")
    monkeypatch.setenv(sandbox.SETTING, "setpriv")
    assert sandbox.isolation() == "setpriv"
    refused = False
    try:
        ServiceSettings(webhook_secret="w", repositories=(OTHER, "mallory/a"))
    except ConfigError:
        refused = True
    read = _a_s_driver_reads_b_s_table(tmp_path)
    assert refused or "B's customers" not in read.stdout, read.stderr[-400:]


def test_under_bubblewrap_a_driver_of_a_cannot_read_b_s_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: the same probe in A's driver profile under bubblewrap finds no file."""
    monkeypatch.setenv(sandbox.SETTING, "bwrap")
    try:
        assert sandbox.isolation() == "bwrap"
    except ConfigError:
        pytest.skip("bubblewrap cannot run here")
    read = _a_s_driver_reads_b_s_table(tmp_path)
    assert "A's own" in read.stdout, read.stderr[-400:]  # its own root: shown
    assert "B's customers" not in read.stdout
    assert "No such file or directory" in read.stderr, read.stderr[-400:]


def _a_s_driver_reads_b_s_table(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run, in A's Spark driver's sandbox profile, what A's approved Python model would:
    open a file of B's warehouse (B's root 0700) by its path."""
    work = Checkout(tmp_path / "work")
    a, b = work.spark_at(tenancy.spark_root(A)), work.spark_at(tenancy.spark_root(B))
    table = b.warehouse / "sluice_r_b__jaffle.db" / "customers" / "part-0.parquet"
    table.parent.mkdir(parents=True)
    table.write_text("B's customers")
    for folder in (b.root, b.warehouse):
        folder.chmod(0o700)
    own = a.warehouse / "mine.txt"
    own.parent.mkdir(parents=True)
    own.write_text("A's own")
    home = tmp_path / "home"
    home.mkdir()
    spec = cast(JobSpec, {"job_id": "a-prod", "environment": "prod", "steps": []})
    spec_path = home / "spec.json"
    spec_path.write_text("{}")
    runner = SubmitRunner(SparkSettings(), a)
    profile = dataclasses.replace(
        runner.profile(spec, spec_path, home, jvm.ArchiveUse([])), limits=None, java=False
    )
    # What A's approved Python model does in its driver: open B's table file by its path.
    code = f"print(open({str(own)!r}).read()); print(open({str(table)!r}).read())"
    probe = [sys.executable, "-c", code]
    return subprocess.run(
        sandbox.wrap(probe, profile).argv, check=False, capture_output=True, text=True, timeout=60
    )


# --- the web UI's job logs -----------------------------------------------------------------


def test_a_reader_of_a_neither_lists_nor_reads_b_s_job_logs(tmp_path: Path) -> None:
    world = web_world(tmp_path)
    reader = FakeUser("mallory", code="code-mal", token="gho_malToken00000000000",
                      readable={WEB_OWNER})  # fmt: skip
    # A job of B's wrote its log where every job writes one (the workdir's logs).
    b_job = "apply-prod-0b0b0b0b0b0b-1800000000000"
    world.logs.mkdir(parents=True, exist_ok=True)
    done = PREFIX + json.dumps({"event": "job_done"})  # its last line: the stream ends
    (world.logs / f"{b_job}.log").write_text(f"B's customers: carol@b.example, 42\n{done}\n")
    ledger = Ledger(world.bot.url)
    try:
        ledger.seen(OTHER_KEY, None, NOW)
    finally:
        ledger.close()
    try:
        with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
            fake_github(
                rsps, reader, served=[WEB_OWNER, OTHER], ids={CASE_REPOSITORY_ID: WEB_OWNER}
            )
            client = service(world, isolate_repositories=True,
                             repositories=(WEB_OWNER, OTHER))  # fmt: skip
            with client:
                sign_in(client, reader)
                mine = quote(f"github:{WEB_OWNER}", safe="")
                assert (
                    client.get(f"/api/v1/jobs?repo={quote(OTHER_KEY, safe='')}").status_code == 404
                )
                listed = client.get(f"/api/v1/jobs?repo={mine}")
                assert listed.status_code == 200, listed.text
                shown = client.get(f"/api/v1/jobs/{b_job}/log?repo={mine}")
                assert "carol@b.example" not in shown.text
                assert b_job not in [j["job_id"] for j in listed.json()["logs"]["items"]]
    finally:
        world.close()


# --- a job's home and spec -----------------------------------------------------------------


class _Seen(Exception):
    """Raised where the driver would start: what it would have been given is recorded."""


def test_two_repositories_jobs_of_one_id_never_share_a_home_or_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given: list[tuple[Path, Path]] = []

    def profile(self: SubmitRunner, spec: JobSpec, spec_path: Path, home: Path, _a: Any) -> Any:
        given.append((spec_path, home))
        raise _Seen

    monkeypatch.setattr(SubmitRunner, "profile", profile)
    monkeypatch.setattr(SubmitRunner, "_preflight", lambda *_a: None)
    work = Checkout(tmp_path / "work")
    spec = cast(JobSpec, {"job_id": "janitor-1800000000000", "kind": "janitor", "steps": []})
    for repo in (A, B):
        runner = SubmitRunner(SparkSettings(), work.spark_at(tenancy.spark_root(repo)))
        with pytest.raises(_Seen):
            runner.run(spec)
    (spec_a, home_a), (spec_b, home_b) = given
    assert spec_a != spec_b and home_a != home_b


# --- a link in A's tree toward B's root -------------------------------------------------------


def test_a_chain_of_links_in_a_s_tree_never_reaches_b_s_root(tmp_path: Path) -> None:
    """A's commit holds links each of which stays inside the tree when read on its own
    (``up -> ..`` inside models/, ``models/hop -> up/..``), chained so that the last,
    ``models/steal.py``, would lead to B's warehouse file through the workdir. The
    archive is refused before anything is written; had a tree such links, the project's
    check of its Python refuses the one leading out (what would mirror B's file into A's
    driver)."""
    work = tmp_path / "work"
    b = Checkout(work).spark_at(tenancy.spark_root(B))
    secret = b.warehouse / "t" / "part-0.parquet"
    secret.parent.mkdir(parents=True)
    secret.write_text("B's rows")
    dest = work / "trees" / tenancy.repository_name(A) / ("a" * 40)
    # From the tree: up 3 (sha, A's folder, trees) to the workdir, then into B's root.
    chain = [("models/up", ".."), ("models/hop", "up/.."), ("models/hop2", "hop/../models/up")]
    target = "hop2/../../.." + "/" + str(secret.relative_to(work))
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for name in ("models",):
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        for name, link in [*chain, ("models/steal.py", target)]:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, link
            tar.addfile(info)
    data.seek(0)
    with pytest.raises(UnusableTree):
        extract(data, dest, forge="GitHub", sha="a" * 40)
    assert not (dest / "models" / "steal.py").exists()
    # The same links made on disk: the project's Python check names the one leading out.
    root = tmp_path / "tree"
    (root / "models").mkdir(parents=True)
    os.symlink(os.path.relpath(secret, root / "models"), root / "models" / "steal.py")
    errors = pycode_files.check_tree(root)
    assert any("points outside the project" in str(e) for e in errors), errors


# --- the class archive A's prod driver writes ---------------------------------------------------


def test_a_s_prod_driver_cannot_make_the_service_chmod_b_s_files(tmp_path: Path) -> None:
    work = Checkout(tmp_path / "work")
    a = work.spark_at(tenancy.spark_root(A))
    b = work.spark_at(tenancy.spark_root(B))
    table = b.warehouse / "sluice_r_b__jaffle.db" / "customers" / "part-0.parquet"
    table.parent.mkdir(parents=True)
    table.write_text("B's customers")
    table.chmod(0o600)
    assert a.class_archives is not None
    archive = jvm.ClassArchive(a.class_archives, key="k")
    with archive.use({}) as use:
        assert use.flags and use.flags[0].startswith("-XX:ArchiveClassesAtExit=")
        dump = Path(use.flags[0].split("=", 1)[1])
        # A's prod driver, whose sandbox shows this folder writable: a link at its dump
        # path to a file it cannot see (the target need not exist inside the sandbox).
        os.symlink(table, dump)
        use.clean = True  # the JVM exited with status 0
    assert table.stat().st_mode & 0o777 == 0o600, oct(table.stat().st_mode)
    assert not archive.path.is_symlink()


# --- the janitor's log rotation in A's root -------------------------------------------------------


def test_the_janitor_s_log_rotation_in_a_s_root_never_writes_b_s_files(tmp_path: Path) -> None:
    work = Checkout(tmp_path / "work")
    a = work.spark_at(tenancy.spark_root(A))
    b = work.spark_at(tenancy.spark_root(B))
    table = b.warehouse / "sluice_r_b__jaffle.db" / "customers"
    table.mkdir(parents=True)
    (table / "part-0.parquet").write_text("B's customers")
    planted = table / "part-99999.parquet"
    # What A's driver leaves in its own root: a log over the limit, its first backup a link
    # to a file that does not exist (yet).
    a.root.mkdir(parents=True)
    (a.root / "x.log").write_text("A's rows\n" * 100)
    os.symlink(planted, a.root / "x.log.1")
    work.rotate_logs(100, 3)
    assert not planted.exists(), planted.read_text()[:40]


# --- the web UI's queue count ---------------------------------------------------------------------


def test_a_reader_of_a_is_not_told_how_many_jobs_b_has(tmp_path: Path) -> None:
    world = web_world(tmp_path)
    private = f"{WEB_OWNER}-private"
    reader = FakeUser("mallory", code="code-mal", token="gho_malToken00000000000",
                      readable={WEB_OWNER})  # fmt: skip
    queue = JobQueue(world.bot.url)
    try:
        for n in range(3):  # B's jobs: its PRs' builds
            job = NewJob(key=f"github:{private}#{n + 1}", kind="pull_request", payload={})
            assert queue.accept(f"b-{n}", "github", "pull_request", job, float(NOW // 1000))
    finally:
        queue.close()
    try:
        with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
            fake_github(
                rsps, reader, served=[WEB_OWNER, private], ids={CASE_REPOSITORY_ID: WEB_OWNER}
            )
            client = service(world, isolate_repositories=True,
                             repositories=(WEB_OWNER, private))  # fmt: skip
            with client:
                sign_in(client, reader)
                listed = client.get(f"/api/v1/jobs?repo={quote(f'github:{WEB_OWNER}', safe='')}")
                assert listed.status_code == 200, listed.text
                page = listed.json()["queue"]
                assert page["total"] == len(page["items"]), page
    finally:
        world.close()
