"""Run the benchmarks and print one Markdown report.

    python -m bench                      # everything, a few minutes on 2 cores
    python -m bench --quick              # smoke mode, seconds
    python -m bench --only overhead,parallel
    python -m bench --only local_plans   # on-demand sections need an extra (here [local])
    python -m bench --only dashboard     # [dashboard] extra, Playwright and Debian's chromium
    python -m bench --only distributed   # [distributed] extra, Redis and Postgres on 127.0.0.1
    python -m bench --only optimize      # [optimize] extra (GEPA)
    python -m bench --only web_docs      # [web], [docs] and [dev] extras
    python -m bench --output results.md  # where to write the report

The full run writes ``bench/results.md``; ``--quick`` and ``--only`` write nothing unless
``--output`` is given.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench import (
    concurrency,
    dashboard,
    distributed,
    economy,
    jsonparse,
    local_plans,
    memory,
    optimize,
    overhead,
    parallel,
    retrieval,
    scaling,
    scheduling,
    teams,
    verifier,
    web_docs,
)
from bench.common import SectionResult, machine_info

SECTIONS: dict[str, Callable[[bool], SectionResult]] = {
    "overhead": overhead.run,
    "parallel": parallel.run,
    "concurrency": concurrency.run,
    "economy": economy.run,
    "scaling": scaling.run,
    "scheduling": scheduling.run,
    "retrieval": retrieval.run,
    "jsonparse": jsonparse.run,
    "memory": memory.run,
    "teams": teams.run,
    "verifier": verifier.run,
}
"""Section name -> ``run(quick)``, in report order."""

ON_DEMAND: dict[str, Callable[[bool], SectionResult]] = {
    "local_plans": local_plans.run,
    "dashboard": dashboard.run,
    "distributed": distributed.run,
    "optimize": optimize.run,
    "web_docs": web_docs.run,
}
"""Sections that need an optional extra or service: run only when named in ``--only``."""

RESULTS = Path(__file__).with_name("results.md")


@dataclass
class Report:
    """Everything one invocation measured."""

    quick: bool
    machine: dict[str, str]
    sections: list[SectionResult] = field(default_factory=list)

    def to_markdown(self) -> str:
        mode = "quick (smoke) mode" if self.quick else "full run"
        lines = [
            "# aimegraph benchmarks",
            "",
            f"`python -m bench{' --quick' if self.quick else ''}` ({mode}). Every figure is "
            "compared with a baseline measured in the same process, in the same run.",
            "",
            "| machine | |",
            "|---|---|",
            *(f"| {k} | {v} |" for k, v in self.machine.items()),
        ]
        for section in self.sections:
            lines += ["", section.to_markdown(), "", f"_{section.name}: {section.seconds:.1f} s_"]
        total = sum(s.seconds for s in self.sections)
        lines += ["", f"Total: {total:.1f} s."]
        return "\n".join(lines) + "\n"


def run_bench(
    quick: bool = False,
    only: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Run the selected sections (all by default) and collect their results."""
    known = SECTIONS | ON_DEMAND
    names = list(only or SECTIONS)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown sections {unknown}; choose from {', '.join(known)}")
    report = Report(quick=quick, machine=machine_info())
    for name in known:
        if name not in names:
            continue
        if progress:
            progress(f"running {name} ...")
        start = time.perf_counter()
        result = known[name](quick)
        result.seconds = time.perf_counter() - start
        report.sections.append(result)
        if progress:
            progress(f"  {name} done in {result.seconds:.1f} s")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke mode: tiny sizes, seconds")
    parser.add_argument(
        "--only",
        type=lambda s: [p.strip() for p in s.split(",") if p.strip()],
        help=f"comma-separated sections: {','.join(SECTIONS)}; on demand only: "
        f"{','.join(ON_DEMAND)}",
    )
    parser.add_argument(
        "--output",
        type=Path,
        help=f"write the Markdown report here (default: {RESULTS.name} for a full run)",
    )
    args = parser.parse_args(argv)
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    try:
        report = run_bench(args.quick, args.only, progress)
    except ValueError as exc:
        parser.error(str(exc))
    text = report.to_markdown()
    print(text)
    output = args.output or (None if args.quick or args.only else RESULTS)
    if output is not None:
        output.write_text(text, encoding="utf-8")
        progress(f"written to {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
