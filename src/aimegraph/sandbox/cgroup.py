"""A pids cgroup per job: how the bubblewrap sandbox bounds processes when run as root.

For any other user, ``RLIMIT_NPROC`` set inside the sandbox's user namespace bounds the
job. For root it bounds nothing: bubblewrap maps the sandbox's uid to the caller's, and the
kernel exempts uid 0 from ``RLIMIT_NPROC`` even without capabilities. The pids controller
counts every process in its group whoever owns it, and root may create groups. The
controller is looked up where it is mounted (cgroup v1's ``pids`` hierarchy, or v2 with
``pids`` delegated to children): under this process's own group first, so the limits of
a container or service that holds the engine still apply, else at the hierarchy's root.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

__all__ = ["candidate_parents", "pids_cgroup_parent", "pids_limit"]

logger = logging.getLogger(__name__)

# How long a finished job's group may take to empty before it is left behind.
_REMOVE_TIMEOUT_S = 5.0


def candidate_parents(mountinfo: str, proc_cgroup: str) -> list[Path]:
    """Directories that may hold per-job pids groups, best first: this process's group
    on the hierarchy with the pids controller, then that hierarchy's root.

    Args:
        mountinfo: the text of ``/proc/self/mountinfo``.
        proc_cgroup: the text of ``/proc/self/cgroup``.
    """
    own: dict[str, str] = {}  # "pids" (v1) or "" (v2) -> this process's group path
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "" or "pids" in controllers.split(","):
            own["pids" if controllers else ""] = path
    candidates: list[Path] = []
    for line in mountinfo.splitlines():
        fields, _, tail = line.partition(" - ")
        parts, fs = fields.split(), tail.split()
        if len(parts) < 5 or len(fs) < 3:
            continue
        mount_root, mount_point = parts[3], Path(parts[4])
        if fs[0] == "cgroup" and "pids" in fs[2].split(","):
            key = "pids"
        elif fs[0] == "cgroup2":
            key = ""
        else:
            continue
        if key not in own:
            continue
        relative = os.path.relpath(own[key], mount_root)
        if not relative.startswith(".."):
            candidates.append(mount_point / relative)
        candidates.append(mount_point)
    return list(dict.fromkeys(candidates))


@functools.cache
def pids_cgroup_parent() -> Path | None:
    """The first candidate directory where a new group gets a ``pids.max`` file, or
    None (no such hierarchy, or not allowed to create groups there)."""
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
        proc_cgroup = Path("/proc/self/cgroup").read_text()
    except OSError:
        return None
    for parent in candidate_parents(mountinfo, proc_cgroup):
        probe = parent / f"aimegraph-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
        except OSError:
            continue
        usable = (probe / "pids.max").exists()
        with contextlib.suppress(OSError):
            probe.rmdir()
        if usable:
            return parent
    return None


@contextlib.contextmanager
def pids_limit(parent: Path, max_pids: int) -> Iterator[Path]:
    """A new group under ``parent`` holding at most ``max_pids`` processes; yields its
    ``cgroup.procs`` file (a process that writes its pid there joins, with every process
    it starts later). On exit, what is left in the group is killed and the group removed.

    Raises:
        OSError: the group cannot be created or limited.
    """
    group = parent / f"aimegraph-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    group.mkdir()
    try:
        (group / "pids.max").write_text(str(max_pids))
        yield group / "cgroup.procs"
    finally:
        _remove(group)


def _remove(group: Path) -> None:
    deadline = time.monotonic() + _REMOVE_TIMEOUT_S
    while True:
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # EBUSY: processes still in it, or still exiting
            if time.monotonic() > deadline:
                logger.warning("could not remove the sandbox's cgroup %s", group)
                return
        with contextlib.suppress(OSError, ValueError):
            for pid in (group / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.005)
