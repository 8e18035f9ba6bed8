"""Moved: the team modes' nodes to :mod:`aimegraph.nodes.teams` (one module per mode),
their subgraphs to :mod:`aimegraph.graphs.team_modes`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(
    __name__,
    {
        "MODES": "aimegraph.nodes.teams.common",
        "Conclude": "aimegraph.nodes.teams.common",
        "M": "aimegraph.nodes.teams.common",
        "TeamParts": "aimegraph.nodes.teams.common",
        "TeamState": "aimegraph.nodes.teams.common",
        "make_finish_node": "aimegraph.nodes.teams.common",
        "Merged": "aimegraph.nodes.teams.broadcast",
        "Delegation": "aimegraph.nodes.teams.hierarchical",
        "Part": "aimegraph.nodes.teams.hierarchical",
        "NextSpeaker": "aimegraph.nodes.teams.joint",
        "mode_graph": "aimegraph.graphs.team_modes",
    },
)
