"""Modules and names that moved (issue 40 point 3) stay importable from their old paths
for a release: the old module hands each name on from its new home, the same object,
with a DeprecationWarning naming where it went; a name that never lived there is still
an AttributeError."""

from __future__ import annotations

import importlib

import pytest

MOVED = [
    # (old module, new module, a name that moved)
    ("aimegraph.tools.loop", "aimegraph.running.loop", "engine_loop"),
    ("aimegraph.tools.scope", "aimegraph.running.scope", "RunScope"),
    ("aimegraph.graphs.scoped", "aimegraph.running.scoped_graph", "RunScopedGraph"),
    ("aimegraph.graphs.stopping", "aimegraph.running.drain", "SignalDrain"),
    ("aimegraph.models.scripted", "aimegraph.models.offline.scripted", "ScriptedChatModel"),
    ("aimegraph.models.scenario", "aimegraph.models.offline.scenario", "Scenario"),
    ("aimegraph.models.echo", "aimegraph.models.offline.echo", "echo_reply"),
    ("aimegraph.models.fuzz", "aimegraph.models.offline.fuzz", "FuzzChatModel"),
    ("aimegraph.models.teaching", "aimegraph.models.offline.teaching", "citation_models"),
    ("aimegraph.eval.runner", "aimegraph.eval.harness", "evaluate"),
    ("aimegraph.eval.runners", "aimegraph.eval.task_run", "run_system"),
    ("aimegraph.eval.runs", "aimegraph.eval.listing", "list_evals"),
    ("aimegraph.eval.outcome", "aimegraph.eval.rollout_io", "Outcome"),
    ("aimegraph.nodes.executor", "aimegraph.nodes.actor", "make_react_node"),
    ("aimegraph.nodes.scheduler", "aimegraph.nodes.executor", "make_executor_node"),
    ("aimegraph.nodes.factory", "aimegraph.nodes.actor_factory", "DefaultActorFactory"),
    ("aimegraph.nodes.sections", "aimegraph.memory.sections", "facts_section"),
    ("aimegraph.memory.nodes", "aimegraph.nodes.memory", "make_run_record_node"),
    ("aimegraph.memory", "aimegraph.nodes.context", "fit_context"),
    ("aimegraph.optimizer.online", "aimegraph.nodes.online", "make_online_node"),
    ("aimegraph.teams", "aimegraph.graphs.team_modes", "mode_graph"),
    ("aimegraph.teams", "aimegraph.nodes.actor_factory", "UnitActorFactory"),
    ("aimegraph.teams.modes", "aimegraph.nodes.teams.common", "TeamParts"),
    ("aimegraph.teams.modes.common", "aimegraph.nodes.teams.common", "MODES"),
    ("aimegraph.teams.modes.graph", "aimegraph.graphs.team_modes", "mode_graph"),
    ("aimegraph.teams.modes.broadcast", "aimegraph.nodes.teams.broadcast", "Merged"),
    ("aimegraph.teams.modes.hierarchical", "aimegraph.nodes.teams.hierarchical", "Delegation"),
    ("aimegraph.teams.modes.joint", "aimegraph.nodes.teams.joint", "NextSpeaker"),
    ("aimegraph.teams.modes.sequential", "aimegraph.nodes.teams.sequential", "conclude"),
    ("aimegraph.teams.backed", "aimegraph.graphs.backed_unit", "build_backed_unit_graph"),
]


@pytest.mark.parametrize(("old", "new", "name"), MOVED)
def test_an_old_path_hands_on_the_moved_name(old: str, new: str, name: str) -> None:
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=f"{old}.{name} moved to {new}.{name}"):
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), name)


def test_a_name_that_never_lived_there_is_still_missing(recwarn: pytest.WarningsRecorder) -> None:
    for old in ("aimegraph.tools.loop", "aimegraph.teams"):
        with pytest.raises(AttributeError, match=f"'{old}' has no attribute 'nothing_here'"):
            importlib.import_module(old).nothing_here  # noqa: B018
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]
