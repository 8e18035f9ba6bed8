"""The run machinery, below the tools and the graphs: the engine's event loop
(:mod:`.loop`), what one run holds on it and releases when it ends (:mod:`.scope`),
the compiled graph that opens and closes that scope for every run
(:mod:`.scoped_graph`), and stopping a run at a step boundary on a signal
(:mod:`.drain`). It knows LangGraph and nothing of aimegraph's graphs or tools."""
