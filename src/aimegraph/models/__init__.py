"""Chat models: spec resolution, structured output with repair, the scripted model."""

from aimegraph.models.resolve import ModelSpecError, resolve_model, resolve_models
from aimegraph.models.scripted import Scenario, ScenarioError, ScriptedChatModel, load_scenario

__all__ = [
    "ModelSpecError",
    "Scenario",
    "ScenarioError",
    "ScriptedChatModel",
    "load_scenario",
    "resolve_model",
    "resolve_models",
]
