"""``ask_human``: an actor's question to the user, answered through ``interrupt()``.

Resume with ``Command(resume="the answer")`` or ``Command(resume={"answer": ...})``.
With ``AimeConfig.ask_human_timeout_s`` the question carries a ``deadline`` and the
``default`` answer (``ask_human_default``) the process driving the run gives then.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.runtime import get_runtime
from langgraph.types import interrupt
from pydantic import BaseModel, Field

from aimegraph.config import AimeConfig
from aimegraph.waits import wait_terms


class AskHumanArgs(BaseModel):
    question: str = Field(description="A short, specific question for the human user.")


@tool("ask_human", args_schema=AskHumanArgs)
def ask_human(question: str, config: RunnableConfig) -> str:
    """Ask the human user a question and wait for the answer. Use sparingly."""
    run = _run_config()
    timeout, default = (run.ask_human_timeout_s, run.ask_human_default) if run else (None, None)
    answer = interrupt({"kind": "ask_human", "question": question, **wait_terms(timeout, default)})
    if isinstance(answer, dict):
        answer = answer.get("answer", "")
    return str(answer) if answer not in (None, "") else "(the human gave no answer)"


def _run_config() -> AimeConfig | None:
    """The run's config: an aime graph's run carries it, resolved, as its context
    (None in a graph of the user's own, which then waits without a deadline)."""
    context: Any = get_runtime().context
    return context if isinstance(context, AimeConfig) else None
