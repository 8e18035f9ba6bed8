"""Systems under test: aimegraph configurations from a systems file (config, models per
role, prompts pinned to a version, agent units), the baselines' budgets, seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult

from aimegraph.eval import OracleModels, SystemsError, SystemSpec, evaluate, load_systems
from aimegraph.eval.suite import Budget
from aimegraph.eval.systems import system_guardrails
from aimegraph.eval.usage import seeded
from aimegraph.guardrails import Guardrail, Subject, guardrail
from aimegraph.models.offline.scripted import ScriptedChatModel
from aimegraph.optimizer.store import PromptStore
from aimegraph.prompts import DEFAULT_PROMPTS
from tests.eval.helpers import AIME_CALLS, THREE_TASKS, write_suite

pytest.importorskip("langchain.agents", reason="create_agent needs the [eval] extra")

MARK = "Always answer in full sentences (eval marker)."


class Recording(OracleModels):
    """The oracle, keeping every model it hands out (to read their prompts)."""

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "models", [])

    def __call__(self, task: Any, kind: str, rollout: int) -> BaseChatModel:
        model = super().__call__(task, kind, rollout)
        self.models.append(model)  # type: ignore[attr-defined]
        return model


@pytest.mark.usefixtures("bubblewrap")  # an eval runs the oracle's python calls there
def test_a_systems_file_configures_aimegraph(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite", THREE_TASKS)
    store = PromptStore(tmp_path / "systems" / "prompts.jsonl")
    version = store.add({"reporter": DEFAULT_PROMPTS["reporter"] + MARK + "\n"}, source="manual")
    store.add({"reporter": DEFAULT_PROMPTS["reporter"]}, source="manual")  # not the pinned one
    (tmp_path / "systems" / "verifier.yaml").write_text(
        yaml.safe_dump({"verifier": [{"passed": True, "reasoning": "Fine.", "issues": []}]})
    )
    (tmp_path / "systems" / "agents.yaml").write_text(
        yaml.safe_dump(
            [{"name": "analyst", "description": "Sums columns.", "tool_bundles": ["compute"]}]
        )
    )
    (tmp_path / "systems" / "systems.yaml").write_text(
        yaml.safe_dump(
            {
                "systems": [
                    {"name": "lean", "kind": "aimegraph", "config": {"verify": "off"}},
                    {
                        "name": "pinned",
                        "kind": "aimegraph",
                        "config": {"verify": "final"},
                        "prompts": "prompts.jsonl",
                        "prompt_version": version[:8],
                        "models": {
                            "verifier": f"scripted:{tmp_path / 'systems' / 'verifier.yaml'}"
                        },
                        "agents": "agents.yaml",
                    },
                ]
            }
        )
    )
    specs = load_systems([str(tmp_path / "systems" / "systems.yaml")])
    assert specs[1].prompts == str(tmp_path / "systems" / "prompts.jsonl")  # beside the file
    model = Recording()
    result = evaluate(
        suite, model=model, systems=specs, out=tmp_path / "out", tasks=["one"], concurrency=1
    )
    by_system = {r["system"]: r for r in result.records}
    assert all(r["passed"] for r in result.records), [r["failure"] for r in result.records]
    # verify off: no verifier call (nor under the default, for a tool step's answer).
    assert by_system["lean"]["usage"]["llm_calls"] == AIME_CALLS["one"]
    # The verifier's own model, counted under its own name; the rest is the oracle's.
    models = by_system["pinned"]["usage"]["by_model"]
    assert models["scripted:verifier"]["llm_calls"] == 1
    assert models["oracle"]["llm_calls"] == AIME_CALLS["one"]
    lean, pinned = model.models  # one rollout each, in the systems' order
    assert any(MARK in p for p in pinned.prompts("reporter"))
    assert not any(MARK in p for p in lean.prompts("reporter"))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"name": "r", "kind": "create_agent", "config": {"verify": "off"}},
            "config apply to aimegraph",
        ),
        ({"name": "a", "config": {"max_paralel": 2}}, "max_paralel"),
        ({"name": "a", "config": {"workspace": "/tmp"}}, "config.workspace is the eval's"),
        ({"name": "a", "models": {"coder": "local"}}, "unknown model role"),
        ({"name": "a", "prompt_version": "3f2a"}, "prompt_version needs prompts"),
        ({"name": "a", "kind": "langgraph"}, "kind"),
        ({"name": "r", "kind": "create_agent", "guardrails": "m:g"}, "guardrails apply to"),
        ({"name": "a", "guardrails": "no_such_module:g"}, "cannot import guardrails"),
        ({"name": "a", "guardrails": "no_colon"}, "guardrails takes module:attr"),
    ],
)
def test_systems_file_mistakes(tmp_path: Path, spec: dict[str, Any], message: str) -> None:
    path = tmp_path / "systems.yaml"
    path.write_text(yaml.safe_dump([spec]))
    with pytest.raises(SystemsError) as caught:
        load_systems([str(path)])
    assert str(caught.value).startswith(f"{path}: system") and message in str(caught.value)


def test_a_systems_file_yaml_error_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "systems.yaml"
    path.write_text("- name: a\n  config: {verify: off\n- name: b\n")
    with pytest.raises(SystemsError) as caught:
        load_systems([str(path)])
    assert str(caught.value).startswith(f"{path} line 3 column ") and "\n" not in str(caught.value)


shown: list[tuple[str | None, str | None]] = []
"""(tool, goal) of every tool call :func:`goal_recorder`'s guardrails were shown."""


def goal_recorder() -> Guardrail:
    """A fresh tool_input guardrail per rollout, recording what it is shown."""

    @guardrail("tool_input", name="recorder")
    def record(subject: Subject) -> None:
        shown.append((subject.tool, subject.goal))

    return record


def test_a_system_names_its_own_guardrails_made_for_each_rollout(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite", THREE_TASKS)
    spec = SystemSpec(name="guarded", guardrails=f"{__name__}:goal_recorder")
    shown.clear()
    result = evaluate(
        suite, model="oracle", systems=[spec], out=tmp_path / "out", tasks=["one"], k=2
    )
    assert all(r["passed"] for r in result.records)
    # Each rollout's tool step was screened, and the guardrail saw the goal it serves.
    goal = THREE_TASKS[0]["goal"]
    assert shown == [("python", goal), ("python", goal)]
    bad = SystemSpec(name="bad", guardrails=f"{__name__}:MARK")
    with pytest.raises(ValueError, match="must name a Guardrail"):
        system_guardrails(bad)


def test_system_names_are_unique_and_known() -> None:
    with pytest.raises(SystemsError, match="system names repeat: aimegraph"):
        load_systems(["aimegraph", SystemSpec(name="aimegraph", config={"verify": "off"})])
    with pytest.raises(SystemsError, match="unknown system 'react'"):
        load_systems(["react"])


FIXED = UsageMetadata(input_tokens=100, output_tokens=10, total_tokens=110)


@pytest.mark.usefixtures("bubblewrap")  # an eval runs the oracle's python calls there
@pytest.mark.parametrize(
    ("budget", "reason"),
    [
        (Budget(max_tokens=150), "max_tokens (150) reached"),
        (Budget(timeout_s=0.001), "timeout_s (0.001) reached"),
    ],
)
def test_token_and_time_budgets_stop_the_react_loop(
    tmp_path: Path, budget: Budget, reason: str
) -> None:
    suite = write_suite(tmp_path / "suite", THREE_TASKS)
    result = evaluate(
        suite,
        model=OracleModels(usage=FIXED),
        systems=["create_agent"],
        out=tmp_path / "out",
        tasks=["two"],
        budget=budget,
    )
    (record,) = result.records
    assert record["status"] == "budget_exhausted" and reason in record["reason"]
    assert record["usage"]["llm_calls"] < 3 and not record["passed"]


@pytest.mark.usefixtures("bubblewrap")  # an eval runs the oracle's python calls there
def test_a_changed_system_runs_again(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite", THREE_TASKS)
    out = tmp_path / "out"
    evaluate(suite, model="oracle", systems=["aimegraph"], out=out, tasks=["one"])
    verified = SystemSpec(name="aimegraph", config={"verify": "final"})
    again = evaluate(suite, model="oracle", systems=[verified], out=out, tasks=["one"])
    assert (again.ran, again.resumed) == (1, 0)
    assert again.records[0]["usage"]["llm_calls"] == AIME_CALLS["one"] + 1


def test_seeds_go_to_clients_that_take_one() -> None:
    from langchain_openai import ChatOpenAI

    client = ChatOpenAI(model="gpt-4o-mini", api_key="not-needed", base_url="http://127.0.0.1:9")
    copy, applied = seeded(client, 7)
    assert applied and copy.seed == 7 and client.seed is None  # type: ignore[attr-defined]
    scripted = ScriptedChatModel.from_dict({})
    assert seeded(scripted, 7) == (scripted, False)


def test_a_run_that_waits_for_a_human_fails_as_paused(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite", THREE_TASKS)
    asks = SystemSpec(name="asks", config={"approve_plan": True})
    result = evaluate(suite, model="oracle", systems=[asks], out=tmp_path / "out", tasks=["one"])
    (record,) = result.records
    assert record["status"] == "paused" and not record["passed"]
    assert "evals are unattended" in record["failure"]
    assert record["usage"]["llm_calls"] == 1  # the planner, then the pause


# A model that asks the human whenever it is offered one: the first plan names the
# human bundle; a plan without it comes next (the repair when that bundle is unknown),
# and its actor still tries ask_human before working alone.
ASKS_A_HUMAN = {
    "planner": [
        {"rationale": "ask", "tasks": [{"id": "q", "title": "Ask", "tool_bundles": ["human"]}]},
        {
            "rationale": "alone",
            "tasks": [{"id": "q", "title": "Work", "tool_bundles": ["compute"]}],
        },
    ],
    "actors": {
        "q": [
            {"tool": "ask_human", "args": {"question": "Which number?"}},
            {"tool": "calculator", "args": {"expression": "6*7"}},
            {"tool": "submit_result", "args": {"status": "completed", "summary": "42"}},
        ]
    },
    "reporter": [{"text": "The answer is 42."}],
}


def test_an_eval_offers_no_human(tmp_path: Path) -> None:
    """Issue 38: evals are unattended, yet actors were offered ask_human and two of four
    rollouts ended paused. Without the human bundle the rollout works on and passes."""
    task = {"id": "q", "goal": "What is 6 times 7?", "check": {"number": 42}}
    suite = write_suite(tmp_path / "suite", [task])
    models: list[ScriptedChatModel] = []

    def asking(task: Any, kind: str, rollout: int) -> BaseChatModel:
        models.append(ScriptedChatModel.from_dict(ASKS_A_HUMAN))
        return models[-1]

    result = evaluate(suite, model=asking, systems=["aimegraph"], out=tmp_path / "out")
    (record,) = result.records
    assert record["status"] != "paused" and record["passed"], record["failure"]
    (model,) = models
    assert "Ask the human user" not in model.prompts("planner")[0]  # the bundle is not offered


class PromptOnly(BaseChatModel):
    """A model with no native tool calling (it does not override ``bind_tools``) that
    follows JSON-mode instructions: two calculator calls, then the answer (the typed
    answer's tool when one is offered). It keeps the text of every prompt."""

    seen: list[str] = []

    @property
    def _llm_type(self) -> str:
        return "prompt-only"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
    ) -> ChatResult:
        prompt = "\n\n".join(m.text for m in messages)
        self.seen.append(prompt)
        observed = prompt.count("Observation from calculator")
        if observed == 0:
            text = '{"tool": "calculator", "args": {"expression": "6*7"}}'
        elif observed == 1:
            text = 'Next:\n```json\n{"tool": "calculator", "args": {"expression": "42 + 1"}}\n```'
        elif "- Answer:" in prompt:
            text = '{"tool": "Answer", "args": {"total": 43}}'
        else:
            text = '{"tool": "final_answer", "args": {"answer": "The answer is 43."}}'
        reply = AIMessage(text, usage_metadata=FIXED, response_metadata={"model_name": "p"})
        return ChatResult(generations=[ChatGeneration(message=reply)])


JSON_MODE_TASKS = [
    {"id": "text", "goal": "What is 6 times 7, plus 1?", "check": {"number": 43}},
    {
        "id": "typed",
        "goal": "What is 6 times 7, plus 1? Give it as total.",
        "response_format": {"type": "object", "properties": {"total": {"type": "number"}}},
        "check": {"field": "total", "number": 43},
    },
]


def test_a_baseline_gets_json_mode_tools_with_a_model_without_tool_calling(
    tmp_path: Path,
) -> None:
    """Issue 38: with a model that has no native tool calling, create_agent ran with no
    tools while aimegraph described them in the prompt. Now it gets the same JSON mode."""
    suite = write_suite(tmp_path / "suite", JSON_MODE_TASKS)
    model = PromptOnly(seen=[])
    result = evaluate(
        suite, model=model, systems=["create_agent"], out=tmp_path / "out", concurrency=1
    )
    for record in result.records:
        assert record["passed"] and record["status"] == "succeeded", record["failure"]
        assert record["usage"]["llm_calls"] == 3 and record["usage"]["input_tokens"] == 300
    first, second, _, typed_first, _, _ = model.seen
    assert "## How to call tools" in first and "- calculator:" in first
    assert "- final_answer:" in first and "- Answer:" not in first
    assert "Observation from calculator:\n42" in second
    assert "- Answer:" in typed_first and "- final_answer:" not in typed_first
    assert result.records[1]["structured_response"] == {"total": 43}
    assert all(record["tool_calling"] == "json" for record in result.records)
    report = result.report_md.read_text().splitlines()
    (row,) = [line for line in report if line.startswith("| create_agent | create_agent (")]
    assert "| JSON (in the prompt) |" in row


def test_a_grammar_model_baseline_is_forced_to_call_a_bound_tool_or_answer(
    tmp_path: Path,
) -> None:
    """llama.cpp (the bundled Gemma) ignores freely chosen tools: the baseline asks it, as
    aimegraph's actors do, for one forced call of one of its tools or final_answer."""
    from tests.graph.test_grammar_steps import ChatLlamaCpp

    steps = [
        {"tool": "calculator", "args": {"expression": "6*7+1"}},
        {"tool": "final_answer", "args": {"answer": "It is 43."}},
    ]
    model = ChatLlamaCpp(steps=steps)
    suite = write_suite(tmp_path / "suite", JSON_MODE_TASKS[:1])
    result = evaluate(suite, model=model, systems=["create_agent"], out=tmp_path / "out")
    (record,) = result.records
    assert record["passed"] and record["answer"] == "It is 43.", record["failure"]
    first, second = model._asked
    (function,) = first["tools"]
    variants = function["function"]["parameters"]["anyOf"]
    names = {v["properties"]["tool"]["const"] for v in variants}
    assert names == {"read_file", "write_file", "append_file", "list_dir", "calculator"} | {
        "python",
        "final_answer",
    }
    assert "Observation from calculator:\n43" in second["prompt"]
