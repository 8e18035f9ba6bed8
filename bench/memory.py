"""Long-term memory: a learning curve (and its harder twin), retrieval quality, and cost.

Learning curve: ten related goals ("load client N's export and total it") run one
after another on one store, with memory on and with ``memory="off"``. The scripted
actor reads the export with a comma and fails unless its prompt's knowledge says the
exports use ';' (``LearningModel``); only an earlier run can teach that: the first run
fails, replans, succeeds with ';', and writes the lesson. Per goal: LLM calls, failed
tasks and replans, side by side. Here the later tasks are worded as the first one was
and the store holds nothing else, so recall cannot miss.

The harder twin: the store first holds 24 unrelated episodes (``bench/data``); the
first run teaches in other words ("the columns only split on semicolons"); the later
goals' tasks share no content word with anything the first run stored (checked here),
and their actor needs the delimiter, which it finds only in a recalled memory naming
semicolons. So the lesson must be retrieved for a task worded differently, among
distractors. Measured with the hashing embeddings and with MiniLM (extra
``[semantic]``; left out with a note when not installed, and in quick mode).

Retrieval: recall@5 / recall@1 of past episodes for paraphrased task descriptions
(``bench/data/memory_*.jsonl``: 24 tasks, 24 labelled queries, some sharing no content
word with their task), through the same search path the actor factory uses, with the
hashing embeddings and with MiniLM.

Cost: wall time per task of the same scripted run with a store (SQLite with the
sqlite-vec index, as the CLI uses) against none, and the store's bytes per run.
"""

from __future__ import annotations

import copy
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import thread_config
from aimegraph.memory import Episode, namespace, open_store
from aimegraph.memory.episodes import rank_items, search_ops
from aimegraph.models import ScriptedChatModel
from bench.chat_models import BenchChatModel
from bench.common import Headline, SectionResult, Table, content_words, fmt_bytes, fmt_ms, timed

DATA = Path(__file__).parent / "data"


def _task(task_id: str, title: str, description: str) -> dict[str, Any]:
    return {"id": task_id, "title": title, "description": description,
            "tool_bundles": ["compute"]}  # fmt: skip


def _succeed(summary: str) -> list[dict[str, Any]]:
    return [
        {"tool": "calculator", "args": {"expression": "1200+800"}},
        {"tool": "submit_result", "args": {"status": "completed", "summary": summary}},
    ]


def _fail(summary: str) -> list[dict[str, Any]]:
    return [{"tool": "submit_result", "args": {"status": "failed", "summary": summary}}]


def _scenario(first: dict[str, Any], retry: dict[str, Any], summary: str) -> dict[str, Any]:
    """Plan ``first`` (its actor fails with a comma); on the replan, ``retry`` (its
    actor succeeds, reporting ``summary``)."""
    return {
        "planner": [
            {"rationale": "load and total", "tasks": [first]},
            {"rationale": "the comma failed: another delimiter", "tasks": [retry]},
        ],
        "actors": {
            first["id"]: _fail("read with delimiter ',': one column, no amounts"),
            retry["id"]: _succeed(summary),
        },
        "reporter": [{"text": "{all_results}"}],
    }


@dataclass(frozen=True)
class Curve:
    """One learning curve: what the first run does, what the later runs do, and what
    the later runs' first actor must find in its knowledge to succeed at once."""

    first: dict[str, Any]
    later: dict[str, Any]
    learner: str
    marks: tuple[str, ...]
    learnt: str
    first_goal: str
    later_goal: str
    distractors: bool


FIRST_GOAL = "Load the CSV export of client 1 and total the amounts."
LOAD = _task("load", "Load the client export and total it",
             "Read the client's CSV export and sum the amounts.")  # fmt: skip
EASY_SCENARIO = _scenario(
    LOAD,
    _task("reload", "Load the export again with another delimiter",
          "The comma did not split the columns: try ';'."),
    "parsed with delimiter ';': total {last_tool_output}",
)  # fmt: skip
EASY = Curve(
    EASY_SCENARIO, EASY_SCENARIO, "load", ("delimiter ';'",),
    "parsed with delimiter ';': total {last_tool_output}",
    FIRST_GOAL, "Load the CSV export of client {n} and total the amounts.", distractors=False,
)  # fmt: skip
HARD_FIRST = _scenario(
    LOAD,
    _task("reload", "Load the export again with another delimiter",
          "The comma did not split the columns: try another separator."),
    "the columns only split on semicolons: total {last_tool_output}",
)  # fmt: skip
HARD_LATER = _scenario(
    _task("tally", "Add up what customer owes",
          "Open their ledger dump and count up every billed figure."),
    _task("retally", "Add up again, another separator",
          "Commas gave one field: try semicolons."),
    "parsed: total {last_tool_output}",
)  # fmt: skip
HARD = Curve(
    HARD_FIRST, HARD_LATER, "tally", ("semicolon",),
    "split on semicolons: total {last_tool_output}",
    FIRST_GOAL, "Tally everything customer {n} owes, from their ledger dump.", distractors=True,
)  # fmt: skip


class LearningModel(ScriptedChatModel):
    """The scripted actor of ``learner`` fails with a comma, unless the knowledge part
    of its prompt (where the actor factory puts recalled memories) holds one of
    ``marks``; then it succeeds at once and says what it used (``learnt``)."""

    learner: str = "load"
    marks: tuple[str, ...] = ("delimiter ';'",)
    learnt: str = "parsed with delimiter ';': total {last_tool_output}"

    def _next_step(self, messages: list[BaseMessage]) -> dict[str, Any]:
        step = super()._next_step(messages)
        prompt = "\n".join(m.text for m in messages)
        knowledge = prompt.split("## Knowledge", 1)[-1].split("## Environment", 1)[0]
        learnt = "## Knowledge" in prompt and any(mark in knowledge for mark in self.marks)
        if f'<task id="{self.learner}"' in prompt and learnt:
            success = _succeed(self.learnt)
            index = sum(m.type == "ai" for m in messages)
            return success[min(index, len(success) - 1)]
        return step


def _distract(store: Any) -> None:
    """The 24 unrelated past episodes of ``bench/data/memory_tasks.jsonl``."""
    for t in _load("memory_tasks.jsonl"):
        episode = Episode(goal="", task_id=t["id"], title=t["title"],
                          description=t["description"], outcome="completed",
                          summary="Done.", thread_id=f"past-{t['id']}")  # fmt: skip
        store.put(namespace("default", "episodes"), t["id"], episode.model_dump(mode="json"))


def learning_curve(
    curve: Curve, goals: int, memory: str, embeddings: str = "hashing"
) -> list[dict[str, int]]:
    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        open_store("memory", embeddings=embeddings) as store,  # type: ignore[arg-type]
    ):
        if curve.distractors:
            _distract(store)
        cfg = AimeConfig(workspace=Path(tmp), task_retries=0, memory=memory)  # type: ignore[arg-type]
        for n in range(1, goals + 1):
            data = curve.first if n == 1 else curve.later
            model = LearningModel.from_dict(copy.deepcopy(data))
            model.learner, model.marks, model.learnt = curve.learner, curve.marks, curve.learnt
            graph = build_aime_graph(model, config=cfg, store=store)
            goal = curve.first_goal if n == 1 else curve.later_goal.format(n=n)
            out = graph.invoke({"goal": goal}, thread_config(f"{memory}-{n}"))
            failed = sum(u.status == "failed" for u in out["updates"])
            rows.append(
                {
                    "llm_calls": out["usage"].llm_calls,
                    "failed": failed,
                    "replans": out.get("replans", 0),
                    "ok": int(out["status"] == "succeeded"),
                }
            )
    return rows


def _shared_words(curve: Curve) -> set[str]:
    """Content words the later runs' task shares with what the first run stored."""
    later = curve.later["planner"][0]["tasks"][0]
    stored = [*curve.first["planner"][0]["tasks"], *curve.first["planner"][1]["tasks"]]
    summaries = [str(s["args"].get("summary", "")) for a in curve.first["actors"].values()
                 for s in a]  # fmt: skip
    first = [curve.first_goal, *(f"{t['title']} {t['description']}" for t in stored), *summaries]
    later_text = f"{curve.later_goal} {later['title']} {later['description']}"
    return content_words(later_text) & content_words(" ".join(first))


def _load(name: str) -> list[dict[str, str]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


def retrieval(embeddings: str) -> dict[str, float]:
    tasks, queries = _load("memory_tasks.jsonl"), _load("memory_queries.jsonl")
    hits1 = hits5 = disjoint = disjoint5 = 0
    with open_store("memory", embeddings=embeddings) as store:  # type: ignore[arg-type]
        for t in tasks:
            episode = Episode(goal="", task_id=t["id"], title=t["title"],
                              description=t["description"], outcome="completed")  # fmt: skip
            store.put(namespace("default", "episodes"), t["id"], episode.model_dump(mode="json"))
        for q in queries:
            results = store.batch(search_ops(store, "default", ["episodes"], q["query"], 5))
            found = [i.key for i in rank_items(store, results, q["query"], 5)]
            task = next(t for t in tasks if t["id"] == q["relevant"])
            hits1 += found[:1] == [q["relevant"]]
            hits5 += q["relevant"] in found
            words = content_words(f"{task['title']} {task['description']}")
            if not content_words(q["query"]) & words:
                disjoint += 1
                disjoint5 += q["relevant"] in found
    n = len(queries)
    return {"recall@5": hits5 / n, "recall@1": hits1 / n, "disjoint": disjoint,
            "disjoint_recall@5": disjoint5 / max(disjoint, 1)}  # fmt: skip


def cost(runs: int) -> dict[str, float]:
    """Seconds per task without and with a store, and store bytes per run."""
    scenario = {
        "planner": [
            {
                "rationale": "r",
                "tasks": [
                    {"id": f"t{i}", "title": f"Step {i} of the report", "tool_bundles": ["compute"]}
                    for i in range(4)
                ],
            }
        ],  # fmt: skip
        "actors": {
            f"t{i}": [{"tool": "calculator", "args": {"expression": f"{i}*7"}}] for i in range(4)
        },
        "reporter": [{"text": "{all_results}"}],
    }
    tasks = 4 * runs
    with tempfile.TemporaryDirectory() as tmp:
        cfg = AimeConfig(workspace=Path(tmp))

        sent: dict[str, int] = {}

        def run_all(store: Any, tag: str) -> None:
            sent[tag] = 0
            for n in range(runs):
                model = BenchChatModel.from_dict(copy.deepcopy(scenario))
                graph = build_aime_graph(model, config=cfg, store=store)
                graph.invoke({"goal": f"Report number {n}"}, thread_config(f"{tag}{n}"))
                sent[tag] += model.tokens_sent

        run_all(None, "warm")
        _, without = timed(lambda: run_all(None, "off"))
        path = Path(tmp) / "memory.db"
        with open_store(f"sqlite:///{path}") as store:
            run_all(store, "warm")
            before = path.stat().st_size
            _, with_store = timed(lambda: run_all(store, "on"))
            size = path.stat().st_size - before
    return {
        "off_s_per_task": without / tasks,
        "on_s_per_task": with_store / tasks,
        "added_ms_per_task_delta": (with_store - without) / tasks * 1e3,
        "bytes_per_run": size / runs,
        "tokens_per_run_off": sent["off"] / runs,
        "tokens_per_run_on": sent["on"] / runs,
    }


def _cells(row: dict[str, int]) -> str:
    return f"{row['llm_calls']} / {row['failed']} / {row['replans']}"


def curves(quick: bool) -> tuple[Table, dict[str, float]]:
    goals = 3 if quick else 10
    runs: dict[str, list[dict[str, int]]] = {
        "same words, on": learning_curve(EASY, goals, "on"),
        "off": learning_curve(EASY, goals, "off"),
    }
    notes = []
    for embeddings in ("hashing",) if quick else ("hashing", "minilm"):
        try:
            runs[f"other words, on ({embeddings})"] = learning_curve(HARD, goals, "on", embeddings)
        except ImportError as exc:
            notes.append(f"other words with {embeddings}: not measured ({exc})")
    table = Table(
        f"Memory: learning curve over {goals} related goals (LLM calls / failed tasks / replans)",
        ["goal", *runs],
    )
    for n in range(goals):
        table.add(n + 1, *(_cells(rows[n]) for rows in runs.values()))
    totals = {name: {k: sum(r[k] for r in rows) for k in rows[0]} for name, rows in runs.items()}
    table.add("total", *(_cells(t) for t in totals.values()))
    shared = _shared_words(HARD)
    table.notes += [
        "Scripted actors read the export with ',' and fail unless a recalled memory tells them "
        "the delimiter; run 1 fails, replans, succeeds and writes its episodes (memory off: "
        "every run does so).",
        "same words: the later goals' task is worded as run 1's and the store holds nothing "
        "else; the actor needs the words \"delimiter ';'\" that run 1 wrote.",
        'other words: the store first holds 24 unrelated episodes; run 1 writes "the columns '
        'only split on semicolons"; the later goals\' task ("Add up what customer owes") '
        f"shares {len(shared)} content word(s) with anything run 1 stored"
        + (f" ({', '.join(sorted(shared))})" if shared else "")
        + "; its actor succeeds only if a recalled memory names semicolons.",
        *notes,
    ]
    metrics = {
        f"curve.{name.replace(' ', '_')}.{k}": float(v)
        for name, t in totals.items()
        for k, v in t.items()
    }
    metrics["curve.goals"] = goals
    return table, metrics


def run(quick: bool) -> SectionResult:
    table, metrics = curves(quick)

    retrieval_table = Table(
        "Memory: episode retrieval (24 paraphrased tasks)",
        ["embeddings", "recall@5", "recall@1", "recall@5, no shared word"],
    )
    names = ["hashing"] if quick else ["hashing", "minilm"]
    for name in names:
        try:
            scores = retrieval(name)
        except ImportError as exc:
            retrieval_table.notes.append(f"{name}: not measured ({exc})")
            continue
        retrieval_table.add(
            name, f"{scores['recall@5']:.2f}", f"{scores['recall@1']:.2f}",
            f"{scores['disjoint_recall@5']:.2f} (of {scores['disjoint']:.0f})",
        )  # fmt: skip
        metrics |= {f"retrieval.{name}.{k}": v for k, v in scores.items()}
    if quick:
        retrieval_table.notes.append("MiniLM is measured in the full run only (model load).")

    spent = cost(2 if quick else 10)
    cost_table = Table(
        "Memory: cost (4-task scripted run, SQLite store with the sqlite-vec index)",
        [
            "ms per task, no store",
            "ms per task, with store",
            "added ms per task",
            "store bytes per run",
            "prompt tokens per run, no store / with store",
        ],
    )
    cost_table.add(
        fmt_ms(spent["off_s_per_task"], 1), fmt_ms(spent["on_s_per_task"], 1),
        f"{spent['added_ms_per_task_delta']:+.1f}", fmt_bytes(spent["bytes_per_run"]),
        f"{spent['tokens_per_run_off']:,.0f} / {spent['tokens_per_run_on']:,.0f}",
    )  # fmt: skip
    metrics |= {f"cost.{k}": v for k, v in spent.items()}
    return SectionResult(
        "memory", [table, retrieval_table, cost_table], metrics, headlines=headlines(metrics)
    )


def headlines(metrics: dict[str, float]) -> list[Headline]:
    def total(name: str) -> str:
        key = f"curve.{name.replace(' ', '_')}"
        if f"{key}.llm_calls" not in metrics:
            return "not measured"
        return " / ".join(
            f"{metrics[f'{key}.{k}']:.0f}" for k in ("llm_calls", "failed", "replans")
        )

    goals = int(metrics["curve.goals"])
    retrieval = "; ".join(
        f"{e}: recall@5 {metrics[f'retrieval.{e}.recall@5']:.2f}, without a shared word "
        f"{metrics.get(f'retrieval.{e}.disjoint_recall@5', 0.0):.2f} (of "
        f"{metrics.get(f'retrieval.{e}.disjoint', 0.0):.0f})"
        for e in ("hashing", "minilm")
        if f"retrieval.{e}.recall@5" in metrics
    )
    return [
        Headline(
            f"memory, learning curve: {goals} related goals on one store, a lesson only an "
            "earlier run can teach (LLM calls / failed tasks / replans in all)",
            'the same runs with `memory="off"`',
            f"later goals worded as the first: {total('same words, on')} against "
            f"{total('off')}; harder twin, later goals sharing no content word with the lesson, "
            f"among 24 distractor episodes: {total('other words, on (hashing)')} with hashing "
            f"embeddings, {total('other words, on (minilm)')} with MiniLM",
        ),
        Headline(
            "memory: episode retrieval for 24 paraphrased tasks; cost of a store on a 4-task run",
            "the other embedding; no store",
            f"{retrieval}; {metrics['cost.added_ms_per_task_delta']:+.1f} ms per task and "
            f"{fmt_bytes(metrics['cost.bytes_per_run'])} per run with an SQLite store; prompt "
            f"tokens per run {metrics['cost.tokens_per_run_on']:,.0f} with the store against "
            f"{metrics['cost.tokens_per_run_off']:,.0f} without (recalled memories)",
        ),
    ]
