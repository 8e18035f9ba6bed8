"""Prompt tokens per solved task: aimegraph against a plain ReAct loop on the bundled suite.

``aimegraph eval bundled --model oracle`` on aimegraph (default configuration) and
on LangChain's ``create_agent``: both play each task's scripted oracle, so they make
the same tool calls with the same tools; the oracle models count tokens the same
way for both (LangChain's ``count_tokens_approximately`` over the prompt, bound tool
schemas included, as providers bill them), and the eval reads them through one
``UsageMetadataCallbackHandler`` per rollout. The ReAct loop sends its whole
conversation with every call; aimegraph's actors each see their own task (the
oracle plans one task per stage of the work) plus the results of the tasks it
depends on, and the run adds a planner, a reporter and a verifier call.

Goals (issue 26): at most 1.5x the ReAct loop's prompt tokens per solved task on
one-step tasks, at most 0.7x on tasks of five or more steps (tool calls).

Where the tokens go is measured on two tasks by role: each model call's system
prompt, conversation and bound tool schemas, counted with the same function.

Needs the ``[eval]`` extra: ``python -m bench --only eval`` (results in ``bench/results/eval.md``).
"""

from __future__ import annotations

import re
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.eval import OracleModels, evaluate, load_suite
from aimegraph.eval.rollout import fresh_workspace
from aimegraph.eval.suite import Suite, Task
from bench.common import Headline, SectionResult, Table, fmt_x

GOALS = {"one step": 1.5, "5+ steps": 0.7}
QUICK_TASKS = ("sales-total-revenue", "discount-chain", "long-incident-report")
BREAKDOWN_TASKS = ("sales-total-revenue", "long-incident-report")
SYSTEMS = ("aimegraph", "create_agent")


def _steps(task: Task) -> int:
    assert task.oracle is not None
    return sum(turn.tool_calls for turn in task.oracle.turns)


def _group(steps: int) -> str:
    return "one step" if steps == 1 else "5+ steps" if steps >= 5 else "2-4 steps"


def _input(records: Sequence[dict[str, Any]]) -> int:
    return sum(int(r["usage"]["input_tokens"]) for r in records)


def _comparison(suite: Suite, records: list[dict[str, Any]], metrics: dict[str, float]) -> Table:
    table = Table(
        "Prompt (input) tokens per solved task, bundled suite, oracle replies",
        [
            "tasks",
            "solved: aimegraph / create_agent",
            "aimegraph",
            "create_agent",
            "aimegraph / create_agent",
            "goal",
        ],
    )
    by_task: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for record in records:
        by_task[record["task"]][record["system"]] = record
    both = {t for t, rs in by_task.items() if all(rs.get(s, {}).get("passed") for s in SYSTEMS)}
    groups = ("one step", "2-4 steps", "5+ steps", "all")
    for group in groups:
        tasks = [t.id for t in suite.tasks if group == "all" or _group(_steps(t)) == group]
        solved = [t for t in tasks if t in both]
        if not solved:
            continue
        per = {s: _input([by_task[t][s] for t in solved]) / len(solved) for s in SYSTEMS}
        ratio = per["aimegraph"] / per["create_agent"]
        passes = "/".join(
            str(sum(bool(by_task[t].get(s, {}).get("passed")) for t in tasks)) for s in SYSTEMS
        )
        goal = GOALS.get(group)
        verdict = "–" if goal is None else f"<= {goal}x: {'met' if ratio <= goal else 'missed'}"
        table.add(
            f"{group}: {len(solved)}",
            passes,
            f"{per['aimegraph']:,.0f}",
            f"{per['create_agent']:,.0f}",
            fmt_x(ratio),
            verdict,
        )
        key = group.replace(" ", "_").replace("+", "plus").replace("-", "_")
        metrics[f"eval.{key}.ratio"] = ratio
        metrics[f"eval.{key}.aimegraph_tokens"] = per["aimegraph"]
        metrics[f"eval.{key}.react_tokens"] = per["create_agent"]
    failed = sorted(
        f"{r['system']} {r['task']}: {r['failure']}" for r in records if not r["passed"]
    )
    table.notes.append(
        "Per group, over the tasks both systems solved (the same work, side by side); "
        "'solved' counts every task of the group."
    )
    table.notes += [f"not solved: {line[:200]}" for line in failed]
    return table


def _per_task(suite: Suite, records: list[dict[str, Any]]) -> Table:
    table = Table(
        "Tasks of five or more steps",
        [
            "task",
            "tool calls",
            "LLM calls: aimegraph / create_agent",
            "aimegraph",
            "create_agent",
            "ratio",
        ],
    )
    by_key = {(r["system"], r["task"]): r for r in records}
    for task in suite.tasks:
        if _steps(task) < 5:
            continue
        aime, react = by_key[("aimegraph", task.id)], by_key[("create_agent", task.id)]
        table.add(
            task.id,
            str(_steps(task)),
            f"{aime['usage']['llm_calls']} / {react['usage']['llm_calls']}",
            f"{aime['usage']['input_tokens']:,}",
            f"{react['usage']['input_tokens']:,}",
            fmt_x(aime["usage"]["input_tokens"] / react["usage"]["input_tokens"]),
        )
    return table


class PromptParts(BaseCallbackHandler):
    """Each model call's prompt split into system prompt, conversation and bound tool
    schemas (``count_tokens_approximately`` on each part), by role."""

    def __init__(self) -> None:
        self.by_role: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        prompt = messages[0]
        tools = (kwargs.get("invocation_params") or {}).get("tools") or []
        system = [m for m in prompt if m.type == "system"]
        found = re.search(r"# Role: (\w+)", "\n".join(m.text for m in system))
        parts = self.by_role[found.group(1) if found else "ReAct loop"]
        parts[0] += 1
        parts[1] += count_tokens_approximately(system)
        parts[2] += count_tokens_approximately([m for m in prompt if m.type != "system"])
        parts[3] += count_tokens_approximately([], tools=tools) if tools else 0


def _breakdown(suite: Suite, root: Path, metrics: dict[str, float]) -> Table:
    from langchain.agents import create_agent

    from aimegraph.eval.baselines import baseline_tools
    from aimegraph.prompts import baseline
    from aimegraph.tools.registry import default_registry

    table = Table(
        "Where the prompt tokens go (one rollout each; approximate split)",
        ["task", "role", "calls", "system prompt", "conversation", "tool schemas", "total"],
    )
    for task_id in BREAKDOWN_TASKS:
        task = suite.task(task_id)
        for kind in SYSTEMS:
            workspace = root / "breakdown" / kind / task_id
            fresh_workspace(workspace, task, suite)
            model = OracleModels()(task, kind, 0)
            parts = PromptParts()
            if kind == "aimegraph":
                graph: Any = build_aime_graph(model, config=AimeConfig(workspace=workspace))
                graph.invoke({"goal": task.goals[0]}, {"callbacks": [parts]})
            else:
                tools = baseline_tools(default_registry(workspace))
                graph = create_agent(model, tools, system_prompt=baseline.SYSTEM)
                graph.invoke({"messages": [HumanMessage(task.goals[0])]}, {"callbacks": [parts]})
            for role, (calls, system, conversation, schemas) in parts.by_role.items():
                total = system + conversation + schemas
                table.add(
                    task_id,
                    role,
                    str(calls),
                    f"{system:,}",
                    f"{conversation:,}",
                    f"{schemas:,}",
                    f"{total:,}",
                )
                metrics[f"eval.parts.{task_id}.{role}"] = total
    table.notes.append(
        "An actor call carries the actor system prompt (AIME's five parts) and the schemas "
        "of its task's tools plus update_progress and submit_result; a task ends in the "
        "reply that makes its last call (submit_result beside it), or in a plain answer "
        "once the actor has seen an output it must summarise."
    )
    return table


def _fixed_parts(root: Path, metrics: dict[str, float]) -> Table:
    """The parts every call of a role carries whatever the goal, each counted alone."""
    from langchain_core.messages import SystemMessage
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from aimegraph.nodes.factory import DefaultActorFactory
    from aimegraph.prompts import planner, reporter, verifier
    from aimegraph.state import Task, Verdict
    from aimegraph.state.models import plan_update_schema
    from aimegraph.tools.progress import submit_result, update_progress
    from aimegraph.tools.registry import default_registry

    def text(prompt: str) -> int:
        return count_tokens_approximately([SystemMessage(prompt)])

    def schema(tool: Any) -> int:
        return count_tokens_approximately([], tools=[convert_to_openai_tool(tool)])

    config = AimeConfig(workspace=root / "parts")
    registry = default_registry(config.workspace)
    factory = DefaultActorFactory(registry, workspace=config.workspace)
    actor = factory.build(Task(id="t1", title="Sum", tool_bundles=("compute",)), "", {})
    parts = {
        "planner system prompt": text(
            planner.SYSTEM.format(max_tasks=config.max_tasks, bundles=registry.describe())
        ),
        "plan schema (first plan)": schema(plan_update_schema(config.max_tasks, first=True)),
        "actor system prompt (compute bundle)": text(actor.system_prompt()),
        "update_progress schema": schema(update_progress),
        "submit_result schema": schema(submit_result),
        "reporter system prompt": text(reporter.SYSTEM),
        "verifier system prompt": text(verifier.SYSTEM),
        "verdict schema": schema(Verdict),
    }
    table = Table("Fixed prompt parts (tokens each call carries)", ["part", "tokens"])
    for name, tokens in parts.items():
        table.add(name, f"{tokens:,}")
        metrics[f"eval.fixed.{name.split(' (')[0].replace(' ', '_')}"] = tokens
    table.notes.append(
        "count_tokens_approximately on each part alone (a tool schema as bound); the "
        "default configuration and tool registry."
    )
    return table


def _scaling(root: Path, quick: bool, metrics: dict[str, float]) -> Table:
    """long-incident-report with server.log shortened or repeated: where the ReAct
    loop's re-sent conversation overtakes aimegraph's fixed cost per actor call."""
    table = Table(
        "long-incident-report by the size of server.log (the file the first step reads)",
        ["server.log", "aimegraph", "create_agent", "aimegraph / create_agent"],
    )
    bundled = load_suite("bundled")
    task = bundled.task("long-incident-report")
    lines = bundled.file_path(task.files["server.log"]).read_text().splitlines()
    # Any answer counts: the figures change with the log; the tokens are measured.
    spec = task.model_dump(mode="json", by_alias=True, exclude_none=True)
    spec["check"] = [{"regex": "."}]
    for factor in (0.25, 1.0) if quick else (0.25, 0.5, 1.0, 2.0, 4.0):
        folder = root / f"scaling-{factor}"
        folder.mkdir(parents=True)
        count = int(len(lines) * factor)
        body = "\n".join((lines * 4)[:count]) + "\n"
        (folder / "server.log").write_text(body)
        (folder / "suite.yaml").write_text(
            yaml.safe_dump({"name": "scaling", "tasks": [{**spec, "files": ["server.log"]}]})
        )
        result = evaluate(
            folder / "suite.yaml", model="oracle", systems=list(SYSTEMS), out=folder / "eval"
        )
        tokens = {r["system"]: r["usage"]["input_tokens"] for r in result.records}
        ratio = tokens["aimegraph"] / tokens["create_agent"]
        table.add(
            f"{count} lines, {len(body) / 1000:.1f} KB",
            f"{tokens['aimegraph']:,}",
            f"{tokens['create_agent']:,}",
            fmt_x(ratio),
        )
        metrics[f"eval.scaling.{factor}.ratio"] = ratio
    table.notes.append(
        "aimegraph's actors see at most max_observation_chars (8,000) characters of a tool's "
        "output (the rest is cut, with a note saying so); create_agent's loop sees all of it, "
        "in every later call. Both effects are in these figures."
    )
    return table


def run(quick: bool) -> SectionResult:
    suite = load_suite("bundled")
    if quick:
        suite = suite.select(ids=list(QUICK_TASKS))
    metrics: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="aimegraph-bench-eval-") as folder:
        root = Path(folder)
        result = evaluate(
            suite, model="oracle", systems=list(SYSTEMS), out=root / "eval", concurrency=2
        )
        tables = [_comparison(suite, result.records, metrics), _per_task(suite, result.records)]
        tables.append(_breakdown(suite, root, metrics))
        tables.append(_fixed_parts(root, metrics))
        tables.append(_scaling(root, quick, metrics))
    metrics["eval.rollouts"] = len(result.records)
    return SectionResult("eval", tables, metrics, [_headline(metrics)])


def _headline(metrics: dict[str, float]) -> Headline:
    def group(key: str, label: str) -> str:
        if f"eval.{key}.ratio" not in metrics:
            return f"{label}: none solved by both"
        goal = GOALS.get(label)
        ratio = metrics[f"eval.{key}.ratio"]
        met = "" if goal is None else f" (goal <= {goal}x: {'met' if ratio <= goal else 'missed'})"
        return (
            f"{label} {metrics[f'eval.{key}.aimegraph_tokens']:,.0f} against "
            f"{metrics[f'eval.{key}.react_tokens']:,.0f}, {fmt_x(ratio)}{met}"
        )

    return Headline(
        "prompt tokens per solved task: the bundled eval suite, scripted oracle replies on "
        "both systems (the same tool calls, one token counter)",
        "LangChain's create_agent ReAct loop with the same model and tools",
        "; ".join(
            group(key, label)
            for key, label in (
                ("one_step", "one step"),
                ("5plus_steps", "5+ steps"),
                ("all", "all"),
            )
        ),
    )
