"""Printing a thread's state: status, checklist, verdict, usage, where the time went
(and with ``--timeline`` a text Gantt chart), final answer, pending interrupts, and
what to do next (or all of it as JSON with ``--json``)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from langchain_core.load import dumpd
from langgraph.types import StateSnapshot
from rich.console import Console
from rich.markup import escape

from aimegraph.checkpoints import interrupt_fields, run_state
from aimegraph.cli.waiting import deadline_line, resume_hint
from aimegraph.models.response_format import answer_as_json
from aimegraph.state import (
    PastRun,
    Usage,
    render_checklist,
    render_timeline,
    run_timeline,
    thread_usage,
)
from aimegraph.state.timing import counted
from aimegraph.waits import WAIT_KINDS

__all__ = [
    "Shown",
    "print_summary",
    "report",
    "report_cancel",
    "share_line",
    "show_interrupts",
    "summary",
    "time_line",
    "usage_line",
]


class Shown(NamedTuple):
    """What a run's live view left on the screen, which its summary does not repeat."""

    answer: str = ""
    """The final answer as it was streamed (``--stream``)."""
    checklist: str = ""
    """The last checklist shown."""


NOTHING_SHOWN = Shown()


def report(
    snapshot: StateSnapshot,
    thread_id: str,
    args: argparse.Namespace,
    console: Console,
    *,
    holder: str | None = None,
    streamed: Shown = NOTHING_SHOWN,
    heading: bool = False,
) -> str:
    """Print a thread's state (as JSON with --json) and what to do next; returns its
    status. ``holder`` is the live process running it, if one does: then it is
    ``running`` and nothing suggests resuming it. What the live view ``streamed``
    (the answer as it was written, the checklist as it ended) is not printed again.
    With ``heading`` (``show``, ``wait``: nothing above it) it starts with the thread
    and its goal; else (after a run's live view) with a blank line."""
    state = run_state(snapshot, live=holder is not None)
    data = summary(snapshot.values, thread_id, state)
    data["interrupts"] = [{"id": i.id, **interrupt_fields(i.value)} for i in snapshot.interrupts]
    data["holder"] = holder
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return state
    print_summary(data, console, streamed=streamed, heading=heading)
    if getattr(args, "timeline", False):
        console.print("\n[bold]timeline[/bold] (seconds since the run started):")
        console.print(render_timeline(run_timeline(snapshot.values)), markup=False)
    if snapshot.interrupts:
        show_interrupts(snapshot.interrupts, console)
        console.print(f"resume with: {resume_hint(thread_id, snapshot.interrupts)}", markup=False)
    elif state == "running":
        console.print(
            f"running now ({holder}); stop it with: aimegraph cancel {thread_id}", markup=False
        )
    elif state == "stopped":
        left = (
            f"next: {', '.join(snapshot.next)}"
            if snapshot.next
            else "its last step's results saved"
        )
        console.print(
            f"stopped before finishing ({left}); carry on with: aimegraph resume {thread_id}"
        )
    return state


def summary(values: dict[str, Any], thread_id: str, state: str) -> dict[str, Any]:
    """A thread's state as a JSON-ready record."""
    tasks = values.get("tasks") or {}
    usage = values.get("usage")
    verdict = values.get("verdict")
    return {
        "thread_id": thread_id,
        "status": state,
        "reason": values.get("reason"),
        "goal": values.get("goal"),
        "final_answer": values.get("final_answer"),
        "structured_response": answer_as_json(values.get("structured_response")),
        "checklist": render_checklist(tasks, cancelled=state == "cancelled"),
        "tasks": {tid: t.model_dump(mode="json") for tid, t in tasks.items()},
        "verdict": verdict.model_dump(mode="json") if verdict is not None else None,
        "usage": usage.model_dump(mode="json") if usage is not None else None,
        "thread_usage": thread_usage(values).model_dump(mode="json")
        if values.get("runs")
        else None,
        "runs": [_past_run(run) for run in values.get("runs") or []],
        "replans": values.get("replans", 0),
        "prompt_version": values.get("prompt_version"),
        "timeline": run_timeline(values).as_dict(),
    }


def print_summary(
    data: dict[str, Any],
    console: Console,
    *,
    streamed: Shown = NOTHING_SHOWN,
    heading: bool = False,
) -> None:
    reason = data.get("reason")
    if heading:
        console.print(f"[bold]thread:[/bold] {escape(data['thread_id'])}")
        if goal := data.get("goal"):
            console.print(f"[bold]goal:[/bold] {escape(' '.join(goal.split()))}")
    console.print(
        ("" if heading else "\n")
        + f"[bold]status:[/bold] {data['status']}"
        # A cancel without a reason given records "cancelled": said once is enough.
        + (f" ({escape(reason)})" if reason and reason != data["status"] else "")
    )
    if data["checklist"] != streamed.checklist:
        console.print(data["checklist"], markup=False)
    if data.get("verdict"):
        v = data["verdict"]
        console.print(
            f"[bold]verdict:[/bold] {'passed' if v['passed'] else 'rejected'}: "
            + escape(v["reasoning"])
        )
    if usage := data.get("usage"):
        unknown = usage.get("unknown_tasks") or []
        more = f", more unknown ({', '.join(unknown)})" if unknown else ""
        console.print(f"[bold]usage:[/bold] {usage_line(usage)}{escape(more)}")
        # By model only when there were several (a fallback chain, per-role models).
        for title, key, least, unknown_key in (
            ("by task", "by_task", 1, "unknown_tasks"),
            ("by team member", "by_member", 1, "unknown_members"),
            ("by model", "by_model", 2, ""),
        ):
            if len(shares := usage.get(key) or {}) >= least:
                console.print(f"  {title}:")
                unknown = (usage.get(unknown_key) or []) if unknown_key else []
                for name, share in _in_plan_order(shares, data["tasks"]):
                    line = share_line(share, known=name not in unknown)
                    console.print(f"    {name}: {line}", markup=False)
                rest = (usage.get("outside_tasks") or {}) if key == "by_task" else {}
                if rest.get("llm_calls") or rest.get("tool_calls"):
                    console.print(f"    outside tasks: {usage_line(rest)}", markup=False)
    if timing := time_line(data.get("timeline") or {}):
        console.print(f"[bold]time:[/bold] {timing}")
    for number, run in enumerate(data.get("runs") or [], start=1):
        console.print(
            f"  earlier run {number}: {run['status']}, {usage_line(run['usage'])}: "
            + escape(run["goal"][:60])
        )
    if data.get("thread_usage"):
        console.print(f"  thread total: {usage_line(data['thread_usage'])}", markup=False)
    if (answer := data.get("final_answer")) and answer.strip() == streamed.answer.strip():
        console.print("\n[bold]final answer:[/bold] as streamed above")
    elif answer:
        typed = " (typed: structured_response)" if data.get("structured_response") else ""
        console.print(f"\n[bold]final answer{typed}:[/bold]")
        console.print(answer, markup=False)


def _in_plan_order(
    shares: dict[str, dict[str, Any]], tasks: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """Usage shares in the checklist's order (tasks by their place in the plan), as
    they are recorded in the order actors finished; names the plan does not hold
    (team members, archived tasks) follow, sorted."""
    place = {task_id: number for number, task_id in enumerate(tasks)}
    return sorted(shares.items(), key=lambda item: (place.get(item[0], len(place)), item[0]))


def time_line(timeline: dict[str, Any]) -> str:
    """Where a run's time went (a timeline as JSON) on one line: how long it took, how
    long until its first task started, and its critical path; empty before any bar."""
    if not timeline.get("bars"):
        return ""
    parts = [f"{timeline['elapsed_s']:.2f} s"]
    if (first := timeline.get("time_to_first_task_s")) is not None:
        parts.append(f"first task after {first:.2f} s")
    if path := timeline.get("critical_path"):
        chain = " -> ".join(path)
        parts.append(f"critical path {timeline['critical_path_s']:.2f} s ({escape(chain)})")
    return ", ".join(parts)


def usage_line(usage: dict[str, Any]) -> str:
    """A usage record (as JSON) on one line: calls, tokens (cached input and reasoning
    among them, when any), tool calls, cost when priced."""
    tokens_in = f"{usage['input_tokens']} in"
    if cached := usage.get("cached_input_tokens"):
        tokens_in += f" ({cached} cached)"
    tokens_out = f"{usage['output_tokens']} out"
    if reasoning := usage.get("reasoning_tokens"):
        tokens_out += f" ({reasoning} reasoning)"
    line = (
        f"{counted(usage['llm_calls'], 'LLM call')}, {tokens_in} / {tokens_out} tokens, "
        f"{counted(usage.get('tool_calls', 0), 'tool call')}"
    )
    return line + (f", ${usage['cost_usd']:.4f}" if usage.get("cost_usd") else "")


def share_line(share: dict[str, Any], *, known: bool = True) -> str:
    """A task's or member's usage on one line; one whose agent reported none (an
    agent unit) is unknown, or more than counted when some of it was."""
    if known:
        return usage_line(share)
    if not share.get("llm_calls") and not share.get("input_tokens"):
        return "unknown (its agent reports no usage)"
    return f"{usage_line(share)}, more unknown (an agent reports no usage)"


def _past_run(run: PastRun) -> dict[str, Any]:
    usage = run.get("usage") or Usage()
    return {
        "goal": run.get("goal", ""),
        "status": run.get("status"),
        "usage": usage.model_dump(mode="json"),
    }


def show_interrupts(
    interrupts: Sequence[Any], console: Console, *, now: float | None = None
) -> None:
    """What each interrupt waits for and, for a timed human wait, its deadline (and the
    time left at ``now``) and default."""
    for item in interrupts:
        value = interrupt_fields(item.value)
        kind = value.pop("kind", "interrupt")
        error = value.pop("error", None)
        deadline = default = None
        if kind in WAIT_KINDS:  # its terms have a line of their own (None: no timeout)
            deadline, default = value.pop("deadline", None), value.pop("default", None)
            value.pop("timeout_s", None)
        console.print(f"\n[yellow]waiting ({kind})[/yellow] id={item.id}")
        if kind == "approve_plan":
            console.print(value.get("checklist", ""), markup=False)
        elif kind == "approve_tool":
            console.print(
                f"task {value.get('task_id')} calls {value.get('tool')} with "
                + json.dumps(value.get("args"), default=str),
                markup=False,
            )
        elif kind == "escalation":
            console.print(f"needs a human: {value.get('reason')}", markup=False)
            for task in value.get("failed_tasks") or []:
                console.print(f"  failed {task['id']}: {task['reason']}", markup=False)
            console.print(value.get("checklist", ""), markup=False)
            console.print(f"choices: {', '.join(value.get('choices') or [])}", markup=False)
        else:
            console.print(json.dumps(dumpd(value), indent=1, default=str), markup=False)
        if deadline is not None:
            console.print(deadline_line(kind, deadline, default, now=now), markup=False)
        if error:
            console.print(f"[red]{escape(error)}[/red]")


def report_cancel(
    args: argparse.Namespace, thread_id: str, outcome: str, console: Console, *, follow: str
) -> None:
    """Print what ``aimegraph cancel`` did: ``cancelled`` at once, or a stop asked of
    the runner holding the thread (``follow`` says how to watch it end)."""
    if args.json:
        print(json.dumps({"thread_id": thread_id, "status": outcome}))
    elif outcome == "cancelled":
        console.print(f"cancelled {thread_id}", markup=False)
    else:
        console.print(
            f"cancel requested: the runner holding {thread_id} stops it at its next step "
            f"(follow it with: {follow})",
            markup=False,
        )
