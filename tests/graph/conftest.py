"""Shared by the graph tests: an in-memory checkpointer with the project's
serializer (the ``saver`` fixture), and the thread and pending-interrupt helper
of the human-in-the-loop tests (``test_human.py``, ``test_human_actors.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from aimegraph.checkpoints import make_serializer, thread_config

CONFIG = thread_config("human-1")


@pytest.fixture
def saver() -> InMemorySaver:
    return InMemorySaver(serde=make_serializer())


def pending(graph: Any, config: Any = CONFIG) -> list[Any]:
    """The interrupts the run waits on."""
    return list(graph.get_state(config).interrupts)
