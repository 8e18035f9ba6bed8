"""The Celery app: one task, ``aimegraph.run_thread(thread_id, resume=None)``.

Delivery settings (why each):

- ``task_acks_late``: a message is acknowledged when the run ends or pauses, not
  when it starts, so a worker that dies mid-run leaves it in the broker.
- ``task_reject_on_worker_lost``: with the prefork pool, a killed child process
  re-queues its message instead of acknowledging it.
- ``worker_prefetch_multiplier=1``: a worker reserves no more runs than it has
  slots, so queued runs go to whichever worker frees up first.
- Redis ``visibility_timeout``: a message not acknowledged within it is delivered
  again. That is how a dead worker's run reaches another worker; a run still
  going after the timeout gets a second delivery too, which waits on the thread's
  lock and then finds nothing left to do.

Shutting down (SIGTERM or Ctrl+C: Celery's warm shutdown, which takes no new
delivery and waits for the tasks in hand): the worker drains its runs, each stops
at its next step boundary once the calls in flight return (a hung call waits at
most its timeout), and its delivery is retried, so another worker (or this one,
restarted) carries it on from its checkpoint.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from celery import Celery, Task
from celery.signals import worker_shutting_down
from langgraph.store.base import BaseStore
from psycopg import OperationalError
from psycopg_pool import PoolTimeout

from aimegraph.checkpoints import CheckpointConnectionError, redact_url
from aimegraph.distributed.runner import (
    DEFAULT_GRAPH_BUILDER,
    RunDrainedError,
    ThreadBusyError,
    drain_runs,
    execute_run,
    load_graph_builder,
)

__all__ = [
    "DEFAULT_BROKER_URL",
    "DEFAULT_QUEUE",
    "DEFAULT_VISIBILITY_TIMEOUT_S",
    "TASK_NAME",
    "BrokerConnectionError",
    "WorkerSettings",
    "check_broker",
    "make_app",
]

log = logging.getLogger(__name__)

TASK_NAME = "aimegraph.run_thread"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/0"
DEFAULT_QUEUE = "aimegraph"
DEFAULT_VISIBILITY_TIMEOUT_S = 300
# A delivery that finds its thread locked by another worker comes back this much later.
LOCK_RETRY_S = 2.0
_BROKER_CHECK_TIMEOUT_S = 5.0


class BrokerConnectionError(ConnectionError):
    """The broker URL is malformed or the broker does not answer."""


@dataclass(frozen=True)
class WorkerSettings:
    """Where a worker finds its runs and how it builds their graphs.

    ``store`` is the long-term memory its runs recall from and record into, opened
    once by the worker process and shared by its threads (``aimegraph worker`` opens
    ``--store``, by default the checkpoints' own Postgres database); None runs them
    without memory."""

    checkpoints: str
    graph_builder: str = DEFAULT_GRAPH_BUILDER
    store: BaseStore | None = None


def make_app(
    broker: str,
    *,
    visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT_S,
    queue: str = DEFAULT_QUEUE,
    worker: WorkerSettings | None = None,
) -> Celery:
    """A Celery app for submitting runs (``worker=None``) or executing them."""
    app = Celery("aimegraph", broker=broker, set_as_current=False)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=queue,
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,  # outcomes live in Postgres, not in a result backend
        broker_connection_retry_on_startup=True,
        broker_transport_options={
            "visibility_timeout": visibility_timeout,
            # Sweep for expired messages often enough for the timeout to matter.
            "unacked_restore_interval": max(1, min(10, int(visibility_timeout // 5))),
            "unacked_restore_throttle": 1,
        },
        worker_hijack_root_logger=False,
    )
    if worker is not None:
        build_graph = load_graph_builder(worker.graph_builder)

        # A database outage (connection lost, pool exhausted) is waited out: Celery
        # retries the delivery with backoff, and the retry continues from the last
        # checkpoint. Any other error has ended the run as failed, with its reason.
        @app.task(
            bind=True,
            name=TASK_NAME,
            max_retries=None,
            autoretry_for=(OperationalError, PoolTimeout, CheckpointConnectionError),
            retry_backoff=2,
            retry_backoff_max=60,
        )
        def run_thread(self: Task, thread_id: str, resume: dict[str, Any] | None = None) -> None:
            try:
                record = execute_run(
                    worker.checkpoints,
                    thread_id,
                    self.request.hostname or "worker",
                    build_graph,
                    resume,
                    worker.store,
                    # A human wait with a timeout: a delivery at its deadline gives
                    # the default answer unless a human has answered by then.
                    wake_at=lambda deadline: self.apply_async(
                        (thread_id,), countdown=max(0.0, deadline - time.time())
                    ),
                )
            except ThreadBusyError as exc:
                raise self.retry(countdown=LOCK_RETRY_S, exc=exc) from exc
            except RunDrainedError as exc:  # stopped at a step boundary: carry on later
                log.info("%s; queued again", exc)
                raise self.retry(countdown=0, exc=exc) from exc
            if record is not None:
                log.info("thread %s: %s", thread_id, record.outcome)

        worker_shutting_down.connect(_drain, weak=False, dispatch_uid="aimegraph-drain")

    return app


def _drain(sender: Any = None, **_: Any) -> None:
    """Celery's warm shutdown began (in its signal handler): stop the runs in hand
    at their next step boundary."""
    drain_runs("worker shutdown")


def check_broker(app: Celery, timeout: float = _BROKER_CHECK_TIMEOUT_S) -> None:
    """Connect once; BrokerConnectionError naming the URL when that fails (Celery
    itself would keep retrying in silence)."""
    url = str(app.conf.broker_url)
    try:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as exc:  # kombu raises KeyError, ValueError, OSError, OperationalError
        raise BrokerConnectionError(
            f"cannot reach the broker {redact_url(url)}: {type(exc).__name__}: {exc}"
        ) from exc
