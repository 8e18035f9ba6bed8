"""Fallback chains (``FallbackChatModel``): a transient error moves on to the next model.

Structured output, tool binding, streams and awaited calls fall through on a transient
error (before the first chunk, for a stream); a permanent error does not; when every
member fails transiently the node's own retry takes over; usage names each model that
answered.
"""

from __future__ import annotations

import pytest
from tests.canned_models import (
    PROMPT,
    VALID,
    VALID_JSON,
    AsyncOnly,
    Canned,
    StatusError,
    ask,
    runtime_at,
)

from aimegraph.models.calls import Mode
from aimegraph.models.fallbacks import FallbackChatModel
from aimegraph.state import Verdict

# --------------------------------------------------------------------------- fallback chains


def chain(*members: Canned) -> FallbackChatModel:
    return FallbackChatModel(models=list(members))


@pytest.mark.parametrize("mode", ["native", "json"])
@pytest.mark.parametrize("error", [StatusError(429), StatusError(500), TimeoutError("slow")])
def test_a_transient_error_falls_through_to_the_next_model(mode: Mode, error: Exception) -> None:
    first = Canned(replies=[error, VALID if mode == "native" else VALID_JSON], model_name="a")
    second = Canned(replies=[VALID if mode == "native" else VALID_JSON], model_name="b")
    out = ask(chain(first, second), mode=mode, runtime=runtime_at(1))
    assert out.value == Verdict.model_validate(VALID), out.error
    assert len(first.prompts) == len(second.prompts) == 1
    assert set(out.usage.by_model) == {"b"} and out.usage.by_model["b"].llm_calls == 1


def test_usage_names_each_model_that_answered() -> None:
    first = Canned(replies=["no verdict here", StatusError(503)], model_name="a")
    second = Canned(replies=[VALID_JSON], model_name="b")
    out = ask(chain(first, second), mode="json")
    assert out.value == Verdict.model_validate(VALID)
    assert {name: share.llm_calls for name, share in out.usage.by_model.items()} == {"a": 1, "b": 1}
    assert out.usage.by_role["verifier"].llm_calls == 2


def test_a_permanent_error_does_not_fall_through() -> None:
    first = Canned(replies=[StatusError(400)], model_name="a")
    second = Canned(replies=[VALID_JSON], model_name="b")
    out = ask(chain(first, second), runtime=runtime_at(1))
    assert out.model_failed and "HTTP 400" in (out.error or "")
    assert not second.prompts


def test_when_every_model_fails_transiently_the_node_retries() -> None:
    first, second = Canned(replies=[StatusError(429)]), Canned(replies=[StatusError(502)])
    with pytest.raises(StatusError, match="502"):
        ask(chain(first, second), runtime=runtime_at(1))


def test_tools_are_bound_to_each_member() -> None:
    def calculator(expression: str) -> str:
        """Evaluate an expression."""
        return expression

    first = Canned(replies=[StatusError(529)], model_name="a")
    second = Canned(replies=[{"expression": "6*7"}], model_name="b")
    reply = chain(first, second).bind_tools([calculator]).invoke(PROMPT)
    assert reply.tool_calls[0]["name"] == "calculator"
    assert reply.tool_calls[0]["args"] == {"expression": "6*7"}
    assert reply.response_metadata["model_name"] == "b"


def test_a_stream_falls_through_before_its_first_chunk() -> None:
    first = Canned(replies=[StatusError(500)], model_name="a")
    second = Canned(replies=["streamed"], model_name="b")
    chunks = list(chain(first, second).stream(PROMPT))
    assert "".join(str(c.content) for c in chunks) == "streamed"


async def test_an_awaited_call_falls_through() -> None:
    first = AsyncOnly(replies=[StatusError(429)], model_name="a")
    second = AsyncOnly(replies=["async"], model_name="b")
    reply = await chain(first, second).ainvoke(PROMPT)
    assert reply.text == "async" and reply.response_metadata["model_name"] == "b"
    chunks = [c async for c in chain(AsyncOnly(replies=[StatusError(500)]), second).astream(PROMPT)]
    assert "".join(str(c.content) for c in chunks) == "async"
