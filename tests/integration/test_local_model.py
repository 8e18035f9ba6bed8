"""The bundled Gemma 3 270M, run in-process through llama.cpp (extra ``[local]``)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
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


def test_parallel_calls_are_serialised(model: BaseChatModel) -> None:
    # LangGraph runs Send fan-out branches in threads; one llama.cpp context is shared.
    prompts = ["Name a fruit.", "Name a river.", "Name a planet."]
    with ThreadPoolExecutor(max_workers=3) as pool:
        replies = list(pool.map(lambda p: model.invoke(p, max_tokens=12), prompts))
    for reply in replies:
        assert reply.usage_metadata is not None
        assert reply.usage_metadata["output_tokens"] > 0
