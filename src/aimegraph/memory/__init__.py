"""Memory that outlives a run, on LangGraph's own parts.

* working memory: the state key ``facts`` and the ``remember`` / ``recall`` tools
  (bundle ``memory``), see :mod:`aimegraph.tools.whiteboard`;
* the conversation budget: ``AimeConfig.max_context_tokens``, part of the
  actor's own loop, :mod:`aimegraph.nodes.context`;
* long-term experience: episodes and lessons in a LangGraph ``BaseStore``
  (``build_aime_graph(store=open_store(...))``), see :mod:`aimegraph.memory.episodes`.

The graph nodes that use them live in :mod:`aimegraph.nodes.memory`; the prompt
sections for the whiteboard and past runs are :mod:`aimegraph.memory.sections`. This
package sits below the nodes: it knows the store, the state and the prompts, never a
node or a graph.
"""

from aimegraph.lazy import moved
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
from aimegraph.tools.whiteboard import MEMORY_BUNDLE, memory_tools, recall, remember

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
    "default_store_url",
    "episode_key",
    "index_config",
    "memory_tools",
    "namespace",
    "open_store",
    "recall",
    "remember",
]

# The conversation budget is the actor's (aimegraph.nodes.context); kept here for a release.
__getattr__ = moved(
    __name__,
    dict.fromkeys(["ContextView", "fit_context", "within_budget"], "aimegraph.nodes.context"),
)
