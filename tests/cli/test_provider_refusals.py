"""A model that cannot answer is refused before a run starts, whichever entry point
starts it: ``aimegraph run`` and ``aimegraph eval --model`` exit 2 with one line, the
dashboard's start answers 400 with it, and no thread is stored. The line names the API
key's variable, or the server's address and the variable that sets it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import Cli

KEY_LINE = "error: model 'anthropic:claude-x' needs an API key: set ANTHROPIC_API_KEY"


@pytest.fixture
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_URL", "OLLAMA_HOST"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 nobody listens on (bound, never listening: refused)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]


def _run(cli: Cli, model: str) -> tuple[int, list[str]]:
    code, text = cli("run", "Say hi", "--model", model, "--workspace", str(cli.workspace))
    return code, text.strip().splitlines()


@pytest.mark.usefixtures("no_provider_env")
def test_run_without_the_providers_key_exits_2_naming_it_and_stores_nothing(cli: Cli) -> None:
    code, lines = _run(cli, "anthropic:claude-x")
    assert (code, lines) == (2, [KEY_LINE])
    assert cli.json("threads") == (0, [])


@pytest.mark.usefixtures("no_provider_env")
def test_run_with_no_ollama_server_exits_2_naming_its_address_and_variable(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", f"http://127.0.0.1:{closed_port}")
    code, lines = _run(cli, "ollama:llama3")
    assert code == 2 and len(lines) == 1, lines
    assert lines[0] == (
        f"error: model 'ollama:llama3': no server answers at 127.0.0.1:{closed_port} "
        "(Connection refused); start it, or set OLLAMA_HOST to its address"
    )
    assert cli.json("threads") == (0, [])


def test_run_with_a_misspelt_provider_says_which_it_may_mean(cli: Cli) -> None:
    code, lines = _run(cli, "antropic:claude")
    assert code == 2 and len(lines) == 1, lines
    assert "unknown model provider 'antropic'" in lines[0]
    assert "(did you mean 'anthropic'?)" in lines[0]
    assert cli.json("threads") == (0, [])


@pytest.mark.usefixtures("no_provider_env")
def test_eval_with_a_model_that_has_no_key_exits_2_before_any_rollout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("langchain.agents", reason="create_agent needs the [eval] extra")
    from tests.eval.helpers import THREE_TASKS, write_suite

    from aimegraph.cli import main
    from aimegraph.eval.harness import RESULTS

    suite = write_suite(tmp_path / "suite", THREE_TASKS)
    out = tmp_path / "out"
    argv = ["eval", str(suite), "--model", "anthropic:claude-x", "--out", str(out)]
    code = main(["--checkpoints", "memory", *argv])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.strip().splitlines() == [KEY_LINE]
    assert not (out / RESULTS).exists()


@pytest.mark.usefixtures("no_provider_env")
def test_the_dashboards_start_answers_400_with_the_line_and_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("starlette", reason="the [dashboard] extra is not installed")
    from starlette.testclient import TestClient

    from aimegraph.checkpoints import list_threads, open_checkpointer
    from aimegraph.dashboard import create_app
    from aimegraph.dashboard.runs import RunManager

    monkeypatch.chdir(tmp_path)  # where run workspaces go
    with open_checkpointer(f"sqlite:///{tmp_path / 'cp.db'}") as saver:
        client = TestClient(create_app(saver, runs=RunManager(saver)), base_url="http://127.0.0.1")
        answer = client.post("/api/runs", json={"goal": "Say hi", "model": "anthropic:claude-x"})
        assert answer.status_code == 400
        assert answer.json() == {"error": KEY_LINE.removeprefix("error: ")}
        assert list_threads(saver) == []
