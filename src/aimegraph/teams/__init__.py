"""Agent units and teams of agents on one task.

``build_aime_graph(model, agents=[AgentUnit(...), ...])`` lets the planner assign a
unit (``TaskSpec.agent``) or a team (``TaskSpec.team``) to a task; a task naming
neither is done by the unit the matcher picks. This package holds the units, their
registry and the matcher; the team modes' nodes are :mod:`aimegraph.nodes.teams`,
their subgraphs :mod:`aimegraph.graphs.team_modes` (``mode_graph``), and
``aimegraph.graphs`` builds them with their members (``build_team_executor``,
``build_team_graph``).
"""

from aimegraph.lazy import moved
from aimegraph.teams.units import AgentRegistry, AgentUnit, UnitMatcher, load_agents

__all__ = ["AgentRegistry", "AgentUnit", "UnitMatcher", "load_agents"]

# Names that moved up to the nodes and graphs, kept here for a release.
__getattr__ = moved(
    __name__,
    {
        "MODES": "aimegraph.nodes.teams.common",
        "TeamParts": "aimegraph.nodes.teams.common",
        "TeamState": "aimegraph.nodes.teams.common",
        "Delegation": "aimegraph.nodes.teams.hierarchical",
        "Merged": "aimegraph.nodes.teams.broadcast",
        "UnitActorFactory": "aimegraph.nodes.actor_factory",
        "mode_graph": "aimegraph.graphs.team_modes",
    },
)
