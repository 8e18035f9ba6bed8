"""The ``knowledge_search`` tool over a :class:`~aimegraph.knowledge.KnowledgeBase`."""

from __future__ import annotations

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from aimegraph.knowledge import KnowledgeBase, format_passages

__all__ = ["format_passages", "make_knowledge_search_tool"]

# More passages than this rarely help and quickly fill the context window.
_MAX_K = 20


class _KnowledgeSearchInput(BaseModel):
    query: str = Field(description="What to look for, in a few words or a question.")
    k: int | None = Field(
        default=None, ge=1, le=_MAX_K, description="Number of passages to return."
    )


def make_knowledge_search_tool(kb: KnowledgeBase, *, k: int = 4) -> BaseTool:
    """Build the ``knowledge_search`` tool; ``k`` is the default number of passages."""
    # The tool's own argument is also called k.
    default_k = k

    def knowledge_search(query: str, k: int | None = None) -> str:
        if not query.strip():
            raise ToolException("the query is empty; say what you are looking for")
        return format_passages(kb.search(query, k=k or default_k))

    return StructuredTool.from_function(
        func=knowledge_search,
        name="knowledge_search",
        description=(
            "Search the knowledge base for passages relevant to a query. Returns numbered "
            "passages with their source (file, and page for PDFs, sheet and row for "
            "spreadsheets: cite them) and a relevance score (cosine similarity, higher "
            "is better)."
        ),
        args_schema=_KnowledgeSearchInput,
    )
