"""Evaluation (DESIGN.md section 17): task suites, systems under test, rollouts, reports.

    from aimegraph.eval import evaluate          # or: aimegraph.eval(...)
    result = evaluate("bundled", model="openai:gpt-4o-mini",
                      systems=["aimegraph", "create_agent"], k=3)
    result.summary["systems"], result.report_html

The layer above the engine: it may use graphs, models, tools and checkpoints;
nothing in the engine imports it. ``create_agent`` needs the ``[eval]`` extra.
"""

import sys
import types
from typing import Any

from aimegraph.eval.checkers import CheckInput, CheckResult
from aimegraph.eval.oracle import OracleModels
from aimegraph.eval.runner import DEFAULT_EVALS, EvalResult, evaluate
from aimegraph.eval.suite import BUNDLED_SUITE, Check, Suite, SuiteError, Task, load_suite
from aimegraph.eval.summary import compare, read_records
from aimegraph.eval.systems import SystemsError, SystemSpec, load_systems

__all__ = [
    "BUNDLED_SUITE",
    "DEFAULT_EVALS",
    "Check",
    "CheckInput",
    "CheckResult",
    "EvalResult",
    "OracleModels",
    "Suite",
    "SuiteError",
    "SystemSpec",
    "SystemsError",
    "Task",
    "compare",
    "evaluate",
    "load_suite",
    "load_systems",
    "read_records",
]


class _CallableModule(types.ModuleType):
    """``aimegraph.eval(...)`` runs :func:`evaluate`, while ``aimegraph.eval`` stays
    this package, so ``import aimegraph.eval.suite`` and ``mock.patch`` targets under
    it work as for any package (a function bound to the name would hide them)."""

    def __call__(self, *args: Any, **kwargs: Any) -> EvalResult:
        return evaluate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
