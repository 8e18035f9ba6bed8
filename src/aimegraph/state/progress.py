"""Operations on the progress list: applying a plan, DAG checks, the ready set and
AIME's Markdown checklist."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aimegraph.state.models import PlanUpdate, Task, TaskResult, TaskSpec, ToolCallSpec
from aimegraph.state.references import referenced_ids

if TYPE_CHECKING:
    import networkx as nx

Tasks = Mapping[str, Task]

CallCheck = Callable[[ToolCallSpec], str | None]
"""Why a tool step's call cannot run in this run (an unknown tool, arguments that do
not fit it), or None; see ``aimegraph.tools.steps.call_checker``."""

_CHECKBOX = {
    "pending": "[ ]",
    "in_progress": "[~]",
    "completed": "[x]",
    "failed": "[!]",
    "skipped": "[-]",
}
CANCELLED_MARK = "[/]"
"""A task the run's cancel cut off (it had not finished), whatever its status says."""


class PlanError(ValueError):
    """A drafted plan cannot be accepted; the message is written for the planner model."""


@dataclass(frozen=True)
class PlanChecks:
    """What every plan of a run is checked against, wherever it comes from (the
    planner's draft, a predefined plan, a plan a human edited at approval or at an
    escalation): the tool bundles, agent units and skills tasks may name, and the
    check of a tool step's call. ``None`` for ``bundles`` or ``skills``: any name."""

    bundles: Collection[str] | None = None
    agents: Collection[str] = ()
    skills: Collection[str] | None = None
    check_call: CallCheck | None = None

    def apply(self, tasks: Tasks, plan: PlanUpdate, *, max_tasks: int) -> dict[str, Task]:
        """:func:`apply_plan` with these checks (raises :class:`PlanError`)."""
        return apply_plan(
            tasks,
            plan,
            max_tasks=max_tasks,
            bundles=self.bundles,
            agents=self.agents,
            skills=self.skills,
            check_call=self.check_call,
        )


def apply_plan(
    tasks: Tasks,
    plan: PlanUpdate,
    *,
    max_tasks: int,
    bundles: Collection[str] | None = None,
    agents: Collection[str] = (),
    skills: Collection[str] | None = None,
    check_call: CallCheck | None = None,
) -> dict[str, Task]:
    """Return the changed tasks after applying ``plan`` to ``tasks``, or raise PlanError.

    Completed tasks are never lost: a spec that changes a completed task is
    refused; one that only restates it is ignored, and so is a drop of an
    unknown id. A revised task restarts as pending with its attempts reset.
    Failed tasks that the plan neither revises nor drops are marked skipped (the
    planner has seen them and chose to live without them); their result, with
    the failure reason, is kept. When ``bundles`` is given, tasks may only name
    those tool bundles; an ``agent`` or team member must be one of ``agents``; when
    ``skills`` is given, the skills a task names must be among them. A tool step's
    references must name its dependencies, and with ``check_call``
    its tool and arguments must pass that check. A first plan (no ``tasks`` yet)
    with no task is refused unless it says the goal needs no work
    (``no_work_needed``) or answers it (``answer``).
    """
    errors: list[str] = []
    seen: set[str] = set()
    changed: dict[str, Task] = {}
    for spec in plan.tasks:
        task_id = spec.id.strip()
        if not task_id:
            errors.append(f"task {spec.title!r} has an empty id")
            continue
        if task_id in seen:
            errors.append(f"duplicate task id {task_id!r}")
            continue
        seen.add(task_id)
        existing = tasks.get(task_id)
        if existing is not None and existing.status == "completed":
            if not restates(spec, existing):
                errors.append(
                    f"task {task_id!r} is already completed and cannot be revised; "
                    "add a new task with a new id instead"
                )
            continue
        unknown = [b for b in spec.tool_bundles if bundles is not None and b not in bundles]
        if unknown:
            errors.append(
                f"task {task_id!r} names unknown tool bundles {unknown}; "
                f"available: {sorted(bundles or [])}"
            )
        errors += _unit_problems(spec, task_id, agents)
        errors += _skill_problems(spec, task_id, skills)
        errors += _call_problems(spec, task_id, check_call)
        changed[task_id] = Task(
            id=task_id,
            title=spec.title,
            description=spec.description,
            parent_id=spec.parent_id,
            dependencies=tuple(dict.fromkeys(d.strip() for d in spec.dependencies)),
            completion_criteria=spec.completion_criteria,
            tool_bundles=tuple(spec.tool_bundles),
            skills=tuple(dict.fromkeys(spec.skills)),
            persona=spec.persona,
            agent=spec.agent or None,
            team=spec.team,
            call=spec.call,
        )
    for task_id in plan.drop:
        task = changed.get(task_id) or tasks.get(task_id)
        if task is None:
            continue  # nothing to cancel: not worth a re-ask
        if task.status in ("completed", "in_progress"):
            errors.append(f"cannot drop task {task_id!r}: it is {task.status}")
        else:
            changed[task_id] = task.model_copy(update={"status": "skipped"})
    for task_id, task in tasks.items():
        if task.status == "failed" and task_id not in changed:
            changed[task_id] = task.model_copy(update={"status": "skipped"})
    if not tasks and not changed and not (plan.no_work_needed or plan.direct_answer):
        errors.append(
            "the plan has no tasks: give the tasks that reach the goal (send an answer "
            "instead, or set no_work_needed, only when the goal needs no work at all)"
        )
    if errors:
        raise PlanError("; ".join(errors))
    merged = {**tasks, **changed}
    validate_plan(merged, max_tasks=max_tasks)
    return changed


def _unit_problems(spec: TaskSpec, task_id: str, agents: Collection[str]) -> list[str]:
    """Agent unit names a task uses that are not configured (said like a dangling id)."""
    named = ([spec.agent] if spec.agent else []) + list(spec.team.members if spec.team else [])
    unknown = [name for name in dict.fromkeys(named) if name not in agents]
    if not unknown:
        return []
    known = f"available: {sorted(agents)}" if agents else "no agent units are configured"
    return [f"task {task_id!r} names unknown agent units {unknown}; {known}"]


def _skill_problems(spec: TaskSpec, task_id: str, skills: Collection[str] | None) -> list[str]:
    """Skill names a task uses that are not installed (None: not checked)."""
    unknown = [name for name in spec.skills if skills is not None and name not in skills]
    if not unknown:
        return []
    known = f"installed: {sorted(skills or [])}" if skills else "no skills are installed"
    return [f"task {task_id!r} names unknown skills {unknown}; {known}"]


def _call_problems(spec: TaskSpec, task_id: str, check_call: CallCheck | None) -> list[str]:
    """Why a tool step cannot run: references to tasks that are not its
    dependencies, and what ``check_call`` finds."""
    if spec.call is None:
        return []
    problems = []
    deps = {d.strip() for d in spec.dependencies}
    if strays := sorted(referenced_ids(spec.call.args) - deps):
        problems.append(
            f"task {task_id!r} calls {spec.call.tool} with references to "
            f"{', '.join('$' + s for s in strays)}, which are not among its dependencies "
            "(add them to dependencies, or write $$ for a literal $)"
        )
    if check_call is not None and (problem := check_call(spec.call)):
        problems.append(f"task {task_id!r}: {problem}")
    return problems


def restates(spec: TaskSpec, task: Task) -> bool:
    """Whether ``spec`` only repeats ``task``: every field it gives matches (spacing
    and case aside) and the fields it leaves empty keep their values. Planners
    restate finished tasks when they revise a plan; that is no change."""

    def same(given: str | None, kept: str | None) -> bool:
        return (
            not given
            or " ".join(given.split()).casefold() == " ".join((kept or "").split()).casefold()
        )

    deps = [d.strip() for d in spec.dependencies]
    return (
        all(
            same(given, kept)
            for given, kept in (
                (spec.title, task.title),
                (spec.description, task.description),
                (spec.completion_criteria, task.completion_criteria),
                (spec.persona, task.persona),
                (spec.parent_id, task.parent_id),
                (spec.agent, task.agent),
            )
        )
        and (spec.team is None or spec.team == task.team)
        and (spec.call is None or spec.call == task.call)
        and (not deps or set(deps) == set(task.dependencies))
        and (not spec.tool_bundles or set(spec.tool_bundles) == set(task.tool_bundles))
        and (not spec.skills or set(spec.skills) == set(task.skills))
    )


def validate_plan(tasks: Tasks, *, max_tasks: int) -> None:
    """Raise PlanError unless the open part of ``tasks`` is a runnable DAG."""
    import networkx as nx  # with the first plan, not with the state records

    open_tasks = {i: t for i, t in tasks.items() if t.status != "skipped"}
    errors: list[str] = []
    if len(open_tasks) > max_tasks:
        errors.append(f"the plan has {len(open_tasks)} tasks; at most {max_tasks} are allowed")
    graph = nx.DiGraph()
    graph.add_nodes_from(open_tasks)
    for task in open_tasks.values():
        if task.parent_id is not None and task.parent_id not in tasks:
            errors.append(f"task {task.id!r} has unknown parent {task.parent_id!r}")
        for dep in task.dependencies:
            if dep == task.id:
                errors.append(f"task {task.id!r} depends on itself")
            elif dep not in tasks:
                errors.append(f"task {task.id!r} depends on unknown task {dep!r}")
            elif task.status == "pending" and tasks[dep].status == "skipped":
                errors.append(
                    f"task {task.id!r} depends on {dep!r}, which was skipped; revise or drop it"
                )
            else:
                graph.add_edge(dep, task.id)
    if cycle := _find_cycle(graph):
        errors.append(f"dependency cycle {cycle}")
    hierarchy = nx.DiGraph((t.parent_id, t.id) for t in open_tasks.values() if t.parent_id in tasks)
    if cycle := _find_cycle(hierarchy):
        errors.append(f"parent cycle {cycle}")
    if errors:
        raise PlanError("; ".join(errors))


def _find_cycle(graph: nx.DiGraph) -> str | None:
    import networkx as nx

    try:
        edges = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        return None
    return " -> ".join([edge[0] for edge in edges] + [edges[0][0]])


def ready_tasks(tasks: Tasks) -> list[Task]:
    """Pending tasks whose dependencies are all completed, in plan order."""
    return [
        task
        for task in tasks.values()
        if task.status == "pending"
        and all(
            tasks.get(d) is not None and tasks[d].status == "completed" for d in task.dependencies
        )
    ]


def dependency_results(tasks: Tasks, task: Task) -> dict[str, TaskResult]:
    """The results of ``task``'s direct dependencies, keyed by id."""
    return {dep: result for dep in task.dependencies if (result := tasks[dep].result) is not None}


def render_checklist(tasks: Tasks, *, with_results: bool = False, cancelled: bool = False) -> str:
    """AIME's Markdown progress list: children indented under their parent.

    ``[ ]`` pending, ``[~]`` in progress, ``[x]`` completed, ``[!]`` failed,
    ``[-]`` skipped; in a run that was ``cancelled``, ``[/]`` for each task it left
    unfinished (pending or in progress: none of them will run). Dependencies and, on
    request, results follow each line.
    """
    if not tasks:
        return "(no tasks yet)"
    children: dict[str | None, list[Task]] = {}
    for task in tasks.values():
        parent = task.parent_id if task.parent_id in tasks else None
        children.setdefault(parent, []).append(task)

    lines: list[str] = []
    # Depth first, each parent before its children (a stack, not a recursive closure:
    # that would be a reference cycle left for the garbage collector on every call).
    stack = [(task, 0) for task in reversed(children.get(None, []))]
    while stack:
        task, depth = stack.pop()
        indent = "  " * depth
        unfinished = task.status in ("pending", "in_progress")
        mark = CANCELLED_MARK if cancelled and unfinished else _CHECKBOX[task.status]
        line = f"{indent}- {mark} {task.id}: {task.title}"
        if task.dependencies:
            line += f" (after {', '.join(task.dependencies)})"
        if task.call is not None:
            line += f" [calls {task.call.tool}]"
        elif task.agent and task.team is None:
            line += f" [agent {task.agent}]"
        lines.append(line)
        if task.team is not None:
            lines.append(f"{indent}  - team ({task.team.mode}): {_team_members(task)}")
        if with_results and task.result is not None:
            summary = " ".join(task.result.summary.split())
            lines.append(f"{indent}  - result ({task.result.status}): {summary}")
        stack += [(child, depth + 1) for child in reversed(children.get(task.id, []))]
    return "\n".join(lines)


def _team_members(task: Task) -> str:
    """A team's members, each with the box of its latest turn once it has taken one."""
    assert task.team is not None
    latest = {turn.member: turn.status for turn in task.members}
    return ", ".join(
        f"{_CHECKBOX[latest[name]]} {name}" if name in latest else name
        for name in task.team.members
    )
