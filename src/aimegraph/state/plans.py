"""Predefined plans: a plan given to a run instead of asking the planner for its first
one (BMW Agents' predefined workflows). A plan is a ``PlanUpdate``, its dict (e.g.
read from a YAML or JSON file), or just the list of its task specs; its tasks may be
actor tasks or tool steps (``call``). It is validated as the planner's plans are.

Unlike a planner model's reply, whose stray fields are ignored, a given plan with a
field no plan has is refused: it is a typo a person would want to hear about."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from aimegraph.state.models import PlanUpdate, TaskSpec, TeamSpec, ToolCallSpec
from aimegraph.state.progress import PlanError

__all__ = ["PlanLike", "as_plan", "load_plan", "read_plan"]

PlanLike = PlanUpdate | Mapping[str, Any] | Sequence[Mapping[str, Any]]
"""A plan as a run takes it: a ``PlanUpdate``, its dict, or a list of task specs."""


def load_plan(value: PlanLike | str | Path) -> PlanUpdate:
    """``value`` as a plan; a string or path is a YAML or JSON file to read.

    Raises:
        PlanError: the file cannot be read, or its content is no plan (the reason).
    """
    if isinstance(value, str | Path):
        return read_plan(value)
    return as_plan(value)


def read_plan(path: str | Path) -> PlanUpdate:
    """The plan in a YAML or JSON file (JSON is YAML too).

    Raises:
        PlanError: the file cannot be read, or its content is no plan (the reason).
    """
    import yaml  # only for plan files

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanError(f"cannot read the plan file {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
        raise PlanError(f"the plan file {path} is not YAML or JSON: {problem}{where}") from None
    try:
        return as_plan(data)
    except PlanError as exc:
        raise PlanError(f"the plan file {path}: {exc}") from None


def as_plan(value: object) -> PlanUpdate:
    """``value`` (a ``PlanUpdate``, its dict or a list of task specs) as a plan.

    Raises:
        PlanError: it is no plan, or names a field no plan has (the reason).
    """
    if isinstance(value, PlanUpdate):
        return value
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        value = {"tasks": list(value)}
    if not isinstance(value, Mapping):
        raise PlanError(
            "a plan is an object with 'tasks' (a list of task specs), or that list; "
            f"got {type(value).__name__}"
        )
    if problems := _unknown_fields(value):
        raise PlanError("; ".join(problems))
    try:
        return PlanUpdate.model_validate(value)
    except ValidationError as exc:
        raise PlanError(
            "not a valid plan: "
            + "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'plan'}: {e['msg']}" for e in exc.errors()
            )
        ) from None


def _unknown_fields(plan: Mapping[str, Any]) -> list[str]:
    problems = _unknown(plan, PlanUpdate, "the plan")
    tasks = plan.get("tasks")
    for n, spec in enumerate(tasks if isinstance(tasks, list) else []):
        if not isinstance(spec, Mapping):
            continue
        where = f"task {spec.get('id', n + 1)!r}"
        problems += _unknown(spec, TaskSpec, where)
        for key, model in (("call", ToolCallSpec), ("team", TeamSpec)):
            if isinstance(part := spec.get(key), Mapping):
                problems += _unknown(part, model, f"the {key} of {where}")
    return problems


def _unknown(given: Mapping[str, Any], model: type[BaseModel], where: str) -> list[str]:
    known = list(model.model_fields)
    problems = []
    for name in given:
        if name not in known:
            close = difflib.get_close_matches(str(name), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"{where} has an unknown field {name!r}{hint}")
    return problems
