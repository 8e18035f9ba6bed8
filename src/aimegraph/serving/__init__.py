"""aimegraph served to other agents: ``aimegraph a2a serve`` (:mod:`aimegraph.serving.a2a`,
needs the ``[a2a]`` extra) and ``aimegraph mcp serve`` (:mod:`aimegraph.serving.mcp`,
needs the ``[mcp]`` extra). Both start, follow, answer and cancel runs through
:class:`aimegraph.serving.runs.ServedRuns`, so through :mod:`aimegraph.steering`."""
