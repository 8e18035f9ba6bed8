"""Small suites for the harness tests, written where a test wants them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from aimegraph.tools.registry import ToolRegistry

SUM_CODE = "import csv\nprint(sum(int(r['value']) for r in csv.DictReader(open('data.csv'))))"

DATA = "name,value\na,3\nb,4\n"

# Oracle calls per rollout (the exact-figures tests count on them):
# ReAct: tool calls + 1; aimegraph: planner + (calls + submit) per actor stage + reporter,
# + verifier (verify="auto") unless every stage is a tool step (one call, arguments known).
THREE_TASKS: list[dict[str, Any]] = [
    {
        "id": "one",
        "goal": "What is the sum of the value column in data.csv?",
        "files": ["data.csv"],
        "check": {"number": 7},
        "tags": ["one-step"],
        "oracle": {
            "stages": [
                {
                    "id": "s1",
                    "title": "Sum it",
                    "calls": [{"tool": "python", "args": {"code": SUM_CODE}}],
                }
            ],
            "answer": "The sum is {stage:s1}.",
        },
    },
    {
        "id": "two",
        "goal": "Sum the value column of data.csv and write it to total.txt.",
        "files": ["data.csv"],
        "check": [{"file": "total.txt", "equals": "7"}, {"contains": "7"}],
        "oracle": {
            "stages": [
                {
                    "id": "sum",
                    "title": "Sum it",
                    "calls": [{"tool": "python", "args": {"code": SUM_CODE}}],
                },
                {
                    "id": "write",
                    "title": "Write it",
                    "calls": [
                        {
                            "tool": "write_file",
                            "args": {"path": "total.txt", "content": "{stage:sum}"},
                        }
                    ],
                    "result": "wrote {stage:sum}",
                },
            ],
            "answer": "total.txt holds {stage:sum}",
        },
    },
    {
        "id": "three",
        "goal": "What is 6 times 7, plus 1?",
        "check": {"number": 43},
        "oracle": {
            "stages": [
                {
                    "id": "calc",
                    "title": "Compute",
                    "calls": [
                        {"tool": "calculator", "args": {"expression": "6*7"}},
                        {"tool": "calculator", "args": {"expression": "{last_tool_output} + 1"}},
                    ],
                }
            ],
            "answer": "The answer is {stage:calc}.",
        },
    },
]
"""ReAct calls per rollout: one 2, two 3, three 3; aimegraph: one 2 (a tool step, no
verifier), two 4 (a tool step, then an actor writing the file, ending its task in that
reply; the verifier checks the file), three 5."""

REACT_CALLS = {"one": 2, "two": 3, "three": 3}
AIME_CALLS = {"one": 2, "two": 4, "three": 5}


def write_suite(folder: Path, tasks: list[dict[str, Any]], **suite: Any) -> Path:
    """``suite.yaml`` and ``data.csv`` in ``folder``; returns the suite's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.csv").write_text(DATA, encoding="utf-8")
    path = folder / "suite.yaml"
    path.write_text(yaml.safe_dump({"name": "tiny", **suite, "tasks": tasks}), encoding="utf-8")
    return path


REGISTRY = ToolRegistry()
"""A whole registry, which ``--tools`` refuses for an eval (it would replace the built-ins)."""
