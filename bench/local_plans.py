"""Plan drafts from the bundled Gemma 3 270M under grammar-constrained decoding.

The planner's real prompt goes to the in-process local model (``resolve_model("local")``,
structured output through a forced function call, i.e. JSON constrained by a grammar built
from the schema). Each goal is drafted twice, once with today's bounded ``PlanUpdate``
schema (every string and list has a maximum) and once with the unbounded schema the engine
used before (the baseline, kept here only): a draft counts when it parses, validates and
applies to an empty progress list.

The second table serves the same GGUF over HTTP (``python -m aimegraph.models.local_server``,
and the stock ``python -m llama_cpp.server`` with the chat format it picks itself) and
drafts the first three goals in JSON mode, as an ``openai:<model>`` run does
(``ChatOpenAI``, temperature 0.1 as in process): with the schema asked of the server
(``server_schema="auto"``), and with the schema in the prompt only (``"off"``, the
engine before). The in-process row drafts the same goals with the same schema, the one
the planner gives a first plan (``plan_update_schema(..., first=True)``).

Needs the ``[local]`` extra: the full bench runs it; ``python -m bench --only local_plans``.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from aimegraph.models.calls import Mode, invoke_structured
from aimegraph.models.resolve import resolve_model
from aimegraph.models.server_schema import ServerSchema, accepted_form
from aimegraph.prompts import planner as prompts
from aimegraph.state import PlanError, PlanUpdate, apply_plan, plan_update_schema
from aimegraph.tools import default_registry
from bench.common import Headline, SectionResult, Table, fmt_s, skipped, workspace

GOALS = (
    "What is 17 times 23? Reply with the number.",
    "Read notes.txt and list the three most frequent words.",
    "Write a haiku about autumn into poem.txt.",
    "Compute the mean of the numbers in data.csv and save it to mean.txt.",
)
MAX_TASKS = 3
HTTP_GOALS = GOALS[:3]
SERVER_START_TIMEOUT_S = 180


class UnboundedTaskSpec(BaseModel):
    """The baseline: ``TaskSpec`` as it was before the bounds (no maxima, all optional
    fields still optional)."""

    id: str
    title: str
    description: str = ""
    dependencies: list[str] = Field(default_factory=list)
    completion_criteria: str = ""
    tool_bundles: list[str] = Field(default_factory=list)
    persona: str = ""
    parent_id: str | None = None


class UnboundedPlanUpdate(BaseModel):
    """The baseline ``PlanUpdate``: rationale required, lists and strings unbounded."""

    rationale: str
    tasks: list[UnboundedTaskSpec] = Field(default_factory=list)
    drop: list[str] = Field(default_factory=list)


def _draft(
    model: object,
    schema: type[BaseModel],
    goal: str,
    bundles: str,
    *,
    mode: Mode = "native",
    server_schema: ServerSchema = "off",
) -> tuple[bool, str]:
    messages = [
        SystemMessage(prompts.SYSTEM.format(max_tasks=MAX_TASKS, bundles=bundles)),
        HumanMessage(
            prompts.CONTEXT.format(
                goal=goal,
                conversation="",
                replans=0,
                max_replans=1,
                checklist="(no tasks yet)",
                sections="",
            )
        ),
    ]
    reply = invoke_structured(
        model,  # type: ignore[arg-type]
        schema,
        messages,
        role="planner",
        mode=mode,
        retries=0,
        server_schema=server_schema,
    )
    if reply.value is None:
        return False, reply.error or "no value"
    try:
        plan = PlanUpdate.model_validate(reply.value.model_dump())
        apply_plan({}, plan, max_tasks=MAX_TASKS)
    except (PlanError, ValueError) as exc:
        return False, f"invalid plan: {exc}"
    if not plan.tasks:
        return False, "an empty plan"
    return True, "ok"


def run(quick: bool) -> SectionResult:
    if importlib.util.find_spec("llama_cpp") is None:
        return skipped("local_plans", "llama-cpp-python is missing: pip install 'aimegraph[local]'")
    goals = GOALS[:1] if quick else GOALS
    model = resolve_model("local")
    with workspace() as ws:
        bundles = default_registry(ws).describe()
        in_process, metrics = _in_process_table(model, goals, bundles)
        tables = [in_process]
        headlines = [_in_process_headline(metrics, len(goals))]
        if importlib.util.find_spec("uvicorn") is not None:
            over_http, http_metrics = _http_table(
                model, HTTP_GOALS[:1] if quick else HTTP_GOALS, bundles
            )
            tables.append(over_http)
            metrics |= http_metrics
            headlines.append(_http_headline(metrics))
    return SectionResult("local_plans", tables, metrics, headlines=headlines)


def _in_process_table(
    model: object, goals: tuple[str, ...], bundles: str
) -> tuple[Table, dict[str, float]]:
    table = Table(
        "Plan drafts from the bundled Gemma 3 270M (grammar-constrained structured output)",
        ["schema", "drafts", "parse and validate", "median s per draft", "failures seen"],
    )
    metrics: dict[str, float] = {}
    for name, schema in (
        ("bounded (today)", plan_update_schema(MAX_TASKS)),
        ("unbounded (before)", UnboundedPlanUpdate),
    ):
        good, median, problems = _drafts(
            goals, lambda goal, schema=schema: _draft(model, schema, goal, bundles)
        )
        key = name.split()[0]
        metrics[f"{key}_drafts"] = float(len(goals))
        metrics[f"{key}_seconds_per_draft"] = median
        metrics[f"{key}_valid"] = good
        table.add(name, len(goals), f"{good} of {len(goals)}", fmt_s(median), problems)
    return table, metrics


def _in_process_headline(metrics: dict[str, float], goals: int) -> Headline:
    return Headline(
        f"plan drafts from the bundled Gemma 3 270M, grammar-constrained ({goals} goals)",
        "the same prompts with the unbounded schema used before",
        f"{metrics['bounded_valid']:.0f} of {goals} drafts parse and validate (before: "
        f"{metrics['unbounded_valid']:.0f} of {goals}); "
        f"{fmt_s(metrics['bounded_seconds_per_draft'])} s per draft against "
        f"{fmt_s(metrics['unbounded_seconds_per_draft'])} s",
    )


def _http_table(
    local: object, goals: tuple[str, ...], bundles: str
) -> tuple[Table, dict[str, float]]:
    """The first plan of each goal, in process and over HTTP with and without the schema
    asked of the server (see the module docstring)."""
    table = Table(
        "First plans from the bundled Gemma 3 270M: in process and served over HTTP (JSON mode)",
        ["how", "drafts", "valid plans", "median s per draft", "schema form taken", "failures"],
    )
    schema = plan_update_schema(MAX_TASKS, first=True)
    metrics: dict[str, float] = {"http_drafts": float(len(goals))}

    def row(key: str, how: str, model: Any, mode: Mode, setting: ServerSchema) -> None:
        good, median, problems = _drafts(
            goals,
            lambda goal: _draft(model, schema, goal, bundles, mode=mode, server_schema=setting),
        )
        metrics[f"{key}_valid"] = good
        metrics[f"{key}_seconds_per_draft"] = median
        form = accepted_form(model, schema.model_json_schema()) if setting != "off" else None
        taken = "grammar" if mode == "native" else form or "-"
        table.add(how, len(goals), f"{good} of {len(goals)}", fmt_s(median), taken, problems)

    row(
        "in_process_first",
        "in process (forced function, llama.cpp grammar)",
        local,
        "native",
        "off",
    )
    with _served(_local_server_command) as base_url:
        client = _client(base_url)
        server = "HTTP, aimegraph.models.local_server"
        row("http_schema", f"{server}, schema asked ('auto')", client, "json", "auto")
        row("http_prompt", f"{server}, prompt only ('off')", client, "json", "off")
    with _served(_stock_server_command) as base_url:
        client = _client(base_url)
        row(
            "stock_http_schema",
            "HTTP, stock llama_cpp.server, schema asked ('auto')",
            client,
            "json",
            "auto",
        )
    table.notes.append(
        "stock llama_cpp.server answers OpenAI's response_format json_schema with HTTP 500 "
        "(its own dialect is json_object with a schema): 'auto' falls back to that form; "
        "without a chat template in the GGUF it formats the prompt as Llama 2's [INST]"
    )
    return table, metrics


def _http_headline(metrics: dict[str, float]) -> Headline:
    goals = int(metrics["http_drafts"])
    return Headline(
        f"first plans from the bundled Gemma 3 270M served over HTTP, JSON mode ({goals} goals)",
        "the schema described in the prompt only (server_schema='off'), and in process",
        f"{metrics['http_schema_valid']:.0f} of {goals} valid with the schema asked of the "
        f"server (prompt only: {metrics['http_prompt_valid']:.0f} of {goals}; in process: "
        f"{metrics['in_process_first_valid']:.0f} of {goals}); "
        f"{fmt_s(metrics['http_schema_seconds_per_draft'])} s per draft",
    )


def _drafts(goals: tuple[str, ...], draft: Any) -> tuple[int, float, str]:
    """Drafts one plan per goal: (valid ones, median seconds, the failures seen)."""
    good, times, problems = 0, [], []
    for goal in goals:
        started = time.perf_counter()
        ok, why = draft(goal)
        times.append(time.perf_counter() - started)
        good += ok
        if not ok:
            problems.append(why.replace("UnboundedPlanUpdate", "PlanUpdate")[:90])
    times.sort()
    return good, times[len(times) // 2], "; ".join(sorted(set(problems))) or "-"


def _client(base_url: str) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model="gemma-3-270m",
        base_url=base_url,
        api_key="not-needed",  # type: ignore[arg-type]
        temperature=0.1,
        max_tokens=512,  # type: ignore[call-arg]
        timeout=300,
        max_retries=1,
    )


def _local_server_command(port: int) -> list[str]:
    return [sys.executable, "-m", "aimegraph.models.local_server", "--port", str(port)]


def _stock_server_command(port: int) -> list[str]:
    from aimegraph.models.local import DEFAULT_LOCAL_SETTINGS, local_model_path

    return [
        sys.executable,
        *("-m", "llama_cpp.server", "--model", str(local_model_path())),
        *("--host", "127.0.0.1", "--port", str(port)),
        *("--n_ctx", str(DEFAULT_LOCAL_SETTINGS["n_ctx"]), "--seed", "7"),
    ]


@contextmanager
def _served(command: Any) -> Iterator[str]:
    """The server ``command(port)`` starts on a free loopback port: its base URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    url = f"http://127.0.0.1:{port}/v1"
    # llama_cpp.server's settings read API_KEY, MODEL... from the environment.
    env = {k: v for k, v in os.environ.items() if k not in ("API_KEY", "MODEL", "N_CTX")}
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_SRC), env.get("PYTHONPATH")]))
    process = subprocess.Popen(
        command(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not _ready(url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{' '.join(command(port)[1:3])} did not start")
            time.sleep(0.25)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


_SRC = Path(__file__).resolve().parent.parent / "src"


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False
