"""Measuring memory honestly: RSS, tracemalloc, fresh subprocesses, fits and "does it fit here?".

Two traps this module exists to avoid (notebook 01b, "measuring honestly", shows both):

* The allocator keeps freed memory, so a second measurement in the same process reads less growth
  than the first. ``measure_in_subprocess`` runs the work in a brand-new interpreter.
* ``np.zeros`` pages are lazy: RSS grows only when they are written. ``check_fits`` therefore
  compares what a buffer *will* need against what the machine has, before anything is allocated.
"""
from __future__ import annotations

import gc
import multiprocessing as mp
import os
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psutil

from dqn_course.contracts import Fraction, check_module

# The course's one unit system is decimal (SI): 1 GB = 10^9 bytes, so 1M frames of 84 x 84 bytes are 7.056 GB.
GB = 10**9
MB = 10**6
MiB = 2**20  # only for data in 2^20-byte units: memory-profiler's readings, the rss_mb column of log.csv


class InsufficientMemoryError(MemoryError):
    """A buffer was refused because the machine does not have the RAM it needs."""


def rss_bytes(pid: int | None = None) -> int:
    """Resident set size of a process (default: this one), in bytes."""
    return psutil.Process(pid).memory_info().rss


def available_bytes() -> int:
    """RAM the OS could give us now without swapping (``MemAvailable`` on Linux)."""
    return psutil.virtual_memory().available


def format_bytes(n: float) -> str:
    """1536 -> '1.5 kB' (decimal units, the course's one system); for messages and tables."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def check_fits(needed: int, what: str = "this buffer", fraction: Fraction = 0.9, available: int | None = None) -> None:
    """Refuse, before allocating, anything that needs more than ``fraction`` of the available RAM.

    ``available`` (bytes) replaces this machine's available RAM, to check against another machine's. The error
    says how much is needed and how much there is, and where that figure came from (read from this machine, or
    given), so the learner can pick a capacity. Raises ``InsufficientMemoryError`` (a ``MemoryError``).
    """
    have = available_bytes() if available is None else available
    if needed > fraction * have:
        have_text = (f"this machine has {format_bytes(have)} available" if available is None
                     else f"the available RAM given is {format_bytes(have)}")
        raise InsufficientMemoryError(
            f"{what} needs {format_bytes(needed)} but {have_text} "
            f"(limit: {fraction:.0%} of that = {format_bytes(fraction * have)}). "
            f"Use a smaller capacity or a leaner memory (see notebooks 04-05 and 09)."
        )


@dataclass
class FitReport:
    """How many items of a given size fit on this machine."""

    items: int
    bytes_per_item: float
    needed: int
    available: int
    fits: bool
    max_items: int  # the most that fit in ``fraction`` of the available RAM


def fits_in_ram(items: int, bytes_per_item: float, fraction: Fraction = 0.9, available: int | None = None) -> FitReport:
    """Does ``items`` x ``bytes_per_item`` fit in this machine's available RAM (times ``fraction``)?"""
    have = available_bytes() if available is None else available
    needed = int(items * bytes_per_item)
    max_items = int(fraction * have // bytes_per_item) if bytes_per_item > 0 else 0
    return FitReport(items, bytes_per_item, needed, have, needed <= fraction * have, max_items)


@dataclass
class LinearFit:
    """``bytes = intercept + slope * step``, fitted by least squares."""

    slope: float  # bytes per step (per transition when one transition is stored per step)
    intercept: float
    r2: float

    def predict(self, step: float | np.ndarray) -> float | np.ndarray:
        return self.intercept + self.slope * step

    def step_at(self, total_bytes: float) -> float:
        """The step at which the fitted line reaches ``total_bytes`` (inf if it never grows)."""
        return float("inf") if self.slope <= 0 else (total_bytes - self.intercept) / self.slope


def fit_linear(steps: np.ndarray | Sequence[float], values: np.ndarray | Sequence[float]) -> LinearFit:
    """Least-squares line through (step, bytes) readings, with R² so a learner can see it is linear.

    ``steps`` and ``values``: rows of finite numbers of one length, at least two different steps; else
    ``ValueError`` naming the one that is not."""
    x, y = (np.asarray(a) for a in (steps, values))
    for name, a in (("steps", x), ("values", y)):
        if a.ndim != 1 or a.dtype.kind not in "iuf" or not np.isfinite(a).all():
            raise ValueError(f"fit_linear: {name} must be one row of finite numbers, got {a.dtype}{list(a.shape)}")
    if x.size != y.size:
        raise ValueError(f"fit_linear: steps and values must pair one reading with each step, got {x.size} steps and "
                         f"{y.size} values")
    x, y = x.astype(float), y.astype(float)
    if x.size < 2 or np.ptp(x) == 0:
        raise ValueError("need at least two readings at different steps to fit a line")
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (intercept + slope * x)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / ss_tot if ss_tot > 0 else 1.0
    return LinearFit(float(slope), float(intercept), r2)


class TraceMalloc:
    """Context manager: Python + numpy allocations made inside the block (numpy reports to tracemalloc).

    ``current`` is what is still held at exit, ``peak`` the most held at once.
    """

    def __enter__(self) -> TraceMalloc:
        gc.collect()
        self._was_tracing = tracemalloc.is_tracing()
        if not self._was_tracing:
            tracemalloc.start()
        tracemalloc.reset_peak()
        self._base = tracemalloc.get_traced_memory()[0]
        self.current = self.peak = 0
        return self

    def __exit__(self, *exc) -> None:
        current, peak = tracemalloc.get_traced_memory()
        self.current, self.peak = current - self._base, peak - self._base
        if not self._was_tracing:
            tracemalloc.stop()


@dataclass
class SubprocessMeasurement:
    """What ``measure_in_subprocess`` saw in the fresh process."""

    result: Any
    rss_before: int
    rss_after: int
    peak_rss: int  # ru_maxrss-style high-water mark of the child
    traced_current: int  # tracemalloc: bytes still allocated by the function at its end
    traced_peak: int
    seconds: float

    @property
    def rss_growth(self) -> int:
        return self.rss_after - self.rss_before


def _child(fn, args, kwargs, trace, conn) -> None:
    try:
        gc.collect()
        before = rss_bytes()
        if trace:
            tracemalloc.start()
        t0 = time.perf_counter()
        result = fn(*args, **kwargs)
        seconds = time.perf_counter() - t0
        current, peak = tracemalloc.get_traced_memory() if trace else (0, 0)
        after = rss_bytes()
        import resource

        # ru_maxrss is in kB on Linux; the kernel updates it lazily, so it can lag the reading just taken.
        peak_rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, after)
        conn.send(("ok", SubprocessMeasurement(result, before, after, peak_rss, current, peak, seconds)))
    except BaseException as exc:  # report the failure to the parent instead of dying silently
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def measure_in_subprocess(fn: Callable, *args, trace: bool = False, timeout: float | None = 600,
                          start_method: str = "spawn", **kwargs) -> SubprocessMeasurement:
    """Run ``fn(*args, **kwargs)`` in a fresh interpreter ("spawn") and report its memory.

    ``fn`` must be importable (defined in a module, not in a notebook cell) and return something
    picklable. ``start_method="fork"`` (POSIX only) starts the child as a copy of this process
    instead, so ``fn`` and its arguments may be a notebook's own functions; the child then starts
    with this process's memory and allocator, so compare its RSS growth with another forked run,
    not its RSS with a spawned one. Turning on ``trace`` makes tracemalloc count numpy and Python allocations too, at
    some cost in speed; the returned result should then stay small, or it is counted as well.
    A child still running when this returns or raises (``timeout``, Ctrl-C, ``cleanup.Terminated``)
    gets 5 s to finish, then SIGTERM, then SIGKILL 10 s later.
    """
    ctx = mp.get_context(start_method)  # ValueError for a method this platform lacks
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(fn, args, kwargs, trace, child))
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout):
            raise TimeoutError(f"{getattr(fn, '__name__', fn)} did not finish within {timeout} s")
        status, payload = parent.recv()
    except EOFError:
        proc.join()
        raise RuntimeError(
            f"the measurement process died (exit code {proc.exitcode}); "
            "if that is -9 the OS killed it for memory"
        ) from None
    finally:
        proc.join(timeout=5)
        if proc.is_alive():  # SIGTERM first: a child under cleanup.exit_on_signals then runs its clean-ups
            proc.terminate()
            proc.join(timeout=10)
        if proc.is_alive():
            proc.kill()
    if status == "error":
        raise RuntimeError(f"measurement failed in the subprocess: {payload}")
    return payload


def machine_summary() -> dict:
    """Cores, RAM and the process's own RSS, for notebook 00 and benchmark headers."""
    vm = psutil.virtual_memory()
    return {
        "cpu_count": os.cpu_count(),
        "ram_total": vm.total,
        "ram_available": vm.available,
        "process_rss": rss_bytes(),
    }


check_module(globals())
