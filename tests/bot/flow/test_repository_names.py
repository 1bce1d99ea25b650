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
