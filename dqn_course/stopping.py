"""Stopping a training run cleanly: a wall-clock deadline, and SIGINT / SIGTERM turned into "save, then exit".

A run can be cut short at any moment: Ctrl-C, ``timeout``, a notebook's interrupt, a cluster
scheduler's preemption, or the end of the time a learner has. Python's defaults end the process at
once (SIGTERM) or raise ``KeyboardInterrupt`` wherever the loop happens to be (SIGINT), and either way
everything since the last periodic checkpoint is lost. ``StopRequests`` instead *records* the request;
the training loop asks ``reason()`` once per step, saves its whole state at that step, and returns.

Invariants:

* The first SIGINT or SIGTERM only sets the reason; nothing is interrupted half-way.
* A second one raises ``KeyboardInterrupt`` at once (the user insists); a checkpoint being written
  then is abandoned by its own atomic write (the previous file stays good).
* Handlers are installed on ``__enter__`` and the previous ones restored on ``__exit__``, in the main
  thread only (Python allows signal handlers nowhere else); elsewhere only the deadline applies.

A full disk stops a run the same way, from the other side: the write that failed raises, and the run reports
``DiskFullError`` (what was kept, what the next save needs) instead of a traceback.
"""
from __future__ import annotations

import errno
import signal
import threading
import time
from pathlib import Path
from types import FrameType

from dqn_course.contracts import check_module
from dqn_course.profiling import format_bytes

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequests:
    """Why the run should stop now, if it should: the deadline passed, or a stop signal arrived.

    ``time_limit_s``: seconds from ``__enter__`` (None or 0: no deadline). Use as a context manager.
    """

    def __init__(self, time_limit_s: float | None = None):
        if time_limit_s is not None and time_limit_s < 0:
            raise ValueError(f"time limit must be >= 0 seconds (0 = none), got {time_limit_s}")
        self.time_limit_s = time_limit_s or None
        self.deadline: float | None = None
        self.signal_name: str | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopRequests:
        if self.time_limit_s is not None:
            self.deadline = time.monotonic() + self.time_limit_s
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signal_name is not None:
            raise KeyboardInterrupt(f"second stop signal ({signal.Signals(signum).name}): stopping at once")
        self.signal_name = signal.Signals(signum).name

    @property
    def by_signal(self) -> bool:
        return self.signal_name is not None

    @property
    def timed_out(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def reason(self) -> str | None:
        """None while the run may go on; otherwise why it must stop (a signal wins over the deadline)."""
        if self.signal_name is not None:
            return f"{self.signal_name} received"
        if self.timed_out:
            return f"time limit of {self.time_limit_s / 60:g} minutes reached"
        return None


DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class DiskFullError(OSError):
    """A run stopped because its disk filled while it wrote a file (a training state, the policy or a log).

    Nothing is lost: files are written atomically or appended row by row, so the newest training state still
    loads and ``--resume`` carries on from it. The message says what was kept, how much the next save needs and
    how much is free; ``kept`` is that state file (None when the run had not saved one yet).
    """

    def __init__(self, cause: OSError, kept: Path | None, kept_step: int | None, needed: int, free: int):
        what = f"{kept} (step {kept_step:,})" if kept is not None else "no training state yet (the run starts over)"
        super().__init__(cause.errno, f"the disk filled while the run wrote {cause.filename or 'a file'} "
                                      f"({cause.strerror}). Kept: {what}. The next save needs about "
                                      f"{format_bytes(needed)}; {format_bytes(free)} is free there.")
        self.kept, self.kept_step, self.needed, self.free = kept, kept_step, needed, free


def is_disk_full(error: BaseException) -> bool:
    """Whether ``error`` says the disk (or the user's quota) is full."""
    return isinstance(error, OSError) and error.errno in DISK_FULL_ERRNOS


check_module(globals())
