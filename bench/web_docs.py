"""The web bundle and document loading (on demand: extras ``[web]``, ``[docs]`` and
``[dev]``, which makes the test documents).

Fetch: the same HTML page on a loopback server, reached through one redirect, by
``guarded_get`` (the SSRF checks, one DNS lookup per hop, its own redirect loop and
size cap) against a plain ``httpx.Client().get(..., follow_redirects=True)``; and
``fetch_url`` as a whole (with trafilatura's extraction) against the plain GET.

Documents: ``KnowledgeBase.add_files`` on a PDF, a DOCX, a CSV, an XLSX and an HTML
page holding the same text, against the same text as a ``.txt`` file, so the ratio
is what each format's loader costs on top of chunking and embedding.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import httpx
from tests.documents import ARTICLE_HTML, write_docx, write_pdf, write_xlsx
from tests.local_http import LocalSite

from aimegraph.config import WebConfig
from aimegraph.knowledge import KnowledgeBase
from aimegraph.tools.http_guard import guarded_get
from aimegraph.tools.web import make_fetch_url_tool
from bench.common import Headline, SectionResult, Table, fmt_ms, fmt_x, median_time

SENTENCE = "Ship {n} carried {t} tonnes of cargo from Brest to Vigo in week {w}."


def run(quick: bool) -> SectionResult:
    repeat = 5 if quick else 50
    rows = 20 if quick else 400
    fetch, fetched = _fetch_table(repeat)
    documents, loaded = _documents_table(rows)
    metrics = {f"fetch.{k}_s": v for k, v in fetched.items()}
    metrics |= {f"add_files.{k.lstrip('.')}_s": v for k, v in loaded.items()}
    plain, txt = fetched["plain"], loaded[".txt"]
    headlines = [
        Headline(
            "web: fetching a loopback HTML page through one redirect",
            f"a plain httpx GET following redirects, a new client per fetch ({fmt_ms(plain)} ms)",
            f"guarded_get (SSRF checks, a lookup per hop, its own redirects, caps) "
            f"{fmt_x(fetched['guarded'] / plain)}; fetch_url with trafilatura's extraction "
            f"{fmt_x(fetched['fetch_url'] / plain)}",
        ),
        Headline(
            f"documents: add_files on the same {rows} sentences in each format",
            f"the .txt file ({fmt_ms(txt)} ms)",
            ", ".join(
                f"{suffix.lstrip('.').upper()} {fmt_x(seconds / txt)}"
                for suffix, seconds in loaded.items()
                if suffix != ".txt"
            ),
        ),
    ]
    return SectionResult("web_docs", [fetch, documents], metrics, headlines)


def _fetch_table(repeat: int) -> tuple[Table, dict[str, float]]:
    table = Table(
        f"Web: fetching a loopback HTML page through one redirect (median of {repeat})",
        ["path", "time (ms)", "vs plain httpx GET"],
    )
    policy = WebConfig(allow_private_hosts=("127.0.0.1",))
    fetch_url = make_fetch_url_tool(policy)
    with LocalSite() as site:
        page = site.route(
            "/page", body=ARTICLE_HTML.encode() * 20, headers={"Content-Type": "text/html"}
        )
        start = site.route("/start", status=302, headers={"Location": page})
        tls = httpx.create_ssl_context(trust_env=False)
        with httpx.Client(verify=tls) as client:
            kept = median_time(lambda: client.get(start, follow_redirects=True), repeat=repeat)

        def new_client() -> None:
            with httpx.Client(verify=tls) as fresh:
                fresh.get(start, follow_redirects=True)

        plain = median_time(new_client, repeat=repeat)
        guarded = median_time(lambda: guarded_get(start, policy, tls=tls), repeat=repeat)
        whole = median_time(lambda: fetch_url.invoke({"url": start}), repeat=repeat)
    table.add("httpx GET, redirects followed, a new client per fetch", fmt_ms(plain), "1.00x")
    table.add("the same, one client kept (keep-alive)", fmt_ms(kept), fmt_x(kept / plain))
    table.add(
        "guarded_get (checks, lookups, own redirects, caps)",
        fmt_ms(guarded),
        fmt_x(guarded / plain),
    )
    table.add(
        "fetch_url (guarded_get + trafilatura to Markdown)", fmt_ms(whole), fmt_x(whole / plain)
    )
    table.notes.append(
        "guarded_get opens a client per fetch (no connection is kept between tool calls); "
        "every path shares one TLS context, as fetch_url does."
    )
    return table, {"plain": plain, "kept": kept, "guarded": guarded, "fetch_url": whole}


def _documents_table(rows: int) -> tuple[Table, dict[str, float]]:
    table = Table(
        f"Documents: add_files on the same {rows} sentences in each format (median of 3)",
        ["format", "time (ms)", "per sentence (ms)", "vs .txt"],
    )
    sentences = [SENTENCE.format(n=i, t=100 + i % 900, w=1 + i % 52) for i in range(rows)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        makers: dict[str, Callable[[Path], Path]] = {
            ".txt": lambda p: _written(p, "\n".join(sentences)),
            ".pdf": lambda p: write_pdf(
                p, ["\n".join(sentences[i : i + 20]) for i in range(0, rows, 20)]
            ),
            ".docx": lambda p: write_docx(p, "Cargo", sentences),
            ".csv": lambda p: _written(p, "sentence\n" + "\n".join(sentences)),
            ".xlsx": lambda p: write_xlsx(p, {"Cargo": [["sentence"], *([s] for s in sentences)]}),
            ".html": lambda p: _written(
                p,
                "<html><body><article>"
                + "".join(f"<p>{s}</p>" for s in sentences)
                + "</article></body></html>",
            ),
        }
        times = {}
        for suffix, make in makers.items():
            path = make(folder / f"cargo{suffix}")
            times[suffix] = median_time(lambda path=path: KnowledgeBase().add_files(path), repeat=3)
        for suffix, seconds in times.items():
            table.add(
                suffix, fmt_ms(seconds), fmt_ms(seconds / rows, 3), fmt_x(seconds / times[".txt"])
            )
    table.notes.append(
        "CSV and XLSX give a passage per row, so they embed more (shorter) passages than the "
        "chunked formats; PDF holds 20 sentences per page."
    )
    return table, times


def _written(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
