"""AimeConfig: budgets and policies of a run.

The settings are grouped by concern, one class each (``aimegraph.config.groups``:
budgets, planning, verification, human control, tools, context, memory,
optimisation; ``aimegraph.config.build``: the build-only settings), and
``AimeConfig`` is all of them: its fields keep their flat names
(``AimeConfig(max_llm_calls=..., verify=...)``), and a node factory that needs one
concern is typed with its group.

The config given to the builder is the default; a run may override any field
through LangGraph's runtime context (``graph.invoke(inp, cfg, context={...})``),
except the fields in ``AimeConfig.BUILD_ONLY`` (the ``BuildSettings`` group:
``model_timeout_s``, ``model_retries``, ``rate_limit``, ``model_cache``, ...),
which are applied when the graph is built.
Context is not checkpointed, so pass the same overrides again when resuming.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from aimegraph.config.build import BuildSettings, OptInBundle, SchedulerPolicy
from aimegraph.config.groups import (
    ActorDurability,
    BudgetSettings,
    ContextSettings,
    EscalatePolicy,
    EscalationDefault,
    HumanControlSettings,
    InspectPolicy,
    MemoryPolicy,
    MemorySettings,
    OptimisationSettings,
    PlanningSettings,
    ReplanPolicy,
    RunSettings,
    ToolCallingMode,
    ToolSettings,
    VerificationSettings,
    VerifyPolicy,
)
from aimegraph.config.settings import WebConfig, _Settings
from aimegraph.config.settings import settings_error as settings_error
from aimegraph.config.settings import unknown_setting as unknown_setting

__all__ = [
    "SETTINGS_GROUPS",
    "ActorDurability",
    "AimeConfig",
    "BudgetSettings",
    "BuildSettings",
    "ContextSettings",
    "EscalatePolicy",
    "EscalationDefault",
    "HumanControlSettings",
    "InspectPolicy",
    "MemoryPolicy",
    "MemorySettings",
    "OptInBundle",
    "OptimisationSettings",
    "PlanningSettings",
    "ReplanPolicy",
    "RunSettings",
    "SchedulerPolicy",
    "ToolCallingMode",
    "ToolSettings",
    "VerificationSettings",
    "VerifyPolicy",
    "WebConfig",
    "settings_error",
    "unknown_setting",
]

#: The groups ``AimeConfig`` is made of (its bases), each field in exactly one.
SETTINGS_GROUPS: tuple[type[_Settings], ...] = (
    BudgetSettings,
    PlanningSettings,
    VerificationSettings,
    HumanControlSettings,
    ToolSettings,
    ContextSettings,
    MemorySettings,
    OptimisationSettings,
    BuildSettings,
)


class AimeConfig(
    BuildSettings,
    OptimisationSettings,
    MemorySettings,
    ContextSettings,
    ToolSettings,
    HumanControlSettings,
    VerificationSettings,
    PlanningSettings,
    BudgetSettings,
):
    """Budgets and policies. Every budget is enforced by the engine itself, so a
    run always terminates with a clear ``status``, never by ``recursion_limit``."""

    #: Fields used when the graph is built (models resolved, tools made once), not per run.
    BUILD_ONLY: ClassVar[frozenset[str]] = frozenset(BuildSettings.model_fields)

    def override(self, changes: _Settings | Mapping[str, Any] | None) -> AimeConfig:
        """This config with the fields of ``changes`` applied (validated); a field
        applied when the graph was built may not change.

        A ``changes`` config with every field set is the result as it is: merging
        it would give an equal config, at the cost of a validation. ``for_run``
        (from :class:`RunSettings`) applies the run's context this way: free when the
        context is already the run's whole config, as the top-level graph makes it
        when a run starts (:class:`aimegraph.graphs.compiled.AimeGraph`), so every
        node and tool call of the run shares that one validated object."""
        if changes is None or changes is self:
            return self
        if isinstance(changes, AimeConfig) and changes.model_fields_set.issuperset(
            type(self).model_fields
        ):
            self._refuse_build_only({key: getattr(changes, key) for key in self.BUILD_ONLY})
            return changes
        if isinstance(changes, _Settings):
            changes = changes.model_dump(exclude_unset=True)
        if not changes:
            return self
        self._refuse_build_only(changes)
        return AimeConfig.model_validate({**self.model_dump(), **dict(changes)})

    def _refuse_build_only(self, changes: Mapping[str, Any]) -> None:
        """Refuse a change of a field applied when the graph was built."""
        fixed = sorted(
            key for key in self.BUILD_ONLY if key in changes and changes[key] != getattr(self, key)
        )
        if fixed:
            raise ValueError(
                f"{', '.join(fixed)} apply when the graph is built (models and tools are set "
                "up then): set them in build_aime_graph(config=AimeConfig(...)), not per run"
            )
