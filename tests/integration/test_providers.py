"""Whole runs through providers other than OpenAI, offline: ``aimegraph run --model
anthropic:claude-x`` (and ``ollama:...``) with the provider's real LangChain client
pointed at a local server that speaks its API (see :mod:`tests.provider_stubs`).

The stub answers from the two-task scenario the other CLI tests use, so the run must
end as theirs does: a plan, a calculator call whose result comes back as a tool result,
a dependent task, the reporter's answer and a passing verdict, every reply having
crossed the provider's wire format."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import SCENARIOS, Cli
from tests.provider_stubs import AnthropicWire, OllamaWire, ProviderStub

from aimegraph.models import ScriptedChatModel

ANSWER = "Answer: six times seven is the product is 42"


def _two_tasks() -> ScriptedChatModel:
    return ScriptedChatModel.from_scenario(str(SCENARIOS / "two_tasks.yaml"))


@pytest.fixture
def scripted() -> ScriptedChatModel:
    """The scenario every stub of a test answers from (one run, whichever stub is asked)."""
    return _two_tasks()


@pytest.fixture
def anthropic_stub(
    monkeypatch: pytest.MonkeyPatch, scripted: ScriptedChatModel
) -> Iterator[ProviderStub]:
    with ProviderStub(AnthropicWire(), scripted) as stub:
        monkeypatch.delenv("ANTHROPIC_API_URL", raising=False)  # it would win over the base URL
        monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        yield stub


@pytest.fixture
def ollama_stub(
    monkeypatch: pytest.MonkeyPatch, scripted: ScriptedChatModel
) -> Iterator[ProviderStub]:
    with ProviderStub(OllamaWire(), scripted) as stub:
        monkeypatch.setenv("OLLAMA_HOST", stub.url)
        yield stub


def assert_two_task_run(code: int, summary: dict[str, Any]) -> None:
    assert code == 0, summary
    assert summary["status"] == "succeeded"
    assert summary["final_answer"] == ANSWER
    assert summary["tasks"]["t1"]["result"]["summary"] == "the product is 42"
    assert summary["usage"]["llm_calls"] == 6
    # The token counts came back in the provider's own usage fields.
    assert summary["usage"]["input_tokens"] > 0 and summary["usage"]["output_tokens"] > 0


def test_a_whole_run_over_the_anthropic_messages_api(
    cli: Cli, anthropic_stub: ProviderStub
) -> None:
    code, summary = cli.run("claude", model="anthropic:claude-x")
    assert_two_task_run(code, summary)

    requests = anthropic_stub.requests
    assert {r["model"] for r in requests} == {"claude-x"}
    assert all(r["system"] and r["max_tokens"] > 0 for r in requests)
    # The verdict and the plan were forced tool calls (the planner is bound the plan
    # schema alone by default: planner_tools=False); the actor chose its tools freely.
    forced = [r["tool_choice"]["name"] for r in requests if r.get("tool_choice", {}).get("name")]
    assert {"Verdict", "PlanUpdate"} <= set(forced)
    planner = [r for r in requests if r.get("tool_choice", {}).get("name") == "PlanUpdate"]
    assert [t["name"] for t in planner[0]["tools"]] == ["PlanUpdate"]
    assert any("calculator" in {t["name"] for t in r.get("tools", [])} for r in requests)
    results = [
        block
        for r in requests
        for turn in r["messages"]
        if isinstance(turn["content"], list)
        for block in turn["content"]
        if block["type"] == "tool_result"
    ]
    assert any("42" in str(block["content"]) for block in results)
    assert not any(r.get("stream") for r in requests)  # --json: whole replies


def test_a_streamed_run_over_the_anthropic_messages_api(
    cli: Cli, anthropic_stub: ProviderStub
) -> None:
    code, out = cli(
        "run", "Multiply six by seven", "--model", "anthropic:claude-x", "--stream",
        "--thread", "streamed", "--workspace", str(cli.workspace),
    )  # fmt: skip
    assert code == 0, out
    assert ANSWER in out and "succeeded" in out
    # Every reply came as server-sent events (LangGraph streams each model call).
    assert anthropic_stub.requests and all(r["stream"] for r in anthropic_stub.requests)


def test_a_whole_run_over_the_ollama_chat_api(cli: Cli, ollama_stub: ProviderStub) -> None:
    code, summary = cli.run("llama", model="ollama:llama3.2:1b")
    assert_two_task_run(code, summary)

    requests = ollama_stub.requests
    assert {r["model"] for r in requests} == {"llama3.2:1b"}
    assert all(r["stream"] for r in requests)  # ChatOllama always streams (NDJSON)
    # Structured replies are asked for with a JSON schema in `format` (Ollama's own way).
    assert any(isinstance(r.get("format"), dict) for r in requests)
    tool_turns = [t for r in requests for t in r["messages"] if t["role"] == "tool"]
    assert any("42" in t["content"] for t in tool_turns)


# --------------------------------------------------------------------------- resilience

CHAIN = "anthropic:claude-x,ollama:llama3.2:1b"
NO_CLIENT_RETRIES = ("--config", '{"model_retries": 0}')  # one request per call


def test_a_fallback_chain_survives_a_rate_limit_and_a_server_error(
    cli: Cli, anthropic_stub: ProviderStub, ollama_stub: ProviderStub
) -> None:
    # The first provider refuses the plan (429) and the next call (500): the second
    # answers those two; the first answers the rest.
    anthropic_stub.failures = [429, 500]
    code, summary = cli.run("fallback", *NO_CLIENT_RETRIES, model=CHAIN)
    assert_two_task_run(code, summary)

    assert len(ollama_stub.requests) == 2
    assert len(anthropic_stub.requests) == 2 + 4
    by_model = summary["usage"]["by_model"]
    assert set(by_model) == {"claude-x", "llama3.2:1b"}
    assert by_model["llama3.2:1b"]["llm_calls"] == 2
    assert by_model["claude-x"]["llm_calls"] == 4
    assert all(share["input_tokens"] > 0 for share in by_model.values())
    code, text = cli("show", "fallback")
    assert code == 0 and "by model:" in text
    assert "claude-x: 4 LLM calls" in text and "llama3.2:1b: 2 LLM calls" in text


def test_a_fallback_chain_answers_when_the_first_provider_always_fails(
    cli: Cli, anthropic_stub: ProviderStub, ollama_stub: ProviderStub
) -> None:
    anthropic_stub.fail_always = 503
    code, summary = cli.run("down", *NO_CLIENT_RETRIES, model=CHAIN)
    assert_two_task_run(code, summary)
    assert len(anthropic_stub.requests) == len(ollama_stub.requests) == 6
    assert set(summary["usage"]["by_model"]) == {"llama3.2:1b"}


def test_a_bad_request_does_not_fall_through(
    cli: Cli, anthropic_stub: ProviderStub, ollama_stub: ProviderStub
) -> None:
    # A 400 is the caller's mistake: another provider would not fix it.
    anthropic_stub.fail_always = 400
    code, summary = cli.run("bad", *NO_CLIENT_RETRIES, model=CHAIN)
    assert code != 0 and summary["status"] == "failed"
    assert anthropic_stub.requests and not ollama_stub.requests


def test_a_second_identical_run_is_answered_from_the_model_cache(
    cli: Cli, anthropic_stub: ProviderStub, tmp_path: Path
) -> None:
    # Without memory, the second run's prompts do not recall the first run.
    cache = ("--model-cache", str(tmp_path / "replies.db"), "--config", '{"memory": "off"}')
    code, first = cli.run("cached-1", *cache, model="anthropic:claude-x")
    assert_two_task_run(code, first)
    sent = len(anthropic_stub.requests)
    assert sent == 6

    code, second = cli.run("cached-2", *cache, model="anthropic:claude-x")
    assert code == 0, second
    assert len(anthropic_stub.requests) == sent  # not one request more
    assert second["final_answer"] == first["final_answer"]
    assert second["usage"]["llm_calls"] == first["usage"]["llm_calls"]


@pytest.mark.parametrize(
    ("spec", "module", "package"),
    [
        ("anthropic:claude-x", "langchain_anthropic", "anthropic"),
        # Without it init_chat_model would fall back to langchain-community's ChatOllama.
        ("ollama:llama3.2", "langchain_ollama", "ollama"),
    ],
    ids=["anthropic", "ollama"],
)
@pytest.mark.parametrize(
    ("entry", "prefix"),
    [
        ("from aimegraph.cli import main; sys.exit(main(ARGS))", "error: "),
        (
            "from aimegraph.models import resolve_model, ModelSpecError\n"
            "try: resolve_model(SPEC)\n"
            "except ModelSpecError as exc: print(exc, file=sys.stderr); sys.exit(2)",
            "",
        ),
    ],
    ids=["cli", "python"],
)
def test_a_missing_provider_package_is_one_line_naming_it(
    tmp_path: Path, spec: str, module: str, package: str, entry: str, prefix: str
) -> None:
    args = ["--checkpoints", f"sqlite:///{tmp_path / 'cp.db'}", "run", "Hi"]
    args += ["--model", spec, "--workspace", str(tmp_path / "ws")]
    script = (
        "import sys\n"
        f"sys.modules[{module!r}] = None  # as if it were not installed\n"
        f"SPEC, ARGS = {spec!r}, {args!r}\n{entry}\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"{prefix}model {spec!r} needs the package langchain-{package}: "
        f"pip install 'aimegraph[{package}]'"
    ]
