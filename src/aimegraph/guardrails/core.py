"""Guardrails: checks on what goes into a run, what comes out, and what passes through
its tools (architecture: Guardrails).

A :class:`Guardrail` is a check over a :class:`Subject` (the text at one of four
stages: the goal, the final answer, a tool call's arguments, a tool's output) that
passes it, trips (the run ends ``blocked`` with the reason) or redacts it (the run
goes on with the redacted text). :class:`Guards` holds a graph's guardrails and
screens a subject through those of its stage, in order, each seeing the previous
one's redaction; the first tripwire stops the screening. A guardrail that raises
trips (fail closed): a check that cannot say the text is safe does not let it pass.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from langchain_core.runnables import Runnable, RunnableLambda

from aimegraph.state import Usage

__all__ = [
    "STAGES",
    "Finding",
    "Guardrail",
    "GuardrailResult",
    "Guards",
    "Screened",
    "Stage",
    "Subject",
    "guardrail",
]

Stage = Literal["input", "output", "tool_input", "tool_output"]
"""Where a guardrail looks: ``input`` the run's goal, ``output`` the final answer (the
JSON of ``structured_response`` with a response format), ``tool_input`` a tool call's
arguments before it runs, ``tool_output`` a tool's output before the model sees it."""

STAGES: tuple[Stage, ...] = get_args(Stage)


@dataclass(frozen=True)
class Subject:
    """What a guardrail is shown: the ``text`` at ``stage``; for the tool stages the
    ``tool``'s name, for ``tool_input`` the call's ``args`` (``text`` is their JSON),
    and ``goal``, the run's goal the call serves (the user's request), so a check can
    ask whether the request, rather than something a tool returned, chose a value."""

    stage: Stage
    text: str
    tool: str | None = None
    args: Mapping[str, Any] | None = None
    goal: str | None = None

    @classmethod
    def of_call(cls, tool: str, args: Mapping[str, Any], *, goal: str | None = None) -> Subject:
        """A tool call's arguments as a ``tool_input`` subject."""
        text = json.dumps(args, default=str)
        return cls("tool_input", text, tool=tool, args=dict(args), goal=goal)


@dataclass(frozen=True)
class GuardrailResult:
    """One guardrail's judgement: a pass (the default), a tripwire with its ``reason``,
    or a redaction: ``redacted`` replaces the text (for ``tool_input``, a JSON object
    of arguments), or ``redacted_args`` the arguments. ``usage`` is what a
    model-backed check spent (counted under the ``guardrail`` role)."""

    tripped: bool = False
    reason: str = ""
    redacted: str | None = None
    redacted_args: Mapping[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)

    @classmethod
    def passed(cls, *, usage: Usage | None = None) -> GuardrailResult:
        return cls(usage=usage or Usage())

    @classmethod
    def trip(cls, reason: str, *, usage: Usage | None = None) -> GuardrailResult:
        return cls(tripped=True, reason=reason, usage=usage or Usage())

    @classmethod
    def redact(
        cls,
        text: str | None = None,
        *,
        args: Mapping[str, Any] | None = None,
        reason: str = "",
        usage: Usage | None = None,
    ) -> GuardrailResult:
        if (text is None) == (args is None):
            raise ValueError("redact either the text or the arguments")
        return cls(redacted=text, redacted_args=args, reason=reason, usage=usage or Usage())


Check = Callable[[Subject], GuardrailResult | None]
"""A guardrail's check; ``None`` is a pass."""
AsyncCheck = Callable[[Subject], Awaitable[GuardrailResult | None]]


@dataclass(frozen=True)
class Guardrail:
    """A named check and the stages it screens. ``acheck``, when given, is used under
    ``ainvoke`` (a model-backed check awaits its model); else ``check`` runs in a
    worker thread there."""

    name: str
    check: Check
    stages: frozenset[Stage]
    acheck: AsyncCheck | None = None

    def __post_init__(self) -> None:
        unknown = set(self.stages) - set(STAGES)
        if unknown or not self.stages:
            raise ValueError(
                f"guardrail {self.name!r}: stages must be some of {', '.join(STAGES)}; "
                f"got {sorted(self.stages) or 'none'}"
            )


def guardrail(*stages: Stage, name: str | None = None) -> Callable[[Check], Guardrail]:
    """A plain function ``(subject) -> GuardrailResult | None`` as a guardrail of
    ``stages``, named after the function unless ``name`` is given::

        @guardrail("input")
        def no_medical_advice(subject: Subject) -> GuardrailResult | None:
            if "diagnose" in subject.text.lower():
                return GuardrailResult.trip("medical advice is out of scope")
            return None
    """

    def wrap(check: Check) -> Guardrail:
        return Guardrail(name or check.__name__, check, frozenset(stages))

    return wrap


Checking = tuple[Guardrail, Subject]
"""A guardrail and the subject it is to check."""


@dataclass(frozen=True)
class Finding:
    """A guardrail that did not simply pass: it ``tripped`` or ``redacted``."""

    guardrail: str
    action: Literal["tripped", "redacted"]
    reason: str

    def describe(self) -> str:
        return f"guardrail {self.guardrail} {self.action}: {self.reason or 'no reason given'}"


@dataclass(frozen=True)
class Screened:
    """A subject after its stage's guardrails: as redacted, with what they found and
    what they spent."""

    subject: Subject
    findings: tuple[Finding, ...] = ()
    usage: Usage = field(default_factory=Usage)

    @property
    def tripwire(self) -> Finding | None:
        """The guardrail that tripped, if one did (screening stops there)."""
        last = self.findings[-1] if self.findings else None
        return last if last is not None and last.action == "tripped" else None

    @property
    def redacted(self) -> bool:
        return any(f.action == "redacted" for f in self.findings)

    def event(self, **keys: Any) -> dict[str, Any]:
        """The ``guardrail`` stream event announcing the findings."""
        return {
            "type": "guardrail",
            "stage": self.subject.stage,
            "findings": [f.describe() for f in self.findings],
            "tripped": self.tripwire is not None,
            **({"tool": self.subject.tool} if self.subject.tool else {}),
            **keys,
        }


GuardrailsArg = Iterable[Guardrail] | None
"""What ``build_aime_graph(guardrails=...)`` takes."""


class Guards:
    """A graph's guardrails, screened stage by stage."""

    def __init__(self, guardrails: GuardrailsArg = ()) -> None:
        self.guardrails: tuple[Guardrail, ...] = tuple(guardrails or ())
        names = [g.name for g in self.guardrails]
        if len(set(names)) != len(names):
            raise ValueError(f"guardrail names must differ; got {names}")
        # Made once: a runnable reads its functions' signatures when made.
        self._runnable: Runnable[Subject, Screened] = RunnableLambda(
            self.screen, afunc=self.ascreen, name="guardrails"
        )

    def __bool__(self) -> bool:
        return bool(self.guardrails)

    def __add__(self, other: Guards) -> Guards:
        return Guards([*self.guardrails, *other.guardrails])

    def at(self, stage: Stage) -> tuple[Guardrail, ...]:
        return tuple(g for g in self.guardrails if stage in g.stages)

    def screen(self, subject: Subject) -> Screened:
        """``subject`` through its stage's guardrails, in order."""
        steps = self._steps(subject)
        try:
            guard, seen = next(steps)
            while True:
                guard, seen = steps.send(_checked(guard.check, seen))
        except StopIteration as done:
            return done.value

    async def ascreen(self, subject: Subject) -> Screened:
        """:meth:`screen` under ``ainvoke``: model-backed checks awaited, plain ones in a
        worker thread (a user's check may block)."""
        steps = self._steps(subject)
        try:
            guard, seen = next(steps)
            while True:
                if guard.acheck is not None:
                    result = await _achecked(guard.acheck, seen)
                else:
                    result = await asyncio.to_thread(_checked, guard.check, seen)
                guard, seen = steps.send(result)
        except StopIteration as done:
            return done.value

    def _steps(self, subject: Subject) -> Generator[Checking, GuardrailResult | None, Screened]:
        """The screening, written once for both drivers: yields each guardrail with what
        it is to see (the last redaction), is sent its result, returns the outcome."""
        screened = Screened(subject)
        for guard in self.at(subject.stage):
            screened = _applied(screened, guard, (yield guard, screened.subject))
            if screened.tripwire is not None:
                break
        return screened

    def screening(self) -> Runnable[Subject, Screened]:
        """:meth:`screen` as a runnable with both bodies, for a node's steps to yield."""
        return self._runnable


def _checked(check: Check, subject: Subject) -> GuardrailResult | None:
    """``check``'s result; a check that raises trips (fail closed)."""
    try:
        return check(subject)
    except Exception as exc:  # noqa: BLE001 - a failing check trips (fail closed)
        return _failed(exc)


async def _achecked(check: AsyncCheck, subject: Subject) -> GuardrailResult | None:
    try:
        return await check(subject)
    except Exception as exc:  # noqa: BLE001 - a failing check trips (fail closed)
        return _failed(exc)


def _failed(exc: Exception) -> GuardrailResult:
    return GuardrailResult.trip(f"the check failed: {type(exc).__name__}: {exc}")


def _applied(screened: Screened, guard: Guardrail, result: GuardrailResult | None) -> Screened:
    """``screened`` with ``guard``'s result applied."""
    if result is None:
        return screened
    usage = screened.usage + result.usage
    if result.tripped:
        finding = Finding(guard.name, "tripped", result.reason)
        return replace(screened, findings=(*screened.findings, finding), usage=usage)
    if result.redacted is None and result.redacted_args is None:
        return replace(screened, usage=usage)
    subject = screened.subject
    if subject.stage == "tool_input":
        args = result.redacted_args
        if args is None:
            try:
                args = json.loads(result.redacted or "")
            except ValueError:
                args = None
        if not isinstance(args, Mapping):
            why = "it redacted a tool call's arguments into something other than a JSON object"
            return _applied(screened, guard, GuardrailResult.trip(why, usage=result.usage))
        redacted = Subject.of_call(subject.tool or "", args, goal=subject.goal)
    else:
        redacted = replace(subject, text=result.redacted or "")
    finding = Finding(guard.name, "redacted", result.reason)
    return Screened(redacted, (*screened.findings, finding), usage)
