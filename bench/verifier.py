"""What the inspecting verifier costs (issue 27 point 1): LLM calls, tokens and time
of a verdict that looks at the files a run wrote, against the one-call verifier that
reads only the answer.

The case: ``sales.csv`` sums to 1250; the run writes ``report.md`` saying 1300 and
answers that the report's total is right. The one-call verifier (``verifier_inspects=
"never"``) passes it, as a real model reading only that answer would; the inspecting
one (``"auto"``, the default, since the run wrote a file) reads the report with
``read_lines``, recomputes the total with ``python`` and rejects it, citing both. The
scripted verifier takes those steps; each LLM call waits a fixed latency (a remote
model) or none (the engine's and the tools' own time). A third row: ``"auto"`` when
the run wrote nothing (no inspection, so no extra cost).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from aimegraph import AimeConfig, build_aime_graph, build_verifier_graph
from aimegraph.state import Usage
from bench.chat_models import LatencyChatModel
from bench.common import Headline, SectionResult, Table, fmt_x, thread_config, workspace

SALES = "region,amount\nnorth,500\nsouth,750\n"
REPORT = "# Sales report\nTotal: 1300\nNorth leads.\n"
GOAL = "Write report.md with the total of sales.csv"
ANSWER = "report.md is written; its total of the sales is correct."
RECOMPUTE = "import csv\nprint(sum(int(r['amount']) for r in csv.DictReader(open('sales.csv'))))"
FOOLED = [{"passed": True, "reasoning": "The answer says the report's total is correct."}]
INSPECTING = [
    {"tool": "read_lines", "args": {"path": "report.md"}},
    {"tool": "python", "args": {"code": RECOMPUTE}},
    {
        "tool": "submit_verdict",
        "args": {
            "passed": False,
            "reasoning": "The report's total is wrong.",
            "issues": ["report.md:2 says 1300; the data sums to {last_tool_output}"],
            "evidence": ["report.md:2: Total: 1300", "recomputed: {last_tool_output}"],
        },
    },
]
LATENCY_S = 0.05
ROWS = {
    "never (one call, the answer only)": ("never", FOOLED, True),
    "auto, the run wrote report.md (inspects)": ("auto", INSPECTING, True),
    "auto, the run wrote nothing": ("auto", FOOLED, False),
}


def verdict_once(
    ws: Path, mode: str, verifier: list[dict[str, Any]], wrote: bool, latency_s: float
) -> tuple[dict[str, Any], float]:
    """One verdict by the verifier graph on its own; its output and wall time."""
    model = LatencyChatModel.from_dict(
        {"planner": [{"tasks": []}], "verifier": verifier}, latency_s=latency_s
    )
    graph = build_verifier_graph(
        model, config=AimeConfig(workspace=ws, verifier_inspects=mode, max_replans=0)
    )
    # The run started before report.md was written (it wrote it), or after (it did not).
    written = (ws / "report.md").stat().st_mtime
    started = written if wrote else time.time()
    inputs = {"goal": GOAL, "final_answer": ANSWER, "run_started_at": started}
    begin = time.perf_counter()
    out = graph.invoke(inputs)
    return out, time.perf_counter() - begin


def whole_run(ws: Path, mode: str, verifier: list[dict[str, Any]]) -> tuple[str, float]:
    """One whole run (plan, an actor writing the report, report, verdict) at
    ``LATENCY_S`` per call; its status and wall time."""
    scenario = {
        "planner": [{"tasks": [{"id": "a", "title": "Write it", "tool_bundles": ["files"]}]}],
        "actors": {
            "a": [
                {"tool": "write_file", "args": {"path": "report.md", "content": REPORT}},
                {"tool": "submit_result", "args": {"status": "completed", "summary": "done"}},
            ]
        },
        "reporter": [{"text": ANSWER}],
        "verifier": verifier,
    }
    model = LatencyChatModel.from_dict(scenario, latency_s=LATENCY_S)
    graph = build_aime_graph(
        model, config=AimeConfig(workspace=ws, verifier_inspects=mode, max_replans=0)
    )
    begin = time.perf_counter()
    out = graph.invoke({"goal": GOAL}, thread_config())
    return str(out["status"]), time.perf_counter() - begin


def run(quick: bool) -> SectionResult:
    repeat = 1 if quick else 7
    table = Table(
        "Verifier: what inspecting the files costs (one verdict; whole run at 50 ms per call)",
        [
            "verifier",
            "verdict",
            "verifier LLM calls",
            "verifier tokens in / out",
            "verdict ms, instant model",
            "verdict ms, 50 ms per call",
            "whole run ms",
            "whole run vs never",
        ],
    )
    metrics: dict[str, float] = {}
    runs: dict[str, float] = {}
    verdicts: dict[str, str] = {}
    with workspace() as ws:
        (ws / "sales.csv").write_text(SALES)
        (ws / "report.md").write_text(REPORT)
        for label, (mode, verifier, wrote) in ROWS.items():
            out, _ = verdict_once(ws, mode, verifier, wrote, 0)
            instant = statistics.median(
                verdict_once(ws, mode, verifier, wrote, 0)[1] for _ in range(repeat)
            )
            slow = statistics.median(
                verdict_once(ws, mode, verifier, wrote, LATENCY_S)[1] for _ in range(repeat)
            )
            usage: Usage = out["usage"]
            role = usage.by_role["verifier"]
            verdict = out["verdict"]
            if wrote:
                statuses, times = zip(
                    *(whole_run(ws, mode, verifier) for _ in range(repeat)), strict=True
                )
                runs[mode] = statistics.median(times)
                whole = f"{runs[mode] * 1e3:.0f} ({statuses[0]})"
                ratio = fmt_x(runs[mode] / runs["never"])
            else:
                whole, ratio = "(same as never)", "-"
            table.add(
                label,
                ("passed" if verdict.passed else "rejected")
                + (f", cites {'; '.join(verdict.evidence)}" if verdict.evidence else ""),
                role.llm_calls,
                f"{role.input_tokens:,} / {role.output_tokens:,}",
                f"{instant * 1e3:.1f}",
                f"{slow * 1e3:.0f}",
                whole,
                ratio,
            )
            key = f"{mode}.{'wrote' if wrote else 'nothing'}"
            verdicts[key] = ("passes it" if verdict.passed else "rejects it") + (
                f", citing {'; '.join(verdict.evidence)}" if verdict.evidence else ""
            )
            metrics |= {
                f"{key}.calls": role.llm_calls,
                f"{key}.input_tokens": role.input_tokens,
                f"{key}.output_tokens": role.output_tokens,
                f"{key}.ms_instant": instant * 1e3,
                f"{key}.ms_latency": slow * 1e3,
            }
    metrics["auto.run_ratio"] = runs["auto"] / runs["never"]
    table.notes += [
        "The one-call verifier passes the wrong report (it reads only the answer, which "
        "says the total is right); the inspecting one rejects it, citing the line and the "
        "recomputed value. Tokens are the scripted model's (about 4 characters per token).",
        "verdict ms: the verifier graph on its own, median of "
        f"{repeat} runs; the inspecting verdict's instant-model time is mostly the python "
        "subprocess (a fresh interpreter per call). whole run: planner, one actor writing "
        "the report (2 calls), reporter and verifier, every call waiting 50 ms.",
    ]
    return SectionResult("verifier", [table], metrics, [_headline(metrics, verdicts)])


def _headline(metrics: dict[str, float], verdicts: dict[str, str]) -> Headline:
    def side(key: str) -> str:
        return (
            f"{metrics[f'{key}.calls']:.0f} verifier calls, "
            f"{metrics[f'{key}.input_tokens']:,.0f} / {metrics[f'{key}.output_tokens']:,.0f} "
            f"tokens in / out, {metrics[f'{key}.ms_instant']:.1f} ms per verdict with an "
            f"instant model, {metrics[f'{key}.ms_latency']:.0f} ms at 50 ms per call"
        )

    return Headline(
        "the inspecting verifier: one verdict on a report whose total is wrong while the "
        "answer says it is right",
        'the one-call verifier (verifier_inspects="never"), which reads only the answer',
        f"inspecting: {verdicts['auto.wrote']}; {side('auto.wrote')} (one call: "
        f"{verdicts['never.wrote']}; {side('never.wrote')}); a whole 5-call run "
        f"{fmt_x(metrics['auto.run_ratio'])}; with no file written, the one call",
    )
