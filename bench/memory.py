"""Long-term memory: a learning curve, retrieval quality, and what memory costs.

Learning curve: ten related goals ("load client N's export and total it") run one
after another on one store, with memory on and with ``memory="off"``. The scripted
actor reads the export with a comma and fails unless its prompt's knowledge says
the exports use ';' (``LearningModel``); only an earlier run can teach that: the
first run fails, replans, succeeds with ';', and writes the lesson. Per goal:
LLM calls, failed tasks and replans, side by side.

Retrieval: recall@5 / recall@1 of past episodes for paraphrased task
descriptions (``bench/data/memory_*.jsonl``: 24 tasks, 24 labelled queries, six
of which share no content word with their task), through the same search path the
actor factory uses, with the hashing embeddings and with MiniLM (extra
``[semantic]``; skipped with a note when it is not installed, and in quick mode).

Cost: wall time per task of the same scripted run with a store (SQLite with the
sqlite-vec index, as the CLI uses) against none, and the store's bytes per run.
"""

from __future__ import annotations

import copy
import json
import re
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import thread_config
from aimegraph.memory import Episode, namespace, open_store
from aimegraph.memory.episodes import rank_items, search_ops
from aimegraph.models import ScriptedChatModel
from bench.common import SectionResult, Table, fmt_bytes, fmt_ms, timed

DATA = Path(__file__).parent / "data"
LESSON_MARK = "delimiter ';'"
_STOP = {"the", "a", "an", "of", "to", "in", "for", "and", "from", "on", "with", "what",
         "how", "my", "our", "is", "do", "i", "each", "per", "by", "it", "are", "be", "this",
         "which", "who", "must", "when", "does", "most", "will", "much", "into", "at"}  # fmt: skip

LOAD = {
    "id": "load",
    "title": "Load the client export and total it",
    "description": "Read the client's CSV export and sum the amounts.",
    "tool_bundles": ["compute"],
}
RELOAD = {
    "id": "reload",
    "title": "Load the export again with another delimiter",
    "description": "The comma did not split the columns: try ';'.",
    "tool_bundles": ["compute"],
}
SUCCEED = [
    {"tool": "calculator", "args": {"expression": "1200+800"}},
    {
        "tool": "submit_result",
        "args": {
            "status": "completed",
            "summary": "parsed with delimiter ';': total {last_tool_output}",
        },
    },
]
FAIL = [
    {
        "tool": "submit_result",
        "args": {"status": "failed", "summary": "read with delimiter ',': one column, no amounts"},
    }
]
SCENARIO: dict[str, Any] = {
    "planner": [
        {"rationale": "load and total", "tasks": [LOAD]},
        {"rationale": "the comma failed: another delimiter", "tasks": [RELOAD]},
    ],
    "actors": {"load": FAIL, "reload": SUCCEED},
    "reporter": [{"text": "{all_results}"}],
}


class LearningModel(ScriptedChatModel):
    """The scripted actor of ``load`` fails with a comma, unless the knowledge part of
    its prompt (where the actor factory puts recalled memories) names the ';'."""

    def _next_step(self, messages: list[BaseMessage]) -> dict[str, Any]:
        step = super()._next_step(messages)
        prompt = "\n".join(m.text for m in messages)
        knowledge = prompt.split("## Knowledge", 1)[-1].split("## Environment", 1)[0]
        if '<task id="load"' in prompt and "## Knowledge" in prompt and LESSON_MARK in knowledge:
            index = sum(m.type == "ai" for m in messages)
            return SUCCEED[min(index, len(SUCCEED) - 1)]
        return step


def learning_curve(goals: int, memory: str) -> list[dict[str, int]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp, open_store("memory") as store:
        cfg = AimeConfig(workspace=Path(tmp), task_retries=0, memory=memory)  # type: ignore[arg-type]
        for n in range(1, goals + 1):
            model = LearningModel.from_dict(copy.deepcopy(SCENARIO))
            graph = build_aime_graph(model, config=cfg, store=store)
            goal = f"Load the CSV export of client {n} and total the amounts."
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


def _load(name: str) -> list[dict[str, str]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP}


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
            if not _words(q["query"]) & _words(f"{task['title']} {task['description']}"):
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

        def run_all(store: Any, tag: str) -> None:
            for n in range(runs):
                model = ScriptedChatModel.from_dict(copy.deepcopy(scenario))
                graph = build_aime_graph(model, config=cfg, store=store)
                graph.invoke({"goal": f"Report number {n}"}, thread_config(f"{tag}{n}"))

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
        "added_ms_per_task": max((with_store - without) / tasks * 1e3, 1e-3),
        "bytes_per_run": max(size / runs, 1.0),
    }


def run(quick: bool) -> SectionResult:
    goals = 3 if quick else 10
    curve = {m: learning_curve(goals, m) for m in ("on", "off")}
    table = Table(
        f"Memory: learning curve over {goals} related goals (LLM calls / failed tasks / replans)",
        ["goal", "memory on", "memory off"],
    )
    for n in range(goals):
        on, off = curve["on"][n], curve["off"][n]
        table.add(n + 1, *(f"{r['llm_calls']} / {r['failed']} / {r['replans']}" for r in (on, off)))
    totals = {m: {k: sum(r[k] for r in rows) for k in rows[0]} for m, rows in curve.items()}
    table.add(
        "total", *(f"{t['llm_calls']} / {t['failed']} / {t['replans']}" for t in totals.values())
    )
    table.notes.append(
        "Scripted actors read the export with ',' and fail unless a recalled memory names "
        "';'; run 1 fails, replans, succeeds and writes the lesson (one extra call)."
    )
    metrics: dict[str, float] = {
        f"curve.{m}.{k}": float(v) for m, t in totals.items() for k, v in t.items() if v
    }

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
        metrics |= {f"retrieval.{name}.{k}": v for k, v in scores.items() if v}
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
        ],
    )
    cost_table.add(
        fmt_ms(spent["off_s_per_task"], 1), fmt_ms(spent["on_s_per_task"], 1),
        f"{spent['added_ms_per_task']:.1f}", fmt_bytes(spent["bytes_per_run"]),
    )  # fmt: skip
    metrics |= {f"cost.{k}": v for k, v in spent.items()}
    return SectionResult("memory", [table, retrieval_table, cost_table], metrics)
