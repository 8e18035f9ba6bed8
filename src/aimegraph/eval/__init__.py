"""Evaluation: task suites, systems under test, rollouts, reports.

    from aimegraph.eval import evaluate          # or: aimegraph.evaluate(...)
    result = evaluate("bundled", model="openai:gpt-4o-mini",
                      systems=["aimegraph", "create_agent"], k=3)
    result.summary["systems"], result.report_html

The layer above the engine: it may use graphs, models, tools and checkpoints;
nothing in the engine imports it. ``create_agent`` needs the ``[eval]`` extra.
Every name below is imported on first use.
"""

import sys
import types
import warnings
from typing import TYPE_CHECKING, Any

from aimegraph.lazy import lazy_exports

if TYPE_CHECKING:
    from aimegraph.eval.checkers import CheckInput, CheckResult
    from aimegraph.eval.harness import DEFAULT_EVALS, EvalResult, evaluate
    from aimegraph.eval.oracle import OracleModels
    from aimegraph.eval.suite import BUNDLED_SUITE, Check, Suite, SuiteError, Task, load_suite
    from aimegraph.eval.summary import compare, read_records
    from aimegraph.eval.systems import SystemsError, SystemSpec, load_systems

_HOMES = {
    "CheckInput": ".checkers",
    "CheckResult": ".checkers",
    "OracleModels": ".oracle",
    "DEFAULT_EVALS": ".harness",
    "EvalResult": ".harness",
    "evaluate": ".harness",
    **dict.fromkeys(
        ["BUNDLED_SUITE", "Check", "Suite", "SuiteError", "Task", "load_suite"], ".suite"
    ),
    "compare": ".summary",
    "read_records": ".summary",
    **dict.fromkeys(["SystemsError", "SystemSpec", "load_systems"], ".systems"),
}

__all__ = [
    "BUNDLED_SUITE",
    "Check",
    "CheckInput",
    "CheckResult",
    "DEFAULT_EVALS",
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

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)


class _CallableModule(types.ModuleType):
    """Calling the package, ``aimegraph.eval(...)``, still runs :func:`evaluate` for
    this release, with a DeprecationWarning: use ``aimegraph.evaluate`` or
    ``aimegraph.eval.evaluate``. Remove this class and the line below it next release."""

    def __call__(self, *args: Any, **kwargs: Any) -> "EvalResult":
        warnings.warn(
            "calling aimegraph.eval(...) is deprecated and will be removed in the next "
            "release: use aimegraph.evaluate(...) or aimegraph.eval.evaluate(...)",
            DeprecationWarning,
            stacklevel=2,
        )
        from aimegraph.eval.harness import evaluate

        return evaluate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
