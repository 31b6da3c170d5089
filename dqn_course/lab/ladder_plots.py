"""Pictures for notebooks 05 and 06b: the course's ladder one rung per notebook, and deque vs ring layouts.

``COURSE_RUNGS`` lists the ladder's stages in the order the course takes them (each smaller than the one
before); ``plot_course_ladder(rows)`` draws measured rows of ``dqn_course.lab.ladder.run_ladder`` in that
order, with the fraction of the top rung's bytes it needs ("1/N") on every bar and notebook 01's measured blog
agent as a marked point (notebook 06b reads that figure from notebook 01's record: ``figures.quote("01_naive_agent",
"blog_bytes_per_step", ...)``).
``plot_memory_layouts()`` draws how a deque of lists and a preallocated ring lay out their bytes.
"""
from __future__ import annotations

import numpy as np

from dqn_course.contracts import check_module

#: (stage name in ``ladder.STAGES_BY_NAME``, notebook that takes that rung), from the top of the ladder down.
COURSE_RUNGS = (
    ("raw_rgb_stack4_copies", "00"),
    ("gray_float32_copies", "02"),
    ("gray_uint8_copies", "03"),
    ("folded_ring", "04"),
    ("gray_uint8_shared", "04"),
    ("frame_sharing", "04"),
)


def _fraction(ratio: float) -> str:
    """One over a factor, as the plots print it ("1/N"): N with one decimal below 10 (as the tables beside them),
    whole above."""
    return f"1/{ratio:.1f}" if ratio < 10 else f"1/{ratio:,.0f}"


def course_order(rows: list[dict]) -> list[dict]:
    """The rows of ``COURSE_RUNGS``, in the course's order, each with its notebook under ``"notebook"``."""
    by_stage = {r["stage"]: r for r in rows}
    return [{**by_stage[name], "notebook": nb} for name, nb in COURSE_RUNGS if name in by_stage]


def plot_course_ladder(rows: list[dict], blog_bytes: float | None = None):
    """Bars of measured bytes per transition, top rung first, each labelled with the notebook that introduced it;
    "1/N of the top rung's bytes" is relative to the top rung; a row from two fills (``per_transition_bytes``, see
    ``ladder.scaled_to_million``) takes its N from the 1M figures, the top rung's GB over its own. Ticks mark what
    each memory keeps, counted (``counted_bytes_per_transition`` when the rows have it, else the pixels' arithmetic).

    ``blog_bytes`` (notebook 01's measured agent without learning, bytes per step) is drawn as a marked point on a
    row of its own, placed among the rungs by its bytes (below every rung that needs more), with the fraction it is
    labelled with written out (blog agent / top rung). Returns a ``matplotlib.figure.Figure``.
    """
    from matplotlib.figure import Figure

    rungs = course_order(rows)
    top = rungs[0]["bytes_per_transition"]
    fig = Figure(figsize=(9, 0.6 * (len(rungs) + 1) + 1.6), layout="constrained")
    ax = fig.add_subplot()
    star_at = sum(r["bytes_per_transition"] > blog_bytes for r in rungs) if blog_bytes else len(rungs)
    shown = len(rungs) + (1 if blog_bytes else 0)  # rows, top first: y = shown - 1 down to 0
    y = np.array([shown - 1.0 - i - (i >= star_at) for i in range(len(rungs))])
    measured = [r["bytes_per_transition"] for r in rungs]
    ax.barh(y, measured, color="tab:blue", alpha=0.8, label="measured (RSS growth in a fresh process)")
    counted = all("counted_bytes_per_transition" in r for r in rungs)
    ax.scatter([r["counted_bytes_per_transition" if counted else "arithmetic_bytes"] for r in rungs], y, marker="|",
               s=400, color="black", zorder=3,
               label="expected: what the memory keeps, counted" if counted else "expected (pixels' arithmetic)")
    for yi, r in zip(y, rungs):
        # a row with two fills (``ladder.scaled_to_million``): its 1M figure, without the once-per-fill cost's share
        two_fills = "per_transition_bytes" in r
        ratio = rungs[0]["gb_per_million"] / r["gb_per_million"] if two_fills else top / r["bytes_per_transition"]
        note = "top rung" if r is rungs[0] else f"{_fraction(ratio)} of the top rung's bytes"
        ax.text(r["bytes_per_transition"] * 1.15, yi, f"{note}; {r['gb_per_million']:,.1f} GB per 1M", va="center",
                fontsize=8)
    labels = [f"{r['notebook']}: {r['label']}" for r in rungs]
    if blog_bytes:
        star_y = shown - 1.0 - star_at
        ax.scatter([blog_bytes], [star_y], marker="*", s=260, color="tab:orange", zorder=4,
                   label="notebook 01's blog agent without learning, measured (RSS growth per step)")
        ax.text(blog_bytes * 1.25, star_y, f"blog agent / top rung = {blog_bytes:,.0f} / {top:,.0f} B = "
                f"{_fraction(top / blog_bytes)} of the top rung's bytes", va="center", fontsize=8)
        ax.set_yticks([*y, star_y], [*labels, "01: the blog agent (measured)"])
    else:
        ax.set_yticks(y, labels)
    ax.set_xscale("log")
    ax.set_xlim(min(measured) / 3, top * 12)
    ax.set_xlabel("bytes per transition (log scale)")
    ax.set_title("Replay memory per transition, each rung labelled with the notebook that introduced it")
    fig.legend(loc="outside lower center", ncols=3, fontsize=8)
    return fig


def plot_memory_layouts(rows: int = 4):
    """Two diagrams side by side: a deque of Python lists (objects scattered in memory) and a ring (one array
    per field, one row per slot, a write head). Returns a ``matplotlib.figure.Figure``."""
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, Rectangle

    fig = Figure(figsize=(11, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    for ax in (left, right):
        ax.set_xlim(0, 10)
        ax.set_ylim(0, 10)
        ax.axis("off")

    def box(ax, x, y, w, h, text, color, fontsize=7):
        ax.add_patch(Rectangle((x, y), w, h, facecolor=color, edgecolor="black", lw=0.8))
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize)

    def arrow(ax, a, b):
        ax.add_patch(FancyArrowPatch(a, b, arrowstyle="->", mutation_scale=8, lw=0.7, color="0.3"))

    # deque: blocks of pointers -> list objects -> scattered arrays and floats
    left.set_title("deque of lists: one Python object per field per row, scattered", fontsize=9)
    box(left, 0.2, 8.3, 9.6, 0.9, "deque: linked blocks of 64 pointers (walked block by block to reach row i)",
        "0.85")
    arrays = ((5.6, 4.9), (0.3, 3.7), (7.6, 3.4), (3.0, 4.4))  # wherever the allocator put them
    floats = ((8.4, 1.2), (4.2, 0.7), (1.0, 1.6), (6.2, 2.0))
    for i in range(rows):
        x = 0.4 + i * 2.4
        arrow(left, (x + 0.5, 8.3), (x + 0.5, 7.4))
        box(left, x, 6.6, 1.9, 0.8, f"list (row {i})", "tab:orange")
        (sx, sy), (fx, fy) = arrays[i % len(arrays)], floats[i % len(floats)]
        box(left, sx, sy, 2.0, 0.8, "array: 4x84x84", "tab:blue")
        arrow(left, (x + 0.4, 6.6), (sx + 1.0, sy + 0.8))
        box(left, fx, fy, 1.1, 0.6, "float", "tab:green")
        arrow(left, (x + 1.4, 6.6), (fx + 0.5, fy + 0.6))
    left.text(5, 0.05, "np.stack copies the 64 sampled arrays (32 states, 32 next states) into two batches",
              ha="center", fontsize=8)

    # ring: contiguous arrays, one row per slot, write head
    right.set_title("ring: one array per field, one row per slot, allocated once", fontsize=9)
    fields = (("frames", 5.0, "tab:blue"), ("actions", 1.0, "tab:orange"), ("rewards", 1.0, "tab:green"),
              ("dones", 1.0, "tab:purple"))
    x = 0.3
    slots = 8
    for name, width, color in fields:
        right.text(x + width / 2, 9.2, name, ha="center", fontsize=8)
        for s in range(slots):
            box(right, x, 8.3 - (s + 1) * 0.9, width, 0.9, f"slot {s}" if name == "frames" else "", color)
        x += width + 0.3
    head = 5
    right.annotate("write head", xy=(0.3, 8.3 - head * 0.9 - 0.45), xytext=(0.3, 0.3), fontsize=8,
                   arrowprops={"arrowstyle": "->"})
    right.text(5.5, 0.3, "a batch = one fancy index per array", ha="center", fontsize=8)
    return fig


check_module(globals())
