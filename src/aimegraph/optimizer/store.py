"""The prompt store: every accepted prompt set, with its parent, scores and date.

A JSON Lines file, append-only, one record a line:

* ``{"kind": "prompt", "version", "parent", "texts", "scores", "source",
  "created_at", "note"}``: a prompt set. ``texts`` holds every component in
  full, so a version means the same texts forever, whatever defaults later code
  ships; ``version`` is their hash (:func:`aimegraph.prompts.source.version_id`).
* ``{"kind": "scores", "version", "scores", "created_at"}``: scores measured
  later for a stored version, merged over its earlier ones.
* ``{"kind": "use", "version", "created_at"}``: the active version (the last one wins).

Writers append whole lines under an exclusive file lock, readers read up to the
last complete line, so several processes (an optimiser, the online loop, the
CLI, runs) can share one file. The store is a :class:`PromptSource`: a graph
built with ``build_aime_graph(prompts=PromptStore(...))`` starts each run with
the version active at that moment and looks its texts up by id.
"""

from __future__ import annotations

import builtins
import json
import os
import threading
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from aimegraph.prompts import DEFAULT_PROMPTS, resolve_prompts
from aimegraph.prompts.source import DEFAULT_VERSION, version_id, warn_unknown_version

try:  # POSIX; elsewhere appends are not locked (one writer at a time, please)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "DEFAULT_PROMPT_STORE",
    "PromptStore",
    "PromptVersion",
    "UnknownPromptVersionError",
    "UnreadablePromptRecordWarning",
    "default_prompt_store",
    "starting_prompts",
]

DEFAULT_PROMPT_STORE = Path(".aimegraph/prompts.jsonl")
"""The default store, beside the default checkpoint database."""

DEFAULT_ALIAS = "default"
"""What ``get``/``use``/the CLI accept for the built-in prompts' version."""


class UnknownPromptVersionError(LookupError):
    """No stored version has that id (or prefix), or the prefix is ambiguous."""


class UnreadablePromptRecordWarning(UserWarning):
    """A line of the store file is not a record (edited by hand, or torn); it is skipped."""


@dataclass(frozen=True)
class PromptVersion:
    """One stored prompt set. ``texts`` has every component; ``scores`` merges
    every score recorded for it (e.g. ``{"val": 0.8, "train": 0.6}``)."""

    version: str
    parent: str | None
    texts: Mapping[str, str]
    scores: Mapping[str, float] = field(default_factory=dict)
    # Who made it: "default", "manual", "gepa" or "online" here; any string is kept.
    source: str = "manual"
    created_at: str = ""
    note: str = ""

    def changed(self, base: Mapping[str, str] = DEFAULT_PROMPTS) -> list[str]:
        """The components whose text differs from ``base`` (default: the built-in prompts)."""
        return sorted(k for k, v in self.texts.items() if base.get(k) != v)

    def as_dict(self) -> dict[str, Any]:
        """The version as its JSON Lines record."""
        return {
            "version": self.version,
            "parent": self.parent,
            "source": self.source,
            "created_at": self.created_at,
            "scores": dict(self.scores),
            "note": self.note,
            "texts": dict(self.texts),
        }


def default_prompt_store(checkpoints_url: str | None = None) -> Path:
    """``prompts.jsonl`` beside an SQLite checkpoint file, else :data:`DEFAULT_PROMPT_STORE`."""
    url = (checkpoints_url or "").strip()
    if url.lower().startswith("sqlite:///") and not url.lower().endswith(":memory:"):
        return Path(url[len("sqlite:///") :]).parent / "prompts.jsonl"
    return DEFAULT_PROMPT_STORE


def starting_prompts(path: str | Path, *, online: bool = False) -> str | None:
    """The prompt store a new run is built with (``aimegraph run``, the dashboard):
    ``path`` when it has an active version, or when the run's online optimiser needs
    a store to write to; else None, the built-in prompts."""
    if online or (Path(path).is_file() and PromptStore(path).active() is not None):
        return str(path)
    return None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _scores_record(version: str, scores: Mapping[str, float]) -> dict[str, Any]:
    return {"kind": "scores", "version": version, "scores": dict(scores), "created_at": _now()}


class PromptStore:
    """A versioned, append-only prompt store in a JSON Lines file (created on
    first write). Version ids may be given as unique prefixes, or ``"default"``
    for the built-in prompts (which need not be stored).

    Example:
        >>> store = PromptStore(".aimegraph/prompts.jsonl")
        >>> v = store.add({"planner": text}, scores={"val": 0.8}, source="manual")
        >>> store.use(v)
        >>> graph = build_aime_graph(model, prompts=store)  # v from the next run on
    """

    def __init__(self, path: str | Path = DEFAULT_PROMPT_STORE) -> None:
        self.path = Path(path)
        self._identity: tuple[int, int] | None = None
        # Parallel actors of one run look texts up at once: one reader at a time.
        self._lock = threading.RLock()
        self._forget()

    def _forget(self) -> None:
        """Drop what was read (the file is read again from its start)."""
        self._offset = 0
        self._versions: dict[str, PromptVersion] = {}
        self._active: str | None = None
        self._resolved: dict[str, dict[str, str]] = {}

    def __repr__(self) -> str:
        return f"PromptStore({str(self.path)!r})"

    # --- writing ---

    def add(
        self,
        texts: Mapping[str, str],
        parent: str | None = None,
        scores: Mapping[str, float] | None = None,
        source: str = "manual",
        note: str = "",
    ) -> str:
        """Store a prompt set; its version id.

        ``texts`` may hold only some components: the others are the parent's
        (the built-in prompts without a parent). Every text is checked like an
        override (:func:`aimegraph.prompts.resolve_prompts`). Adding texts that
        are already stored adds no version: the ``scores`` are recorded for it.

        Raises:
            ValueError: a text names an unknown component or breaks its template.
            UnknownPromptVersionError: ``parent`` is not stored.
        """
        base = self.get(parent) if parent is not None else None
        full = resolve_prompts({**(base.texts if base else DEFAULT_PROMPTS), **texts})
        version = version_id(full)
        with self._locked() as handle:
            if version in self._versions:
                if scores:
                    self._append(handle, _scores_record(version, scores))
                return version
            self._append(
                handle,
                {
                    "kind": "prompt",
                    "version": version,
                    "parent": base.version if base else None,
                    "texts": full,
                    "scores": dict(scores or {}),
                    "source": source,
                    "created_at": _now(),
                    "note": note,
                },
            )
        return version

    def score(self, version: str, scores: Mapping[str, float]) -> str:
        """Record ``scores`` for a version (merged over its earlier ones); its full id.
        The built-in prompts are stored (source ``default``) on their first score."""
        stored = self.get(version)
        if stored.version not in self._versions:
            return self.add(stored.texts, scores=scores, source="default")
        with self._locked() as handle:
            self._append(handle, _scores_record(stored.version, scores))
        return stored.version

    def use(self, version: str) -> str:
        """Make ``version`` the active one (runs starting from now on use it); its full id."""
        full = self.get(version).version
        with self._locked() as handle:
            self._append(handle, {"kind": "use", "version": full, "created_at": _now()})
        return full

    # --- reading ---

    def get(self, version: str) -> PromptVersion:
        """The stored version with this id, unique id prefix, or ``"default"``.

        Raises:
            UnknownPromptVersionError: none, or several, match.
        """
        self._refresh()
        if version == DEFAULT_ALIAS:
            version = DEFAULT_VERSION
        if version in self._versions:
            return self._versions[version]
        if version == DEFAULT_VERSION:
            return PromptVersion(
                DEFAULT_VERSION, None, dict(DEFAULT_PROMPTS), source="default", note="built-in"
            )
        matches = [v for v in self._versions if v.startswith(version)] if version else []
        if DEFAULT_VERSION.startswith(version) and DEFAULT_VERSION not in matches and version:
            matches.append(DEFAULT_VERSION)
        if len(matches) == 1:
            return self.get(matches[0])
        if matches:
            raise UnknownPromptVersionError(
                f"prompt version {version!r} is ambiguous: {', '.join(sorted(matches))}"
            )
        raise UnknownPromptVersionError(f"no prompt version {version!r} in {self.path}")

    def list(self) -> builtins.list[PromptVersion]:
        """Every stored version, oldest first."""
        self._refresh()
        return builtins.list(self._versions.values())

    def active(self) -> str | None:
        """The active version's id (``None``: none chosen, runs use the built-in prompts)."""
        self._refresh()
        return self._active

    def best(self, metric: str = "val") -> str | None:
        """The id of the version with the highest ``scores[metric]`` (the earliest
        on a tie); ``None`` when no version has that score."""
        scored = [v for v in self.list() if metric in v.scores]
        if not scored:
            return None
        return max(scored, key=lambda v: v.scores[metric]).version

    # --- PromptSource ---

    def current(self) -> str:
        """The version a new run starts with: the active one, else the built-in prompts'."""
        return self.active() or DEFAULT_VERSION

    def texts(self, version: str | None = None) -> Mapping[str, str]:
        """Every component's text in ``version`` (a full id; ``None``: the current one)."""
        wanted = version or self.current()
        with self._lock:
            if wanted not in self._resolved:
                try:
                    stored = self.get(wanted)
                except UnknownPromptVersionError:
                    current = self.current()
                    warn_unknown_version(wanted, current)
                    return self.texts(current)
                # Checked again: the file is plain text that anyone may edit.
                self._resolved[wanted] = resolve_prompts(stored.texts)
            return self._resolved[wanted]

    # --- the file ---

    def _refresh(self) -> None:
        """Read the lines appended since the last read (all of them when the file
        was replaced or truncated)."""
        with self._lock:
            self._read_new_lines()

    def _read_new_lines(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._identity = None
            self._forget()
            return
        identity = (stat.st_ino, stat.st_dev)
        if identity != self._identity or stat.st_size < self._offset:
            self._identity = identity
            self._forget()
        if stat.st_size == self._offset:
            return
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        complete = data[: data.rfind(b"\n") + 1]  # a line being written is read next time
        self._offset += len(complete)
        for line in complete.decode("utf-8", errors="replace").splitlines():
            if line.strip():
                try:
                    self._apply(json.loads(line))
                except (ValueError, KeyError, TypeError, AttributeError) as exc:
                    # A hand-edited or torn line must not stop every run that reads the store.
                    warnings.warn(
                        f"{self.path}: skipped an unreadable record ({exc!r}): {line[:80]!r}",
                        UnreadablePromptRecordWarning,
                        stacklevel=4,
                    )

    def _apply(self, record: dict[str, Any]) -> None:
        kind, version = record["kind"], str(record["version"])
        if kind == "prompt" and version not in self._versions:
            self._versions[version] = PromptVersion(
                version=version,
                parent=record.get("parent"),
                texts={str(k): str(v) for k, v in record["texts"].items()},
                scores={str(k): float(v) for k, v in (record.get("scores") or {}).items()},
                source=str(record.get("source", "manual")),
                created_at=str(record.get("created_at", "")),
                note=str(record.get("note", "")),
            )
        elif kind == "scores" and version in self._versions:
            known = self._versions[version]
            scores = {str(k): float(v) for k, v in record["scores"].items()}
            self._versions[version] = replace(known, scores={**known.scores, **scores})
        elif kind == "use":
            self._active = version

    @contextmanager
    def _locked(self) -> Iterator[IO[str]]:
        """The file opened for appending under an exclusive lock, read up to date."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                self._refresh()
                if self._offset < self.path.stat().st_size:  # a torn last line: end it
                    handle.write("\n")
                yield handle
            finally:
                if fcntl is not None:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _append(self, handle: IO[str], record: dict[str, Any]) -> None:
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
        self._refresh()
