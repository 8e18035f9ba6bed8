"""Answers handed to the process holding a thread while it waits on a human (issue 47,
point 1): posted beside the lease (an SQLite store's lock, Postgres, one process),
taken once by the holder, an answer for a wait that has ended dropped and its poster
told, one nobody takes taken back; and ``await_overdue`` returning whichever comes
first, a posted answer or the deadline's default."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Interrupt

from aimegraph.checkpoints.lease import (
    AnswerNotTakenError,
    LeaseTarget,
    StaleAnswerError,
    ThreadLease,
    hand_answer,
    hold_thread,
)
from aimegraph.waits import await_overdue

APPROVE = {"action": "approve"}


@pytest.fixture(params=["sqlite", "memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> LeaseTarget:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'cp.db'}"
    if request.param == "memory":
        return InMemorySaver()
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def thread() -> str:
    return f"answers-{time.monotonic_ns()}"  # a fresh key on a shared Postgres


class Poster:
    """``hand_answer`` in a thread of its own, as another process would call it."""

    def __init__(self, call: Callable[[], str | None]) -> None:
        self.result: str | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], str | None]) -> None:
        try:
            self.result = call()
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            self.error = exc

    def done(self) -> Poster:
        self._thread.join(60)
        assert not self._thread.is_alive()
        return self


def taken_by(lease: ThreadLease, pending: set[str]) -> Any:
    """What the holder takes, once the answer has been posted."""
    deadline = time.monotonic() + 30
    while (taken := lease.take_answer(pending)) is None:
        assert time.monotonic() < deadline, "no answer reached the holder"
        time.sleep(0.02)
    return taken


@pytest.fixture
def lease(store: LeaseTarget, thread: str) -> Iterator[ThreadLease]:
    with hold_thread(store, thread) as held:
        yield held


def test_an_answer_reaches_the_holder_once(
    store: LeaseTarget, thread: str, lease: ThreadLease
) -> None:
    poster = Poster(lambda: hand_answer(store, thread, {"i1": APPROVE}))
    taken = taken_by(lease, {"i1", "i2"})
    assert taken.answers == {"i1": APPROVE} and taken.senders[0].startswith("pid ")
    assert poster.done().error is None and poster.result and poster.result.startswith("pid ")
    assert lease.take_answer({"i1", "i2"}) is None  # consumed once


def test_an_answer_for_a_wait_that_has_ended_is_dropped_and_its_poster_told(
    store: LeaseTarget, thread: str, lease: ThreadLease
) -> None:
    poster = Poster(lambda: hand_answer(store, thread, {"gone": APPROVE}))
    deadline = time.monotonic() + 30
    while poster._thread.is_alive():  # the holder now waits on another interrupt
        assert lease.take_answer({"later"}) is None
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert isinstance(poster.done().error, StaleAnswerError)
    assert "had ended that wait" in str(poster.error)


def test_an_answer_the_holder_does_not_take_is_taken_back(
    store: LeaseTarget, thread: str, lease: ThreadLease
) -> None:
    with pytest.raises(AnswerNotTakenError, match="did not take the answer within 0.2 s"):
        hand_answer(store, thread, {"i1": APPROVE}, patience_s=0.2)
    assert lease.take_answer({"i1"}) is None  # not applied later


def test_a_thread_nobody_holds_takes_no_answer(store: LeaseTarget, thread: str) -> None:
    assert hand_answer(store, thread, {"i1": APPROVE}) is None
    with hold_thread(store, thread) as lease:
        assert lease.take_answer({"i1"}) is None


def test_a_holder_letting_go_leaves_the_answer_to_its_poster(
    store: LeaseTarget, thread: str
) -> None:
    lease = hold_thread(store, thread)
    poster = Poster(lambda: hand_answer(store, thread, {"i1": APPROVE}))
    lease.release()
    assert poster.done().error is None and poster.result is None
    with hold_thread(store, thread) as again:
        assert again.take_answer({"i1"}) is None


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def waiting(clock: Clock, *ids: str) -> list[Interrupt]:
    terms = {"timeout_s": 60, "default": "reject", "deadline": clock.now + 60}
    return [Interrupt({"kind": "approve_plan", **terms}, id=i) for i in ids]


def test_await_overdue_resumes_with_an_answer_posted_before_the_deadline() -> None:
    clock = Clock()
    pending = waiting(clock, "plan")
    posts: list[dict[str, Any] | None] = [None, {"gone": APPROVE}, {"plan": APPROVE}]

    def posted(ids: Any) -> dict[str, Any] | None:
        assert set(ids) == {"plan"}
        return posts.pop(0) if posts else None

    command = await_overdue(
        lambda: pending, posted=posted, poll_s=1, clock=clock.time, sleep=clock.sleep
    )
    # The answer for a wait not pending is left out; the one for "plan" is applied.
    assert command is not None and command.resume == {"plan": APPROVE}
    assert clock.now < 1_060


def test_await_overdue_takes_the_default_when_nothing_is_posted() -> None:
    clock = Clock()
    pending = waiting(clock, "plan")
    command = await_overdue(
        lambda: pending, posted=lambda ids: None, poll_s=5, clock=clock.time, sleep=clock.sleep
    )
    assert command is not None and isinstance(command.resume, dict)
    assert command.resume["plan"]["action"] == "reject"
    assert clock.now >= 1_060
