"""Each kind of check on answers, typed answers, files and programs; each says why
it failed; none raises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from aimegraph.eval import CheckInput, load_suite
from aimegraph.eval.checkers import Judge, numbers_in, run_checks
from aimegraph.eval.rollout import program_runner
from aimegraph.eval.suite import Suite
from aimegraph.models.offline.scripted import ScriptedChatModel

SCHEMA = {
    "type": "object",
    "properties": {"total": {"type": "number"}, "names": {"type": "array"}},
}


def _suite(tmp_path: Path, checks: list[dict[str, Any]], **task: Any) -> Suite:
    (tmp_path / "expected.csv").write_text("a,b\n1,2\n")
    path = tmp_path / "suite.yaml"
    body = {"id": "t", "goal": "Do it.", "check": checks, "response_format": SCHEMA, **task}
    path.write_text(yaml.safe_dump({"tasks": [body]}))
    return load_suite(path)


def _judge(
    tmp_path: Path,
    checks: list[dict[str, Any]],
    answer: str = "",
    structured: Any = None,
    judge: Judge | None = None,
) -> list[tuple[bool, str]]:
    suite = _suite(tmp_path, checks)
    task = suite.tasks[0]
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    inp = CheckInput(answer, structured, workspace, {"status": "succeeded"}, task)
    results = run_checks(task, inp, suite, judge=judge, run_program=program_runner)
    return [(r.passed, r.reason) for r in results]


@pytest.mark.parametrize(
    ("check", "answer", "passed"),
    [
        ({"exact": "Oslo"}, " Oslo\n", True),
        ({"exact": "Oslo"}, "oslo", False),
        ({"exact": "Oslo", "ignore_case": True}, "oslo", True),
        ({"contains": "oslo"}, "It is OSLO.", True),
        ({"contains": ["Oslo", "Bergen"]}, "Oslo only", False),
        ({"contains": "Oslo", "ignore_case": False}, "OSLO", False),
        ({"regex": r"\b42\b"}, "the answer is 42.", True),
        ({"regex": r"\b42\b"}, "the answer is 420", False),
        ({"number": 1234.5, "tolerance": 0.01}, "Total: $1,234.50 over 12 months", True),
        ({"number": -3}, "It fell by -3 points", True),
        ({"number": 10.4, "relative": 0.01}, "about 10.45%", True),
        ({"number": 7}, "seven", False),
        ({"number": 7}, "2024-03-15", False),
    ],
)
def test_answer_checks(tmp_path: Path, check: dict[str, Any], answer: str, passed: bool) -> None:
    ((ok, reason),) = _judge(tmp_path, [check], answer)
    assert ok is passed, reason


def test_numbers_in_reads_separators_signs_and_exponents() -> None:
    assert numbers_in("1,234.5 and -2 and 3e3, v2, 1.2.3") == [1234.5, -2.0, 3000.0, 1.2]
    assert numbers_in("in 2024-03-15") == [2024.0, 3.0, 15.0]


def test_failures_say_what_was_expected(tmp_path: Path) -> None:
    ((_, number),) = _judge(tmp_path, [{"number": 7}], "I got 6 and 8")
    assert number == "expected 7 ±1e-06; the answer has 6, 8"
    ((_, contains),) = _judge(tmp_path, [{"contains": ["a", "zz"]}], "abc")
    assert contains == "missing 'zz' in 'abc'"


def test_fields_of_the_typed_answer(tmp_path: Path) -> None:
    typed = {"total": 12.5, "names": ["Ada", "Ben"]}
    results = _judge(
        tmp_path,
        [
            {"field": "total", "number": 12.5},
            {"field": "names.1", "exact": "Ben"},
            {"field": "names", "contains": "Ada"},
            {"field": "missing", "exact": "x"},
        ],
        structured=typed,
    )
    assert [ok for ok, _ in results] == [True, True, True, False]
    assert results[3][1] == "the typed answer has no field 'missing'"
    ((ok, why),) = _judge(tmp_path, [{"field": "total", "number": 1}], structured=None)
    assert not ok and "no field" in why


def test_file_checks(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "out.csv").write_text("a,b  \n1,2\n\n")
    (workspace / "data.json").write_text('{"x": [1, 2]}')
    results = _judge(
        tmp_path,
        [
            {"file": "out.csv"},
            {"file": "out.csv", "equals": "a,b\n1,2"},
            {"file": "out.csv", "expected": "expected.csv"},
            {"file": "out.csv", "contains": "1,2"},
            {"file": "out.csv", "regex": "^a,b"},
            {"file": "data.json", "json": {"x": [1, 2]}},
            {"file": "data.json", "json": {"x": [2, 1]}},
            {"file": "out.csv", "equals": "a,b\n1,3"},
            {"file": "absent.txt"},
            {"file": "../suite.yaml"},
        ],
    )
    assert [ok for ok, _ in results] == [True] * 6 + [False] * 4
    assert (
        results[7][1]
        == "out.csv differs from the expected content: line 2 is '1,2', expected '1,3'"
    )
    assert results[8][1] == "absent.txt was not written"
    assert results[9][1] == "../suite.yaml is outside the workspace"


def test_programs_run_through_the_python_tool(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "echo.py").write_text("import sys\nprint(' '.join(reversed(sys.argv[1:])))\n")
    (workspace / "crash.py").write_text("raise SystemExit('broken')\n")
    results = _judge(
        tmp_path,
        [
            {"program": "echo.py", "args": ["a", "b"], "stdout": "b a"},
            {"program": "echo.py", "args": ["a"], "stdout": "b"},
            {"program": "echo.py", "args": ["x", "y"], "contains": "y x"},
            {"program": "crash.py", "stdout": ""},
            {"program": "absent.py", "stdout": ""},
        ],
    )
    assert [ok for ok, _ in results] == [True, False, True, False, False]
    assert "crash.py failed: exit code: 1" in results[3][1] and "broken" in results[3][1]
    assert results[4][1] == "absent.py was not written"


def passes_when_answer_is_42(inp: CheckInput) -> tuple[bool, str]:
    return inp.answer.strip() == "42", f"answer {inp.answer!r}, workspace {inp.workspace.name}"


def scores_half(inp: CheckInput) -> float:
    return 0.5


def crashes(inp: CheckInput) -> bool:
    raise RuntimeError("checker bug")


def test_python_checkers(tmp_path: Path) -> None:
    here = __name__
    results = _judge(
        tmp_path,
        [
            {"python": f"{here}:passes_when_answer_is_42"},
            {"python": f"{here}:scores_half"},
            {"python": f"{here}:crashes"},
            {"python": f"{here}:nothing_here"},
        ],
        answer="42",
    )
    assert results[0] == (True, "answer '42', workspace ws")
    assert results[1] == (False, f"{here}:scores_half scored 0.5")
    assert results[2] == (False, "the check raised RuntimeError: checker bug")
    assert not results[3][0] and "cannot import checker" in results[3][1]


def test_rubric_is_judged_by_the_separate_model(tmp_path: Path) -> None:
    model = ScriptedChatModel.from_dict(
        {
            "reporter": [  # the judge's role is unscripted: it reads the reporter list
                {"passed": True, "reasoning": "Cites the source.", "issues": []},
                {"passed": False, "reasoning": "No source.", "issues": ["cite the file"]},
            ]
        }
    )
    judge = Judge(model)
    rubric = [{"rubric": "The answer cites the file it used."}]
    assert _judge(tmp_path, rubric, "42 (from data.csv)", judge=judge) == [
        (True, "Cites the source.")
    ]
    assert _judge(tmp_path, rubric, "42", judge=judge) == [
        (False, "No source. Issues: cite the file")
    ]
    assert judge.usage.llm_calls == 2
    prompt = model.prompts()[0]
    assert "# Role: judge" in prompt and "The answer cites the file it used." in prompt
    assert "42 (from data.csv)" in prompt and "Do it." in prompt
    ((ok, why),) = _judge(tmp_path, rubric, "42")
    assert not ok and "needs a judge model" in why


def test_every_bundled_expected_file_is_there() -> None:
    suite = load_suite("bundled")
    for task in suite.tasks:
        for check in task.check:
            if check.expected is not None:
                assert suite.file_path(check.expected).is_file(), (task.id, check.expected)
