"""Prompt templates, one module per role. Plain ``str.format`` templates: no logic here.

Every system prompt opens with a ``# Role: <name>`` line. It tells any model
which hat it wears, and lets transcripts and scripted test models tell the
roles apart without looking at the graph.

The role system prompts and the persona habits are named components
(``DEFAULT_PROMPTS``) that callers and the optimiser may override;
``resolve_prompts`` checks an override set (a mapping or a JSON / YAML file)
against the defaults. ``aimegraph.prompts.source`` turns overrides, prompt sets
and prompt stores into the per-run source a graph reads
(``build_aime_graph(prompts=...)``).
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping
from pathlib import Path

import yaml

from aimegraph.prompts import actor, planner, reporter, verifier

DEFAULT_PROMPTS: Mapping[str, str] = {
    "planner": planner.SYSTEM,
    "actor": actor.SYSTEM,
    "verifier": verifier.SYSTEM,
    "reporter": reporter.SYSTEM,
    "persona_habits": actor.PERSONA_HABITS,
}

PromptOverrides = Mapping[str, str] | str | Path


def placeholders(template: str) -> set[str]:
    """The ``str.format`` field names a template fills in."""
    return {field for _, field, _, _ in string.Formatter().parse(template) if field}


def load_prompt_set(path: str | Path) -> dict[str, str]:
    """A prompt-set file: a JSON or YAML mapping of component name to text."""
    text = Path(path).read_text(encoding="utf-8")
    data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ValueError(f"prompt set {path}: expected a mapping of component name to text")
    return data


def resolve_prompts(overrides: PromptOverrides | None = None) -> dict[str, str]:
    """The defaults with ``overrides`` applied, each checked.

    An override must name a known component and keep every placeholder its
    default fills in (a template missing ``{tools}`` would silently drop the
    tool list); an unknown placeholder would fail at format time, mid-run.
    """
    chosen = dict(DEFAULT_PROMPTS)
    if overrides is None:
        return chosen
    given = load_prompt_set(overrides) if isinstance(overrides, str | Path) else overrides
    if not isinstance(given, Mapping):
        raise ValueError(
            f"prompt overrides must map component names to texts, not {type(given).__name__}"
        )
    unknown = sorted(set(given) - set(DEFAULT_PROMPTS))
    if unknown:
        raise ValueError(f"unknown prompt component(s) {unknown}; known: {sorted(DEFAULT_PROMPTS)}")
    for name, text in given.items():
        if not isinstance(text, str):
            raise ValueError(f"prompt {name!r} must be a text, not {type(text).__name__}")
        expected = placeholders(DEFAULT_PROMPTS[name])
        try:
            found = placeholders(text)
        except ValueError as err:
            raise ValueError(f"prompt {name!r} is not a valid template: {err}") from err
        missing, extra = sorted(expected - found), sorted(found - expected)
        if missing:
            raise ValueError(f"prompt {name!r} lacks placeholder(s) {missing}")
        if extra:
            raise ValueError(
                f"prompt {name!r} has unknown placeholder(s) {extra}; allowed: {sorted(expected)}"
            )
        chosen[name] = text
    return chosen
