"""``aimegraph optimize``: JSON Lines examples in, progress and the outcome out, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aimegraph.cli import main
from aimegraph.optimizer.store import PromptStore

pytest.importorskip("gepa")

DATA = Path(__file__).parent / "data"
MODEL = f"scripted:{DATA / 'uncited.yaml'}"
REFLECT = f"scripted:{DATA / 'reflect.yaml'}"


def _jsonl(path: Path, rows: list[dict[str, str]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _optimize(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(
        [
            "--checkpoints",
            "memory",
            "optimize",
            "--model",
            MODEL,
            "--reflection-model",
            REFLECT,
            "--prompts",
            str(tmp_path / "prompts.jsonl"),
            "--config",
            json.dumps({"workspace": str(tmp_path / "ws"), "max_replans": 0}),
            *extra,
        ]
    )
    out = capsys.readouterr()
    return code, out.out, out.err


def test_optimize_reports_progress_and_the_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = _jsonl(tmp_path / "train.jsonl", [{"goal": "Q3 revenue?", "answer": "48213"}] * 2)
    val = _jsonl(tmp_path / "val.jsonl", [{"goal": "And Q3?", "answer": "data/q3.csv"}])
    code, out, err = _optimize(
        tmp_path,
        capsys,
        "--trainset",
        train,
        "--valset",
        val,
        "--metric",
        "contains",
        "--components",
        "planner",
        "--max-metric-calls",
        "9",
        "--minibatch-size",
        "2",
        "--json",
    )
    assert code == 0, err
    # Progress goes to stderr with --json; stdout is the one JSON document.
    report = json.loads(out)
    assert "iteration 0: best validation score 0.000" in err
    assert report["score_before"] == 0.0 and report["metric_calls"] <= 9
    # The train answers contain 48213: every minibatch is perfect, nothing to reflect on.
    assert report["version"] is None and report["reflection_usage"]["llm_calls"] == 0
    assert report["history"][0]["metric_calls"] == 1
    assert PromptStore(tmp_path / "prompts.jsonl").list() == []


def test_a_proposal_is_tried_and_a_loser_is_not_saved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = _jsonl(tmp_path / "train.jsonl", [{"goal": "Q3 revenue?"}, {"goal": "Q3?"}])
    code, out, _ = _optimize(
        tmp_path,
        capsys,
        "--trainset",
        train,
        "--components",
        "planner",
        "--max-metric-calls",
        "8",
        "--minibatch-size",
        "2",
        "--run-dir",
        str(tmp_path / "run"),
    )
    assert code == 0, out
    # 2 starting runs, 2 for the parent's minibatch, 2 for the proposal's (no better:
    # the scripted workflow ignores its prompts); a second iteration could cost 6.
    assert "validation score 0.000 -> 0.000 in 6 metric calls" in out
    assert "1 reflection calls" in out and "the store is unchanged" in out
    assert (tmp_path / "run" / "gepa_state.bin").is_file()


@pytest.mark.parametrize(
    ("lines", "extra", "message"),
    [
        (None, (), "cannot read"),
        (["{not json"], (), "line 1 is not JSON"),
        (['{"question": "?"}'], (), 'line 1: expected {"goal"'),
        (['{"goal": "?"}'], ("--metric", "fuzzy"), "unknown metric 'fuzzy'"),
        (['{"goal": "?"}'], ("--metric", "exact"), "example['answer']"),
        (['{"goal": "?"}', '{"goal": "!"}'], ("--max-metric-calls", "1"), "cannot even score"),
        (['{"goal": "?"}'], ("--components", "critic"), "components must name"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    lines: list[str] | None,
    extra: tuple[str, ...],
    message: str,
) -> None:
    train = tmp_path / "train.jsonl"
    if lines is not None:
        train.write_text("\n".join(lines) + "\n")
    budget = () if "--max-metric-calls" in extra else ("--max-metric-calls", "5")
    code, out, err = _optimize(tmp_path, capsys, "--trainset", str(train), *budget, *extra)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1


def test_run_with_the_online_loop_uses_the_store_beside_the_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {"optimize_online": True, "optimize_window": 1, "max_replans": 0}
    code = main(
        [
            "--checkpoints",
            f"sqlite:///{tmp_path / 'cp.db'}",
            "run",
            "What was the Q3 revenue?",
            "--model",
            MODEL,
            "--workspace",
            str(tmp_path / "ws"),
            "--config",
            json.dumps(config),
            "--json",
        ]
    )
    assert code == 3, capsys.readouterr().err  # rejected
    records = [json.loads(line) for line in (tmp_path / "prompts.traces.jsonl").open()]
    assert [r["kind"] for r in records] == ["run", "mutation"]
    # The planner's scripted model answers the reflection prompt with a plan: refused, as data.
    assert records[1]["event"] == "mutation_refused" and records[1]["llm_calls"] == 1


TOOL_MODULE = '''
from langchain_core.tools import tool


@tool
def q3_revenue() -> str:
    """The Q3 revenue and where it comes from."""
    return "48213 (source: data/q3.csv)"
'''


def test_runs_get_the_applications_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "revenue_tools_for_optimize.py").write_text(TOOL_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    train = _jsonl(tmp_path / "train.jsonl", [{"goal": "Q3 revenue?", "answer": "data/q3.csv"}])
    common = ("--trainset", train, "--metric", "contains", "--max-metric-calls", "1", "--json")
    tool_model = ("--model", f"scripted:{DATA / 'tool_run.yaml'}")
    code, out, err = _optimize(
        tmp_path, capsys, *common, *tool_model, "--tools", "revenue_tools_for_optimize:q3_revenue"
    )
    assert code == 0, err
    assert json.loads(out)["score_before"] == 1.0  # the tool's output is the answer
    code, out, err = _optimize(tmp_path, capsys, *common, *tool_model)
    assert code == 0, err
    assert json.loads(out)["score_before"] == 0.0  # without the tool and its bundle: failed
    code, out, err = _optimize(tmp_path, capsys, *common, "--tools", "no_such_module:x")
    assert code == 2 and err.startswith("error: ") and "no_such_module" in err
