"""Pictures for notebooks 00-02: the DQN learning loop, and a NumPy view keeping its base array alive.

    fig = draw_dqn_loop()                 # env -> replay memory -> minibatch -> TD target and loss
    fig = draw_view_keeps_base(view)      # which bytes of view.base the view uses, and what stays alive

Both return a ``matplotlib.figure.Figure`` made without pyplot (Jupyter displays it).
"""
from __future__ import annotations

import numpy as np

from dqn_course.contracts import check_module


def _box(ax, x, y, text, color, w=0.2, h=0.16):
    from matplotlib.patches import FancyBboxPatch
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.01", facecolor=color,
                                edgecolor="black", linewidth=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=8.5)


def _arrow(ax, start, end, text="", offset=(0.0, 0.03)):
    ax.annotate("", xy=end, xytext=start, arrowprops=dict(arrowstyle="->", lw=1.2))
    if text:
        ax.text((start[0] + end[0]) / 2 + offset[0], (start[1] + end[1]) / 2 + offset[1], text, ha="center",
                va="bottom", fontsize=7.5, style="italic")


def draw_dqn_loop():
    """One picture of DQN: the agent acts, every transition goes into the replay memory, a random minibatch
    comes out, the online network gives Q(s, a), the target network gives the TD target, and the loss between
    them updates the online network (the target network is a copy refreshed now and then)."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(10, 4.2))
    ax = fig.add_subplot()
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    _box(ax, 0.12, 0.8, "Breakout\n(environment)", "#dddddd")
    _box(ax, 0.5, 0.8, "online network\nQ(s, ·): one value\nper action", "#cfe2f3", w=0.22)
    _box(ax, 0.12, 0.35, "replay memory\n(s, a, r, s', done)\nup to 1M of them", "#f9cb9c", w=0.22, h=0.2)
    _box(ax, 0.5, 0.35, "random minibatch\nof 32 transitions", "#fff2cc", w=0.22)
    _box(ax, 0.86, 0.8, "target network\n(a copy of the online\none, refreshed\nnow and then)", "#d9ead3",
         w=0.22, h=0.22)
    _box(ax, 0.86, 0.35, "TD target\ny = r + γ · (1 - done)\n· max Q_target(s', ·)", "#d9ead3", w=0.24,
         h=0.2)
    _arrow(ax, (0.39, 0.83), (0.23, 0.83), "action a = argmax Q(s, ·)\n(or random, with probability ε)",
           offset=(0.0, 0.05))
    _arrow(ax, (0.12, 0.71), (0.12, 0.46), "")
    ax.text(0.135, 0.585, "each step stores\n(s, a, r, s', done)", fontsize=7.5, style="italic", va="center")
    _arrow(ax, (0.23, 0.35), (0.39, 0.35), "sample")
    _arrow(ax, (0.86, 0.68), (0.86, 0.46), "")
    _arrow(ax, (0.61, 0.35), (0.74, 0.35), "s', r, done")
    _arrow(ax, (0.5, 0.44), (0.5, 0.71), "")
    ax.text(0.515, 0.575, "s, a: Q(s, a)", fontsize=7.5, style="italic", va="center")
    ax.text(0.5, 0.07, "loss = (Q(s, a) - y)²  ->  gradient step on the online network",
            ha="center", fontsize=9, bbox=dict(boxstyle="round", facecolor="white", edgecolor="gray"))
    fig.suptitle("DQN in one picture: the memory the course measures is the orange box", fontsize=10)
    return fig


def draw_view_keeps_base(view: np.ndarray, crop: int = 12):
    """Left: the top-left ``crop`` x ``crop`` pixels of ``view.base`` (or of the array ``view`` is a view of,
    following ``.base`` to the owner), the ones the view addresses in orange, the rest in gray: all of them stay
    in memory while the view lives. Right: the view's ``nbytes`` against its owner's."""
    from matplotlib.figure import Figure
    owner = view
    while owner.base is not None:
        owner = owner.base
    owner2d = owner.reshape(owner.shape[0], -1) if owner.ndim > 1 else owner.reshape(1, -1)
    rows, cols = min(crop, owner2d.shape[0]), min(crop, owner2d.shape[1])
    # mark the owner's bytes the view addresses, from the view's byte offsets
    start = view.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    idx = np.indices(view.shape).reshape(view.ndim, -1)
    offsets = start + (idx * np.array(view.strides)[:, None]).sum(axis=0)
    used = np.zeros(owner.nbytes // owner.itemsize, bool)
    used[offsets // owner.itemsize] = True
    used = used.reshape(owner2d.shape)[:rows, :cols]

    fig = Figure(figsize=(9, 3.6))
    ax1, ax2 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.3]})
    ax1.imshow(np.where(used, 1.0, 0.25), cmap="Oranges", vmin=0, vmax=1)
    ax1.set_xticks(np.arange(-0.5, cols, 1), minor=True)
    ax1.set_yticks(np.arange(-0.5, rows, 1), minor=True)
    ax1.grid(which="minor", color="white", linewidth=1)
    ax1.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
    ax1.set_title(f"top-left {rows}x{cols} of the {owner.shape} array behind the view\n"
                  "dark: pixels the view shows; light: the rest; all stay alive", fontsize=9)
    names = [f"the view\n{view.shape} {view.dtype}", f"what it keeps alive\n{owner.shape} {owner.dtype}"]
    values = [view.nbytes, owner.nbytes]
    bars = ax2.bar(names, values, color=["tab:orange", "tab:gray"])
    ax2.bar_label(bars, labels=[f"{v:,} B" for v in values], fontsize=8)
    ax2.set_ylabel("bytes")
    ax2.set_title(f"nbytes counts {view.nbytes:,} B; memory holds {owner.nbytes:,} B "
                  f"({owner.nbytes / view.nbytes:.0f}x)", fontsize=9)
    ax2.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    return fig


check_module(globals())
