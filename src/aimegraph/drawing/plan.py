"""Drawing a run's task DAG (draw_plan), one colour per task status."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from os import PathLike
from typing import TYPE_CHECKING

from aimegraph.drawing.render import (
    DrawFormat,
    Drawing,
    _digraph,
    _label,
    _render,
    _resolve_format,
)
from aimegraph.state import Task

if TYPE_CHECKING:
    import graphviz

__all__ = ["STATUS_COLOURS", "draw_plan"]

STATUS_COLOURS: Mapping[str, tuple[str, str]] = {
    # status: (fill, border). Light fills keep the black label text readable; the
    # darker border carries the hue for readers who print in greyscale.
    "completed": ("#c8e6c9", "#2e7d32"),
    "in_progress": ("#bbdefb", "#1565c0"),
    "failed": ("#ffcdd2", "#c62828"),
    "skipped": ("#e0e0e0", "#757575"),
    "pending": ("#ffffff", "#616161"),
}
"""Fill and border colour of a task node per ``Task.status`` in :func:`draw_plan`."""

_LABEL_WIDTH = 30
_LABEL_LINES = 4


def draw_plan(
    state_or_tasks: object,
    path: str | PathLike[str] | None = None,
    *,
    format: DrawFormat | None = None,
) -> Drawing:
    """Render a run's task DAG, one colour per task status.

    Args:
        state_or_tasks: an ``AimeState`` mapping (its ``"tasks"`` are drawn, with
            a plan awaiting approval, ``"proposal"``, applied to them), a
            ``StateSnapshot`` from ``graph.get_state(config)``, a mapping
            ``id -> Task``, or an iterable of ``Task``. Tasks may also be plain
            dicts (as LangGraph Server returns them).
        path: if given, the drawing is also written there.
        format: as for :func:`draw`.

    Each task is a box labelled ``"id: title"`` and its status, filled per
    :data:`STATUS_COLOURS`; an arrow runs from each dependency to its dependent;
    sub-tasks sit in a dashed cluster with their parent. Dependencies on unknown
    ids are drawn as dashed "missing" boxes rather than dropped, so a broken plan
    is visible in the picture.
    """
    fmt = _resolve_format(format, path)
    tasks = _coerce_tasks(state_or_tasks)
    plan = _Plan(tasks)
    if fmt == "mermaid":
        text = plan.mermaid()
        drawing = Drawing(text, "mermaid", source=text)
    else:
        drawing = _render(plan.dot(), fmt)
    if path is not None:
        drawing.save(path)
    return drawing


def _coerce_tasks(obj: object) -> dict[str, Task]:
    # StateSnapshot (graph.get_state) keeps the state in .values; a dict's
    # .values is a method, so this does not misfire on plain mappings.
    values = getattr(obj, "values", None)
    if isinstance(values, Mapping):
        obj = values
    if isinstance(obj, Mapping):
        if "proposal" in obj and not _is_task_like(obj["proposal"]):
            # A plan awaiting approval: the tasks as they would be once approved.
            obj = {**(obj.get("tasks") or {}), **(obj["proposal"] or {})}
        elif "tasks" in obj and not _is_task_like(obj["tasks"]):
            obj = obj["tasks"] or {}
        elif not all(_is_task_like(value) for value in obj.values()):
            if any(_is_task_like(value) for value in obj.values()):
                raise TypeError("draw_plan() got a mapping mixing tasks and other values")
            # A state from before the planner ran has no "tasks" key yet.
            obj = {}
    if isinstance(obj, Mapping):
        items: Iterable[object] = obj.values()
    elif isinstance(obj, Iterable) and not isinstance(obj, str | bytes):
        items = obj
    else:
        raise TypeError(
            "draw_plan() takes a state with 'tasks', a mapping id -> Task or an "
            f"iterable of Task; got {type(obj).__name__}"
        )
    tasks: dict[str, Task] = {}
    for item in items:
        task = item if isinstance(item, Task) else Task.model_validate(item)
        tasks[task.id] = task
    return tasks


def _is_task_like(value: object) -> bool:
    return isinstance(value, Task) or (
        isinstance(value, Mapping) and "id" in value and "title" in value
    )


class _Plan:
    """The task DAG laid out once, emitted as DOT or as Mermaid."""

    def __init__(self, tasks: dict[str, Task]) -> None:
        self.tasks = tasks
        self.ids = {task_id: f"n{i}" for i, task_id in enumerate(tasks)}
        self.missing: dict[str, str] = {}
        for task in tasks.values():
            for dep in task.dependencies:
                if dep not in tasks and dep not in self.missing:
                    self.missing[dep] = f"m{len(self.missing)}"
        self.children: dict[str, list[str]] = {task_id: [] for task_id in tasks}
        for task in tasks.values():
            if task.parent_id in tasks and task.parent_id != task.id:
                self.children[task.parent_id].append(task.id)
        # Roots are tasks without a known parent. Tasks caught in a parent_id cycle
        # (invalid, but this is a debugging aid) are reached by nobody; the walk in
        # order() appends them at top level so no task silently disappears.
        self.roots = [t.id for t in tasks.values() if t.parent_id not in tasks]

    def order(self) -> list[tuple[str, int]]:
        """Depth-first (task id, depth) in plan order, each task exactly once."""
        seen: set[str] = set()
        out: list[tuple[str, int]] = []

        def walk(task_id: str, depth: int) -> None:
            if task_id in seen:
                return
            seen.add(task_id)
            out.append((task_id, depth))
            for child in self.children[task_id]:
                walk(child, depth + 1)

        for task_id in self.roots:
            walk(task_id, 0)
        for task_id in self.tasks:
            walk(task_id, 0)
        return out

    def label_lines(self, task: Task) -> list[str]:
        lines = textwrap.wrap(
            f"{task.id}: {task.title}",
            width=_LABEL_WIDTH,
            max_lines=_LABEL_LINES,
            placeholder=" ...",
        ) or [task.id]
        # The status is spelled out too: colour alone fails colour-blind readers
        # and greyscale prints.
        status: str = task.status
        if task.attempts > 1:
            status += f", {task.attempts} attempts"
        return [*lines, f"({status})"]

    def tooltip(self, task: Task) -> str:
        parts = [task.description]
        if task.result is not None:
            parts.append(f"result ({task.result.status}): {task.result.summary}")
        return "\n".join(p for p in parts if p) or task.title

    # -- DOT

    def dot(self) -> graphviz.Digraph:
        dot = _digraph("plan")
        dot.attr("node", shape="box", style="rounded,filled")
        if not self.tasks:
            dot.node("empty", "no tasks yet", shape="plaintext", style="")
            return dot

        def emit(target: graphviz.Digraph, task_id: str, walked: set[str]) -> None:
            walked.add(task_id)
            kids = [k for k in self.children[task_id] if k not in walked]
            if not kids:
                self.dot_node(target, task_id)
                return
            with target.subgraph(name=f"cluster_{self.ids[task_id]}") as inner:
                inner.attr(label="", style="rounded,dashed", color="#9e9e9e")
                self.dot_node(inner, task_id)
                for kid in kids:
                    emit(inner, kid, walked)
                    # Invisible edge: keeps the parent above its sub-tasks.
                    inner.edge(self.ids[task_id], self.ids[kid], style="invis")

        walked: set[str] = set()
        for task_id, depth in self.order():
            if depth == 0 and task_id not in walked:
                emit(dot, task_id, walked)
        for dep, mid in self.missing.items():
            dot.node(
                mid,
                _label(dep, "(missing)"),
                style="rounded,dashed",
                color="#c62828",
                fontcolor="#c62828",
            )
        for task in self.tasks.values():
            for dep in task.dependencies:
                source = self.ids.get(dep) or self.missing[dep]
                dot.edge(source, self.ids[task.id])
        return dot

    def dot_node(self, target: graphviz.Digraph, task_id: str) -> None:
        task = self.tasks[task_id]
        fill, border = STATUS_COLOURS.get(task.status, STATUS_COLOURS["pending"])
        target.node(
            self.ids[task_id],
            _label(*self.label_lines(task)),
            fillcolor=fill,
            color=border,
            penwidth="2" if task.status == "in_progress" else "1",
            tooltip=_label(self.tooltip(task)),
        )

    # -- Mermaid

    def mermaid(self) -> str:
        lines = ["flowchart TD"]
        if not self.tasks:
            lines.append('    empty["no tasks yet"]')
            return "\n".join(lines) + "\n"
        walked: set[str] = set()

        def emit(task_id: str, indent: str) -> None:
            walked.add(task_id)
            task = self.tasks[task_id]
            kids = [k for k in self.children[task_id] if k not in walked]
            text = "<br/>".join(map(_mermaid_text, self.label_lines(task)))
            node = f'{self.ids[task_id]}["{text}"]:::{task.status}'
            if not kids:
                lines.append(indent + node)
                return
            lines.append(f'{indent}subgraph sg_{self.ids[task_id]} [" "]')
            lines.append(indent + "    " + node)
            for kid in kids:
                emit(kid, indent + "    ")
            lines.append(indent + "end")

        for task_id, depth in self.order():
            if depth == 0 and task_id not in walked:
                emit(task_id, "    ")
        for dep, mid in self.missing.items():
            lines.append(f'    {mid}["{_mermaid_text(dep)}<br/>(missing)"]:::missing')
        for task in self.tasks.values():
            for dep in task.dependencies:
                source = self.ids.get(dep) or self.missing[dep]
                lines.append(f"    {source} --> {self.ids[task.id]}")
        for status, (fill, border) in STATUS_COLOURS.items():
            lines.append(f"    classDef {status} fill:{fill},stroke:{border},color:#000")
        lines.append(
            "    classDef missing fill:#fff,stroke:#c62828,color:#c62828,stroke-dasharray:4 3"
        )
        return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    # Mermaid entity codes: '#' first, since the other replacements introduce it.
    for char, code in (("#", "#35;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;")):
        text = text.replace(char, code)
    return text
