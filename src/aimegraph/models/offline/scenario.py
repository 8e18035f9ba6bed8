"""The scenario of the scripted model (:mod:`aimegraph.models.offline.scripted`): its file
format, its checks on load, and which turn of it a goal plays.

A scenario that declares its goal (``goal``, and the goal of each of its
``follow_ups``) plays those goals only: :meth:`Scenario.turn_for` refuses any other
with :class:`ScenarioGoalError`, one line naming the scenario's goals and how to
use a real model. ``any_goal: true`` (or no ``goal`` at all) makes it play its first
turn for any goal, its ``goal`` then only being the default (``aimegraph demo``).
"""

from __future__ import annotations

import difflib
import re
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from aimegraph.state import TaskSpec

Step = dict[str, Any]

_PLACEHOLDER = re.compile(
    r"\{(goal|answer|last_tool_output|all_results|dep:[\w.-]+|result:[\w.-]+)\}"
)
_PLACEHOLDER_NAMES = ("goal", "answer", "last_tool_output", "all_results", "dep", "result")
# Anything shaped like a placeholder: a word, optionally ``prefix:id``.
_BRACE_WORD = re.compile(r"\{(\w+)(?::([\w.-]+))?\}")


class ScenarioError(ValueError):
    """A scenario file is missing or malformed."""


class ScenarioGoalError(ScenarioError):
    """A scenario was asked a goal it was not written for (see :meth:`Scenario.turn_for`)."""


REAL_MODELS = (
    "for any goal use a real model: --model openai:<model> (with OPENAI_API_KEY, or "
    "OPENAI_BASE_URL for an OpenAI-compatible server such as vLLM, Ollama or llama.cpp), "
    "or --model local (extra [local])"
)

# How much of an earlier goal must show in a conversation view: the view clips the
# questions of older turns, never to less than this.
_GOAL_OPENING = 100


class Turn(BaseModel):
    """One turn of a scenario: the goal it answers and the scripts that answer it."""

    model_config = ConfigDict(extra="forbid")

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

    @model_validator(mode="after")
    def _check(self) -> Turn:
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

    def scripts(self, task_id: str) -> bool:
        """Whether the turn has a script for the task (its actor's, a member's, its check)."""
        if task_id in self.actors or task_id in self.task_checks:
            return True
        return any(key.startswith(f"{task_id}/") for key in self.actors)

    def check_scripted(self, task_id: str, scenario: str) -> None:
        """A task without a script, while scripts exist for tasks never planned, is
        almost always a misspelled task id: refuse it instead of submitting
        ``"<title>: done"`` for it."""
        if self.scripts(task_id):
            return
        if unplanned := self.unplanned_scripts():
            raise ScenarioError(
                f"scenario {scenario!r} has no script for task {task_id!r}, and scripts "
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


class Scenario(Turn):
    """The parsed scenario file: its first turn, then its ``follow_ups``."""

    name: str = "inline"
    description: str = ""
    echo: bool = False
    """Answer prompts that are not the engine's from the prompt (see the module docstring)."""
    any_goal: bool = False
    """Play the first turn for any goal, not only for ``goal``."""
    stream_delay_s: float = Field(0.0, ge=0)
    """Seconds before each chunk of a streamed reply (a word, or 16 characters of a tool
    call's arguments): a model's pace, for benches and crash tests of streamed plans."""
    follow_ups: list[Turn] = Field(default_factory=list)
    """The later turns of a thread, each played when its goal follows the turn before."""

    @model_validator(mode="after")
    def _check_follow_ups(self) -> Scenario:
        if self.follow_ups and not all(t.goal.strip() for t in self.turns()):
            raise ValueError("a scenario with follow_ups needs a goal, and so does each follow-up")
        return self

    def turns(self) -> list[Turn]:
        return [self, *self.follow_ups]

    def turn_for(self, goal: str, conversation: str = "") -> int:
        """The index of the turn that plays ``goal``, given the text that shows the
        thread's earlier turns (a prompt's conversation view, or their requests).

        A declared goal plays its turn; a follow-up's only when ``conversation`` shows
        the goal of the turn before it (its opening at least), so which turn is played
        follows the thread, not the process. Any other goal plays the first turn
        with ``any_goal`` or without a declared goal.

        Raises:
            ScenarioGoalError: for any other goal, and for a follow-up whose earlier
                turn the conversation does not show.
        """
        asked, shown = _plain(goal), _plain(conversation)
        turns = self.turns()
        for index, turn in enumerate(turns):
            if turn.goal and _plain(turn.goal) == asked:
                earlier = turns[index - 1].goal if index else ""
                if not earlier or _plain(earlier)[:_GOAL_OPENING] in shown:
                    return index
                raise ScenarioGoalError(
                    f"scenario {self.name!r} plays {_quoted(turn.goal)} only as the follow-up "
                    f"of {_quoted(earlier)} on the same thread: run that goal first, then "
                    f"this one on its thread (--thread THREAD); {REAL_MODELS}"
                )
        if self.any_goal or not self.goal.strip():
            return 0
        listed = " then, on the same thread, ".join(_quoted(t.goal) for t in turns)
        goals = "goals" if len(turns) > 1 else "goal"
        raise ScenarioGoalError(
            f"scenario {self.name!r} plays only the {goals} it was written for ({listed}), "
            f"not {_quoted(goal)}; {REAL_MODELS}"
        )

    def turn_scripting(self, task_id: str) -> int:
        """The latest turn with a script for the task (the first when none has one):
        the turn of a prompt that shows no goal (a task check)."""
        found = [i for i, turn in enumerate(self.turns()) if turn.scripts(task_id)]
        return found[-1] if found else 0


def _plain(text: str) -> str:
    """The text as goals are compared: whitespace collapsed, case folded."""
    return " ".join(text.split()).casefold()


def _quoted(goal: str, limit: int = 240) -> str:
    flat = " ".join(goal.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 3] + "...")


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
    return validated(data)


def validated(data: dict[str, Any]) -> Scenario:
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
