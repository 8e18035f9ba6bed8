"""BFCL v4 multi-turn (Berkeley) as an eval suite: ``bfcl:multi_turn_base``.

The ``bfcl-eval`` package pins ``numpy==1.26.4`` and a dozen provider SDKs, so it is
installed without its dependencies (``pip install --no-deps`` :data:`PINNED`): the
multi-turn data, the simulated API classes (file system, messaging, posting,
tickets, trading, travel, vehicle control, math) and the multi-turn checker need
only the standard library and ``mpmath``, which the project already has.

Each BFCL entry is one suite task whose turns are the entry's user turns, run on one
thread. A rollout gets its own instances of the entry's API classes, loaded with the
entry's initial configuration (:class:`BfclWorld`); their public methods, described
by BFCL's function documents, are every system's tools. Each call is filed under the
turn it was made in, written as BFCL writes calls (``mv(source='a', ...)``), and
BFCL's own ``multi_turn_checker`` judges them afterwards: it replays them and the
ground truth on fresh instances and compares the state after every turn and the
calls' outputs. The oracle plays the ground-truth calls turn by turn; a call whose
arguments are not literals (a value computed from earlier outputs) cannot be played,
and its task is left out with the reason.
"""

from __future__ import annotations

import ast
import copy
import inspect
import json
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from aimegraph.eval.checkers import CheckInput
from aimegraph.eval.environment import RolloutEnvironment
from aimegraph.eval.public import PublicSuite
from aimegraph.eval.suite import Check, Oracle, Suite, SuiteError, Task

__all__ = ["CATEGORIES", "PINNED", "BfclWorld", "load_bfcl", "state_and_response_check"]

PINNED = "bfcl-eval==2026.3.23"
"""The release adapted and tested (``make test`` installs it, ``--no-deps``): BFCL's
data, classes and checker change between releases."""

CATEGORIES = ("multi_turn_base",)
"""The BFCL categories adapted: the base multi-turn one (the others add missing
functions or parameters to be asked for, or a long context)."""

DATA_FILE = "BFCL_v4_{category}.json"
BUNDLE = "bfcl"
CHECK = Check(python="aimegraph.eval.public.bfcl:state_and_response_check")
STAGE_CALLS = 8
"""The most ground-truth calls one oracle stage makes (an aimegraph actor has
``max_actor_steps``, 10 by default, one of which submits its result)."""

_ANSWER = "Done."
"""The oracle's reply after each turn's calls: BFCL judges the calls, not the text."""

_JSON_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def _modules() -> tuple[Any, Any]:
    """BFCL's backend constants and multi-turn checker modules."""
    try:
        from bfcl_eval.constants import executable_backend_config as backend
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker
    except ImportError as exc:
        raise SuiteError(
            "bfcl suites need the bfcl-eval package, installed without its pins: "
            f"pip install --no-deps '{PINNED}'"
        ) from exc
    return backend, multi_turn_checker


def _data(path: str) -> list[dict[str, Any]]:
    text = (resources.files("bfcl_eval") / "data" / path).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _schema(value: Any) -> Any:
    """A BFCL parameter description as JSON schema (BFCL writes ``dict``, ``float``,
    ``tuple`` and ``any`` for object, number, array and anything)."""
    if isinstance(value, list):
        return [_schema(v) for v in value]
    if not isinstance(value, dict):
        return value
    converted = {k: _schema(v) for k, v in value.items() if k != "type"}
    if "type" in value:
        kind = _JSON_TYPES.get(value["type"], value["type"])
        if kind is not None:
            converted["type"] = kind
    return converted


def written(name: str, args: Mapping[str, Any]) -> str:
    """A call as BFCL writes (and its checker evaluates) it: ``f(a='x', b=2)``."""
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in args.items())})"


@dataclass
class BfclWorld:
    """One rollout's instances of an entry's API classes, and the calls made on them
    turn by turn (what BFCL's checker replays)."""

    entry: dict[str, Any]
    ground_truth: list[list[str]]
    docs: dict[str, list[dict[str, Any]]]
    instances: dict[str, Any]
    turns: list[list[str]] = field(default_factory=lambda: [[]])
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def begin_turn(self, index: int) -> None:
        with self._lock:
            while len(self.turns) <= index:
                self.turns.append([])

    def call(self, owner: str, name: str, args: Mapping[str, Any]) -> str:
        """Run the method and give its output as BFCL's executor does (text as is,
        an object as JSON, anything else as ``str``; an error as its message)."""
        with self._lock:
            self.turns[-1].append(written(name, args))
            try:
                result = getattr(self.instances[owner], name)(**args)
            except Exception as exc:  # noqa: BLE001 - the model sees the error, as in BFCL
                return f"Error during execution: {exc}"
        if isinstance(result, str):
            return result
        if isinstance(result, dict):
            try:
                return json.dumps(result)
            except TypeError:
                return str(result)
        return str(result)

    def tools(self) -> list[BaseTool]:
        excluded = set(self.entry.get("excluded_function") or ())
        return [
            self._tool(owner, doc)
            for owner, docs in self.docs.items()
            for doc in docs
            if doc["name"] not in excluded
        ]

    def _tool(self, owner: str, doc: Mapping[str, Any]) -> BaseTool:
        name = str(doc["name"])

        def run(**kwargs: Any) -> str:
            return self.call(owner, name, kwargs)

        return StructuredTool.from_function(
            func=run,
            name=name,
            description=str(doc["description"]),
            args_schema=_schema(doc["parameters"]),
        )


def state_and_response_check(inp: CheckInput) -> tuple[bool, str]:
    """BFCL's multi-turn checker on the calls of every turn: the state after each
    turn and the calls' outputs against the ground truth's."""
    world = inp.environment
    if not isinstance(world, BfclWorld):
        raise TypeError("this check reads a BFCL environment (a bfcl: suite)")
    _, checker = _modules()
    turns = [list(t) for t in world.turns] + [[]] * (len(world.ground_truth) - len(world.turns))
    # Each call is a step of its own, as a model making one call per reply would.
    decoded = [[[call] for call in turn] for turn in turns[: len(world.ground_truth)]]
    # The checker keeps the instances it builds in its module's globals, by this name.
    name = f"aimegraph_{uuid.uuid4().hex}"
    try:
        verdict = checker.multi_turn_checker(
            decoded, world.ground_truth, world.entry, world.entry["id"].rsplit("_", 1)[0], name
        )
    finally:
        _forget_instances(name)
    if verdict.get("valid"):
        return True, "BFCL: the state and the outputs match the ground truth's after every turn"
    return False, f"BFCL: {verdict.get('error_type')}: {verdict.get('error_message')}"


def _forget_instances(name: str) -> None:
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    cache = vars(multi_turn_utils)
    for key in [k for k in cache if k.startswith(name)]:
        del cache[key]


# --- loading


class _Unplayable(ValueError):
    """A ground truth the oracle cannot play (the reason is the message)."""


def _parsed(text: str, signatures: Mapping[str, inspect.Signature]) -> dict[str, Any]:
    """A ground-truth call (``sort('a.txt')``) as an oracle call, positional
    arguments named by the method's signature."""
    try:
        node = ast.parse(text, mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise _Unplayable(f"{text!r} is not a call of a function by name")
        name = node.func.id
        args = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        positional = [ast.literal_eval(a) for a in node.args]
    except (SyntaxError, ValueError) as exc:
        raise _Unplayable(
            f"the ground-truth call {text!r} has an argument that is not a literal: "
            "its value comes from an earlier output the data does not give"
        ) from exc
    if name not in signatures:
        raise _Unplayable(f"the ground truth calls {name}, which no class of the task has")
    params = [p for p in signatures[name].parameters if p != "self"]
    return {"tool": name, "args": {**dict(zip(params, positional, strict=False)), **args}}


def _oracle(ground_truth: Sequence[Sequence[str]], signatures: Mapping[str, Any]) -> Oracle:
    turns = []
    for number, calls in enumerate(ground_truth, 1):
        parsed = [_parsed(call, signatures) for call in calls]
        chunks = [parsed[i : i + STAGE_CALLS] for i in range(0, len(parsed), STAGE_CALLS)]
        stages = [
            {
                "id": f"turn{number}-{part}",
                "title": f"Carry out request {number} with the BFCL tools (part {part})",
                "calls": chunk,
                "bundles": [BUNDLE],
            }
            for part, chunk in enumerate(chunks or [[]], 1)
        ]
        turns.append({"stages": stages, "answer": _ANSWER})
    # BFCL's ground truth is not yet held to the knowledge rule: its breaches are
    # counted in each record and the report (issue 48 point 4 holds it to it).
    return Oracle.model_validate({"turns": turns}).counting_breaches()


def _classes(backend: Any, names: Sequence[str]) -> dict[str, type]:
    import importlib

    return {
        n: getattr(importlib.import_module(backend.CLASS_FILE_PATH_MAPPING[n]), n) for n in names
    }


def _goal(messages: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(str(m["content"]) for m in messages if m.get("role") == "user")


def load_bfcl(category: str) -> PublicSuite:
    """The BFCL multi-turn ``category`` (:data:`CATEGORIES`) as a suite."""
    if category not in CATEGORIES:
        raise SuiteError(f"no BFCL category {category!r} (adapted: {', '.join(CATEGORIES)})")
    backend, _ = _modules()
    entries = _data(DATA_FILE.format(category=category))
    answers = {
        a["id"]: a["ground_truth"]
        for a in _data("possible_answer/" + DATA_FILE.format(category=category))
    }
    docs = {
        name: _data(f"multi_turn_func_doc/{file}")
        for name, file in backend.MULTI_TURN_FUNC_DOC_FILE_MAPPING.items()
    }
    tasks, plans, skipped = [], {}, {}
    for entry in entries:
        classes = _classes(backend, entry["involved_classes"])
        signatures = {
            doc["name"]: inspect.signature(getattr(cls, doc["name"]))
            for owner, cls in classes.items()
            for doc in docs[owner]
        }
        try:
            oracle = _oracle(answers[entry["id"]], signatures)
        except _Unplayable as exc:
            skipped[entry["id"]] = str(exc)
            continue
        tasks.append(
            Task(
                id=entry["id"],
                turns=[_goal(turn) for turn in entry["question"]],
                check=[CHECK],
                tags=list(entry["involved_classes"]),
                oracle=oracle,
            )
        )
        plans[entry["id"]] = (entry, answers[entry["id"]])
    suite = Suite(
        name=f"bfcl-{category}",
        description=f"BFCL v4 {category}",
        tasks=tasks,
        root=Path("."),
        source=f"bfcl:{category}",
    )
    opener = _Opener(backend, docs, plans)
    return PublicSuite(suite.with_environments(opener).with_report(left_out=skipped), skipped)


@dataclass(frozen=True)
class _Opener:
    """Opens fresh instances of a task's API classes for one rollout."""

    backend: Any
    docs: Mapping[str, list[dict[str, Any]]]
    plans: Mapping[str, tuple[dict[str, Any], list[list[str]]]]

    def __call__(self, task: Task) -> RolloutEnvironment:
        entry, ground_truth = self.plans[task.id]
        instances = {}
        for name, cls in _classes(self.backend, entry["involved_classes"]).items():
            instance = cls()
            if name not in self.backend.STATELESS_CLASSES:
                config = copy.deepcopy(entry["initial_config"].get(name, {}))
                instance._load_scenario(config, long_context=False)
            instances[name] = instance
        world = BfclWorld(
            entry=entry,
            ground_truth=ground_truth,
            docs={name: self.docs[name] for name in entry["involved_classes"]},
            instances=instances,
        )
        return RolloutEnvironment(
            bundle=BUNDLE,
            description="The simulated APIs of the request (BFCL): "
            + ", ".join(entry["involved_classes"])
            + ".",
            tools=world.tools(),
            state=world,
            begin_turn=world.begin_turn,
        )
