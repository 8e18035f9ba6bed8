"""The sandbox's parts on their own: the pids cgroup lookup, the Docker example's command
line (and the Docker example itself where an engine answers), the launcher's limits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aimegraph.sandbox import DockerSandbox, Job, Limits, SandboxUnavailable, Workspace
from aimegraph.sandbox.cgroup import candidate_parents
from aimegraph.sandbox.process import launcher_command

V1_MOUNTS = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V1_GROUPS = "8:pids:/build/job\n4:memory:/process_api/x\n0::/\n"

V2_MOUNTS = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
V2_GROUPS = "0::/user.slice/user-0.slice/session-3.scope\n"


def test_cgroup_v1_candidates_start_with_this_process_group() -> None:
    assert candidate_parents(V1_MOUNTS, V1_GROUPS) == [
        Path("/sys/fs/cgroup/pids/build/job"),
        Path("/sys/fs/cgroup/pids"),
        Path("/sys/fs/cgroup/unified"),
    ]


def test_cgroup_v2_candidates_fall_back_to_the_root() -> None:
    assert candidate_parents(V2_MOUNTS, V2_GROUPS) == [
        Path("/sys/fs/cgroup/user.slice/user-0.slice/session-3.scope"),
        Path("/sys/fs/cgroup"),
    ]


def test_cgroup_mounted_below_its_root_in_a_container() -> None:
    """A container's view: the mount's root is the container's group."""
    mounts = "50 40 0:36 /docker/abc /sys/fs/cgroup/pids ro - cgroup cgroup rw,pids\n"
    assert candidate_parents(mounts, "8:pids:/docker/abc/inner\n") == [
        Path("/sys/fs/cgroup/pids/inner"),
        Path("/sys/fs/cgroup/pids"),
    ]
    assert candidate_parents("", V1_GROUPS) == []


def test_the_launcher_sets_the_limits_in_the_job(tmp_path: Path) -> None:
    job = Job("shell", "true", Workspace(tmp_path), Limits(7.5, 100, 16, 3))
    command = launcher_command("/py", job, max_processes=True)
    assert command[:3] == ["/py", "-I", "-S"]
    assert command[-7:] == ["shell", "-", str(100 * 1024**2), "9", str(3 * 1024**2), "0", "17"]
    # Outside a user namespace RLIMIT_NPROC would count all the user's processes: unset.
    assert launcher_command("/py", job, max_processes=False)[-1] == "-"


def test_docker_command_confines_the_job(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    job = Job("python", "print(1)", ws, Limits(max_processes=8, memory_mb=256))
    command = DockerSandbox("python:3.12-slim").command(job, "box")
    joined = " ".join(command)
    for flag in (
        "--network none",
        "--memory 256m",
        "--pids-limit 8",
        "--read-only",
        "--cap-drop ALL",
        "no-new-privileges",
        f"--user {os.getuid()}:{os.getgid()}",
        f"--volume {ws.root}:{ws.root}",
        f"--workdir {ws.root}",
        "--env HOME=" + str(ws.root),
    ):
        assert flag in joined
    assert "OPENAI" not in joined
    assert command[command.index("python:3.12-slim") + 1] == "python3"
    assert "--network bridge" in " ".join(DockerSandbox(network=True).command(job, "box"))


@pytest.fixture(scope="module")
def docker() -> DockerSandbox:
    sandbox = DockerSandbox()
    try:
        sandbox.check()
    except SandboxUnavailable as exc:
        pytest.skip(f"the Docker example needs a Docker engine: {exc}")
    return sandbox


@pytest.mark.slow
def test_docker_sandbox_runs_jobs_in_the_workspace(docker: DockerSandbox, tmp_path: Path) -> None:
    from aimegraph.tools import make_file_tools, make_python_tool

    ws = Workspace(tmp_path / "ws")
    (ws.root / "data.csv").write_text("a\n1\n2\n")
    python = make_python_tool(ws, sandbox=docker)
    out = python.invoke(
        {
            "code": "rows = open('data.csv').read().split()[1:]\nopen('sum.txt', 'w').write(str(sum(map(int, rows))))"
        }
    )
    assert out == "(no output; files written: sum.txt)"
    assert make_file_tools(ws)[0].invoke({"path": "sum.txt"}) == "3"
    (tmp_path / "secret.txt").write_text("SECRET")
    leaked = python.invoke({"code": f"print(open({str(tmp_path / 'secret.txt')!r}).read())"})
    assert "SECRET" not in leaked


def test_without_pidfds_jobs_still_run_and_time_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where os.pidfd_open is missing (macOS, for sandbox="none"), the wait polls."""
    from aimegraph.sandbox import UnconfinedSandbox

    monkeypatch.delattr(os, "pidfd_open")
    ws = Workspace(tmp_path)
    assert UnconfinedSandbox().run(Job("python", "print(6 * 7)", ws)).stdout == "42\n"
    slow = UnconfinedSandbox().run(Job("python", "while True: pass", ws, Limits(timeout_s=0.5)))
    assert slow.timed_out
