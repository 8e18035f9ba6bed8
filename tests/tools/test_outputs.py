"""Issue 25 point 5: a tool output longer than ``max_observation_chars`` is kept whole in
the workspace and shown as head, path and tail; the actor reads the rest in pieces."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import PrivateAttr

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models.offline.scripted import ScriptedChatModel
from aimegraph.sandbox import open_sandbox
from aimegraph.tools import make_python_tool
from aimegraph.tools.outputs import CUT_AT, keep_whole
from tests.scripted import plan

TEXT = "".join(f"{n:05d} " + "abcdefghij" * 4 + "\n" for n in range(2_500))[:100_000]


@tool
def big_report() -> str:
    """A 100,000-character report."""
    return TEXT


class PagingReader(BaseChatModel):
    """An actor model that does what the note of a kept output says, as a real model
    would: finds the path and piece size in the note, reads the whole output back
    with ``read_file`` piece by piece from offset 0, and submits a digest of it."""

    _pieces: list[str] = PrivateAttr(default_factory=list)
    _observations: list[str] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "paging-reader"

    def bind_tools(self, tools: Any, **kwargs: Any) -> PagingReader:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        observations = [m.text for m in messages if isinstance(m, ToolMessage)]
        self._observations = observations
        if not observations:
            return _call("big_report", {})
        note = re.search(r"saved as '([^']+)'.*?limit=(\d+)", observations[0], re.S)
        assert note, observations[0][:2000]
        path, limit = note.group(1), int(note.group(2))
        if len(observations) > 1:
            piece, _, more = observations[-1].partition("\n[truncated: showed characters")
            self._pieces.append(piece)
            following = re.search(r"offset=(\d+) to read more", more)
            if following is None:
                text = "".join(self._pieces)
                digest = hashlib.sha256(text.encode()).hexdigest()
                summary = f"read {len(text)} characters in {len(self._pieces)} pieces: {digest}"
                return _call("submit_result", {"status": "completed", "summary": summary})
            offset = int(following.group(1))
        else:
            offset = 0
        return _call("read_file", {"path": path, "offset": offset, "limit": limit})


def _call(name: str, args: dict[str, Any]) -> AIMessage:
    call_id = f"call_{name}_{args.get('offset', 0)}"
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def test_a_100000_character_output_is_read_back_in_pieces(workspace: Path) -> None:
    planner = ScriptedChatModel.from_dict(
        {"planner": [plan({"id": "a", "title": "Read", "tool_bundles": ["custom", "files"]})]}
    )
    reader = PagingReader()
    limit = 20_000
    config = AimeConfig(workspace=workspace, max_observation_chars=limit, verify="off")
    graph = build_aime_graph(planner, models={"actor": reader}, tools=[big_report], config=config)
    out = graph.invoke({"goal": "Read the whole report."})
    summary = out["tasks"]["a"].result.summary
    digest = hashlib.sha256(TEXT.encode()).hexdigest()
    assert summary == f"read 100000 characters in 6 pieces: {digest}"
    # No observation was longer than the limit; the first showed head and tail.
    assert max(len(o) for o in reader._observations) <= limit
    first = reader._observations[0]
    assert first.startswith(TEXT[:1000]) and first.endswith(TEXT[-1000:])
    assert (workspace / ".tool_outputs" / "call_big_report_0.txt").read_text() == TEXT


def test_without_read_file_the_note_says_who_can_read_it(tmp_path: Path) -> None:
    message = ToolMessage(content="y" * 5000, tool_call_id="call/1", name="t")
    shown = keep_whole(message, limit=1000, workspace=tmp_path, can_read=False)
    assert len(shown.text) <= 1000
    assert "saved as '.tool_outputs/call_1.txt'" in shown.text
    assert "an actor with the files bundle can read it" in shown.text
    # A model reusing a call id gets a second file, not an overwritten first.
    again = keep_whole(message, limit=1000, workspace=tmp_path, can_read=True)
    assert "saved as '.tool_outputs/call_1-2.txt'" in again.text
    assert "read_file(path='.tool_outputs/call_1-2.txt', offset=" in again.text


def test_text_blocks_are_kept_and_other_content_is_left_alone(tmp_path: Path) -> None:
    blocks = [{"type": "text", "text": "a" * 3000}, {"type": "text", "text": "b" * 3000}]
    shown = keep_whole(
        ToolMessage(content=blocks, tool_call_id="c", name="t"),  # type: ignore[arg-type]
        limit=1000,
        workspace=tmp_path,
        can_read=True,
    )
    assert (tmp_path / ".tool_outputs" / "c.txt").read_text() == "a" * 3000 + "b" * 3000
    assert shown.text.startswith("a") and shown.text.endswith("b")
    image = [{"type": "image", "base64": "x" * 5000, "mime_type": "image/png"}]
    message = ToolMessage(content=image, tool_call_id="d", name="t")  # type: ignore[arg-type]
    assert keep_whole(message, limit=1000, workspace=tmp_path, can_read=True) is message


def test_an_unwritable_workspace_falls_back_to_cutting(tmp_path: Path) -> None:
    blocker = tmp_path / "ws"
    blocker.write_text("a file where the workspace should be")
    message = ToolMessage(content="z" * 3000, tool_call_id="c", name="t")
    shown = keep_whole(message, limit=1000, workspace=blocker, can_read=True)
    assert shown.text == "z" * 1000 + "\n[... output truncated: showing 1000 of 3000 characters]"


def test_an_output_cut_at_the_code_tools_cap_is_saved_as_cut(tmp_path: Path) -> None:
    """Issue 38, point 2: past the code tool's cap the output is cut before it is kept,
    so the note must not say the whole output is saved (the sandbox is not the point:
    unconfined)."""
    python = make_python_tool(tmp_path, sandbox=open_sandbox("none"), max_output_chars=3_000)
    call = {
        "name": "python",
        "args": {"code": "print('w' * 10_000)"},
        "id": "c",
        "type": "tool_call",
    }
    result = python.invoke(call)
    assert isinstance(result, ToolMessage) and result.artifact == {CUT_AT: 3_000}
    shown = keep_whole(result, limit=1000, workspace=tmp_path, can_read=True)
    assert "The output as cut at the cap of 3,000 characters (its beginning and end)" in shown.text
    assert "whole output" not in shown.text
    saved = (tmp_path / ".tool_outputs" / "c.txt").read_text()
    assert saved == result.text and "[... output cut here: " in saved

    # Under the cap nothing was cut: the tool's result has no artifact, the note says whole.
    call["args"] = {"code": "print('w' * 2_000)"}
    uncut = python.invoke(call)
    assert uncut.artifact is None
    shown = keep_whole(uncut, limit=1000, workspace=tmp_path, can_read=True)
    assert "The whole output is saved as '.tool_outputs/c-2.txt'" in shown.text
