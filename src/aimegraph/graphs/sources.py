"""The builders' ``prompts=`` argument, resolved to a prompt source.

The core :func:`aimegraph.prompts.source.prompt_source` knows overrides and any
``PromptSource``; a prompt store is the optimiser's (``aimegraph.optimizer``, a
wave-2 package that builds on the core), so the builders, which sit above both,
are where a ``.jsonl`` path is opened as one.
"""

from __future__ import annotations

from pathlib import Path

from aimegraph.prompts.source import PromptsArg, PromptSource, prompt_source


def open_prompt_source(prompts: PromptsArg = None) -> PromptSource:
    """The :class:`PromptSource` for a builder's ``prompts=``: a ``.jsonl`` path is
    opened as a ``PromptStore`` (imported on use: the optimiser package is only
    loaded by graphs that name a store), anything else goes to :func:`prompt_source`.

    Raises:
        ValueError: see :func:`prompt_source`.
    """
    if isinstance(prompts, str | Path) and str(prompts).endswith(".jsonl"):
        from aimegraph.optimizer.store import PromptStore

        return PromptStore(prompts)
    return prompt_source(prompts)
