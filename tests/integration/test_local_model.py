"""The bundled Gemma 3 270M, run in-process through llama.cpp (extra ``[local]``)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from langchain_core.callbacks import get_usage_metadata_callback
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from pydantic import BaseModel
from tests.markers import LOCAL_LLM

from aimegraph.models.resolve import (
    resolve_model,
    supports_structured_output,
    supports_tool_calling,
)

pytestmark = LOCAL_LLM


@pytest.fixture(scope="module")
def model() -> BaseChatModel:
    return resolve_model("local")


def test_short_reply_with_usage(model: BaseChatModel) -> None:
    reply = model.invoke(
        [SystemMessage("Answer briefly."), HumanMessage("What is the capital of Italy?")],
        max_tokens=32,
    )
    assert isinstance(reply, AIMessage)
    assert isinstance(reply.content, str) and reply.content.strip()
    usage = reply.usage_metadata
    assert usage is not None
    assert usage["input_tokens"] > 5
    assert 0 < usage["output_tokens"] <= 32
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert reply.response_metadata["finish_reason"] in ("stop", "length")


def test_streaming_reports_the_same_usage(model: BaseChatModel) -> None:
    prompt = [HumanMessage("Name a colour.")]
    invoked = model.invoke(prompt, max_tokens=16)
    chunks = list(model.stream(prompt, max_tokens=16))
    assert all(isinstance(chunk, AIMessageChunk) for chunk in chunks)
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged = merged + chunk
    assert merged.usage_metadata is not None
    assert invoked.usage_metadata is not None
    assert merged.usage_metadata["input_tokens"] == invoked.usage_metadata["input_tokens"]
    # Sampling may differ between the two calls; the counts must be plausible.
    assert 0 < merged.usage_metadata["output_tokens"] <= 16


class Answer(BaseModel):
    answer: str


def test_structured_output_is_grammar_constrained(model: BaseChatModel) -> None:
    assert supports_structured_output(model)
    assert not supports_tool_calling(model)  # free tool choice is ignored by llama.cpp
    result = model.with_structured_output(Answer).invoke("What is 2 + 2?", max_tokens=48)
    assert isinstance(result, Answer)


def test_json_schema_method_uses_a_llama_cpp_grammar(model: BaseChatModel) -> None:
    structured = model.with_structured_output(Answer, method="json_schema", include_raw=True)
    result = structured.invoke("What is 2 + 2?", max_tokens=48)
    assert not result["raw"].tool_calls  # JSON text under the grammar, not a forced call
    assert isinstance(result["parsed"], Answer)


def test_parallel_calls_are_serialised(model: BaseChatModel) -> None:
    # LangGraph runs Send fan-out branches in threads; one llama.cpp context is shared.
    prompts = ["Name a fruit.", "Name a river.", "Name a planet."]
    with ThreadPoolExecutor(max_workers=3) as pool:
        replies = list(pool.map(lambda p: model.invoke(p, max_tokens=12), prompts))
    for reply in replies:
        assert reply.usage_metadata is not None
        assert reply.usage_metadata["output_tokens"] > 0


def test_concurrent_and_sequential_astreams_complete(model: BaseChatModel) -> None:
    # LangChain resumes a sync stream on executor threads; a lock held across yield
    # failed ("cannot release un-acquired lock") and then hung every later stream.
    async def one(question: str) -> AIMessageChunk:
        chunks = [chunk async for chunk in model.astream(question, max_tokens=12)]
        return merged(chunks)

    async def main() -> list[AIMessageChunk]:
        sequential = [await one(f"Name a city, {i}.") for i in range(3)]
        together = asyncio.gather(*(one(f"Name fruit number {i}.") for i in range(8)))
        return sequential + await asyncio.wait_for(together, 240)

    replies = asyncio.run(main())
    assert len(replies) == 11
    for reply in replies:
        assert reply.usage_metadata is not None and reply.usage_metadata["output_tokens"] > 0
        assert reply.chunk_position == "last"


def test_usage_is_recorded_under_the_model_name(model: BaseChatModel) -> None:
    with get_usage_metadata_callback() as usage:
        invoked = model.invoke("Name a colour.", max_tokens=8)
        streamed = merged(list(model.stream("Name a colour.", max_tokens=8)))
    name = "gemma-3-270m-q4_k_m.gguf"
    assert (
        invoked.response_metadata["model_name"] == streamed.response_metadata["model_name"] == name
    )
    assert set(usage.usage_metadata) == {name}
    assert usage.usage_metadata[name]["input_tokens"] == 2 * invoked.usage_metadata["input_tokens"]  # type: ignore[index]


def test_a_streamed_tool_call_names_its_tool_once(model: BaseChatModel) -> None:
    chunks = list(
        model.bind_tools([Answer], tool_choice="any").stream("What is 2 + 2?", max_tokens=48)
    )
    assert sum(bool(c.tool_call_chunks and c.tool_call_chunks[0]["name"]) for c in chunks) == 1
    call = merged(chunks).tool_calls
    assert [c["name"] for c in call] == ["Answer"]
    assert isinstance(call[0]["args"].get("answer"), str)


def test_a_streamed_reply_drops_the_transcripts_leading_space(model: BaseChatModel) -> None:
    streamed = merged(list(model.stream("What is the capital of Italy?", max_tokens=12)))
    assert isinstance(streamed.content, str) and streamed.content == streamed.content.lstrip()
    assert streamed.content


def merged(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return total


class Essay(BaseModel):
    essay: str


@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])
def test_a_tool_call_cut_off_at_the_token_limit_says_length(
    model: BaseChatModel, streamed: bool
) -> None:
    # llama.cpp reports a grammar-constrained call cut off at max_tokens as "tool_calls":
    # the reply says "length", so the engine sees the cut (and asks for a short reply).
    forced = model.bind_tools([Essay], tool_choice="any")
    prompt = "Write a long essay about the history of Rome."
    if streamed:
        reply: AIMessage = merged(list(forced.stream(prompt, max_tokens=6)))
    else:
        reply = forced.invoke(prompt, max_tokens=6)
    assert reply.usage_metadata is not None and reply.usage_metadata["output_tokens"] >= 6
    assert reply.response_metadata["finish_reason"] == "length"
