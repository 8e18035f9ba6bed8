"""The checkpoint serializer: LangGraph's msgpack format with a closed type allowlist.

A checkpoint stores typed objects as msgpack "ext" records that name a class by
``(module, name)`` plus its constructor arguments. LangGraph's default
``JsonPlusSerializer()`` imports and calls *any* class named there (it only logs
"Deserializing unregistered type ..."), so whoever can write to the checkpoint
database could make a load run arbitrary code. ``make_serializer`` closes that:

* ``allowed_msgpack_modules`` is an explicit allowlist: LangGraph's built-in safe
  types (datetimes, UUID, Decimal, sets, paths, LangChain messages and
  ``Document``, ``Send``/``Command``/``Interrupt``, ...) plus the project's state
  records. A record naming anything else is *not* imported or called: the library
  logs "Blocked deserialization of ...", emits a ``msgpack_blocked`` serde event
  and returns the record's raw arguments as plain data (dict / list / str).
  Method-call records (``EXT_METHOD_SINGLE_ARG``) are limited by LangGraph to its own
  fixed set (``datetime.datetime.fromisoformat``), independent of this list.
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
"""

from __future__ import annotations

from collections.abc import Iterable

from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_TYPES
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from aimegraph.state.models import (
    MemberResult,
    PlanUpdate,
    ProgressUpdate,
    RoleUsage,
    Span,
    Task,
    TaskResult,
    TaskSpec,
    TeamSpec,
    ToolCallSpec,
    Usage,
    Verdict,
)

__all__ = ["ALLOWED_MSGPACK_TYPES", "PROJECT_MSGPACK_TYPES", "make_serializer"]

#: The project's own classes that may appear in a checkpoint. The first six are
#: the state records (the state contract); ``TaskSpec`` and ``PlanUpdate`` are the
#: planner's output, which can travel in an ``interrupt()`` payload or a resume
#: value when plans need human approval; ``TeamSpec`` and ``MemberResult`` are a
#: team task's (in a team subgraph's state, its members' turns so far);
#: ``ToolCallSpec`` is a tool step's call (``Task.call``); ``Span`` a time a call
#: ran (``Task.tool_spans``, the ``spans`` key). All are
#: frozen, data-only pydantic models whose constructors only validate, so reviving
#: them runs no other code.
PROJECT_MSGPACK_TYPES: tuple[type, ...] = (
    Task,
    TaskResult,
    ProgressUpdate,
    Verdict,
    Usage,
    RoleUsage,
    TaskSpec,
    PlanUpdate,
    TeamSpec,
    MemberResult,
    ToolCallSpec,
    Span,
)


def _key(cls: type) -> tuple[str, str]:
    return (cls.__module__, cls.__name__)


#: Every ``(module, class name)`` a checkpoint written by aimegraph may revive.
#: LangGraph's ``SAFE_MSGPACK_TYPES`` are always accepted by its ext hook anyway;
#: listing them here as well keeps the allowlist complete and readable in one place.
ALLOWED_MSGPACK_TYPES: frozenset[tuple[str, ...]] = frozenset(SAFE_MSGPACK_TYPES) | {
    _key(cls) for cls in PROJECT_MSGPACK_TYPES
}


def make_serializer(
    extra_types: Iterable[type | tuple[str, str]] = (),
) -> JsonPlusSerializer:
    """Return a ``JsonPlusSerializer`` that only revives allowlisted types.

    Args:
        extra_types: Further classes (or ``(module, class name)`` pairs) to allow,
            for applications that embed aimegraph graphs and keep their own pydantic
            models or dataclasses in the state. Allow only data-only classes: the
            loader calls the constructor with arguments read from the database.

    Returns:
        A new serializer with ``pickle_fallback`` off, ``allowed_json_modules``
        unset and ``allowed_msgpack_modules`` = ``ALLOWED_MSGPACK_TYPES`` plus
        ``extra_types``. Anything else is returned as plain data on load, never
        instantiated (see the module docstring).
    """
    allowed: set[tuple[str, ...]] = set(ALLOWED_MSGPACK_TYPES)
    for item in extra_types:
        allowed.add(_key(item) if isinstance(item, type) else tuple(item))
    return JsonPlusSerializer(
        pickle_fallback=False,
        allowed_json_modules=None,
        # The library treats a set of tuples as "exactly these" (strict), True as
        # "anything, with a warning" and None as "only its safe types".
        allowed_msgpack_modules=sorted(allowed),
    )
