"""Each repository's namespace (issue 46): where its engine state is, the prefix of the
Spark schemas Sluice makes for it and the folder of its commits' trees. The one place
these names are derived; the service derives them, a repository never sets them.

A repository's key ``forge:owner/name`` is case-folded (the forges treat ``Acme/X`` and
``acme/x`` as one repository) and named ``<slug>_<digest>``: the slug is the key with each
run of characters outside ``[a-z0-9]`` made one ``_`` (at most 20 characters), the digest
the first 20 hex digits (80 bits) of the folded key's SHA-256. So a name holds only ``[a-z0-9_]``
(no ``/``, no ``..``, no ``__``), and two keys that slug alike still differ by the digest:

>>> repository_name("github:Acme/Ware.House")
'github_acme_ware_hou_dfe8bc77aae3efc289da'
>>> repository_name("github:acme/ware_house") != repository_name("github:acme/ware.house")
True

The name a namespace is derived from is the repository's first one: a repository renamed
on the forge keeps it (the ledger binds each name to the forge's id of its repository, and
:func:`sluice.bot.flow.dispatch.handle` keys a job by the first name bound to that id).

The repository the ledger's state owner names (a state made before isolation, or the one
repository of a service that does not isolate) keeps the configured database, no prefix
and its trees' folder as they were: :func:`namespace_of`.

Each other repository also has a Spark root of its own (:attr:`Namespace.spark`): its own
embedded metastore and warehouse (and, in Connect mode, its own warm server), under
``<workdir>/spark-repositories/<name>``, never under the owner's ``<workdir>/spark``, so
no sandboxed driver is shown another repository's files:

>>> isolated("github:acme/b", "sqlite:///s.db").spark
'spark-repositories/github_acme_b_6f21a281faaee3c0259f'
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlalchemy import URL, make_url, text
from sqlalchemy.exc import IntegrityError, ProgrammingError
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from sluice.bot.flow.checkout import OWN_SPARK, SPARK_ROOTS
from sluice.bot.flow.ledger import Ledger
from sluice.core import jobs
from sluice.core.db.engine import create_state_engine
from sluice.core.errors import GraphError, StateError
from sluice.core.model.definition import KindName, Project
from sluice.core.plan import statements
from sluice.core.snapshot.naming import PHYSICAL_PREFIX, REPOSITORY_MARK
from sluice.core.state import open_state

SLUG_CHARS = 20
DIGEST_CHARS = 20
STATE_SCHEMA_PREFIX = "sluice_"
"""A repository's PostgreSQL schema is ``sluice_<name>``."""


@dataclass(frozen=True)
class Namespace:
    """Where one repository's things are."""

    repo: str
    """``forge:owner/name``."""
    state_url: str
    """Its engine state: the configured database, its own SQLite file or its own schema."""
    schema_prefix: str
    """Before every Spark schema Sluice makes for it ("" : none)."""
    folder: str | None
    """Its trees' folder under the workdir's ``trees/`` (None: the one it always had)."""
    spark: str = OWN_SPARK
    """Its Spark root (metastore, warehouse; its Connect server's folder beside it),
    relative to the workdir."""


def repository_name(repo: str) -> str:
    """``repo``'s name in the namespaces (see the module's docstring)."""
    folded = repo.casefold()
    slug = re.sub(r"[^a-z0-9]+", "_", folded).strip("_")[:SLUG_CHARS].strip("_") or "repo"
    digest = hashlib.sha256(folded.encode()).hexdigest()[:DIGEST_CHARS]
    return f"{slug}_{digest}"


def schema_prefix(repo: str) -> str:
    """The prefix of ``repo``'s Spark schemas: ``sluice_r_<name>__``."""
    return f"{REPOSITORY_MARK}{repository_name(repo)}__"


def state_url(configured: str, repo: str) -> str:
    """``repo``'s state beside the ``configured`` database: a SQLite file in its folder
    (``state.db`` -> ``state.<name>.db``), or on PostgreSQL the configured database with
    every connection's ``search_path`` the schema ``sluice_<name>`` alone.

    Raises:
        StateError: a SQLite database in memory (it has no folder to be beside).
    """
    url = make_url(configured)
    name = repository_name(repo)
    if url.get_backend_name() == "postgresql":
        schema = STATE_SCHEMA_PREFIX + name
        options = url.query.get("options")
        given = (options if isinstance(options, str) else " ".join(options or ())).strip()
        search = f"-c search_path={schema}"
        return _render(url.update_query_dict({"options": f"{given} {search}".strip()}))
    database = url.database or ""
    if database in ("", ":memory:"):
        raise StateError(
            "a state database in memory cannot hold one state per repository",
            hint="set SLUICE_DATABASE_URL to a SQLite file or a PostgreSQL database, or "
            "SLUICE_ISOLATE_REPOSITORIES=false for a service of one repository",
        )
    path = Path(database)
    return _render(url.set(database=str(path.with_name(f"{path.stem}.{name}{path.suffix}"))))


def _render(url: URL) -> str:
    return url.render_as_string(hide_password=False)


_made: set[str] = set()
_making = threading.Lock()


def ensure_schema(url: str) -> None:
    """Make the PostgreSQL schema :func:`state_url` set as ``url``'s search path, if it is
    not there (once per process and schema); nothing for SQLite."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return
    options = parsed.query.get("options")
    # The last -c search_path= wins (an operator's own in the configured URL comes first).
    found = re.findall(r"search_path=(\w+)", options if isinstance(options, str) else "")
    if not found:
        return
    schema = found[-1]
    key = f"{parsed.set(query={}).render_as_string(hide_password=True)}/{schema}"
    with _making:
        if key in _made:
            return
        engine = create_state_engine(_render(parsed))
        try:
            with engine.begin() as conn:  # the name is ours: [a-z0-9_] only, quoted still
                conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
        except (IntegrityError, ProgrammingError) as exc:
            if isinstance(exc, ProgrammingError) and "already exists" not in str(exc):
                raise StateError(
                    f"cannot make the state schema {schema} of a repository: "
                    f"{str(exc.orig).strip()}",
                    hint="let the database user of SLUICE_DATABASE_URL create schemas "
                    "(GRANT CREATE ON DATABASE), or make the schema for it",
                ) from None
            # else another process made it at the same moment
        finally:
            engine.dispose()
        _made.add(key)


def own(repo: str, configured: str) -> Namespace:
    """The namespace of the state owner: everything where it always was."""
    return Namespace(repo, configured, "", None)


def isolated(repo: str, configured: str) -> Namespace:
    """The namespace of ``repo`` in a service serving several repositories."""
    name = repository_name(repo)
    return Namespace(repo, state_url(configured, repo), schema_prefix(repo), name, spark_root(repo))


def spark_root(repo: str) -> str:
    """``repo``'s own Spark root, relative to the workdir:
    ``spark-repositories/<name>`` (:func:`repository_name`: no ``/`` or ``..`` in it)."""
    return f"{SPARK_ROOTS}/{repository_name(repo)}"


def namespace_of(repo: str, ledger: Ledger, configured: str, *, isolate: bool) -> Namespace:
    """``repo``'s namespace: the state owner's (the configured database as it was) when the
    service does not isolate or ``repo`` is the owner the ledger records; else its own.
    A service that does not isolate refuses every other repository before this is asked
    (:func:`sluice.bot.flow.dispatch.handle`)."""
    if not isolate:
        return own(repo, configured)
    owner = ledger.owner()
    if owner is not None and owner[0].casefold() == repo.casefold():
        return own(repo, configured)
    return isolated(repo, configured)


def foreign_schemas(namespace: Namespace, ledger: Ledger, configured: str) -> frozenset[str]:
    """The schemas of the state owner's prod (its views' and physical tables', lower case,
    no catalog) when ``namespace`` is another repository's: the owner's names carry no
    prefix, so they are refused by name (:func:`refuse_foreign`). Empty for the owner, or
    when there is none."""
    if not namespace.schema_prefix or ledger.owner() is None:
        return frozenset()
    store = open_state(configured)
    try:
        return jobs.prod_schemas(store)
    finally:
        store.close()


def refuse_foreign(project: Project, foreign: frozenset[str]) -> None:
    """Refuse a project that names one of ``foreign`` (:func:`foreign_schemas`): as an
    external table (its own schemas or an environment's of them, ``<schema>__<env>``, or a
    physical schema) or in a statement (the project's or a model's).

    Raises:
        GraphError: at the file of the first such name.
    """
    if not foreign:
        return

    def named(name: str) -> bool:
        schema = name.rsplit(".", 1)[0].rsplit(".", 1)[-1].lower()
        return (
            schema in foreign
            or schema.startswith(PHYSICAL_PREFIX)
            or any(schema.startswith(f"{own}__") for own in foreign)
        )

    hint = "read tables of your own sources; another repository's are not this one's to read"
    for model in project.models.values():
        if model.kind.name == KindName.EXTERNAL and named(model.name):
            raise GraphError(
                f"{model.name} is another repository's table on this service",
                path=model.path,
                line=model.line,
                hint=hint,
            )
        for sql in (*model.pre_statements, *model.post_statements):
            why = statements.refusal(sql, set(foreign))
            if why is not None:
                raise GraphError(
                    f"a statement of {model.name} {why} (another repository's)",
                    path=model.path,
                    line=model.line,
                    hint=hint,
                )
    for sql in (*project.before_all, *project.after_all):
        why = statements.refusal(sql, set(foreign))
        if why is not None:
            raise GraphError(f"a project statement {why} (another repository's)", hint=hint)
    # An audit's tables are read as written (render.audit_sql), but for the project's own
    # models, which it reads at the repository's prefixed views.
    models = {
        name.lower()
        for name, m in project.models.items()
        if m.kind.name not in (KindName.EXTERNAL, KindName.EMBEDDED)
    }
    audits: list[tuple[str, str, int, tuple[str, ...]]] = [
        (a.name, a.path, a.line, (a.query_sql, *(sql for _, sql in a.defaults)))
        for a in project.audits.values()
    ]
    audits += [
        (m.name, m.path, c.line or m.line, tuple(sql for _, sql in c.args))
        for m in project.models.values()
        for c in m.audits
    ]
    for of, path, line, texts in audits:
        for name in _tables(texts):
            if named(name) and name.lower() not in models:
                raise GraphError(
                    f"{of}'s audit reads {name}, another repository's table on this service",
                    path=path,
                    line=line,
                    hint=hint,
                )


def _tables(texts: tuple[str, ...]) -> list[str]:
    """The ``schema.table`` names the Spark SQL ``texts`` read (those that parse)."""
    found = []
    for sql in texts:
        try:
            tree = sqlglot.parse_one(sql, read="spark")
        except (ParseError, TokenError):
            continue  # the loader parsed it before: nothing left unread here
        found += [f"{t.db}.{t.name}" for t in tree.find_all(exp.Table) if t.db]
    return found
