"""BASELINE for the jsonparse benchmark: a frozen copy of the hand-written tolerant JSON
parser that ``aimegraph.models.jsonparse`` used before issue 18 (commit 23b4d26), kept
here only so ``bench/jsonparse.py`` can compare it with the json-repair based parser in
the same run. Not part of the package; do not import it from ``src/``.

The original module docstring follows.

Tolerant parsing of JSON replies from chat models, and detection of degenerate replies.

Used by ``tool_calling="json"`` (schemas described in the prompt, the JSON reply parsed and
repaired) for models without native tool calling, such as small local models.

``parse_json_reply`` accepts what models commonly wrap or bend JSON with:

- Markdown code fences (```json ... ```), prose before and after the object;
- single-quoted strings and Python literals (``True``/``False``/``None``);
- trailing commas;
- several objects in one reply (the first complete top-level object wins).

When nothing usable is found it raises :class:`JsonReplyError`, whose message is short and
meant to be sent back to the model so it can correct its reply.

``check_degenerate`` flags replies that are not worth parsing or repairing: empty, looping
(the same words or characters repeated over and over) or cut off at the token limit.

Nothing here ever evaluates code: the Python-literal fallback uses :func:`ast.literal_eval`.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["JsonReplyError", "check_degenerate", "parse_json_reply"]

_FENCE = "```"
_CLOSERS = {"{": "}", "[": "]"}
# Bare words outside strings mapped to their Python spelling for the literal_eval fallback.
_JSON_WORDS = {"true": "True", "false": "False", "null": "None"}


class JsonReplyError(ValueError):
    """A reply holds no usable JSON; the message says why, in words fit for the model."""


# --------------------------------------------------------------------------- parsing


def parse_json_reply(text: str) -> Any:
    """Return the JSON value a model reply holds, tolerating the usual wrapping and slips.

    The whole reply is tried as JSON first (any JSON value is accepted then). Otherwise the
    contents of Markdown code fences are tried, then the reply is scanned for the first
    complete top-level ``{...}`` object (or, if the reply has no ``{`` at all, ``[...]``).

    Raises:
        JsonReplyError: with a short message saying what was wrong.
    """
    if not isinstance(text, str):
        raise JsonReplyError(f"expected the reply as text, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise JsonReplyError("empty reply: expected a JSON object")
    try:
        return json.loads(stripped)
    except ValueError:
        pass

    first_error: JsonReplyError | None = None
    for block in _fenced_blocks(stripped):
        try:
            return _parse_somewhere(block)
        except JsonReplyError as exc:
            first_error = first_error or exc
    try:
        return _parse_somewhere(stripped)
    except JsonReplyError as exc:
        # A fenced block that failed is the more precise diagnosis when there was one.
        raise (first_error or exc) from None


def _fenced_blocks(text: str) -> list[str]:
    """Contents of the Markdown code fences in ``text``; an unclosed last fence runs to the end."""
    parts = text.split(_FENCE)
    blocks = []
    # parts[1], parts[3], ... are inside fences.
    for inside in parts[1::2]:
        first_line, newline, rest = inside.partition("\n")
        # Drop an info string such as "json" or "python" on the opening fence line.
        if newline and (not first_line.strip() or first_line.strip().isidentifier()):
            inside = rest
        if inside.strip():
            blocks.append(inside.strip())
    return blocks


def _parse_somewhere(text: str) -> Any:
    """Parse ``text`` whole, else the first top-level object found in it."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    opener = "{" if "{" in text else "["
    if opener not in text:
        raise JsonReplyError("no JSON object found in the reply")

    first_error: JsonReplyError | None = None
    pos = text.find(opener)
    while pos != -1:
        span = _balanced_span(text, pos)
        if span.unterminated is not None:
            # The reply ends inside this value: it was cut off, whatever came before.
            raise JsonReplyError(span.unterminated)
        try:
            return _parse_span(span.text)
        except JsonReplyError as exc:
            first_error = first_error or exc
        # Skip past the failed span rather than into it, so a broken object never yields
        # one of its nested objects as if it were the answer.
        pos = text.find(opener, span.end)
    assert first_error is not None
    raise first_error


@dataclass(frozen=True)
class _Span:
    text: str
    end: int
    unterminated: str | None = None


def _balanced_span(text: str, start: int) -> _Span:
    """The bracketed value starting at ``text[start]``, aware of quoted strings.

    Both quote styles delimit strings (models use single quotes too). Returns the span up to
    and including the matching closer; a mismatched closer ends the span early and is left
    for the parser to report.
    """
    stack: list[str] = []
    quote: str | None = None
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if quote is not None:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            elif ch == "\n" and quote == "'":
                # An apostrophe in an unquoted word, not a string: forget it.
                quote = None
            continue
        if ch in ('"', "'"):
            quote = ch
        elif ch in _CLOSERS:
            stack.append(_CLOSERS[ch])
        elif ch in ("}", "]"):
            if not stack or ch != stack[-1]:
                return _Span(text[start : i + 1], i + 1)
            stack.pop()
            if not stack:
                return _Span(text[start : i + 1], i + 1)
    if quote is not None:
        reason = "unterminated string: the reply seems truncated"
    else:
        kind = "object" if text[start] == "{" else "array"
        missing = "".join(reversed(stack))
        reason = f"unterminated {kind}: the reply seems truncated (missing {missing!r} at the end)"
    return _Span(text[start:], len(text), reason)


def _parse_span(span: str) -> Any:
    """Parse one bracketed span: strict JSON, then without trailing commas, then as Python."""
    try:
        return json.loads(span)
    except json.JSONDecodeError as exc:
        error = exc
    try:
        return json.loads(_rewrite_outside_strings(span, drop_trailing_commas=True))
    except json.JSONDecodeError:
        pass
    try:
        value = ast.literal_eval(_rewrite_outside_strings(span, pythonize=True))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    else:
        converted = _to_json_value(value)
        if converted is not _NOT_JSON:
            return converted
    raise JsonReplyError(f"invalid JSON: {error.msg} (line {error.lineno}, column {error.colno})")


def _rewrite_outside_strings(
    span: str, *, drop_trailing_commas: bool = False, pythonize: bool = False
) -> str:
    """Rewrite ``span`` outside quoted strings.

    ``drop_trailing_commas`` removes a comma followed (after blanks) by ``}`` or ``]``.
    ``pythonize`` maps the bare words true/false/null to True/False/None for literal_eval.
    """
    out: list[str] = []
    quote: str | None = None
    escaped = False
    i = 0
    while i < len(span):
        ch = span[i]
        if quote is not None:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            i += 1
            continue
        if ch in ('"', "'"):
            quote = ch
        elif drop_trailing_commas and ch == ",":
            rest = span[i + 1 :].lstrip()
            if rest[:1] in ("}", "]"):
                i += 1
                continue
        elif pythonize and ch.isalpha() and not (out and (out[-1].isalnum() or out[-1] == "_")):
            word_end = i
            while word_end < len(span) and (span[word_end].isalnum() or span[word_end] == "_"):
                word_end += 1
            word = span[i:word_end]
            out.append(_JSON_WORDS.get(word, word))
            i = word_end
            continue
        out.append(ch)
        i += 1
    return "".join(out)


_NOT_JSON = object()


def _to_json_value(value: Any) -> Any:
    """``value`` as plain JSON data (tuples become lists), or ``_NOT_JSON``."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        items = [_to_json_value(v) for v in value]
        return _NOT_JSON if any(v is _NOT_JSON for v in items) else items
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            converted = _to_json_value(item)
            if not isinstance(key, str) or converted is _NOT_JSON:
                return _NOT_JSON
            result[key] = converted
        return result
    return _NOT_JSON  # sets, bytes, complex numbers, Ellipsis


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

    Degenerate means: empty or whitespace only; stuck in a loop (the same words, lines or
    characters repeated back to back many times); or cut off at the token limit
    (``finish_reason`` ``"length"``, as OpenAI-compatible servers report it).
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
    return None


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
