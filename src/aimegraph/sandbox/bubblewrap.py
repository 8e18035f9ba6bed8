"""The default sandbox on Linux: bubblewrap (``bwrap``), the namespace sandbox Flatpak uses.

Each job gets new user, pid, ipc, uts, cgroup and network namespaces, and a root file
system built of: ``/usr`` (with the ``/bin``, ``/lib`` links of a merged-usr system) and
the Python installation in use, read-only; the few ``/etc`` entries that only name
libraries, command alternatives and the time zone (plus name resolution and CA
certificates when the network is opted in); the job's ``read_only`` directories (agent
skills), read-only at their sandbox paths; fresh ``/proc`` and ``/dev``; a private,
size-capped ``/tmp`` and ``/dev/shm``; and the workspace, read-write at its real path.
Nothing else of the host is there: no home, no other workspace, no project tree, no host
``/tmp``, no host processes. The job runs as an unprivileged uid with no capabilities,
cannot create further user namespaces (bubblewrap >= 0.8), and its environment is the
one :func:`~aimegraph.sandbox.process.job_environment` builds.

When a job ends (or is killed at its timeout) its namespace's init is killed and awaited,
which takes every process the job started with it: nothing outlives the call. bwrap runs
under a tether (:mod:`~aimegraph.sandbox.tether`), so nothing outlives the engine either,
wherever in the call it dies: ``--die-with-parent`` alone leaves a window there.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from aimegraph.sandbox.cgroup import pids_cgroup_parent, pids_limit
from aimegraph.sandbox.process import (
    REAP_TIMEOUT_S,
    Finish,
    job_environment,
    launcher_command,
    run_process,
)
from aimegraph.sandbox.protocol import Job, Outcome, SandboxUnavailable

__all__ = ["INSTALL_HINT", "BubblewrapSandbox", "python_installation"]

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
    'bubblewrap) or set AimeConfig(sandbox="none") to run model-written code unconfined'
)

# The job's uid inside its user namespace: "nobody". bubblewrap maps it to the caller's
# uid, so what the job writes in the workspace belongs to the caller on the host.
_SANDBOX_UID = 65534

# Read-only /etc entries that reveal nothing about the host's users or secrets.
_ETC = ("/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime")
_ETC_NETWORK = (
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
)
_TOP_LEVEL_LIBRARIES = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# Options newer than the oldest bubblewrap in current distributions: used when present.
_OPTIONAL = ("--disable-userns", "--size")


@dataclass(frozen=True)
class _Bwrap:
    """What the probe found: a working ``bwrap`` and how processes are bounded."""

    path: str
    version: str
    options: frozenset[str]
    cgroup_parent: Path | None
    """Where per-job pids groups go; set exactly when running as root."""


class BubblewrapSandbox:
    """Runs jobs in a bubblewrap sandbox (see the module docstring for what it holds).

    Args:
        network: give jobs the host's network (off by default: the sandbox has only a
            loopback interface of its own).
        bwrap: the ``bwrap`` executable (default: found on ``PATH``).
    """

    name = "bubblewrap"
    mounts_read_only = True
    """It shows a job's ``read_only`` directories at their paths in the sandbox."""

    def __init__(self, *, network: bool = False, bwrap: str | None = None) -> None:
        self.network = network
        self._bwrap = bwrap

    def __repr__(self) -> str:
        return f"BubblewrapSandbox(network={self.network})"

    def check(self) -> str:
        host = _probe(self._bwrap or shutil.which("bwrap"))
        bound = (
            "processes bounded by a pids cgroup"
            if host.cgroup_parent is not None
            else "processes bounded by RLIMIT_NPROC in its user namespace"
        )
        network = "host network" if self.network else "no network"
        return (
            f"bubblewrap {host.version}: workspace read-write, Python and system libraries "
            f"read-only, nothing else of the host, {network}, own process namespace, {bound}"
        )

    def run(self, job: Job) -> Outcome:
        host = _probe(self._bwrap or shutil.which("bwrap"))
        root = job.workspace.root
        if Path("/usr").is_relative_to(root):
            raise SandboxUnavailable(
                f"the workspace {root} holds the system's /usr: choose a directory of its own"
            )
        pipes = _Pipes()
        command = [
            host.path,
            *self._arguments(host, job, info_fd=pipes.info_write),
            "--",
            *launcher_command(sys.executable, job, max_processes=True, ready_fd=pipes.ready_write),
        ]
        try:
            with _process_bound(host, job) as join:
                outcome = run_process(
                    [*join, *command],
                    job,
                    env=job_environment(job.workspace.root, _PATH),
                    cwd=job.workspace.root,
                    pass_fds=(pipes.info_write, pipes.ready_write),
                    started=pipes.started,
                )
            launched = pipes.launched()
        finally:
            pipes.close()
        if not launched:
            # bwrap reports its own failures (a mount it cannot make...) on stderr.
            reason = (outcome.stderr.strip().splitlines() or ["no error message"])[-1]
            raise SandboxUnavailable(f"bubblewrap could not create the sandbox: {reason}")
        return outcome

    def _arguments(self, host: _Bwrap, job: Job, *, info_fd: int) -> list[str]:
        root = str(job.workspace.root)
        tmpfs_bytes = str(job.limits.memory_mb * 1024 * 1024)
        size = ["--size", tmpfs_bytes] if "--size" in host.options else []
        mounts = _system_mounts()
        for path in (*_ETC, *(_ETC_NETWORK if self.network else ())):
            mounts.append((path, ["--ro-bind-try", path, path]))
        for directory in python_installation():
            mounts.append((str(directory), ["--ro-bind", str(directory), str(directory)]))
        mounts += [
            ("/proc", ["--proc", "/proc"]),
            # /dev is a writable tmpfs of bwrap's: shared memory gets a capped one of its
            # own, and the rest is made read-only (device nodes stay usable).
            ("/dev", ["--dev", "/dev"]),
            ("/dev/shm", [*size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]),
            ("/tmp", [*size, "--tmpfs", "/tmp"]),
            (root, ["--bind", root, root]),
            *((target, ["--ro-bind", str(source), target]) for target, source in job.read_only),
        ]
        # A mount hides what an earlier one put below its path: parents go first (a
        # workspace under /tmp, a virtualenv inside the workspace stays read-only).
        mounts.sort(key=lambda mount: len(Path(mount[0]).parts))
        return [
            "--unshare-all",
            "--unshare-user",
            *(["--share-net"] if self.network else []),
            *(["--disable-userns"] if "--disable-userns" in host.options else []),
            "--die-with-parent",
            "--new-session",
            "--uid",
            str(_SANDBOX_UID),
            "--gid",
            str(_SANDBOX_UID),
            "--hostname",
            "sandbox",
            *(arg for _, args in mounts for arg in args),
            "--remount-ro",
            "/",
            "--chdir",
            root,
            "--info-fd",
            str(info_fd),
        ]


_PATH = os.pathsep.join(
    dict.fromkeys([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"])
)
"""Commands a job finds: the interpreter's directory (``python``, ``pip`` of the
environment in use), then the system's."""


Mount = tuple[str, list[str]]
"""Where a mount goes in the sandbox, and the bwrap arguments that make it."""


def _system_mounts() -> list[Mount]:
    """``/usr`` read-only, and the top-level library and command directories as the host
    has them: links into ``/usr`` on a merged-usr system, else read-only directories."""
    mounts: list[Mount] = [("/usr", ["--ro-bind", "/usr", "/usr"])]
    for name in _TOP_LEVEL_LIBRARIES:
        path = f"/{name}"
        if os.path.islink(path):
            mounts.append((path, ["--symlink", os.readlink(path), path]))
        elif os.path.isdir(path):
            mounts.append((path, ["--ro-bind", path, path]))
    return mounts


@functools.cache
def python_installation() -> tuple[Path, ...]:
    """The directories of the Python installation in use (interpreter, standard
    library, the environment's site-packages), outermost only, without those ``/usr``
    already holds."""
    found = {
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        *(sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")),
        *site.getsitepackages(),
    }
    paths = {Path(p).resolve() for p in found if p and os.path.isdir(p)}
    paths |= {Path(p).absolute() for p in found if p and os.path.isdir(p)}
    outer = [p for p in paths if not any(p != q and p.is_relative_to(q) for q in paths)]
    return tuple(sorted(p for p in outer if not p.is_relative_to("/usr")))


@functools.cache
def _probe(bwrap: str | None) -> _Bwrap:
    """Whether bubblewrap works here; checked once per process and executable.

    Raises:
        SandboxUnavailable: bwrap is missing, cannot create namespaces here, or runs as
            root where no pids cgroup can be made.
    """
    if bwrap is None:
        raise SandboxUnavailable(f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
    try:
        version = subprocess.run(
            [bwrap, "--version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.split()[-1]
        usage = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
        trial = subprocess.run(
            [bwrap, "--unshare-all", "--unshare-user",
             *(arg for _, args in _system_mounts() for arg in args), "--", "/usr/bin/true"],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError, IndexError) as exc:
        raise SandboxUnavailable(
            f"bubblewrap ({bwrap}) does not run: {exc}; {INSTALL_HINT}"
        ) from exc
    if trial.returncode != 0:
        reason = (trial.stderr.strip().splitlines() or ["no error message"])[-1]
        raise SandboxUnavailable(
            f"bubblewrap cannot create a sandbox here ({reason}): allow unprivileged user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1, or an AppArmor profile "
            'for bwrap), or set AimeConfig(sandbox="none") to run model-written code '
            "unconfined"
        )
    cgroup_parent = None
    if os.getuid() == 0:
        cgroup_parent = pids_cgroup_parent()
        if cgroup_parent is None:
            raise SandboxUnavailable(
                "running as root, the sandbox bounds processes with a pids cgroup and none "
                "can be created here: run as another user, make the cgroup file system "
                'writable, or set AimeConfig(sandbox="none") to run model-written code '
                "unconfined"
            )
    options = frozenset(option for option in _OPTIONAL if option in usage)
    return _Bwrap(bwrap, version, options, cgroup_parent)


@contextlib.contextmanager
def _process_bound(host: _Bwrap, job: Job) -> Iterator[list[str]]:
    """Yields the command prefix that puts the job in a pids group of its own (as root),
    or nothing (the launcher's ``RLIMIT_NPROC`` bounds it)."""
    if host.cgroup_parent is None:
        yield []
        return
    with contextlib.ExitStack() as stack:
        try:
            # bwrap, then the sandbox's init, then the job's own processes.
            limit = pids_limit(host.cgroup_parent, job.limits.max_processes + 2)
            procs = stack.enter_context(limit)
        except OSError as exc:
            raise SandboxUnavailable(f"cannot create the sandbox's pids cgroup: {exc}") from exc
        # The shell joins the group, then becomes bwrap: everything it starts is inside.
        yield ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs)]


class _Pipes:
    """Two pipes into the sandbox. bwrap's ``--info-fd``: it writes the pid of the
    sandbox's init there (what the job's end waits for), then closes it. The
    launcher's ready fd: one byte once the job's first process runs."""

    def __init__(self) -> None:
        self.info_read, self.info_write = os.pipe()
        self.ready_read, self.ready_write = os.pipe()
        # Asked after the end: a process that outlived it must not make the read wait.
        os.set_blocking(self.ready_read, False)
        self._ours = [self.info_read, self.info_write, self.ready_read, self.ready_write]

    def started(self, proc: subprocess.Popen[bytes]) -> Finish:
        # Only the sandbox may hold the write ends: else no read below sees an end.
        self._close(self.info_write, self.ready_write)
        pid = _sandbox_init(self.info_read)
        pidfd = None
        if pid is not None:
            # Gone already (a job quicker than this read): so is its namespace.
            with contextlib.suppress(ProcessLookupError):
                pidfd = os.pidfd_open(pid)
        return lambda: _end_namespace(pidfd)

    def launched(self) -> bool:
        """Whether the job's first process ran (asked once everything has exited)."""
        try:
            return os.read(self.ready_read, 1) == b"1"
        except BlockingIOError:
            return False

    def close(self) -> None:
        self._close(*self._ours)

    def _close(self, *fds: int) -> None:
        for fd in fds:
            if fd in self._ours:
                self._ours.remove(fd)
                os.close(fd)


def _sandbox_init(info: int) -> int | None:
    """The pid of the sandbox's init (bwrap reports it on the info pipe, then closes
    it), or None when bwrap failed before creating it."""
    data = b""
    while chunk := os.read(info, 4096):
        data += chunk
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def _end_namespace(pidfd: int | None) -> None:
    """Kill the sandbox's init, which takes the whole pid namespace with it, and wait
    until it is gone: bwrap itself may exit before the rest of the namespace has."""
    if pidfd is None:
        return
    try:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        select.select([pidfd], [], [], REAP_TIMEOUT_S)
    finally:
        os.close(pidfd)
