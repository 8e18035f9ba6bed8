"""Which hooks of a role's LangChain middleware aimegraph runs, checked when the graph
is built (architecture: Middleware).

A role's middleware is a :class:`MiddlewareStack`: its ``before_model`` and
``after_model`` hooks as runnables (sync and async, as ``create_agent`` runs them),
its ``wrap_model_call`` and ``wrap_tool_call`` hooks composed first-outermost, and the
private state keys its ``state_schema`` adds. What a role cannot honour is refused
here with :class:`MiddlewareError`, never ignored: ``before_agent`` / ``after_agent``,
tools a middleware brings, and on the planner, reporter and
verifier (one model call each, no tools, no state of their own) every hook but
``wrap_model_call``. ``HumanInTheLoopMiddleware`` is not run as a hook at all: its
``interrupt_on`` becomes ``approve_tools`` rules (:mod:`aimegraph.middleware.approval`),
so a tool call is approved by one mechanism.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, get_args, get_type_hints

from langchain.agents.middleware import AgentMiddleware, AgentState, HumanInTheLoopMiddleware
from langchain_core.runnables import Runnable
from langgraph._internal._runnable import RunnableCallable

from aimegraph.middleware.compose import (
    AsyncModelWrapper,
    AsyncToolWrapper,
    ModelWrapper,
    ToolWrapper,
    chain_async_model_wrappers,
    chain_async_tool_wrappers,
    chain_model_wrappers,
    chain_tool_wrappers,
)

__all__ = [
    "ROLES",
    "Middleware",
    "MiddlewareArg",
    "MiddlewareError",
    "MiddlewareStack",
    "RoleMiddleware",
]

Middleware = AgentMiddleware[Any, Any, Any]
Role = Literal["actor", "planner", "reporter", "verifier"]
ROLES: tuple[Role, ...] = get_args(Role)

MiddlewareArg = Sequence[Middleware] | Mapping[str, Sequence[Middleware]] | None
"""``build_aime_graph(middleware=...)``: a list for the actors, or role -> list."""

_AGENT_KEYS = frozenset(get_type_hints(AgentState, include_extras=True))
"""What every middleware state has (``messages``, ``jump_to``, ``structured_response``):
the actor has its own ``messages``, and ``jump_to`` is read from a hook's return."""

_MODEL_HOOKS = ("before_model", "after_model")
_AGENT_HOOKS = ("before_agent", "after_agent")


class MiddlewareError(ValueError):
    """A middleware, or one of its hooks, that aimegraph cannot honour where it was given."""


def implements(middleware: Middleware, method: str) -> bool:
    """Whether ``middleware``'s class has a ``method`` of its own."""
    return getattr(type(middleware), method) is not getattr(AgentMiddleware, method)


def overrides(middleware: Middleware, hook: str) -> bool:
    """Whether ``middleware`` implements ``hook`` (sync) or its ``a``-prefixed async twin."""
    return implements(middleware, hook) or implements(middleware, f"a{hook}")


def _hook_runnable(middleware: Middleware, hook: str) -> Runnable[Any, dict[str, Any] | None]:
    """A hook as ``create_agent`` runs it (a ``RunnableCallable`` of its sync and async
    functions, the ones it implements): the run's ``Runtime`` is handed to it."""
    sync = getattr(middleware, hook) if implements(middleware, hook) else None
    asynchronous = getattr(middleware, f"a{hook}") if implements(middleware, f"a{hook}") else None
    runnable: Runnable[Any, dict[str, Any] | None] = RunnableCallable(
        sync, asynchronous, name=f"{middleware.name}.{hook}", trace=False
    )
    return runnable


@dataclass(frozen=True)
class MiddlewareStack:
    """One role's middleware, in the order given (the first is the outermost)."""

    items: tuple[Middleware, ...] = ()
    role: Role = "actor"

    def __bool__(self) -> bool:
        return bool(self.items)

    @classmethod
    def of(cls, items: Sequence[Middleware], role: Role = "actor") -> MiddlewareStack:
        """The stack of ``items`` for ``role``, checked; ``HumanInTheLoopMiddleware`` is
        left out (see :attr:`approvals`).

        Raises:
            MiddlewareError: a hook or state key ``role`` cannot honour, two middleware
                with one name, or something that is not an ``AgentMiddleware``.
        """
        seen: set[str] = set()
        for middleware in items:
            if not isinstance(middleware, AgentMiddleware):
                raise MiddlewareError(
                    f"{role} middleware must be LangChain AgentMiddleware instances (or made "
                    f"with @before_model, @wrap_model_call, ...), not {type(middleware).__name__}"
                )
            if middleware.name in seen:
                raise MiddlewareError(f"{role} middleware {middleware.name!r} is given twice")
            seen.add(middleware.name)
            _check(middleware, role)
        return cls(tuple(items), role)

    @cached_property
    def hooked(self) -> tuple[Middleware, ...]:
        """The middleware whose hooks run (``HumanInTheLoopMiddleware`` is an approval)."""
        return tuple(m for m in self.items if not isinstance(m, HumanInTheLoopMiddleware))

    @cached_property
    def approvals(self) -> tuple[HumanInTheLoopMiddleware, ...]:
        """The ``HumanInTheLoopMiddleware`` instances, to become ``approve_tools`` rules."""
        return tuple(m for m in self.items if isinstance(m, HumanInTheLoopMiddleware))

    @cached_property
    def before_model(self) -> tuple[Runnable[Any, dict[str, Any] | None], ...]:
        """The ``before_model`` hooks, in order."""
        return tuple(_hook_runnable(m, "before_model") for m in self._with("before_model"))

    @cached_property
    def after_model(self) -> tuple[Runnable[Any, dict[str, Any] | None], ...]:
        """The ``after_model`` hooks, last middleware first (as ``create_agent`` runs them)."""
        hooks = [_hook_runnable(m, "after_model") for m in self._with("after_model")]
        return tuple(reversed(hooks))

    @cached_property
    def model_wrapper(self) -> ModelWrapper | None:
        """The ``wrap_model_call`` hooks as one (sync), or None without any."""
        return chain_model_wrappers([m.wrap_model_call for m in self._with("wrap_model_call")])

    @cached_property
    def amodel_wrapper(self) -> AsyncModelWrapper | None:
        """The ``awrap_model_call`` hooks as one, or None without any."""
        hooks = [m.awrap_model_call for m in self._with("wrap_model_call")]
        return chain_async_model_wrappers(hooks)

    @cached_property
    def async_model_wrappers(self) -> bool:
        """Whether every ``wrap_model_call`` hook has an async twin."""
        return all(implements(m, "awrap_model_call") for m in self._with("wrap_model_call"))

    @cached_property
    def tool_wrapper(self) -> ToolWrapper | None:
        """The ``wrap_tool_call`` hooks as one (sync), or None without any."""
        return chain_tool_wrappers([m.wrap_tool_call for m in self._with("wrap_tool_call")])

    @cached_property
    def atool_wrapper(self) -> AsyncToolWrapper | None:
        """The ``awrap_tool_call`` hooks as one, or None when some hook has no async
        twin (then the sync ones run in a worker thread)."""
        hooked = self._with("wrap_tool_call")
        if not all(implements(m, "awrap_tool_call") for m in hooked):
            return None
        return chain_async_tool_wrappers([m.awrap_tool_call for m in hooked])

    @cached_property
    def transformers(self) -> tuple[Callable[[tuple[str, ...]], Any], ...]:
        """The stream transformers the middleware brings (``PIIMiddleware``'s redaction
        of streamed text), for the compiled graph's ``stream_events(version="v3")``."""
        return tuple(t for m in self.hooked for t in getattr(m, "transformers", ()))

    @property
    def hooks_state(self) -> bool:
        """Whether some hook reads or writes the state (``before``/``after_model``)."""
        return bool(self.before_model or self.after_model)

    def state_keys(self) -> dict[str, Any]:
        """The keys the middleware's ``state_schema`` adds, with their annotations."""
        keys: dict[str, Any] = {}
        for middleware in self.hooked:
            hints = get_type_hints(middleware.state_schema, include_extras=True)
            keys.update({k: v for k, v in hints.items() if k not in _AGENT_KEYS})
        return keys

    def extend(self, schema: type[Any]) -> type[Any]:
        """``schema`` (a role's state ``TypedDict``) with the middleware's state keys
        added, or ``schema`` itself when they add none.

        Raises:
            MiddlewareError: a middleware key that is one of ``schema``'s own.
        """
        keys = self.state_keys()
        if not keys:
            return schema
        clash = sorted(set(keys) & set(get_type_hints(schema)))
        if clash:
            raise MiddlewareError(
                f"{self.role} middleware state keys {clash} are the {self.role}'s own: "
                "rename them in the middleware's state_schema"
            )

        def body(namespace: dict[str, Any]) -> None:
            namespace.update({"__annotations__": keys, "__module__": schema.__module__})

        extended: type[Any] = types.new_class(
            f"{schema.__name__}WithMiddleware", (schema,), {"total": False}, body
        )
        return extended

    def _with(self, hook: str) -> list[Middleware]:
        return [m for m in self.hooked if overrides(m, hook)]


def _check(middleware: Middleware, role: Role) -> None:
    """Raise :class:`MiddlewareError` for what ``role`` cannot honour of ``middleware``."""
    name = middleware.name
    for hook in _AGENT_HOOKS:
        if overrides(middleware, hook):
            raise MiddlewareError(
                f"{name}.{hook} is not honoured: aimegraph has no agent-wide hooks (a run "
                "is many agents); use before_model/after_model on the actor, or a node of "
                "your own around the graph"
            )
    if getattr(middleware, "tools", None):
        raise MiddlewareError(
            f"{name} brings tools ({', '.join(t.name for t in middleware.tools)}): give "
            "them to build_aime_graph(tools=...) so that plans can name their bundle"
        )
    if role == "actor":
        return
    if isinstance(middleware, HumanInTheLoopMiddleware):
        raise MiddlewareError(
            f"HumanInTheLoopMiddleware approves tool calls: give it to the actor, not the {role}"
        )
    unhonoured = [h for h in (*_MODEL_HOOKS, "wrap_tool_call") if overrides(middleware, h)]
    if unhonoured:
        raise MiddlewareError(
            f"{name}.{unhonoured[0]} is not honoured on the {role}: it makes one model "
            "call, with no tools and no conversation state of its own; only "
            "wrap_model_call hooks apply there (give this middleware to the actor)"
        )
    if set(get_type_hints(middleware.state_schema)) - _AGENT_KEYS:
        raise MiddlewareError(
            f"{name}.state_schema adds state keys, which only the actor keeps; the {role} "
            "has no state for them"
        )


@dataclass(frozen=True)
class RoleMiddleware:
    """The middleware of each role (an empty stack for a role given none)."""

    stacks: Mapping[Role, MiddlewareStack] = field(default_factory=dict)

    def __getitem__(self, role: Role) -> MiddlewareStack:
        return self.stacks.get(role) or MiddlewareStack(role=role)

    def __bool__(self) -> bool:
        return any(self.stacks.values())

    def names(self) -> tuple[str, ...]:
        """``role: name`` of each middleware, in order (what a thread stores of them)."""
        return tuple(
            f"{role}: {m.name}"
            for role in ROLES
            for m in self.stacks.get(role, MiddlewareStack()).items
        )

    @classmethod
    def of(cls, given: MiddlewareArg | RoleMiddleware) -> RoleMiddleware:
        """``build_aime_graph``'s ``middleware``: a list for the actors, or a mapping of
        ``actor``, ``planner``, ``reporter``, ``verifier`` to lists.

        Raises:
            MiddlewareError: an unknown role, or what a role cannot honour.
        """
        if isinstance(given, RoleMiddleware):
            return given
        if given is None:
            return cls()
        by_role = given if isinstance(given, Mapping) else {"actor": given}
        unknown = sorted(set(by_role) - set(ROLES))
        if unknown:
            raise MiddlewareError(
                f"middleware for unknown roles {unknown}: the roles are {', '.join(ROLES)}"
            )
        stacks = {
            role: MiddlewareStack.of(list(by_role[role]), role) for role in ROLES if role in by_role
        }
        return cls(stacks)
