"""``aimegraph eval SUITE`` (k rollouts per task and system, resumable, reports) and
``aimegraph eval compare A B`` (a paired comparison of two systems' results)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml
from langgraph.checkpoint.base import BaseCheckpointSaver
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from aimegraph.cli.options import skills_option
from aimegraph.cli.support import (
    EXIT_USAGE,
    AddCommand,
    CliError,
    application_tools,
    skill_folders,
)
from aimegraph.console import print_unwrapped
from aimegraph.eval.harness import DEFAULT_EVALS, RESULTS, evaluate
from aimegraph.eval.public import is_public_suite, load_public_suite
from aimegraph.eval.public.gullible import GULLIBLE_MODEL_NAME, GullibleModels
from aimegraph.eval.report import (
    attack_table,
    comparison_markdown,
    fmt_cost,
    fmt_number,
    fmt_tool_calling,
    score_cells,
    score_columns,
)
from aimegraph.eval.rollout import ModelFactory
from aimegraph.eval.suite import Budget, Suite, SuiteError
from aimegraph.eval.summary import compare, read_records
from aimegraph.eval.systems import BUILTIN_SYSTEMS, SystemsError, SystemSpec, load_systems
from aimegraph.tools.skills import SkillError, load_skills

__all__ = ["register"]

EXIT_STOPPED = 130
USAGE = "aimegraph eval SUITE [options] | aimegraph eval compare A B"


def register(command: AddCommand) -> None:
    """Add ``eval``."""
    _add_arguments(command("eval", cmd_eval))


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = USAGE
    parser.add_argument(
        "target",
        nargs="+",
        metavar="SUITE | compare A B",
        help="a suite file (.yaml, .yml, .json, .jsonl), 'bundled', or a public benchmark "
        "(agentdojo:SUITE[@VERSION], extra [agentdojo]; bfcl:multi_turn_base, "
        "pip install --no-deps bfcl-eval); or 'compare A B', "
        "where A and B are eval directories or results.jsonl files, each optionally "
        "followed by :SYSTEM",
    )
    parser.add_argument(
        "--systems",
        default="aimegraph,create_agent",
        help=f"comma-separated: built-in systems ({', '.join(BUILTIN_SYSTEMS)}) and systems "
        "files (YAML/JSON list of {name, kind, model, models, config, prompts, "
        "prompt_version, agents, system_prompt}); default aimegraph,create_agent",
    )
    parser.add_argument("-k", type=int, default=1, help="rollouts per task and system (1)")
    parser.add_argument(
        "--model",
        default="openai:gpt-4o-mini",
        help="the systems' model unless a system names its own: openai:<model>, "
        "<provider>:<model> (anthropic:, ollama:, ...), local, ... "
        "or 'oracle' for the suite's scripted oracle replies (offline); with --attack, "
        "'gullible': the oracle obeying every instruction it reads in a tool output",
    )
    parser.add_argument(
        "--attack",
        metavar="NAME",
        help="agentdojo suites: run each user task against each injection task with "
        "AgentDojo's attack NAME (e.g. important_instructions); reports utility under "
        "attack and attack success rate per system",
    )
    parser.add_argument("--judge-model", help="the separate model that judges rubric checks")
    parser.add_argument("--concurrency", type=int, default=4, help="rollouts at once (4)")
    parser.add_argument(
        "--out",
        metavar="DIR",
        help=f"the eval's directory; an eval there is resumed (default {DEFAULT_EVALS}/<suite>)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="rollout i sends seed SEED+i where the model takes one"
    )
    parser.add_argument(
        "--tasks",
        help="comma-separated task ids: only these (under --attack, a user task's id "
        "selects it against every injection task)",
    )
    parser.add_argument("--tags", help="comma-separated tags: only tasks with one of them")
    parser.add_argument(
        "--prices",
        metavar="JSON_OR_FILE",
        help='USD per million tokens by model name: {"gpt-4o-mini": [0.15, 0.6]} '
        "([input, output] or [input, output, cached input]), or a JSON/YAML file of it",
    )
    parser.add_argument(
        "--tools",
        metavar="MODULE:ATTR",
        action="append",
        default=[],
        help="the application's tools for every system (a tool, a function or a list); repeatable",
    )
    skills_option(parser, "Given to every aimegraph system (in its config)")
    parser.add_argument(
        "--max-llm-calls", type=int, help="at most this many model calls per rollout"
    )
    parser.add_argument(
        "--max-tokens", type=int, help="at most this many tokens (input + output) per rollout"
    )
    parser.add_argument("--timeout", type=float, help="at most this many seconds per rollout")
    parser.add_argument(
        "--rate-limit",
        metavar="RATE",
        help="client-side rate limit per model provider across all rollouts, e.g. 2/s, 30/min",
    )
    parser.add_argument(
        "--model-cache",
        metavar="SQLITE_FILE",
        help="cache model replies in this file and replay them for identical requests",
    )
    parser.add_argument(
        "--keep-workspaces",
        choices=["failed", "all", "none"],
        default="failed",
        help="which rollouts' workspaces to keep (failed)",
    )


def _names(text: str | None) -> list[str] | None:
    return [p.strip() for p in text.split(",") if p.strip()] if text else None


def _systems(args: argparse.Namespace) -> list[SystemSpec]:
    """The ``--systems``, each aimegraph one with the ``--skills`` folders in its config."""
    systems = load_systems(_names(args.systems) or [])
    if not args.skills:
        return systems
    given = skill_folders(args.skills)
    try:  # a bad folder is a usage error now, not an error in every rollout
        load_skills(given)
    except SkillError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    return [
        spec.model_copy(
            update={"config": {**spec.config, "skills": [*spec.config.get("skills", ()), *given]}}
        )
        if spec.kind == "aimegraph"
        else spec
        for spec in systems
    ]


def _prices(text: str | None) -> dict[str, tuple[float, ...]] | None:
    if not text:
        return None
    try:
        source = Path(text).read_text(encoding="utf-8") if Path(text).is_file() else text
        data = yaml.safe_load(source)
    except (OSError, yaml.YAMLError) as exc:
        raise CliError(f"--prices: {exc}", EXIT_USAGE) from exc
    shape = "a mapping of model name to [input, output] or [input, output, cached input]"
    if not isinstance(data, dict):
        raise CliError(f"--prices must be {shape}", EXIT_USAGE)
    prices = {}
    for name, price in data.items():
        if not isinstance(price, list) or len(price) not in (2, 3):
            raise CliError(f"--prices {name!r}: expected {shape}", EXIT_USAGE)
        try:
            prices[str(name)] = tuple(float(p) for p in price)
        except (TypeError, ValueError) as exc:
            raise CliError(f"--prices {name!r}: {exc}", EXIT_USAGE) from exc
    return prices


def _budget(args: argparse.Namespace) -> Budget | None:
    """The ceiling the budget flags put on every task's own budget."""
    limits = {"max_llm_calls": args.max_llm_calls, "max_tokens": args.max_tokens}
    limits["timeout_s"] = args.timeout
    if all(value is None for value in limits.values()):
        return None
    try:
        return Budget(**limits)
    except ValueError as exc:
        raise CliError(f"budget flags must be positive: {exc}", EXIT_USAGE) from exc


def cmd_eval(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    """Run an eval (exit 0 when every rollout is recorded, whatever the scores; 130 when
    stopped by Ctrl-C, resumable), or compare two results."""
    target = args.target
    if target[0] == "compare":
        if len(target) != 3:
            raise CliError("usage: aimegraph eval compare A B", EXIT_USAGE)
        return _compare(target[1], target[2], args, console)
    if len(target) != 1:
        raise CliError(f"usage: {USAGE}", EXIT_USAGE)
    if args.k < 1 or args.concurrency < 1:
        raise CliError("-k and --concurrency must be at least 1", EXIT_USAGE)
    try:
        suite, model = _suite_and_model(target[0], args)
        result = evaluate(
            suite,
            model=model,
            systems=_systems(args),
            k=args.k,
            out=args.out,
            concurrency=args.concurrency,
            seed=args.seed,
            judge_model=args.judge_model,
            prices=_prices(args.prices),  # type: ignore[arg-type]
            tools=application_tools(args.tools),
            tasks=_names(args.tasks),
            tags=_names(args.tags),
            budget=_budget(args),
            keep_workspaces=args.keep_workspaces,
            progress=False if args.json else Console(stderr=True),
            rate_limit=args.rate_limit,
            model_cache=args.model_cache,
        )
    except (SuiteError, SystemsError) as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    except KeyboardInterrupt:
        where = args.out or f"{DEFAULT_EVALS}/<suite>"
        Console(stderr=True).print(
            f"stopped: the finished rollouts are recorded in {escape(str(where))}; run the "
            "same command again to resume",
            soft_wrap=True,
        )
        return EXIT_STOPPED
    if args.json:
        print(json.dumps({"out": str(result.out), "ran": result.ran, **result.summary}))
        return 0
    _print_summary(result.summary, console)
    _print_public(result.summary, console)
    if result.torn:
        console.print(
            f"{result.torn} unreadable line(s) of {RESULTS} skipped (their rollouts ran again)"
        )
    console.print(
        f"{result.ran} rollout(s) run, {result.resumed} already recorded; reports: "
        f"{escape(str(result.report_md))}, {escape(str(result.report_html))}",
        soft_wrap=True,
    )
    return 0


def _suite_and_model(
    source: str, args: argparse.Namespace
) -> tuple[str | Suite, str | ModelFactory]:
    """The suite to run and its model: a public benchmark is loaded here (under
    ``--attack``), and ``--model gullible`` is the stand-in that obeys its injections."""
    if not is_public_suite(source):
        if args.attack is not None:
            raise CliError("--attack applies to agentdojo:SUITE only", EXIT_USAGE)
        return source, args.model
    public = load_public_suite(source, attack=args.attack, model=args.model)
    if args.model != GULLIBLE_MODEL_NAME:
        return public.suite, args.model
    if not public.injections:
        raise CliError("--model gullible needs --attack (the instructions it obeys)", EXIT_USAGE)
    return public.suite, GullibleModels(public.injections)


def _print_public(summary: dict[str, Any], console: Console) -> None:
    """The tasks a benchmark's adapter left out, and the attack's figures."""
    for task_id, reason in (summary.get("skipped_tasks") or {}).items():
        console.print(f"task {escape(task_id)} skipped: {escape(reason)}", soft_wrap=True)
    attacked = attack_table(summary)
    if attacked is None:
        return
    name, columns, rows = attacked
    table = Table(title=f"under attack: {escape(name)}")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    print_unwrapped(console, table)


def _print_summary(summary: dict[str, Any], console: Console) -> None:
    k = summary["k"]
    table = Table(title=f"{summary['suite']}: k = {k}")
    columns = ("system", "tool calling", *score_columns(k), "tokens / solved", "cost / solved")
    for column in columns:
        table.add_column(column)
    for s in summary["systems"]:
        table.add_row(
            escape(s["name"]),
            fmt_tool_calling(s),
            *score_cells(s, k),
            fmt_number(s["tokens_per_solved"]),
            fmt_cost(s["cost_per_solved"]),
        )
    print_unwrapped(console, table)
    for name, reason in summary["skipped"].items():
        console.print(f"{escape(name)} skipped: {escape(reason)}", soft_wrap=True)


def _side(text: str) -> tuple[list[dict[str, Any]], str]:
    """The records of one side of ``compare``: ``PATH[:SYSTEM]``."""
    path, system = Path(text), None
    if not path.exists() and ":" in text:
        head, _, system = text.rpartition(":")
        path = Path(head)
    results = path / RESULTS if path.is_dir() else path
    if not results.is_file():
        raise CliError(f"{text}: no results ({results} does not exist)", EXIT_USAGE)
    records, _ = read_records(results)
    latest = {(r["system"], r["task"], r["rollout"]): r for r in records}  # a rerun wins
    systems = sorted({system for system, _, _ in latest})
    if system is None:
        if len(systems) != 1:
            raise CliError(
                f"{text} holds several systems ({', '.join(systems)}): name one as {text}:SYSTEM",
                EXIT_USAGE,
            )
        system = systems[0]
    chosen = [r for r in latest.values() if r["system"] == system]
    if not chosen:
        raise CliError(f"{text}: no system {system!r} (has {', '.join(systems)})", EXIT_USAGE)
    return chosen, f"{system} ({path})"


def _compare(a: str, b: str, args: argparse.Namespace, console: Console) -> int:
    records_a, label_a = _side(a)
    records_b, label_b = _side(b)
    try:
        result = compare(records_a, records_b, label_a=label_a, label_b=label_b)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    if args.json:
        print(json.dumps(result))
    else:
        console.print(comparison_markdown(result), markup=False, soft_wrap=True)
    return 0
