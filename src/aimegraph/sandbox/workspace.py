"""The workspace: the one definition of where model-driven tools may read and write.

The file tools resolve every path a model passes through :meth:`Workspace.resolve`, which
follows symlinks and refuses anything that ends up outside :attr:`Workspace.root`, then
open it with :meth:`Workspace.open`, which follows no symlink at all on the way: code that
swaps a directory for a symlink between the check and the open (it runs at the same time
in another actor) makes the open fail instead of leading out. The code sandboxes mount
that same ``root``, read-write at its real host path, as the only writable host
directory, so a path means the same file to ``read_file`` and to code, and a symlink that
leads out of the workspace is refused by the one and leads nowhere for the other (the
target is not in the sandbox).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from langchain_core.tools import ToolException

__all__ = ["FileStates", "Workspace", "WorkspaceError"]

FileStates = dict[str, tuple[int, int]]
"""Workspace-relative path -> (modification time in ns, size) of each regular file."""

# A listing this long means a data directory, not files a run just wrote: stop there
# rather than spend the call's time walking it.
_MAX_LISTED_FILES = 10_000


class WorkspaceError(ValueError):
    """The workspace directory cannot be created or written to."""


class Workspace:
    """A directory that file and code tools are confined to.

    Args:
        root: the workspace directory; created (with parents) if missing. Symlinks in
            it are resolved: :attr:`root` is the real path.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WorkspaceError(
                f"cannot create the workspace {self.root}: {exc.strerror}; set "
                "AimeConfig(workspace=...) to a directory you can write to"
            ) from exc
        if not os.access(self.root, os.W_OK):
            raise WorkspaceError(
                f"the workspace {self.root} is not writable; set AimeConfig(workspace=...) "
                "to a directory you can write to"
            )

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def resolve(self, path: str) -> Path:
        """Return the absolute, symlink-free location of ``path`` inside the workspace.

        Relative paths are taken from the root; absolute paths are accepted only when
        they point inside it.

        Raises:
            ToolException: ``path`` contains a NUL byte, or it (or a symlink along it)
                leads outside the workspace.
        """
        if "\0" in path:
            raise ToolException("path contains a NUL byte")
        try:
            resolved = (self.root / path).resolve()
        except (OSError, RuntimeError) as exc:  # symlink loops, over-long names
            raise ToolException(f"cannot resolve '{path}': {exc}") from exc
        if not resolved.is_relative_to(self.root):
            raise ToolException(
                f"'{path}' is outside the workspace; use a path relative to the workspace root"
            )
        return resolved

    def open(self, target: Path, flags: int, *, parents: bool = False) -> int:
        """Open ``target`` (a path :meth:`resolve` returned) and return the descriptor,
        walking from the root one directory at a time without following any symlink.

        Args:
            target: the resolved path.
            flags: ``os.open`` flags (``O_NOFOLLOW`` and ``O_CLOEXEC`` are added).
            parents: create missing directories on the way (for writes).

        Raises:
            OSError: as ``os.open``; ``ELOOP`` or ``NotADirectoryError`` when a part of
                the path is (now) a symlink or a file.
        """
        parts = target.relative_to(self.root).parts
        directory = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            if not parts:
                return os.open(".", flags | os.O_CLOEXEC, dir_fd=directory)
            for part in parts[:-1]:
                if parents:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, dir_fd=directory)
                inner = os.open(
                    part,
                    os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                    dir_fd=directory,
                )
                os.close(directory)
                directory = inner
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=directory)
        finally:
            os.close(directory)

    def display(self, path: Path) -> str:
        """``path`` relative to the root, as shown to the model."""
        return path.relative_to(self.root).as_posix() or "."

    def file_states(self) -> FileStates | None:
        """The regular files under the root (symlinks not followed), or None when
        there are more than can be listed cheaply."""
        states: FileStates = {}
        pending = [self.root]
        while pending:
            try:
                entries = list(os.scandir(pending.pop()))
            except OSError:  # removed meanwhile, or unreadable
                continue
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        info = entry.stat(follow_symlinks=False)
                        relative = Path(entry.path).relative_to(self.root).as_posix()
                        states[relative] = (info.st_mtime_ns, info.st_size)
                except OSError:
                    continue
                if len(states) > _MAX_LISTED_FILES:
                    return None
        return states

    def changed_since(self, before: FileStates | None) -> tuple[str, ...]:
        """Files created or modified since ``before`` was taken, sorted; none known
        when either listing was too long."""
        after = self.file_states()
        if before is None or after is None:
            return ()
        return tuple(sorted(path for path, state in after.items() if before.get(path) != state))
