"""What the code tools (``python``, ``shell``) share: a job in the sandbox, its outcome
turned into an observation the model can act on."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel

from aimegraph.sandbox import (
    Job,
    Language,
    Limits,
    Outcome,
    Sandbox,
    SandboxUnavailable,
    Workspace,
    open_sandbox,
)
from aimegraph.tools.outputs import CUT_AT

__all__ = ["make_code_tool"]

# A run that wrote many files and printed nothing names the first few.
_MAX_NAMED_FILES = 20

# How failed connections and name lookups read in stderr: the C library's messages (in
# Python's tracebacks too), curl's and git's, wget's. Not stdout: code that prints a
# log file full of them did not try the network itself.
_NETWORK_ERRORS = re.compile(
    r"Temporary failure in name resolution|Name or service not known"
    r"|No address associated with hostname|Network is unreachable|No route to host"
    r"|Connection refused|Could not resolve host|unable to resolve host address",
    re.IGNORECASE,
)


def make_code_tool(
    *,
    name: str,
    language: Language,
    description: str,
    args_schema: type[BaseModel],
    workspace: Workspace | str | Path,
    sandbox: Sandbox | None,
    limits: Limits,
) -> BaseTool:
    """A tool that runs its one argument (the source) as a ``language`` job.

    Clean success returns just what the job printed (ready to be quoted or computed
    with); anything else returns the exit code, stdout, stderr and a note on the limit
    that was hit. A timeout, a sandbox that cannot run here or a process that cannot
    start raise ``ToolException``: the model sees the reason as an error observation.
    """
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    box = sandbox if sandbox is not None else open_sandbox()
    # A sandbox says it has no network with ``network = False`` (see ``Sandbox``).
    offline = getattr(box, "network", None) is False

    def run(**args: str) -> tuple[str, dict[str, int] | None]:
        (source,) = args.values()
        try:
            outcome = box.run(Job(language, source, ws, limits))
        except SandboxUnavailable as exc:
            raise ToolException(f"{name} cannot run: {exc}") from None
        except OSError as exc:
            raise ToolException(f"could not start {name}: {exc}") from exc
        # The artifact tells the observation's keeper (tools.outputs) that what it saves
        # is the cut output, not the whole: the model is not told it can read the rest.
        cut = {CUT_AT: limits.max_output_chars} if outcome.output_cut else None
        return _observation(outcome, limits, offline=offline), cut

    async def arun(**args: str) -> tuple[str, dict[str, int] | None]:
        return await asyncio.to_thread(run, **args)

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=name,
        description=description,
        args_schema=args_schema,
        response_format="content_and_artifact",
    )


def _observation(outcome: Outcome, limits: Limits, *, offline: bool) -> str:
    notes = _cut_note(outcome, limits) + _network_note(outcome, offline)
    if outcome.timed_out:
        partial = _format(outcome.stdout, outcome.stderr)
        raise ToolException(
            f"timed out after {limits.timeout_s:g} s and was killed; make it faster or split "
            f"the work into smaller steps. Output before the timeout:\n{partial}{notes}"
        )
    notes = _exit_note(outcome, limits) + notes
    if outcome.exit_code == 0 and not outcome.stderr.strip() and not notes:
        return outcome.stdout.rstrip() or _no_output(outcome.changed_files)
    return f"exit code: {outcome.exit_code}\n{_format(outcome.stdout, outcome.stderr)}{notes}"


def _cut_note(outcome: Outcome, limits: Limits) -> str:
    if not outcome.output_cut:
        return ""
    return (
        f"\nnote: the output passed the cap of {limits.max_output_chars:,} characters "
        "(stdout and stderr together) and was cut there: only its beginning and end are "
        "kept, around the '[... output cut here' line; write large results to a file "
        "instead of printing them"
    )


def _network_note(outcome: Outcome, offline: bool) -> str:
    if not offline or not _NETWORK_ERRORS.search(outcome.stderr):
        return ""
    return (
        "\nnote: the sandbox has no network, so connections and name lookups fail (its "
        "127.0.0.1 is its own: servers on the host are out of reach too); work with the "
        "workspace's files. Network access is allowed by whoever runs aimegraph: "
        "sandbox_network=True (AimeConfig, or --config '{\"sandbox_network\": true}'; "
        "a sandbox of your own has its own option)"
    )


def _no_output(changed_files: tuple[str, ...]) -> str:
    if not changed_files:
        return "(no output)"
    named = ", ".join(changed_files[:_MAX_NAMED_FILES])
    more = len(changed_files) - _MAX_NAMED_FILES
    return f"(no output; files written: {named}{f' and {more} more' if more > 0 else ''})"


def _format(stdout: str, stderr: str) -> str:
    parts = []
    if stdout:
        parts.append(f"--- stdout ---\n{stdout.rstrip()}")
    if stderr:
        parts.append(f"--- stderr ---\n{stderr.rstrip()}")
    return "\n".join(parts) if parts else "(no output)"


def _exit_note(outcome: Outcome, limits: Limits) -> str:
    stderr, returncode = outcome.stderr, outcome.exit_code
    if "MemoryError" in stderr or "Cannot allocate memory" in stderr:
        return (
            f"\nnote: the code ran out of memory (limit {limits.memory_mb} MB); "
            "use less memory, e.g. process the data in chunks"
        )
    if "File too large" in stderr:
        return f"\nnote: a file or the output exceeded the {limits.max_file_mb} MB size limit"
    if "Resource temporarily unavailable" in stderr:
        return (
            f"\nnote: the process limit ({limits.max_processes} processes and threads) was reached"
        )
    if returncode < 0:
        try:
            signal_name = signal.Signals(-returncode).name
        except ValueError:  # real-time signals have no name
            signal_name = f"signal {-returncode}"
        if -returncode in (signal.SIGKILL, signal.SIGXCPU):
            return (
                f"\nnote: the process was killed by {signal_name}; it probably exceeded the "
                f"CPU time or memory ({limits.memory_mb} MB) limit"
            )
        return f"\nnote: the process was killed by {signal_name}"
    return ""
