"""Knowledge retrieval: a FAISS-backed knowledge base and offline embeddings."""

from aimegraph.knowledge.base import (
    FilesAdded,
    KnowledgeBase,
    KnowledgeBaseFormatError,
    Passage,
    format_passages,
)
from aimegraph.knowledge.embeddings import HashingEmbeddings

__all__ = [
    "FilesAdded",
    "HashingEmbeddings",
    "KnowledgeBase",
    "KnowledgeBaseFormatError",
    "Passage",
    "format_passages",
]
