"""Issue 10: the base install (no extras) imports aimegraph, runs the demo and names the
extra a feature needs.

The test builds a new virtual environment holding only the base package: the
distributions of ``[project].dependencies`` (markers evaluated, no extras) and of their
own requirements, taken from the interpreter running the tests (hard links of the files
their RECORDs list, so it runs offline), and the source tree under test on a ``.pth``
line, as an editable install puts it. Nothing of the extras can be imported there.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
EXTRA_MODULES = {"draw": "graphviz", "local": "llama_cpp", "optimize": "gepa",
                 "distributed": "celery", "semantic": "sentence_transformers",
                 "dashboard": "uvicorn", "postgres": "psycopg", "dev": "pytest"}  # fmt: skip
"""One module per extra that the base install must not have."""


def base_distributions() -> dict[str, importlib.metadata.Distribution]:
    """The installed distributions the base package needs, by canonical name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found: dict[str, importlib.metadata.Distribution] = {}
    pending = [Requirement(r) for r in project["dependencies"]]
    while pending:
        requirement = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        found[name] = importlib.metadata.distribution(requirement.name)
        pending += [Requirement(r) for r in found[name].requires or []]
    return found


def _link(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copy2(source, target)


@pytest.fixture(scope="module")
def base_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The interpreter of a new venv holding the base package only."""
    home = tmp_path_factory.mktemp("base-venv")
    venv.create(home, with_pip=False, symlinks=True)
    python = home / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    site = Path(purelib)
    ours = Path(sysconfig.get_paths()["purelib"]).resolve()
    for dist in base_distributions().values():
        for entry in dist.files or []:
            source = Path(str(dist.locate_file(entry))).resolve()
            if source.is_file() and source.is_relative_to(ours):
                _link(source, site / source.relative_to(ours))
    (site / "aimegraph-under-test.pth").write_text(f"{ROOT / 'src'}\n")
    yield python


def _python(python: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(
        [python, "-c", textwrap.dedent(code)],
        cwd=cwd, capture_output=True, text=True, timeout=240, env=env,
    )  # fmt: skip


@pytest.mark.slow
def test_the_venv_holds_the_base_package_only(base_python: Path, tmp_path: Path) -> None:
    assert sys.prefix != str(base_python.parents[1])
    done = _python(
        base_python,
        f"""
        import importlib.util, sys
        import aimegraph
        print(aimegraph.__file__)
        print(sorted(m for m in {sorted(EXTRA_MODULES.values())!r}
                     if importlib.util.find_spec(m) is not None))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    where, importable = done.stdout.splitlines()
    assert Path(where).is_relative_to(ROOT / "src")
    assert importable == "[]"


@pytest.mark.slow
def test_import_and_demo_in_the_base_install(base_python: Path, tmp_path: Path) -> None:
    done = _python(
        base_python,
        """
        import sys
        from aimegraph.cli import main
        sys.exit(main(["--checkpoints", "memory", "demo", "--json"]))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert '"status": "succeeded"' in done.stdout
    assert list(tmp_path.glob(".aimegraph/workspace/*/report.md"))


@pytest.mark.slow
def test_drawing_in_the_base_install_names_the_extra(base_python: Path, tmp_path: Path) -> None:
    done = _python(
        base_python,
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
def test_without_the_mcp_extra_only_mcp_servers_name_it(base_python: Path, tmp_path: Path) -> None:
    # Issue 25: the engine, the async-only tools and the MCP servers file's checks need
    # no [mcp]; reaching a server names the extra in one line (CLI exit 2).
    (tmp_path / "servers.json").write_text('{"mcpServers": {"x": {"command": "x"}}}')
    done = _python(
        base_python,
        """
        import asyncio
        import sys
        from langchain_core.tools import tool
        from aimegraph import AimeConfig, build_aime_graph
        from aimegraph.cli import main
        from aimegraph.models.offline.scripted import ScriptedChatModel

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
