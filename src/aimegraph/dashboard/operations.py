"""The dashboard's operations endpoints: ``/metrics`` (Prometheus text: the runs of
this process, the runs other processes ended on its checkpoint store (see
:mod:`aimegraph.dashboard.run_ends`), and the runs waiting for a human among every
thread it shows) and
``/api/alerts`` (the alerts of the rules it was given, see :mod:`aimegraph.alerts`,
and those the workers recorded in the distributed runs' database)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from aimegraph.alerts import AlertEngine, AlertSettings
from aimegraph.dashboard.run_ends import RunEnds
from aimegraph.dashboard.views import ThreadReader
from aimegraph.distributed.alert_records import shared_alerts, sort_alerts
from aimegraph.distributed.records import find_run
from aimegraph.metrics import LiveCollector, Metrics, enable_metrics, exposition

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

log = logging.getLogger(__name__)

SHARED_TTL_S = 1.0
"""How long the workers' alerts read from the database are reused: every open
threads page asks for the alerts several times a second."""


class Operations:
    def __init__(
        self,
        reader: ThreadReader,
        rules: AlertSettings | None = None,
        shared: str | None = None,
    ) -> None:
        """``shared``: the distributed runs' Postgres database, where the workers
        record their alerts (None: no workers)."""
        self.reader = reader
        self.shared = shared
        self.metrics: Metrics | None = None
        self.run_ends: RunEnds | None = None
        self.waiting: CollectorRegistry | None = None
        self.alerts: AlertEngine | None = None
        self._read_at = -SHARED_TTL_S
        self._workers: list[dict[str, Any]] = []
        self._reading = threading.Lock()
        try:
            self.metrics = enable_metrics()
        except ImportError:  # no prometheus-client: /metrics says so, runs go uncounted
            return
        from prometheus_client import CollectorRegistry

        self.waiting = CollectorRegistry()
        self.waiting.register(LiveCollector(self._waiting))
        self.run_ends = RunEnds(reader, self.metrics, self._run_by_a_worker)
        if rules is not None:
            self.alerts = AlertEngine(
                rules, self.metrics, self.waits, origin="dashboard", refresh=self.run_ends.count
            )

    def _run_by_a_worker(self, thread_id: str) -> bool:
        return self.shared is not None and find_run(self.shared, thread_id) is not None

    def waits(self) -> list[float]:
        """How long each paused run (of any process) has been waiting, in seconds."""
        now = time.time()
        return [
            max(0.0, now - datetime.fromisoformat(row["updated"]).timestamp())
            for row in self.reader.threads("paused")
        ]

    def _waiting(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        waits = self.waits()
        yield GaugeMetricFamily(
            "aimegraph_runs_waiting_for_human", "Paused runs waiting for a human", len(waits)
        )
        yield GaugeMetricFamily(
            "aimegraph_human_wait_longest_seconds",
            "How long the run waiting longest for a human has waited (0 with none)",
            max(waits, default=0.0),
        )

    async def scrape(self, request: Request) -> Response:
        """Prometheus metrics (text exposition).

        The runs this dashboard ran (with their tasks, model and tool calls, tokens and
        cost), the runs other processes ended on its checkpoint store since it started
        (by status and duration), and the runs waiting for a human.

        Answers: 200 Prometheus text (``text/plain``); 501 without prometheus-client (the
        ``[metrics]`` extra)."""
        if self.waiting is None:
            return JSONResponse(
                {"error": "metrics need: pip install 'aimegraph[metrics]'"}, status_code=501
            )
        if self.run_ends is not None:
            await run_in_threadpool(self.run_ends.count)
        body, content_type = await run_in_threadpool(exposition, self.waiting)
        return Response(body, media_type=content_type)

    async def alert_list(self, request: Request) -> Response:
        """The alerts of the dashboard's rules (``--alerts``) and those the workers
        recorded: firing first, then resolved, newest first.

        Answers: 200 ``{"alerts": [...]}``, each with its ``rule``, ``kind``,
        ``subject``, ``value``, ``limit``, ``message``, ``state`` (``firing``,
        ``resolved``, ``stale``), ``fired_at``, ``resolved_at``, ``delivery`` (why the
        webhook did not take it), ``origin`` and ``id``."""
        return JSONResponse({"alerts": await run_in_threadpool(self.listed)})

    def listed(self) -> list[dict[str, Any]]:
        """This process's alerts and the workers': firing first, newest first."""
        own = self.alerts.alerts() if self.alerts is not None else []
        workers = self._worker_alerts()
        return sort_alerts([*own, *workers]) if workers else own

    def _worker_alerts(self) -> list[dict[str, Any]]:
        if self.shared is None:
            return []
        with self._reading:
            if time.monotonic() - self._read_at >= SHARED_TTL_S:
                try:
                    self._workers = shared_alerts(self.shared)
                except Exception as exc:  # noqa: BLE001 - the page shows what it has
                    log.warning("cannot read the workers' alerts: %s", exc)
                self._read_at = time.monotonic()
            return self._workers
