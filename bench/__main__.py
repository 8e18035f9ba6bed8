"""Run the benchmarks; write one results file per section and the README's table.

    python -m bench                      # everything (what `make bench` runs)
    python -m bench --quick              # smoke mode, seconds; writes nothing
    python -m bench --only overhead,parallel
    python -m bench --output report.md   # also the whole report in one file

A run writes ``bench/results/<section>.md`` for every section it ran (each file starts
with the date, the commit, the machine and the command that made it) and then rewrites
the README's Benchmarks table from all the results files, so every row of that table
comes from a file the bench wrote. ``--quick`` writes nothing. Sections that need an
extra or a service (``local``, ``local_plans``, ``dashboard``, ``distributed``,
``optimize``, ``web_docs``, ``mcp``, ``sandbox``, ``install``, ``public``) say what is
missing and keep their earlier results file.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench import (
    concurrency,
    conversation,
    dashboard,
    distributed,
    economy,
    eval_tokens,
    guardrails,
    install,
    jsonparse,
    local_plans,
    local_runs,
    mcp,
    memory,
    metrics,
    middleware,
    optimize,
    overhead,
    parallel,
    public_benchmarks,
    retrieval,
    sandbox,
    scaling,
    scheduling,
    skills,
    startup,
    streamed_plans,
    teams,
    verifier,
    web_docs,
)
from bench.common import SectionResult, commit, machine_info, skipped
from bench.readme import README, RESULTS_DIR, render_results_file, update_readme

SECTIONS: dict[str, Callable[[bool], SectionResult]] = {
    "overhead": overhead.run,
    "middleware": middleware.run,
    "parallel": parallel.run,
    "concurrency": concurrency.run,
    "economy": economy.run,
    "scaling": scaling.run,
    "scheduling": scheduling.run,
    "streamed_plans": streamed_plans.run,
    "retrieval": retrieval.run,
    "jsonparse": jsonparse.run,
    "memory": memory.run,
    "teams": teams.run,
    "conversation": conversation.run,
    "verifier": verifier.run,
    "skills": skills.run,
    "startup": startup.run,
    "guardrails": guardrails.run,
}
"""Section name -> ``run(quick)``: the sections ``--quick`` runs, in report order."""

NEEDING_EXTRAS: dict[str, Callable[[bool], SectionResult]] = {
    "local": local_runs.run,
    "local_plans": local_plans.run,
    "dashboard": dashboard.run,
    "distributed": distributed.run,
    "optimize": optimize.run,
    "web_docs": web_docs.run,
    "mcp": mcp.run,
    "sandbox": sandbox.run,
    "eval": eval_tokens.run,
    "public": public_benchmarks.run,
    "install": install.run,
    "metrics": metrics.run,
}
"""Sections that need an optional extra or a service: in the full run, never in
``--quick`` (unless named in ``--only``)."""


@dataclass
class Report:
    """Everything one invocation measured."""

    quick: bool
    command: str
    machine: dict[str, str]
    sections: list[SectionResult] = field(default_factory=list)

    def to_markdown(self) -> str:
        mode = "quick (smoke) mode" if self.quick else "measured"
        lines = [
            "# aimegraph benchmarks",
            "",
            f"`{self.command}` ({mode}). Every figure is compared with a baseline measured "
            "in the same process, in the same run.",
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
    command: str = "python -m bench",
    done: Callable[[SectionResult, dict[str, str]], None] | None = None,
) -> Report:
    """Run the selected sections (by default all, or those of ``--quick``) and collect
    their results; ``done`` gets each section's result as it finishes."""
    known = SECTIONS | NEEDING_EXTRAS
    names = list(only or (SECTIONS if quick else known))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown sections {unknown}; choose from {', '.join(known)}")
    machine = machine_info() | {"commit": commit(), "command": command}
    report = Report(quick=quick, command=command, machine=machine)
    for name in known:
        if name not in names:
            continue
        if progress:
            progress(f"running {name} ...")
        start = time.perf_counter()
        try:
            result = known[name](quick)
        except Exception as exc:  # noqa: BLE001 - one broken section must not lose the others
            logging.getLogger("bench").exception("section %s failed", name)
            result = skipped(name, f"FAILED: {type(exc).__name__}: {exc}")
            result.failed = True
        result.seconds = time.perf_counter() - start
        report.sections.append(result)
        if done:
            done(result, machine)
        if progress:
            status = f"skipped: {result.skipped}" if result.skipped else "done"
            progress(f"  {name} {status} in {result.seconds:.1f} s")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke mode: tiny sizes, seconds")
    parser.add_argument(
        "--only",
        type=lambda s: [p.strip() for p in s.split(",") if p.strip()],
        help=f"comma-separated sections: {','.join(SECTIONS | NEEDING_EXTRAS)}",
    )
    parser.add_argument("--output", type=Path, help="also write the whole report here")
    args = parser.parse_args(argv)
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    def write(result: SectionResult, machine: dict[str, str]) -> None:
        if args.quick or result.skipped:
            return
        path = RESULTS_DIR / f"{result.name}.md"
        path.write_text(render_results_file(result, machine), encoding="utf-8")
        progress(f"  written to {path}")

    command = shlex.join(["python", "-m", "bench", *argv])
    started = time.perf_counter()
    try:
        report = run_bench(args.quick, args.only, progress, command=command, done=write)
    except ValueError as exc:
        parser.error(str(exc))
    text = report.to_markdown()
    print(text)
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
        progress(f"written to {args.output}")
    if not args.quick:
        update_readme(RESULTS_DIR, README, [*SECTIONS, *NEEDING_EXTRAS])
        progress(f"README table rewritten from {RESULTS_DIR}")
    progress(f"bench took {time.perf_counter() - started:.0f} s")
    failed = [s.name for s in report.sections if s.failed]
    if failed:
        progress(f"FAILED sections (their results files are kept as they were): {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
