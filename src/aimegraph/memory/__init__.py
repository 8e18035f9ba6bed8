"""Memory that outlives a run, on LangGraph's own parts (DESIGN.md section 7).

* working memory: the state key ``facts`` and the ``remember`` / ``recall`` tools
  (bundle ``memory``), see :mod:`aimegraph.memory.working`;
* the conversation budget: ``AimeConfig.max_context_tokens``, see
  :mod:`aimegraph.memory.context`;
* long-term experience: episodes and lessons in a LangGraph ``BaseStore``
  (``build_aime_graph(store=open_store(...))``), see :mod:`aimegraph.memory.episodes`.

The graph nodes that use them live in :mod:`aimegraph.memory.nodes` (imported by
the graph builders, not here, to keep this package importable from the nodes).
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
    index_config,
    open_store,
)
from aimegraph.memory.working import MEMORY_BUNDLE, memory_tools, recall, remember

__all__ = [
    "DEFAULT_SCOPE",
    "DEFAULT_STORE_URL",
    "EPISODES",
    "LESSONS",
    "MEMORY_BUNDLE",
    "STORE_URL_FORMS",
    "Episode",
    "Lesson",
    "VectorIndexMissingWarning",
    "aopen_store",
    "episode_key",
    "index_config",
    "memory_tools",
    "namespace",
    "open_store",
    "recall",
    "remember",
]
