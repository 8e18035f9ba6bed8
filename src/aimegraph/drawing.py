"""Offline drawing of workflow graphs and of a run's plan.

Two entry points, both returning a :class:`Drawing` that notebooks display inline:

- :func:`draw` renders a LangGraph workflow (a compiled graph, an uncompiled
  ``StateGraph`` builder, or a ``langchain_core`` ``Graph``), optionally with its
  subgraphs expanded (``xray``).
- :func:`draw_plan` renders a run's task DAG (the ``tasks`` of an ``AimeState``)
  with one colour per task status.

Nothing here touches the network. LangChain's own ``draw_mermaid_png`` posts the
diagram to the mermaid.ink web service, which fails on air-gapped machines and
leaks the graph's structure, so SVG, PNG and PDF are produced by the local Graphviz
``dot`` executable (Debian package ``graphviz``) through the Python ``graphviz``
binding, and Mermaid output is plain text that is never rendered here.

The binding comes with the ``[draw]`` extra and is imported only when a drawing is
rendered, so ``import aimegraph`` and Mermaid output work on the base install.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast, get_args

from langchain_core.runnables import Runnable
from langchain_core.runnables.graph import Graph
from langgraph.constants import END, START
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel
from langgraph.pregel.protocol import PregelProtocol

from aimegraph.state import Task

if TYPE_CHECKING:
    import graphviz

__all__ = [
    "STATUS_COLOURS",
    "DrawFormat",
    "Drawing",
    "GraphvizNotFoundError",
    "draw",
    "draw_plan",
]

DrawFormat: TypeAlias = Literal["svg", "png", "pdf", "mermaid"]
"""Output formats: SVG, PNG and PDF come from Graphviz ``dot``; Mermaid is text."""

Drawable: TypeAlias = "Graph | Runnable[Any, Any] | StateGraph[Any, Any, Any, Any]"
"""What :func:`draw` accepts (compiled LangGraph graphs are Runnables)."""

_FORMATS: tuple[str, ...] = get_args(DrawFormat)

# Used only when no ``format`` is passed, so that ``draw(g, "graph.png")`` does not
# quietly write SVG bytes into a file called .png; other suffixes are refused.
_SUFFIX_FORMATS: dict[str, DrawFormat] = {
    ".svg": "svg",
    ".png": "png",
    ".pdf": "pdf",
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
}

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

_FONT = "Helvetica,Arial,sans-serif"
_NODE_FILL = "#f2f0ff"  # LangGraph's own Mermaid node colour, so both outputs look alike.
_LABEL_WIDTH = 30
_LABEL_LINES = 4


class GraphvizNotFoundError(RuntimeError):
    """Graphviz is missing: the Python binding (the ``[draw]`` extra) or the ``dot``
    executable (the system package), both needed for SVG, PNG and PDF."""


@dataclass(frozen=True, repr=False)
class Drawing:
    """A rendered diagram that Jupyter displays inline.

    ``data`` is ``str`` for ``"svg"`` (the SVG document) and ``"mermaid"`` (the
    Mermaid source), and ``bytes`` for ``"png"`` and ``"pdf"``. ``source`` is what
    was rendered: the DOT source for SVG, PNG and PDF, the Mermaid text for Mermaid; it is handy for
    debugging a layout or pasting into another tool.
    """

    data: bytes | str
    format: DrawFormat
    source: str = field(default="", compare=False)

    # IPython asks every _repr_*_ method and shows the richest one that does not
    # return None, so each method answers only for its own format.
    def _repr_svg_(self) -> str | None:
        return self.text if self.format == "svg" else None

    def _repr_png_(self) -> bytes | None:
        return bytes(self) if self.format == "png" else None

    def _repr_markdown_(self) -> str | None:
        # JupyterLab >= 4.1 and VS Code render ```mermaid blocks locally.
        return f"```mermaid\n{self.text}\n```" if self.format == "mermaid" else None

    @property
    def text(self) -> str:
        """The drawing as text (SVG or Mermaid); raises for PNG, which is binary."""
        if isinstance(self.data, str):
            return self.data
        raise TypeError(f"a {self.format} drawing is binary; use bytes(drawing) instead")

    def save(self, path: str | PathLike[str]) -> Path:
        """Write the drawing to ``path`` (parent folders are created) and return it."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(bytes(self))
        return target

    def __bytes__(self) -> bytes:
        return self.data.encode("utf-8") if isinstance(self.data, str) else self.data

    def __str__(self) -> str:
        # print(draw(g, format="mermaid")) gives paste-able Mermaid; binary PNG
        # data would be noise, so it falls back to the short repr.
        return self.data if isinstance(self.data, str) else repr(self)

    def __repr__(self) -> str:
        return f"Drawing(format={self.format!r}, {len(self.data)} {_unit(self.data)})"


def _unit(data: bytes | str) -> str:
    return "chars" if isinstance(data, str) else "bytes"


# --------------------------------------------------------------------------- draw


def draw(
    graph: Drawable,
    path: str | PathLike[str] | None = None,
    *,
    format: DrawFormat | None = None,
    xray: bool | int = False,
) -> Drawing:
    """Render a workflow graph offline as SVG, PNG, PDF or Mermaid.

    Args:
        graph: a compiled LangGraph graph, an uncompiled ``StateGraph`` builder
            (compiled here without a checkpointer; the builder is left as it was),
            a ``langchain_core.runnables.graph.Graph``, or any LangChain
            ``Runnable``.
        path: if given, the drawing is also written there.
        format: ``"svg"``, ``"png"``, ``"pdf"`` or ``"mermaid"``. When omitted it
            follows the suffix of ``path`` (``.svg``, ``.png``, ``.pdf``, ``.mmd``,
            ``.mermaid``; other suffixes are refused), else SVG.
        xray: expand subgraphs: ``True`` for all levels, an ``int`` for that many
            levels. Only LangGraph graphs have subgraphs; other inputs ignore it.

    Returns:
        A :class:`Drawing`; in a notebook it displays inline.

    Raises:
        GraphvizNotFoundError: SVG, PNG or PDF was asked for and the ``[draw]``
            extra or the Graphviz ``dot`` executable is not installed.
        ValueError: an unknown ``format``, or a ``path`` suffix that names none.
    """
    fmt = _resolve_format(format, path)
    lc_graph = _to_graph(graph, xray)
    if fmt == "mermaid":
        # Graph.draw_mermaid only builds text; draw_mermaid_png would call mermaid.ink.
        text = lc_graph.draw_mermaid()
        drawing = Drawing(text, "mermaid", source=text)
    else:
        drawing = _render(_workflow_dot(lc_graph), fmt)
    if path is not None:
        drawing.save(path)
    return drawing


def _resolve_format(format: str | None, path: str | PathLike[str] | None) -> DrawFormat:
    if format is None:
        suffix = Path(path).suffix.lower() if path is not None else ""
        if suffix and suffix not in _SUFFIX_FORMATS:
            raise ValueError(
                f"cannot tell the drawing format from the suffix {suffix!r}: use one of "
                f"{', '.join(_SUFFIX_FORMATS)}, or pass format= ({', '.join(_FORMATS)})"
            )
        return _SUFFIX_FORMATS.get(suffix, "svg")
    if format not in _FORMATS:
        raise ValueError(f"format must be one of {', '.join(_FORMATS)}; got {format!r}")
    return cast(DrawFormat, format)


def _to_graph(graph: object, xray: bool | int) -> Graph:
    if isinstance(graph, Graph):
        return graph
    if isinstance(graph, StateGraph):
        # StateGraph.compile() flips builder.compiled to True, after which every
        # add_node/add_edge warns that it "will not be reflected". Drawing a builder
        # mid-construction must not cause that, so the flag is put back.
        builder = graph
        was_compiled = builder.compiled
        try:
            graph = builder.compile()
        finally:
            builder.compiled = was_compiled
    if isinstance(graph, PregelProtocol):
        # Pregel and RemoteGraph both take xray; a plain Runnable.get_graph does not.
        return graph.get_graph(xray=xray)
    if isinstance(graph, Runnable):
        return graph.get_graph()
    raise TypeError(
        "draw() takes a compiled LangGraph graph, a StateGraph builder, a "
        f"langchain_core Graph or a Runnable; got {type(graph).__name__}"
    )


def _workflow_dot(graph: Graph) -> graphviz.Digraph:
    dot = _digraph("workflow")
    # DOT ids are synthetic: the binding reads "planner:draft" in an edge as node
    # "planner", port "draft", so the real ids only ever appear in labels.
    ids = {node_id: f"n{i}" for i, node_id in enumerate(graph.nodes)}

    # Subgraph nodes (xray) have ids "parent:child[:grandchild]"; group them into
    # nested clusters by prefix, the way LangGraph's Mermaid output does.
    root = _Cluster("", itertools.count())
    for node_id in graph.nodes:
        *prefix, _ = node_id.split(":")
        cluster = root
        for depth in range(len(prefix)):
            cluster = cluster.child(":".join(prefix[: depth + 1]))
        cluster.members.append(node_id)

    def add_node(target: graphviz.Digraph, node_id: str) -> None:
        node = graph.nodes[node_id]
        if node_id == START:
            target.node(ids[node_id], "start", **_TERMINAL_ATTRS, shape="circle")
        elif node_id == END:
            target.node(ids[node_id], "end", **_TERMINAL_ATTRS, shape="doublecircle")
        elif isinstance(node.data, Pregel | Graph):
            # A collapsed subgraph: a 3-D box hints that xray=True would open it.
            target.node(
                ids[node_id],
                _label(node.name),
                shape="box3d",
                style="filled",
                fillcolor=_NODE_FILL,
                tooltip=_label(f"{node_id} (subgraph; draw with xray=True to expand)"),
            )
        else:
            target.node(ids[node_id], _label(node.name), tooltip=_label(node_id))

    def emit(target: graphviz.Digraph, cluster: _Cluster) -> None:
        for node_id in cluster.members:
            add_node(target, node_id)
        for sub in cluster.children.values():
            with target.subgraph(name=f"cluster_{sub.serial}") as inner:
                inner.attr(
                    label=_label(sub.name.rsplit(":", 1)[-1]),
                    style="rounded,dashed",
                    color="#9e9e9e",
                    fontcolor="#616161",
                )
                emit(inner, sub)

    emit(dot, root)
    for edge in graph.edges:
        attrs: dict[str, str] = {}
        if edge.data is not None:
            attrs["label"] = _label(str(edge.data))
        if edge.conditional:
            attrs["style"] = "dashed"
        dot.edge(ids[edge.source], ids[edge.target], **attrs)
    return dot


_TERMINAL_ATTRS: dict[str, str] = {
    "style": "filled",
    "fillcolor": "#424242",
    "color": "#424242",
    "fontcolor": "white",
    "fontsize": "9",
    "width": "0.35",
    "margin": "0.02",
}


class _Cluster:
    """One level of the subgraph prefix tree used for xray clusters."""

    def __init__(self, name: str, serials: Iterator[int]) -> None:
        self.name = name
        self.members: list[str] = []
        self.children: dict[str, _Cluster] = {}
        # Graphviz cluster names must be unique across the whole graph; a counter
        # shared by the tree (not the prefix, which may hold any character) does it
        # and keeps the DOT source the same from one call to the next.
        self._serials = serials
        self.serial = next(serials)

    def child(self, name: str) -> _Cluster:
        if name not in self.children:
            self.children[name] = _Cluster(name, self._serials)
        return self.children[name]


# ---------------------------------------------------------------------- draw_plan


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


# ------------------------------------------------------------------------ helpers


def _graphviz() -> ModuleType:
    """The ``graphviz`` binding, imported only when a drawing is rendered."""
    try:
        import graphviz
    except ImportError as exc:
        raise GraphvizNotFoundError(
            "drawing SVG, PNG or PDF needs the Python graphviz package, which the base "
            "install leaves out: pip install 'aimegraph[draw]', plus the Graphviz system "
            "package for its `dot` executable (apt-get install graphviz, brew install "
            "graphviz or conda install graphviz). format='mermaid' needs neither."
        ) from exc
    return graphviz


def _digraph(name: str) -> graphviz.Digraph:
    digraph: graphviz.Digraph = _graphviz().Digraph(
        name,
        graph_attr={"rankdir": "TB", "fontname": _FONT, "fontsize": "11", "nodesep": "0.4"},
        node_attr={
            "shape": "box",
            "style": "rounded,filled",
            "fillcolor": _NODE_FILL,
            "fontname": _FONT,
            "fontsize": "11",
        },
        edge_attr={"fontname": _FONT, "fontsize": "9", "color": "#555555"},
    )
    return digraph


def _label(*lines: str) -> str:
    """A DOT label showing ``lines`` literally, one per line.

    Backslashes are doubled so that text such as ``\\N`` or ``\\l`` in a task title is
    not read as a DOT escape, lines are joined with DOT's ``\\n``, and ``nohtml``
    stops a title like ``<draft>`` from being taken for an HTML-like label.
    """
    escaped = (line.replace("\\", "\\\\") for text in lines for line in text.splitlines())
    label: str = _graphviz().nohtml("\\n".join(escaped))
    return label


def _render(dot: graphviz.Digraph, fmt: DrawFormat) -> Drawing:
    try:
        # pipe() runs the local `dot` in a subprocess: no files, no network.
        data: bytes = dot.pipe(format=fmt)
    except _graphviz().ExecutableNotFound as exc:
        raise GraphvizNotFoundError(
            "Graphviz's `dot` executable was not found on PATH, and it is needed for "
            f"format={fmt!r}. Install the Graphviz system package: `apt-get install "
            "graphviz` (Debian/Ubuntu), `brew install graphviz` (macOS) or `conda install "
            "graphviz`, or use "
            "format='mermaid', which needs no renderer."
        ) from exc
    if fmt == "svg":
        return Drawing(data.decode("utf-8"), "svg", source=dot.source)
    return Drawing(data, fmt, source=dot.source)
