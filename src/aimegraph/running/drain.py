"""Stopping a run at a step boundary when the process is asked to stop.

LangGraph's own mechanism is ``RunControl.request_drain()``: the run finishes the
steps in flight, saves them, starts nothing more, and raises ``GraphDrained``; the
thread resumes from there. :class:`SignalDrain` turns SIGINT (Ctrl-C) and, for the
CLI, SIGTERM into that request, so a stop never interrupts a step half-way and
never leaves a run without its finished work. A second signal is for when the
calls in flight are not worth waiting for: by default it raises
``KeyboardInterrupt`` as Ctrl-C always does; the CLI exits at once instead.

Signal handlers belong to the main thread: elsewhere, and when the program has
installed its own handler (or ignores the signal), :class:`SignalDrain` changes nothing.
:func:`interrupted_by_ctrl_c` is what a run driven from Python gets: Ctrl-C drains it,
then raises ``KeyboardInterrupt``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType, TracebackType
from typing import Any

from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl

__all__ = ["SignalDrain", "interrupted_by_ctrl_c"]

_DEFAULT_HANDLERS: dict[int, Any] = {
    signal.SIGINT: signal.default_int_handler,
    signal.SIGTERM: signal.SIG_DFL,
}


def _interrupt(signum: int) -> None:
    raise KeyboardInterrupt


class SignalDrain:
    """While entered, the first of ``signals`` drains ``control`` (reason: the
    signal's name, e.g. ``SIGINT``) and a second one calls ``on_repeat(signum)``
    (default: raise ``KeyboardInterrupt``). ``received`` is the first signal.

    ``only_unclaimed`` leaves alone a signal whose handler the program has changed
    (a library must not take Ctrl-C from an application that handles it).
    """

    def __init__(
        self,
        control: RunControl,
        signals: Sequence[int] = (signal.SIGINT,),
        *,
        on_first: Callable[[int], None] | None = None,
        on_repeat: Callable[[int], None] = _interrupt,
        only_unclaimed: bool = False,
    ) -> None:
        self.control = control
        self.signals = tuple(signals)
        self.on_first = on_first
        self.on_repeat = on_repeat
        self.only_unclaimed = only_unclaimed
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> SignalDrain:
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in self.signals:
            current = signal.getsignal(signum)
            if self.only_unclaimed and current is not _DEFAULT_HANDLERS.get(signum):
                continue
            self._previous[signum] = current
            signal.signal(signum, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    @property
    def active(self) -> bool:
        """Whether a handler is installed (main thread, signal not claimed)."""
        return bool(self._previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:
            self.on_repeat(signum)
            return
        self.received = signum
        self.control.request_drain(signal.Signals(signum).name)
        if self.on_first is not None:
            self.on_first(signum)


@contextlib.contextmanager
def interrupted_by_ctrl_c(control: RunControl) -> Iterator[SignalDrain]:
    """Around a run driven from the main thread: Ctrl-C drains ``control`` (unless the
    program handles SIGINT itself), and once the run has stopped the ``with`` block
    ends in ``KeyboardInterrupt``, also when the run ended in the step the signal came
    in (LangGraph checks a drain before a step, and none was left): a Ctrl-C is never
    lost. A drain asked for otherwise stays LangGraph's ``GraphDrained``."""
    with SignalDrain(control, only_unclaimed=True) as stop:
        try:
            yield stop
        except GraphDrained as exc:
            if stop.received is None:
                raise
            raise KeyboardInterrupt("the run stopped at a step boundary") from exc
    if stop.received is not None:
        raise KeyboardInterrupt("the run ended as it was interrupted")
