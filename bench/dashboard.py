"""Dashboard: how soon a step shows on a run page, and how fast the threads page loads.

Step latency: ``THREADS`` runs go at once in a separate process (as ``aimegraph
run`` would), each a diamond plan on the scripted model at ``LATENCY_S`` per
call, checkpointing to one SQLite file. The dashboard serves that file from this
process, and headless Chromium (Debian's, through Playwright) keeps one run page
open per thread. Each page notes the wall-clock moment its ``data-version``
changes. For every checkpoint the runs wrote while a page was open, the latency
is the first moment that page showed that checkpoint or a later one, minus the
checkpoint's own timestamp. The poll interval of the event streams
(``POLL_SECONDS``) is the floor this is compared with.

Page load: ``LOAD_THREADS`` finished threads in the store (one real run, its
checkpoints copied under other thread ids). Measured: the ``/api/threads``
answer with an empty and a warm summary cache, and the time from navigation to
the browser's table holding every row, first load and warm (median).

Needs the ``[dashboard]`` extra (imported only when the section runs),
Playwright and ``/usr/bin/chromium``; on demand only: ``python -m bench --only
dashboard``.
"""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from aimegraph import build_aime_graph
from aimegraph.checkpoints import open_checkpointer, thread_config
from bench.chat_models import LatencyChatModel
from bench.common import (
    Headline,
    SectionResult,
    Table,
    config,
    dag_shapes,
    fmt_ms,
    scenario,
    skipped,
    sqlite_saver,
    workspace,
)

CHROMIUM = "/usr/bin/chromium"
# Headless, offline and quiet; the dashboard's browser tests launch with these too.
HEADLESS_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CHROMIUM_FLAGS = [
    *HEADLESS_FLAGS,
    # Ten pages at once: keep the ones not in front from being throttled.
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
]
POLL_SECONDS = 0.1
LATENCY_S = 0.1
PLAN = "diamond 1-6-1"

# Records when the page shows a new checkpoint: the mutation, not a later paint,
# so the figure is what the page's own code achieves.
WATCH_VERSIONS = """
window.__seen = [];
new MutationObserver(() => {
  const version = document.body && document.body.dataset.version;
  const last = window.__seen.length ? window.__seen[window.__seen.length - 1][0] : null;
  if (version && version !== last) window.__seen.push([version, Date.now()]);
}).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-version"] });
"""


def _run_threads(db: str, thread_ids: list[str], ws: str, start_at: float) -> None:
    """The runs, in their own process: all threads at once, from ``start_at``."""
    from concurrent.futures import ThreadPoolExecutor

    data = scenario(dag_shapes()[PLAN])
    with sqlite_saver(Path(db)) as saver:
        graph = build_aime_graph(
            LatencyChatModel.from_dict(data, latency_s=LATENCY_S),
            config=config(Path(ws), max_parallel=6, verify="off"),
            checkpointer=saver,
        )
        time.sleep(max(0.0, start_at - time.time()))
        with ThreadPoolExecutor(len(thread_ids)) as pool:
            for out in pool.map(
                lambda t: graph.invoke(
                    {"goal": data["goal"]}, {**thread_config(t), "recursion_limit": 10_000}
                ),
                thread_ids,
            ):
                assert out["status"] == "succeeded", out.get("reason")


Seen = dict[str, list[tuple[str, float]]]
"""Per thread: (checkpoint id shown, epoch seconds when it was shown)."""


def step_latencies(threads: int, ws: Path, browser: Any | None) -> list[float]:
    """Seconds from each checkpoint to its run page showing it (``browser``), or
    to a plain event-stream client receiving it (``browser=None``)."""
    db = ws / f"latency-{'page' if browser else 'stream'}.db"
    thread_ids = [f"live-{i}" for i in range(threads)]
    with sqlite_saver(db):
        pass  # tables exist before the pages open
    # The runs wait for the watchers: each is ready before its thread's first step.
    start_at = time.time() + 3.0 + 0.3 * threads
    runner = multiprocessing.get_context("spawn").Process(
        target=_run_threads, args=(str(db), thread_ids, str(ws), start_at)
    )
    runner.start()
    with open_checkpointer(f"sqlite:///{db}") as saver:
        from aimegraph.dashboard import create_app
        from aimegraph.dashboard.server import serve_in_background

        app = create_app(saver, poll_seconds=POLL_SECONDS)
        with serve_in_background(app) as url:
            watch = _watch_pages if browser is not None else _watch_streams
            seen = watch(url, thread_ids, runner, browser)
        latencies = []
        for thread_id in thread_ids:
            shown = seen[thread_id]
            for item in saver.list(thread_config(thread_id)):
                checkpoint_id = item.config["configurable"]["checkpoint_id"]
                written = _epoch(item.checkpoint["ts"])
                later = [t for cid, t in shown if cid >= checkpoint_id]
                if later and written >= shown[0][1]:
                    latencies.append(min(later) - written)
    if runner.exitcode != 0:
        raise RuntimeError(f"the runs failed (exit code {runner.exitcode})")
    return latencies


def _watch_pages(url: str, thread_ids: list[str], runner: Any, browser: Any) -> Seen:
    # One browser context per page, as separate windows: a context allows six
    # connections to a host, and each page's event stream holds one.
    pages = []
    for thread_id in thread_ids:
        context = browser.new_context()
        context.add_init_script(WATCH_VERSIONS)
        page = context.new_page()
        page.goto(f"{url}/threads/{thread_id}")
        pages.append(page)
    runner.join(120)
    time.sleep(1.0)  # the last steps reach the pages
    seen = {}
    for thread_id, page in zip(thread_ids, pages, strict=True):
        seen[thread_id] = [(v.split(".")[0], ms / 1000) for v, ms in page.evaluate("window.__seen")]
        page.context.close()
    return seen


def _watch_streams(url: str, thread_ids: list[str], runner: Any, _browser: Any) -> Seen:
    seen: Seen = {t: [] for t in thread_ids}
    done = threading.Event()

    def follow(thread_id: str) -> None:
        try:
            with httpx.stream("GET", f"{url}/api/threads/{thread_id}/events", timeout=None) as r:
                for line in r.iter_lines():
                    if line.startswith("data:"):
                        version = json.loads(line.removeprefix("data:"))["version"]
                        seen[thread_id].append((version.split(".")[0], time.time()))
                    if done.is_set():
                        return
        except httpx.HTTPError:
            pass  # the server stopped

    followers = [threading.Thread(target=follow, args=(t,), daemon=True) for t in thread_ids]
    for follower in followers:
        follower.start()
    runner.join(120)
    time.sleep(1.0)
    done.set()
    return seen


def _epoch(ts: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(ts).timestamp()


def fill_store(db: Path, ws: Path, threads: int) -> None:
    """``threads`` finished threads: one real run, its checkpoints copied."""
    data = scenario(dag_shapes()[PLAN])
    with sqlite_saver(db) as saver:
        graph = build_aime_graph(
            LatencyChatModel.from_dict(data, latency_s=0.0),
            config=config(ws, verify="off"),
            checkpointer=saver,
        )
        graph.invoke({"goal": data["goal"]}, thread_config("seed-0"))
        conn = saver.conn
        for table in ("checkpoints", "writes"):
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            rest = ", ".join(c for c in columns if c != "thread_id")
            for i in range(1, threads):
                conn.execute(
                    f"INSERT INTO {table} (thread_id, {rest}) "
                    f"SELECT ?, {rest} FROM {table} WHERE thread_id = 'seed-0'",
                    (f"seed-{i}",),
                )
        conn.commit()


def page_load(threads: int, ws: Path, browser: Any, repeat: int) -> dict[str, float]:
    db = ws / "load.db"
    fill_store(db, ws, threads)
    with open_checkpointer(f"sqlite:///{db}") as saver:
        from aimegraph.dashboard import create_app
        from aimegraph.dashboard.server import serve_in_background

        app = create_app(saver, poll_seconds=POLL_SECONDS)
        with serve_in_background(app) as url:
            cold_api = _timed_get(f"{url}/api/threads", threads)
            warm_api = statistics.median(
                _timed_get(f"{url}/api/threads", threads) for _ in range(repeat)
            )
            loads = []
            for _ in range(repeat + 1):
                page = browser.new_page()
                start = time.perf_counter()
                page.goto(url + "/")
                page.wait_for_function(
                    "n => document.querySelectorAll('#threads tbody tr').length === n",
                    arg=threads,
                    timeout=60_000,
                )
                loads.append(time.perf_counter() - start)
                page.close()
    return {
        "api_cold": cold_api,
        "api_warm": warm_api,
        "page_first": loads[0],
        "page_warm": statistics.median(loads[1:]),
    }


def _timed_get(url: str, rows: int) -> float:
    start = time.perf_counter()
    response = httpx.get(url, timeout=120)
    seconds = time.perf_counter() - start
    assert len(response.json()["threads"]) == rows
    return seconds


def run(quick: bool) -> SectionResult:
    missing = [
        m for m in ("playwright", "starlette", "uvicorn") if importlib.util.find_spec(m) is None
    ]
    if missing or not Path(CHROMIUM).exists():
        why = f"missing: {', '.join(missing) or CHROMIUM} (extra [dashboard], Debian's chromium)"
        return skipped("dashboard", why)
    from playwright.sync_api import sync_playwright

    threads, load_threads, repeat = (3, 100, 2) if quick else (10, 1000, 5)
    with workspace() as ws, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            on_pages = step_latencies(threads, ws, browser)
            on_streams = step_latencies(threads, ws, None)
            load = page_load(load_threads, ws, browser, repeat)
        finally:
            browser.close()

    live = Table(
        f"Checkpoint to page, {threads} threads running",
        ["watched by", "checkpoints", "median ms", "p95 ms", "max ms"],
    )
    metrics: dict[str, float] = {}
    for label, key, latencies in (
        ("run pages in headless Chromium", "page", on_pages),
        ("event-stream clients (no browser)", "stream", on_streams),
    ):
        median = statistics.median(latencies)
        p95 = statistics.quantiles(latencies, n=20)[-1]
        live.add(
            label, len(latencies), fmt_ms(median, 0), fmt_ms(p95, 0), fmt_ms(max(latencies), 0)
        )
        metrics |= {f"{key}_latency_median_s": median, f"{key}_latency_p95_s": p95}
    live.notes.append(
        f"{threads} runs of the {PLAN} plan at once in another process (scripted model, "
        f"{LATENCY_S * 1e3:.0f} ms per call, one SQLite file); one watcher per thread; "
        "latency = the watcher has the checkpoint (or a later one) minus the checkpoint's "
        f"timestamp. The streams poll the checkpointer every {POLL_SECONDS * 1e3:.0f} ms. "
        f"The browser row shares the machine with {threads} Chromium renderers."
    )
    pages = Table(
        f"Threads page with {load_threads} threads",
        ["measure", "ms"],
    )
    pages.add("/api/threads, summary cache empty", fmt_ms(load["api_cold"], 0))
    pages.add("/api/threads, warm (median)", fmt_ms(load["api_warm"], 0))
    pages.add("page load to every row shown, first", fmt_ms(load["page_first"], 0))
    pages.add("page load to every row shown, warm (median)", fmt_ms(load["page_warm"], 0))
    pages.notes.append(
        "A thread's summary is read from its newest checkpoint once and cached until "
        "that checkpoint or its pending writes change (one SQL aggregate finds out)."
    )
    metrics |= {f"load_{k}_s": v for k, v in load.items()}
    headline = Headline(
        f"dashboard: checkpoint to page, {threads} runs at once in another process, one run "
        f"page per thread in headless Chromium; threads page with {load_threads:,} threads",
        "the same checkpoints to plain event-stream clients",
        f"page median {fmt_ms(metrics['page_latency_median_s'], 0)} ms, p95 "
        f"{fmt_ms(metrics['page_latency_p95_s'], 0)} ms; stream clients median "
        f"{fmt_ms(metrics['stream_latency_median_s'], 0)} ms, p95 "
        f"{fmt_ms(metrics['stream_latency_p95_s'], 0)} ms ({POLL_SECONDS * 1e3:.0f} ms poll "
        f"interval); threads page: every row shown {fmt_ms(load['page_first'], 0)} ms after "
        f"navigation ({fmt_ms(load['page_warm'], 0)} ms warm median; `/api/threads` "
        f"{fmt_ms(load['api_cold'], 0)} ms with an empty summary cache, "
        f"{fmt_ms(load['api_warm'], 0)} ms warm)",
    )
    return SectionResult("dashboard", [live, pages], metrics, headlines=[headline])
