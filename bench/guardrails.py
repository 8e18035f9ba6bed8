"""Guardrail overhead: what the two built-in guardrails cost per model call.

A chain of ``n`` tasks on the instant scripted model (the worst case: nothing hides
the screens' time); every actor reads a 4 KB page with a tool (what the injection
screen scans) and submits. The same graph runs with no guardrails, with the secrets
screen (final answer and tool arguments), with the prompt-injection screen (tool
outputs), with both, and with both plus a plain input guardrail (the goal's screen
beside the first planner call: two nodes and one super-step more). The variants run in
interleaved rounds; time per model call is the process's CPU time for a run (all its
threads) over its model calls: the screens are CPU work, and on a shared machine wall
time mostly measures the other processes. Each variant is compared with the unguarded
run by its fastest run and by the median over the rounds of its time against the
unguarded run's in the same round. A second table times one screen alone.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar, cast

from langchain_core.tools import tool

from aimegraph import build_aime_graph
from aimegraph.graphs.compiled import AimeGraph
from aimegraph.guardrails import (
    Guardrail,
    Guards,
    Subject,
    guardrail,
    prompt_injection_screen,
    secrets_screen,
)
from bench.chat_models import BenchChatModel
from bench.common import (
    Headline,
    SectionResult,
    Table,
    config,
    fmt_ms,
    fmt_range,
    fmt_x,
    median_time,
    scenario,
    task,
    thread_config,
    workspace,
)

T = TypeVar("T")

PAGE = (
    "Harbour notes for the third of May. High tide at Brest is at 06:42 and low tide at "
    "12:55; crews planning an early departure should check the buoys at the entrance. "
) * 24
"""A 4 KB page of ordinary prose (no instruction, no secret: the screens scan it all)."""
ANSWER = PAGE[:1024]


@tool
def read_page(name: str) -> str:
    """Read a page of the harbour notes."""
    return PAGE


@guardrail("input")
def allow_every_goal(subject: Subject) -> None:
    """A plain input check that passes every goal: its cost is the screen's wiring."""


VARIANTS: dict[str, tuple[tuple[str, ...], tuple[Guardrail, ...]]] = {
    "none": ((), ()),
    "secrets": (("secrets",), ()),
    "prompt_injection": (("prompt_injection",), ()),
    "both": (("secrets", "prompt_injection"), ()),
    "both + input check": (("secrets", "prompt_injection"), (allow_every_goal,)),
}
"""Variant -> (built-in names in ``AimeConfig.guardrails``, guardrails given to the builder)."""


def _chain(n_tasks: int) -> dict[str, Any]:
    tasks = [task("t1")] + [task(f"t{i}", f"t{i - 1}") for i in range(2, n_tasks + 1)]
    read = {"tool": "read_page", "args": {"name": "tides"}}
    return scenario([{**t, "tool_bundles": ["custom"]} for t in tasks], actor_steps=[read])


def run(quick: bool) -> SectionResult:
    n_tasks, rounds = (3, 2) if quick else (20, 9)
    per_call: dict[str, list[float]] = {name: [] for name in VARIANTS}
    calls: dict[str, int] = {}
    with workspace() as ws:
        graphs: dict[str, tuple[AimeGraph, BenchChatModel]] = {}
        for name, (builtins, checks) in VARIANTS.items():
            model = cast(BenchChatModel, BenchChatModel.from_dict(_chain(n_tasks)))
            cfg = config(ws, verify="off", guardrails=builtins)
            graph = build_aime_graph(model, tools=[read_page], config=cfg, guardrails=checks)
            graphs[name] = (graph, model)
        goal = {"goal": "Assemble the report."}
        for _ in range(rounds + 1):  # the first round warms up
            for name, (graph, model) in graphs.items():
                model.reset()
                out, seconds = _cpu_timed(partial(graph.invoke, goal, thread_config()))
                assert out["status"] == "succeeded", (name, out["reason"])
                calls[name] = model.calls
                per_call[name].append(seconds / model.calls)
    for samples in per_call.values():
        del samples[0]
    ratios = {
        name: [s / base for s, base in zip(samples, per_call["none"], strict=True)]
        for name, samples in per_call.items()
    }
    table = Table(
        f"1. Built-in guardrails per model call: chain of {n_tasks} tasks, each reading a 4 KB "
        f"page, instant scripted model (median of {rounds} interleaved rounds)",
        [
            "guardrails",
            "model calls per run",
            "CPU ms per model call",
            "fastest run against none",
            "against none, per round",
        ],
    )
    metrics: dict[str, float] = {}
    fastest = {name: min(samples) / min(per_call["none"]) for name, samples in per_call.items()}
    for name, samples in per_call.items():
        table.add(
            name,
            calls[name],
            fmt_range(samples, fmt_ms),
            fmt_x(fastest[name]),
            fmt_range(ratios[name], fmt_x),
        )
        key = name.replace(" + ", "_").replace(" ", "_")
        metrics[f"guardrails.{key}.ms_per_call"] = statistics.median(samples) * 1e3
        metrics[f"guardrails.{key}.ratio"] = statistics.median(ratios[name])
        metrics[f"guardrails.{key}.fastest_ratio"] = fastest[name]
    table.notes.append(
        "secrets screens the final answer and every tool call's arguments; prompt_injection "
        "every tool output; the input check runs beside the first planner call"
    )
    screens = _one_screen(repeat=200 if quick else 2000)
    metrics |= {f"guardrails.screen.{k}_us": v * 1e6 for k, v in screens.items()}
    single = Table(
        "2. One screen alone (median of repeated calls)",
        ["screen", "subject", "microseconds"],
    )
    single.add("secrets", "a 1 KB answer", f"{screens['secrets'] * 1e6:.0f}")
    single.add("prompt_injection", "4 KB tool output", f"{screens['prompt_injection'] * 1e6:.0f}")
    med = {name: statistics.median(r) for name, r in ratios.items()}
    headline = Headline(
        f"built-in guardrails per model call: chain of {n_tasks} tasks, each reading a 4 KB page, "
        "instant scripted model (the worst case); process CPU time",
        "the same graph with no guardrails, interleaved rounds",
        f"fastest run: secrets {fmt_x(fastest['secrets'])} / prompt_injection "
        f"{fmt_x(fastest['prompt_injection'])} / both {fmt_x(fastest['both'])} / both with an "
        f"input check beside the planner {fmt_x(fastest['both + input check'])}; medians per "
        f"round {' / '.join(fmt_x(med[n]) for n in VARIANTS if n != 'none')}; one screen: "
        f"{screens['secrets'] * 1e6:.0f} µs (secrets, 1 KB answer), "
        f"{screens['prompt_injection'] * 1e6:.0f} µs (prompt_injection, 4 KB page)",
    )
    return SectionResult("guardrails", [table, single], metrics, [headline])


def _cpu_timed(fn: Callable[[], T]) -> tuple[T, float]:
    """``fn``'s result and the CPU seconds the process spent on it."""
    start = time.process_time()
    value = fn()
    return value, time.process_time() - start


def _one_screen(*, repeat: int) -> dict[str, float]:
    """Seconds one screen takes: secrets over an answer, prompt_injection over a page."""
    answer = Guards([secrets_screen()])
    page = Guards([prompt_injection_screen()])
    return {
        "secrets": median_time(lambda: answer.screen(Subject("output", ANSWER)), repeat=repeat),
        "prompt_injection": median_time(
            lambda: page.screen(Subject("tool_output", PAGE, tool="read_page")), repeat=repeat
        ),
    }
