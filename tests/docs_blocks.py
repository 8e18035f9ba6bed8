"""The fenced code blocks of a Markdown document, found by the section they are in, and
run as a reader would paste them, so a test fails when a documented example does.

A block that cannot run in the suite says why on its first line, as a marker comment:
``# needs: a provider key`` (:attr:`CodeBlock.needs`); the test skips it with that
reason instead of leaving it untried.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CodeBlock", "code_blocks", "run_block"]

_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_NEEDS = re.compile(r"^#\s*needs:\s*(.+)$")


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: where it is (``line``: its first line of code, from 1) and
    the section (``heading``) it is in."""

    document: Path
    heading: str
    line: int
    language: str
    code: str

    @property
    def needs(self) -> str | None:
        """What the block needs that the suite has not (its ``# needs:`` marker)."""
        first = self.code.lstrip().partition("\n")[0].strip()
        return match.group(1) if (match := _NEEDS.match(first)) else None

    @property
    def where(self) -> str:
        return f"{self.document.name}:{self.line} ({self.heading})"


def code_blocks(document: Path, heading: str, language: str = "python") -> list[CodeBlock]:
    """The ``language`` blocks in the section titled ``heading`` (the heading's text,
    any level), its subsections included: up to the next heading of its level or
    above. Headings inside code blocks (a shell comment) are not headings.

    Raises:
        LookupError: no heading has that text (a renamed section is not a silent pass).
    """
    blocks: list[CodeBlock] = []
    level = 0  # the section's heading level once inside it
    found = False
    fence: str | None = None
    start, kind = 0, ""
    body: list[str] = []
    for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), 1):
        if fence is not None:
            if line.strip() == fence:
                if level and kind == language:
                    code = "\n".join(body) + "\n"
                    blocks.append(CodeBlock(document, heading, start, kind, code))
                fence = None
            else:
                body.append(line)
            continue
        if opened := _FENCE.match(line):
            fence, kind, start, body = opened.group(1), opened.group(2), number + 1, []
            continue
        if titled := _HEADING.match(line):
            depth = len(titled.group(1))
            if titled.group(2) == heading and not level:
                level, found = depth, True
            elif level and depth <= level:
                level = 0
    if not found:
        raise LookupError(f"{document.name} has no heading {heading!r}")
    return blocks


def run_block(block: CodeBlock) -> dict[str, Any]:
    """Run ``block`` as a module of its own (a fresh namespace, ``__name__`` of
    ``__main__``) in the current directory; its names afterwards. A traceback points
    at the document's own line numbers."""
    padded = "\n" * (block.line - 1) + block.code
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(padded, str(block.document), "exec"), namespace)
    return namespace
