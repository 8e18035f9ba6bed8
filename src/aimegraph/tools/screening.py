"""Tool guardrails on one call, in the ``tools`` step every tool call goes through
(an actor's, and a tool step's: :mod:`aimegraph.nodes.tool_step`).

Before a call runs, the ``tool_input`` guardrails screen its arguments: a tripwire
answers the call with an error observation instead of running it, a redaction runs it
with the redacted arguments (the observation says so, so that the model knows what
ran). After it ran, the ``tool_output`` guardrails screen its output before the model
sees it: a tripwire withholds it, a redaction (a flagged or quarantined output)
replaces it. A tripped observation carries :data:`TRIPWIRE` in its
``response_metadata``: the actor's next step settles the task with it (see
:func:`tripwire_in`) and the run ends ``blocked``. Model-backed checks' usage comes
back with the observation, as a ``Command`` update.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from aimegraph.guardrails import Guards, Screened, Subject
from aimegraph.prompts import guardrails as prompts
from aimegraph.state import Usage

TRIPWIRE = "guardrail_tripwire"
"""Key in a tripped observation's ``response_metadata``: why the guardrail tripped."""


class CallScreening:
    """One call's way through the tool guardrails (usage and notes gathered on the way)."""

    def __init__(self, guards: Guards, request: ToolCallRequest) -> None:
        self.guards = guards
        self.request = request
        self.usage = Usage()
        self.notes: list[str] = []

    @property
    def tool(self) -> str:
        return str(self.request.tool_call["name"])

    def call_subject(self) -> Subject | None:
        """The call's arguments to screen (None: no ``tool_input`` guardrail)."""
        if not self.guards.at("tool_input"):
            return None
        return Subject.of_call(self.tool, self.request.tool_call["args"], goal=self._goal())

    def take_call(self, screened: Screened) -> ToolCallRequest | ToolMessage:
        """The request to run (with redacted arguments), or the answer to a tripped call."""
        self._heard(screened)
        call = self.request.tool_call
        if (finding := screened.tripwire) is not None:
            text = prompts.CALL_BLOCKED.format(tool=self.tool, finding=finding.describe())
            return _tripped(str(call["id"]), self.tool, text, finding.describe())
        if not screened.redacted or screened.subject.args is None:
            return self.request
        args = dict(screened.subject.args)
        for finding in screened.findings:
            self.notes.append(
                prompts.ARGS_REDACTED.format(
                    finding=finding.describe(), tool=self.tool, args=json.dumps(args, default=str)
                )
            )
        return self.request.override(tool_call={**call, "args": args})

    def output_subject(self, outcome: ToolMessage | Command) -> Subject | None:
        """The output to screen (None: no ``tool_output`` guardrail, or a ``Command``)."""
        if not isinstance(outcome, ToolMessage) or not self.guards.at("tool_output"):
            return None
        return Subject("tool_output", outcome.text, tool=self.tool, goal=self._goal())

    def take_output(self, outcome: ToolMessage, screened: Screened) -> ToolMessage:
        """The observation the model gets: withheld after a tripwire, else as redacted."""
        self._heard(screened)
        if (finding := screened.tripwire) is not None:
            text = prompts.OUTPUT_WITHHELD.format(tool=self.tool, finding=finding.describe())
            return _tripped(outcome.tool_call_id, self.tool, text, finding.describe())
        if not screened.redacted:
            return outcome
        return outcome.model_copy(update={"content": screened.subject.text})

    def finish(self, outcome: ToolMessage | Command) -> ToolMessage | Command:
        """``outcome`` with the redaction notes before its text and, when a model-backed
        check spent any, the usage beside it."""
        if isinstance(outcome, ToolMessage) and self.notes:
            outcome = outcome.model_copy(update={"content": "\n".join([*self.notes, outcome.text])})
        if not self.usage.llm_calls or not isinstance(outcome, ToolMessage):
            return outcome
        return Command(update={"messages": [outcome], "usage": self.usage})

    def _goal(self) -> str | None:
        """The run's goal, as the actor (or tool step) making the call was given it."""
        state = self.request.state
        goal = state.get("goal") if isinstance(state, dict) else None
        return str(goal) if goal is not None else None

    def _heard(self, screened: Screened) -> None:
        self.usage = self.usage + screened.usage
        if screened.findings:
            task = self.request.state.get("task") if isinstance(self.request.state, dict) else None
            keys: dict[str, Any] = {"task_id": task.id} if task is not None else {}
            self.request.runtime.stream_writer(screened.event(**keys))


def _tripped(call_id: str, tool: str, text: str, why: str) -> ToolMessage:
    return ToolMessage(
        content=text,
        name=tool,
        tool_call_id=call_id,
        status="error",
        response_metadata={TRIPWIRE: why},
    )


def tripwire_in(messages: Sequence[AnyMessage]) -> str | None:
    """Why a guardrail tripped on a call of the newest reply, if one did: the
    observations after the last AI message."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return None
        if isinstance(message, ToolMessage) and (why := message.response_metadata.get(TRIPWIRE)):
            return str(why)
    return None
