"""Issue 29: the safety settings stay with a thread whichever entry point started
it. Approval gates, per-run overrides, budgets and a model spec set in Python hold
when the CLI resumes the run; overriding one is explicit and said in one line.

The harness (the scripted plan t0 -> (a, b) -> c, its logged ``step`` tool, ``Env``)
is in ``run_control_env.py``, the ``env`` fixture in ``conftest.py``.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from tests.integration.run_control_env import DANGER_SCENARIO, Env, cli

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import open_checkpointer, thread_config
from aimegraph.models import ScriptedChatModel

# --- 6. safety settings stay with the thread ---


def _python_thread(env: Env, thread: str, *, context: dict[str, Any] | None = None,
                   **config: Any) -> None:  # fmt: skip
    """A run started from Python with the scripted model as an object (no spec stored)."""
    import rc_tools

    with open_checkpointer(env.url) as saver:
        graph = build_aime_graph(
            ScriptedChatModel.from_dict(DANGER_SCENARIO), tools=rc_tools.TOOLS,
            config=AimeConfig(workspace=env.workspace, **config), checkpointer=saver,
        )  # fmt: skip
        out = graph.invoke({"goal": "go"}, thread_config(thread), context=context)
        assert out["__interrupt__"]


def test_gates_set_in_python_hold_when_the_cli_resumes(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    _python_thread(env, "gated", approve_plan=True, approve_tools=["danger"])
    code, out, err = cli(capsys, env, "resume", "gated", "--approve", "--model", env.danger_model)
    assert code == 5, err  # paused before the dangerous call, as Python asked
    assert "waiting (approve_tool)" in out and "danger" in out
    assert env.events() == Counter()

    # A per-run override given in Python (context=) is stored too.
    _python_thread(env, "context", approve_plan=True, context={"approve_tools": ["danger"]})
    code, out, err = cli(capsys, env, "resume", "context", "--approve", "--model", env.danger_model)
    assert code == 5 and "waiting (approve_tool)" in out, err

    # An override is explicit: said in one line, and it applies.
    code, out, err = cli(
        capsys, env, "resume", "context", "--approve", "--model", env.danger_model,
        "--config", '{"approve_tools": []}', "--json",
    )  # fmt: skip
    assert err.splitlines() == ["overrides: approve_tools: ['danger'] -> []"]
    assert code == 0 and json.loads(out)["status"] == "succeeded"


def test_budgets_and_a_model_spec_set_in_python_hold_when_the_cli_resumes(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    import rc_tools

    with open_checkpointer(env.url) as saver:
        graph = build_aime_graph(
            env.danger_model, tools=rc_tools.TOOLS,  # a spec: stored, so --model is not needed
            config=AimeConfig(workspace=env.workspace, approve_plan=True, max_llm_calls=2),
            checkpointer=saver,
        )  # fmt: skip
        assert graph.invoke({"goal": "go"}, thread_config("budget"))["__interrupt__"]
    code, out, err = cli(capsys, env, "resume", "budget", "--approve", "--json")
    shown = json.loads(out)
    # Counted from the run's start: the planner's call before the pause included.
    assert code == 4 and shown["status"] == "budget_exhausted", err
    assert shown["usage"]["llm_calls"] == 2
