"""Teams of agents: broadcast voting against the binomial expectation, and what each
team mode costs on the same task.

* Voting: a broadcast team of n copies of one unit, each member right with
  probability p (a scripted noisy model: every member turn submits the right answer
  or the one common wrong answer, by a seeded draw per trial and turn). With one
  wrong answer and n odd, the strict-majority vote is right exactly when more than
  n/2 members are, so its accuracy should match P(Binomial(n, p) > n/2). Cost is
  the LLM calls and tokens per task (usage counts every member's call).
* Modes: one task, run by the executor with agent units as a single actor and as
  a team in each mode (3 members), on a scripted model with a fixed latency per
  call (a remote model): LLM calls, tokens and wall time. Members' turns each make
  one calculator call, then submit.
"""

from __future__ import annotations

import math
import random
import re
import statistics
import time
from typing import Any

from langchain_core.messages import BaseMessage

from aimegraph import AgentUnit, Task, TeamSpec
from aimegraph.graphs import build_team_executor, build_team_graph
from aimegraph.models.offline.scripted import Step
from bench.chat_models import LatencyChatModel
from bench.common import Headline, SectionResult, Table, config, fmt_x, workspace

RIGHT, WRONG = "42", "41"
MEMBER = re.compile(r'<member name="([^"]+)" turn="(\d+)"')  # the team's brief
SOLVER = AgentUnit(name="solver", description="Solves arithmetic questions.")
UNITS = [
    AgentUnit(name="writer", description="Writes reports.", tool_bundles=("compute",)),
    AgentUnit(name="analyst", description="Computes sums.", tool_bundles=("compute",)),
    AgentUnit(name="reviewer", description="Checks figures.", tool_bundles=("compute",)),
]


class NoisyChatModel(LatencyChatModel):
    """A member's turn submits the right answer with probability ``p``: the draw is
    seeded by the trial (in the goal) and the member's turn, so runs repeat."""

    p: float = 0.7
    seed: int = 0

    def _next_step(self, messages: list[BaseMessage]) -> Step:
        prompt = "\n".join(str(m.content) for m in messages)
        member = MEMBER.search(prompt)
        if member is None:
            return super()._next_step(messages)
        trial = prompt.split("Trial ", 1)[1].split(":", 1)[0]
        draw = random.Random(f"{self.seed}:{trial}:{member.group(2)}").random()
        answer = RIGHT if draw < self.p else WRONG
        args = {
            "status": "completed",
            "summary": f"It is {answer}.",
            "artifacts": {"answer": answer},
        }
        return {"tool": "submit_result", "args": args}


def majority_expectation(n: int, p: float) -> float:
    """P(Binomial(n, p) > n/2): a strict majority of n members is right."""
    return sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n // 2 + 1, n + 1))


def voting(quick: bool) -> tuple[Table, dict[str, float]]:
    trials = 20 if quick else 300
    sizes = (1, 3, 5)
    probabilities = (0.7,) if quick else (0.6, 0.7, 0.8)
    table = Table(
        f"Broadcast voting: {trials} tasks per row, each member right with probability p",
        [
            "p",
            "members",
            "accuracy",
            "binomial expectation",
            "LLM calls / task",
            "tokens / task",
            "ms / task",
            "calls vs 1 member",
        ],
        notes=[
            "One common wrong answer, so a strict majority of n (odd) members is right exactly "
            "when more than n/2 are: the measured accuracy should match the expectation within "
            "its standard error (about 0.03 at 300 tasks). No merge call is ever needed.",
            "Scripted noisy model, no latency: ms / task is the engine's own cost per task "
            "(n member subgraphs, the vote).",
        ],
    )
    metrics: dict[str, float] = {}
    with workspace() as ws:
        for p in probabilities:
            model = NoisyChatModel.from_dict({"planner": [{"tasks": []}]}, latency_s=0.0)
            model.p = p
            graph = build_team_graph("broadcast", model, agents=[SOLVER], config=config(ws))
            base_calls = 0.0
            for n in sizes:
                task = Task(
                    id="t1",
                    title="Answer the question",
                    team=TeamSpec(mode="broadcast", members=("solver",) * n),
                )
                right, calls, tokens = 0, 0, 0
                start = time.perf_counter()
                for trial in range(trials):
                    goal = f"Trial {trial}: what is 6 x 7?"
                    out = graph.invoke({"goal": goal, "task": task, "dependency_results": {}})
                    result = out["tasks"]["t1"].result
                    right += result.artifacts.get("answer") == RIGHT
                    calls += out["usage"].llm_calls
                    tokens += out["usage"].total_tokens
                elapsed = time.perf_counter() - start
                accuracy = right / trials
                per_task = calls / trials
                base_calls = base_calls or per_task
                table.add(
                    f"{p:.1f}",
                    n,
                    f"{accuracy:.3f}",
                    f"{majority_expectation(n, p):.3f}",
                    f"{per_task:.1f}",
                    f"{tokens / trials:.0f}",
                    f"{1000 * elapsed / trials:.1f}",
                    fmt_x(per_task / base_calls),
                )
                key = f"p{int(p * 10)}_n{n}"
                metrics[f"{key}_accuracy"] = accuracy
                metrics[f"{key}_expected"] = majority_expectation(n, p)
                metrics[f"{key}_calls_per_task"] = per_task
                metrics[f"{key}_ms_per_task"] = 1000 * elapsed / trials
    return table, metrics


def _work(who: str) -> list[dict[str, Any]]:
    return [
        {"tool": "calculator", "args": {"expression": "48000 + 213"}},
        {"tool": "submit_result", "args": {"status": "completed", "summary": f"{who}: 48213",
                                           "artifacts": {"answer": "48213", "stance": "agree"}}},
    ]  # fmt: skip


def modes(quick: bool) -> tuple[Table, dict[str, float]]:
    latency = 0.01 if quick else 0.05
    repeats = 1 if quick else 5
    members = ("writer", "analyst", "reviewer")
    joint_first = [
        {"tool": "calculator", "args": {"expression": "48000 + 213"}},
        {"tool": "submit_result", "args": {"status": "completed", "summary": "48213",
                                           "artifacts": {"stance": "propose"}}},
    ]  # fmt: skip
    scenario: dict[str, Any] = {
        "planner": [{"tasks": []}],
        "actors": {"t1": _work("single"), **{f"t1/{m}": _work(m) for m in members}},
        "team_leads": {
            "t1": [{"parts": [{"member": "analyst", "instruction": "Sum."},
                              {"member": "reviewer", "instruction": "Check."}]}]
        },
    }  # fmt: skip
    runs: dict[str, Task] = {
        "single actor": Task(id="t1", title="Total the ledger", agent="analyst"),
        **{
            mode: Task(id="t1", title="Total the ledger", team=TeamSpec(mode=mode, members=members))
            for mode in ("sequential", "joint", "hierarchical", "broadcast")
        },
    }
    table = Table(
        f"Team modes on one task ({latency * 1000:.0f} ms per model call, median of {repeats})",
        [
            "mode",
            "members",
            "LLM calls",
            "tokens",
            "prompt tokens sent",
            "wall time (s)",
            "calls vs single",
            "time vs single",
        ],
        notes=[
            "Each member turn: a calculator call, then submit_result. Joint: the first member "
            "proposes, the next two agree (3 turns). Hierarchical: the lead's split (one "
            "structured call), two parts in parallel, the lead's integration turn. Broadcast: "
            "three turns in parallel and a vote (no model call).",
            "Sequential and joint turns wait for each other; broadcast and the hierarchical "
            "parts overlap, so their wall time grows less than their calls.",
        ],
    )
    metrics: dict[str, float] = {}
    with workspace() as ws:
        base: tuple[float, float] | None = None
        for name, task in runs.items():
            data = dict(scenario)
            if name == "joint":
                data["actors"] = {**scenario["actors"], "t1/writer": joint_first}
            model = LatencyChatModel.from_dict(data, latency_s=latency)
            graph = build_team_executor(model, agents=UNITS, config=config(ws))
            times, usage = [], None
            for _ in range(repeats):
                model.reset()
                start = time.perf_counter()
                out = graph.invoke(
                    {"goal": "Total the ledger", "task": task, "dependency_results": {}}
                )
                times.append(time.perf_counter() - start)
                usage = out["usage"]
                assert out["tasks"]["t1"].status == "completed", out["tasks"]["t1"].result
            assert usage is not None
            wall = statistics.median(times)
            base = base or (usage.llm_calls, wall)
            table.add(
                name,
                len(task.team.members) if task.team else 1,
                usage.llm_calls,
                usage.total_tokens,
                f"{model.tokens_sent:,}",
                f"{wall:.2f}",
                fmt_x(usage.llm_calls / base[0]),
                fmt_x(wall / base[1]),
            )
            key = name.replace(" ", "_")
            metrics[f"{key}_calls"] = usage.llm_calls
            metrics[f"{key}_wall_s"] = wall
            metrics[f"{key}_tokens_sent"] = model.tokens_sent
    return table, metrics


def run(quick: bool) -> SectionResult:
    vote_table, vote_metrics = voting(quick)
    mode_table, mode_metrics = modes(quick)
    metrics = vote_metrics | mode_metrics
    p = 7
    accuracy = " / ".join(f"{metrics[f'p{p}_n{n}_accuracy']:.3f}" for n in (1, 3, 5))
    expected = " / ".join(f"{metrics[f'p{p}_n{n}_expected']:.3f}" for n in (1, 3, 5))
    single_s, single_tokens = metrics["single_actor_wall_s"], metrics["single_actor_tokens_sent"]
    modes_text = ", ".join(
        f"{mode} {fmt_x(metrics[f'{mode}_wall_s'] / single_s)} ({metrics[f'{mode}_calls']:.0f} "
        f"calls, {metrics[f'{mode}_tokens_sent'] / single_tokens:.1f}x the tokens)"
        for mode in ("sequential", "joint", "hierarchical", "broadcast")
    )
    headline = Headline(
        "teams: broadcast voting with a scripted noisy model (each member right with p = 0.7); "
        "one task in each mode at 50 ms per call",
        "P(Binomial(n, p) > n/2); a single actor (2 calls)",
        f"accuracy {accuracy} for 1 / 3 / 5 members (expected {expected}); wall time against "
        f"a single actor: {modes_text}",
    )
    return SectionResult("teams", [vote_table, mode_table], metrics, headlines=[headline])
