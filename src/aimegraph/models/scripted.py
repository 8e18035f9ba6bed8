"""A deterministic chat model driven by a scenario file, for tests and the offline demo.

It is a real ``BaseChatModel``: it supports ``bind_tools`` (and so LangChain's
default ``with_structured_output``) by emitting tool calls, and it answers in
JSON text when no tools are bound, exactly as a model in ``tool_calling="json"``
mode is asked to. The graph never special-cases it; it reads the same prompts a
real model reads.

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

Scenario format (YAML or JSON; see ``scenarios/demo.yaml``)::

    goal: default goal for `aimegraph demo`
    planner:  [ {rationale, tasks: [...], drop: [...]}, ... ]
    actors:   { t1: [step, ...] }  or  { t1: {attempts: [[step, ...], [step, ...]]} }
    verifier: [ {passed, reasoning, issues}, ... ]
    task_checks: { t1: [ {passed, reasoning, issues}, ... ] }
    reporter: [ {text: "..."}, ... ]
    team_leads: { t1: [ {parts: [{member, instruction}, ...]}, ... ] }
    team_merges: { t1: [ {summary, answer, agreeing}, ... ] }
    team_speakers: { t1: [ {member}, ... ] }

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
``# Role:`` line) from the prompt itself, see :mod:`aimegraph.models.echo`: code
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

import difflib
import json
import re
import threading
import uuid
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.base import LangSmithParams
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from aimegraph.models.chunks import WholeReplyStreaming
from aimegraph.models.echo import echo_reply
from aimegraph.models.json_modes import JsonModes
from aimegraph.state import TaskSpec

Step = dict[str, Any]

_ROLE = re.compile(r"^#\s*Role:\s*(\w+)", re.MULTILINE)
_TASK = re.compile(r'<task id="([^"]+)"(?: attempt="(\d+)")?>')
_MEMBER = re.compile(r'<member name="([^"]+)" turn="(\d+)"')
_LEAD_MEMBERS = re.compile(r"^- ([\w-]+): ", re.MULTILINE)
_PLACEHOLDER = re.compile(
    r"\{(goal|answer|last_tool_output|all_results|dep:[\w.-]+|result:[\w.-]+)\}"
)
_PLACEHOLDER_NAMES = ("goal", "answer", "last_tool_output", "all_results", "dep", "result")
# Anything shaped like a placeholder: a word, optionally ``prefix:id``.
_BRACE_WORD = re.compile(r"\{(\w+)(?::([\w.-]+))?\}")


class ScenarioError(ValueError):
    """A scenario file is missing or malformed."""


class Scenario(BaseModel):
    """The parsed scenario file."""

    model_config = ConfigDict(extra="forbid")

    name: str = "inline"
    description: str = ""
    goal: str = ""
    planner: list[Step] = Field(default_factory=list)
    actors: dict[str, list[Step] | dict[str, list[list[Step]]]] = Field(default_factory=dict)
    team_leads: dict[str, list[Step]] = Field(default_factory=dict)
    team_merges: dict[str, list[Step]] = Field(default_factory=dict)
    team_speakers: dict[str, list[Step]] = Field(default_factory=dict)
    verifier: list[Step] = Field(default_factory=list)
    task_checks: dict[str, list[Step]] = Field(default_factory=dict)
    reporter: list[Step] = Field(default_factory=list)
    lesson: list[Step] = Field(default_factory=list)
    summary: list[Step] = Field(default_factory=list)
    echo: bool = False
    """Answer prompts that are not the engine's from the prompt (see the module docstring)."""

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        problems = [*self._task_field_problems()]
        problems += [
            problem
            for text in _strings(self.model_dump(include=_SCRIPTED_SECTIONS))
            for problem in _placeholder_problems(text)
        ]
        if problems:
            raise ValueError("; ".join(dict.fromkeys(problems)))
        return self

    def _planner_tasks(self) -> list[dict[str, Any]]:
        return [
            task
            for entry in self.planner
            if "raw" not in entry
            for task in entry.get("tasks") or []
            if isinstance(task, dict)
        ]

    def unplanned_scripts(self) -> list[str]:
        """Script keys (``actors``, ``task_checks``) that no planner entry defines.
        Not an error by itself: a human's edited plan may bring those tasks."""
        planned = {str(task["id"]) for task in self._planner_tasks() if "id" in task}
        # A member's script ("t1/writer") belongs to its task.
        scripted = {key.split("/")[0] for key in (*self.actors, *self.task_checks)}
        return sorted(scripted - planned) if planned else []

    def check_scripted(self, task_id: str) -> None:
        """A task without a script, while scripts exist for tasks never planned, is
        almost always a misspelled task id: refuse it instead of submitting
        ``"<title>: done"`` for it."""
        if task_id in self.actors or task_id in self.task_checks:
            return
        if any(key.startswith(f"{task_id}/") for key in self.actors):
            return
        if unplanned := self.unplanned_scripts():
            raise ScenarioError(
                f"scenario {self.name!r} has no script for task {task_id!r}, and scripts "
                f"for tasks no planner entry defines: {', '.join(unplanned)} (misspelled?)"
            )

    def _task_field_problems(self) -> list[str]:
        known = list(TaskSpec.model_fields)
        problems = []
        for task in self._planner_tasks():
            for name in task:
                if name not in known:
                    close = difflib.get_close_matches(name, known, n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    problems.append(
                        f"planner task {task.get('id', '?')!r} has an unknown field {name!r}"
                        f"{hint}; task fields: {', '.join(known)}"
                    )
        return problems

    def actor_steps(self, task_id: str, attempt: int, member: str | None = None) -> list[Step]:
        """The steps of a task's actor (by attempt), or of a member's turn (by turn)."""
        script = self.actors.get(f"{task_id}/{member}" if member else task_id, [])
        if isinstance(script, list):
            return script
        rounds = script.get("turns" if member else "attempts", [])
        if not rounds:
            return []
        return rounds[min(attempt, len(rounds)) - 1]


_SCRIPTED_SECTIONS = {
    "goal",
    "planner",
    "actors",
    "verifier",
    "task_checks",
    "reporter",
    "lesson",
    "summary",
    "team_leads",
    "team_merges",
    "team_speakers",
}
# Memory prompts (aimegraph.prompts.memory) say how many actor steps a context
# summary stands for, so step counting survives a summarised conversation.
_SUMMARISED_STEPS = re.compile(r"^Summary of your first (\d+) steps", re.MULTILINE)


def _strings(value: Any) -> list[str]:
    """Every string in a scenario section, except inside ``raw`` steps."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() if key != "raw" for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _placeholder_problems(text: str) -> list[str]:
    problems = []
    for match in _BRACE_WORD.finditer(text):
        name, ident = match.group(1), match.group(2)
        if name in ("dep", "result") and ident is not None:
            continue
        if name in _PLACEHOLDER_NAMES[:4] and ident is None:
            continue
        close = difflib.get_close_matches(name, _PLACEHOLDER_NAMES, n=1, cutoff=0.75)
        if close:
            problems.append(
                f"unknown placeholder {match.group(0)} (did you mean {{{close[0]}"
                f"{':<id>' if close[0] in ('dep', 'result') else ''}}}?)"
            )
    return problems


def load_scenario(name_or_path: str) -> Scenario:
    """Load a bundled scenario by name (``demo``) or a YAML/JSON file by path."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml", ".json") and path.is_file():
        text, name = path.read_text(encoding="utf-8"), path.stem
    else:
        bundled = resources.files("aimegraph.models") / "scenarios" / f"{name_or_path}.yaml"
        if not bundled.is_file():
            available = ", ".join(sorted(bundled_scenarios())) or "none"
            raise ScenarioError(
                f"unknown scenario {name_or_path!r}: not a .yaml/.json file and not bundled "
                f"(bundled: {available})"
            )
        text, name = bundled.read_text(encoding="utf-8"), name_or_path
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"scenario {name_or_path!r} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ScenarioError(f"scenario {name_or_path!r} must be a mapping")
    data.setdefault("name", name)
    return _validated(data)


def _validated(data: dict[str, Any]) -> Scenario:
    """The scenario, or ScenarioError with pydantic's message (a misspelled section,
    a wrong type) or the scenario checks' (see the module docstring)."""
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        details = "; ".join(
            (".".join(map(str, error["loc"])) + ": " if error["loc"] else "")
            + error["msg"].removeprefix("Value error, ")
            for error in exc.errors()
        )
        name = data.get("name", "inline")
        raise ScenarioError(f"scenario {name!r} is malformed: {details}") from exc


def bundled_scenarios() -> list[str]:
    folder = resources.files("aimegraph.models") / "scenarios"
    return [p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")]


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
        return cls(scenario=_validated(data))

    @property
    def _llm_type(self) -> str:
        return "aimegraph-scripted"

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
        if role == "actor":
            if task_match is None:
                raise ScenarioError("actor prompt without a <task id=...> block")
            task_id, attempt = task_match.group(1), int(task_match.group(2) or 1)
            self.scenario.check_scripted(task_id)
            if member := _MEMBER.search(prompt):
                steps = self.scenario.actor_steps(task_id, int(member.group(2)), member.group(1))
            else:
                steps = self.scenario.actor_steps(task_id, attempt)
            index = sum(isinstance(m, AIMessage) for m in messages)
            index += sum(int(n) for n in _SUMMARISED_STEPS.findall(prompt))
            if index < len(steps):
                return steps[index]
            title = re.search(r"^Title: (.*)$", prompt, re.MULTILINE)
            done = f"{title.group(1) if title else task_id}: done"
            return {"tool": "submit_result", "args": {"status": "completed", "summary": done}}
        if role == "verifier" and task_match is not None:
            key, entries = (
                f"check:{task_match.group(1)}",
                self.scenario.task_checks.get(task_match.group(1), []),
            )
            default: Step = {"passed": True, "reasoning": "Meets its criteria.", "issues": []}
        elif role == "verifier":
            key, entries = "verifier", self.scenario.verifier
            default = {"passed": True, "reasoning": "The answer addresses the goal.", "issues": []}
        elif role == "planner":
            if not self.scenario.planner:
                raise ScenarioError(f"scenario {self.scenario.name!r} has no planner entries")
            key, entries, default = "planner", self.scenario.planner, self.scenario.planner[-1]
        elif role in ("team_lead", "team_merge", "team_speaker") and task_match is not None:
            task_id = task_match.group(1)
            if role == "team_lead":
                entries = self.scenario.team_leads.get(task_id, [])
                heading = _section(prompt, r"Title: ([^\n]*)") or task_id
                members = _LEAD_MEMBERS.findall(_section(prompt, r"Your members:\n(.*?)(?:\n\n|$)"))
                default = {"parts": [{"member": m, "instruction": heading} for m in members]}
            elif role == "team_speaker":
                entries = self.scenario.team_speakers.get(task_id, [])
                default = {"member": _section(prompt, r"In turn order, ([\w-]+) would speak next")}
            else:
                entries = self.scenario.team_merges.get(task_id, [])
                first = _section(prompt, r"<result [^>]*>\n(.*?)</result>")
                default = {"summary": first or "no results", "agreeing": []}
            key = f"{role}:{task_id}"
        elif role in ("lesson", "summary"):
            key, entries = role, getattr(self.scenario, role)
            default = {"text": _memory_reply(role, prompt)}
        else:
            key, entries = "reporter", self.scenario.reporter
            default = {"text": "Results:\n{all_results}"}
        with self._lock:
            index = self._cursors.get(key, 0)
            self._cursors[key] = index + 1
        return entries[min(index, len(entries) - 1)] if entries else default

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


class _Filler:
    """Substitutes ``{placeholder}`` values taken from the conversation."""

    def __init__(self, messages: list[BaseMessage]) -> None:
        self._prompt = "\n".join(_text(m) for m in messages)
        self._values = {
            "last_tool_output": _last_observation(messages),
            "goal": _section(
                self._prompt, r"(?:Overall goal \(for context\)|Goal):\s*\n?(.*?)\n\n"
            ),
            "answer": _section(self._prompt, r"<answer>\n(.*?)\n</answer>"),
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
