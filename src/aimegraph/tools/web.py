"""The opt-in ``web`` bundle: ``fetch_url``, and ``web_search`` when a search tool is
configured (``AimeConfig.web``, see :class:`~aimegraph.config.WebConfig`).

``fetch_url`` gets a page under the policy of :mod:`aimegraph.tools.http_guard` and
returns readable text: HTML through trafilatura (main content, as Markdown or plain
text), PDF through the knowledge base's document loader (pypdf, page by page), text
formats as they are. ``web_search`` is any LangChain search tool (Tavily, DuckDuckGo,
SearxNG...), renamed so prompts and plans can count on the name.
"""

from __future__ import annotations

import functools
from typing import Final, Literal

import httpx
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from aimegraph.config import WebConfig
from aimegraph.imports import import_object
from aimegraph.knowledge.documents import TextFormat, html_to_text, pdf_documents, require
from aimegraph.tools.http_guard import Fetched, guarded_get

__all__ = ["WEB_BUNDLE", "WEB_BUNDLE_DESCRIPTION", "make_fetch_url_tool", "make_web_tools"]

WEB_BUNDLE: Final = "web"
WEB_BUNDLE_DESCRIPTION: Final = (
    "Fetch web pages and PDFs by URL as readable text (fetch_url), and search the web "
    "(web_search) when a search tool is configured."
)
WEB_INSTALL_HINT: Final = "pip install 'aimegraph[web]'"
SEARCH_TOOL_NAME: Final = "web_search"

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES = frozenset({"application/json", "application/xml", "application/javascript"})

Kind = Literal["html", "pdf", "text"]


class _FetchUrlInput(BaseModel):
    url: str = Field(description="The http(s) URL of the page or PDF.")
    format: TextFormat = Field(
        "markdown",
        description="How an HTML page comes back: 'markdown' keeps headings, lists, "
        "tables and links; 'text' is plain (a table's cells separated by tabs).",
    )


def make_fetch_url_tool(policy: WebConfig) -> BaseTool:
    """The ``fetch_url`` tool under ``policy``."""
    require("trafilatura", "the web bundle", WEB_INSTALL_HINT)
    # One TLS context for all the tool's fetches, made at the first: loading the CA
    # bundle costs more than a fetch on a near server.
    tls = functools.cache(lambda: httpx.create_ssl_context(trust_env=False))

    def fetch_url(url: str, format: TextFormat = "markdown") -> str:
        return render(guarded_get(url, policy, tls=tls()), format)

    return StructuredTool.from_function(
        func=fetch_url,
        name="fetch_url",
        description=(
            "Fetch a web page or PDF by URL and return its readable text: an HTML page's "
            "main content (as Markdown by default), a PDF page by page, text as is. "
            "Starts with the URL that answered (after redirects)."
        ),
        args_schema=_FetchUrlInput,
    )


def make_web_tools(policy: WebConfig, *, search: BaseTool | None = None) -> list[BaseTool]:
    """``fetch_url``, and ``web_search``: ``search`` if given, else the tool
    ``policy.search`` names (``module:attr``), renamed ``web_search``."""
    tools = [make_fetch_url_tool(policy)]
    if search is None and policy.search:
        search = _import_search_tool(policy.search)
    if search is not None:
        tools.append(search.model_copy(update={"name": SEARCH_TOOL_NAME}))
    return tools


def render(fetched: Fetched, form: TextFormat = "markdown") -> str:
    """The readable text of a response, after a line saying where it came from."""
    kind = _kind(fetched)
    if kind == "pdf":
        if fetched.truncated:
            raise ToolException(
                f"the PDF at {fetched.url} is larger than {len(fetched.body)} bytes, the "
                "size cap (WebConfig.max_bytes)"
            )
        pages = pdf_documents(fetched.body, fetched.url)
        text = "\n\n".join(f"--- page {p.metadata['page']} ---\n{p.page_content}" for p in pages)
    elif kind == "html":
        html = fetched.body if fetched.charset is None else _decoded(fetched)
        text = html_to_text(html, url=fetched.url, form=form)
    else:
        text = _decoded(fetched)
    cut = f", cut at {len(fetched.body)} bytes" if fetched.truncated else ""
    return f"{fetched.url} ({fetched.content_type or kind}{cut})\n\n{text or '(no readable text)'}"


def _kind(fetched: Fetched) -> Kind:
    media = fetched.content_type
    if media == "application/pdf":
        return "pdf"
    if media in _HTML_TYPES:
        return "html"
    if media.startswith("text/") or media in _TEXT_TYPES or media.endswith(("+json", "+xml")):
        return "text"
    if media in ("", "application/octet-stream"):  # unlabelled: look at the bytes
        head = fetched.body[:1024].lstrip().lower()
        if head.startswith(b"%pdf-"):
            return "pdf"
        if head.startswith((b"<!doctype html", b"<html")):
            return "html"
        try:
            fetched.body.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return "text"
    raise ToolException(
        f"{fetched.url} is {media or 'binary data'}, which fetch_url cannot read "
        "(it reads HTML, PDF and text)"
    )


def _decoded(fetched: Fetched) -> str:
    try:
        return fetched.body.decode(fetched.charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return fetched.body.decode("utf-8", errors="replace")


def _import_search_tool(spec: str) -> BaseTool:
    value = import_object(
        spec,
        malformed=f"WebConfig.search takes MODULE:ATTR (e.g. langchain_tavily:TavilySearch); "
        f"got {spec!r}",
        failed="cannot import the search tool",
    )
    if not isinstance(value, BaseTool) and callable(value):
        try:
            value = value()
        except Exception as exc:  # e.g. a search API's missing key, checked on creation
            raise ValueError(f"cannot create the search tool {spec!r}: {exc}") from exc
    if not isinstance(value, BaseTool):
        raise ValueError(
            f"WebConfig.search {spec!r} must name a LangChain tool, or a class or function "
            f"that makes one; got {type(value).__name__}"
        )
    return value
