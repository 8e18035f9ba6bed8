"""Actor steps of a model whose only tool calling is one forced function decoded under
a grammar (llama.cpp's ``ChatLlamaCpp``): JSON mode asks it for that function, whose
schema admits exactly one call of one bound tool, and runs the call it returns."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr
from tests.scripted import call, plan, spec, submit

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models.json_tools import STEP_FUNCTION, json_step_model
from aimegraph.models.jsonparse import check_degenerate
from aimegraph.models.offline.scripted import ScriptedChatModel, ToolSchemaChatModel
from aimegraph.models.resolve import decodes_forced_calls_by_grammar, supports_tool_calling
from aimegraph.tools.calculator import calculator


class ChatLlamaCpp(ToolSchemaChatModel):
    """Stands in for llama.cpp's wrapper (the engine knows it by its class name): a
    forced function call returns the next of ``steps`` as that function's arguments, as
    the grammar would; free tool choice is ignored and the reply is prose, as
    llama.cpp's is."""

    steps: list[dict[str, Any]]
    _asked: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "fake-llama-cpp"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._asked.append({**kwargs, "prompt": "\n".join(m.text for m in messages)})
        choice = kwargs.get("tool_choice")
        if isinstance(choice, dict):
            args = self.steps[len(self._asked) - 1]
            name = choice["function"]["name"]
            reply = AIMessage(
                content="", tool_calls=[{"name": name, "args": args, "id": str(uuid.uuid4())}]
            )
        else:
            reply = AIMessage(content="Let me think about the numbers first.")
        reply.usage_metadata = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
        return ChatResult(generations=[ChatGeneration(message=reply)])


def test_json_mode_steps_are_forced_calls_of_one_bound_tool(workspace: Path) -> None:
    actor = ChatLlamaCpp(steps=[call("calculator", expression="17*23"), submit("It is 391.")])
    assert decodes_forced_calls_by_grammar(actor) and not supports_tool_calling(actor)
    scripted = ScriptedChatModel.from_dict({"planner": [plan(spec("a", tool_bundles=["compute"]))]})
    graph = build_aime_graph(
        scripted, models={"actor": actor}, config=AimeConfig(workspace=workspace, verify="off")
    )
    out = graph.invoke({"goal": "What is 17 times 23?"})
    assert out["status"] == "succeeded"
    assert out["tasks"]["a"].result.summary == "It is 391."

    first, second = actor._asked
    assert first["tool_choice"] == {"type": "function", "function": {"name": STEP_FUNCTION}}
    (function,) = first["tools"]
    assert function["function"]["name"] == STEP_FUNCTION
    variants = function["function"]["parameters"]["anyOf"]
    names = [v["properties"]["tool"]["const"] for v in variants]
    assert {"calculator", "submit_result", "update_progress"} <= set(names)
    calculator = variants[names.index("calculator")]
    assert calculator["required"] == ["tool", "args"]
    assert "expression" in calculator["properties"]["args"]["properties"]
    # The calculator's observation reached the second step, in the plain transcript.
    assert second["tool_choice"] == first["tool_choice"]
    assert "Observation from calculator:\n391" in second["prompt"]
    assert out["usage"].by_role["actor"].llm_calls == 2


class LoopingChatLlamaCpp(ChatLlamaCpp):
    """A forced call whose model loops inside a string until the token limit: llama.cpp
    hands back arguments that are cut-off JSON (an invalid tool call), finish reason
    ``tool_calls``."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        args = '{"tool": "update_progress", "args": {"message": "144 / 12 = 0.5' + "6879" * 60
        bad = {"name": STEP_FUNCTION, "args": args, "id": "c1", "error": "not JSON"}
        reply = AIMessage(content="", invalid_tool_calls=[{**bad, "type": "invalid_tool_call"}])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def test_a_forced_call_cut_off_in_a_loop_is_reported_as_a_loop_not_an_empty_reply() -> None:
    reply = json_step_model(LoopingChatLlamaCpp(steps=[]), [calculator]).invoke("What is 144/12?")
    assert reply.text.startswith('{"tool": "update_progress"')
    assert not reply.tool_calls and not reply.invalid_tool_calls
    assert (check_degenerate(reply.text) or "").startswith("the reply repeats itself")
