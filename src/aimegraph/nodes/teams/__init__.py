"""The nodes of the team modes (BMW Agents' workflow types), one module per mode:
:mod:`.sequential`, :mod:`.joint`, :mod:`.hierarchical`, :mod:`.broadcast`; what they
share in :mod:`.common`, and the nodes of a unit backed by an agent of its own
(:mod:`.backed`). :mod:`aimegraph.graphs.team_modes` wires them into one subgraph per
mode."""
