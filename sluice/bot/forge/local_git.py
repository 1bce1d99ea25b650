"""Git, run as a subprocess, for the local forge: reading a repository's commits, files and
branches, archiving a commit's files through the forge's archive checks, and the merge
plumbing (``merge-tree --write-tree``, ``commit-tree``, moving a branch) that makes a merge
without a worktree. Needs ``git`` 2.38 or later.

:class:`~sluice.bot.forge.local.LocalForge` adds the pull requests and their records.
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
from pathlib import Path

from sluice.bot.forge.archive import TREE_LIMITS, TreeLimits, extract
from sluice.bot.forge.base import LIST_LIMIT, DirEntry, ForgeError

log = logging.getLogger(__name__)

_DEFAULT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Sluice",
    "GIT_AUTHOR_EMAIL": "sluice@localhost",
    "GIT_COMMITTER_NAME": "Sluice",
    "GIT_COMMITTER_EMAIL": "sluice@localhost",
}


class GitRepo:
    """The git repository at ``repo_dir`` (a worktree or a bare repository); the files of
    a commit held to ``tree_limits``.

    Raises:
        ForgeError: ``repo_dir`` is not a git repository, or git is not installed.
    """

    def __init__(self, repo_dir: Path, tree_limits: TreeLimits = TREE_LIMITS) -> None:
        repo_dir = Path(repo_dir)
        if not repo_dir.is_dir():
            raise ForgeError(f"local: {repo_dir} is not a directory")
        self._cwd = repo_dir.resolve()
        bare = self._git("rev-parse", "--is-bare-repository", what="opening the repository")
        self.bare = bare.strip() == "true"
        if self.bare:
            self.root = self._cwd
        else:
            top = self._git("rev-parse", "--show-toplevel", what="opening the repository")
            self.root = Path(top.strip()).resolve()
            self._cwd = self.root
        self.repo = self.root.name.removesuffix(".git") or "repo"
        self.tree_limits = tree_limits

    # -- git -----------------------------------------------------------------------------

    def _run(
        self, *args: str, what: str, input: bytes | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        environment = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **(env or {})}
        try:
            return subprocess.run(
                ["git", *args],
                cwd=self._cwd,
                input=input,
                capture_output=True,
                env=environment,
                check=False,
            )
        except FileNotFoundError:
            raise ForgeError(
                f"local: {what} failed: git is not installed", hint="install git 2.38 or later"
            ) from None

    def _git(self, *args: str, what: str, env: dict[str, str] | None = None) -> str:
        done = self._run(*args, what=what, env=env)
        if done.returncode != 0:
            message = done.stderr.decode("utf-8", "replace").strip().splitlines()
            text = message[-1] if message else f"git exited with {done.returncode}"
            if "not a git repository" in text:
                raise ForgeError(
                    f"local: {self._cwd} is not a git repository",
                    hint="run the command inside a git repository, or pass --repo PATH",
                )
            raise ForgeError(f"local: {what} failed: {text}")
        return done.stdout.decode("utf-8", "replace")

    def _rev(self, spec: str) -> str | None:
        done = self._run("rev-parse", "--verify", "--quiet", spec, what=f"resolving {spec}")
        return done.stdout.decode().strip() or None if done.returncode == 0 else None

    def branch_sha(self, branch: str) -> str | None:
        """The commit branch ``branch`` points at; None when there is no such branch."""
        if not branch or branch.startswith("-"):
            return None
        return self._rev(f"refs/heads/{branch}^{{commit}}")

    def _identity(self) -> dict[str, str]:
        """Git's own identity when configured, else Sluice's (commit-tree needs one)."""
        done = self._run("var", "GIT_COMMITTER_IDENT", what="reading git's identity")
        return {} if done.returncode == 0 else dict(_DEFAULT_IDENTITY)

    # -- files ---------------------------------------------------------------------------

    def fetch_tree(self, sha: str, dest: Path) -> None:
        """Write the files of commit ``sha`` into ``dest``: ``git archive`` piped through the
        same checks as a forge's archive (members that would land outside ``dest`` refused,
        the :attr:`tree_limits` applied as it streams; ``git archive`` is stopped at the
        first member over one), and nothing left in ``dest`` when refused."""
        commit = self.commit_of(sha)
        if commit is None:
            raise ForgeError(f"local: there is no commit {sha} in {self.repo}")
        dest.mkdir(parents=True, exist_ok=True)
        environment = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
        with tempfile.TemporaryFile() as errors:
            try:
                git = subprocess.Popen(
                    ["git", "archive", "--format=tar", commit],
                    cwd=self._cwd,
                    stdout=subprocess.PIPE,
                    stderr=errors,
                    env=environment,
                )
            except FileNotFoundError:
                raise ForgeError("local: git is not installed") from None
            assert git.stdout is not None
            try:
                extract(git.stdout, dest, forge="local", sha=sha, limits=self.tree_limits)
                git.stdout.read(1 << 20)  # the archive's end padding, which git may still write
            except ForgeError as exc:
                git.stdout.close()  # refused half way: a git still writing stops (EPIPE)
                try:
                    code = git.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    git.kill()
                    git.wait()
                    raise exc from None
                errors.seek(0)
                text = errors.read().decode("utf-8", "replace").strip()
                if code == 0 or not text:
                    raise
                # git failed too (on the same entry, or the stream ended early): say both,
                # the archive's check first, whichever of the two came first
                raise ForgeError(f"{exc.message} (git archive: {text})", hint=exc.hint) from exc
            finally:
                git.stdout.close()
            if git.wait() != 0:
                errors.seek(0)
                text = errors.read().decode("utf-8", "replace").strip()
                raise ForgeError(f"local: archiving {sha} failed: {text}")

    def read_file(self, ref: str, path: str) -> str | None:
        """The text of ``path`` at ``ref`` (branch, tag or sha); None when either is missing."""
        if not ref or ref.startswith("-"):
            return None
        path = path.strip("/").removeprefix("./")
        oid = self._rev(f"{ref}:{path}")
        if oid is None:
            return None
        kind = self._git("cat-file", "-t", oid, what=f"reading {path} at {ref}").strip()
        if kind != "blob":
            raise ForgeError(f"local: reading {path} at {ref} failed: it is a {kind}, not a file")
        done = self._run("cat-file", "blob", oid, what=f"reading {path} at {ref}")
        try:
            return done.stdout.decode("utf-8")
        except UnicodeDecodeError:
            raise ForgeError(
                f"local: reading {path} at {ref} failed: the file is not UTF-8 text"
            ) from None

    def list_dir(self, ref: str, path: str) -> list[DirEntry] | None:
        """The entries of folder ``path`` at ``ref``; None when either is missing."""
        if not ref or ref.startswith("-"):
            return None
        path = path.strip("/").removeprefix("./")
        what = f"listing {path or '/'} at {ref}"
        oid = self._rev(f"{ref}:{path}")
        if oid is None:
            return None
        kind = self._git("cat-file", "-t", oid, what=what).strip()
        if kind != "tree":
            raise ForgeError(f"local: {what} failed: it is a {kind}, not a folder")
        done = self._run("ls-tree", "-l", "-z", oid, what=what)
        if done.returncode != 0:
            raise ForgeError(f"local: {what} failed: git exited with {done.returncode}")
        entries = []
        for record in done.stdout.split(b"\0"):
            if not record:
                continue
            head, _, name = record.partition(b"\t")
            mode, type_, _oid, size = head.split(None, 3)
            found = {b"blob": "link" if mode == b"120000" else "file", b"tree": "dir"}
            entries.append(
                DirEntry(
                    name.decode("utf-8", "replace"),
                    found.get(type_, "other"),
                    int(size) if size.strip().isdigit() else None,
                )
            )
            if len(entries) > LIST_LIMIT:
                raise ForgeError(f"local: {what} failed: over {LIST_LIMIT} entries")
        return sorted(entries, key=lambda e: e.name)

    def commit_of(self, ref: str) -> str | None:
        """The commit ``ref`` (branch, tag, ``heads/...``, ``tags/...``, sha) points at,
        annotated tags peeled; None when there is none or it is not a commit."""
        if not ref or ref.startswith("-"):
            return None
        return self._rev(f"{ref}^{{commit}}")

    def on_branch(self, sha: str, branch: str) -> bool:
        """Whether ``sha`` is reachable from ``branch`` (a branch name or a commit)."""
        if sha.startswith("-") or branch.startswith("-"):
            return False
        done = self._run("merge-base", "--is-ancestor", sha, branch, what="comparing commits")
        if done.returncode not in (0, 1):
            log.info("local: %s or %s is unknown: not on the branch", sha, branch)
        return done.returncode == 0

    # -- merging without a worktree ---------------------------------------------------

    def _merged_tree(self, base_sha: str, head_sha: str, number: int) -> str:
        done = self._run(
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            base_sha,
            head_sha,
            what="merging",
        )
        out = done.stdout.decode("utf-8", "replace").splitlines()
        if done.returncode == 1:
            files = ", ".join(sorted({line for line in out[1:] if line.strip()})) or "?"
            raise ForgeError(
                f"local: pull request #{number} has conflicts with its base: {files}",
                hint="merge the base branch into the head branch, resolve them, commit, "
                f"and run `sluice pr sync {number}`",
            )
        if done.returncode != 0 or not out:
            text = done.stderr.decode("utf-8", "replace").strip()
            raise ForgeError(f"local: merging #{number} failed: {text} (git 2.38+ is needed)")
        return out[0].strip()

    def _subjects(self, base_sha: str, head_sha: str) -> str:
        log_text = self._git(
            "log",
            "--reverse",
            "--format=* %s",
            f"{base_sha}..{head_sha}",
            what="listing the commits",
        )
        return log_text.strip() + "\n" if log_text.strip() else ""

    def _advance(self, branch: str, old: str, new: str, message: str) -> None:
        """Move ``branch`` from ``old`` to ``new``; a branch checked out in the worktree is
        fast-forwarded there, so its files follow (refused when local edits are in the way)."""
        if new == old:
            return
        checked_out = None
        if not self.bare:
            head = self._run("symbolic-ref", "-q", "HEAD", what="reading HEAD")
            checked_out = head.stdout.decode().strip() if head.returncode == 0 else None
        if checked_out == f"refs/heads/{branch}":
            done = self._run("merge", "--ff-only", "--quiet", new, what="updating the worktree")
            if done.returncode != 0:
                text = done.stderr.decode("utf-8", "replace").strip().splitlines()
                raise ForgeError(
                    f"local: '{branch}' is checked out and could not be updated: "
                    f"{text[-1] if text else 'git merge --ff-only failed'}",
                    hint="commit or stash your local changes, or check out another branch",
                )
            return
        self._git(
            "update-ref", "-m", message, f"refs/heads/{branch}", new, old, what=f"moving {branch}"
        )
