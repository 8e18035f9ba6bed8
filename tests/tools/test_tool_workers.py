"""The daemon workers that run timed tool calls: reused, never blocked by a hung call,
and gone when idle, with no job ever left without a worker."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from aimegraph.tools.workers import DaemonWorkers


def _run(workers: DaemonWorkers, body: object = None) -> Future[threading.Thread]:
    done: Future[threading.Thread] = Future()

    def job() -> None:
        if callable(body):
            body()
        done.set_result(threading.current_thread())

    workers.submit(job)
    return done


def test_a_finished_workers_thread_runs_the_next_call() -> None:
    workers = DaemonWorkers(idle_s=30)
    first = _run(workers).result(timeout=10)
    time.sleep(0.05)  # the worker is back waiting
    second = _run(workers).result(timeout=10)
    assert first is second
    assert first.daemon


def test_a_hung_call_does_not_hold_up_the_next() -> None:
    workers = DaemonWorkers(idle_s=30)
    release = threading.Event()
    hung = _run(workers, lambda: release.wait(10))
    try:
        other = _run(workers).result(timeout=10)
        assert not hung.done()
        assert other.daemon
    finally:
        release.set()
    assert hung.result(timeout=10) is not other


def test_idle_workers_leave_and_later_calls_still_run() -> None:
    workers = DaemonWorkers(idle_s=0.05, name="aimegraph-test-worker")
    first = _run(workers).result(timeout=10)
    first.join(timeout=10)
    assert not first.is_alive()
    assert _run(workers).result(timeout=10) is not first


def test_every_call_of_many_callers_runs() -> None:
    workers = DaemonWorkers(idle_s=0.01)  # workers come and go while calls arrive

    def caller(i: int) -> int:
        futures = [_run(workers, lambda: time.sleep(0.001 * (i % 3))) for _ in range(25)]
        for future in futures:
            future.result(timeout=30)
        return len(futures)

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(caller, range(8))) == 200
