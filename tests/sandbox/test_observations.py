"""Issue 38 points 2 and 8: what a code call's observation says is true. Long output is
kept whole (up to the cap, which a note names when it cuts); a call that fails because
the sandbox has no network says so, and how to allow it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.tools import BaseTool, ToolException

from aimegraph.sandbox import BubblewrapSandbox, Workspace
from aimegraph.tools import make_python_tool
from aimegraph.tools.shell import make_shell_tool
from tests.conftest import GraphFactory
from tests.scripted import call, plan, spec, submit

# 100,000 characters in numbered lines, so a lost or repeated piece shows.
PRINT_100K = "print(''.join(f'{n:06d} ' + 'x' * 42 + '\\n' for n in range(2_000)).rstrip())"
TEXT_100K = "".join(f"{n:06d} " + "x" * 42 + "\n" for n in range(2_000)).rstrip()

NO_NETWORK = "the sandbox has no network"
HOW_TO_ALLOW = "sandbox_network=True"


def test_a_100000_character_print_is_kept_whole_in_tool_outputs(
    bubblewrap: BubblewrapSandbox, scripted_graph: GraphFactory, workspace: Path
) -> None:
    """A run whose actor prints 100,000 characters: the saved file holds them all, and the
    observation says so without a note of a cut."""
    scenario = {
        "planner": [plan(spec("a", tool_bundles=["compute"], title="Print"))],
        "actors": {"a": [call("python", code=PRINT_100K), submit("printed")]},
        "reporter": [{"text": "printed"}],
    }
    graph, model = scripted_graph(scenario, verify="off", max_observation_chars=8_000)
    assert graph.invoke({"goal": "Print the numbered lines."})["status"] == "succeeded"
    (saved,) = (workspace / ".tool_outputs").iterdir()
    assert saved.read_text() == TEXT_100K
    observation = model.prompts("actor")[-1]
    assert f"The whole output is saved as '.tool_outputs/{saved.name}'" in observation
    assert "output cut here" not in observation and "passed the cap" not in observation


def test_output_over_the_cap_says_the_cap(bubblewrap: BubblewrapSandbox, tmp_path: Path) -> None:
    python = make_python_tool(tmp_path, sandbox=bubblewrap, max_output_chars=50_000)
    out = python.invoke({"code": PRINT_100K})
    shown, note = out.removeprefix("exit code: 0\n--- stdout ---\n").split("\nnote: ")
    head, cut = shown.split("\n[... output cut here: ")
    omitted, tail = cut.split(" bytes left out ...]\n")
    # Its beginning and end as printed, the cap's worth of them (less the final newline,
    # stripped), and how much was left out between them.
    assert TEXT_100K.startswith(head) and TEXT_100K.endswith(tail)
    assert len(head) + len(tail) == 50_000 - 1
    assert int(omitted) == len(TEXT_100K) + 1 - 50_000
    assert note == (
        "the output passed the cap of 50,000 characters (stdout and stderr together) "
        "and was cut there: only its beginning and end are kept, around the "
        "'[... output cut here' line; write large results to a file instead of printing them"
    )


def test_a_timed_out_call_says_the_cap_too(bubblewrap: BubblewrapSandbox, tmp_path: Path) -> None:
    python = make_python_tool(tmp_path, sandbox=bubblewrap, timeout_s=1, max_output_chars=1000)
    with pytest.raises(ToolException, match="timed out after 1 s") as raised:
        python.invoke({"code": "import time\nprint('z' * 5000)\ntime.sleep(30)"})
    assert str(raised.value).endswith("write large results to a file instead of printing them")
    assert "passed the cap of 1,000 characters" in str(raised.value)


@pytest.fixture
def host_server() -> Iterator[int]:
    """A TCP listener on the host's loopback: its port."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def offline_tools(tmp_path: Path, sandbox: BubblewrapSandbox) -> tuple[BaseTool, BaseTool]:
    ws = Workspace(tmp_path / "ws")
    return make_python_tool(ws, sandbox=sandbox), make_shell_tool(ws, sandbox=sandbox)


def test_a_network_error_says_the_sandbox_has_no_network(
    bubblewrap: BubblewrapSandbox, tmp_path: Path, host_server: int
) -> None:
    python, shell = offline_tools(tmp_path, bubblewrap)
    attempts = {
        "refused": f"import socket; socket.create_connection(('127.0.0.1', {host_server}))",
        "unreachable": "import socket; socket.create_connection(('192.0.2.1', 80), timeout=5)",
        "lookup": "import urllib.request; urllib.request.urlopen('https://example.com')",
    }
    for label, code in attempts.items():
        out = python.invoke({"code": code})
        assert out.startswith("exit code: 1\n"), (label, out)
        assert NO_NETWORK in out and HOW_TO_ALLOW in out, (label, out)
    assert "ConnectionRefusedError: [Errno 111] Connection refused" in python.invoke(
        {"code": attempts["refused"]}
    )
    curl = shell.invoke({"command": "curl -sS https://example.com"})
    assert "Could not resolve host" in curl and NO_NETWORK in curl and HOW_TO_ALLOW in curl


def test_other_failures_get_no_network_note(bubblewrap: BubblewrapSandbox, tmp_path: Path) -> None:
    python, _ = offline_tools(tmp_path, bubblewrap)
    assert NO_NETWORK not in python.invoke({"code": "open('missing.txt')"})
    # Printed, not raised: a log being read is not a connection being tried.
    assert python.invoke({"code": "print('Connection refused')"}) == "Connection refused"


@pytest.mark.usefixtures("bubblewrap")
def test_with_network_the_note_is_not_added(tmp_path: Path) -> None:
    """The same refused connection with the network opted in: refused by the host
    (nothing listens on the port), and no claim that the sandbox has none."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    python, _ = offline_tools(tmp_path, BubblewrapSandbox(network=True))
    out = python.invoke({"code": f"import socket; socket.create_connection(('127.0.0.1', {port}))"})
    assert "Connection refused" in out and NO_NETWORK not in out
