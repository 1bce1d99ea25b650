"""One way to start a process that runs or renders what a pull request controls.

Every such process (the Jinja child, the Python macro child, the Spark driver that
``spark-submit`` starts, the Spark Connect job child and the Connect server) is started
through :func:`wrap`, with a :class:`Profile` saying what it may see and do. On Linux with
bubblewrap (``bwrap``) the process gets:

- its own mount namespace holding only the profile's paths (read-only unless the profile
  writes them), the system's programs and libraries, Python and Java, and a private
  ``/tmp``: never the state database, the service's workdir, other repositories' trees,
  the service's configuration or home;
- its own PID namespace (``/proc`` shows only the sandbox), IPC namespace, a new session;
- no network (``network="none"``: a namespace holding only its own loopback), or the
  host's loopback for a Spark job (``network="host"``; the Connect server asks a token);
- the service's uid mapped into a user namespace of its own, without capabilities, where
  it cannot make another (``--disable-userns``); ``no_new_privs``; its own root, ``/dev``
  read-only (only ``/tmp``, ``/var/tmp``, ``/dev/shm`` and the profile's folders take
  files); it dies with its parent.

Resource limits (memory, CPU, open files, processes, file size) are set by each light
child's own code before it reads anything a PR wrote (``jinja_sandbox._limit_self``,
``pycode.child._limit``); under a root service, whose uid Linux exempts from
``RLIMIT_NPROC``, it also starts in cgroups of :data:`LIGHT_BOUNDS`. A Spark process gets its profile's :class:`Limits` before it
starts: ``RLIMIT_NPROC`` (processes and threads) and ``RLIMIT_DATA`` (private memory)
through ``prlimit``, a ``/tmp`` tmpfs of half its memory, and, where this process can make
cgroups (root, whose uid the kernel exempts from ``RLIMIT_NPROC``, or a delegated v2 tree),
a pids and a memory cgroup of its own (:func:`_cgroups`). Every caller keeps its time
limit. Where bubblewrap cannot run (no user namespaces), a root service falls back to a uid
drop with ``setpriv``; where neither works, :func:`isolation` is ``"none"`` and
:func:`require_isolation` refuses to run a pull request's Python (fail closed), naming
``SLUICE_SANDBOX``.

Example (a child that cannot see this file's folder)::

    >>> import subprocess, sys
    >>> launch = wrap([sys.executable, "-c", "import os; print(os.path.exists('/work'))"],
    ...               Profile("example"))                                    # doctest: +SKIP
    >>> subprocess.run(launch.argv, capture_output=True).stdout             # doctest: +SKIP
    b'False\\n'
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sluice.core.errors import ConfigError

logger = logging.getLogger(__name__)

SETTING = "SLUICE_SANDBOX"
"""``auto`` (default: bubblewrap, else a uid drop, else none), ``bwrap``, ``setpriv`` or
``off`` (only for a developer's own projects: a pull request's Python is then refused)."""

Isolation = Literal["bwrap", "setpriv", "none"]

LIGHT_UIDS = (200_000, 260_000)
"""The range a root service picks a light child's uid from (one uid per child, so one
child's processes count against no other's ``RLIMIT_NPROC``)."""
SANDBOX_UID = 65534
"""The uid a process sees for itself inside a user namespace."""

PROCESSES_SETTING = "SLUICE_SANDBOX_PROCESSES"
"""The most processes and threads one sandboxed Spark process and its children may have
together (default :data:`PROCESSES`): a JVM's threads count, so it is generous."""
PROCESSES = 2048

# What every sandbox shows of the system, read-only: programs and libraries, and the
# few files of /etc that programs, Python and Java read (no keys, no service config).
_SYSTEM = ("/usr", "/opt/java")
_ETC = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/mime.types",
    "/etc/ssl/certs",
)


@dataclass(frozen=True)
class Limits:
    """What a sandboxed Spark process may use: its processes and threads together, and
    the memory each of its processes may write (``RLIMIT_DATA``: heap, stacks, private
    mappings; a JVM's reserved but untouched address space does not count)."""

    processes: int
    memory: int

    @classmethod
    def for_spark(cls, memory: int) -> Limits:
        """``memory`` bytes a process, and the host's process ceiling
        (``SLUICE_SANDBOX_PROCESSES``)."""
        raw = os.environ.get(PROCESSES_SETTING, "").strip() or str(PROCESSES)
        if not raw.isdigit() or not 64 <= int(raw) <= 1_000_000:
            raise ConfigError(
                f"{PROCESSES_SETTING}={raw!r} is not a number of processes Sluice can use",
                hint=f"set {PROCESSES_SETTING} to a whole number from 64 up "
                f"(default {PROCESSES}; a Spark driver has a few hundred threads)",
            )
        return cls(processes=int(raw), memory=memory)


LIGHT_BOUNDS = Limits(processes=32, memory=2 * 1024**3)
"""The cgroups of a light child under a root service (it limits itself below these:
16 processes, 1 or 2 GiB of address space)."""


@dataclass(frozen=True)
class Profile:
    """What one kind of sandboxed process may see and do.

    Attributes:
        name: the kind (``jinja``, ``macros``, ``driver``, ``connect-job``,
            ``connect-server``), for messages.
        read: paths shown read-only, at the same place, found by their path when the
            sandbox is made: only paths no sandboxed process can change (none in, or
            under, a folder any sandbox writes).
        write: paths shown writable, at the same place (created when missing).
        held: (descriptor, path): a file the caller opened and checked, shown read-only
            at ``path``: that open file, never ``path`` looked up again (bubblewrap
            ``--ro-bind-fd``, which fails if what it mounted is not that file). For a
            file in a folder a sandbox writes, where a link could replace the file
            between the check and the mount. The caller keeps it open until the process
            has started (``Launch.fds``), then closes it.
        network: ``none`` (its own loopback only) or ``host`` (the host's network: a
            Spark job reaching its server or master).
        java: whether Java is shown (a Spark process).
        light: a short-lived child that writes nothing but its own ``/tmp`` and limits
            itself (under the ``setpriv`` fallback, it runs as a uid of its own).
        cwd: the working directory inside (default ``/tmp``).
        limits: what a process that does not limit itself may use (a Spark process).
    """

    name: str
    read: tuple[Path, ...] = ()
    write: tuple[Path, ...] = ()
    network: Literal["none", "host"] = "none"
    java: bool = False
    light: bool = True
    cwd: Path | None = None
    limits: Limits | None = None
    held: tuple[tuple[int, Path], ...] = ()


@dataclass(frozen=True)
class Launch:
    """The command to start instead of the original one, and what runs it."""

    argv: list[str]
    isolation: Isolation
    fds: tuple[int, ...] = ()
    """Descriptors the command binds (``Profile.held``): give them to the process
    (``subprocess.Popen(..., pass_fds=launch.fds)``); without them it does not start."""


def _setting() -> str:
    value = os.environ.get(SETTING, "auto").strip().lower() or "auto"
    if value not in ("auto", "bwrap", "setpriv", "off"):
        raise ConfigError(
            f"{SETTING}={value!r} is not a sandbox Sluice knows",
            hint=f"set {SETTING} to auto, bwrap, setpriv or off",
        )
    return value


@functools.cache
def _bwrap_works() -> bool:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    probe = [bwrap, "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "--", "true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=10, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _setpriv_works() -> bool:
    return os.geteuid() == 0 and shutil.which("setpriv") is not None


def isolation() -> Isolation:
    """The isolation this process can give its sandboxed children, by ``SLUICE_SANDBOX``."""
    wanted = _setting()
    if wanted == "off":
        return "none"
    if wanted in ("auto", "bwrap") and _bwrap_works():
        return "bwrap"
    if wanted == "bwrap":
        raise ConfigError(
            f"{SETTING}=bwrap, but bubblewrap cannot start a sandbox here (not installed, "
            "or user namespaces are disabled)",
            hint="install bubblewrap (scripts/ensure-bwrap.sh) and allow user namespaces, "
            f"or set {SETTING}=auto",
        )
    if _setpriv_works():
        return "setpriv"
    if wanted == "setpriv":
        raise ConfigError(
            f"{SETTING}=setpriv needs the service to run as root with setpriv installed",
            hint=f"set {SETTING}=auto",
        )
    return "none"


def describe() -> str:
    """One line for start-up logs: what confines a pull request's code here."""
    found = isolation()
    if found == "bwrap":
        return "sandbox: bubblewrap (own mount, PID and network namespaces, no capabilities)"
    if found == "setpriv":
        return (
            "sandbox: bubblewrap cannot run here (no user namespaces); falling back to a "
            "uid drop with setpriv: a pull request's code sees the host's files as an "
            "unprivileged user (see docs/security.md, 'The sandbox')"
        )
    return (
        f"sandbox: none ({SETTING}={_setting()}, or neither bubblewrap nor setpriv can run "
        "here): a pull request's Python is refused"
    )


def require_isolation(what: str) -> None:
    """Refuse to run a pull request's ``what`` (its Python) without a sandbox.

    Raises:
        ConfigError: naming the setting and how to get a sandbox.
    """
    if isolation() == "none":
        raise ConfigError(
            f"{what} cannot run: this service has no sandbox for a pull request's code "
            f"({SETTING}={_setting()}; bubblewrap and setpriv are unavailable or turned off)",
            hint="install bubblewrap and allow user namespaces (docs/security.md, "
            f"'The sandbox'), or set SLUICE_PROJECT_PYTHON=off; {SETTING}=off is for "
            "running your own project only",
        )


def python_paths() -> list[Path]:
    """What a Python child needs to start this interpreter and import Sluice's own code
    and its libraries: the installation, the virtual environment, and Sluice's package
    folder (never the folder around it: that may be a checkout holding ``.sluice``)."""
    here = Path(__file__).resolve().parents[1]  # the sluice package
    found = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), here}
    found.add(Path(sys.executable).resolve().parent.parent)
    for entry in sys.path:
        if entry and "site-packages" in entry and Path(entry).is_dir():
            found.add(Path(entry).resolve())
    return sorted(found)


def python_child(module: str) -> list[str]:
    """The command that runs ``module``'s ``main()`` in this interpreter, isolated (``-I``:
    no environment variable, no user site, no current folder on the path) and without
    ``site`` (``-S``): the child's path is Sluice's own folder and this interpreter's
    site-packages, handed over on its command line. ``site`` would also run every ``.pth``
    file, which for an editable install imports ``importlib.metadata``: two thirds of a
    bare interpreter's start, paid by every child a load starts.

    >>> python_child("sluice.core.model.jinja_sandbox")[1:4]
    ['-I', '-S', '-X']
    """
    here = str(Path(__file__).resolve().parents[2])  # the folder holding the sluice package
    paths = [here, *(p for p in sys.path if p and "site-packages" in p and os.path.isdir(p))]
    code = f"import sys; sys.path[:0] = sys.argv[1:]; from {module} import main; main()"
    return [sys.executable, "-I", "-S", "-X", "utf8", "-c", code, *dict.fromkeys(paths)]


def java_paths() -> list[Path]:
    """Java's installation (``JAVA_HOME``, or the one ``java`` on PATH resolves to)."""
    found: set[Path] = set()
    home = os.environ.get("JAVA_HOME")
    if home:
        found.add(Path(home).resolve())
    java = shutil.which("java")
    if java:
        found.add(Path(java).resolve().parents[1])
    for conf in Path("/etc").glob("java*"):
        found.add(conf)
    return sorted(found)


def _binds(flag: str, paths: Iterable[Path | str]) -> list[str]:
    out: list[str] = []
    for path in paths:
        out += [flag, str(path), str(path)]
    return out


def _parents(paths: Iterable[Path | str]) -> list[str]:
    """Folders above the bound paths, made traversable (bubblewrap makes them 0700,
    which a child under a uid of its own could not cross)."""
    made: list[str] = []
    for path in paths:
        for parent in reversed(Path(path).parents):
            name = str(parent)
            if name not in ("/", "/tmp", "/var", "/var/tmp") and name not in made:
                made.append(name)
    out: list[str] = []
    for name in made:
        out += ["--perms", "0755", "--dir", name]
    return out


def _bwrap(argv: Sequence[str], profile: Profile) -> list[str]:
    bwrap = shutil.which("bwrap") or "bwrap"
    cmd = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc"]
    cmd += ["--unshare-cgroup-try"]
    if profile.network == "none":
        cmd.append("--unshare-net")
    cmd += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    # No user namespace inside it: the kernel's code behind them stays out of reach.
    cmd += ["--disable-userns"]
    existing = [p for p in _SYSTEM if os.path.exists(p)]
    cmd += _binds("--ro-bind", existing)
    for name in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
        target = Path("/") / name
        if target.is_symlink():
            cmd += ["--symlink", os.readlink(target), str(target)]
        elif target.is_dir():
            cmd += ["--ro-bind", str(target), str(target)]
    cmd += _binds("--ro-bind-try", _ETC)
    # A tmpfs is memory: a Spark process's holds at most half its memory limit (a full
    # one is then an error in the writer, never the kernel killing the sandbox).
    size = ["--size", str(profile.limits.memory // 2)] if profile.limits else []
    cmd += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", *size, "--tmpfs", "/tmp"]
    cmd += ["--perms", "1777", *size, "--tmpfs", "/var/tmp"]
    shown = python_paths() + (java_paths() if profile.java else [])
    # A path inside a writable folder is shown by that folder's bind, never bound itself:
    # resolving it would follow a link a sandboxed process may have left there (a
    # repository's warehouse made a link to another's).
    given = [Path(os.path.abspath(p)) for p in profile.write]
    outer = [p for p in given if not _within(p, [o for o in given if o != p])]
    for path in given:
        if path in outer:
            path.mkdir(parents=True, exist_ok=True)
        else:
            _make_within(path, next(o for o in outer if o in path.parents))
    writable = {p.resolve() for p in outer}
    shown = [p for p in shown if p not in writable and p.exists()]
    readable = [
        Path(p).resolve() for p in profile.read if not _within(Path(os.path.abspath(p)), outer)
    ]
    held = [(fd, Path(os.path.abspath(dest))) for fd, dest in profile.held]
    cmd += _parents([*shown, *readable, *writable, *(dest for _, dest in held)])
    cmd += _binds("--ro-bind", shown)
    cmd += _binds("--ro-bind", readable)
    cmd += _binds("--bind", sorted(writable))
    # A checked open file, bound by its descriptor: no path is looked up after the check.
    for fd, dest in held:
        cmd += ["--ro-bind-fd", str(fd), str(dest)]
    # Shared memory sized as /tmp is; then the sandbox's own root and /dev read-only: the
    # folders bubblewrap made on them would otherwise take files of any size, in memory.
    cmd += ["--perms", "1777", *size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    cmd += ["--remount-ro", "/"]
    cmd += ["--chdir", str(profile.cwd or "/tmp")]  # bubblewrap sets PWD to it
    cmd.append("--")
    return cmd + _limit(profile.limits) + list(argv)


def _within(path: Path, folders: Sequence[Path]) -> bool:
    """Whether ``path`` (absolute, links unresolved) is inside one of ``folders``."""
    return any(f in path.parents for f in folders)


def _make_within(path: Path, folder: Path) -> None:
    """Make the folders from ``folder`` down to ``path``, following no link: a link
    found on the way (left by a sandboxed process) is replaced by a folder."""
    here = folder
    for part in path.relative_to(folder).parts:
        here = here / part
        if here.is_symlink():
            logger.warning("removed the link %s where the sandbox shows a folder", here)
            here.unlink()
        with contextlib.suppress(FileExistsError):
            here.mkdir()


def _drop(uid: int | None) -> list[str]:
    """setpriv's prefix: no capability, no new privileges, and ``uid`` (if any)."""
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    ids = [] if uid is None else [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return [setpriv, *ids, "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"]


def _limit(limits: Limits | None) -> list[str]:
    """prlimit's prefix: the processes and the memory of ``limits``, no core dumps."""
    if limits is None:
        return []
    prlimit = shutil.which("prlimit") or "/usr/bin/prlimit"
    n, data = limits.processes, limits.memory
    return [prlimit, f"--nproc={n}:{n}", f"--data={data}:{data}", "--core=0:0", "--"]


CGROUP_PREFIX = "sluice-"


def _own_cgroups() -> dict[str, Path]:
    """This process's own cgroup folder for each controller Sluice bounds (``pids`` and
    ``memory``): cgroup v1's hierarchy of that controller, else v2's unified tree."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return {}
    own: dict[str, str] = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else ["unified"]:
            own[name] = path
    found: dict[str, Path] = {}
    for mount in mounts:
        fields = mount.split()
        kind = fields[fields.index("-") + 1]
        options = fields[-1].split(",")
        for name in ("pids", "memory"):
            if kind == "cgroup" and name in options and name in own:
                key = own[name]
            elif kind == "cgroup2" and "unified" in own:
                key = own["unified"]
            else:
                continue
            place = Path(fields[4], os.path.relpath(key, fields[3])).resolve()
            if kind == "cgroup" or name not in found:  # v1's own hierarchy wins
                found[name] = place
    return found


CGROUP_STALE_SECONDS = 60.0
"""An empty cgroup of Sluice's this old is left over (its process ended): removed."""


def _usable(parent: Path, controllers: set[str]) -> bool:
    """Whether this process may make cgroups under ``parent`` with ``controllers`` (on v2
    they are turned on below it first). Empty cgroups of Sluice's left by earlier
    processes are removed (never a fresh one: its process may be starting)."""
    if not os.access(parent, os.W_OK):
        return False
    now = time.time()
    for old in parent.glob(CGROUP_PREFIX + "*"):
        with contextlib.suppress(OSError):
            if now - old.stat().st_ctime > CGROUP_STALE_SECONDS:
                old.rmdir()  # refused while any process is in it
    control = parent / "cgroup.subtree_control"
    if control.exists():
        for name in controllers:
            with contextlib.suppress(OSError):
                control.write_text(f"+{name}")
        return controllers <= set(control.read_text().split())
    return True


def _cgroups(limits: Limits) -> list[str]:
    """Shell lines that make new cgroups bounding ``limits.processes`` tasks and
    ``limits.memory`` bytes of memory in all (private, shared and tmpfs pages alike) and
    move the shell into them, where this process can make them (root, or a delegated v2
    tree); none where it cannot. The process making them is the one that joins them, so
    no other process's clean-up can remove one before it is used."""
    own = _own_cgroups()
    pids, memory = own.get("pids"), own.get("memory")
    wanted: list[tuple[Path, dict[str, int]]] = []
    if pids is not None and pids == memory:  # v2: one tree, one cgroup for both
        wanted = [(pids, {"pids.max": limits.processes, "memory.max": limits.memory})]
    else:
        wanted += [(pids, {"pids.max": limits.processes})] if pids else []
        wanted += [(memory, {"memory.limit_in_bytes": limits.memory})] if memory else []
    lines: list[str] = []
    for parent, settings in wanted:
        if not _usable(parent, {name.split(".")[0] for name in settings}):
            continue
        made = parent / f"{CGROUP_PREFIX}{secrets.token_hex(6)}"
        lines.append(f"mkdir {shlex.quote(str(made))}")
        lines += [f"echo {int(v)} > {shlex.quote(str(made / k))}" for k, v in settings.items()]
        lines.append(f"echo $$ > {shlex.quote(str(made / 'cgroup.procs'))}")
    return lines


@functools.cache
def _warn_unbounded() -> None:
    logger.warning(
        "sandbox: this service runs as root and cannot make cgroups, so the processes of a "
        "Spark process are not bounded (the kernel exempts root from RLIMIT_NPROC), nor its "
        "shared memory: run the service as an ordinary user (docs/security.md, 'The sandbox')"
    )


def _in_cgroup(limits: Limits | None) -> list[str]:
    """The prefix that starts a Spark process in cgroups of its own, bounding its
    processes and all its memory: a shell makes them, joins them, then becomes the
    process (and fails, starting nothing, if it cannot). Under a root service, which Linux
    exempts from ``RLIMIT_NPROC``, a warning where none can be made."""
    if limits is None:
        return []
    lines = _cgroups(limits)
    if not lines:
        if os.geteuid() == 0:
            _warn_unbounded()
        return []
    return ["/bin/sh", "-c", "set -e\n" + "\n".join(lines) + '\nexec "$@"', "sh"]


def _light_uid() -> int:
    low, high = LIGHT_UIDS
    return low + secrets.randbelow(high - low)


def wrap(argv: Sequence[str], profile: Profile) -> Launch:
    """The command that runs ``argv`` confined by ``profile`` (``argv`` itself where this
    machine has no sandbox: the caller has checked :func:`require_isolation` where the
    process would run a pull request's Python)."""
    found = isolation()
    if found == "none":
        return Launch(list(argv), found)
    if found == "setpriv":
        # A Spark process writes the warehouse the service reads and writes: it keeps the
        # service's uid (no capability, no new privileges); a light child gets its own.
        uid = _light_uid() if profile.light else None
        limited = _limit(profile.limits) + list(argv)
        return Launch(_in_cgroup(profile.limits) + _drop(uid) + limited, found)
    bounds = profile.limits
    if bounds is None and os.geteuid() == 0:
        # A light child limits itself, but under a root service its user namespace's
        # uid is root's, which Linux exempts from RLIMIT_NPROC: cgroups bound it.
        bounds = LIGHT_BOUNDS
    fds = tuple(fd for fd, _ in profile.held)
    return Launch(_in_cgroup(bounds) + _bwrap(argv, profile), found, fds)


# One handle on Linux's prctl, loaded at import: :func:`die_with_parent` runs between fork
# and exec, where loading a library (taking its locks) is unsafe. None off Linux.
_PRCTL = None
with contextlib.suppress(OSError, AttributeError):
    import ctypes

    _LIBC = ctypes.CDLL(None, use_errno=True)
    _PRCTL = _LIBC.prctl

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38


def die_with_parent() -> None:
    """In a child between fork and exec (``preexec_fn``): ask Linux to SIGKILL it when
    the thread that started it ends."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, 9)  # SIGKILL


def keep_from_children() -> None:
    """Make this process non-dumpable (Linux ``PR_SET_DUMPABLE`` 0), so that a child of
    the same OS user can neither read this process's ``/proc/<pid>/environ``, ``mem`` or
    open files nor ptrace it: the service's tokens and keys stay out of reach of its
    children, sandboxed or not. Every entry point (``serve``, ``action``, ``pr``, ``demo``
    and each CLI command) calls it before it starts any child; a child regains the
    default at exec. Idempotent; nothing off Linux."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_DUMPABLE, 0, 0, 0, 0)


CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


def confine_fork(memory_bytes: int = 2 * 1024**3, cpu_seconds: int = 120) -> None:
    """Confine a forked child that parses a project's files (the loader's prefetch child,
    which runs no project code: it only reads and parses): no new privileges, no
    network (new user and network namespaces, where the kernel allows), no child
    processes, no files written, and its memory and CPU limited. Best effort off Linux."""
    import resource

    for which, value in (
        (resource.RLIMIT_AS, memory_bytes),
        (resource.RLIMIT_CPU, cpu_seconds),
        (resource.RLIMIT_FSIZE, 0),
        (resource.RLIMIT_CORE, 0),
    ):
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            logger.debug("cannot set resource limit %s", which)
    if _PRCTL is None:
        return
    _PRCTL(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    _PRCTL(PR_SET_DUMPABLE, 0, 0, 0, 0)
    _LIBC.unshare(CLONE_NEWUSER | CLONE_NEWNET)  # fails harmlessly where not allowed
