"""Token streams (``stream_mode="messages"``): the answer comes once, every actor's
tokens carry its task id (and member and turn inside a team), and
``aimegraph.streaming`` picks the answer or chosen actors out of a stream."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGenerationChunk
from langgraph.graph import END, START, MessagesState, StateGraph
from tests.scripted import plan, spec, submit
from tests.teams.helpers import UNITS
from tests.typed_answers import PARIS, CityFacts, city_scenario

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models import ScriptedChatModel
from aimegraph.streaming import (
    MEMBER,
    ROLE,
    TASK_ID,
    TURN,
    aanswer_text,
    answer_text,
    select_messages,
)

ANSWER = "Paris has about 2.1 million inhabitants."


class StreamingScripted(ScriptedChatModel):
    """The scripted model replying as a provider streams: text a word at a time,
    then each tool call as a chunk of JSON arguments."""

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._generate(messages, stop, **kw).generations[0].message
        for piece in re.findall(r"\S+\s*", reply.text):
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
        for index, call in enumerate(getattr(reply, "tool_calls", [])):
            chunk = {
                "name": call["name"],
                "args": json.dumps(call["args"]),
                "id": call["id"] or uuid.uuid4().hex,
                "index": index,
            }
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[chunk]))
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="", usage_metadata=reply.usage_metadata, chunk_position="last"
            )
        )


def two_talking_actors() -> StreamingScripted:
    return StreamingScripted.from_dict(
        {
            "planner": [plan(spec("t1"), spec("t2"))],
            "actors": {"t1": [{"text": "one found it"}], "t2": [{"text": "two found more"}]},
            "reporter": [{"text": ANSWER}],
        }
    )


def build(model: ScriptedChatModel, workspace: Path, **kw: Any) -> Any:
    return build_aime_graph(model, config=AimeConfig(workspace=workspace), **kw)


def test_the_answer_comes_once_as_tokens_of_the_message_the_state_keeps(
    workspace: Path,
) -> None:
    graph = build(two_talking_actors(), workspace)
    chunks = list(graph.stream({"goal": "Population of Paris?"}, stream_mode="messages"))

    answer_pieces = [m for m, meta in chunks if meta.get(ROLE) == "reporter"]
    assert len(answer_pieces) > 3  # word by word
    assert "".join(m.text for m in answer_pieces) == ANSWER
    # No second delivery: nothing else carries the answer's text.
    assert [m for m, _ in chunks if m.text == ANSWER] == []
    assert len({m.id for m in answer_pieces}) == 1
    assert "".join(answer_text(chunks)) == ANSWER


def test_the_answer_message_in_the_state_is_the_streamed_reply(workspace: Path) -> None:
    graph = build(two_talking_actors(), workspace)
    streamed: list[str] = []
    values: dict[str, Any] = {}
    for mode, payload in graph.stream({"goal": "Population?"}, stream_mode=["messages", "values"]):
        if mode == "messages" and payload[1].get(ROLE) == "reporter":
            streamed.append(payload[0].id)
        elif mode == "values":
            values = payload
    assert set(streamed) == {values["messages"][-1].id}


def test_every_actor_token_carries_its_task_id(workspace: Path) -> None:
    graph = build(two_talking_actors(), workspace)
    chunks = list(graph.stream({"goal": "Find"}, stream_mode="messages", subgraphs=True))

    actor = [(m, meta) for _, (m, meta) in chunks if meta.get(ROLE) == "actor"]
    assert actor and all(meta[TASK_ID] in {"t1", "t2"} for _, meta in actor)
    for task, said in (("t1", "one found it"), ("t2", "two found more")):
        text = "".join(m.text for m, _ in select_messages(chunks, tasks=[task]))
        assert text == said
    # The planner's and the reporter's tokens carry their roles and no task.
    roles = {meta[ROLE] for _, (m, meta) in chunks if ROLE in meta}
    assert roles == {"planner", "actor", "reporter", "verifier"}
    assert all(TASK_ID not in meta for _, (_, meta) in chunks if meta.get(ROLE) == "planner")


def test_team_members_tokens_carry_member_and_turn(workspace: Path) -> None:
    team = {"mode": "sequential", "members": ["writer", "reviewer"], "max_rounds": 1}
    model = StreamingScripted.from_dict(
        {
            "planner": [plan(spec("t1", team=team))],
            "actors": {
                "t1/writer": [submit("Draft: 42")],
                "t1/reviewer": [{"text": "reviewed and fine"}],
            },
        }
    )
    graph = build(model, workspace, agents=UNITS)
    chunks = list(graph.stream({"goal": "Write"}, stream_mode="messages", subgraphs=True))
    out = [meta for _, (_, meta) in chunks if meta.get(ROLE) == "actor"]
    assert {(m[TASK_ID], m[MEMBER], m[TURN]) for m in out} == {
        ("t1", "writer", 1),
        ("t1", "reviewer", 1),
    }
    review = "".join(m.text for m, _ in select_messages(chunks, members=["reviewer"]))
    assert review == "reviewed and fine"


def test_inside_a_messages_state_app_the_answer_streams_once(workspace: Path) -> None:
    app = StateGraph(MessagesState)
    app.add_node("aime", build(two_talking_actors(), workspace))
    app.add_edge(START, "aime")
    app.add_edge("aime", END)
    chat = app.compile()
    chunks = list(
        chat.stream(
            {"messages": [HumanMessage("Population?")]}, stream_mode="messages", subgraphs=True
        )
    )
    assert "".join(answer_text(chunks)) == ANSWER
    assert [m for _, (m, _) in chunks if m.text == ANSWER] == []


def test_astream_and_a_typed_answer_stream_through_the_helper(workspace: Path) -> None:
    model = StreamingScripted.from_dict(city_scenario(PARIS))
    graph = build(model, workspace, response_format=CityFacts)

    async def collect() -> str:
        stream = graph.astream({"goal": "Population?"}, stream_mode=["updates", "messages"])
        return "".join([piece async for piece in aanswer_text(stream)])

    assert json.loads(asyncio.run(collect())) == PARIS
