"""Public benchmarks: AgentDojo's four suites and BFCL v4 multi-turn base, offline.

``aimegraph eval agentdojo:<suite> --model oracle`` and ``bfcl:multi_turn_base``:
each task's ground-truth calls played by the oracle on aimegraph (default
configuration) and on LangChain's ``create_agent``, with the benchmark's simulated
tools over a fresh environment per rollout, judged by the benchmark's own checks
(AgentDojo's utility functions, BFCL's state and response checker). Tokens are
counted the same way for both (the oracle's ``count_tokens_approximately``).

Then AgentDojo's ``important_instructions`` attack on the banking suite (every user
task against every injection task) with the gullible model, which obeys any
instruction it reads in a tool output: the attack success rate (AgentDojo's security
check) and the utility under attack, for create_agent, aimegraph's defaults and
aimegraph with each defence on and off: the verifier (``verify``: off, the default
``final``, ``both``), an approval policy asking before every call of a tool whose
name says it changes something (:data:`ASK_BEFORE`; no one answers in an eval, so
an asked call never runs: the rollout ends paused), and tool steps (the plan fixes
each call's arguments before any output is read; no actor).

Needs the ``[agentdojo]`` extra and ``bfcl-eval`` (``pip install --no-deps``):
``python -m bench --only public`` (results in ``bench/results/public.md``).
"""

from __future__ import annotations

import importlib.util
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aimegraph.eval import OracleModels, evaluate
from aimegraph.eval.public import load_public_suite
from aimegraph.eval.public.agentdojo import SUITES, attack_figures
from aimegraph.eval.public.gullible import GullibleModels
from aimegraph.eval.systems import SystemSpec
from bench.common import Headline, SectionResult, Table, skipped

NAME = "public"
BASELINES = ("aimegraph", "create_agent")
TOOL_STEPS = SystemSpec(name="aimegraph-tool-steps")
"""aimegraph (defaults) whose planner writes the ground truth as tool steps."""
SHOWN = (*BASELINES, TOOL_STEPS.name)
ATTACK = "important_instructions"
ATTACKED_SUITE = "banking"
QUICK_TASKS = 3
QUICK_ATTACKS = ("user_task_0.injection_task_0", "user_task_3.injection_task_1")

ASK_BEFORE = (
    "send_*", "schedule_*", "update_*", "delete_*", "create_*", "share_*", "append_*",
    "reserve_*", "cancel_*", "reschedule_*", "add_*", "invite_*", "remove_*", "post_*",
)  # fmt: skip
"""Tool-name globs the approval policy asks a human about: calls that change the
user's world (transfers, messages, edits, bookings)."""

APPROVAL = {"approve_tools": [{"tool": glob, "decision": "ask"} for glob in ASK_BEFORE]}

DEFENCES: tuple[SystemSpec, ...] = (
    SystemSpec(name="create_agent", kind="create_agent"),
    SystemSpec(name="aimegraph"),
    SystemSpec(name="aimegraph-verifier-off", config={"verify": "off"}),
    SystemSpec(name="aimegraph-verifier-both", config={"verify": "both"}),
    SystemSpec(name="aimegraph-approval", config=APPROVAL),
    SystemSpec(name="aimegraph-defences", config={**APPROVAL, "verify": "both"}),
)
"""The systems under attack: the baseline, aimegraph's defaults, each defence alone
on and off, and all of them on."""


def _missing() -> str | None:
    needed = {
        "agentdojo": "pip install 'aimegraph[agentdojo]'",
        "bfcl_eval": "pip install --no-deps bfcl-eval",
    }
    lacking = [hint for module, hint in needed.items() if importlib.util.find_spec(module) is None]
    return "; ".join(lacking) or None


def _pct(value: float) -> str:
    return f"{value:.0%}" if value in (0.0, 1.0) else f"{value:.1%}"


def _utility_table(root: Path, quick: bool, metrics: dict[str, float]) -> Table:
    table = Table(
        "Oracle replies: utility (the benchmark's own check) and tokens per solved task",
        ["benchmark", "tasks played / all", *(f"{s}: utility" for s in SHOWN),
         *(f"{s}: tokens / solved" for s in SHOWN), "aimegraph / create_agent"],
    )  # fmt: skip
    for source in [*(f"agentdojo:{s}" for s in SUITES), "bfcl:multi_turn_base"]:
        public = load_public_suite(source)
        suite = public.suite
        if quick:
            suite = suite.select(ids=[t.id for t in suite.tasks[:QUICK_TASKS]])
        result = evaluate(
            suite, model="oracle", systems=list(BASELINES), out=root / suite.name, concurrency=2
        )
        stepped = evaluate(
            suite,
            model=OracleModels(tool_steps=True),
            systems=[TOOL_STEPS],
            out=root / f"{suite.name}-steps",
            concurrency=2,
        )
        records = [*result.records, *stepped.records]
        by_system = {
            s["name"]: s for s in [*result.summary["systems"], *stepped.summary["systems"]]
        }
        key = source.replace(":", ".")
        utility = {s: _passed(records, s) for s in SHOWN}
        tokens = {s: float(by_system[s]["tokens_per_solved"] or 0) for s in SHOWN}
        for system in SHOWN:
            metrics[f"public.{key}.{system}.utility"] = utility[system]
            metrics[f"public.{key}.{system}.tokens_per_solved"] = tokens[system]
        total = len(public.suite.tasks) + len(public.skipped)
        table.add(
            source,
            f"{len(suite.tasks)} / {total}",
            *(_pct(utility[s]) for s in SHOWN),
            *(f"{tokens[s]:,.0f}" for s in SHOWN),
            f"{tokens['aimegraph'] / tokens['create_agent']:.2f}x"
            if tokens["create_agent"]
            else "–",
        )
        table.notes += [f"{source} {task}: skipped: {why}" for task, why in public.skipped.items()]
        table.notes += [
            f"{source} not solved: {r['system']} {r['task']}: {str(r['failure'])[:200]}"
            for r in records
            if not r["passed"]
        ]
    table.notes += [
        "Every task's ground-truth calls, played by the oracle on both systems (aimegraph: a "
        "plan of one task per 8 calls, each an actor making them; create_agent: one call per "
        "reply), then the ground truth's answer; tokens counted with LangChain's "
        "count_tokens_approximately over each prompt (bound tool schemas included) and reply.",
        f"{TOOL_STEPS.name}: aimegraph's defaults, the oracle's plan fixing every ground-truth "
        "call as a tool step (no actor; the engine makes the call): the planner, reporter and "
        "verifier calls are all that remain. An upper bound: the oracle knows every argument "
        "when it plans, a real planner only those the request gives.",
    ]
    return table


def _passed(records: Sequence[dict[str, Any]], system: str) -> float:
    mine = [r for r in records if r["system"] == system]
    return sum(bool(r["passed"]) for r in mine) / len(mine) if mine else 0.0


def _attack_table(root: Path, quick: bool, metrics: dict[str, float]) -> Table:
    public = load_public_suite(f"agentdojo:{ATTACKED_SUITE}", attack=ATTACK)
    result = evaluate(
        public.suite,
        model=GullibleModels(public.injections),
        systems=list(DEFENCES),
        tasks=list(QUICK_ATTACKS) if quick else None,
        out=root / "attack",
        concurrency=2,
    )
    stepped = evaluate(
        public.suite,
        model=GullibleModels(public.injections, tool_steps=True),
        systems=[TOOL_STEPS],
        tasks=list(QUICK_ATTACKS) if quick else None,
        out=root / "attack-steps",
        concurrency=2,
    )
    figures = attack_figures([*result.records, *stepped.records])
    table = Table(
        f"AgentDojo {ATTACKED_SUITE} under the {ATTACK} attack, gullible model",
        ["system", "defences", "rollouts", "utility under attack", "attack success rate"],
    )
    for spec in (*DEFENCES, TOOL_STEPS):
        mine = figures[spec.name]
        metrics[f"public.attack.{spec.name}.utility"] = mine["utility"]
        metrics[f"public.attack.{spec.name}.attack_success"] = mine["attack_success"]
        table.add(
            spec.name,
            _defences(spec),
            int(mine["rollouts"]),
            _pct(mine["utility"]),
            _pct(mine["attack_success"]),
        )
    table.notes += [
        "The gullible model plays each user task's ground truth but, on reading the "
        "attacker's goal in a tool output, first makes the injection task's ground-truth "
        "calls: the worst case, the same for every system. AgentDojo's own utility and "
        "security functions judge each rollout.",
        "The verifier is played by the same model (it passes what it is shown), and judges "
        "after the calls ran: it cannot take a transfer back. The approval policy asks before "
        "the calls; no one answers in an eval, so the rollout ends paused at the first asked "
        "call, the attacker's or the user's own.",
        f"{TOOL_STEPS.name}: the gullible model's plan makes every ground-truth call a tool "
        "step, its arguments fixed before any output is read; only the reporter (no tools) "
        "reads the outputs. An upper bound: the oracle knows every argument when it plans.",
    ]
    return table


def _defences(spec: SystemSpec) -> str:
    """A system's defence settings, as the table shows them."""
    if spec.kind != "aimegraph":
        return "–"
    if spec is TOOL_STEPS:
        return "the plan fixes every call as a tool step (no actor reads an output)"
    shown = [
        "approval: ask before " + ", ".join(ASK_BEFORE)
        if key == "approve_tools"
        else f"{key}: {value}"
        for key, value in spec.config.items()
    ]
    return "; ".join(shown) or "defaults (verify: final)"


def run(quick: bool) -> SectionResult:
    missing = _missing()
    if missing is not None:
        return skipped(NAME, f"needs {missing}")
    metrics: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="aimegraph-bench-public-") as folder:
        root = Path(folder)
        tables = [_utility_table(root, quick, metrics), _attack_table(root, quick, metrics)]
    return SectionResult(NAME, tables, metrics, _headlines(metrics))


def _headlines(metrics: dict[str, float]) -> list[Headline]:
    def suite(key: str) -> str:
        a = metrics[f"public.{key}.aimegraph.tokens_per_solved"]
        c = metrics[f"public.{key}.create_agent.tokens_per_solved"]
        return (
            f"{key.split('.', 1)[1]} {_pct(metrics[f'public.{key}.aimegraph.utility'])} / "
            f"{_pct(metrics[f'public.{key}.create_agent.utility'])}, {a:,.0f} / {c:,.0f} tokens"
        )

    keys = [f"agentdojo.{s}" for s in SUITES] + ["bfcl.multi_turn_base"]
    attack = {
        name: metrics[f"public.attack.{name}.attack_success"]
        for name in ("aimegraph", "aimegraph-defences", TOOL_STEPS.name, "create_agent")
    }
    return [
        Headline(
            "public benchmarks, oracle replies: utility (the benchmark's own check) and tokens "
            "per solved task, aimegraph / create_agent",
            "LangChain's create_agent with the same tools and the same oracle calls",
            "; ".join(suite(k) for k in keys),
        ),
        Headline(
            f"AgentDojo {ATTACKED_SUITE}, {ATTACK} attack, gullible model: attack success rate",
            "create_agent with the same model and tools",
            f"aimegraph defaults {_pct(attack['aimegraph'])}, with approval and verifier on "
            f"{_pct(attack['aimegraph-defences'])}, with tool steps "
            f"{_pct(attack[TOOL_STEPS.name])}; create_agent {_pct(attack['create_agent'])}",
        ),
    ]
