"""Prompt optimisation (DESIGN.md section 8): the prompt store, GEPA offline
(:func:`optimize`) and the online loop (``AimeConfig.optimize_online``).

GEPA itself (extra ``[optimize]``) is imported only when optimising.
"""

from aimegraph.optimizer.optimize import OptimizeResult, optimize
from aimegraph.optimizer.store import PromptStore, PromptVersion

__all__ = ["OptimizeResult", "PromptStore", "PromptVersion", "optimize"]
