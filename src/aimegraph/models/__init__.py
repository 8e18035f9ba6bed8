"""Chat models: spec resolution, structured output with repair, the scripted model.

Every name is imported on first use: the model modules pull in LangChain's providers.
"""

from typing import TYPE_CHECKING

from aimegraph.lazy import lazy_exports

if TYPE_CHECKING:
    from aimegraph.models.offline.scripted import (
        Scenario,
        ScenarioError,
        ScriptedChatModel,
        load_scenario,
    )
    from aimegraph.models.resolve import (
        ModelSpecError,
        resolve_model,
        resolve_models,
    )

_HOMES = {
    "ModelSpecError": ".resolve",
    "resolve_model": ".resolve",
    "resolve_models": ".resolve",
    "Scenario": ".offline.scripted",
    "ScenarioError": ".offline.scripted",
    "ScriptedChatModel": ".offline.scripted",
    "load_scenario": ".offline.scripted",
}

__all__ = [
    "ModelSpecError",
    "Scenario",
    "ScenarioError",
    "ScriptedChatModel",
    "load_scenario",
    "resolve_model",
    "resolve_models",
]

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
