"""Files and downloaded bytes as LangChain documents, through well-kept loaders.

========================  ==========================================================
format                    loader; metadata besides ``source``
========================  ==========================================================
PDF (``.pdf``)            pypdf through langchain-community's ``PyPDFParser``, one
                          document per page; ``page`` (1-based)
HTML (``.html .htm``)     trafilatura's main-content extraction, as Markdown
DOCX (``.docx``)          langchain-community's ``Docx2txtLoader``
CSV (``.csv``)            langchain-community's ``CSVLoader``, one document per
                          record; ``row``
XLSX (``.xlsx``)          openpyxl, one document per row of each sheet, in the
                          ``CSVLoader`` shape (``header: value`` lines); ``sheet``,
                          ``row``
Markdown, text            read as UTF-8
other suffixes            read as UTF-8 text, with a warning naming the file; a
                          binary file (one with NUL bytes) is refused
========================  ==========================================================

``row`` is the row a spreadsheet shows: the header is row 1, the first record row 2.
PDF, HTML, DOCX and XLSX need the ``[docs]`` extra; a missing one is an
``ImportError`` naming it. A file that cannot be read as its format is a
:class:`DocumentLoadError` naming the file.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from langchain_core.documents import Document
from langchain_core.documents.base import Blob

if TYPE_CHECKING:
    from lxml.etree import _Element

__all__ = [
    "DOCS_INSTALL_HINT",
    "MARKDOWN_SUFFIXES",
    "SUFFIXES",
    "DocumentLoadError",
    "TextFormat",
    "html_to_text",
    "load_file",
    "pdf_documents",
    "require",
]

DOCS_INSTALL_HINT: Final = "pip install 'aimegraph[docs]'"
MARKDOWN_SUFFIXES: Final = frozenset({".md", ".markdown", ".html", ".htm"})
"""Formats whose documents are Markdown (HTML is converted to it): split at headings."""
_SNIFF_BYTES: Final = 8192
"""How much of a file of unknown type is looked at for NUL bytes (binary content)."""

_log = logging.getLogger(__name__)


class DocumentLoadError(ValueError):
    """A file (or a downloaded payload) cannot be read as the format it claims."""


def require(module: str, purpose: str, hint: str = DOCS_INSTALL_HINT) -> None:
    """Raise an ImportError naming the extra when ``module`` is not installed."""
    if importlib.util.find_spec(module) is None:
        raise ImportError(f"{purpose} needs {module}: {hint}", name=module)


class _SilencedLogger:
    """A context in which a library's logger (and its children) log nothing; shared by
    threads, the level is restored when the last one leaves."""

    def __init__(self, name: str) -> None:
        self._logger = logging.getLogger(name)
        self._lock = threading.Lock()
        self._inside = 0
        self._saved_level = logging.NOTSET

    def __enter__(self) -> None:
        with self._lock:
            if self._inside == 0:
                self._saved_level = self._logger.level
                self._logger.setLevel(logging.CRITICAL + 1)
            self._inside += 1

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0:
                self._logger.setLevel(self._saved_level)


_pypdf_quiet: Final = _SilencedLogger("pypdf")
"""pypdf logs the repairs it tries on a damaged file ("EOF marker not found"): a file
it cannot read ends as one DocumentLoadError, and one it could repair needs no word."""


def pdf_documents(data: bytes, source: str) -> list[Document]:
    """One document per page of the PDF in ``data`` that has text; ``page`` is 1-based.

    Pages without extractable text (scanned images) are left out."""
    require("pypdf", "reading PDF")
    from langchain_community.document_loaders.parsers.pdf import PyPDFParser

    try:
        with _pypdf_quiet:
            pages = list(PyPDFParser(mode="page").lazy_parse(Blob.from_data(data, path=source)))
    except Exception as exc:  # pypdf raises many kinds on damaged or encrypted files
        raise DocumentLoadError(f"{source}: not a readable PDF ({_reason(exc)})") from exc
    return [
        Document(page_content=page.page_content, metadata={"source": source, "page": number})
        for number, page in enumerate(pages, start=1)
        if page.page_content.strip()
    ]


TextFormat = Literal["markdown", "text"]


def html_to_text(
    html: str | bytes, *, url: str | None = None, form: TextFormat = "markdown"
) -> str:
    """The readable main content of an HTML page (navigation, footers, scripts and
    the like dropped) as Markdown or plain text, by trafilatura; pages where it
    finds no main content give all their visible text. ``""`` for a page with none.

    Plain text has no Markdown: a table comes out a line per row, its cells separated
    by tabs (trafilatura's own text output draws tables with ``|`` pipes)."""
    require("trafilatura", "turning HTML into text")
    import trafilatura

    if form == "markdown":
        extracted = trafilatura.extract(
            html,
            url=url,
            output_format="markdown",
            include_links=True,
            include_formatting=True,
            include_tables=True,
            favor_recall=True,
        )
    else:
        extracted = _plain_text(html, url)
    if extracted:
        return str(extracted)
    return str(trafilatura.html2txt(html) or "")


def _plain_text(html: str | bytes, url: str | None) -> str | None:
    """trafilatura's text output, with each table turned into tab-separated rows first."""
    import trafilatura
    from trafilatura.xml import xmltotxt

    document = trafilatura.bare_extraction(html, url=url, include_tables=True, favor_recall=True)
    if document is None or isinstance(document, dict):
        return None
    parts = [document.body] + ([] if document.commentsbody is None else [document.commentsbody])
    for part in parts:
        for table in part.xpath(".//table[not(ancestor::table)]"):
            _table_to_rows(table)
    return "\n".join(text for part in parts if (text := xmltotxt(part, include_formatting=False)))


def _table_to_rows(table: _Element) -> None:
    """Replace a trafilatura ``<table>`` by a paragraph with a line per row: the text
    of each cell, tab-separated (a nested table flattened into its cell)."""
    from lxml.etree import Element

    lines = []
    for row in table.findall("row"):
        cells = [" ".join("".join(cell.itertext()).split()) for cell in row.findall("cell")]
        if any(cells):
            lines.append("\t".join(cells))
    paragraph = Element("p")
    paragraph.text = "\n".join(lines)
    paragraph.tail = table.tail
    table.getparent().replace(table, paragraph)


def load_file(path: Path) -> list[Document]:
    """The documents of one file, by its suffix; other suffixes are read as text, with
    a warning (a binary file is refused)."""
    loader = _LOADERS.get(path.suffix.lower(), _load_unknown)
    return loader(path)


def _load_unknown(path: Path) -> list[Document]:
    with path.open("rb") as file:
        head = file.read(_SNIFF_BYTES)
    kind = f"unknown file type ({path.suffix})" if path.suffix else "file without a suffix"
    if b"\0" in head:
        raise DocumentLoadError(
            f"{path}: {kind} with binary content, not a format the knowledge base reads "
            f"({', '.join(s.lstrip('.') for s in SUFFIXES)}, or text)"
        )
    _log.warning("%s: %s, indexed as plain text", path, kind)
    return _load_text(path)


def _load_pdf(path: Path) -> list[Document]:
    return pdf_documents(path.read_bytes(), path.as_posix())


def _load_html(path: Path) -> list[Document]:
    text = html_to_text(path.read_bytes())
    return [Document(page_content=text, metadata={"source": path.as_posix()})] if text else []


def _load_docx(path: Path) -> list[Document]:
    require("docx2txt", "reading DOCX")
    from langchain_community.document_loaders import Docx2txtLoader

    try:
        loaded = Docx2txtLoader(str(path)).load()
    except Exception as exc:  # a damaged archive raises zipfile, KeyError or XML errors
        raise DocumentLoadError(f"{path}: not a readable DOCX file ({_reason(exc)})") from exc
    return [
        Document(page_content=doc.page_content, metadata={"source": path.as_posix()})
        for doc in loaded
        if doc.page_content.strip()
    ]


def _load_csv(path: Path) -> list[Document]:
    from langchain_community.document_loaders import CSVLoader

    try:
        loaded = CSVLoader(str(path), encoding=_csv_encoding(path)).load()
    except Exception as exc:  # CSVLoader wraps every failure in RuntimeError
        raise DocumentLoadError(f"{path}: not a readable CSV file ({_reason(exc)})") from exc
    # CSVLoader counts records from 0; as a spreadsheet shows them, after the header.
    return [
        Document(
            page_content=doc.page_content,
            metadata={"source": path.as_posix(), "row": int(doc.metadata["row"]) + 2},
        )
        for doc in loaded
    ]


def _csv_encoding(path: Path) -> str:
    """UTF-8 (a byte-order mark dropped), else charset-normalizer's best guess.
    (CSVLoader's own detection needs chardet, and re-reads a file from the start
    after yielding the rows before an undecodable one.)"""
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        from charset_normalizer import from_bytes

        guess = from_bytes(data).best()
        if guess is not None:
            return str(guess.encoding)
    return "utf-8-sig"


def _load_xlsx(path: Path) -> list[Document]:
    require("openpyxl", "reading XLSX")
    from openpyxl import load_workbook

    try:
        workbook = load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # not a zip, not a workbook, damaged XML
        raise DocumentLoadError(f"{path}: not a readable XLSX workbook ({_reason(exc)})") from exc
    try:
        return [
            Document(
                page_content=text, metadata={"source": path.as_posix(), "sheet": name, "row": row}
            )
            for name in workbook.sheetnames
            for row, text in _sheet_records(workbook[name].iter_rows(values_only=True))
        ]
    finally:
        workbook.close()


def _sheet_records(rows: Iterator[tuple[object, ...]]) -> Iterator[tuple[int, str]]:
    """(row number, ``header: value`` lines) of each non-empty row under the first
    non-empty one, which is the header."""
    header: list[str] | None = None
    for number, values in enumerate(rows, start=1):
        cells = ["" if value is None else str(value).strip() for value in values]
        if not any(cells):
            continue
        if header is None:
            header = [name or f"column {i}" for i, name in enumerate(cells, start=1)]
            continue
        names = header + [f"column {i}" for i in range(len(header) + 1, len(cells) + 1)]
        yield number, "\n".join(f"{n}: {c}" for n, c in zip(names, cells, strict=False) if c)


def _load_text(path: Path) -> list[Document]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return [Document(page_content=text, metadata={"source": path.as_posix()})]


def _reason(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


_LOADERS: Final[dict[str, Callable[[Path], list[Document]]]] = {
    ".pdf": _load_pdf,
    ".html": _load_html,
    ".htm": _load_html,
    ".docx": _load_docx,
    ".csv": _load_csv,
    ".xlsx": _load_xlsx,
    ".md": _load_text,
    ".markdown": _load_text,
    ".txt": _load_text,
}
SUFFIXES: Final = tuple(_LOADERS)
"""The suffixes :func:`load_file` knows (others are read as text)."""
