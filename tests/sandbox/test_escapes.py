"""Issue 30: code in the sandbox tries to get out, and every attempt fails.

Each attempt is judged from the host side: the files outside the workspace, a listener
the test opens, the host's process table, the test process's own signal handler. What
the code prints is not trusted; what it managed to read it copies into ``loot.txt`` in
the workspace, which the test then searches for the secret. Each escape test first checks
that the attempts ran (one line per attempt in ``loot.txt``), so an attempt that crashed
cannot pass for one that was refused; the ``test_the_detectors_see_*`` tests show
that the same attempts succeed without the sandbox, so the checks can fail.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from aimegraph.sandbox import BubblewrapSandbox, Sandbox, UnconfinedSandbox, Workspace
from tests.host import processes_with

from .conftest import Host

REPO = Path(__file__).resolve().parents[2]

# The code's side of every attempt: each result, whatever it is, becomes a line of loot.
STEAL = """\
import os, socket, subprocess, sys
def attempt(label, action):
    try:
        result = action()
    except Exception as exc:
        result = f"refused ({type(exc).__name__})"
    with open("loot.txt", "a") as loot:
        loot.write(f"{label}: {result}\\n")
def read(path):
    return lambda: open(path).read()
def write(path):
    return lambda: open(path, "w").write("pwned")
"""


def attempts(host: Host) -> list[str]:
    return host.loot().splitlines()


def read_escapes(host: Host, sandbox: Sandbox) -> None:
    (host.ws.root / "dir_link").symlink_to(host.outside, target_is_directory=True)
    (host.ws.root / "file_link").symlink_to(host.secret_file)
    host.run(
        sandbox,
        STEAL
        + f"""
attempt("absolute", read({str(host.secret_file)!r}))
attempt("dotdot", read("../outside/secret.txt"))
attempt("host symlink to the file", read("file_link"))
attempt("host symlink to the directory", read("dir_link/secret.txt"))
os.symlink({str(host.outside)!r}, "own_link")
attempt("own symlink", read("own_link/secret.txt"))
attempt("hard link", lambda: os.link({str(host.secret_file)!r}, "hard") or read("hard")())
attempt("listing", lambda: os.listdir({str(host.outside)!r}))
""",
    )


def write_escapes(host: Host, sandbox: Sandbox) -> None:
    (host.ws.root / "dir_link").symlink_to(host.outside, target_is_directory=True)
    (host.ws.root / "trap").symlink_to(host.outside / "pwned-dangling")
    host.run(
        sandbox,
        STEAL
        + f"""
attempt("absolute", write({str(host.outside / "pwned-absolute")!r}))
attempt("dotdot", write("../outside/pwned-dotdot"))
attempt("host symlink to the directory", write("dir_link/pwned-host-link"))
attempt("dangling symlink", write("trap"))
os.symlink({str(host.outside)!r}, "own_link")
attempt("own symlink", write("own_link/pwned-own-link"))
attempt("rename out", lambda: open("x", "w").close() or os.rename("x", "../outside/pwned-rename"))
""",
    )


def test_reads_outside_the_workspace_fail(bubblewrap: BubblewrapSandbox, host: Host) -> None:
    read_escapes(host, bubblewrap)
    assert len(attempts(host)) == 7
    assert all("refused" in line for line in attempts(host)), host.loot()
    assert host.secret not in host.loot()
    # From the host's side the links are still there: the sandbox just has no target.
    assert (host.ws.root / "own_link").is_symlink()


def test_writes_outside_the_workspace_fail(bubblewrap: BubblewrapSandbox, host: Host) -> None:
    write_escapes(host, bubblewrap)
    assert len(attempts(host)) == 6
    assert sorted(p.name for p in host.outside.iterdir()) == ["secret.txt"]
    assert host.secret_file.read_text() == host.secret


def test_writes_under_tmp_land_in_the_sandboxs_own_and_are_thrown_away(
    bubblewrap: BubblewrapSandbox, host: Host
) -> None:
    """What the README says of writes outside the workspace: by absolute path or ``../``
    under /tmp (where this workspace is) or /dev/shm they succeed, into the sandbox's
    private ones, which the next call no longer has; the host's never see them."""
    name = f"aimegraph-throwaway-{os.getpid()}"
    host.run(
        bubblewrap,
        STEAL
        + f"""
def write_and_read(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").write("kept?")
    return open(path).read()
attempt("absolute", lambda: write_and_read("/tmp/{name}/file"))
attempt("shared memory", lambda: write_and_read("/dev/shm/{name}/file"))
attempt("dotdot", lambda: write_and_read("../outside/pwned-dotdot"))
""",
    )
    assert host.loot() == "absolute: kept?\nshared memory: kept?\ndotdot: kept?\n"
    assert not Path("/tmp", name).exists() and not Path("/dev/shm", name).exists()
    assert sorted(p.name for p in host.outside.iterdir()) == ["secret.txt"]
    host.run(
        bubblewrap,
        STEAL
        + f"""
attempt("next call", read("/tmp/{name}/file"))
attempt("next call", read("/dev/shm/{name}/file"))
""",
    )
    assert host.loot().endswith("next call: refused (FileNotFoundError)\n" * 2)


def test_writes_elsewhere_fail_read_only(bubblewrap: BubblewrapSandbox, tmp_path: Path) -> None:
    """A workspace outside /tmp (as the default, in the project's directory): ``../`` and
    absolute paths outside /tmp hit the sandbox's read-only file system."""
    targets = {
        "dotdot": "../pwned-dotdot",
        "home": str(Path.home() / "pwned-home"),
        "root": "/pwned-root",
        "usr": "/usr/pwned-usr",
    }
    with tempfile.TemporaryDirectory(dir=Path.home(), prefix="aimegraph-test-") as directory:
        host = Host(Workspace(Path(directory) / "ws"), tmp_path, "")
        host.run(
            bubblewrap,
            f"""
import os
for label, path in {targets!r}.items():
    try:
        open(path, "w").write("pwned")
        result = "written"
    except OSError as exc:
        result = exc.strerror
    with open("loot.txt", "a") as loot:
        loot.write(f"{{label}}: {{result}}\\n")
""",
        )
        assert host.loot().splitlines() == [f"{label}: Read-only file system" for label in targets]
        assert sorted(p.name for p in Path(directory).iterdir()) == ["ws"]
    assert not (Path.home() / "pwned-home").exists()


@pytest.fixture
def home_file() -> Iterator[Path]:
    """A file in the home directory of the user running the tests."""
    with tempfile.NamedTemporaryFile("w", dir=Path.home(), prefix="aimegraph-test-") as handle:
        handle.write("HOME-SECRET")
        handle.flush()
        yield Path(handle.name)


def test_the_project_tree_and_home_are_not_there(
    bubblewrap: BubblewrapSandbox, host: Host, home_file: Path
) -> None:
    project_file = REPO / "pyproject.toml"
    with tempfile.NamedTemporaryFile(dir="/tmp", prefix="aimegraph-host-tmp-") as host_tmp:
        host.run(
            bubblewrap,
            STEAL
            + f"""
attempt("project file", read({str(project_file)!r}))
attempt("project tree", lambda: os.listdir({str(REPO)!r}))
attempt("home file", read({str(home_file)!r}))
attempt("home listing", lambda: os.listdir({str(Path.home())!r}))
attempt("host files", read("/etc/hostname"))
attempt("host tmp", lambda: os.listdir("/tmp"))
attempt("beside the workspace", lambda: os.listdir(".."))
""",
        )
    loot = host.loot()
    assert len(attempts(host)) == 7
    assert "[project]" not in loot
    assert "pyproject.toml" not in loot and "README.md" not in loot
    assert "HOME-SECRET" not in loot and home_file.name not in loot
    assert "host files: refused (FileNotFoundError)" in loot
    # /tmp is the sandbox's own, holding only the way to the workspace.
    assert Path(host_tmp.name).name not in loot
    assert "beside the workspace: ['ws']" in loot


@pytest.fixture
def listeners() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A TCP listener and a UDP socket on the host's loopback."""
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    try:
        yield tcp, udp
    finally:
        tcp.close()
        udp.close()


def network_attempts(host: Host, sandbox: Sandbox, tcp: socket.socket, udp: socket.socket) -> None:
    tcp_port, udp_port = tcp.getsockname()[1], udp.getsockname()[1]
    host.run(
        sandbox,
        STEAL
        + f"""
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", {tcp_port}), timeout=2).send(b"x"))
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(
    b"pwned", ("127.0.0.1", {udp_port})))
""",
    )


def arrived(sock: socket.socket) -> bool:
    """Whether a connection (TCP) or a datagram (UDP) is waiting."""
    readable, _, _ = select.select([sock], [], [], 0.5)
    return bool(readable)


def test_no_network(
    bubblewrap: BubblewrapSandbox, host: Host, listeners: tuple[socket.socket, socket.socket]
) -> None:
    tcp, udp = listeners
    network_attempts(host, bubblewrap, tcp, udp)
    assert len(attempts(host)) == 2
    assert not arrived(tcp)
    assert not arrived(udp)


def test_network_is_an_opt_in(host: Host, listeners: tuple[socket.socket, socket.socket]) -> None:
    tcp, udp = listeners
    network_attempts(host, BubblewrapSandbox(network=True), tcp, udp)
    assert arrived(tcp)
    assert arrived(udp)


def test_the_parents_environment_is_out_of_reach(
    bubblewrap: BubblewrapSandbox, host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIMEGRAPH_TEST_SECRET", host.secret)
    host.run(
        bubblewrap,
        STEAL
        + f"""
attempt("environment", lambda: dict(os.environ))
attempt("parent's environ", read(f"/proc/{{os.getppid()}}/environ"))
attempt("host test process's environ", read("/proc/{os.getpid()}/environ"))
attempt("every visible environ", lambda: [
    open(f"/proc/{{pid}}/environ", "rb").read() for pid in os.listdir("/proc") if pid.isdigit()])
""",
    )
    assert len(attempts(host)) == 4
    assert host.secret not in host.loot()


def test_signals_do_not_reach_the_host(bubblewrap: BubblewrapSandbox, host: Host) -> None:
    received: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    victim = subprocess.Popen(["sleep", "60"])
    previous = signal.signal(signal.SIGUSR1, record)
    try:
        host.run(
            bubblewrap,
            STEAL
            + f"""
import signal
attempt("parent", lambda: os.kill(os.getppid(), signal.SIGUSR1))
attempt("host test process", lambda: os.kill({os.getpid()}, signal.SIGUSR1))
attempt("host process group", lambda: os.killpg({os.getpgrp()}, signal.SIGUSR1))
attempt("a host process", lambda: os.kill({victim.pid}, signal.SIGKILL))
""",
        )
        assert len(attempts(host)) == 4
        assert received == []
        assert victim.poll() is None
    finally:
        signal.signal(signal.SIGUSR1, previous)
        victim.kill()
        victim.wait()


def test_nothing_outlives_the_call(bubblewrap: BubblewrapSandbox, host: Host) -> None:
    marker = f"300.{os.getpid()}{len(host.secret)}1"
    host.run(
        bubblewrap,
        STEAL
        + f"""
attempt("own session", lambda: subprocess.Popen(["sleep", "{marker}"], start_new_session=True))
def daemon():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", "{marker}"])
        os._exit(0)
    return "forked"
attempt("double fork", daemon)
""",
    )
    assert len(attempts(host)) == 2 and "refused" not in host.loot()
    assert processes_with(marker) == []


def test_a_fork_loop_is_bounded(bubblewrap: BubblewrapSandbox, host: Host) -> None:
    marker = f"60.{os.getpid()}2"
    outcome = host.run(
        bubblewrap,
        f"""
import os
os.mkdir("forks")
for i in range(500):
    try:
        pid = os.fork()
    except OSError as exc:
        open("loot.txt", "w").write(f"stopped at {{i}}: {{exc}}")
        break
    if pid == 0:
        open(f"forks/{{i}}", "w").close()
        os.execvp("sleep", ["sleep", "{marker}"])
# Every child leaves its file before the call ends (and takes them all with it).
while len(os.listdir("forks")) < i:
    pass
""",
        max_processes=16,
    )
    children = len(list((host.ws.root / "forks").iterdir()))
    # The first process counts: it may have 15 children at once, and had them all.
    assert children == 15, outcome
    assert "stopped at 15" in host.loot()
    assert processes_with(marker) == []


def test_memory_is_bounded(bubblewrap: BubblewrapSandbox, host: Host) -> None:
    outcome = host.run(
        bubblewrap,
        STEAL + 'attempt("8 GB", lambda: len(bytearray(8 * 1024**3)))\n',
        memory_mb=512,
    )
    assert host.loot() == "8 GB: refused (MemoryError)\n", outcome


def test_an_endless_loop_is_killed(bubblewrap: BubblewrapSandbox, host: Host) -> None:
    marker = f"300.{os.getpid()}3"
    outcome = host.run(
        bubblewrap,
        f"""
import subprocess
subprocess.Popen(["sleep", "{marker}"])
open("loot.txt", "w").write("looping")
while True:
    pass
""",
        timeout_s=1,
    )
    assert outcome.timed_out
    assert host.loot() == "looping"
    assert processes_with(marker) == []


def test_file_size_is_bounded(bubblewrap: BubblewrapSandbox, host: Host) -> None:
    host.run(
        bubblewrap,
        STEAL
        + """
def grow(path):
    with open(path, "wb") as f:
        chunk = b"x" * (1 << 20)
        for _ in range(2048):
            f.write(chunk)
attempt("2 GB in the workspace", lambda: grow("big.bin"))
attempt("2 GB sparse", lambda: open("sparse.bin", "wb").truncate(2 * 1024**3))
attempt("2 GB in /tmp", lambda: grow("/tmp/big.bin"))
""",
        max_file_mb=5,
    )
    assert len(attempts(host)) == 3
    assert all("refused" in line for line in attempts(host)), host.loot()
    assert (host.ws.root / "big.bin").stat().st_size <= 5 * 1024**2
    assert (host.ws.root / "sparse.bin").stat().st_size == 0


def test_tmp_is_private_and_capped(bubblewrap: BubblewrapSandbox, host: Host) -> None:
    """/tmp lives in memory: it holds at most the memory limit, whatever the file limit."""
    host.run(
        bubblewrap,
        STEAL
        + """
def fill():
    for i in range(4):
        with open(f"/tmp/part{i}", "wb") as f:
            f.write(b"x" * (45 * 1024**2))
attempt("4 x 45 MB in /tmp", fill)
""",
        memory_mb=128,
        max_file_mb=50,
    )
    assert host.loot() == "4 x 45 MB in /tmp: refused (OSError)\n"


def test_shell_commands_are_confined_too(
    bubblewrap: BubblewrapSandbox, host: Host, home_file: Path
) -> None:
    marker = f"300.{os.getpid()}4"
    outcome = host.run(
        bubblewrap,
        f"""
cat {host.secret_file} ../outside/secret.txt {home_file} >> loot.txt 2>&1
echo pwned > {host.outside}/pwned-shell 2>> loot.txt
ls {REPO} >> loot.txt 2>&1
(setsid sleep {marker} &)
grep CapEff /proc/self/status >> loot.txt
unshare --user --map-root-user true 2>> loot.txt && echo "nested user namespace" >> loot.txt
echo done >> loot.txt
""",
        language="shell",
    )
    assert outcome.stdout == "" and "done" in host.loot()
    # No capabilities, and no user namespace of its own to gain some in.
    assert "CapEff:\t0000000000000000" in host.loot()
    assert "nested user namespace" not in host.loot()
    assert host.secret not in host.loot() and "HOME-SECRET" not in host.loot()
    assert "pyproject.toml" not in host.loot()
    assert sorted(p.name for p in host.outside.iterdir()) == ["secret.txt"]
    assert processes_with(marker) == []


def test_the_detectors_see_unconfined_reads(host: Host) -> None:
    """``sandbox="none"``: the same attempts succeed, so the checks above can fail."""
    read_escapes(host, UnconfinedSandbox())
    assert host.secret in host.loot()


def test_the_detectors_see_unconfined_writes(host: Host) -> None:
    write_escapes(host, UnconfinedSandbox())
    assert (host.outside / "pwned-absolute").exists()


def test_the_detectors_see_an_unconfined_network(
    host: Host, listeners: tuple[socket.socket, socket.socket]
) -> None:
    tcp, udp = listeners
    network_attempts(host, UnconfinedSandbox(), tcp, udp)
    assert arrived(tcp) and arrived(udp)
