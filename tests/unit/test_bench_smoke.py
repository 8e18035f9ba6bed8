"""Smoke test of the benchmark harness: `python -m bench --quick`, run in-process.

It checks that every section runs and reports finite numbers (not negative but for
differences), Markdown tables and its README rows, and that the results files and the
README table are written from what the bench measured. It never asserts timings:
performance is measured in bench/, not asserted in tests.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder of the repo, not installed
    sys.path.insert(0, str(ROOT))

from bench.__main__ import SECTIONS, Report, main, run_bench  # noqa: E402
from bench.chat_models import BenchChatModel, LatencyChatModel  # noqa: E402
from bench.common import (  # noqa: E402
    Headline,
    SectionResult,
    Table,
    check_metrics,
    scenario,
    task,
)
from bench.readme import (  # noqa: E402
    END,
    START,
    read_headlines,
    render_results_file,
    update_readme,
)


@pytest.fixture(scope="module")
def report() -> Report:
    return run_bench(quick=True)


def test_every_section_runs(report: Report) -> None:
    assert [s.name for s in report.sections] == list(SECTIONS)


@pytest.mark.parametrize("name", list(SECTIONS))
def test_section_numbers_are_finite_and_positive(report: Report, name: str) -> None:
    section = next(s for s in report.sections if s.name == name)
    assert section.metrics, f"{name} measured nothing"
    assert check_metrics(section.metrics) == []
    assert math.isfinite(section.seconds) and section.seconds > 0
    assert section.skipped is None
    for table in section.tables:
        assert table.rows, f"{name}: empty table {table.title!r}"
        assert all(len(row) == len(table.columns) for row in table.rows)
    assert section.headlines, f"{name} has no README row"
    for headline in section.headlines:
        assert all(text.strip() for text in vars(headline).values()), headline


def test_check_metrics_allows_negative_differences_only() -> None:
    assert check_metrics({"a.delta_s": -0.5, "b_s": 0.0, "c": 2.0}) == []
    assert check_metrics({"a_s": -0.5, "b": float("nan"), "c": float("inf")}) == ["a_s", "b", "c"]


def test_economy_policies_agree_on_the_final_answer(report: Report) -> None:
    economy = next(s for s in report.sections if s.name == "economy")
    same = [v for k, v in economy.metrics.items() if k.endswith(".same_answer")]
    assert same and all(v == 1.0 for v in same)


def test_markdown_report(report: Report) -> None:
    text = report.to_markdown()
    assert text.startswith("# aimegraph benchmarks")
    for key in ("CPU", "cores", "Python", "langgraph", "date", "commit", "command"):
        assert f"| {key} |" in text
    assert text.count("\n### ") >= len(SECTIONS)


def test_parallel_speedup_is_against_the_same_calls(report: Report) -> None:
    parallel = next(s for s in report.sections if s.name == "parallel")
    for shape in ("independent", "diamond"):
        calls = {k: parallel.metrics[f"{shape}.{k}_calls"] for k in ("par_16", "seq_same")}
        assert calls["par_16"] == calls["seq_same"]
        # The AIME loop's extra planner calls are reported on their own row.
        assert parallel.metrics[f"{shape}.seq_every_step_calls"] > calls["seq_same"]


def test_overhead_rows_report_both_sides_tokens(report: Report) -> None:
    overhead = next(s for s in report.sections if s.name == "overhead")
    for saver in ("none", "inmemorysaver", "sqlitesaver"):
        assert overhead.metrics[f"{saver}.aime_tokens"] > overhead.metrics[f"{saver}.raw_tokens"]
        assert overhead.metrics[f"plain.{saver}.eager.plain_tokens"] > 0


def test_the_retrieval_twin_shares_no_content_word(report: Report) -> None:
    retrieval = next(s for s in report.sections if s.name == "retrieval")
    assert retrieval.metrics["recall.hashing.no.sharing"] == 0
    assert retrieval.metrics["recall.hashing.paraphrased.sharing"] > 0


def test_results_file_names_where_and_how_it_was_made(tmp_path: Path) -> None:
    result = SectionResult(
        "demo",
        [Table("t", ["a"], rows=[["1"]])],
        {"x": 1.0},
        headlines=[Headline("what | with a pipe", "against what", "1.00x")],
        seconds=1.5,
    )
    machine = {"date": "2026-11-25 10:00 UTC", "commit": "abc123", "command": "python -m bench"}
    path = tmp_path / "demo.md"
    path.write_text(render_results_file(result, machine))
    text = path.read_text()
    for key, value in machine.items():
        assert f"| {key} | {value} |" in text
    assert read_headlines(path) == (result.headlines, "2026-11-25")


def test_readme_table_is_written_from_the_results_files(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    for name, row in (("b", "second"), ("a", "first")):
        section = SectionResult(name, [], headlines=[Headline(row, "base", "r")])
        (results / f"{name}.md").write_text(render_results_file(section, {"date": "2026-01-02"}))
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{START}\nold table\n{END}\nafter\n")
    update_readme(results, readme, ["a", "b"])
    text = readme.read_text()
    assert "old table" not in text and text.startswith("intro\n") and text.endswith("after\n")
    first, second = text.index("| first |"), text.index("| second |")
    assert first < second
    assert "[`a.md`](bench/results/a.md), 2026-01-02" in text


def test_every_readme_row_names_a_results_file_that_holds_it() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split(START, 1)[1].split(END, 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "](bench/" in line]
    assert rows
    for line in rows:
        name = line.split("](bench/results/", 1)[1].split(")", 1)[0]
        headlines, _ = read_headlines(ROOT / "bench" / "results" / name)
        assert any(f"| {h.measurement.replace('|', chr(92) + '|')} |" in line for h in headlines)


def test_bench_model_counts_prompt_and_tool_schema_tokens() -> None:
    model = BenchChatModel.from_dict(scenario([task("t1")]))
    model.invoke("x" * 400)
    plain = model.tokens_sent
    model.reset()
    from aimegraph.tools.calculator import calculator

    model.bind_tools([calculator]).invoke("x" * 400)  # the same text, plus a tool schema
    assert model.calls == 1 and model.tokens_sent > plain == 101


def test_latency_model_keeps_tools_and_structured_output() -> None:
    from aimegraph import PlanUpdate

    model = LatencyChatModel.from_dict(scenario([task("t1"), task("t2", "t1")]), latency_s=0.001)
    plan = model.with_structured_output(PlanUpdate).invoke("# Role: planner\nPlan it.")
    assert isinstance(plan, PlanUpdate)
    assert [t.id for t in plan.tasks] == ["t1", "t2"]
    assert model.calls == 1


def test_cli_rejects_unknown_sections(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--quick", "--only", "nonsense"])
    assert "unknown sections" in capsys.readouterr().err
