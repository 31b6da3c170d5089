"""Pictures for notebooks 08, 09 and 09b: a sum tree, one compressed replay slot, a kill -> resume timeline.

    fig = draw_sum_tree(tree.nodes, mass=4.5)        # CompiledSumTree's nodes; the walk for one mass in colour
    fig = draw_compressed_slot(ring_bytes, pointer_bytes=8, header_bytes=33)   # what one lz4 slot pays for
    fig = draw_kill_resume(first_games, checkpoints, saved_step, resumed_games, total)

Each returns a ``matplotlib.figure.Figure`` made without pyplot (Jupyter displays it).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dqn_course.contracts import check_module


def sum_tree_walk(nodes: np.ndarray | Sequence[float], mass: float) -> list[tuple[int, float]]:
    """The nodes a root-to-leaf walk visits for ``mass`` in a binary sum tree stored as ``CompiledSumTree`` stores
    it (node 1 the root, node n's children 2n and 2n+1, leaves from ``len(nodes) // 2``), each with the mass left
    on arriving there: go left when the mass is below the left child's sum, else subtract that sum and go right."""
    nodes = np.asarray(nodes, np.float64)
    size = len(nodes) // 2
    n, m, path = 1, float(mass), [(1, float(mass))]
    while n < size:
        left = nodes[2 * n]
        n, m = (2 * n, m) if m < left else (2 * n + 1, float(m - left))
        path.append((n, m))
    return path


def draw_sum_tree(nodes: np.ndarray | Sequence[float], mass: float | None = None, title: str = ""):
    """Draw a small binary sum tree (up to 16 leaves): every node with its sum, leaves named by index, and, if
    ``mass`` is given, the walk that finds the leaf owning it, with the mass left at each node."""
    from matplotlib.figure import Figure

    nodes = np.asarray(nodes, np.float64)
    size = len(nodes) // 2
    assert size and size & (size - 1) == 0 and size <= 16, "a power-of-two number of leaves, at most 16"
    depth = size.bit_length() - 1
    fig = Figure(figsize=(1.1 * size + 1.5, 0.9 * depth + 1.8), layout="constrained")
    ax = fig.add_subplot()

    def xy(n: int) -> tuple[float, float]:
        d = n.bit_length() - 1
        return (n - (1 << d) + 0.5) / (1 << d) * size, -d

    path = sum_tree_walk(nodes, mass) if mass is not None else []
    on_path = {n for n, _ in path}
    for n in range(2, 2 * size):
        (x0, y0), (x1, y1) = xy(n // 2), xy(n)
        ax.plot([x0, x1], [y0, y1], color="tab:red" if n in on_path else "0.7", linewidth=2.5 if n in on_path else 1,
                zorder=1)
    for n in range(1, 2 * size):
        x, y = xy(n)
        leaf = n >= size
        color = "tab:red" if n in on_path else ("tab:green" if leaf else "tab:blue")
        ax.scatter([x], [y], s=900, color="white", edgecolors=color, linewidths=2, zorder=2)
        ax.text(x, y, f"{nodes[n]:g}", ha="center", va="center", fontsize=10, zorder=3)
        if leaf:
            ax.text(x, y - 0.42, f"leaf {n - size}", ha="center", va="top", fontsize=8, color="0.3")
    for n, m in path:
        x, y = xy(n)
        ax.text(x + 0.28, y + 0.22, f"m={m:g}", fontsize=8, color="tab:red", ha="left")
    if path:
        ax.set_title(title or f"mass {mass:g}: left when m < the left child's sum, else m -= it and right "
                              f"-> leaf {path[-1][0] - size}", fontsize=9)
    elif title:
        ax.set_title(title, fontsize=9)
    ax.set_xlim(-0.2, size + 0.2)
    ax.set_ylim(-depth - 0.8, 0.6)
    ax.axis("off")
    return fig


def draw_compressed_slot(ring_bytes: dict[str, int], pointer_bytes: int, header_bytes: int):
    """One slot of ``FrameSharingMemory(storage="lz4")``, as boxes: its entry in each ring array (``ring_bytes``,
    name -> bytes a slot), its pointer in the list of payloads, and the Python ``bytes`` object that pointer leads
    to, a header then the compressed frame. Widths are not to scale; the payload's size is left for the reader."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    fig = Figure(figsize=(10, 2.9), layout="constrained")
    ax = fig.add_subplot()

    def box(x, y, w, text, color):
        ax.add_patch(Rectangle((x, y), w, 0.5, facecolor=color, edgecolor="black", linewidth=1))
        ax.text(x + w / 2, y + 0.25, text, ha="center", va="center", fontsize=8)

    x = 0.0
    for name, size in ring_bytes.items():  # one entry of each ring array
        box(x, 1.4, 1.0, f"{name}\n{size} B", "#d9ead3")
        x += 1.0
    ax.text(0, 2.05, f"ring arrays (numpy), slot i's entries: {sum(ring_bytes.values())} B", fontsize=9)
    box(0.0, 0.2, 1.4, f"pointer\n{pointer_bytes} B", "#cfe2f3")
    ax.text(0, 0.85, "list of payloads, slot i", fontsize=9)
    box(3.0, 0.2, 1.6, f"header\n{header_bytes} B", "#fff2cc")
    box(4.6, 0.2, 3.4, "payload: the compressed frame\n(its size is set by the codec and the frame)", "#f9cb9c")
    ax.text(3.0, 0.85, "Python bytes object", fontsize=9)
    ax.annotate("", xy=(3.0, 0.45), xytext=(1.4, 0.45), arrowprops={"arrowstyle": "->", "lw": 1.2})
    ax.set_xlim(-0.1, 8.1)
    ax.set_ylim(0, 2.3)
    ax.axis("off")
    ax.set_title("One compressed slot: everything in it costs RAM, not only the payload (boxes not to scale)",
                 fontsize=9)
    return fig


def draw_kill_resume(first_games: np.ndarray | Sequence[int], checkpoints: np.ndarray | Sequence[int], saved_step: int,
                     resumed_games: np.ndarray | Sequence[int], total: int, killed_after: int | None = None):
    """A kill -> resume timeline on the agent-step axis: the first run (its finished games, its checkpoints,
    the SIGKILL), the steps lost between the checkpoint the resume used and the kill, and the resumed run (from
    ``saved_step`` to ``total``, its games). ``first_games``/``resumed_games``: the steps at which games ended, as
    logged; ``checkpoints``: the steps of the checkpoints the first run saved; ``killed_after``: the last step
    known to be reached before the kill (default: the newest checkpoint)."""
    from matplotlib.figure import Figure

    killed_after = max(checkpoints) if killed_after is None else killed_after
    fig = Figure(figsize=(9, 3.1), layout="constrained")
    ax = fig.add_subplot()
    # each series its own colour and marker shape, so the legend reads without telling shades apart
    ax.barh(1, killed_after, height=0.35, color="tab:blue", alpha=0.25, label="first run: steps played")
    ax.barh(0, total - saved_step, left=saved_step, height=0.35, color="tab:green", alpha=0.25,
            label="resumed run: steps played")
    if killed_after > saved_step:
        ax.barh(1, killed_after - saved_step, left=saved_step, height=0.35, facecolor="none", edgecolor="tab:red",
                hatch="xxx", linewidth=0, label="after the checkpoint: done again")
    # the kill lands right after the first run's last logged game: its marker sits above the bar, clear of that tick
    ax.scatter(first_games, [1] * len(first_games), marker="|", s=250, color="navy", zorder=4,
               label="a game ends, first run")
    ax.scatter(resumed_games, [0] * len(resumed_games), marker="|", s=250, color="darkgreen",
               label="a game ends, resumed run")
    ax.scatter(checkpoints, [1.3] * len(checkpoints), marker="v", s=60, color="k", label="checkpoint saved")
    ax.scatter([killed_after], [1.24], marker="X", s=110, color="tab:red", edgecolor="k", zorder=3,
               label="kill -9 (SIGKILL)")
    ax.annotate(f"resume from step {saved_step:,}", xy=(saved_step, 0.2), xytext=(saved_step, 0.62),
                ha="center", fontsize=8, arrowprops={"arrowstyle": "->", "color": "k"})
    ax.set_yticks([0, 1], ["resumed run", "first run"])
    ax.set_ylim(-0.5, 1.6)
    ax.set_xlim(0, total * 1.02)
    ax.set_xlabel("agent step")
    ax.legend(fontsize=7, loc="upper center", ncol=4, frameon=False, bbox_to_anchor=(0.5, -0.28))
    return fig


check_module(globals())
