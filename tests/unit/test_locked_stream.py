"""Streams from a one-at-a-time resource (the local model's llama.cpp context): each
generation holds the lock from start to end in a worker thread, whichever thread or
event loop consumes it, and a consumer that stops early releases it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from aimegraph.models.locked_stream import alocked_stream, locked_stream


class Resource:
    """Counts how many generations run at once; each yields ``n`` numbered items."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0
        self.most_active = 0
        self.closed = threading.Event()

    def generate(self, name: str, n: int = 5) -> Iterator[str]:
        self.active += 1
        self.most_active = max(self.most_active, self.active)
        try:
            for i in range(n):
                yield f"{name}{i}"
        finally:
            self.active -= 1
            self.closed.set()


def test_items_arrive_in_order_and_an_error_is_raised_to_the_consumer() -> None:
    resource = Resource()
    assert list(locked_stream(resource.lock, lambda: resource.generate("a", 3))) == [
        "a0",
        "a1",
        "a2",
    ]

    def failing() -> Iterator[str]:
        yield "first"
        raise ConnectionError("context lost")

    stream = locked_stream(resource.lock, failing)
    assert next(stream) == "first"
    with pytest.raises(ConnectionError, match="context lost"):
        next(stream)
    assert not resource.lock.locked()


def test_interleaved_streams_in_one_thread_run_one_after_the_other() -> None:
    # A generator holding the lock across yield would deadlock here (or, with an RLock,
    # run both generations in the one context at once).
    resource = Resource()
    first = locked_stream(resource.lock, lambda: resource.generate("a"))
    second = locked_stream(resource.lock, lambda: resource.generate("b"))
    pairs = list(zip(first, second, strict=True))
    assert pairs[0] == ("a0", "b0") and pairs[-1] == ("a4", "b4")
    assert resource.most_active == 1


def test_concurrent_async_streams_all_complete_one_generation_at_a_time() -> None:
    resource = Resource()

    async def consume(name: str) -> list[str]:
        return [
            item async for item in alocked_stream(resource.lock, lambda: resource.generate(name))
        ]

    async def main() -> list[list[str]]:
        return await asyncio.wait_for(asyncio.gather(*(consume(str(i)) for i in range(8))), 30)

    results = asyncio.run(main())
    assert results == [[f"{i}{n}" for n in range(5)] for i in range(8)]
    assert resource.most_active == 1


def test_a_stream_given_up_stops_its_generation_and_frees_the_lock() -> None:
    resource = Resource()
    stream = locked_stream(resource.lock, lambda: resource.generate("a", 10_000))
    assert next(stream) == "a0"
    stream.close()
    assert resource.closed.wait(10)
    assert list(locked_stream(resource.lock, lambda: resource.generate("b", 2))) == ["b0", "b1"]


def test_a_cancelled_async_stream_frees_the_lock() -> None:
    resource = Resource()

    async def main() -> list[str]:
        stream = alocked_stream(resource.lock, lambda: resource.generate("a", 10_000))
        assert await anext(stream) == "a0"
        await stream.aclose()
        return [
            item async for item in alocked_stream(resource.lock, lambda: resource.generate("b", 2))
        ]

    assert asyncio.run(main()) == ["b0", "b1"]
