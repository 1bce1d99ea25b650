"""Each repository's names bound to its forge id (``sluice_repositories``, issue 46), on
SQLite and PostgreSQL: a name is bound for good; a name new to a known id is a rename,
written only once confirmed (``add_name``), keyed by the repository's first name; a name
bound to another id is a successor's; a name an operator unbound whose namespace a renamed
repository keeps is bound under a key of its own; names and ids compared case-folded and
per forge."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bot.flow.ledger import Binding, Ledger
from sluice.bot.flow.ledger_schema import repositories

T = 1_800_000_000_000


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.db'}"
    else:
        url = request.getfixturevalue("fresh_postgres_url")
    opened = Ledger(url)
    yield opened
    opened.close()


def test_a_name_is_bound_for_good_and_followed_through_a_rename(ledger: Ledger) -> None:
    assert ledger.bind_repository("github:Acme/Ware", 5, T) == Binding("github:Acme/Ware", 5)
    assert ledger.bind_repository("github:acme/WARE", 5, T + 1) == Binding("github:Acme/Ware", 5)
    assert ledger.bind_repository("github:acme/ware", 6, T + 2) == Binding("github:Acme/Ware", 5)
    # A new name with a known id: a rename to confirm, nothing written yet.
    pending = ledger.bind_repository("github:acme/new", 5, T + 3)
    assert pending == Binding("github:Acme/Ware", 5, rename=True)
    assert ledger.name_binding("github:acme/new") is None
    ledger.add_name("github:Acme/New", 5, pending.canonical, T + 3)
    # A name of a renamed repository: the forge confirms it before its delivery is recorded.
    found = ledger.bind_repository("github:acme/new", 5, T + 4)
    assert found == Binding("github:Acme/Ware", 5, others=True)
    assert ledger.names("github:acme/ware") == ["github:acme/WARE", "github:Acme/New"]
    ledger.touch_name("github:acme/new", T + 4)  # the forge said the id is named so now
    assert ledger.canonical("GITHUB:ACME/NEW") == "github:Acme/Ware"
    assert ledger.canonical("github:acme/unbound") == "github:acme/unbound"
    assert ledger.names("github:acme/ware") == [
        "github:acme/WARE",
        "github:acme/new",
    ]  # as last spelled
    ledger.seen("github:Acme/Ware", 77, T + 4)
    assert ledger.repositories() == [("github:acme/new", 77)]  # its latest name
    # The same id on another forge is another repository.
    assert ledger.bind_repository("gitlab:acme/ware", 5, T + 5) == Binding("gitlab:acme/ware", 5)


def test_a_successor_bound_after_the_operator_unbinds_gets_a_key_of_its_own(
    ledger: Ledger,
) -> None:
    ledger.bind_repository("github:acme/b", 5, T)
    ledger.add_name("github:acme/b2", 5, "github:acme/b", T + 1)  # renamed
    with ledger.together("unbind"), ledger._writing("unbind") as conn:
        conn.execute(repositories.delete().where(repositories.c.name == "github:acme/b"))
    bound = ledger.bind_repository("github:acme/b", 9, T + 2)
    assert bound == Binding("github:acme/b~9", 9)  # the renamed one keeps github:acme/b's
    assert ledger.canonical("github:acme/b2") == "github:acme/b"
    # Without a renamed repository keeping it, the name's namespace is taken over.
    ledger.bind_repository("github:acme/c", 6, T)
    with ledger.together("unbind"), ledger._writing("unbind") as conn:
        conn.execute(repositories.delete().where(repositories.c.name == "github:acme/c"))
    assert ledger.bind_repository("github:acme/c", 10, T + 3) == Binding("github:acme/c", 10)


def test_a_name_taken_by_a_new_holder_keeps_each_repository_s_namespace(ledger: Ledger) -> None:
    """``take_name``: the forge says the name is another id's now. A new repository gets a
    namespace of its own; one renamed into the name keeps its own; the one that left keeps
    its namespace for its next name (a rename); a stale taker (the name rebound meanwhile)
    writes nothing."""
    ledger.bind_repository("github:acme/ware", 5, T)  # A
    ledger.bind_repository("github:acme/other", 7, T)  # C, served under its own name
    # B (a new repository) takes acme/ware once GitHub names A otherwise.
    assert ledger.take_name("github:acme/ware", 6, 9, T + 1) is None  # bound to 5, not 9
    assert ledger.name_binding("github:acme/ware") == ("github:acme/ware", 5)
    taken = ledger.take_name("github:Acme/Ware", 6, 5, T + 2)
    assert taken == Binding("github:Acme/Ware~6", 6)
    assert ledger.name_binding("github:acme/ware") == ("github:Acme/Ware~6", 6)
    # A, renamed away, keeps its namespace: its next name is a rename of it.
    assert ledger.bind_repository("github:acme/ware-2", 5, T + 3) == Binding(
        "github:acme/ware", 5, rename=True
    )
    keys = ledger.queue_keys([("github:acme/ware-2", 5), ("github:acme/ware", 6)])
    assert keys == {("github:acme/ware-2", 5): "github:acme/ware",
                    ("github:acme/ware", 6): "github:Acme/Ware~6"}  # fmt: skip
    # C renamed into the name (B gone): C keeps its namespace under it; B keeps its own.
    assert ledger.queue_keys([("github:acme/ware", 7)]) == {
        ("github:acme/ware", 7): "github:acme/other"
    }
    assert ledger.take_name("github:acme/ware", 7, 6, T + 4) == Binding(
        "github:acme/other", 7, rename=True
    )
    assert ledger.canonical("github:acme/ware") == "github:acme/other"
    assert ledger.names("github:acme/other") == ["github:acme/other", "github:acme/ware"]
    # B comes back to the name (C left it): its own namespace again, not a new one.
    assert ledger.take_name("github:acme/ware", 6, 7, T + 5) == Binding(
        "github:Acme/Ware~6", 6, rename=True
    )
