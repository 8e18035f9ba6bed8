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
========================  ==========================================================

``row`` is the row a spreadsheet shows: the header is row 1, the first record row 2.
PDF, HTML, DOCX and XLSX need the ``[docs]`` extra; a missing one is an
``ImportError`` naming it. A file that cannot be read as its format is a
:class:`DocumentLoadError` naming the file.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, Literal

from langchain_core.documents import Document
from langchain_core.documents.base import Blob

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


class DocumentLoadError(ValueError):
    """A file (or a downloaded payload) cannot be read as the format it claims."""


def require(module: str, purpose: str, hint: str = DOCS_INSTALL_HINT) -> None:
    """Raise an ImportError naming the extra when ``module`` is not installed."""
    if importlib.util.find_spec(module) is None:
        raise ImportError(f"{purpose} needs {module}: {hint}", name=module)


def pdf_documents(data: bytes, source: str) -> list[Document]:
    """One document per page of the PDF in ``data`` that has text; ``page`` is 1-based.

    Pages without extractable text (scanned images) are left out."""
    require("pypdf", "reading PDF")
    from langchain_community.document_loaders.parsers.pdf import PyPDFParser

    try:
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
    finds no main content give all their visible text. ``""`` for a page with none."""
    require("trafilatura", "turning HTML into text")
    import trafilatura

    extracted = trafilatura.extract(
        html,
        url=url,
        output_format="markdown" if form == "markdown" else "txt",
        include_links=form == "markdown",
        include_formatting=form == "markdown",
        include_tables=True,
        favor_recall=True,
    )
    if extracted:
        return str(extracted)
    return str(trafilatura.html2txt(html) or "")


def load_file(path: Path) -> list[Document]:
    """The documents of one file, by its suffix; other suffixes are read as text."""
    loader = _LOADERS.get(path.suffix.lower(), _load_text)
    return loader(path)


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
