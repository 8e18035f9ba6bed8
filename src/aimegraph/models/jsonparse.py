"""The JSON in model replies, and degenerate replies.

Used wherever the engine reads JSON that a model wrote as text: ``tool_calling="json"``
(plans, verdicts and tool calls described in the prompt) and tool calls a model writes
into its message content instead of calling the tool.

Repairing what models bend is left to ``json-repair``: single quotes, Python literals,
trailing commas, comments, unquoted keys, missing commas (raw line breaks inside strings
the standard library's ``json`` accepts when not strict). This module only decides
what no library decides for us:

- where the candidate values are: each top-level ``{...}`` or ``[...]`` of the reply,
  with fences, prose and reasoning (``<think>`` blocks) around them ignored;
- which candidate is the answer: the first one the caller ``prefer``s, else the first
  object, else the first array;
- which replies to refuse rather than repair: one cut off inside a value (a truncated
  plan or file must not pass for a whole one), and one holding bare words that are
  neither keys nor literals (code, prose, a Python set), where a repair would change
  what the model said rather than its punctuation.

A refusal raises :class:`JsonReplyError`, whose message is short and meant to be sent
back to the model so it can correct its reply. Nothing here evaluates code.

``check_degenerate`` flags replies not worth parsing or repairing: empty, looping (the
same words or characters repeated over and over) or cut off at the token limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import json_repair

from aimegraph.models.reasoning import strip_reasoning

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage

__all__ = [
    "JsonReplyError",
    "check_degenerate",
    "json_values",
    "parse_json_reply",
    "why_unusable_call",
]


class JsonReplyError(ValueError):
    """A reply holds no usable JSON; the message says why, in words fit for the model."""


# --------------------------------------------------------------------------- parsing


def parse_json_reply(text: str, *, prefer: Callable[[Any], bool] | None = None) -> Any:
    """Return the JSON value a model reply holds, tolerating the usual wrapping and slips.

    A reply that is JSON as a whole is that value (any JSON value). Otherwise the answer is
    the first top-level object or array that ``prefer`` accepts (say, the one naming a
    known tool: models often write an example or a draft before the real object), else
    the first object, else the first array.

    Raises:
        JsonReplyError: with a short message saying what was wrong.
    """
    if not isinstance(text, str):
        raise JsonReplyError(f"expected the reply as text, got {type(text).__name__}")
    visible = strip_reasoning(text)
    if not visible:
        raise JsonReplyError("empty reply: expected a JSON object")
    try:
        return json.loads(visible, strict=False)
    except ValueError:
        pass
    candidates = list(_candidates(visible))
    values = [c.value for c in candidates if c.error is None]
    truncated = next((c.error for c in candidates if c.truncated), None)
    if prefer is not None:
        preferred = next((v for v in values if _accepts(prefer, v)), None)
        if preferred is not None:
            return preferred
        if truncated:
            # The answer may well be the value that was cut off.
            raise JsonReplyError(truncated)
    for kind in (dict, list):
        chosen = next((v for v in values if isinstance(v, kind)), None)
        if chosen is not None:
            return chosen
    if truncated:
        raise JsonReplyError(truncated)
    if candidates:
        raise JsonReplyError(str(candidates[0].error))
    raise JsonReplyError("no JSON object found in the reply")


def json_values(text: str) -> list[Any]:
    """Every top-level JSON object or array in a reply that parses, in order (none for a
    reply that is JSON as a whole but a scalar); reasoning is ignored."""
    visible = strip_reasoning(text)
    try:
        whole = json.loads(visible, strict=False)
    except ValueError:
        return [c.value for c in _candidates(visible) if c.error is None]
    return [whole] if isinstance(whole, dict | list) else []


def _accepts(prefer: Callable[[Any], bool], value: Any) -> bool:
    try:
        return bool(prefer(value))
    except Exception:  # noqa: BLE001 - a predicate that trips on odd data rejects it
        return False


@dataclass(frozen=True)
class _Candidate:
    value: Any = None
    error: str | None = None
    truncated: bool = False


# Tokens inside a candidate value. Strings are matched whole so that brackets, quotes and
# words inside them are not taken for structure; a single-quoted "string" must close on
# its line, otherwise the quote is an apostrophe. A bare word is matched only where it
# cannot be part of a number (1e3, -Infinity).
_TOKEN = re.compile(
    r"""
      (?P<dq>"(?:[^"\\]|\\.)*(?P<dq_end>"|\Z))
    | '(?:[^'\\\n]|\\.)*(?P<sq_end>'|\Z)
    | //[^\n]* | /\*.*?(?:\*/|\Z) | \#[^\n]*
    | (?P<open>[{\[]) | (?P<close>[}\]])
    | (?<![\w.$+-])(?P<word>[A-Za-z_$][\w$]*)
    """,
    re.S | re.X,
)
_OPENER = re.compile(r"[{\[]")
_KEY_COLON = re.compile(r"\s*:")
_CLOSERS = {"{": "}", "[": "]"}
_LITERALS = frozenset({"true", "false", "null", "True", "False", "None", "NaN", "Infinity"})


def _candidates(text: str) -> Iterator[_Candidate]:
    """Each top-level bracketed value of ``text``, parsed or with the reason it is refused.

    A value that fails is skipped as a whole, so a broken object never yields one of its
    nested objects as if it were the answer.
    """
    found = _OPENER.search(text)
    while found is not None:
        end, stray, cut_off = _extent(text, found.start())
        span = text[found.start() : end]
        if cut_off is not None:
            yield _Candidate(error=cut_off, truncated=True)
            return
        yield _parse_span(span, stray)
        found = _OPENER.search(text, end)


def _extent(text: str, start: int) -> tuple[int, str | None, str | None]:
    """Where the value opening at ``text[start]`` ends, its first stray bare word, and
    why it is cut off (``None`` when it is closed).

    A closer that does not match ends the value early; the parser reports it.
    """
    stack: list[str] = []
    stray: str | None = None
    token: re.Match[str] | None = None
    for token in _TOKEN.finditer(text, start):
        if token["open"]:
            stack.append(_CLOSERS[token["open"]])
        elif token["close"]:
            if stack.pop() != token["close"] or not stack:
                return token.end(), stray, None
        elif (
            token["word"]
            and stray is None
            and token["word"] not in _LITERALS
            and not _KEY_COLON.match(text, token.end())
        ):
            stray = token["word"]
    if token is not None and (token["dq"] and not token["dq_end"] or token["sq_end"] == ""):
        return len(text), stray, "unterminated string: the reply seems truncated"
    kind = "object" if text[start] == "{" else "array"
    missing = "".join(reversed(stack))
    return (
        len(text),
        stray,
        f"unterminated {kind}: the reply seems truncated (missing {missing!r} at the end)",
    )


def _parse_span(span: str, stray: str | None) -> _Candidate:
    """Parse one closed value: as JSON (raw line breaks and tabs inside strings allowed:
    models write code that way), else repaired by json-repair in strict mode (which
    refuses what it cannot repair without guessing), unless it holds stray words."""
    try:
        return _Candidate(json.loads(span, strict=False))
    except json.JSONDecodeError as exc:
        invalid = f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
    if stray is not None:
        return _Candidate(error=invalid)
    try:
        # stream_stable keeps a string's trailing line break (a file's last newline),
        # which json-repair otherwise strips.
        value = json_repair.loads(span, strict=True, skip_json_loads=True, stream_stable=True)
    except (ValueError, RecursionError):
        return _Candidate(error=invalid)
    if not isinstance(value, dict | list):
        return _Candidate(error=invalid)
    return _Candidate(value)


# --------------------------------------------------------------------------- degeneracy

# A loop is a unit of ``period`` items repeated back to back. It counts as degenerate when the
# unit occurs at least ``_MIN_REPEATS`` times and the repeated stretch is long enough:
# ``_MIN_WORDS`` words (so "very very" is fine, but a sentence said 4+ times in a row is not),
# or ``_MIN_CHARS`` characters for text without spaces ("!!!!...", "abcabcabc...").
_MIN_REPEATS = 4
_MAX_WORD_PERIOD = 64
_MIN_WORDS = 24
_MAX_CHAR_PERIOD = 16
_MIN_CHARS = 200
_LENGTH_REASONS = frozenset({"length", "max_tokens"})


def check_degenerate(text: str, *, finish_reason: str | None = None) -> str | None:
    """Return why a reply is degenerate, or ``None`` when it looks usable.

    Degenerate means: empty or whitespace only (or only reasoning, see
    :mod:`aimegraph.models.reasoning`); stuck in a loop (the same words, lines or
    characters repeated back to back many times, reasoning included); or cut off at the
    token limit (``finish_reason`` ``"length"``, as OpenAI-compatible servers report it).
    """
    if not text or not text.strip():
        return "empty reply"
    loop = _find_loop(text.split(), _MAX_WORD_PERIOD, _MIN_WORDS, " ")
    if loop is None:
        loop = _find_loop(list(text), _MAX_CHAR_PERIOD, _MIN_CHARS, "")
    if loop is not None:
        return f"the reply repeats itself: {loop}"
    if finish_reason in _LENGTH_REASONS:
        return "the reply was cut off at the token limit (it seems truncated)"
    if not strip_reasoning(text):
        return "empty reply: only reasoning, no answer"
    return None


def why_unusable_call(reply: AIMessage) -> str | None:
    """Why a reply whose tool-call arguments do not parse is degenerate, read from its
    text and those arguments: looping (a small model repeating itself inside a string
    until the token limit) or cut off there; ``None`` when it is neither."""
    said = " ".join([reply.text, *(str(c.get("args") or "") for c in reply.invalid_tool_calls)])
    if not said.strip():
        return None
    return check_degenerate(said, finish_reason=reply.response_metadata.get("finish_reason"))


def _find_loop(items: list[str], max_period: int, min_items: int, sep: str) -> str | None:
    """Describe the first unit repeated back to back in ``items``, or ``None``.

    For each period ``p``, ``run`` counts consecutive positions where ``items[i] ==
    items[i - p]``: a run of ``r`` ending at ``i`` means the ``p`` items starting at
    ``i - r - p + 1`` occur back to back ``(r + p) / p`` times.
    """
    for period in range(1, min(max_period, len(items) // _MIN_REPEATS) + 1):
        run = 0
        for i in range(period, len(items)):
            if items[i] != items[i - period]:
                run = 0
                continue
            run += 1
            span = run + period
            if span >= min_items and span >= period * _MIN_REPEATS:
                start = i - span + 1
                unit = items[start : start + period]
                end = start
                while items[end : end + period] == unit:
                    end += period
                repeats = (end - start) // period
                return f"{_shorten(sep.join(unit))!r} repeated {repeats} times"
    return None


def _shorten(text: str, limit: int = 40) -> str:
    text = " ".join(text.split()) or text
    return text if len(text) <= limit else text[: limit - 3] + "..."
