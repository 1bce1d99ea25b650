"""The web UI's one door: :meth:`Site.open` is where every page and every API answer
gets the repository it shows, and the only place that decides whether the request may see
it (:mod:`sluice.bot.web.access`). A repository the site does not serve, or one the
request may not read, is not found (404), so another repository's ids say nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from fastapi import HTTPException, Request

from sluice.bot.flow import tenancy
from sluice.bot.flow.ledger import Ledger
from sluice.bot.web.access import Access
from sluice.bot.web.reader import Reader


class Site:
    """The repositories shown (``repos``: how to list them), a reader for each namespace
    (made by ``reader_for`` on first use, kept until :meth:`close` or until its name
    names another namespace), and who may see them.

    ``key_of``: the key of the namespace a name is bound to now
    (:meth:`sluice.bot.flow.ledger.Ledger.canonical`), looked up on each open: a name can
    change hands (:meth:`~sluice.bot.flow.ledger.Ledger.take_name`), and its new holder
    must never read through a reader made for its old one. None: each name is a namespace
    of its own for good (``sluice ui``'s one local project)."""

    def __init__(
        self,
        repos: Callable[[], Sequence[str]],
        reader_for: Callable[[str], Reader],
        access: Access,
        *,
        key_of: Callable[[str], str] | None = None,
    ) -> None:
        self._repos, self._reader_for, self.access = repos, reader_for, access
        self._key_of = key_of
        self._readers: dict[str, Reader] = {}  # by namespace key
        self._lock = threading.Lock()

    def _key(self, repo: str) -> str:
        return repo if self._key_of is None else self._key_of(repo)

    def visible(self, request: Request) -> list[str]:
        """The repositories the request may see."""
        if not self.access.may_enter(request):
            return []
        return [r for r in self._repos() if self.access.may_read(request, r)]

    def open(self, request: Request, repo: str | None) -> Reader:
        """The reader of ``repo`` (None: the first the request may see).

        The namespace ``repo`` is bound to is looked up before the access is asked and
        again after the reader is found: a reader is that namespace's, made for ``repo``
        (a kept one made for another name, or another key, is closed and made again).

        Raises:
            HTTPException: the access's refusal when the request may see nothing at all
                (no session: 401; no sign-in configured: 403), 404 when the site does
                not serve ``repo`` or the request may not read it, or when the name
                changed hands while it was asked (in doubt: not found).
        """
        if not self.access.may_enter(request):
            raise self.access.refused()
        served = list(self._repos())
        if repo is None:
            repo = next((r for r in served if self.access.may_read(request, r)), None)
        if repo is None or repo not in served:
            raise HTTPException(404, "no such repository here")
        key = self._key(repo)  # before the access is asked: what it answered for
        if not self.access.may_read(request, repo):
            raise HTTPException(404, "no such repository here")
        bound = self._key_of is not None
        with self._lock:
            reader = self._readers.get(key)
            if reader is None or reader.repo != repo or (bound and reader.key != key):
                made = self._reader_for(repo)
                if bound and made.key != key:  # it changed hands while the reader was made
                    made.close()
                    raise HTTPException(404, "no such repository here")
                self._readers[key] = made
                if reader is not None:
                    reader.close()  # another name's (a rename), or another key's
                reader = made
        if bound and self._key(repo) != key:  # changed hands while the access was asked
            raise HTTPException(404, "no such repository here")
        return reader

    def close(self) -> None:
        with self._lock:
            readers, self._readers = list(self._readers.values()), {}
        for reader in readers:
            reader.close()


class StateOwner:
    """The repository a state database belongs to (the ledger's record, bound by the first
    job), read until known, then kept: the service shows that one repository, under its
    name now while that name is bound to it (a name it left that another repository took
    shows nothing of it). Its ledger is opened once (opening migrates, under the
    database's write lock), on first use.

    A service that isolates repositories (``isolate``, issue 46) shows every repository it
    has seen, each read from its own namespace's state (:meth:`state_url`)."""

    def __init__(self, url: str, *, isolate: bool = False) -> None:
        self.url, self.isolate = url, isolate
        self._owner: str | None = None
        self._ledger: Ledger | None = None
        self._lock = threading.Lock()

    def _opened(self) -> Ledger:
        if self._ledger is None:
            self._ledger = Ledger(self.url)
        return self._ledger

    def __call__(self) -> list[str]:
        with self._lock:
            if self.isolate:
                return [repo for repo, _ in self._opened().repositories()]
            ledger = self._opened()
            owner = self._owner_key(ledger)
            if owner is None:
                return []
            # Under its name now (renamed: the forge's new name; a reader maps it back),
            # while that name is its own: none once another repository took it (the
            # owner renamed, no delivery under its new name yet).
            name = ledger.current_names().get(owner.casefold(), owner)
            return [name] if ledger.canonical(name).casefold() == owner.casefold() else []

    def _owner_key(self, ledger: Ledger) -> str | None:
        """The state owner's key, read until known (under the lock)."""
        if self._owner is None:
            owner = ledger.owner()
            self._owner = owner[0] if owner is not None else None
        return self._owner

    def _namespace(self, repo: str, key: str | None) -> tenancy.Namespace:
        """The namespace keyed ``key`` (None: the one ``repo`` is bound to now).

        Raises:
            HTTPException: 404 for another namespace than the owner's in a service that
                does not isolate: it has the owner's state alone, never another's (a name
                the owner left, taken by another repository, reads nothing of it)."""
        with self._lock:
            ledger = self._opened()
            owner = None if self.isolate else self._owner_key(ledger)
        key = ledger.canonical(repo) if key is None else key
        if not self.isolate and (owner is None or key.casefold() != owner.casefold()):
            raise HTTPException(404, "no such repository here")
        return tenancy.namespace_of(key, ledger, self.url, isolate=self.isolate)

    def name_binding(self, repo: str) -> tuple[str, int] | None:
        """(its repository's key, the forge's id) the name ``repo`` is bound to; None when
        no delivery bound it (:meth:`sluice.bot.flow.ledger.Ledger.name_binding`)."""
        with self._lock:
            ledger = self._opened()
        return ledger.name_binding(repo)

    def key_of(self, repo: str) -> str:
        """The key of the namespace the name ``repo`` is bound to now (a renamed
        repository's first name, a name's new holder's ``<name>~<id>``; unbound: the
        name): :meth:`sluice.bot.flow.ledger.Ledger.canonical`, one read."""
        with self._lock:
            ledger = self._opened()
        return ledger.canonical(repo)

    def state_url(self, repo: str, *, key: str | None = None) -> str:
        """The state database of ``repo``'s namespace (:mod:`sluice.bot.flow.tenancy`):
        the namespace keyed ``key`` (None: the one the name is bound to now); 404 for
        another than the owner's when the service does not isolate (:meth:`_namespace`)."""
        url = self._namespace(repo, key).state_url
        tenancy.ensure_schema(url)
        return url

    def spark_root(self, repo: str, *, key: str | None = None) -> str:
        """``repo``'s Spark root (relative to the workdir): its jobs' logs are that
        root's folder's alone (:meth:`sluice.bot.flow.checkout.Checkout.spark_at`); the
        namespace keyed ``key``'s (None: the one the name is bound to now)."""
        return self._namespace(repo, key).spark

    def close(self) -> None:
        with self._lock:
            ledger, self._ledger = self._ledger, None
        if ledger is not None:
            ledger.close()
