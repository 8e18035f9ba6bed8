"""Checkpointers from a URL (memory | sqlite | postgres) and thread helpers.

``open_checkpointer(url)`` / ``aopen_checkpointer(url)`` are context managers that
yield a ready LangGraph saver and close its connection on exit; every saver uses
``make_serializer()``, which only revives LangGraph's safe types, aimegraph's
state records and the types registered with ``allow_types`` when a checkpoint is
loaded.

Every name is imported on first use (the CLI's flags need only the URL helpers).
"""

from typing import TYPE_CHECKING

from aimegraph.lazy import lazy_exports

if TYPE_CHECKING:
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
    from aimegraph.checkpoints.lease import (
        ThreadBusyError,
        ThreadLease,
        hold_thread,
        live_threads,
    )
    from aimegraph.checkpoints.runs import (
        RunSettings,
        SettingsNotStoredError,
        ThreadNotFoundError,
        ThreadSummary,
        has_ended,
        interrupt_fields,
        latest_settings,
        list_threads,
        run_config,
        run_state,
    )
    from aimegraph.checkpoints.serde import (
        ALLOWED_MSGPACK_TYPES,
        PROJECT_MSGPACK_TYPES,
        allow_types,
        allowed_types,
        make_serializer,
        with_allowed_types,
    )

_HOMES = {
    "CHECKPOINT_URL_FORMS": ".urls",
    "DEFAULT_CHECKPOINT_URL": ".urls",
    "CheckpointConnectionError": ".urls",
    "CheckpointURLError": ".urls",
    "MissingCheckpointBackendError": ".factory",
    "aopen_checkpointer": ".factory",
    "new_thread_id": ".factory",
    "open_checkpointer": ".factory",
    "redact_url": ".urls",
    "sqlite_file": ".urls",
    "thread_config": ".factory",
    "ALLOWED_MSGPACK_TYPES": ".serde",
    "PROJECT_MSGPACK_TYPES": ".serde",
    "make_serializer": ".serde",
    "allow_types": ".serde",
    "allowed_types": ".serde",
    "with_allowed_types": ".serde",
    "ThreadBusyError": ".lease",
    "ThreadLease": ".lease",
    "hold_thread": ".lease",
    "live_threads": ".lease",
    "RunSettings": ".runs",
    "SettingsNotStoredError": ".runs",
    "ThreadNotFoundError": ".runs",
    "ThreadSummary": ".runs",
    "has_ended": ".runs",
    "interrupt_fields": ".runs",
    "latest_settings": ".runs",
    "list_threads": ".runs",
    "run_config": ".runs",
    "run_state": ".runs",
}

__all__ = [
    "interrupt_fields",
    "ALLOWED_MSGPACK_TYPES",
    "CHECKPOINT_URL_FORMS",
    "CheckpointConnectionError",
    "CheckpointURLError",
    "DEFAULT_CHECKPOINT_URL",
    "MissingCheckpointBackendError",
    "PROJECT_MSGPACK_TYPES",
    "RunSettings",
    "SettingsNotStoredError",
    "ThreadBusyError",
    "ThreadLease",
    "ThreadNotFoundError",
    "ThreadSummary",
    "allow_types",
    "allowed_types",
    "aopen_checkpointer",
    "has_ended",
    "hold_thread",
    "latest_settings",
    "list_threads",
    "live_threads",
    "make_serializer",
    "new_thread_id",
    "open_checkpointer",
    "redact_url",
    "run_config",
    "run_state",
    "sqlite_file",
    "thread_config",
    "with_allowed_types",
]

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
