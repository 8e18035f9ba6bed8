"""The built-in guardrails: a secrets screen and a prompt-injection screen.

Both are plain functions (no model call, microseconds a screen), matching well-known
shapes: the secrets screen the formats providers give their API keys and tokens, the
injection screen the phrasings of instructions addressed to an AI agent (the OWASP LLM01
and AgentDojo patterns). A heuristic screen catches the common cases, not a determined
attacker's every paraphrase: pair it with ``model_guardrail`` where that matters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from aimegraph.guardrails.core import (
    Guardrail,
    GuardrailResult,
    GuardrailsArg,
    Guards,
    Stage,
    Subject,
)
from aimegraph.prompts import guardrails as prompts

__all__ = [
    "BUILTIN_NAMES",
    "SECRET_PATTERNS",
    "builtin_guardrail",
    "prompt_injection_screen",
    "secrets_screen",
]

SECRET_PATTERNS: Mapping[str, re.Pattern[str]] = {
    name: re.compile(pattern)
    for name, pattern in {
        "private_key": r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z]+ )*"
        r"PRIVATE KEY-----",
        "anthropic_key": r"\bsk-ant-[A-Za-z0-9_-]{20,}",
        "openai_key": r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        "aws_access_key": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        "github_token": r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        "gitlab_token": r"\bglpat-[A-Za-z0-9_-]{20,}",
        "slack_token": r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
        "google_api_key": r"\bAIza[0-9A-Za-z_-]{35}\b",
        "stripe_key": r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}",
        "huggingface_token": r"\bhf_[A-Za-z0-9]{30,}",
        "jwt": r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        "bearer_token": r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*",
    }.items()
}
"""Secret shapes by name, most specific first (an Anthropic key also looks like an
OpenAI one)."""

_SECRET_MARKS: Mapping[str, tuple[str, ...]] = {
    "private_key": ("PRIVATE KEY-----",),
    "anthropic_key": ("sk-ant-",),
    "openai_key": ("sk-",),
    "aws_access_key": ("AKIA", "ASIA"),
    "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab_token": ("glpat-",),
    "slack_token": ("xox",),
    "google_api_key": ("AIza",),
    "stripe_key": ("k_live_", "k_test_"),
    "huggingface_token": ("hf_",),
    "jwt": ("eyJ",),
    "bearer_token": ("bearer", "Bearer", "BEARER"),
}
"""What each shape's text holds (one of them), searched as a substring before its
expression: a text with none is passed in microseconds, where the expressions scan it
in milliseconds."""

SecretsAction = Literal["redact", "trip"]
InjectionAction = Literal["flag", "quarantine", "trip"]


def secrets_screen(
    action: SecretsAction = "redact",
    *,
    stages: tuple[Stage, ...] = ("output", "tool_input"),
    name: str = "secrets",
) -> Guardrail:
    """API keys, tokens and private keys (:data:`SECRET_PATTERNS`) in the final answer
    and in tool arguments (by default): replaced by ``[REDACTED:<kind>]`` (``redact``:
    a tool call then runs with the redacted arguments, and its observation says so),
    or the run ends ``blocked`` (``trip``)."""

    def check(subject: Subject) -> GuardrailResult | None:
        found: list[str] = []
        if subject.args is not None:
            args = _redacted_value(subject.args, found)
            return _secrets_found(action, found, args=args) if found else None
        text = _redacted_text(subject.text, found)
        return _secrets_found(action, found, text=text) if found else None

    return Guardrail(name, check, frozenset(stages))


def _secrets_found(
    action: SecretsAction,
    found: list[str],
    *,
    text: str | None = None,
    args: Mapping[str, Any] | None = None,
) -> GuardrailResult:
    kinds = ", ".join(dict.fromkeys(found))
    if action == "trip":
        return GuardrailResult.trip(f"found a secret ({kinds})")
    return GuardrailResult.redact(text, args=args, reason=f"redacted a secret ({kinds})")


def _redacted_text(text: str, found: list[str]) -> str:
    for kind, pattern in SECRET_PATTERNS.items():
        if not any(mark in text for mark in _SECRET_MARKS[kind]):
            continue

        def mark(_: re.Match[str], kind: str = kind) -> str:
            found.append(kind)
            return f"[REDACTED:{kind}]"

        text = pattern.sub(mark, text)
    return text


def _redacted_value(value: Any, found: list[str]) -> Any:
    """``value`` (arguments: nested dicts, lists, strings) with the secrets in its
    strings redacted."""
    if isinstance(value, str):
        return _redacted_text(value, found)
    if isinstance(value, Mapping):
        return {k: _redacted_value(v, found) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted_value(v, found) for v in value]
    return value


_INJECTION = re.compile(
    "|".join(
        [
            # Overriding what the agent was told.
            r"\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?\b(?:previous|prior|"
            r"above|earlier|preceding|original|all|your|the)\b[^.\n]{0,20}?\b(?:instructions?|"
            r"directions?|prompts?|rules|guidelines|directives|messages|tasks?)\b",
            r"\bnew (?:instructions|task|directive|system prompt)\s*:",
            r"\b(?:you are now|from now on,? you (?:are|will|must))\b",
            # Words addressed to the model rather than to a reader.
            r"\b(?:message|note|instructions?|reminder) (?:to|for) (?:the |any )?(?:ai|assistant|"
            r"agent|llm|language model|chatbot|model)\b",
            r"\b(?:dear|attention|hey|hello),? (?:ai|assistant|agent|llm|chatgpt|gpt-?\d*|"
            r"claude)\b",
            r"\bas an? (?:ai|language model|llm|assistant|agent)\b[^.\n]{0,40}?\b(?:you )?"
            r"(?:must|should|are required)\b",
            r"\bbefore you (?:can )?(?:solve|finish|complete|continue with|answer) the task\b",
            r"\bthe task (?:that )?(?:i|the user) gave you\b",
            r"\bdo not (?:tell|inform|mention (?:this )?to|reveal (?:this )?to|alert) the user\b",
            r"\b(?:reveal|print|output|repeat|show) (?:your|the) (?:system prompt|instructions|"
            r"hidden prompt)\b",
            # Chat-template and role markers smuggled into data.
            r"<\|im_start\|>|<\|im_end\|>|<\|system\|>|\[/?INST\]|<</?SYS>>|</?system>",
            r"^\s*(?:system|assistant)\s*:\s*\S",
            r"<information>|</information>",
        ]
    ),
    re.IGNORECASE | re.MULTILINE,
)
_TRIGGERS = (
    *("ignor", "disregard", "forget", "overrid", "bypass", "you are now", "from now on"),
    *("new instruction", "new task", "new directive", "new system prompt", "before you"),
    *(" ai", "assistant", "agent", "llm", "language model", "chatbot", "model", "gpt"),
    *("claude", "gave you", "the user", "system", "instruction", "hidden prompt"),
    *("<|", "[inst", "[/inst", "<<sys", "<</sys", "information>"),
)
"""Words one of which every phrasing :data:`_INJECTION` matches holds (lowercased): a
page with none of them is passed after a substring search per word, microseconds,
where the expression takes milliseconds on a long page."""


def _instructions_in(text: str) -> list[str]:
    """The instruction-like phrases in ``text``."""
    lowered = text.lower()
    if not any(trigger in lowered for trigger in _TRIGGERS):
        return []
    return [m.group(0) for m in _INJECTION.finditer(text)]


_SENTENCE = re.compile(r"[^.!?\n]*(?:[.!?]+|\n|$)")


def prompt_injection_screen(
    action: InjectionAction = "flag",
    *,
    stages: tuple[Stage, ...] = ("tool_output",),
    name: str = "prompt_injection",
) -> Guardrail:
    """Instructions arriving in tool outputs (fetched pages, files, MCP results) before
    an actor sees them: ``flag`` wraps the output, marking it as untrusted data and
    quoting what read like instructions; ``quarantine`` also removes the sentences that
    do; ``trip`` ends the run ``blocked``."""

    def check(subject: Subject) -> GuardrailResult | None:
        matches = _instructions_in(subject.text)
        if not matches:
            return None
        quoted = "; ".join(f"{' '.join(m.split())[:60]!r}" for m in dict.fromkeys(matches))
        reason = f"text that reads like instructions to the model: {quoted}"
        if action == "trip":
            return GuardrailResult.trip(reason)
        data = _quarantined(subject.text) if action == "quarantine" else subject.text
        template = prompts.QUARANTINED if action == "quarantine" else prompts.FLAGGED
        # Closing the wrapper from inside the data must not end it early.
        data = data.replace(prompts.DATA_CLOSE, "").replace(prompts.DATA_OPEN, "")
        # The warning does not quote them: it would bring them outside the data.
        text = template.format(guardrail=name, count=len(matches), tool=subject.tool or "the tool")
        return GuardrailResult.redact(
            f"{text}\n{prompts.DATA_OPEN}\n{data}\n{prompts.DATA_CLOSE}",
            reason=f"{'quarantined' if action == 'quarantine' else 'flagged'} {reason}",
        )

    return Guardrail(name, check, frozenset(stages))


def _quarantined(text: str) -> str:
    """``text`` with every sentence (or line) holding an instruction-like phrase replaced
    by a marker."""
    return _SENTENCE.sub(
        lambda m: prompts.REMOVED if _INJECTION.search(m.group(0)) else m.group(0), text
    )


BUILTIN_NAMES = (
    "secrets",
    "secrets:trip",
    "prompt_injection",
    "prompt_injection:quarantine",
    "prompt_injection:trip",
)
"""The built-ins ``AimeConfig.guardrails`` may name: a screen, with its action after the colon."""


def builtin_guardrail(spec: str) -> Guardrail:
    """The built-in guardrail a name of :data:`BUILTIN_NAMES` stands for."""
    kind, _, action = spec.partition(":")
    if spec not in BUILTIN_NAMES:
        raise ValueError(f"unknown guardrail {spec!r}; built-in ones: {', '.join(BUILTIN_NAMES)}")
    if kind == "secrets":
        return secrets_screen("trip" if action == "trip" else "redact")
    injection: InjectionAction = "trip" if action == "trip" else "quarantine" if action else "flag"
    return prompt_injection_screen(injection)


def as_guards(guardrails: GuardrailsArg | Guards, names: Sequence[str] = ()) -> Guards:
    """The built-in guardrails ``names`` (``AimeConfig.guardrails``), then ``guardrails``."""
    given = guardrails if isinstance(guardrails, Guards) else Guards(guardrails)
    return Guards([builtin_guardrail(n) for n in names]) + given
