"""The evals in a folder, for the dashboard: one directory per eval, read from the
``summary.json`` and ``report.html`` an eval writes."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from aimegraph.eval.harness import REPORT_HTML, SUMMARY

__all__ = ["eval_report", "list_evals"]


def list_evals(folder: Path) -> list[dict[str, Any]]:
    """Every eval under ``folder``, newest first: its name (the directory), suite, k,
    whether it is complete, when it was last written, and per system its pass@1 and
    tokens and cost per solved task. A directory without a readable summary is
    skipped (an eval that has not written one yet)."""
    found: list[tuple[float, dict[str, Any]]] = []
    for summary_path in folder.glob(f"*/{SUMMARY}"):
        try:
            summary = json.loads(summary_path.read_text(encoding="utf-8"))
            updated = summary_path.stat().st_mtime
        except (OSError, ValueError):
            continue
        found.append(
            (
                updated,
                {
                    "name": summary_path.parent.name,
                    "suite": summary.get("suite"),
                    "k": summary.get("k"),
                    "complete": summary.get("complete"),
                    "rollouts": summary.get("rollouts_done"),
                    "expected": summary.get("rollouts_expected"),
                    "updated_at": dt.datetime.fromtimestamp(updated, dt.UTC).isoformat(
                        timespec="seconds"
                    ),
                    "systems": [
                        {
                            key: system.get(key)
                            for key in (
                                "name",
                                "pass_at_1",
                                "pass_at_k",
                                "tokens_per_solved",
                                "cost_per_solved",
                            )
                        }
                        for system in summary.get("systems", [])
                    ],
                    "skipped": summary.get("skipped", {}),
                    "has_report": (summary_path.parent / REPORT_HTML).is_file(),
                },
            )
        )
    return [item for _, item in sorted(found, key=lambda pair: pair[0], reverse=True)]


def eval_report(folder: Path, name: str) -> Path | None:
    """The HTML report of the eval named ``name`` directly under ``folder`` (``None``
    for a name that is not one of its directories, or has no report)."""
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        return None
    path = folder / name / REPORT_HTML
    return path if path.is_file() else None
