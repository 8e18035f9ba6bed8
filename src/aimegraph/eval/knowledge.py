"""The knowledge rule of stand-in models: a call uses only what its caller has seen.

A figure that compares systems played by stand-ins (the oracle, the gullible model)
holds only if each stand-in knows what a real model would know at that point. So a
call's *literals* must appear in what its caller has seen, unless the suite notes how
the caller works them out:

- **Literals** of a call: each string in its arguments (the text around the
  ``{stage:...}`` and ``{last_tool_output}`` references, which stand for results the
  caller has seen), each number and each key of a nested object; in code (python's
  ``code``, the calculator's ``expression``), each string and number constant, each
  constant subscript or slice bound (a field position such as ``line.split()[1]``) and
  each attribute name read off data (``row.temp_c``; a built-in type's method, such
  as ``rates.get``, is not data). Integers from -1 to 10 count
  only as subscripts, where 0 and -1 (the first, the last) are free; blank strings and
  file open modes are free.
- **Seen**: for aimegraph's planner, the goals so far; for an actor, those, its
  dependencies' results and its own observations; for a ReAct loop, its conversation.
  A number is seen when the same number is written there (``10,000`` shows 10000,
  ``4.5%`` shows 4.5 and 0.045).
- **Derived**: ``derived: {LITERAL: how}`` on a call allows a literal its caller works
  out (a format string, ``'utf-8'``, 7 x 12 = ``84``); a note keyed by an argument's
  name allows all of that argument (the prose of a report the caller writes). Reports
  count the notes.

The rule is checked when a suite loads (:func:`clairvoyant_calls`), on each oracle as
each system plays it: a read of one of the task's files shows its text there and then,
any other tool's output is known only at run time, so a literal only such an output
could show waits for the second check, against the text of each stand-in call's actual
prompt (:func:`unseen_literals`; a result cut to its head and tail does not show its
middle).
"""

from __future__ import annotations

import ast
import json
import math
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

__all__ = [
    "CODE_ARGUMENTS",
    "Literal",
    "Sight",
    "StaticReads",
    "call_literals",
    "prompt_text",
    "unseen",
    "unseen_literals",
]

CODE_ARGUMENTS = {("python", "code"), ("calculator", "expression")}
"""The (tool, argument) pairs whose value is code, read as Python (besides the
content a file tool writes to a ``.py`` file)."""

_FILE_WRITES = frozenset({"write_file", "append_file"})

REFERENCE = re.compile(r"\{(?:stage|dep|result):[\w.-]+\}|\{last_tool_output\}")
"""How an oracle writes a result it has seen (the scripted model's spellings too)."""

_BUILTIN_TYPES = (dict, list, str, set, tuple, bytes, int, float)


def _is_builtin_method(name: str) -> bool:
    """Whether ``name`` is a method of a built-in type (``rates.get`` passed as a key)."""
    return any(hasattr(kind, name) for kind in _BUILTIN_TYPES)


_FREE_STRINGS = frozenset({"r", "w", "a", "x", "rb", "wb", "ab", "r+", "w+", "a+"})
_SMALL_INTEGERS = range(-1, 11)
_FREE_SUBSCRIPTS = frozenset({0, -1})
_NUMBER = re.compile(r"((?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)\s?(%?)")


@dataclass(frozen=True)
class Literal:
    """One literal of a call: its text as written, what kind it is, and where."""

    text: str
    kind: str  # "string", "number", "key", "subscript" or "attribute"
    argument: str
    value: float | None = None  # numbers and subscripts

    def shown_in(self, text: str, numbers: frozenset[float]) -> bool:
        if self.value is not None:
            wanted = abs(self.value)
            return any(math.isclose(wanted, n, rel_tol=1e-9) for n in numbers)
        return self.text in text

    def describe(self) -> str:
        return f"{self.kind} {self.text!r} (in {self.argument})"


def call_literals(tool: str, args: Mapping[str, Any]) -> list[Literal]:
    """The literals of a call of ``tool`` with ``args`` (see the module docstring)."""
    found: list[Literal] = []
    program = tool in _FILE_WRITES and str(args.get("path") or "").endswith(".py")
    for name, value in args.items():
        code = (tool, name) in CODE_ARGUMENTS or (program and name == "content")
        if isinstance(value, str) and code:
            found += _code_literals(value, name)
        else:
            found += _value_literals(value, name)
    return found


def _value_literals(value: Any, where: str) -> Iterator[Literal]:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int | float):
        yield from _number(value, where, as_subscript=False)
    elif isinstance(value, str):
        yield from _string(value, where)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from (Literal(k.text, "key", where) for k in _string(str(key), where))
            yield from _value_literals(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _value_literals(item, where)


def _string(text: str, where: str) -> Iterator[Literal]:
    for piece in REFERENCE.split(text):
        piece = piece.strip()
        if piece and piece not in _FREE_STRINGS:
            yield Literal(piece, "string", where)


def _number(value: float, where: str, *, as_subscript: bool) -> Iterator[Literal]:
    if isinstance(value, float) and not math.isfinite(value):
        return
    integral = float(value).is_integer()
    if as_subscript:
        if integral and int(value) in _FREE_SUBSCRIPTS:
            return
        yield Literal(_written(value), "subscript", where, float(value))
    elif not (integral and int(value) in _SMALL_INTEGERS):
        yield Literal(_written(value), "number", where, float(value))


def _written(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _code_literals(code: str, where: str) -> list[Literal]:
    """The literals of Python source (a reference becomes a name first, so that one
    written outside a string still parses); source that does not parse is a string."""
    source = REFERENCE.sub(lambda m: f"__seen{m.start()}__", code)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return list(_string(code, where))
    modules = {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    subscripted: set[int] = set()
    found: list[Literal] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            for bound in _bounds(node.slice):
                value = _constant_number(bound)
                if value is not None:
                    subscripted |= {id(n) for n in ast.walk(bound)}
                    found += _number(value, where, as_subscript=True)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            base = node.value
            if (
                id(node) not in called
                and isinstance(base, ast.Name)
                and base.id not in modules
                and not _is_builtin_method(node.attr)
            ):
                found.append(Literal(node.attr, "attribute", where))
    for node in ast.walk(tree):
        if id(node) in subscripted or not isinstance(node, ast.Constant):
            continue
        if isinstance(node.value, str):
            found += _string(re.sub(r"__seen\d+__", "{last_tool_output}", node.value), where)
        elif isinstance(node.value, int | float) and not isinstance(node.value, bool):
            found += _number(node.value, where, as_subscript=False)
    return found


def _bounds(index: ast.expr) -> list[ast.expr]:
    """The expressions a subscript's index is made of (a slice's bounds, a tuple's items)."""
    if isinstance(index, ast.Slice):
        return [b for b in (index.lower, index.upper, index.step) if b is not None]
    if isinstance(index, ast.Tuple):
        return [b for item in index.elts for b in _bounds(item)]
    return [index]


def _constant_number(node: ast.expr) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _constant_number(node.operand)
        return -inner if inner is not None else None
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return None if isinstance(node.value, bool) else float(node.value)
    return None


# -- what a caller has seen


@dataclass(frozen=True)
class Sight:
    """What a caller has seen: ``text``, and whether it also saw output known only at
    run time (``pending``: a literal missing from ``text`` may be in that output)."""

    text: str = ""
    pending: bool = False

    def seeing(self, *texts: str | None) -> Sight:
        """This sight and ``texts`` (None: an output known only at run time)."""
        known = [t for t in texts if t is not None]
        return Sight("\n".join([self.text, *known]), self.pending or None in texts)

    def numbers(self) -> frozenset[float]:
        return _numbers_in(self.text)


def _numbers_in(text: str) -> frozenset[float]:
    """The numbers written in ``text``; a percentage shows its fraction too."""
    found: set[float] = set()
    for match in _NUMBER.finditer(text):
        value = float(match.group(1).replace(",", ""))
        found.add(value)
        if match.group(2):
            found.add(value / 100)
    return frozenset(found)


def unseen(
    literals: Iterable[Literal], text: str, derived: Mapping[str, str] | None = None
) -> list[Literal]:
    """The ``literals`` that neither appear in ``text`` nor have a ``derived`` note
    (keyed by the literal, or by the argument it is in)."""
    notes = derived or {}
    numbers = _numbers_in(text)
    return [
        literal
        for literal in literals
        if literal.text not in notes
        and literal.argument.split(".")[0] not in notes
        and not literal.shown_in(text, numbers)
    ]


def prompt_text(messages: Sequence[BaseMessage]) -> str:
    """Everything a model is shown in ``messages``: each message's text, whatever its
    type, and the calls it made itself (their arguments)."""
    parts: list[str] = []
    for message in messages:
        content = message.content
        parts.append(content if isinstance(content, str) else json.dumps(content))
        if isinstance(message, AIMessage):
            parts += [json.dumps(call["args"], ensure_ascii=False) for call in message.tool_calls]
            parts += [str(call["args"]) for call in message.tool_calls]
    return "\n".join(parts)


def unseen_literals(
    tool: str,
    args: Mapping[str, Any],
    messages: Sequence[BaseMessage],
    derived: Mapping[str, str] | None = None,
) -> list[Literal]:
    """The run-time check: the literals of a call that the prompt ``messages`` does
    not show (and no ``derived`` note allows)."""
    return unseen(call_literals(tool, args), prompt_text(messages), derived)


class StaticReads:
    """The outputs a suite's oracle check knows before run time: ``read_file`` and
    ``list_dir`` of a task's own files, through the real tools over a scratch copy."""

    _KNOWN = frozenset({"read_file", "list_dir"})

    def __init__(self, files: Mapping[str, Path]) -> None:
        self._files = dict(files)
        self._tools: dict[str, Any] | None = None
        self._scratch: tempfile.TemporaryDirectory[str] | None = None

    def output(self, tool: str, args: Mapping[str, Any]) -> str | None:
        """The output of the call, or None when only the run can tell."""
        if tool not in self._KNOWN or REFERENCE.search(json.dumps(dict(args))):
            return None
        try:
            result = self._read_tools()[tool].invoke(dict(args))
        except Exception:  # noqa: BLE001 - a file the run writes first: known only then
            return None
        return str(result)

    def _read_tools(self) -> dict[str, Any]:
        if self._tools is None:
            from aimegraph.tools.files import make_file_tools

            self._scratch = tempfile.TemporaryDirectory(prefix="aimegraph-oracle-")
            root = Path(self._scratch.name)
            for target, source in self._files.items():
                (root / target).parent.mkdir(parents=True, exist_ok=True)
                (root / target).write_bytes(source.read_bytes())
            self._tools = {t.name: t for t in make_file_tools(root) if t.name in self._KNOWN}
        return self._tools

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None
