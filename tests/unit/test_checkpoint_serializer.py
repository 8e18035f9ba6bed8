"""aimegraph.checkpoints' restricted serializer: what it revives and what it refuses.

Project records and LangChain messages round trip exactly and silently (and the
allowlist covers every type in the state schemas); everything else (unregistered
classes, ext records naming dangerous callables, legacy JSON constructors, pickle) comes
back as plain data or is refused, without being called.
"""

from __future__ import annotations

import json
import logging
import operator
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.serde.event_hooks import SerdeEvent
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_METHOD_SINGLE_ARG,
    EXT_PYDANTIC_V2,
    JsonPlusSerializer,
)
from pydantic import BaseModel
from tests.checkpoint_records import ext, sample_state
from tests.teams.helpers import UNITS
from typing_extensions import TypedDict

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import ALLOWED_MSGPACK_TYPES, PROJECT_MSGPACK_TYPES, make_serializer
from aimegraph.checkpoints.serde import classes_in
from aimegraph.state.models import (
    ProgressUpdate,
    RoleUsage,
    Span,
    Task,
    TaskResult,
    Usage,
    Verdict,
)

# --- fixtures and helpers -------------------------------------------------------


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


@pytest.mark.parametrize("scheduler", ["eager", "batch"])
def test_allowlist_covers_every_type_langgraph_finds_in_the_graph_and_its_subgraphs(
    workspace: Path, scheduler: str
) -> None:
    # Guard against drift: a class a state, input, output or node schema names (the
    # aime graph's, the planner's, the actor's, each team mode's, the verifier's) is
    # allowed, or it would come back from a checkpoint as a plain dict. The same
    # function LangGraph's compile() uses in strict mode finds them. (Not the context
    # schema's: the context is never checkpointed.)
    serde_internal = pytest.importorskip("langgraph._internal._serde")
    graph = build_aime_graph(
        "scripted:demo", agents=UNITS, config=AimeConfig(workspace=workspace, scheduler=scheduler)
    )
    graphs = [graph, *(subgraph for _, subgraph in graph.get_subgraphs(recurse=True))]
    assert {g.builder.state_schema.__name__ for g in graphs} >= {
        "AimeState", "PlannerState", "ActorState", "TeamState", "VerifierState"
    }  # fmt: skip
    for compiled in graphs:
        builder = compiled.builder
        schemas = [builder.state_schema, builder.input_schema, builder.output_schema]
        schemas += [n.input_schema for n in builder.nodes.values()]
        found = serde_internal.build_serde_allowlist(schemas=schemas, channels=builder.channels)
        assert found - ALLOWED_MSGPACK_TYPES == set(), compiled.name


class Colour(Enum):
    RED = "red"


@dataclass
class Point:
    colour: Colour


class Shape(BaseModel):
    corners: list[Point]


class Drawing(TypedDict, total=False):
    shapes: Annotated[list[Shape], operator.add]
    kind: Literal["sketch"]
    frame: Shape | None


def test_classes_in_finds_models_dataclasses_and_enums_through_the_type_hints() -> None:
    assert set(classes_in(Drawing)) == {Shape, Point, Colour}
    assert {Task, Usage, Verdict, Span, ProgressUpdate} <= set(PROJECT_MSGPACK_TYPES)


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
