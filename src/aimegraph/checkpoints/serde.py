"""The checkpoint serializer: LangGraph's msgpack format with a closed type allowlist.

A checkpoint stores typed objects as msgpack "ext" records that name a class by
``(module, name)`` plus its constructor arguments. LangGraph's default
``JsonPlusSerializer()`` imports and calls *any* class named there (it only logs
"Deserializing unregistered type ..."), so whoever can write to the checkpoint
database could make a load run arbitrary code. ``make_serializer`` closes that:

* ``allowed_msgpack_modules`` is an explicit allowlist: LangGraph's built-in safe
  types (datetimes, UUID, Decimal, sets, paths, LangChain messages and
  ``Document``, ``Send``/``Command``/``Interrupt``, ...), the project's records
  (``PROJECT_MSGPACK_TYPES``, found in the state schemas) and the types registered
  with :func:`allow_types`. A record naming anything else is *not* imported or
  called: the library logs "Blocked deserialization of ...", emits a
  ``msgpack_blocked`` serde event and returns the record's raw arguments as plain
  data (dict / list / str). Method-call records (``EXT_METHOD_SINGLE_ARG``) are
  limited by LangGraph to its own fixed set (``datetime.datetime.fromisoformat``),
  independent of this list.
* ``pickle_fallback=False``: objects msgpack cannot encode fail on write instead of
  being pickled, and a ``"pickle"`` payload read back raises ``NotImplementedError``.
* ``allowed_json_modules=None``: the legacy ``"json"`` format (written by
  pre-msgpack LangGraph versions, never by aimegraph) only revives LangGraph's safe
  types; any other ``lc: 2`` constructor is refused and stays a plain dict.

The setting is explicit rather than taken from ``LANGGRAPH_STRICT_MSGPACK``, so it
holds whatever the environment says. If that variable *is* set, LangGraph's
``compile()`` additionally merges the types it finds in a graph's state schema
into this allowlist (``BaseCheckpointSaver.with_allowlist``), which still works
because the allowlist here is a finite set.

A checkpointer given to ``build_aime_graph`` gets the same types through
:func:`with_allowed_types` (see there for the serializers it leaves as they are).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from enum import Enum
from typing import Annotated, Any, Literal, get_args, get_origin, get_type_hints

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_TYPES
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Checkpointer
from pydantic import BaseModel
from typing_extensions import is_typeddict

from aimegraph.checkpoints.lease import share_leases
from aimegraph.state.aime_state import ActorInput, AimeInput, AimeState
from aimegraph.state.models import PlanUpdate, TaskSpec
from aimegraph.state.role_states import ActorState, MemberOutput, PlannerState, VerifierState

__all__ = [
    "ALLOWED_MSGPACK_TYPES",
    "PROJECT_MSGPACK_TYPES",
    "allow_types",
    "allowed_types",
    "make_serializer",
    "with_allowed_types",
]

TypeKey = tuple[str, ...]


def classes_in(*schemas: Any) -> list[type]:
    """The classes a checkpoint may hold for a value of each of ``schemas``: pydantic
    models, dataclasses and enums, found through type hints (a TypedDict's keys, a
    model's or dataclass's fields, the arguments of ``list[...]``, ``X | None``,
    ``Annotated[X, ...]``...), each model and dataclass with the classes of its
    fields. A schema that is itself such a class comes first."""
    found: dict[type, None] = {}
    typed_dicts: set[type] = set()

    def visit(hint: Any) -> None:
        origin = get_origin(hint)
        if origin is Literal:
            return
        if origin is Annotated:  # the rest are metadata (reducers, channels, validators)
            visit(get_args(hint)[0])
            return
        if get_args(hint):  # list[X], dict[K, V], X | None, NotRequired[X], ...
            for arg in get_args(hint):
                visit(arg)
            return
        if not isinstance(hint, type) or hint in found or hint in typed_dicts:
            return
        if is_typeddict(hint):
            typed_dicts.add(hint)
            for field in get_type_hints(hint, include_extras=True).values():
                visit(field)
        elif issubclass(hint, BaseModel):
            found[hint] = None
            for info in hint.model_fields.values():
                visit(info.annotation)
        elif dataclasses.is_dataclass(hint):
            found[hint] = None
            for field in get_type_hints(hint, include_extras=True).values():
                visit(field)
        elif issubclass(hint, Enum):
            found[hint] = None

    for schema in schemas:
        visit(schema)
    return list(found)


def _key(cls: type) -> TypeKey:
    return (cls.__module__, cls.__name__)


#: The state schemas of the aime graph and of its subgraphs (planner, actor, team
#: member, verifier; a team's own state adds only lists of records named here). Not
#: the context schema (``AimeConfig``): the context is never checkpointed.
_STATE_SCHEMAS: tuple[type, ...] = (
    AimeInput,
    AimeState,
    PlannerState,
    ActorInput,
    ActorState,
    MemberOutput,
    VerifierState,
)

#: Records that are checkpointed outside the state: the planner's output travels in
#: an ``interrupt()`` payload or a resume value when plans need human approval.
_PAYLOAD_TYPES: tuple[type, ...] = (PlanUpdate, TaskSpec)

#: The project's own classes that may appear in a checkpoint, beyond LangGraph's
#: safe types: every class :func:`classes_in` finds in the state schemas (derived,
#: so a record added to the state is allowed with it), and the payload records. All
#: are data-only pydantic models whose constructors only validate, so reviving them
#: runs no other code.
PROJECT_MSGPACK_TYPES: tuple[type, ...] = tuple(
    cls
    for cls in dict.fromkeys([*classes_in(*_STATE_SCHEMAS), *classes_in(*_PAYLOAD_TYPES)])
    if _key(cls) not in SAFE_MSGPACK_TYPES
)

#: Every ``(module, class name)`` a checkpoint written by aimegraph may revive.
#: LangGraph's ``SAFE_MSGPACK_TYPES`` are always accepted by its ext hook anyway;
#: listing them here as well keeps the allowlist complete and readable in one place.
ALLOWED_MSGPACK_TYPES: frozenset[TypeKey] = frozenset(SAFE_MSGPACK_TYPES) | {
    _key(cls) for cls in PROJECT_MSGPACK_TYPES
}

_registered: frozenset[TypeKey] = frozenset()


def _keys(types: Iterable[type | TypeKey]) -> set[TypeKey]:
    """The allowlist entries for ``types``: a class with the classes of its fields, a
    state schema (a TypedDict) with the classes of its keys, or a ``(module, name)``."""
    keys: set[TypeKey] = set()
    for item in types:
        if not isinstance(item, type):
            keys.add(tuple(item))
            continue
        if not is_typeddict(item):
            keys.add(_key(item))
        keys.update(_key(cls) for cls in classes_in(item))
    return keys


def allow_types(*types: type | TypeKey) -> None:
    """Let the checkpoints aimegraph configures revive ``types`` too: your own state
    records, a ``response_format`` model a parent app keeps.

    Each argument is a class (allowed with the classes of its fields), a state
    schema (a TypedDict: the classes of its keys) or a ``(module, class name)``.
    Registered types join every serializer made afterwards: :func:`make_serializer`,
    the savers of ``open_checkpointer`` and of the CLI, and the checkpointer given to
    ``build_aime_graph`` (see :func:`with_allowed_types`). Call it before opening
    checkpointers and building graphs, e.g. at import of the module defining the
    types. Allow only data-only classes: a load calls the constructor with arguments
    read from the database.
    """
    global _registered
    _registered = _registered | _keys(types)


def allowed_types(extra_types: Iterable[type | TypeKey] = ()) -> frozenset[TypeKey]:
    """What a serializer made now revives: ``ALLOWED_MSGPACK_TYPES``, the types
    registered with :func:`allow_types` and ``extra_types`` (as :func:`allow_types`
    takes them)."""
    return ALLOWED_MSGPACK_TYPES | _registered | _keys(extra_types)


def make_serializer(
    extra_types: Iterable[type | TypeKey] = (),
) -> JsonPlusSerializer:
    """Return a ``JsonPlusSerializer`` that only revives allowlisted types.

    Args:
        extra_types: Further classes (each with the classes of its fields), state
            schemas or ``(module, class name)`` pairs to allow for this serializer
            alone (:func:`allow_types` registers them for every one). Allow only
            data-only classes: the loader calls the constructor with arguments read
            from the database.

    Returns:
        A new serializer with ``pickle_fallback`` off, ``allowed_json_modules``
        unset and ``allowed_msgpack_modules`` = :func:`allowed_types` plus
        ``extra_types``. Anything else is returned as plain data on load, never
        instantiated (see the module docstring).
    """
    return JsonPlusSerializer(
        pickle_fallback=False,
        allowed_json_modules=None,
        # The library treats a set of tuples as "exactly these" (strict), True as
        # "anything, with a warning" and None as "only its safe types".
        allowed_msgpack_modules=sorted(allowed_types(extra_types)),
    )


def with_allowed_types(
    checkpointer: Checkpointer, extra_types: Iterable[type | TypeKey] = ()
) -> Checkpointer:
    """``checkpointer`` with aimegraph's records, the types registered with
    :func:`allow_types` and ``extra_types`` in its serializer's allowlist, so that
    loading a checkpoint revives them without LangGraph's "Deserializing unregistered
    type" warning, and strict mode (``LANGGRAPH_STRICT_MSGPACK``) does not turn them
    into plain dicts. ``build_aime_graph`` calls it on the checkpointer it is given.

    - LangGraph's default serializer outside strict mode, which revives any class
      with that warning: replaced by :func:`make_serializer`'s (strict, the types
      above), also inside an ``EncryptedSerializer``.
    - A serializer with an allowlist (:func:`make_serializer`'s, LangGraph's in
      strict mode, one made with ``allowed_msgpack_modules=[...]``), also inside an
      ``EncryptedSerializer``: the types are added to it (LangGraph's
      ``with_allowlist``).
    - Any other serializer (one allowing every type with other settings changed,
      one of your own) is kept as it is: it decides what it revives.

    The saver is then a shallow copy of ``checkpointer`` (the same storage and
    connection, as LangGraph's ``with_allowlist`` makes): it takes its thread leases
    where ``checkpointer`` does. ``None``, ``True`` and ``False`` (a subgraph's
    settings) are returned as they are.
    """
    if not isinstance(checkpointer, BaseCheckpointSaver):
        return checkpointer
    serde, extra = checkpointer.serde, tuple(extra_types)
    if (strict := _instead_of_default(serde, extra)) is not None:
        saver = copy.copy(checkpointer)
        saver.serde = strict
    elif isinstance(serde, JsonPlusSerializer | EncryptedSerializer):
        saver = checkpointer.with_allowlist(allowed_types(extra))
    else:
        return checkpointer
    share_leases(saver, checkpointer)
    return saver


def _instead_of_default(
    serde: SerializerProtocol, extra_types: Iterable[type | TypeKey]
) -> SerializerProtocol | None:
    """:func:`make_serializer`'s serializer in place of LangGraph's default one (also
    inside an ``EncryptedSerializer``); None for any other serializer."""
    if _is_langgraph_default(serde):
        return make_serializer(extra_types)
    if isinstance(serde, EncryptedSerializer) and _is_langgraph_default(serde.serde):
        return EncryptedSerializer(serde.cipher, make_serializer(extra_types))
    return None


def _is_langgraph_default(serde: SerializerProtocol) -> bool:
    """Whether ``serde`` is ``JsonPlusSerializer()`` as LangGraph makes it outside
    strict mode: every msgpack type allowed (with a warning), nothing else changed.
    LangGraph offers no getter for these settings; its attributes say."""
    return (
        isinstance(serde, JsonPlusSerializer)
        and type(serde) is JsonPlusSerializer
        and serde._allowed_msgpack_modules is True
        and not serde.pickle_fallback
        and serde._allowed_json_modules is None
        and not serde._custom_unpack_ext_hook
    )
