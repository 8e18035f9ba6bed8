"""``HumanInTheLoopMiddleware`` as aimegraph's own tool approval (one mechanism, not two).

Each tool its ``interrupt_on`` gates becomes a rule asking for every call of it, tried
after the run's own ``approve_tools`` rules (the first that matches decides), and its
``allowed_decisions`` (``approve``, ``edit``, ``reject``, ``respond``) and ``args_schema``
become the review the pause offers for that tool
(:func:`aimegraph.nodes.tool_approval.make_tool_approval`). The pause is then the
engine's: one call at a time, in the call's own tools task, resumable alone. A
``when`` predicate or a description computed per call has no rule to become: refused.
"""

from __future__ import annotations

from collections.abc import Mapping

from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain.agents.middleware.human_in_the_loop import ReviewConfig

from aimegraph.middleware.stack import MiddlewareError, MiddlewareStack
from aimegraph.policy import ToolRule

__all__ = ["approval_reviews", "approval_rules"]


def approval_rules(stack: MiddlewareStack) -> tuple[ToolRule, ...]:
    """A rule asking for every call of each tool ``stack``'s ``HumanInTheLoopMiddleware``
    gates (none without one).

    Raises:
        MiddlewareError: an ``interrupt_on`` entry with a ``when`` predicate or a
            callable description.
    """
    return tuple(rule for hitl in stack.approvals for rule in _rules(hitl))


def approval_reviews(stack: MiddlewareStack) -> Mapping[str, ReviewConfig]:
    """The review each gated tool's pause offers: its allowed decisions (and the
    schema of edited arguments, if given)."""
    reviews: dict[str, ReviewConfig] = {}
    for hitl in stack.approvals:
        for tool, entry in hitl.interrupt_on.items():
            review = ReviewConfig(
                action_name=tool, allowed_decisions=list(entry["allowed_decisions"])
            )
            if "args_schema" in entry:
                review["args_schema"] = entry["args_schema"]
            reviews[tool] = review
    return reviews


def _rules(hitl: HumanInTheLoopMiddleware) -> list[ToolRule]:
    rules = []
    for tool, entry in hitl.interrupt_on.items():
        if "when" in entry:
            raise MiddlewareError(
                f"HumanInTheLoopMiddleware: interrupt_on[{tool!r}] has a 'when' predicate, "
                "which approve_tools cannot express; use ToolRule args patterns "
                "(AimeConfig.approve_tools) or a tool_policy callable instead"
            )
        description = entry.get("description", hitl.description_prefix)
        if not isinstance(description, str):
            raise MiddlewareError(
                f"HumanInTheLoopMiddleware: interrupt_on[{tool!r}] has a callable "
                "description; aimegraph describes each call itself (give a text)"
            )
        rules.append(ToolRule(tool=tool, decision="ask", reason=description))
    return rules
