"""The results files the bench writes and the README table made from them.

Each section's file (``bench/results/<section>.md``) starts with where it was measured
(date, commit, machine, command), then its README rows, then its full tables. The
README's Benchmarks table lies between two markers and is rewritten from the README
rows of every results file, each row naming its file and date: nothing in that table is
typed by hand. The figures a README section quotes lie between a marker pair naming the
section's results file (``<!-- bench-figures:<section>:start -->`` ... ``:end -->``) and
are rewritten from the same rows, with the file's date, commit and machine; a
section that shows the file's full tables puts them between
``<!-- bench-tables:<section>:start -->`` and ``:end -->``, rewritten from its tables.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from bench.common import Headline, SectionResult

RESULTS_DIR = Path(__file__).with_name("results")
README = Path(__file__).resolve().parents[1] / "README.md"
START = "<!-- bench-table:start (written by python -m bench from bench/results/) -->"
END = "<!-- bench-table:end -->"
_ROWS = re.compile(r"^<!-- readme-rows: (.*) -->$", re.MULTILINE)
_DATE = re.compile(r"^\| date \| (\S+)", re.MULTILINE)
_MACHINE = re.compile(r"^\| (\w[\w -]*) \| (.+) \|$", re.MULTILINE)
_FIGURES = re.compile(
    r"(<!-- bench-figures:(?P<section>\w+):start -->\n)"
    r".*?(<!-- bench-figures:(?P=section):end -->)",
    re.DOTALL,
)
_TABLES = re.compile(
    r"(<!-- bench-tables:(?P<section>\w+):start -->\n)"
    r".*?(<!-- bench-tables:(?P=section):end -->)",
    re.DOTALL,
)
_TABLE_TITLE = re.compile(r"^### (.+)$", re.MULTILINE)
_SECONDS = re.compile(r"^_[\w ]+: ([\d.]+) s_$", re.MULTILINE)
COLUMNS = ("measurement", "baseline", "result")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_results_file(result: SectionResult, machine: dict[str, str]) -> str:
    """The Markdown of one section's results file."""
    lines = [
        f"# aimegraph benchmarks: {result.name}",
        "",
        "| | |",
        "|---|---|",
        *(f"| {key} | {_cell(value)} |" for key, value in machine.items()),
        "",
        "## README rows",
        "",
        f"<!-- readme-rows: {json.dumps([list(vars(h).values()) for h in result.headlines])} -->",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|---|---|---|",
        *(f"| {' | '.join(_cell(c) for c in vars(h).values())} |" for h in result.headlines),
        "",
        "## Tables",
        "",
        result.to_markdown(),
        "",
        f"_{result.name}: {result.seconds:.1f} s_",
    ]
    return "\n".join(lines) + "\n"


def read_headlines(path: Path) -> tuple[list[Headline], str]:
    """The README rows and the date of one results file."""
    text = path.read_text(encoding="utf-8")
    rows = _ROWS.search(text)
    date = _DATE.search(text)
    headlines = [Headline(*row) for row in json.loads(rows.group(1))] if rows else []
    return headlines, date.group(1) if date else "undated"


def render_table(results_dir: Path, order: list[str]) -> str:
    """The README table: every results file's rows, sections in ``order`` first."""
    files = sorted(results_dir.glob("*.md"), key=lambda p: (_rank(p.stem, order), p.stem))
    lines = [
        "| measurement | baseline | result | results file |",
        "|---|---|---|---|",
    ]
    seconds = 0.0
    for path in files:
        headlines, date = read_headlines(path)
        where = f"[`{path.name}`](bench/results/{path.name}), {date}"
        lines += [
            f"| {_cell(h.measurement)} | {_cell(h.baseline)} | {_cell(h.result)} | {where} |"
            for h in headlines
        ]
        seconds += sum(float(s) for s in _SECONDS.findall(path.read_text(encoding="utf-8")))
    lines += [
        "",
        f"The sections of these files took {seconds / 60:.0f} minutes to measure, added up "
        "from the time each file records (what one `make bench` takes on this machine).",
    ]
    return "\n".join(lines)


def _rank(name: str, order: list[str]) -> int:
    return order.index(name) if name in order else len(order)


def read_machine(path: Path) -> dict[str, str]:
    """Where one results file was measured: its first table (date, commit, CPU, ...)."""
    text = path.read_text(encoding="utf-8").split("## README rows", 1)[0]
    return dict(_MACHINE.findall(text))


def render_figures(results_dir: Path, section: str) -> str:
    """A README section's figures: its results file's rows as bullets, under a line
    naming the file, its date, commit and machine."""
    path = results_dir / f"{section}.md"
    if not path.is_file():
        raise ValueError(f"README quotes bench figures of {section!r}, but {path} is missing")
    headlines, date = read_headlines(path)
    machine = read_machine(path)
    where = ", ".join(
        f"{key} {machine[key]}" if key in ("commit", "cores") else machine[key]
        for key in ("commit", "CPU", "cores")
        if key in machine
    )
    lines = [
        f"Measured by `python -m bench --only {section}` on {date} "
        f"([`bench/results/{path.name}`](bench/results/{path.name}): {where}):",
        "",
        *(f"- {h.measurement}: {h.result} (baseline: {h.baseline})" for h in headlines),
    ]
    return "\n".join(lines)


def render_tables(results_dir: Path, section: str) -> str:
    """A README section's tables: its results file's tables and their notes as the
    file has them (their titles in bold, not headings of the README), under a line
    naming the file and its commit."""
    path = results_dir / f"{section}.md"
    if not path.is_file():
        raise ValueError(f"README quotes bench tables of {section!r}, but {path} is missing")
    text = path.read_text(encoding="utf-8")
    _, found, tables = text.partition("\n## Tables\n")
    if not found:
        raise ValueError(f"{path} has no tables")
    tables = _SECONDS.sub("", tables).strip()
    commit = read_machine(path).get("commit", "unknown commit")
    lines = [
        f"Tables of [`bench/results/{path.name}`](bench/results/{path.name}) (commit {commit}):",
        "",
        _TABLE_TITLE.sub(r"**\1**", tables),
    ]
    return "\n".join(lines)


def update_readme(results_dir: Path, readme: Path, order: list[str]) -> None:
    """Rewrite the table between :data:`START` and :data:`END` in ``readme`` (sections
    in ``order``, then any other results file), and every section's figures and
    tables blocks."""
    text = readme.read_text(encoding="utf-8")
    head, found, rest = text.partition(START)
    _, found_end, tail = rest.partition(END)
    if not (found and found_end):
        raise ValueError(f"{readme} has no {START} ... {END} block")
    table = render_table(results_dir, order)
    text = f"{head}{START}\n{table}\n{END}{tail}"
    text = _FIGURES.sub(
        lambda m: f"{m.group(1)}{render_figures(results_dir, m['section'])}\n{m.group(3)}", text
    )
    text = _TABLES.sub(
        lambda m: f"{m.group(1)}{render_tables(results_dir, m['section'])}\n{m.group(3)}", text
    )
    readme.write_text(text, encoding="utf-8")
