"""Live progress in the terminal: the checklist and the actors at work, refreshed
as the run's events stream in (``stream_mode=["updates", "custom"]``,
``subgraphs=True``), and the answer as it is written when ``"messages"`` is among
the modes."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.measure import Measurement
from rich.panel import Panel
from rich.segment import Segments
from rich.text import Text

from aimegraph.streaming import answer_piece

StreamChunk = tuple[tuple[str, ...], str, Any]

_UNBOUNDED = 100_000
"""Columns to measure in off a terminal: wider than any table a command prints."""


def cli_console(*, stderr: bool = False) -> Console:
    """A console for commands' output. On a terminal, lines wrap at its width; anywhere
    else (a pipe, a log, CI) they are never wrapped, since there is no width to fit
    and a command to copy, such as ``aimegraph resume THREAD``, or a table row split in
    two would no longer work or line up."""
    console = Console(stderr=stderr, highlight=False)
    console.soft_wrap = not console.is_terminal
    return console


def print_unwrapped(console: Console, renderable: RenderableType) -> None:
    """Print a table (or any renderable) on a console of :func:`cli_console`'s: on a
    terminal at most its width; anywhere else at the width its content needs. Rich lays a
    table out in the console's width (80 columns off a terminal), which soft wrapping
    does not change, and a cell split over two lines no longer reads as one row."""
    if not console.soft_wrap:
        console.print(renderable)
        return
    unbounded = console.options.update_width(_UNBOUNDED)
    width = Measurement.get(console, unbounded, renderable).maximum
    lines = console.render_lines(
        renderable, console.options.update_width(width), pad=False, new_lines=True
    )
    console.print(Segments(segment for line in lines for segment in line), soft_wrap=True)


_MARK_STYLES = {
    "[x]": "green",
    "[~]": "cyan",
    "[!]": "red",
    "[-]": "dim",
    "[/]": "yellow",
    "[ ]": "",
}


class LiveProgress:
    """Renders stream events. On a terminal it redraws one live panel; elsewhere
    (logs, CI, pipes) it prints each change as plain lines."""

    def __init__(self, console: Console | None = None, *, title: str = "aimegraph") -> None:
        self.console = console or Console(highlight=False)
        self.title = title
        self.checklist = "(planning...)"
        self.working: dict[str, str] = {}
        self.log: deque[str] = deque(maxlen=8)
        self.answer = ""
        """The answer's text streamed so far (``messages`` mode)."""
        self._live: Live | None = None
        self._mid_line = False  # a streamed piece left the line open (plain output)
        self._printed_checklist = ""  # plain output: the last checklist printed

    def __enter__(self) -> LiveProgress:
        if self.console.is_terminal:
            self._live = Live(self._render(), console=self.console, refresh_per_second=8)
            self._live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)
        else:
            self._end_line()

    def follow(self, chunks: Iterator[StreamChunk]) -> None:
        for chunk in chunks:
            _namespace, mode, payload = chunk
            if mode == "custom" and isinstance(payload, dict):
                self.on_event(payload)
            elif piece := answer_piece(chunk):
                self.on_answer(piece)

    def on_answer(self, piece: str) -> None:
        """The next piece of the answer: shown in the panel, or printed as it comes."""
        if self._live is None:
            if not self.answer:
                self.console.print(Text("answer:", style="bold"))
            self.console.print(piece, end="", markup=False, highlight=False)
            self._mid_line = not piece.endswith("\n")
        self.answer += piece
        self._refresh()

    def on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind in ("checklist", "plan"):
            self.checklist = event["checklist"]
            if kind == "plan":
                self._say(f"plan: {event.get('rationale', '')}")
            self._show_checklist()
        elif kind == "actor":
            task_id = event["task_id"]
            if event["event"] == "started":
                self.working[task_id] = f"started with tools: {', '.join(event['tools'])}"
            else:
                self.working.pop(task_id, None)
                self._say(f"{task_id} {event['event']}: {_one_line(event.get('summary', ''))}")
        elif kind == "progress":
            self.working[event["task_id"]] = f"{event['status']}: {_one_line(event['message'])}"
            self._say(f"{event['task_id']} {event['status']}: {_one_line(event['message'])}")
        elif kind == "replan":
            self._say(f"replanning: {_one_line(event['reason'])}")
        elif kind == "guardrail":  # what a guardrail redacted or tripped on
            where = event.get("tool") or event["stage"]
            self._say(f"{where}: {_one_line('; '.join(event['findings']))}")
        elif kind == "verifier":
            self._say(f"verifier looks: {event['tool']} {_one_line(json.dumps(event['args']))}")
        elif kind == "verdict":
            verdict = event.get("verdict")
            self._say(
                f"verifier: {'passed' if verdict and verdict.passed else 'rejected'}"
                if verdict is not None
                else f"verifier: no verdict ({event.get('error')})"
            )
        self._refresh()

    def _say(self, line: str) -> None:
        self.log.append(line)
        if self._live is None:
            self._end_line()
            self.console.print(f"  {line}", markup=False)

    def _end_line(self) -> None:
        if self._mid_line:
            self.console.print()
            self._mid_line = False

    def _show_checklist(self) -> None:
        # Several nodes publish the list as it stands (a round's end, the orchestrator
        # seeing it finished): a list that has not changed is not printed again.
        if self._live is None and self.checklist != self._printed_checklist:
            self._printed_checklist = self.checklist
            self._end_line()
            self.console.print(Text("progress:", style="bold"))
            self.console.print(_styled_checklist(self.checklist))

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Panel:
        parts: list[Any] = [_styled_checklist(self.checklist)]
        if self.working:
            parts.append(Text("\nat work:", style="bold"))
            parts += [Text(f"  {tid}: {msg}", style="cyan") for tid, msg in self.working.items()]
        if self.log:
            parts.append(Text("\nrecent:", style="bold"))
            parts += [Text(f"  {line}", style="dim") for line in self.log]
        if self.answer:
            # The newest lines: a live panel taller than the terminal cannot redraw.
            parts += [
                Text("\nanswer:", style="bold"),
                Text("\n".join(self.answer.splitlines()[-12:])),
            ]
        return Panel(Group(*parts), title=self.title)


def _styled_checklist(checklist: str) -> Text:
    text = Text()
    for line in checklist.splitlines():
        style = next((s for mark, s in _MARK_STYLES.items() if mark in line), "")
        text.append(line + "\n", style=style)
    return text


def _one_line(text: str, limit: int = 110) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
