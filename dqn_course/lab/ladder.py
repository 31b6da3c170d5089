"""The memory ladder, measured: bytes per transition of each replay-memory design, on real Breakout frames.

Each stage fills one memory with real frames in a *fresh* process (``measure_in_subprocess``), so no
earlier measurement's freed-but-kept memory hides growth. Inside that process the source frames are
played first, which frees memory too (the emulator's temporaries); that memory is handed back to the
operating system (``return_freed_memory``) before RSS is read, so the fill's reuse of it costs RSS again.
RSS is read right before the memory is created and right after it is full, so only what the memory
keeps is counted. Preallocated rings are filled completely (every page written), since their
untouched pages cost no RSS yet. Beside RSS, each row counts what the memory keeps (``memory.nbytes``:
a ring's arrays, from their itemsize; a deque's rows, lists, scalars and array headers, from
``sys.getsizeof``). A second fill under ``tracemalloc`` can cross-check the figure (it counts what numpy
and Python *allocated*, pages touched or not).

Used by ``benchmarks/memory_ladder.py`` and notebook 06b (the ladder figure, via ``ladder_plots``)::

    rows = run_ladder()                  # list of dicts, one per stage
    print(format_table(rows))
    plot_ladder(rows)                    # matplotlib Figure
"""
from __future__ import annotations

import gc
from dataclasses import dataclass
from collections.abc import Callable, Iterable

import numpy as np

from dqn_course.contracts import Count, check_module
from dqn_course import quick_mode
from dqn_course.lab.bench import FramePool, play_frames, transitions
from dqn_course.profiling import (TraceMalloc, available_bytes, fits_in_ram, format_bytes, measure_in_subprocess,
                                  rss_bytes)
from dqn_course.replay import MEMORY_CLASSES, ReplayMemory

MILLION = 1_000_000
RAM_FRACTION = 0.9  # "fits" means: within 90% of the RAM available when measured (as profiling.check_fits)
GRAY_FRAME = (84, 84)
RAW_FRAME = (210, 160, 3)


@dataclass(frozen=True)
class Stage:
    """One rung: which memory, fed with which observations, and the frames it stores per transition."""

    name: str
    label: str
    memory: str  # key of replay.MEMORY_CLASSES
    raw: bool  # 210x160x3 RGB frames instead of 84x84 gray
    stack: int
    frames_stored: int  # frames per transition by the arithmetic (8 = s and s' as full 4-stacks)
    dtype: str = "uint8"
    copy_states: bool = False  # NaiveDequeMemory only: copy s and s' (blog code) or keep references

    @property
    def arithmetic_bytes(self) -> int:
        """The ladder's expected figure: stored frames x frame size x itemsize (ring bookkeeping left out)."""
        frame = int(np.prod(RAW_FRAME if self.raw else GRAY_FRAME))
        return self.frames_stored * frame * np.dtype(self.dtype).itemsize


STAGES = (
    Stage("raw_rgb_copies", "raw 210x160x3 RGB, s and s' copies", "naive", True, 1, 2, copy_states=True),
    Stage("raw_rgb_stack4_copies", "raw RGB 4-stacked, s and s' copies", "naive", True, 4, 8, copy_states=True),
    Stage("gray_float32_copies", "84x84x4 float32, s and s' copies", "naive", False, 4, 8, "float32", True),
    Stage("gray_uint8_copies", "84x84x4 uint8, s and s' copies", "naive", False, 4, 8, copy_states=True),
    Stage("gray_uint8_shared", "84x84x4 uint8, next state shared", "naive", False, 4, 4),
    Stage("stacked_ring", "StackedRingMemory (s, s' stacks)", "stacked", False, 4, 8),
    Stage("folded_ring", "FoldedRingMemory (5-frame state)", "folded", False, 4, 5),
    Stage("frame_sharing", "FrameSharingMemory (1 frame/step)", "frame_sharing", False, 4, 1),
)
STAGES_BY_NAME = {s.name: s for s in STAGES}


def default_transitions() -> int:
    """Transitions per stage: enough that allocator noise is < 1% of the growth, small enough for ~1-2 min."""
    return 2_000 if quick_mode() else 20_000


def _make_memory(stage: Stage, capacity: int) -> ReplayMemory:
    """The stage's memory, seeded; frame-sharing takes no dtype (it stores uint8 frames only)."""
    shape = (stage.stack, *(RAW_FRAME if stage.raw else GRAY_FRAME))
    if stage.memory == "naive":
        return MEMORY_CLASSES["naive"](capacity, shape, stage.dtype, seed=0, copy_states=stage.copy_states)
    if stage.memory == "frame_sharing":
        return MEMORY_CLASSES["frame_sharing"](capacity, shape, seed=0)
    return MEMORY_CLASSES[stage.memory](capacity, shape, stage.dtype, seed=0)


def _is_full(memory: ReplayMemory) -> bool:
    """Every slot written once (frame-sharing counts frames, the others transitions)."""
    return getattr(memory, "written", memory.added) >= memory.capacity


def _fill(stage: Stage, pool: FramePool, capacity: int) -> ReplayMemory:
    """A memory of ``capacity`` filled from the pool until every slot has been written once."""
    memory = _make_memory(stage, capacity)
    convert: Callable = (lambda s: s) if stage.dtype == "uint8" else (lambda s: s.astype(stage.dtype))
    stream = transitions(pool, stage.stack)
    while not _is_full(memory):
        s, a, r, s2, done, end = next(stream)
        memory.add(convert(s), a, r, convert(s2), done, end)
    return memory


def return_freed_memory() -> bool:
    """Hand the memory this process freed back to the operating system (glibc's ``malloc_trim(0)``), so that a
    later allocation that reuses it writes fresh pages and shows as RSS growth. Why: the C allocator keeps freed
    blocks, still resident, for reuse, and a fill placed in them would grow RSS by less than it keeps. Returns
    False where there is no glibc (macOS, Windows, musl): nothing is handed back there."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return False
    trim(0)
    return True


def beside_pixels(stage: Stage) -> dict[str, int]:
    """What one transition of ``stage`` keeps beside its pixels, by its parts, in bytes: for a deque rung its row's
    list and scalars (``"list+scalars"``), the headers of the arrays the row adds (``"headers"``), both by
    ``sys.getsizeof``, and the row's pointer in the deque (``"pointer"``); for a ring its slot's ``"bookkeeping"``
    (the itemsizes of its per-slot arrays). Counted on a memory of a few
    zero frames, so it holds on any machine with this Python and numpy; the *counted* column of ``format_table``
    counts the same on the whole filled memory (``nbytes``)."""
    import struct
    import sys

    k = stage.stack + 4  # a ring needs at least stack + 1 slots
    memory = _make_memory(stage, k)
    shape, dtype = (stage.stack, *(RAW_FRAME if stage.raw else GRAY_FRAME)), np.dtype(stage.dtype)
    state = np.zeros(shape, dtype)
    for i in range(k):
        next_state = np.zeros(shape, dtype)
        memory.add(state, i % 4, 0.0, next_state, False)
        state = next_state  # as a game hands it on: the next transition's state is this one's next state
    if stage.memory != "naive":
        return {"bookkeeping": memory.nbytes // memory.capacity - stage.arithmetic_bytes}
    row = memory.memory[-1]
    arrays = (row[0], row[3]) if stage.copy_states else (row[3],)  # shared: s is the row before's s'
    return {"list+scalars": sys.getsizeof(row) + sum(sys.getsizeof(x) for x in (row[1], row[2], *row[4:])),
            "headers": sum(sys.getsizeof(a) - a.nbytes for a in arrays), "pointer": struct.calcsize("P")}


def _anon_huge_bytes() -> int | None:
    """Bytes of this process's memory in transparent huge pages (Linux's ``AnonHugePages``), or None elsewhere."""
    try:
        with open("/proc/self/smaps_rollup", encoding="ascii") as f:
            for line in f:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def measure_stage(name: str, capacity: Count, pool_frames: Count = 3_000, with_tracemalloc: bool = True,
                  seed: int = 0) -> dict:
    """Runs in the fresh child: play the source frames, hand back what that freed, then the RSS growth of one
    fill, what the memory keeps by its own count (``nbytes``) and, optionally, what tracemalloc saw allocated."""
    stage = STAGES_BY_NAME[name]
    pool = play_frames(min(pool_frames, capacity + 1), raw=stage.raw, seed=seed)
    gc.collect()
    return_freed_memory()  # playing freed memory; kept by the allocator, the fill would reuse it without RSS growth
    before, huge_before = rss_bytes(), _anon_huge_bytes()
    memory = _fill(stage, pool, capacity)
    rss_growth, stored, counted = rss_bytes() - before, len(memory), memory.nbytes
    huge = None if huge_before is None else _anon_huge_bytes() - huge_before
    traced = None
    if with_tracemalloc:  # second fill in the same process: tracemalloc counts allocations, not reused pages
        del memory
        gc.collect()
        with TraceMalloc() as tm:
            memory = _fill(stage, pool, capacity)
        traced = tm.current
    return {"rss_growth": rss_growth, "transitions": stored, "counted_bytes": counted, "huge_page_growth": huge,
            "traced_bytes": traced}


def _row(stage: Stage, capacity: int, m: dict, seconds: float, available: int) -> dict:
    per = m["rss_growth"] / m["transitions"]
    traced = None if m["traced_bytes"] is None else round(m["traced_bytes"] / m["transitions"], 1)
    fit = fits_in_ram(MILLION, per, fraction=RAM_FRACTION, available=available)
    return {
        "stage": stage.name,
        "label": stage.label,
        "memory": stage.memory,
        "capacity": capacity,
        "transitions": m["transitions"],
        "rss_growth_bytes": m["rss_growth"],
        "bytes_per_transition": round(per, 1),
        "traced_bytes_per_transition": traced,
        "arithmetic_bytes": stage.arithmetic_bytes,
        "measured_over_arithmetic": round(per / stage.arithmetic_bytes, 3),
        "counted_bytes_per_transition": round(m["counted_bytes"] / m["transitions"], 1),
        "measured_over_counted": round(m["rss_growth"] / m["counted_bytes"], 3),
        "huge_page_growth_bytes": m["huge_page_growth"],
        "gb_per_million": round(per * MILLION / 1e9, 2),
        "fits_1m_in_ram": fit.fits,
        "max_transitions_in_ram": fit.max_items,
        "available_ram_bytes": available,
        "seconds": round(seconds, 1),
    }


def run_ladder(transitions_per_stage: int | None = None, stages: Iterable[Stage] = STAGES,
               max_bytes_per_stage: int = 2 * 10**9, with_tracemalloc: bool = True,
               progress: Callable[[str], None] | None = None) -> list[dict]:
    """Measure every stage in its own fresh process; one row (dict) per stage.

    A stage whose fill would exceed ``max_bytes_per_stage`` (or a quarter of the available RAM)
    gets fewer transitions: the raw 4-stacks need ~0.8 MB each. ``transitions`` in a row is what
    the memory held when measured; for ``FrameSharingMemory`` that is one less than its capacity
    per episode (an episode's last frame starts no transition), and ``bytes_per_transition``
    divides by it, so that overhead is included.
    """
    n = transitions_per_stage or default_transitions()
    available = available_bytes()
    budget = min(max_bytes_per_stage, available // 4)
    rows = []
    for stage in stages:
        capacity = max(stage.stack + 1, min(n, budget // stage.arithmetic_bytes))
        m = measure_in_subprocess(measure_stage, stage.name, capacity, with_tracemalloc=with_tracemalloc, timeout=900)
        rows.append(_row(stage, capacity, m.result, m.seconds, available))
        if progress:
            progress(f"{stage.name}: {rows[-1]['bytes_per_transition']:,.0f} B/transition "
                     f"({rows[-1]['transitions']:,} transitions, {m.seconds:.1f} s)")
    return rows


def scaled_to_million(larger: dict, smaller: dict) -> dict:
    """``larger``, a row of ``run_ladder``, with its 1M-transition figures taken from two fills of its stage:
    ``smaller`` is the same stage filled with fewer transitions. The RSS growth of a fill is read as a cost per
    transition, the slope between the two fills, plus a cost paid once per fill, their intercept; 1M transitions
    then cost the slope x 1M + that once-per-fill cost. Why: scaling one fill's bytes per transition by 1M / n would
    pay the once-per-fill cost 1M / n times. Returns a new row with ``per_transition_bytes`` (the slope) and
    ``fill_cost_bytes`` (the intercept) added, and ``gb_per_million``, ``fits_1m_in_ram`` and
    ``max_transitions_in_ram`` worked out from them. Raises ``ValueError`` when ``smaller`` is not a row of
    ``larger``'s stage holding fewer transitions."""
    if smaller.get("stage") != larger.get("stage"):
        raise ValueError(f"smaller must be a row of larger's stage {larger.get('stage')!r}, got one of "
                         f"{smaller.get('stage')!r}")
    n_small, n_large = smaller["transitions"], larger["transitions"]
    if not 0 < n_small < n_large:
        raise ValueError(f"smaller must hold fewer transitions than larger ({n_large:,}), got {n_small:,}")
    slope = (larger["rss_growth_bytes"] - smaller["rss_growth_bytes"]) / (n_large - n_small)
    fill_cost = larger["rss_growth_bytes"] - slope * n_large
    needed = slope * MILLION + fill_cost
    room = RAM_FRACTION * larger["available_ram_bytes"]
    return {**larger, "per_transition_bytes": round(slope, 1), "fill_cost_bytes": round(fill_cost),
            "gb_per_million": round(needed / 1e9, 2), "fits_1m_in_ram": needed <= room,
            "max_transitions_in_ram": max(0, int((room - fill_cost) // slope)) if slope > 0 else 0}


def format_table(rows: list[dict]) -> str:
    """The ladder as a fixed-width text table (benchmark output and README). The *traced* column appears only when
    some row was cross-checked by tracemalloc; *pixels* is the arithmetic, *counted* what the memory keeps. The
    *1M trans.* column is the measured bytes per transition x 1M, or, marked ``*``, for a row of
    ``scaled_to_million``, the slope between two fills x 1M + the cost paid once per fill."""
    traced_on = any(r.get("traced_bytes_per_transition") is not None for r in rows)
    traced_head = f" {'traced B/tr':>12}" if traced_on else ""
    head = (f"{'stage':<36} {'measured B/tr':>13}{traced_head} {'pixels':>8} {'counted':>8} {'meas/cnt':>8} "
            f"{'n':>6} {'1M trans.':>10}  fits 1M here?")
    lines = [head, "-" * len(head)]
    for r in rows:
        traced = r.get("traced_bytes_per_transition")
        traced = (" " + (f"{'-':>12}" if traced is None else f"{traced:>12,.0f}")) if traced_on else ""
        fits = "yes" if r["fits_1m_in_ram"] else f"no (max ~{r['max_transitions_in_ram']:,})"
        mark = "*" if "fill_cost_bytes" in r else " "
        lines.append(f"{r['label']:<36} {r['bytes_per_transition']:>13,.0f}{traced} {r['arithmetic_bytes']:>8,} "
                     f"{r['counted_bytes_per_transition']:>8,.0f} {r['measured_over_counted']:>8.3f} "
                     f"{r['transitions']:>6,} {r['gb_per_million']:>7,.1f} GB{mark} {fits}")
    if rows:
        available = format_bytes(rows[0]["available_ram_bytes"])
        lines.append(f"(fits: 1M transitions' bytes <= {RAM_FRACTION:.0%} of the {available} available when measured; "
                     "GB = 10^9 bytes)")
        if any("fill_cost_bytes" in r for r in rows):
            lines.append("(*: two fills: their growth per transition x 1M + the cost paid once per fill; others: "
                         "measured B/tr x 1M)")
    return "\n".join(lines)


def plot_ladder(rows: list[dict], ram_bytes: int | None = None):
    """Log-scale bars of measured bytes per transition, expected figures as ticks, this machine's RAM as a line.

    The line sits at 90% of ``ram_bytes`` (default: available now) / 1M, the same test as the
    table's "fits 1M here?": a design left of it can hold 1M transitions on this machine.
    Returns a ``matplotlib.figure.Figure`` (displayed by Jupyter, saved by the benchmark).
    """
    from matplotlib.figure import Figure

    ram = available_bytes() if ram_bytes is None else ram_bytes
    fig = Figure(figsize=(9, 0.55 * len(rows) + 1.8), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(rows))[::-1]
    measured = [r["bytes_per_transition"] for r in rows]
    colors = ["tab:green" if r["fits_1m_in_ram"] else "tab:red" for r in rows]
    ax.barh(y, measured, color=colors, alpha=0.8, label="measured (RSS, fresh process); green: 1M fits here")
    ax.scatter([r["arithmetic_bytes"] for r in rows], y, marker="|", s=400, color="black", zorder=3,
               label="expected (arithmetic)")
    for yi, r in zip(y, rows):
        ax.text(r["bytes_per_transition"] * 1.15, yi, f"{r['gb_per_million']:,.1f} GB per 1M", va="center",
                fontsize=8, bbox={"facecolor": "white", "edgecolor": "none", "pad": 1, "alpha": 0.8})
    ax.axvline(RAM_FRACTION * ram / MILLION, color="tab:blue", linestyle="--",
               label=f"1M transitions fit left of this line ({RAM_FRACTION:.0%} of the {ram / 1e9:.1f} GB "
                     "available here)")
    ax.set_yticks(y, [r["label"] for r in rows])
    ax.set_xscale("log")
    ax.set_xlim(min(measured) / 3, max(measured) * 8)
    ax.set_xlabel("bytes per transition (log scale)")
    top = ax.secondary_xaxis("top", functions=(lambda b: b * MILLION / 1e9, lambda gb: gb * 1e9 / MILLION))
    top.set_xlabel("GB for 1M transitions")
    ax.set_title("The memory ladder: Breakout replay memory per transition")
    fig.legend(loc="outside lower center", ncols=2, fontsize=8)
    return fig


check_module(globals())
