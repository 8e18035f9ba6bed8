"""Offline drawing: workflow graphs (draw) and run plans (draw_plan).

These tests need the Graphviz `dot` executable (`apt-get install graphviz`); the
Mermaid ones do not.
"""

from __future__ import annotations

import logging
import re
import shutil
import socket
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from aimegraph.drawing import (
    STATUS_COLOURS,
    Drawing,
    GraphvizNotFoundError,
    draw,
    draw_plan,
)
from aimegraph.state import Task, TaskResult

needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None, reason="Graphviz `dot` missing: apt-get install graphviz"
)

SVG_NS = "{http://www.w3.org/2000/svg}"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class S(TypedDict):
    x: int


def _builder() -> StateGraph[S]:
    """START -> planner (a compiled draft -> validate subgraph) -?-> worker -> END."""
    sub = StateGraph(S)
    sub.add_node("draft", lambda s: {"x": 1})
    sub.add_node("validate", lambda s: {"x": 2})
    sub.add_edge(START, "draft")
    sub.add_edge("draft", "validate")
    sub.add_edge("validate", END)

    top = StateGraph(S)
    top.add_node("planner", sub.compile())
    top.add_node("worker", lambda s: {"x": 3})
    top.add_edge(START, "planner")
    top.add_conditional_edges(
        "planner", lambda s: "go" if s["x"] else "stop", {"go": "worker", "stop": END}
    )
    top.add_edge("worker", END)
    return top


@pytest.fixture
def graph() -> CompiledStateGraph[Any, Any, Any, Any]:
    return _builder().compile()


@pytest.fixture
def tasks() -> dict[str, Task]:
    done = TaskResult(status="completed", summary="found 3 sources")
    return {
        "t1": Task(id="t1", title="Gather sources", status="completed", result=done),
        "t2": Task(
            id="t2", title="Read them", status="in_progress", dependencies=("t1",), parent_id="t1"
        ),
        "t3": Task(id="t3", title="Draft", status="failed", dependencies=("t2",), attempts=2),
        "t4": Task(id="t4", title="Review", dependencies=("t3",)),
    }


def _svg_texts(drawing: Drawing) -> list[str]:
    root = ET.fromstring(bytes(drawing))
    assert root.tag == f"{SVG_NS}svg"
    return [el.text for el in root.iter(f"{SVG_NS}text") if el.text]


def _dot_clusters(drawing: Drawing) -> dict[str, list[str]]:
    """Cluster label -> labels of the nodes declared inside it, from the DOT source.

    The SVG does not nest nodes inside their cluster's <g>, so membership is read
    from the source that was rendered.
    """
    clusters: dict[str, list[str]] = {}
    for body in re.findall(r"subgraph cluster_\w+ \{\n(.*?)\n\t\}", drawing.source, re.S):
        header, *node_lines = body.splitlines()
        label = re.search(r"label=(\S+)", header)
        assert label is not None
        clusters[label.group(1)] = [
            m.group(1) for line in node_lines if (m := re.search(r"\[label=(\S+)", line))
        ]
    return clusters


# ----------------------------------------------------------------------- draw


@needs_dot
def test_draw_svg_has_every_node(graph: CompiledStateGraph[Any, Any, Any, Any]) -> None:
    drawing = draw(graph)
    assert drawing.format == "svg"
    assert isinstance(drawing.data, str)
    texts = _svg_texts(drawing)
    for name in ("start", "planner", "worker", "end", "go", "stop"):
        assert name in texts
    # Collapsed subgraph: its inner nodes are not drawn.
    assert "draft" not in texts


@needs_dot
def test_draw_conditional_edges_are_dashed(
    graph: CompiledStateGraph[Any, Any, Any, Any],
) -> None:
    source = draw(graph).source
    dashed = [line for line in source.splitlines() if "->" in line and "dashed" in line]
    assert len(dashed) == 2  # planner -> worker ("go"), planner -> end ("stop")
    assert all("label=go" in line or "label=stop" in line for line in dashed)


@needs_dot
def test_draw_png(graph: CompiledStateGraph[Any, Any, Any, Any]) -> None:
    drawing = draw(graph, format="png")
    assert isinstance(drawing.data, bytes)
    assert drawing.data.startswith(PNG_MAGIC)


def test_draw_mermaid(graph: CompiledStateGraph[Any, Any, Any, Any]) -> None:
    drawing = draw(graph, format="mermaid")
    text = str(drawing)
    assert isinstance(drawing.data, str)
    for name in ("planner", "worker", "__start__", "__end__"):
        assert name in text
    assert "-->" in text


@needs_dot
def test_draw_xray_groups_subgraph_nodes(
    graph: CompiledStateGraph[Any, Any, Any, Any],
) -> None:
    drawing = draw(graph, xray=True)
    texts = _svg_texts(drawing)
    assert {"draft", "validate", "worker"} <= set(texts)
    assert _dot_clusters(drawing) == {"planner": ["draft", "validate"]}
    root = ET.fromstring(bytes(drawing))
    cluster_labels = [
        "".join(g.itertext()) for g in root.iter(f"{SVG_NS}g") if g.get("class") == "cluster"
    ]
    assert any("planner" in label for label in cluster_labels)


def test_draw_xray_mermaid_expands_subgraph(
    graph: CompiledStateGraph[Any, Any, Any, Any],
) -> None:
    text = draw(graph, format="mermaid", xray=True).text
    assert "subgraph planner" in text
    assert "draft" in text and "validate" in text


@needs_dot
def test_draw_accepts_builder_and_langchain_graph(caplog: pytest.LogCaptureFixture) -> None:
    builder = _builder()
    assert "worker" in _svg_texts(draw(builder))
    assert "worker" in _svg_texts(draw(builder.compile().get_graph()))
    # Drawing a builder must not mark it compiled: LangGraph would then log a
    # "will not be reflected" warning on every later add_node.
    with caplog.at_level(logging.WARNING):
        builder2 = _builder()
        draw(builder2, format="mermaid")
        builder2.add_node("late", lambda s: {"x": 4})
    assert "already been compiled" not in caplog.text


def test_draw_rejects_unknown_inputs() -> None:
    with pytest.raises(TypeError, match="draw\\(\\) takes"):
        draw("not a graph")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="format must be one of"):
        draw(_builder(), format="gif")  # type: ignore[arg-type]


def test_draw_refuses_a_suffix_it_cannot_write(tmp_path: Path) -> None:
    # Issue 11: `draw -o x.jpg` used to write SVG bytes under any name.
    with pytest.raises(ValueError, match="suffix '.jpg'.*format="):
        draw(_builder(), tmp_path / "graph.jpg")
    assert not (tmp_path / "graph.jpg").exists()


@needs_dot
def test_draw_pdf_is_a_real_pdf(
    graph: CompiledStateGraph[Any, Any, Any, Any], tmp_path: Path
) -> None:
    # Issue 11: `draw -o x.pdf` used to write SVG bytes into the .pdf.
    drawing = draw(graph, tmp_path / "graph.pdf")
    assert drawing.format == "pdf"
    assert (tmp_path / "graph.pdf").read_bytes()[:5] == b"%PDF-"


@needs_dot
def test_draw_writes_path_with_format_from_suffix(
    graph: CompiledStateGraph[Any, Any, Any, Any], tmp_path: Path
) -> None:
    png = tmp_path / "out" / "graph.png"
    drawing = draw(graph, png)
    assert drawing.format == "png"
    assert png.read_bytes() == drawing.data

    svg = tmp_path / "graph.svg"
    draw(graph, str(svg))
    ET.parse(svg)

    mmd = tmp_path / "graph.mmd"
    draw(graph, mmd)
    assert "-->" in mmd.read_text()

    # An explicit format wins over the suffix.
    other = tmp_path / "graph.txt"
    assert draw(graph, other, format="mermaid").format == "mermaid"
    assert "-->" in other.read_text()


def test_missing_dot_gives_install_hint(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no `dot` on PATH
    with pytest.raises(GraphvizNotFoundError, match="apt-get install graphviz"):
        draw(graph)
    # Mermaid needs no renderer, so it still works.
    assert "-->" in draw(graph, format="mermaid").text


# ------------------------------------------------------------------ draw_plan


@needs_dot
def test_draw_plan_svg_colours_each_status(tasks: dict[str, Task]) -> None:
    drawing = draw_plan({"goal": "g", "tasks": tasks})
    joined = "\n".join(_svg_texts(drawing))
    for task_id in tasks:
        assert f"{task_id}:" in joined
    root = ET.fromstring(bytes(drawing))
    fills = {el.get("fill") for el in root.iter() if el.get("fill")}
    for status in ("completed", "in_progress", "failed", "pending"):
        assert STATUS_COLOURS[status][0] in fills, status
    # Dependency -> dependent edges, and the child in its parent's cluster.
    source = drawing.source
    assert "n0 -> n1\n" in source and "n1 -> n2\n" in source and "n2 -> n3\n" in source
    assert "subgraph cluster_n0" in source


@needs_dot
def test_draw_plan_inputs(tasks: dict[str, Task]) -> None:
    by_mapping = draw_plan(tasks).source
    assert draw_plan(list(tasks.values())).source == by_mapping
    as_dicts = {k: t.model_dump() for k, t in tasks.items()}
    assert draw_plan({"tasks": as_dicts}).source == by_mapping
    # A state from before planning has no tasks yet.
    assert "no tasks yet" in _svg_texts(draw_plan({"goal": "g"}))


@needs_dot
def test_draw_plan_shows_missing_dependency() -> None:
    drawing = draw_plan([Task(id="a", title="A", dependencies=("ghost",))])
    assert "(missing)" in _svg_texts(drawing)


@needs_dot
def test_draw_plan_escapes_awkward_titles() -> None:
    title = 'Use <b>bold</b> "quotes" \\N and \\l'
    drawing = draw_plan([Task(id="x", title=title)])
    joined = " ".join(_svg_texts(drawing))
    # Graphviz would otherwise read \N as the node name and <...> as HTML.
    assert '<b>bold</b> "quotes"' in joined
    assert "\\N" in joined and "\\l" in joined


def test_draw_plan_mermaid(tasks: dict[str, Task]) -> None:
    text = draw_plan(tasks, format="mermaid").text
    assert text.startswith("flowchart TD")
    for task_id in tasks:
        assert f"{task_id}:" in text
    for status in ("completed", "in_progress", "failed", "pending"):
        fill = STATUS_COLOURS[status][0]
        assert f"classDef {status} fill:{fill}" in text
        assert f":::{status}" in text
    assert "n0 --> n1" in text
    assert 'subgraph sg_n0 [" "]' in text


@needs_dot
def test_draw_plan_writes_path(tasks: dict[str, Task], tmp_path: Path) -> None:
    target = tmp_path / "plan.png"
    drawing = draw_plan(tasks, target)
    assert target.read_bytes().startswith(PNG_MAGIC)
    assert drawing.save(tmp_path / "copy.png").read_bytes() == target.read_bytes()


# ------------------------------------------------------------------ offline


@needs_dot
def test_everything_works_without_network(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    tasks: dict[str, Task],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_network(*args: object, **kwargs: object) -> Any:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)

    for fmt in ("svg", "png", "mermaid"):
        assert draw(graph, format=fmt, xray=True).data  # type: ignore[arg-type]
        assert draw_plan(tasks, format=fmt).data  # type: ignore[arg-type]


# ------------------------------------------------------------------ Drawing


def test_repr_methods_answer_only_for_their_format() -> None:
    svg = Drawing("<svg/>", "svg")
    png = Drawing(PNG_MAGIC + b"rest", "png")
    mermaid = Drawing("graph TD;\n a --> b", "mermaid")

    assert svg._repr_svg_() == "<svg/>"
    assert svg._repr_png_() is None and svg._repr_markdown_() is None

    assert png._repr_png_() == PNG_MAGIC + b"rest"
    assert png._repr_svg_() is None and png._repr_markdown_() is None

    assert mermaid._repr_markdown_() == "```mermaid\ngraph TD;\n a --> b\n```"
    assert mermaid._repr_svg_() is None and mermaid._repr_png_() is None

    assert str(mermaid) == "graph TD;\n a --> b"
    assert str(png) == repr(png) == "Drawing(format='png', 12 bytes)"
    assert bytes(svg) == b"<svg/>"
    with pytest.raises(TypeError):
        _ = png.text


@needs_dot
def test_real_drawings_display_inline(graph: CompiledStateGraph[Any, Any, Any, Any]) -> None:
    svg = draw(graph)._repr_svg_()
    assert svg is not None and "<svg" in svg
    png = draw(graph, format="png")._repr_png_()
    assert png is not None and png.startswith(PNG_MAGIC)
    markdown = draw(graph, format="mermaid")._repr_markdown_()
    assert markdown is not None and markdown.startswith("```mermaid\n")
