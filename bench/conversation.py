"""What the conversation view costs per turn: tokens in the prompts and milliseconds.

One thread, one request after another (a one-task run each, verified, with an
instant scripted model whose answers run to about 600 characters), with the
default view of the earlier turns (``max_conversation_tokens=2000``) and without
it (``0``), side by side in one process. Per turn: the view's size (the planner's,
reporter's and verifier's, and the actors' quarter; ``count_tokens_approximately``),
the run's input tokens with and without it (the scripted model counts four
characters a token), the time the intake node spends building it, and the run's
wall time with and without it (each turn's median over repeats of the whole thread).
"""

from __future__ import annotations

import statistics
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.checkpoint.memory import InMemorySaver

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import make_serializer
from aimegraph.models import ScriptedChatModel
from aimegraph.nodes.conversation import conversation_view, past_turns
from bench.common import (
    Headline,
    SectionResult,
    Table,
    fmt_ms,
    median_time,
    thread_config,
    timed,
    workspace,
)

BUDGET = 2_000
ANSWER = "On turn {n}: " + "the figures hold, the ledger balances and the report is filed. " * 9


def _model() -> ScriptedChatModel:
    return ScriptedChatModel.from_dict(
        {
            "planner": [
                {"rationale": "one step", "tasks": [{"id": "t1", "title": "Look it up"}]}
            ],
            "actors": {"t1": [{"tool": "submit_result", "args": {"status": "completed",
                                                                 "summary": "found it"}}]},
            "reporter": [{"text": ANSWER.format(n="N")}],
        }
    )  # fmt: skip


def _turns(budget: int, count: int) -> list[dict[str, Any]]:
    """Run ``count`` turns on one thread; per turn its input tokens, wall time and
    the conversation the view was built from."""
    with workspace() as ws:
        graph = build_aime_graph(
            _model(),
            config=AimeConfig(workspace=ws, max_conversation_tokens=budget),
            checkpointer=InMemorySaver(serde=make_serializer()),
        )
        thread = thread_config()
        rows = []
        for n in range(1, count + 1):
            before = graph.get_state(thread).values.get("messages") or []
            ask = HumanMessage(f"Question {n}: and what about the figures of region {n}?")
            out, seconds = timed(lambda ask=ask: graph.invoke({"messages": [ask]}, thread))
            assert out["status"] == "succeeded", out.get("reason")
            rows.append({"tokens": out["usage"].input_tokens, "s": seconds, "earlier": before})
        return rows


def _median_turns(budget: int, count: int, repeat: int) -> list[dict[str, Any]]:
    """``_turns`` ``repeat`` times; each turn's wall time is the median."""
    runs = [_turns(budget, count) for _ in range(repeat)]
    return [
        {**same[0], "s": statistics.median(turn["s"] for turn in same)}
        for same in zip(*runs, strict=True)
    ]


def run(quick: bool) -> SectionResult:
    count = 6 if quick else 40
    shown = [1, 2, 3, 6] if quick else [1, 2, 5, 10, 20, 40]
    repeat = 1 if quick else 3
    with_view = _median_turns(BUDGET, count, repeat)
    without = _median_turns(0, count, repeat)
    table = Table(
        f"Conversation view per turn: one thread, {count} turns, instant scripted model",
        [
            "turn",
            "earlier turns",
            "view tokens (actors)",
            "input tokens per run, view / none",
            "extra tokens",
            "building the view (µs)",
            "run ms, view / none",
            "ratio",
        ],
        notes=[
            f"view: the planner's, reporter's and verifier's view of the earlier turns with "
            f"max_conversation_tokens={BUDGET} (newest turns whole within 3/4 of it, older ones "
            "a line each); actors get a quarter. Tokens by langchain-core's "
            "count_tokens_approximately.",
            "input tokens: the run's planner, actor, reporter and verifier prompts, counted "
            "by the scripted model at four characters a token; none: max_conversation_tokens=0.",
            "building the view: past_turns + conversation_view on the thread's messages (twice "
            "per run: the full view and the actors'), median of 20; the intake node's whole cost.",
        ],
    )
    metrics: dict[str, float] = {}
    summary: list[tuple[int, int, int, float]] = []
    for n in shown:
        turn, bare = with_view[n - 1], without[n - 1]
        turns = past_turns(turn["earlier"])
        view = conversation_view(turns, max_tokens=BUDGET)
        actors = conversation_view(turns, max_tokens=BUDGET // 4)
        view_tokens = count_tokens_approximately([HumanMessage(view)]) if view else 0
        actor_tokens = count_tokens_approximately([HumanMessage(actors)]) if actors else 0

        def build(earlier: list[Any] = turn["earlier"]) -> None:
            made = past_turns(earlier)
            conversation_view(made, max_tokens=BUDGET)
            conversation_view(made, max_tokens=BUDGET // 4)

        build_s = median_time(build, repeat=20)
        extra = turn["tokens"] - bare["tokens"]
        table.add(
            n,
            len(turns),
            f"{view_tokens} ({actor_tokens})",
            f"{turn['tokens']} / {bare['tokens']}",
            extra,
            f"{build_s * 1e6:.0f}",
            f"{fmt_ms(turn['s'], 1)} / {fmt_ms(bare['s'], 1)}",
            f"{turn['s'] / bare['s']:.2f}x",
        )
        summary.append((n, view_tokens, extra, build_s))
        metrics[f"turn{n}.run_s"] = turn["s"]
        metrics[f"turn{n}.build_s"] = build_s
        metrics[f"turn{n}.input_tokens"] = turn["tokens"]
        if n > 1:
            metrics[f"turn{n}.view_tokens"] = view_tokens
            metrics[f"turn{n}.extra_tokens"] = extra
    late = slice(len(with_view) // 2, None)
    metrics["late.ratio"] = statistics.median(
        w["s"] / b["s"] for w, b in zip(with_view[late], without[late], strict=True)
    )
    later = [row for row in summary if row[0] > 1]
    headline = Headline(
        f"conversation view per turn: {count} turns on one thread, one-task runs, instant "
        "scripted model",
        "the same turns with max_conversation_tokens=0 (no view)",
        f"after {' / '.join(str(n - 1) for n, *_ in later)} earlier turns: view "
        f"{' / '.join(f'{v:,}' for _, v, _, _ in later)} tokens (bounded by the budget, "
        f"{BUDGET:,}), {' / '.join(f'{e:+,}' for _, _, e, _ in later)} prompt tokens per run; "
        f"building it {' / '.join(f'{b * 1e6:.0f}' for *_, b in later)} µs; run time "
        f"{metrics['late.ratio']:.2f}x in the later half (median)",
    )
    return SectionResult("conversation", [table], metrics, [headline])
