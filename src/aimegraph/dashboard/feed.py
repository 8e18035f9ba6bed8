"""Cheap change detection over a checkpointer, the dashboard's shared truth.

Every page polls here several times a second, so the questions asked are the
cheap ones: which is each thread's newest top-level checkpoint and how many
pending writes it has (a finished task or an interrupt adds writes without a new
checkpoint), and for one thread, its newest checkpoint in any namespace (an
actor's ReAct steps checkpoint in the executor's namespace). SQLite and Postgres
answer with one aggregate query; the in-memory saver from its dictionaries; any
other saver by listing its checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from aimegraph.checkpoints import thread_config


class Head(NamedTuple):
    """A thread's newest top-level checkpoint and its pending-write count."""

    checkpoint_id: str
    writes: int


_HEADS_SQL = """
SELECT c.thread_id, c.checkpoint_id,
       (SELECT COUNT(*) FROM {writes} w
         WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = ''
           AND w.checkpoint_id = c.checkpoint_id)
  FROM (SELECT thread_id, MAX(checkpoint_id) AS checkpoint_id
          FROM checkpoints WHERE checkpoint_ns = '' GROUP BY thread_id) c
"""

_VERSION_SQL = """
SELECT (SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = {p}),
       (SELECT COUNT(*) FROM {writes} WHERE thread_id = {p})
"""

_NAMESPACES_SQL = """
SELECT checkpoint_ns, MAX(checkpoint_id) FROM checkpoints WHERE thread_id = {p}
 GROUP BY checkpoint_ns
"""

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]


@dataclass(frozen=True)
class _Sql:
    """How to ask one of LangGraph's SQL savers: a read-only query function under
    the saver's own lock, its pending-writes table and its parameter placeholder."""

    query: Query
    writes: str
    param: str


class CheckpointFeed:
    """Answers "what changed?" for the threads of one checkpointer."""

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        self.saver = saver
        self._sql = _sql_for(saver)

    def heads(self) -> dict[str, Head]:
        """Each thread's newest top-level checkpoint."""
        if self._sql is not None:
            rows = self._sql.query(_HEADS_SQL.format(writes=self._sql.writes), ())
            return {str(t): Head(str(c), int(n)) for t, c, n in rows}
        if isinstance(self.saver, InMemorySaver):
            return self._memory_heads(self.saver)
        heads: dict[str, Head] = {}
        for item in self.saver.list(None):
            configurable = item.config["configurable"]
            if configurable.get("checkpoint_ns"):
                continue
            thread_id, checkpoint_id = configurable["thread_id"], configurable["checkpoint_id"]
            if thread_id not in heads or checkpoint_id > heads[thread_id].checkpoint_id:
                heads[thread_id] = Head(checkpoint_id, len(item.pending_writes or []))
        return heads

    def version(self, thread_id: str) -> str | None:
        """A token that changes whenever anything in the thread does (any namespace);
        None for an unknown thread."""
        if self._sql is not None:
            sql = _VERSION_SQL.format(writes=self._sql.writes, p=self._sql.param)
            ((newest, writes),) = self._sql.query(sql, (thread_id, thread_id))
            return None if newest is None else f"{newest}.{writes}"
        if isinstance(self.saver, InMemorySaver):
            return self._memory_version(self.saver, thread_id)
        items = list(self.saver.list(thread_config(thread_id)))
        if not items:
            return None
        newest = max(i.config["configurable"]["checkpoint_id"] for i in items)
        return f"{newest}.{sum(len(i.pending_writes or []) for i in items)}"

    def namespaces(self, thread_id: str) -> dict[str, str]:
        """The newest checkpoint id of each namespace of the thread (``""`` is the
        run itself; subgraphs such as ``executor:<id>`` have their own)."""
        if self._sql is not None:
            sql = _NAMESPACES_SQL.format(p=self._sql.param)
            return {str(ns): str(cid) for ns, cid in self._sql.query(sql, (thread_id,))}
        if isinstance(self.saver, InMemorySaver):
            stored = list((self.saver.storage.get(thread_id) or {}).items())
            return {ns: max(ids) for ns, ids in stored if ids}
        newest: dict[str, str] = {}
        for item in self.saver.list(thread_config(thread_id)):
            ns, cid = (
                item.config["configurable"]["checkpoint_ns"],
                item.config["configurable"]["checkpoint_id"],
            )
            newest[ns] = max(cid, newest.get(ns, cid))
        return newest

    @staticmethod
    def _memory_heads(saver: InMemorySaver) -> dict[str, Head]:
        heads = {}
        for thread_id, namespaces in list(saver.storage.items()):
            ids = list(namespaces.get("", {}))
            if ids:
                newest = max(ids)
                heads[thread_id] = Head(newest, len(saver.writes.get((thread_id, "", newest), {})))
        return heads

    @staticmethod
    def _memory_version(saver: InMemorySaver, thread_id: str) -> str | None:
        namespaces = saver.storage.get(thread_id)
        ids = [cid for ns in list((namespaces or {}).values()) for cid in list(ns)]
        if not ids:
            return None
        writes = sum(len(w) for key, w in list(saver.writes.items()) if key[0] == thread_id)
        return f"{max(ids)}.{writes}"


def _sql_for(saver: BaseCheckpointSaver[Any]) -> _Sql | None:
    """None when the saver is not one of LangGraph's SQL savers (the extras that
    provide them may be absent, hence the check by name)."""
    kind = type(saver).__name__
    if kind == "SqliteSaver":

        def sqlite_query(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
            with saver.cursor(transaction=False) as cur:  # type: ignore[attr-defined]
                cur.execute(sql, tuple(params))
                return [tuple(row) for row in cur.fetchall()]

        return _Sql(sqlite_query, writes="writes", param="?")
    if kind == "PostgresSaver":

        def postgres_query(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
            with saver._cursor() as cur:  # type: ignore[attr-defined]
                cur.execute(sql, tuple(params))
                return [tuple(row.values()) for row in cur.fetchall()]

        return _Sql(postgres_query, writes="checkpoint_writes", param="%s")
    return None
