"""Small documents of each kind the knowledge base reads, made by the tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def pdf_bytes(pages: Sequence[str]) -> bytes:
    """A PDF with one page per text (fpdf2)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 10, text)
    return bytes(pdf.output())


def write_pdf(path: Path, pages: Sequence[str]) -> Path:
    path.write_bytes(pdf_bytes(pages))
    return path


def write_docx(path: Path, heading: str, paragraphs: Sequence[str]) -> Path:
    import docx

    document = docx.Document()
    document.add_heading(heading, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(str(path))
    return path


def write_xlsx(path: Path, sheets: dict[str, list[list[object]]]) -> Path:
    """A workbook with one sheet per entry, its rows as given (the first is the header)."""
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.remove(workbook.active)
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(name)
        for row in rows:
            sheet.append(row)
    workbook.save(path)
    return path


ARTICLE_HTML = """<!doctype html>
<html><head><title>Harbour notes</title></head>
<body>
<nav><a href="/">Home</a> | <a href="/about">About us</a> | <a href="/shop">Shop</a></nav>
<article>
<h1>Harbour notes</h1>
<p>The high tide at Brest on 3 May is at 06:42, so boats leaving early should wait for it
before crossing the bar at the harbour mouth.</p>
<h2>Moorings</h2>
<ul><li>Visitor buoys: 12</li><li>Pontoon berths: 40</li></ul>
</article>
<footer>Copyright the harbour office, all rights reserved.</footer>
<script>trackVisitor("should never show up")</script>
</body></html>
"""
