"""Tool functions' string annotations (``from __future__ import annotations``) are
resolved once, where the tool is registered, not by LangChain on every call."""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING

from langchain_core.tools import StructuredTool
from pydantic import BaseModel

from aimegraph.nodes.actor_factory import ALWAYS_BOUND
from aimegraph.tools.hints import resolve_annotations
from aimegraph.tools.registry import ToolRegistry, default_registry

if TYPE_CHECKING:
    from collections import OrderedDict  # a name only a type checker sees


def test_a_registered_tools_annotations_are_resolved_and_it_runs_as_before() -> None:
    def count_words(text: str, limit: int = 10) -> int:
        """Count the words of ``text``, at most ``limit``."""
        return min(len(text.split()), limit)

    assert count_words.__annotations__["text"] == "str"  # this module's hints are strings
    registry = ToolRegistry()
    registry.add_bundle("words", "Counting words.")
    added = registry.add(count_words, bundle="words")
    assert count_words.__annotations__ == {"text": str, "limit": int, "return": int}
    assert added.invoke({"text": "a b c"}) == 3


def test_a_hint_only_a_type_checker_sees_is_left_as_it_was() -> None:
    def first_key(mapping: OrderedDict[str, int]) -> str:
        return next(iter(mapping))

    class Args(BaseModel):
        mapping: dict[str, int]

    # LangChain skips a hint it cannot resolve on each call; so does the resolution.
    keys = StructuredTool(name="first_key", description="d", args_schema=Args, func=first_key)
    resolve_annotations(keys)
    assert first_key.__annotations__["mapping"] == "OrderedDict[str, int]"
    assert keys.invoke({"mapping": {"a": 1}}) == "a"


def test_the_reports_and_the_default_tools_have_no_string_hints_left() -> None:
    tools = [*ALWAYS_BOUND, *default_registry(".").tools.values()]
    functions = [t.func for t in tools if isinstance(t, StructuredTool) and t.func is not None]
    assert functions
    unresolved = [
        f for f in functions if any(isinstance(h, str) for h in f.__annotations__.values())
    ]
    assert unresolved == []
    # What LangChain reads on each call is what it read before, only not compiled again.
    for f in functions:
        assert typing.get_type_hints(f, include_extras=True) == f.__annotations__
