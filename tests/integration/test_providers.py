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
from tests.provider_stubs import AnthropicWire, OllamaWire, ProviderStub, Wire

from aimegraph.models import ScriptedChatModel

ANSWER = "Answer: six times seven is the product is 42"


def _stub(wire: Wire) -> Iterator[ProviderStub]:
    with ProviderStub(
        wire, ScriptedChatModel.from_scenario(str(SCENARIOS / "two_tasks.yaml"))
    ) as s:
        yield s


@pytest.fixture
def anthropic_stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderStub]:
    for stub in _stub(AnthropicWire()):
        monkeypatch.delenv("ANTHROPIC_API_URL", raising=False)  # it would win over the base URL
        monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        yield stub


@pytest.fixture
def ollama_stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderStub]:
    for stub in _stub(OllamaWire()):
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
    # The plan and the verdict were forced tool calls; the actor chose its tools freely.
    forced = [r["tool_choice"]["name"] for r in requests if r.get("tool_choice", {}).get("name")]
    assert "PlanUpdate" in forced
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
