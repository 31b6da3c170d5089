"""A memory watchdog: warn, checkpoint and stop cleanly before the kernel's OOM killer does (notebook 09b).

The OOM killer gives no warning and no chance to save: the process vanishes with ``Killed``
(or Jupyter says "the kernel died") and hours of training go with it. The watchdog looks at two numbers
every few seconds:

* the process's resident set size (RSS), against ``max_rss_bytes``, a budget you choose for the run;
* the RAM still available to the whole machine, against ``min_available_bytes``, because other
  processes (a second notebook, the browser) can exhaust memory while this one stays flat.

Crossing ``warn_fraction`` of a limit gives one warning; crossing the limit itself asks the
training loop to checkpoint and stop (``train`` does both, and reports why it stopped).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

from dqn_course.contracts import check_module
from dqn_course.profiling import available_bytes, format_bytes, rss_bytes


class MemoryWarning(UserWarning):
    """Memory is getting close to a watchdog limit (a UserWarning: Python hides ResourceWarnings by default)."""


@dataclass
class MemoryWatchdog:
    """Checks RSS and available RAM at most every ``interval_s`` seconds; ``check()`` says what to do.

    ``check()`` returns None while all is well (or when it is not yet time to look), and a message
    once a limit is crossed; the caller then checkpoints and stops. A limit of 0 turns that check off.
    """

    max_rss_bytes: int = 0
    min_available_bytes: int = 0
    warn_fraction: float = 0.9
    interval_s: float = 1.0
    warned: set[str] = field(default_factory=set)
    _last: float = field(default=float("-inf"), init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_rss_bytes < 0 or self.min_available_bytes < 0:
            raise ValueError("watchdog limits must be >= 0 (0 turns a limit off)")
        if not 0 < self.warn_fraction <= 1:
            raise ValueError(f"warn_fraction must be in (0, 1], got {self.warn_fraction}")

    @property
    def enabled(self) -> bool:
        return bool(self.max_rss_bytes or self.min_available_bytes)

    def check(self, force: bool = False) -> str | None:
        """None if memory is fine; otherwise why the run must stop. Warns once per limit on the way up."""
        now = time.monotonic()
        if not self.enabled or (not force and now - self._last < self.interval_s):
            return None
        self._last = now
        if self.max_rss_bytes:
            rss = rss_bytes()
            if rss >= self.max_rss_bytes:
                return (f"memory watchdog: process RSS {format_bytes(rss)} reached the limit "
                        f"{format_bytes(self.max_rss_bytes)}")
            if rss >= self.warn_fraction * self.max_rss_bytes:
                self._warn("rss", f"process RSS {format_bytes(rss)} is above {self.warn_fraction:.0%} of the "
                                  f"limit {format_bytes(self.max_rss_bytes)}")
        if self.min_available_bytes:
            free = available_bytes()
            if free <= self.min_available_bytes:
                return (f"memory watchdog: available RAM {format_bytes(free)} fell to the floor "
                        f"{format_bytes(self.min_available_bytes)}")
            if free * self.warn_fraction <= self.min_available_bytes:
                self._warn("available", f"available RAM {format_bytes(free)} is within "
                                        f"{1 / self.warn_fraction - 1:.0%} of the floor "
                                        f"{format_bytes(self.min_available_bytes)}")
        return None

    def _warn(self, kind: str, message: str) -> None:
        if kind not in self.warned:
            self.warned.add(kind)
            warnings.warn("memory watchdog: " + message, MemoryWarning, stacklevel=3)


check_module(globals())
