"""The runs the dashboard counts from its checkpoints: every run on its checkpoint
store that stops (ends, or pauses for a human) after the dashboard started,
whichever process ran it (``aimegraph run``, a script, another dashboard), counts
once in the dashboard's run metrics (``aimegraph_runs_total`` by status, the run
duration histogram, the failed-runs streak the ``failed_runs`` alert watches).

So short CLI jobs need no Pushgateway: their ends reach ``/metrics`` through the
shared checkpoint store, looked at when ``/metrics`` is scraped and before each
alert check. Left out: the stops that were there when the dashboard started, the
dashboard's own runs (counted where they run: :func:`aimegraph.metrics.observe_run`),
distributed runs (their worker counts them), and a run that stopped without a stop
in its checkpoints (a killed or drained process leaves its run ``running``).
"""

from __future__ import annotations

import logging
import tempfile
import threading
from collections.abc import Callable, Generator
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.store.memory import InMemoryStore

from aimegraph.checkpoints import has_ended, thread_config
from aimegraph.config import AimeConfig
from aimegraph.dashboard.feed import Head
from aimegraph.dashboard.views import ThreadReader, pending_interrupts
from aimegraph.graphs.aime import AimeGraph, build_aime_graph
from aimegraph.metrics import Metrics
from aimegraph.optimizer.store import PromptStore
from aimegraph.state import ENDED_STATUSES
from aimegraph.steering import DEMO_SCENARIO

__all__ = ["RunEnds"]

log = logging.getLogger(__name__)

STOPS = frozenset({*ENDED_STATUSES, "paused"})
"""Thread statuses a run stops at: it ended, or it waits for a human."""


class RunEnds:
    """Counts into ``metrics`` the runs the checkpoints of ``reader`` show stopped
    since this object was made. ``counted_elsewhere(thread_id)`` is True for a
    thread another process counts (a distributed run: its worker)."""

    def __init__(
        self,
        reader: ThreadReader,
        metrics: Metrics,
        counted_elsewhere: Callable[[str], bool] = lambda thread_id: False,
    ) -> None:
        self.reader = reader
        self.metrics = metrics
        self.counted_elsewhere = counted_elsewhere
        self._lock = threading.Lock()
        self._graph: AimeGraph | None = None
        self._seen: dict[str, Head] = {}
        self._counted: dict[str, str] = {}
        """Each thread's last stop counted (or there already at the start), by checkpoint."""
        for thread_id, head in reader.feed.heads().items():
            self._seen[thread_id] = head
            if self._status(thread_id, head) in STOPS:
                self._counted[thread_id] = head.checkpoint_id

    def count(self) -> None:
        """Count the runs that stopped since the last look (a failure to read the
        checkpoints is logged: the metrics stay as they were until the next look)."""
        try:
            with self._lock:
                self._count()
        except Exception as exc:  # noqa: BLE001 - a scrape or an alert check goes on
            log.warning("cannot read the runs' ends from the checkpoints: %s", exc)

    def _count(self) -> None:
        for thread_id, head in self.reader.feed.heads().items():
            if self._seen.get(thread_id) == head:
                continue
            status = self._status(thread_id, head)
            self._seen[thread_id] = head
            if status not in STOPS or self._counted.get(thread_id) == head.checkpoint_id:
                continue
            self._counted[thread_id] = head.checkpoint_id
            if self.metrics.counted_here(thread_id, head.checkpoint_id):
                continue
            if self.counted_elsewhere(thread_id):
                continue
            self.metrics.run_ended(status, self._duration(thread_id, head))

    def _status(self, thread_id: str, head: Head) -> str | None:
        """The run's status at ``head``: as the threads list shows it, except that a
        run whose status says it ended (the graph sets it before its last steps) is
        ``running`` until the graph has no step left."""
        row = self.reader.row(thread_id, head)
        if row is None:
            return None
        status = str(row["status"])
        if status not in ENDED_STATUSES:
            return status
        if self._graph is None:
            self._graph = _ending_graph(self.reader.saver)
        config = thread_config(thread_id, checkpoint_ns="", checkpoint_id=head.checkpoint_id)
        return status if has_ended(self._graph.get_state(config)) else "running"

    def _duration(self, thread_id: str, head: Head) -> float:
        """From the first checkpoint the run wrote (its input, or the first after the
        stop it was resumed from) to its stop at ``head``."""
        newest_first = self.reader.saver.list(thread_config(thread_id, checkpoint_ns=""))
        listing = cast(Generator[CheckpointTuple], newest_first)
        end: float | None = None
        start: float | None = None
        with closing(listing):  # closing lets go of the saver's lock
            for item in listing:
                if _checkpoint_id(item) > head.checkpoint_id:
                    continue  # written since the look at the heads
                if end is None:
                    end = start = _at(item)
                    continue
                if pending_interrupts(item):
                    break  # the pause it was resumed from
                start = _at(item)
                if item.metadata.get("source") == "input":
                    break  # its goal
        return 0.0 if end is None or start is None else max(0.0, end - start)


def _ending_graph(saver: BaseCheckpointSaver[Any]) -> AimeGraph:
    """A graph to tell whether any thread's run has a step left: it has every node a
    run ends with (a memory store's ``record_run``, ``optimize_online``'s), and a
    node a run never reached is never pending in its checkpoints. Nothing runs on it
    (its store and prompt store are never written)."""
    scratch = Path(tempfile.gettempdir())
    return build_aime_graph(
        DEMO_SCENARIO,
        config=AimeConfig(workspace=scratch, optimize_online=True),
        checkpointer=saver,
        store=InMemoryStore(),
        prompts=PromptStore(scratch / "aimegraph-unused-prompts.jsonl"),
    )


def _at(item: CheckpointTuple) -> float:
    return datetime.fromisoformat(str(item.checkpoint["ts"])).timestamp()


def _checkpoint_id(item: CheckpointTuple) -> str:
    return str(item.config["configurable"]["checkpoint_id"])
