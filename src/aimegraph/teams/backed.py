"""Moved: the nodes to :mod:`aimegraph.nodes.teams.backed`, the graph to
:mod:`aimegraph.graphs.backed_unit`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(
    __name__,
    {
        "build_backed_unit_graph": "aimegraph.graphs.backed_unit",
        "A2AUnitState": "aimegraph.nodes.teams.backed",
    },
)
