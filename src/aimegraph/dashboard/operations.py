"""The dashboard's operations endpoints: ``/metrics`` (Prometheus text: the runs of
this process, and the runs waiting for a human among every thread it shows) and
``/api/alerts`` (the alerts of the rules it was given, see :mod:`aimegraph.alerts`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from aimegraph.alerts import AlertEngine, AlertSettings
from aimegraph.dashboard.views import ThreadReader
from aimegraph.metrics import LiveCollector, Metrics, enable_metrics, exposition

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric


class Operations:
    def __init__(self, reader: ThreadReader, rules: AlertSettings | None = None) -> None:
        self.reader = reader
        self.metrics: Metrics | None = None
        self.waiting: CollectorRegistry | None = None
        self.alerts: AlertEngine | None = None
        try:
            self.metrics = enable_metrics()
        except ImportError:  # no prometheus-client: /metrics says so, runs go uncounted
            return
        from prometheus_client import CollectorRegistry

        self.waiting = CollectorRegistry()
        self.waiting.register(LiveCollector(self._waiting))
        if rules is not None:
            self.alerts = AlertEngine(rules, self.metrics, self.waits)

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
        if self.waiting is None:
            return JSONResponse(
                {"error": "metrics need: pip install 'aimegraph[metrics]'"}, status_code=501
            )
        body, content_type = await run_in_threadpool(exposition, self.waiting)
        return Response(body, media_type=content_type)

    async def alert_list(self, request: Request) -> Response:
        return JSONResponse({"alerts": self.listed()})

    def listed(self) -> list[dict[str, Any]]:
        return self.alerts.alerts() if self.alerts is not None else []
