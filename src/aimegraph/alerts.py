"""Alerts over the process's metrics: rules from a YAML file, checked every few
seconds, each firing once per episode (and resolving when the condition clears),
posted to a webhook as JSON (or as a Slack message) and listed by the dashboard.

The rules file (``aimegraph dashboard --alerts FILE``, ``aimegraph worker --alerts FILE``)::

    webhook: {url: "https://hooks.example.com/aimegraph", format: json}  # or slack
    interval_s: 15
    rules:
      - {name: tools-failing, kind: tool_failure_rate, limit: 0.2, window_s: 300, min_calls: 5}
      - {name: slow-task, kind: task_duration, limit: 600}
      - {name: human-waiting, kind: human_wait, limit: 3600}
      - {name: spending, kind: cost_per_hour, limit: 5.0}
      - {name: failing-runs, kind: failed_runs, limit: 3}

``limit`` is a fraction for ``tool_failure_rate`` (each tool on its own, over the
last ``window_s``, once it has ``min_calls`` calls there), seconds for
``task_duration`` (a task in flight) and ``human_wait`` (a paused run; the
dashboard, which sees every thread, checks these), USD for ``cost_per_hour`` (the
spend of the last ``window_s``, default an hour, scaled to an hour) and a count for
``failed_runs`` (failed, rejected or out-of-budget runs since the last success; on
the dashboard, those of every process its checkpoints show).

A worker's alerts reach the dashboard through the shared Postgres database: the
engine hands each check's alerts to its ``sink`` (see
:mod:`aimegraph.distributed.alert_records`).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aimegraph.metrics import Metrics
from aimegraph.state.timing import counted, duration_text, local_time
from aimegraph.yaml_faults import yaml_problem

__all__ = ["Alert", "AlertEngine", "AlertRule", "AlertSettings", "Webhook", "load_alerts"]

log = logging.getLogger(__name__)

RuleKind = Literal[
    "tool_failure_rate", "task_duration", "human_wait", "cost_per_hour", "failed_runs"
]
HOUR = 3600.0


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Webhook(_Settings):
    """Where fired and resolved alerts are POSTed: ``json`` (the alert's fields) or
    ``slack`` (an incoming-webhook message, ``{"text": ...}``)."""

    url: str = Field(pattern=r"^https?://")
    format: Literal["json", "slack"] = "json"
    timeout_s: float = Field(default=5.0, gt=0)


class AlertRule(_Settings):
    name: str = Field(min_length=1)
    kind: RuleKind
    limit: float = Field(ge=0)
    window_s: float = Field(default=300.0, gt=0)
    min_calls: int = Field(default=5, ge=1)


class AlertSettings(_Settings):
    rules: list[AlertRule] = Field(default_factory=list)
    webhook: Webhook | None = None
    interval_s: float = Field(default=15.0, gt=0)


def load_alerts(path: str | Path) -> AlertSettings:
    """The rules file, checked; ValueError naming the file and the fault."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        return AlertSettings.model_validate(data)
    except OSError as exc:
        raise ValueError(f"cannot read alert rules {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ValueError(f"alert rules {path}{yaml_problem(exc)}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"alert rules {path}: {where}: {first['msg']}") from exc


@dataclass
class Alert:
    """One episode of a rule's condition (for a tool, the ``subject``)."""

    rule: str
    kind: str
    subject: str
    value: float
    limit: float
    message: str
    state: Literal["firing", "resolved"] = "firing"
    fired_at: float = field(default_factory=time.time)
    resolved_at: float | None = None
    delivery: str | None = None
    """Why the webhook did not take it, when it did not."""
    origin: str = ""
    """Where it fired: ``dashboard`` or a worker's name."""
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def record(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Sample:
    at: float
    tool_calls: dict[tuple[str, str], float]
    cost_usd: float


Condition = tuple[str, float, str]
"""(subject, value, message) of a condition that holds now."""
AlertSink = Callable[[Sequence[Alert], Sequence[Alert]], None]
"""Called after each check with the alerts that changed and those firing now."""


class AlertEngine:
    """Checks the rules against ``metrics`` (and ``waits``: how long each paused run
    has waited, in seconds), posts each change to the webhook, keeps the alerts for
    the dashboard and, after each check, hands them to ``sink`` (alerts marked with
    ``origin``). ``refresh`` is called before each check to bring ``metrics`` up to
    date (the dashboard counts there the runs other processes ended)."""

    def __init__(
        self,
        settings: AlertSettings,
        metrics: Metrics,
        waits: Callable[[], list[float]] | None = None,
        *,
        keep: int = 100,
        origin: str = "",
        sink: AlertSink | None = None,
        refresh: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.refresh = refresh
        self.metrics = metrics
        self.waits = waits
        self.origin = origin
        self.sink = sink
        self.active: dict[tuple[str, str], Alert] = {}
        self.history: deque[Alert] = deque(maxlen=keep)
        self._samples: deque[_Sample] = deque([self._sample()])
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts firing now, then the resolved ones, newest first."""
        with self._lock:
            firing = sorted(self.active.values(), key=lambda a: -a.fired_at)
            resolved = [a for a in reversed(self.history) if a.state == "resolved"]
        return [a.record() for a in (*firing, *resolved)]

    def check(self) -> list[Alert]:
        """Check every rule once; returns the alerts that fired or resolved."""
        if self.refresh is not None:
            self.refresh()
        with self._lock:
            self._samples.append(self._sample())
            holding = {
                (rule.name, subject): (rule, value, message)
                for rule in self.settings.rules
                for subject, value, message in self._conditions(rule)
            }
            changed = self._fire(holding) + self._resolve(holding)
            firing = list(self.active.values())
        for alert in changed:
            self._deliver(alert)
        if self.sink is not None:
            # Every check, not only on a change: a sink can tell the firing alerts of a
            # live origin from those of one that stopped checking.
            self.sink(changed, firing)
        return changed

    def _fire(self, holding: dict[tuple[str, str], tuple[AlertRule, float, str]]) -> list[Alert]:
        fired = []
        for key, (rule, value, message) in holding.items():
            if key not in self.active:
                alert = Alert(
                    rule.name, rule.kind, key[1], value, rule.limit, message, origin=self.origin
                )
                self.active[key] = alert
                self.history.append(alert)
                fired.append(alert)
        return fired

    def _resolve(self, holding: dict[tuple[str, str], Any]) -> list[Alert]:
        resolved = []
        for key in [k for k in self.active if k not in holding]:
            alert = self.active.pop(key)
            alert.state, alert.resolved_at = "resolved", time.time()
            resolved.append(alert)
        return resolved

    # -- conditions

    def _sample(self) -> _Sample:
        return _Sample(time.time(), self.metrics.tool_calls(), self.metrics.cost_usd())

    def _since(self, window_s: float) -> _Sample:
        """The newest sample at least ``window_s`` old (or the oldest kept)."""
        start = self._samples[-1].at - window_s
        baseline = self._samples[0]
        for sample in self._samples:
            if sample.at > start:
                break
            baseline = sample
        longest = max(rule.window_s for rule in self.settings.rules) if self.settings.rules else 0
        while len(self._samples) > 2 and self._samples[1].at <= self._samples[-1].at - longest:
            self._samples.popleft()  # no window reaches back that far
        return baseline

    def _conditions(self, rule: AlertRule) -> Iterator[Condition]:
        if rule.kind == "tool_failure_rate":
            yield from self._tool_failures(rule)
        elif rule.kind == "task_duration":
            longest = self.metrics.longest_task_seconds()
            if longest > rule.limit:
                yield "", longest, f"a task has been running for {longest:.0f} s"
        elif rule.kind == "human_wait":
            longest = max(self.waits(), default=0.0) if self.waits else 0.0
            if longest > rule.limit:
                yield "", longest, f"a run has waited {longest:.0f} s for a human"
        elif rule.kind == "cost_per_hour":
            spent = self._samples[-1].cost_usd - self._since(rule.window_s).cost_usd
            per_hour = spent * HOUR / rule.window_s
            if per_hour > rule.limit:
                yield "", per_hour, f"spending ${per_hour:.2f} an hour"
        elif rule.kind == "failed_runs":
            streak = self.metrics.failed_runs_in_a_row()
            if streak >= rule.limit:
                yield "", float(streak), f"{counted(streak, 'run')} in a row did not succeed"

    def _tool_failures(self, rule: AlertRule) -> Iterator[Condition]:
        now, then = self._samples[-1].tool_calls, self._since(rule.window_s).tool_calls
        calls: dict[str, float] = {}
        errors: dict[str, float] = {}
        for (tool, outcome), count in now.items():
            added = count - then.get((tool, outcome), 0.0)
            calls[tool] = calls.get(tool, 0.0) + added
            if outcome == "error":
                errors[tool] = errors.get(tool, 0.0) + added
        for tool, total in sorted(calls.items()):
            rate = errors.get(tool, 0.0) / total if total else 0.0
            if total >= rule.min_calls and rate > rule.limit:
                yield tool, rate, f"{tool}: {rate:.0%} of {total:.0f} calls failed"

    # -- delivery

    def _deliver(self, alert: Alert) -> None:
        hook = self.settings.webhook
        if hook is None:
            return
        import httpx

        try:
            response = httpx.post(
                hook.url, json=payload(alert, hook.format), timeout=hook.timeout_s
            )
            response.raise_for_status()
        except httpx.HTTPError as exc:  # kept on the alert: the dashboard shows it
            alert.delivery = f"{type(exc).__name__}: {exc}"
            log.warning("alert %s: webhook failed: %s", alert.rule, alert.delivery)

    # -- in the background

    def start(self) -> None:
        """Check every ``interval_s`` from a daemon thread until :meth:`stop`."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="aimegraph-alerts", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _loop(self) -> None:
        while not self._stop.wait(self.settings.interval_s):
            try:
                self.check()
            except Exception:  # noqa: BLE001 - a bad check must not end the checks
                log.exception("checking the alert rules failed")


def payload(alert: Alert, format: Literal["json", "slack"]) -> dict[str, Any]:
    """What the webhook gets: the alert's fields, or a Slack message."""
    if format == "json":
        return {"source": "aimegraph", **alert.record()}
    mark = ":rotating_light:" if alert.state == "firing" else ":white_check_mark:"
    where = f" on {alert.origin}" if alert.origin else ""
    text = f"{mark} aimegraph alert {alert.rule} {alert.state}{where}: {alert.message}"
    if alert.resolved_at is not None:  # the message says what held when it fired
        lasted = duration_text(alert.resolved_at - alert.fired_at)
        text += f" (fired {local_time(alert.fired_at)}, resolved after {lasted})"
    return {"text": text}
