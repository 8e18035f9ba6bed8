"""Runs and threads on top of a checkpointer: the settings a run was started
with (so that any process can resume it), and summaries of stored threads."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from typing_extensions import Unpack

from aimegraph.checkpoints.factory import thread_config
from aimegraph.checkpoints.lease import live_threads
from aimegraph.state.models import ENDED_STATUSES

if TYPE_CHECKING:  # the config and LangGraph's run types load only where used
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
    from langgraph.types import StateSnapshot

    from aimegraph.config import AimeConfig

SETTINGS_KEY = "aimegraph"
"""Checkpoint metadata key holding the run's model spec and config (a JSON string:
LangGraph copies only scalar values of ``config["metadata"]`` into a checkpoint)."""


class ThreadNotFoundError(LookupError):
    """No checkpoint exists for the thread."""


class SettingsNotStoredError(ThreadNotFoundError):
    """The thread exists but stores no run settings (an older version, or a graph
    aimegraph did not build, started it).
    A ThreadNotFoundError, so that callers that need the settings treat it alike."""


class GivenSettings(TypedDict, total=False):
    """Settings given to carry a thread on with (the CLI's flags), over its stored ones."""

    model: str | None
    tools: Sequence[str]
    mcp: str | None
    prompts: str | None
    agents: str | None
    knowledge: str | None
    response_format: str | None


@dataclass(frozen=True)
class RunSettings:
    """What is needed to rebuild a run's graph in another process.

    ``model`` is the model spec, None for a run started from Python with a chat
    model object (resuming it elsewhere needs the spec given again).
    ``tools`` are ``module:attr`` references to the application's own tools.
    ``prompts`` is a prompt-set file or a prompt store (``.jsonl``) the graph is
    built with (``build_aime_graph(prompts=...)``); ``agents`` the agent units (a
    YAML / JSON file or ``module:attr``, see ``aimegraph.teams.load_agents``);
    ``knowledge`` a knowledge base directory (``aimegraph knowledge add``);
    ``response_format`` the typed answer's format (a JSON schema file or
    ``module:attr``, see ``aimegraph.models.response_format.load_response_format``);
    ``mcp`` an MCP servers file (``build_aime_graph(mcp_servers=...)``; read again
    when the graph is rebuilt, so its secrets stay in the file). The workspace and
    the file paths are made absolute, so that a resume from another directory finds
    them. ``unstored`` names what the graph was given as Python objects, which no other
    process can rebuild from settings: its LangChain middleware (``middleware actor:
    PIIMiddleware[email]``), guardrails (``guardrail no_profanity``), per-role models
    (``models planner``), ``agents``, ``knowledge``, ``response_format``, prompt texts
    (``prompts``), MCP servers given as content (``mcp_servers``), a ``factory``. A
    thread that has any is carried on only with them given again (:meth:`carried_on`;
    :func:`aimegraph.steering.run_graph` refuses it otherwise).
    """

    model: str | None
    config: AimeConfig
    tools: tuple[str, ...] = field(default=())
    prompts: str | None = None
    agents: str | None = None
    knowledge: str | None = None
    response_format: str | None = None
    mcp: str | None = None
    unstored: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        workspace = self.config.workspace.expanduser().absolute()
        if workspace != self.config.workspace:
            config = self.config.model_copy(update={"workspace": workspace})
            object.__setattr__(self, "config", config)
        if self.prompts is not None:
            object.__setattr__(self, "prompts", str(Path(self.prompts).expanduser().absolute()))
        for name in ("agents", "response_format"):
            spec = getattr(self, name)
            if spec is not None and spec.endswith((".yaml", ".yml", ".json")):
                object.__setattr__(self, name, str(Path(spec).expanduser().absolute()))
        for name in ("knowledge", "mcp"):
            if (path := getattr(self, name)) is not None:
                object.__setattr__(self, name, str(Path(path).expanduser().absolute()))

    def as_metadata(self) -> dict[str, Any]:
        settings = {
            "model": self.model,
            "config": self.config.model_dump(mode="json"),
            "tools": list(self.tools),
        }
        if self.prompts is not None:
            settings["prompts"] = self.prompts
        if self.agents is not None:
            settings["agents"] = self.agents
        if self.knowledge is not None:
            settings["knowledge"] = self.knowledge
        if self.response_format is not None:
            settings["response_format"] = self.response_format
        if self.mcp is not None:
            settings["mcp"] = self.mcp
        if self.unstored:
            settings["unstored"] = list(self.unstored)
        return {SETTINGS_KEY: json.dumps(settings, sort_keys=True)}

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any] | None) -> RunSettings | None:
        stored = (metadata or {}).get(SETTINGS_KEY)
        if isinstance(stored, str):
            try:
                stored = json.loads(stored)
            except ValueError:
                return None
        if not isinstance(stored, Mapping) or "model" not in stored:
            return None
        model = stored["model"]
        return cls(
            model=str(model) if model is not None else None,
            config=_known_config(stored.get("config", {})),
            tools=tuple(str(spec) for spec in stored.get("tools", ())),
            prompts=str(stored["prompts"]) if stored.get("prompts") else None,
            agents=str(stored["agents"]) if stored.get("agents") else None,
            knowledge=str(stored["knowledge"]) if stored.get("knowledge") else None,
            response_format=(
                str(stored["response_format"]) if stored.get("response_format") else None
            ),
            mcp=str(stored["mcp"]) if stored.get("mcp") else None,
            unstored=tuple(str(name) for name in stored.get("unstored", ())),
        )

    def carried_on(self, config: AimeConfig, **given: Unpack[GivenSettings]) -> RunSettings:
        """These settings as a thread goes on with them (a resume, a fork, its next
        goal): ``config`` (the stored one with the changes asked for) and each setting
        ``given`` over the stored one (None or empty: the stored one kept). What the
        thread was built with as objects stays ``unstored`` unless given again."""
        return RunSettings(
            model=given.get("model") or self.model,
            config=config,
            tools=tuple(given.get("tools") or ()) or self.tools,
            prompts=given.get("prompts") or self.prompts,
            agents=given.get("agents") or self.agents,
            knowledge=given.get("knowledge") or self.knowledge,
            response_format=given.get("response_format") or self.response_format,
            mcp=given.get("mcp") or self.mcp,
            unstored=tuple(
                name for name in self.unstored if not given.get(_GIVEN_BY.get(name.split()[0], ""))
            ),
        )

    def changes_to(self, other: RunSettings) -> list[str]:
        """``name: mine -> other's`` for each setting ``other`` changes."""
        changes = []
        if self.model is not None and other.model != self.model:  # None: given, not changed
            changes.append(f"model: {self.model} -> {other.model}")
        if other.tools != self.tools:
            changes.append(f"tools: {list(self.tools)} -> {list(other.tools)}")
        for name in ("prompts", "agents", "knowledge", "response_format", "mcp"):
            if (new := getattr(other, name)) != (old := getattr(self, name)):
                changes.append(f"{name}: {old} -> {new}")
        changes += [
            f"{name}: the thread's object -> given here"
            for name in self.unstored
            if name not in other.unstored
        ]
        before, after = self.config.model_dump(mode="json"), other.config.model_dump(mode="json")
        return changes + [
            f"{name}: {before[name]} -> {after[name]}"
            for name in after
            if after[name] != before[name]
        ]


_GIVEN_BY = {
    "models": "model",
    "agents": "agents",
    "knowledge": "knowledge",
    "response_format": "response_format",
    "prompts": "prompts",
    "mcp_servers": "mcp",
}
"""What a thread built in Python was given as objects (an ``unstored`` name's first
word), and the setting of :meth:`RunSettings.carried_on` that gives it again."""


def run_config(
    thread_id: str, settings: RunSettings | None = None, checkpoint_id: str | None = None
) -> RunnableConfig:
    """The RunnableConfig of a thread; the settings travel in the checkpoint metadata."""
    extra = {"checkpoint_id": checkpoint_id} if checkpoint_id else {}
    config = thread_config(thread_id, **extra)
    if settings is not None:
        config["metadata"] = settings.as_metadata()
    return config


def latest_settings(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> RunSettings:
    """The settings of the thread's newest checkpoint that has them (a checkpoint
    written by ``graph.update_state`` carries none). ThreadNotFoundError when the
    thread does not exist, SettingsNotStoredError when no checkpoint has them."""
    root: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    if checkpointer.get_tuple(root) is None:
        raise ThreadNotFoundError(f"no thread {thread_id!r} in this checkpoint store")
    for item in checkpointer.list(root):
        settings = RunSettings.from_metadata(item.metadata)
        if settings is not None:
            return settings
    raise SettingsNotStoredError(
        f"thread {thread_id!r} stores no run settings (it was started by an older "
        "version, or by a graph aimegraph did not build)"
    )


@dataclass(frozen=True)
class ThreadSummary:
    """A thread's newest state. ``holder`` is who runs it now (see
    :func:`aimegraph.checkpoints.lease.live_threads`), None when no process does."""

    thread_id: str
    goal: str
    status: str
    updated: str
    paused: bool
    holder: str | None = None

    @property
    def shown_status(self) -> str:
        """``paused``, ``running`` (a live process holds it), ``stopped`` (it has not
        ended and nobody runs it: resumable), or the ended run's status."""
        if self.paused:
            return "paused"
        return phase(self.status, live=self.holder is not None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "goal": self.goal,
            "status": self.shown_status,
            "updated": self.updated,
            "holder": self.holder,
        }


def _newest_checkpoints(checkpointer: BaseCheckpointSaver[Any]) -> dict[str, CheckpointTuple]:
    """The newest top-level checkpoint of each thread, by thread id.

    On SQLite every checkpoint row is read, as LangGraph's ``list`` reads them (a damaged
    page fails the listing, one error line, rather than listing what survived), but only
    the newest of each thread is decoded: decoding them all made ``aimegraph threads``
    slow on a store of long runs. Other savers are listed whole."""
    if isinstance(checkpointer, SqliteSaver):
        newest_ids: dict[str, str] = {}
        with checkpointer.cursor(transaction=False) as cursor:
            rows = cursor.execute(
                "SELECT thread_id, checkpoint_ns, checkpoint_id, checkpoint, metadata "
                "FROM checkpoints"
            )
            for thread_id, namespace, checkpoint_id, _, _ in rows:
                if not namespace and checkpoint_id > newest_ids.get(thread_id, ""):
                    newest_ids[thread_id] = checkpoint_id
        found = {
            thread_id: checkpointer.get_tuple(thread_config(thread_id, checkpoint_id=newest))
            for thread_id, newest in newest_ids.items()
        }
        return {thread_id: item for thread_id, item in found.items() if item is not None}
    newest: dict[str, CheckpointTuple] = {}
    for item in checkpointer.list(None):
        configurable = item.config["configurable"]
        if configurable.get("checkpoint_ns"):
            continue
        thread_id = configurable["thread_id"]
        if thread_id not in newest or item.checkpoint["ts"] > newest[thread_id].checkpoint["ts"]:
            newest[thread_id] = item
    return newest


def list_threads(
    checkpointer: BaseCheckpointSaver[Any],
    limit: int = 200,
    active: Iterable[ThreadSummary] = (),
) -> list[ThreadSummary]:
    """The newest top-level checkpoint of each thread, newest thread first.

    ``active`` are runs a queue knows to be queued or running (distributed runs):
    their status replaces the checkpointed one, and those with no checkpoint yet
    are listed too. Threads a live process holds (its lease) are ``running``,
    the others that have not ended ``stopped``."""
    newest = _newest_checkpoints(checkpointer)
    summaries = []
    active = list(active)
    holders = live_threads(checkpointer, list(newest) + [run.thread_id for run in active])
    for thread_id, item in newest.items():
        values = item.checkpoint.get("channel_values", {})
        paused = any(write[1] == "__interrupt__" for write in item.pending_writes or [])
        summaries.append(
            ThreadSummary(
                thread_id=thread_id,
                goal=str(values.get("goal", "")),
                status=str(values.get("status", "running")),
                updated=str(item.checkpoint["ts"]),
                paused=paused,
                holder=holders.get(thread_id),
            )
        )
    by_id = {s.thread_id: s for s in summaries}
    for run in active:
        stored = by_id.get(run.thread_id)
        holder = holders.get(run.thread_id)  # a worker running it holds its lease
        by_id[run.thread_id] = replace(
            stored or run, status=run.status, paused=False, holder=holder
        )
    ordered = sorted(by_id.values(), key=lambda s: s.updated, reverse=True)
    return ordered[:limit]


def interrupt_fields(value: Any) -> dict[str, Any]:
    """A pending interrupt's value as fields to show. aimegraph's own are dicts with a
    ``kind``; an agent unit's own ``interrupt()`` may pass anything, shown as ``value``."""
    return dict(value) if isinstance(value, Mapping) else {"value": value}


def run_state(snapshot: StateSnapshot, *, live: bool = False) -> str:
    """``paused`` when the run waits on an interrupt; ``running`` while a live
    process runs it (``live``: it holds the thread's lease); ``stopped`` when it has
    not ended and nobody runs it (a crash, a kill, Ctrl-C: resumable); else the
    ended run's status."""
    if snapshot.interrupts:
        return "paused"
    if not has_ended(snapshot):
        return "running" if live else "stopped"
    return str(snapshot.values.get("status"))


def phase(status: str, *, live: bool) -> str:
    """A run status as shown: ``running`` (not ended) becomes ``running`` or
    ``stopped`` by whether a live process holds the thread; the others (ended, or
    a queue's ``queued``) are shown as they are."""
    if status != "running":
        return status
    return "running" if live else "stopped"


def has_ended(snapshot: StateSnapshot) -> bool:
    """Whether the thread's run has ended: an ended status (see ``ENDED_STATUSES``),
    no interrupt waiting and no step left to run. Anything else can be resumed,
    including a run stopped with its last step's writes saved and an empty ``next``
    (those writes are applied when it carries on)."""
    if snapshot.interrupts or snapshot.next:
        return False
    return snapshot.values.get("status") in ENDED_STATUSES


def _known_config(fields: Mapping[str, Any]) -> AimeConfig:
    from aimegraph.config import AimeConfig

    """The stored config, leaving out fields this version does not know (a thread
    written by a newer aimegraph stays readable; the fields left out are named)."""
    known = {k: v for k, v in fields.items() if k in AimeConfig.model_fields}
    if unknown := sorted(set(fields) - set(known)):
        warnings.warn(
            f"stored run settings name config fields this version does not know, left out: "
            f"{', '.join(unknown)}",
            stacklevel=3,
        )
    return AimeConfig.model_validate(known)
