"""Long-term experience: episodes and lessons in a LangGraph store.

Namespaces are ``("aimegraph", <scope>, "episodes")`` and
``("aimegraph", <scope>, "lessons")``; ``<scope>`` is the run's ``user_id`` (from
``configurable`` or the ``context``) or ``"default"``, and a run only ever reads
its own scope. An episode's key is ``{thread_id}:{task_id}:{attempt}``, so a node
that runs again after a crash and resume overwrites its own episode instead of
adding a second one. A run's own episode uses the task id ``run`` and, as its
attempt, a digest of the goal (one per goal and thread).

Every store access goes through :func:`store_runnable`, a runnable with a sync
and an async body, so the memory nodes (written once as generators, see
:mod:`aimegraph.nodes.dual`) use ``batch`` under ``invoke`` and ``abatch`` under
``ainvoke``, whatever kind of store (sync or async) the graph was given.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore, Item, Op, PutOp, SearchItem, SearchOp
from langgraph.store.base.batch import AsyncBatchedBaseStore
from pydantic import BaseModel, Field, computed_field

from aimegraph.knowledge.embeddings import HashingEmbeddings

__all__ = [
    "DEFAULT_SCOPE",
    "EPISODES",
    "LESSONS",
    "Episode",
    "Lesson",
    "episode_key",
    "memory_scope",
    "namespace",
    "rank_items",
    "search_ops",
    "store_runnable",
]

DEFAULT_SCOPE = "default"
ROOT, EPISODES, LESSONS = "aimegraph", "episodes", "lessons"
RUN_TASK_ID = "run"
# Without a vector index (Postgres without pgvector, a plain store passed by the
# caller) retrieval ranks this many of the newest items of a namespace in process.
SCAN_LIMIT = 200


class Episode(BaseModel):
    """One settled task (or a whole run, ``task_id == "run"``), as stored."""

    goal: str
    task_id: str
    title: str
    description: str = ""
    persona: str = ""
    bundles: list[str] = Field(default_factory=list)
    tools_used: dict[str, int] = Field(default_factory=dict)
    outcome: Literal["completed", "failed"]
    summary: str = ""
    issues: list[str] = Field(default_factory=list)
    lesson: str = ""
    thread_id: str = ""
    attempt: int = 1
    plan: list[str] = Field(default_factory=list)
    usage: dict[str, Any] = Field(default_factory=dict)
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat())

    @computed_field  # type: ignore[prop-decorator]
    @property
    def text(self) -> str:
        """What the vector index embeds: the work it was, not how it went."""
        if self.task_id == RUN_TASK_ID:
            return self.goal
        return f"{self.title}. {self.description}".strip()


class Lesson(BaseModel):
    """What went wrong and what worked: written by the model after a recovery
    (``source="engine"``), or taught by a user's rating of a run (``source="user"``,
    with the ``rating``; see :mod:`aimegraph.memory.feedback`)."""

    goal: str
    task_id: str
    title: str
    lesson: str
    thread_id: str = ""
    source: Literal["engine", "user"] = "engine"
    rating: int | None = None
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat())

    @computed_field  # type: ignore[prop-decorator]
    @property
    def text(self) -> str:
        return f"{self.title}. {self.goal}".strip()


def namespace(scope: str, kind: str) -> tuple[str, str, str]:
    return (ROOT, scope, kind)


def memory_scope(runtime: Runtime[Any], user_id: str | None = None) -> str:
    """The run's ``user_id`` (``AimeConfig.user_id`` as the run resolved it, from the
    builder's config or the run's context, then ``configurable``), else ``"default"``."""
    user = user_id or getattr(runtime.context, "user_id", None)
    if not user:
        try:
            user = get_config().get("configurable", {}).get("user_id")
        except RuntimeError:  # outside a runnable context
            user = None
    return str(user) if user else DEFAULT_SCOPE


def thread_id(runtime: Runtime[Any]) -> str:
    info = runtime.execution_info
    return (info.thread_id if info is not None else None) or "unthreaded"


def episode_key(thread: str, task_id: str, attempt: int | str) -> str:
    return f"{thread}:{task_id}:{attempt}"


def run_attempt(goal: str) -> str:
    return hashlib.blake2b(goal.encode("utf-8"), digest_size=4).hexdigest()


def store_runnable(store: BaseStore) -> Runnable[Sequence[Op], list[Any]]:
    """The store's ``batch`` as a runnable with a sync and an async body; writes get
    the store's default TTL, as ``store.put`` would give them (a bare ``PutOp``
    means "never expires")."""
    default_ttl = (store.ttl_config or {}).get("default_ttl")

    def with_ttl(ops: Sequence[Op]) -> list[Op]:
        if default_ttl is None:
            return list(ops)
        return [
            op._replace(ttl=default_ttl)
            if isinstance(op, PutOp) and op.value is not None and op.ttl is None
            else op
            for op in ops
        ]

    def batch(ops: Sequence[Op]) -> list[Any]:
        return store.batch(with_ttl(ops))

    async def abatch(ops: Sequence[Op]) -> list[Any]:
        # An async store's sync API refuses the event loop's thread; a sync store
        # (SqliteStore) has no async API: run its batch in a worker thread.
        if isinstance(store, AsyncBatchedBaseStore):
            return await store.abatch(with_ttl(ops))
        return await asyncio.to_thread(store.batch, with_ttl(ops))

    return RunnableLambda(batch, afunc=abatch, name="memory_store")


def has_index(store: BaseStore) -> bool:
    return bool(getattr(store, "index_config", None))


def search_ops(
    store: BaseStore,
    scope: str,
    kinds: Iterable[str],
    query: str,
    k: int,
    *,
    filter: Mapping[str, Any] | None = None,
) -> list[Op]:
    """One search per namespace: by vector when the store has an index, else the
    newest items, ranked afterwards by :func:`rank_items`."""
    indexed = has_index(store)
    return [
        SearchOp(
            namespace_prefix=namespace(scope, kind),
            filter=dict(filter) if filter else None,
            query=query if indexed else None,
            limit=k if indexed else SCAN_LIMIT,
        )
        for kind in kinds
    ]


def rank_items(
    store: BaseStore, results: Sequence[Sequence[SearchItem]], query: str, k: int
) -> list[SearchItem]:
    """The ``k`` best items across searches: by the store's scores when it has an
    index, else by cosine similarity of ``text`` computed here. A user's lessons
    (``source="user"``) outrank the engine's items: those among the best come
    first, and so does one on the goal of an engine item among the best, in place
    of the weakest engine item (a user's verdict on a goal outranks the engine's own
    on it, however the two texts score against a similar goal)."""
    items = [item for found in results for item in found]
    if not items:
        return []
    if has_index(store):
        ranked = sorted(items, key=lambda i: i.score or 0.0, reverse=True)
    else:
        embeddings: Embeddings = getattr(store, "embeddings", None) or HashingEmbeddings()
        vectors = np.asarray(embeddings.embed_documents([_text(i) for i in items]))
        query_vector = np.asarray(embeddings.embed_query(query))
        norms = np.linalg.norm(vectors, axis=1) * (np.linalg.norm(query_vector) or 1.0)
        scores = vectors @ query_vector / np.where(norms > 0, norms, 1.0)
        ranked = [items[i] for i in np.argsort(-scores, kind="stable")]
    best = ranked[:k]
    goals = {item.value.get("goal") for item in best} - {None, ""}
    users = [
        item
        for item in ranked
        if _by_user(item) and (item in best or item.value.get("goal") in goals)
    ]
    return [*users, *(item for item in best if not _by_user(item))][:k]


def _by_user(item: Item) -> bool:
    return item.value.get("source") == "user"


def _text(item: Item) -> str:
    return str(item.value.get("text", ""))


def put_op(scope: str, kind: str, key: str, record: BaseModel) -> PutOp:
    return PutOp(namespace(scope, kind), key, record.model_dump(mode="json"))


def episode_ops(scope: str, key: str, episode: Episode) -> list[Op]:
    """The store writes for an episode: the episode, and its lesson (if it has one)
    under the same key, where the planner and the actor factory look for lessons."""
    ops: list[Op] = [put_op(scope, EPISODES, key, episode)]
    if episode.lesson:
        lesson = Lesson(
            goal=episode.goal,
            task_id=episode.task_id,
            title=episode.title,
            lesson=episode.lesson,
            thread_id=episode.thread_id,
        )
        ops.append(put_op(scope, LESSONS, key, lesson))
    return ops


def episode_from(value: Mapping[str, Any]) -> Episode:
    return Episode.model_validate({k: v for k, v in value.items() if k != "text"})
