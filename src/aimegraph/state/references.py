"""References in a tool step's arguments to its dependencies' results.

A tool step (``TaskSpec.call``) is one tool call the engine makes with no model
call; its arguments may name what a dependency handed back. In every string of the
arguments (nested lists and objects included; keys are left alone):

* ``$t1`` is task ``t1``'s result text (``TaskResult.summary``);
* ``$t1.key`` is the field ``key`` of ``t1``'s JSON result: its result text parsed
  as JSON, or, when that text is not JSON or has no such field, its artifacts. A
  dotted path (``$t1.rows.0.name``) walks into nested objects, list indexes and
  string values that hold JSON;
* ``${t1}`` and ``${t1.key}`` are the same, for ids or keys with other characters
  than letters, digits and ``_``, or a reference followed by such a character;
* ``$$`` is a literal ``$``; a ``$`` followed by anything else stays as it is.

A string that is exactly one reference becomes the referenced value itself (a
number stays a number, an object an object); a reference inside a longer string is
replaced by its text (other values as compact JSON).

A reference may only name one of the task's ``dependencies``: anything else is a
plan error, sent back to the planner. A field that is not there when the step runs
fails the task with the reason (:class:`UnresolvedReferenceError`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from aimegraph.state.models import TaskResult

__all__ = ["UnresolvedReferenceError", "referenced_ids", "resolve_args"]

_REFERENCE = re.compile(
    r"\$(?:"
    r"(?P<dollar>\$)"
    r"|\{(?P<braced>[^{}.]+)(?P<braced_path>(?:\.[^{}.]+)*)\}"
    r"|(?P<id>[A-Za-z0-9_]+)(?P<path>(?:\.[A-Za-z0-9_]+)*)"
    r")"
)


class UnresolvedReferenceError(ValueError):
    """A reference whose value is not there when the step runs; says why."""


def referenced_ids(args: object) -> set[str]:
    """The task ids the references in ``args`` name."""
    return {ref[0] for text in _strings(args) for ref in _references(text)}


def resolve_args(args: Mapping[str, Any], results: Mapping[str, TaskResult]) -> dict[str, Any]:
    """``args`` with every reference replaced by what it names in ``results``
    (the dependencies' results by id).

    Raises:
        UnresolvedReferenceError: a reference names a task with no result, or a
            field its result does not have.
    """
    return {name: _resolved(value, results) for name, value in args.items()}


def _resolved(value: Any, results: Mapping[str, TaskResult]) -> Any:
    if isinstance(value, str):
        return _resolved_text(value, results)
    if isinstance(value, list):
        return [_resolved(item, results) for item in value]
    if isinstance(value, dict):
        return {key: _resolved(item, results) for key, item in value.items()}
    return value


def _resolved_text(text: str, results: Mapping[str, TaskResult]) -> Any:
    whole = _REFERENCE.fullmatch(text)
    if whole is not None and not whole["dollar"]:
        return _value(*_parts(whole), results)

    def replace(match: re.Match[str]) -> str:
        if match["dollar"]:
            return "$"
        value = _value(*_parts(match), results)
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    return _REFERENCE.sub(replace, text)


def _references(text: str) -> list[tuple[str, tuple[str, ...]]]:
    return [_parts(m) for m in _REFERENCE.finditer(text) if not m["dollar"]]


def _parts(match: re.Match[str]) -> tuple[str, tuple[str, ...]]:
    """The task id and the field path of a reference."""
    task_id = match["braced"] if match["braced"] is not None else match["id"]
    path = match["braced_path"] if match["braced"] is not None else match["path"]
    return task_id.strip(), tuple(key for key in path.split(".") if key)


def _value(task_id: str, path: tuple[str, ...], results: Mapping[str, TaskResult]) -> Any:
    written = "$" + ".".join((task_id, *path))
    result = results.get(task_id)
    if result is None:
        raise UnresolvedReferenceError(f"{written}: task {task_id!r} has no result")
    if not path:
        return result.summary
    try:
        return _walk(result.summary, path)
    except LookupError as in_text:
        if path[0] not in result.artifacts:
            raise UnresolvedReferenceError(
                f"{written}: {in_text.args[0]} in the result of {task_id!r}, and it has no "
                f"artifact {path[0]!r}"
                + (f" (artifacts: {', '.join(result.artifacts)})" if result.artifacts else "")
            ) from None
    try:
        return _walk(result.artifacts[path[0]], path[1:])
    except LookupError as in_artifact:
        message = f"{written}: {in_artifact.args[0]} in artifact {path[0]!r} of {task_id!r}"
        raise UnresolvedReferenceError(message) from None


def _walk(value: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` in ``value``; a string on the way is read as JSON.

    Raises:
        LookupError: saying where the path ends.
    """
    for depth, key in enumerate(path):
        where = ".".join(path[: depth + 1])
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise LookupError(f"no field {where!r}: the text is not JSON") from None
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            known = (
                f" (fields: {', '.join(map(str, value))[:200]})" if isinstance(value, dict) else ""
            )
            raise LookupError(f"no field {where!r}{known}")
    return value


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    return []
