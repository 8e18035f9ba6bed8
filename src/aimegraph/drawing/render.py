"""A rendered diagram (Drawing), its formats, and Graphviz, imported when one is rendered."""

from __future__ import annotations

from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Literal, TypeAlias, cast, get_args

if TYPE_CHECKING:
    import graphviz


__all__ = ["DrawFormat", "Drawing", "GraphvizNotFoundError"]

DrawFormat: TypeAlias = Literal["svg", "png", "pdf", "mermaid"]
"""Output formats: SVG, PNG and PDF come from Graphviz ``dot``; Mermaid is text."""

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

_FONT = "Helvetica,Arial,sans-serif"
_NODE_FILL = "#f2f0ff"  # LangGraph's own Mermaid node colour, so both outputs look alike.


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
