"""The self-contained HTML report: the tables of the Markdown report and two plots
drawn as inline SVG (no script, no external file): success against cost per system,
and the per-task matrix. Every text from a run is escaped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from aimegraph.eval.report import (
    ATTACK_NOTE,
    LEFT_OUT_NOTE,
    attack_table,
    notes,
    systems_table,
    tags_table,
)

__all__ = ["html_report", "matrix_svg", "scatter_svg"]

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px;
       color: #1d232a; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; font-size: 13px; }
th, td { border: 1px solid #d5dbe1; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f1f4f7; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.note { color: #56626e; } .warn { color: #a14a00; font-weight: 600; }
svg text { font: 11px system-ui, sans-serif; fill: #1d232a; }
"""

_COLOURS = ("#2f6fbf", "#c2552b", "#3a9a5b", "#8a4fb5", "#b8912a", "#2a9aa8")


def _colour(index: int) -> str:
    return _COLOURS[index % len(_COLOURS)]


def scatter_svg(systems: Sequence[Mapping[str, Any]]) -> str:
    """pass@1 (with its interval) against the mean cost per rollout, one point per
    system; against mean tokens per rollout when no price was given (all costs 0)."""
    width, height, left, bottom, top, right = 560, 320, 60, 40, 20, 160
    priced = any((s["per_rollout"]["cost_usd"] or 0) > 0 for s in systems)
    if priced:
        label = "cost per rollout (USD)"
        xs = [float(s["per_rollout"]["cost_usd"] or 0) for s in systems]
    else:
        label = "tokens per rollout (no prices given)"
        xs = [
            float(s["per_rollout"]["input_tokens"] + s["per_rollout"]["output_tokens"])
            for s in systems
        ]
    x_max = max(xs + [1e-9]) * 1.15
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + plot_w * x / x_max

    def py(y: float) -> float:
        return top + plot_h * (1 - y)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="success against cost">',
        f'<line x1="{left}" y1="{py(0)}" x2="{left + plot_w}" y2="{py(0)}" stroke="#888"/>',
        f'<line x1="{left}" y1="{py(0)}" x2="{left}" y2="{py(1)}" stroke="#888"/>',
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts.append(
            f'<line x1="{left - 4}" y1="{py(tick)}" x2="{left + plot_w}" y2="{py(tick)}" '
            f'stroke="#eee"/><text x="{left - 8}" y="{py(tick) + 4}" text-anchor="end">'
            f"{tick:.2f}</text>"
        )
    for i in range(5):
        value = x_max * i / 4
        shown = f"${value:.4f}" if priced else f"{value:,.0f}"
        parts.append(f'<text x="{px(value)}" y="{py(0) + 16}" text-anchor="middle">{shown}</text>')
    parts.append(
        f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle">'
        f"{escape(label)}</text>"
    )
    parts.append(
        f'<text x="14" y="{top + plot_h / 2}" transform="rotate(-90 14 {top + plot_h / 2})" '
        'text-anchor="middle">pass@1</text>'
    )
    for index, (system, x) in enumerate(zip(systems, xs, strict=True)):
        colour, y = _colour(index), float(system["pass_at_1"] or 0)
        low, high = system["pass_at_1_ci"] or (y, y)
        parts.append(
            f'<line x1="{px(x)}" y1="{py(low)}" x2="{px(x)}" y2="{py(high)}" '
            f'stroke="{colour}" stroke-width="2"/>'
            f'<circle cx="{px(x)}" cy="{py(y)}" r="5" fill="{colour}"/>'
        )
        legend_y = top + 16 * index + 6
        parts.append(
            f'<circle cx="{left + plot_w + 20}" cy="{legend_y}" r="5" fill="{colour}"/>'
            f'<text x="{left + plot_w + 30}" y="{legend_y + 4}">{escape(system["name"])}'
            f" ({y:.2f})</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _heat(value: float) -> str:
    """Red (0) through yellow to green (1)."""
    red = int(220 - 120 * max(0.0, value - 0.5) * 2) if value > 0.5 else 220
    green = int(80 + 120 * min(1.0, value * 2))
    return f"rgb({red},{green},90)"


def matrix_svg(summary: Mapping[str, Any]) -> str:
    """One row per task, one column per system; each cell passes/rollouts, coloured
    by the share that passed."""
    names = [s["name"] for s in summary["systems"]]
    tasks = summary["tasks"]
    label_w, cell_w, cell_h, head = 220, 110, 20, 30
    width = label_w + cell_w * max(len(names), 1) + 10
    height = head + cell_h * len(tasks) + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'role="img" aria-label="per-task results">'
    ]
    for col, name in enumerate(names):
        x = label_w + col * cell_w + cell_w / 2
        parts.append(f'<text x="{x}" y="18" text-anchor="middle">{escape(name)}</text>')
    for row, task in enumerate(tasks):
        y = head + row * cell_h
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 14}" text-anchor="end">{escape(task["id"])}</text>'
        )
        for col, name in enumerate(names):
            result = task["results"].get(name)
            x = label_w + col * cell_w
            if result is None:
                fill, text = "#f1f4f7", "–"
            else:
                fill, text = _heat(result["pass_at_1"]), f"{result['passed']}/{result['n']}"
            parts.append(
                f'<rect x="{x + 1}" y="{y + 1}" width="{cell_w - 2}" height="{cell_h - 2}" '
                f'fill="{fill}"><title>{escape(task["id"])} · {escape(name)}: {text}</title></rect>'
                f'<text x="{x + cell_w / 2}" y="{y + 14}" text-anchor="middle">{text}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _rows(columns: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int = 1) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{escape(cell)}</td>'
            if i >= numeric_from
            else f"<td>{escape(cell)}</td>"
            for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_report(summary: Mapping[str, Any]) -> str:
    """The whole report as one HTML document."""
    k = summary["k"]
    systems = summary["systems"]
    title = f"Eval of {summary['suite']}: k = {k}"
    body = [f"<h1>{escape(title)}</h1>"]
    if not summary["complete"]:
        body.append(
            f'<p class="warn">Incomplete: {summary["rollouts_done"]} of '
            f"{summary['rollouts_expected']} rollouts recorded.</p>"
        )
    for name, reason in summary["skipped"].items():
        body.append(f'<p class="note">{escape(name)} skipped: {escape(reason)}</p>')
    columns, rows = systems_table(systems, k)
    body.append("<h2>Systems</h2>" + _rows(columns, rows, numeric_from=3))
    body.append(
        '<p class="note">Calls, tokens, cost and wall time: means per rollout. '
        + escape(notes(k))
        + "</p>"
    )
    attacked = attack_table(summary)
    if attacked is not None:
        name, attack_columns, attack_rows = attacked
        body.append(f"<h2>Under attack: {escape(name)}</h2>")
        body.append(_rows(attack_columns, attack_rows))
        body.append(f'<p class="note">{escape(ATTACK_NOTE)}</p>')
    left_out = summary.get("skipped_tasks") or {}
    if left_out:
        body.append(f'<h2>Tasks left out</h2><p class="note">{escape(LEFT_OUT_NOTE)}</p>')
        body.append(_rows(["task", "why"], list(left_out.items()), numeric_from=99))
    if systems:
        body.append("<h2>Success against cost</h2>" + scatter_svg(systems))
        body.append("<h2>Per task</h2>" + matrix_svg(summary))
    tag_columns, tag_rows = tags_table(systems)
    if tag_rows:
        body.append("<h2>By tag</h2>" + _rows(tag_columns, tag_rows, numeric_from=2))
    failure_rows = [
        [task["id"], name, f"{f['reason']}" + (f" (x{f['count']})" if f["count"] > 1 else "")]
        for task in summary["tasks"]
        for name, result in task["results"].items()
        for f in result["failures"]
    ]
    if failure_rows:
        body.append("<h2>Failure reasons</h2>")
        body.append(_rows(["task", "system", "reason"], failure_rows, numeric_from=99))
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>"
        + "".join(body)
        + "</body></html>\n"
    )
