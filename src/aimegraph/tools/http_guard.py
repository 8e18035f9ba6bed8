"""An HTTP GET that a model may aim anywhere: the policy of
:class:`~aimegraph.config.WebConfig` applied on every hop.

Each hop (the first request and every redirect, followed here, not by httpx):

1. the scheme must be http or https and the host pass the allow and deny lists;
2. the host is resolved once, and every address it resolves to must be public
   (``ipaddress``'s ``is_global``, not multicast), unless the host is one of
   ``allow_private_hosts``;
3. the request goes to the checked address itself, with the original ``Host``
   header and TLS server name (httpx's ``sni_hostname`` extension), so the
   certificate is verified for the host name and a second DNS answer (DNS
   rebinding) never gets a say.

The whole fetch shares one deadline, and the body (after content decoding, so a
compressed bomb is cut too) is read up to ``max_bytes``. Environment proxies are
ignored: a proxy would make its own connections, unchecked.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass

import httpx
from langchain_core.tools import ToolException

from aimegraph.config import WebConfig

__all__ = ["Fetched", "UrlRefused", "guarded_get", "host_listed"]

USER_AGENT = "aimegraph-fetch_url/0.1"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_SCHEMES = frozenset({"http", "https"})


class UrlRefused(ToolException):
    """The policy forbids fetching this URL (scheme, host list or address)."""


@dataclass(frozen=True)
class Fetched:
    """A response body, read up to the size cap."""

    url: str
    """The URL that answered, after redirects."""
    content_type: str
    """The media type, lower-cased, without parameters (``""`` when absent)."""
    charset: str | None
    body: bytes
    truncated: bool
    """The body was longer than ``max_bytes`` and was cut there."""


def guarded_get(url: str, policy: WebConfig, *, tls: ssl.SSLContext | None = None) -> Fetched:
    """GET ``url`` under ``policy``; raise :class:`UrlRefused` for a forbidden hop and
    ToolException for a failed fetch (timeout, HTTP error status, connection error).

    ``tls`` is the TLS context to verify servers with; pass one to share it between
    fetches (making one loads the CA bundle: tens of milliseconds). Default: a new
    one with httpx's default CA bundle."""
    deadline = time.monotonic() + policy.timeout_s
    url = url.strip()
    if "://" not in url and not url.startswith(("/", "file:", "data:")):
        url = f"https://{url}"  # models often write a bare host: "example.com/page"
    try:
        current = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise UrlRefused(f"not a valid URL: {url!r} ({exc})") from exc
    verify: ssl.SSLContext | bool = True if tls is None else tls
    with httpx.Client(verify=verify, trust_env=False, follow_redirects=False) as client:
        for _hop in range(policy.max_redirects + 1):
            response = _send(client, current, _checked_addresses(current, policy), deadline, policy)
            try:
                location = response.headers.get("location")
                if response.status_code in _REDIRECTS and location:
                    current = current.join(location)
                    continue
                if response.status_code >= 400:
                    raise ToolException(
                        f"{current} answered HTTP {response.status_code} {response.reason_phrase}"
                    )
                body, truncated = _read_capped(response, policy, deadline, url)
            finally:
                response.close()
            media_type = response.headers.get("content-type", "").partition(";")[0]
            return Fetched(
                url=str(current),
                content_type=media_type.strip().lower(),
                charset=response.charset_encoding,
                body=body,
                truncated=truncated,
            )
    raise UrlRefused(f"{url} redirected more than {policy.max_redirects} times")


def _send(
    client: httpx.Client,
    url: httpx.URL,
    addresses: list[str],
    deadline: float,
    policy: WebConfig,
) -> httpx.Response:
    """The response of the first of ``addresses`` that takes the connection (a host
    may resolve to an IPv6 address it does not listen on, then an IPv4 one)."""
    for index, address in enumerate(addresses):
        request = client.build_request(
            "GET",
            url.copy_with(host=address),
            headers={"Host": url.netloc.decode("ascii"), "User-Agent": USER_AGENT},
            extensions={"sni_hostname": url.raw_host.decode("ascii")},
            timeout=_remaining(deadline, str(url), policy),
        )
        try:
            return client.send(request, stream=True)
        except httpx.ConnectError as exc:
            if index + 1 < len(addresses):
                continue
            raise ToolException(f"cannot connect to {url.host}: {_reason(exc)}") from exc
        except httpx.TimeoutException as exc:
            raise ToolException(f"fetching {url} timed out after {policy.timeout_s:g} s") from exc
        except httpx.HTTPError as exc:
            raise ToolException(f"cannot fetch {url}: {_reason(exc)}") from exc
    raise AssertionError("unreachable: a resolved host has at least one address")


def host_listed(host: str, entries: tuple[str, ...]) -> bool:
    """Whether ``host`` is one of ``entries`` or a subdomain of one."""
    host = host.lower().rstrip(".")
    for entry in entries:
        name = entry.strip().lower().rstrip(".")
        if host == name or host.endswith("." + name):
            return True
    return False


def _checked_addresses(url: httpx.URL, policy: WebConfig) -> list[str]:
    """The addresses to connect to for ``url``, after every check of the policy."""
    if url.scheme not in _SCHEMES:
        raise UrlRefused(f"only http and https URLs can be fetched, not {url}")
    host = url.host
    if not host:
        raise UrlRefused(f"the URL has no host: {url}")
    if host_listed(host, policy.deny_hosts):
        raise UrlRefused(f"{host} is on the deny list")
    if policy.allow_hosts and not host_listed(host, policy.allow_hosts):
        raise UrlRefused(f"{host} is not on the allow list ({', '.join(policy.allow_hosts)})")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        answers = socket.getaddrinfo(url.raw_host.decode("ascii"), port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ToolException(f"cannot resolve {host}: {exc}") from exc
    addresses = list(dict.fromkeys(str(answer[4][0]) for answer in answers))
    if not host_listed(host, policy.allow_private_hosts):
        for address in addresses:
            if not _is_public(address):
                raise UrlRefused(
                    f"{host} resolves to {address}, which is not a public address; private, "
                    "loopback and link-local addresses are refused (hosts allowed them: "
                    "WebConfig.allow_private_hosts)"
                )
    return addresses


def _is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.partition("%")[0])  # drop an IPv6 zone id
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def _read_capped(
    response: httpx.Response, policy: WebConfig, deadline: float, url: str
) -> tuple[bytes, bool]:
    body = bytearray()
    try:
        for chunk in response.iter_bytes():
            room = policy.max_bytes - len(body)
            body += chunk[:room]
            if len(chunk) > room:
                return bytes(body), True
            _remaining(deadline, url, policy)
    except httpx.TimeoutException as exc:
        raise ToolException(f"fetching {url} timed out after {policy.timeout_s:g} s") from exc
    except httpx.HTTPError as exc:
        raise ToolException(f"reading {url} failed: {_reason(exc)}") from exc
    return bytes(body), False


def _remaining(deadline: float, url: str, policy: WebConfig) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise ToolException(f"fetching {url} timed out after {policy.timeout_s:g} s")
    return left


def _reason(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__
