"""Guardrails on a run's goal, final answer and tool calls (architecture: Guardrails).

``build_aime_graph(guardrails=[...])`` takes :class:`Guardrail` objects: plain
functions (:func:`guardrail`), model-backed checks (:func:`model_guardrail`), and the
built-in screens (:func:`secrets_screen`, :func:`prompt_injection_screen`, also named in
``AimeConfig.guardrails``). A tripwire ends the run with status ``blocked``.
"""

from aimegraph.guardrails.builtin import (
    BUILTIN_NAMES,
    SECRET_PATTERNS,
    as_guards,
    builtin_guardrail,
    prompt_injection_screen,
    secrets_screen,
)
from aimegraph.guardrails.core import (
    STAGES,
    Finding,
    Guardrail,
    GuardrailResult,
    GuardrailsArg,
    Guards,
    Screened,
    Stage,
    Subject,
    guardrail,
)
from aimegraph.guardrails.model_check import model_guardrail

__all__ = [
    "BUILTIN_NAMES",
    "SECRET_PATTERNS",
    "STAGES",
    "Finding",
    "Guardrail",
    "GuardrailResult",
    "GuardrailsArg",
    "Guards",
    "Screened",
    "Stage",
    "Subject",
    "as_guards",
    "builtin_guardrail",
    "guardrail",
    "model_guardrail",
    "prompt_injection_screen",
    "secrets_screen",
]
