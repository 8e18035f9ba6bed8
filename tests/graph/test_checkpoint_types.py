"""Every type a checkpoint holds is registered with the checkpointer's serializer.

A run on a saver given as LangGraph makes it (``InMemorySaver()``, ``SqliteSaver(conn)``)
pauses and resumes with every record revived and nothing logged: no "Deserializing
unregistered type" (LangGraph's default outside strict mode) and nothing blocked (strict
mode, which this suite runs in). A user's own type registered with ``allow_types`` is
revived; one nobody registered comes back as plain data, as LangGraph's strict mode does.
"""

from __future__ import annotations

import logging
import sqlite3
import warnings
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Literal

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.event_hooks import SerdeEvent
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.graph import START, StateGraph
from langgraph.types import Command
from pydantic import BaseModel
from tests.typed_answers import PARIS, CityFacts, city_scenario
from typing_extensions import TypedDict

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import (
    allow_types,
    hold_thread,
    make_serializer,
    open_checkpointer,
    thread_config,
)
from aimegraph.checkpoints import serde as serde_module
from aimegraph.checkpoints.lease import ThreadBusyError
from aimegraph.models import ScriptedChatModel
from aimegraph.state import ProgressUpdate, Span, Task, Usage, Verdict
from aimegraph.steering import run_thread

GOAL = "Population of the capital of France?"

SerdeKind = Literal["default", "strict", "encrypted"]


class Rot13Bytes:
    """A stand-in cipher (LangGraph's ``CipherProtocol``): the test needs no key."""

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "rot", bytes((b + 13) % 256 for b in plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "rot"
        return bytes((b - 13) % 256 for b in ciphertext)


def given_serializer(kind: SerdeKind) -> SerializerProtocol:
    """LangGraph's ``JsonPlusSerializer()`` as a user gets it: outside strict mode it
    revives any class with a warning (``default``; ``encrypted``: inside LangGraph's
    ``EncryptedSerializer``); in strict mode only its safe types."""
    if kind == "strict":
        return JsonPlusSerializer(allowed_msgpack_modules=None)
    default = JsonPlusSerializer(allowed_msgpack_modules=True)
    return default if kind == "default" else EncryptedSerializer(Rot13Bytes(), default)


@contextmanager
def plain_saver(kind: str, serde: SerializerProtocol, tmp_path: Path) -> Iterator[Any]:
    """A saver made as LangGraph's docs make it, not by aimegraph."""
    if kind == "memory":
        yield InMemorySaver(serde=serde)
        return
    with closing(sqlite3.connect(tmp_path / "cp.db", check_same_thread=False)) as conn:
        yield SqliteSaver(conn, serde=serde)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``allow_types`` registers lasts for this test only."""
    monkeypatch.setattr(serde_module, "_registered", frozenset())


def langgraph_serde_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("langgraph.checkpoint")]


@pytest.mark.parametrize("serde_kind", ["default", "strict", "encrypted"])
@pytest.mark.parametrize("saver_kind", ["memory", "sqlite"])
def test_a_run_on_a_plain_saver_pauses_and_resumes_with_every_record_revived_silently(
    workspace: Path,
    tmp_path: Path,
    serde_events: list[SerdeEvent],
    caplog: pytest.LogCaptureFixture,
    saver_kind: str,
    serde_kind: SerdeKind,
) -> None:
    thread = thread_config("plain")
    with plain_saver(saver_kind, given_serializer(serde_kind), tmp_path) as saver:
        graph = build_aime_graph(
            ScriptedChatModel.from_dict(city_scenario(PARIS)),
            config=AimeConfig(workspace=workspace, approve_plan=True),
            checkpointer=saver,
            response_format=CityFacts,
        )
        with warnings.catch_warnings(), caplog.at_level(logging.WARNING):
            warnings.simplefilter("error")
            run_thread(graph, {"goal": GOAL}, thread)
            assert graph.get_state(thread).interrupts  # paused for the plan's approval
            out = run_thread(graph, Command(resume={"action": "approve"}), thread)
            stored = graph.get_state(thread).values

    assert out["status"] == "succeeded", out.get("reason")
    # Read back from the checkpoint as the classes themselves, not as plain dicts.
    assert stored["structured_response"] == CityFacts(**PARIS)
    assert isinstance(stored["tasks"]["t1"], Task)
    assert isinstance(stored["verdict"], Verdict) and isinstance(stored["usage"], Usage)
    assert stored["updates"] and all(isinstance(u, ProgressUpdate) for u in stored["updates"])
    assert stored["spans"] and all(isinstance(s, Span) for s in stored["spans"])
    assert serde_events == []
    assert langgraph_serde_logs(caplog) == []


def test_a_checkpointer_lent_at_run_time_revives_every_record_in_strict_mode(
    workspace: Path, serde_events: list[SerdeEvent]
) -> None:
    # LangGraph Server compiles no checkpointer into the graph: it lends its own, with
    # its own serializer, through the run's config. In strict mode the graph's
    # allow-list is applied to it.
    saver = InMemorySaver(serde=given_serializer("strict"))
    graph = build_aime_graph(
        ScriptedChatModel.from_dict(city_scenario(PARIS)),
        config=AimeConfig(workspace=workspace, approve_plan=True),
        response_format=CityFacts,
    )
    thread = {"configurable": {"thread_id": "lent", CONFIG_KEY_CHECKPOINTER: saver}}
    graph.invoke({"goal": GOAL}, thread)
    out = graph.invoke(Command(resume={"action": "approve"}), thread)

    assert out["status"] == "succeeded", out.get("reason")
    assert graph.get_state(thread).values["structured_response"] == CityFacts(**PARIS)
    assert serde_events == []


def test_the_saver_given_to_the_builder_and_the_graphs_copy_share_their_leases(
    workspace: Path,
) -> None:
    saver = InMemorySaver(serde=given_serializer("default"))
    graph = build_aime_graph(
        ScriptedChatModel.from_dict(city_scenario(PARIS)),
        config=AimeConfig(workspace=workspace),
        checkpointer=saver,
    )
    assert graph.checkpointer is not saver  # a copy, with aimegraph's serializer
    with hold_thread(saver, "held"), pytest.raises(ThreadBusyError):
        run_thread(graph, {"goal": GOAL}, thread_config("held"))


class OwnSerializer:
    """A serializer of the user's own (not LangGraph's): it decides what it revives."""

    def __init__(self) -> None:
        self.inner = JsonPlusSerializer(allowed_msgpack_modules=True)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self.inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.inner.loads_typed(data)


@pytest.mark.parametrize(
    "serde",
    [OwnSerializer(), JsonPlusSerializer(allowed_msgpack_modules=True, pickle_fallback=True)],
    ids=["own class", "langgraph's, every type allowed, with pickle"],
)
def test_a_serializer_configured_otherwise_is_kept_as_it_is(workspace: Path, serde: Any) -> None:
    saver = InMemorySaver(serde=serde)
    graph = build_aime_graph(
        "scripted:demo", config=AimeConfig(workspace=workspace), checkpointer=saver
    )
    assert graph.checkpointer is saver and saver.serde is serde


class Reading(BaseModel):
    """A user's own record, registered with ``allow_types``."""

    sensor: str
    value: float


class Secret(BaseModel):
    """A class nobody registered."""

    note: str


class SensorState(TypedDict, total=False):
    reading: Reading
    secret: Secret


class Readings(TypedDict):
    """A user's state schema holding the record (and not ``Secret``)."""

    reading: Reading


def sensor_app() -> StateGraph[SensorState]:
    app = StateGraph(SensorState)
    app.add_node("measure", lambda _: {"reading": Reading(sensor="t1", value=21.5),
                                       "secret": Secret(note="x")})  # fmt: skip
    app.add_edge(START, "measure")
    return app


@pytest.mark.parametrize("registration", [Reading, Readings], ids=["class", "state schema"])
def test_a_type_registered_with_allow_types_is_revived_and_an_unregistered_one_is_refused(
    tmp_path: Path, registered: None, serde_events: list[SerdeEvent], registration: type
) -> None:
    allow_types(registration)
    url = f"sqlite:///{tmp_path / 'cp.db'}"
    thread = thread_config("sensor")
    with open_checkpointer(url) as saver:
        sensor_app().compile(checkpointer=saver).invoke({}, thread)
    # Read as a dashboard reads: the saver alone, no graph compiled from the schema.
    with open_checkpointer(url) as reopened:
        item = reopened.get_tuple(thread)
    assert item is not None
    values = item.checkpoint["channel_values"]

    assert values["reading"] == Reading(sensor="t1", value=21.5)
    assert values["secret"] == {"note": "x"}  # its raw data: the class is never called
    assert serde_events == [{"kind": "msgpack_blocked", "module": __name__, "name": "Secret"}]


def test_make_serializer_takes_the_types_registered_before_it_is_made(registered: None) -> None:
    record = {"reading": Reading(sensor="t1", value=1.0), "secret": Secret(note="x")}
    before = make_serializer()
    allow_types(SensorState)  # the classes of its keys
    after = make_serializer()

    assert after.loads_typed(after.dumps_typed(record)) == record
    assert before.loads_typed(before.dumps_typed(record)) == {
        "reading": {"sensor": "t1", "value": 1.0},
        "secret": {"note": "x"},
    }
