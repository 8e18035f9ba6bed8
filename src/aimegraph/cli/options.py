"""Flags that several commands share: the checkpoint store, durability, the
application's tools, a new run's goal and config, the settings to carry a thread on
with, and the distributed queue."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aimegraph.checkpoints import DEFAULT_CHECKPOINT_URL, redact_url

if TYPE_CHECKING:
    from aimegraph.alerts import AlertSettings

__all__ = [
    "DEFAULT_MODEL",
    "alerts_option",
    "broker_options",
    "checkpoints_option",
    "durability_option",
    "load_alert_rules",
    "mcp_option",
    "plan_option",
    "rebuild_options",
    "run_options",
    "skills_option",
    "stream_option",
    "tools_option",
    "wait_option",
]

DEFAULT_MODEL = "openai:gpt-4o-mini"
"""The model of a new run given no ``--model`` (``run`` on a thread that stores its
settings keeps that thread's model)."""

DURABILITY_HELP = (
    "when checkpoints are written. sync: each step's checkpoint is saved before the next "
    "step starts, so a crash or kill loses at most the steps in flight (a little slower: "
    "one database write per step). async (default): saved in the background while the "
    "next step runs; faster, but a crash can also lose the last finished step, whose "
    "tasks then run again. exit: saved only when the run ends or pauses; fastest, no "
    "crash recovery and no step history. Use sync when tools have side effects that "
    "must not repeat."
)


def stream_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stream",
        action="store_true",
        help="print the answer as the model writes it (token by token with a streaming "
        "model); not with --json",
    )


def plan_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plan",
        metavar="FILE",
        type=Path,
        help="start from this plan (YAML or JSON: tasks, which may be tool steps with "
        "'call') instead of asking the planner; checked first (a bad plan: exit 2)",
    )


def durability_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--durability", choices=["sync", "async", "exit"], default="async", help=DURABILITY_HELP
    )


def checkpoints_option(parser: argparse.ArgumentParser, default: Any = argparse.SUPPRESS) -> None:
    """``--checkpoints`` before or after the subcommand: a subcommand's copy keeps the
    value given before it unless given again (SUPPRESS sets nothing when absent)."""
    parser.add_argument(
        "--checkpoints",
        default=default,
        help=f"checkpoint store URL: memory, sqlite:///PATH, postgresql://... "
        f"(default {redact_url(DEFAULT_CHECKPOINT_URL)})",
    )


def tools_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tools",
        metavar="MODULE:ATTR",
        action="append",
        default=[],
        help="the application's tools (a tool, a function, a list of them or a "
        "ToolRegistry), importable as MODULE:ATTR; repeatable. Stored with the run, "
        "so resume finds them again",
    )


def mcp_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mcp",
        metavar="FILE",
        help='MCP servers whose tools actors may use: a JSON file in the common {"mcpServers": '
        "{name: {command, args, env} or {url, headers}}} shape (stdio or streamable HTTP; "
        "${VAR} is read from the environment); each server is a tool bundle named after it "
        "(needs the [mcp] extra). Stored with the run as the file's path, which resume reads "
        "again",
    )


def skills_option(parser: argparse.ArgumentParser, scope: str) -> None:
    """``--skills DIR`` (repeatable); ``scope`` ends its help: where the folders apply."""
    parser.add_argument(
        "--skills",
        metavar="DIR",
        action="append",
        help="an Agent Skills folder (a SKILL.md with name and description front matter, "
        "or a folder of such folders); repeatable. Actors see each skill's name and "
        f"description and load the rest on demand. {scope}",
    )


def rebuild_options(parser: argparse.ArgumentParser) -> None:
    """Settings for carrying on a thread. Every thread stores its own (whichever
    entry point started it); these flags override them, explicitly: the changes are
    printed. ``--model`` is needed only where none was stored (a run started from
    Python with a chat model object)."""
    parser.add_argument(
        "--model", help="model spec (default: the one the run started with, when stored)"
    )
    parser.add_argument("--workspace", help="workspace directory (default: the run's)")
    parser.add_argument(
        "--config", help="AimeConfig fields as a JSON object, over the run's stored ones"
    )
    tools_option(parser)
    mcp_option(parser)
    skills_option(parser, "Replaces the run's stored skills folders")
    # What a thread started from Python was given as objects (its settings name them).
    parser.add_argument(
        "--agents", metavar="FILE_OR_MODULE:ATTR", help="agent units (as `run --agents`)"
    )
    parser.add_argument(
        "--knowledge", metavar="DIR", help="a knowledge base directory (as `run --knowledge`)"
    )
    parser.add_argument(
        "--response-format",
        metavar="SCHEMA_JSON_OR_MODULE:ATTR",
        help="the typed final answer's format (as `run --response-format`)",
    )
    parser.add_argument(
        "--prompts", metavar="FILE_OR_STORE", help="role prompts (as `run --prompts`)"
    )


def wait_option(parser: argparse.ArgumentParser) -> None:
    """``--wait``: queue behind a live runner of the thread instead of exit 9."""
    parser.add_argument(
        "--wait",
        action="store_true",
        help="when another process runs the thread, wait for it to stop instead of "
        "refusing (exit 9)",
    )


def run_options(parser: argparse.ArgumentParser) -> None:
    """The goal, model and config flags of a new run (``run`` and ``submit``)."""
    parser.add_argument("goal", help="what the agents should achieve")
    parser.add_argument(
        "--model",
        help="openai:<model>, <provider>:<model> (anthropic:, ollama:, google_genai:, ... any "
        "provider LangChain's init_chat_model knows), local, scripted:<scenario>; several "
        "joined by commas are a fallback chain (the next answers when one is rate-limited "
        f"or failing). Default {DEFAULT_MODEL}; `run` on a thread that stores its settings "
        "keeps them all, the model among them, unless flags override them",
    )
    parser.add_argument("--thread", help="thread id (default: a new one)")
    parser.add_argument(
        "--rate-limit",
        metavar="RATE",
        help="client-side rate limit per model provider, e.g. 2/s, 30/min",
    )
    parser.add_argument(
        "--model-cache",
        metavar="SQLITE_FILE",
        help="cache model replies in this file and replay them for identical requests "
        "(for development and evals, not production)",
    )
    parser.add_argument(
        "--workspace", help="directory for file and python tools (default: per thread)"
    )
    parser.add_argument("--max-parallel", type=int)
    parser.add_argument("--max-replans", type=int)
    parser.add_argument("--max-llm-calls", type=int)
    parser.add_argument("--max-tokens", type=int)
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--max-actor-steps", type=int)
    parser.add_argument("--replan", choices=["on_failure", "every_step"])
    parser.add_argument("--verify", choices=["auto", "final", "tasks", "both", "off"])
    parser.add_argument("--tool-calling", choices=["auto", "native", "json"])
    parser.add_argument(
        "--server-schema",
        # AimeConfig.server_schema's values, spelt out: the parser loads no engine code.
        choices=["auto", "json_schema", "json_object", "guided_json", "off"],
        help="in JSON mode, how an OpenAI-compatible server is asked for each reply's schema",
    )
    parser.add_argument("--approve-plan", action="store_true", help="pause for plan approval")
    parser.add_argument("--approve-tools", help="comma-separated tools that need approval")
    parser.add_argument("--config", help="AimeConfig fields as a JSON object")
    tools_option(parser)
    mcp_option(parser)
    skills_option(parser, "Stored with the run")
    parser.add_argument(
        "--prompts",
        metavar="FILE_OR_STORE",
        help="role prompts: a JSON / YAML prompt set, or a prompt store (.jsonl) whose "
        "active version the run uses (default: the prompt store beside the checkpoints, "
        "when it has an active version; else the built-in prompts). A submitted run's "
        "workers read the same path",
    )
    parser.add_argument(
        "--response-format",
        metavar="SCHEMA_JSON_OR_MODULE:ATTR",
        help="a typed final answer: a JSON schema file (.json) of an object, or MODULE:ATTR "
        "naming a pydantic model or a JSON schema; the answer is then filled in as that "
        "object (structured_response; printed by show). Stored with the run",
    )
    parser.add_argument(
        "--agents",
        metavar="FILE_OR_MODULE:ATTR",
        help="agent units the planner may assign to tasks, alone or as teams: a YAML / JSON "
        "list of {name, description, persona, tool_bundles, model}, or MODULE:ATTR naming "
        "AgentUnits. Stored with the run, so resume (and a submitted run's workers) find "
        "them again",
    )


def broker_options(parser: argparse.ArgumentParser, purpose: str) -> None:
    parser.add_argument(
        "--broker",
        default=os.environ.get("AIMEGRAPH_BROKER_URL", "redis://127.0.0.1:6379/0"),
        help=f"Redis URL of the queue {purpose} (default: $AIMEGRAPH_BROKER_URL or "
        "redis://127.0.0.1:6379/0)",
    )
    parser.add_argument("--queue", default="aimegraph", help="queue name (aimegraph)")


def alerts_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--alerts",
        metavar="FILE",
        help="alert rules (YAML: rules, webhook; see the README's Metrics and alerts) "
        "checked in the background, fired alerts POSTed to the webhook",
    )


def load_alert_rules(path: str | None) -> AlertSettings | None:
    """The ``--alerts`` file's rules (None without one); CliError on a bad file."""
    if path is None:
        return None
    from aimegraph.alerts import load_alerts
    from aimegraph.cli.support import EXIT_USAGE, CliError

    try:
        return load_alerts(path)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
