"""Memory that outlives a run, on LangGraph's own parts.

* working memory: the state key ``facts`` and the ``remember`` / ``recall`` tools
  (bundle ``memory``), see :mod:`aimegraph.tools.whiteboard`;
* the conversation budget: ``AimeConfig.max_context_tokens``, part of the
  actor's own loop in the core, :mod:`aimegraph.nodes.context` (re-exported here);
* long-term experience: episodes and lessons in a LangGraph ``BaseStore``
  (``build_aime_graph(store=open_store(...))``), see :mod:`aimegraph.memory.episodes`.

The graph nodes that use them live in :mod:`aimegraph.memory.nodes`, imported by
the graph builders. This package depends on the core (nodes, state, prompts), never
the other way round: the prompt sections for facts and past runs are
:mod:`aimegraph.nodes.sections`.
"""

from aimegraph.memory.episodes import (
    DEFAULT_SCOPE,
    EPISODES,
    LESSONS,
    Episode,
    Lesson,
    episode_key,
    namespace,
)
from aimegraph.memory.store import (
    DEFAULT_STORE_URL,
    STORE_URL_FORMS,
    VectorIndexMissingWarning,
    aopen_store,
    default_store_url,
    index_config,
    open_store,
)
from aimegraph.nodes.context import ContextView, fit_context, within_budget
from aimegraph.tools.whiteboard import MEMORY_BUNDLE, memory_tools, recall, remember

__all__ = [
    "DEFAULT_SCOPE",
    "DEFAULT_STORE_URL",
    "EPISODES",
    "LESSONS",
    "MEMORY_BUNDLE",
    "STORE_URL_FORMS",
    "ContextView",
    "Episode",
    "Lesson",
    "VectorIndexMissingWarning",
    "aopen_store",
    "default_store_url",
    "episode_key",
    "fit_context",
    "index_config",
    "memory_tools",
    "namespace",
    "open_store",
    "recall",
    "remember",
    "within_budget",
]
