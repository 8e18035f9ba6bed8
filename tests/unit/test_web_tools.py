"""The web bundle: fetch_url under its policy (SSRF refusals after DNS resolution and
on every redirect, host lists, time and size caps) against a server on loopback,
which is reachable only where a test lists it; and the web_search slot."""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import BaseTool, ToolException
from tests.documents import ARTICLE_HTML, pdf_bytes
from tests.local_http import LocalSite, serve

from aimegraph import AimeConfig
from aimegraph.config import WebConfig
from aimegraph.tools.http_guard import UrlRefused, host_listed
from aimegraph.tools.registry import default_registry
from aimegraph.tools.web import make_web_tools

LOOPBACK_ALLOWED = WebConfig(allow_private_hosts=("127.0.0.1",))
HTML = {"Content-Type": "text/html; charset=utf-8"}
TIDE_TABLE_HTML = (
    "<html><body><article><h1>Tide table</h1><p>High tides on the third of May in the "
    "ports of the Atlantic coast, for crews planning an early departure.</p><table>"
    "<tr><th>Port</th><th>High tide</th></tr><tr><td>Brest</td><td>06:42</td></tr>"
    "<tr><td>Vigo</td><td>07:15</td></tr></table></article></body></html>"
)


@pytest.fixture
def site() -> Iterator[LocalSite]:
    yield from serve()


def fetch(policy: WebConfig, url: str, **args: Any) -> str:
    fetch_url = make_web_tools(policy)[0]
    assert fetch_url.name == "fetch_url"
    result: str = fetch_url.invoke({"url": url, **args})
    return result


def test_loopback_is_refused_unless_listed(site: LocalSite) -> None:
    url = site.route("/page", body=ARTICLE_HTML.encode(), headers=HTML)
    with pytest.raises(UrlRefused, match="127.0.0.1 resolves to 127.0.0.1, which is not a public"):
        fetch(WebConfig(), url)
    assert site.hosts == []  # refused before any connection

    page = fetch(LOOPBACK_ALLOWED, url)
    assert page.startswith(f"{url} (text/html)\n\n")
    assert "# Harbour notes" in page and "- Visitor buoys: 12" in page and "06:42" in page
    for boilerplate in ("About us", "all rights reserved", "trackVisitor"):
        assert boilerplate not in page
    plain = fetch(LOOPBACK_ALLOWED, url, format="text")
    assert "06:42" in plain and "# Harbour notes" not in plain


def test_plain_text_tables_have_no_markdown_pipes(site: LocalSite) -> None:
    url = site.route("/tides", body=TIDE_TABLE_HTML.encode(), headers=HTML)
    markdown = fetch(LOOPBACK_ALLOWED, url)
    assert "| Brest | 06:42 |" in markdown
    plain = fetch(LOOPBACK_ALLOWED, url, format="text")
    assert "Port\tHigh tide\nBrest\t06:42\nVigo\t07:15" in plain and "|" not in plain


@pytest.mark.parametrize(
    "host",
    [
        "localhost",  # a name: refused for the address it resolves to
        "2130706433",  # 127.0.0.1 written as one number
        "127.1",
        "[::1]",
        "[::ffff:127.0.0.1]",  # IPv4-mapped IPv6
        "0.0.0.0",
    ],
)
def test_other_names_of_loopback_are_refused(site: LocalSite, host: str) -> None:
    url = site.route("/page", body=b"secret", headers={"Content-Type": "text/plain"})
    with pytest.raises(UrlRefused, match="which is not a public address"):
        fetch(LOOPBACK_ALLOWED, url.replace("127.0.0.1", host))
    assert site.hosts == []


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata (link-local)
        "http://10.0.0.8/",
        "http://192.168.1.1/admin",
        "http://100.64.0.1/",  # carrier-grade NAT
        "http://[fe80::1]/",
        "http://224.0.0.1/",  # multicast
        "http://240.0.0.1/",  # reserved
    ],
)
def test_private_and_link_local_addresses_are_refused(url: str) -> None:
    with pytest.raises(UrlRefused, match="which is not a public address"):
        fetch(WebConfig(), url)


def test_every_redirect_is_checked(site: LocalSite) -> None:
    page = site.route("/page", body=b"the page", headers={"Content-Type": "text/plain"})
    site.route("/hop", status=302, headers={"Location": "/page"})
    assert fetch(LOOPBACK_ALLOWED, site.url("/hop")) == f"{page} (text/plain)\n\nthe page"

    targets = {
        "/to-localhost": site.url("/page", host="localhost"),
        "/to-metadata": "http://169.254.169.254/latest/meta-data/",
        "/to-file": "file:///etc/passwd",
    }
    for path, target in targets.items():
        site.route(path, status=307, headers={"Location": target})
        with pytest.raises(UrlRefused):
            fetch(LOOPBACK_ALLOWED, site.url(path))
    # The hops to loopback under another name never reached the server.
    assert site.hosts.count(f"localhost:{site.port}") == 0


def test_redirects_are_bounded(site: LocalSite) -> None:
    site.route("/loop", status=302, headers={"Location": "/loop"})
    policy = WebConfig(allow_private_hosts=("127.0.0.1",), max_redirects=3)
    with pytest.raises(UrlRefused, match="redirected more than 3 times"):
        fetch(policy, site.url("/loop"))
    assert len(site.hosts) == 4


def fake_resolver(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[str]]) -> list[str]:
    """Resolve the names in ``answers`` to those addresses (others as usual); return
    the list of names looked up, in order."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        asked.append(host)
        if host not in answers:
            return real(host, port, *args, **kwargs)
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in answers[host]
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


def test_a_name_with_any_private_address_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_resolver(monkeypatch, {"mixed.example": ["93.184.216.34", "10.0.0.5"]})
    with pytest.raises(UrlRefused, match="mixed.example resolves to 10.0.0.5"):
        fetch(WebConfig(), "http://mixed.example/")


def test_the_checked_address_is_the_one_connected_to(
    site: LocalSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One lookup per hop, and the connection goes to its answer with the original
    Host header: a second, different DNS answer (rebinding) is never asked for."""
    asked = fake_resolver(monkeypatch, {"harbour.example": ["127.0.0.1"]})
    site.route("/page", body=b"moorings", headers={"Content-Type": "text/plain"})
    site.route("/hop", status=301, headers={"Location": "/page"})
    policy = WebConfig(allow_private_hosts=("harbour.example",))
    out = fetch(policy, site.url("/hop", host="harbour.example"))
    assert out.endswith("moorings")
    assert asked.count("harbour.example") == 2  # (httpcore looks the address up as well)
    assert site.hosts == [f"harbour.example:{site.port}"] * 2


@pytest.mark.parametrize("cert_name", ["harbour.example", "other.example"])
def test_https_verifies_the_certificate_for_the_host_name(
    cert_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection goes to the checked address, but TLS is for the name: a
    certificate for the name (not for 127.0.0.1) is accepted, one for another name not."""
    import certifi
    import trustme

    authority = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(cert_name).configure_cert(server_tls)
    authority.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setattr(certifi, "where", lambda: str(tmp_path / "ca.pem"))
    fake_resolver(monkeypatch, {"harbour.example": ["127.0.0.1"]})
    policy = WebConfig(allow_private_hosts=("harbour.example",))
    for site in serve(server_tls):
        url = site.route("/page", body=b"moorings", headers={"Content-Type": "text/plain"})
        url = url.replace("127.0.0.1", "harbour.example")
        if cert_name == "harbour.example":
            assert fetch(policy, url) == f"{url} (text/plain)\n\nmoorings"
        else:
            with pytest.raises(ToolException, match="CERTIFICATE_VERIFY_FAILED"):
                fetch(policy, url)


def test_proxy_settings_are_ignored(site: LocalSite, monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy would connect on its own, to addresses never checked."""
    url = site.route("/page", body=b"direct", headers={"Content-Type": "text/plain"})
    for proxy in serve():
        for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
            monkeypatch.setenv(name, proxy.url("/"))
        assert fetch(LOOPBACK_ALLOWED, url).endswith("direct")
        assert proxy.hosts == []


def test_a_bare_host_is_taken_as_https(monkeypatch: pytest.MonkeyPatch) -> None:
    """Models often leave the scheme out; the URL is then https, and checked as usual."""
    fake_resolver(monkeypatch, {"intranet.example": ["10.1.2.3"]})
    with pytest.raises(UrlRefused, match="intranet.example resolves to 10.1.2.3"):
        fetch(WebConfig(), "intranet.example/wiki")
    with pytest.raises(UrlRefused, match="only http and https URLs can be fetched, not file:"):
        fetch(WebConfig(), "file:/etc/passwd")


def test_host_lists(site: LocalSite) -> None:
    url = site.route("/page", body=b"ok", headers={"Content-Type": "text/plain"})
    with pytest.raises(UrlRefused, match="not on the allow list"):
        fetch(WebConfig(allow_private_hosts=("127.0.0.1",), allow_hosts=("example.org",)), url)
    with pytest.raises(UrlRefused, match="on the deny list"):
        fetch(WebConfig(allow_private_hosts=("127.0.0.1",), deny_hosts=("127.0.0.1",)), url)
    allowed = WebConfig(allow_private_hosts=("127.0.0.1",), allow_hosts=("127.0.0.1",))
    assert fetch(allowed, url).endswith("ok")
    assert site.hosts == [f"127.0.0.1:{site.port}"]

    assert host_listed("docs.Example.org.", ("example.org",))
    assert host_listed("example.org", (" EXAMPLE.org ",))
    assert not host_listed("badexample.org", ("example.org",))


def test_size_cap(site: LocalSite) -> None:
    url = site.route("/big", body=b"x" * 50_000, headers={"Content-Type": "text/plain"})
    policy = WebConfig(allow_private_hosts=("127.0.0.1",), max_bytes=1_000)
    out = fetch(policy, url)
    assert out.startswith(f"{url} (text/plain, cut at 1000 bytes)\n\n")
    assert out.endswith("\n\n" + "x" * 1_000)

    big_pdf = pdf_bytes([f"page {n} " + "words " * 300 for n in range(20)])
    assert len(big_pdf) > 1_000
    pdf = site.route("/big.pdf", body=big_pdf, headers={"Content-Type": "application/pdf"})
    with pytest.raises(ToolException, match="larger than 1000 bytes, the size cap"):
        fetch(policy, pdf)


def test_time_cap(site: LocalSite) -> None:
    url = site.route("/slow", body=b"late", headers={"Content-Type": "text/plain"}, delay_s=3)
    policy = WebConfig(allow_private_hosts=("127.0.0.1",), timeout_s=0.3)
    with pytest.raises(ToolException, match=r"timed out after 0.3 s"):
        fetch(policy, url)


def test_pdf_responses_go_through_the_document_loader(site: LocalSite) -> None:
    body = pdf_bytes(["Cover page.", "Tide table: high water 06:42."])
    url = site.route("/tides.pdf", body=body, headers={"Content-Type": "application/pdf"})
    out = fetch(LOOPBACK_ALLOWED, url)
    assert out == (
        f"{url} (application/pdf)\n\n--- page 1 ---\nCover page.\n\n"
        "--- page 2 ---\nTide table: high water 06:42."
    )
    # Unlabelled, a PDF is known by its bytes.
    unlabelled = site.route("/download", body=body)
    assert "--- page 2 ---" in fetch(LOOPBACK_ALLOWED, unlabelled)


def test_other_responses(site: LocalSite) -> None:
    text = site.route(
        "/notes.txt", body="Café at 06:42".encode("latin-1"),
        headers={"Content-Type": "text/plain; charset=latin-1"},
    )  # fmt: skip
    assert fetch(LOOPBACK_ALLOWED, text).endswith("Café at 06:42")
    image = site.route(
        "/logo.png", body=b"\x89PNG\r\n\x1a\n\x00\xff", headers={"Content-Type": "image/png"}
    )
    with pytest.raises(ToolException, match="is image/png, which fetch_url cannot read"):
        fetch(LOOPBACK_ALLOWED, image)
    with pytest.raises(ToolException, match="answered HTTP 404 Not Found"):
        fetch(LOOPBACK_ALLOWED, site.url("/missing"))
    with pytest.raises(UrlRefused, match="not a valid URL"):
        fetch(LOOPBACK_ALLOWED, "http://[::1/")
    with pytest.raises(UrlRefused, match="only http and https URLs"):
        fetch(LOOPBACK_ALLOWED, "ftp://example.org/file")
    with pytest.raises(UrlRefused, match="the URL has no host"):
        fetch(LOOPBACK_ALLOWED, "http:///path")
    with pytest.raises(ToolException, match="cannot resolve no-such-host.invalid"):
        fetch(WebConfig(), "http://no-such-host.invalid/")


# --- web_search -----------------------------------------------------------------


def searx_results() -> BaseTool:
    """LangChain's SearxNG results tool; its host comes from SEARX_HOST."""
    from langchain_community.tools.searx_search.tool import SearxSearchResults
    from langchain_community.utilities import SearxSearchWrapper

    return SearxSearchResults(wrapper=SearxSearchWrapper(), num_results=2)


NOT_A_TOOL = 42


def failing_factory() -> BaseTool:
    raise RuntimeError("TAVILY_API_KEY is not set")


def test_web_search_slot_takes_a_langchain_search_tool(
    site: LocalSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = {
        "results": [
            {
                "title": "Tides of Brest",
                "url": "https://tides.example/brest",
                "content": "High water 06:42",
                "engines": ["stand-in"],
                "category": "general",
            }
        ]
    }
    monkeypatch.setenv("SEARX_HOST", site.route("/search", body=json.dumps(results).encode()))
    tools = make_web_tools(WebConfig(search=f"{__name__}:searx_results"))
    assert [t.name for t in tools] == ["fetch_url", "web_search"]
    out = tools[1].invoke({"query": "tides brest"})
    assert "https://tides.example/brest" in out and "High water 06:42" in out

    instance = searx_results()
    (_, web_search) = make_web_tools(WebConfig(), search=instance)
    assert web_search.name == "web_search" and instance.name == "searx_search_results"
    assert [t.name for t in make_web_tools(WebConfig())] == ["fetch_url"]


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("no_colon", "takes MODULE:ATTR"),
        ("no_such_module_xyz:tool", "cannot import the search tool"),
        (f"{__name__}:NOT_A_TOOL", "must name a LangChain tool"),
        (f"{__name__}:failing_factory", "cannot create the search tool .* TAVILY_API_KEY"),
    ],
)
def test_a_bad_search_tool_is_one_line(spec: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        make_web_tools(WebConfig(search=spec))


def test_the_web_bundle_is_opt_in(workspace: Path) -> None:
    assert "web" not in default_registry(workspace).bundles
    registry = default_registry(workspace, web=WebConfig())
    assert registry.bundles["web"].tools == ("fetch_url",)
    assert "- web: Fetch web pages and PDFs" in registry.describe()
    # Built with the graph, so a run's context cannot switch it on or change its policy.
    with pytest.raises(ValueError, match="web apply when the graph is built"):
        AimeConfig().override({"web": {"allow_private_hosts": ["127.0.0.1"]}})


def test_without_the_extra_the_web_bundle_names_it(
    monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "trafilatura" else real_find_spec(name, *args),
    )
    with pytest.raises(
        ImportError, match=r"the web bundle needs trafilatura: pip install 'aimegraph\[web\]'"
    ):
        default_registry(workspace, web=WebConfig())
