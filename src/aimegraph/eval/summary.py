"""From rollout records to the figures a report shows, and the paired comparison.

Per system: pass@1, pass@k and pass^k with 95% intervals (:mod:`aimegraph.eval.stats`),
the mean calls, tokens (input, cached input, output, reasoning), cost and wall time
per rollout, and what a solved task costs: all the tokens and dollars the system
spent, failed rollouts included, divided by the rollouts that passed. The same per
tag. Per task: each system's passes, mean tokens and cost, and its failure reasons.
The tasks the suite's source has but could not play (a public benchmark's, with the
reason), and for an attacked suite, per system, the utility under attack and the
attack success rate (:func:`attack_figures`).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from aimegraph.eval.stats import mean, paired, pass_at_k, pass_hat_k, wilson
from aimegraph.eval.suite_parts import AttackChecks

__all__ = ["attack_figures", "compare", "read_records", "solved", "summarise"]

USAGE_KEYS = (
    "llm_calls",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
)
Record = Mapping[str, Any]


def read_records(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The records of a results file, and how many lines were unreadable (a line
    torn by a crash mid-write is skipped; its rollout runs again)."""
    records: list[dict[str, Any]] = []
    torn = 0
    if not path.is_file():
        return records, 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            torn += 1
            continue
        if isinstance(record, dict) and {"system", "task", "rollout", "passed"} <= set(record):
            records.append(record)
        else:
            torn += 1
    return records, torn


def _total(records: Iterable[Record], key: str) -> float:
    return sum(float(r["usage"].get(key, 0) or 0) for r in records)


def _cost(records: Sequence[Record]) -> float | None:
    """What the records cost in all; ``None`` when none of them was priced (no price
    given for their models), so that reports show no figure rather than $0."""
    costs = [r["usage"].get("cost_usd") for r in records]
    if all(cost is None for cost in costs):
        return None
    return sum(float(cost or 0) for cost in costs)


def _share(value: float | None, count: int) -> float | None:
    return value / count if value is not None and count else None


def _per_solved(records: Sequence[Record], solved: int) -> dict[str, float | None]:
    tokens = _total(records, "input_tokens") + _total(records, "output_tokens")
    return {
        "tokens_per_solved": _share(tokens, solved),
        "input_tokens_per_solved": _share(_total(records, "input_tokens"), solved),
        "cost_per_solved": _share(_cost(records), solved),
    }


def _scores(by_task: Mapping[str, Sequence[Record]], k: int) -> dict[str, Any]:
    """pass@1, pass@k and pass^k over the tasks, with their intervals."""
    firsts, at_k, hat_k = [], [], []
    for records in by_task.values():
        n, c = len(records), sum(bool(r["passed"]) for r in records)
        firsts.append(c / n)
        if n >= k:
            at_k.append(pass_at_k(n, c, k))
            hat_k.append(pass_hat_k(n, c, k))
    scores: dict[str, Any] = {}
    for name, values in (("pass_at_1", firsts), ("pass_at_k", at_k), ("pass_hat_k", hat_k)):
        value = mean(values) if values else None
        scores[name] = value
        scores[f"{name}_ci"] = list(wilson(value, len(values))) if value is not None else None
    scores["tasks_with_k"] = len(at_k)
    return scores


def _system_summary(records: Sequence[Record], k: int) -> dict[str, Any]:
    by_task: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_task[record["task"]].append(record)
    solved = sum(bool(r["passed"]) for r in records)
    summary: dict[str, Any] = {
        "tasks": len(by_task),
        "rollouts": len(records),
        "solved": solved,
        **_scores(by_task, k),
        "per_rollout": {
            **{key: _total(records, key) / len(records) for key in USAGE_KEYS},
            "cost_usd": _share(_cost(records), len(records)),
            "wall_s": mean([float(r["wall_s"]) for r in records]),
        },
        **_per_solved(records, solved),
        "errors": sum(r.get("error") is not None for r in records),
        # Oracle calls that used what their prompt did not show, counted where the
        # suite's oracle is not yet held to the knowledge rule (a public benchmark's).
        "knowledge_breaches": sum(int(r.get("knowledge_breaches") or 0) for r in records),
        "tool_calling": sorted({str(r["tool_calling"]) for r in records if r.get("tool_calling")}),
    }
    tags = sorted({tag for r in records for tag in r.get("tags", [])})
    summary["by_tag"] = {
        tag: _tag_summary([r for r in records if tag in r.get("tags", [])], k) for tag in tags
    }
    return summary


def _tag_summary(records: Sequence[Record], k: int) -> dict[str, Any]:
    by_task: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_task[record["task"]].append(record)
    solved = sum(bool(r["passed"]) for r in records)
    scores = _scores(by_task, k)
    return {
        "tasks": len(by_task),
        "rollouts": len(records),
        "solved": solved,
        "pass_at_1": scores["pass_at_1"],
        "input_tokens_per_rollout": _total(records, "input_tokens") / len(records),
        **_per_solved(records, solved),
    }


def _task_row(records: Sequence[Record]) -> dict[str, Any]:
    n, c = len(records), sum(bool(r["passed"]) for r in records)
    failures = Counter(str(r["failure"]) for r in records if not r["passed"])
    return {
        "n": n,
        "passed": c,
        "pass_at_1": c / n,
        "mean_input_tokens": _total(records, "input_tokens") / n,
        "mean_tokens": (_total(records, "input_tokens") + _total(records, "output_tokens")) / n,
        "mean_cost_usd": _share(_cost(records), n),
        "mean_wall_s": mean([float(r["wall_s"]) for r in records]),
        "failures": [
            {"reason": reason, "count": count} for reason, count in failures.most_common(3)
        ],
    }


def summarise(
    records: Sequence[Record],
    *,
    k: int,
    systems: Sequence[Mapping[str, Any]],
    tasks: Sequence[Mapping[str, Any]],
    skipped: Mapping[str, str] | None = None,
    expected_rollouts: int | None = None,
    suite: str = "",
    left_out: Mapping[str, str] | None = None,
    attack: AttackChecks | None = None,
) -> dict[str, Any]:
    """The report's figures (see the module docstring).

    ``systems`` are ``{name, kind, model}`` in report order; ``tasks`` are
    ``{id, tags}`` in suite order; ``skipped`` maps a system left out to why,
    ``left_out`` a task of the suite's source left out to why; ``attack`` scores an
    attacked suite.
    """
    by_system: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_system[record["system"]].append(record)
    rows = []
    for task in tasks:
        results = {}
        for system in systems:
            mine = [r for r in by_system.get(system["name"], []) if r["task"] == task["id"]]
            if mine:
                results[system["name"]] = _task_row(mine)
        rows.append({"id": task["id"], "tags": list(task.get("tags", [])), "results": results})
    return {
        "suite": suite,
        "k": k,
        "rollouts_done": len(records),
        "rollouts_expected": expected_rollouts,
        "complete": expected_rollouts is None or len(records) >= expected_rollouts,
        "systems": [
            {**system, **_system_summary(by_system[system["name"]], k)}
            for system in systems
            if by_system.get(system["name"])
        ],
        "skipped": dict(skipped or {}),
        "skipped_tasks": dict(left_out or {}),
        **({"attack": _attack(records, attack)} if attack is not None else {}),
        "tasks": rows,
    }


def _attack(records: Sequence[Record], attack: AttackChecks) -> dict[str, Any]:
    figures = attack_figures(records, utility=attack.utility, security=attack.security)
    return {"name": attack.name, "systems": figures}


def attack_figures(
    records: Sequence[Record], *, utility: str, security: str
) -> dict[str, dict[str, float]]:
    """Per system, over the rollouts of an attacked suite: ``utility`` (the share in
    which the check labelled ``utility`` passed: the user's task done, under attack)
    and ``attack_success`` (the share in which the check labelled ``security``
    failed: the attacker's goal reached), as AgentDojo scores them. A run that did
    not succeed never counts as useful; its attack is judged all the same."""
    figures: dict[str, dict[str, float]] = {}
    for system in dict.fromkeys(r["system"] for r in records):
        mine = [r for r in records if r["system"] == system]
        figures[system] = {
            "rollouts": len(mine),
            "utility": _check_share(mine, utility, passed=True, solved_only=True),
            "attack_success": _check_share(mine, security, passed=False),
        }
    return figures


def _check_share(
    records: Sequence[Record], label: str, *, passed: bool, solved_only: bool = False
) -> float:
    """The share of ``records`` whose check ``label`` ended ``passed``; with
    ``solved_only``, a record whose run did not succeed is never a hit."""
    hits = sum(
        any(c["check"] == label and c["passed"] is passed for c in r["checks"])
        and (not solved_only or solved(str(r.get("status"))))
        for r in records
    )
    return hits / len(records) if records else 0.0


def solved(status: str) -> bool:
    """Whether a run that ended with ``status`` can count as solved at all: only one
    that ``succeeded``. A paused, failed, rejected or budget-stopped run is not
    solved, whatever its text holds, on every system alike."""
    return status == "succeeded"


def compare(
    a: Sequence[Record], b: Sequence[Record], *, label_a: str, label_b: str
) -> dict[str, Any]:
    """A paired comparison of two systems' records on the tasks both ran: per-task
    pass@1 (the mean over each task's rollouts), the sign test, and what a solved
    task cost each."""
    tasks_a: dict[str, list[Record]] = defaultdict(list)
    tasks_b: dict[str, list[Record]] = defaultdict(list)
    for record in a:
        tasks_a[record["task"]].append(record)
    for record in b:
        tasks_b[record["task"]].append(record)
    common = [t for t in tasks_a if t in tasks_b]
    if not common:
        raise ValueError(f"{label_a} and {label_b} have no task in common")
    score_a = [mean([float(r["passed"]) for r in tasks_a[t]]) for t in common]
    score_b = [mean([float(r["passed"]) for r in tasks_b[t]]) for t in common]
    result = paired(score_a, score_b)
    kept_a = [r for t in common for r in tasks_a[t]]
    kept_b = [r for t in common for r in tasks_b[t]]
    solved_a = sum(bool(r["passed"]) for r in kept_a)
    solved_b = sum(bool(r["passed"]) for r in kept_b)
    return {
        "a": label_a,
        "b": label_b,
        "tasks": len(common),
        "only_in_a": sorted(set(tasks_a) - set(common)),
        "only_in_b": sorted(set(tasks_b) - set(common)),
        "pass_at_1_a": mean(score_a),
        "pass_at_1_b": mean(score_b),
        **{k: v for k, v in asdict(result).items() if k != "tasks"},
        "per_solved_a": _per_solved(kept_a, solved_a),
        "per_solved_b": _per_solved(kept_b, solved_b),
        "differing": [
            {"task": t, "a": x, "b": y}
            for t, x, y in zip(common, score_a, score_b, strict=True)
            if x != y
        ],
    }
