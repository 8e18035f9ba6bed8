"""Checkpoint URLs: their accepted forms, parsing and redaction.

Shared by the checkpointer factory, the thread leases (which live where the
checkpoints do) and the memory store (which takes the same URLs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

DEFAULT_CHECKPOINT_URL = "sqlite:///.aimegraph/checkpoints.db"
"""Where checkpoints go when no URL is given: an SQLite file under the working directory."""

CHECKPOINT_URL_FORMS: tuple[str, ...] = (
    "memory",
    "sqlite:///relative/path.db",
    "sqlite:////absolute/path.db",
    "sqlite:///:memory:",
    "postgresql://user:password@host:5432/dbname",
    "postgres://user:password@host:5432/dbname",
)
"""The URL shapes ``open_checkpointer`` understands (quoted in error messages)."""


class CheckpointURLError(ValueError):
    """The checkpoint URL is not one of ``CHECKPOINT_URL_FORMS`` (or libpq rejected it)."""


class CheckpointConnectionError(ConnectionError):
    """The checkpoint database could not be reached (the message has the URL, redacted)."""


@dataclass(frozen=True)
class CheckpointTarget:
    """A parsed checkpoint URL."""

    kind: Literal["memory", "sqlite", "postgres"]
    location: str  # sqlite: a path or ":memory:"; postgres: a libpq URL; memory: ""


def parse_checkpoint_url(url: str | None) -> CheckpointTarget:
    """Which backend ``url`` names, and where (``None``: ``DEFAULT_CHECKPOINT_URL``).

    Raises:
        CheckpointURLError: ``url`` is not one of ``CHECKPOINT_URL_FORMS``.
    """
    raw = DEFAULT_CHECKPOINT_URL if url is None else url.strip()
    lowered = raw.lower()
    if lowered in ("memory", "memory://", ":memory:"):
        return CheckpointTarget("memory", "")
    if lowered.startswith("sqlite:///"):
        # Strip the prefix literally instead of urlsplit(): an SQLite path may
        # contain '?' or '#', and the fourth slash (absolute path) must survive.
        path = raw[len("sqlite:///") :]
        if not path:
            raise CheckpointURLError(bad_url_message(raw, "the sqlite URL has no file path"))
        if path == ":memory:":
            return CheckpointTarget("sqlite", path)
        return CheckpointTarget("sqlite", str(Path(path).expanduser()))
    if lowered.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        # libpq accepts postgresql:// and postgres:// itself; the SQLAlchemy-style
        # driver suffix is dropped so URLs copied from other tools also work.
        location = re.sub(r"^postgresql\+psycopg://", "postgresql://", raw, flags=re.I)
        return CheckpointTarget("postgres", location)
    raise CheckpointURLError(bad_url_message(raw, "unknown checkpoint URL scheme"))


def bad_url_message(url: str, reason: str) -> str:
    forms = ", ".join(CHECKPOINT_URL_FORMS)
    return f"{reason}: {redact_url(url)!r}. Use one of: {forms}"


def sqlite_file(url: str | None) -> Path | None:
    """The file an ``sqlite:///`` URL names; None for ``:memory:`` and other schemes.

    Raises:
        CheckpointURLError: ``url`` is not one of ``CHECKPOINT_URL_FORMS``.
    """
    target = parse_checkpoint_url(url)
    if target.kind != "sqlite" or target.location == ":memory:":
        return None
    return Path(target.location)


def sqlite_url(location: str) -> str:
    """The URL of an opened SQLite file, absolute (the working directory may change)."""
    return f"sqlite:///{location if location == ':memory:' else Path(location).absolute()}"


_SECRET_QUERY = re.compile(r"(?i)((?:^|[?&;\s])password=)[^&;\s]*")


def redact_url(url: str) -> str:
    """Return ``url`` with any password replaced by ``***`` (for logs and errors).

    Hides the password of ``scheme://user:password@host`` and ``password=`` query
    or keyword parameters; everything else (user, host, database) stays readable.
    """
    redacted = url
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced '[' in the host; still hide query secrets
        parts = None
    if parts is not None and parts.password is not None:
        userinfo, _, hostinfo = parts.netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        redacted = urlunsplit(parts._replace(netloc=f"{user}:***@{hostinfo}"))
    return _SECRET_QUERY.sub(r"\1***", redacted)
