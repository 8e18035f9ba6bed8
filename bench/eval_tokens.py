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

A fair comparison (issue 34 point 7): both systems are offered the same work tools
(the loop is bound them; aimegraph's planner sees each tool's name and description in
its bundle list and writes tool steps as ``call``). The oracle's planner names each actor
task's bundles from the task, not from the calls the actor will make: every actor
of a suite task gets the bundles the whole task needs (``planned_bundles``); a stage
is a tool step only where its arguments are known before any output is read. The
variants table repeats the run with the verifier on every run, tool steps off, the
planner bound the work tools' schemas (``planner_tools=True``), and every bundle
bound to every actor. Long tool outputs differ: aimegraph shows an actor at most
``max_observation_chars`` (8,000) characters of one (the whole kept in the
workspace), the loop sees all of it.

Goals (issue 34): at most 1.0x the ReAct loop's prompt tokens per solved task on
one-step tasks, 0.8x on 2-4 steps, 0.5x on five or more steps (tool calls), 0.75x
over all tasks.

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
from aimegraph.eval.systems import SystemSpec
from bench.common import Headline, SectionResult, Table, fmt_x

GOALS = {"one step": 1.0, "2-4 steps": 0.8, "5+ steps": 0.5, "all": 0.75}
GROUPS = ("one step", "2-4 steps", "5+ steps", "all")
VARIANTS: dict[str, tuple[dict[str, Any], OracleModels]] = {
    "verify on every run (verify='final')": ({"verify": "final"}, OracleModels()),
    "tool steps off (every stage an actor)": ({}, OracleModels(actors_only=True)),
    "planner bound the work tools (planner_tools=True)": (
        {"planner_tools": True},
        OracleModels(),
    ),
    "twin: every bundle bound to every actor": ({}, OracleModels(every_bundle=True)),
}
QUICK_TASKS = ("sales-total-revenue", "discount-chain", "long-incident-report")
BREAKDOWN_TASKS = ("sales-total-revenue", "long-incident-report")
SYSTEMS = ("aimegraph", "create_agent")


def _steps(task: Task) -> int:
    """The oracle's tool calls (its first looks at files included)."""
    assert task.oracle is not None
    return sum(turn.tool_calls for turn in task.oracle.turns)


def _group(task: Task) -> str:
    """The task's group by the suite's own tags (``one-step``: one tool call solves it;
    ``long``: five or more), so a look the knowledge rule adds to its oracle does not
    move it."""
    return (
        "one step"
        if "one-step" in task.tags
        else "5+ steps"
        if "long" in task.tags
        else "2-4 steps"
    )


def _input(records: Sequence[dict[str, Any]]) -> int:
    return sum(int(r["usage"]["input_tokens"]) for r in records)


def _calls(records: Sequence[dict[str, Any]]) -> int:
    return sum(int(r["usage"]["llm_calls"]) for r in records)


def _by_task(records: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    by_task: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for record in records:
        by_task[record["task"]][record["system"]] = record
    return by_task


def _group_tasks(suite: Suite, group: str) -> list[str]:
    return [t.id for t in suite.tasks if group == "all" or _group(t) == group]


def _verdict(group: str, ratio: float) -> str:
    goal = GOALS.get(group)
    return "–" if goal is None else f"<= {goal}x: {'met' if ratio <= goal else 'missed'}"


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
            "LLM calls per solved task: aimegraph / create_agent",
        ],
    )
    by_task = _by_task(records)
    both = {t for t, rs in by_task.items() if all(rs.get(s, {}).get("passed") for s in SYSTEMS)}
    for group in GROUPS:
        tasks = _group_tasks(suite, group)
        solved = [t for t in tasks if t in both]
        if not solved:
            continue
        per = {s: _input([by_task[t][s] for t in solved]) / len(solved) for s in SYSTEMS}
        calls = {s: _calls([by_task[t][s] for t in solved]) / len(solved) for s in SYSTEMS}
        ratio = per["aimegraph"] / per["create_agent"]
        passes = "/".join(
            str(sum(bool(by_task[t].get(s, {}).get("passed")) for t in tasks)) for s in SYSTEMS
        )
        table.add(
            f"{group}: {len(solved)}",
            passes,
            f"{per['aimegraph']:,.0f}",
            f"{per['create_agent']:,.0f}",
            fmt_x(ratio),
            _verdict(group, ratio),
            f"{calls['aimegraph']:.2f} / {calls['create_agent']:.2f}",
        )
        key = _key(group)
        metrics[f"eval.{key}.ratio"] = ratio
        metrics[f"eval.{key}.aimegraph_tokens"] = per["aimegraph"]
        metrics[f"eval.{key}.react_tokens"] = per["create_agent"]
        metrics[f"eval.{key}.aimegraph_llm_calls"] = calls["aimegraph"]
        metrics[f"eval.{key}.react_llm_calls"] = calls["create_agent"]
    failed = sorted(
        f"{r['system']} {r['task']}: {r['failure']}" for r in records if not r["passed"]
    )
    table.notes += [
        "Per group, over the tasks both systems solved (the same work, side by side); "
        "'solved' counts every task of the group.",
        "Same tools on both sides: the loop is bound the work tools (files, compute); "
        "aimegraph's planner sees each by name and description in its bundle list (its "
        "schemas bound too in the planner_tools=True row), and each actor the bundles its "
        "suite task needs as a whole (named from the task, not from the actor's own calls).",
        "Long outputs differ: an aimegraph actor sees at most 8,000 characters of one tool "
        "output (max_observation_chars; the whole is kept in the workspace, head and tail "
        "shown), the loop sees every character in every later call. No bundled task has an "
        "output that long except long-incident-report's server.log (13.9 KB); the last "
        "table shows that task by log size.",
    ]
    table.notes += [f"not solved: {line[:200]}" for line in failed]
    return table


def _key(group: str) -> str:
    return group.replace(" ", "_").replace("+", "plus").replace("-", "_")


def _variants(
    suite: Suite, baseline: list[dict[str, Any]], root: Path, metrics: dict[str, float]
) -> Table:
    """aimegraph run again under each of :data:`VARIANTS`, against the same
    create_agent rollouts: prompt tokens per solved task as ratios to the loop's."""
    table = Table(
        "Variants: aimegraph / create_agent prompt tokens per solved task",
        ["aimegraph", "solved", *GROUPS, "LLM calls per solved one-step task"],
    )
    loop = {r["task"]: r for r in baseline if r["system"] == "create_agent"}
    for n, (label, (config, oracle)) in enumerate(VARIANTS.items()):
        spec = SystemSpec(name="aimegraph", config=config)
        result = evaluate(
            suite, model=oracle, systems=[spec], out=root / f"variant-{n}", concurrency=2
        )
        mine = {r["task"]: r for r in result.records}
        solved = {t for t, r in mine.items() if r["passed"] and loop[t]["passed"]}
        cells = []
        for group in GROUPS:
            tasks = [t for t in _group_tasks(suite, group) if t in solved]
            if not tasks:
                cells.append("–")
                continue
            ratio = _input([mine[t] for t in tasks]) / _input([loop[t] for t in tasks])
            cells.append(f"{fmt_x(ratio)} ({'met' if ratio <= GOALS[group] else 'missed'})")
            metrics[f"eval.variant{n}.{_key(group)}.ratio"] = ratio
        one = [t for t in _group_tasks(suite, "one step") if t in solved]
        calls = (
            f"{_calls([mine[t] for t in one]) / len(one):.2f} / "
            f"{_calls([loop[t] for t in one]) / len(one):.2f}"
            if one
            else "–"
        )
        table.add(label, f"{len(solved)}/{len(suite.tasks)}", *cells, calls)
    table.notes += [
        "Each row is one more aimegraph run of the suite (oracle replies), against the "
        "create_agent rollouts of the table above; 'solved' counts the tasks both solved, "
        "the ratios are over those; (met)/(missed) against the same goals.",
        "Tool steps off: the oracle's planner gives every stage to an actor, even one call "
        "whose arguments it knows. The twin binds every work bundle to every actor, as the "
        "loop is bound every tool.",
    ]
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
        if _group(task) != "5+ steps":
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

    from aimegraph.nodes.actor_factory import DefaultActorFactory
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
        tables = [
            _comparison(suite, result.records, metrics),
            _variants(suite, result.records, root, metrics),
            _per_task(suite, result.records),
        ]
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
        calls = (
            f"{metrics[f'eval.{key}.aimegraph_llm_calls']:.2f} against "
            f"{metrics[f'eval.{key}.react_llm_calls']:.2f} LLM calls"
        )
        return (
            f"{label} {metrics[f'eval.{key}.aimegraph_tokens']:,.0f} against "
            f"{metrics[f'eval.{key}.react_tokens']:,.0f} prompt tokens, {fmt_x(ratio)}{met}, "
            f"{calls}"
        )

    return Headline(
        "prompt tokens per solved task: the bundled eval suite, scripted oracle replies on "
        "both systems (the same tool calls, one token counter)",
        "LangChain's create_agent ReAct loop with the same model and tools",
        "; ".join(
            group(key, label)
            for key, label in (
                ("one_step", "one step"),
                ("2_4_steps", "2-4 steps"),
                ("5plus_steps", "5+ steps"),
                ("all", "all"),
            )
        ),
    )
