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

from aimegraph.drawing.plan import STATUS_COLOURS, draw_plan
from aimegraph.drawing.render import DrawFormat, Drawing, GraphvizNotFoundError
from aimegraph.drawing.workflow import Drawable, draw

__all__ = [
    "STATUS_COLOURS",
    "DrawFormat",
    "Drawable",
    "Drawing",
    "GraphvizNotFoundError",
    "draw",
    "draw_plan",
]
