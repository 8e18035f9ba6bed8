"""A worker's Prometheus metrics (``aimegraph worker --metrics-port``): the runs it
executes (:mod:`aimegraph.metrics`) and the depth of its queue in the broker, on a
port of its own; and its alert rules (``--alerts``), checked in the background, their
alerts recorded in the shared database for the dashboard."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from celery import Celery

from aimegraph.alerts import AlertEngine, AlertSettings
from aimegraph.distributed import records
from aimegraph.distributed.alert_records import AlertRecorder
from aimegraph.metrics import LiveCollector, Metrics, enable_metrics

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

__all__ = ["queue_depth", "serve_worker_metrics"]

log = logging.getLogger(__name__)


def queue_depth(app: Celery, queue: str) -> int:
    """Messages waiting in ``queue`` (not yet taken by a worker)."""
    from kombu.exceptions import ChannelError

    with app.connection_for_read() as connection:
        try:
            declared = connection.default_channel.queue_declare(queue=queue, passive=True)
        except ChannelError as exc:
            if "NOT_FOUND" in str(exc):  # Redis keeps no empty list: an empty queue
                return 0
            raise
        return int(declared.message_count)


def serve_worker_metrics(
    app: Celery,
    queue: str,
    port: int | None,
    host: str = "127.0.0.1",
    alerts: AlertSettings | None = None,
    *,
    worker: str = "",
    checkpoints: str | None = None,
) -> Metrics:
    """Serve the process's metrics and ``queue``'s depth on ``host:port`` (``/metrics``;
    None: not served) from a daemon thread, and check ``alerts`` in the background:
    the alerts of ``worker`` (its Celery node name) go to the runs database
    ``checkpoints``, whose paused runs of this worker its ``human_wait`` rules watch."""
    from prometheus_client import start_http_server

    metrics = enable_metrics()

    def depth() -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        family = GaugeMetricFamily(
            "aimegraph_queue_depth", "Runs waiting in the broker's queue", labels=["queue"]
        )
        try:
            family.add_metric([queue], queue_depth(app, queue))
        except Exception as exc:  # noqa: BLE001 - a scrape without it, not a failed scrape
            log.warning("cannot read the depth of queue %s: %s", queue, exc)
        yield family

    metrics.add_live(LiveCollector(depth))
    if port is not None:
        start_http_server(port, addr=host, registry=metrics.registry)
    if alerts is not None:
        AlertEngine(
            alerts,
            metrics,
            partial(_paused_waits, checkpoints, worker) if checkpoints is not None else None,
            origin=worker,
            sink=AlertRecorder(checkpoints, alerts.interval_s) if checkpoints is not None else None,
        ).start()
    return metrics


def _paused_waits(checkpoints: str, worker: str) -> list[float]:
    try:
        with records.connect(checkpoints) as conn:
            return records.paused_waits(conn, worker)
    except Exception as exc:  # noqa: BLE001 - the other rules are still checked
        log.warning("cannot read the paused runs for the human_wait alerts: %s", exc)
        return []
