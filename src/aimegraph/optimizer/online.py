"""The online loop: every finished run is traced; a falling score triggers one
reflective mutation of the weakest prompt component, used from the next run on.

``build_aime_graph(prompts=<prompt store>, config=AimeConfig(optimize_online=True))``
ends each run with the ``optimize_online`` node
(:func:`aimegraph.nodes.online.make_online_node`). It

1. scores the run with the default metric (succeeded with a passing verdict:
   1.0, else 0.0) and appends its trace to the trace file (JSON Lines);
2. takes the rolling score of the last ``optimize_window`` runs made with the
   same prompt version as this one (a new version starts a new window);
3. when the window is full and its score is below ``optimize_threshold``, and
   the version is still the store's active one, records that score in the
   store (``online_rolling``); if the version's parent scored better in its own
   window (the last mutation made things worse), makes the parent active again,
   with no model call; else blames the component the failed runs point at
   (failed tasks: the actor; no plan, or a rejected answer with no failed
   task: the planner) and asks GEPA's reflective proposer
   (``StatelessReflectionLM`` with the optimiser's reflection template) for a
   new text from those runs' reflective dataset (a proposal that is a version
   already tried and found no better is refused);
4. stores the new prompt set (source ``online``, parent: the run's version) and
   makes it active.

The run has finished by then, so a prompt never changes mid-run; a graph over
the store starts its next run with the new version (the intake node reads the
store's current version), and a restarted process reads it from the store
again. The reflection calls are counted in the trace file (``mutation``
records) against ``optimize_max_llm_calls``, a budget of their own, across
processes; they are not part of any run's usage. The trace file is appended
under an exclusive lock, so concurrent runs make one mutation, not two. Beside
it, ``<trace file>.state.json`` keeps what the decision needs (the calls spent,
each version's current window), so a run's cost stays flat as the file grows;
it is rebuilt from the trace file whenever it is missing or out of date.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from langchain_core.language_models import BaseChatModel

from aimegraph.config import AimeConfig
from aimegraph.lazy import moved
from aimegraph.optimizer.adapter import ReflectionLM, reflection_templates, reflective_dataset
from aimegraph.optimizer.store import PromptStore
from aimegraph.optimizer.trace import Trace, default_metric, run_trace
from aimegraph.prompts import resolve_prompts
from aimegraph.prompts.source import version_id
from aimegraph.state import AimeState

try:  # POSIX; elsewhere the trace file is not locked
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["OnlineLoop", "trace_file_for"]

log = logging.getLogger("aimegraph.optimizer")

ONLINE_SCORE = "online_rolling"
"""The store score the loop records for a version: its window's rolling score when
the window triggered the loop."""


def trace_file_for(config: AimeConfig, store: PromptStore) -> Path:
    """``optimize_trace_file``, else ``<store>.traces.jsonl`` beside the store."""
    if config.optimize_trace_file is not None:
        return Path(config.optimize_trace_file)
    return store.path.with_suffix(".traces.jsonl")


def blamed(trace: Trace) -> list[str]:
    """The components a failed run points at."""
    if not trace["plan"]:
        return ["planner"]
    if trace["failures"]:
        return ["actor", "persona_habits"]
    return ["planner", "reporter"]


def weakest(traces: Sequence[Trace], components: Sequence[str]) -> str:
    """The component (of ``components``) blamed most by the failed runs; the
    earlier one in ``components`` on a tie."""
    votes = Counter(name for trace in traces for name in blamed(trace) if name in components)
    return max(components, key=lambda name: (votes[name], -components.index(name)))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class OnlineLoop:
    """The loop's state on disk (trace file, prompt store) and its one decision.

    Args:
        store: The prompt store the graph reads its prompts from.
        reflection_model: Writes the new prompt (GEPA's reflection LM).
    """

    def __init__(self, store: PromptStore, reflection_model: BaseChatModel) -> None:
        self.store = store
        self.reflection_model = reflection_model

    @staticmethod
    @contextmanager
    def _locked(path: Path) -> Iterator[IO[str]]:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a+", encoding="utf-8") as handle:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield handle
            finally:
                if fcntl is not None:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    @staticmethod
    def _append(handle: IO[str], record: dict[str, Any]) -> None:
        handle.seek(0, 2)
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        handle.flush()

    @staticmethod
    def _summary(path: Path, handle: IO[str], window: int) -> dict[str, Any]:
        """The loop's summary of the trace file: the reflection calls spent and, per
        prompt version, its runs' traces since its last mutation attempt (at most a
        window's worth). Kept beside the trace file so a run's cost does not grow
        with the file; rebuilt from the file when missing or older than it."""
        summary_path = path.with_suffix(".state.json")
        size = handle.seek(0, 2)
        try:
            summary: dict[str, Any] = json.loads(summary_path.read_text(encoding="utf-8"))
            if summary.get("trace_bytes") == size:
                return summary
        except (OSError, ValueError):
            pass
        summary = {"trace_bytes": size, "calls_spent": 0, "windows": {}}
        handle.seek(0)
        for line in handle.read().splitlines():
            if line.strip():
                _fold(summary, json.loads(line), window=window)
        return summary

    def calls_spent(self, config: AimeConfig) -> int:
        """Reflection calls made so far (all processes, from the trace file)."""
        path = trace_file_for(config, self.store)
        if not path.is_file():
            return 0
        with self._locked(path) as handle:
            return int(self._summary(path, handle, config.optimize_window)["calls_spent"])

    def after_run(
        self, state: AimeState, config: AimeConfig, *, version: str, thread_id: str | None
    ) -> dict[str, Any]:
        """Trace one finished run made with prompt ``version``; mutate if due.

        Returns the decision as an event: ``{"event": "traced" | "mutated" |
        "reverted" | "budget_spent" | "mutation_refused", "score", "rolling", "runs",
        ...}``.
        """
        score, feedback = default_metric({}, state)
        trace = run_trace(state) | {"score": score, "feedback": feedback}
        path = trace_file_for(config, self.store)
        with self._locked(path) as handle:
            summary = self._summary(path, handle, config.optimize_window)
            record: dict[str, Any] = {
                "kind": "run",
                "at": _now(),
                "thread_id": thread_id,
                "prompt_version": version,
                "trace": trace,
            }
            self._append(handle, record)
            _fold(summary, record, window=config.optimize_window)
            window: list[Trace] = summary["windows"][version]
            rolling = sum(t["score"] for t in window) / len(window)
            event: dict[str, Any] = {
                "event": "traced",
                "score": score,
                "rolling": rolling,
                "runs": len(window),
                "version": version,
            }
            due = (
                len(window) >= config.optimize_window
                and rolling < config.optimize_threshold
                and self.store.current() == version
            )
            better = self._better_parent(version, rolling) if due else None
            if better is not None:
                # The last mutation made things worse: back to its parent, no call.
                record = {
                    "kind": "mutation",
                    "at": _now(),
                    "event": "reverted",
                    "parent": version,
                    "version": better,
                    "rolling": rolling,
                    "llm_calls": 0,
                }
                self.store.score(version, {ONLINE_SCORE: rolling})
                self.store.use(better)
                self._append(handle, record)
                _fold(summary, record, window=config.optimize_window)
                event |= {"event": "reverted", "reverted_to": better}
            elif due and summary["calls_spent"] >= config.optimize_max_llm_calls:
                log.warning(
                    "online loop: rolling score %.2f is below %.2f but its budget "
                    "(optimize_max_llm_calls=%d) is spent",
                    rolling,
                    config.optimize_threshold,
                    config.optimize_max_llm_calls,
                )
                event |= {"event": "budget_spent", "llm_calls_spent": summary["calls_spent"]}
            elif due:
                # Kept for the comparison when this version's child triggers in turn.
                self.store.score(version, {ONLINE_SCORE: rolling})
                failing = [t for t in window if t["score"] < 1.0]
                mutation = self._mutate(version, failing, rolling, config)
                record = {"kind": "mutation", "at": _now(), **mutation}
                self._append(handle, record)
                _fold(summary, record, window=config.optimize_window)
                event |= mutation
            summary["trace_bytes"] = handle.tell()
            _write_atomically(path.with_suffix(".state.json"), summary)
        return event

    def _better_parent(self, version: str, rolling: float) -> str | None:
        """``version``'s parent when that scored better in its own window (the
        online mutation that made ``version`` did worse)."""
        parent = self.store.get(version).parent
        if parent is not None and self.store.get(parent).scores.get(ONLINE_SCORE, -1.0) > rolling:
            return parent
        return None

    def _mutate(
        self, version: str, failing: list[Trace], rolling: float, config: AimeConfig
    ) -> dict[str, Any]:
        """One reflective mutation of the weakest component through GEPA's proposer."""
        from gepa.proposer.reflective_mutation.reflection_lm import StatelessReflectionLM

        components = list(config.optimize_components)
        name = weakest(failing, components)
        texts = dict(self.store.texts(version))
        lm = ReflectionLM(self.reflection_model)
        started = time.perf_counter()
        record: dict[str, Any] = {"component": name, "parent": version, "rolling": rolling}
        try:
            proposal, _ = StatelessReflectionLM(lm, reflection_templates([name])).reflect(
                {name: texts[name]}, reflective_dataset(failing, [name]), [name]
            )
            new_text = proposal.new_texts.get(name, texts[name])
            if new_text.strip() == texts[name].strip():
                raise ValueError("the reflection model proposed the same text")
            proposed = version_id(resolve_prompts({**texts, name: new_text}))
            tried = next((v for v in self.store.list() if v.version == proposed), None)
            if tried is not None and tried.scores.get(ONLINE_SCORE, 1.0) <= rolling:
                raise ValueError(
                    f"the proposal is version {proposed}, which scored "
                    f"{tried.scores[ONLINE_SCORE]:.2f} online already"
                )
        except Exception as exc:  # noqa: BLE001 - a failed mutation leaves the prompts as they are
            log.warning("online loop: no new %s prompt: %s", name, exc)
            return record | {
                "event": "mutation_refused",
                "reason": f"{type(exc).__name__}: {exc}",
                "llm_calls": lm.usage.llm_calls,
                "tokens": lm.usage.total_tokens,
            }
        new_version = self.store.add(
            {name: new_text},
            parent=version,
            source="online",
            note=f"online: {name} after {len(failing)} failing run(s) of the last "
            f"{config.optimize_window} (rolling score {rolling:.2f})",
        )
        self.store.use(new_version)
        log.info(
            "online loop: %s prompt mutated (%s -> %s), rolling score %.2f",
            name,
            version,
            new_version,
            rolling,
        )
        return record | {
            "event": "mutated",
            "version": new_version,
            "llm_calls": lm.usage.llm_calls,
            "tokens": lm.usage.total_tokens,
            "ms": round((time.perf_counter() - started) * 1000, 1),
        }


def _fold(summary: dict[str, Any], record: dict[str, Any], *, window: int) -> None:
    """Add one trace-file record to the summary."""
    windows: dict[str, list[Trace]] = summary["windows"]
    if record["kind"] == "run":
        runs = [*windows.get(record["prompt_version"], []), record["trace"]]
        windows[record["prompt_version"]] = runs[-window:]
    elif record["kind"] == "mutation":
        summary["calls_spent"] += int(record.get("llm_calls", 0))
        windows[record["parent"]] = []  # a new window after each attempt


def _write_atomically(path: Path, data: dict[str, Any]) -> None:
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    os.replace(partial, path)


# Moved to the nodes, kept importable from here for a release.
__getattr__ = moved(__name__, {"make_online_node": "aimegraph.nodes.online"})
