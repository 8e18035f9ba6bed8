"""Judging a rollout: each :class:`~aimegraph.eval.suite.Check` of its task, run on
what the system produced (the final answer, the typed answer, the workspace, the
run's state). A rollout passes when every check passes; each check says why not.

A check never raises: a missing file, an unparsable number, a user checker that
crashes and a judge that fails are all failed checks with their reason.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel

from aimegraph.eval.suite import Check, Suite, Task
from aimegraph.imports import import_object
from aimegraph.models.calls import invoke_structured, resolve_mode
from aimegraph.prompts import judge as prompts
from aimegraph.state import Usage, Verdict

__all__ = [
    "CheckInput",
    "CheckResult",
    "Judge",
    "field_value",
    "numbers_in",
    "run_checks",
    "structured_json",
]

_CLIP = 300


@dataclass(frozen=True)
class CheckInput:
    """What a checker sees of a finished rollout.

    ``answer`` is the final answer's text; ``structured_response`` the typed answer
    as JSON data (``None`` without one); ``workspace`` the rollout's own directory;
    ``state`` the system's output state (aimegraph's, or the ReAct loop's); ``task``
    the suite task; ``environment`` the rollout's simulated world after the run (a
    public benchmark's, :class:`~aimegraph.eval.environment.RolloutEnvironment`'s
    ``state``; ``None`` for a suite of files).
    """

    answer: str
    structured_response: Any
    workspace: Path
    state: Mapping[str, Any]
    task: Task
    environment: Any = None


@dataclass(frozen=True)
class CheckResult:
    check: str
    passed: bool
    reason: str

    def record(self) -> dict[str, Any]:
        return {"check": self.check, "passed": self.passed, "reason": self.reason}


@dataclass
class Judge:
    """The rubric judge: a separate model, asked for a ``Verdict`` with re-asks."""

    model: BaseChatModel
    retries: int = 2
    usage: Usage = field(default_factory=Usage)

    def grade(self, rubric: str, inp: CheckInput) -> tuple[bool, str]:
        typed = (
            prompts.TYPED.format(typed=json.dumps(inp.structured_response, ensure_ascii=False))
            if inp.structured_response is not None
            else ""
        )
        requests = "\n".join(f"- {goal}" for goal in inp.task.goals)
        messages = [
            SystemMessage(prompts.SYSTEM),
            HumanMessage(
                prompts.GRADE.format(
                    requests=requests, answer=inp.answer, typed=typed, rubric=rubric
                )
            ),
        ]
        reply = invoke_structured(
            self.model,
            Verdict,
            messages,
            role="judge",
            mode=resolve_mode("auto", self.model, structured=True),
            retries=self.retries,
        )
        self.usage = self.usage + reply.usage
        if reply.value is None:
            return False, f"the judge gave no verdict: {reply.error}"
        verdict = reply.value
        issues = "; ".join(verdict.issues)
        return verdict.passed, verdict.reasoning + (f" Issues: {issues}" if issues else "")


ProgramRunner = Callable[[Path, str], str]
"""Runs Python ``code`` in a workspace and returns the python tool's output."""


def run_checks(
    task: Task,
    inp: CheckInput,
    suite: Suite,
    *,
    judge: Judge | None = None,
    run_program: ProgramRunner | None = None,
) -> list[CheckResult]:
    """Every check of ``task`` on ``inp``, in order."""
    return [_run_one(check, inp, suite, judge, run_program) for check in task.check]


def _run_one(
    check: Check,
    inp: CheckInput,
    suite: Suite,
    judge: Judge | None,
    run_program: ProgramRunner | None,
) -> CheckResult:
    label = check.describe()
    try:
        passed, reason = _judge(check, inp, suite, judge, run_program)
    except Exception as exc:  # noqa: BLE001 - a checker that crashes fails its check
        passed, reason = False, f"the check raised {type(exc).__name__}: {exc}"
    return CheckResult(label, passed, reason)


def _judge(
    check: Check,
    inp: CheckInput,
    suite: Suite,
    judge: Judge | None,
    run_program: ProgramRunner | None,
) -> tuple[bool, str]:
    kind = check.kind
    if kind == "file":
        return _file(check, inp.workspace, suite)
    if kind == "program":
        if run_program is None:
            raise RuntimeError("no program runner")
        return _program(check, inp.workspace, run_program)
    if kind == "python":
        return _python(check, inp)
    if kind == "rubric":
        if judge is None:
            return False, "a rubric check needs a judge model (--judge-model)"
        return judge.grade(check.rubric or "", inp)
    if check.field is not None:
        found, value = field_value(inp.structured_response, check.field)
        if not found:
            return False, f"the typed answer has no field {check.field!r}"
        if kind == "number":
            return _number(check, value)
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    else:
        text = inp.answer
    if kind == "exact":
        return _exact(check, text)
    if kind == "contains":
        return _contains(check.texts, text, check.ignore_case is not False)
    if kind == "regex":
        return _regex(check.regex or "", text)
    return _number(check, text)


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _CLIP else text[: _CLIP - 3] + "..."


def _exact(check: Check, text: str) -> tuple[bool, str]:
    expected, got = (check.exact or "").strip(), text.strip()
    same = expected.casefold() == got.casefold() if check.ignore_case else expected == got
    return (True, "exact match") if same else (False, f"expected {expected!r}, got {_clip(got)!r}")


def _contains(texts: Sequence[str], text: str, ignore_case: bool) -> tuple[bool, str]:
    haystack = text.casefold() if ignore_case else text
    missing = [t for t in texts if (t.casefold() if ignore_case else t) not in haystack]
    if missing:
        return False, f"missing {', '.join(map(repr, missing))} in {_clip(text)!r}"
    return True, "contains " + ", ".join(map(repr, texts))


def _regex(pattern: str, text: str) -> tuple[bool, str]:
    if re.search(pattern, text):
        return True, f"matches /{pattern}/"
    return False, f"no match for /{pattern}/ in {_clip(text)!r}"


_NUMBER = re.compile(
    r"(?<![\w.])[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])"
)


def numbers_in(text: str) -> list[float]:
    """The numbers written in ``text``: signs, decimals, exponents and thousands
    separators (``1,234.5``) read; words and dates' dashes are not numbers."""
    found = []
    for match in _NUMBER.finditer(text):
        token = match.group(0).replace(",", "").replace("−", "-")
        if not any(ch.isdigit() for ch in token):
            continue
        try:
            found.append(float(token))
        except ValueError:
            continue
    return found


def _number(check: Check, value: Any) -> tuple[bool, str]:
    expected = float(check.number or 0.0)
    if isinstance(value, bool):
        candidates: list[float] = []
    elif isinstance(value, int | float):
        candidates = [float(value)]
    else:
        candidates = numbers_in(str(value))
    margin = check.tolerance
    if check.relative is not None:
        margin = max(margin, abs(expected) * check.relative)
    for number in candidates:
        if math.isfinite(number) and abs(number - expected) <= margin:
            return True, f"found {number:.12g} (expected {expected:.12g} ±{margin:g})"
    if not candidates:
        return False, f"no number in {_clip(str(value))!r} (expected {expected:.12g})"
    shown = ", ".join(f"{n:.12g}" for n in candidates[:8])
    return False, f"expected {expected:.12g} ±{margin:g}; the answer has {shown}"


def field_value(data: Any, path: str) -> tuple[bool, Any]:
    """The value at a dotted ``path`` (list items by index) in JSON ``data``."""
    value = data
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return False, None
    return True, value


def _normalised(text: str) -> str:
    """Text compared line by line: trailing blanks and the final newline ignored."""
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def _file(check: Check, workspace: Path, suite: Suite) -> tuple[bool, str]:
    name = check.file or ""
    path = (workspace / name).resolve()
    if not path.is_relative_to(workspace.resolve()):
        return False, f"{name} is outside the workspace"
    if not path.is_file():
        return False, f"{name} was not written"
    mode = check.file_mode
    if mode is None:
        return True, f"{name} exists"
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return False, f"cannot read {name}: {exc}"
    if mode == "json":
        try:
            value = json.loads(content)
        except ValueError as exc:
            return False, f"{name} is not JSON: {exc}"
        if value == check.json_value:
            return True, f"{name} holds the expected JSON"
        return False, f"{name} holds other JSON: {_clip(json.dumps(value))}"
    if mode == "contains":
        return _contains(check.texts, content, check.ignore_case is not False)
    if mode == "regex":
        return _regex(check.regex or "", content)
    expected = (
        check.equals
        if mode == "equals"
        else suite.file_path(check.expected or "").read_text(encoding="utf-8")
    )
    if _normalised(content) == _normalised(expected or ""):
        return True, f"{name} has the expected content"
    return (
        False,
        f"{name} differs from the expected content: {_first_difference(content, expected or '')}",
    )


def _first_difference(got: str, expected: str) -> str:
    mine, theirs = _normalised(got).splitlines(), _normalised(expected).splitlines()
    for number, (a, b) in enumerate(zip(mine, theirs, strict=False), 1):
        if a != b:
            return f"line {number} is {_clip(a)!r}, expected {_clip(b)!r}"
    return f"{len(mine)} line(s), expected {len(theirs)}"


_PROGRAM = """\
import runpy, sys
sys.argv = {argv!r}
runpy.run_path({path!r}, run_name="__main__")
"""


def _program(check: Check, workspace: Path, run_program: ProgramRunner) -> tuple[bool, str]:
    name = check.program or ""
    if not (workspace / name).is_file():
        return False, f"{name} was not written"
    code = _PROGRAM.format(argv=[name, *check.args], path=name)
    output = run_program(workspace, code)
    if output.startswith("exit code:") or output.startswith("timed out"):
        return False, f"{name} failed: {_clip(output)}"
    printed = "" if output == "(no output)" else output
    if check.stdout is not None:
        if _normalised(printed) == _normalised(check.stdout):
            return True, f"{name} printed the expected output"
        return False, f"{name} printed other output: {_first_difference(printed, check.stdout)}"
    return _contains(check.texts, printed, check.ignore_case is not False)


def _python(check: Check, inp: CheckInput) -> tuple[bool, str]:
    checker = import_object(
        check.python or "",
        malformed=f"python takes module:attr; got {check.python!r}",
        failed="cannot import checker",
    )
    if not callable(checker):
        return False, f"{check.python} is not callable"
    result = checker(inp)
    if isinstance(result, tuple):
        passed, reason = result
        return bool(passed), str(reason)
    if isinstance(result, bool):
        return result, f"{check.python} returned {result}"
    score = float(result)
    return score >= 1.0, f"{check.python} scored {score:g}"


def structured_json(value: Any) -> Any:
    """A typed answer as JSON data (a pydantic model dumped; a dict as it is)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if value is None:
        return None
    return json.loads(json.dumps(value, default=str))
