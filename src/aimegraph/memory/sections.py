"""How the run's whiteboard (``facts``) and recalled past runs appear in the
planner's and the actors' prompts, bounded in characters.

It renders only what the state carries (the recall nodes put the store's lines
there), so the actor factory and the planner use it without reading the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from aimegraph.prompts import memory as prompts

__all__ = ["bounded", "clip", "facts_section", "past_runs_section"]

_FIELD_CHARS = 300


def clip(text: str, limit: int = _FIELD_CHARS) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def bounded(lines: Iterable[str], max_chars: int) -> list[str]:
    """The lines, in order, while their total stays within ``max_chars``."""
    kept: list[str] = []
    used = 0
    for line in lines:
        if line in kept:  # the same work remembered from several runs
            continue
        if used + len(line) > max_chars:
            break
        kept.append(line)
        used += len(line) + 1
    return kept


def facts_section(facts: Mapping[str, str] | None) -> str:
    """The whiteboard as a prompt section ('' when empty)."""
    if not facts:
        return ""
    lines = "\n".join(f"- {key}: {clip(value)}" for key, value in sorted(facts.items()))
    return prompts.FACTS.format(facts=lines)


def past_runs_section(lines: Sequence[str]) -> str:
    """Recalled past runs (the planner state's ``memories``) as a prompt section ('' when none)."""
    return prompts.PAST_RUNS.format(items="\n".join(lines)) if lines else ""
