"""``ask_human``: an actor's question to the user, answered through ``interrupt()``.

Resume with ``Command(resume="the answer")`` or ``Command(resume={"answer": ...})``.
A question with nothing to answer (empty, or the tool's own description copied) is
refused to the model before anything pauses.
With ``AimeConfig.ask_human_timeout_s`` the question carries a ``deadline`` and the
``default`` answer (``ask_human_default``) the process driving the run gives then.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.runtime import get_runtime
from langgraph.types import interrupt
from pydantic import BaseModel, Field, field_validator

from aimegraph.config import AimeConfig
from aimegraph.waits import wait_terms

ASK_HUMAN_DESCRIPTION = "Ask the human user a question and wait for the answer. Use sparingly."
QUESTION_DESCRIPTION = "A short, specific question for the human user."
_WORD = re.compile(r"\w+")


class AskHumanArgs(BaseModel):
    question: str = Field(description=QUESTION_DESCRIPTION)

    @field_validator("question")
    @classmethod
    def _asks_something(cls, question: str) -> str:
        """Refuse a question with nothing to answer: an empty one, or one that only
        restates the tool's own texts (small models copy the argument's description).
        The actor gets the refusal as an error observation, as for any argument that
        does not fit, and the run does not pause on it."""
        asked = _WORD.findall(question.casefold())
        if not asked:
            raise ValueError("the question is empty: ask the user something specific")
        if any(_within(asked, text) for text in (ASK_HUMAN_DESCRIPTION, QUESTION_DESCRIPTION)):
            raise ValueError(
                "the question only restates ask_human's description: write the question "
                "itself, what you need the user to tell you"
            )
        return question


def _within(words: list[str], text: str) -> bool:
    """Whether ``words`` run, in order and together, somewhere in ``text``."""
    told = _WORD.findall(text.casefold())
    return any(told[i : i + len(words)] == words for i in range(len(told) - len(words) + 1))


@tool("ask_human", args_schema=AskHumanArgs, description=ASK_HUMAN_DESCRIPTION)
def ask_human(question: str, config: RunnableConfig) -> str:
    """Pause for the human's answer (the model reads :data:`ASK_HUMAN_DESCRIPTION`)."""
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
