"""Issue 30: choosing the sandbox. Confined by default, never silently unconfined (a
one-line refusal naming what to install and the opt-out), the opt-out warns on every
call, a sandbox of one's own plugs in, and ``shell`` is an opt-in bundle."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from langchain_core.tools import ToolException
from pydantic import ValidationError

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.sandbox import (
    BubblewrapSandbox,
    SandboxUnavailable,
    UnconfinedSandbox,
    open_sandbox,
)
from aimegraph.sandbox import bubblewrap as bubblewrap_module
from aimegraph.tools import make_python_tool
from aimegraph.tools.registry import ToolRegistryError, default_registry, registry_for

from .custom import RecordingSandbox


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host without bubblewrap: ``bwrap`` is on no PATH."""
    monkeypatch.setenv("PATH", "/nonexistent")


def test_the_default_is_the_bubblewrap_sandbox() -> None:
    assert isinstance(open_sandbox(), BubblewrapSandbox)
    assert isinstance(open_sandbox(AimeConfig().sandbox), BubblewrapSandbox)
    networked = open_sandbox("auto", network=True)
    assert isinstance(networked, BubblewrapSandbox) and networked.network


@pytest.mark.usefixtures("no_bwrap")
def test_without_bubblewrap_the_python_tool_refuses_in_one_line(tmp_path: Path) -> None:
    python = make_python_tool(tmp_path)
    with pytest.raises(ToolException) as info:
        python.invoke({"code": "open('pwned', 'w')"})
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("python cannot run: bubblewrap (bwrap) is not installed")
    assert "apt-get install bubblewrap" in message
    assert 'AimeConfig(sandbox="none")' in message
    assert not (tmp_path / "pwned").exists()


@pytest.mark.usefixtures("no_bwrap")
def test_an_explicit_bubblewrap_setting_fails_the_build(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="bwrap"):
        build_aime_graph(
            "scripted:demo", config=AimeConfig(workspace=tmp_path, sandbox="bubblewrap")
        )
    # "auto" builds: only code calls are refused.
    build_aime_graph("scripted:demo", config=AimeConfig(workspace=tmp_path))


@pytest.mark.skipif(
    __import__("os").getuid() != 0, reason="the pids cgroup is how root's jobs are bounded"
)
def test_as_root_without_a_pids_cgroup_the_sandbox_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bubblewrap_module, "pids_cgroup_parent", lambda: None)
    bubblewrap_module._probe.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="pids cgroup"):
            BubblewrapSandbox().check()
    finally:
        bubblewrap_module._probe.cache_clear()


def test_the_opt_out_warns_on_every_call(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    python = make_python_tool(tmp_path, sandbox=open_sandbox("none"))
    with caplog.at_level(logging.WARNING, logger="aimegraph.sandbox"):
        assert python.invoke({"code": "print(1)"}) == "1"
        assert python.invoke({"code": "print(2)"}) == "2"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert all("UNCONFINED" in w for w in warnings)
    assert "UNCONFINED" in UnconfinedSandbox().check()


def test_config_checks_the_sandbox_setting() -> None:
    with pytest.raises(ValidationError, match="sandbox must be one of auto, bubblewrap, none"):
        AimeConfig(sandbox="docker")
    assert AimeConfig(sandbox="myapp.sandboxes:docker").sandbox == "myapp.sandboxes:docker"
    with pytest.raises(ValidationError):
        AimeConfig(opt_in_bundles=("web",))  # type: ignore[arg-type]
    # Tools are made when the graph is built: a per-run change would be ignored, so it is refused.
    for field, value in (("sandbox", "none"), ("sandbox_network", True)):
        with pytest.raises(ValueError, match="apply when the graph is built"):
            AimeConfig().override({field: value})


def test_a_sandbox_of_ones_own_plugs_in(
    tmp_path: Path, scripted_graph: object, caplog: pytest.LogCaptureFixture
) -> None:
    RecordingSandbox.jobs.clear()
    scenario = {
        "goal": "Compute six times seven.",
        "planner": [{"rationale": "one step", "tasks": [{"id": "t1", "title": "Compute", "tool_bundles": ["compute"]}]}],
        "actors": {
            "t1": [
                {"tool": "python", "args": {"code": "print(6 * 7)"}},
                {"tool": "submit_result", "args": {"status": "completed", "summary": "{last_tool_output}"}},
            ]
        },
        "reporter": [{"text": "{result:t1}"}],
        "verifier": [{"passed": True, "reasoning": "ok", "issues": []}],
    }  # fmt: skip
    graph, _ = scripted_graph(scenario, sandbox="tests.sandbox.custom:RecordingSandbox")  # type: ignore[operator]
    out = graph.invoke({"goal": scenario["goal"]})
    assert out["final_answer"] == "42"
    assert [(job.language, job.source) for job in RecordingSandbox.jobs] == [
        ("python", "print(6 * 7)")
    ]


def test_a_sandbox_spec_must_name_a_sandbox() -> None:
    with pytest.raises(ValueError, match="is not a sandbox"):
        open_sandbox("tests.sandbox.custom:NOT_A_SANDBOX")
    with pytest.raises(ValueError, match="cannot import the sandbox"):
        open_sandbox("tests.sandbox.custom:Missing")
    assert isinstance(open_sandbox("tests.sandbox.custom:RecordingSandbox"), RecordingSandbox)


def test_shell_is_an_opt_in_bundle(tmp_path: Path) -> None:
    plain = registry_for(AimeConfig(workspace=tmp_path))
    assert "shell" not in plain.tools and "shell" not in plain.bundles
    config = AimeConfig(
        workspace=tmp_path, opt_in_bundles=("shell",), approve_tools=("python", "shell")
    )
    assert registry_for(config).bundles["shell"].tools == ("shell",)
    build_aime_graph("scripted:demo", config=config)
    with pytest.raises(ToolRegistryError, match="unknown opt-in bundles"):
        default_registry(tmp_path, opt_in=["web"])


def test_the_code_tools_share_the_runs_sandbox(tmp_path: Path) -> None:
    RecordingSandbox.jobs.clear()
    registry = default_registry(tmp_path, sandbox=RecordingSandbox(), opt_in=["shell"])
    assert registry.tools["python"].invoke({"code": "print(1)"}) == "1"
    assert registry.tools["shell"].invoke({"command": "echo 2"}) == "2"
    assert [job.language for job in RecordingSandbox.jobs] == ["python", "shell"]
    assert {job.workspace.root for job in RecordingSandbox.jobs} == {tmp_path.resolve()}


def test_code_and_file_tools_mean_the_same_workspace(
    tmp_path: Path, bubblewrap: BubblewrapSandbox
) -> None:
    """One jail: given through a symlink, the workspace is its real path for the file
    tools, for the code's working directory and for the sandbox's mount."""
    from aimegraph.tools import make_file_tools

    (tmp_path / "real").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real", target_is_directory=True)
    python = make_python_tool(link, sandbox=bubblewrap)
    read_file = make_file_tools(link)[0]
    assert python.invoke({"code": "import os; print(os.getcwd())"}) == str(tmp_path / "real")
    python.invoke({"code": "open('made.txt', 'w').write('by code')"})
    assert read_file.invoke({"path": "made.txt"}) == "by code"
    assert read_file.invoke({"path": str(tmp_path / "real" / "made.txt")}) == "by code"


@pytest.mark.usefixtures("no_bwrap")
def test_the_demo_refuses_up_front_naming_the_opt_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from aimegraph.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["--checkpoints", "memory", "demo"]) == 2
    error = capsys.readouterr().err
    assert "bubblewrap (bwrap) is not installed" in error
    assert "aimegraph demo --sandbox none" in error
    assert not list(tmp_path.glob(".aimegraph/workspace/*/report.md"))


def test_a_sandbox_bubblewrap_cannot_build_is_a_refusal_not_a_failed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bubblewrap: BubblewrapSandbox
) -> None:
    """bwrap's own errors (here: a mount source that vanished) are not the code's."""
    monkeypatch.setattr(bubblewrap_module, "python_installation", lambda: (tmp_path / "vanished",))
    python = make_python_tool(tmp_path / "ws", sandbox=bubblewrap)
    with pytest.raises(ToolException, match="bubblewrap could not create the sandbox: .*vanished"):
        python.invoke({"code": "open('ran', 'w')"})
    assert not (tmp_path / "ws" / "ran").exists()
