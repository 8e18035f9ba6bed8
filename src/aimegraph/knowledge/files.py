"""Files into passages for :meth:`aimegraph.knowledge.KnowledgeBase.add_files`: which
files a call names, which of them are new or changed since they were indexed, and
their chunks, each carrying the identity of its file.

A file is identified by its resolved path; a version of it by the SHA-256 of its
bytes. Both go into each chunk's metadata (``source_path``, ``content_sha256``) and
into its id, so a file added again can be found in the index and replaced.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from langchain_core.documents import Document
from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

from aimegraph.knowledge.documents import MARKDOWN_SUFFIXES, SUFFIXES, load_file

__all__ = [
    "CONTENT_HASH",
    "DEFAULT_GLOB",
    "SOURCE_PATH",
    "FileChanges",
    "FilesAdded",
    "IndexedFile",
    "indexed_files",
    "read_changed_files",
]

DEFAULT_GLOB: Final = "**/*.{" + ",".join(suffix.lstrip(".") for suffix in SUFFIXES) + "}"
SOURCE_PATH: Final = "source_path"
"""Metadata of a file's passages: the file's resolved path, which identifies it."""
CONTENT_HASH: Final = "content_sha256"
"""Metadata of a file's passages: the SHA-256 of the bytes they were read from."""
_BRACES = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True)
class FilesAdded:
    """What :meth:`~aimegraph.knowledge.KnowledgeBase.add_files` did.

    ``ids`` are the passages added; ``replaced`` counts the passages removed because
    their file was added again with new content; ``unchanged`` names the files
    already indexed with the same content, which were left as they were."""

    ids: list[str] = field(default_factory=list)
    replaced: int = 0
    unchanged: list[str] = field(default_factory=list)


@dataclass
class IndexedFile:
    """The passages of one file in the index. ``content_hash`` is None when some were
    stored without one (by a version before files had an identity): such a file is
    never taken as unchanged, so adding it again replaces them."""

    content_hash: str | None
    ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FileChanges:
    """The chunks of the new or changed files, and the ids of the passages they replace."""

    chunks: list[Document]
    stale: list[str]
    unchanged: list[str]


def indexed_files(passages: Iterable[tuple[str, Document]]) -> dict[str, IndexedFile]:
    """The files the ``(id, document)`` passages came from, by resolved path."""
    files: dict[str, IndexedFile] = {}
    for passage_id, doc in passages:
        path, content_hash = _file_identity(doc.metadata)
        if path is None:
            continue
        entry = files.setdefault(path, IndexedFile(content_hash))
        if entry.content_hash != content_hash:
            entry.content_hash = None
        entry.ids.append(passage_id)
    return files


def read_changed_files(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    glob: str,
    indexed: dict[str, IndexedFile],
    *,
    chunk_size: int,
    chunk_overlap: int,
) -> FileChanges:
    """Load and chunk the files ``paths`` names that ``indexed`` lacks or holds with
    other content; name those it holds as they are."""
    settings: dict[str, Any] = {
        "chunk_size": chunk_size,
        "chunk_overlap": chunk_overlap,
        "add_start_index": True,
    }
    markdown = RecursiveCharacterTextSplitter.from_language(Language.MARKDOWN, **settings)
    plain = RecursiveCharacterTextSplitter(**settings)
    chunks: list[Document] = []
    stale: list[str] = []
    unchanged: list[str] = []
    for file in _files(paths, glob):
        path = str(file.resolve())
        content_hash = _sha256(file)
        previous = indexed.get(path)
        if previous is not None and previous.content_hash == content_hash:
            unchanged.append(file.as_posix())
            continue
        splitter = markdown if file.suffix.lower() in MARKDOWN_SUFFIXES else plain
        chunks.extend(_identified(splitter.split_documents(load_file(file)), path, content_hash))
        if previous is not None:
            stale.extend(previous.ids)
    return FileChanges(chunks, stale, unchanged)


def _expand_braces(pattern: str) -> list[str]:
    """``"**/*.{md,txt}"`` -> ``["**/*.md", "**/*.txt"]``; pathlib globs lack braces."""
    match = _BRACES.search(pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [
        expanded
        for option in match.group(1).split(",")
        for expanded in _expand_braces(head + option + tail)
    ]


def _files(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], glob: str
) -> list[Path]:
    """The files named, and those under the directories named that match ``glob``;
    a file reached twice (named, and under a directory named) counts once."""
    roots = [Path(paths)] if isinstance(paths, str | os.PathLike) else [Path(p) for p in paths]
    files: list[Path] = []
    for root in roots:
        if root.is_dir():
            matches = {f for pattern in _expand_braces(glob) for f in root.glob(pattern)}
            files.extend(sorted(f for f in matches if f.is_file()))
        elif root.is_file():
            files.append(root)
        else:
            raise FileNotFoundError(f"no such file or directory: {root}")
    unique: dict[Path, Path] = {}
    for file in files:
        unique.setdefault(file.resolve(), file)
    return list(unique.values())


def _sha256(file: Path) -> str:
    with file.open("rb") as data:
        return hashlib.file_digest(data, "sha256").hexdigest()


def _identified(chunks: list[Document], path: str, content_hash: str) -> list[Document]:
    """The chunks of one file with its identity in their metadata and stable ids (from
    the file's path and content, so the ids of one version never clash with another's)."""
    prefix = f"{hashlib.sha256(path.encode()).hexdigest()[:16]}-{content_hash[:16]}"
    for number, chunk in enumerate(chunks):
        chunk.metadata |= {SOURCE_PATH: path, CONTENT_HASH: content_hash}
        chunk.id = f"{prefix}-{number}"
    return chunks


def _file_identity(metadata: dict[str, Any]) -> tuple[str | None, str | None]:
    """(resolved path, content hash) of the file a passage came from, if it came from
    one. Passages ``add_files`` stored before it recorded these (they have a ``source``
    and a ``start_index``) are matched by their source, resolved, without a hash."""
    if SOURCE_PATH in metadata:
        return str(metadata[SOURCE_PATH]), metadata.get(CONTENT_HASH)
    source = metadata.get("source")
    if isinstance(source, str) and "start_index" in metadata:
        return str(Path(source).resolve()), None
    return None, None
