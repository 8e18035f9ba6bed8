"""``aimegraph optimize``: GEPA over the prompts from JSON Lines example files or task suites."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from rich.console import Console
from rich.markup import escape

from aimegraph.checkpoints import RunSettings
from aimegraph.cli.support import (
    EXIT_USAGE,
    AddCommand,
    CliError,
    application_tools,
    checked_config,
    config_json,
)
from aimegraph.config import AimeConfig
from aimegraph.eval.suite import is_suite_file
from aimegraph.optimizer.store import PromptStore, default_prompt_store
from aimegraph.prompts import DEFAULT_PROMPTS
from aimegraph.steering import run_tools

__all__ = ["read_examples", "register"]

DEFAULT_WORKSPACE = Path(".aimegraph/workspace/optimize")
MIXED_SETS = "--trainset and --valset must both be suites or both example files"


def register(command: AddCommand) -> None:
    """Add ``optimize``."""
    _add_arguments(command("optimize", cmd_optimize))


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    sets = parser.add_mutually_exclusive_group(required=True)
    sets.add_argument(
        "--from-feedback",
        action="store_true",
        help="the runs users rated (aimegraph feedback) in the memory store: each goal, its "
        "rating as the score and its note as the feedback",
    )
    parser.add_argument(
        "--user", help="with --from-feedback: the memory scope to read (default: 'default')"
    )
    sets.add_argument(
        "--trainset",
        metavar="FILE",
        help='JSON Lines: {"goal": ...} per line; or a task suite (as aimegraph eval takes: '
        "YAML/JSON, or JSON Lines of tasks with checks), each task run in a workspace of "
        "its own and scored by the share of its checks that pass",
    )
    parser.add_argument(
        "--valset",
        metavar="FILE",
        help="examples (or a suite) to score on (default: trainset)",
    )
    parser.add_argument(
        "--model",
        required=True,
        help="the workflow's model: openai:<model>, <provider>:<model>, local, scripted:...",
    )
    parser.add_argument(
        "--reflection-model", required=True, help="the model that rewrites the prompts"
    )
    parser.add_argument(
        "--max-metric-calls",
        type=int,
        required=True,
        metavar="N",
        help="workflow runs at most, the validation runs included",
    )
    parser.add_argument(
        "--components",
        default="planner,actor",
        help=f"comma-separated prompt components to evolve, of {', '.join(DEFAULT_PROMPTS)} "
        "(default: planner,actor)",
    )
    parser.add_argument(
        "--metric",
        help="exact or contains (against each example's answer), or MODULE:ATTR, a callable "
        "metric(example, output_state) -> score | (score, feedback) (default: 1.0 for a run "
        "that succeeded with a passing verdict)",
    )
    parser.add_argument(
        "--run-dir", metavar="DIR", help="GEPA's state: run again with it to resume"
    )
    parser.add_argument(
        "--prompts",
        metavar="STORE",
        help="prompt store to start from (its active version) and to save the winner in "
        "(default: prompts.jsonl beside an SQLite checkpoint file, else .aimegraph/prompts.jsonl)",
    )
    parser.add_argument(
        "--minibatch-size", type=int, default=3, metavar="N", help="examples per reflection (3)"
    )
    parser.add_argument(
        "--tools",
        metavar="MODULE:ATTR",
        action="append",
        default=[],
        help="the application's tools for every run (a tool, a function, a list of them or "
        "a ToolRegistry), importable as MODULE:ATTR; repeatable",
    )
    parser.add_argument(
        "--config",
        metavar="JSON",
        help=f"AimeConfig fields for every run, as a JSON object (workspace default "
        f"{DEFAULT_WORKSPACE})",
    )


def read_examples(path: str) -> list[dict[str, Any]]:
    """One JSON object per line, each with a ``goal`` string (blank lines skipped)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}", EXIT_USAGE) from exc
    examples = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            example = json.loads(line)
        except ValueError as exc:
            raise CliError(f"{path} line {number} is not JSON: {exc}", EXIT_USAGE) from exc
        if not isinstance(example, dict) or not isinstance(example.get("goal"), str):
            raise CliError(f'{path} line {number}: expected {{"goal": "...", ...}}', EXIT_USAGE)
        examples.append(example)
    if not examples:
        raise CliError(f"{path} holds no examples", EXIT_USAGE)
    return examples


@dataclass(frozen=True)
class OptimizerInputs:
    """What the example files give ``optimize``: the sets, the metric, the tools, and
    for suites how each task runs."""

    trainset: list[dict[str, Any]]
    valset: list[dict[str, Any]] | None
    metric: Any
    tools: Any = None
    run_example: Any = None


def _suite_inputs(args: argparse.Namespace, config: AimeConfig) -> OptimizerInputs:
    """Suites as training and validation sets, scored by their own checks."""
    from aimegraph.eval.suite import SuiteError, load_suite
    from aimegraph.eval.trainset import suite_for_optimizer

    if args.metric:
        raise CliError(
            "a suite is scored by its own checks: --metric is for example files", EXIT_USAGE
        )
    if args.valset and not is_suite_file(args.valset):
        raise CliError(MIXED_SETS, EXIT_USAGE)
    try:
        suites = [load_suite(path) for path in (args.trainset, args.valset) if path]
    except SuiteError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    inputs = suite_for_optimizer(
        suites, model=args.model, config=config, tools=application_tools(args.tools)
    )
    return OptimizerInputs(
        trainset=inputs.examples[0],
        valset=inputs.examples[1] if len(suites) > 1 else None,
        metric=inputs.metric,
        run_example=inputs.run_example,
    )


def _feedback_inputs(args: argparse.Namespace, config: AimeConfig) -> OptimizerInputs:
    """The rated runs as the trainset, scored by what their users said."""
    from aimegraph.eval.trainset import feedback_metric, feedback_trainset
    from aimegraph.memory.episodes import DEFAULT_SCOPE

    if args.metric:
        raise CliError(
            "rated runs are scored by their ratings: --metric is for example files", EXIT_USAGE
        )
    scope = args.user or DEFAULT_SCOPE
    trainset = feedback_trainset(args.memory_store(), scope)
    if not trainset:
        raise CliError(
            f"no rated runs in memory scope {scope!r}: rate runs with aimegraph feedback THREAD "
            "--rating N --note TEXT",
            EXIT_USAGE,
        )
    return OptimizerInputs(
        trainset=trainset,
        valset=read_examples(args.valset) if args.valset else None,
        metric=feedback_metric,
        tools=run_tools(RunSettings(args.model, config, tools=tuple(args.tools))),
    )


def cmd_optimize(
    args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console
) -> int:
    """Run ``aimegraph.optimize``; print each iteration and the outcome (or JSON)."""
    from aimegraph.eval.optimize import optimize

    fields = config_json(args.config)
    fields.setdefault("workspace", str(DEFAULT_WORKSPACE))
    config = checked_config(fields)
    if args.from_feedback:
        inputs = _feedback_inputs(args, config)
    elif is_suite_file(args.trainset):
        inputs = _suite_inputs(args, config)
    else:
        if args.valset and is_suite_file(args.valset):
            raise CliError(MIXED_SETS, EXIT_USAGE)
        inputs = OptimizerInputs(
            trainset=read_examples(args.trainset),
            valset=read_examples(args.valset) if args.valset else None,
            metric=args.metric,
            # The same tool registry a CLI run would build from these --tools.
            tools=run_tools(RunSettings(args.model, config, tools=tuple(args.tools))),
        )
    store = PromptStore(args.prompts or default_prompt_store(args.checkpoints))
    components = tuple(c.strip() for c in args.components.split(",") if c.strip())

    def progress(record: dict[str, Any]) -> None:
        console.print(
            f"iteration {record['iteration']}: best validation score "
            f"{record['best_score']:.3f}, {record['candidates']} candidate(s), "
            f"{record['metric_calls']}/{args.max_metric_calls} metric calls"
            + (" (new candidate accepted)" if record["accepted"] else ""),
            markup=False,
            soft_wrap=True,
        )

    try:
        result = optimize(
            args.model,
            inputs.trainset,
            reflection_model=args.reflection_model,
            valset=inputs.valset,
            metric=inputs.metric,
            components=components,
            max_metric_calls=args.max_metric_calls,
            config=config,
            tools=inputs.tools,
            run_example=inputs.run_example,
            run_dir=args.run_dir,
            store=store,
            minibatch_size=args.minibatch_size,
            on_progress=progress,
        )
    except (ImportError, KeyError) as exc:  # the extra missing; a metric without "answer"
        raise CliError(str(exc).strip("'\""), EXIT_USAGE) from exc
    if args.json:
        print(
            json.dumps(
                {
                    "score_before": result.score_before,
                    "score_after": result.score_after,
                    "metric_calls": result.metric_calls,
                    "candidates": result.candidates,
                    "version": result.version,
                    "store": str(store.path),
                    # Totals only: the runs' tasks share ids (t1, ...) across runs.
                    "usage": result.usage.totals().model_dump(),
                    "reflection_usage": result.reflection_usage.totals().model_dump(),
                    "history": result.history,
                    "best_prompts": result.best_prompts,
                }
            )
        )
        return 0
    console.print(
        f"validation score {result.score_before:.3f} -> {result.score_after:.3f} in "
        f"{result.metric_calls} metric calls ({result.usage.llm_calls} LLM calls, "
        f"{result.usage.total_tokens} tokens in the runs; {result.reflection_usage.llm_calls} "
        f"reflection calls, {result.reflection_usage.total_tokens} tokens)",
        markup=False,
        soft_wrap=True,
    )
    if result.version is None:
        console.print("no candidate beat the starting prompts; the store is unchanged")
    else:
        where = escape(os.fspath(store.path))
        parent = store.get(result.version).parent or "default"
        console.print(
            f"[bold]saved[/bold] prompt version {result.version} in {where} (now active); "
            f"see: aimegraph prompts --prompts {where} diff {parent} {result.version}",
            soft_wrap=True,
        )
    return 0
