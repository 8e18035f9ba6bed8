"""The suite format: what loads, and the one clear error for each kind of mistake."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from aimegraph.eval import SuiteError, load_suite
from aimegraph.eval.oracle_plays import is_look
from aimegraph.eval.suite import BUNDLED_SUITE, ORACLE_SHAPE, Check, is_suite_file


def _load(tmp_path: Path, tasks: Any, name: str = "suite.yaml", **top: Any) -> Any:
    path = tmp_path / name
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    if name.endswith(".jsonl"):
        path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    else:
        path.write_text(yaml.safe_dump({"tasks": tasks, **top}))
    return load_suite(path)


def _error(tmp_path: Path, tasks: Any, **top: Any) -> str:
    with pytest.raises(SuiteError) as caught:
        _load(tmp_path, tasks, **top)
    return str(caught.value)


GOOD = {"id": "t1", "goal": "Sum b.", "files": ["data.csv"], "check": {"number": 2}}


def test_yaml_and_jsonl_load_the_same_task(tmp_path: Path) -> None:
    from_yaml = _load(tmp_path, [GOOD]).tasks[0]
    from_jsonl = _load(tmp_path, [GOOD], name="suite.jsonl").tasks[0]
    assert from_yaml == from_jsonl
    assert from_yaml.files == {"data.csv": "data.csv"}
    assert from_yaml.goals == ["Sum b."] and from_yaml.check[0].kind == "number"


def test_bundled_suite_has_thirty_tasks_of_every_kind() -> None:
    suite = load_suite(BUNDLED_SUITE)
    assert len(suite.tasks) >= 30
    tags = {tag for task in suite.tasks for tag in task.tags}
    assert {"csv", "arithmetic", "text", "transform", "program", "multi-turn", "typed"} <= tags
    assert all(task.oracle is not None for task in suite.tasks)
    kinds = {check.kind for task in suite.tasks for check in task.check}
    assert {"exact", "contains", "regex", "number", "file", "program"} <= kinds
    assert sum(task.turns is not None for task in suite.tasks) >= 3
    assert sum(task.response_format is not None for task in suite.tasks) >= 3


def test_bundled_size_tags_match_the_oracle_calls() -> None:
    """The bench's groups, by these tags (as the suite was first written): a one-step
    task's work is one tool call, a first look at a file aside; a long one's four or
    more. (contacts-emails, tagged neither, lost a read nothing needed: one call.)"""
    for task in load_suite(BUNDLED_SUITE).tasks:
        assert task.oracle is not None
        calls = sum(
            len(stage.calls)
            for turn in task.oracle.turns
            for stage in turn.stages
            if not is_look(stage, turn)
        )
        assert "one-step" not in task.tags or calls == 1, task.id
        assert ("long" in task.tags) == (calls >= 4), task.id


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ({"id": "t1", "check": {"number": 2}}, "task 't1' a task needs exactly one of goal, turns"),
        ({**GOOD, "turns": ["a"]}, "exactly one of goal, turns"),
        ({**GOOD, "check": {"nummber": 2}}, "a check needs exactly one of exact, contains"),
        ({**GOOD, "check": {"exact": "2", "contains": "2"}}, "got exact, contains"),
        (
            {**GOOD, "check": {"exact": "2", "tolerance": 1}},
            "tolerance cannot modify a 'exact' check",
        ),
        ({**GOOD, "check": {"regex": "("}}, "does not compile"),
        ({**GOOD, "check": {"python": "not a spec"}}, "python takes module:attr"),
        ({**GOOD, "check": {"program": "p.py", "args": ["1"]}}, "exactly one of stdout, contains"),
        ({**GOOD, "check": {"field": "x", "exact": "2"}}, "has no response_format"),
        ({**GOOD, "check": []}, "check"),
        (
            {**GOOD, "files": {"../out.csv": "data.csv"}},
            "must be a relative path inside the workspace",
        ),
        ({**GOOD, "response_format": {"type": "array"}}, "must describe an object"),
        ({**GOOD, "budget": {"max_llm_calls": 0}}, "budget.max_llm_calls"),
        ({**GOOD, "colour": "red"}, "colour: Extra inputs are not permitted"),
        ({**GOOD, "id": "has space"}, "id: String should match pattern"),
    ],
)
def test_mistakes_are_one_clear_error(tmp_path: Path, task: dict[str, Any], message: str) -> None:
    error = _error(tmp_path, [task])
    assert error.startswith(str(tmp_path / "suite.yaml"))
    assert message in error


def test_a_missing_file_names_the_task_and_the_folder(tmp_path: Path) -> None:
    error = _error(tmp_path, [{**GOOD, "files": ["nope.csv"]}])
    assert "task 't1': files: nope.csv does not exist" in error and str(tmp_path) in error


def test_repeated_ids_and_unknown_suite_fields(tmp_path: Path) -> None:
    assert "task ids repeat: t1" in _error(tmp_path, [GOOD, GOOD])
    assert "unknown suite field(s) defaults" in _error(tmp_path, [GOOD], defaults={})


def test_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "suite.jsonl"
    path.write_text(json.dumps(GOOD) + "\n{not json\n")
    with pytest.raises(SuiteError, match="suite.jsonl line 2 is not JSON"):
        load_suite(path)


def test_unreadable_and_unknown_files(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="cannot read suite"):
        load_suite(tmp_path / "absent.yaml")
    (tmp_path / "suite.txt").write_text("tasks: []")
    with pytest.raises(SuiteError, match="a suite is a .yaml, .yml, .json or .jsonl file"):
        load_suite(tmp_path / "suite.txt")


ORACLE_STAGE = {"id": "s1", "title": "Do it", "calls": [{"tool": "python", "args": {"code": "1"}}]}


@pytest.mark.parametrize(
    ("oracle", "message"),
    [
        ({"stages": [ORACLE_STAGE]}, "exactly one of answer (write answer: TEXT) or structured"),
        (
            {
                "stages": [ORACLE_STAGE, {**ORACLE_STAGE, "id": "s2", "after": []}],
                "answer": "x",
                "turns": None,
            },
            "turns",
        ),
        (
            {
                "stages": [
                    ORACLE_STAGE,
                    {**ORACLE_STAGE, "id": "s2"},
                    {**ORACLE_STAGE, "id": "s3", "result": "{stage:s1}"},
                ],
                "answer": "x",
            },
            "uses {stage:s1} but does not come after it: write after: [s2, s1]",
        ),
        (
            {"stages": [ORACLE_STAGE], "answer": "{stage:s9}"},
            "unknown stages ['s9']; its stages are ['s1']",
        ),
        (
            {"stages": [{"id": "s1", "titel": "Do it"}], "answer": "x"},
            "oracle.stages.0.title: Field required",
        ),
        (
            {"stages": [{**ORACLE_STAGE, "calls": [{"tool": "python", "arg": {}}]}], "answer": "x"},
            "a call is {tool: NAME, args: {...}, derived: {LITERAL: HOW}}",
        ),
    ],
)
def test_oracle_mistakes(tmp_path: Path, oracle: dict[str, Any], message: str) -> None:
    assert message in _error(tmp_path, [{**GOOD, "oracle": oracle}])


def test_an_oracle_scripts_every_turn(tmp_path: Path) -> None:
    task = {**GOOD, "goal": None, "turns": ["a", "b"]}
    task.pop("goal")
    error = _error(tmp_path, [{**task, "oracle": {"stages": [ORACLE_STAGE], "answer": "x"}}])
    assert "the oracle scripts 1 turn(s); the task has 2: write oracle: {turns: [...]}" in error


def test_an_oracle_pydantic_error_shows_the_oracle_shape(tmp_path: Path) -> None:
    error = _error(tmp_path, [{**GOOD, "oracle": {"stages": [{"id": "s1"}], "answer": "x"}}])
    assert "task 't1' oracle.stages.0.title: Field required" in error
    assert error.endswith(ORACLE_SHAPE)


TYPED = {"type": "object", "properties": {"total": {"type": "number"}, "n": {"type": "integer"}}}


def test_a_typed_task_without_structured_says_what_to_write(tmp_path: Path) -> None:
    """The message of issue 38: a typed task whose oracle answers with text."""
    oracle = {"stages": [ORACLE_STAGE], "answer": "{stage:s1}"}
    error = _error(tmp_path, [{**GOOD, "response_format": TYPED, "oracle": oracle}])
    assert "the task has a response_format, so the oracle's last turn answers with" in error
    assert "structured: {n: VALUE, total: VALUE}" in error and "instead of answer" in error


def test_an_untyped_task_with_structured_says_what_to_write(tmp_path: Path) -> None:
    oracle = {"stages": [ORACLE_STAGE], "structured": {"total": "{stage:s1}"}}
    error = _error(tmp_path, [{**GOOD, "oracle": oracle}])
    assert "has no response_format, so the oracle's last turn answers with answer: TEXT" in error


@pytest.mark.parametrize(
    ("check", "message"),
    [
        (
            {"numbr": 2},
            "unknown check key 'numbr' (did you mean 'number'?); a check needs exactly one of",
        ),
        (
            {"number": 2, "tolerence": 0.1},
            "unknown check key 'tolerence' (did you mean 'tolerance'?); a 'number' check takes",
        ),
        ({"contains": "2", "colour": "red"}, "unknown check key 'colour'; a 'contains' check"),
    ],
)
def test_an_unknown_check_key_is_named_with_the_closest_known(
    tmp_path: Path, check: dict[str, Any], message: str
) -> None:
    assert message in _error(tmp_path, [{**GOOD, "check": check}])


def test_a_yaml_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text("tasks:\n  - id: t1\n    goal: What is: 2?\n    check: {number: 2}\n")
    with pytest.raises(SuiteError) as caught:
        load_suite(path)
    message = str(caught.value)
    assert message.startswith(f"{path} line 3 column 18: not valid YAML: ")
    assert "\n" not in message and "<unicode string>" not in message


def test_digest_follows_the_files_content(tmp_path: Path) -> None:
    suite = _load(tmp_path, [GOOD])
    before = suite.digest(suite.tasks[0])
    assert suite.digest(suite.tasks[0]) == before
    (tmp_path / "data.csv").write_text("a,b\n1,3\n")
    assert suite.digest(suite.tasks[0]) != before


def test_select_by_id_and_tag(tmp_path: Path) -> None:
    suite = load_suite(BUNDLED_SUITE)
    assert [t.id for t in suite.select(ids=["loan-payment"]).tasks] == ["loan-payment"]
    assert all("typed" in t.tags for t in suite.select(tags=["typed"]).tasks)
    with pytest.raises(SuiteError, match="no task nope"):
        suite.select(ids=["nope"])


def test_check_labels() -> None:
    assert Check(number=3, tolerance=0.5).describe() == "number 3 ±0.5"
    assert Check(file="out.csv", expected="e.csv").describe() == "file out.csv (expected)"
    assert Check.model_validate({"file": "x.json", "json": [1]}).file_mode == "json"


def test_suite_files_are_told_from_example_files(tmp_path: Path) -> None:
    examples = tmp_path / "train.jsonl"
    examples.write_text('{"goal": "g", "answer": "a"}\n')
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(GOOD) + "\n")
    assert not is_suite_file(examples)
    assert is_suite_file(tasks) and is_suite_file(tmp_path / "s.yaml") and is_suite_file("bundled")


INVOICES = """\
id,customer,amount,due,paid
INV-001,Acme,300.00,2024-07-01,no
INV-002,Initech,620.00,2024-05-01,no
INV-003,Acme,410.00,2024-04-01,yes
INV-004,Umbrella,95.00,2024-06-15,no
INV-005,Globex,1250.50,2024-05-20,no
INV-006,Hooli,700.00,2024-03-01,yes
"""


def _readme_oracle_example(folder: Path) -> Path:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### The oracle format", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "invoices.csv").write_text(INVOICES)
    path = folder / "suite.yaml"
    path.write_text(example)
    return path


@pytest.mark.usefixtures("bubblewrap")  # an eval runs the oracle's python calls there
def test_the_readme_oracle_example_loads_and_its_oracle_solves_it(tmp_path: Path) -> None:
    pytest.importorskip("langchain.agents", reason="create_agent needs the [eval] extra")
    from aimegraph.eval import evaluate

    suite = load_suite(_readme_oracle_example(tmp_path / "suite"))
    assert [t.id for t in suite.tasks] == ["overdue-total", "summary", "reminder"]
    result = evaluate(suite, model="oracle", out=tmp_path / "out")
    assert all(r["passed"] for r in result.records), [r["failure"] for r in result.records]
    typed = [r for r in result.records if r["task"] == "summary"]
    assert all(r["structured_response"] == {"invoices": 6, "overdue_total": 1870.5} for r in typed)
