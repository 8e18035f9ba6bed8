"""aimegraph.optimize on the scripted citation task (tests/optimizer/teaching.py).

The planner plans to cite the data file only when its prompt says ALWAYS CITE THE
FILE; the reviewer's issue on uncited answers carries that instruction; the
scripted reflection model turns reviewer issues into rules. GEPA must find the
rule, the store must keep it, and a new process must run with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from aimegraph import build_aime_graph, optimize
from aimegraph.models.offline.teaching import FeedbackReflectionModel
from aimegraph.optimizer.store import PromptStore
from aimegraph.prompts import DEFAULT_PROMPTS
from aimegraph.prompts.source import DEFAULT_VERSION
from tests.optimizer import teaching

pytest.importorskip("gepa")

ROOT = Path(__file__).resolve().parents[2]
TRAIN = teaching.examples(teaching.GOALS[:3])
VAL = teaching.examples(teaching.GOALS[3:])


def _optimize(tmp_path: Path, **overrides):
    model, models = teaching.task_models()
    kwargs = {
        "valset": VAL,
        "reflection_model": FeedbackReflectionModel(),
        "max_metric_calls": 20,
        "config": teaching.config(tmp_path / "ws"),
        "models": models,
        "store": PromptStore(tmp_path / "prompts.jsonl"),
    } | overrides
    return optimize(model, TRAIN, **kwargs)


def test_optimiser_finds_the_instruction_persists_it_and_a_new_process_uses_it(
    tmp_path: Path,
) -> None:
    result = _optimize(tmp_path)

    assert (result.score_before, result.score_after) == (0.0, 1.0)
    assert teaching.INSTRUCTION in result.best_prompts["planner"]
    assert result.best_prompts["planner"].startswith("# Role: planner")
    assert 0 < result.metric_calls <= 20
    assert result.usage.llm_calls > 0 and result.reflection_usage.llm_calls >= 1
    # History: iteration 0 is the starting prompts; the best score never falls.
    assert result.history[0] == {
        "iteration": 0,
        "metric_calls": len(VAL),
        "best_score": 0.0,
        "accepted": False,
        "candidates": 1,
    }
    bests = [h["best_score"] for h in result.history]
    assert bests == sorted(bests) and bests[-1] == 1.0
    assert any(h["accepted"] for h in result.history)

    store = PromptStore(tmp_path / "prompts.jsonl")
    assert result.version is not None and store.active() == result.version
    stored = store.get(result.version)
    assert (stored.source, stored.parent) == ("gepa", DEFAULT_VERSION)
    assert stored.scores["val"] == 1.0 and stored.scores["val_before"] == 0.0
    assert stored.texts["planner"] == result.best_prompts["planner"]
    assert stored.texts["verifier"] == DEFAULT_PROMPTS["verifier"]

    # A new process builds the graph over the store and runs with the winner.
    script = textwrap.dedent(
        f"""
        import json
        from pathlib import Path
        from aimegraph import build_aime_graph
        from aimegraph.optimizer.store import PromptStore
        from tests.optimizer import teaching
        model, models = teaching.task_models()
        graph = build_aime_graph(model, models=models, config=teaching.config(Path({str(tmp_path / "ws2")!r})),
                                 prompts=PromptStore({str(tmp_path / "prompts.jsonl")!r}))
        out = graph.invoke({{"goal": "And the Q3 revenue?"}})
        print(json.dumps({{"status": out["status"], "answer": out["final_answer"]}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["status"] == "succeeded" and teaching.SOURCE in seen["answer"]

    # The built-in prompts still fail the same goal: the improvement is the prompt's.
    model, models = teaching.task_models()
    plain = build_aime_graph(model, models=models, config=teaching.config(tmp_path / "ws3"))
    assert plain.invoke({"goal": "And the Q3 revenue?"})["status"] == "rejected"


@pytest.mark.parametrize("metric", ["contains", "callable"])
def test_user_metrics(tmp_path: Path, metric: str) -> None:
    seen: list[str] = []

    def cites(example, state):
        seen.append(example["goal"])
        ok = example["answer"] in (state.get("final_answer") or "")
        return (1.0, "cites the file") if ok else (0.0, "does not cite the file")

    result = _optimize(tmp_path, metric=cites if metric == "callable" else metric)
    assert (result.score_before, result.score_after) == (0.0, 1.0)
    if metric == "callable":
        assert set(seen) <= {e["goal"] for e in TRAIN + VAL} and len(seen) == result.metric_calls


def test_exact_metric_scores_the_whole_answer(tmp_path: Path) -> None:
    # No run's answer is exactly the file name: nothing to learn, nothing saved.
    result = _optimize(tmp_path, metric="exact", max_metric_calls=12)
    assert result.score_after == result.score_before == 0.0
    assert result.version is None and result.best_prompts["planner"] == DEFAULT_PROMPTS["planner"]
    assert PromptStore(tmp_path / "prompts.jsonl").active() is None


def test_budget_is_never_passed_and_a_run_resumes_from_its_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    # One iteration costs at most 2 minibatches of 3 and the 2 validation runs: 8 more
    # than the 2 starting runs, which 9 calls cannot pay for.
    first = _optimize(tmp_path, max_metric_calls=9, run_dir=run_dir)
    assert first.metric_calls == 2 and first.score_after == 0.0 and first.version is None
    assert len(first.history) == 1

    second = _optimize(tmp_path, max_metric_calls=20, run_dir=run_dir)
    assert second.score_after == 1.0 and second.metric_calls <= 20
    # Only the new metric calls ran (4 LLM calls each): the starting prompts'
    # validation scores come from the saved state, not from running them again.
    assert second.usage.llm_calls == 4 * (second.metric_calls - first.metric_calls)
    # The history goes on from the first call's (iteration 0 is not made twice).
    assert [h["iteration"] for h in second.history][:2] == [0, 1]
    assert sum(h["iteration"] == 0 for h in second.history) == 1
    assert (run_dir / "history.jsonl").is_file() and (run_dir / "gepa_state.bin").is_file()


def test_too_small_a_budget_and_bad_examples_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="validation example"):
        _optimize(tmp_path, max_metric_calls=1)
    with pytest.raises(ValueError, match="goal"):
        _optimize(tmp_path, valset=[{"question": "?"}])
    with pytest.raises(ValueError, match="components"):
        _optimize(tmp_path, components=("planner", "critic"))
    with pytest.raises(ValueError, match="unknown metric"):
        _optimize(tmp_path, metric="fuzzy")
    # A module or attribute that is not there is the same usage error, not an ImportError.
    with pytest.raises(ValueError, match="cannot import metric 'no_such_module:score'"):
        _optimize(tmp_path, metric="no_such_module:score")
    with pytest.raises(ValueError, match="cannot import metric 'json:no_such_score'"):
        _optimize(tmp_path, metric="json:no_such_score")


def test_a_proposal_that_breaks_a_template_costs_no_run(tmp_path: Path) -> None:
    # This reflection model drops the planner's {bundles} and {max_tasks}.
    broken = FakeListChatModel(responses=["```\n# Role: planner\nPlan.\n```"])
    result = _optimize(
        tmp_path, reflection_model=broken, components=("planner",), max_metric_calls=20
    )
    assert result.score_after == 0.0 and result.version is None
    # Each iteration: 3 minibatch runs for the parent, none for the refused child.
    iterations = len(result.history) - 1
    assert iterations >= 1 and result.metric_calls == len(VAL) + 3 * iterations


def test_examples_run_in_parallel(tmp_path: Path) -> None:
    result = _optimize(tmp_path, max_workers=3)
    assert (result.score_before, result.score_after) == (0.0, 1.0)
    assert result.usage.llm_calls == 4 * result.metric_calls
