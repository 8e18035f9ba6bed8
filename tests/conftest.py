"""Shared fixtures. Tests run offline and deterministic with the scripted model.

They run with LangGraph's strict checkpoint deserialisation (``LANGGRAPH_STRICT_MSGPACK``,
as ``make test`` sets it): a type a checkpoint holds that nobody registered comes back
as plain data, so a test finds it. LangGraph reads the variable once, when its
serializer is first imported, so it is set here before anything imports LangGraph.
"""

# ruff: noqa: E402

from __future__ import annotations

import os

os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")

import signal

# A suite started as a background job (`make test &`, a runner without job control)
# inherits SIGINT ignored from its shell, and so would every process a test starts: the
# tests of Ctrl-C would find their signal ignored (issue 47). Tests run as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import importlib
import json
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from langgraph.graph.state import CompiledStateGraph

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import redact_url
from aimegraph.models import ScriptedChatModel
from aimegraph.sandbox import BubblewrapSandbox, SandboxUnavailable
from tests.fake_openai import FakeOpenAI
from tests.webhook_receiver import Receiver


@pytest.fixture
def serde_events() -> Iterator[list[SerdeEvent]]:
    """Every allowlist event LangGraph's checkpoint serializer emits during the test
    (a type revived unregistered, or blocked). Its log warnings are de-duplicated
    per process; the events come on every occurrence."""
    events: list[SerdeEvent] = []
    unregister = register_serde_event_listener(events.append)
    yield events
    unregister()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The test server (``AIMEGRAPH_TEST_POSTGRES_URL`` overrides), after checking it
    answers. Without one the test skips, except under ``CI``, where it must run."""
    url = os.environ.get("AIMEGRAPH_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)

    def unavailable(reason: str) -> None:
        if os.environ.get("CI"):
            pytest.fail(f"Postgres tests must run in CI: {reason}")
        pytest.skip(reason)

    try:
        import psycopg
        import psycopg_pool  # noqa: F401
        from langgraph.checkpoint.postgres import PostgresSaver  # noqa: F401
    except ImportError as exc:
        unavailable(f"the [postgres] extra is not installed ({exc})")
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error as exc:
        unavailable(f"Postgres is not reachable at {redact_url(url)}: {exc}")
    return url


def require_module(name: str, install: str) -> ModuleType:
    """``name`` imported for a test (or a test file, at its top). Without it the test
    skips, except under ``CI``, where ``make test`` installs it (``install``) and it
    must run: a missing prerequisite fails there instead of passing unnoticed."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        reason = f"{name} is not installed ({install}): {exc}"
        if os.environ.get("CI"):
            pytest.fail(f"these tests must run in CI: {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)


@pytest.fixture(scope="session")
def bubblewrap() -> BubblewrapSandbox:
    """The default sandbox. Where it cannot run the test skips, except under ``CI``,
    where ``make test`` installs bubblewrap and it must run."""
    sandbox = BubblewrapSandbox()
    try:
        sandbox.check()
    except SandboxUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the sandbox tests must run in CI: {exc}")
        pytest.skip(str(exc))
    return sandbox


GraphFactory = Callable[..., tuple[CompiledStateGraph, ScriptedChatModel]]


@pytest.fixture
def scripted_graph(workspace: Path) -> GraphFactory:
    """Build an aime graph over an inline scenario: ``graph, model = scripted_graph(scenario, **config)``."""

    def build(
        scenario: dict[str, Any], *, checkpointer: Any = None, tools: Any = None, **config: Any
    ) -> tuple[CompiledStateGraph, ScriptedChatModel]:
        model = ScriptedChatModel.from_dict(scenario)
        cfg = AimeConfig(workspace=workspace, **config)
        return build_aime_graph(model, config=cfg, checkpointer=checkpointer, tools=tools), model

    return build


def steps_of(graph: CompiledStateGraph, inputs: Any, config: Any = None) -> list[tuple[int, str]]:
    """(super-step, node name) for every task the run executes, in order."""
    return [
        (event["step"], event["payload"]["name"])
        for event in graph.stream(inputs, config, stream_mode="debug")
        if event["type"] == "task"
    ]


SCENARIOS = Path(__file__).parent / "data" / "scenarios"
TWO_TASKS = f"scripted:{SCENARIOS / 'two_tasks.yaml'}"


class Cli:
    """Runs ``aimegraph --checkpoints sqlite:///<tmp>/cp.db ...`` in-process (each call
    opens the SQLite file itself, as a separate ``aimegraph`` invocation would)."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.tmp_path, self.capsys = tmp_path, capsys
        self.url = f"sqlite:///{tmp_path / 'cp.db'}"
        self.workspace = tmp_path / "ws"

    def __call__(self, *args: str) -> tuple[int, str]:
        """The exit code and everything printed (stdout, then stderr)."""
        from aimegraph.cli import main

        self.capsys.readouterr()
        code = main(["--checkpoints", self.url, *args])
        out = self.capsys.readouterr()
        return code, out.out + out.err

    def json(self, *args: str) -> tuple[int, Any]:
        """The exit code and the ``--json`` output."""
        from aimegraph.cli import main

        self.capsys.readouterr()
        code = main(["--checkpoints", self.url, *args, "--json"])
        return code, json.loads(self.capsys.readouterr().out)

    def run(
        self, thread: str, *options: str, model: str = TWO_TASKS, before: tuple[str, ...] = ()
    ) -> tuple[int, Any]:
        """``aimegraph [before] run "Multiply six by seven" [options] --json`` as ``thread``."""
        return self.json(
            *before, "run", "Multiply six by seven", "--model", model, "--thread", thread,
            "--workspace", str(self.workspace), *options,
        )  # fmt: skip


def cli_process(tmp_path: Path, **env: str) -> tuple[list[str], dict[str, str]]:
    """The command line of an ``aimegraph`` process of its own on ``tmp_path/cp.db`` (one a
    test can kill and resume), and its environment: this checkout and ``tmp_path`` (where
    a test writes the modules it names) importable, with ``env`` added."""
    repo = Path(__file__).resolve().parents[1]
    path = os.pathsep.join([str(repo / "src"), str(repo), str(tmp_path)])
    command = [
        sys.executable,
        "-m",
        "aimegraph.cli",
        "--checkpoints",
        f"sqlite:///{tmp_path / 'cp.db'}",
    ]
    return command, {**os.environ, "PYTHONPATH": path, **env}


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("COLUMNS", "200")  # no wrapped lines in rich's output
    return Cli(tmp_path, capsys)


@pytest.fixture
def webhook() -> Iterator[Receiver]:
    """A real HTTP receiver on 127.0.0.1 keeping the JSON bodies posted to it."""
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A loopback OpenAI-compatible server that ``openai:<model>`` specs resolve to."""
    server = FakeOpenAI()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's retry policy without its waits (same attempts, same classification)."""
    import aimegraph.graphs.actor
    import aimegraph.graphs.aime
    import aimegraph.graphs.planner
    import aimegraph.graphs.verifier
    from aimegraph.models import calls

    fast = calls.LLM_RETRY_POLICY._replace(initial_interval=0.001, max_interval=0.001, jitter=False)
    for module in (
        calls,
        aimegraph.graphs.planner,
        aimegraph.graphs.actor,
        aimegraph.graphs.verifier,
        aimegraph.graphs.aime,
    ):
        monkeypatch.setattr(module, "LLM_RETRY_POLICY", fast)
