"""``aimegraph.optimize``: GEPA over the workflow's prompts, offline.

It runs whole aime graphs, so it sits with the evaluation above the engine; the
pieces the engine itself uses (prompt store, online loop) are ``aimegraph.optimizer``.

``gepa.optimize`` runs the search; :class:`~aimegraph.optimizer.adapter.AimeAdapter`
runs one aime workflow per example with a candidate's prompts. The winner goes
into the prompt store (source ``gepa``) and becomes its active version, so every
graph built over that store uses it from its next run on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from langchain_core.language_models import BaseChatModel

from aimegraph.config import AimeConfig
from aimegraph.graphs.aime import build_aime_graph
from aimegraph.models.resolve import resolve_model
from aimegraph.optimizer.trace import Example, Metric, resolve_metric
from aimegraph.prompts import DEFAULT_PROMPTS, PromptOverrides, resolve_prompts
from aimegraph.state import Usage

if TYPE_CHECKING:
    from gepa.core.callbacks import GEPACallback
    from gepa.core.result import GEPAResult

    from aimegraph.optimizer.adapter import RunExample
    from aimegraph.optimizer.trace import Trace

__all__ = ["OptimizeResult", "optimize"]

log = logging.getLogger("aimegraph.optimizer")

HISTORY_FILE = "history.jsonl"
GEPA_LOG_FILE = "gepa_log.txt"


@dataclass(frozen=True)
class OptimizeResult:
    """What :func:`optimize` found.

    ``history`` has one record per GEPA iteration (iteration 0 is the starting
    prompts' validation): ``iteration``, ``metric_calls`` so far, ``best_score``
    on the validation set so far, ``accepted`` (a new candidate joined the pool)
    and ``candidates`` in the pool. ``version`` is the winner's prompt-store
    version (``None`` when nothing beat the starting prompts). ``usage`` adds up
    the workflow runs, ``reflection_usage`` the reflection model's calls.
    """

    best_prompts: dict[str, str]
    score_before: float
    score_after: float
    metric_calls: int
    history: list[dict[str, Any]]
    version: str | None = None
    candidates: int = 1
    usage: Usage = field(default_factory=Usage)
    reflection_usage: Usage = field(default_factory=Usage)


class _GepaLog:
    """GEPA's logger protocol, into Python logging (and the run directory)."""

    def __init__(self, run_dir: Path | None) -> None:
        self.path = run_dir / GEPA_LOG_FILE if run_dir is not None else None

    def log(self, message: str) -> None:
        log.debug("gepa: %s", message)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as out:
                out.write(message.rstrip("\n") + "\n")


class _Progress:
    """GEPA callbacks: the per-iteration history (kept in the run directory, so a
    resumed run continues it), logged as it grows and passed to ``on_progress``."""

    def __init__(
        self, run_dir: Path | None, on_progress: Callable[[dict[str, Any]], None] | None
    ) -> None:
        self.path = run_dir / HISTORY_FILE if run_dir is not None else None
        self.on_progress = on_progress
        self.history: list[dict[str, Any]] = []
        if self.path is not None and self.path.is_file():
            lines = self.path.read_text(encoding="utf-8").splitlines()
            self.history = [json.loads(line) for line in lines if line.strip()]

    def _add(self, record: dict[str, Any]) -> None:
        self.history.append(record)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(record) + "\n")
        log.info(
            "iteration %d: best validation score %.3f, %d candidate(s), %d metric calls%s",
            record["iteration"],
            record["best_score"],
            record["candidates"],
            record["metric_calls"],
            " (new candidate accepted)" if record["accepted"] else "",
        )
        if self.on_progress is not None:
            self.on_progress(record)

    def on_valset_evaluated(self, event: Mapping[str, Any]) -> None:
        if event["iteration"] == 0 and not self.history:
            score = float(event["average_score"])
            self._add(
                {
                    "iteration": 0,
                    "metric_calls": int(event["num_examples_evaluated"]),
                    "best_score": score,
                    "accepted": False,
                    "candidates": 1,
                }
            )

    def on_iteration_end(self, event: Mapping[str, Any]) -> None:
        state = event["state"]
        scores = list(state.program_full_scores_val_set)
        self._add(
            {
                "iteration": int(state.i) + 1,
                "metric_calls": int(state.total_num_evals),
                "best_score": max(scores),
                "accepted": bool(event["proposal_accepted"]),
                "candidates": len(scores),
            }
        )


class _RoomForAnIteration:
    """A GEPA stopper: stop when the budget left could not pay for one more
    iteration at its worst (two minibatch evaluations and a full validation), so
    the metric calls never pass ``max_metric_calls`` (GEPA's own stopper only
    checks between iterations, after the fact)."""

    def __init__(self, max_metric_calls: int, worst_iteration: int) -> None:
        self.max_metric_calls = max_metric_calls
        self.worst_iteration = worst_iteration

    def __call__(self, gepa_state: Any) -> bool:
        return int(gepa_state.total_num_evals) + self.worst_iteration > self.max_metric_calls


def _examples(name: str, items: Iterable[Example]) -> list[Example]:
    examples = list(items)
    if not examples:
        raise ValueError(f"{name} is empty")
    for index, example in enumerate(examples):
        if not isinstance(example, Mapping) or not isinstance(example.get("goal"), str):
            raise ValueError(f"{name}[{index}] needs a 'goal' string: {example!r:.120}")
    return examples


def optimize(
    model: BaseChatModel | str,
    trainset: Sequence[Example],
    *,
    reflection_model: BaseChatModel | str,
    valset: Sequence[Example] | None = None,
    metric: Metric | str | None = None,
    components: Sequence[str] = ("planner", "actor"),
    max_metric_calls: int = 60,
    config: AimeConfig | None = None,
    run_dir: str | Path | None = None,
    models: Mapping[str, BaseChatModel | str] | None = None,
    tools: Any = None,
    prompts: PromptOverrides | None = None,
    store: Any = None,
    minibatch_size: int = 3,
    max_workers: int = 1,
    seed: int = 0,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    run_example: RunExample | None = None,
) -> OptimizeResult:
    """Optimise the workflow's prompt components with GEPA on a trainset.

    Each metric call is one aime run (``build_aime_graph(model, prompts=...)``)
    on one example. GEPA reflects on the runs' traces (plan, task outcomes,
    failures and their reasons, the verifier's issues, usage) with
    ``reflection_model`` to propose new texts for ``components``, keeps the
    candidates that do better on a minibatch, scores them on ``valset`` and
    returns the best.

    Args:
        model: The workflow's model (or spec), as for ``build_aime_graph``.
        trainset: Examples ``{"goal": str, ...}``; the reflective minibatches.
        reflection_model: Chat model (or spec) that writes the new prompts.
        valset: Examples the candidates are scored on; defaults to ``trainset``.
        metric: ``metric(example, output_state) -> float | (float, str)``, or
            ``"exact"`` / ``"contains"`` (against ``example["answer"]``), or
            ``"module:attribute"``. Default: 1.0 for a run that ``succeeded``
            with a passing verdict, else 0.0; feedback: the verdict's issues and
            the failed tasks' reasons.
        components: Prompt components to evolve (``aimegraph.prompts.DEFAULT_PROMPTS``).
        max_metric_calls: Workflow runs at most, the validation runs included;
            at least ``len(valset)``. An iteration is started only when the
            budget left covers it at its worst (``2 * minibatch_size + len(valset)``).
        config: ``AimeConfig`` for every run (small budgets keep rollouts cheap).
        run_dir: GEPA's state, the history and GEPA's log; a run started again
            with the same directory resumes where it stopped (create the file
            ``gepa.stop`` in it to stop cleanly after the current iteration).
        models, tools: As for ``build_aime_graph``.
        prompts: Starting prompts (mapping or prompt-set file); default: the
            store's active version, else the defaults.
        store: A ``PromptStore`` or its path, where the winner is saved (source
            ``gepa``, parent the starting version, scores ``val`` and
            ``val_before``) and made active. Default: ``.aimegraph/prompts.jsonl``.
        minibatch_size: Training examples per reflection.
        max_workers: Examples run at once.
        seed: GEPA's random seed.
        on_progress: Called with each history record as it is made.
        run_example: Runs one example itself, ``(prompts, example) -> output state``
            (the candidate's full prompt set), instead of ``{"goal": ...}`` on a graph
            built from ``model``, ``tools`` and ``config``: how task suites with files
            and several turns are run (``aimegraph.eval.suite_for_optimizer``).

    Returns:
        :class:`OptimizeResult`.
    """
    try:
        import gepa
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "aimegraph.optimize needs GEPA: pip install 'aimegraph[optimize]'"
        ) from exc
    from aimegraph.optimizer.adapter import AimeAdapter, ReflectionLM, reflection_templates
    from aimegraph.optimizer.store import DEFAULT_PROMPT_STORE, PromptStore

    train = _examples("trainset", trainset)
    val = _examples("valset", valset) if valset is not None else train
    unknown = sorted(set(components) - set(DEFAULT_PROMPTS))
    if not components or unknown:
        raise ValueError(
            f"components must name prompt components {sorted(DEFAULT_PROMPTS)}; "
            f"got {list(components)}"
        )
    if max_metric_calls < len(val):
        raise ValueError(
            f"max_metric_calls ({max_metric_calls}) cannot even score the starting prompts "
            f"on the {len(val)} validation example(s)"
        )
    scorer = resolve_metric(metric)
    prompt_store = (
        store if isinstance(store, PromptStore) else PromptStore(store or DEFAULT_PROMPT_STORE)
    )
    # Explicit starting prompts have no lineage in the store; else its current version.
    parent = None if prompts is not None else prompt_store.current()
    base = resolve_prompts(prompts) if parent is None else dict(prompt_store.texts(parent))
    config = config or AimeConfig()
    run_path = Path(run_dir) if run_dir is not None else None
    if run_path is not None:
        run_path.mkdir(parents=True, exist_ok=True)

    adapter = AimeAdapter(
        lambda chosen: build_aime_graph(
            model, tools=tools, config=config, models=models, prompts=chosen
        ),
        scorer,
        base=base,
        max_workers=max_workers,
        run_example=run_example,
    )
    seed_candidate = {name: base[name] for name in components}
    if run_path is not None and (run_path / "gepa_state.bin").is_file():
        from gepa.core.state import GEPAState

        saved: dict[Any, float] = GEPAState.load(str(run_path)).prog_candidate_val_subscores[0]
        if sorted(saved) == list(range(len(val))):
            adapter.known_scores(seed_candidate, val, [saved[i] for i in range(len(val))])
    reflection = ReflectionLM(
        resolve_model(reflection_model) if isinstance(reflection_model, str) else reflection_model
    )
    progress = _Progress(run_path, on_progress)
    result: GEPAResult[Trace, int] = gepa.optimize(
        seed_candidate=seed_candidate,
        trainset=train,
        valset=val,
        adapter=adapter,
        reflection_lm=reflection,
        reflection_prompt_template=reflection_templates(components),
        reflection_minibatch_size=minibatch_size,
        max_metric_calls=max_metric_calls,
        stop_callbacks=_RoomForAnIteration(max_metric_calls, 2 * minibatch_size + len(val)),
        run_dir=str(run_path) if run_path is not None else None,
        logger=_GepaLog(run_path),
        callbacks=[cast("GEPACallback", progress)],
        seed=seed,
        raise_on_exception=True,
    )

    best = dict(result.candidates[result.best_idx])
    before, after = result.val_aggregate_scores[0], result.val_aggregate_scores[result.best_idx]
    metric_calls = int(result.total_metric_calls or 0)
    version = None
    if result.best_idx != 0 and after > before:
        version = prompt_store.add(
            {**base, **best},
            parent=parent,
            scores={"val_before": before, "val": after, "metric_calls": metric_calls},
            source="gepa",
            note=f"GEPA: {len(val)} validation example(s), {metric_calls} metric calls",
        )
        prompt_store.use(version)
        log.info("saved the winner as prompt version %s (%.3f -> %.3f)", version, before, after)
    return OptimizeResult(
        best_prompts=best,
        score_before=before,
        score_after=after,
        metric_calls=metric_calls,
        history=progress.history,
        version=version,
        candidates=result.num_candidates,
        usage=adapter.usage,
        reflection_usage=reflection.usage,
    )
