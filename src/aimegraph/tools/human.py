"""``ask_human``: an actor's question to the user, answered through ``interrupt()``.

Resume with ``Command(resume="the answer")`` or ``Command(resume={"answer": ...})``.
"""

from __future__ import annotations

from langchain_core.tools import tool
from langgraph.types import interrupt
from pydantic import BaseModel, Field


class AskHumanArgs(BaseModel):
    question: str = Field(description="A short, specific question for the human user.")


@tool("ask_human", args_schema=AskHumanArgs)
def ask_human(question: str) -> str:
    """Ask the human user a question and wait for the answer. Use sparingly."""
    answer = interrupt({"kind": "ask_human", "question": question})
    if isinstance(answer, dict):
        answer = answer.get("answer", "")
    return str(answer) if answer not in (None, "") else "(the human gave no answer)"
