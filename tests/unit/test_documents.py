"""Documents in the knowledge base: PDF, HTML, DOCX, CSV, XLSX and Markdown through
their loaders, chunked, with source and page (sheet, row) in every passage."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from tests.documents import ARTICLE_HTML, pdf_bytes, write_docx, write_pdf, write_xlsx

from aimegraph.knowledge import KnowledgeBase, Passage
from aimegraph.knowledge.documents import (
    DocumentLoadError,
    html_to_text,
    load_file,
    pdf_documents,
)
from aimegraph.tools.knowledge import make_knowledge_search_tool

PDF_PAGES = [
    "Annual report. This page is about the weather in spring and the garden.",
    "Revenue. The revenue of Freedonia Shipping in 2024 was 7.3 million euros.",
    "Staff. Freedonia Shipping employs 85 sailors and 12 engineers.",
]


@pytest.fixture
def library(tmp_path: Path) -> Path:
    """A folder with one small document of each kind."""
    folder = tmp_path / "library"
    folder.mkdir()
    write_pdf(folder / "report.pdf", PDF_PAGES)
    (folder / "harbour.html").write_text(ARTICLE_HTML, encoding="utf-8")
    write_docx(folder / "memo.docx", "Memo", ["The board meets on Thursdays at noon."])
    (folder / "ports.csv").write_text(
        "port,country,berths\nBrest,France,640\nVigo,Spain,420\n", encoding="utf-8"
    )
    write_xlsx(
        folder / "fleet.xlsx",
        {
            "Ships": [["name", "tonnage"], ["Albatross", 1200], [None, None], ["Petrel", 800]],
            "Crew": [["ship", "captain"], ["Albatross", "Ines Moreau"]],
        },
    )
    (folder / "guide.md").write_text(
        "# Guide\n\n## Safety\n\nLife jackets are stored under the benches.\n", encoding="utf-8"
    )
    (folder / "ignored.bin").write_bytes(b"\x00\x01")
    return folder


def test_each_format_loads_with_its_locations(library: Path) -> None:
    pages = load_file(library / "report.pdf")
    assert [doc.metadata for doc in pages] == [
        {"source": (library / "report.pdf").as_posix(), "page": n} for n in (1, 2, 3)
    ]
    assert "7.3 million euros" in pages[1].page_content

    (html,) = load_file(library / "harbour.html")
    # Main content as Markdown; navigation, footer and script dropped.
    assert "# Harbour notes" in html.page_content and "## Moorings" in html.page_content
    assert "- Visitor buoys: 12" in html.page_content
    for boilerplate in ("About us", "all rights reserved", "trackVisitor"):
        assert boilerplate not in html.page_content

    (memo,) = load_file(library / "memo.docx")
    assert "Memo" in memo.page_content and "Thursdays at noon" in memo.page_content

    ports = load_file(library / "ports.csv")
    assert [doc.metadata["row"] for doc in ports] == [2, 3]  # the header is row 1
    assert ports[1].page_content == "port: Vigo\ncountry: Spain\nberths: 420"

    fleet = load_file(library / "fleet.xlsx")
    assert [(d.metadata["sheet"], d.metadata["row"]) for d in fleet] == [
        ("Ships", 2),
        ("Ships", 4),  # the empty row 3 is skipped, the numbering is the sheet's
        ("Crew", 2),
    ]
    assert fleet[2].page_content == "ship: Albatross\ncaptain: Ines Moreau"


def test_csv_in_another_encoding(tmp_path: Path) -> None:
    path = tmp_path / "quais.csv"
    path.write_bytes("quai,capitaine\nÉcluse nord,Hélène Brûlé\n".encode("cp1252"))
    (row,) = load_file(path)
    assert row.page_content == "quai: Écluse nord\ncapitaine: Hélène Brûlé"
    bom = tmp_path / "bom.csv"
    bom.write_bytes("\ufeffport,berths\nBrest,640\n".encode())
    assert load_file(bom)[0].page_content == "port: Brest\nberths: 640"


def test_a_folder_of_every_kind_is_chunked_and_cited(library: Path, tmp_path: Path) -> None:
    kb = KnowledgeBase()
    ids = kb.add_files(library, chunk_size=200, chunk_overlap=20).ids
    assert len(ids) == len(kb) >= 10
    sources = {Path(p.source or "").name for p in kb.search("anything", k=len(kb))}
    assert sources == {
        "report.pdf",
        "harbour.html",
        "memo.docx",
        "ports.csv",
        "fleet.xlsx",
        "guide.md",
    }

    (best,) = kb.search("revenue of Freedonia Shipping in 2024", k=1)
    assert (Path(best.source or "").name, best.page) == ("report.pdf", 2)
    assert "7.3 million" in best.text
    (captain,) = kb.search("who is the captain of the Albatross", k=1)
    assert (captain.sheet, captain.row) == ("Crew", 2)

    # Citations survive saving and loading, and reach the actor's tool.
    kb.save(tmp_path / "kb")
    loaded = KnowledgeBase.load(tmp_path / "kb")
    tool = make_knowledge_search_tool(loaded, k=1)
    out = tool.invoke({"query": "how many sailors does Freedonia Shipping employ"})
    assert out.startswith(f"[1] source: {(library / 'report.pdf').as_posix()}, page 3 (score ")
    assert "85 sailors" in out


def test_long_pages_are_chunked_within_their_page(tmp_path: Path) -> None:
    filler = " ".join(f"sentence {i} about cargo manifests." for i in range(60))
    write_pdf(tmp_path / "long.pdf", [filler, "The harbour master is Yann Le Gall. " + filler])
    kb = KnowledgeBase()
    kb.add_files(tmp_path / "long.pdf", chunk_size=300, chunk_overlap=30)
    passages = kb.search("cargo", k=len(kb))
    assert len(passages) > 4 and all(len(p.text) <= 300 for p in passages)
    assert {p.page for p in passages} == {1, 2}
    (master,) = kb.search("who is the harbour master", k=1)
    assert master.page == 2 and "Yann Le Gall" in master.text


def test_passage_citation() -> None:
    assert Passage(text="x", score=1.0, source="a.pdf", page=3).citation == "a.pdf, page 3"
    sheet = Passage(text="x", score=1.0, source="b.xlsx", sheet="Crew", row=2)
    assert sheet.citation == "b.xlsx, sheet Crew, row 2"
    assert Passage(text="x", score=1.0).citation == "knowledge base"


def test_an_unreadable_file_names_itself_and_adds_nothing(library: Path) -> None:
    (library / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a PDF")
    kb = KnowledgeBase()
    with pytest.raises(DocumentLoadError, match=r"broken\.pdf: not a readable PDF"):
        kb.add_files(library)
    assert len(kb) == 0
    (library / "broken.pdf").unlink()
    (library / "broken.docx").write_bytes(b"not a zip archive")
    with pytest.raises(DocumentLoadError, match=r"broken\.docx: not a readable DOCX"):
        kb.add_files(library)
    (library / "broken.docx").unlink()
    (library / "broken.xlsx").write_bytes(b"not a zip archive")
    with pytest.raises(DocumentLoadError, match=r"broken\.xlsx: not a readable XLSX"):
        kb.add_files(library)


def test_a_broken_pdf_is_one_error_without_pypdf_log_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """pypdf logs the repairs it tries ("EOF marker not found"); in the CLI those
    lines reached stderr before the error. Only pypdf's logger is silenced, and only
    while it reads."""
    pypdf_logger = logging.getLogger("pypdf")
    level = pypdf_logger.level
    with caplog.at_level(logging.WARNING), pytest.raises(DocumentLoadError):
        pdf_documents(b"%PDF-1.4 broken", "broken.pdf")
    assert [r.getMessage() for r in caplog.records if r.name.startswith("pypdf")] == []
    assert pypdf_logger.level == level
    with caplog.at_level(logging.WARNING):
        logging.getLogger("pypdf._reader").warning("pypdf speaks again")
    assert "pypdf speaks again" in caplog.text


def test_unknown_file_types_are_read_as_text_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = tmp_path / "harbour.yaml"
    config.write_text("berths: 40\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="aimegraph.knowledge.documents"):
        (doc,) = load_file(config)
    assert doc.page_content == "berths: 40\n"
    assert caplog.messages == [f"{config}: unknown file type (.yaml), indexed as plain text"]

    binary = tmp_path / "tool.bin"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)))
    kb = KnowledgeBase()
    with pytest.raises(
        DocumentLoadError,
        match=r"tool\.bin: unknown file type \(\.bin\) with "
        r"binary content, not a format the knowledge base reads \(pdf, ",
    ):
        kb.add_files([config, binary])
    assert len(kb) == 0


def test_html_as_plain_text_has_table_rows_not_markdown_pipes() -> None:
    page = (
        "<html><body><article><h1>Tides</h1><p>The tide table for Brest and Roscoff on "
        "the third of May, for boats leaving the harbour early.</p><table>"
        "<tr><th>Port</th><th>High tide</th></tr><tr><td>Brest</td><td>06:42</td></tr>"
        "<tr><td>Roscoff | Nord</td><td>07:10</td></tr></table><p>Wait for the tide "
        "before crossing the bar at the harbour mouth.</p></article></body></html>"
    )
    text = html_to_text(page, form="text")
    assert "Port\tHigh tide\nBrest\t06:42\nRoscoff | Nord\t07:10\n" in text
    assert "|---" not in text and "| Brest" not in text
    assert text.startswith("Tides\n") and text.endswith("crossing the bar at the harbour mouth.")
    markdown = html_to_text(page, form="markdown")
    assert "| Brest | 06:42 |" in markdown and "|---|---|" in markdown


def test_pdf_pages_without_text_are_left_out() -> None:
    docs = pdf_documents(pdf_bytes(["", "Only the second page has text."]), "scan.pdf")
    assert [d.metadata["page"] for d in docs] == [2]


def test_a_missing_loader_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "docx2txt" else real_find_spec(name, *args),
    )
    path = write_docx(tmp_path / "memo.docx", "Memo", ["text"])
    with pytest.raises(
        ImportError, match=r"reading DOCX needs docx2txt: pip install 'aimegraph\[docs\]'"
    ):
        load_file(path)


def test_markdown_and_text_need_no_extra(tmp_path: Path) -> None:
    """The base install (no [docs]) still reads Markdown and text: the loaders of the
    other formats import their libraries only when used."""
    (tmp_path / "a.md").write_text("# Title\n\nAnchors hold boats.\n", encoding="utf-8")
    blocked = "pypdf docx2txt openpyxl trafilatura"
    script = (
        "import sys\n"
        f"for name in {blocked.split()!r}: sys.modules[name] = None\n"
        "from aimegraph.knowledge import KnowledgeBase\n"
        "kb = KnowledgeBase()\n"
        f"kb.add_files({str(tmp_path)!r})\n"
        "print(kb.search('anchors', k=1)[0].text)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert "Anchors hold boats." in out
