"""Where a graph's prompt texts come from, looked up per run.

A graph holds a :class:`PromptSource`. The intake node asks it for the version a
new run starts with (``current()``) and records that id in the run's state
(``prompt_version``, checkpointed); every node that writes a role prompt asks
the source for that version's texts (``texts(version)``). So a source whose
current version changes (a prompt store whose active version an optimiser
moves) affects the next run, never a run under way, and a resumed run keeps
the prompts it started with. Only the id lives in the state, never the texts.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, TypeAlias, runtime_checkable

from aimegraph.prompts import DEFAULT_PROMPTS, PromptOverrides, resolve_prompts


def version_id(texts: Mapping[str, str]) -> str:
    """A prompt set's version: the first 12 hex digits of the SHA-256 of its texts
    (every component, sorted by name), so equal texts always get the same id."""
    canonical = json.dumps(dict(sorted(texts.items())), ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]


DEFAULT_VERSION = version_id(DEFAULT_PROMPTS)
"""The version id of the built-in prompts."""


class UnknownPromptVersionWarning(UserWarning):
    """A run's recorded prompt version is not in the graph's source (e.g. resumed
    with other prompts than it started with); the source's current texts are used."""


@runtime_checkable
class PromptSource(Protocol):
    """What ``build_aime_graph(prompts=...)`` reads the role prompts from."""

    def current(self) -> str:
        """The version a new run starts with."""
        ...

    def texts(self, version: str | None = None) -> Mapping[str, str]:
        """Every component's text (``DEFAULT_PROMPTS`` names) in ``version``; the
        current version's when ``None``. An unknown version warns
        (:class:`UnknownPromptVersionWarning`) and gives the current texts."""
        ...


class PromptSet:
    """A fixed prompt set: the defaults with ``overrides`` applied (a mapping or a
    JSON / YAML prompt-set file, checked by :func:`resolve_prompts`). One version."""

    def __init__(self, overrides: PromptOverrides | None = None) -> None:
        self._texts = resolve_prompts(overrides)
        self.version = version_id(self._texts)

    def current(self) -> str:
        return self.version

    def texts(self, version: str | None = None) -> Mapping[str, str]:
        if version is not None and version != self.version:
            warn_unknown_version(version, self.version)
        return self._texts

    def __repr__(self) -> str:
        changed = sorted(k for k, v in self._texts.items() if v != DEFAULT_PROMPTS[k])
        return f"PromptSet(version={self.version!r}, overridden={changed})"


def warn_unknown_version(version: str, used: str) -> None:
    """Warn (:class:`UnknownPromptVersionWarning`) that a run's ``version`` is not in the
    source and ``used`` stands in for it; ``stacklevel`` points at the source's caller."""
    warnings.warn(
        f"prompt version {version!r} recorded by this run is not in the graph's prompt "
        f"source; using version {used!r}",
        UnknownPromptVersionWarning,
        stacklevel=3,
    )


def prompt_text(source: PromptSource | None, name: str, state: Mapping[str, Any]) -> str:
    """Component ``name`` in the run's prompt version (``state["prompt_version"]``,
    recorded by the intake node; the source's current version when absent, as in a
    subgraph used on its own); the built-in text without a source."""
    if source is None:
        return DEFAULT_PROMPTS[name]
    return source.texts(state.get("prompt_version"))[name]


PromptsArg: TypeAlias = PromptOverrides | PromptSource | None
"""``build_aime_graph(prompts=...)``: overrides (a mapping, or a ``.json`` / ``.yaml``
prompt-set file), a prompt store (a ``.jsonl`` file, which the graph builders open,
or a ``PromptStore``), any :class:`PromptSource`, or ``None`` for the defaults."""


def prompt_source(prompts: PromptsArg = None) -> PromptSource:
    """The :class:`PromptSource` for overrides (a mapping or a prompt-set file), any
    ``PromptSource`` as is, or the built-in prompts for ``None``.

    A prompt store's ``.jsonl`` path is not opened here: the store belongs to the
    optimiser package, which builds on this one. The graph builders open it
    (``aimegraph.graphs.sources.open_prompt_source``); elsewhere pass
    ``PromptStore(path)``.

    Raises:
        ValueError: an override names an unknown component or breaks a template
            (see :func:`resolve_prompts`), a file cannot be read, or the path is a
            prompt store's.
    """
    if isinstance(prompts, PromptSource):
        return prompts
    if isinstance(prompts, str | Path) and str(prompts).endswith(".jsonl"):
        raise ValueError(
            f"prompt store {prompts}: pass aimegraph.optimizer.PromptStore({str(prompts)!r}) "
            "(the graph builders open a .jsonl path themselves)"
        )
    if isinstance(prompts, str | Path) and not Path(prompts).is_file():
        raise ValueError(f"prompt set {prompts}: no such file")
    return PromptSet(prompts)
