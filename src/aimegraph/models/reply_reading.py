"""Reading a structured reply: the object it holds, or why it holds none (it does not
parse, does not match the schema, or is degenerate: looping, cut off at the token
limit), in words the re-ask sends back to the model."""

from __future__ import annotations

import json
from typing import Any, Literal, TypeVar, cast

from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage
from pydantic import BaseModel, ValidationError

from aimegraph.models.jsonparse import (
    JsonReplyError,
    check_degenerate,
    parse_json_reply,
    why_unusable_call,
)

__all__ = ["RE_ASK", "describe_error", "read_reply", "reply_in_error"]

RE_ASK = "re_ask"
"""Key in the ``response_metadata`` of every turn that asks a model again because its
reply could not be used (never sent to the model): the problem, in the words the turn
gives it."""

M = TypeVar("M", bound=BaseModel)


def read_reply(
    reply: Any, schema: type[M], mode: Literal["native", "json"]
) -> tuple[M | None, str, str | None, AIMessage]:
    """One attempt's reply as (value or None, the reply as text, error or None, raw reply)."""
    if mode == "native":
        out = cast(dict[str, Any], reply)
        raw: AIMessage = out["raw"]
        text = raw.text or json.dumps([c["args"] for c in raw.tool_calls])
        if out.get("parsed") is not None:
            return out["parsed"], text, None, raw
        parsing_error = out.get("parsing_error")
        # Arguments that do not parse were most often cut off in a loop: say so, as for
        # a JSON reply, so the re-ask asks for a short one.
        error = parsing_error and (why_unusable_call(raw) or describe_error(parsing_error))
        return None, text, error or None, raw
    raw = cast(AIMessage, reply)
    text = raw.text
    try:
        return schema.model_validate(parse_json_reply(text)), text, None, raw
    except (JsonReplyError, ValidationError) as exc:
        # A good object followed by rambling still counts; degeneracy (looping,
        # cut off) only explains why nothing usable came back.
        finish = raw.response_metadata.get("finish_reason")
        return None, text, check_degenerate(text, finish_reason=finish) or describe_error(exc), raw


def reply_in_error(exc: ValidationError | OutputParserException) -> str:
    """The reply text a parse error carries, when it does: a parser's output, or the
    text pydantic found to be no JSON at all."""
    if isinstance(exc, OutputParserException):
        return str(exc.llm_output or "")
    found = exc.errors()[0].get("input") if exc.error_count() else None
    return found if isinstance(found, str) else ""


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        problems = [
            f"{'.'.join(str(p) for p in err['loc']) or 'reply'}: {err['msg']}"
            for err in exc.errors()[:8]
        ]
        return "the reply does not match the schema: " + "; ".join(problems)
    return str(exc)
