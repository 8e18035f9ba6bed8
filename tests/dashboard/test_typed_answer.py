"""A run started on the dashboard with a response format: the run page shows the
typed answer (``structured_response``) and the format it was asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from langgraph.checkpoint.base import BaseCheckpointSaver
from starlette.testclient import TestClient
from tests.typed_answers import PARIS, city_scenario

from aimegraph.dashboard import create_app
from aimegraph.dashboard.runs import RunManager


def test_a_dashboard_run_fills_and_shows_the_typed_answer(
    saver: BaseCheckpointSaver[Any], runs: RunManager, tmp_path: Path
) -> None:
    scenario = tmp_path / "city.yaml"
    scenario.write_text(yaml.safe_dump(city_scenario(PARIS)))
    client = TestClient(create_app(saver, runs=runs), base_url="http://127.0.0.1")
    started = client.post(
        "/api/runs",
        json={
            "goal": "Population of the capital of France?",
            "model": f"scripted:{scenario}",
            "response_format": "tests.typed_answers:CityFacts",
            "thread_id": "typed",
        },
    )
    assert started.status_code == 202, started.text
    runs.wait("typed", timeout=60)
    run = client.get("/api/threads/typed").json()
    assert run["status"] == "succeeded", (run["reason"], runs.errors)
    assert run["structured_response"] == PARIS
    assert run["settings"]["response_format"] == "tests.typed_answers:CityFacts"
