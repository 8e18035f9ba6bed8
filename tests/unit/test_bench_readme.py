"""The README's benchmark figures come from the results files: the blocks between
``bench-figures`` markers are written from a results file's rows, its date, commit and
machine, those between ``bench-tables`` markers from its tables, and the teams tables
put each value under its own header."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder of the repo, not installed
    sys.path.insert(0, str(ROOT))

from bench.common import Headline, SectionResult, Table  # noqa: E402
from bench.readme import (  # noqa: E402
    END,
    START,
    render_figures,
    render_results_file,
    render_tables,
    update_readme,
)
from bench.teams import modes  # noqa: E402

MACHINE = {
    "CPU": "Test CPU",
    "cores": "2",
    "date": "2026-01-02 10:00 UTC",
    "commit": "abc123def456",
    "command": "python -m bench",
}


def _results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    results.mkdir()
    table = Table("Worst cases", ["dag", "wall / critical path"], [["7", "1.22x"]], ["A note."])
    section = SectionResult(
        "scheduling",
        [table],
        headlines=[Headline("scheduling, 20 DAGs", "the critical path", "worst 1.22x")],
        seconds=3.5,
    )
    (results / "scheduling.md").write_text(render_results_file(section, MACHINE))
    return results


def _readme(tmp_path: Path, body: str) -> Path:
    readme = tmp_path / "README.md"
    readme.write_text(f"{START}\nold table\n{END}\n{body}")
    return readme


def test_a_figures_block_is_written_from_its_results_file(tmp_path: Path) -> None:
    readme = _readme(
        tmp_path,
        "## Scheduling\n\nProse stays.\n\n"
        "<!-- bench-figures:scheduling:start -->\n1.08x worst, typed by hand\n"
        "<!-- bench-figures:scheduling:end -->\n\nAfter.\n",
    )
    update_readme(_results(tmp_path), readme, ["scheduling"])
    text = readme.read_text()
    block = text.split("scheduling:start -->\n", 1)[1].split("<!-- bench-figures", 1)[0]
    assert "1.08x" not in text and "Prose stays." in text and text.endswith("\n\nAfter.\n")
    assert "- scheduling, 20 DAGs: worst 1.22x (baseline: the critical path)" in block
    assert "[`bench/results/scheduling.md`](bench/results/scheduling.md)" in block
    for where in ("2026-01-02", "commit abc123def456", "Test CPU", "cores 2"):
        assert where in block


def test_a_tables_block_is_written_from_its_results_files_tables(tmp_path: Path) -> None:
    readme = _readme(
        tmp_path,
        "## Scheduling\n\n<!-- bench-tables:scheduling:start -->\n| dag | 1.08x |\n"
        "<!-- bench-tables:scheduling:end -->\n\nAfter.\n",
    )
    update_readme(_results(tmp_path), readme, ["scheduling"])
    text = readme.read_text()
    block = text.split("scheduling:start -->\n", 1)[1].split("\n<!-- bench-tables", 1)[0]
    assert "1.08x" not in text and text.endswith("\n\nAfter.\n")
    assert block.startswith(
        "Tables of [`bench/results/scheduling.md`](bench/results/scheduling.md) "
        "(commit abc123def456):"
    )
    # The title is bold, not a heading of the README; the time the section took is left out.
    assert "**Worst cases**\n\n| dag | wall / critical path |\n|---|---|\n| 7 | 1.22x |" in block
    assert "- A note." in block and "### " not in block and "3.5 s" not in block


def test_a_block_naming_no_results_file_is_an_error(tmp_path: Path) -> None:
    readme = _readme(
        tmp_path, "<!-- bench-figures:gone:start -->\n<!-- bench-figures:gone:end -->\n"
    )
    with pytest.raises(ValueError, match="'gone'"):
        update_readme(_results(tmp_path), readme, [])


def test_the_readme_figures_are_those_of_the_results_files() -> None:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(
        r"<!-- bench-figures:(\w+):start -->\n(.*?)\n<!-- bench-figures:\1:end -->", text, re.DOTALL
    )
    assert len(blocks) >= 8
    for section, block in blocks:
        assert block == render_figures(ROOT / "bench" / "results", section), section
    tables = re.findall(
        r"<!-- bench-tables:(\w+):start -->\n(.*?)\n<!-- bench-tables:\1:end -->", text, re.DOTALL
    )
    assert [section for section, _ in tables] == ["public"]
    for section, block in tables:
        assert block == render_tables(ROOT / "bench" / "results", section), section


def test_team_modes_table_puts_each_value_under_its_header() -> None:
    table, metrics = modes(quick=True)
    single = dict(zip(table.columns, table.rows[0], strict=True))
    assert single["prompt tokens sent"] == f"{metrics['single_actor_tokens_sent']:,}"
    assert single["wall time (s)"] == f"{metrics['single_actor_wall_s']:.2f}"
