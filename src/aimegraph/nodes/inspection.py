"""The inspecting verifier: a small tool-using agent that looks at the files a run
wrote before it gives its verdict (BMW Agents' verifier, with access to what was
produced).

It is a loop inside the verifier's node (and inside the per-task check): the model,
bound to read-only workspace tools and ``submit_verdict``, calls tools until it
submits a verdict, at most ``verifier_max_steps`` times; then, or when it answers in
prose instead, one structured call asks for the verdict on what it saw. The tools
only read (``python`` recomputes), so a node retried after a crash just looks again.
The loop runs in the node's steps (:mod:`aimegraph.nodes.dual`): awaited under
``ainvoke``, tool calls included.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.runtime import Runtime
from pydantic import ValidationError

from aimegraph.config import AimeConfig, ContextSettings, ToolSettings, VerificationSettings
from aimegraph.models.calls import (
    reraise_if_retryable,
    resolve_mode,
    retrying_in_place,
    usage_of,
    with_json_instructions,
)
from aimegraph.models.json_tools import describe_tools, json_step_model, plain_conversation
from aimegraph.models.jsonparse import JsonReplyError, parse_json_reply
from aimegraph.models.steps import CallWrapper, model_call
from aimegraph.nodes.actor import transcript
from aimegraph.nodes.dual import Steps, ask_structured, blocking_call
from aimegraph.nodes.replies import reply_messages
from aimegraph.prompts import json_mode
from aimegraph.prompts import verifier as prompts
from aimegraph.state import Usage, Verdict

SUBMIT_VERDICT = "submit_verdict"

MAX_LISTED_FILES = 50


def _submit_verdict(**_: Any) -> str:
    raise ToolException("submit_verdict is read by the verifier's loop, never run")


submit_verdict = StructuredTool.from_function(
    func=_submit_verdict,
    name=SUBMIT_VERDICT,
    description="Give your verdict, citing your evidence; this ends the review.",
    args_schema=Verdict,
)
"""The verdict as a tool call (its schema is :class:`Verdict`). Bound first: a
model (or a scripted one) giving a bare structured object calls it."""


@dataclass
class Inspection:
    """The loop's outcome: a verdict (or why there is none), its usage, and what the
    verifier looked at (a citation per file read or figure recomputed)."""

    verdict: Verdict | None
    error: str | None
    usage: Usage
    looked: list[str] = field(default_factory=list)


def changed_files(root: Path, since: float | None) -> list[str]:
    """Workspace files modified at or after ``since`` (all files when None), as paths
    relative to ``root`` in name order (the newest ``MAX_LISTED_FILES`` of them);
    hidden ones skipped. Name order: files written together by parallel actors
    would otherwise be listed in a different order on every run."""
    found: list[tuple[float, str]] = []
    if not root.is_dir():
        return []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.startswith("."):
                continue
            path = Path(folder) / name
            try:
                modified = path.stat().st_mtime
            except OSError:
                continue
            if since is None or modified >= since:
                found.append((modified, path.relative_to(root).as_posix()))
    return sorted(name for _, name in sorted(found, reverse=True)[:MAX_LISTED_FILES])


def run_files(config: ToolSettings) -> Runnable[Mapping[str, Any], list[str]]:
    """A node step listing the files the run changed (:func:`changed_files` since the
    state's ``run_started_at``, in the run's workspace): it reads the file system, so
    under ``ainvoke`` it runs in a worker thread, never on the event loop."""

    def listing(state: Mapping[str, Any], *, runtime: Runtime[Any]) -> list[str]:
        workspace = Path(config.for_run(runtime).workspace)
        return changed_files(workspace, state.get("run_started_at"))

    return blocking_call(listing, name="files")


def inspects(cfg: VerificationSettings, files: Sequence[str]) -> bool:
    """Whether the verdict is the inspecting agent's (``verifier_inspects``)."""
    return cfg.verifier_inspects == "always" or (cfg.verifier_inspects == "auto" and bool(files))


def inspect(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    messages: Sequence[AnyMessage],
    *,
    config: AimeConfig,
    runtime: Runtime[Any],
    wrap: CallWrapper | None = None,
) -> Steps[Inspection]:
    """Run the inspection loop from ``messages`` (the verifier's system prompt and
    the review request), each call inside the verifier's middleware (``wrap``); see
    the module docstring."""
    by_name = {t.name: t for t in tools}
    bound = [submit_verdict, *tools]
    names = [t.name for t in bound]
    mode = resolve_mode(config.tool_calling, model)
    conversation: list[AnyMessage] = list(messages)
    usage, looked = Usage(), list[str]()
    chat = (
        model.bind_tools(bound)
        if mode == "native"
        else json_step_model(model, bound, config.server_schema)
    )
    # The first call may fail transiently and be retried by re-running the node
    # (RetryPolicy); later ones follow calls already made: retried in place.
    patient = retrying_in_place(chat)
    for _ in range(config.verifier_max_steps):
        asking = chat if usage.llm_calls == 0 else patient

        def bind(other: BaseChatModel, asking: Runnable[Any, Any] = asking) -> Runnable[Any, Any]:
            if other is model:
                return asking
            if mode == "native":  # another model a hook picked (a fallback)
                return other.bind_tools(bound)
            return json_step_model(other, bound, config.server_schema)

        sent: Sequence[BaseMessage] = conversation
        if mode == "json":
            tools_text = json_mode.TOOLS.format(tools=describe_tools(bound))
            sent = plain_conversation(with_json_instructions(conversation, tools_text))
        try:
            step, _ = model_call(model, sent, bind, wrap=wrap, runtime=runtime)
            reply = yield step
        except Exception as exc:  # noqa: BLE001 - no verdict, as data
            if usage.llm_calls == 0:  # a node retry would not count calls already made
                reraise_if_retryable(exc, runtime)
            error = f"model call failed: {type(exc).__name__}: {exc}"
            return Inspection(None, error, usage, looked)
        if mode == "json" and (verdict := _bare_verdict(reply)) is not None:
            return Inspection(
                verdict, None, usage + usage_of(reply, "verifier", config.prices), looked
            )
        added = reply_messages(reply, names, mode)
        conversation += added
        last = added[-1]
        calls = last.tool_calls if isinstance(last, AIMessage) else []
        looks = sum(call["name"] != SUBMIT_VERDICT for call in calls)
        usage = usage + usage_of(reply, "verifier", config.prices, tool_calls=looks)
        if isinstance(last, AIMessage) and not calls:
            break  # an answer in prose: asked for the verdict below
        for call in calls:
            if call["name"] == SUBMIT_VERDICT:
                try:
                    return Inspection(Verdict.model_validate(call["args"]), None, usage, looked)
                except ValidationError as exc:
                    observation = _observation(call, f"Error: invalid verdict: {exc.errors()[:3]}")
            elif call["name"] in by_name:
                observation = yield from _run(by_name[call["name"]], call, config)
                looked += _citation(call, observation)
            else:
                observation = _observation(
                    call, f"Error: no tool {call['name']!r}; choose from: {', '.join(names)}."
                )
            runtime.stream_writer({"type": "verifier", "tool": call["name"], "args": call["args"]})
            conversation.append(observation)
    final = yield from ask_structured(
        model,
        Verdict,
        [*messages, HumanMessage(prompts.VERDICT_NOW.format(seen=transcript(conversation)))],
        role="verifier",
        config=config,
        runtime=runtime,
        wrap=wrap,
    )
    return Inspection(final.value, final.error, usage + final.usage, looked)


def with_evidence(inspection: Inspection) -> Verdict | None:
    """The inspection's verdict; when it cites nothing, citing what was looked at."""
    verdict = inspection.verdict
    if verdict is None or verdict.evidence or not inspection.looked:
        return verdict
    return verdict.model_copy(update={"evidence": inspection.looked[:20]})


def _run(tool: BaseTool, call: ToolCall, config: ContextSettings) -> Steps[ToolMessage]:
    """One tool call as a step: its observation, failures included."""
    try:
        outcome = yield tool, call
    except Exception as exc:  # noqa: BLE001 - a failed look is an observation
        return _observation(call, f"Error: {type(exc).__name__}: {exc}"[:1000])
    text = outcome.text if isinstance(outcome, ToolMessage) else str(outcome)
    limit = config.max_observation_chars
    if len(text) > limit:
        text = text[:limit] + f"\n[... cut: showing {limit} of {len(text)} characters]"
    return ToolMessage(content=text, name=call["name"], tool_call_id=call["id"])


def _citation(call: ToolCall, observation: ToolMessage) -> list[str]:
    """What a call looked at, as a citation (nothing for listings and errors)."""
    if observation.status == "error":
        return []
    args: Mapping[str, Any] = call["args"]
    if call["name"] == "read_lines":
        start = int(args.get("start", 1))
        lines = observation.text.count("| ")
        return [f"{args.get('path')}:{start}-{start + max(lines, 1) - 1} (read)"]
    if call["name"] == "python":
        printed = " ".join(observation.text.split())[:200]
        return [f"recomputed with python: {printed}"]
    return []


def _bare_verdict(reply: AIMessage) -> Verdict | None:
    """A JSON-mode reply that is the verdict object itself, not a tool call."""
    try:
        data = parse_json_reply(reply.text)
        return Verdict.model_validate(data) if isinstance(data, dict) and "passed" in data else None
    except (JsonReplyError, ValidationError):
        return None


def _observation(call: ToolCall, text: str) -> ToolMessage:
    return ToolMessage(content=text, name=call["name"], tool_call_id=call["id"], status="error")
