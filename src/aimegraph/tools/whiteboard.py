"""Working memory: a run's whiteboard, the state key ``facts`` (merged by key).

Actors write it with ``remember(key, value)`` and read it with ``recall(key)``
(bundle ``memory``). What is written lands in the run's state through the
reducers, so it is checkpointed, survives a resume, and is shown to every actor
assembled later and to the planner.
"""

from __future__ import annotations

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command
from pydantic import BaseModel, Field

__all__ = ["MEMORY_BUNDLE", "MEMORY_BUNDLE_DESCRIPTION", "memory_tools", "recall", "remember"]

MEMORY_BUNDLE = "memory"
MEMORY_BUNDLE_DESCRIPTION = (
    "A whiteboard shared by all tasks of the run: remember a named fact (a figure, "
    "a file path, a decision) for later tasks, recall one by name."
)
MAX_FACT_CHARS = 2_000


class RememberArgs(BaseModel):
    key: str = Field(min_length=1, max_length=80, description="Short name, e.g. 'csv_delimiter'.")
    value: str = Field(description="The fact itself, with units and sources.")


class RecallArgs(BaseModel):
    key: str = Field(description="The name the fact was remembered under.")


@tool("remember", args_schema=RememberArgs)
def remember(key: str, value: str, runtime: ToolRuntime) -> Command:
    """Write a fact on the run's whiteboard, where later tasks and the planner see it."""
    text = value if len(value) <= MAX_FACT_CHARS else value[:MAX_FACT_CHARS] + "..."
    return Command(
        update={
            "facts": {key.strip(): text},
            "messages": [
                ToolMessage(f"Remembered {key.strip()!r}.", tool_call_id=runtime.tool_call_id)
            ],
        }
    )


@tool("recall", args_schema=RecallArgs)
def recall(key: str, runtime: ToolRuntime) -> str:
    """Read a fact from the run's whiteboard by its name."""
    state = runtime.state
    facts: dict[str, str] = {**(state.get("known_facts") or {}), **(state.get("facts") or {})}
    if key.strip() in facts:
        return facts[key.strip()]
    known = ", ".join(sorted(facts)) or "none yet"
    return f"No fact named {key!r} on the whiteboard. Known keys: {known}."


def memory_tools() -> list[BaseTool]:
    return [remember, recall]
