"""JSON mode over an OpenAI-compatible server asks the server for each reply's schema.

A stub server on 127.0.0.1 (``tests.local_http``) answers chat completions and records
each request body: the plan, the verdict and an actor step each carry their schema as
``response_format`` (or ``guided_json``), a server refusing that form is asked in the
next one and at last without any (the schema then only in the prompt), and what the
server took is remembered for that model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import StructuredTool
from langchain_openai import ChatOpenAI
from tests.local_http import LocalSite, Route, serve

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models.calls import ainvoke_structured, invoke_structured
from aimegraph.models.json_tools import json_step_model, one_call_schema
from aimegraph.models.server_schema import ServerSchema, accepted_form
from aimegraph.state import PlanUpdate, Verdict, plan_update_schema

PROMPT = [SystemMessage("# Role: planner\nPlan."), HumanMessage("Goal: write a haiku")]
PLAN = {"tasks": [{"id": "t1", "title": "Write the haiku"}]}
VERDICT = {"passed": True, "reasoning": "The haiku is there.", "issues": []}
PATH = "/v1/chat/completions"

Answer = Callable[[dict[str, Any]], Route]


@pytest.fixture
def site() -> Iterator[LocalSite]:
    yield from serve()


def completion(content: str) -> Route:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "stub",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    return Route(200, {"Content-Type": "application/json"}, json.dumps(body).encode())


def error(status: int, message: str) -> Route:
    body = {"error": {"message": message, "type": "invalid_request_error"}}
    return Route(status, {"Content-Type": "application/json"}, json.dumps(body).encode())


def answering(site: LocalSite, answer: Answer) -> ChatOpenAI:
    site.route(PATH, answer=lambda body: answer(json.loads(body)))
    return ChatOpenAI(
        model="stub",
        base_url=site.url("/v1"),
        api_key="not-needed",  # type: ignore[arg-type]
        max_retries=0,
    )


def requests(site: LocalSite) -> list[dict[str, Any]]:
    return [json.loads(body) for body in site.posted]


def plan(model: ChatOpenAI, setting: ServerSchema = "auto") -> PlanUpdate | None:
    schema = plan_update_schema(3, first=True)
    reply = invoke_structured(
        model, schema, PROMPT, role="planner", mode="json", retries=0, server_schema=setting
    )
    return reply.value


def test_a_plan_asks_the_server_for_the_plan_schema(site: LocalSite) -> None:
    model = answering(site, lambda _: completion(json.dumps(PLAN)))
    assert plan(model) is not None
    [sent] = requests(site)
    asked = sent["response_format"]
    assert asked["type"] == "json_schema"
    assert asked["json_schema"]["schema"] == plan_update_schema(3, first=True).model_json_schema()
    assert asked["json_schema"]["name"] == "PlanUpdate"
    assert "## Reply format" in sent["messages"][0]["content"]  # still described too


async def test_a_verdict_asks_for_the_verdict_schema(site: LocalSite) -> None:
    model = answering(site, lambda _: completion(json.dumps(VERDICT)))
    reply = await ainvoke_structured(
        model, Verdict, PROMPT, role="verifier", mode="json", retries=0
    )
    assert reply.value == Verdict.model_validate(VERDICT)
    [sent] = requests(site)
    assert sent["response_format"]["json_schema"]["schema"] == Verdict.model_json_schema()


def _write_file(path: str, text: str) -> str:
    return "written"


def _read_file(path: str) -> str:
    return "text"


TOOLS = [
    StructuredTool.from_function(_write_file, name="write_file", description="Write a file."),
    StructuredTool.from_function(_read_file, name="read_file", description="Read a file."),
]


def test_an_actor_step_asks_for_one_call_of_one_bound_tool(site: LocalSite) -> None:
    call = {"tool": "write_file", "args": {"path": "poem.txt", "text": "leaves"}}
    model = answering(site, lambda _: completion(json.dumps(call)))
    reply = json_step_model(model, TOOLS).invoke(PROMPT)
    assert json.loads(reply.text) == call
    [sent] = requests(site)
    schema = sent["response_format"]["json_schema"]["schema"]
    assert schema == one_call_schema(TOOLS)
    assert [option["properties"]["tool"] for option in schema["anyOf"]] == [
        {"const": "write_file"},
        {"const": "read_file"},
    ]


def test_guided_json_and_off_are_sent_as_set(site: LocalSite) -> None:
    model = answering(site, lambda _: completion(json.dumps(PLAN)))
    assert plan(model, "guided_json") is not None
    assert plan(model, "off") is not None
    guided, plain = requests(site)
    assert guided["guided_json"] == plan_update_schema(3, first=True).model_json_schema()
    assert "response_format" not in guided
    assert "response_format" not in plain and "guided_json" not in plain


def llama_cpp_python_server(request: dict[str, Any]) -> Route:
    """As ``python -m llama_cpp.server`` answers: a 500 quoting its validation error for
    OpenAI's json_schema type, its own json_object with a schema accepted."""
    if (request.get("response_format") or {}).get("type") == "json_schema":
        return error(500, "validation error: ('body', 'response_format', 'type')")
    return completion(json.dumps(PLAN))


def test_a_server_refusing_json_schema_gets_its_json_object_form(site: LocalSite) -> None:
    model = answering(site, llama_cpp_python_server)
    assert plan(model) is not None
    assert plan(model) is not None
    kinds = [(r.get("response_format") or {}).get("type") for r in requests(site)]
    # The refusal is remembered: the second plan goes straight to the form taken.
    assert kinds == ["json_schema", "json_object", "json_object"]
    assert requests(site)[1]["response_format"]["schema"]["title"] == "PlanUpdate"
    assert accepted_form(model, plan_update_schema(3, first=True).model_json_schema()) == (
        "json_object"
    )


def test_a_server_refusing_every_form_gets_the_prompt_described_json(site: LocalSite) -> None:
    def strict(request: dict[str, Any]) -> Route:
        if "response_format" in request:
            return error(400, "Unrecognized request argument supplied: response_format")
        return completion(json.dumps(PLAN))

    model = answering(site, strict)
    drafted = plan(model)
    assert drafted is not None and drafted.tasks[0].id == "t1"
    sent = requests(site)
    assert [("response_format" in r) for r in sent] == [True, True, False]
    assert "## Reply format" in sent[-1]["messages"][0]["content"]
    assert plan(model) is not None
    assert len(requests(site)) == 4  # remembered: no more probing


def test_an_overloaded_server_is_not_taken_for_a_refusal(site: LocalSite) -> None:
    # A 503 that does not name the field is the server's load: the call fails (to be
    # retried by the node's policy), and nothing is remembered.
    model = answering(site, lambda _: error(503, "server busy, try later"))
    schema = plan_update_schema(3, first=True)
    reply = invoke_structured(model, schema, PROMPT, role="planner", mode="json", retries=0)
    assert reply.model_failed and "503" in (reply.error or "")
    assert len(requests(site)) == 1
    assert accepted_form(model, schema.model_json_schema()) is None


def test_each_member_of_a_fallback_chain_is_asked_for_the_schema(site: LocalSite) -> None:
    from aimegraph.models.fallbacks import FallbackChatModel

    # The first server is down for good (a 503, transient): the chain falls through to
    # the second, which must be asked for the schema as a lone model would be.
    with LocalSite() as second:
        down = answering(site, lambda _: error(503, "server busy, try later"))
        up = answering(second, lambda _: completion(json.dumps(PLAN)))
        assert plan(FallbackChatModel(models=[down, up])) is not None
        [sent] = requests(second)
    assert sent["response_format"]["type"] == "json_schema"
    assert all(body.get("response_format") for body in requests(site))


def test_other_models_are_left_alone() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    model = FakeListChatModel(responses=[json.dumps(PLAN)])
    assert json_step_model(model, TOOLS) is model


def test_a_whole_run_asks_for_each_schema(site: LocalSite, workspace: Path) -> None:
    # AimeConfig.server_schema reaches the planner, the actor's steps and the verifier;
    # the reporter, answering in prose, is asked for no schema.
    def server(request: dict[str, Any]) -> Route:
        title = _asked_title(request)
        if title == "PlanUpdate":
            return completion(json.dumps(PLAN))
        if title == "tool_call":
            done = {"status": "completed", "summary": "The haiku: leaves fall."}
            return completion(json.dumps({"tool": "submit_result", "args": done}))
        if title == "Verdict":
            return completion(json.dumps(VERDICT))
        return completion("Leaves fall.")

    model = answering(site, server)
    config = AimeConfig(tool_calling="json", server_schema="guided_json", workspace=workspace)
    out = build_aime_graph(model, config=config).invoke({"goal": "Write a haiku"})
    assert out["status"] == "succeeded", out.get("reason")
    assert [_asked_title(r) for r in requests(site)] == [
        "PlanUpdate",
        "tool_call",
        None,  # the reporter's answer
        "Verdict",
    ]


def _asked_title(request: dict[str, Any]) -> str | None:
    schema = request.get("guided_json")
    return str(schema["title"]) if isinstance(schema, dict) else None


def test_the_run_flag_takes_every_setting(workspace: Path) -> None:
    from aimegraph.cli.app import build_parser
    from aimegraph.cli.support import config_from_args

    for setting in get_args(ServerSchema):
        argv = ["run", "g", "--server-schema", setting, "--workspace", str(workspace)]
        args = build_parser().parse_args(argv)
        assert config_from_args(args, "t1").server_schema == setting
