"""The alerts of every worker, in Postgres beside the runs table, for the dashboard.

A worker's :class:`~aimegraph.alerts.AlertEngine` checks the runs of its own process;
the dashboard, another process, cannot see its alerts. So each worker writes them to
``aimegraph_alerts`` (one row per alert, keyed by the alert's id): after every check
it upserts the alerts that changed and those still firing, and stamps them
``checked_at``. The dashboard merges the rows with its own alerts. A firing alert
whose worker has stopped checking (it died, or lost the database) is listed as
``stale``: nobody knows whether it still holds.

Needs psycopg only, as :mod:`aimegraph.distributed.records` does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aimegraph.alerts import Alert
from aimegraph.distributed import records

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = ["AlertRecorder", "STALE_AFTER_CHECKS", "shared_alerts"]

log = logging.getLogger(__name__)

STALE_AFTER_CHECKS = 3
"""A firing alert not re-checked for this many of its worker's intervals is stale."""
STALE_AFTER_MIN_S = 60.0
KEEP_RESOLVED = "7 days"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS aimegraph_alerts (
    id         text PRIMARY KEY,
    origin     text NOT NULL,
    state      text NOT NULL CHECK (state IN ('firing', 'resolved')),
    alert      jsonb NOT NULL,
    interval_s double precision NOT NULL,
    checked_at timestamptz NOT NULL DEFAULT now()
)
"""
_UPSERT = """
INSERT INTO aimegraph_alerts (id, origin, state, alert, interval_s, checked_at)
VALUES (%s, %s, %s, %s::jsonb, %s, now())
ON CONFLICT (id) DO UPDATE SET state = excluded.state, alert = excluded.alert,
    interval_s = excluded.interval_s, checked_at = now()
"""


class AlertRecorder:
    """An :data:`~aimegraph.alerts.AlertSink` writing a worker's alerts to the
    database at ``url``; a write that fails is logged (and the next check writes
    the firing alerts again)."""

    def __init__(self, url: str, interval_s: float) -> None:
        self.url = url
        self.interval_s = interval_s

    def __call__(self, changed: Sequence[Alert], firing: Sequence[Alert]) -> None:
        alerts = {alert.id: alert for alert in (*changed, *firing)}
        try:
            with records.connect(self.url) as conn:
                _ensure_table(conn)
                with conn.cursor() as cursor:
                    cursor.executemany(
                        _UPSERT,
                        [
                            (a.id, a.origin, a.state, json.dumps(a.record()), self.interval_s)
                            for a in alerts.values()
                        ],
                    )
                if changed:
                    conn.execute(
                        "DELETE FROM aimegraph_alerts WHERE state = 'resolved' "
                        f"AND checked_at < now() - interval '{KEEP_RESOLVED}'"
                    )
        except Exception as exc:  # noqa: BLE001 - a database outage must not stop the checks
            log.warning("cannot record %d alert(s) in the database: %s", len(alerts), exc)


def shared_alerts(url: str | None, limit: int = 100) -> list[dict[str, Any]]:
    """The workers' alerts in the database at ``url`` (none when it is not Postgres
    or has no alerts table): firing first, then stale, then resolved, newest first."""
    if not records.is_postgres_url(url):
        return []
    import psycopg

    with psycopg.connect(str(url), autocommit=True, connect_timeout=10) as conn:
        row = conn.execute("SELECT to_regclass('aimegraph_alerts')").fetchone()
        if row is None or row[0] is None:
            return []
        rows = conn.execute(
            "SELECT alert, state = 'firing' AND checked_at < now() - "
            "make_interval(secs => greatest(%s * interval_s, %s)) AS stale "
            "FROM aimegraph_alerts ORDER BY state = 'firing' DESC, checked_at DESC LIMIT %s",
            (STALE_AFTER_CHECKS, STALE_AFTER_MIN_S, limit),
        ).fetchall()
    listed = [{**alert, "state": "stale"} if stale else alert for alert, stale in rows]
    return sort_alerts(listed)


def sort_alerts(alerts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Firing first, then stale, then resolved; newest first within each."""
    rank = {"firing": 0, "stale": 1}
    return sorted(
        alerts,
        key=lambda a: (rank.get(a["state"], 2), -(a.get("resolved_at") or a["fired_at"])),
    )


def _ensure_table(conn: Connection[Any]) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (records.SCHEMA_LOCK_ID,))
        conn.execute(_SCHEMA)
