"""A typed answer's format, as a pydantic model and as a JSON schema, and a scenario
whose reporter fills it in: for the typed-answer tests of the graph, the CLI and
the dashboard (``tests.typed_answers:CityFacts`` is importable as ``module:attr``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from tests.scripted import plan, spec, submit


class CityFacts(BaseModel):
    """Facts about a city."""

    city: str
    population: int = Field(ge=0)


CITY_SCHEMA: dict[str, Any] = {
    "title": "CityFacts",
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer", "minimum": 0}},
    "required": ["city", "population"],
}

PARIS = {"city": "Paris", "population": 2100000}


def city_scenario(*replies: dict[str, Any]) -> dict[str, Any]:
    """One task finding the figure; the reporter's replies are ``replies``."""
    return {
        "goal": "Population of the capital of France?",
        "any_goal": True,  # the CLI tests run it with their own goal
        "planner": [plan(spec("t1"))],
        "actors": {"t1": [submit("Paris, 2.1 million people")]},
        "reporter": list(replies),
    }
