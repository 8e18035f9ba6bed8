"""Printing a thread's state: status, checklist, verdict, usage, final answer,
pending interrupts, and what to do next (or all of it as JSON with ``--json``)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from langchain_core.load import dumpd
from langgraph.types import StateSnapshot
from rich.console import Console
from rich.markup import escape

from aimegraph.checkpoints import run_state
from aimegraph.state import render_checklist

__all__ = ["print_summary", "report", "show_interrupts", "summary"]


def report(
    snapshot: StateSnapshot, thread_id: str, args: argparse.Namespace, console: Console
) -> str:
    """Print a thread's state (as JSON with --json) and what to do next; returns its status."""
    state = run_state(snapshot)
    data = summary(snapshot.values, thread_id, state)
    data["interrupts"] = [{"id": i.id, **i.value} for i in snapshot.interrupts]
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return state
    print_summary(data, console)
    if snapshot.interrupts:
        show_interrupts(snapshot.interrupts, console)
        console.print(
            f"resume with: aimegraph resume {thread_id} --approve "
            "(or --reject REASON, --answer TEXT, --edit-args JSON, --plan-file JSON, --replan)"
        )
    elif snapshot.next:
        console.print(
            f"stopped before finishing (next: {', '.join(snapshot.next)}); "
            f"carry on with: aimegraph resume {thread_id}"
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
        "checklist": render_checklist(tasks),
        "tasks": {tid: t.model_dump(mode="json") for tid, t in tasks.items()},
        "verdict": verdict.model_dump(mode="json") if verdict is not None else None,
        "usage": usage.model_dump(mode="json") if usage is not None else None,
        "replans": values.get("replans", 0),
        "prompt_version": values.get("prompt_version"),
    }


def print_summary(data: dict[str, Any], console: Console) -> None:
    console.print(
        f"\n[bold]status:[/bold] {data['status']}"
        + (f" ({escape(data['reason'])})" if data.get("reason") else "")
    )
    console.print(data["checklist"], markup=False)
    if data.get("verdict"):
        v = data["verdict"]
        console.print(
            f"[bold]verdict:[/bold] {'passed' if v['passed'] else 'rejected'}: "
            + escape(v["reasoning"])
        )
    if data.get("usage"):
        u = data["usage"]
        console.print(
            f"[bold]usage:[/bold] {u['llm_calls']} LLM calls, {u['input_tokens']} in / "
            f"{u['output_tokens']} out tokens, {u['tool_calls']} tool calls"
        )
    if data.get("final_answer"):
        console.print("\n[bold]final answer:[/bold]")
        console.print(data["final_answer"], markup=False)


def show_interrupts(interrupts: Sequence[Any], console: Console) -> None:
    for item in interrupts:
        value = dict(item.value)
        kind = value.pop("kind", "interrupt")
        error = value.pop("error", None)
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
            if value.get("deadline"):
                console.print(
                    f"unanswered, it takes '{value['default']}' after {value['timeout_s']:g} s"
                )
        else:
            console.print(json.dumps(dumpd(value), indent=1, default=str), markup=False)
        if error:
            console.print(f"[red]{escape(error)}[/red]")
