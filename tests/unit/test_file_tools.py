"""The workspace jail and the file tools built on it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langchain_core.tools import BaseTool, ToolException

from aimegraph.sandbox import Workspace
from aimegraph.tools.files import make_file_tools


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws")


@pytest.fixture
def tools(ws: Workspace) -> dict[str, BaseTool]:
    return {tool.name: tool for tool in make_file_tools(ws, max_read_chars=50, max_write_chars=100)}


def test_workspace_is_created(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "a" / "b")
    assert ws.root.is_dir()
    assert ws.root == (tmp_path / "a" / "b").resolve()


def test_tool_names_and_args(tools: dict[str, BaseTool]) -> None:
    assert set(tools) == {"read_file", "write_file", "append_file", "list_dir"}
    assert set(tools["read_file"].args) == {"path", "offset", "limit"}
    assert set(tools["write_file"].args) == {"path", "content"}
    assert set(tools["append_file"].args) == {"path", "content"}
    assert set(tools["list_dir"].args) == {"path"}


def test_resolve_inside(ws: Workspace) -> None:
    assert ws.resolve("a/b.txt") == ws.root / "a" / "b.txt"
    assert ws.resolve("a/../b.txt") == ws.root / "b.txt"
    assert ws.resolve(".") == ws.root
    assert ws.resolve(str(ws.root / "c.txt")) == ws.root / "c.txt"


@pytest.mark.parametrize("path", ["../x", "a/../../x", "..", "/etc/passwd", "/"])
def test_resolve_refuses_escapes(ws: Workspace, path: str) -> None:
    with pytest.raises(ToolException, match="outside the workspace"):
        ws.resolve(path)


def test_resolve_refuses_sibling_with_common_prefix(tmp_path: Path, ws: Workspace) -> None:
    # A plain string-prefix check would accept "ws-evil" as inside "ws".
    (tmp_path / "ws-evil").mkdir()
    with pytest.raises(ToolException, match="outside the workspace"):
        ws.resolve(str(tmp_path / "ws-evil" / "x"))
    with pytest.raises(ToolException, match="outside the workspace"):
        ws.resolve("../ws-evil/x")


def test_resolve_refuses_nul_byte(ws: Workspace, tools: dict[str, BaseTool]) -> None:
    with pytest.raises(ToolException, match="NUL byte"):
        ws.resolve("a\0b")
    with pytest.raises(ToolException, match="NUL byte"):
        tools["write_file"].invoke({"path": "a\0.txt", "content": "x"})


def test_symlink_escape_is_refused(ws: Workspace, tools: dict[str, BaseTool]) -> None:
    (ws.root / "etc_link").symlink_to("/etc")
    (ws.root / "passwd_link").symlink_to("/etc/passwd")
    for path in ("etc_link/passwd", "passwd_link", "etc_link"):
        with pytest.raises(ToolException, match="outside the workspace"):
            ws.resolve(path)
    with pytest.raises(ToolException, match="outside the workspace"):
        tools["read_file"].invoke({"path": "passwd_link"})
    with pytest.raises(ToolException, match="outside the workspace"):
        tools["list_dir"].invoke({"path": "etc_link"})
    with pytest.raises(ToolException, match="outside the workspace"):
        tools["write_file"].invoke({"path": "etc_link/evil.conf", "content": "x"})


def test_dangling_symlink_to_outside_cannot_be_written(
    tmp_path: Path, ws: Workspace, tools: dict[str, BaseTool]
) -> None:
    target = tmp_path / "outside.txt"
    (ws.root / "trap").symlink_to(target)
    with pytest.raises(ToolException, match="outside the workspace"):
        tools["write_file"].invoke({"path": "trap", "content": "x"})
    assert not target.exists()


def test_symlinked_dir_inside_workspace_works(ws: Workspace, tools: dict[str, BaseTool]) -> None:
    (ws.root / "real").mkdir()
    (ws.root / "real" / "f.txt").write_text("hello")
    (ws.root / "alias").symlink_to(ws.root / "real", target_is_directory=True)
    assert tools["read_file"].invoke({"path": "alias/f.txt"}) == "hello"
    assert tools["list_dir"].invoke({"path": "alias"}) == "f.txt  (5 bytes)"
    assert "'real/g.txt'" in tools["write_file"].invoke({"path": "alias/g.txt", "content": "x"})


def test_write_read_append(ws: Workspace, tools: dict[str, BaseTool]) -> None:
    message = tools["write_file"].invoke({"path": "notes/a.txt", "content": "line 1\n"})
    assert message == "wrote 7 characters to 'notes/a.txt'"
    assert str(ws.root) not in message
    assert tools["append_file"].invoke({"path": "notes/a.txt", "content": "línea 2\n"}) == (
        "appended 8 characters to 'notes/a.txt'"
    )
    assert (ws.root / "notes" / "a.txt").read_text(encoding="utf-8") == "line 1\nlínea 2\n"
    assert tools["read_file"].invoke({"path": "notes/a.txt"}) == "line 1\nlínea 2\n"
    tools["write_file"].invoke({"path": "notes/a.txt", "content": "new"})
    assert tools["read_file"].invoke({"path": "./notes/../notes/a.txt"}) == "new"


def test_append_creates_missing_file(ws: Workspace, tools: dict[str, BaseTool]) -> None:
    tools["append_file"].invoke({"path": "log/x.txt", "content": "a"})
    tools["append_file"].invoke({"path": "log/x.txt", "content": "b"})
    assert (ws.root / "log" / "x.txt").read_text() == "ab"


def test_write_size_cap(ws: Workspace, tools: dict[str, BaseTool]) -> None:
    tools["write_file"].invoke({"path": "ok.txt", "content": "x" * 100})
    for name in ("write_file", "append_file"):
        with pytest.raises(ToolException, match="101 characters, the limit per call is 100"):
            tools[name].invoke({"path": "big.txt", "content": "x" * 101})
    assert not (ws.root / "big.txt").exists()


def test_read_truncates_and_continues_with_offset(
    ws: Workspace, tools: dict[str, BaseTool]
) -> None:
    text = "".join(f"{i:02d}" for i in range(60))  # 120 characters
    (ws.root / "long.txt").write_text(text)
    first = tools["read_file"].invoke({"path": "long.txt"})
    assert first.startswith(text[:50] + "\n[truncated")
    assert "offset=50" in first
    second = tools["read_file"].invoke({"path": "long.txt", "offset": 50})
    assert second.startswith(text[50:100] + "\n[truncated")
    assert "offset=100" in second
    assert tools["read_file"].invoke({"path": "long.txt", "offset": 100}) == text[100:]
    assert (
        tools["read_file"]
        .invoke({"path": "long.txt", "offset": 5, "limit": 4})
        .startswith(text[5:9] + "\n[truncated")
    )
    # A limit above the cap is capped.
    assert (
        tools["read_file"].invoke({"path": "long.txt", "limit": 1000}).startswith(text[:50] + "\n")
    )
    assert "past the end" in tools["read_file"].invoke({"path": "long.txt", "offset": 500})


def test_read_exactly_at_cap_is_not_truncated(ws: Workspace, tools: dict[str, BaseTool]) -> None:
    (ws.root / "fifty.txt").write_text("y" * 50)
    assert tools["read_file"].invoke({"path": "fifty.txt"}) == "y" * 50
    (ws.root / "empty.txt").write_text("")
    assert tools["read_file"].invoke({"path": "empty.txt"}) == "['empty.txt' is empty]"


def test_read_errors(ws: Workspace, tools: dict[str, BaseTool]) -> None:
    (ws.root / "d").mkdir()
    (ws.root / "bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ToolException, match="file not found: 'missing.txt'"):
        tools["read_file"].invoke({"path": "missing.txt"})
    with pytest.raises(ToolException, match="'d' is a directory"):
        tools["read_file"].invoke({"path": "d"})
    with pytest.raises(ToolException, match="binary file"):
        tools["read_file"].invoke({"path": "bin"})
    with pytest.raises(ToolException, match="'d' is a directory"):
        tools["write_file"].invoke({"path": "d", "content": "x"})


def test_fifo_is_refused_instead_of_blocking(ws: Workspace, tools: dict[str, BaseTool]) -> None:
    os.mkfifo(ws.root / "pipe")
    with pytest.raises(ToolException, match="not a regular file"):
        tools["read_file"].invoke({"path": "pipe"})
    with pytest.raises(ToolException, match="not a regular file"):
        tools["write_file"].invoke({"path": "pipe", "content": "x"})


def test_list_dir(ws: Workspace, tools: dict[str, BaseTool]) -> None:
    (ws.root / "b_dir").mkdir()
    (ws.root / "a.txt").write_text("abc")
    (ws.root / "c.md").write_text("")
    (ws.root / "out").symlink_to("/etc")
    assert tools["list_dir"].invoke({}) == "a.txt  (3 bytes)\nb_dir/\nc.md  (0 bytes)\nout@"
    assert tools["list_dir"].invoke({"path": "b_dir"}) == "'b_dir' is empty"
    with pytest.raises(ToolException, match="directory not found: 'nope'"):
        tools["list_dir"].invoke({"path": "nope"})
    with pytest.raises(ToolException, match="'a.txt' is a file"):
        tools["list_dir"].invoke({"path": "a.txt"})


def test_accepts_plain_path(tmp_path: Path) -> None:
    tools = {tool.name: tool for tool in make_file_tools(tmp_path / "plain")}
    tools["write_file"].invoke({"path": "x.txt", "content": "hi"})
    assert (tmp_path / "plain" / "x.txt").read_text() == "hi"


class _SwappingWorkspace(Workspace):
    """A workspace where, between a path's check and its use, other code (a sandboxed
    program running in another actor) swaps the directory ``d`` for a symlink out."""

    outside: Path

    def resolve(self, path: str) -> Path:
        target = super().resolve(path)
        if (self.root / "d").is_dir() and not (self.root / "d").is_symlink():
            for child in (self.root / "d").iterdir():
                child.unlink()
            (self.root / "d").rmdir()
            (self.root / "d").symlink_to(self.outside, target_is_directory=True)
        return target


@pytest.mark.parametrize("tool", ["read_file", "write_file", "append_file", "list_dir"])
def test_a_directory_swapped_for_a_symlink_after_the_check_leads_nowhere(
    tmp_path: Path, tool: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.txt").write_text("SECRET")
    ws = _SwappingWorkspace(tmp_path / "ws")
    ws.outside = outside
    (ws.root / "d").mkdir()
    (ws.root / "d" / "x.txt").write_text("inside")
    args = {"path": "d" if tool == "list_dir" else "d/x.txt"}
    if tool in ("write_file", "append_file"):
        args["content"] = "pwned"
    tools = {t.name: t for t in make_file_tools(ws)}
    with pytest.raises(ToolException) as info:
        tools[tool].invoke(args)
    assert "SECRET" not in str(info.value)
    assert (outside / "x.txt").read_text() == "SECRET"
