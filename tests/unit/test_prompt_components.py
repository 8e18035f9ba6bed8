"""Role prompts as named components: defaults, overrides and their checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aimegraph.prompts import DEFAULT_PROMPTS, actor, planner, resolve_prompts


def test_defaults_name_every_role_component() -> None:
    assert set(DEFAULT_PROMPTS) == {"planner", "actor", "verifier", "reporter", "persona_habits"}
    assert DEFAULT_PROMPTS["planner"] == planner.SYSTEM
    assert DEFAULT_PROMPTS["persona_habits"] == actor.PERSONA_HABITS


def test_override_replaces_only_the_named_component() -> None:
    chosen = resolve_prompts({"persona_habits": "Double-check units."})
    assert chosen["persona_habits"] == "Double-check units."
    assert chosen["planner"] == planner.SYSTEM


def test_prompt_set_file_is_read(tmp_path: Path) -> None:
    text = planner.SYSTEM + "\nAlways add a checking task.\n"
    path = tmp_path / "set.json"
    path.write_text(json.dumps({"planner": text}), encoding="utf-8")
    assert resolve_prompts(path)["planner"] == text
    yaml_path = tmp_path / "set.yaml"
    yaml_path.write_text("reporter: Be brief.\n", encoding="utf-8")
    assert resolve_prompts(str(yaml_path))["reporter"] == "Be brief."


def test_unknown_component_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown prompt component.*plannr"):
        resolve_prompts({"plannr": "x"})


def test_missing_or_foreign_placeholder_is_refused() -> None:
    with pytest.raises(ValueError, match=r"lacks placeholder.*bundles"):
        resolve_prompts({"planner": "Plan at most {max_tasks} tasks."})
    with pytest.raises(ValueError, match=r"unknown placeholder.*goal"):
        resolve_prompts({"reporter": "Answer {goal}."})
    with pytest.raises(ValueError, match="not a valid template"):
        resolve_prompts({"verifier": "Judge {unclosed"})


def test_overrides_that_are_not_texts_are_refused() -> None:
    with pytest.raises(ValueError, match="prompt 'planner' must be a text, not int"):
        resolve_prompts({"planner": 5})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="must map component names to texts, not list"):
        resolve_prompts(["planner"])  # type: ignore[arg-type]
