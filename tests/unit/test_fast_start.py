"""Fast start: ``import aimegraph`` and ``aimegraph --help`` load none of the engine,
``aimegraph threads`` none of the graphs, and a stored thread is listed from its newest
checkpoint alone. The import checks run in fresh interpreters: this one has loaded
everything already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

import aimegraph
from aimegraph.checkpoints import list_threads, make_serializer, open_checkpointer, thread_config
from aimegraph.eval import SuiteError

SRC = Path(aimegraph.__file__).parents[1]
HEAVY = ("langgraph", "langchain_core", "langchain", "openai", "rich", "numpy", "networkx")


def _loaded_after(code: str, cwd: Path) -> list[str]:
    """The modules a fresh interpreter has loaded after running ``code``."""
    script = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


def _roots(modules: list[str], wanted: tuple[str, ...]) -> set[str]:
    return {m.split(".")[0] for m in modules} & set(wanted)


def test_import_aimegraph_loads_no_engine(tmp_path: Path) -> None:
    loaded = _loaded_after("import aimegraph", tmp_path)
    assert _roots(loaded, HEAVY) == set()
    assert [m for m in loaded if m.startswith("aimegraph.")] == ["aimegraph.lazy"]


def test_help_loads_no_engine_and_no_command_module(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import contextlib, io
        from aimegraph.cli import main
        with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
            main(["--help"])
        """
    )
    loaded = _loaded_after(code, tmp_path)
    assert _roots(loaded, (*HEAVY, "pydantic", "yaml")) == set()
    assert not [
        m
        for m in loaded
        if m.startswith("aimegraph.cli.") and m.endswith(("runs", "resume", "live", "eval"))
    ]


def test_version_prints_the_installed_version_and_help_does_not_look_it_up(
    tmp_path: Path,
) -> None:
    from importlib.metadata import version

    done = subprocess.run(
        [sys.executable, "-m", "aimegraph.cli", "--version"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"aimegraph {version('aimegraph')}\n",
        "",
    )
    code = textwrap.dedent(
        """
        import contextlib, io
        from aimegraph.cli import main
        with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
            main(["--help"])
        """
    )
    assert "importlib.metadata" not in _loaded_after(code, tmp_path)


def test_threads_loads_no_graph_and_no_model_provider(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import contextlib, io
        from aimegraph.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["--checkpoints", "sqlite:///c.db", "threads"]) == 0
        """
    )
    loaded = _loaded_after(code, tmp_path)
    assert _roots(loaded, ("openai", "langchain_openai", "numpy", "networkx", "faiss")) == set()
    engine = ("aimegraph.graphs", "aimegraph.nodes", "aimegraph.models", "aimegraph.eval")
    assert [m for m in loaded if m.startswith(engine)] == []


def test_star_import_does_not_shadow_eval_and_every_name_resolves() -> None:
    namespace: dict[str, Any] = {}
    exec("from aimegraph import *", namespace)
    assert "eval" not in namespace and "eval" not in aimegraph.__all__
    assert set(aimegraph.__all__) <= set(namespace)
    assert aimegraph.evaluate is aimegraph.eval.evaluate
    assert "evaluate" in dir(aimegraph) and "nodes" not in aimegraph.__all__
    assert aimegraph.nodes.DefaultActorFactory is aimegraph.DefaultActorFactory


def test_a_name_that_is_neither_exported_nor_a_submodule_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'not_there'"):
        aimegraph.not_there  # noqa: B018


def test_calling_the_eval_package_still_runs_an_eval_with_a_deprecation_warning(
    tmp_path: Path,
) -> None:
    with (
        pytest.warns(DeprecationWarning, match=r"aimegraph\.evaluate"),
        pytest.raises(SuiteError, match="cannot read suite"),
    ):
        aimegraph.eval(str(tmp_path / "missing.yaml"), model="scripted:demo")


@pytest.fixture
def long_threads(tmp_path: Path) -> Iterator[SqliteSaver]:
    """An SQLite store of 3 threads, 6 checkpoints each; only the last names the goal."""
    with open_checkpointer(f"sqlite:///{tmp_path / 'c.db'}") as saver:
        assert isinstance(saver, SqliteSaver)
        for thread in ("a", "b", "c"):
            config = thread_config(thread, checkpoint_ns="")
            for step in range(6):
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {"goal": f"goal {thread}" if step == 5 else ""}
                config = saver.put(config, checkpoint, {"step": step}, {})
        yield saver


def test_sqlite_threads_are_listed_from_their_newest_checkpoint_alone(
    long_threads: SqliteSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads = 0
    serde = make_serializer()

    def counted(data: tuple[str, bytes]) -> Any:
        nonlocal loads
        loads += 1
        return serde.loads_typed(data)

    monkeypatch.setattr(long_threads.serde, "loads_typed", counted)
    threads = list_threads(long_threads)
    assert sorted((t.thread_id, t.goal) for t in threads) == [
        ("a", "goal a"),
        ("b", "goal b"),
        ("c", "goal c"),
    ]
    assert loads == 3  # one checkpoint a thread, not all 18


def test_other_savers_are_read_whole_for_the_newest_checkpoint() -> None:
    with open_checkpointer("memory") as saver:
        config = thread_config("m", checkpoint_ns="")
        for step in range(3):
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"goal": f"step {step}"}
            checkpoint["channel_versions"] = {"goal": step + 1}
            config = saver.put(config, checkpoint, {"step": step}, {"goal": step + 1})
        assert [(t.thread_id, t.goal) for t in list_threads(saver)] == [("m", "step 2")]
