"""Real MCP servers for the MCP benchmark and tests, written with the ``mcp`` package's
FastMCP (the ``[mcp]`` extra).

``notes`` runs as a stdio server (``python -m bench.mcp_servers``, a process of its own):
a key-value store that lives as long as its session (its process), its process id and
environment, a call that waits, one that kills the server mid-call, and a long output.
``weather`` is served over streamable HTTP on loopback by :func:`serve_weather`
(``python -m bench.mcp_servers http PORT``, a process of its own too).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import anyio
from mcp.server.fastmcp import FastMCP

REPO = Path(__file__).resolve().parents[1]

notes = FastMCP(
    "notes",
    instructions="A notebook: write notes under a key and read them back.",
    log_level="WARNING",
)
_notes: dict[str, str] = {}


@notes.tool()
def write_note(key: str, text: str) -> str:
    """Write a note under a key."""
    _notes[key] = text
    return f"noted {key}"


@notes.tool()
def read_note(key: str) -> str:
    """Read the note under a key."""
    return _notes.get(key, f"no note under {key}")


@notes.tool()
def server_pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@notes.tool()
async def wait(seconds: float) -> str:
    """Answers after ``seconds``; first touches ``$NOTES_WAITING`` (when set), so a
    test knows the call is in flight."""
    if marker := os.environ.get("NOTES_WAITING"):
        Path(marker).write_text(str(os.getpid()))
    await anyio.sleep(seconds)
    return "waited"


@notes.tool()
def getenv(variable: str) -> str:
    """The server's environment variable ``variable``."""
    return os.environ.get(variable, f"{variable} is not set")


@notes.tool()
def refuse(reason: str) -> str:
    """Fails with ``reason`` (the tool's own error, an MCP ``isError`` result)."""
    raise ValueError(reason)


@notes.tool()
def crash() -> str:
    """Ends the server process at once (a server dying mid-run)."""
    os._exit(3)


@notes.tool()
def long_text(chars: int) -> str:
    """A text of ``chars`` characters: numbered lines."""
    lines = []
    size = 0
    n = 0
    while size < chars:
        line = f"line {n:06d}\n"
        lines.append(line)
        size += len(line)
        n += 1
    return "".join(lines)[:chars]


def notes_command() -> dict[str, object]:
    """The ``mcpServers`` entry starting the notes server."""
    return {
        "command": sys.executable,
        "args": ["-m", "bench.mcp_servers"],
        "cwd": str(REPO),
    }


weather = FastMCP("weather", log_level="WARNING")


@weather.tool()
def forecast(city: str) -> str:
    """Tomorrow's weather for a city."""
    return f"{city}: sunny, 21 C"


@contextmanager
def serve_weather(transport: Literal["http", "sse"] = "http") -> Iterator[str]:
    """Serve ``weather`` over streamable HTTP (or the older SSE transport) on a free
    loopback port, in a process of its own; yields its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.mcp_servers", transport, str(port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the weather MCP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/{'mcp' if transport == 'http' else 'sse'}"
    finally:
        process.terminate()
        process.wait(10)


if __name__ == "__main__":
    if sys.argv[1:2] in (["http"], ["sse"]):
        weather.settings.port = int(sys.argv[2])
        weather.run(transport="streamable-http" if sys.argv[1] == "http" else "sse")
    else:
        if starts := os.environ.get("NOTES_STARTS"):  # one line per process started
            with open(starts, "a") as log:
                log.write(f"{os.getpid()}\n")
        notes.run()
