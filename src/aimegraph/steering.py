"""Starting, answering, carrying on and cancelling runs the same way from every
entry point (the CLI, the dashboard, the distributed workers, a Python program):
one graph per stored run settings, one demo set-up, one translation of a human's
answer into ``Command(resume=...)`` (:mod:`aimegraph.answers`), one rule for what can
be resumed, and runs held under the thread's lease (:mod:`aimegraph.checkpoints.lease`),
so that a run paused in one front end can be answered, carried on or cancelled in another and
two of them never run one thread at once.

For a Python program, :func:`run_thread` is ``graph.invoke`` under the thread's
lease (``ThreadBusyError`` when another runner holds it) and :func:`cancel_run`
ends a live or paused run as ``cancelled``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import END
from langgraph.errors import GraphDrained
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Command, StateSnapshot, StateUpdate

from aimegraph.answers import resume_command
from aimegraph.checkpoints import RunSettings, ThreadNotFoundError, latest_settings, run_config
from aimegraph.checkpoints.delta import finished_tasks, step_usage
from aimegraph.checkpoints.lease import (
    ThreadBusyError,
    ThreadLease,
    cancel_pending,
    clear_cancel,
    hold_thread,
    request_cancel,
)
from aimegraph.checkpoints.runs import has_ended
from aimegraph.config import AimeConfig
from aimegraph.graphs.aime import AimeGraph, build_aime_graph
from aimegraph.knowledge import KnowledgeBase
from aimegraph.mcp_servers import McpServer, load_mcp_servers
from aimegraph.memory.episodes import DEFAULT_SCOPE
from aimegraph.memory.feedback import Feedback, record_feedback
from aimegraph.metrics import observe_run
from aimegraph.models.response_format import load_response_format
from aimegraph.nodes.notes import Note, post_note
from aimegraph.notify import announce_waits
from aimegraph.state import PlanLike, Usage
from aimegraph.tools.registry import (
    ToolLike,
    ToolRegistry,
    ToolRegistryError,
    import_tools,
    registry_for,
)
from aimegraph.waits import await_overdue as await_overdue  # public here since escalations
from aimegraph.waits import overdue_answers as overdue_answers

DEMO_SCENARIO = "scripted:demo"
CANCELLED_REPLY = "The run was cancelled before it finished ({reason})."

ANSWER_KEYS = ("action", "reason", "answer", "plan", "args", "decisions", "task_id", "note")
"""The keys of a front end's answer (see :func:`answer_for`)."""
WORKSPACES = Path(".aimegraph/workspace")


ThreadGraph = CompiledStateGraph[Any, Any, Any, Any]
"""An aime graph (``build_aime_graph``'s, or a worker's ``--graph`` builder's)."""


class NothingToResumeError(LookupError):
    """The thread's run has ended (CLI exit 6): a new goal starts a new run."""


class AnswerNeededError(ValueError):
    """The run waits for a human: resuming it needs an answer (CLI exit 5)."""


def run_knowledge(settings: RunSettings) -> KnowledgeBase | None:
    """The knowledge base the run's settings name, loaded (None when they name none)."""
    return None if settings.knowledge is None else KnowledgeBase.load(settings.knowledge)


def run_tools(settings: RunSettings, knowledge: KnowledgeBase | None = None) -> ToolRegistry:
    """The run's tool registry: the built-in bundles (with the web bundle when its
    config sets ``web``, and the knowledge bundle over ``knowledge``, by default
    the knowledge base its settings name) plus the ``module:attr`` tools its
    settings name (in the ``custom`` bundle), or the one ToolRegistry they name."""
    extra: list[ToolLike] = []
    for spec in settings.tools:
        tools = import_tools(spec)
        if isinstance(tools, ToolRegistry):
            if len(settings.tools) > 1:
                raise ToolRegistryError(f"{spec!r} is a whole ToolRegistry: give it alone")
            return tools
        extra += tools
    if knowledge is None:
        knowledge = run_knowledge(settings)
    return registry_for(settings.config, knowledge=knowledge, extra_tools=extra)


def run_servers(settings: RunSettings) -> dict[str, McpServer]:
    """The run's MCP servers, by name (each a bundle): its config's and its file's."""
    return {**settings.config.mcp_servers, **load_mcp_servers(settings.mcp)}


def run_graph(
    settings: RunSettings,
    saver: BaseCheckpointSaver[Any],
    store: BaseStore | None = None,
    plan: PlanLike | Path | None = None,
) -> AimeGraph:
    """The graph a run was (or will be) started with, over ``saver`` (and the memory
    ``store``: a thread started with one must be resumed with one, the graph has its
    memory nodes only then), with the run's prompts, agent units, knowledge base,
    typed answer and MCP servers (``settings``); a new run's predefined ``plan`` (its
    first plan, checked here: ``PlanError``; a resumed run has it in its state).

    A run built with Python objects its settings cannot rebuild (``unstored``:
    middleware, guardrails, per-role models, agent units, ...) is refused
    (ValueError): carrying it on without them would drop what they do."""
    if settings.unstored:
        raise ValueError(
            f"the run was built with {', '.join(settings.unstored)} given to "
            "build_aime_graph as Python objects, which its stored settings cannot rebuild: "
            "carry it on from Python with a graph built with the same arguments (the CLI: "
            "--model, --agents, --knowledge, --response-format, --prompts and --mcp give "
            "those again; a worker: aimegraph worker --graph with a builder that adds them)"
        )
    if settings.model is None:
        raise ValueError(
            "the run's settings name no model (it was started from Python with a chat "
            "model object): give a model spec to carry it on"
        )
    knowledge = run_knowledge(settings)
    agents = None
    if settings.agents:
        from aimegraph.teams import load_agents  # wave 2: only when the run has units

        agents = load_agents(settings.agents)
    response_format = (
        load_response_format(settings.response_format) if settings.response_format else None
    )
    return build_aime_graph(
        settings.model,
        tools=run_tools(settings, knowledge),
        config=settings.config,
        knowledge=knowledge,
        checkpointer=saver,
        store=store,
        prompts=settings.prompts,
        agents=agents,
        response_format=response_format,
        mcp_servers=settings.mcp,
        plan=plan,
    )


def prepare_demo(thread_id: str, **config: Any) -> tuple[RunSettings, str]:
    """The demo's settings and goal; its workspace gets a fresh copy of the demo data.
    ``config`` sets other ``AimeConfig`` fields (e.g. ``approve_plan=True``)."""
    from aimegraph.models.offline.scripted import load_scenario

    workspace = WORKSPACES / thread_id
    workspace.mkdir(parents=True, exist_ok=True)
    data = resources.files("aimegraph.demo") / "data"
    for item in data.iterdir():
        if item.is_file():
            shutil.copyfile(str(item), workspace / item.name)
    settings = RunSettings(model=DEMO_SCENARIO, config=AimeConfig(workspace=workspace, **config))
    goal = load_scenario(DEMO_SCENARIO.removeprefix("scripted:")).goal.strip()
    return settings, goal


def reader_graph(saver: BaseCheckpointSaver[Any], thread_id: str | None = None) -> AimeGraph:
    """A graph to read (and cancel) any aime thread with. The top-level graph is
    the same for every model and config (a store adds only the run's last,
    bookkeeping node), so this needs no run settings: threads started from Python
    read like the CLI's own, and no real model is built (no API key, no weights).
    Its tools' workspace is an existing directory, so building it creates nothing.
    With ``thread_id``, the thread's stored typed answer class is allowed back in
    (see ``build_aime_graph``) when it can be imported here; else the answer reads
    as plain data."""
    typed = None
    if thread_id is not None:
        try:
            spec = latest_settings(saver, thread_id).response_format
            typed = load_response_format(spec) if spec else None
        except (ThreadNotFoundError, ValueError):  # started from Python; not importable here
            typed = None
    return build_aime_graph(
        DEMO_SCENARIO,
        config=AimeConfig(workspace=Path(tempfile.gettempdir())),
        checkpointer=saver,
        response_format=typed,
    )


def resume_inputs(
    snapshot: StateSnapshot,
    answer: dict[str, Any] | None = None,
    interrupt_id: str | None = None,
) -> Command[Any] | None:
    """What carries a thread on: ``Command(resume=...)`` answering its pending
    interrupts (see :func:`resume_command`), or None for a run that stopped before
    it ended (a crash, a kill, Ctrl-C; also with its last step's writes saved and
    an empty ``next``).

    Raises:
        NothingToResumeError: no checkpoint, or the run has ended.
        AnswerNeededError: an interrupt waits and ``answer`` is None.
    """
    if not snapshot.created_at:
        raise NothingToResumeError("the thread has no checkpoint yet")
    if snapshot.interrupts:
        if answer is None:
            raise AnswerNeededError("the run waits for a human: give an answer")
        return resume_command(snapshot.interrupts, answer, interrupt_id)
    if has_ended(snapshot):
        status = snapshot.values.get("status")
        raise NothingToResumeError(f"nothing to resume: the run has ended ({status})")
    return None


def stream_held(
    graph: ThreadGraph, inputs: Any, config: RunnableConfig, lease: ThreadLease, **kwargs: Any
) -> Iterator[Any]:
    """``graph.stream`` under ``lease``: the run drains with the lease's control,
    and a cancel request ends it ``cancelled`` (the stream then just ends). Any
    other drain (a signal, a lost lease) raises ``GraphDrained``."""
    try:
        yield from graph.stream(inputs, config, control=lease.control, **kwargs)
    except GraphDrained:
        if not lease.cancelled:
            raise
        end_cancelled(graph, lease.thread_id)


def invoke_held(
    graph: ThreadGraph, inputs: Any, config: RunnableConfig, lease: ThreadLease, **kwargs: Any
) -> dict[str, Any]:
    """``graph.invoke`` under ``lease``, as :func:`stream_held`; returns the state.
    Counted by the process's metrics when they are on (:mod:`aimegraph.metrics`)."""
    with observe_run(graph, config) as run:
        for update in stream_held(
            graph, inputs, run.config, lease, stream_mode="updates", **kwargs
        ):
            run.update(update)
        snapshot = graph.get_state(run_config(lease.thread_id))
        run.ended(snapshot)
    return dict(snapshot.values)


def run_thread(
    graph: ThreadGraph,
    inputs: Any,
    config: RunnableConfig,
    *,
    wait: bool | float = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """Run (start or carry on) the thread of ``config`` holding its lease, so that
    no other runner (the CLI, the dashboard, a worker, another call of this) runs
    it meanwhile; returns the thread's state afterwards. A pause for a human is
    announced to the run's ``notify_webhook``. A cancel
    (:func:`cancel_run`, ``aimegraph cancel``) stops it at the next step, with
    status ``cancelled``. ``kwargs`` go to ``graph.stream`` (``context``,
    ``durability``...).

    Raises:
        ThreadBusyError: another runner holds the thread (after ``wait``: False
            refuses at once, True waits, a number waits that many seconds).
    """
    thread_id = str(config["configurable"]["thread_id"])
    with hold_thread(_saver(graph), thread_id, wait=wait) as lease:
        settle_pending_cancel(graph, thread_id)
        known = {i.id for i in graph.get_state(run_config(thread_id)).interrupts}
        state = invoke_held(graph, inputs, config, lease, **kwargs)
        if (settings := getattr(graph, "run_settings", None)) is not None:
            waiting = graph.get_state(run_config(thread_id)).interrupts
            announce_waits(settings.config, thread_id, waiting, known)
        return state


CancelOutcome = Literal["cancelled", "requested"]


def cancel_run(
    graph: ThreadGraph,
    thread_id: str,
    *,
    wait: bool | float = False,
    reason: str | None = None,
) -> CancelOutcome:
    """End the thread's run with status ``cancelled``: it is not resumable, and a
    new goal on the thread starts a new run. Its usage so far is kept.

    A paused or stopped run is cancelled at once (``"cancelled"``). A live one
    (another runner holds the lease) gets a cancel request: it stops at its next
    step boundary, after the calls in flight, and records the cancel itself
    (``"requested"``; with ``wait``, this waits for it and returns
    ``"cancelled"``; a runner that dies first leaves the request to the next
    one that takes the thread).

    Raises:
        ThreadNotFoundError: the thread has no checkpoint and no runner.
        NothingToResumeError: the run has already ended.
        ThreadBusyError: ``wait`` was a number and the runner had not stopped by then.
    """
    saver = _saver(graph)
    requested = False
    try:
        lease = hold_thread(saver, thread_id)
    except ThreadBusyError:
        request_cancel(saver, thread_id, reason)
        if wait is False:
            return "requested"
        requested = True
        lease = hold_thread(saver, thread_id, wait=wait)
    with lease:
        snapshot = graph.get_state(run_config(thread_id))
        if not snapshot.created_at:
            clear_cancel(saver, thread_id)
            raise ThreadNotFoundError(f"no thread {thread_id!r} in this checkpoint store")
        if requested and snapshot.values.get("status") == "cancelled":
            clear_cancel(saver, thread_id)  # the runner carried the request out
            return "cancelled"
        if has_ended(snapshot) or snapshot.values.get("status") not in (None, "running"):
            clear_cancel(saver, thread_id)
            status = snapshot.values.get("status")
            raise NothingToResumeError(f"nothing to cancel: the run has ended ({status})")
        end_cancelled(graph, thread_id, reason)
    return "cancelled"


def settle_pending_cancel(graph: ThreadGraph, thread_id: str) -> bool:
    """Under the thread's lease, before running it: carry out a cancel requested
    while its last runner was alive (it died first). True when the run is now
    ``cancelled``."""
    saver = _saver(graph)
    if not cancel_pending(saver, thread_id):
        return False
    snapshot = graph.get_state(run_config(thread_id))
    if snapshot.created_at and not has_ended(snapshot):
        end_cancelled(graph, thread_id)
        return True
    clear_cancel(saver, thread_id)  # stale: it asked to cancel a run that has ended
    return False


def end_cancelled(graph: ThreadGraph, thread_id: str, reason: str | None = None) -> None:
    """Record the thread's run as ``cancelled`` (under its lease), with ``reason``
    or the cancel request's: its pending steps and interrupts are cleared, the tasks
    and usage of the work finished in the stopped step are kept, and the cancel
    request is cleared."""
    saver = _saver(graph)
    config = run_config(thread_id)
    item = saver.get_tuple(config)
    why = reason or cancel_pending(saver, thread_id) or "cancelled"
    values: dict[str, Any] = {
        "status": "cancelled",
        "reason": why,
        "tasks": finished_tasks(item),
        # The run's reply in the conversation, as a finished run's answer is: a new
        # request on the thread is then the last human message, not this run's.
        "messages": [AIMessage(CANCELLED_REPLY.format(reason=why))],
    }
    # The step's finished actors and those still at work (one paused for a human):
    # their calls were made, though the step never returned.
    spent = step_usage(saver, graph.get_state(config))
    if spent != Usage():
        values["usage"] = spent
    # First clear the step left to run (its finished tasks' writes are applied),
    # then write the outcome as the intake node, which has no edge of its own to
    # follow: nothing is left to run, and a new goal starts a new run.
    graph.bulk_update_state(config, [[StateUpdate(None, END)], [StateUpdate(values, "intake")]])
    clear_cancel(saver, thread_id)


def _saver(graph: ThreadGraph) -> BaseCheckpointSaver[Any]:
    if not isinstance(graph.checkpointer, BaseCheckpointSaver):
        raise ValueError("running a thread under its lease needs a graph with a checkpointer")
    return graph.checkpointer


def send_note(store: BaseStore | None, thread_id: str, text: str) -> Note:
    """Send a human's note to the thread's run while it runs: each running actor gets
    it at its next step, as a message in its loop, and the planner at its next call
    (see :mod:`aimegraph.nodes.notes`). ``store`` is the one the run's graph was
    built with (the CLI's and the dashboard's, beside the checkpoints).

    Raises:
        ValueError: no store, or an empty note.
    """
    if store is None:
        raise ValueError(
            "notes reach a running run through its store: build the graph with "
            "store=... (aimegraph.memory.open_store; the CLI and the dashboard have one)"
        )
    return post_note(store, thread_id, text)


def feedback(
    saver: BaseCheckpointSaver[Any],
    store: BaseStore,
    thread_id: str,
    rating: int,
    note: str = "",
    *,
    user_id: str | None = None,
) -> Feedback:
    """Store a user's verdict (``rating`` 1 to 5, a ``note``) on the thread's latest
    run, in the memory scope of its ``user_id`` (given, else the run's, else
    ``"default"``). A low rating or a correction becomes a lesson the planner of the
    next similar goal sees first (see :mod:`aimegraph.memory.feedback`).

    Raises:
        ThreadNotFoundError: no such thread.
        ValueError: a rating outside 1 to 5, or a thread with no goal yet.
    """
    if isinstance(rating, bool) or not isinstance(rating, int) or not 1 <= rating <= 5:
        raise ValueError(f"rating must be a whole number from 1 to 5, not {rating!r}")
    snapshot = reader_graph(saver).get_state(run_config(thread_id))
    if not snapshot.created_at:
        raise ThreadNotFoundError(f"no thread {thread_id!r} in this checkpoint store")
    goal = snapshot.values.get("goal")
    if not goal:
        raise ValueError(f"thread {thread_id!r} has no goal to rate")
    if user_id is None:
        try:
            user_id = latest_settings(saver, thread_id).config.user_id
        except ThreadNotFoundError:  # started by a graph that stores no settings
            user_id = None
    verdict = Feedback(
        thread_id=thread_id,
        goal=str(goal),
        rating=rating,
        note=note.strip(),
        status=str(snapshot.values.get("status") or ""),
        answer=str(snapshot.values.get("final_answer") or ""),
    )
    record_feedback(store, user_id or DEFAULT_SCOPE, verdict)
    return verdict
