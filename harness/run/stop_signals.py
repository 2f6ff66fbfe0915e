"""What SIGINT, SIGTERM and SIGHUP do to a run: stop it once, then let the record be written.

`kill`, a CI cancellation or `timeout` send SIGTERM, a closed terminal SIGHUP, a
user Ctrl-C (often twice). The first of them raises `RunStop` in the main thread,
so whatever the runner is waiting on ends and it stops the framework's process
group; every later one is only noted (and makes the stop hurry to SIGKILL), never
raised, so a second Ctrl-C cannot skip writing the record.

    with stop_signals() as stops:   # the runner and `rlbench run` share one, nested
        ...
        stops.hold()                # from here on signals never raise: the record is written
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class RunStop(BaseException):
    """The first stop signal; a BaseException like KeyboardInterrupt, so `except Exception` never eats it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def describe(signum: int) -> str:
    """'SIGTERM', or 'the user (Ctrl-C, SIGINT)' for SIGINT: how the record and the error line say it."""
    name = signal.Signals(signum).name
    return "the user (Ctrl-C, SIGINT)" if signum == signal.SIGINT else name


class StopSignals:
    def __init__(self) -> None:
        self.received: list[int] = []
        self.armed = True

    @property
    def first(self) -> int | None:
        return self.received[0] if self.received else None

    def hurry(self) -> bool:
        """A second signal came: the user wants it stopped now, not after a graceful wait."""
        return len(self.received) > 1

    def hold(self) -> None:
        """From now on signals are noted only; the caller must finish what it writes."""
        self.armed = False

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Signals only noted inside the block (e.g. around fork/exec, where an exception could lose the
        child's handle); the first one is raised when it ends."""
        was, self.armed = self.armed, False
        count = len(self.received)
        try:
            yield
        finally:
            self.armed = was
        if was and len(self.received) > count:
            self.armed = False
            raise RunStop(self.received[count])

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        if self.armed:
            self.armed = False
            raise RunStop(signum)


_active: StopSignals | None = None


@contextmanager
def stop_signals() -> Iterator[StopSignals]:
    """Install the handlers (main thread only; elsewhere signals never reach us) or reuse the active ones."""
    global _active
    if _active is not None:
        yield _active
        return
    stops = StopSignals()
    if threading.current_thread() is not threading.main_thread():
        yield stops
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    for sig in SIGNALS:
        # A signal ignored by whoever started us (nohup: SIGHUP; `cmd &` in a script: SIGINT) stays ignored.
        if previous[sig] is not signal.SIG_IGN or sig == signal.SIGTERM:
            signal.signal(sig, stops._handler)
    _active = stops
    try:
        yield stops
    finally:
        _active = None
        for sig, handler in previous.items():
            signal.signal(sig, handler)
