"""Agent units and teams of agents on one task (DESIGN.md section 9).

``build_aime_graph(model, agents=[AgentUnit(...), ...])`` lets the planner assign a
unit (``TaskSpec.agent``) or a team (``TaskSpec.team``) to a task; a task naming
neither is done by the unit the matcher picks. Each team mode is a subgraph
(:func:`build_team_graph`) inside the executor (:func:`build_team_executor`).
"""

from aimegraph.teams.executor import build_team_executor
from aimegraph.teams.modes import (
    MODES,
    Delegation,
    Merged,
    TeamParts,
    TeamState,
    build_team_graph,
    mode_graph,
    team_parts,
)
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
    "build_team_executor",
    "build_team_graph",
    "load_agents",
    "mode_graph",
    "team_parts",
]
