"""Typed final answers: ``build_aime_graph(response_format=...)`` (a pydantic model or
a JSON schema) fills ``structured_response`` through the structured-output re-asks,
the verifier judges that answer, and a reply that never fits fails the run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from tests.fake_openai import FakeOpenAI
from tests.typed_answers import CITY_SCHEMA, PARIS, CityFacts, city_scenario

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import make_serializer, thread_config
from aimegraph.models import ScriptedChatModel
from aimegraph.models.resolve import resolve_model
from aimegraph.models.response_format import TypedAnswer, answer_as_json, load_response_format


def build(
    workspace: Path, response_format: Any, *replies: dict[str, Any], **config: Any
) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel.from_dict(city_scenario(*replies))
    graph = build_aime_graph(
        model,
        config=AimeConfig(workspace=workspace, **config),
        response_format=response_format,
        checkpointer=InMemorySaver(serde=make_serializer()),
    )
    return graph, model


@pytest.mark.parametrize("tool_calling", ["native", "json"])
def test_a_pydantic_response_format_fills_structured_response(
    workspace: Path, tool_calling: str
) -> None:
    graph, model = build(workspace, CityFacts, PARIS, tool_calling=tool_calling)
    thread = thread_config("typed")
    out = graph.invoke({"goal": "Population of the capital of France?"}, thread)

    assert out["status"] == "succeeded", out.get("reason")
    assert out["structured_response"] == CityFacts(city="Paris", population=2100000)
    assert '"population": 2100000' in out["final_answer"]
    assert out["messages"][-1].content == out["final_answer"]
    # The verifier judged the typed answer itself.
    assert '"city": "Paris"' in model.prompts("verifier")[0]
    # Revived from the checkpoint as the model's instance (its class is allowlisted).
    revived = graph.get_state(thread).values["structured_response"]
    assert isinstance(revived, CityFacts) and revived.population == 2100000


def test_a_json_schema_response_format_gives_a_dict(workspace: Path) -> None:
    graph, _ = build(workspace, CITY_SCHEMA, PARIS)
    out = graph.invoke({"goal": "Population of the capital of France?"}, thread_config("s"))
    assert out["status"] == "succeeded" and out["structured_response"] == PARIS


@pytest.mark.parametrize("response_format", [CityFacts, CITY_SCHEMA], ids=["pydantic", "schema"])
def test_a_reply_that_does_not_fit_is_asked_again_with_the_error(
    workspace: Path, response_format: Any
) -> None:
    bad = {"city": "Paris", "population": -5}
    graph, model = build(workspace, response_format, bad, PARIS)
    out = graph.invoke({"goal": "Population?"}, thread_config("again"))
    assert out["status"] == "succeeded" and out["usage"].by_role["reporter"].llm_calls == 2
    assert "population" in model.prompts("reporter")[1]  # the re-ask names the problem


@pytest.mark.parametrize("response_format", [CityFacts, CITY_SCHEMA], ids=["pydantic", "schema"])
def test_a_reply_that_never_fits_fails_the_run_with_the_reason(
    workspace: Path, response_format: Any
) -> None:
    graph, model = build(workspace, response_format, {"city": "Paris"}, max_output_retries=1)
    out = graph.invoke({"goal": "Population?"}, thread_config("never"))
    assert out["status"] == "failed" and out["structured_response"] is None
    assert out["reason"].startswith("the answer did not fit the response format: no valid")
    assert "population" in out["reason"]
    assert "Paris, 2.1 million people" in out["final_answer"]  # the results as they are
    assert model.prompts("verifier") == []


def test_ainvoke_fills_structured_response(workspace: Path) -> None:
    graph, _ = build(workspace, CityFacts, PARIS)
    out = asyncio.run(graph.ainvoke({"goal": "Population?"}, thread_config("async")))
    assert out["structured_response"] == CityFacts(city="Paris", population=2100000)


def test_a_new_run_on_the_thread_starts_without_the_last_typed_answer(workspace: Path) -> None:
    graph, _ = build(workspace, CityFacts, PARIS, {"city": "Paris"}, max_output_retries=0)
    thread = thread_config("turns")
    assert graph.invoke({"goal": "Population?"}, thread)["structured_response"] is not None
    again = graph.invoke({"goal": "And Lyon?"}, thread)
    assert again["status"] == "failed" and again["structured_response"] is None


def test_formats_that_no_reporter_could_fill_are_refused_when_built(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match='must describe an object \\("type": "object"\\)'):
        TypedAnswer.of({"type": "array", "items": {"type": "string"}})
    with pytest.raises(ValueError, match="not a valid JSON schema"):
        TypedAnswer.of({"type": "object", "properties": {"a": {"type": "no-such-type"}}})
    with pytest.raises(TypeError, match="pydantic model or a JSON schema"):
        TypedAnswer.of(str)  # type: ignore[arg-type]
    schema_file = tmp_path / "city.json"
    schema_file.write_text('{"type": "object", "properties": {}}')
    assert load_response_format(str(schema_file)) == {"type": "object", "properties": {}}
    assert load_response_format("tests.typed_answers:CityFacts") is CityFacts
    with pytest.raises(ValueError, match="cannot read"):
        load_response_format(str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="module:attr"):
        load_response_format("CityFacts")


@pytest.mark.parametrize("response_format", [CityFacts, CITY_SCHEMA], ids=["pydantic", "schema"])
def test_an_openai_compatible_reporter_fills_the_format_through_its_own_client(
    workspace: Path,
    fake_openai: FakeOpenAI,
    response_format: Any,
) -> None:
    # A real BaseChatModel (ChatOpenAI over a loopback server): its first reply does
    # not fit (the SDK's own parse refuses it), the re-ask's does.
    fake_openai.script = [
        (200, json.dumps({"city": "Paris", "population": -5})),
        (200, json.dumps(PARIS)),
    ]
    reporter = resolve_model("openai:fake", max_retries=0)
    graph = build_aime_graph(
        ScriptedChatModel.from_dict(city_scenario()),
        models={"reporter": reporter},
        config=AimeConfig(workspace=workspace),
        response_format=response_format,
    )
    out = graph.invoke({"goal": "Population?"})
    assert out["status"] == "succeeded", out.get("reason")
    assert answer_as_json(out["structured_response"]) == PARIS
    assert fake_openai.requests == 2
    sent = fake_openai.bodies[0]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "CityFacts"
    assert "population" in sent["json_schema"]["schema"]["properties"]
