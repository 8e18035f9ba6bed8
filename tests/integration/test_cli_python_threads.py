"""Issue 11, items 6-9 and 12: the CLI on threads started from Python, with the
application's own tools, from another directory, and on user mistakes.

``main([...])`` runs in-process, each call opening the SQLite file itself as a
separate ``aimegraph`` invocation would.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from langchain_core.tools import tool
from langgraph.types import Command

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import open_checkpointer, thread_config
from aimegraph.cli import main
from aimegraph.models.offline.scripted import ScriptedChatModel
from aimegraph.sandbox import WorkspaceError

# A price lookup the application registers as its own tool (bundle "custom").
PRICES_MODULE = '''
from langchain_core.tools import tool

@tool
def lookup_price(item: str) -> str:
    """The price of an item."""
    return {"widget": "4.20"}.get(item, "unknown")

TOOLS = [lookup_price]
'''

SCENARIO: dict[str, Any] = {
    "planner": [
        {
            "rationale": "look the price up, then note it",
            "tasks": [
                {"id": "price", "title": "Find the price", "tool_bundles": ["custom", "files"]}
            ],
        }
    ],
    "actors": {
        "price": [
            {"tool": "lookup_price", "args": {"item": "widget"}},
            {"tool": "write_file", "args": {"path": "price.txt", "content": "{last_tool_output}"}},
            {
                "tool": "submit_result",
                "args": {"status": "completed", "summary": "widget costs 4.20"},
            },
        ]
    },
    "reporter": [{"text": "{all_results}"}],
}


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The application's tools module on sys.path, a scenario file, a store URL."""
    (tmp_path / "shop_tools_for_cli.py").write_text(PRICES_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "shop_tools_for_cli", raising=False)
    scenario = tmp_path / "price.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    monkeypatch.setenv("COLUMNS", "200")
    return {"url": f"sqlite:///{tmp_path / 'cp.db'}", "model": f"scripted:{scenario}"}


def _start_from_python(url: str, workspace: Path, *, importable: bool = True) -> None:
    """Start a run from Python with a custom tool (one another process can import,
    or one it cannot: defined in a function); it pauses for plan approval."""
    from shop_tools_for_cli import lookup_price  # type: ignore[import-not-found]

    if not importable:

        @tool("lookup_price")
        def local_lookup(item: str) -> str:
            """The price of an item."""
            return str(lookup_price.invoke({"item": item}))

        lookup_price = local_lookup
    config = AimeConfig(workspace=workspace, approve_plan=True)
    with open_checkpointer(url) as saver:
        graph = build_aime_graph(
            ScriptedChatModel.from_dict(SCENARIO), tools=[lookup_price], config=config,
            checkpointer=saver,
        )  # fmt: skip
        assert graph.invoke({"goal": "price a widget"}, thread_config("py"))["__interrupt__"]


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_show_history_and_resume_of_a_python_thread(
    app: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "ws"
    _start_from_python(app["url"], workspace)
    url = app["url"]

    code, out, _ = _cli(capsys, "--checkpoints", url, "show", "py")
    assert code == 0 and "status: paused" in out and "- [ ] price: Find the price" in out
    code, out, _ = _cli(capsys, "--checkpoints", url, "history", "py", "--json")
    assert code == 0 and json.loads(out)[0]["status"] == "paused"

    # The model was an object: no spec stored, so the error says which flags to give.
    code, _, err = _cli(capsys, "--checkpoints", url, "resume", "py", "--approve")
    assert code == 2 and "--model" in err and "--tools" in err
    # The tool (importable as shop_tools_for_cli:lookup_price) and the workspace
    # were stored with the thread: --model is all the resume needs.
    code, out, err = _cli(
        capsys, "--checkpoints", url, "resume", "py", "--approve", "--model", app["model"],
        "--json",
    )  # fmt: skip
    summary = json.loads(out)
    assert code == 0 and summary["status"] == "succeeded", err
    assert (workspace / "price.txt").read_text() == "4.20"


def test_a_python_thread_whose_tools_cannot_be_imported_needs_tools(
    app: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "ws"
    _start_from_python(app["url"], workspace, importable=False)
    url = app["url"]
    # The plan needs the "custom" bundle: without --tools the resume is refused,
    # instead of every actor failing on "tool 'lookup_price' is not available".
    code, _, err = _cli(
        capsys, "--checkpoints", url, "resume", "py", "--approve", "--model", app["model"],
    )  # fmt: skip
    assert code == 2 and "'custom' (tasks price)" in err and "--tools" in err

    code, out, err = _cli(
        capsys, "--checkpoints", url, "resume", "py", "--approve", "--model", app["model"],
        "--tools", "shop_tools_for_cli:TOOLS", "--json",
    )  # fmt: skip
    summary = json.loads(out)
    assert code == 0 and summary["status"] == "succeeded"
    assert (workspace / "price.txt").read_text() == "4.20"
    # The flag changed a stored setting: said in one line.
    assert err.count("\n") == 1 and err.startswith("overrides: tools: [] -> ")


def test_a_python_thread_built_with_middleware_is_not_carried_on_without_it(
    app: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The middleware are the Python process's objects: the CLI cannot rebuild them, so
    it refuses to carry the run on (rather than dropping what they enforce); the
    graph built with them again carries it on."""
    from langchain.agents.middleware import HumanInTheLoopMiddleware, PIIMiddleware

    from aimegraph.checkpoints.runs import latest_settings

    workspace = tmp_path / "ws"
    middleware = [
        PIIMiddleware("email"),
        HumanInTheLoopMiddleware(interrupt_on={"write_file": True}),
    ]
    config = AimeConfig(workspace=workspace, approve_plan=True)
    with open_checkpointer(app["url"]) as saver:
        graph = build_aime_graph(
            app["model"], config=config, checkpointer=saver, middleware=middleware,
            tools=[__import__("shop_tools_for_cli").lookup_price],
        )  # fmt: skip
        assert graph.invoke({"goal": "price a widget"}, thread_config("mw"))["__interrupt__"]
        stored = latest_settings(saver, "mw")
    assert stored.unstored == (
        "middleware actor: PIIMiddleware[email]",
        "middleware actor: HumanInTheLoopMiddleware",
    )

    code, _, err = _cli(capsys, "--checkpoints", app["url"], "resume", "mw", "--approve")
    assert code == 2 and err.count("\n") == 1
    assert "built with middleware actor: PIIMiddleware[email], middleware actor: Human" in err
    assert "carry it on from Python with a graph built with the same arguments" in err
    code, _, err = _cli(capsys, "--checkpoints", app["url"], "run", "again", "--thread", "mw")
    assert code == 2 and "built with middleware actor: PIIMiddleware" in err
    assert not (workspace / "price.txt").exists()

    with open_checkpointer(app["url"]) as saver:
        graph = build_aime_graph(
            app["model"], config=config, checkpointer=saver, middleware=middleware,
            tools=[__import__("shop_tools_for_cli").lookup_price],
        )  # fmt: skip
        paused = graph.invoke(Command(resume={"action": "approve"}), thread_config("mw"))
        # HumanInTheLoopMiddleware asks before the file is written, as it did at the start.
        assert paused["__interrupt__"][0].value["tool"] == "write_file"
        out = graph.invoke(
            Command(resume={"decisions": [{"type": "approve"}]}), thread_config("mw")
        )
    assert out["status"] == "succeeded"
    assert (workspace / "price.txt").read_text() == "4.20"


AGENTS_MODULE = """
from aimegraph import AgentUnit

UNITS = [AgentUnit(name="pricer", description="Prices items.", persona="a careful pricer")]
"""


def test_a_python_thread_built_with_objects_is_carried_on_only_with_them_given_again(
    app: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Per-role models and agent units given as objects are not stored: a resume is
    refused until flags give them again (said on the overrides line), rather than
    going on with one model and no units."""
    from aimegraph import AgentUnit
    from aimegraph.checkpoints.runs import latest_settings

    (tmp_path / "shop_units_for_cli.py").write_text(AGENTS_MODULE)
    workspace = tmp_path / "ws"
    config = AimeConfig(workspace=workspace, approve_plan=True)
    with open_checkpointer(app["url"]) as saver:
        graph = build_aime_graph(
            app["model"], models={"planner": app["model"]}, config=config, checkpointer=saver,
            agents=[AgentUnit(name="pricer", description="Prices items.")],
            tools=[__import__("shop_tools_for_cli").lookup_price],
        )  # fmt: skip
        assert graph.invoke({"goal": "price a widget"}, thread_config("objs"))["__interrupt__"]
        assert latest_settings(saver, "objs").unstored == ("models planner", "agents")

    base = ("--checkpoints", app["url"], "resume", "objs", "--approve")
    code, _, err = _cli(capsys, *base)
    assert code == 2 and "built with models planner, agents given to build_aime_graph" in err
    code, _, err = _cli(capsys, *base, "--agents", "shop_units_for_cli:UNITS")
    assert code == 2 and "built with models planner given" in err
    code, out, err = _cli(
        capsys, *base, "--agents", "shop_units_for_cli:UNITS", "--model", app["model"], "--json"
    )
    assert code == 0 and json.loads(out)["status"] == "succeeded", err
    assert "models planner: the thread's object -> given here" in err
    assert "agents: None -> shop_units_for_cli:UNITS" in err
    assert (workspace / "price.txt").read_text() == "4.20"


def test_a_prompt_store_given_from_python_is_stored_by_its_file_prompt_texts_are_named(
    app: dict[str, Any], tmp_path: Path
) -> None:
    from aimegraph.checkpoints.runs import latest_settings
    from aimegraph.optimizer import PromptStore

    store = PromptStore(tmp_path / "prompts.jsonl")
    config = AimeConfig(workspace=tmp_path / "ws", approve_plan=True)
    with open_checkpointer(app["url"]) as saver:
        for thread, prompts in (("store", store), ("texts", {"reporter": "# Role: reporter"})):
            graph = build_aime_graph(app["model"], config=config, checkpointer=saver,
                                     prompts=prompts)  # fmt: skip
            assert graph.invoke({"goal": "price a widget"}, thread_config(thread))
        stored, texts = latest_settings(saver, "store"), latest_settings(saver, "texts")
    assert stored.prompts == str(tmp_path / "prompts.jsonl") and stored.unstored == ()
    assert texts.prompts is None and texts.unstored == ("prompts",)


def test_run_with_tools_resumes_from_another_directory(
    app: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    start, elsewhere = tmp_path / "start", tmp_path / "elsewhere"
    start.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(start)
    code, _, _ = _cli(
        capsys, "--checkpoints", app["url"], "run", "price a widget", "--model", app["model"],
        "--thread", "cli", "--workspace", "ws", "--tools", "shop_tools_for_cli:lookup_price",
        "--approve-plan", "--json",
    )  # fmt: skip
    assert code == 5
    # The stored settings name the tools and the workspace as an absolute path.
    monkeypatch.chdir(elsewhere)
    code, out, _ = _cli(
        capsys, "resume", "cli", "--approve", "--json", "--checkpoints", app["url"]
    )  # --checkpoints after the subcommand, too
    assert code == 0 and json.loads(out)["status"] == "succeeded"
    assert (start / "ws" / "price.txt").read_text() == "4.20"
    assert not (elsewhere / "ws").exists()


def test_bad_config_json_is_a_usage_error(
    app: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    for text, says in (("[1]", "must be a JSON object"), ("{nope", "is not JSON")):
        code, _, err = _cli(
            capsys, "--checkpoints", app["url"], "run", "g", "--model", app["model"],
            "--config", text,
        )  # fmt: skip
        assert code == 2 and says in err and err.count("\n") == 1


def test_bracketed_error_text_survives(capsys: pytest.CaptureFixture[str]) -> None:
    # Rich used to read "[local]" as a style tag and print "(llama.cpp, extra )".
    code, _, err = _cli(capsys, "--checkpoints", "memory", "run", "g", "--model", "nonsense:x")
    assert code == 2 and "extra [local]" in err


def test_bad_tools_spec_is_a_usage_error(
    app: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    for spec, says in (("no_colon", "module:attr"), ("shop_tools_for_cli:nope", "nope")):
        code, _, err = _cli(
            capsys, "--checkpoints", app["url"], "run", "g", "--model", app["model"],
            "--tools", spec,
        )  # fmt: skip
        assert code == 2 and says in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--checkpoints", "postgresql://nobody@127.0.0.1:1/x", "threads"], "127.0.0.1:1"),
        # A command that stores runs (a reading one reads a missing file as empty).
        (["--checkpoints", "sqlite:////proc/x.db", "demo"], "unable to open database file"),
        (["demo", "--checkpoints", "sqlite:////proc/x.db"], "sqlite:////proc/x.db"),
    ],
)
def test_unreachable_stores_give_one_error_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(capsys, *argv)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and says in err


def test_plan_file_and_workspace_mistakes(
    app: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = app["url"]
    code, _, _ = _cli(
        capsys, "--checkpoints", url, "run", "g", "--model", app["model"], "--thread", "t",
        "--workspace", str(tmp_path / "ws"), "--tools", "shop_tools_for_cli:TOOLS",
        "--approve-plan", "--json",
    )  # fmt: skip
    assert code == 5
    # Rich would read "[local]" as markup and print "missing.json": it is escaped.
    missing = tmp_path / "missing[local].json"
    code, _, err = _cli(capsys, "--checkpoints", url, "resume", "t", "--plan-file", str(missing))
    assert code == 2 and err.count("\n") == 1 and "missing[local].json" in err
    (tmp_path / "bad.json").write_text("{not json")
    code, _, err = _cli(
        capsys, "--checkpoints", url, "resume", "t", "--plan-file", str(tmp_path / "bad.json")
    )
    assert code == 2 and "is not JSON" in err

    code, _, err = _cli(
        capsys, "--checkpoints", url, "run", "g", "--model", app["model"],
        "--workspace", "/proc/nope/ws",
    )  # fmt: skip
    assert code == 2 and err.startswith("error: cannot create the workspace /proc/nope/ws")


def test_an_unwritable_workspace_is_a_clear_error_from_python() -> None:
    with pytest.raises(WorkspaceError, match="cannot create the workspace /proc/nope/ws"):
        build_aime_graph("scripted:demo", config=AimeConfig(workspace="/proc/nope/ws"))


def test_draw_pdf_and_draw_without_graphviz(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ["--checkpoints", "memory"]
    pdf = tmp_path / "graph.pdf"
    if __import__("shutil").which("dot"):
        assert _cli(capsys, *store, "draw", "-o", str(pdf))[0] == 0
        assert pdf.read_bytes()[:5] == b"%PDF-"
    code, _, err = _cli(capsys, *store, "draw", "-o", str(tmp_path / "graph.jpg"))
    assert code == 2 and "suffix '.jpg'" in err
    monkeypatch.setitem(sys.modules, "graphviz", None)  # as without the [draw] extra
    code, _, err = _cli(capsys, *store, "draw")
    assert code == 2 and "pip install 'aimegraph[draw]'" in err and "--format mermaid" in err
    code, out, _ = _cli(capsys, *store, "draw", "--format", "mermaid")
    assert code == 0 and "-->" in out
