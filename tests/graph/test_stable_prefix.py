"""Stable prompt prefixes (issue 34 point 5): within a run, every call of a role opens
with the same system message, so that provider prompt caches hit; an actor's differs
between tasks only at its end, in what the workspace holds."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from tests.conftest import GraphFactory
from tests.scripted import call, plan, spec, submit

REJECTED = {"passed": False, "reasoning": "Missing the total.", "issues": ["no total"]}
PASSED = {"passed": True, "reasoning": "Complete.", "issues": []}


class FirstMessages(BaseCallbackHandler):
    """The first message of every chat model call, by the role its ``# Role:`` names."""

    def __init__(self) -> None:
        self.by_role: dict[str, list[str]] = defaultdict(list)

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        first = messages[0][0].text
        role = re.match(r"# Role: (\w+)", first)
        self.by_role[role.group(1) if role else "?"].append(first)


def test_each_roles_calls_open_with_the_same_system_message(
    scripted_graph: GraphFactory,
) -> None:
    files = ["files"]
    graph, _ = scripted_graph(
        {
            "planner": [
                plan(
                    spec("t1", tool_bundles=files, completion_criteria="a.txt exists"),
                    spec("t2", "t1", tool_bundles=files, completion_criteria="listed"),
                ),
                plan(spec("t3", "t2", tool_bundles=files, title="Add the total")),
            ],
            "actors": {
                "t1": [call("write_file", path="a.txt", content="1"), submit("wrote a.txt")],
                "t2": [call("list_dir"), submit("a.txt")],
                "t3": [submit("total 1")],
            },
            "verifier": [REJECTED, PASSED],
            "reporter": [{"text": "a.txt holds 1"}, {"text": "a.txt holds 1; total 1"}],
        },
        verify="final",
    )
    seen = FirstMessages()
    out = graph.invoke({"goal": "Write a.txt and list it"}, {"callbacks": [seen]})
    assert out["status"] == "succeeded"
    for role in ("planner", "reporter", "verifier"):
        assert len(seen.by_role[role]) == 2, role
        assert len(set(seen.by_role[role])) == 1, f"{role}'s system messages differ"
    actors = seen.by_role["actor"]
    assert len(actors) == 5
    # Tasks with the same tools: the same system message up to the workspace's files
    # (t1 wrote one); their criteria and inputs come in the task message.
    before, after = sorted(set(actors), key=actors.index)
    common = os.path.commonprefix([before, after])
    assert common.endswith("Files there now: ") and "## Environment" in common
    assert before[len(common) :].startswith("(empty)") and after[len(common) :].startswith("a.txt")
    for text in actors:
        assert not re.search(r"\bt[123]\b|a\.txt exists|listed", text.split("Files there")[0])
