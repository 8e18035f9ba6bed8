"""The dashboard started through its real ``serve()``, in its own process, as
``aimegraph dashboard`` starts it: it answers on the port, shows a thread run from the
CLI, refuses a foreign Host header and stops cleanly on Ctrl+C."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from tests.conftest import TWO_TASKS

from aimegraph.cli import main

SERVE = """
import sys
from aimegraph.checkpoints import open_checkpointer
from aimegraph.dashboard.server import serve

with open_checkpointer(sys.argv[1]) as saver:
    try:
        serve(saver, port=int(sys.argv[2]))
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl+C it shut down on
        print("stopped cleanly")
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, host: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.slow
def test_serve_answers_until_interrupted(store_url: str, tmp_path: Path) -> None:
    assert main(["--checkpoints", store_url, "run", "Multiply six by seven", "--model", TWO_TASKS,
                 "--thread", "served", "--json"]) == 0  # fmt: skip
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(SERVE), store_url, str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60  # a guard against a server that never starts
        while True:
            try:
                status, body = _get(f"{base}/api/threads")
                break
            except (urllib.error.URLError, ConnectionError):
                assert server.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        assert status == 200
        (thread,) = json.loads(body)["threads"]
        assert thread["thread_id"] == "served" and thread["status"] == "succeeded"
        page_status, page = _get(f"{base}/")
        assert page_status == 200 and "<html" in page.lower()
        # Bound to loopback: a request naming another host (DNS rebinding) is refused.
        refused, _ = _get(f"{base}/api/threads", host="evil.example")
        assert refused == 400
    finally:
        server.send_signal(signal.SIGINT)
        code = server.wait(timeout=30)
    assert code == 0 and "stopped cleanly" in log.read_text(), log.read_text()
