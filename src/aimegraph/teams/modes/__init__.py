"""Team modes (BMW Agents' workflow types) as LangGraph subgraphs, one per mode.

Every mode graph takes the executor's input (:class:`ActorInput` whose task has a
``team``) and hands back its output (the task with its result and its members'
turns, progress updates, usage), so it drops into the executor, or any graph, in
place of a single actor. A member's turn is the actor graph itself, built as a
team member (``build_actor_graph(member=True)``) and added as a node: its ReAct
loop, tools, approvals, ``ask_human``, streaming and checkpoints are the single
actor's. Turns are dispatched with ``Send`` and each runs in its own super-step
(parallel ones in the same), so a resumed run never redoes a finished turn.

* ``sequential``: members in order, each handed the previous result; another round
  when the last member fails, up to ``max_rounds``.
* ``joint``: one shared conversation in turns (round robin, or the model picks the
  next speaker with ``speaker="model"``) until a proposal stands that every other
  member has heard without objecting, or ``max_rounds`` rounds.
* ``hierarchical``: the first member leads: it splits the task (a structured call),
  the parts go to members in parallel (``Send``), failed parts are split again up to
  ``max_rounds`` times, and the lead integrates the results in a turn of its own.
* ``broadcast``: every member does the task independently, in parallel; a vote
  (strict majority of the completed results, on the artifact ``answer`` or else the
  summary) or, without a majority, a merge by the model; the agreement is reported.
"""

from aimegraph.teams.modes.broadcast import Merged
from aimegraph.teams.modes.common import (
    MODES,
    Conclude,
    M,  # noqa: F401  kept importable from here for a release
    TeamParts,
    TeamState,
    make_finish_node,
)
from aimegraph.teams.modes.graph import mode_graph
from aimegraph.teams.modes.hierarchical import Delegation, Part
from aimegraph.teams.modes.joint import NextSpeaker

__all__ = [
    "MODES",
    "Conclude",
    "Delegation",
    "Merged",
    "NextSpeaker",
    "Part",
    "TeamParts",
    "TeamState",
    "make_finish_node",
    "mode_graph",
]
