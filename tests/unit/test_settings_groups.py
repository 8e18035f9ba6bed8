"""AimeConfig as its groups of settings: every field in exactly one group, the flat
names (keywords, dump keys, JSON schema) as they were before the grouping."""

from __future__ import annotations

import pytest
from langgraph.runtime import Runtime
from pydantic import ValidationError

from aimegraph.config import (
    SETTINGS_GROUPS,
    AimeConfig,
    BudgetSettings,
    BuildSettings,
    ContextSettings,
    HumanControlSettings,
    MemorySettings,
)
from aimegraph.nodes.given_plan import make_given_plan_node
from aimegraph.state import Usage

# AimeConfig's JSON schema property names on main before the grouping: public
# contract (keywords, --config files, thread-stored settings, context overrides).
FLAT_NAMES_BEFORE_GROUPING = frozenset(
    {
        "actor_durability",
        "approval_default",
        "approval_timeout_s",
        "approve_plan",
        "approve_tools",
        "ask_human_default",
        "ask_human_timeout_s",
        "dashboard_url",
        "escalate",
        "escalation_default",
        "escalation_timeout_s",
        "guardrails",
        "max_actor_steps",
        "max_context_tokens",
        "max_conversation_tokens",
        "max_cost_usd",
        "max_goal_chars",
        "max_llm_calls",
        "max_observation_chars",
        "max_output_retries",
        "max_parallel",
        "max_plan_repairs",
        "max_replans",
        "max_steps",
        "max_tasks",
        "max_tokens",
        "max_wall_s",
        "mcp_servers",
        "memory",
        "memory_chars",
        "memory_k",
        "model_cache",
        "model_retries",
        "model_timeout_s",
        "notify_webhook",
        "opt_in_bundles",
        "optimize_components",
        "optimize_max_llm_calls",
        "optimize_online",
        "optimize_threshold",
        "optimize_trace_file",
        "optimize_window",
        "planner_tools",
        "prices",
        "rate_limit",
        "replan",
        "sandbox",
        "sandbox_network",
        "scheduler",
        "server_schema",
        "skills",
        "stream_plans",
        "task_retries",
        "tool_calling",
        "tool_policy",
        "tool_timeout_s",
        "user_id",
        "verifier_inspects",
        "verifier_max_steps",
        "verify",
        "web",
        "workspace",
    }
)


def test_every_field_is_in_exactly_one_group() -> None:
    owners: dict[str, list[str]] = {name: [] for name in AimeConfig.model_fields}
    for group in SETTINGS_GROUPS:
        for name in group.model_fields:
            owners.setdefault(name, []).append(group.__name__)
    misplaced = {name: groups for name, groups in owners.items() if len(groups) != 1}
    assert misplaced == {}, f"fields in no group or in several: {misplaced}"
    assert set(AimeConfig.__bases__) == set(SETTINGS_GROUPS)


def test_flat_names_are_unchanged() -> None:
    # None lost or renamed (a new field adds a name).
    assert set(AimeConfig.model_json_schema()["properties"]) >= FLAT_NAMES_BEFORE_GROUPING
    assert set(AimeConfig().model_dump()) == set(AimeConfig.model_fields)
    config = AimeConfig(max_llm_calls=3, verify="off", memory_k=1, sandbox="none")
    assert (config.max_llm_calls, config.verify, config.memory_k) == (3, "off", 1)
    assert AimeConfig.model_validate(config.model_dump(mode="json")) == config


def test_build_only_is_the_build_group() -> None:
    assert frozenset(BuildSettings.model_fields) == AimeConfig.BUILD_ONLY
    with pytest.raises(ValueError, match="model_timeout_s apply when the graph is built"):
        AimeConfig().override({"model_timeout_s": 5})
    assert AimeConfig().override({"verify": "final", "max_steps": 2}).max_steps == 2


def test_each_group_stands_alone_with_its_checks() -> None:
    with pytest.raises(ValidationError, match="max_cost_usd needs a price table"):
        BudgetSettings(max_cost_usd=1.0)
    with pytest.raises(ValidationError, match="did you mean 'memory_k'"):
        MemorySettings.model_validate({"memory_kk": 2})
    assert BudgetSettings(max_llm_calls=2).budget_spent(Usage(llm_calls=2), steps=0) == (
        "max_llm_calls (2) reached"
    )
    assert HumanControlSettings(approve_tools=("python",)).gates_tools
    # A factory typed with a group takes the whole config: AimeConfig is every group.
    assert all(isinstance(AimeConfig(), group) for group in SETTINGS_GROUPS)


def test_a_group_reads_the_run_context_as_the_whole_config_does() -> None:
    run_config = AimeConfig().override({"memory_k": 2})
    # The run's whole config (as the top-level graph makes it) is every group: no copy.
    assert MemorySettings().for_run(Runtime(context=run_config)) is run_config
    # Overrides: the group's own fields applied, other groups' fields left to them.
    overridden = MemorySettings(user_id="ada").for_run(
        Runtime(context={"memory_k": 1, "verify": "off"})
    )
    assert (overridden.memory_k, overridden.user_id) == (1, "ada")
    partial = MemorySettings(user_id="ada").for_run(Runtime(context=AimeConfig(memory_k=5)))
    assert (partial.memory_k, partial.user_id) == (5, "ada")
    assert MemorySettings().for_run(Runtime(context=None)) == MemorySettings()


@pytest.mark.parametrize(
    "settings", [ContextSettings(max_goal_chars=5), AimeConfig(max_goal_chars=5)]
)
def test_a_factory_typed_with_its_group_takes_the_group_or_the_whole_config(
    settings: ContextSettings,
) -> None:
    given = make_given_plan_node(settings)
    state = {"goal": "a longer goal", "plan": {"tasks": [{"id": "t1", "title": "x"}]}}
    refused = given(state, Runtime(context=None))
    assert "more than max_goal_chars (5)" in refused["plan_error"]
    assert given(state, Runtime(context={"max_goal_chars": 100}))["plan_error"] is None
