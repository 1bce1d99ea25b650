"""The bot's ledger on SQLite and PostgreSQL, and the plan reviews it stores, computed
from real plans of the example project (planning needs no Spark)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sluice.bot.flow.audit import AUDIT, Entry
from sluice.bot.flow.ledger import Ledger
from sluice.bot.flow.ledger_schema import LEDGER
from sluice.bot.flow.reviewed_plan import REMOVED, PlanReview, review_of
from sluice.core import workflow
from sluice.core.db import migrate as runner
from sluice.core.db.engine import create_state_engine
from sluice.core.model.loader import load_project
from sluice.core.model.pycode import files
from sluice.core.state import open_state
from sluice.core.state.migrations import MIGRATIONS as STATE_STEPS
from sluice.core.state.migrations import STATE
from sluice.core.timeutil import to_ms
from tests.helpers import pre_runner
from tests.helpers.dbshape import declared, inspected, recorded

STATE_MIGRATIONS = [m.number for m in STATE_STEPS]

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "jaffle_shop"
END = to_ms("2018-04-30")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.db'}"
    else:
        url = request.getfixturevalue("fresh_postgres_url")
    opened = Ledger(url)
    yield opened
    opened.close()


def _review(fingerprint: str, *items: tuple[str, str]) -> PlanReview:
    return PlanReview(fingerprint, tuple(items), {"a.x": "ann"}, {"a.x": "ann", "a.y": None})


def test_plans_are_recorded_per_head_commit(ledger: Ledger) -> None:
    ledger.record_plan("github:o/r", 7, "AAA111", _review("fp1", ("a.x", "k1")), 1)
    ledger.record_plan("github:o/r", 7, "bbb222", _review("fp2", ("a.x", "k2")), 2)
    ledger.record_plan("github:o/r", 7, "bbb222", _review("fp3", ("a.x", "k3")), 3)  # re-planned
    ledger.record_plan("github:o/r", 8, "ccc333", _review("fp9"), 4)
    assert ledger.plans("github:o/r", 7) == {"aaa111": "fp1", "bbb222": "fp3"}
    ledger.record_plan("github:o/r", 7, "AAA111", _review("fp1"), 5)  # same commit, other case
    assert ledger.plans("github:o/r", 7) == {"aaa111": "fp1", "bbb222": "fp3"}
    # bbb222 got fp3 at 3 (planned again differently); aaa111 kept fp1 from 1.
    assert ledger.plan_times("github:o/r", 7) == {"aaa111": 1, "bbb222": 3}
    ledger.record_plan("github:o/r", 7, "bbb222", _review("fp3", ("a.x", "k3")), 6)  # the same
    assert ledger.plan_times("github:o/r", 7)["bbb222"] == 3, "an unchanged plan keeps its time"
    review = ledger.review("github:o/r", 7, "BBB222")
    assert review == _review("fp3", ("a.x", "k3"))
    assert ledger.review("github:o/r", 7, "ddd444") is None
    assert ledger.review("github:other/r", 7, "aaa111") is None


def test_each_review_word_is_learnt_once(ledger: Ledger) -> None:
    # The PR's first read (its first evaluation, or the first after ledger migration 17):
    # each word at its own time (the forge's), as words were ordered before.
    # A forge clock ahead (a word "given" after now) is taken as read now, no later.
    first = {"1:APPROVED:t1": 400, "2:COMMENTED:t2": None, "3:APPROVED:t3": 9_000}
    assert ledger.learn_words("r", 7, first, 1_000) == {
        "1:APPROVED:t1": 400, "2:COMMENTED:t2": 1_000, "3:APPROVED:t3": 1_000,
    }  # fmt: skip
    # Read again later, a word keeps when it was first read; a new one is learnt now.
    assert ledger.learn_words("r", 7, {"1:APPROVED:t1": 400, "1:DISMISSED:t1": 400}, 5_000) == {
        "1:APPROVED:t1": 400, "1:DISMISSED:t1": 5_000,
    }  # fmt: skip
    # A PR read first with no words: its later words are learnt when read.
    assert ledger.learn_words("r", 8, {}, 6_000) == {}
    assert ledger.learn_words("r", 8, {"1:APPROVED:t1": 400}, 9_000) == {"1:APPROVED:t1": 9_000}


def test_each_publication_is_kept_by_both_clocks(ledger: Ledger) -> None:
    # The forge's clock runs ahead of the service's: each time is kept by each clock and
    # read by the one asked (a review is compared with the forge's, a click the service's).
    key = "gitlab:g/r"
    ledger.record_plan(key, 7, "AAA", _review("fp1"), 100, 5_000)
    ledger.record_shown(key, 7, "bbb", 200)  # a hold; the forge said no time: the service's
    ledger.record_plan(key, 7, "aaa", _review("fp1"), 300, 5_300)  # the same plan again
    assert ledger.plan_times(key, 7) == {"aaa": 100}
    assert ledger.plan_times(key, 7, forge=True) == {"aaa": 5_000}, "it keeps both its times"
    assert ledger.plans_shown(key, 7) == [(100, "aaa"), (200, "bbb"), (300, "aaa")]
    # In the order made, whatever the forge's times say (the hold's is the service's).
    assert ledger.plans_shown(key, 7, forge=True) == [(5_000, "aaa"), (200, "bbb"), (5_300, "aaa")]
    # Rows from before the forge's times were kept (migration 15) read the service's.
    with ledger._engine.begin() as conn:
        conn.exec_driver_sql("UPDATE sluice_pr_plans SET plan_forge_ts = NULL")
        conn.exec_driver_sql("UPDATE sluice_plan_shown SET forge_ts = NULL")
    assert ledger.plan_times(key, 7, forge=True) == {"aaa": 100}
    assert ledger.plans_shown(key, 7, forge=True) == ledger.plans_shown(key, 7)


def test_clicks_are_kept_oldest_first_once_per_user_and_commit(ledger: Ledger) -> None:
    ledger.click("github:o/r", 7, "bob", "AAA", "fp1", 10)
    ledger.click("github:o/r", 7, "carol", "aaa", None, 11)
    ledger.click("github:o/r", 7, "bob", "aaa", "fp2", 12)  # clicked again: one record, the latest
    ledger.click("github:o/r", 8, "dave", "aaa", "fp1", 13)
    assert ledger.clicks("github:o/r", 7) == [
        ("carol", "aaa", None, 11, None),
        ("bob", "aaa", "fp2", 12, None),
    ]
    ledger.click("github:o/r", 7, "bobx", "aaa", "fp2", 14, user_id=41)  # by account id
    assert ledger.clicks("github:o/r", 7)[-1] == ("bobx", "aaa", "fp2", 14, 41)


def test_who_pushed_is_kept_with_their_account_id(ledger: Ledger) -> None:
    # Migration 7: the forge's account id beside each login (None: known by login only).
    ledger.record_pusher("github:o/r", 7, "BobX", 1, user_id=41)
    ledger.record_pusher("github:o/r", 7, "alice", 2)
    assert ledger.pushers("github:o/r", 7) == {"bobx", "alice"}
    assert ledger.pusher_accounts("github:o/r", 7) == {("bobx", 41), ("alice", None)}
    ledger.record_branch_push("github:o/r", "change", ["AAA", "bbb"], "bobx", 3, user_id=41)
    assert ledger.branch_pushes("github:o/r", "change") == [
        ("aaa", "bobx", 41),
        ("bbb", "bobx", 41),
    ]
    assert ledger.pushes_of("github:o/r", ["bbb"]) == [("bbb", "bobx", 41)]


def test_a_login_another_account_had_is_no_reason_to_drop_a_pusher(ledger: Ledger) -> None:
    # Migration 9: one row per (login, account), not per login: bob (41) renamed, mallory
    # (77) took `bob`; a login-only row beside them; the same pair again is one row.
    for login, uid in (("bob", 41), ("bob", 77), ("bob", None), ("bobx", 41), ("BOB", 77)):
        ledger.record_pusher("github:o/r", 7, login, 1, user_id=uid)
        ledger.record_branch_push("github:o/r", "change", ["ccc"], login, 1, user_id=uid)
    assert ledger.pusher_accounts("github:o/r", 7) == {
        ("bob", 41),
        ("bob", 77),
        ("bob", None),
        ("bobx", 41),
    }
    assert sorted(ledger.pushes_of("github:o/r", ["ccc"]), key=str) == [
        ("ccc", "BOB", 77),
        ("ccc", "bob", 41),
        ("ccc", "bob", 77),
        ("ccc", "bob", None),
        ("ccc", "bobx", 41),
    ]


def test_approved_items_are_what_a_promotion_finds(ledger: Ledger) -> None:
    ledger.approve("github:o/r", 7, "aaa", [("a.x", "k1"), ("a.y", REMOVED)], ["bob"], 1)
    ledger.approve("github:o/r", 8, "bbb", [("a.x", "k1")], ["carol"], 2)  # the same change
    ledger.approve("github:o/r", 9, "ccc", [], ["carol"], 3)
    wanted = [("a.z", "k5"), ("a.x", "k1"), ("a.x", "k2"), ("a.y", REMOVED)]
    assert ledger.unapproved("github:o/r", wanted) == [("a.x", "k2"), ("a.z", "k5")]
    assert ledger.unapproved("github:other/r", [("a.x", "k1")]) == [("a.x", "k1")]
    assert ledger.unapproved("github:o/r", []) == []
    many = [(f"s.m{i}", "k") for i in range(450)]  # more than one query's worth
    ledger.approve("github:o/r", 10, "ddd", many[:400], ["bob"], 4)
    assert ledger.unapproved("github:o/r", many) == sorted(many[400:])


def test_the_comment_body_and_sections_are_kept(ledger: Ledger) -> None:
    assert ledger.comment("github:o/r", 7) == (None, {})
    ledger.save_comment("github:o/r", 7, "<!-- m -->\n### head\n", {"approval": "ok"})
    ledger.save_comment("github:o/r", 7, "<!-- m -->\n### new\n", {"approval": "ok", "x": "y"})
    assert ledger.comment("github:o/r", 7) == (
        "<!-- m -->\n### new\n",
        {"approval": "ok", "x": "y"},
    )


def test_merged_prs_wait_for_a_promotion(ledger: Ledger) -> None:
    ledger.merged("github:o/r", 7, [("a.x", "k1")], 1)
    ledger.merged("github:o/r", 8, [], 2)
    assert ledger.waiting("github:o/r") == {7: [("a.x", "k1")], 8: []}
    ledger.promoted("github:o/r", [7])
    assert ledger.waiting("github:o/r") == {8: []}


def test_repositories_and_their_last_loaded_commit(ledger: Ledger) -> None:
    ledger.seen("github:o/r", 42, 1)
    assert ledger.last_sha("github:o/r") is None
    ledger.seen("github:o/r", 42, 2, sha="abc")
    ledger.seen("github:o/r", 43, 3)  # a later event without a commit keeps the last one
    ledger.seen("gitlab:g/p", None, 4, sha="def")
    assert ledger.repositories() == [("github:o/r", 43), ("gitlab:g/p", None)]
    assert ledger.last_sha("github:o/r") == "abc"
    ledger.seen("github:o/r", None, 5, sha="fed")  # a build names no installation: kept
    assert ledger.repositories()[0] == ("github:o/r", 43)
    assert ledger.last_sha("github:o/r") == "fed"


def test_many_workers_write_the_same_keys_at_once(ledger: Ledger) -> None:
    # Every job records its repository first; two PRs may approve the same model content;
    # a webhook and a job may save one PR's comment, click or plan at the same moment.
    def work(n: int) -> None:
        for i in range(10):
            ledger.seen("github:o/r", 42, n * 100 + i, sha=f"s{n}")
            ledger.approve("github:o/r", n, f"s{n}", [("a.x", "k1")], ["bob"], i)
            ledger.record_plan("github:o/r", 1, "abc", _review("fp"), i)
            ledger.click("github:o/r", 1, "bob", "abc", "fp", i)
            ledger.save_comment("github:o/r", 1, f"body {n}", {})
            ledger.merged("github:o/r", 1, [("a.x", "k1")], i)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(work, range(8)))
    assert ledger.repositories() == [("github:o/r", 42)]
    assert ledger.unapproved("github:o/r", [("a.x", "k1"), ("a.y", "k2")]) == [("a.y", "k2")]
    assert ledger.plans("github:o/r", 1) == {"abc": "fp"}
    assert [click[:3] for click in ledger.clicks("github:o/r", 1)] == [("bob", "abc", "fp")]
    assert ledger.comment("github:o/r", 1)[0] in {f"body {n}" for n in range(8)}
    assert ledger.waiting("github:o/r") == {1: [("a.x", "k1")]}


# -- plan reviews of real plans --------------------------------------------------------


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


@pytest.fixture
def example(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    root = tmp_path / "project"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".sluice"))
    url = f"sqlite:///{tmp_path / 'state.db'}"
    project = load_project(root, use_cache=False)
    store = open_state(url)
    try:
        plan = workflow.plan_environment(project, store, "prod", end=END, execution_time=END)
        workflow.commit_plan(store, plan, now=END)  # prod's record, no Spark needed
    finally:
        store.close()
    yield root, url


def _pr_review(root: Path, url: str) -> PlanReview:
    project = load_project(root, use_cache=False)
    store = open_state(url)
    try:
        plan = workflow.plan_environment(project, store, "pr_1", end=END, execution_time=END)
    finally:
        store.close()
    # Prod (the example fixture's record) has the example's Python.
    return review_of(plan, project, prod_python=files.digest(files.sources(EXAMPLE)))


def test_a_review_names_direct_changes_owners_and_breaking_reach(
    example: tuple[Path, str],
) -> None:
    root, url = example
    unchanged = _pr_review(root, url)
    assert unchanged.items == ()
    _edit(root / "models" / "orders.sql", "  ON o.order_id = p.order_id",
          "  ON o.order_id = p.order_id\nWHERE o.status <> 'returned'")  # fmt: skip
    _edit(root / "models" / "customers.sql", "  c.last_name,\n",
          "  c.last_name,\n  UPPER(c.last_name) AS last_name_upper,\n")  # fmt: skip
    review = _pr_review(root, url)
    assert [name for name, _ in review.items] == ["jaffle.customers", "jaffle.orders"]
    assert review.direct_owners == {"jaffle.orders": "finance", "jaffle.customers": "marketing"}
    # orders' change is breaking: it reaches everything downstream of it, including
    # customers (itself changed, non-breaking), customer_segments (the Python model, unchanged)
    # and daily_revenue (unchanged; the default owner).
    assert review.breaking_owners == {
        "jaffle.orders": "finance", "jaffle.customers": "marketing",
        "jaffle.customer_segments": "marketing", "jaffle.daily_revenue": "analytics",
    }  # fmt: skip
    assert _pr_review(root, url) == review  # the same project, the same review


def test_only_a_change_of_what_is_approved_changes_the_fingerprint(
    example: tuple[Path, str],
) -> None:
    root, url = example
    orders = root / "models" / "orders.sql"
    _edit(orders, "  ON o.order_id = p.order_id", "  ON o.order_id = p.order_id\nWHERE o.status <> 'returned'")  # fmt: skip
    first = _pr_review(root, url)
    (root / "README.md").write_text("a file that is not a model\n")
    assert _pr_review(root, url).fingerprint == first.fingerprint
    _edit(orders, "<> 'returned'", "<> 'returned_x'")
    changed = _pr_review(root, url)
    assert changed.fingerprint != first.fingerprint
    assert changed.items != first.items


def test_a_removed_model_is_an_item_to_approve(example: tuple[Path, str]) -> None:
    root, url = example
    (root / "models" / "daily_revenue.sql").unlink()
    review = _pr_review(root, url)
    assert review.items == (("jaffle.daily_revenue", REMOVED),)


def test_handled_events_keep_their_first_record_per_repository(ledger: Ledger) -> None:
    assert ledger.handled("github:o/r", "merge:7:abc") is None
    ledger.record_handled("github:o/r", "merge:7:abc", "pull_request", "done", 10)
    ledger.record_handled("github:o/r", "merge:7:abc", "pull_request", "failed", 20)  # again
    assert ledger.handled("github:o/r", "merge:7:abc") == ("done", 10)
    assert ledger.handled("gitlab:o/r", "merge:7:abc") is None  # another forge's repository
    assert ledger.handled("github:o/r", "merge:7:abd") is None


def test_a_pr_head_moves_only_forward_in_the_forge_s_time(ledger: Ledger) -> None:
    repo = "github:o/r"
    assert ledger.pr_head(repo, 7) is None
    assert ledger.record_pr_head(repo, 7, "AAA", 100, 1)
    assert ledger.pr_head(repo, 7) == ("aaa", 100)
    assert not ledger.record_pr_head(repo, 7, "bbb", 99, 2)  # an older event, late
    assert ledger.pr_head(repo, 7) == ("aaa", 100)
    assert ledger.record_pr_head(repo, 7, "ccc", 100, 3)  # the same second: the later one
    assert ledger.record_pr_head(repo, 7, "ddd", None, 4)  # no time: recorded
    assert ledger.record_pr_head(repo, 7, "eee", 50, 5)  # after a time-less one: recorded
    assert ledger.pr_head(repo, 7) == ("eee", 50)
    assert ledger.pr_head(repo, 8) is None


def test_concurrent_pr_heads_keep_the_newest(ledger: Ledger) -> None:
    # Two writers at once (an Action run and the service): the newest event's head stays.
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda t: ledger.record_pr_head("github:o/r", 9, f"{t:040x}", t, t),
                      range(40)))  # fmt: skip
    assert ledger.pr_head("github:o/r", 9) == (f"{39:040x}", 39)


def test_a_new_ledger_has_exactly_its_declared_tables(ledger: Ledger) -> None:
    engine = ledger._engine
    assert inspected(engine) == declared(
        engine.dialect, STATE.tables, LEDGER.tables, AUDIT.tables, runner.metadata
    )
    assert recorded(engine) == {
        "state": STATE_MIGRATIONS,
        "ledger": list(range(1, 19)),
        "audit": [1, 2],
    }


def test_ledger_tables_made_before_the_migration_runner_are_adopted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    engine = create_state_engine(url)
    try:
        with engine.begin() as conn:  # what Ledger made before the runner, a table short
            pre_runner.state.create_all(conn)
            conn.execute(pre_runner.state.tables["sluice_schema_version"].insert(), {"version": 2})
            for table in pre_runner.ledger.sorted_tables:
                if table.name != "sluice_pr_heads":
                    table.create(conn)
            conn.execute(
                pre_runner.ledger.tables["sluice_repos"].insert(),
                {"repo": "github:o/r", "last_sha": "abc", "seen_ts": 1},
            )
        ledger = Ledger(url)
        try:
            assert ledger.last_sha("github:o/r") == "abc"
            assert ledger.record_pr_head("github:o/r", 1, "def", None, 5)  # the new table
        finally:
            ledger.close()
        assert inspected(engine) == declared(
            engine.dialect, STATE.tables, LEDGER.tables, AUDIT.tables, runner.metadata
        )
        assert recorded(engine) == {
            "state": STATE_MIGRATIONS,
            "ledger": list(range(1, 19)),
            "audit": [1, 2],
        }
    finally:
        engine.dispose()


def test_the_accounts_the_settings_name_are_kept_with_their_pin(ledger: Ledger) -> None:
    # Migration 10: {login: account id, or None where no account had it}, with the pin.
    people: dict[str, int | None] = {"bob": 41, "ghost": None}
    assert ledger.pin_settings("github:o/r", "c1", "d1", "{}", ":parsed", 1, replace=False,
                               people=people)  # fmt: skip
    pinned = ledger.settings_in_force("github:o/r")
    assert pinned is not None and pinned.people == people
    # Recorded only while those settings (digest d1) are in force.
    assert ledger.record_people("github:o/r", "other", {"bob": 77}) is None
    # Only the logins the pin lacks are added; a login pinned keeps its account (bob's
    # 41, not 77); what the pin holds now is returned.
    now = {"bob": 41, "ghost": None, "erin": 5}
    assert ledger.record_people("github:o/r", "d1", {"bob": 77, "erin": 5}) == now
    pinned = ledger.settings_in_force("github:o/r")
    assert pinned is not None and pinned.people == now
    # Two jobs adding logins one after the other lose neither's (each writes only its own).
    assert ledger.record_people("github:o/r", "d1", {"ovo": 9}) == {**now, "ovo": 9}
    both = ledger.record_people("github:o/r", "d1", {"carol": 3})
    assert both is not None and both["ovo"] == 9 and both["carol"] == 3
    # A pin recorded before migration 10 (people None) gets the logins given.
    assert ledger.pin_settings("github:o/y", "c1", "d1", "{}", ":parsed", 1, replace=False)
    assert ledger.record_people("github:o/y", "d1", {}) == {}
    pinned = ledger.settings_in_force("github:o/y")
    assert pinned is not None and pinned.people == {}
    # A pin without them (before the migration, the local forge) reads back as None.
    assert ledger.pin_settings("github:o/x", "c1", "d1", "{}", ":parsed", 1, replace=False)
    pinned = ledger.settings_in_force("github:o/x")
    assert pinned is not None and pinned.people is None


def test_the_audit_log_appends_and_reads_by_repository_time_and_page(ledger: Ledger) -> None:
    for at, repo, kind in ((1, "github:o/r", "approval"), (5, "github:o/x", "rollback"),
                           (9, "github:o/r", "promotion"), (12, "github:o/r", "refusal")):  # fmt: skip
        assert ledger.append(Entry(at, repo, kind, "bob", "done", "#7"))
    assert [e.kind for e in ledger.entries(repo="github:o/r")] == [
        "approval",
        "promotion",
        "refusal",
    ]
    assert [e.at for e in ledger.entries(since=5)] == [5, 9, 12]
    newest = ledger.entries(repo="github:o/r", newest_first=True, offset=1, limit=1)
    assert [e.kind for e in newest] == ["promotion"]
    assert ledger.audit_count("github:o/r") == 3 and ledger.audit_count() == 4
    ids = [e.id for e in ledger.entries()]
    assert ids == sorted(ids) and len(set(ids)) == 4
    # ``once``: a decision taken again (same repository, kind, reference, outcome) is told once.
    told = Entry(20, "github:o/r", "settings change", "sluice", "not in force", "abc")
    assert ledger.append(told, once=True)
    assert not ledger.append(told, once=True)
    assert ledger.append(
        Entry(21, "github:o/r", "settings change", "sluice", "not in force", "def"), once=True
    )
    assert ledger.audit_count("github:o/r") == 5


def test_rows_from_before_account_ids_read_back_without_them(tmp_path: Path) -> None:
    # An audit log without migration 2 (no actor_id), and ledger rows written without ids
    # (as before migration 7: its ALTER path is the adoption test's, above): the audit's
    # migration adds the column, and every old row reads back with no id (the gate then
    # compares their logins).
    url = f"sqlite:///{tmp_path / 'state.db'}"
    Ledger(url).close()
    engine = create_state_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE sluice_audit DROP COLUMN actor_id")
            conn.execute(
                runner.versions.delete().where(
                    (runner.versions.c.track == "audit") & (runner.versions.c.number == 2)
                )
            )
            conn.exec_driver_sql(
                "INSERT INTO sluice_pr_pushers (repo, number, user, account, pushed_ts) "
                "VALUES ('github:o/r', 7, 'bob', '@bob', 1)"
            )
            conn.exec_driver_sql(
                "INSERT INTO sluice_plan_clicks (repo, number, user, sha, clicked_ts) "
                "VALUES ('github:o/r', 7, 'carol', 'aaa', 2)"
            )
            conn.exec_driver_sql(
                "INSERT INTO sluice_audit (at_ts, repo, kind, actor, outcome, detail) "
                "VALUES (3, 'github:o/r', 'drift repair', 'bob', 'requested', '')"
            )
        ledger = Ledger(url)
        try:
            assert ledger.pusher_accounts("github:o/r", 7) == {("bob", None)}
            assert ledger.clicks("github:o/r", 7) == [("carol", "aaa", None, 2, None)]
            [row] = ledger.entries(repo="github:o/r")
            assert (row.actor, row.actor_id) == ("bob", None)
        finally:
            ledger.close()
        assert inspected(engine) == declared(
            engine.dialect, STATE.tables, LEDGER.tables, AUDIT.tables, runner.metadata
        )
        assert recorded(engine)["audit"] == [1, 2]
    finally:
        engine.dispose()
