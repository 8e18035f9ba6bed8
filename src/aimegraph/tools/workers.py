"""Daemon threads that run timed tool calls, reused from call to call.

A sync tool cannot be stopped from outside, so a call that overruns its time limit is
left running: its thread must be a daemon, or a hung tool would keep the process alive
at exit. ``concurrent.futures.ThreadPoolExecutor`` joins its workers at exit, so it
cannot hold them; starting a thread per call could (it did), but costs a thread start
on every tool call, about ten times the hand-off to a waiting thread. These workers
stay for ``idle_s`` after their last call; a worker stuck in a hung tool is simply
busy, and the next call starts another.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

Job = Callable[[], None]


class DaemonWorkers:
    """Runs each submitted job at once in a daemon thread: an idle worker's, or a new one's.

    Every job put in the queue is matched by a worker bound to take one: one it
    reserved (counted out of ``_idle``) or one it started. A worker leaves only after
    ``idle_s`` with nothing to do and only while an unreserved idle worker is counted
    (itself), so a queued job never waits for a worker that left.
    """

    def __init__(self, *, idle_s: float = 30.0, name: str = "aimegraph-tool") -> None:
        self._jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._idle_s = idle_s
        self._name = name

    def submit(self, job: Job) -> None:
        """Run ``job`` (which must not raise) in a worker."""
        with self._lock:
            reserved = self._idle > 0
            if reserved:
                self._idle -= 1
        self._jobs.put(job)
        if not reserved:
            threading.Thread(target=self._work, name=self._name, daemon=True).start()

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self._idle_s)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # an idle worker nobody reserved: this one
                        self._idle -= 1
                        return
                continue  # reserved for a job on its way
            job()
            with self._lock:
                self._idle += 1


TOOL_WORKERS = DaemonWorkers()
"""The process's workers for tool calls run under a time limit."""
