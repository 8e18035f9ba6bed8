"""The local-model bench's count of unusable replies (``bench.local_runs``), on the
scripted model: it counts the replies the engine asked again or gave up on, in the
engine's own words, and never what a model wrote in a summary of its own."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.scripted import plan, spec, submit

from aimegraph.models.offline.scripted import ScriptedChatModel
from aimegraph.prompts.actor import STEP_CAP_SUMMARY

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder of the repo, not installed
    sys.path.insert(0, str(ROOT))

from bench.local_runs import GAVE_UP, Outcome, run_goal  # noqa: E402

SAYS_IT_FAILED = "I could not parse the numbers: not valid JSON, no JSON at all."


def run(
    tmp_path: Path, actor_replies: list[dict[str, Any]], planner_first: Sequence[Any] = ()
) -> Outcome:
    model = ScriptedChatModel.from_dict(
        {
            "planner": [*planner_first, plan(spec("a"))],
            "actors": {"a": actor_replies},
            "reporter": [{"text": "The answer is 391."}],
        }
    )
    return run_goal(model, "What is 17 times 23?", "391", tmp_path)


def test_each_reply_asked_again_or_given_up_on_counts_once(tmp_path: Path) -> None:
    # Each attempt: an empty reply asked again twice, then the last the step cap allows.
    outcome = run(tmp_path, [{"text": ""}])
    assert outcome.status != "succeeded"
    assert outcome.unusable == ["empty reply"] * 6  # two attempts (a replan)
    assert outcome.looped == []


def test_a_plan_asked_again_counts(tmp_path: Path) -> None:
    outcome = run(tmp_path, [submit("391")], planner_first=[{"text": "Sure, I will plan."}])
    assert outcome.status == "succeeded"
    assert len(outcome.unusable) == 1 and outcome.looped == []


def test_a_summary_the_model_wrote_does_not_count(tmp_path: Path) -> None:
    outcome = run(tmp_path, [submit(SAYS_IT_FAILED)])
    assert outcome.status == "succeeded" and outcome.correct
    assert outcome.unusable == [] and outcome.looped == []


def test_a_run_waiting_on_a_human_is_paused(tmp_path: Path) -> None:
    outcome = run(tmp_path, [{"tool": "ask_human", "args": {"question": "Which numbers?"}}])
    assert outcome.status == "paused" and outcome.unusable == []


def test_the_engines_last_word_on_an_unusable_reply_is_read_from_the_step_cap_summary() -> None:
    why = "max_actor_steps=3; the model's last reply could not be used: the reply repeats itself"
    summary = STEP_CAP_SUMMARY.format(steps=3, why=why, transcript="> calculator({})")
    found = GAVE_UP.match(summary)
    assert found is not None and found["problem"] == "the reply repeats itself"
    assert GAVE_UP.match(f"{SAYS_IT_FAILED} {summary}") is None
