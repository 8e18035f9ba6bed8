"""Offline stand-ins for prompt optimisation: a model that does better when its
prompt carries an instruction, and a reflection model that learns from feedback.

They let the optimiser's tests, notebook and benchmark show a real improvement
without a real model: :class:`PromptGatedChatModel` answers as one model when
its prompt contains a phrase and as another otherwise (e.g. a planner that
only plans to cite its sources when told to), and
:class:`FeedbackReflectionModel` answers GEPA's reflection prompt by adding the
feedback's reviewer issues and task failures to the current instructions as
rules, which is what a good reflection model does, deterministically.
:func:`citation_models` puts them together into a small task with one thing to
learn.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from aimegraph.models.offline.scripted import ScriptedChatModel, ToolSchemaChatModel
from aimegraph.models.reasoning import visible_text
from aimegraph.prompts import optimizer as prompts

__all__ = [
    "CITATION_GOALS",
    "CITE_INSTRUCTION",
    "CITED_SOURCE",
    "FeedbackReflectionModel",
    "PromptGatedChatModel",
    "citation_models",
]


def _prompt_text(messages: Sequence[BaseMessage]) -> str:
    return "\n".join(visible_text(m) for m in messages)


class PromptGatedChatModel(ToolSchemaChatModel):
    """Answers as ``follows`` when the prompt contains ``phrase``, else as ``ignores``.

    Tool binding is passed through, so either side answers in native tool calls
    or in JSON exactly as it would alone.
    """

    phrase: str
    follows: BaseChatModel
    ignores: BaseChatModel

    @property
    def _llm_type(self) -> str:
        return "aimegraph-prompt-gated"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        chosen = self.follows if self.phrase in _prompt_text(messages) else self.ignores
        return chosen._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


# A rule worth learning: a reviewer's issue or a task's failure reason.
_LESSON = re.compile(
    "^(?:" + re.escape(prompts.VERDICT_ISSUE.split("{")[0]) + r"|Task \S+ \(.*?\) failed: )(.+)$",
    re.MULTILINE,
)
_CURRENT = re.compile(r"```\n?(.*?)```", re.DOTALL)


class FeedbackReflectionModel(BaseChatModel):
    """A deterministic reflection model for GEPA's instruction-proposal prompt.

    It takes the current instructions (the prompt's first fenced block) and adds
    each distinct reviewer issue and task-failure reason found in the feedback
    as a rule ``- <text>``, in the order found; instructions that already hold a
    rule are not given it twice. The reply is the new text in a fenced block.
    """

    @property
    def _llm_type(self) -> str:
        return "aimegraph-feedback-reflection"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = _prompt_text(messages)
        found = _CURRENT.search(prompt)
        current = found.group(1).rstrip("\n") if found else ""
        lessons = dict.fromkeys(m.strip() for m in _LESSON.findall(prompt))
        rules = "".join(f"\n- {lesson}" for lesson in lessons if lesson not in current)
        reply = AIMessage(content=f"```\n{current}{rules}\n```")
        reply.usage_metadata = {
            "input_tokens": len(prompt) // 4 + 1,
            "output_tokens": len(reply.text) // 4 + 1,
            "total_tokens": len(prompt) // 4 + len(reply.text) // 4 + 2,
        }
        reply.response_metadata = {"model_name": self._llm_type}
        return ChatResult(generations=[ChatGeneration(message=reply)])


CITE_INSTRUCTION = "ALWAYS CITE THE FILE"
CITED_SOURCE = "source: data/q3.csv"
CITATION_GOALS = (
    "What was the Q3 revenue?",
    "Report the Q3 revenue figure.",
    "How much revenue did we make in Q3?",
    "Give me Q3's revenue.",
    "Q3 revenue, please.",
)
_ISSUE = f"The answer gives no source for its figure. {CITE_INSTRUCTION} the figures come from."


def _plan(task_id: str, description: str) -> dict[str, Any]:
    task = {
        "id": task_id,
        "title": "Find the Q3 revenue",
        "description": description,
        "completion_criteria": "The figure is stated.",
        "tool_bundles": ["files"],
    }
    return {"planner": [{"rationale": "One lookup answers the goal.", "tasks": [task]}]}


def _review(passed: bool) -> dict[str, Any]:
    issues = [] if passed else [_ISSUE]
    return {"verifier": [{"passed": passed, "reasoning": "Checked the answer.", "issues": issues}]}


def _submit(summary: str) -> list[dict[str, Any]]:
    return [{"tool": "submit_result", "args": {"status": "completed", "summary": summary}}]


def citation_models() -> tuple[BaseChatModel, dict[str, BaseChatModel]]:
    """``(model, models)`` for ``build_aime_graph`` or ``optimize``: the citation task.

    Any goal about the Q3 revenue gets a one-task plan. The planner plans to cite
    the data file only when its prompt says :data:`CITE_INSTRUCTION`; the
    verifier passes an answer only when it names the file
    (:data:`CITED_SOURCE`), and otherwise says, in an issue, that the answer
    must cite it. So the default prompts fail every run, a reflection model that
    learns from the reviewer's issues can fix the planner prompt, and nothing
    else can: a run that ends rejected costs 4 model calls with ``max_replans=0``.
    """
    shared = ScriptedChatModel.from_dict(
        {
            "actors": {
                "t1": _submit("Q3 revenue is 48213."),
                "cite1": _submit(f"Q3 revenue is 48213 ({CITED_SOURCE})."),
            },
            "reporter": [{"text": "Answer: {all_results}"}],
        }
    )
    planner = PromptGatedChatModel(
        phrase=CITE_INSTRUCTION,
        follows=ScriptedChatModel.from_dict(
            _plan("cite1", "Read the Q3 revenue from data/q3.csv and cite that file.")
        ),
        ignores=ScriptedChatModel.from_dict(_plan("t1", "Find the Q3 revenue.")),
    )
    verifier = PromptGatedChatModel(
        phrase=CITED_SOURCE,
        follows=ScriptedChatModel.from_dict(_review(True)),
        ignores=ScriptedChatModel.from_dict(_review(False)),
    )
    return shared, {"planner": planner, "verifier": verifier}
