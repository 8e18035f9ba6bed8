"""How stored memories become prompt lines: bounded in count (``memory_k``) and characters.

The sections that show them (and the whiteboard) are :mod:`aimegraph.memory.sections`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.store.base import Item

from aimegraph.memory.episodes import EPISODES, LESSONS, episode_from
from aimegraph.memory.sections import bounded, clip
from aimegraph.prompts import memory as prompts


def _lesson_line(value: Mapping[str, Any]) -> str:
    template = prompts.USER_LESSON_ITEM if value.get("source") == "user" else prompts.LESSON_ITEM
    return template.format(
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
