"""A small FAISS-backed knowledge base with pickle-free persistence."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

if TYPE_CHECKING:
    from langchain_community.vectorstores import FAISS

from aimegraph.knowledge.embeddings import (
    EmbeddingsSpec,
    HashingEmbeddings,
    MiniLMEmbeddings,
    resolve_embeddings,
)
from aimegraph.knowledge.files import (
    DEFAULT_GLOB,
    FilesAdded,
    IndexedFile,
    indexed_files,
    read_changed_files,
)

__all__ = [
    "FilesAdded",
    "KnowledgeBase",
    "KnowledgeBaseFormatError",
    "Passage",
    "format_passages",
]

FORMAT_NAME: Final = "aimegraph-knowledge-base"
FORMAT_VERSION: Final = 1
MANIFEST_FILE = "manifest.json"
INDEX_FILE = "index.faiss"
DOCUMENTS_FILE = "documents.json"
_PROBE_TEXT = "dimension check"


class Passage(BaseModel):
    """A retrieved chunk of text.

    ``score`` is the cosine similarity between the query and the passage, in [-1, 1]
    (higher is more relevant). ``source``, ``page``, ``sheet`` and ``row`` are the
    chunk's metadata of those names, if any: the file, the PDF page (1-based), the
    workbook sheet and the spreadsheet row (see :mod:`aimegraph.knowledge.documents`).
    """

    model_config = ConfigDict(frozen=True)

    text: str
    source: str | None = None
    score: float
    page: int | None = None
    sheet: str | None = None
    row: int | None = None

    @property
    def citation(self) -> str:
        """Where the passage comes from, e.g. ``report.pdf, page 3``."""
        parts = [self.source or "knowledge base"]
        if self.page is not None:
            parts.append(f"page {self.page}")
        if self.sheet is not None:
            parts.append(f"sheet {self.sheet}")
        if self.row is not None:
            parts.append(f"row {self.row}")
        return ", ".join(parts)


def format_passages(passages: list[Passage]) -> str:
    """Render passages as numbered blocks with their citation (source, and the page,
    sheet and row where known) and score."""
    if not passages:
        return "no passages found"
    return "\n\n".join(
        f"[{number}] source: {passage.citation} (score {passage.score:.3f})\n{passage.text}"
        for number, passage in enumerate(passages, start=1)
    )


class KnowledgeBaseFormatError(ValueError):
    """A directory is not a knowledge base this version can load, or does not fit the
    embeddings it is loaded with."""


class _Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["aimegraph-knowledge-base"]
    version: Literal[1]
    dim: int | None = Field(ge=1)
    count: int = Field(ge=0)
    embeddings: str


class _StoredDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    text: str
    metadata: dict[str, Any]


_STORED_DOCUMENTS = TypeAdapter(list[_StoredDocument])


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class KnowledgeBase:
    """Passages searchable by meaning, stored in a FAISS inner-product index.

    Vectors are L2-normalised before they reach the index, so scores are cosine
    similarities whatever the embeddings return. Any LangChain
    :class:`~langchain_core.embeddings.Embeddings` can be plugged in; the default,
    :class:`HashingEmbeddings`, works offline.

    Security: :meth:`save` and :meth:`load` never pickle or unpickle anything. The
    index is written in FAISS's own binary format and the documents, their ids and a
    manifest (format version, dimension, embeddings class) as JSON, so loading a
    directory from an untrusted source cannot execute code. (LangChain's
    ``FAISS.save_local`` / ``load_local`` pickle the docstore and are not used.)

    Args:
        embeddings: the embedding model, or its name (``"hashing"``, ``"minilm"``);
            ``HashingEmbeddings()`` when omitted.
    """

    def __init__(self, embeddings: EmbeddingsSpec = None) -> None:
        self.embeddings: Embeddings = resolve_embeddings(embeddings)
        # Created by the first add, when the embedding dimension becomes known.
        self._store: FAISS | None = None

    def __len__(self) -> int:
        return 0 if self._store is None else int(self._store.index.ntotal)

    def __repr__(self) -> str:
        return f"KnowledgeBase({len(self)} passages, embeddings={self.embeddings!r})"

    @property
    def dim(self) -> int | None:
        """The embedding dimension, or None before anything was added."""
        return None if self._store is None else int(self._store.index.d)

    def _normalised(self, vectors: list[list[float]]) -> NDArray[np.float32]:
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2:
            raise ValueError("the embeddings returned vectors of different lengths")
        if self.dim is not None and matrix.shape[1] != self.dim:
            raise KnowledgeBaseFormatError(
                f"the embeddings give {matrix.shape[1]}-dimensional vectors but the index "
                f"holds {self.dim}-dimensional ones; use the embeddings it was built with"
            )
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        # Zero vectors (texts with no features) cannot be normalised; leave them at zero.
        normalised: NDArray[np.float32] = np.divide(
            matrix, norms, out=np.zeros_like(matrix), where=norms > 0
        )
        return normalised

    def _new_store(self, index: Any, documents: dict[str, Document], ids: list[str]) -> FAISS:
        # FAISS (the library and LangChain's store) loads with the first knowledge base,
        # not with the engine, which only refers to this class.
        from langchain_community.docstore.in_memory import InMemoryDocstore
        from langchain_community.vectorstores import FAISS
        from langchain_community.vectorstores.utils import DistanceStrategy

        return FAISS(
            embedding_function=self.embeddings,
            index=index,
            docstore=InMemoryDocstore(documents),
            index_to_docstore_id=dict(enumerate(ids)),
            distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT,
        )

    def add_texts(
        self, texts: Iterable[str], metadatas: list[dict[str, Any]] | None = None
    ) -> list[str]:
        """Embed and add ``texts`` (with optional per-text metadata); return their ids."""
        texts = list(texts)
        if metadatas is not None and len(metadatas) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(metadatas)} metadatas")
        return self._replace(texts, metadatas)

    def _replace(
        self,
        texts: list[str],
        metadatas: list[dict[str, Any]] | None,
        ids: list[str] | None = None,
        stale: list[str] | None = None,
    ) -> list[str]:
        """Add ``texts`` (under ``ids`` if given) in place of the passages ``stale``.

        Everything is embedded before anything is removed, so embeddings that fail
        leave the knowledge base as it was."""
        if not texts and not stale:
            return []
        vectors = self._normalised(self.embeddings.embed_documents(texts)) if texts else None
        if self._store is not None and stale:
            self._store.delete(stale)
        if vectors is None:
            return []
        if self._store is None:
            import faiss

            self._store = self._new_store(faiss.IndexFlatIP(vectors.shape[1]), {}, [])
        # Copies, so later changes to the caller's dicts do not alter stored passages.
        copies = None if metadatas is None else [dict(m) for m in metadatas]
        return self._store.add_embeddings(
            list(zip(texts, vectors.tolist(), strict=True)), metadatas=copies, ids=ids
        )

    def add_documents(self, documents: Iterable[Document]) -> list[str]:
        """Add LangChain documents, keeping their metadata; return their ids."""
        documents = list(documents)
        return self.add_texts(
            [doc.page_content for doc in documents], [doc.metadata for doc in documents]
        )

    def add_files(
        self,
        paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
        glob: str = DEFAULT_GLOB,
        *,
        chunk_size: int = 1000,
        chunk_overlap: int = 150,
    ) -> FilesAdded:
        """Load, chunk and add documents; a file added again replaces its passages.

        Args:
            paths: files, or directories searched with ``glob``. Files named directly
                are added whatever their name (unknown suffixes are read as text,
                with a warning; binary ones are refused).
            glob: pattern relative to each directory; ``{a,b}`` alternatives allowed.
                The default takes every format :mod:`aimegraph.knowledge.documents`
                reads: PDF, HTML, DOCX, CSV, XLSX, Markdown and text.
            chunk_size: largest chunk, in characters.
            chunk_overlap: characters shared by consecutive chunks.

        A file is identified by its resolved path: added again with the same content
        (SHA-256 of its bytes) it is left as it is (``unchanged``); with new content
        its passages are removed from the index and the new ones added
        (``replaced``). Passages added before files were identified this way are
        matched by their ``source`` and replaced.

        Each chunk's metadata holds ``source`` (the file path, as given),
        ``source_path`` (resolved), ``content_sha256``, ``start_index`` (its
        character offset in its document) and, where the format has them, ``page``
        (PDF), ``sheet`` and ``row`` (spreadsheets): a chunk never spans two pages.
        Markdown (and HTML, converted to Markdown) is split at headings first.
        Every file is read before anything is added, so a file that cannot be read
        (:class:`~aimegraph.knowledge.documents.DocumentLoadError`, or an
        ``ImportError`` naming the missing extra) leaves the knowledge base unchanged.
        """
        changes = read_changed_files(
            paths,
            glob,
            self._indexed_files(),
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
        )
        ids = self._replace(
            [chunk.page_content for chunk in changes.chunks],
            [chunk.metadata for chunk in changes.chunks],
            ids=[str(chunk.id) for chunk in changes.chunks],
            stale=changes.stale,
        )
        return FilesAdded(ids=ids, replaced=len(changes.stale), unchanged=changes.unchanged)

    def _indexed_files(self) -> dict[str, IndexedFile]:
        if self._store is None:
            return {}
        ids = list(self._store.index_to_docstore_id.values())
        return indexed_files(zip(ids, self._store.get_by_ids(ids), strict=True))

    def search(self, query: str, k: int = 4) -> list[Passage]:
        """The ``k`` passages most similar to ``query``, best first ([] when empty).

        A text found more than once (a file indexed twice by an older version, or
        copies of one file) is returned once, with its best score."""
        if k < 1:
            raise ValueError("k must be at least 1")
        if self._store is None or not len(self):
            return []
        vector = self._normalised([self.embeddings.embed_query(query)])[0].tolist()
        return [
            Passage(
                text=doc.page_content,
                score=float(score),
                **{key: doc.metadata.get(key) for key in ("source", "page", "sheet", "row")},
            )
            for doc, score in _distinct_hits(self._store, vector, k)
        ]

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write the knowledge base to ``directory`` (created if needed) without pickle.

        The manifest is written last, so an interrupted save is never loadable.
        """
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        stored: list[dict[str, Any]] = []
        if self._store is not None:
            # Row i of the index is the document mapped to position i.
            ids = [self._store.index_to_docstore_id[row] for row in range(len(self))]
            stored = [
                {"id": doc_id, "text": doc.page_content, "metadata": doc.metadata}
                for doc_id, doc in zip(ids, self._store.get_by_ids(ids), strict=True)
            ]
            import faiss

            faiss.write_index(self._store.index, str(target / INDEX_FILE))
        try:
            payload = json.dumps(stored, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"document metadata must be JSON-serialisable: {exc}") from exc
        (target / DOCUMENTS_FILE).write_text(payload, encoding="utf-8")
        manifest = _Manifest(
            format=FORMAT_NAME,
            version=FORMAT_VERSION,
            dim=self.dim,
            count=len(stored),
            embeddings=_class_name(type(self.embeddings)),
        )
        partial = target / f"{MANIFEST_FILE}.tmp"
        partial.write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
        partial.replace(target / MANIFEST_FILE)

    @classmethod
    def load(
        cls, directory: str | os.PathLike[str], embeddings: EmbeddingsSpec = None
    ) -> KnowledgeBase:
        """Load a knowledge base written by :meth:`save`; nothing is unpickled.

        Args:
            directory: the directory :meth:`save` wrote.
            embeddings: the embeddings the knowledge base was built with. May be
                omitted when those were built in (hashing or MiniLM).

        Raises:
            KnowledgeBaseFormatError: the manifest is missing or invalid, the files
                disagree with it, or ``embeddings`` is of another class or dimension
                than the one the index was built with.
        """
        source = Path(directory)
        manifest = _read_manifest(source)
        if embeddings is None and manifest.embeddings == _class_name(MiniLMEmbeddings):
            embeddings = "minilm"
        if isinstance(embeddings, str):
            embeddings = resolve_embeddings(embeddings)
        if embeddings is None:
            if manifest.embeddings != _class_name(HashingEmbeddings):
                raise KnowledgeBaseFormatError(
                    f"{source} was built with {manifest.embeddings}; pass an instance of it "
                    "as embeddings="
                )
            embeddings = (
                HashingEmbeddings() if manifest.dim is None else HashingEmbeddings(dim=manifest.dim)
            )
        elif _class_name(type(embeddings)) != manifest.embeddings:
            raise KnowledgeBaseFormatError(
                f"{source} was built with {manifest.embeddings}, not "
                f"{_class_name(type(embeddings))}; vectors from different embeddings are not "
                "comparable"
            )
        kb = cls(embeddings)
        documents = _read_documents(source, manifest.count)
        if manifest.dim is None:
            if documents:
                raise KnowledgeBaseFormatError(f"{source}: documents present but no dimension")
            return kb
        import faiss

        try:
            index = faiss.read_index(str(source / INDEX_FILE))
        except RuntimeError as exc:
            raise KnowledgeBaseFormatError(f"{source}: cannot read {INDEX_FILE}: {exc}") from exc
        if (
            index.d != manifest.dim
            or index.ntotal != manifest.count
            or index.metric_type != faiss.METRIC_INNER_PRODUCT
        ):
            raise KnowledgeBaseFormatError(
                f"{source}: {INDEX_FILE} (dim {index.d}, {index.ntotal} vectors) does not match "
                f"the manifest (dim {manifest.dim}, {manifest.count} documents)"
            )
        kb._store = kb._new_store(
            index,
            {
                doc.id: Document(id=doc.id, page_content=doc.text, metadata=doc.metadata)
                for doc in documents
            },
            [doc.id for doc in documents],
        )
        # Fail now rather than at the first search if the embeddings do not fit.
        kb._normalised([embeddings.embed_query(_PROBE_TEXT)])
        return kb


def _distinct_hits(store: FAISS, vector: list[float], k: int) -> list[tuple[Document, float]]:
    """The ``k`` best hits with distinct texts, best first: asks FAISS for more while
    repeats leave fewer than ``k``."""
    size = int(store.index.ntotal)
    fetch = k
    while True:
        distinct: dict[str, tuple[Document, float]] = {}
        for doc, score in store.similarity_search_with_score_by_vector(vector, k=fetch):
            distinct.setdefault(doc.page_content, (doc, score))
        if len(distinct) >= k or fetch >= size:
            return list(distinct.values())[:k]
        fetch = min(2 * fetch, size)


def _read_manifest(directory: Path) -> _Manifest:
    path = directory / MANIFEST_FILE
    if not path.is_file():
        raise KnowledgeBaseFormatError(
            f"{directory} is not a saved knowledge base: {MANIFEST_FILE} is missing"
        )
    try:
        return _Manifest.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        raise KnowledgeBaseFormatError(
            f"{path} is not a valid {FORMAT_NAME} version {FORMAT_VERSION} manifest: {exc}"
        ) from exc


def _read_documents(directory: Path, count: int) -> list[_StoredDocument]:
    path = directory / DOCUMENTS_FILE
    try:
        documents = _STORED_DOCUMENTS.validate_json(path.read_bytes())
    except (OSError, ValidationError) as exc:
        raise KnowledgeBaseFormatError(f"{directory}: cannot read {DOCUMENTS_FILE}: {exc}") from exc
    if len(documents) != count:
        raise KnowledgeBaseFormatError(
            f"{directory}: {DOCUMENTS_FILE} holds {len(documents)} documents, "
            f"the manifest says {count}"
        )
    if len({doc.id for doc in documents}) != count:
        raise KnowledgeBaseFormatError(f"{directory}: {DOCUMENTS_FILE} repeats document ids")
    return documents
