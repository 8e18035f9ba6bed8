"""``deploy/``: the Prometheus alert rules parse and the Grafana dashboard is valid
JSON, and both name only metrics the code exports (read from a real scrape after a
run; the workers' queue depth is checked by the distributed tests)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from langgraph.checkpoint.base import BaseCheckpointSaver
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from aimegraph.dashboard import create_app
from aimegraph.dashboard.runs import RunManager

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
WORKER_ONLY = {"aimegraph_queue_depth"}
METRIC = re.compile(r"\baimegraph_[a-z_]+")


def exported(saver: BaseCheckpointSaver[Any], runs: RunManager) -> set[str]:
    client = TestClient(create_app(saver, runs=runs), base_url="http://127.0.0.1")
    thread_id = client.post("/api/demo", json={}).json()["thread_id"]
    runs.wait(thread_id, timeout=60)  # so that every histogram and counter has samples
    text = client.get("/metrics").text
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples} | WORKER_ONLY


def test_alert_rules_and_dashboard_name_only_exported_metrics(
    saver: BaseCheckpointSaver[Any], runs: RunManager
) -> None:
    names = exported(saver, runs)
    rules = yaml.safe_load((DEPLOY / "prometheus-alerts.yml").read_text())
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    assert len(exprs) >= 5 and all(
        rule.get("alert") for g in rules["groups"] for rule in g["rules"]
    )
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    exprs += [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    used = {name for expr in exprs for name in METRIC.findall(expr)}
    assert used and used <= names, sorted(used - names)


def test_the_dashboards_panels_have_distinct_titles_and_ids() -> None:
    panels = json.loads((DEPLOY / "grafana-dashboard.json").read_text())["panels"]
    titles = [panel["title"] for panel in panels]
    assert len(titles) == len(set(titles)), sorted(t for t in titles if titles.count(t) > 1)
    assert len({panel["id"] for panel in panels}) == len(panels)
