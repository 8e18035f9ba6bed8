"""Tool approval policies: per call, whether an actor's tool call runs, waits for a
human's decision, or is refused.

Two settings of :class:`aimegraph.AimeConfig` decide, in this order:

* ``tool_policy``: a callable ``policy(call, task) -> "allow" | "ask" | "deny" | None``
  (or its ``"module:attr"`` name, the form ``--config`` and stored run settings
  take); ``None`` leaves the call to the rules.
* ``approve_tools``: tool names (every call of the tool is asked) and
  :class:`ToolRule` entries, tried in order; the first that matches decides.

A call nothing decides runs. The actor's own reports (``update_progress``,
``submit_result``) are never gated.
"""

from __future__ import annotations

import fnmatch
import functools
import posixpath
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Literal, NamedTuple, Protocol

from langchain_core.messages import ToolCall
from pydantic import BaseModel, ConfigDict, Field

from aimegraph.imports import import_object
from aimegraph.state import Task

ToolDecision = Literal["allow", "ask", "deny"]


class ToolRule(BaseModel):
    """One rule of ``approve_tools``: the calls it matches and what happens to them.

    ``{"tool": "read_file", "args": {"path": "data/*"}, "decision": "allow"}`` lets
    ``read_file`` read under ``data/`` without asking; a following
    ``{"tool": "*", "decision": "ask"}`` asks for every other call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str = Field("*", description="The tool's name, or a glob of names ('*': any tool).")
    args: dict[str, str] = Field(
        default_factory=dict,
        description="Argument name -> glob its value must match (all must). A value with a "
        "'/' is matched as a normalised path: 'data/../secret.csv' is 'secret.csv'.",
    )
    decision: ToolDecision = Field(
        "ask", description="'allow' runs the call, 'ask' waits for a human, 'deny' refuses it."
    )
    reason: str = Field(
        "", description="Why: shown to the human when asked, to the actor when refused."
    )

    def matches(self, name: str, args: Mapping[str, Any]) -> bool:
        """Whether the call of ``name`` with ``args`` is one this rule is about."""
        if not fnmatch.fnmatchcase(name, self.tool):
            return False
        return all(
            key in args and fnmatch.fnmatchcase(_comparable(args[key]), pattern)
            for key, pattern in self.args.items()
        )


class ToolPolicy(Protocol):
    """Decides one call: ``"allow"``, ``"ask"``, ``"deny"``, or ``None`` to leave it to
    the ``approve_tools`` rules. ``task`` is the actor's task (None outside one)."""

    def __call__(self, call: ToolCall, task: Task | None) -> ToolDecision | None: ...


PolicySpec = str | Callable[..., Any]
"""A policy callable, or the ``"module:attr"`` that names one."""


class PolicyDecision(NamedTuple):
    """A policy's decision on one call, and why (empty when no rule said)."""

    decision: ToolDecision
    reason: str = ""


def decide(
    call: ToolCall,
    task: Task | None,
    *,
    rules: Iterable[str | ToolRule],
    policy: PolicySpec | None = None,
    exempt: Collection[str] = (),
) -> PolicyDecision:
    """What happens to ``call``: ``policy`` first, then the first rule that matches;
    ``"allow"`` when none decides, and for the ``exempt`` tools (the actor's reports).

    Raises:
        ValueError: ``policy`` returns something other than a decision or None.
    """
    if call["name"] in exempt:
        return PolicyDecision("allow")
    if policy is not None:
        decided = resolve_policy(policy)(call, task)
        if decided is not None:
            if decided not in ("allow", "ask", "deny"):
                raise ValueError(
                    f"tool_policy returned {decided!r} for {call['name']}: it must return "
                    "'allow', 'ask', 'deny' or None"
                )
            return PolicyDecision(decided, "the run's tool policy")
    for rule in as_rules(rules):
        if rule.matches(call["name"], call["args"]):
            return PolicyDecision(rule.decision, rule.reason)
    return PolicyDecision("allow")


def as_rules(entries: Iterable[str | ToolRule]) -> list[ToolRule]:
    """``approve_tools`` entries as rules: a bare name asks for every call of its tool."""
    return [_asking_rule(e) if isinstance(e, str) else e for e in entries]


@functools.lru_cache(maxsize=256)
def _asking_rule(tool: str) -> ToolRule:
    # Made once per name, not on every gated call (rules are frozen: sharing is safe).
    return ToolRule(tool=tool)


def check_rules(entries: Iterable[str | ToolRule], available: Collection[str]) -> None:
    """Refuse entries that name no tool: a typo would leave the real tool running
    unasked. A name must be a tool's; a rule's glob must match at least one.

    Raises:
        ValueError: listing the entries that match nothing and the tools there are.
    """
    unknown = sorted(
        {
            entry if isinstance(entry, str) else entry.tool
            for entry in entries
            if not (
                entry in available
                if isinstance(entry, str)
                else fnmatch.filter(available, entry.tool)
            )
        }
    )
    if unknown:
        raise ValueError(
            f"approve_tools names unknown tool(s) {', '.join(map(repr, unknown))}; "
            f"the tools are: {', '.join(sorted(available))}"
        )


def resolve_policy(policy: PolicySpec) -> ToolPolicy:
    """The policy callable itself (imported once when given as ``"module:attr"``)."""
    return _imported(policy) if isinstance(policy, str) else policy


@functools.cache
def _imported(spec: str) -> ToolPolicy:
    found = import_object(
        spec,
        malformed=f"tool_policy takes module:attr (e.g. myapp.policies:review); got {spec!r}",
        failed="cannot import tool_policy",
    )
    if not callable(found):
        raise ValueError(f"tool_policy {spec!r} is not callable")
    policy: ToolPolicy = found
    return policy


def policy_name(policy: PolicySpec) -> str:
    """``policy`` as the ``"module:attr"`` that imports it (how settings store it).

    Raises:
        ValueError: a callable that cannot be imported back by that name (a lambda,
            a closure, a callable object).
    """
    if isinstance(policy, str):
        return policy
    name = f"{getattr(policy, '__module__', '')}:{getattr(policy, '__qualname__', '')}"
    try:
        same = _imported(name) is policy
    except ValueError:
        same = False
    if not same:
        raise ValueError(
            f"tool_policy {policy!r} cannot be stored with the run: give a module-level "
            "function, or its 'module:attr' name"
        )
    return name


def _comparable(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    if "/" not in text and "\\" not in text:
        return text
    # A rule allowing 'data/*' must not allow 'data/../secret.csv'.
    return posixpath.normpath(text.replace("\\", "/")).removeprefix("./")
