"""How memories appear in prompts: bounded in count (``memory_k``) and characters."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langgraph.store.base import Item

from aimegraph.memory.episodes import EPISODES, LESSONS, episode_from
from aimegraph.prompts import memory as prompts

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


def _lesson_line(value: Mapping[str, Any]) -> str:
    return prompts.LESSON_ITEM.format(
        title=clip(value.get("title", ""), 80), lesson=clip(value.get("lesson", ""))
    )


def past_runs(items: Sequence[Item], max_chars: int) -> list[str]:
    """Run episodes and lessons as planner lines, best first."""
    lines = []
    for item in items:
        if item.namespace[-1] == LESSONS:
            lines.append(_lesson_line(item.value))
        elif item.namespace[-1] == EPISODES:
            episode = episode_from(item.value)
            issues = f"; issues: {clip('; '.join(episode.issues))}" if episode.issues else ""
            lesson = f"; lesson: {clip(episode.lesson)}" if episode.lesson else ""
            lines.append(
                prompts.PAST_RUN.format(
                    goal=clip(episode.goal, 160),
                    outcome=episode.outcome,
                    plan=clip(" | ".join(episode.plan)) or "(none)",
                    issues=issues,
                    lesson=lesson,
                )
            )
    return bounded(lines, max_chars)


def past_runs_section(lines: Sequence[str]) -> str:
    return prompts.PAST_RUNS.format(items="\n".join(lines)) if lines else ""


def experience(items: Sequence[Item], max_chars: int) -> list[str]:
    """Task episodes and lessons as knowledge passages for an actor, best first."""
    passages = []
    for item in items:
        if item.namespace[-1] == LESSONS:
            passages.append(_lesson_line(item.value).removeprefix("- "))
            continue
        episode = episode_from(item.value)
        tools = ", ".join(f"{name} x{n}" for name, n in sorted(episode.tools_used.items()))
        passages.append(
            prompts.EXPERIENCE.format(
                title=clip(episode.title, 80),
                outcome=episode.outcome,
                tools=f"; tools: {tools}" if tools else "",
                summary=clip(episode.summary),
                lesson=f" Lesson: {clip(episode.lesson)}" if episode.lesson else "",
            )
        )
    return bounded(passages, max_chars)
