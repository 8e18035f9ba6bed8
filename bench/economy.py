"""LLM-call economy: calls and tokens per completed run, ``replan="on_failure"``
against ``replan="every_step"``, on the same scripted scenarios.

Each scenario runs with and without an injected failure: one task's first
attempt calls ``submit_result`` with status ``failed`` and its second attempt
succeeds (the ``attempts`` form of the actor script), so the engine retries it
(``task_retries=1``). The scripted planner answers later consultations with a
no-op PlanUpdate, so both policies execute the same plan and must produce the
same final answer, which is checked. Usage comes from ``out["usage"]``.
"""

from __future__ import annotations

from typing import Any

from aimegraph import Usage, build_aime_graph
from aimegraph.models.offline.scripted import ScriptedChatModel
from bench.common import (
    WORKING_STEP,
    Headline,
    SectionResult,
    Table,
    TaskDict,
    config,
    dag_shapes,
    fmt_x,
    scenario,
    task,
    thread_config,
    workspace,
)

POLICIES = ("on_failure", "every_step")


def failing_script() -> dict[str, Any]:
    """Attempt 1 reports a failure; attempt 2 works normally."""
    return {
        "attempts": [
            [
                {
                    "tool": "submit_result",
                    "args": {"status": "failed", "summary": "The source was unavailable."},
                }
            ],
            [WORKING_STEP],
        ]
    }


def scenarios(quick: bool) -> dict[str, list[TaskDict]]:
    shapes: dict[str, list[TaskDict]] = {
        "fan-in 3+1": [task("t1"), task("t2"), task("t3"), task("t4", "t1", "t2", "t3")],
        "chain of 4": [task("t1"), task("t2", "t1"), task("t3", "t2"), task("t4", "t3")],
        "wide-then-deep 4+4": dag_shapes()["wide-then-deep 4+4"],
    }
    return dict(list(shapes.items())[:1]) if quick else shapes


def run_once(tasks: list[TaskDict], policy: str, fail: str | None, ws: Any) -> tuple[Usage, str]:
    """One run; returns its usage and final answer (and checks that it succeeded)."""
    data = scenario(
        tasks,
        noop_replans=True,
        actor_steps=[WORKING_STEP],
        actors={fail: failing_script()} if fail else None,
    )
    graph = build_aime_graph(
        ScriptedChatModel.from_dict(data), config=config(ws, replan=policy, max_steps=1000)
    )
    out = graph.invoke({"goal": data["goal"]}, thread_config())
    assert out["status"] == "succeeded", (policy, fail, out.get("reason"))
    return out["usage"], out["final_answer"]


def run(quick: bool) -> SectionResult:
    table = Table(
        "3. LLM-call economy: replan='on_failure' vs 'every_step' (per completed run)",
        [
            "scenario",
            "injected failure",
            "LLM calls on_failure / every_step",
            "calls ratio",
            "tokens on_failure / every_step",
            "tokens ratio",
            "planner calls",
            "same final answer",
        ],
    )
    metrics: dict[str, float] = {}
    with workspace() as ws:
        for name, tasks in scenarios(quick).items():
            for fail in (None, tasks[1]["id"]):
                usage: dict[str, Usage] = {}
                answers: dict[str, str] = {}
                for policy in POLICIES:
                    usage[policy], answers[policy] = run_once(tasks, policy, fail, ws)
                lazy, eager = usage["on_failure"], usage["every_step"]
                same = answers["on_failure"] == answers["every_step"]
                planner = [usage[p].by_role.get("planner") for p in POLICIES]
                table.add(
                    name,
                    f"{fail}: fails once" if fail else "none",
                    f"{lazy.llm_calls} / {eager.llm_calls}",
                    fmt_x(eager.llm_calls / lazy.llm_calls),
                    f"{lazy.total_tokens:,} / {eager.total_tokens:,}",
                    fmt_x(eager.total_tokens / lazy.total_tokens),
                    " / ".join(str(p.llm_calls if p else 0) for p in planner),
                    "yes" if same else "NO",
                )
                key = f"{name.split()[0]}.{'fail' if fail else 'ok'}"
                metrics |= {
                    f"{key}.calls_on_failure": lazy.llm_calls,
                    f"{key}.calls_every_step": eager.llm_calls,
                    f"{key}.tokens_on_failure": lazy.total_tokens,
                    f"{key}.tokens_every_step": eager.total_tokens,
                    f"{key}.same_answer": float(same),
                }
    table.notes += [
        "ratio = every_step / on_failure. Tokens are input + output as reported by the "
        "scripted model (about 4 characters per token), so they track prompt sizes.",
        "Each task takes 2 actor calls (update_progress, submit_result); a failing task's "
        "first attempt takes 1 (submit_result with status failed). verify='final' (one "
        "verifier call), task_retries=1.",
        "same final answer: the reporter's final answer is byte-identical under both policies.",
    ]
    keys = {k.rsplit(".", 1)[0] for k in metrics}
    calls = [metrics[f"{k}.calls_every_step"] / metrics[f"{k}.calls_on_failure"] for k in keys]
    tokens = [metrics[f"{k}.tokens_every_step"] / metrics[f"{k}.tokens_on_failure"] for k in keys]
    same = all(metrics[f"{k}.same_answer"] == 1.0 for k in keys)
    headline = Headline(
        f"LLM-call economy: {len(keys) // 2} DAGs, each with and without an injected failure",
        "`replan='every_step'` (the AIME loop)",
        f"`on_failure` needs {min(calls):.2f}-{max(calls):.2f}x fewer calls and "
        f"{min(tokens):.2f}-{max(tokens):.2f}x fewer tokens (input + output); "
        + ("byte-identical answers" if same else "answers DIFFER"),
    )
    return SectionResult("economy", [table], metrics, headlines=[headline])
