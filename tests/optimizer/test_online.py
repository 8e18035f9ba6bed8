"""AimeConfig.optimize_online on the scripted citation task (tests/optimizer/teaching.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models.offline.teaching import FeedbackReflectionModel
from aimegraph.optimizer.online import OnlineLoop
from aimegraph.optimizer.store import PromptStore
from aimegraph.prompts import DEFAULT_PROMPTS
from aimegraph.prompts.source import DEFAULT_VERSION
from tests.optimizer import teaching

pytest.importorskip("gepa")


def _graph(tmp_path: Path, reflection: Any = None, **fields: Any):
    model, models = teaching.task_models()
    config = teaching.config(tmp_path / "ws").model_copy(
        update={"optimize_online": True, "optimize_window": 3, "optimize_max_llm_calls": 5} | fields
    )
    return build_aime_graph(
        model,
        models=models | {"reflection": reflection or FeedbackReflectionModel()},
        config=config,
        prompts=PromptStore(tmp_path / "prompts.jsonl"),
    )


def _run(
    graph, goal: str = "What was the Q3 revenue?"
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    out: dict[str, Any] = {}
    for mode, chunk in graph.stream({"goal": goal}, stream_mode=["custom", "values"]):
        if mode == "custom" and chunk.get("type") == "optimizer":
            events.append(chunk)
        elif mode == "values":
            out = chunk
    return out, events


def _records(tmp_path: Path, kind: str) -> list[dict[str, Any]]:
    lines = (tmp_path / "prompts.traces.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def test_failing_runs_trigger_one_mutation_used_from_the_next_run(tmp_path: Path) -> None:
    graph = _graph(tmp_path)
    for n in (1, 2):
        out, events = _run(graph)
        assert out["status"] == "rejected"
        assert [(e["event"], e["runs"], e["rolling"]) for e in events] == [("traced", n, 0.0)]
    store = PromptStore(tmp_path / "prompts.jsonl")
    assert store.active() is None
    # The loop's summary beside the trace file is rebuilt from the file when lost.
    (tmp_path / "prompts.traces.state.json").unlink()

    out, events = _run(graph)  # the third failure fills the window
    assert out["status"] == "rejected" and out["prompt_version"] == DEFAULT_VERSION
    (event,) = events
    assert event["event"] == "mutated" and event["component"] == "planner"
    assert event["llm_calls"] == 1 and event["parent"] == DEFAULT_VERSION
    new = store.get(event["version"])
    assert store.active() == new.version
    assert (new.source, new.parent) == ("online", DEFAULT_VERSION)
    assert teaching.INSTRUCTION in new.texts["planner"]
    assert new.texts["actor"] == DEFAULT_PROMPTS["actor"]  # one component per mutation
    assert len(_records(tmp_path, "run")) == 3 and len(_records(tmp_path, "mutation")) == 1

    # The next runs use the new prompt, succeed, and trigger nothing more.
    for n in (1, 2, 3, 4):
        out, events = _run(graph)
        assert out["status"] == "succeeded" and out["prompt_version"] == new.version
        assert [(e["event"], e["runs"], e["rolling"]) for e in events] == [
            ("traced", min(n, 3), 1.0)
        ]
    assert len(_records(tmp_path, "mutation")) == 1

    # A restarted process (a new graph and store object over the same files) uses it too.
    out, _ = _run(_graph(tmp_path))
    assert out["status"] == "succeeded" and out["prompt_version"] == new.version


def test_no_mutation_while_the_score_holds(tmp_path: Path) -> None:
    store = PromptStore(tmp_path / "prompts.jsonl")
    cited = DEFAULT_PROMPTS["planner"] + f"\n- {teaching.INSTRUCTION} the figures come from.\n"
    store.use(store.add({"planner": cited}, source="manual"))
    graph = _graph(tmp_path, optimize_window=2)
    for _ in range(4):
        out, events = _run(graph)
        assert out["status"] == "succeeded" and events[0]["event"] == "traced"
    assert (
        _records(tmp_path, "mutation") == []
        and [r["trace"]["score"] for r in _records(tmp_path, "run")] == [1.0] * 4
    )
    assert [v.source for v in store.list()] == ["manual"]


def test_the_reflection_budget_is_never_passed(tmp_path: Path) -> None:
    # A reflection model whose proposals are refused (no placeholders): the window
    # starts again after the attempt, and once full again with the one call allowed
    # spent, every run says so instead of calling again.
    useless = FakeListChatModel(responses=["```\n# Role: planner\nJust plan.\n```"])
    graph = _graph(tmp_path, reflection=useless, optimize_window=2, optimize_max_llm_calls=1)
    seen = [_run(graph)[1][0]["event"] for _ in range(6)]
    assert seen == ["traced", "mutation_refused", "traced"] + ["budget_spent"] * 3
    (attempt,) = _records(tmp_path, "mutation")
    assert attempt["llm_calls"] == 1 and "placeholder" in attempt["reason"]
    # The store only learnt the built-in prompts' window score.
    (stored,) = PromptStore(tmp_path / "prompts.jsonl").list()
    assert stored.source == "default" and stored.scores == {"online_rolling": 0.0}


def test_the_online_node_is_there_only_when_enabled(tmp_path: Path) -> None:
    assert "optimize_online" in _graph(tmp_path).get_graph().nodes
    model, models = teaching.task_models()
    plain = build_aime_graph(model, models=models, prompts=PromptStore(tmp_path / "p.jsonl"))
    assert "optimize_online" not in plain.get_graph().nodes
    with pytest.raises(ValueError, match="prompt store"):
        build_aime_graph(model, models=models, config=AimeConfig(optimize_online=True))
    with pytest.raises(ValueError, match="optimize_components"):
        _graph(tmp_path, optimize_components=("critic",))
    with pytest.raises(ValueError, match="when the graph is built"):
        _graph(tmp_path).invoke({"goal": "x"}, context={"optimize_online": False})


def test_a_mutation_that_did_worse_is_reverted_without_a_call(tmp_path: Path) -> None:
    # OnlineLoop alone, on finished runs' states: succeeded scores 1, failed 0.
    store = PromptStore(tmp_path / "prompts.jsonl")
    worse = DEFAULT_PROMPTS["planner"] + "\n- Plan one task at most.\n"
    reflection = FakeListChatModel(responses=[f"```\n{worse}\n```"])
    loop = OnlineLoop(store, reflection)
    config = AimeConfig(optimize_window=2, optimize_threshold=0.75, optimize_max_llm_calls=5)
    ok, bad = {"status": "succeeded"}, {"status": "failed", "reason": "planner gave up"}

    def run(state: dict[str, Any]) -> dict[str, Any]:
        return loop.after_run(state, config, version=store.current(), thread_id=None)

    assert run(ok)["event"] == "traced"
    mutated = run(bad)  # 0.5 < 0.75 on the built-in prompts
    assert mutated["event"] == "mutated" and store.active() == mutated["version"]
    assert store.get(DEFAULT_VERSION).scores == {"online_rolling": 0.5}

    run(bad)
    reverted = run(bad)  # the mutation scores 0.0 < 0.5: back to its parent, no call
    assert reverted["event"] == "reverted" and reverted["reverted_to"] == DEFAULT_VERSION
    assert store.current() == DEFAULT_VERSION and loop.calls_spent(config) == 1

    # The built-in prompts fail again: the same proposal is refused, not re-activated.
    run(bad)
    refused = run(bad)
    assert refused["event"] == "mutation_refused" and "scored 0.00 online" in refused["reason"]
    assert store.current() == DEFAULT_VERSION and loop.calls_spent(config) == 2


def test_without_the_extra_both_paths_name_it(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["gepa"] = None  # as without pip install 'aimegraph[optimize]'
        import aimegraph
        from aimegraph import AimeConfig, build_aime_graph, optimize
        build_aime_graph("scripted:demo")  # the engine needs no GEPA
        for attempt in (
            lambda: optimize("scripted:demo", [{{"goal": "x"}}], reflection_model="scripted:demo",
                             store={str(tmp_path / "p.jsonl")!r}),
            lambda: build_aime_graph("scripted:demo", prompts={str(tmp_path / "q.jsonl")!r},
                                     config=AimeConfig(optimize_online=True)),
        ):
            try:
                attempt()
            except ImportError as exc:
                print(exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 2 and all("pip install 'aimegraph[optimize]'" in line for line in lines)


def test_a_loop_that_cannot_write_leaves_the_run_alone(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    graph = _graph(tmp_path, optimize_trace_file=blocker / "traces.jsonl")
    out, events = _run(graph)
    assert out["status"] == "rejected" and out["final_answer"]
    (event,) = events
    assert event["event"] == "error" and "not-a-dir" in event["reason"]
