"""``aimegraph.eval``: k rollouts of every task on every system, resumable, and the reports.

An eval lives in one directory:

- ``eval.json``: what is evaluated (suite, systems, k, model, seed);
- ``results.jsonl``: one record per finished rollout, appended and flushed to disk
  the moment it finishes (by one writer, so lines never interleave);
- ``summary.json``, ``report.md``, ``report.html``: the figures, written at the end,
  and also when the eval is stopped;
- ``workspaces/<system>/<task>/<rollout>``: the workspaces of failed rollouts.

Running the same eval again on the same directory resumes it: a rollout whose
record is there (for the same task definition and system) never runs again, so a
crash or Ctrl-C loses only the rollouts in flight. A larger ``k`` adds rollouts; a
task or system whose definition changed runs again. Rollouts run in daemon
threads, at most ``concurrency`` at once, so Ctrl-C stops the eval at once.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.runtime import RunControl
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from aimegraph.eval.fairness import clairvoyance_problem
from aimegraph.eval.html import html_report
from aimegraph.eval.oracle import OracleModels
from aimegraph.eval.report import markdown_report
from aimegraph.eval.rollout import KeepWorkspaces, ModelFactory, ModelSource, Rollout, run_rollout
from aimegraph.eval.suite import Budget, Suite, SuiteError, load_suite
from aimegraph.eval.summary import read_records, summarise
from aimegraph.eval.systems import SystemSpec, load_systems, unavailable_reason
from aimegraph.eval.usage import Prices
from aimegraph.models.resolve import ModelResolver
from aimegraph.tools.registry import ToolLike

__all__ = ["DEFAULT_EVALS", "EvalResult", "evaluate"]

DEFAULT_EVALS = Path(".aimegraph/evals")
"""Where evals go by default: one directory per suite name."""

MANIFEST, RESULTS, SUMMARY = "eval.json", "results.jsonl", "summary.json"
REPORT_MD, REPORT_HTML, WORKSPACES = "report.md", "report.html", "workspaces"

ORACLE = "oracle"
"""``model="oracle"``: each task's scripted oracle replies (:mod:`aimegraph.eval.oracle`)."""


@dataclass
class EvalResult:
    """A finished (or stopped) eval: its directory, the records that count (current
    task and system definitions), the summary, the systems skipped and why, how
    many rollouts this call ran and how many were already recorded, and how many
    lines of the results file could not be read (torn by a crash; run again)."""

    out: Path
    records: list[dict[str, Any]]
    summary: dict[str, Any]
    skipped: dict[str, str] = field(default_factory=dict)
    ran: int = 0
    resumed: int = 0
    torn: int = 0

    @property
    def report_md(self) -> Path:
        return self.out / REPORT_MD

    @property
    def report_html(self) -> Path:
        return self.out / REPORT_HTML


def evaluate(
    suite: str | Path | Suite,
    *,
    model: str | BaseChatModel | ModelFactory,
    systems: Sequence[str | SystemSpec] = ("aimegraph", "create_agent"),
    k: int = 1,
    out: str | Path | None = None,
    concurrency: int = 4,
    seed: int = 0,
    judge_model: str | BaseChatModel | None = None,
    prices: Prices | None = None,
    tools: Sequence[ToolLike] = (),
    tasks: Sequence[str] | None = None,
    tags: Sequence[str] | None = None,
    budget: Budget | None = None,
    keep_workspaces: KeepWorkspaces = "failed",
    progress: Console | bool = False,
    on_rollout: Callable[[Mapping[str, Any]], None] | None = None,
    rate_limit: str | float | None = None,
    model_cache: str | Path | None = None,
) -> EvalResult:
    """Run ``k`` rollouts of every task of ``suite`` on every system and report.

    Args:
        suite: A suite file (:func:`~aimegraph.eval.suite.load_suite`), ``"bundled"``,
            or a loaded :class:`~aimegraph.eval.suite.Suite`.
        model: The model every system runs with unless its spec names one: a spec
            (``openai:<model>``, ``anthropic:<model>``, ``local``, ...), a chat model, a factory
            ``(task, system_kind, rollout) -> chat model``, or ``"oracle"`` for the
            tasks' scripted oracle replies.
        systems: Built-in names (``aimegraph``, ``create_agent``, ``deepagents``),
            systems files, or :class:`~aimegraph.eval.systems.SystemSpec` objects. A
            system that cannot run here (its package missing) is skipped with the
            reason, in the result and the reports.
        k: Rollouts per task and system.
        out: The eval's directory (default ``.aimegraph/evals/<suite name>``); an
            eval already there is resumed.
        concurrency: Rollouts run at once.
        seed: Rollout ``i`` sends seed ``seed + i`` to models whose client takes one
            (OpenAI and compatible servers), the same for every system.
        judge_model: The separate model that judges ``rubric`` checks.
        prices: USD per million tokens by model name, ``(input, output)`` or
            ``(input, output, cached input)``; the cost of every system.
        tools: The application's tools, given to every system.
        tasks, tags: Only the tasks with these ids / with one of these tags.
        budget: A ceiling on every task's budget (calls, tokens, seconds per rollout).
        keep_workspaces: Keep the workspaces of ``"failed"`` rollouts (default),
            ``"all"`` or ``"none"``.
        progress: Show a progress bar (on this console, or stderr when True).
        on_rollout: Called with each record as it is written.
        rate_limit: A client-side rate limit per provider (``"2/s"``, ``"30/min"``)
            for the models given as specs, the judge's too, shared by all systems.
        model_cache: A SQLite file of model replies: identical requests are answered
            from it (for re-running an eval cheaply; see ``AimeConfig.model_cache``).

    Returns:
        An :class:`EvalResult`. On Ctrl-C the records so far are kept, the reports
        written, and ``KeyboardInterrupt`` raised again.
    """
    if k < 1 or concurrency < 1:
        raise ValueError("k and concurrency must be at least 1")
    loaded = suite if isinstance(suite, Suite) else load_suite(suite)
    if tasks or tags:
        loaded = loaded.select(ids=tasks, tags=tags)
    if model == ORACLE or not isinstance(model, str | BaseChatModel):
        # Stand-ins play the tasks' oracles: one that knows what its caller has not seen
        # is refused before a figure rests on it (the knowledge rule).
        problem = clairvoyance_problem(loaded)
        if problem is not None:
            raise SuiteError(f"{loaded.source}: {problem}")
    if budget is not None:
        loaded = loaded.capped(budget)
    specs = load_systems(systems)
    folder = Path(out) if out is not None else DEFAULT_EVALS / loaded.name
    folder.mkdir(parents=True, exist_ok=True)
    resolver = ModelResolver(rate_limit=rate_limit, cache=model_cache)
    source = ModelSource(OracleModels() if model == ORACLE else model, resolver)
    skipped = {
        spec.name: reason for spec in specs if (reason := _unavailable(spec, model)) is not None
    }
    running = [spec for spec in specs if spec.name not in skipped]
    plan = _plan(loaded, running, source, k, seed)
    manifest = _manifest(loaded, specs, source, k, seed, concurrency)
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")

    known, torn = read_records(folder / RESULTS)
    valid = {r.key: r for r in plan}
    current: dict[tuple[str, str, int], dict[str, Any]] = {}
    for earlier in known:
        key = (earlier["system"], earlier["task"], int(earlier["rollout"]))
        wanted = valid.get(key)
        if wanted is not None and _matches(earlier, wanted):
            current[key] = earlier
    pending = [r for r in plan if r.key not in current]
    resumed = len(current)
    judge = resolver.resolve(judge_model) if isinstance(judge_model, str) else judge_model
    source.resolve_specs(pending)
    result = EvalResult(folder, [], {}, skipped, 0, resumed, torn)

    def finish() -> EvalResult:
        result.records = [current[r.key] for r in plan if r.key in current]
        result.summary = summarise(
            result.records,
            k=k,
            systems=[
                {"name": s.name, "kind": s.kind, "model": source.describe(s)} for s in running
            ],
            tasks=[{"id": t.id, "tags": t.tags} for t in loaded.tasks],
            skipped=skipped,
            expected_rollouts=len(plan),
            suite=loaded.name,
            left_out=loaded.left_out,
            attack=loaded.attack,
        )
        _write_reports(folder, result.summary)
        return result

    def work(rollout: Rollout, control: RunControl) -> dict[str, Any]:
        return run_rollout(
            rollout,
            loaded,
            source,
            workdir=folder / WORKSPACES,
            tools=tuple(tools),
            prices=prices,
            judge_model=judge,
            keep_workspaces=keep_workspaces,
            control=control,
        )

    def record(item: dict[str, Any]) -> None:
        _append(folder / RESULTS, item)
        current[(item["system"], item["task"], int(item["rollout"]))] = item
        result.ran += 1
        if on_rollout is not None:
            on_rollout(item)

    recorded_passes = sum(bool(r["passed"]) for r in current.values())
    bar = _progress_bar(progress, len(plan), resumed, recorded_passes)
    try:
        with bar or _Quiet():
            _run_all(pending, work, record, concurrency, bar)
    except KeyboardInterrupt:
        finish()
        raise
    return finish()


def _unavailable(spec: SystemSpec, model: object) -> str | None:
    if model == ORACLE and spec.kind == "deepagents" and spec.model is None:
        return "no oracle replies for deepagents (its own file tools differ from aimegraph's)"
    return unavailable_reason(spec.kind)


def _plan(
    suite: Suite, systems: Sequence[SystemSpec], source: ModelSource, k: int, seed: int
) -> list[Rollout]:
    digests = {t.id: suite.digest(t) for t in suite.tasks}
    return [
        Rollout(
            system=spec,
            task=task,
            index=index,
            seed=seed + index,
            task_digest=digests[task.id],
            system_digest=spec.digest(source.describe(spec)),
        )
        for spec in systems
        for task in suite.tasks
        for index in range(k)
    ]


def _matches(record: Mapping[str, Any], rollout: Rollout) -> bool:
    return (
        record.get("task_digest") == rollout.task_digest
        and record.get("system_digest") == rollout.system_digest
        and record.get("seed") in (None, rollout.seed)
    )


def _manifest(
    suite: Suite,
    specs: Sequence[SystemSpec],
    source: ModelSource,
    k: int,
    seed: int,
    concurrency: int,
) -> dict[str, Any]:
    return {
        "suite": suite.name,
        "source": suite.source,
        "tasks": [t.id for t in suite.tasks],
        "systems": [
            {**s.model_dump(mode="json", exclude_defaults=True), "model": source.describe(s)}
            for s in specs
        ],
        "k": k,
        "seed": seed,
        "concurrency": concurrency,
        "updated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def _append(path: Path, record: Mapping[str, Any]) -> None:
    """One line, flushed and synced: once this returns, a crash cannot lose it."""
    line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def _write_reports(folder: Path, summary: Mapping[str, Any]) -> None:
    (folder / SUMMARY).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    (folder / REPORT_MD).write_text(markdown_report(summary), encoding="utf-8")
    (folder / REPORT_HTML).write_text(html_report(summary), encoding="utf-8")


class _Quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@dataclass
class _Bar:
    progress: Progress
    task: Any
    passed: int = 0

    def __enter__(self) -> None:
        self.progress.start()

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def advance(self, record: Mapping[str, Any]) -> None:
        self.passed += bool(record["passed"])
        self.progress.update(
            self.task,
            advance=1,
            description=f"{record['system']} {record['task']}",
            passed=self.passed,
        )


def _progress_bar(progress: Console | bool, total: int, done: int, passed: int) -> _Bar | None:
    """The eval's progress bar, starting from the ``done`` rollouts already recorded
    (``passed`` of them passed), so a resumed eval counts them too."""
    if progress is False:
        return None
    console = progress if isinstance(progress, Console) else Console(stderr=True)
    bar = Progress(
        TextColumn("[bold]eval[/bold] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[passed]} passed"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    task = bar.add_task("", total=total, completed=done, passed=passed)
    return _Bar(bar, task, passed)


_DONE = object()
_DRAIN_WAIT_S = 10.0
"""How long a stopped eval waits for its drained rollouts before it exits anyway."""


def _run_all(
    pending: Sequence[Rollout],
    work: Callable[[Rollout, RunControl], dict[str, Any]],
    record: Callable[[dict[str, Any]], None],
    concurrency: int,
    bar: _Bar | None,
) -> None:
    """Run ``pending`` in daemon worker threads; the calling thread writes each
    record as it arrives (the only writer), so Ctrl-C there stops the recording at
    once and leaves every written line whole. On Ctrl-C every rollout in flight is
    drained (its graph stops at its next step; the eval waits up to 10 s for that)
    and not recorded: it runs again on resume."""
    todo: queue.SimpleQueue[Rollout] = queue.SimpleQueue()
    for rollout in pending:
        todo.put(rollout)
    done: queue.SimpleQueue[Any] = queue.SimpleQueue()
    stop = threading.Event()
    in_flight: set[RunControl] = set()
    lock = threading.Lock()

    def worker() -> None:
        while not stop.is_set():
            try:
                rollout = todo.get_nowait()
            except queue.Empty:
                break
            control = RunControl()
            with lock:
                in_flight.add(control)
            try:
                done.put(work(rollout, control))
            except BaseException as exc:  # noqa: BLE001 - a bug must not hang the eval
                done.put(exc)
            finally:
                with lock:
                    in_flight.discard(control)
        done.put(_DONE)

    workers = [
        threading.Thread(target=worker, name=f"eval-{i}", daemon=True)
        for i in range(min(concurrency, len(pending)))
    ]
    for thread in workers:
        thread.start()
    finished = 0
    try:
        while finished < len(workers):
            try:
                item = done.get(timeout=0.2)
            except queue.Empty:
                continue
            if item is _DONE:
                finished += 1
            elif isinstance(item, BaseException):
                raise item
            else:
                record(item)
                if bar is not None:
                    bar.advance(item)
    finally:
        stop.set()
        with lock:
            for control in in_flight:
                control.request_drain("the eval was stopped")
        # The drained rollouts stop at their next step: wait for them (a little), so no
        # worker is still running while the interpreter shuts down, where a daemon
        # thread writing to stderr aborts the process.
        deadline = time.monotonic() + _DRAIN_WAIT_S
        for thread in workers:
            thread.join(max(0.0, deadline - time.monotonic()))
