"""``aimegraph run --response-format``: the typed answer is filled in, stored with the
thread's settings (resume and the dashboard rebuild the graph with it) and printed
by ``show``; a format no reporter could fill in is a usage error."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from tests.conftest import Cli
from tests.typed_answers import CITY_SCHEMA, PARIS, city_scenario


def scenario_model(tmp_path: Path) -> str:
    path = tmp_path / "city.yaml"
    path.write_text(yaml.safe_dump(city_scenario(PARIS)))
    return f"scripted:{path}"


def test_run_with_a_pydantic_response_format_and_show_it(cli: Cli, tmp_path: Path) -> None:
    model = scenario_model(tmp_path)
    code, out = cli.run("typed", "--response-format", "tests.typed_answers:CityFacts", model=model)
    assert code == 0 and out["structured_response"] == PARIS
    code, shown = cli.json("show", "typed")
    assert shown["structured_response"] == PARIS
    code, text = cli("show", "typed")
    assert "final answer (typed: structured_response):" in text and '"city": "Paris"' in text


def test_run_with_a_json_schema_file(cli: Cli, tmp_path: Path) -> None:
    schema = tmp_path / "city.json"
    schema.write_text(json.dumps(CITY_SCHEMA))
    code, out = cli.run("schema", "--response-format", str(schema), model=scenario_model(tmp_path))
    assert code == 0 and out["structured_response"] == PARIS


def test_a_response_format_that_cannot_be_filled_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    listing = tmp_path / "list.json"
    listing.write_text('{"type": "array"}')
    code, text = cli("run", "g", "--model", "scripted:demo", "--response-format", str(listing))
    assert code == 2 and '"type": "object"' in text
    code, text = cli("run", "g", "--model", "scripted:demo", "--response-format", "nope:Nothing")
    assert code == 2 and "cannot import the response format 'nope:Nothing'" in text
