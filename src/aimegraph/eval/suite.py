"""Task suites: the documented format (YAML or JSON Lines), loaded and checked.

A suite is a list of tasks. Each task has an ``id``, a ``goal`` (or ``turns``, a
conversation of follow-ups), ``files`` copied into its workspace, one or more
``check`` entries that judge the outcome (see :mod:`aimegraph.eval.checkers`),
``tags``, a ``budget`` and, for a typed answer, a ``response_format`` (a JSON
schema of an object). ``oracle`` holds scripted replies that solve the task with
the built-in tools (:mod:`aimegraph.eval.oracle`), so the harness runs offline.

Everything is checked when the suite is loaded: a mistake is one
:class:`SuiteError` naming the file, the task and the field, never a failure in
the middle of an eval.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

__all__ = [
    "BUNDLED_SUITE",
    "Budget",
    "Check",
    "Oracle",
    "OracleStage",
    "OracleTurn",
    "Suite",
    "SuiteError",
    "Task",
    "is_suite_file",
    "load_suite",
]

BUNDLED_SUITE = "bundled"
"""The name that loads the suite shipped with the package (``aimegraph eval bundled``)."""

_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class SuiteError(ValueError):
    """A suite file is missing or malformed; the message names where and what."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Budget(_Strict):
    """What one rollout may spend; the same limits for every system under test."""

    max_llm_calls: PositiveInt | None = None
    max_tokens: PositiveInt | None = None
    timeout_s: PositiveFloat | None = None

    def capped(self, cap: Budget) -> Budget:
        """These limits, lowered to ``cap``'s where it sets one."""
        return Budget(
            **{
                name: min(v for v in (getattr(self, name), getattr(cap, name)) if v is not None)
                if getattr(cap, name) is not None
                else getattr(self, name)
                for name in Budget.model_fields
            }
        )

    def over(self, defaults: Budget) -> Budget:
        """These limits, falling back to ``defaults`` where unset."""
        return Budget(
            **{
                name: getattr(self, name)
                if getattr(self, name) is not None
                else getattr(defaults, name)
                for name in Budget.model_fields
            }
        )


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


class Check(_Strict):
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
        if len(given) != 1:
            raise ValueError(
                f"a check needs exactly one of {', '.join(CHECK_KINDS)}; "
                f"got {', '.join(given) or 'none'}"
            )
        kind = given[0]
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


class OracleStage(_Strict):
    """A piece of scripted work: the tool calls that do it and the result it hands on.

    For aimegraph a stage is one planned task (``after``: the stages whose results
    it needs, default the previous one); for a ReAct loop the stages' calls are
    made one after the other. Strings may use ``{last_tool_output}`` (the newest
    tool output of this stage) and ``{stage:<id>}`` (a stage's result; in a
    stage, only of a stage it comes ``after``).
    """

    id: str = Field(pattern=_ID)
    title: str
    after: list[str] | None = None
    calls: list[dict[str, Any]] = Field(default_factory=list)
    result: str = "{last_tool_output}"

    @field_validator("calls")
    @classmethod
    def _calls(cls, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for call in calls:
            if set(call) - {"tool", "args"} or not isinstance(call.get("tool"), str):
                raise ValueError(f"a call is {{tool: name, args: {{...}}}}; got {call!r}")
        return calls


class OracleTurn(_Strict):
    """The scripted solution of one turn: its stages, then the answer (text, or the
    ``structured`` object of a typed answer; its strings may use ``{stage:<id>}``)."""

    stages: list[OracleStage] = Field(min_length=1)
    answer: str | None = None
    structured: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> OracleTurn:
        if (self.answer is None) == (self.structured is None):
            raise ValueError("an oracle turn needs exactly one of answer, structured")
        ids = [stage.id for stage in self.stages]
        if len(set(ids)) != len(ids):
            raise ValueError(f"oracle stage ids repeat: {ids}")
        for index, stage in enumerate(self.stages):
            earlier = ids[:index]
            unknown = [dep for dep in stage.after or () if dep not in earlier]
            if unknown:
                raise ValueError(
                    f"oracle stage {stage.id!r} comes after {unknown}, not earlier stages"
                )
            allowed = set(self.dependencies(stage, index))
            for text in _strings(stage.calls) + [stage.result]:
                for used in _STAGE_REF.findall(text):
                    if used not in allowed:
                        raise ValueError(
                            f"oracle stage {stage.id!r} uses {{stage:{used}}} but does not "
                            f"come after it (after: {sorted(allowed)})"
                        )
        for text in _strings(self.answer if self.answer is not None else self.structured):
            unknown = [used for used in _STAGE_REF.findall(text) if used not in ids]
            if unknown:
                raise ValueError(f"the oracle answer uses unknown stages {unknown}")
        return self

    def dependencies(self, stage: OracleStage, index: int) -> list[str]:
        """The stages ``stage`` (at ``index``) comes after."""
        if stage.after is not None:
            return list(stage.after)
        return [self.stages[index - 1].id] if index else []

    @property
    def tool_calls(self) -> int:
        return sum(len(stage.calls) for stage in self.stages)


class Oracle(_Strict):
    """Scripted replies that solve a task: one :class:`OracleTurn` per turn."""

    turns: list[OracleTurn] = Field(min_length=1)

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
            raise ValueError(f"oracle stage ids repeat across turns: {', '.join(repeated)}")
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


class Task(_Strict):
    """One task of a suite (see the module docstring)."""

    id: str = Field(pattern=_ID)
    goal: str | None = None
    turns: list[str] | None = None
    files: dict[str, str] = Field(default_factory=dict)
    check: list[Check] = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)
    budget: Budget = Field(default_factory=Budget)
    response_format: dict[str, Any] | None = None
    oracle: Oracle | None = None

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise ValueError(f"a task is a mapping with id, goal and check; got {data!r:.80}")
        data = dict(data)
        if "checks" in data:  # the plural reads naturally for a list
            if "check" in data:
                raise ValueError("give check or checks, not both")
            data["check"] = data.pop("checks")
        if isinstance(data.get("check"), Mapping):
            data["check"] = [data["check"]]
        files = data.get("files")
        if isinstance(files, list):  # a list copies each file under its own name
            data["files"] = {PurePosixPath(str(f)).name: f for f in files}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Task:
        if (self.goal is None) == (self.turns is None):
            raise ValueError("a task needs exactly one of goal, turns")
        if self.turns is not None and not self.turns:
            raise ValueError("turns is empty")
        if any(not text.strip() for text in self.goals):
            raise ValueError("a goal or turn is empty")
        for target in self.files:
            path = PurePosixPath(target)
            if path.is_absolute() or ".." in path.parts or not path.parts:
                raise ValueError(f"files: {target!r} must be a relative path inside the workspace")
        if self.response_format is not None:
            _check_schema(self.response_format)
        uses_field = [c.describe() for c in self.check if c.field is not None]
        if uses_field and self.response_format is None:
            raise ValueError(
                f"checks read fields of the typed answer ({'; '.join(uses_field)}) but the "
                "task has no response_format"
            )
        if self.oracle is not None:
            if len(self.oracle.turns) != len(self.goals):
                raise ValueError(
                    f"the oracle scripts {len(self.oracle.turns)} turn(s); the task has "
                    f"{len(self.goals)}"
                )
            typed = [t.structured is not None for t in self.oracle.turns]
            if typed[-1] != (self.response_format is not None):
                raise ValueError(
                    "the oracle's last turn answers with structured exactly when the task "
                    "has a response_format"
                )
        return self

    @property
    def goals(self) -> list[str]:
        """The turns of the conversation (a one-turn task: its goal)."""
        return list(self.turns) if self.turns is not None else [self.goal or ""]

    @property
    def answer_schema(self) -> dict[str, Any] | None:
        """The typed answer's JSON schema, titled (the name its answer tool gets)."""
        if self.response_format is None:
            return None
        return {"title": "Answer", **self.response_format}


def _check_schema(schema: dict[str, Any]) -> None:
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"response_format is not a valid JSON schema: {exc.message}") from exc
    if schema.get("type") != "object":
        raise ValueError('response_format must describe an object ("type": "object")')


class Suite(_Strict):
    """A loaded suite: its tasks, and ``root``, the folder its ``files`` are read from."""

    name: str
    description: str = ""
    budget: Budget = Field(default_factory=Budget)
    tasks: list[Task]
    root: Path
    source: str = Field(description="where the suite was read from")

    @model_validator(mode="after")
    def _unique_ids(self) -> Suite:
        ids = [task.id for task in self.tasks]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"task ids repeat: {', '.join(repeated)}")
        if not ids:
            raise ValueError("the suite has no tasks")
        return self

    def task(self, task_id: str) -> Task:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(task_id)

    def budget_of(self, task: Task) -> Budget:
        """The task's budget over the suite's defaults."""
        return task.budget.over(self.budget)

    def capped(self, cap: Budget) -> Suite:
        """This suite with every limit lowered to ``cap``'s (a ceiling for an eval)."""
        tasks = [t.model_copy(update={"budget": t.budget.capped(cap)}) for t in self.tasks]
        return self.model_copy(update={"budget": self.budget.capped(cap), "tasks": tasks})

    def file_path(self, source: str) -> Path:
        return self.root / source

    def select(
        self, *, ids: Sequence[str] | None = None, tags: Sequence[str] | None = None
    ) -> Suite:
        """The tasks with one of ``ids`` and one of ``tags`` (each filter when given)."""
        if ids:
            unknown = sorted(set(ids) - {t.id for t in self.tasks})
            if unknown:
                raise SuiteError(f"{self.source}: no task {', '.join(unknown)}")
        chosen = [
            t
            for t in self.tasks
            if (not ids or t.id in ids) and (not tags or set(tags) & set(t.tags))
        ]
        if not chosen:
            raise SuiteError(f"{self.source}: no task matches the selection")
        return self.model_copy(update={"tasks": chosen})

    def digest(self, task: Task) -> str:
        """A hash of everything that shapes the task's rollouts: its definition and the
        content of its files. Recorded with each rollout; a rollout recorded under
        another digest is run again."""
        body = task.model_dump(mode="json", exclude={"tags"}, by_alias=True)
        body["budget"] = self.budget_of(task).model_dump()
        body["file_digests"] = {
            target: hashlib.sha256(self.file_path(source).read_bytes()).hexdigest()
            for target, source in sorted(task.files.items())
        }
        text = json.dumps(body, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def is_suite_file(source: str | Path) -> bool:
    """Whether ``source`` is a suite rather than a file of plain optimiser examples
    (JSON Lines of ``{"goal": ..., "answer": ...}``): ``bundled``, a YAML or JSON
    file, or JSON Lines whose records carry a ``check``."""
    path = Path(source)
    if str(source) == BUNDLED_SUITE or path.suffix in (".yaml", ".yml", ".json"):
        return True
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return False
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and ("check" in record or "checks" in record):
            return True
    return False


def load_suite(source: str | Path) -> Suite:
    """The suite in ``source``: a ``.yaml``/``.yml``/``.json`` file (a mapping with
    ``tasks``, or a list of tasks), a ``.jsonl`` file (one task per line), or
    ``bundled`` for the suite shipped with the package.

    Raises:
        SuiteError: the file cannot be read or parsed, a task is malformed, or a
            task's file does not exist; the message names the file and the task.
    """
    if str(source) == BUNDLED_SUITE:
        folder = resources.files("aimegraph.eval") / "suites" / BUNDLED_SUITE
        path = Path(str(folder / "suite.yaml"))
    else:
        path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SuiteError(f"cannot read suite {source}: {exc.strerror or exc}") from exc
    data = _parse(path, text)
    shown = BUNDLED_SUITE if str(source) == BUNDLED_SUITE else str(path)
    suite = _validated(data, path, shown)
    missing = [
        f"task {task.id!r}: files: {src} does not exist (paths are relative to {suite.root})"
        for task in suite.tasks
        for src in task.files.values()
        if not suite.file_path(src).is_file()
    ]
    if missing:
        raise SuiteError(f"{shown}: " + "; ".join(missing))
    return suite


def _parse(path: Path, text: str) -> dict[str, Any]:
    if path.suffix == ".jsonl":
        tasks = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                tasks.append(json.loads(line))
            except ValueError as exc:
                raise SuiteError(f"{path} line {number} is not JSON: {exc}") from exc
        return {"name": path.stem, "tasks": tasks}
    if path.suffix not in (".yaml", ".yml", ".json"):
        raise SuiteError(f"{path}: a suite is a .yaml, .yml, .json or .jsonl file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SuiteError(f"{path} is not valid YAML: {exc}") from exc
    if isinstance(data, list):
        return {"name": path.stem, "tasks": data}
    if not isinstance(data, dict) or "tasks" not in data:
        raise SuiteError(f"{path}: a suite is a list of tasks or a mapping with 'tasks'")
    data.setdefault("name", path.stem)
    return data


def _validated(data: dict[str, Any], path: Path, shown: str) -> Suite:
    unknown = sorted(set(data) - {"name", "description", "budget", "tasks"})
    if unknown:
        raise SuiteError(
            f"{shown}: unknown suite field(s) {', '.join(unknown)} "
            "(fields: name, description, budget, tasks)"
        )
    try:
        return Suite.model_validate({**data, "root": path.parent, "source": shown})
    except ValidationError as exc:
        raise SuiteError(f"{shown}: {_describe(exc, data)}") from exc


def _describe(exc: ValidationError, data: Mapping[str, Any]) -> str:
    """Pydantic's errors, each located by task id (and line, in JSON Lines)."""
    listed = data.get("tasks")
    tasks: list[Any] = listed if isinstance(listed, list) else []
    problems = []
    for error in exc.errors():
        loc = list(error["loc"])
        where = ""
        if loc[:1] == ["tasks"] and len(loc) > 1 and isinstance(loc[1], int):
            index = loc[1]
            item = tasks[index] if index < len(tasks) else None
            name = item.get("id") if isinstance(item, Mapping) else None
            where = f"task {name!r}" if name else f"task #{index + 1}"
            loc = loc[2:]
        path = ".".join(str(part) for part in loc if not _is_union_tag(part))
        message = error["msg"].removeprefix("Value error, ")
        problems.append(" ".join(p for p in (where, f"{path}:" if path else "", message) if p))
    return "; ".join(dict.fromkeys(problems))


def _is_union_tag(part: Any) -> bool:
    # pydantic names the union member it tried (``list[str]``, ``str``) in the location.
    return isinstance(part, str) and ("[" in part or part in ("str", "int", "float"))
