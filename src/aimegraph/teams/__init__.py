"""Agent units and teams of agents on one task.

``build_aime_graph(model, agents=[AgentUnit(...), ...])`` lets the planner assign a
unit (``TaskSpec.agent``) or a team (``TaskSpec.team``) to a task; a task naming
neither is done by the unit the matcher picks. Each team mode is a subgraph
(:func:`mode_graph`) inside the executor; ``aimegraph.graphs`` builds them with their
members (``build_team_executor``, ``build_team_graph``).
"""

from aimegraph.teams.modes import MODES, Delegation, Merged, TeamParts, TeamState, mode_graph
from aimegraph.teams.units import (
    AgentRegistry,
    AgentUnit,
    UnitActorFactory,
    UnitMatcher,
    load_agents,
)

__all__ = [
    "MODES",
    "AgentRegistry",
    "AgentUnit",
    "Delegation",
    "Merged",
    "TeamParts",
    "TeamState",
    "UnitActorFactory",
    "UnitMatcher",
    "load_agents",
    "mode_graph",
]
