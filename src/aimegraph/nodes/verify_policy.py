"""When the final answer goes to the verifier (``AimeConfig.verify``).

``final`` and ``both`` always send it, ``tasks`` and ``off`` never. ``auto`` (the
default) sends it wherever the verifier can catch something, and skips it only for
a run whose answer is written from tool outputs alone: every task a tool step (no
actor wrote anything the engine did not see), each completed at its first attempt,
no replan, no file written in the workspace, and an answer that passes a check
needing no model call (:func:`ungrounded`): each figure in it is in a tool output,
the goal or the conversation, and it quotes some tool output. A direct answer (a
first plan that answers instead of planning work) is always verified: that the goal
needed no work is the one claim in the run nothing else checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aimegraph.config import VerificationSettings
from aimegraph.state import Task

_FIGURE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")
_TERM = re.compile(r"[^\W\d_]{4,}")


def verifies(cfg: VerificationSettings, reason: str | None) -> bool:
    """Whether the answer goes to the verifier, given what ``auto`` would verify it
    for (``reason``, from :func:`reason_to_verify`; None: nothing)."""
    if cfg.verify in ("final", "both"):
        return True
    return cfg.verify == "auto" and reason is not None


def reason_to_verify(state: Mapping[str, Any], answer: str) -> str | None:
    """Why ``auto`` verifies this run's ``answer``, apart from files written (the
    caller lists them only when this is None); None when the tool outputs the
    answer is made from are all there is to check it against."""
    tasks = list((state.get("tasks") or {}).values())
    if not tasks:
        return "the planner answered without running anything"
    if any(task.call is None for task in tasks):
        return "actors did tasks"
    if state.get("replans", 0) or any(_troubled(task) for task in tasks):
        return "tasks failed or were replanned"
    outputs = [_output(task) for task in tasks]
    known = [state.get("goal") or "", state.get("conversation") or ""]
    return ungrounded(answer, outputs, known)


def ungrounded(answer: str, outputs: Sequence[str], known: Iterable[str] = ()) -> str | None:
    """What makes ``answer`` more than the tool ``outputs`` show (None when nothing
    does): a figure that is in no output and not in the ``known`` texts (the goal,
    the conversation), or no figure or word of four letters or more from the
    outputs at all (a hollow answer: "Done.")."""
    given = " ".join(outputs)
    figures, shown = _figures(answer), _figures(given)
    allowed = shown | _figures(" ".join(known))
    if unsupported := sorted(figures - allowed):
        return f"the answer has figures no tool output shows: {', '.join(unsupported[:5])}"
    quoted = (figures & shown) or (_terms(answer) & (_terms(given) - _terms(" ".join(known))))
    if not quoted:
        return "the answer quotes none of the tool outputs"
    return None


def files_reason(files: Sequence[str]) -> str | None:
    """Why ``auto`` verifies a run that wrote ``files`` (None when it wrote none)."""
    return f"the run wrote files ({', '.join(files[:3])})" if files else None


def _troubled(task: Task) -> bool:
    return task.status != "completed" or task.attempts > 1


def _output(task: Task) -> str:
    result = task.result
    return "" if result is None else "\n".join([result.summary, *result.artifacts.values()])


def _figures(text: str) -> set[str]:
    return {_number(m) for m in _FIGURE.findall(text)}


def _number(text: str) -> str:
    """A figure as written, without thousands separators and trailing decimal zeros
    (``1,300.50`` and ``1300.5`` are the same figure)."""
    plain = text.replace(",", "")
    return (plain.rstrip("0").rstrip(".") or "0") if "." in plain else plain


def _terms(text: str) -> set[str]:
    return {word.casefold() for word in _TERM.findall(text)}
