"""The optimiser and the online loop with a real model: the bundled Gemma 3 270M behind
the local OpenAI-compatible server (the fixtures of tests/integration/test_real_llm.py).

Robustness only, as there: whatever the small base model writes, as the workflow's
reporter and verifier and as the reflection model, the optimisation must end with a
well-formed result inside its budget, and the online loop's mutation must end as data
(a new stored version, or a refused proposal with its reason). A scripted planner and
actor get every run to the real model quickly.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from aimegraph import PromptStore, build_aime_graph, optimize
from aimegraph.models import ScriptedChatModel
from tests.integration.test_real_llm import (  # noqa: F401 - fixtures used by name
    assert_well_formed,
    openai_env,
    server_url,
    small_budgets,
)
from tests.markers import LOCAL_LLM

pytestmark = [
    *LOCAL_LLM,
    pytest.mark.skipif(importlib.util.find_spec("gepa") is None, reason="needs [optimize]"),
]

SCRIPTED = {
    "planner": [
        {"rationale": "one step", "tasks": [{"id": "t1", "title": "Multiply"}], "drop": []}
    ],
    "actors": {
        "t1": [
            {"tool": "submit_result", "args": {"status": "completed", "summary": "17 * 23 = 391"}}
        ]
    },
}
GOALS = [{"goal": "What is 17 times 23? Reply with the number.", "answer": "391"}]


def _models() -> dict[str, Any]:
    scripted = ScriptedChatModel.from_dict(SCRIPTED)
    return {"planner": scripted, "actor": scripted}


def test_optimize_with_the_real_model_ends_within_its_budget(
    openai_env: str,  # noqa: F811
    workspace: Path,
    tmp_path: Path,
) -> None:
    cfg = small_budgets(workspace, max_llm_calls=8, max_replans=0)
    result = optimize(
        openai_env,
        GOALS,
        reflection_model=openai_env,
        metric="contains",
        components=("reporter",),
        max_metric_calls=4,
        minibatch_size=1,
        config=cfg,
        models=_models(),
        store=PromptStore(tmp_path / "prompts.jsonl"),
        run_dir=tmp_path / "run",
    )
    print(result.score_before, result.score_after, result.metric_calls, result.history)
    assert 1 <= result.metric_calls <= 4
    assert 0.0 <= result.score_before <= result.score_after <= 1.0
    assert result.history[0]["iteration"] == 0
    assert set(result.best_prompts) == {"reporter"}
    assert (result.version is None) == (result.score_after == result.score_before)


def test_the_online_loop_with_the_real_model_ends_as_data(
    openai_env: str,  # noqa: F811
    workspace: Path,
    tmp_path: Path,
) -> None:
    cfg = small_budgets(
        workspace,
        max_llm_calls=8,
        max_replans=0,
        optimize_online=True,
        optimize_window=1,
        optimize_threshold=1.0,  # any run below a perfect score triggers
        optimize_components=("reporter",),
        optimize_max_llm_calls=1,
    )
    store = PromptStore(tmp_path / "prompts.jsonl")
    graph = build_aime_graph(
        openai_env, models=_models() | {"reflection": openai_env}, config=cfg, prompts=store
    )
    events = []
    out: dict[str, Any] = {}
    for mode, chunk in graph.stream({"goal": GOALS[0]["goal"]}, stream_mode=["custom", "values"]):
        if mode == "custom" and chunk.get("type") == "optimizer":
            events.append(chunk)
        elif mode == "values":
            out = chunk
    print(events)
    assert_well_formed(out, cfg)
    (event,) = events
    if event["score"] < 1.0:
        assert event["event"] in ("mutated", "mutation_refused")
        assert event["llm_calls"] == 1
        if event["event"] == "mutated":
            assert store.active() == event["version"]
        else:
            assert event["reason"] and store.active() is None
    else:
        assert event["event"] == "traced"
