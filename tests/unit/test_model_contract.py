"""LangChain's standard chat model tests (``langchain-tests``) for the scripted and fuzz
models, with the capabilities each has declared.

Both answer in the scripted model's echo mode (:mod:`aimegraph.models.offline.echo`), which
replies to any prompt that is not the engine's. The fuzz model runs with its reshaping
off: a reshaped reply (a think block, tool calls written as text, a transient error) is
what the suite would read as a wrong answer, by design; ``test_fuzz_replies`` and
``test_model_streaming`` cover the reshaped replies.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_tests.integration_tests import ChatModelIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests
from tests.markers import skip_for_quality

from aimegraph.models.offline.fuzz import FuzzChatModel, FuzzRates
from aimegraph.models.offline.scripted import Scenario, ScriptedChatModel

ECHO = {"scenario": Scenario(name="echo", echo=True)}
NO_RESHAPING = FuzzRates(**dict.fromkeys(FuzzRates.model_fields, 0.0))

JSON_MODE_IS_QUALITY = (
    "json_mode gives the model no schema, only prose naming the keys; the echo mode "
    "cannot read prose (model quality, not contract)"
)


class ScriptedCapabilities:
    """What the scripted model does: native tool calls with any tool_choice, structured
    output by tool call or JSON (json_schema, json_mode), usage on every reply; no
    multimodal input, no per-call model override."""

    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return ScriptedChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return dict(ECHO)

    @property
    def has_tool_calling(self) -> bool:
        return True

    @property
    def has_tool_choice(self) -> bool:
        return True

    @property
    def has_structured_output(self) -> bool:
        return True

    @property
    def supports_json_mode(self) -> bool:
        return True

    @property
    def returns_usage_metadata(self) -> bool:
        return True

    @property
    def supports_model_override(self) -> bool:
        return False


class FuzzCapabilities(ScriptedCapabilities):
    """The fuzz model has its inner model's capabilities."""

    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return FuzzChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"inner": ScriptedChatModel(**ECHO), "rates": NO_RESHAPING}


class TestScriptedUnit(ScriptedCapabilities, ChatModelUnitTests):
    pass


class TestScriptedIntegration(ScriptedCapabilities, ChatModelIntegrationTests):
    @skip_for_quality(JSON_MODE_IS_QUALITY)
    def test_json_mode(self, model: BaseChatModel) -> None:
        super().test_json_mode(model)


class TestFuzzUnit(FuzzCapabilities, ChatModelUnitTests):
    pass


class TestFuzzIntegration(FuzzCapabilities, ChatModelIntegrationTests):
    @skip_for_quality(JSON_MODE_IS_QUALITY)
    def test_json_mode(self, model: BaseChatModel) -> None:
        super().test_json_mode(model)
