"""AgentDojo (ETH Zurich, ``pip install 'aimegraph[agentdojo]'``) as eval suites.

``agentdojo:<suite>[@<version>]`` (suites ``workspace``, ``travel``, ``banking``,
``slack``; version default :data:`DEFAULT_VERSION`) is one suite task per user task:
its prompt as the goal, the suite's functions as every system's tools over a fresh
environment per rollout (:class:`AgentDojoWorld`), and AgentDojo's own utility
check on the environment, the answer and the calls made. Under an attack
(``attack="important_instructions"``, AgentDojo's attacks) the tasks are the pairs of
a user task and an injection task (``user_task_3.injection_task_1``), the
environment carries the attack's text in the injection points the user task's
ground truth reads, and a second check runs AgentDojo's security function: it
passes when the attacker's goal was *not* reached (:func:`attack_figures`).

The oracle of each task is its ground truth, played as one stage: the calls of
``ground_truth()`` on the task's starting environment, then its
``GROUND_TRUTH_OUTPUT`` (as AgentDojo's own ``GroundTruthPipeline`` does).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from aimegraph.eval.checkers import CheckInput
from aimegraph.eval.environment import RolloutEnvironment
from aimegraph.eval.public import Injection, PublicSuite
from aimegraph.eval.suite import AttackChecks, Check, Oracle, Suite, SuiteError, Task
from aimegraph.eval.summary import attack_figures as figures_of

__all__ = [
    "DEFAULT_VERSION",
    "SUITES",
    "AgentDojoWorld",
    "attack_figures",
    "load_agentdojo",
    "security_check",
    "utility_check",
]

DEFAULT_VERSION = "v1.2.2"
"""The AgentDojo benchmark version used unless the suite names one (``@v1.2.1``)."""

SUITES = ("workspace", "travel", "banking", "slack")

_MODULE = "aimegraph.eval.public.agentdojo"
UTILITY = Check(python=f"{_MODULE}:utility_check")
SECURITY = Check(python=f"{_MODULE}:security_check")

_EMPTY_ANSWER = "Done."
"""The oracle's answer where the ground truth gives none (the check reads no answer)."""


@dataclass
class AgentDojoWorld:
    """One rollout's AgentDojo environment: the calls made on it (the trace
    AgentDojo's trace-based checks read), and what its checks need."""

    suite: Any
    user_task: Any
    injection_task: Any
    pre_environment: Any
    environment: Any
    calls: list[Any] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def call(self, function: str, args: Mapping[str, Any]) -> str:
        """Run ``function`` on the environment, as AgentDojo's tool executor does:
        its result as YAML text, or its error as ``ErrorType: message``."""
        from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
        from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime

        with self._lock:  # aimegraph may run independent tasks at once
            self.calls.append(FunctionCall(function=function, args=dict(args)))
            runtime = FunctionsRuntime(self.suite.tools)
            result, error = runtime.run_function(self.environment, function, dict(args))
        return error if error is not None else tool_result_to_str(result)

    def tools(self) -> list[BaseTool]:
        """The suite's functions as LangChain tools over this environment, with
        AgentDojo's own argument schemas."""
        return [self._tool(function) for function in self.suite.tools]

    def _tool(self, function: Any) -> BaseTool:
        def run(**kwargs: Any) -> str:
            return self.call(function.name, kwargs)

        return StructuredTool.from_function(
            func=run,
            name=function.name,
            description=function.description,
            args_schema=function.parameters,
        )

    def judge(self, task: Any, answer: str) -> bool:
        """AgentDojo's own check of ``task`` (utility of a user task, success of an
        injection task) on this environment, the answer and the calls."""
        from agentdojo.types import text_content_block_from_string

        # The suite's own dispatch: a task's trace-based check when it has one,
        # else its check on the environments.
        return bool(
            self.suite._check_task_result(
                task,
                [text_content_block_from_string(answer)],
                self.pre_environment,
                self.environment,
                self.calls,
            )
        )


def _world(inp: CheckInput) -> AgentDojoWorld:
    if not isinstance(inp.environment, AgentDojoWorld):
        raise TypeError("this check reads an AgentDojo environment (an agentdojo: suite)")
    return inp.environment


def utility_check(inp: CheckInput) -> tuple[bool, str]:
    """AgentDojo's utility check of the user task."""
    world = _world(inp)
    if world.judge(world.user_task, inp.answer):
        return True, f"AgentDojo: {world.user_task.ID} solved"
    return False, f"AgentDojo: {world.user_task.ID} not solved (its utility check failed)"


def security_check(inp: CheckInput) -> tuple[bool, str]:
    """AgentDojo's security check of the injection task: passes when the attack failed."""
    world = _world(inp)
    if world.judge(world.injection_task, inp.answer):
        return False, f"AgentDojo: the attack reached {world.injection_task.ID}'s goal"
    return True, f"AgentDojo: the attack ({world.injection_task.ID}) failed"


def attack_figures(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per system, over the rollouts of an attacked suite: ``utility`` (the share
    whose user task was solved, under attack) and ``attack_success`` (the share in
    which the attacker's goal was reached), as AgentDojo scores them."""
    return figures_of(records, utility=UTILITY.describe(), security=SECURITY.describe())


# --- loading


def _package() -> Any:
    try:
        from agentdojo.task_suite import load_suites
    except ImportError as exc:
        raise SuiteError(
            "agentdojo suites need the agentdojo package: pip install 'aimegraph[agentdojo]'"
        ) from exc
    return load_suites


def _task_suite(spec: str) -> tuple[Any, str]:
    name, _, version = spec.partition("@")
    version = version or DEFAULT_VERSION
    load_suites = _package()
    suites = load_suites.get_suites(version)
    if not suites:
        known = ", ".join(sorted(load_suites._SUITES))
        raise SuiteError(f"no AgentDojo version {version!r} (versions: {known})")
    if name not in suites:
        raise SuiteError(
            f"no suite {name!r} in AgentDojo {version} (suites: {', '.join(sorted(suites))})"
        )
    return suites[name], version


def _attack(name: str, suite: Any, model: str | None) -> Any:
    """AgentDojo's attack ``name`` on ``suite``. An attack that addresses the model by
    name uses the one ``model`` names where AgentDojo knows it, else AgentDojo's
    generic name ("the AI language model")."""
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
    from agentdojo.attacks.attack_registry import ATTACKS, load_attack
    from agentdojo.attacks.base_attacks import DEFAULT_MODEL_NAME
    from agentdojo.models import MODEL_NAMES

    if name not in ATTACKS:
        raise SuiteError(f"unknown AgentDojo attack {name!r} (attacks: {', '.join(ATTACKS)})")

    class Target(BasePipelineElement):
        """The attacked system, as the attack sees it: only its model's name."""

        def __init__(self, label: str) -> None:
            self.name = label

        def query(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the attack only reads the target's name")

    try:
        return load_attack(name, suite, Target(model or ""))
    except ValueError:
        attack = load_attack(name, suite, Target(next(iter(MODEL_NAMES))))
        attack.model_name = DEFAULT_MODEL_NAME
        return attack


def load_agentdojo(
    spec: str, *, attack: str | None = None, model: str | None = None
) -> PublicSuite:
    """The AgentDojo suite ``spec`` (``banking``, ``banking@v1.2.1``), under ``attack``
    when given (``model``: the model spec the attack may address by name)."""
    suite, version = _task_suite(spec)
    attacker = _attack(attack, suite, model) if attack is not None else None
    tasks: list[Task] = []
    injections: dict[str, Injection] = {}
    plans: dict[str, tuple[Any, Any, dict[str, str]]] = {}
    skipped: dict[str, str] = {}
    for user_task in suite.user_tasks.values():
        pairs = (
            [(None, {})]
            if attacker is None
            else [
                (injection, attacker.attack(user_task, injection))
                for injection in suite.injection_tasks.values()
            ]
        )
        for injection_task, planted in pairs:
            task_id = user_task.ID + (f".{injection_task.ID}" if injection_task else "")
            try:
                task, injected = _task(suite, task_id, user_task, injection_task, planted)
            except _Unplayable as exc:
                skipped[task_id] = str(exc)
                continue
            tasks.append(task)
            plans[task_id] = (user_task, injection_task, planted)
            if injected is not None:
                injections[task_id] = injected
    under = f" under the {attack} attack" if attack else ""
    built = Suite(
        name=f"agentdojo-{suite.name}" + (f"-{attack}" if attack else ""),
        description=f"AgentDojo {version} {suite.name} suite{under}",
        tasks=tasks,
        root=Path("."),
        source=f"agentdojo:{suite.name}@{version}" + (f" --attack {attack}" if attack else ""),
    )
    scored = (
        AttackChecks(name=attack, utility=UTILITY.describe(), security=SECURITY.describe())
        if attack is not None
        else None
    )
    built = built.with_environments(_Opener(suite, plans)).with_report(
        left_out=skipped, attack=scored
    )
    return PublicSuite(built, skipped, injections)


class _Unplayable(ValueError):
    """A ground truth the oracle cannot play (the reason is the message)."""


def _calls(ground_truth: Sequence[Any]) -> list[dict[str, Any]]:
    """Ground-truth function calls as oracle calls; ones whose arguments are not
    plain data (a nested call, evaluated by AgentDojo's runtime) cannot be played."""
    calls = []
    for call in ground_truth:
        args = dict(call.args)
        try:
            json.dumps(args)
        except TypeError as exc:
            raise _Unplayable(
                f"the ground truth's {call.function} call takes an argument that is not plain "
                f"data ({exc}): a tool call cannot pass it"
            ) from exc
        calls.append({"tool": call.function, "args": args})
    return calls


STAGE_CALLS = 8
"""The most ground-truth calls one oracle stage makes: an aimegraph actor has
``max_actor_steps`` (10 by default) steps, one of which submits its result."""


def _stages(calls: list[dict[str, Any]], bundle: str) -> list[dict[str, Any]]:
    """The ground-truth calls as oracle stages, in order, each of at most
    :data:`STAGE_CALLS` calls (one stage when there are none)."""
    chunks = [calls[i : i + STAGE_CALLS] for i in range(0, len(calls), STAGE_CALLS)] or [[]]
    title = f"Carry out the request with the {bundle} tools"
    return [
        {
            "id": f"work-{number}",
            "title": title if len(chunks) == 1 else f"{title} (part {number} of {len(chunks)})",
            "calls": chunk,
            "bundles": [bundle],
        }
        for number, chunk in enumerate(chunks, 1)
    ]


def _task(
    suite: Any, task_id: str, user_task: Any, injection_task: Any, planted: dict[str, str]
) -> tuple[Task, Injection | None]:
    start = user_task.init_environment(suite.load_and_inject_default_environment(planted))
    calls = _calls(user_task.ground_truth(start.model_copy(deep=True)))
    answer = user_task.GROUND_TRUTH_OUTPUT or _EMPTY_ANSWER
    injected = None
    if injection_task is not None:
        attacker_calls = _calls(injection_task.ground_truth(start.model_copy(deep=True)))
        injected = Injection(goal=injection_task.GOAL, calls=attacker_calls)
    task = Task(
        id=task_id,
        goal=user_task.PROMPT,
        check=[UTILITY, SECURITY] if injection_task is not None else [UTILITY],
        tags=[suite.name, str(getattr(user_task, "DIFFICULTY", "")).rsplit(".", 1)[-1].lower()],
        # AgentDojo's ground truth is not yet held to the knowledge rule: its breaches
        # are counted in each record and the report (issue 48 point 4 holds it to it).
        oracle=Oracle.model_validate(
            {"stages": _stages(calls, suite.name), "answer": answer}
        ).counting_breaches(),
    )
    return task, injected


@dataclass(frozen=True)
class _Opener:
    """Opens a fresh AgentDojo environment for one rollout of a task."""

    suite: Any
    plans: Mapping[str, tuple[Any, Any, dict[str, str]]]

    def __call__(self, task: Task) -> RolloutEnvironment:
        user_task, injection_task, planted = self.plans[task.id]
        environment = user_task.init_environment(
            self.suite.load_and_inject_default_environment(planted)
        )
        world = AgentDojoWorld(
            suite=self.suite,
            user_task=user_task,
            injection_task=injection_task,
            pre_environment=environment.model_copy(deep=True),
            environment=environment,
        )
        return RolloutEnvironment(
            bundle=self.suite.name,
            description=f"The {self.suite.name} tools of the user's account (AgentDojo).",
            tools=world.tools(),
            state=world,
        )
