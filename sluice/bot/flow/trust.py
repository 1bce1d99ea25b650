"""Which settings Sluice trusts, and where each comes from (docs/security.md, "Who decides").

Three sources, and nothing else:

- **The service** (``SLUICE_*``, handed to the flow in its :class:`~sluice.bot.flow.deps.Deps`): credentials,
  the repositories served, the prod branch's name (``SLUICE_PROD_BRANCH``), and where and
  how Spark runs: master, deploy mode, mode (submit or connect) and remote (a Spark
  Connect endpoint), and every Spark setting that could choose what runs
  (driver program, JVM options, jars, packages, plugins, extensions, metastore, warehouse).
- **The prod branch** (its sluice.yaml, or the ``sluice:`` section of its config.yaml;
  :func:`read_source`): the gate, ``deploy``,
  ``allowed_paths``, TTLs, the PR preview settings, the table format, and Spark *tuning*:
  the settings in :data:`sluice.core.spark.tuning.SPARK_TUNING` (also the only
  ``session_properties`` a model may set), which size work but cannot run code.
- **The pull request's head**: its models, audits, tests and seeds, and the
  ``model_defaults`` and ``variables`` of its config.yaml (they are part of its models:
  each change to them changes a model and shows in the plan). Its own Sluice settings are
  not used for its own build; changing them is a change like a model's, approved with the
  PR (:func:`change_item`) and in force once promoted.

The prod branch's settings are *pinned* in the ledger, as parsed (:func:`pinned_text`),
the first time Sluice reads them. From then on newer settings on the prod branch are used
once a gate approved the change from the pinned ones (a PR that changed them passed
``sluice/approval``) or when the pinned settings required no approval; otherwise, e.g.
after an admin pushed or merged past the gate, the pinned settings stay in force and the
PR is told why. A promotion moves the pin to the promoted commit's settings, after
checking that their change, if any, was approved.

>>> tuning, refused = split_spark_conf({"spark.sql.shuffle.partitions": "8",
...                                     "spark.jars": "/tmp/x.jar"})
>>> tuning, refused
({'spark.sql.shuffle.partitions': '8'}, ['spark.jars'])
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.bot.flow import audit, tenancy
from sluice.bot.flow.gate_rules import bot_account
from sluice.bot.flow.job import Job
from sluice.bot.flow.ledger import Ledger, PinnedSettings
from sluice.bot.flow.reviewed_plan import Item
from sluice.bot.forge.base import LIST_LIMIT, DirEntry, Forge
from sluice.core import markdown as md
from sluice.core import sandbox
from sluice.core.config import (
    CONFIG_FILES,
    PYTHON_CONFIG,
    SETTINGS_FILES,
    ProjectConfig,
    SluiceSettings,
    SparkSettings,
    load_config,
    parse_config,
)
from sluice.core.errors import ConfigError, SluiceError
from sluice.core.gate_settings import DeploySettings, GateSettings
from sluice.core.model import jinja
from sluice.core.model.definition import Project
from sluice.core.model.loader import load_project
from sluice.core.model.pycode import Refusal
from sluice.core.model.pycode import config_file as pycode_config
from sluice.core.model.pycode import files as pycode_files
from sluice.core.plan import statements
from sluice.core.policy import load as policy_load
from sluice.core.snapshot.naming import PROD
from sluice.core.spark.tuning import split_spark_conf
from sluice.core.state import open_state
from sluice.core.state.readonly import read_state
from sluice.core.workflow import plan_commit
from sluice.core.yamlio import LocatedYaml, parse_yaml

log = logging.getLogger(__name__)

PolicyFiles = tuple[tuple[str, str], ...]
"""Policy files as read: (path in the project, e.g. ``policies/a.yaml``, text)."""

SETTINGS_ITEM = "config.yaml sluice:"
"""The review item standing for a change of Sluice's settings; its content names the new
settings' digest and the settings in force it changes (:func:`change_item`): approved
and checked like a model change."""


def change_item(new_digest: str, generation: str) -> Item:
    """The review item of a change to settings ``new_digest`` from the settings in force
    whose :attr:`Settings.generation` is ``generation``. An approval of it counts only
    while those settings stay in force: once a promotion pins others, it is void (an
    approval given before cannot bring old settings back, however it is stamped or
    evaluated again: red team, settings rounds 1 to 3).

    >>> change_item("ab" * 16, "cd" * 8 + "@5")
    ('config.yaml sluice:', 'abababababababababababababababab<-cdcdcdcdcdcdcdcd@5')
    """
    return (SETTINGS_ITEM, f"{new_digest}<-{generation}")


@dataclass(frozen=True)
class Settings:
    """The trusted settings of one repository, and where they were read."""

    branch: str  # the prod branch
    sha: str | None  # the commit they were read at (None: the forge did not say)
    sluice: SluiceSettings  # the `sluice:` section as written there
    gate: GateSettings
    deploy: DeploySettings  # its prod_branch is always `branch`
    digest: str
    source: str  # where they come from, for messages (Markdown)
    note: str | None = None  # why newer settings on the prod branch are not in force
    # The commit whose Python a PR's must equal under SLUICE_PROJECT_PYTHON=prod: the one
    # prod was last promoted with (pinned) while a gate guards it; None: the branch's head.
    python_ref: str | None = None
    # Which pin the settings in force are (its digest and when it was set): a change of
    # them is approved for this generation only (:func:`change_item`).
    generation: str = ""
    # The policies in force (policies/*.yaml beside the config, as read: path, text), part
    # of the digest: evaluated on every plan, never a PR's own (:mod:`.policies`).
    policies: PolicyFiles = ()
    # Who the logins the settings name as people are (:func:`named_people`, and the owners
    # of prod's models): case-folded login -> the account id it had when it first came into
    # force (None: no account had it), as the pin records it; the gate compares by it. None:
    # logins compare as they are (the local forge).
    people: Mapping[str, int | None] | None = None

    @property
    def requires_approval(self) -> bool:
        required = self.gate.required_approvers.count > 0
        return required or self.gate.owners_must_approve != "never"

    def change_to(self, new_digest: str) -> Item | None:
        """The review item of a change from these settings to ``new_digest`` (None: the
        same settings, no change)."""
        return None if new_digest == self.digest else change_item(new_digest, self.generation)

    def spark(self, service: SparkSettings) -> SparkSettings:
        """Spark as the service runs it: its master, deploy mode and settings, plus the prod
        branch's tuning (the service's settings win), table format and concurrent builds
        (up to the service's)."""
        tuning, _refused = split_spark_conf(self.sluice.spark.conf)
        return SparkSettings(
            master=service.master,
            deploy_mode=service.deploy_mode,
            mode=service.mode,
            remote=service.remote,
            conf={**tuning, **service.conf},
            table_format=self.sluice.spark.table_format,
            concurrent_tasks=min(self.sluice.spark.concurrent_tasks, service.concurrent_tasks),
        )

    def for_project(self, service: SparkSettings) -> SluiceSettings:
        """The ``sluice:`` settings a project from a pull request is loaded with."""
        return self.sluice.model_copy(update={"spark": self.spark(service)})

    def ignored_spark(self) -> list[str]:
        """The prod branch's Spark settings the service ignores (they could run code)."""
        sluice = self.sluice.spark
        ignored = split_spark_conf(sluice.conf)[1]
        if sluice.master != SparkSettings().master:
            ignored.insert(0, "master")
        if sluice.deploy_mode is not None:
            ignored.insert(0, "deploy_mode")
        if sluice.mode != SparkSettings().mode:
            ignored.insert(0, "mode")
        if sluice.remote is not None:
            ignored.insert(0, "remote")
        return ignored


@dataclass(frozen=True)
class Parsed:
    """One side's ``sluice:`` settings and their digest."""

    sluice: SluiceSettings
    gate: GateSettings
    deploy: DeploySettings
    digest: str
    names_prod_branch: bool  # whether it sets deploy.prod_branch itself
    policies: PolicyFiles = ()  # its policies/*.yaml (path in the project, text)

    @property
    def settings_digest(self) -> str:
        """The digest of the ``sluice:`` settings alone (the policies aside)."""
        return digest(self.sluice, self.gate, self.deploy)


@dataclass(frozen=True)
class Source:
    """The files one side (a branch, a commit's tree) writes Sluice's settings in: its
    config (``config.yaml``, whose ``sluice:`` section may hold them) and its sluice.yaml
    (:data:`~sluice.core.config.SETTINGS_FILES`, which holds them when it exists; not
    both). A text None: no such file."""

    config_path: str
    config_text: str | None
    settings_path: str
    settings_text: str | None
    where: str = ""  # the branch or commit they were read at, for messages only
    policies: PolicyFiles = ()  # its policies/*.yaml (path in the project, text)

    @property
    def shown(self) -> str:
        """The file that holds the settings, for messages."""
        shown = self.settings_path if self.settings_text is not None else self.config_path
        return f"{self.where}:{shown}" if self.where else shown

    @classmethod
    def of_pin(cls, file: str | None, text: str, config_path: str) -> Source:
        """The file a pin from before :data:`PINNED_FILE` kept (``file`` None: a pin from
        before sluice.yaml, a config's text)."""
        if file is not None and Path(file).name in SETTINGS_FILES:
            return cls(config_path, None, file, text)
        return cls.of_config(text or None, file or config_path)

    @classmethod
    def of_config(cls, text: str | None, path: str) -> Source:
        """A side with only a config (``text`` None: none) at ``path``: no sluice.yaml."""
        return cls(path, text, settings_beside(path), None)


def settings_beside(config_path: str) -> str:
    """The sluice.yaml beside a project's config.yaml (``path``: under the project's
    folder).

    >>> settings_beside("warehouse/config.yaml")
    'warehouse/sluice.yaml'
    """
    folder, slash, _name = config_path.rpartition("/")
    return folder + slash + SETTINGS_FILES[0]


def parse(source: Source) -> Parsed:
    """Parse one side's settings (no file at all: all defaults). config.yaml's Jinja is
    rendered under its path in the project, whoever reads it (the PR build, a promotion,
    the prod branch's read), so every reader renders one template the same way.

    Raises:
        ConfigError: naming ``path:line`` (after ``where:``) and how to fix it.
    """
    try:
        config_doc = None
        if source.config_text is not None:  # SQLMesh's {{ env_var() }}: see its rules
            text = jinja.render_config(source.config_text, source.config_path)
            config_doc = parse_yaml(text, source.config_path)
        settings_doc = None
        if source.settings_text is not None:  # Sluice's own file: plain YAML, no Jinja
            settings_doc = parse_yaml(source.settings_text, source.settings_path)
        if config_doc is None and settings_doc is None:
            config = ProjectConfig()
        else:
            config = parse_config(config_doc or LocatedYaml(source.config_path, {}), settings_doc)
    except ConfigError as exc:
        if not source.where or exc.path is None:
            raise
        raise ConfigError(
            exc.message, path=f"{source.where}:{exc.path}", line=exc.line, col=exc.col,
            hint=exc.hint,
        ) from None  # fmt: skip
    return parsed_settings(config.sluice, source.policies)


def parsed_settings(sluice: SluiceSettings, policies: PolicyFiles = ()) -> Parsed:
    """``sluice`` (and the ``policies`` beside it) with their digest."""
    gate, deploy = sluice.gate, sluice.deploy
    named = "prod_branch" in deploy.model_fields_set
    return Parsed(sluice, gate, deploy, digest(sluice, gate, deploy, policies), named, policies)


PINNED_FILE = ":parsed"
"""The pin's file for settings kept as parsed (:func:`pinned_text`), never as the text
they were read from: a text rendered again could read differently (red team, settings
round 2: Jinja that reads who renders it, a set's order, an object's address)."""


def pinned_text(parsed: Parsed, branch: str) -> str:
    """What the ledger keeps of settings in force: the settings as parsed (only what they
    set, so ``deploy.prod_branch`` stays unset when unset) and the prod branch they were
    read on, as JSON.

    >>> json.loads(pinned_text(parse(Source.of_config("sluice: {project: a}", "config.yaml")), "main"))
    {'branch': 'main', 'sluice': {'project': 'a'}}
    """
    data: dict[str, Any] = {
        "branch": branch,
        "sluice": parsed.sluice.model_dump(mode="json", exclude_unset=True),
    }
    if parsed.policies:  # kept as read: the policies in force never come from a branch again
        data["policies"] = [list(file) for file in parsed.policies]
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _from_pin(pinned: PinnedSettings, path: str) -> tuple[Parsed, str | None]:
    """(the settings in force, the prod branch they name or were read on; None: the
    service's) as the ledger keeps them.

    Raises:
        ConfigError: they no longer read as they did when pinned (their digest differs):
            nothing is trusted until an operator looks.
    """
    if pinned.file != PINNED_FILE:  # a pin from before: the text of the file read
        old = parse(
            dataclasses.replace(Source.of_pin(pinned.file, pinned.text, path), where=pinned.sha[:7])
        )
        return old, old.deploy.prod_branch if old.names_prod_branch else None
    data = json.loads(pinned.text)
    policies = tuple((str(path), str(text)) for path, text in data.get("policies", []))
    parsed = parsed_settings(SluiceSettings.model_validate(data["sluice"]), policies)
    if parsed.digest != pinned.digest:
        raise ConfigError(
            f"the settings in force (pinned at {pinned.sha[:7]}) no longer read as they did "
            "when they were pinned: this Sluice validates them differently",
            hint="ask the service's operator: promote a commit whose settings are valid, or "
            "run the Sluice that pinned them",
        )
    return parsed, str(data["branch"])


def digest(
    sluice: SluiceSettings, gate: GateSettings, deploy: DeploySettings, policies: PolicyFiles = ()
) -> str:
    """A hash of what the ``sluice:`` section says (formatting and comments aside) and of
    the policies' files (each byte: a policy is read as written); without policies, the
    digest settings had before policies were part of it."""
    data: dict[str, Any] = {
        "sluice": sluice.model_dump(mode="json", exclude={"gate", "deploy"}),
        "gate": gate.model_dump(mode="json"),
        "deploy": deploy.model_dump(mode="json"),
    }
    if policies:
        data["policies"] = [list(file) for file in policies]
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _short(sha: str | None) -> str:
    return f"`{sha[:7]}`" if sha else "its head"


def read_config(read: Callable[[str], str | None], path: str) -> tuple[str, str | None]:
    """(path, text) of a project's config on one side (a branch, a commit's tree): its
    ``config.yaml``, else its ``config.yml``, as the loader reads them; ``path`` names the
    ``config.yaml`` (under the project's folder). Text None: there is neither.

    Raises:
        ConfigError: both exist (which one counts?), as the loader says.

    >>> read_config({"config.yml": "sluice: {}"}.get, "config.yaml")
    ('config.yml', 'sluice: {}')
    """
    return _one_of(read, path[: -len(CONFIG_FILES[0])], CONFIG_FILES)


def read_source(
    read: Callable[[str], str | None],
    path: str,
    listing: Callable[[str], list[DirEntry] | None] | None = None,
) -> Source:
    """The files that hold one side's settings (:class:`Source`): its config and its
    sluice.yaml (or sluice.yml) beside it; ``path`` names the project's ``config.yaml``.

    Raises:
        ConfigError: a side has both names of one file, as the loader says.

    >>> read_source({"sluice.yaml": "gate: {}"}.get, "config.yaml")
    Source(config_path='config.yaml', config_text=None, settings_path='sluice.yaml', settings_text='gate: {}', where='', policies=())
    """
    config_path, config_text = read_config(read, path)
    folder = settings_beside(path)[: -len(SETTINGS_FILES[0])]
    settings_path, settings_text = _one_of(read, folder, SETTINGS_FILES)
    policies = read_policy_files(listing, read, folder) if listing is not None else ()
    return Source(config_path, config_text, settings_path, settings_text, policies=policies)


POLICY_CHARS = 256 * 1024
"""Most characters all of a side's policy files may hold together (they are kept in the
pin, and read on every job)."""


def read_policy_files(
    listing: Callable[[str], list[DirEntry] | None],
    read: Callable[[str], str | None],
    folder: str,
) -> PolicyFiles:
    """The policy files of one side (a branch, a commit's tree): ``policies/*.yaml`` of the
    project in ``folder`` (``""`` or ``warehouse/``), as written; their rules are parsed
    where they are evaluated (:mod:`sluice.bot.flow.policies`), so a broken one blocks
    there, naming its file and line. Bounded: at most
    :data:`~sluice.core.policy.load.MAX_POLICIES` files, each of at most
    :data:`~sluice.core.policy.load.MAX_FILE_CHARS`, :data:`POLICY_CHARS` in all.

    Raises:
        ConfigError: a policy file is a link or a folder (a forge's API and a tree on disk
            would read it differently), not text, or over the bounds.
    """
    where = folder + policy_load.DIRECTORY
    entries = listing(where)
    if entries is None:
        return ()
    found = [e for e in entries if policy_load.is_policy_file(f"{policy_load.DIRECTORY}/{e.name}")]
    if len(found) > policy_load.MAX_POLICIES:
        raise ConfigError(
            f"{len(found)} policy files, over the {policy_load.MAX_POLICIES} allowed",
            path=where,
            hint="merge related rules into one policy",
        )
    files: list[tuple[str, str]] = []
    total = 0
    for entry in found:
        relative = f"{policy_load.DIRECTORY}/{entry.name}"
        shown = folder + relative
        if entry.kind != "file":
            raise ConfigError(
                f"a policy file must be a regular file, not a {entry.kind}",
                path=shown,
                hint="copy the policy into policies/",
            )
        limit = policy_load.MAX_FILE_CHARS
        if entry.size is not None and entry.size > 4 * limit:  # UTF-8: 4 bytes a character
            raise ConfigError(
                f"the policy file is {entry.size:,} bytes, over the {limit:,} characters allowed",
                path=shown,
            )
        text = read(shown)
        if text is None:
            raise ConfigError("the policy file could not be read", path=shown, hint="retry")
        if len(text) > limit:
            raise ConfigError(
                f"the policy file is {len(text):,} characters, over the {limit:,} allowed",
                path=shown,
            )
        total += len(text)
        if total > POLICY_CHARS:
            raise ConfigError(
                f"the policy files hold over {POLICY_CHARS:,} characters together",
                path=where,
                hint="shorten the descriptions, or merge policies",
            )
        files.append((relative, text))
    return tuple(files)


def _one_of(
    read: Callable[[str], str | None], folder: str, names: tuple[str, str]
) -> tuple[str, str | None]:
    """(path, text) of the first of ``names`` (``.yaml``, ``.yml``) in ``folder`` that
    exists (text None: neither; path then the first)."""
    first_name, second_name = names
    first, second = read(folder + first_name), read(folder + second_name)
    if first is not None and second is not None:
        raise ConfigError(
            f"the project has both {first_name} and {second_name}",
            path=folder + second_name,
            line=1,
            hint=f"keep one: merge {second_name} into {first_name} and delete it",
        )
    if first is None and second is not None:
        return folder + second_name, second
    return folder + first_name, first


def tree_source(tree: Path, path: str) -> Source:
    """:func:`read_source` of a commit's files on disk (``tree``).

    Raises:
        ConfigError: a settings or config file is a symbolic link: the forge's API reads
            a link as the text of its target's name, the tree as its target's content, so
            the two readers of one commit would see different settings (red team).
    """

    def read(name: str) -> str | None:
        file = tree / name
        if file.is_symlink():
            raise ConfigError(
                f"{name} is a symbolic link: Sluice reads settings only from a file",
                path=name,
                line=1,
                hint=f"replace the link with the file it points to ({name})",
            )
        try:
            return file.read_text(encoding="utf-8") if file.is_file() else None
        except UnicodeDecodeError:
            raise ConfigError(f"{name} is not UTF-8 text", path=name) from None

    return read_source(read, path, lambda folder: _list_on_disk(tree, folder))


def _list_on_disk(tree: Path, folder: str) -> list[DirEntry] | None:
    """Folder ``folder`` of ``tree`` as a forge lists it (a link is a ``link``, never
    followed); None when it is not a folder."""
    where = tree / folder
    if where.is_symlink() or not where.is_dir():
        return None
    entries = []
    for item in sorted(where.iterdir()):
        if item.is_symlink():
            entries.append(DirEntry(item.name, "link"))
        elif item.is_file():
            entries.append(DirEntry(item.name, "file", item.stat().st_size))
        else:
            entries.append(DirEntry(item.name, "dir" if item.is_dir() else "other"))
        if len(entries) > LIST_LIMIT:
            raise ConfigError(f"{folder} holds over {LIST_LIMIT} entries", path=folder)
    return entries


def read_prod(
    forge: Forge,
    branch: str,
    path: str,
    read: Callable[[str, str], str | None] | None = None,
    listing: Callable[[str, str], list[DirEntry] | None] | None = None,
) -> tuple[Parsed, str, str | None]:
    """The settings on the prod branch now, read the first time (nothing pinned yet):
    (parsed, branch, head sha).

    ``branch`` is the service's ``SLUICE_PROD_BRANCH``; when its settings name another
    ``deploy.prod_branch``, that branch is read instead (once: it must name itself).
    ``path`` names the project's config.yaml; a config.yml is read when that is absent,
    and the sluice.yaml beside it (:func:`read_source`). ``read`` (ref, path) reads a file
    (default: ``forge.read_file``; a job's, fetching each once:
    :meth:`~sluice.bot.flow.job.Job.read_file`).
    """
    read = read or forge.read_file
    listing = listing or forge.list_dir
    parsed = _read_branch(read, branch, path, listing)
    if parsed.names_prod_branch and parsed.deploy.prod_branch != branch:
        named = parsed.deploy.prod_branch
        again = _read_branch(read, named, path, listing)
        if again.deploy.prod_branch != named:
            raise ConfigError(
                f"`sluice.deploy.prod_branch` on {md.code(branch)} names {md.code(named)}, whose own "
                f"settings name {md.code(again.deploy.prod_branch)}: the prod branch is ambiguous",
                path=f"{named}:{path}",
                hint=f"make {md.code(named)}'s settings name itself, "
                "or set SLUICE_PROD_BRANCH to the prod branch",
            )
        parsed, branch = again, named
    return parsed, branch, forge.commit_of(branch)


def _read_branch(
    read: Callable[[str, str], str | None],
    branch: str,
    path: str,
    listing: Callable[[str, str], list[DirEntry] | None],
) -> Parsed:
    """The settings (and policies) on ``branch``'s head."""
    source = read_source(
        lambda name: read(branch, name), path, lambda folder: listing(branch, folder)
    )
    return parse(dataclasses.replace(source, where=branch))


def settings_for(
    forge: Forge,
    ledger: Ledger,
    repo: str,
    *,
    branch: str,
    path: str,
    now: int,
    read: Callable[[str, str], str | None] | None = None,
    listing: Callable[[str, str], list[DirEntry] | None] | None = None,
) -> Settings:
    """The settings in force for ``repo`` (see the module docstring); ``listing`` (ref,
    folder) lists a folder (default: ``forge.list_dir``), for the policies.

    Once settings are pinned, the prod branch is the one they were pinned on: a
    ``deploy.prod_branch`` pushed past the gate is a change of the settings like any
    other, not a redirect to follow (red team). Newer settings count only when a gate
    approved the change from the settings pinned now (:func:`change_item`): an approval
    of settings long replaced does not bring them back. The pin is the settings as parsed (:func:`pinned_text`), never a text read
    again.

    Raises:
        ConfigError: the prod branch's (or the pinned) settings are invalid.
    """
    pinned = ledger.settings_in_force(repo)
    if pinned is None:
        parsed, first_branch, sha = read_prod(forge, branch, path, read, listing)
        text = pinned_text(parsed, first_branch)
        at = sha or first_branch
        people = _resolve(forge, named_people(parsed.sluice, parsed.policies))
        if ledger.pin_settings(
            repo, at, parsed.digest, text, PINNED_FILE, now, replace=False, people=people
        ):
            pinned = PinnedSettings(at, parsed.digest, text, PINNED_FILE, now, people)
        else:  # another job pinned first: its settings are the ones in force
            pinned = ledger.settings_in_force(repo)
            if pinned is None:
                raise ConfigError("the settings in force could not be recorded", hint="retry")
        if pinned.digest == parsed.digest:
            head = _settings(parsed, first_branch, sha, f"{md.code(first_branch)} at {_short(sha)}")
            head = dataclasses.replace(head, python_ref=sha, generation=_generation(pinned))
            return _with_people(forge, ledger, repo, pinned, head)
    old, pinned_branch = _from_pin(pinned, path)
    branch = pinned_branch or branch
    parsed = _read_branch(read or forge.read_file, branch, path, listing or forge.list_dir)
    sha = forge.commit_of(branch)
    head = _settings(parsed, branch, sha, f"{md.code(branch)} at {_short(sha)}")
    head = dataclasses.replace(head, generation=_generation(pinned))
    # Python runs as prod was last promoted with while a gate guards prod: the branch's
    # head may hold commits pushed or merged past it.
    if pinned.digest == parsed.digest:
        ref = pinned.sha if head.requires_approval else None
        return _with_people(forge, ledger, repo, pinned, dataclasses.replace(head, python_ref=ref))
    if not _requires_approval(old.gate):
        if parsed.policies == old.policies:
            # nothing guarded the settings: the newer ones are as good
            return _with_people(forge, ledger, repo, pinned, head)
        # Policies stay as pinned until a promotion moves them, gate or no gate: a push
        # deleting a hard policy does not lift it (red team).
        held = parsed_settings(parsed.sluice, old.policies)
        kept = _settings(held, branch, sha, f"{md.code(branch)} at {_short(sha)}")
        kept = dataclasses.replace(kept, generation=_generation(pinned))
        return _with_people(forge, ledger, repo, pinned, kept)
    if not ledger.unapproved(repo, [change_item(parsed.digest, _generation(pinned))]):
        approved = dataclasses.replace(head, python_ref=pinned.sha)  # a gate approved these
        return _with_people(forge, ledger, repo, pinned, approved)
    note = (
        f"Sluice's settings on {md.code(branch)} ({_short(sha)}) changed in commits no "
        f"`sluice/approval` gate approved, so Sluice keeps the settings prod was last "
        f"promoted with ({_short(pinned.sha)}). Change them through a pull request that is "
        "approved and promoted."
    )
    where = f"the settings prod was last promoted with ({_short(pinned.sha)})"
    ledger.append(
        audit.Entry(
            now,
            repo,
            audit.SETTINGS,
            audit.SERVICE,
            "not approved: not in force",
            ref=(sha or branch)[:12],
            detail=f"sluice: settings on {branch} changed past the gate; those of "
            f"{pinned.sha[:12]} stay in force",
        ),
        once=True,
    )
    kept = _settings(old, branch, pinned.sha, where, note)
    kept = dataclasses.replace(kept, python_ref=pinned.sha, generation=_generation(pinned))
    return _with_people(forge, ledger, repo, pinned, kept)


def _generation(pinned: PinnedSettings) -> str:
    """Which pin ``pinned`` is: its digest and when it was set (a promotion of the same
    settings keeps both; other settings make another)."""
    return f"{pinned.digest[:16]}@{pinned.pinned_ts}"


def named_people(sluice: SluiceSettings, policies: PolicyFiles = ()) -> list[str]:
    """The logins (case-folded, sorted) settings name as people: the gate's required
    approvers, the backfill budget's approver, the tiers' ``released_by``, the soft
    policies' ``override_by`` (a policy that does not parse names nobody: it blocks where it
    is evaluated). Teams (``org/team``) are not people: their members are asked of the
    forge when a decision is taken.

    >>> named_people(SluiceSettings.model_validate(
    ...     {"gate": {"required_approvers": {"users": ["Bob", "@carol"], "teams": ["o/t"]},
    ...               "backfill": {"max_intervals": 3, "approver": "dana"}}}))
    ['bob', 'carol', 'dana']
    """
    gate = sluice.gate
    names: list[str] = list(gate.required_approvers.users)
    if gate.backfill is not None:
        names.append(gate.backfill.approver)
    for tier in sluice.deploy.environments:
        names += tier.released_by
    for path, text in policies:
        try:
            names += policy_load.parse_policy(path, text).override_by
        except ConfigError:
            continue
    return sorted({_person(name) for name in names if "/" not in name and _person(name)})


def _person(name: str) -> str:
    return name.strip().removeprefix("@").casefold()


def _resolve(forge: Forge, names: Iterable[str]) -> dict[str, int | None] | None:
    """Each login's account id now (None: no account has it); None on a forge whose people
    are logins only (the local forge: logins compare as they are)."""
    if forge.name == "local":
        return None
    return {name: forge.id_of(name) for name in names}


def names_person(
    forge: Forge,
    people: Mapping[str, int | None] | None,
    names: Iterable[str],
    login: str,
    uid: int | None,
) -> bool:
    """Whether the account ``uid`` (login ``login`` now; None: not known) is one of
    ``names`` (logins and ``org/team``s the settings name): a login the pin fixed to an
    account (``people``: :attr:`Settings.people`) is that account alone, whatever its login
    now, and never whoever took the login since; a team's members are the forge's logins of
    now; a login not pinned (the local forge) compares as a login, case-folded. An account
    named that is a bot is no person (:func:`not_a_person`): False."""
    return _named(forge, people, names, login, uid) and not_a_person(forge, login, uid) is None


def _named(
    forge: Forge,
    people: Mapping[str, int | None] | None,
    names: Iterable[str],
    login: str,
    uid: int | None,
) -> bool:
    for name in names:
        if "/" in name:
            if login.casefold() in {m.casefold() for m in forge.team_members(name)}:
                return True
            continue
        key = _person(name)
        if people is not None and key in people:
            if people[key] is not None and uid == people[key]:
                return True
        elif key == login.casefold():
            return True
    return False


def not_a_person(forge: Forge, login: str, uid: int | None) -> str | None:
    """Why the account ``uid`` (login ``login`` now; None: not known) counts as no person
    where the settings name people (required approvers, owners, the budget's approver,
    ``released_by``, ``override_by``), as plain text; None: it counts. A bot account (an
    App's, a GitLab project's or group's access token user, a service account) is driven
    by whoever holds its token, whom the forge does not name, though a team or group lists
    it: what the account is, the forge says by its id
    (:meth:`~sluice.bot.forge.base.Forge.account_of`, asked once per forge), else the form
    of its login (:func:`~sluice.bot.flow.gate_rules.bot_account`), as the gate judges an
    approval."""
    account = forge.account_of(uid) if uid is not None else None
    if account is not None and account.bot is not None:
        bot = account.bot
    else:
        bot = bot_account(login) or (account is not None and bot_account(account.login))
    if not bot:
        return None
    said = "its login has a bot account's form"
    if account is not None and account.bot:
        said = "the forge says its account is a bot"
    return f"{said}; whoever holds a bot's token is not named, so it stands for no person"


_NAMED: dict[str, list[str]] = {}
"""Settings' digest -> :func:`named_people` of them (the policies parsed once)."""


def _with_people(
    forge: Forge, ledger: Ledger, repo: str, pinned: PinnedSettings, settings: Settings
) -> Settings:
    """``settings`` with who the logins they name are (:attr:`Settings.people`), as the pin
    records them. A login the pin does not know yet (named by settings it did not hold, or
    pinned before ledger migration 10) is resolved now, once, and recorded with the pin;
    one it knows keeps the account it had then."""
    known = dict(pinned.people or {})
    named = _NAMED.get(settings.digest)
    if named is None:  # parsed once per settings in this process, not once per job
        if len(_NAMED) >= 64:
            _NAMED.clear()
        named = _NAMED[settings.digest] = named_people(settings.sluice, settings.policies)
    missing = [name for name in named if name not in known]
    if pinned.people is None or missing:
        found = _resolve(forge, missing)
        if found is None:
            return settings
        known |= found
        # Added to the pin, never written whole: another job may have pinned logins
        # meanwhile (an owner a promotion brought), and a login pinned keeps its account.
        stored = ledger.record_people(repo, pinned.digest, known)
        known = known if stored is None else stored
    return dataclasses.replace(settings, people=known)


def pin_owners(job: Job, project: Project) -> None:
    """Record who the owners of ``project``'s models are (a login, not a team), where the
    pin does not know them yet: called when ``project`` is promoted, so the owners prod
    will record are fixed to accounts as they come into force, and one a model named
    before keeps the account it had then. A forge of logins only: nothing."""
    pinned = job.ledger.settings_in_force(job.repo)
    if pinned is None or job.forge.name == "local":
        return
    known = dict(pinned.people or {})
    owners = {_person(m.owner) for m in project.models.values() if m.owner}
    missing = sorted(o for o in owners if o and "/" not in o and o not in known)
    found = _resolve(job.forge, missing) if missing else None
    if found:
        job.ledger.record_people(job.repo, pinned.digest, found)  # added: none replaced


def pin(ledger: Ledger, repo: str, sha: str, parsed: Parsed, branch: str, now: int) -> None:
    """Prod was promoted to ``sha``: its settings (``parsed``, as the promotion checked
    them) are now the ones in force, on the prod branch ``branch`` (the one in force, or
    the one they name: an approved change of it). A change of them is recorded in the
    audit log, in the same transaction."""
    branch = parsed.deploy.prod_branch if parsed.names_prod_branch else branch
    with ledger.together("move the settings in force"):
        before = ledger.settings_in_force(repo)
        text = pinned_text(parsed, branch)
        # Who the logins named are stays as first resolved (a login taken since by another
        # account names nobody new); logins these settings add are resolved at next read.
        people = before.people if before is not None else None
        ledger.pin_settings(
            repo, sha, parsed.digest, text, PINNED_FILE, now, replace=True, people=people
        )
        if before is not None and before.digest != parsed.digest:
            ledger.append(
                audit.Entry(
                    now,
                    repo,
                    audit.SETTINGS,
                    audit.SERVICE,
                    "in force",
                    ref=sha[:12],
                    detail=f"sluice: settings of {sha[:12]} "
                    f"(were {before.sha[:12]}'s), promoted to prod",
                )
            )


def _requires_approval(gate: GateSettings) -> bool:
    return gate.required_approvers.count > 0 or gate.owners_must_approve != "never"


def _settings(
    parsed: Parsed, branch: str, sha: str | None, source: str, note: str | None = None
) -> Settings:
    deploy = parsed.deploy.model_copy(update={"prod_branch": branch})
    return Settings(
        branch, sha, parsed.sluice, parsed.gate, deploy, parsed.digest, source, note,
        policies=parsed.policies,
    )  # fmt: skip


def for_repository(job: Job) -> Settings:
    """The trusted settings of ``job.forge``'s repository: the prod branch's as in force,
    resolved once per job (kept in ``job.trusted``: a promotion's new settings govern the
    jobs after it).

    Raises:
        ConfigError: the prod branch's settings are invalid.
    """
    if job.trusted is None:
        job.trusted = settings_for(
            job.forge,
            job.ledger,
            job.repo,
            branch=job.deps.prod_branch,
            path=job.deps.config_path,
            now=job.now,
            read=job.read_file,
            listing=job.list_dir,
        )
    return job.trusted


def load_trusted(job: Job, tree: Path, settings: Settings) -> Project:
    """The project in ``tree`` with the trusted ``sluice:`` settings, not its own, and
    its Python only as far as ``SLUICE_PROJECT_PYTHON`` allows (:func:`python_refusal`).

    Never through the parse cache: a tree comes from a commit, and a commit can hold a
    forged ``.sluice/cache/models.json`` whose entries would skip every check.
    """
    project = load_project(
        tree / job.deps.project_path,
        use_cache=False,
        sluice=settings.for_project(job.deps.spark),
        python=python_refusal(job, tree, settings.branch, settings.python_ref),
    )
    if job.deps.isolate:  # issue 46: no repository names a state owner's unprefixed schemas
        foreign = tenancy.foreign_schemas(job.namespace, job.ledger, job.deps.state_url)
        tenancy.refuse_foreign(project, foreign)
    return project


def python_refusal(job: Job, tree: Path, branch: str, ref: str | None = None) -> Refusal | None:
    """None when the project's Python in ``tree`` may run; otherwise why not, what to do
    and, under ``prod``, every Python file that differs from prod's (the loader refuses a
    project with Python with it). Prod's Python is that of commit ``ref`` (the one prod
    was last promoted with, :attr:`Settings.python_ref`), else the head of ``branch``.
    "Python" is every file :func:`~sluice.core.model.pycode.files.sources` names."""
    if job.deps.project_python == "on":
        found = sandbox.isolation()
        if found == "none":  # fail closed: a PR's own Python, unconfined
            return Refusal(
                "this service has no sandbox for a pull request's code (SLUICE_SANDBOX, a "
                "setting of the service; bubblewrap and setpriv are unavailable or turned "
                "off), so it runs no pull request's own Python (SLUICE_PROJECT_PYTHON=on): "
                "ask its operator to install bubblewrap (docs/security.md, 'The sandbox')"
            )
        if found != "bwrap":  # a uid drop keeps the host's network and processes in reach
            return Refusal(
                f"this service's sandbox is {found} (SLUICE_SANDBOX, a setting of the "
                "service): a uid drop, which leaves the host's network and files in reach, "
                "so it runs no pull request's own Python (SLUICE_PROJECT_PYTHON=on) until "
                "its operator installs bubblewrap and allows user namespaces "
                "(docs/security.md, 'The sandbox')"
            )
        return None
    if job.deps.project_python == "off":
        return Refusal(
            "this service runs no project Python (SLUICE_PROJECT_PYTHON=off, a setting of "
            "the service): ask its operator, or keep the project to SQL"
        )
    ours, prods = prod_python(job, tree, branch, ref)
    changed = [rel for rel, data in sorted(ours.items()) if prods.get(rel) != data]
    if not changed:
        return None
    where = f"`{ref[:7]}`, the commit prod was last promoted with" if ref else "its head"
    return Refusal(
        f"this pull request changes Python ({', '.join(changed)}), and this service runs a "
        f"project's Python only as it is on the prod branch `{branch}` ({where}) "
        "(SLUICE_PROJECT_PYTHON=prod, a setting of the service): Python holds the job's "
        "Spark session, so it runs once reviewed and merged. Change SQL models here and "
        "Python in a pull request of its own, or ask the service's operator about "
        "SLUICE_PROJECT_PYTHON=on",
        tuple(changed),
    )


def prod_python(
    job: Job, tree: Path, branch: str, ref: str | None = None
) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """(the project's Python in ``tree``, prod's version of each of those files): prod's
    is commit ``ref`` (the one prod was last promoted with, :attr:`Settings.python_ref`),
    else the head of ``branch``, as :func:`python_refusal` compares them; a file prod
    does not have is left out. Their :func:`~sluice.core.model.pycode.files.digest` is
    equal when each of the tree's Python files is prod's (what a plan's review compares).
    Prod is read one file at a time (the job.forge lists no tree), so a file only prod has
    (one the tree deletes) is not seen: a deletion brings no new code."""
    prefix = job.deps.project_path.strip("/")
    prefix = "" if prefix in ("", ".") else prefix + "/"
    ours = pycode_files.sources(tree / job.deps.project_path)
    prods: dict[str, bytes] = {}
    for rel in sorted(ours):
        text = job.read_file(ref or branch, prefix + rel)
        if text is not None:
            prods[rel] = text.encode("utf-8")
    return ours, prods


def prod_python_digest(job: Job, tree: Path, settings: Settings) -> str | None:
    """The digest of prod's Python as :func:`prod_python` reads it for the project in
    ``tree`` under ``settings`` (None: prod has none of its Python files)."""
    ref = promoted_ref(job, settings)
    return pycode_files.digest(prod_python(job, tree, settings.branch, ref)[1])


def promoted_ref(job: Job, settings: Settings) -> str | None:
    """The commit whose Python and statements are prod's, as a gate compares a project's
    with them: the one prod's plan records it was promoted from (state migration 6) while
    a gate guards prod, else :attr:`Settings.python_ref` (the pin's commit; None: the
    branch's head). Not the pin alone: first made after a push past the gate, it is that
    push, whose statements would then pass as prod's (red team, drift repair)."""
    if settings.python_ref is None:
        return None
    url = job.state_url
    store = read_state(url) or open_state(url)  # read-only where it can (a SQLite file)
    try:
        found = plan_commit(store, PROD)
    finally:
        store.close()
    return found[1] if found is not None and found[1] else settings.python_ref


def prod_statements_digest(job: Job, settings: Settings) -> str | None:
    """The digest of ``before_all`` / ``after_all`` in prod's config.yaml (or config.py:
    :func:`_python_statements`): that of the commit prod was promoted from
    (:func:`promoted_ref`), else the prod branch's head (None: prod has none). A
    config prod cannot read counts as statements no project has, so a project's own are
    an item to approve."""
    ref = promoted_ref(job, settings) or settings.branch
    found, text = read_config(lambda name: job.read_file(ref, name), job.deps.config_path)
    if text is None:
        python = job.deps.config_path[: -len(CONFIG_FILES[0])] + PYTHON_CONFIG
        return _python_statements(job, ref) if job.read_file(ref, python) is not None else None
    with tempfile.TemporaryDirectory(prefix="sluice-prod-config-") as folder:
        Path(folder, Path(found).name).write_text(text, encoding="utf-8")
        try:
            config = load_config(Path(folder))
        except SluiceError:
            return "unreadable"
    return statements.digest(config.before_all, config.after_all)


def _python_statements(job: Job, ref: str) -> str | None:
    """The digest of ``before_all`` / ``after_all`` of prod's config.py at ``ref`` (a
    project configured in Python): its tree's config.py run as the loader runs it, in the
    sandboxed process (:mod:`sluice.core.model.pycode.config_file`); it is prod's Python,
    which ``SLUICE_PROJECT_PYTHON`` prod and on run. ``"unreadable"`` (a digest no project
    has, so the project's statements are an item) when it may not or cannot be run."""
    if job.deps.project_python == "off":
        return "unreadable"
    sha = ref if re.fullmatch(r"[0-9a-fA-F]{40}", ref) else job.forge.commit_of(ref)
    if sha is None:
        return "unreadable"
    try:
        tree = job.tree(sha)
        config = load_config(tree / job.deps.project_path, python=pycode_config.read)
    except SluiceError:
        return "unreadable"
    return statements.digest(config.before_all, config.after_all)


def prod_project(job: Job, what: str) -> tuple[Settings, Path, Project] | None:
    """The trusted settings, tree and project prod runs (the commit prod's plan was
    promoted from, :func:`promoted_ref`, else the one its settings are pinned at); None
    when there is nothing to work on yet."""
    if job.ledger.last_sha(job.repo) is None:
        return None  # no project was ever loaded for this repository: nothing built
    settings = for_repository(job)
    # The commit prod was promoted from while a gate guards it (the branch's head may hold
    # commits pushed or merged past the gate: their statements, audits and Python must not
    # run in prod's jobs; red team, drift repair); else the settings' commit.
    ref = promoted_ref(job, settings)
    if ref != settings.python_ref:  # its Python is prod's too
        settings = dataclasses.replace(settings, python_ref=ref)
    sha = settings.python_ref or settings.sha or job.forge.commit_of(settings.branch)
    if sha is None:
        log.warning(
            "%s: %s skipped: the prod branch %s has no commit",
            job.forge.repo,
            what,
            settings.branch,
        )
        return None
    tree = job.tree(sha)
    return settings, tree, load_trusted(job, tree, settings)
