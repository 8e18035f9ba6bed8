"""Issue 10: the base install (no extras) imports aimegraph and runs the demo.

The ``[draw]`` extra's ``graphviz`` binding is hidden from a fresh interpreter
(``sys.modules["graphviz"] = None`` makes every import of it fail), as on a
``pip install aimegraph`` without extras.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

WITHOUT_GRAPHVIZ = """
import sys
sys.modules["graphviz"] = None
"""


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_GRAPHVIZ + textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.slow
def test_import_and_demo_without_the_draw_extra(tmp_path: Path) -> None:
    done = _python(
        """
        import aimegraph
        from aimegraph.cli import main
        sys.exit(main(["--checkpoints", "memory", "demo", "--json"]))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert '"status": "succeeded"' in done.stdout
    assert list(tmp_path.glob(".aimegraph/workspace/*/report.md"))


@pytest.mark.slow
def test_drawing_without_the_draw_extra_names_the_extra(tmp_path: Path) -> None:
    done = _python(
        """
        from aimegraph import build_aime_graph, draw
        from aimegraph.drawing import GraphvizNotFoundError
        graph = build_aime_graph("scripted:demo")
        assert "-->" in draw(graph, format="mermaid").text  # Mermaid needs no Graphviz
        try:
            draw(graph)
        except GraphvizNotFoundError as exc:
            print(exc)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'aimegraph[draw]'" in done.stdout
    assert "Graphviz system package" in done.stdout


@pytest.mark.slow
def test_without_the_mcp_extra_only_mcp_servers_name_it(tmp_path: Path) -> None:
    # Issue 25: the engine, the async-only tools and the MCP servers file's checks need
    # no [mcp]; reaching a server names the extra in one line (CLI exit 2).
    (tmp_path / "servers.json").write_text('{"mcpServers": {"x": {"command": "x"}}}')
    done = _python(
        """
        sys.modules["mcp"] = None
        sys.modules["langchain_mcp_adapters"] = None
        import asyncio
        from langchain_core.tools import tool
        from aimegraph import AimeConfig, build_aime_graph
        from aimegraph.cli import main
        from aimegraph.models.scripted import ScriptedChatModel

        @tool
        async def lookup(key: str) -> str:
            \"\"\"Looks a key up.\"\"\"
            await asyncio.sleep(0)
            return "value of " + key

        model = ScriptedChatModel.from_dict({
            "planner": [{"rationale": "s", "tasks": [
                {"id": "a", "title": "Look up", "tool_bundles": ["custom"]}]}],
            "actors": {"a": [{"tool": "lookup", "args": {"key": "k"}},
                             {"tool": "submit_result", "args": {
                                 "status": "completed", "summary": "{last_tool_output}"}}]},
        })
        graph = build_aime_graph(model, tools=[lookup], config=AimeConfig(workspace="ws"))
        print(graph.invoke({"goal": "g"})["tasks"]["a"].result.summary)
        sys.exit(main(["--checkpoints", "memory", "run", "g", "--model", "scripted:demo",
                       "--mcp", "servers.json", "--workspace", "ws"]))
        """,
        tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "value of k" in done.stdout
    assert "error: MCP servers need the [mcp] extra: pip install 'aimegraph[mcp]'" in done.stderr
