"""A loopback OpenAI-compatible endpoint for tests of the real ``ChatOpenAI`` client.

The ``fake_openai`` fixture (``tests/conftest.py``) starts one and points
``OPENAI_BASE_URL`` at it; a test sets ``script`` (the ``(status, content)`` of each
reply, the last one repeating) and reads ``requests`` and ``bodies``.
"""

from __future__ import annotations

import contextlib
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeOpenAI(ThreadingHTTPServer):
    """A loopback OpenAI-compatible endpoint replying from a script of (status, content)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), FakeOpenAIHandler)
        self.script: list[tuple[int, str]] = []
        self.delay_s = 0.0
        self.requests = 0
        self.bodies: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class FakeOpenAIHandler(BaseHTTPRequestHandler):
    server: FakeOpenAI

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        server = self.server
        server.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        index = min(server.requests, len(server.script) - 1)
        server.requests += 1
        status, content = server.script[index]
        time.sleep(server.delay_s)
        if status == 200:
            body = {
                "id": f"chatcmpl-{server.requests}",
                "object": "chat.completion",
                "created": 0,
                "model": "fake",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57},
            }
        else:
            body = {"error": {"message": content, "type": "server_error", "code": None}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("retry-after-ms", "1")  # the client's own backoff, made short
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # client timed out
            self.wfile.write(data)
