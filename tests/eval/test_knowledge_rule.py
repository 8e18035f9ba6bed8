"""The knowledge rule of stand-in models (issue 48): a call uses only what its caller
has seen, checked when a suite loads and again against each call's actual prompt."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from aimegraph.eval import evaluate, load_suite
from aimegraph.eval.fairness import clairvoyance_problem, clairvoyant_calls, derived_notes
from aimegraph.eval.knowledge import call_literals, unseen
from aimegraph.eval.oracle import OracleError, ReactOracle
from aimegraph.eval.oracle_plays import aime_scenario, react_turns
from aimegraph.eval.suite import SuiteError
from aimegraph.eval.suite_parts import Oracle

pytest.importorskip("langchain.agents", reason="create_agent needs the [eval] extra")

OLD_ORACLES = Path(__file__).with_name("clairvoyant_oracles.yaml")
TOKENS = Path(__file__).with_name("oracle_tokens.json")

DATA = "region,units\nNorth,3\nSouth,4\n"


def _texts(literals: list[Any]) -> list[tuple[str, str]]:
    return [(literal.kind, literal.text) for literal in literals]


def test_the_literals_of_code_are_its_strings_numbers_field_positions_and_data_attributes() -> None:
    code = (
        "import csv, sys\n"
        "rows = csv.DictReader(open('sales.csv'))\n"
        "line = next(open('server.log'))\n"
        "print(line.split()[1], line[:7], rows[0], sys.argv, row.temp_c, round(2.5, 2),\n"
        "      100 * x, sorted(d, key=d.get), '', 'w')\n"
    )
    assert sorted(_texts(call_literals("python", {"code": code}))) == sorted(
        [
            ("string", "sales.csv"),
            ("string", "server.log"),
            ("subscript", "1"),  # a field position, small as it is
            ("subscript", "7"),
            ("attribute", "temp_c"),  # read off data; sys.argv (a module) and d.get are not
            ("number", "2.5"),
            ("number", "100"),  # round's 2 is a small integer, not a subscript: free
        ]
    )


def test_a_reference_stands_for_a_result_and_nested_keys_count() -> None:
    literals = call_literals(
        "write_file",
        {"path": "out.txt", "content": "Total: {stage:sum} of {last_tool_output}"},
    )
    assert _texts(literals) == [("string", "out.txt"), ("string", "Total:"), ("string", "of")]
    assert _texts(call_literals("send", {"to": {"iban": "X1"}, "n": 3})) == [
        ("key", "iban"),
        ("string", "X1"),
    ]
    program = call_literals("write_file", {"path": "p.py", "content": "print('hi', 42)"})
    assert _texts(program) == [("string", "p.py"), ("string", "hi"), ("number", "42")]


def test_what_is_seen_numbers_as_written_percentages_and_notes() -> None:
    literals = call_literals("calculator", {"expression": "10000 * 0.045 * 84"})
    seen = "An account holds 10,000 EUR at 4.5% a year for 7 years."
    assert _texts(unseen(literals, seen)) == [("number", "84")]
    assert unseen(literals, seen, {"84": "7 years of 12 months"}) == []
    prose = call_literals("write_file", {"path": "r.md", "content": "# Report\n{stage:x}"})
    assert _texts(unseen(prose, "r.md")) == [("string", "# Report")]
    assert unseen(prose, "r.md", {"content": "the report's own heading"}) == []


def _suite(tmp_path: Path, stages: list[dict[str, Any]], goal: str) -> Path:
    (tmp_path / "data.csv").write_text(DATA, encoding="utf-8")
    task = {
        "id": "t",
        "goal": goal,
        "files": ["data.csv"],
        "check": {"number": 7},
        "oracle": {"stages": stages, "answer": "{stage:sum}"},
    }
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "tasks": [task]}), encoding="utf-8")
    return path


SUM = {
    "tool": "python",
    "args": {
        "code": "import csv\nprint(sum(int(r['units']) for r in csv.DictReader(open('data.csv'))))"
    },
}
LOOK = {"tool": "read_file", "args": {"path": "data.csv"}}


def test_a_clairvoyant_suite_is_refused_before_stand_ins_play_it_naming_the_literal(
    tmp_path: Path,
) -> None:
    path = _suite(tmp_path, [{"id": "sum", "title": "Sum", "calls": [SUM]}], "Sum data.csv.")
    load_suite(path)  # a real model may be evaluated on it: its oracle is not played
    with pytest.raises(SuiteError) as refused:
        evaluate(path, model="oracle", out=tmp_path / "out")
    assert not (tmp_path / "out" / "results.jsonl").exists()  # before any rollout
    said = str(refused.value)
    assert "task 't', stage 'sum', call 1 (python): string 'units' (in code)" in said
    assert "Add the read that would show it" in said and "derived:" in said


def test_a_fair_suite_loads_and_plays_its_look_as_a_tool_step(tmp_path: Path) -> None:
    stages = [
        {"id": "look", "title": "Look", "calls": [LOOK]},
        {"id": "sum", "title": "Sum", "calls": [SUM]},
    ]
    task = load_suite(_suite(tmp_path, stages, "Sum data.csv.")).task("t")
    specs = aime_scenario(task)["planner"][0]["tasks"]
    # The planner writes the read (its goal names the file); the sum needs what it shows.
    assert [("call" in spec, spec["id"]) for spec in specs] == [(True, "look"), (False, "sum")]


def test_every_old_bundled_oracle_that_read_an_unseen_layout_is_refused() -> None:
    suite = load_suite("bundled")
    files = {src: suite.file_path(src) for t in suite.tasks for src in t.files.values()}
    old = yaml.safe_load(OLD_ORACLES.read_text(encoding="utf-8"))
    assert len(old) == 13
    for task_id, oracle in old.items():
        task = suite.task(task_id).model_copy(update={"oracle": Oracle.model_validate(oracle)})
        found = clairvoyant_calls([task], files)
        assert found, task_id
        assert {c.caller for c in found} == {"the ReAct loop", "aimegraph's actor"}, task_id


def test_the_bundled_suite_keeps_its_goals_files_and_checks_and_counts_its_notes() -> None:
    """Only the oracles changed under the rule: the digest of everything else is the
    one the suite had before (e586ece)."""
    path = Path(load_suite("bundled").root) / "suite.yaml"
    tasks = yaml.safe_load(path.read_text(encoding="utf-8"))["tasks"]
    rest = [{k: v for k, v in task.items() if k != "oracle"} for task in tasks]
    digest = hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()
    assert digest == "5f50ca21f682d156fc6757d727128d9cae7ac316c79baf93988c73ba70e8dc24"
    assert derived_notes(load_suite("bundled").tasks) == 70


def test_the_loop_makes_independent_calls_in_one_reply_and_does_not_look_twice() -> None:
    task = load_suite("bundled").task("long-sales-report")
    first, *_ = react_turns(task.oracle.turns)  # type: ignore[union-attr]
    assert [[stage.id for stage, _ in reply] for reply in first] == [
        ["inspect"],
        ["by-region", "by-product", "best-month", "total-sales"],
        ["write-report"],
    ]
    turns = load_suite("bundled").task("turns-top-earner").oracle.turns  # type: ignore[union-attr]
    played = react_turns(turns)
    # The second turn's look at employees.csv is aimegraph's (its planner has not seen
    # the file); the loop still holds the first turn's read.
    assert [[s.id for s, _ in reply] for reply in played[1]] == [["top-details"]]


def test_a_call_its_prompt_does_not_show_is_refused_at_run_time() -> None:
    oracle = Oracle.model_validate(
        {
            "stages": [
                {
                    "id": "s",
                    "title": "S",
                    "calls": [{"tool": "read_file", "args": {"path": "x.txt"}}],
                }
            ],
            "answer": "ok",
        }
    )
    model = ReactOracle(turns=list(oracle.turns))
    with pytest.raises(OracleError, match="string 'x.txt' \\(in path\\)"):
        model.invoke([HumanMessage("Read the file.")])
    assert len(model.knowledge_breaches) == 1
    reply = model.invoke([HumanMessage("Read x.txt.")])
    assert isinstance(reply, AIMessage) and reply.tool_calls[0]["args"] == {"path": "x.txt"}
    done = [
        HumanMessage("Read x.txt."),
        reply,
        ToolMessage("hi", tool_call_id=reply.tool_calls[0]["id"]),
    ]
    assert model.invoke(done).content == "ok"


def test_a_breach_seen_only_at_run_time_fails_the_rollout_on_both_systems(tmp_path: Path) -> None:
    """The first stage's output is known only at run time, so the load lets the second
    stage's literal wait; the run shows it is in no prompt. aimegraph turns a model's
    error into a retry whose prompt quotes the error: the breach is kept on the model,
    so the retry cannot pass it."""
    stages = [
        {
            "id": "hello",
            "title": "Say hello",
            "calls": [{"tool": "python", "args": {"code": "print('hello')"}}],
        },
        {
            "id": "sum",
            "title": "Sum",
            "calls": [{"tool": "python", "args": {"code": "print('zebra')"}}],
        },
    ]
    path = _suite(tmp_path, stages, "Say hello, then more.")
    assert clairvoyance_problem(load_suite(path)) is None  # nothing to decide before the run
    result = evaluate(path, model="oracle", out=tmp_path / "out")
    for record in result.records:
        assert not record["passed"], record["system"]
        assert "knowledge rule" in record["error"] and "'zebra'" in record["error"]


def _group(tags: list[str]) -> str:
    return "one step" if "one-step" in tags else "5+ steps" if "long" in tags else "2-4 steps"


@pytest.fixture
def same_length_folder() -> Iterator[Path]:
    """A folder whose path has the same length on every machine: an actor's prompt
    names its workspace, so the path's length is in its token count."""
    folder = Path(tempfile.mkdtemp(prefix="aimegraph-tokens-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_bundled_suite_is_solved_alike_at_exactly_the_recorded_prompt_tokens(
    same_length_folder: Path,
) -> None:
    """Oracle token counts are deterministic: each system's prompt tokens per group of
    the bundled suite equal the committed fixture, so a change that moves them moves
    the fixture in the same commit (and the bench's figures with it)."""
    result = evaluate("bundled", model="oracle", out=same_length_folder, concurrency=2)
    unsolved = [(r["system"], r["task"], r["failure"]) for r in result.records if not r["passed"]]
    assert unsolved == []
    totals: dict[str, dict[str, int]] = {}
    for record in result.records:
        by_group = totals.setdefault(record["system"], {})
        group = _group(record["tags"])
        by_group[group] = by_group.get(group, 0) + int(record["usage"]["input_tokens"])
    expected = json.loads(TOKENS.read_text(encoding="utf-8"))
    assert totals == expected, f"new totals (update {TOKENS.name} with them): {json.dumps(totals)}"
