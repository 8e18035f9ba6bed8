"""The run and threads pages, served with the state they show already in the HTML:
a page reads at once (and without scripts), then its script takes the same state
from the page and goes live with the event stream.

The state travels twice: as text in the elements a reader sees first (status, goal,
checklist, answer; the threads table), and whole as a JSON data block the script
renders from. A data block is not a script, so the pages' CSP (no inline scripts)
still holds; ``<`` is escaped in it so no text can close the block.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from html import escape
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any
from urllib.parse import quote

__all__ = ["LIVE_STATUSES", "STATIC", "no_thread_page", "run_page", "threads_page"]

STATIC = Path(str(resources.files("aimegraph.dashboard") / "static"))
"""The pages, their templates, scripts and styles."""

LIVE_STATUSES = frozenset({"running", "paused", "stopped", "queued"})
"""Statuses of a run that has not ended: its actors read a note at their next step (a
paused, stopped or queued run's once it goes on); a note to an ended run would be lost."""


def run_page(template: Path, thread_id: str, view: Mapping[str, Any] | None) -> str:
    """The run page of ``thread_id`` showing ``view`` (None: a run is starting on the
    thread and has written no checkpoint yet)."""
    shown = view or {}
    status = str(shown.get("status") or "starting")
    return _fill(
        template,
        thread_id=escape(thread_id),
        status=escape(status),
        goal=escape(str(shown.get("goal") or "")),
        # A cancel without a reason given records "cancelled": the badge says it.
        reason=escape(str(shown.get("reason") or "") if shown.get("reason") != status else ""),
        checklist=escape(str(shown.get("checklist") or "(no plan yet)")),
        final_answer=escape(str(shown.get("final_answer") or "(none yet)")),
        note_hidden="" if status in LIVE_STATUSES else "hidden",
        initial=_data_block(view),
    )


def no_thread_page(template: Path, thread_id: str) -> str:
    """The page of a thread the store does not have (served with 404)."""
    return _fill(template, thread_id=escape(thread_id))


def threads_page(template: Path, data: Mapping[str, Any], status: str | None = None) -> str:
    """The threads page listing ``data["threads"]`` (rows as the API gives them), those
    of ``status`` when given (the page's filter)."""
    rows = data.get("threads") or []
    shown = [row for row in rows if status in (None, row.get("status"))]
    return _fill(
        template,
        rows="\n".join(_thread_row(row) for row in shown),
        count=f"{len(shown)} of {len(rows)}",
        initial=_data_block(data),
    )


def _thread_row(row: Mapping[str, Any]) -> str:
    usage = row.get("usage") or {}
    tokens = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
    cost = float(usage.get("cost_usd") or 0)
    thread_id = str(row["thread_id"])
    cells = [
        ("", f'<a href="/threads/{escape(quote(thread_id, safe=""))}">{escape(thread_id)}</a>'),
        ("", _badge(str(row.get("status") or ""))),
        ("goal", escape(str(row.get("goal") or ""))),
        ("when", escape(str(row.get("updated") or "")[:19])),
        ("num", str(int(usage.get("llm_calls") or 0))),
        ("num", str(tokens)),
        ("num", f"${cost:.4f}" if cost else "–"),
    ]
    tds = "".join(
        f'<td class="{css}">{cell}</td>' if css else f"<td>{cell}</td>" for css, cell in cells
    )
    return f'<tr data-thread="{escape(thread_id)}">{tds}</tr>'


def _badge(status: str) -> str:
    return f'<span class="badge status-{escape(status)}">{escape(status)}</span>'


def _data_block(state: Any) -> str:
    text = json.dumps(state, default=str).replace("<", "\\u003c")
    return f'<script type="application/json" id="initial-state">{text}</script>'


def _fill(template: Path, **fields: str) -> str:
    return Template(template.read_text(encoding="utf-8")).substitute(fields)
