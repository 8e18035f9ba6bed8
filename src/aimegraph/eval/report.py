"""The Markdown report of an eval (and of a comparison), from its summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "ATTACK_NOTE",
    "LEFT_OUT_NOTE",
    "attack_table",
    "comparison_markdown",
    "fmt_ci",
    "fmt_cost",
    "fmt_number",
    "fmt_tool_calling",
    "markdown_report",
    "notes",
    "score_cells",
    "score_columns",
    "systems_table",
    "tags_table",
]

SCORES_NOTE = (
    "pass@1 is the mean over tasks of the share of a task's rollouts that passed. "
    "Brackets: 95% Wilson interval over the tasks. "
)
PASS_AT_K_NOTE = (
    "pass@{k} is the chance that at least one of {k} rollouts passes, pass^{k} that all {k} "
    "do (over the tasks with at least {k} rollouts). "
)
PER_SOLVED_NOTE = (
    "Per solved: everything spent (failed rollouts included) divided by the rollouts that passed. "
)
TOOL_CALLING_NOTE = (
    "Tool calling: native, or JSON (the tools described in the prompt and called in JSON "
    "replies, for a model without native tool calling); the baselines call tools the way "
    "aimegraph's default does with the same model."
)


ATTACK_NOTE = (
    "Utility under attack: the share of rollouts whose user task was done; attack success "
    "rate: the share in which the attacker's goal was reached (the benchmark's own checks)."
)
LEFT_OUT_NOTE = "The suite's source has these tasks, but they could not be played:"


def attack_table(summary: Mapping[str, Any]) -> tuple[str, list[str], list[list[str]]] | None:
    """The attack's figures per system (both reports): its name, columns and rows;
    ``None`` when the suite was not attacked."""
    attack = summary.get("attack")
    if not attack:
        return None
    columns = ["system", "rollouts", "utility under attack", "attack success rate"]
    rows = [
        [name, str(int(f["rollouts"])), f"{f['utility']:.1%}", f"{f['attack_success']:.1%}"]
        for name, f in attack["systems"].items()
    ]
    return str(attack["name"]), columns, rows


def fmt_number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def fmt_cost(value: float | None) -> str:
    return "–" if value is None else f"${value:.4f}"


def fmt_rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def fmt_tool_calling(system: Mapping[str, Any]) -> str:
    """How a system called tools: ``native``, or ``JSON`` (described in the prompt)."""
    modes = system.get("tool_calling") or []
    return " + ".join("JSON (in the prompt)" if m == "json" else m for m in modes) or "–"


def fmt_ci(value: float | None, ci: Sequence[float] | None) -> str:
    if value is None:
        return "–"
    return f"{value:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else f"{value:.2f}"


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


BREACHES_NOTE = (
    "- **{name}**: {n} oracle calls used what their prompt did not show (the knowledge "
    "rule); this suite's oracle is a benchmark's ground truth, not yet held to the rule, "
    "so they are counted, not refused: its figures may credit the stand-in with "
    "knowledge a real model would lack."
)


def markdown_report(summary: Mapping[str, Any]) -> str:
    k = summary["k"]
    lines = [f"# Eval of `{summary['suite']}`: k = {k}", ""]
    if not summary["complete"]:
        lines += [
            f"**Incomplete**: {summary['rollouts_done']} of {summary['rollouts_expected']} "
            "rollouts recorded; run the same command again to finish.",
            "",
        ]
    columns, rows = systems_table(summary["systems"], k)
    lines += ["## Systems", "", "Calls, tokens, cost and wall time are means per rollout.", ""]
    lines += _table(columns, rows)
    lines += ["", notes(k)]
    for name, reason in summary["skipped"].items():
        lines += ["", f"- **{name}** skipped: {reason}"]
    for system in summary["systems"]:
        if system.get("knowledge_breaches"):
            lines += ["", BREACHES_NOTE.format(name=system["name"], n=system["knowledge_breaches"])]
    attacked = attack_table(summary)
    if attacked is not None:
        name, attack_columns, attack_rows = attacked
        lines += ["", f"## Under attack: {name}", ""] + _table(attack_columns, attack_rows)
        lines += ["", ATTACK_NOTE]
    left_out = summary.get("skipped_tasks") or {}
    if left_out:
        lines += ["", "## Tasks left out", "", LEFT_OUT_NOTE, ""]
        lines += [f"- **{task}**: {reason}" for task, reason in left_out.items()]
    tag_columns, tag_rows = tags_table(summary["systems"])
    if tag_rows:
        lines += ["", "## By tag", ""] + _table(tag_columns, tag_rows)
    lines += ["", "## Tasks", ""] + _tasks_table(summary)
    return "\n".join(lines) + "\n"


def notes(k: int) -> str:
    """What the systems table's figures mean (both reports)."""
    at_k = PASS_AT_K_NOTE.format(k=k) if k > 1 else ""
    return SCORES_NOTE + at_k + PER_SOLVED_NOTE + TOOL_CALLING_NOTE


def score_columns(k: int) -> list[str]:
    """pass@1, and with more than one rollout per task pass@k and pass^k."""
    return ["pass@1"] if k == 1 else ["pass@1", f"pass@{k}", f"pass^{k}"]


def score_cells(system: Mapping[str, Any], k: int) -> list[str]:
    names = ["pass_at_1"] if k == 1 else ["pass_at_1", "pass_at_k", "pass_hat_k"]
    return [fmt_ci(system[name], system[f"{name}_ci"]) for name in names]


def tags_table(systems: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The per-tag table of both reports (sorted by tag, then system): columns and rows."""
    columns = [
        "tag",
        "system",
        "tasks",
        "pass@1",
        "input tokens / rollout",
        "input tokens / solved",
        "tokens / solved",
    ]
    rows = [
        [
            tag,
            system["name"],
            str(figures["tasks"]),
            fmt_rate(figures["pass_at_1"]),
            fmt_number(figures["input_tokens_per_rollout"]),
            fmt_number(figures["input_tokens_per_solved"]),
            fmt_number(figures["tokens_per_solved"]),
        ]
        for system in systems
        for tag, figures in system["by_tag"].items()
    ]
    return columns, sorted(rows, key=lambda row: (row[0], row[1]))


def systems_table(
    systems: Sequence[Mapping[str, Any]], k: int
) -> tuple[list[str], list[list[str]]]:
    """The per-system table of both reports: columns and rows."""
    columns = [
        "system",
        "kind (model)",
        "tool calling",
        "tasks",
        "rollouts",
        *score_columns(k),
        "calls",
        "input",
        "cached",
        "output",
        "reasoning",
        "cost",
        "wall s",
        "tokens / solved",
        "input / solved",
        "cost / solved",
    ]
    rows = []
    for s in systems:
        per = s["per_rollout"]
        rows.append(
            [
                s["name"],
                f"{s['kind']} ({s['model']})",
                fmt_tool_calling(s),
                str(s["tasks"]),
                str(s["rollouts"]),
                *score_cells(s, k),
                fmt_number(per["llm_calls"], 1),
                fmt_number(per["input_tokens"]),
                fmt_number(per["cached_input_tokens"]),
                fmt_number(per["output_tokens"]),
                fmt_number(per["reasoning_tokens"]),
                fmt_cost(per["cost_usd"]),
                fmt_number(per["wall_s"], 2),
                fmt_number(s["tokens_per_solved"]),
                fmt_number(s["input_tokens_per_solved"]),
                fmt_cost(s["cost_per_solved"]),
            ]
        )
    return columns, rows


def _tasks_table(summary: Mapping[str, Any]) -> list[str]:
    names = [s["name"] for s in summary["systems"]]
    rows = []
    for task in summary["tasks"]:
        cells = [task["id"], ", ".join(task["tags"])]
        reasons = []
        for name in names:
            result = task["results"].get(name)
            if result is None:
                cells.append("–")
                continue
            cells.append(
                f"{result['passed']}/{result['n']} ({fmt_number(result['mean_tokens'])} tok)"
            )
            reasons += [
                f"{name}: {f['reason']}" + (f" (x{f['count']})" if f["count"] > 1 else "")
                for f in result["failures"]
            ]
        cells.append("; ".join(reasons)[:400])
        rows.append(cells)
    return _table(["task", "tags", *names, "failure reasons"], rows)


def comparison_markdown(result: Mapping[str, Any]) -> str:
    a, b = result["a"], result["b"]
    low, high = result["interval"]
    lines = [
        f"# {a} against {b}",
        "",
        f"{result['tasks']} tasks in common. pass@1: {result['pass_at_1_a']:.3f} against "
        f"{result['pass_at_1_b']:.3f}; difference {result['mean_difference']:+.3f} "
        f"(95% interval {low:+.3f} to {high:+.3f}).",
        "",
        f"{a} better on {result['a_better']} tasks, {b} on {result['b_better']}, "
        f"{result['ties']} ties; sign test p = {result['p_value']:.3g}.",
        "",
        *_table(
            ["", "tokens / solved", "input tokens / solved", "cost / solved"],
            [
                [
                    label,
                    fmt_number(per["tokens_per_solved"]),
                    fmt_number(per["input_tokens_per_solved"]),
                    fmt_cost(per["cost_per_solved"]),
                ]
                for label, per in ((a, result["per_solved_a"]), (b, result["per_solved_b"]))
            ],
        ),
    ]
    if result["differing"]:
        lines += ["", "Tasks where they differ (pass@1):", ""]
        lines += _table(
            ["task", a, b],
            [[d["task"], f"{d['a']:.2f}", f"{d['b']:.2f}"] for d in result["differing"]],
        )
    for side in ("only_in_a", "only_in_b"):
        if result[side]:
            who = a if side == "only_in_a" else b
            lines += ["", f"Only in {who}: {', '.join(result[side])}"]
    return "\n".join(lines) + "\n"
