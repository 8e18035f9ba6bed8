"""Reading the aime graph's ``DeltaChannel`` keys from a raw checkpoint.

``tasks`` and ``updates`` are stored as deltas (see ``AimeState``): a checkpoint
holds them only at a snapshot, otherwise they are the writes of its ancestors
since the last snapshot. ``graph.get_state`` rebuilds them itself; code that reads
``CheckpointTuple``s straight from a saver (the dashboard) rebuilds them here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from aimegraph.state.reducers import append_batches, merge_task_batches

DELTA_REDUCERS: dict[str, Callable[[Any, Sequence[Any]], Any]] = {
    "tasks": merge_task_batches,
    "updates": append_batches,
}


def _stored(value: Any) -> Any:
    return value.value if isinstance(value, _DeltaSnapshot) else value


def checkpoint_values(saver: BaseCheckpointSaver[Any], item: CheckpointTuple) -> dict[str, Any]:
    """The checkpoint's channel values with ``tasks`` and ``updates`` rebuilt
    (seed from the nearest snapshot, then the writes since, through the reducers)."""
    values = dict(item.checkpoint.get("channel_values", {}))
    absent = [key for key in DELTA_REDUCERS if key not in values]
    history = saver.get_delta_channel_history(config=item.config, channels=absent)
    for key in DELTA_REDUCERS:
        if key in values:
            values[key] = _stored(values[key])
            continue
        entry = history[key]
        writes = [value for _, _, value in entry["writes"]]
        seed = _stored(entry["seed"]) if "seed" in entry else None
        if seed is not None or writes:
            values[key] = DELTA_REDUCERS[key](seed, writes)
    return values
