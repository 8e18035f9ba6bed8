"""What every command group shares: the error that ends a command with an exit
code, the exit codes, a handler's signature, and the ``AimeConfig`` and prompts a
run's flags describe. Every group imports it, so the engine is imported only inside
the helpers that need it (``aimegraph threads`` needs none of them)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.types import StateSnapshot
    from rich.console import Console

    from aimegraph.config import AimeConfig
    from aimegraph.tools.registry import ToolLike

__all__ = [
    "EXIT_BUSY",
    "EXIT_CODES",
    "EXIT_NOT_FOUND",
    "EXIT_SIGNALLED",
    "EXIT_TIMEOUT",
    "EXIT_USAGE",
    "AddCommand",
    "CliError",
    "Handler",
    "application_tools",
    "checked_config",
    "config_flags",
    "config_from_args",
    "config_json",
    "run_prompts",
    "skill_folders",
    "unfinished_run",
]

EXIT_CODES = {
    "succeeded": 0,
    "failed": 1,
    "rejected": 3,
    "budget_exhausted": 4,
    "paused": 5,
    "cancelled": 8,
    "blocked": 10,
}
EXIT_USAGE, EXIT_NOT_FOUND, EXIT_TIMEOUT, EXIT_BUSY = 2, 6, 7, 9
EXIT_SIGNALLED = 128
"""Stopped by a signal: 128 + its number (130 for SIGINT, 143 for SIGTERM)."""

RUN_FLAGS = (
    "max_parallel",
    "max_replans",
    "max_llm_calls",
    "max_tokens",
    "max_steps",
    "max_actor_steps",
    "replan",
    "verify",
    "tool_calling",
    "rate_limit",
    "model_cache",
    "server_schema",
)
"""The ``AimeConfig`` fields a new run (``run``, ``submit``) takes as flags."""


Handler = Callable[[argparse.Namespace, "BaseCheckpointSaver[Any]", "Console"], int]
"""A command: its parsed flags, the checkpoint store, the console; returns the exit code."""

AddCommand = Callable[[str, Handler], argparse.ArgumentParser]
"""The parser of a subcommand (its help and the flags every command has, ``--json`` and
``--checkpoints``, already there: see ``aimegraph.cli.app.COMMANDS``), given its handler."""


class CliError(Exception):
    """Ends a command: the message is printed, ``code`` is the exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def config_from_args(args: argparse.Namespace, thread_id: str) -> AimeConfig:
    """The config of a new run from its flags (``--config`` JSON, then each flag);
    the workspace defaults to one per thread."""
    from aimegraph.steering import WORKSPACES

    fields = config_flags(args)
    fields.setdefault("workspace", str(WORKSPACES / thread_id))
    return checked_config(fields)


def config_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The ``AimeConfig`` fields a run's flags give (``--config`` JSON, then each
    flag), and only those: on a thread with stored settings they are the overrides."""
    fields = config_json(args.config)
    for name in RUN_FLAGS:
        if (value := getattr(args, name)) is not None:
            fields[name] = value
    if args.approve_plan:
        fields["approve_plan"] = True
    if args.skills:
        fields["skills"] = [*fields.get("skills", ()), *skill_folders(args.skills)]
    if args.approve_tools:
        fields["approve_tools"] = [t.strip() for t in args.approve_tools.split(",") if t.strip()]
    if args.workspace:
        fields.setdefault("workspace", str(Path(args.workspace)))
    return fields


def skill_folders(given: Sequence[str]) -> list[str]:
    """``--skills`` folders made absolute: a resumed run finds them from anywhere."""
    return [str(Path(folder).expanduser().absolute()) for folder in given]


def config_json(text: str | None) -> dict[str, Any]:
    """``--config``: AimeConfig fields as a JSON object."""
    try:
        fields = json.loads(text) if text else {}
    except ValueError as exc:
        raise CliError(f"--config is not JSON: {exc}", EXIT_USAGE) from exc
    if not isinstance(fields, dict):
        raise CliError(
            f"--config must be a JSON object of AimeConfig fields; got {text}", EXIT_USAGE
        )
    return fields


def checked_config(fields: dict[str, Any]) -> AimeConfig:
    """AimeConfig from ``fields``, its workspace absolute and created."""
    from aimegraph.config import AimeConfig

    config = AimeConfig.model_validate(fields)
    workspace = config.workspace.expanduser().absolute()
    try:
        workspace.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(
            f"cannot create the workspace {workspace}: {exc.strerror}", EXIT_USAGE
        ) from exc
    return config.model_copy(update={"workspace": workspace})


def application_tools(specs: Sequence[str], flag: str = "--tools") -> list[ToolLike]:
    """The tools ``module:attr`` specs name, to add to the built-in bundles (a whole
    ToolRegistry, which would replace them, is refused)."""
    from aimegraph.tools.registry import ToolRegistry, import_tools

    tools: list[ToolLike] = []
    for spec in specs:
        found = import_tools(spec)
        if isinstance(found, ToolRegistry):
            raise CliError(
                f"{flag} {spec}: a ToolRegistry replaces the built-in tools; here tools are "
                "added to them: name a tool, a function or a list",
                EXIT_USAGE,
            )
        tools += found
    return tools


def run_prompts(args: argparse.Namespace, console: Console, *, online: bool = False) -> str | None:
    """``--prompts`` (a prompt-set file or a prompt store), else the default prompt
    store when it has an active version, or when the run's online prompt optimiser
    needs a store to write to; says which version the run starts with."""
    from aimegraph.graphs.sources import open_prompt_source
    from aimegraph.optimizer.store import default_prompt_store, starting_prompts

    path = args.prompts
    if path is None:
        path = starting_prompts(default_prompt_store(args.checkpoints), online=online)
        if path is None:
            return None
    elif not Path(path).is_file():  # an empty store is made by `prompts add`, not by a typo
        raise CliError(f"--prompts {path}: no such file", EXIT_USAGE)
    version = open_prompt_source(path).current()  # a bad file is a usage error (ValueError)
    if not args.json:
        console.print(f"prompts: version {version} from {path}", markup=False)
    return str(path)


def unfinished_run(thread_id: str, snapshot: StateSnapshot) -> str:
    """Why a new goal cannot start on ``thread_id``, whose run has not ended
    (``snapshot``), and what to do instead."""
    from aimegraph.checkpoints import run_state

    if snapshot.values.get("proposal") is not None:
        return (
            f"thread {thread_id!r} waits for the approval of its plan, so it takes no new "
            f"goal: answer it with: aimegraph resume {thread_id} --approve (or --plan-file "
            f"PLAN.json to edit it, --reject REASON to drop it), or end it with: "
            f"aimegraph cancel {thread_id}"
        )
    return (
        f"thread {thread_id!r} has a run that has not ended ({run_state(snapshot)}): "
        f"carry it on with: aimegraph resume {thread_id}, or end it with: "
        f"aimegraph cancel {thread_id}"
    )
