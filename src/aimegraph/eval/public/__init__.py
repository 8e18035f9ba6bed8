"""Public benchmarks as eval suites: ``agentdojo:<suite>[@<version>]`` and
``bfcl:<category>``.

Each benchmark ships its tasks, simulated tools and checks in its own package
(extra ``[agentdojo]``; ``bfcl-eval`` installed with ``--no-deps``, see
:mod:`aimegraph.eval.public.bfcl`), imported only when its suite is asked for.
An adapter turns each benchmark task into a suite task whose rollouts run in a fresh
simulated world (:meth:`aimegraph.eval.suite.Suite.with_environments`): the
benchmark's functions are every system's only work tools, and the benchmark's own
checker judges the world and the answer afterwards. Each task's oracle plays the
benchmark's ground-truth calls (``--model oracle``); a task whose ground truth cannot
be played is left out, with the reason, in :attr:`PublicSuite.skipped`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aimegraph.eval.suite import Suite, SuiteError

__all__ = ["Injection", "PublicSuite", "is_public_suite", "load_public_suite"]

PREFIXES = ("agentdojo:", "bfcl:")


@dataclass(frozen=True)
class Injection:
    """What an attack plants in one task: the attacker's goal (the instruction a
    gullible model obeys wherever it reads it) and the calls that reach it."""

    goal: str
    calls: list[dict[str, Any]]


@dataclass(frozen=True)
class PublicSuite:
    """A benchmark's tasks as a suite, the tasks left out (id -> why) and, under an
    attack, what it planted in each task (:mod:`aimegraph.eval.public.gullible`)."""

    suite: Suite
    skipped: dict[str, str] = field(default_factory=dict)
    injections: dict[str, Injection] = field(default_factory=dict)


def is_public_suite(source: object) -> bool:
    """Whether ``source`` names a public benchmark (``agentdojo:...``, ``bfcl:...``)."""
    return isinstance(source, str) and source.startswith(PREFIXES)


def load_public_suite(
    source: str, *, attack: str | None = None, model: str | None = None
) -> PublicSuite:
    """The benchmark suite ``source`` names, under ``attack`` (AgentDojo's attacks;
    ``model``: the model spec an attack may address by name).

    Raises:
        SuiteError: an unknown suite, version or attack, or the
            benchmark's package is not installed; one line saying which.
    """
    kind, _, rest = source.partition(":")
    if kind == "agentdojo":
        from aimegraph.eval.public.agentdojo import load_agentdojo

        return load_agentdojo(rest, attack=attack, model=model)
    if attack is not None:
        raise SuiteError("--attack applies to agentdojo suites only")
    from aimegraph.eval.public.bfcl import load_bfcl

    return load_bfcl(rest)
