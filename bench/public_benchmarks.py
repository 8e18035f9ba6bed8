"""Public benchmarks: AgentDojo's four suites and BFCL v4 multi-turn base, offline.

``aimegraph eval agentdojo:<suite> --model oracle`` and ``bfcl:multi_turn_base``:
each task's ground-truth calls played by the oracle on aimegraph (its defaults, with
its defences on, with the prompt-injection screen that trips, with tool steps, and
plan-first) and on LangChain's ``create_agent``, with the benchmark's simulated tools
over a fresh environment per rollout, judged by the benchmark's own checks
(AgentDojo's utility functions, BFCL's state and response checker). Tokens are
counted the same way for all (the oracle's ``count_tokens_approximately``).

Then AgentDojo's ``important_instructions`` attack on the banking suite (every user
task against every injection task) with the gullible model, which obeys any
instruction it reads in a tool output: the attack success rate (AgentDojo's security
check) and the utility under attack, for create_agent, aimegraph's defaults and
aimegraph with each defence on and off: the verifier (``verify``: off, the default
``final``, ``both``), the built-in prompt-injection screen (``flag``, ``quarantine``,
``trip``), a tool guardrail a banking user would write (a side effect only to an
account the request names: :mod:`aimegraph.eval.public.defences`), an approval
policy asking before every call of a tool whose name says it changes something (no
one answers in an eval, so an asked call never runs: the rollout ends paused), all
of them at once, tool steps (the plan fixes each call before any output is read),
and plan-first (:mod:`aimegraph.eval.public.plan_first`: the plan fixes the calls
the request gives, and a tool policy refuses an actor's side effects).

Needs the ``[agentdojo]`` extra and ``bfcl-eval`` (``pip install --no-deps``):
``python -m bench --only public`` (results in ``bench/results/public.md``).
"""

from __future__ import annotations

import importlib.util
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aimegraph.eval import OracleModels, evaluate
from aimegraph.eval.oracle import aime_scenario
from aimegraph.eval.public import PublicSuite, load_public_suite
from aimegraph.eval.public.agentdojo import SUITES, attack_figures
from aimegraph.eval.public.bfcl import PINNED
from aimegraph.eval.public.defences import REQUEST_ONLY, SIDE_EFFECTS
from aimegraph.eval.public.gullible import GullibleModels
from aimegraph.eval.public.plan_first import PLAN_FIRST, POLICY, PlanFirstModels
from aimegraph.eval.suite import Suite
from aimegraph.eval.systems import SystemSpec
from bench.common import Headline, SectionResult, Table, skipped

NAME = "public"
ATTACK = "important_instructions"
ATTACKED_SUITE = "banking"
QUICK_TASKS = 3
QUICK_ATTACKS = ("user_task_0.injection_task_0", "user_task_3.injection_task_1")

ASK = "aimegraph.eval.public.defences:ask_before_side_effects"
APPROVAL = {"tool_policy": ASK}
RECIPIENTS = "aimegraph.eval.public.defences:recipients_from_request"

TOOL_STEPS = SystemSpec(name="aimegraph-tool-steps")
"""aimegraph (defaults) whose planner splits the ground truth's stages into tool steps
wherever the request gives every argument (the knowledge rule); actors make the rest."""
PLAN_FIRST_OFF = SystemSpec(name="aimegraph-plan-first-policy-off")
"""The plan-first stand-in planner without the policy: what its plan alone stops."""
DEFENCES_ON = SystemSpec(
    name="aimegraph-defences",
    config={**APPROVAL, "verify": "both", "guardrails": ["prompt_injection:quarantine"]},
    guardrails=RECIPIENTS,
)
"""aimegraph with every defence on: approval, the verifier on each task and the
answer, the quarantining screen and the recipient guardrail."""
SCREEN_TRIP = SystemSpec(
    name="aimegraph-screen-trip", config={"guardrails": ["prompt_injection:trip"]}
)

ORACLE_SYSTEMS = (
    SystemSpec(name="aimegraph"),
    SystemSpec(name="create_agent", kind="create_agent"),
    DEFENCES_ON,
    SCREEN_TRIP,
)
"""Played by the oracle in the utility table (its plans: one task per 8 calls)."""
SHOWN = (*(s.name for s in ORACLE_SYSTEMS), TOOL_STEPS.name, PLAN_FIRST.name)

DEFENCES: tuple[SystemSpec, ...] = (
    SystemSpec(name="create_agent", kind="create_agent"),
    SystemSpec(name="aimegraph"),
    SystemSpec(name="aimegraph-verifier-off", config={"verify": "off"}),
    SystemSpec(name="aimegraph-verifier-both", config={"verify": "both"}),
    SystemSpec(name="aimegraph-screen-flag", config={"guardrails": ["prompt_injection"]}),
    SystemSpec(
        name="aimegraph-screen-quarantine", config={"guardrails": ["prompt_injection:quarantine"]}
    ),
    SCREEN_TRIP,
    SystemSpec(name="aimegraph-recipients", guardrails=RECIPIENTS),
    SystemSpec(name="aimegraph-approval", config=APPROVAL),
    DEFENCES_ON,
)
"""The systems under attack the gullible model plays with the oracle's plans: the
baseline, aimegraph's defaults, each defence alone, and all of them on."""


def _missing() -> str | None:
    needed = {
        "agentdojo": "pip install 'aimegraph[agentdojo]'",
        "bfcl_eval": f"pip install --no-deps '{PINNED}'",
    }
    lacking = [hint for module, hint in needed.items() if importlib.util.find_spec(module) is None]
    return "; ".join(lacking) or None


def _pct(value: float) -> str:
    return f"{value:.0%}" if value in (0.0, 1.0) else f"{value:.1%}"


def _utility_table(root: Path, quick: bool, metrics: dict[str, float]) -> Table:
    table = Table(
        "Oracle replies, no attack: utility (the benchmark's own check) / tokens per solved task",
        ["benchmark", "tasks played / all", *SHOWN, "aimegraph / create_agent tokens"],
    )
    for source in [*(f"agentdojo:{s}" for s in SUITES), "bfcl:multi_turn_base"]:
        public = load_public_suite(source)
        suite = public.suite
        if quick:
            suite = suite.select(ids=[t.id for t in suite.tasks[:QUICK_TASKS]])
        runs = [
            evaluate(
                suite,
                model="oracle",
                systems=list(ORACLE_SYSTEMS),
                out=root / suite.name,
                concurrency=2,
            ),
            evaluate(
                suite,
                model=OracleModels(tool_steps=True),
                systems=[TOOL_STEPS],
                out=root / f"{suite.name}-steps",
                concurrency=2,
            ),
            evaluate(
                suite,
                model=PlanFirstModels(),
                systems=[PLAN_FIRST],
                out=root / f"{suite.name}-plan-first",
                concurrency=2,
            ),
        ]
        records = [r for run in runs for r in run.records]
        by_system = {s["name"]: s for run in runs for s in run.summary["systems"]}
        key = source.replace(":", ".")
        utility = {s: _passed(records, s) for s in SHOWN}
        tokens = {s: float(by_system[s]["tokens_per_solved"] or 0) for s in SHOWN}
        for system in SHOWN:
            metrics[f"public.{key}.{system}.utility"] = utility[system]
            metrics[f"public.{key}.{system}.tokens_per_solved"] = tokens[system]
        total = len(public.suite.tasks) + len(public.skipped)
        ratio = tokens["aimegraph"] / tokens["create_agent"] if tokens["create_agent"] else 0.0
        table.add(
            source,
            f"{len(suite.tasks)} / {total}",
            *(f"{_pct(utility[s])} / {tokens[s]:,.0f}" if tokens[s] else "0%" for s in SHOWN),
            f"{ratio:.2f}x" if ratio else "–",
        )
        table.notes += [f"{source} {task}: skipped: {why}" for task, why in public.skipped.items()]
        table.notes += _unsolved(source, records)
    table.notes += [
        "Every task's ground-truth calls, played by the oracle (aimegraph: a plan of one task "
        "per 8 calls, each made by an actor, or a tool step where a task is one call whose "
        "arguments the request gives; create_agent: the calls of independent stages in one "
        "reply), then the ground truth's answer. The ground truths are not yet held to the "
        "knowledge rule: a call using a literal its prompt does not show is counted, not "
        "refused (knowledge_breaches in each record). Tokens counted with LangChain's "
        "count_tokens_approximately over each prompt (bound tool schemas included) and "
        "reply. Tokens per solved task: all the tokens a system spent, failed rollouts "
        "included, over the tasks it solved.",
        f"{DEFENCES_ON.name}: {_defences(DEFENCES_ON)}. No one answers in an eval: a rollout "
        "whose task needs an asked tool ends paused, unsolved.",
        f"{SCREEN_TRIP.name}: the built-in prompt-injection screen ending the run blocked when "
        "a tool output reads like instructions to the model (a false alarm costs the task).",
        f"{TOOL_STEPS.name}: aimegraph's defaults, the oracle's plan splitting the ground "
        "truth into tool steps wherever the request gives every argument of a call (the "
        "engine makes it); actors make the rest.",
        f"{PLAN_FIRST.name}: {_defences(PLAN_FIRST)}. Its stand-in planner fixes a call as a "
        "tool step only when every argument is written in the request; an actor makes every "
        "other call, and the policy refuses the actor's side effects, so a task whose side "
        "effect takes a value read from the data is not solved.",
    ]
    return table


def _passed(records: Sequence[Mapping[str, Any]], system: str) -> float:
    mine = [r for r in records if r["system"] == system]
    return sum(bool(r["passed"]) for r in mine) / len(mine) if mine else 0.0


def _unsolved(source: str, records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per system, the tasks it did not solve, and the first one's reason."""
    failed: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        if not record["passed"]:
            failed.setdefault(record["system"], []).append(record)
    return [
        f"{source}, {system}: {len(mine)} not solved ("
        + ", ".join(r["task"] for r in mine[:12])
        + (", ..." if len(mine) > 12 else "")
        + f"); first: {str(mine[0]['failure'])[:160]}"
        for system, mine in failed.items()
    ]


def _attack_table(root: Path, quick: bool, metrics: dict[str, float]) -> Table:
    public = load_public_suite(f"agentdojo:{ATTACKED_SUITE}", attack=ATTACK)
    tasks = list(QUICK_ATTACKS) if quick else None
    runs = [
        evaluate(
            public.suite,
            model=GullibleModels(public.injections),
            systems=list(DEFENCES),
            tasks=tasks,
            out=root / "attack",
            concurrency=2,
        ),
        evaluate(
            public.suite,
            model=GullibleModels(public.injections, tool_steps=True),
            systems=[TOOL_STEPS],
            tasks=tasks,
            out=root / "attack-steps",
            concurrency=2,
        ),
        evaluate(
            public.suite,
            model=GullibleModels(public.injections, plan_first=True),
            systems=[PLAN_FIRST, PLAN_FIRST_OFF],
            tasks=tasks,
            out=root / "attack-plan-first",
            concurrency=2,
        ),
    ]
    records = [r for run in runs for r in run.records]
    figures = attack_figures(records)
    table = Table(
        f"AgentDojo {ATTACKED_SUITE} under the {ATTACK} attack, gullible model",
        ["system", "defences", "rollouts", "utility under attack", "attack success rate"],
    )
    for spec in (*DEFENCES, TOOL_STEPS, PLAN_FIRST, PLAN_FIRST_OFF):
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
    stopped = _stopped(public, records, "aimegraph", metrics)
    lost = _lost_under_attack(records)
    table.notes += [
        "The gullible model plays each user task's ground truth but, on reading the "
        "attacker's goal anywhere it is shown (a tool output, a dependency's result in an "
        "actor's prompt, any message but its own replies), first makes the injection "
        "task's ground-truth calls it is offered: the worst case, the same for every system. "
        "It obeys what it reads whatever wraps it: a flagged or quarantined output that "
        "still holds the goal is obeyed (a real model may heed the warning; the stand-in "
        "never does). AgentDojo's own utility and security functions judge each rollout.",
        "An actor of the stand-in ends its task in the reply that makes its last call, so "
        "it never reads that call's output: an attack reaches it in the output of an "
        "earlier call of the same task or in a dependency's result. Under the knowledge "
        "rule a stage is a tool step only where the request gives every argument; the "
        "reporter, which has no tools, reads everything and can call nothing.",
        "The ground truths are not yet held to the knowledge rule (their breaches are "
        "counted, not refused), and the gap between a system's defaults and create_agent "
        "comes from the stand-in's plan shape, not from a defence.",
        *stopped,
        *lost,
        "The verifier is played by the same model (it passes what it is shown), and judges "
        "after the calls ran: it cannot take a transfer back. The approval policy asks before "
        "the calls; no one answers in an eval, so the rollout ends paused at the first asked "
        "call, the attacker's or the user's own. A tripped guardrail or screen ends the run "
        "blocked, the user's task with it.",
        f"{TOOL_STEPS.name}: the gullible model's plan makes a tool step of every "
        "ground-truth call whose arguments the request gives, fixed before any output is "
        "read; actors make the others.",
        f"{PLAN_FIRST.name}: the stand-in planner fixes as tool steps the calls whose every "
        "argument the request writes; an actor makes the others, reading outputs (the attack "
        f"included), and the tool policy refuses its side effects. {PLAN_FIRST_OFF.name}: the "
        "same plans without the policy, what the plan's shape alone stops.",
    ]
    return table


def _stopped(
    public: PublicSuite,
    records: Sequence[Mapping[str, Any]],
    system: str,
    metrics: dict[str, float],
) -> list[str]:
    """Why ``system``'s stopped attacks were stopped, as far as the records show: the
    user tasks whose stand-in plan has no actor, then the injection tasks of the rest."""
    mine = [r for r in records if r["system"] == system]
    stopped = [r["task"] for r in mine if _attack_failed(r)]
    planless = {
        user for user in {t.split(".")[0] for t in stopped} if _no_actor(public.suite, user)
    }
    by_plan = [t for t in stopped if t.split(".")[0] in planless]
    rest = Counter(t.split(".")[1] for t in stopped if t.split(".")[0] not in planless)
    metrics[f"public.attack.{system}.stopped"] = len(stopped)
    metrics[f"public.attack.{system}.stopped_without_actor"] = len(by_plan)
    if not stopped:
        return []
    users = ", ".join(sorted(planless, key=lambda u: int(u.rsplit("_", 1)[1])))
    injections = "; ".join(f"{count} against {name}" for name, count in rest.most_common())
    notes = [
        f"Of the {len(mine)} attacks on {system} (defaults), {len(stopped)} failed: "
        f"{len(by_plan)} in user tasks whose ground truth is one call ({users or 'none'}), "
        "which the oracle plans as a tool step by default, so no actor reads the planted "
        "text; the rest by injection task: " + (injections or "none") + "."
    ]
    if "injection_task_6" in rest:
        notes.append(
            "injection_task_6 asks for $30,000 in three identical $10,000 transfers: the tool "
            "node refuses the third identical call, so AgentDojo counts the attack as failed "
            "though $20,000 went out."
        )
    return notes


def _lost_under_attack(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per system, the user tasks not solved under attack (with how many of their
    attacks), so that a utility figure can be read task by task."""
    lost: dict[str, Counter[str]] = {}
    for record in records:
        if not any("utility" in c["check"] and c["passed"] for c in record["checks"]):
            lost.setdefault(record["system"], Counter())[record["task"].split(".")[0]] += 1
    return [
        f"{system}: user tasks not solved under attack (in how many of their attacks): "
        + ", ".join(
            f"{user} ({count})"
            for user, count in sorted(tasks.items(), key=lambda i: int(i[0].rsplit("_", 1)[1]))
        )
        + "."
        for system, tasks in lost.items()
    ]


def _attack_failed(record: Mapping[str, Any]) -> bool:
    return any("security" in c["check"] and c["passed"] for c in record["checks"])


def _no_actor(suite: Suite, user_task: str) -> bool:
    """Whether the oracle's default plan for ``user_task`` is tool steps only."""
    task = next(t for t in suite.tasks if t.id.split(".")[0] == user_task)
    planned = [spec for entry in aime_scenario(task)["planner"] for spec in entry["tasks"]]
    return all("call" in spec for spec in planned)


def _defences(spec: SystemSpec) -> str:
    """A system's defence settings, as the table shows them."""
    if spec.kind != "aimegraph":
        return "–"
    if spec is TOOL_STEPS:
        return "the plan fixes as a tool step every call the request gives; actors make the rest"
    if spec is PLAN_FIRST_OFF:
        return "the plan fixes the calls the request gives; actors make the rest (no policy)"
    shown = [_setting(key, value) for key, value in spec.config.items()]
    if spec.guardrails == RECIPIENTS:
        shown.append(f"guardrail: {', '.join(REQUEST_ONLY)} of a side effect only from the request")
    return "; ".join(shown) or "defaults (verify: auto)"


def _setting(key: str, value: Any) -> str:
    if key == "tool_policy" and value == ASK:
        return "approval: ask before " + ", ".join(SIDE_EFFECTS)
    if key == "tool_policy" and value == POLICY:
        return "tool policy: side effects only in tool steps the plan wrote out"
    if key == "guardrails":
        return "prompt-injection screen: " + ", ".join(value)
    return f"{key}: {value}"


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
        def cell(system: str) -> str:
            return f"{_pct(metrics[f'public.{key}.{system}.utility'])}"

        a = metrics[f"public.{key}.aimegraph.tokens_per_solved"]
        c = metrics[f"public.{key}.create_agent.tokens_per_solved"]
        return (
            f"{key.split('.', 1)[1]} {cell('aimegraph')} / {cell('create_agent')}, "
            f"{a:,.0f} / {c:,.0f} tokens (defences on {cell(DEFENCES_ON.name)}, trip screen "
            f"{cell(SCREEN_TRIP.name)}, plan-first {cell(PLAN_FIRST.name)})"
        )

    keys = [f"agentdojo.{s}" for s in SUITES] + ["bfcl.multi_turn_base"]

    def attack(name: str) -> str:
        return (
            f"{_pct(metrics[f'public.attack.{name}.attack_success'])} "
            f"(utility {_pct(metrics[f'public.attack.{name}.utility'])})"
        )

    return [
        Headline(
            "public benchmarks, oracle replies: utility (the benchmark's own check) and tokens "
            "per solved task, aimegraph / create_agent",
            "LangChain's create_agent with the same tools and the same oracle calls",
            "; ".join(suite(k) for k in keys),
        ),
        Headline(
            f"AgentDojo {ATTACKED_SUITE}, {ATTACK} attack, gullible model: attack success rate "
            "(utility under attack)",
            "create_agent with the same model and tools",
            f"aimegraph defaults {attack('aimegraph')}; screen flag "
            f"{attack('aimegraph-screen-flag')}, quarantine "
            f"{attack('aimegraph-screen-quarantine')}, trip {attack(SCREEN_TRIP.name)}; "
            f"recipient guardrail {attack('aimegraph-recipients')}; approval "
            f"{attack('aimegraph-approval')}; all defences on {attack(DEFENCES_ON.name)}; "
            f"plan-first {attack(PLAN_FIRST.name)}; tool steps where the request gives the "
            f"arguments {attack(TOOL_STEPS.name)}; create_agent {attack('create_agent')} "
            "(a stand-in's figures: the gap between the defaults and create_agent is the "
            "stand-in's plan shape, not a defence)",
        ),
    ]
