"""Local HTTP servers that speak a model provider's own API, answered by a scripted model.

A test points the provider's real client at one (``ANTHROPIC_BASE_URL``, ``OLLAMA_HOST``):
each request goes over the provider's wire format to 127.0.0.1, the server decodes it
into LangChain messages and tool schemas, asks a :class:`ScriptedChatModel` (the same
scenarios as every offline test) for the reply, and encodes that reply in the provider's
format, streamed (Anthropic's server-sent events, Ollama's NDJSON) or whole, as asked.
The scripted model only ever sees what crossed the wire, so a run that succeeds has sent
its prompts, tools, tool calls and tool results through the provider's format and back.
"""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any, Protocol

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)

from aimegraph.models import ScriptedChatModel

Json = dict[str, Any]


class Wire(Protocol):
    """One provider's API: the chat path, requests in, replies out."""

    path: str
    stream_type: str

    def decode(self, body: Json) -> tuple[list[BaseMessage], list[Json]]:
        """The conversation and the tools (as OpenAI tool schemas) of a request."""
        ...

    def reply(self, message: AIMessage, body: Json) -> Json:
        """The whole reply."""
        ...

    def stream(self, message: AIMessage, body: Json) -> Iterator[bytes]:
        """The reply as the provider streams it."""
        ...

    def error(self, status: int) -> Json:
        """The body of an error answer with HTTP ``status``."""
        ...


class ProviderStub:
    """``with ProviderStub(AnthropicWire(), model) as stub: ... stub.url ...``; the
    request bodies it got are in ``stub.requests``. ``stub.failures`` are HTTP statuses
    to answer the next requests with, one each (an error in the provider's format,
    before the scripted model is asked), and ``stub.fail_always`` one for every request."""

    def __init__(self, wire: Wire, model: ScriptedChatModel) -> None:
        self.wire, self.model = wire, model
        self.requests: list[Json] = []
        self.failures: list[int] = []
        self.fail_always: int | None = None
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if self.path.split("?")[0] != stub.wire.path:
                    self.send_error(404)
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(body)
                if (status := stub.next_failure()) is not None:
                    self._send(
                        "application/json", json.dumps(stub.wire.error(status)).encode(), status
                    )
                    return
                message = stub.answer(body)
                if body.get("stream"):
                    self._send(stub.wire.stream_type, b"".join(stub.wire.stream(message, body)))
                else:
                    self._send(
                        "application/json", json.dumps(stub.wire.reply(message, body)).encode()
                    )

            def _send(self, content_type: str, data: bytes, status: int = 200) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def next_failure(self) -> int | None:
        """The status to fail this request with, if any."""
        return self.failures.pop(0) if self.failures else self.fail_always

    def answer(self, body: Json) -> AIMessage:
        messages, tools = self.wire.decode(body)
        reply = self.model.invoke(messages, tools=tools) if tools else self.model.invoke(messages)
        assert isinstance(reply, AIMessage)
        return reply

    def __enter__(self) -> ProviderStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _halves(text: str) -> list[str]:
    """A text in two pieces, so that a streamed reply really comes in parts."""
    middle = len(text) // 2
    return [part for part in (text[:middle], text[middle:]) if part]


def _tokens(message: AIMessage) -> tuple[int, int]:
    usage = message.usage_metadata or {"input_tokens": 0, "output_tokens": 0}
    return usage["input_tokens"], usage["output_tokens"]


def _call_id(call: ToolCall) -> str:
    return call.get("id") or f"call_{uuid.uuid4().hex[:12]}"


# --------------------------------------------------------------------------- Anthropic


class AnthropicWire:
    """Anthropic's Messages API (``POST /v1/messages``): ``system``, content blocks
    (``text``, ``tool_use``, ``tool_result``), tools with an ``input_schema``, and
    streaming as ``message_start`` / ``content_block_*`` / ``message_delta`` events."""

    path = "/v1/messages"
    stream_type = "text/event-stream"

    def decode(self, body: Json) -> tuple[list[BaseMessage], list[Json]]:
        messages: list[BaseMessage] = []
        if system := body.get("system"):
            messages.append(SystemMessage(_block_text(system)))
        for turn in body["messages"]:
            content = turn["content"]
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            if turn["role"] == "assistant":
                calls = [
                    ToolCall(name=b["name"], args=b["input"], id=b["id"])
                    for b in blocks
                    if b["type"] == "tool_use"
                ]
                messages.append(AIMessage(content=_block_text(blocks), tool_calls=calls))
                continue
            messages += [
                ToolMessage(_block_text(b.get("content", "")), tool_call_id=b["tool_use_id"])
                for b in blocks
                if b["type"] == "tool_result"
            ]
            if text := _block_text(blocks):
                messages.append(HumanMessage(text))
        tools = [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "parameters": t["input_schema"],
                },
            }
            for t in body.get("tools", [])
        ]
        return messages, tools

    def reply(self, message: AIMessage, body: Json) -> Json:
        tokens_in, tokens_out = _tokens(message)
        return {
            **self._head(message, body, tokens_in, tokens_out),
            "content": self._blocks(message),
            "stop_reason": "tool_use" if message.tool_calls else "end_turn",
        }

    def stream(self, message: AIMessage, body: Json) -> Iterator[bytes]:
        tokens_in, tokens_out = _tokens(message)
        head = self._head(message, body, tokens_in, 1) | {"content": [], "stop_reason": None}
        yield _event("message_start", {"message": head})
        for index, block in enumerate(self._blocks(message)):
            if block["type"] == "text":
                start, deltas = (
                    {"type": "text", "text": ""},
                    [{"type": "text_delta", "text": part} for part in _halves(block["text"])],
                )
            else:
                start = block | {"input": {}}
                deltas = [
                    {"type": "input_json_delta", "partial_json": part}
                    for part in _halves(json.dumps(block["input"]))
                ]
            yield _event("content_block_start", {"index": index, "content_block": start})
            for delta in deltas:
                yield _event("content_block_delta", {"index": index, "delta": delta})
            yield _event("content_block_stop", {"index": index})
        stop = "tool_use" if message.tool_calls else "end_turn"
        yield _event(
            "message_delta",
            {
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": tokens_out},
            },
        )
        yield _event("message_stop", {})

    def error(self, status: int) -> Json:
        kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": f"stub error {status}"}}

    @staticmethod
    def _head(message: AIMessage, body: Json, tokens_in: int, tokens_out: int) -> Json:
        return {
            "id": f"msg_{uuid.uuid4().hex[:16]}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "stop_sequence": None,
            "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
        }

    @staticmethod
    def _blocks(message: AIMessage) -> list[Json]:
        text = [{"type": "text", "text": message.text}] if message.text else []
        calls = [
            {"type": "tool_use", "id": _call_id(c), "name": c["name"], "input": c["args"]}
            for c in message.tool_calls
        ]
        return text + calls or [{"type": "text", "text": ""}]


def _block_text(content: str | list[Json]) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] for b in content if b.get("type") == "text")


def _event(kind: str, data: Json) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


# --------------------------------------------------------------------------- Ollama


class OllamaWire:
    """Ollama's native chat API (``POST /api/chat``): ``system``/``user``/``assistant``/
    ``tool`` messages, tool calls with object arguments and no ids, and streaming as one
    JSON object a line, the last one ``done`` with the token counts."""

    path = "/api/chat"
    stream_type = "application/x-ndjson"

    def decode(self, body: Json) -> tuple[list[BaseMessage], list[Json]]:
        messages: list[BaseMessage] = []
        for turn in body["messages"]:
            role, text = turn["role"], turn.get("content") or ""
            if role == "system":
                messages.append(SystemMessage(text))
            elif role == "user":
                messages.append(HumanMessage(text))
            elif role == "tool":
                messages.append(ToolMessage(text, tool_call_id=turn.get("tool_call_id") or ""))
            else:
                calls = [
                    ToolCall(
                        name=c["function"]["name"],
                        args=c["function"]["arguments"],
                        id=c.get("id") or "",
                    )
                    for c in turn.get("tool_calls") or []
                ]
                messages.append(AIMessage(content=text, tool_calls=calls))
        return messages, list(body.get("tools") or [])

    def reply(self, message: AIMessage, body: Json) -> Json:
        return self._done(message, body) | {"message": self._message(message, message.text)}

    def stream(self, message: AIMessage, body: Json) -> Iterator[bytes]:
        parts = _halves(message.text)
        for index, part in enumerate(parts):
            chunk = self._message(message if index == len(parts) - 1 else None, part)
            yield _line(
                {"model": body["model"], "created_at": _NOW, "message": chunk, "done": False}
            )
        if not parts and message.tool_calls:
            chunk = self._message(message, "")
            yield _line(
                {"model": body["model"], "created_at": _NOW, "message": chunk, "done": False}
            )
        yield _line(self._done(message, body) | {"message": {"role": "assistant", "content": ""}})

    def error(self, status: int) -> Json:
        return {"error": f"stub error {status}"}

    @staticmethod
    def _message(message: AIMessage | None, text: str) -> Json:
        """An assistant message with ``text``, and ``message``'s tool calls if given."""
        out: Json = {"role": "assistant", "content": text}
        if message is not None and message.tool_calls:
            out["tool_calls"] = [
                {"function": {"name": c["name"], "arguments": c["args"]}}
                for c in message.tool_calls
            ]
        return out

    @staticmethod
    def _done(message: AIMessage, body: Json) -> Json:
        tokens_in, tokens_out = _tokens(message)
        return {
            "model": body["model"],
            "created_at": _NOW,
            "done": True,
            "done_reason": "stop",
            "total_duration": 1_000_000,
            "prompt_eval_count": tokens_in,
            "eval_count": tokens_out,
        }


_NOW = "2026-01-01T00:00:00Z"


def _line(data: Json) -> bytes:
    return (json.dumps(data) + "\n").encode()
