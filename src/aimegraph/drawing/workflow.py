"""Drawing a LangGraph workflow (draw), its subgraphs as clusters with ``xray``."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from os import PathLike
from typing import TYPE_CHECKING, Any, TypeAlias

from langchain_core.runnables import Runnable
from langchain_core.runnables.graph import Graph
from langgraph.constants import END, START
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel
from langgraph.pregel.protocol import PregelProtocol

from aimegraph.drawing.render import (
    _NODE_FILL,
    DrawFormat,
    Drawing,
    _digraph,
    _label,
    _render,
    _resolve_format,
)

if TYPE_CHECKING:
    import graphviz

__all__ = ["Drawable", "draw"]

Drawable: TypeAlias = "Graph | Runnable[Any, Any] | StateGraph[Any, Any, Any, Any]"
"""What :func:`draw` accepts (compiled LangGraph graphs are Runnables)."""


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
