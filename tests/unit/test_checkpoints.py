"""aimegraph.checkpoints: URL factory, thread helpers and the restricted serializer."""

from __future__ import annotations

import json
import logging
import operator
import sqlite3
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, ClassVar

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_METHOD_SINGLE_ARG,
    EXT_PYDANTIC_V2,
    JsonPlusSerializer,
)
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from pydantic import BaseModel
from typing_extensions import TypedDict

from aimegraph.checkpoints import (
    ALLOWED_MSGPACK_TYPES,
    DEFAULT_CHECKPOINT_URL,
    CheckpointConnectionError,
    CheckpointURLError,
    MissingCheckpointBackendError,
    aopen_checkpointer,
    make_serializer,
    new_thread_id,
    open_checkpointer,
    redact_url,
    thread_config,
)
from aimegraph.checkpoints.runs import SETTINGS_KEY, RunSettings
from aimegraph.state.models import (
    ProgressUpdate,
    RoleUsage,
    Task,
    TaskResult,
    Usage,
    Verdict,
)

# --- fixtures and helpers -------------------------------------------------------


@pytest.fixture
def serde_events() -> Iterator[list[SerdeEvent]]:
    """Every allowlist event LangGraph's serializer emits during the test.

    The library's log warnings are de-duplicated per process, so events (emitted
    on every occurrence) are the reliable signal that a type was blocked or let
    through unregistered.
    """
    events: list[SerdeEvent] = []
    unregister = register_serde_event_listener(events.append)
    yield events
    unregister()


def sample_state() -> dict[str, Any]:
    """A state dict holding every project record and the usual LangChain messages."""
    result = TaskResult(status="completed", summary="42", artifacts={"answer.txt": "42"})
    task = Task(
        id="t2",
        title="Compute",
        description="Add the numbers",
        parent_id="t1",
        dependencies=("t0", "t1"),
        status="completed",
        completion_criteria="a number",
        tool_bundles=("compute",),
        persona="mathematician",
        result=result,
        attempts=2,
    )
    return {
        "goal": "add numbers",
        "tasks": {"t2": task, "t0": Task(id="t0", title="Start")},
        "updates": [
            ProgressUpdate(
                task_id="t2",
                status="completed",
                message="done",
                at=datetime(2025, 1, 2, tzinfo=UTC),
            )
        ],
        "verdict": Verdict(passed=False, reasoning="missing units", issues=["no units"]),
        "usage": Usage(
            llm_calls=3,
            input_tokens=10,
            output_tokens=5,
            tool_calls=1,
            cost_usd=0.25,
            by_role={"planner": RoleUsage(llm_calls=1, input_tokens=4, output_tokens=2)},
        ),
        "messages": [
            HumanMessage("add 40 and 2", id="m1"),
            AIMessage(
                "",
                id="m2",
                tool_calls=[{"name": "calculator", "args": {"expr": "40+2"}, "id": "call-1"}],
                usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
            ),
            ToolMessage("42", tool_call_id="call-1", name="calculator", id="m3"),
        ],
    }


def ext(code: int, *fields: Any) -> ormsgpack.Ext:
    """A msgpack ext record the way LangGraph writes them: (module, name, args...)."""
    return ormsgpack.Ext(code, ormsgpack.packb(tuple(fields)))


class Canary(BaseModel):
    """A class outside the allowlist that records every instantiation."""

    created: ClassVar[list[str]] = []

    note: str = ""

    def model_post_init(self, context: Any, /) -> None:
        Canary.created.append(self.note)


@pytest.fixture(autouse=True)
def _reset_canary() -> None:
    Canary.created.clear()


# --- serializer: allowed types round trip ---------------------------------------


def test_round_trip_of_state_records_and_messages_is_exact_and_silent(
    serde_events: list[SerdeEvent], caplog: pytest.LogCaptureFixture
) -> None:
    serde = make_serializer()
    state = sample_state()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with caplog.at_level(logging.WARNING, logger="langgraph"):
            kind, payload = serde.dumps_typed(state)
            restored = serde.loads_typed((kind, payload))

    assert kind == "msgpack"
    assert restored == state
    # Records come back as the real (frozen) classes, not dicts.
    assert isinstance(restored["tasks"]["t2"], Task)
    assert isinstance(restored["tasks"]["t2"].result, TaskResult)
    assert restored["tasks"]["t2"].dependencies == ("t0", "t1")
    assert restored["updates"][0].at == datetime(2025, 1, 2, tzinfo=UTC)
    assert isinstance(restored["usage"].by_role["planner"], RoleUsage)
    assert isinstance(restored["messages"][1], AIMessage)
    assert restored["messages"][1].tool_calls[0]["args"] == {"expr": "40+2"}
    assert isinstance(restored["messages"][2], ToolMessage)
    assert serde_events == []
    assert caplog.records == []


def test_allowlist_covers_every_type_langgraph_finds_in_the_state_schema() -> None:
    # Guard against drift: a record type added to AimeState / ActorInput must be
    # added to PROJECT_MSGPACK_TYPES too, or it would come back as a plain dict.
    serde_internal = pytest.importorskip("langgraph._internal._serde")
    from aimegraph.state import ActorInput, AimeState

    found = serde_internal.build_serde_allowlist(schemas=[AimeState, ActorInput])
    assert found
    assert found <= ALLOWED_MSGPACK_TYPES


def test_extra_types_are_revived() -> None:
    serde = make_serializer(extra_types=[Canary])
    restored = serde.loads_typed(serde.dumps_typed({"c": Canary(note="ok")}))
    assert restored == {"c": Canary(note="ok")}


# --- serializer: everything else is refused ---------------------------------------


def test_custom_pydantic_model_is_returned_as_plain_data(
    serde_events: list[SerdeEvent],
) -> None:
    payload = make_serializer().dumps_typed({"c": Canary(note="attack")})
    Canary.created.clear()

    # The payload is a real attack vector: LangGraph's default serializer builds it.
    JsonPlusSerializer(allowed_msgpack_modules=True).loads_typed(payload)
    assert Canary.created == ["attack"]
    Canary.created.clear()
    serde_events.clear()

    restored = make_serializer().loads_typed(payload)

    assert restored == {"c": {"note": "attack"}}
    assert Canary.created == []
    assert serde_events == [
        {"kind": "msgpack_blocked", "module": __name__, "name": "Canary"},
    ]


@pytest.mark.parametrize(
    ("code", "module", "name", "make_args"),
    [
        # os.system("touch <file>") as a one-argument constructor record
        (EXT_CONSTRUCTOR_SINGLE_ARG, "os", "system", lambda cmd: cmd),
        # subprocess.Popen(["sh", "-c", ...]) as a positional-arguments record
        (EXT_CONSTRUCTOR_POS_ARGS, "subprocess", "Popen", lambda cmd: [["sh", "-c", cmd]]),
        # subprocess.run(args=..., shell=True) as a keyword-arguments record
        (EXT_CONSTRUCTOR_KW_ARGS, "subprocess", "run", lambda cmd: {"args": cmd, "shell": True}),
        # the pydantic record, naming a callable that is not a model
        (EXT_PYDANTIC_V2, "subprocess", "run", lambda cmd: {"args": cmd, "shell": True}),
    ],
    ids=["single-arg", "pos-args", "kw-args", "pydantic"],
)
def test_ext_records_naming_dangerous_callables_are_not_called(
    tmp_path: Path,
    serde_events: list[SerdeEvent],
    code: int,
    module: str,
    name: str,
    make_args: Callable[[str], Any],
) -> None:
    marker = tmp_path / "pwned"
    args = make_args(f"touch {marker}")
    fields: tuple[Any, ...] = (module, name, args)
    if code == EXT_PYDANTIC_V2:
        fields = (*fields, "model_validate_json")
    payload = ormsgpack.packb({"value": ext(code, *fields)})

    restored = make_serializer().loads_typed(("msgpack", payload))

    assert not marker.exists()
    # A blocked record comes back as its raw arguments, plain data.
    assert restored == {"value": args}
    assert {"kind": "msgpack_blocked", "module": module, "name": name} in serde_events


def test_method_call_records_are_limited_to_langgraphs_own(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = ormsgpack.packb(
        {"value": ext(EXT_METHOD_SINGLE_ARG, "os", "system", f"touch {marker}", "__call__")}
    )
    assert make_serializer().loads_typed(("msgpack", payload)) == {"value": f"touch {marker}"}
    assert not marker.exists()


def test_legacy_json_constructor_outside_the_allowlist_is_not_called(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    envelope = {"lc": 2, "type": "constructor", "id": ["os", "system"], "args": [f"touch {marker}"]}
    restored = make_serializer().loads_typed(("json", json.dumps(envelope).encode()))
    assert not marker.exists()
    assert restored == envelope


def test_pickle_is_neither_written_nor_read() -> None:
    serde = make_serializer()
    with pytest.raises(NotImplementedError):
        serde.loads_typed(("pickle", b"cos\nsystem\n(S'true'\ntR."))
    with pytest.raises(ormsgpack.MsgpackEncodeError):
        serde.dumps_typed({"unencodable": object()})


# --- factory: URLs -----------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "mysql://user:hunter2@db/app",
        "sqlite://relative.db",  # two slashes: not an SQLAlchemy-style sqlite URL
        "sqlite:///",
        "redis://localhost",
        "",
        "checkpoints.db",
    ],
)
def test_bad_urls_raise_checkpoint_url_error(url: str) -> None:
    with pytest.raises(CheckpointURLError) as info, open_checkpointer(url):
        pass
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert "sqlite:///" in message and "postgresql://" in message and "memory" in message
    assert "hunter2" not in message


async def test_bad_url_raises_in_async_factory_too() -> None:
    with pytest.raises(CheckpointURLError):
        async with aopen_checkpointer("ftp://example.com"):
            pass


@pytest.mark.parametrize(
    "blocked", [("psycopg_pool",), ("langgraph.checkpoint.postgres",)], ids=["pool", "saver"]
)
def test_postgres_without_the_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, blocked: tuple[str, ...]
) -> None:
    for module in blocked:
        monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    expected = r"pip install 'aimegraph\[postgres\]'"
    url = "postgresql://postgres@127.0.0.1:5432/test"
    with pytest.raises(MissingCheckpointBackendError, match=expected), open_checkpointer(url):
        pass


async def test_async_postgres_without_the_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Block the submodule too: an earlier test may have imported it already.
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.postgres", None)
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.postgres.aio", None)
    with pytest.raises(MissingCheckpointBackendError, match=r"aimegraph\[postgres\]"):
        async with aopen_checkpointer("postgres://postgres@127.0.0.1:5432/test"):
            pass


def test_unreachable_postgres_fails_fast_without_leaking_the_password() -> None:
    pytest.importorskip("psycopg")
    pytest.importorskip("langgraph.checkpoint.postgres")
    # Port 1 on localhost refuses connections at once.
    url = "postgresql://postgres:hunter2@127.0.0.1:1/test"
    with pytest.raises(CheckpointConnectionError) as info, open_checkpointer(url):
        pass
    assert "hunter2" not in str(info.value)
    assert "postgres:***@127.0.0.1:1/test" in str(info.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://user:s3cret@db:5432/app", "postgresql://user:***@db:5432/app"),
        (
            "postgres://user:p%40ss@db/app?sslmode=require",
            "postgres://user:***@db/app?sslmode=require",
        ),
        (
            "postgresql://user@db/app?password=s3cret&x=1",
            "postgresql://user@db/app?password=***&x=1",
        ),
        ("postgresql://:s3cret@db/app", "postgresql://:***@db/app"),
        ("host=db user=u password=s3cret", "host=db user=u password=***"),
        ("postgresql://user@db/app", "postgresql://user@db/app"),
        ("sqlite:///.aimegraph/checkpoints.db", "sqlite:///.aimegraph/checkpoints.db"),
        ("memory", "memory"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_thread_helpers() -> None:
    ids = {new_thread_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 12 and int(i, 16) >= 0 for i in ids)
    assert new_thread_id("run-").startswith("run-")
    assert thread_config("t1") == {"configurable": {"thread_id": "t1"}}
    assert thread_config("t1", checkpoint_id="c9") == {
        "configurable": {"thread_id": "t1", "checkpoint_id": "c9"}
    }
    with pytest.raises(ValueError):
        thread_config("")


# --- factory: savers -------------------------------------------------------------


class MiniState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    tasks: dict[str, Task]
    updates: Annotated[list[ProgressUpdate], operator.add]
    verdict: Verdict | None
    usage: Usage


def _work(state: MiniState) -> MiniState:
    records = sample_state()
    return {
        "messages": records["messages"][1:],
        "tasks": records["tasks"],
        "updates": records["updates"],
        "verdict": records["verdict"],
        "usage": records["usage"],
    }


def build_graph(saver: Any) -> Any:
    """A one-node graph whose state holds every kind of record we checkpoint."""
    builder = StateGraph(MiniState)
    builder.add_node("work", _work)
    builder.add_edge(START, "work")
    return builder.compile(checkpointer=saver)


def expected_values() -> dict[str, Any]:
    records = sample_state()
    return {key: records[key] for key in ("messages", "tasks", "updates", "verdict", "usage")}


def assert_blocks_dangerous_payloads(saver: Any, tmp_path: Path) -> None:
    """The saver's own serializer is the restricted one."""
    marker = tmp_path / "pwned-by-saver"
    payload = ormsgpack.packb(ext(EXT_CONSTRUCTOR_SINGLE_ARG, "os", "system", f"touch {marker}"))
    assert saver.serde.loads_typed(("msgpack", payload)) == f"touch {marker}"
    assert not marker.exists()


def test_memory_saver(tmp_path: Path) -> None:
    with open_checkpointer("memory") as saver:
        assert isinstance(saver, InMemorySaver)
        assert_blocks_dangerous_payloads(saver, tmp_path)
        graph = build_graph(saver)
        config = thread_config(new_thread_id())
        graph.invoke({"messages": [HumanMessage("add 40 and 2", id="m1")]}, config)
        assert graph.get_state(config).values == expected_values()


def test_sqlite_file_is_created_with_tables_and_survives_reopening(tmp_path: Path) -> None:
    db = tmp_path / "nested" / "dir" / "checkpoints.db"
    url = f"sqlite:///{db}"  # absolute path: four slashes
    assert url.startswith("sqlite:////")
    config = thread_config(new_thread_id())

    with open_checkpointer(url) as saver:
        assert_blocks_dangerous_payloads(saver, tmp_path)
        build_graph(saver).invoke({"messages": [HumanMessage("add 40 and 2", id="m1")]}, config)
    assert db.is_file()
    with closing(sqlite3.connect(db)) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert {"checkpoints", "writes"} <= tables
    # The connection was closed on exit.
    with pytest.raises(sqlite3.ProgrammingError):
        saver.conn.execute("SELECT 1")  # type: ignore[attr-defined]

    with open_checkpointer(url) as reopened:
        snapshot = build_graph(reopened).get_state(config)
        assert snapshot.values == expected_values()
        assert snapshot.next == ()
        assert len(list(reopened.list(config))) >= 2


def test_sqlite_checkpoint_tampering_cannot_run_code(tmp_path: Path) -> None:
    """A row written straight into the database is loaded through the allowlist."""
    db = tmp_path / "checkpoints.db"
    marker = tmp_path / "pwned"
    config = thread_config(new_thread_id())
    with open_checkpointer(f"sqlite:///{db}") as saver:
        build_graph(saver).invoke({"messages": [HumanMessage("hi", id="m1")]}, config)
        checkpoint_id = saver.get_tuple(config).config["configurable"]["checkpoint_id"]  # type: ignore[union-attr]
    evil = ormsgpack.packb(ext(EXT_CONSTRUCTOR_SINGLE_ARG, "os", "system", f"touch {marker}"))
    with closing(sqlite3.connect(db)) as conn:
        conn.execute(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx,"
            " channel, type, value) VALUES (?, '', ?, 'evil', 0, 'notes', 'msgpack', ?)",
            (config["configurable"]["thread_id"], checkpoint_id, evil),
        )
        conn.commit()

    with open_checkpointer(f"sqlite:///{db}") as saver:
        loaded = saver.get_tuple(config)
    assert loaded is not None
    assert ("evil", "notes", f"touch {marker}") in loaded.pending_writes  # type: ignore[operator]
    assert not marker.exists()


def test_sqlite_relative_and_default_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_checkpointer("sqlite:///rel/run.db"):
        pass
    assert (tmp_path / "rel" / "run.db").is_file()

    assert DEFAULT_CHECKPOINT_URL == "sqlite:///.aimegraph/checkpoints.db"
    with open_checkpointer() as saver:
        build_graph(saver).invoke({"messages": []}, thread_config("default"))
    assert (tmp_path / ".aimegraph" / "checkpoints.db").is_file()


def test_sqlite_in_memory(tmp_path: Path) -> None:
    with open_checkpointer("sqlite:///:memory:") as saver:
        graph = build_graph(saver)
        config = thread_config("t")
        graph.invoke({"messages": [HumanMessage("add 40 and 2", id="m1")]}, config)
        assert graph.get_state(config).values == expected_values()
    assert not (tmp_path / ":memory:").exists()


async def test_async_memory_saver() -> None:
    async with aopen_checkpointer("memory") as saver:
        graph = build_graph(saver)
        config = thread_config(new_thread_id())
        await graph.ainvoke({"messages": [HumanMessage("add 40 and 2", id="m1")]}, config)
        assert (await graph.aget_state(config)).values == expected_values()


async def test_async_sqlite_round_trip(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    db = tmp_path / "a" / "checkpoints.db"
    url = f"sqlite:///{db}"
    config = thread_config(new_thread_id())
    async with aopen_checkpointer(url) as saver:
        assert isinstance(saver, AsyncSqliteSaver)
        assert_blocks_dangerous_payloads(saver, tmp_path)
        await build_graph(saver).ainvoke(
            {"messages": [HumanMessage("add 40 and 2", id="m1")]}, config
        )
    with pytest.raises(ValueError):  # aiosqlite: the connection was closed on exit
        await saver.conn.execute("SELECT 1")  # type: ignore[attr-defined]

    async with aopen_checkpointer(url) as reopened:
        assert (await build_graph(reopened).aget_state(config)).values == expected_values()


def test_settings_with_config_fields_this_version_does_not_know_stay_readable() -> None:
    """A thread written by a newer aimegraph (or another branch's) is still read."""
    stored = {
        SETTINGS_KEY: json.dumps(
            {"model": "scripted:demo", "config": {"max_parallel": 2, "from_the_future": 1}}
        )
    }
    with pytest.warns(UserWarning, match="from_the_future"):
        settings = RunSettings.from_metadata(stored)
    assert settings is not None and settings.config.max_parallel == 2
