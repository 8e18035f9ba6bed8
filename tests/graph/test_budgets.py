"""Run budgets (max_llm_calls, max_tokens, max_cost_usd) and usage accounting per role.

The scripted model reports ``usage_metadata`` (about four characters a token) and the
model name ``scripted:<scenario>`` (``scripted:inline`` for inline scenarios), so token
and cost budgets are deterministic.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from tests.conftest import GraphFactory
from tests.scripted import plan, spec, submit

from aimegraph import AimeConfig
from aimegraph.state import Usage

PRICE = "scripted:inline"
FINAL = ("succeeded", "failed", "budget_exhausted", "rejected")


CHAIN = {
    "planner": [plan(spec("a"), spec("b", "a"), spec("c", "b"))],
    "actors": {"a": [submit("a done")], "b": [submit("b done")], "c": [submit("c done")]},
}


def by_role_sums_to_total(usage: Usage) -> bool:
    roles = usage.by_role.values()
    return (
        sum(r.llm_calls for r in roles) == usage.llm_calls
        and sum(r.input_tokens for r in roles) == usage.input_tokens
        and sum(r.output_tokens for r in roles) == usage.output_tokens
    )


# --------------------------------------------------------------------------- accounting


def test_usage_is_counted_per_role(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [plan(spec("a", tool_bundles=["compute"]), spec("b"))],
            "actors": {
                "a": [{"tool": "calculator", "args": {"expression": "2+2"}}, submit("4")],
                "b": [submit("b")],
            },
        }
    )
    out = graph.invoke({"goal": "g"})
    usage = out["usage"]
    assert out["status"] == "succeeded"
    calls = {role: used.llm_calls for role, used in usage.by_role.items()}
    assert calls == {"planner": 1, "actor": 3, "reporter": 1, "verifier": 1}
    assert usage.llm_calls == 6 and usage.tool_calls == 1  # the calculator; submits are reports
    assert all(r.input_tokens > 0 and r.output_tokens > 0 for r in usage.by_role.values())
    assert by_role_sums_to_total(usage)
    assert usage.cost_usd == 0.0  # no price table


def test_prices_turn_tokens_into_cost(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(CHAIN, prices={PRICE: (2.0, 8.0), "other-model": (100.0, 100.0)})
    usage = graph.invoke({"goal": "chain"})["usage"]
    expected = (usage.input_tokens * 2.0 + usage.output_tokens * 8.0) / 1e6
    assert usage.cost_usd == pytest.approx(expected) and usage.cost_usd > 0


def test_usage_adds_up_across_replans(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [plan(spec("t1")), plan(spec("t2"))],
            "verifier": [
                {"passed": False, "reasoning": "no", "issues": ["more"]},
                {"passed": True, "reasoning": "ok", "issues": []},
            ],
        }
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded" and out["replans"] == 1
    calls = {role: used.llm_calls for role, used in out["usage"].by_role.items()}
    assert calls == {"planner": 2, "actor": 2, "reporter": 2, "verifier": 2}


# --------------------------------------------------------------------------- max_llm_calls


def test_parallel_actors_share_what_is_left_of_the_call_budget(
    scripted_graph: GraphFactory,
) -> None:
    loop = [{"tool": "calculator", "args": {"expression": f"{i}+1"}} for i in range(5)]
    graph, _ = scripted_graph(
        {
            "planner": [plan(*(spec(t, tool_bundles=["compute"]) for t in ("a", "b", "c")))],
            "actors": {"a": loop, "b": loop, "c": loop},
        },
        max_llm_calls=7,
        max_parallel=3,
        task_retries=0,
    )
    out = graph.invoke({"goal": "three at once"})
    assert out["status"] == "budget_exhausted" and "max_llm_calls (7)" in out["reason"]
    # planner 1, then (7 - 1) // 3 = 2 steps per actor: exactly the budget.
    assert out["usage"].llm_calls == 7 and out["usage"].by_role["actor"].llm_calls == 6
    for task in out["tasks"].values():
        assert task.status == "failed"
        assert "share of the LLM-call budget" in task.result.summary
    assert (
        isinstance(out["final_answer"], str) and "stopped before finishing" in out["final_answer"]
    )


@pytest.mark.parametrize("scheduler", ["eager", "batch"])
def test_no_more_actors_start_than_calls_are_left(
    scripted_graph: GraphFactory, scheduler: str
) -> None:
    # Each actor takes one call at least: a fourth one started with two calls left
    # went past the budget (a small model that plans many tasks at once).
    ids = ("a", "b", "c", "d")
    graph, _ = scripted_graph(
        {"planner": [plan(*(spec(t) for t in ids))], "actors": {t: [submit(t)] for t in ids}},
        max_llm_calls=3,
        max_parallel=4,
        scheduler=scheduler,
    )
    out = graph.invoke({"goal": "four at once"})
    assert out["status"] == "budget_exhausted" and out["usage"].llm_calls == 3
    assert sorted(t.id for t in out["tasks"].values() if t.status == "completed") == ["a", "b"]


def test_call_budget_from_the_run_context(scripted_graph: GraphFactory) -> None:
    graph, model = scripted_graph(CHAIN)
    out = graph.invoke({"goal": "chain"}, context={"max_llm_calls": 2})
    assert out["status"] == "budget_exhausted" and "max_llm_calls (2)" in out["reason"]
    assert out["usage"].llm_calls == 2
    assert [t.status for t in out["tasks"].values()] == ["completed", "pending", "pending"]

    model.reset()
    assert graph.invoke({"goal": "chain"})["status"] == "succeeded"  # built config: no budget


# --------------------------------------------------------------------------- max_tokens


def _planner_tokens(scripted_graph: GraphFactory) -> int:
    graph, _ = scripted_graph(CHAIN)
    planner = graph.invoke({"goal": "chain"})["usage"].by_role["planner"]
    return planner.input_tokens + planner.output_tokens


def test_token_budget_stops_the_run(scripted_graph: GraphFactory) -> None:
    budget = _planner_tokens(scripted_graph) + 1  # room for the plan and one more call
    graph, model = scripted_graph(CHAIN, max_tokens=budget)
    out = graph.invoke({"goal": "chain"})
    assert out["status"] == "budget_exhausted"
    assert f"max_tokens ({budget}) reached" in out["reason"]
    assert out["usage"].total_tokens >= budget
    assert out["usage"].llm_calls == 2  # planner, then task a, then the check stops the run
    assert [t.status for t in out["tasks"].values()] == ["completed", "pending", "pending"]
    assert model.prompts("reporter") == [] and model.prompts("verifier") == []


def test_spent_token_budget_before_any_task(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(CHAIN, max_tokens=1)
    out = graph.invoke({"goal": "chain"})
    assert out["status"] == "budget_exhausted" and out["usage"].llm_calls == 1
    assert all(t.status == "pending" for t in out["tasks"].values())
    assert "a: Task a" in out["final_answer"]  # the partial report lists the plan


# --------------------------------------------------------------------------- max_cost_usd


def test_cost_budget_stops_the_run(scripted_graph: GraphFactory) -> None:
    # One dollar per token in and out: the cost is the token count.
    prices = {PRICE: (1e6, 1e6)}
    budget = _planner_tokens(scripted_graph) + 0.5
    graph, _ = scripted_graph(CHAIN, prices=prices, max_cost_usd=budget)
    out = graph.invoke({"goal": "chain"})
    assert out["status"] == "budget_exhausted" and "max_cost_usd" in out["reason"]
    usage = out["usage"]
    assert usage.cost_usd == pytest.approx(usage.total_tokens) and usage.cost_usd >= budget
    assert usage.llm_calls == 2


def test_cost_of_an_unpriced_model_is_zero_and_never_stops(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(CHAIN, prices={"some-other-model": (1e6, 1e6)}, max_cost_usd=0.01)
    out = graph.invoke({"goal": "chain"})
    assert out["status"] == "succeeded" and out["usage"].cost_usd == 0.0


def test_cost_budget_from_the_run_context(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(CHAIN)
    out = graph.invoke(
        {"goal": "chain"}, context={"prices": {PRICE: (1e6, 1e6)}, "max_cost_usd": 1.0}
    )
    assert out["status"] == "budget_exhausted" and out["usage"].llm_calls == 1


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_cost_usd": 1.0}, "max_cost_usd needs a price table"),
        ({"max_cost_usd": 0, "prices": {"m": (1.0, 1.0)}}, "greater than 0"),
        ({"max_llm_calls": 0}, "greater than or equal to 1"),
        ({"max_tokens": 0}, "greater than or equal to 1"),
        ({"max_llm_calls": 5, "budget": 3}, "unknown setting 'budget'"),
    ],
)
def test_budget_validation(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        AimeConfig(**fields)


def test_budget_validation_applies_to_run_overrides() -> None:
    with pytest.raises(ValidationError, match="max_cost_usd needs a price table"):
        AimeConfig().override({"max_cost_usd": 2.0})
    priced = AimeConfig(prices={"m": (1.0, 2.0)}).override({"max_cost_usd": 2.0})
    assert priced.max_cost_usd == 2.0


def test_budget_spent_names_the_budget() -> None:
    cfg = AimeConfig(max_llm_calls=3, max_tokens=100, max_cost_usd=0.5, prices={"m": (1, 1)})
    assert cfg.budget_spent(Usage(llm_calls=2, input_tokens=50), steps=0) is None
    assert "max_llm_calls (3)" in (cfg.budget_spent(Usage(llm_calls=3), steps=0) or "")
    assert "max_tokens (100)" in (
        cfg.budget_spent(Usage(input_tokens=60, output_tokens=40), steps=0) or ""
    )
    assert "max_cost_usd (0.5)" in (cfg.budget_spent(Usage(cost_usd=0.5), steps=0) or "")
    assert "max_steps" in (cfg.budget_spent(Usage(), steps=cfg.max_steps) or "")


# --------------------------------------------------------------------------- planning


def test_planner_repairs_respect_the_call_budget(scripted_graph: GraphFactory) -> None:
    # Every draft is a cycle; 3 repairs would make 4 calls, the budget allows 2.
    graph, model = scripted_graph(
        {"planner": [plan(spec("a", "b"), spec("b", "a"))]}, max_llm_calls=2, max_plan_repairs=3
    )
    out = graph.invoke({"goal": "g"})
    assert out["usage"].llm_calls == 2 and len(model.prompts("planner")) == 2
    assert out["status"] == "budget_exhausted"
    assert "max_llm_calls (2)" in out["reason"] and "while planning" in out["reason"]
    assert model.prompts("actor") == []


def test_planner_re_asks_stop_at_the_call_budget(scripted_graph: GraphFactory) -> None:
    # Replies that do not parse are re-asked (max_output_retries) within one draft:
    # the re-asks stop where the budget does.
    graph, model = scripted_graph(
        {"planner": [{"rationale": "bad", "tasks": "oops"}]},
        max_llm_calls=2,
        max_output_retries=5,
        max_plan_repairs=3,
    )
    out = graph.invoke({"goal": "g"})
    assert out["usage"].llm_calls == 2 and len(model.prompts("planner")) == 2
    assert out["status"] == "budget_exhausted" and "while planning" in out["reason"]


def test_a_replan_counts_the_calls_before_it(scripted_graph: GraphFactory) -> None:
    # planner 1 + actor 1 (fails) = 2; the replan's drafts are cycles: one fits in 3.
    graph, model = scripted_graph(
        {
            "planner": [plan(spec("a")), plan(spec("x", "y"), spec("y", "x"))],
            "actors": {
                "a": [{"tool": "submit_result", "args": {"status": "failed", "summary": "no"}}]
            },
        },
        max_llm_calls=3,
        max_plan_repairs=3,
        task_retries=0,
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "budget_exhausted" and "while planning" in out["reason"]
    assert out["usage"].llm_calls == 3 and len(model.prompts("planner")) == 2


def test_no_verifier_call_once_the_reporter_spent_the_budget(scripted_graph: GraphFactory) -> None:
    # planner 1 + actor 1 = 2 < 3: the reporter runs, makes it 3 and ends the run unverified.
    graph, model = scripted_graph({"planner": [plan(spec("a"))]}, max_llm_calls=3)
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "budget_exhausted"
    assert "before the answer could be verified" in out["reason"]
    assert model.prompts("verifier") == [] and out["usage"].llm_calls == 3
    assert "Task a: done" in out["final_answer"]


def test_no_replan_after_a_rejection_once_the_budget_is_spent(
    scripted_graph: GraphFactory,
) -> None:
    # planner 1 + actor 1 + reporter 1 + verifier 1 = 4: the rejection would replan, but
    # the budget is spent, so the run stops instead.
    graph, model = scripted_graph(
        {
            "planner": [plan(spec("a")), plan(spec("b"))],
            "verifier": [{"passed": False, "reasoning": "no", "issues": ["more"]}],
        },
        max_llm_calls=4,
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "budget_exhausted" and "max_llm_calls (4)" in out["reason"]
    assert len(model.prompts("planner")) == 1 and out["usage"].llm_calls == 4
