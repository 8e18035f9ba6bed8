"""Telling someone that a run waits for them: when a run pauses for a human, the
process that ran the step (the CLI, the dashboard, a worker, ``run_thread``) posts
each new wait to the thread's ``notify_webhook`` (an HTTP POST with a JSON body),
once per interrupt: waits that were already pending before the step are not
announced again.

The body: ``event`` (``"human_wait"``), ``kind``, ``thread_id``, ``interrupt_id``,
``summary`` (the plan, the tool call, the question or the escalation's reason, in one
line), ``timeout_s``, ``deadline`` (epoch seconds, or null), ``default`` and ``url``,
the run's dashboard page (``dashboard_url``). A webhook that cannot be reached costs a
warning in the log, never the run.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Collection, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from langgraph.types import Interrupt

from aimegraph.waits import WAIT_KINDS, HumanWaitSettings

__all__ = ["NOTIFY_TIMEOUT_S", "announce_waits", "wait_notice", "wait_summary"]

log = logging.getLogger(__name__)

NOTIFY_TIMEOUT_S = 5.0
"""How long a webhook may take to answer before the notice is given up on."""


def wait_notice(settings: HumanWaitSettings, thread_id: str, item: Interrupt) -> dict[str, Any]:
    """The JSON body announcing the wait ``item`` of ``thread_id``."""
    value: Mapping[str, Any] = item.value if isinstance(item.value, Mapping) else {}
    return {
        "event": "human_wait",
        "kind": value.get("kind"),
        "thread_id": thread_id,
        "interrupt_id": item.id,
        "summary": wait_summary(value),
        "timeout_s": value.get("timeout_s"),
        "deadline": value.get("deadline"),
        "default": value.get("default"),
        "url": f"{settings.dashboard_url.rstrip('/')}/threads/{quote(thread_id, safe='')}",
    }


def announce_waits(
    settings: HumanWaitSettings,
    thread_id: str,
    interrupts: Sequence[Interrupt],
    known: Collection[str] = (),
) -> list[str]:
    """Post each human wait among ``interrupts`` whose id is not in ``known`` (the
    ids pending before the step ran) to ``settings.notify_webhook``; returns the ids
    announced (none without a webhook)."""
    if not settings.notify_webhook:
        return []
    announced = []
    for item in interrupts:
        value = item.value if isinstance(item.value, Mapping) else {}
        if item.id in known or value.get("kind") not in WAIT_KINDS:
            continue
        if _post(settings.notify_webhook, wait_notice(settings, thread_id, item)):
            announced.append(item.id)
    return announced


def _post(url: str, body: dict[str, Any]) -> bool:
    request = urllib.request.Request(
        url,
        data=json.dumps(body, default=str).encode("utf-8"),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=NOTIFY_TIMEOUT_S) as reply:  # noqa: S310
            reply.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        log.warning("notify_webhook %s not told of a wait on %s: %s", url, body["thread_id"], exc)
        return False
    return True


def wait_summary(value: Mapping[str, Any]) -> str:
    """What a human wait asks, in brief: the plan, the tool call, the question or the
    escalation's reason."""
    kind = value.get("kind")
    if kind == "approve_tool":
        args = json.dumps(value.get("args"), default=str)
        return f"approve a call to {value.get('tool')} with {args}"
    if kind == "ask_human":
        return f"answer: {value.get('question', '')}"
    if kind == "approve_plan":
        return "approve the plan:\n" + str(value.get("checklist") or "")
    return f"escalation: {value.get('reason', '')}"
