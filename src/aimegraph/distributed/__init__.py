"""Distributed runs: Celery workers (Redis broker) over Postgres checkpoints.

``submit_run(goal, broker=..., checkpoints=...)`` queues a run and returns its
thread id; any ``aimegraph worker`` takes it, holding a Postgres advisory lock on
the thread for the run; ``wait_for_run`` blocks until it pauses or ends;
``enqueue_resume`` answers a pause. Needs the ``[distributed]`` extra; the queue
records (``aimegraph.distributed.records``) need only psycopg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aimegraph.lazy import lazy_exports

if TYPE_CHECKING:
    from aimegraph.distributed.app import BrokerConnectionError, make_app
    from aimegraph.distributed.records import RunRecord, ThreadExistsError
    from aimegraph.distributed.submit import (
        RunNotResumableError,
        enqueue_resume,
        submit_run,
        wait_for_run,
    )

__all__ = [
    "BrokerConnectionError",
    "RunNotResumableError",
    "RunRecord",
    "ThreadExistsError",
    "enqueue_resume",
    "make_app",
    "submit_run",
    "wait_for_run",
]

# Celery is imported only when a name that needs it is used, so the CLI can read queue
# records with the [postgres] extra alone.
_HOMES = {
    "BrokerConnectionError": ".app",
    "make_app": ".app",
    "RunRecord": ".records",
    "ThreadExistsError": ".records",
    "RunNotResumableError": ".submit",
    "enqueue_resume": ".submit",
    "submit_run": ".submit",
    "wait_for_run": ".submit",
}

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
