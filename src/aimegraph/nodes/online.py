"""The ``optimize_online`` node: the online prompt optimiser's loop
(:class:`aimegraph.optimizer.online.OnlineLoop`) after every finished run."""

from __future__ import annotations

import logging
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime

from aimegraph.config import AimeConfig
from aimegraph.models.resolve import ModelSpec
from aimegraph.nodes.types import Node
from aimegraph.optimizer.online import OnlineLoop
from aimegraph.optimizer.store import PromptStore
from aimegraph.prompts import DEFAULT_PROMPTS
from aimegraph.prompts.source import PromptSource
from aimegraph.state import AimeState

__all__ = ["make_online_node"]

log = logging.getLogger("aimegraph.optimizer")


def make_online_node(
    config: AimeConfig, source: PromptSource, reflection_model: ModelSpec
) -> Node[AimeState]:
    """The graph's last node when ``config.optimize_online``: :meth:`OnlineLoop.after_run`
    for the run that just finished, with the prompt version the run started with
    (the run's ``optimize_*`` context overrides apply).

    Raises:
        ValueError: ``source`` is not a prompt store (the loop has nowhere to put
            its prompts), or ``optimize_components`` names an unknown component.
    """
    if not isinstance(source, PromptStore):
        raise ValueError(
            "optimize_online needs prompts= a prompt store (a PromptStore or a .jsonl path), "
            f"where it keeps the prompts it writes; got {source!r}"
        )
    unknown = sorted(set(config.optimize_components) - set(DEFAULT_PROMPTS))
    if unknown:
        raise ValueError(
            f"optimize_components: unknown component(s) {unknown}; known: {sorted(DEFAULT_PROMPTS)}"
        )
    loop = OnlineLoop(source, config.chat_model(reflection_model))
    store = source

    def optimize_online(state: AimeState, *, runtime: Runtime[AimeConfig]) -> dict[str, Any]:
        thread_id = (get_config().get("configurable") or {}).get("thread_id")
        version = state.get("prompt_version") or store.current()
        try:
            event = loop.after_run(
                state, config.for_run(runtime), version=version, thread_id=thread_id
            )
        except Exception as exc:  # noqa: BLE001 - the run is done; the loop is best effort
            log.warning("online loop: run not traced: %s: %s", type(exc).__name__, exc)
            event = {"event": "error", "reason": f"{type(exc).__name__}: {exc}"}
        runtime.stream_writer({"type": "optimizer", **event})
        return {}

    return optimize_online
