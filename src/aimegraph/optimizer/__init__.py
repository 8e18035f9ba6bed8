"""Prompt optimisation: the prompt store, the GEPA adapter and
the online loop (``AimeConfig.optimize_online``). The offline search,
``aimegraph.optimize``, runs whole graphs and so lives above them
(:mod:`aimegraph.eval.optimize`).

GEPA itself (extra ``[optimize]``) is imported only when optimising.
"""

from aimegraph.optimizer.store import PromptStore, PromptVersion

__all__ = ["PromptStore", "PromptVersion"]
