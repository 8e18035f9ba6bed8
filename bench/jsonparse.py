"""Parsing model JSON: the json-repair based parser against the hand-written one it replaced.

A seeded generator writes replies shaped like those of real models: plans, verdicts and
tool calls (strings with quotes, braces, apostrophes and line breaks in them), rendered
clean or bent (fences, prose, single quotes and Python literals, trailing commas,
comments, unquoted keys, raw line breaks inside strings, missing commas, a ``<think>``
block holding a draft, an example object before the real one), plus replies that must be
refused (cut off at the token limit, or no JSON at all).

Each reply is parsed by ``aimegraph.models.jsonparse.parse_json_reply`` (as the engine
calls it: for tool calls, preferring an object that names a known tool) and by the
frozen baseline in ``bench/jsonparse_baseline.py``. A parse is correct when it returns
exactly the value the reply was written from, or, for a reply that must be refused,
raises. Time per reply is the median over repeats of the whole corpus, divided by its
size, both parsers in the same process.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aimegraph.models import jsonparse
from bench import jsonparse_baseline as baseline
from bench.common import Headline, SectionResult, Table, fmt_range, fmt_x

TOOLS = ("calculator", "python", "write_file", "read_file", "submit_result")
REFUSE = object()
"""The expected outcome of a reply that must be refused (raise)."""

_WORDS = ("revenue", "north", "south", "growth", "plan", "report", "file", "user's", "total")
_AWKWARD = ('he said "hi"', "a {brace} and [bracket]", "it's done", "tab\there", "50% + 3")


@dataclass(frozen=True)
class Reply:
    kind: str
    text: str
    expected: Any
    is_tool_call: bool


# --------------------------------------------------------------------------- the corpus


def _string(rng: random.Random) -> str:
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 8)))
    return f"{words} {rng.choice(_AWKWARD)}" if rng.random() < 0.3 else words


def _value(rng: random.Random) -> dict[str, Any]:
    """A plan, a verdict or a tool call, as the engine asks for them."""
    kind = rng.randrange(3)
    if kind == 0:
        tasks = [
            {
                "id": f"t{i}",
                "title": _string(rng),
                "dependencies": [f"t{j}" for j in range(1, i) if rng.random() < 0.4],
                "tool_bundles": rng.sample(["files", "compute", "web"], rng.randint(0, 2)),
            }
            for i in range(1, rng.randint(2, 6))
        ]
        return {"rationale": _string(rng), "tasks": tasks, "drop": []}
    if kind == 1:
        issues = [_string(rng) for _ in range(rng.randint(0, 2))]
        return {"passed": rng.random() < 0.5, "reasoning": _string(rng), "issues": issues}
    args: dict[str, Any] = {"expression": f"{rng.randint(1, 99)}*{rng.randint(1, 99)}"}
    if rng.random() < 0.5:
        body = "\n".join(f"print({_string(rng)!r})" for _ in range(rng.randint(1, 4)))
        args = {"path": "out.py", "content": body + "\n", "overwrite": rng.random() < 0.5}
    return {"tool": rng.choice(TOOLS), "args": args}


def _python_literal(value: Any) -> str:
    return repr(value)  # single quotes, True / False / None


def _trailing_commas(value: Any) -> str:
    text = json.dumps(value, indent=1)
    return text.replace("\n]", ",\n]").replace("\n}", ",\n}")


def _comments(value: Any) -> str:
    lines = json.dumps(value, indent=1).split("\n")
    return "\n".join(
        f"{line} // note {i}" if line.endswith(",") and i % 2 else line
        for i, line in enumerate(lines)
    )


def _unquoted_keys(value: Any) -> str:
    text = json.dumps(value, indent=1)
    for key in _keys(value):
        text = text.replace(f'"{key}": ', f"{key}: ")
    return text


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def _raw_line_breaks(value: Any) -> str:
    return re.sub(r"(?<!\\)\\n", "\n", json.dumps(value, indent=1))


def _missing_comma(value: Any) -> str:
    text = json.dumps(value, indent=1)
    return text.replace(",\n", "\n", 1)


_BENDS: dict[str, Callable[[Any], str]] = {
    "clean": lambda v: json.dumps(v),
    "pretty": lambda v: json.dumps(v, indent=2),
    "python literals": _python_literal,
    "trailing commas": _trailing_commas,
    "comments": _comments,
    "unquoted keys": _unquoted_keys,
    "raw line breaks": _raw_line_breaks,
    "missing comma": _missing_comma,
}


def make_corpus(n: int, seed: int = 18) -> list[Reply]:
    """``n`` replies: a value rendered with one bend, then wrapped one way; one in ten is
    cut off at the token limit and one in twenty-five holds no JSON."""
    rng = random.Random(seed)
    replies = []
    for _ in range(n):
        value = _value(rng)
        is_call = "tool" in value
        roll = rng.random()
        if roll < 0.04:
            text = rng.choice(["I cannot help with that.", "```python\nprint('hi')\n```"])
            replies.append(Reply("no JSON", text, REFUSE, is_call))
            continue
        bend = rng.choice(list(_BENDS))
        body = _BENDS[bend](value)
        if roll < 0.14:
            cut = rng.randint(len(body) // 3, len(body) - 2)
            replies.append(Reply("cut off", f"```json\n{body[:cut]}", REFUSE, is_call))
            continue
        wrap = rng.choice(["bare", "fence", "prose", "think draft", "example first"])
        if wrap == "fence":
            text = f"```json\n{body}\n```"
        elif wrap == "prose":
            text = f"Sure! Here it is:\n{body}\nLet me know if that works."
        elif wrap == "think draft":
            draft = json.dumps({**_value(rng), "draft": True})
            text = f"<think>Maybe {draft}? No, let me redo it.</think>\n{body}"
        elif wrap == "example first" and is_call:
            text = f'The format is {{"tool": "<name>", "args": {{}}}}. My call:\n{body}'
        else:
            wrap, text = "bare", body
        replies.append(Reply(f"{bend}, {wrap}", text, value, is_call))
    return replies


# --------------------------------------------------------------------------- parsing


def _names_a_tool(value: Any) -> bool:
    return isinstance(value, dict) and value.get("tool") in TOOLS


def _parse_new(reply: Reply) -> Any:
    prefer = _names_a_tool if reply.is_tool_call else None
    return jsonparse.parse_json_reply(reply.text, prefer=prefer)


def _parse_old(reply: Reply) -> Any:
    return baseline.parse_json_reply(reply.text)


def _outcome(parse: Callable[[Reply], Any], reply: Reply) -> bool:
    """Whether ``parse`` got ``reply`` right (the value, or a refusal)."""
    try:
        value = parse(reply)
    except ValueError:
        return reply.expected is REFUSE
    return reply.expected is not REFUSE and value == reply.expected


def _times_per_reply(
    parsers: dict[str, Callable[[Reply], Any]], corpus: list[Reply], repeat: int
) -> dict[str, list[float]]:
    """Seconds per reply of each parser over the whole corpus, ``repeat`` times, the
    parsers taking turns so that drift hits them alike."""
    samples: dict[str, list[float]] = {name: [] for name in parsers}
    for _ in range(repeat):
        for name, parse in parsers.items():
            start = time.perf_counter()
            for reply in corpus:
                with contextlib.suppress(ValueError):
                    parse(reply)
            samples[name].append((time.perf_counter() - start) / len(corpus))
    return samples


def run(quick: bool) -> SectionResult:
    corpus = make_corpus(100 if quick else 1_000)
    repeat = 1 if quick else 5
    parsers = {"old (hand-written)": _parse_old, "new (json-repair)": _parse_new}
    samples = _times_per_reply(parsers, corpus, repeat)
    times = {name: statistics.median(values) for name, values in samples.items()}
    correct = {name: [_outcome(parse, r) for r in corpus] for name, parse in parsers.items()}

    summary = Table(
        f"6. Parsing model JSON: {len(corpus):,} generated replies (seed 18), old vs new parser",
        [
            "parser",
            "parsed correctly",
            "share",
            f"µs per reply, median (range) of {repeat}",
            "time vs old",
        ],
    )
    old_time = times["old (hand-written)"]
    for name in parsers:
        good = sum(correct[name])
        summary.add(
            name,
            f"{good:,} / {len(corpus):,}",
            f"{good / len(corpus):.1%}",
            fmt_range(samples[name], lambda v: f"{v * 1e6:.1f}"),
            fmt_x(times[name] / old_time),
        )
    summary.notes += [
        "Correct = exactly the value the reply was written from, or a refusal (an error) for "
        "a reply cut off at the token limit or holding no JSON. Tool calls are parsed as the "
        "engine parses them: the new parser prefers an object naming a known tool.",
        "Replies: plans, verdicts and tool calls whose strings hold quotes, braces, "
        "apostrophes, tabs and line breaks; each rendered with one bend and one wrapping.",
        "The old parser has no notion of reasoning or of a preferred object: it takes the "
        "draft in a `<think>` block or the example before the call. It refuses comments, "
        "unquoted keys, missing commas and raw line breaks inside strings.",
        "json-repair alone would accept every cut-off reply (it closes what is open); the "
        "new parser refuses them before repairing, so a truncated file is never written.",
    ]

    kinds: Counter[str] = Counter()
    old_good: Counter[str] = Counter()
    new_good: Counter[str] = Counter()
    for i, reply in enumerate(corpus):
        kind = reply.kind.split(", ")[0] if reply.expected is not REFUSE else reply.kind
        kinds[kind] += 1
        old_good[kind] += correct["old (hand-written)"][i]
        new_good[kind] += correct["new (json-repair)"][i]
    wrappings: Counter[str] = Counter()
    wrap_old: Counter[str] = Counter()
    wrap_new: Counter[str] = Counter()
    for i, reply in enumerate(corpus):
        if reply.expected is REFUSE:
            continue
        wrap = reply.kind.split(", ")[1]
        wrappings[wrap] += 1
        wrap_old[wrap] += correct["old (hand-written)"][i]
        wrap_new[wrap] += correct["new (json-repair)"][i]

    by_kind = Table(
        "6b. Parsed correctly by shape (bend of the JSON itself; refusals at the end)",
        ["shape", "replies", "old", "new"],
    )
    for kind in sorted(kinds, key=lambda k: (k in ("cut off", "no JSON"), k)):
        by_kind.add(kind, kinds[kind], old_good[kind], new_good[kind])
    by_wrap = Table(
        "6c. Parsed correctly by wrapping (replies to be parsed only)",
        ["wrapping", "replies", "old", "new"],
    )
    for wrap in sorted(wrappings):
        by_wrap.add(wrap, wrappings[wrap], wrap_old[wrap], wrap_new[wrap])

    metrics = {
        "replies": float(len(corpus)),
        "old.correct": float(sum(correct["old (hand-written)"])),
        "new.correct": float(sum(correct["new (json-repair)"])),
        "old.s_per_reply": old_time,
        "new.s_per_reply": times["new (json-repair)"],
    }
    ratios = [
        new / old
        for new, old in zip(
            samples["new (json-repair)"], samples["old (hand-written)"], strict=True
        )
    ]
    new_us = [v * 1e6 for v in samples["new (json-repair)"]]
    refused = sum(r.expected is REFUSE for r in corpus)
    headline = Headline(
        f"parsing model JSON (`bench/jsonparse.py`): {len(corpus):,} generated replies (seed "
        "18) shaped like real models' (plans, verdicts, tool calls; bent with comments, "
        "unquoted keys, single quotes, missing commas, raw line breaks...; wrapped in fences, "
        f"prose, `<think>` drafts, an example before the call; {refused / len(corpus):.0%} cut "
        "off or holding no JSON, to be refused)",
        "the hand-written parser json-repair replaced (frozen copy in "
        "`bench/jsonparse_baseline.py`)",
        f"{metrics['new.correct']:,.0f} of {len(corpus):,} right (old: "
        f"{metrics['old.correct']:,.0f}); {min(new_us):.0f}-{max(new_us):.0f} µs per reply over "
        f"{repeat} passes, {min(ratios):.1f}-{max(ratios):.1f}x the old parser's time",
    )
    return SectionResult("jsonparse", [summary, by_kind, by_wrap], metrics, headlines=[headline])
