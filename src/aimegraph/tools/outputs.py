"""Tool outputs too long for an observation: kept whole in the workspace, shown in part.

Past ``max_observation_chars`` the whole output is written to
``<workspace>/.tool_outputs/<call id>.txt`` and the observation is its head, a note
with the file's path and how to read on (``read_file`` with ``offset`` and ``limit``),
and its tail, within the same limit. Nothing is lost: the actor reads the rest in
pieces when it needs it. Without a workspace, or when the file cannot be written, the
output is cut to the limit as before, and the note says so. An output its tool had
already cut at a cap (a code tool's ``max_output_chars``: :data:`CUT_AT` in its
artifact) is saved as it came, and the note says it is the cut output, up to that cap.
"""

from __future__ import annotations

import logging
import re
import uuid
from pathlib import Path

from langchain_core.messages import ToolMessage

__all__ = ["CUT_AT", "KEPT_FILE", "OUTPUTS_DIR", "fits", "keep_whole"]

log = logging.getLogger(__name__)

OUTPUTS_DIR = ".tool_outputs"
"""The workspace directory long outputs are kept in."""

KEPT_FILE = "aimegraph_output_file"
"""The key of a kept output's ``response_metadata`` holding its file's path (relative
to the workspace): a tool step hands it on as its result's ``output_file`` artifact."""

CUT_AT = "aimegraph_output_cut_at"
"""The key of a tool result's artifact (``content_and_artifact`` tools) holding the cap,
in characters, its output was cut at before the tool returned it."""

READER = "read_file"
"""The file tool the note tells the actor to read a kept output with."""


def fits(message: ToolMessage, limit: int) -> bool:
    """Whether ``message`` is shown as it is (:func:`keep_whole` would leave it)."""
    text = _text_of(message)
    return text is None or len(text) <= limit


def keep_whole(
    message: ToolMessage, *, limit: int, workspace: Path | None, can_read: bool
) -> ToolMessage:
    """``message`` as an observation of at most about ``limit`` characters; a longer
    text output is saved whole in ``workspace`` (when given) and shown as head, note
    and tail. ``can_read``: whether the actor has ``read_file`` to read on with."""
    text = _text_of(message)
    if text is None or len(text) <= limit:
        return message
    saved = _save(text, message.tool_call_id, workspace) if workspace is not None else None
    if saved is None:
        note = f"\n[... output truncated: showing {limit} of {len(text)} characters]"
        return message.model_copy(update={"content": text[:limit] + note})
    total, cut_at = len(text), _cut_at(message)
    # The note's numbers are at most as long as the total: measure it with that.
    room = max(limit - len(_note(saved, total, total, total, limit, can_read, cut_at)), 0)
    head = room * 2 // 3
    tail = total - (room - head)
    note = _note(saved, total, head, tail, limit, can_read, cut_at)
    return message.model_copy(
        update={
            "content": f"{text[:head]}{note}{text[tail:]}",
            "response_metadata": {**message.response_metadata, KEPT_FILE: saved},
        }
    )


def _text_of(message: ToolMessage) -> str | None:
    """The output's text: a string, or content blocks that are all text (as MCP
    tools return); None for other content (images), which is left alone."""
    if isinstance(message.content, str):
        return message.content
    blocks = message.content
    if all(isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text") for b in blocks):
        return "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in blocks)
    return None


def _cut_at(message: ToolMessage) -> int | None:
    """The cap the tool cut the output at before returning it, when it did."""
    artifact = message.artifact
    cap = artifact.get(CUT_AT) if isinstance(artifact, dict) else None
    return cap if isinstance(cap, int) else None


def _save(text: str, call_id: str | None, workspace: Path) -> str | None:
    """Write ``text`` to a new file under the workspace's outputs directory; its path
    relative to the workspace, or None when it cannot be written."""
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", call_id or "")[:80].strip(".") or uuid.uuid4().hex
    directory = workspace / OUTPUTS_DIR
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for n in range(1, 1000):  # an id a model reuses (call_0) gets a new file each time
            name = f"{stem}.txt" if n == 1 else f"{stem}-{n}.txt"
            try:
                with (directory / name).open("x", encoding="utf-8", newline="") as handle:
                    handle.write(text)
            except FileExistsError:
                continue
            return f"{OUTPUTS_DIR}/{name}"
    except OSError as exc:
        log.warning("could not keep a long tool output in %s: %s", directory, exc)
    return None


def _note(
    path: str, total: int, start: int, end: int, limit: int, can_read: bool, cut_at: int | None
) -> str:
    """Between head and tail: what is left out, where the whole is (or, for an output
    its tool cut at ``cut_at``, what was kept of it), how to read it. A piece of
    ``limit`` less room for ``read_file``'s own note fits in an observation."""
    piece = max(limit - 250, 100)
    how = (
        f"read on in pieces with {READER}(path='{path}', offset={start}, limit={piece}), "
        "then the next offsets"
        if can_read
        else "an actor with the files bundle can read it"
    )
    saved = (
        "The whole output is saved"
        if cut_at is None
        else f"The output as cut at the cap of {cut_at:,} characters (its beginning and end) "
        "is saved, not more"
    )
    return (
        f"\n\n[... the output has {total} characters, more than one observation holds: "
        f"characters {start} to {end} are left out here. {saved} as '{path}'; {how}.]\n\n"
    )
