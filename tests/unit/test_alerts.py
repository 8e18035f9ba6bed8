"""Alert rules: each fires once per episode when over its limit, posts to a real
webhook receiver on loopback (JSON, or a Slack message), resolves when the condition
clears, and stays quiet under its limit. Metrics are fed as the runs feed them."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from tests.local_http import LocalSite, serve

from aimegraph.alerts import AlertEngine, AlertRule, AlertSettings, Webhook, load_alerts
from aimegraph.metrics import Metrics
from aimegraph.state import Usage
from aimegraph.state.timing import duration_text, local_time

HOUR = 3600.0


@pytest.fixture
def site() -> Iterator[LocalSite]:
    yield from serve()


@pytest.fixture
def metrics() -> Metrics:
    return Metrics(CollectorRegistry())


def engine(
    site: LocalSite, metrics: Metrics, rule: AlertRule, fmt: str = "json", **kwargs: Any
) -> AlertEngine:
    hook = Webhook(url=site.route("/hook", status=204), format=fmt)  # type: ignore[arg-type]
    return AlertEngine(AlertSettings(rules=[rule], webhook=hook), metrics, **kwargs)


def posted(site: LocalSite) -> list[dict[str, Any]]:
    return [json.loads(body) for body in site.posted]


def tool_calls(metrics: Metrics, tool: str, ok: int, failed: int) -> None:
    for _ in range(ok):
        metrics.tool_call(tool, "ok", 0.01)
    for _ in range(failed):
        metrics.tool_call(tool, "error", 0.01)


def test_a_tool_failing_too_often_fires_once_then_resolves(
    site: LocalSite, metrics: Metrics
) -> None:
    rule = AlertRule(name="tools", kind="tool_failure_rate", limit=0.2, window_s=0.3, min_calls=5)
    alerts = engine(site, metrics, rule)
    tool_calls(metrics, "python", ok=7, failed=3)  # 30% of 10
    tool_calls(metrics, "calculator", ok=10, failed=1)  # 9%: under the limit
    fired = alerts.check()
    assert [(a.subject, a.state) for a in fired] == [("python", "firing")]
    assert alerts.check() == []  # still over the limit: no second message
    assert [(p["rule"], p["subject"], p["state"]) for p in posted(site)] == [
        ("tools", "python", "firing")
    ]
    assert posted(site)[0]["value"] == pytest.approx(0.3)

    time.sleep(0.4)  # the failures leave the window
    tool_calls(metrics, "python", ok=6, failed=0)
    assert [(a.subject, a.state) for a in alerts.check()] == [("python", "resolved")]
    assert [p["state"] for p in posted(site)] == ["firing", "resolved"]
    assert alerts.alerts()[0]["state"] == "resolved"


def test_a_few_failed_tool_calls_stay_quiet(site: LocalSite, metrics: Metrics) -> None:
    rule = AlertRule(name="tools", kind="tool_failure_rate", limit=0.2, min_calls=5)
    alerts = engine(site, metrics, rule)
    tool_calls(metrics, "python", ok=0, failed=4)  # fewer calls than min_calls
    tool_calls(metrics, "web", ok=8, failed=2)  # exactly 20%: not over
    assert alerts.check() == [] and site.posted == []


def test_a_task_running_too_long_fires(site: LocalSite, metrics: Metrics) -> None:
    alerts = engine(site, metrics, AlertRule(name="slow", kind="task_duration", limit=0.2))
    task = uuid.uuid4()
    metrics.task_started(task)
    assert alerts.check() == []  # under the limit so far
    time.sleep(0.3)
    assert [a.state for a in alerts.check()] == ["firing"]
    metrics.task_ended(task, "completed")
    assert [a.state for a in alerts.check()] == ["resolved"]
    assert [p["rule"] for p in posted(site)] == ["slow", "slow"]


def test_a_run_waiting_for_a_human_too_long_fires(site: LocalSite, metrics: Metrics) -> None:
    waits: list[float] = [30.0]
    rule = AlertRule(name="waiting", kind="human_wait", limit=60)
    alerts = engine(site, metrics, rule, waits=lambda: waits)
    assert alerts.check() == []
    waits.append(90.0)
    assert [a.value for a in alerts.check()] == [90.0]
    assert "waited 90 s" in posted(site)[0]["message"]


def test_spending_over_the_hourly_limit_fires(site: LocalSite, metrics: Metrics) -> None:
    rule = AlertRule(name="spend", kind="cost_per_hour", limit=5.0, window_s=HOUR)
    alerts = engine(site, metrics, rule)
    metrics.usage(Usage.of_call("actor", input_tokens=1000, price=(4000.0, 0.0), model="m"))
    assert alerts.check() == []  # $4 this hour
    metrics.usage(Usage.of_call("planner", input_tokens=500, price=(4000.0, 0.0), model="m"))
    fired = alerts.check()  # $6 this hour
    assert [a.value for a in fired] == [pytest.approx(6.0)]


def test_failed_runs_in_a_row_fire_and_a_success_resolves(
    site: LocalSite, metrics: Metrics
) -> None:
    alerts = engine(site, metrics, AlertRule(name="failing", kind="failed_runs", limit=3), "slack")
    for status in ("failed", "succeeded", "failed", "rejected"):
        metrics.run_ended(status, 1.0)
    metrics.run_ended("paused", 1.0)  # neither a failure nor a success
    assert alerts.check() == []  # two in a row
    metrics.run_ended("budget_exhausted", 1.0)
    assert [a.value for a in alerts.check()] == [3.0]
    metrics.run_ended("succeeded", 1.0)
    (resolved,) = alerts.check()
    assert resolved.state == "resolved" and resolved.resolved_at is not None
    texts = [p["text"] for p in posted(site)]
    assert (
        texts[0]
        == ":rotating_light: aimegraph alert failing firing: 3 runs in a row did not succeed"
    )
    # Resolved, it says when it fired and how long it held, not only what held then.
    lasted = duration_text(resolved.resolved_at - resolved.fired_at)
    assert texts[1] == (
        ":white_check_mark: aimegraph alert failing resolved: 3 runs in a row did not succeed "
        f"(fired {local_time(resolved.fired_at)}, resolved after {lasted})"
    )


def test_one_failed_run_is_one_run_in_a_row(site: LocalSite, metrics: Metrics) -> None:
    alerts = engine(site, metrics, AlertRule(name="failing", kind="failed_runs", limit=1))
    metrics.run_ended("failed", 1.0)
    assert [a.message for a in alerts.check()] == ["1 run in a row did not succeed"]


def test_a_webhook_that_refuses_is_noted_on_the_alert(site: LocalSite, metrics: Metrics) -> None:
    hook = Webhook(url=site.route("/down", status=500))
    rule = AlertRule(name="failing", kind="failed_runs", limit=1)
    alerts = AlertEngine(AlertSettings(rules=[rule], webhook=hook), metrics)
    metrics.run_ended("failed", 1.0)
    alerts.check()
    assert "500" in (alerts.alerts()[0]["delivery"] or "")


def test_the_background_checks_fire_alone(site: LocalSite, metrics: Metrics) -> None:
    rule = AlertRule(name="failing", kind="failed_runs", limit=1)
    hook = Webhook(url=site.route("/hook", status=200))
    alerts = AlertEngine(AlertSettings(rules=[rule], webhook=hook, interval_s=0.05), metrics)
    alerts.start()
    try:
        metrics.run_ended("failed", 1.0)
        deadline = time.monotonic() + 5
        while not site.posted and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        alerts.stop()
    assert [p["state"] for p in posted(site)] == ["firing"]


def test_a_rules_file_loads_and_a_bad_one_says_where(tmp_path: Path) -> None:
    good = tmp_path / "alerts.yaml"
    good.write_text(
        "webhook: {url: 'http://127.0.0.1:9/hook', format: slack}\n"
        "rules:\n  - {name: spend, kind: cost_per_hour, limit: 5}\n"
    )
    settings = load_alerts(good)
    assert settings.rules[0].kind == "cost_per_hour" and settings.webhook is not None
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - {name: x, kind: tool_failures, limit: 1}\n")
    with pytest.raises(ValueError, match=r"bad.yaml: rules.0.kind"):
        load_alerts(bad)


def test_the_sink_gets_every_check_and_alerts_carry_their_origin(
    site: LocalSite, metrics: Metrics
) -> None:
    checks: list[tuple[list[tuple[str, str]], list[str]]] = []

    def sink(changed: Any, firing: Any) -> None:
        checks.append(([(a.state, a.origin) for a in changed], [a.id for a in firing]))

    rule = AlertRule(name="failing", kind="failed_runs", limit=1)
    alerts = engine(site, metrics, rule, origin="w1@host", sink=sink)
    alerts.check()  # nothing yet: the sink hears of it all the same
    metrics.run_ended("failed", 1.0)
    (fired,) = alerts.check()
    alerts.check()
    metrics.run_ended("succeeded", 1.0)
    alerts.check()
    assert checks == [
        ([], []),
        ([("firing", "w1@host")], [fired.id]),
        ([], [fired.id]),  # still firing: the sink can tell its origin is alive
        ([("resolved", "w1@host")], []),
    ]
    assert [p["origin"] for p in posted(site)] == ["w1@host", "w1@host"]
    assert {p["source"] for p in posted(site)} == {"aimegraph"}
