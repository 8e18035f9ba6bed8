"""The parts of a suite task with a format of their own: its checks and its oracle.

:class:`Check` is one way to judge a rollout (see :mod:`aimegraph.eval.checkers`);
:class:`Oracle` the scripted replies that solve the task with the built-in tools
(played by :mod:`aimegraph.eval.oracle`). Both are validated when the suite loads,
and each mistake says what to write instead. :mod:`aimegraph.eval.suite` re-exports
them.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

__all__ = [
    "CHECK_KINDS",
    "FILE_MODES",
    "ID_PATTERN",
    "Check",
    "Oracle",
    "OracleStage",
    "OracleTurn",
    "Strict",
]

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


FILE_MODES = ("equals", "expected", "json", "contains", "regex")
"""How a ``file`` check compares the file's content (none: the file must exist)."""

CHECK_KINDS = ("exact", "contains", "regex", "number", "file", "program", "python", "rubric")

_MODIFIERS: dict[str, tuple[str, ...]] = {
    "exact": ("field", "ignore_case"),
    "contains": ("field", "ignore_case"),
    "regex": ("field",),
    "number": ("field", "tolerance", "relative"),
    "file": FILE_MODES + ("ignore_case",),
    "program": ("args", "stdout", "contains"),
    "python": (),
    "rubric": (),
}


def _unknown_keys(keys: list[str], known: tuple[str, ...]) -> str:
    """``keys`` named as unknown, each with the closest of ``known`` (a misspelling)."""
    named = []
    for key in keys:
        close = difflib.get_close_matches(key, known, n=1)
        named.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return f"unknown check key{'s' if len(named) > 1 else ''} {', '.join(named)}"


class Check(Strict):
    """One way to judge a rollout. Exactly one kind; the other fields modify it.

    - ``exact``: the answer (or ``field`` of the typed answer), stripped, equals it.
    - ``contains``: the answer contains the text (every text of a list);
      case-insensitive unless ``ignore_case: false``.
    - ``regex``: the pattern matches somewhere in the answer (``re.search``).
    - ``number``: a number written in the answer is within ``tolerance``
      (absolute, default 1e-6) or ``relative`` (a fraction) of it.
    - ``file``: the workspace file exists, and with ``equals`` (text), ``expected``
      (a suite file), ``json`` (a value), ``contains`` or ``regex``, its content fits.
    - ``program``: the workspace Python script, run with ``args`` through the
      run's own python tool (same limits and sandbox), prints ``stdout`` exactly
      (trailing blanks ignored) or output that ``contains`` the texts.
    - ``python``: ``module:attr``, a callable given a
      :class:`~aimegraph.eval.checkers.CheckInput`, returning a bool, a score in
      [0, 1] (1 passes) or ``(passed, reason)``.
    - ``rubric``: a separate judge model decides whether the answer meets it.
    """

    exact: str | None = None
    contains: str | list[str] | None = None
    regex: str | None = None
    number: float | None = None
    file: str | None = None
    program: str | None = None
    python: str | None = None
    rubric: str | None = None
    field: str | None = None
    ignore_case: bool | None = None
    tolerance: float = Field(1e-6, ge=0)
    relative: float | None = Field(None, ge=0)
    equals: str | None = None
    expected: str | None = None
    json_value: Any = Field(None, alias="json")
    args: list[str] = Field(default_factory=list)
    stdout: str | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _one_kind(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise ValueError(f"a check is a mapping such as {{contains: '42'}}; got {data!r}")
        given = [key for key in data if key in ("file", "program")]
        if not given:
            given = [key for key in CHECK_KINDS if key in data]
        unknown = [str(key) for key in data if key not in cls._field_names()]
        if len(given) != 1:
            said = f"{_unknown_keys(unknown, CHECK_KINDS)}; " if unknown else ""
            raise ValueError(
                f"{said}a check needs exactly one of {', '.join(CHECK_KINDS)}; "
                f"got {', '.join(given) or 'none'}"
            )
        kind = given[0]
        if unknown:
            raise ValueError(
                f"{_unknown_keys(unknown, _MODIFIERS[kind])}; a {kind!r} check takes "
                f"{', '.join(_MODIFIERS[kind]) or 'nothing else'}"
            )
        allowed = {kind, *_MODIFIERS[kind]}
        extra = [key for key in data if key not in allowed and key in cls._field_names()]
        if extra:
            raise ValueError(
                f"{', '.join(extra)} cannot modify a {kind!r} check "
                f"(it takes: {', '.join(_MODIFIERS[kind]) or 'nothing else'})"
            )
        if kind == "file" and sum(mode in data for mode in FILE_MODES) > 1:
            raise ValueError(f"a file check takes at most one of {', '.join(FILE_MODES)}")
        if kind == "program" and ("stdout" in data) == ("contains" in data):
            raise ValueError("a program check needs exactly one of stdout, contains")
        return data

    @classmethod
    def _field_names(cls) -> set[str]:
        return {f.alias or name for name, f in cls.model_fields.items()}

    @field_validator("regex")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"regex {pattern!r} does not compile: {exc}") from exc
        return pattern

    @field_validator("python")
    @classmethod
    def _module_attr(cls, spec: str | None) -> str | None:
        if spec is not None and not re.fullmatch(r"[\w.]+:[\w.]+", spec):
            raise ValueError(f"python takes module:attr; got {spec!r}")
        return spec

    @property
    def kind(self) -> str:
        for name in ("file", "program", *CHECK_KINDS):
            if getattr(self, name) is not None:
                return name
        raise AssertionError("validated checks have a kind")

    @property
    def texts(self) -> list[str]:
        """``contains`` as a list."""
        if self.contains is None:
            return []
        return [self.contains] if isinstance(self.contains, str) else list(self.contains)

    def describe(self) -> str:
        """A short label for reports, e.g. ``number 1234.5 ±0.01``."""
        target = f"{self.field}: " if self.field else ""
        kind = self.kind
        if kind == "number":
            margin = (
                f"±{self.relative:.0%}" if self.relative is not None else f"±{self.tolerance:g}"
            )
            return f"number {target}{self.number:.12g} {margin}"
        if kind == "file":
            mode = next((m for m in FILE_MODES if self._mode_value(m) is not None), "exists")
            return f"file {self.file} ({mode})"
        if kind == "program":
            return f"program {self.program} {' '.join(self.args)}".strip()
        value = getattr(self, kind)
        shown = value if isinstance(value, str) else json.dumps(value)
        return f"{kind} {target}{shown[:60]}"

    def _mode_value(self, mode: str) -> Any:
        return self.json_value if mode == "json" else getattr(self, mode)

    @property
    def file_mode(self) -> str | None:
        """The ``file`` check's comparison, or ``None`` when the file must only exist."""
        return next((m for m in FILE_MODES if self._mode_value(m) is not None), None)


class OracleStage(Strict):
    """A piece of scripted work: the tool calls that do it and the result it hands on.

    For aimegraph a stage is one planned task (``after``: the stages whose results
    it needs, default the previous one); for a ReAct loop the stages' calls are
    made together where stages are independent. Strings may use ``{last_tool_output}``
    (the newest tool output of this stage) and ``{stage:<id>}`` (a stage's result; in
    a stage, only of a stage it comes ``after``). A call's ``derived`` notes say how
    its caller works out a literal it has not seen (the knowledge rule,
    :mod:`aimegraph.eval.knowledge`). ``bundles`` names the tool bundles aimegraph's
    planner gives the stage (default: each call's built-in bundle, else ``custom``,
    the application's tools).
    """

    id: str = Field(pattern=ID_PATTERN)
    title: str
    after: list[str] | None = None
    calls: list[dict[str, Any]] = Field(default_factory=list)
    result: str = "{last_tool_output}"
    bundles: list[str] | None = None

    @field_validator("calls")
    @classmethod
    def _calls(cls, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for call in calls:
            if set(call) - {"tool", "args", "derived"} or not isinstance(call.get("tool"), str):
                raise ValueError(
                    f"a call is {{tool: NAME, args: {{...}}, derived: {{LITERAL: HOW}}}} "
                    f"(derived optional); got {call!r}"
                )
            notes = call.get("derived")
            if notes is not None and not (
                isinstance(notes, Mapping) and all(isinstance(v, str) for v in notes.values())
            ):
                raise ValueError(
                    "a call's derived notes map each literal (or argument) to how its caller "
                    "works it out, as text: derived: {'84': '7 years of 12 months'}; "
                    f"got {notes!r}"
                )
        return calls


class OracleTurn(Strict):
    """The scripted solution of one turn: its stages, then the answer (text, or the
    ``structured`` object of a typed answer; its strings may use ``{stage:<id>}``)."""

    stages: list[OracleStage] = Field(min_length=1)
    answer: str | None = None
    structured: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> OracleTurn:
        if (self.answer is None) == (self.structured is None):
            raise ValueError(
                "an oracle turn ends with exactly one of answer (write answer: TEXT) or "
                "structured (for a task with a response_format: structured: {FIELD: VALUE})"
            )
        ids = [stage.id for stage in self.stages]
        if len(set(ids)) != len(ids):
            raise ValueError(f"oracle stage ids repeat: {ids}; give each stage its own id")
        for index, stage in enumerate(self.stages):
            self._check_references(stage, index, ids[:index])
        for text in _strings(self.answer if self.answer is not None else self.structured):
            unknown = [used for used in _STAGE_REF.findall(text) if used not in ids]
            if unknown:
                raise ValueError(
                    f"the oracle answer uses unknown stages {unknown}; its stages are {ids}"
                )
        return self

    def _check_references(self, stage: OracleStage, index: int, earlier: list[str]) -> None:
        """``stage`` comes after earlier stages only, and reads only their results."""
        unknown = [dep for dep in stage.after or () if dep not in earlier]
        if unknown:
            raise ValueError(
                f"oracle stage {stage.id!r} comes after {unknown}, not stages listed before "
                f"it; after takes ids of earlier stages ({', '.join(earlier) or 'none here'})"
            )
        allowed = self.dependencies(stage, index)
        for text in _strings(stage.calls) + [stage.result]:
            for used in _STAGE_REF.findall(text):
                if used in allowed:
                    continue
                if used in earlier:
                    fix = f"write after: [{', '.join([*allowed, used])}]"
                else:
                    fix = f"it is not a stage listed before it ({', '.join(earlier) or 'none'})"
                raise ValueError(
                    f"oracle stage {stage.id!r} uses {{stage:{used}}} but does not come "
                    f"after it: {fix}"
                )

    def dependencies(self, stage: OracleStage, index: int) -> list[str]:
        """The stages ``stage`` (at ``index``) comes after."""
        if stage.after is not None:
            return list(stage.after)
        return [self.stages[index - 1].id] if index else []

    @property
    def tool_calls(self) -> int:
        return sum(len(stage.calls) for stage in self.stages)


class Oracle(Strict):
    """Scripted replies that solve a task: one :class:`OracleTurn` per turn.

    Its calls obey the knowledge rule (:mod:`aimegraph.eval.knowledge`): a call that
    breaks it fails its rollout. A public benchmark's oracle, made in code from the
    benchmark's ground truth, may instead count its breaches in the records
    (:meth:`counting_breaches`) until its tasks are held to the rule.
    """

    turns: list[OracleTurn] = Field(min_length=1)
    _refuses_breaches: bool = PrivateAttr(True)

    def counting_breaches(self) -> Oracle:
        """This oracle, whose knowledge-rule breaches are counted, not refused."""
        copied = self.model_copy()
        copied._refuses_breaches = False
        return copied

    @property
    def refuses_breaches(self) -> bool:
        """Whether a call breaking the knowledge rule fails the rollout (else it is counted)."""
        return self._refuses_breaches

    @model_validator(mode="before")
    @classmethod
    def _single_turn(cls, data: Any) -> Any:
        # A one-turn task writes its stages and answer directly under `oracle`.
        if isinstance(data, Mapping) and "turns" not in data:
            return {"turns": [data]}
        return data

    @model_validator(mode="after")
    def _unique_stages(self) -> Oracle:
        # aimegraph plays each stage as a planned task, scripted by its id.
        ids = [stage.id for turn in self.turns for stage in turn.stages]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(
                f"oracle stage ids repeat across turns: {', '.join(repeated)}; a stage id "
                "names one stage of the whole conversation"
            )
        return self


_STAGE_REF = re.compile(r"\{stage:([\w.-]+)\}")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return []


class AttackChecks(BaseModel):
    """How an attacked suite's rollouts are scored (AgentDojo's way): ``utility`` is
    the label of the check that passes when the user's task was done, ``security``
    of the one that passes when the attack ``name`` failed."""

    model_config = ConfigDict(frozen=True)

    name: str
    utility: str
    security: str
