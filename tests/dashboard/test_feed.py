"""Change detection: the SQL, in-memory and generic (any saver) paths agree."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.memory import InMemorySaver

from aimegraph.checkpoints import make_serializer, run_config
from aimegraph.dashboard.feed import CheckpointFeed
from aimegraph.steering import prepare_demo, run_graph


class Delegating(BaseCheckpointSaver[Any]):
    """A saver the feed knows nothing about: it must fall back to list()."""

    def __init__(self, inner: BaseCheckpointSaver[Any]) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.inner.get_tuple(config)

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        return self.inner.list(config, **kwargs)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.inner.put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.inner.put_writes(config, writes, task_id, task_path)


def run_demos(saver: BaseCheckpointSaver[Any]) -> None:
    for thread_id, approve_plan in (("done", False), ("paused", True)):
        settings, goal = prepare_demo(thread_id, approve_plan=approve_plan)
        run_graph(settings, saver).invoke({"goal": goal}, run_config(thread_id, settings))


def snapshot(feed: CheckpointFeed) -> tuple[Any, ...]:
    return (
        feed.heads(),
        {t: feed.version(t) for t in ("done", "paused", "unknown")},
        {t: feed.namespaces(t) for t in ("done", "paused", "unknown")},
    )


def test_every_path_sees_the_same_changes(saver: BaseCheckpointSaver[Any]) -> None:
    run_demos(saver)  # the SQLite saver of the fixture
    memory = InMemorySaver(serde=make_serializer())
    run_demos(memory)

    sql = snapshot(CheckpointFeed(saver))
    generic = snapshot(CheckpointFeed(Delegating(saver)))
    assert sql == generic

    heads, versions, namespaces = snapshot(CheckpointFeed(memory))
    assert heads["paused"].writes >= 1 and heads["done"].writes == 0  # the interrupt's write
    assert versions["unknown"] is None and namespaces["unknown"] == {}
    assert snapshot(CheckpointFeed(Delegating(memory))) == (heads, versions, namespaces)
    # Same runs, same shape: as many executor namespaces and checkpoints in each store.
    assert {t: len(n) for t, n in namespaces.items()} == {t: len(n) for t, n in sql[2].items()}
    assert [v is None for v in versions.values()] == [v is None for v in sql[1].values()]
