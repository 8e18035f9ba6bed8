"""A deterministic chat model driven by a scenario file, for tests and the offline demo.

It is a real ``BaseChatModel``: it supports ``bind_tools`` (and so LangChain's
default ``with_structured_output``) by emitting tool calls, and it answers in
JSON text when no tools are bound, exactly as a model in ``tool_calling="json"``
mode is asked to. The graph never special-cases it; it reads the same prompts a
real model reads.

Which goals it plays, and which turn:

* A scenario that declares its ``goal`` plays that goal only (whitespace and case
  aside); any other goal raises :class:`ScenarioGoalError` at the first prompt that
  shows it, one line naming the scenario's goals and how to use a real model (a
  Python run ends ``failed`` with it as the reason; ``aimegraph run`` checks first,
  :func:`aimegraph.models.resolve.check_goal`, and exits 2 with it, storing
  nothing). ``any_goal: true``, or no ``goal`` at all, plays the first turn for
  any goal: tests that drive a scenario with goals of their own say so.
* ``follow_ups`` are the later turns of a thread, each a goal with its own
  sections. The turn is read from the prompt, never counted in the process: the
  goal it shows (``Goal:`` / ``Overall goal (for context):``) picks the turn, and a
  follow-up is played only when the prompt's ``<conversation>`` view shows the
  previous turn's goal (its first 100 characters at least: older turns are
  clipped). So two ``aimegraph run --thread T`` processes play turn 1, then turn 2;
  the follow-up on a thread without turn 1 is refused. A prompt that shows no goal
  (a task check, a memory prompt) plays the latest turn that scripts its task. The
  lists of a turn (planner, verifier, reporter...) start from their top.

Which reply comes next:

* The role is read from the ``# Role: <name>`` line that opens every system prompt.
* ``actor``: the task id and attempt come from the ``<task id=... attempt=...>``
  block of the task message; the step is the number of AI messages already in
  the conversation. Replies are therefore a pure function of the conversation,
  which keeps them right across retries, crashes and resumes. A task without a
  script submits ``"<title>: done"``.
* a team member's turn (``<member name=... turn=...>`` after the task block) reads
  ``actors["<task id>/<member>"]``: a list of steps for every turn, or
  ``{turns: [[step, ...], ...]}``, one list per turn of that member.
* ``team_lead``, ``team_merge`` and ``team_speaker`` (a hierarchical team's split,
  a broadcast team's merge, a joint team's choice of speaker): the next entry of
  ``team_leads`` / ``team_merges`` / ``team_speakers[<task id>]``; without one, the
  lead gives every member the task's title, the merge takes the first result,
  agreeing with nobody, and the speaker is the member whose turn it would be.
* ``planner``, ``verifier``, ``reporter``: the next entry of the role's list
  (the last one repeats once the list is used up). A verifier prompt about a
  single ``<task id=...>`` reads ``task_checks[<id>]`` instead, and passes when
  there is none.
* A verifier's pass never stands over tool errors: when the answer it judges (or a
  task check's result) shows one (:func:`tool_errors`: a traceback, ``exit code:
  N`` of a code tool, an exception line such as ``FileNotFoundError: ...``, an
  ``Error: ...`` observation), the verdict is a rejection naming the errors.

Scenario format (YAML or JSON; see ``scenarios/demo.yaml``)::

    goal: the goal it plays (the default goal of `aimegraph demo`)
    any_goal: false   # true: the first turn for any goal
    planner:  [ {rationale, tasks: [...], drop: [...]}, ... ]
    actors:   { t1: [step, ...] }  or  { t1: {attempts: [[step, ...], [step, ...]]} }
    verifier: [ {passed, reasoning, issues}, ... ]
    task_checks: { t1: [ {passed, reasoning, issues}, ... ] }
    reporter: [ {text: "..."}, ... ]
    team_leads: { t1: [ {parts: [{member, instruction}, ...]}, ... ] }
    team_merges: { t1: [ {summary, answer, agreeing}, ... ] }
    team_speakers: { t1: [ {member}, ... ] }
    follow_ups: [ {goal, planner, actors, verifier, reporter, ...}, ... ]
    stream_delay_s: 0.0   # seconds before each chunk of a streamed reply

A step is ``{tool: name, args: {...}}``, ``{calls: [{tool, args}, ...]}`` (parallel
calls), ``{text: "..."}`` (a plain reply), ``{raw: "..."}`` (sent verbatim, to
inject malformed output) or ``{error: connection|timeout|fatal, message: ...}``
(raises, to inject transient and permanent failures). A planner or verifier
entry that is not one of these is the structured object itself.

String values may use ``{goal}``, ``{answer}``, ``{last_tool_output}``,
``{dep:<id>}`` (a dependency's result in an actor prompt), ``{result:<id>}``
(a task result in a reporter prompt) and ``{all_results}``; other braces are left alone, so code in
arguments needs no escaping.

With ``echo: true`` a scenario also answers prompts that are not the engine's (no
``# Role:`` line) from the prompt itself, see :mod:`aimegraph.models.offline.echo`: code
written for any chat model (LangChain's standard tests, a chat UI) can drive it, while
the engine's prompts, which always carry their role, replay the scenario as strictly as
without it. Without ``echo`` such a prompt is answered as the reporter's.

Replies stream (``stream``, ``astream``, LangGraph's ``stream_mode="messages"``) as
the chunks of :mod:`aimegraph.models.chunks`, which add up to the reply ``invoke``
returns; a stream is the same call as an ``invoke`` (it takes the next step the same
way), so replay is the same either way. ``with_structured_output`` also takes
``method="json_schema"`` or ``"json_mode"`` (:mod:`aimegraph.models.json_modes`): a
structured entry is then sent as JSON text.

A scenario is checked when it is loaded (:class:`ScenarioError` on a mistake):
planner tasks may only use ``TaskSpec`` fields, and a brace word that is close to
a placeholder name but not one (``{last_output}``, ``{results:t1}``) is refused.
A ``raw`` step is never checked: it is how malformed output is injected. Script
keys may name tasks the planner entries do not (a human's edited plan can add
them), but an actor prompt for a task without a script, while such unplanned
scripts exist, raises ScenarioError (a misspelled task id) instead of
submitting ``"<title>: done"``.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.base import LangSmithParams
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from aimegraph.models.chunks import STREAMING, WholeReplyStreaming, chunk_count
from aimegraph.models.json_modes import JsonModes
from aimegraph.models.offline.echo import echo_reply
from aimegraph.models.offline.scenario import (
    Scenario,
    ScenarioError,
    ScenarioGoalError,
    Step,
    Turn,
    bundled_scenarios,
    load_scenario,
    validated,
)

__all__ = [
    "Scenario",
    "ScenarioError",
    "ScenarioGoalError",
    "ScriptedChatModel",
    "Step",
    "ToolSchemaChatModel",
    "bundled_scenarios",
    "load_scenario",
    "tool_errors",
]

_ROLE = re.compile(r"^#\s*Role:\s*(\w+)", re.MULTILINE)
_TASK = re.compile(r'<task id="([^"]+)"(?: attempt="(\d+)")?>')
_MEMBER = re.compile(r'<member name="([^"]+)" turn="(\d+)"')
_LEAD_MEMBERS = re.compile(r"^- ([\w-]+): ", re.MULTILINE)
_PLACEHOLDER = re.compile(
    r"\{(goal|answer|last_tool_output|all_results|dep:[\w.-]+|result:[\w.-]+)\}"
)
# The run's goal in the planner's, reporter's, verifier's and actors' prompts.
_GOAL = r"(?:Overall goal \(for context\)|Goal):\s*\n?(.*?)\n\n"
_ANSWER = r"<answer>\n(.*?)\n</answer>"
_RESULT = r"<result>\n(.*?)</result>"
_CONVERSATION = r"<conversation>\n(.*?)</conversation>"
# Memory prompts (aimegraph.prompts.memory) say how many actor steps a context
# summary stands for, so step counting survives a summarised conversation.
_SUMMARISED_STEPS = re.compile(r"^Summary of your first (\d+) steps", re.MULTILINE)
# What tools answer when they fail: a traceback, a code tool's non-zero exit, an
# exception line ("FileNotFoundError: ...") or the engine's "Error: ..." observation.
_TOOL_ERROR = re.compile(
    r"Traceback \(most recent call last\)|\bexit code: [1-9]|\b(?:[A-Z]\w*)?(?:Error|Exception): "
)
_RAISED = re.compile(r"\b(?:[A-Z]\w*)?(?:Error|Exception): ")


class ToolSchemaChatModel(BaseChatModel):
    """A chat model whose ``bind_tools`` binds the tools as OpenAI tool schemas,
    which its ``_generate`` then reads from its keyword arguments (what a provider
    would receive), so offline models answer native tool calling as real ones do."""

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | dict[str, Any] | bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        schemas = [convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=schemas, tool_choice=tool_choice, **kwargs)


class ScriptedChatModel(JsonModes, WholeReplyStreaming, ToolSchemaChatModel):
    """Replays a :class:`Scenario`; see the module docstring for the rules."""

    scenario: Scenario

    _cursors: dict[str, int] = PrivateAttr(default_factory=dict)
    _calls: list[tuple[str, str]] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def from_scenario(cls, name_or_path: str) -> ScriptedChatModel:
        return cls(scenario=load_scenario(name_or_path))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScriptedChatModel:
        return cls(scenario=validated(data))

    @property
    def _llm_type(self) -> str:
        return "aimegraph-scripted"

    def chunk_delay_s(self) -> float:
        return self.scenario.stream_delay_s

    def reset(self) -> None:
        """Start the planner, verifier and reporter lists from the top again."""
        with self._lock:
            self._cursors.clear()
            self._calls.clear()

    def prompts(self, role: str | None = None) -> list[str]:
        """The text of every prompt received so far (of one role), oldest first."""
        with self._lock:
            return [text for r, text in self._calls if role is None or r == role]

    @property
    def model_name(self) -> str:
        """The name replies carry in ``response_metadata["model_name"]``."""
        return f"scripted:{self.scenario.name}"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = LangSmithParams(
            ls_provider="aimegraph",
            ls_model_name=str(kwargs.get("model") or self.model_name),
            ls_model_type="chat",
        )
        if stop:
            params["ls_stop"] = stop
        return params

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        streaming = kwargs.pop(STREAMING, False)
        tools = kwargs.get("tools") or []
        message = self._echo(messages, kwargs) if self.scenario.echo else None
        if message is None:
            step = self._next_step(messages)
            message = self._render(step, messages, [t["function"]["name"] for t in tools])
        prompt_chars = sum(len(_text(m)) for m in messages)
        reply_chars = len(_text(message)) + len(json.dumps(message.tool_calls))
        message.usage_metadata = {
            "input_tokens": prompt_chars // 4 + 1,
            "output_tokens": reply_chars // 4 + 1,
            "total_tokens": prompt_chars // 4 + reply_chars // 4 + 2,
        }
        message.response_metadata = {"model_name": self.model_name}
        if self.scenario.stream_delay_s and not streaming:  # as long as its stream takes
            time.sleep(self.scenario.stream_delay_s * chunk_count(message))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _echo(self, messages: list[BaseMessage], call: dict[str, Any]) -> AIMessage | None:
        """The echo mode's reply, for a prompt that is not the engine's (else None)."""
        prompt = "\n".join(_text(m) for m in messages)
        if _ROLE.search(prompt):
            return None
        with self._lock:
            self._calls.append(("echo", prompt))
        return echo_reply(
            messages,
            tools=call.get("tools") or [],
            tool_choice=call.get("tool_choice"),
            response_format=call.get("response_format"),
        )

    # --- choosing the step ---

    def _next_step(self, messages: list[BaseMessage]) -> Step:
        prompt = "\n".join(_text(m) for m in messages)
        role_match = _ROLE.search(prompt)
        role = role_match.group(1) if role_match else "reporter"
        with self._lock:
            self._calls.append((role, prompt))
        task_match = _TASK.search(prompt)
        index = self._turn_of(prompt, task_match.group(1) if task_match else None)
        turn = self.scenario.turns()[index]
        if role == "actor":
            if task_match is None:
                raise ScenarioError("actor prompt without a <task id=...> block")
            return self._actor_step(turn, task_match, messages, prompt)
        key, entries, default = self._listed(role, turn, task_match, prompt)
        with self._lock:
            # Cursors are per turn: a follow-up starts its lists from the top.
            position = self._cursors.get(f"{index}:{key}", 0)
            self._cursors[f"{index}:{key}"] = position + 1
        step = entries[min(position, len(entries) - 1)] if entries else default
        if role == "verifier":
            judged = _section(prompt, _ANSWER if task_match is None else _RESULT)
            return _no_pass_over_tool_errors(step, judged)
        return step

    def _turn_of(self, prompt: str, task_id: str | None) -> int:
        """The turn a prompt belongs to, from what it shows: its goal and the earlier
        turns in its conversation view; a prompt without a goal (a task check, a
        memory prompt) by its task. Raises ScenarioGoalError for a goal the scenario
        does not play."""
        goal = _section(prompt, _GOAL)
        if goal:
            return self.scenario.turn_for(goal, _section(prompt, _CONVERSATION))
        return self.scenario.turn_scripting(task_id) if task_id else 0

    def _actor_step(
        self, turn: Turn, task_match: re.Match[str], messages: list[BaseMessage], prompt: str
    ) -> Step:
        task_id, attempt = task_match.group(1), int(task_match.group(2) or 1)
        turn.check_scripted(task_id, self.scenario.name)
        if member := _MEMBER.search(prompt):
            steps = turn.actor_steps(task_id, int(member.group(2)), member.group(1))
        else:
            steps = turn.actor_steps(task_id, attempt)
        index = sum(isinstance(m, AIMessage) for m in messages)
        index += sum(int(n) for n in _SUMMARISED_STEPS.findall(prompt))
        if index < len(steps):
            return steps[index]
        title = re.search(r"^Title: (.*)$", prompt, re.MULTILINE)
        done = f"{title.group(1) if title else task_id}: done"
        return {"tool": "submit_result", "args": {"status": "completed", "summary": done}}

    def _listed(
        self, role: str, turn: Turn, task_match: re.Match[str] | None, prompt: str
    ) -> tuple[str, list[Step], Step]:
        """The cursor key, the entries and the default step of a role that plays its
        entries in order."""
        if role == "verifier" and task_match is not None:
            task_id = task_match.group(1)
            checks = turn.task_checks.get(task_id, [])
            return f"check:{task_id}", checks, {**PASSED, "reasoning": "Meets its criteria."}
        if role == "verifier":
            return "verifier", turn.verifier, PASSED
        if role == "planner":
            if not turn.planner:
                raise ScenarioError(f"scenario {self.scenario.name!r} has no planner entries")
            return "planner", turn.planner, turn.planner[-1]
        if role in ("team_lead", "team_merge", "team_speaker") and task_match is not None:
            return _team_entries(role, turn, task_match.group(1), prompt)
        if role in ("lesson", "summary"):
            return role, getattr(turn, role), {"text": _memory_reply(role, prompt)}
        return "reporter", turn.reporter, {"text": "Results:\n{all_results}"}

    # --- turning a step into a message ---

    def _render(self, step: Step, messages: list[BaseMessage], tool_names: list[str]) -> AIMessage:
        fill = _Filler(messages)
        if "error" in step:
            kind, text = step["error"], step.get("message", "scripted failure")
            errors: dict[str, type[Exception]] = {
                "connection": ConnectionError,
                "timeout": TimeoutError,
            }
            raise errors.get(kind, RuntimeError)(text)
        if "raw" in step:
            return AIMessage(content=fill(step["raw"]))
        if "text" in step:
            return AIMessage(content=fill(step["text"]))
        if "tool" in step or "calls" in step:
            calls = step.get("calls") or [step]
            payload = [(c["tool"], fill(c.get("args", {}))) for c in calls]
        else:
            # A structured object (plan or verdict): sent as a call of the one
            # bound schema tool, or as JSON text when nothing is bound.
            payload = [(tool_names[0] if tool_names else "", fill(step))]
        if not tool_names:
            body = [p[1] if not p[0] else {"tool": p[0], "args": p[1]} for p in payload]
            return AIMessage(content=json.dumps(body[0] if len(body) == 1 else body, indent=1))
        return AIMessage(
            content="",
            tool_calls=[
                {
                    "name": name,
                    "args": args,
                    "id": f"call_{uuid.uuid4().hex[:12]}",
                    "type": "tool_call",
                }
                for name, args in payload
            ],
        )


PASSED: Step = {"passed": True, "reasoning": "The answer addresses the goal.", "issues": []}
"""A verifier's verdict when its list is empty."""


def tool_errors(text: str) -> list[str]:
    """The lines of ``text`` that show a tool error (a traceback, a non-zero exit, an
    exception line, an ``Error:`` observation), exception lines first."""
    lines = list(dict.fromkeys(ln.strip() for ln in text.splitlines() if _TOOL_ERROR.search(ln)))
    return sorted(lines, key=lambda line: not _RAISED.search(line))


def _no_pass_over_tool_errors(step: Step, judged: str) -> Step:
    """A scripted pass does not stand over an answer (or a task result) that shows
    tool errors: the verdict becomes a rejection naming them."""
    if step.get("passed") is not True or not (errors := tool_errors(judged)):
        return step
    return {
        "passed": False,
        "reasoning": f"It shows tool errors instead of results: {errors[0]}",
        "issues": [f"tool error: {line}" for line in errors[:3]],
    }


def _team_entries(role: str, turn: Turn, task_id: str, prompt: str) -> tuple[str, list[Step], Step]:
    """A team's lead, merge or speaker entries (and the default without one)."""
    if role == "team_lead":
        heading = _section(prompt, r"Title: ([^\n]*)") or task_id
        members = _LEAD_MEMBERS.findall(_section(prompt, r"Your members:\n(.*?)(?:\n\n|$)"))
        default: Step = {"parts": [{"member": m, "instruction": heading} for m in members]}
        return f"{role}:{task_id}", turn.team_leads.get(task_id, []), default
    if role == "team_speaker":
        default = {"member": _section(prompt, r"In turn order, ([\w-]+) would speak next")}
        return f"{role}:{task_id}", turn.team_speakers.get(task_id, []), default
    first = _section(prompt, r"<result [^>]*>\n(.*?)</result>")
    default = {"summary": first or "no results", "agreeing": []}
    return f"{role}:{task_id}", turn.team_merges.get(task_id, []), default


class _Filler:
    """Substitutes ``{placeholder}`` values taken from the conversation."""

    def __init__(self, messages: list[BaseMessage]) -> None:
        self._prompt = "\n".join(_text(m) for m in messages)
        self._values = {
            "last_tool_output": _last_observation(messages),
            "goal": _section(self._prompt, _GOAL),
            "answer": _section(self._prompt, _ANSWER),
            "all_results": "\n".join(
                m.strip() for m in re.findall(r"<result [^>]*>\n(.*?)</result>", self._prompt, re.S)
            ),
        }

    def _lookup(self, match: re.Match[str]) -> str:
        name = match.group(1)
        if name.startswith(("dep:", "result:")):
            tag = "dependency" if name.startswith("dep:") else "result"
            ident = re.escape(name.split(":", 1)[1])
            return _section(self._prompt, rf'<{tag} id="{ident}"[^>]*>\n(.*?)</{tag}>')
        return self._values[name]

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return _PLACEHOLDER.sub(self._lookup, value)
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        return value


def _memory_reply(role: str, prompt: str) -> str:
    """Without a scripted entry: a lesson joins the first lines of what failed and
    what worked; a summary keeps the observation lines holding figures or paths."""
    if role == "lesson":
        failure = _section(prompt, r"<failure>\n(.*?)\n</failure>").split("\n")[0]
        success = _section(prompt, r"<success>\n(.*?)\n</success>").split("\n")[0]
        return f"What went wrong: {failure} What worked: {success}"
    observed = _section(prompt, r"<observations>\n(.*?)\n</observations>")
    kept = [line.strip() for line in observed.splitlines() if re.search(r"\d|/|\\", line)]
    return "\n".join(kept[:40]) or observed[:500]


def _last_observation(messages: list[BaseMessage]) -> str:
    """The newest tool result: a ToolMessage, or in JSON mode the flattened
    "Observation from <tool>:" turn that stands for one."""
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            return _text(message).strip()
        found = re.findall(r"Observation from [^:\n]+:\n(.*?)(?=\n\n|\Z)", _text(message), re.S)
        if found:
            return str(found[-1]).strip()
    return ""


def _section(text: str, pattern: str) -> str:
    match = re.search(pattern, text, re.S)
    return match.group(1).strip() if match else ""


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(part if isinstance(part, str) else str(part.get("text", "")) for part in content)
