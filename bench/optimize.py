"""Prompt optimisation: what GEPA gains offline and what the online loop costs per run.

Offline: ``aimegraph.optimize`` on the scripted citation task
(``aimegraph.models.teaching.citation_models``: the default prompts fail every
run; the reviewer's issues name the fix; ``FeedbackReflectionModel`` turns them
into rules), for a few budgets and component sets: the validation score before
and after, the metric calls (aime runs) spent, and the tokens of the runs and of
the reflection model (the scripted models count 4 characters a token).

Online: the per-run cost of ``AimeConfig.optimize_online``. The same scripted run
with the loop on and off, side by side: when the loop does not trigger (the
prompts already pass) it adds one trace append and a read of the trace file;
when it triggers it adds one reflection call and a prompt-store write. The
trace-file read grows with the file, so the node alone is also timed after 10
and after 1,000 earlier runs.

Needs the ``[optimize]`` extra (GEPA): ``python -m bench --only optimize``.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from aimegraph import AimeConfig, PromptStore, build_aime_graph, optimize
from aimegraph.models.teaching import (
    CITATION_GOALS,
    CITE_INSTRUCTION,
    FeedbackReflectionModel,
    citation_models,
)
from aimegraph.optimizer.online import OnlineLoop
from aimegraph.prompts import DEFAULT_PROMPTS
from bench.common import SectionResult, Table, fmt_ms, fmt_s, fmt_x, timed

CITED_PLANNER = DEFAULT_PROMPTS["planner"] + f"\n- {CITE_INSTRUCTION} the figures come from.\n"


def _config(workspace: Path, **fields: Any) -> AimeConfig:
    return AimeConfig(workspace=workspace, max_replans=0, task_retries=0, **fields)


def _offline(root: Path, quick: bool, table: Table, metrics: dict[str, float]) -> None:
    goals = [{"goal": g} for g in CITATION_GOALS]
    cases = [("planner", 3, 2, 20), ("planner,actor", 3, 2, 40)]
    if not quick:
        cases.append(("planner,actor", 5, 5, 60))
    for components, n_train, n_val, budget in cases:
        model, models = citation_models()
        where = root / f"offline-{components}-{budget}"
        result, seconds = timed(
            lambda model=model, models=models, where=where, n_train=n_train, n_val=n_val,
            budget=budget, components=components: optimize(
                model,
                goals[:n_train],
                valset=goals[-n_val:],
                reflection_model=FeedbackReflectionModel(),
                components=tuple(components.split(",")),
                max_metric_calls=budget,
                config=_config(where / "ws"),
                models=models,
                store=PromptStore(where / "prompts.jsonl"),
            )
        )  # fmt: skip
        table.add(
            components,
            f"{n_train} / {n_val}",
            budget,
            f"{result.score_before:.2f}",
            f"{result.score_after:.2f}",
            result.metric_calls,
            f"{result.usage.llm_calls} / {result.usage.total_tokens:,}",
            f"{result.reflection_usage.llm_calls} / {result.reflection_usage.total_tokens:,}",
            fmt_s(seconds),
        )
        key = f"offline_{components.replace(',', '_')}_{budget}"
        metrics[f"{key}_score_after"] = result.score_after
        metrics[f"{key}_metric_calls"] = result.metric_calls
        metrics[f"{key}_run_tokens"] = result.usage.total_tokens
        metrics[f"{key}_reflection_tokens"] = result.reflection_usage.total_tokens


def _run_ms(graph: Any, goal: str) -> tuple[float, dict[str, Any]]:
    out, seconds = timed(lambda: graph.invoke({"goal": goal}))
    return seconds, out


def _online(root: Path, quick: bool, table: Table, metrics: dict[str, float]) -> None:
    repeat = 5 if quick else 30
    model, models = citation_models()
    reflection = FeedbackReflectionModel()

    # No trigger: the store's active prompt already passes.
    def passing_graph(online: bool, name: str) -> Any:
        store = PromptStore(root / f"{name}.jsonl")
        store.use(store.add({"planner": CITED_PLANNER}, source="manual"))
        config = _config(root / name, optimize_online=online, optimize_window=5)
        return build_aime_graph(
            model, models=models | {"reflection": reflection}, config=config, prompts=store
        )

    plain, looped = passing_graph(False, "pass-off"), passing_graph(True, "pass-on")
    for graph in (plain, looped):  # warm up
        _run_ms(graph, CITATION_GOALS[0])
    off_runs, on_runs = [], []
    for _ in range(repeat):  # interleaved, so drift hits both sides alike
        off_runs.append(_run_ms(plain, CITATION_GOALS[0]))
        on_runs.append(_run_ms(looped, CITATION_GOALS[0]))
    off = statistics.median(s for s, _ in off_runs)
    on = statistics.median(s for s, _ in on_runs)
    assert all(out["status"] == "succeeded" for _, out in on_runs)
    calls = on_runs[0][1]["usage"].llm_calls
    table.add("off", "passing", fmt_ms(off), calls, "0", "-")
    table.add("on, no trigger", "passing", fmt_ms(on), calls, "0", fmt_x(on / off))
    metrics["online_no_trigger_ratio"] = on / off

    # Trigger: window 1, so the first failing run of each fresh store mutates.
    off_fail, on_fail = [], []
    for i in range(repeat):
        for online, times in ((False, off_fail), (True, on_fail)):
            store = PromptStore(root / f"fail-{online}-{i}.jsonl")
            config = _config(root / "fail", optimize_online=online, optimize_window=1)
            graph = build_aime_graph(
                model, models=models | {"reflection": reflection}, config=config, prompts=store
            )
            seconds, out = _run_ms(graph, CITATION_GOALS[1])
            assert out["status"] == "rejected"
            assert [v.source for v in store.list()] == (["default", "online"] if online else [])
            times.append(seconds)
    traces = (root / f"fail-True-{repeat - 1}.traces.jsonl").read_text().splitlines()
    (mutation,) = [r for r in map(json.loads, traces) if r["kind"] == "mutation"]
    fail_calls = out["usage"].llm_calls
    table.add("off", "failing", fmt_ms(statistics.median(off_fail)), fail_calls, "0", "-")
    ratio = statistics.median(on_fail) / statistics.median(off_fail)
    table.add(
        "on, triggers",
        "failing",
        fmt_ms(statistics.median(on_fail)),
        fail_calls,
        f"{mutation['llm_calls']} / {mutation['tokens']:,}",
        fmt_x(ratio),
    )
    metrics["online_trigger_ratio"] = ratio
    metrics["online_trigger_reflection_calls"] = mutation["llm_calls"]
    metrics["online_trigger_reflection_tokens"] = mutation["tokens"]


def _node_cost(root: Path, quick: bool, table: Table, metrics: dict[str, float]) -> None:
    """``OnlineLoop.after_run`` alone (no trigger) after 10 and 1,000 earlier runs."""
    model, models = citation_models()
    graph = build_aime_graph(model, models=models, config=_config(root / "node"))
    state = graph.invoke({"goal": CITATION_GOALS[0]})
    for earlier in (10, 100 if quick else 1_000):
        store = PromptStore(root / f"node-{earlier}.jsonl")
        config = _config(root / "node", optimize_window=5, optimize_threshold=0.0)
        loop = OnlineLoop(store, FeedbackReflectionModel())
        for _ in range(earlier):
            loop.after_run(state, config, version="v", thread_id=None)
        samples = []
        for _ in range(20):
            start = time.perf_counter()
            loop.after_run(state, config, version="v", thread_id=None)
            samples.append(time.perf_counter() - start)
        size = (root / f"node-{earlier}.traces.jsonl").stat().st_size
        table.add(f"{earlier:,}", f"{size / 1024:,.0f} KB", fmt_ms(statistics.median(samples)))
        metrics[f"online_node_ms_after_{earlier}"] = statistics.median(samples) * 1e3


def run(quick: bool) -> SectionResult:
    offline = Table(
        "Prompt optimisation: GEPA on the scripted citation task",
        [
            "components",
            "train / val",
            "max metric calls",
            "val score before",
            "val score after",
            "metric calls",
            "run LLM calls / tokens",
            "reflection calls / tokens",
            "wall s",
        ],
        notes=[
            "A metric call is one aime run on one example (4 LLM calls: plan, act, report, "
            "verify; max_replans=0); tokens are the scripted models' (4 characters a token).",
            "GEPA starts an iteration only when the budget left covers its worst case "
            "(2 minibatches of 3 and the validation set), so runs stop below the budget.",
        ],
    )
    online = Table(
        "Online loop: cost per run (median)",
        [
            "optimize_online",
            "runs",
            "ms per run",
            "LLM calls per run",
            "reflection calls / tokens",
            "vs off",
        ],
        notes=[
            "passing: the store's active planner prompt already cites, every run succeeds, the "
            "loop only traces. failing: window 1 and the default prompts, so the run is "
            "rejected and the loop makes its one mutation (one reflection call, a new active "
            "version) before the run returns.",
        ],
    )
    node = Table(
        "Online loop node alone, no trigger: cost by trace-file size",
        ["earlier runs in the trace file", "trace file", "ms per run"],
        notes=[
            "The node appends to the trace file and rewrites the small summary beside it "
            "(calls spent, each version's window) under the file's lock; it reads the whole "
            "trace file only when that summary is missing or out of date."
        ],
    )
    metrics: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="aimegraph-bench-optimize-") as tmp:
        root = Path(tmp)
        _offline(root, quick, offline, metrics)
        _online(root, quick, online, metrics)
        _node_cost(root, quick, node, metrics)
    return SectionResult("optimize", [offline, online, node], metrics)
