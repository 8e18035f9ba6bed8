"""Checkpointers from a URL (memory | sqlite | postgres) and thread helpers.

``open_checkpointer(url)`` / ``aopen_checkpointer(url)`` are context managers that
yield a ready LangGraph saver and close its connection on exit; every saver uses
``make_serializer()``, which only revives LangGraph's safe types and aimegraph's
state records when a checkpoint is loaded.
"""

from aimegraph.checkpoints.factory import (
    CHECKPOINT_URL_FORMS,
    DEFAULT_CHECKPOINT_URL,
    CheckpointConnectionError,
    CheckpointURLError,
    MissingCheckpointBackendError,
    aopen_checkpointer,
    new_thread_id,
    open_checkpointer,
    redact_url,
    sqlite_file,
    thread_config,
)
from aimegraph.checkpoints.serde import (
    ALLOWED_MSGPACK_TYPES,
    PROJECT_MSGPACK_TYPES,
    make_serializer,
)

__all__ = [
    "ALLOWED_MSGPACK_TYPES",
    "CHECKPOINT_URL_FORMS",
    "DEFAULT_CHECKPOINT_URL",
    "PROJECT_MSGPACK_TYPES",
    "CheckpointConnectionError",
    "CheckpointURLError",
    "MissingCheckpointBackendError",
    "aopen_checkpointer",
    "make_serializer",
    "new_thread_id",
    "open_checkpointer",
    "redact_url",
    "sqlite_file",
    "thread_config",
]

from aimegraph.checkpoints.lease import (  # noqa: E402
    ThreadBusyError,
    ThreadLease,
    hold_thread,
    live_threads,
)
from aimegraph.checkpoints.runs import (  # noqa: E402
    RunSettings,
    SettingsNotStoredError,
    ThreadNotFoundError,
    ThreadSummary,
    has_ended,
    latest_settings,
    list_threads,
    run_config,
    run_state,
)

__all__ += [
    "RunSettings",
    "SettingsNotStoredError",
    "ThreadBusyError",
    "ThreadLease",
    "ThreadNotFoundError",
    "ThreadSummary",
    "has_ended",
    "hold_thread",
    "latest_settings",
    "list_threads",
    "live_threads",
    "run_config",
    "run_state",
]
