"""File tools jailed to a workspace directory.

Every path an LLM passes in is resolved by :meth:`Workspace.resolve`
(:mod:`aimegraph.sandbox.workspace`, the jail the code sandboxes share), which follows
symlinks and refuses anything that ends up outside the workspace root, then opened
by :meth:`Workspace.open`, which follows no symlink: a directory swapped for a
symlink between the check and the open (by code running in another actor) makes
the call fail instead of leading out.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from aimegraph.sandbox.workspace import Workspace

__all__ = ["make_file_tools"]

# A listing longer than this would flood the context without helping the model.
_MAX_LIST_ENTRIES = 1_000
# Unread text is skipped in pieces so a large offset does not load the whole file.
_SKIP_CHUNK_CHARS = 1 << 20


class _ReadFileInput(BaseModel):
    path: str = Field(description="File path relative to the workspace root.")
    offset: int = Field(default=0, ge=0, description="Character offset to start reading at.")
    limit: int | None = Field(
        default=None, ge=1, description="Maximum number of characters to read."
    )


class _WriteFileInput(BaseModel):
    path: str = Field(description="File path relative to the workspace root.")
    content: str = Field(description="Text to write.")


class _ListDirInput(BaseModel):
    path: str = Field(default=".", description="Directory path relative to the workspace root.")


def make_file_tools(
    workspace: Workspace | str | Path,
    *,
    max_read_chars: int = 100_000,
    max_write_chars: int = 1_000_000,
) -> list[BaseTool]:
    """Build the ``read_file``, ``write_file``, ``append_file`` and ``list_dir`` tools.

    Args:
        workspace: the directory the tools are confined to.
        max_read_chars: most characters one ``read_file`` call returns; longer reads
            are truncated with a note giving the offset to continue from.
        max_write_chars: most characters one ``write_file`` or ``append_file`` call
            accepts.
    """
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)

    def existing_file(path: str) -> tuple[int, str]:
        """An open descriptor of the regular file ``path`` and its name as shown."""
        target = ws.resolve(path)
        shown = ws.display(target)
        try:
            # Non-blocking: opening a FIFO would otherwise wait for a writer.
            fd = ws.open(target, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError as exc:
            raise ToolException(f"file not found: '{shown}'") from exc
        except OSError as exc:
            raise ToolException(f"cannot open '{shown}': {exc.strerror}") from exc
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            if stat.S_ISDIR(mode):
                raise ToolException(f"'{shown}' is a directory; use list_dir")
            raise ToolException(f"'{shown}' is not a regular file")
        return fd, shown

    def read_file(path: str, offset: int = 0, limit: int | None = None) -> str:
        fd, shown = existing_file(path)
        size = min(limit or max_read_chars, max_read_chars)
        with open(fd, encoding="utf-8", errors="replace", newline="") as handle:
            remaining = offset
            while remaining:
                skipped = len(handle.read(min(remaining, _SKIP_CHUNK_CHARS)))
                if not skipped:
                    break
                remaining -= skipped
            # One extra character tells whether anything is left after this read.
            text = handle.read(size + 1)
        if "\0" in text:
            raise ToolException(f"'{shown}' looks like a binary file; read_file reads text only")
        if not text:
            # An empty observation would leave the model guessing what happened.
            if offset:
                return f"[offset {offset} is at or past the end of '{shown}']"
            return f"['{shown}' is empty]"
        if len(text) <= size:
            return text
        end = offset + size
        return (
            f"{text[:size]}\n[truncated: showed characters {offset}-{end} of '{shown}'; "
            f"call read_file with path='{shown}', offset={end} to read more]"
        )

    def check_content(content: str) -> None:
        if len(content) > max_write_chars:
            raise ToolException(
                f"content is {len(content)} characters, the limit per call is "
                f"{max_write_chars}; write the first part, then add the rest with append_file"
            )

    def save(path: str, content: str, mode: int) -> Path:
        check_content(content)
        target = ws.resolve(path)
        shown = ws.display(target)
        try:
            # Non-blocking: opening a FIFO would otherwise wait for a reader.
            fd = ws.open(target, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | mode, parents=True)
        except IsADirectoryError as exc:
            raise ToolException(f"'{shown}' is a directory") from exc
        except (FileExistsError, NotADirectoryError) as exc:
            raise ToolException(f"cannot create '{shown}': a parent path is a file") from exc
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # a FIFO without a reader
                raise ToolException(f"'{shown}' is not a regular file") from exc
            raise ToolException(f"cannot write '{shown}': {exc.strerror}") from exc
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ToolException(f"'{shown}' is not a regular file")
        with open(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(content)
        return target

    def write_file(path: str, content: str) -> str:
        target = save(path, content, os.O_TRUNC)
        return f"wrote {len(content)} characters to '{ws.display(target)}'"

    def append_file(path: str, content: str) -> str:
        target = save(path, content, os.O_APPEND)
        return f"appended {len(content)} characters to '{ws.display(target)}'"

    def list_dir(path: str = ".") -> str:
        directory = ws.resolve(path)
        shown = ws.display(directory)
        try:
            fd = ws.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError as exc:
            raise ToolException(f"directory not found: '{shown}'") from exc
        except NotADirectoryError as exc:
            raise ToolException(f"'{shown}' is a file; use read_file") from exc
        except OSError as exc:
            raise ToolException(f"cannot list '{shown}': {exc.strerror}") from exc
        try:
            with os.scandir(fd) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
            if not entries:
                return f"'{shown}' is empty"
            lines = [_describe(entry) for entry in entries[:_MAX_LIST_ENTRIES]]
        finally:
            os.close(fd)
        if len(entries) > _MAX_LIST_ENTRIES:
            lines.append(f"[... {len(entries) - _MAX_LIST_ENTRIES} more entries not shown]")
        return "\n".join(lines)

    return [
        StructuredTool.from_function(
            func=read_file,
            name="read_file",
            description=(
                "Read a text file from the workspace. Long files are returned in pieces of "
                f"at most {max_read_chars} characters; continue with the offset the note gives."
            ),
            args_schema=_ReadFileInput,
        ),
        StructuredTool.from_function(
            func=write_file,
            name="write_file",
            description=(
                "Create or overwrite a text file in the workspace (parent directories are "
                f"created). At most {max_write_chars} characters per call."
            ),
            args_schema=_WriteFileInput,
        ),
        StructuredTool.from_function(
            func=append_file,
            name="append_file",
            description=(
                "Append text to a file in the workspace, creating it if missing. "
                f"At most {max_write_chars} characters per call."
            ),
            args_schema=_WriteFileInput,
        ),
        StructuredTool.from_function(
            func=list_dir,
            name="list_dir",
            description=(
                "List a workspace directory: directories end with '/', files show their "
                "size, symlinks end with '@'."
            ),
            args_schema=_ListDirInput,
        ),
    ]


def _describe(entry: os.DirEntry[str]) -> str:
    # Symlinks are not followed: their target may be outside the workspace.
    if entry.is_symlink():
        return f"{entry.name}@"
    if entry.is_dir(follow_symlinks=False):
        return f"{entry.name}/"
    return f"{entry.name}  ({entry.stat(follow_symlinks=False).st_size} bytes)"
