"""The sandboxed python tool: isolation, limits and output handling (escape attempts
judged from the host are in ``tests/sandbox/test_escapes.py``)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from langchain_core.tools import BaseTool, ToolException
from tests.host import processes_with

from aimegraph.sandbox import Workspace
from aimegraph.tools.python import make_python_tool

# The tool runs in the default sandbox, bubblewrap: skipped where it cannot run (not in CI).
pytestmark = pytest.mark.usefixtures("bubblewrap")


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws")


@pytest.fixture
def python(ws: Workspace) -> BaseTool:
    return make_python_tool(ws, timeout_s=10)


def run(tool: BaseTool, code: str) -> str:
    return tool.invoke({"code": textwrap.dedent(code)})


def test_tool_metadata(python: BaseTool) -> None:
    assert python.name == "python"
    assert set(python.args) == {"code"}


def test_runs_code(python: BaseTool) -> None:
    out = run(python, "print(6 * 7)")
    assert out == "42"  # a clean run returns just what it printed


def test_no_output(python: BaseTool) -> None:
    assert run(python, "x = 1") == "(no output)"


def test_errors_and_exit_code(python: BaseTool) -> None:
    out = run(
        python,
        """
        import sys
        print("before")
        print("warn", file=sys.stderr)
        raise ValueError("boom")
        """,
    )
    assert out.startswith("exit code: 1\n--- stdout ---\nbefore\n--- stderr ---\nwarn\n")
    assert "ValueError: boom" in out
    assert run(python, "import sys; sys.exit(3)").startswith("exit code: 3")


def test_unicode_output(python: BaseTool) -> None:
    assert "héllo 中文" in run(python, "print('héllo 中文')")


def test_cwd_and_home_are_the_workspace(ws: Workspace, python: BaseTool) -> None:
    (ws.root / "input.txt").write_text("from the workspace")
    out = run(
        python,
        """
        import os
        print(os.getcwd())
        print(os.environ["HOME"])
        print(open("input.txt").read())
        open("output.txt", "w").write("written by code")
        """,
    )
    assert out.splitlines() == [str(ws.root), str(ws.root), "from the workspace"]
    assert (ws.root / "output.txt").read_text() == "written by code"


def test_secrets_do_not_reach_the_child(monkeypatch: pytest.MonkeyPatch, python: BaseTool) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("PYTHONPATH", "/should/not/leak")
    out = run(
        python,
        """
        import json, os, sys
        print(json.dumps(sorted(os.environ)))
        print(os.environ.get("OPENAI_API_KEY"))
        print("/should/not/leak" in sys.path)
        """,
    )
    lines = out.splitlines()
    assert "sk-test-secret" not in out
    assert set(json.loads(lines[0])) <= {
        "PWD",  # set by bubblewrap to the working directory, the workspace
        "PATH",
        "LANG",
        "HOME",
        "PYTHONIOENCODING",
        "OPENBLAS_NUM_THREADS",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
    }
    assert lines[1:3] == ["None", "False"]


def test_each_call_is_a_fresh_process(python: BaseTool) -> None:
    run(python, "import builtins; builtins.leak = 1")
    assert "False" in run(python, "import builtins; print(hasattr(builtins, 'leak'))")


def test_timeout_kills_the_process(ws: Workspace) -> None:
    tool = make_python_tool(ws, timeout_s=1)
    with pytest.raises(ToolException) as info:
        run(
            tool,
            """
            print("started", flush=True)
            while True:
                pass
            """,
        )
    message = str(info.value)
    assert "timed out after 1 s" in message
    assert "started" in message


def test_timeout_kills_child_processes(ws: Workspace) -> None:
    tool = make_python_tool(ws, timeout_s=1)
    marker = f"60.{os.getpid()}5"
    with pytest.raises(ToolException, match="timed out"):
        run(
            tool,
            f"""
            import subprocess
            subprocess.Popen(["sleep", "{marker}"])
            while True:
                pass
            """,
        )
    assert processes_with(marker) == []


def test_background_processes_do_not_outlive_the_call(ws: Workspace, python: BaseTool) -> None:
    marker = f"60.{os.getpid()}6"
    run(
        python,
        f"""
        import subprocess
        subprocess.Popen(["sleep", "{marker}"])
        subprocess.Popen(["sleep", "{marker}"], start_new_session=True)
        open("started", "w").close()
        """,
    )
    assert (ws.root / "started").exists()
    assert processes_with(marker) == []


def test_memory_limit(ws: Workspace) -> None:
    tool = make_python_tool(ws, memory_mb=200)
    out = run(tool, "data = bytearray(1024 ** 3)\nprint('allocated')")
    assert "allocated" not in out
    assert "MemoryError" in out
    assert "ran out of memory (limit 200 MB)" in out
    # Within the limit, the same code works.
    assert "allocated" in run(tool, "data = bytearray(10 * 1024 ** 2)\nprint('allocated')")


def test_huge_output_is_truncated(ws: Workspace) -> None:
    tool = make_python_tool(ws, max_output_chars=1000)
    out = run(tool, "print('a' * 100_000)\nprint('THE END')")
    assert len(out) < 1400
    assert "\n[... output cut here: " in out
    assert "\nTHE END\nnote: the output passed the cap of 1,000 characters" in out
    assert out.startswith("exit code: 0\n--- stdout ---\naaaa")


def test_file_size_limit(ws: Workspace) -> None:
    tool = make_python_tool(ws, max_file_mb=1)
    out = run(tool, "open('big.bin', 'wb').write(b'x' * (2 * 1024 ** 2))")
    assert "File too large" in out
    assert "1 MB size limit" in out
    assert (ws.root / "big.bin").stat().st_size <= 1024**2


async def test_async_invocation(python: BaseTool) -> None:
    out = await python.ainvoke({"code": "print('async ok')"})
    assert out == "async ok"
