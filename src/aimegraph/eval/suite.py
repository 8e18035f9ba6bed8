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

import difflib
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import (
    Field,
    PositiveFloat,
    PositiveInt,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from aimegraph.eval.suite_parts import (
    ID_PATTERN,
    AttackChecks,
    Check,
    Oracle,
    OracleStage,
    OracleTurn,
    Strict,
)
from aimegraph.yaml_faults import yaml_problem

if TYPE_CHECKING:
    from aimegraph.eval.environment import RolloutEnvironment

__all__ = [
    "BUNDLED_SUITE",
    "AttackChecks",
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
    "yaml_problem",
]

BUNDLED_SUITE = "bundled"
"""The name that loads the suite shipped with the package (``aimegraph eval bundled``)."""


ORACLE_SHAPE = (
    "an oracle is {stages: [{id: ID, title: TEXT, calls: [{tool: NAME, args: {...}, "
    "derived: {LITERAL: HOW}}], "
    "after: [ID, ...], result: TEXT}], answer: TEXT or structured: {FIELD: VALUE}}, or "
    "{turns: [one such per turn]}"
)
"""What an oracle looks like, appended to the errors that do not say it themselves."""


class SuiteError(ValueError):
    """A suite file is missing or malformed; the message names where and what."""


class Budget(Strict):
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


class Task(Strict):
    """One task of a suite (see the module docstring)."""

    id: str = Field(pattern=ID_PATTERN)
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
            self._check_oracle(self.oracle)
        return self

    def _check_oracle(self, oracle: Oracle) -> None:
        """The oracle scripts every turn, and answers the last as the task asks."""
        if len(oracle.turns) != len(self.goals):
            raise ValueError(
                f"the oracle scripts {len(oracle.turns)} turn(s); the task has "
                f"{len(self.goals)}: write oracle: {{turns: [...]}} with one "
                "{stages: [...], answer: TEXT} per turn"
            )
        typed = oracle.turns[-1].structured is not None
        if self.response_format is not None and not typed:
            fields = ", ".join(f"{name}: VALUE" for name in _properties(self.response_format))
            raise ValueError(
                "the task has a response_format, so the oracle's last turn answers with "
                f"structured: {{{fields or 'FIELD: VALUE'}}} (values may use {{stage:<id>}}) "
                "instead of answer"
            )
        if self.response_format is None and typed:
            raise ValueError(
                "the task has no response_format, so the oracle's last turn answers with "
                "answer: TEXT instead of structured (or give the task a response_format)"
            )

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


def _properties(schema: Mapping[str, Any]) -> list[str]:
    """The top-level fields a typed answer's schema names."""
    properties = schema.get("properties")
    return [str(name) for name in properties] if isinstance(properties, Mapping) else []


def _check_schema(schema: dict[str, Any]) -> None:
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"response_format is not a valid JSON schema: {exc.message}") from exc
    if schema.get("type") != "object":
        raise ValueError('response_format must describe an object ("type": "object")')


class Suite(Strict):
    """A loaded suite: its tasks, and ``root``, the folder its ``files`` are read from.

    A suite built in code (a public benchmark's, :mod:`aimegraph.eval.public`) may
    also open a simulated world per rollout (:meth:`with_environments`).
    """

    name: str
    description: str = ""
    budget: Budget = Field(default_factory=Budget)
    tasks: list[Task]
    root: Path
    source: str = Field(description="where the suite was read from")
    _environments: Callable[[Task], RolloutEnvironment] | None = PrivateAttr(None)
    _left_out: dict[str, str] = PrivateAttr(default_factory=dict)
    _attack: AttackChecks | None = PrivateAttr(None)

    def with_environments(self, opener: Callable[[Task], RolloutEnvironment]) -> Suite:
        """This suite, each rollout of which runs in a fresh world ``opener(task)``
        gives: its tools replace the work bundles, its checks read its state."""
        copied = self.model_copy()
        copied._environments = opener
        return copied

    def with_report(
        self, *, left_out: Mapping[str, str] | None = None, attack: AttackChecks | None = None
    ) -> Suite:
        """This suite, whose reports also name the tasks its source has but could not
        play (``left_out``: id -> why) and, for an attacked suite, score the attack."""
        copied = self.model_copy()
        copied._left_out = dict(left_out or {})
        copied._attack = attack
        return copied

    @property
    def left_out(self) -> dict[str, str]:
        """Tasks of the suite's source left out, with the reason (see :meth:`with_report`)."""
        return dict(self._left_out)

    @property
    def attack(self) -> AttackChecks | None:
        """How the attack planted in this suite's tasks is scored, if one is."""
        return self._attack

    def environment(self, task: Task) -> RolloutEnvironment | None:
        """A fresh world for one rollout of ``task`` (``None``: the workspace is all)."""
        return self._environments(task) if self._environments is not None else None

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
        """The tasks with one of ``ids`` and one of ``tags`` (each filter when given).
        In an attacked suite, whose ids are ``<user task>.<injection task>``, a user
        task's id alone selects it under every injection task."""
        wanted = self._ids_selected(ids) if ids else set()
        chosen = [
            t
            for t in self.tasks
            if (not ids or t.id in wanted) and (not tags or set(tags) & set(t.tags))
        ]
        if not chosen:
            raise SuiteError(f"{self.source}: no task matches the selection")
        return self.model_copy(update={"tasks": chosen})

    def _ids_selected(self, ids: Sequence[str]) -> set[str]:
        """The ids of the tasks ``ids`` name (see :meth:`select`), or a
        :class:`SuiteError` naming each that names none, and why."""
        known = [t.id for t in self.tasks]
        selected: set[str] = set()
        problems = []
        for given in dict.fromkeys(ids):
            if matching := self._named_by(given, known):
                selected.update(matching)
            elif left_out := self._named_by(given, list(self._left_out)):
                problems.append(f"task {given} is left out: {self._left_out[left_out[0]]}")
            else:
                problems.append(self._no_task(given, known))
        if problems:
            raise SuiteError(f"{self.source}: {'; '.join(problems)}")
        return selected

    def _named_by(self, given: str, ids: list[str]) -> list[str]:
        if given in ids:
            return [given]
        return [i for i in ids if self._attack is not None and i.startswith(f"{given}.")]

    def _no_task(self, given: str, known: list[str]) -> str:
        """``given`` named as no task, with the closest id (a user task's too, in an
        attacked suite) and, in an attacked suite, the form its ids take."""
        users = [i.partition(".")[0] for i in known] if self._attack is not None else []
        close = difflib.get_close_matches(given, list(dict.fromkeys(users + known)), n=1)
        said = f"no task {given}" + (f" (did you mean {close[0]!r}?)" if close else "")
        if self._attack is None:
            return said
        return (
            f"{said}; under an attack the ids are <user task>.<injection task> "
            f"({known[0]}), and a user task's id alone selects it under every injection task"
        )

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
        raise SuiteError(f"{path}{yaml_problem(exc)}") from exc
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
    show_shape = False
    for error in exc.errors():
        loc = list(error["loc"])
        where = ""
        message = error["msg"].removeprefix("Value error, ")
        if loc[:1] == ["tasks"] and len(loc) > 1 and isinstance(loc[1], int):
            index = loc[1]
            item = tasks[index] if index < len(tasks) else None
            name = item.get("id") if isinstance(item, Mapping) else None
            where = f"task {name!r}" if name else f"task #{index + 1}"
            loc = loc[2:]
            if loc[:1] == ["oracle"] and isinstance(item, Mapping):
                loc = _as_written(loc, item.get("oracle"))
                # Pydantic's own words do not say what to write: the shape does.
                show_shape = show_shape or error["type"] != "value_error"
        path = ".".join(str(part) for part in loc if not _is_union_tag(part))
        problems.append(" ".join(p for p in (where, f"{path}:" if path else "", message) if p))
    if show_shape:
        problems.append(ORACLE_SHAPE)
    return "; ".join(dict.fromkeys(problems))


def _as_written(loc: list[Any], oracle: Any) -> list[Any]:
    """An oracle error's location as the user wrote it: a one-turn oracle has no
    ``turns`` (it is read as the only turn)."""
    if loc[1:3] == ["turns", 0] and isinstance(oracle, Mapping) and "turns" not in oracle:
        return ["oracle", *loc[3:]]
    return loc


def _is_union_tag(part: Any) -> bool:
    # pydantic names the union member it tried (``list[str]``, ``str``) in the location.
    return isinstance(part, str) and ("[" in part or part in ("str", "int", "float"))
