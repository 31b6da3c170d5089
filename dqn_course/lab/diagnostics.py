"""Notebooks 06-07c: train with the learner's own learning rule beside the library's, and read a run's diagnostics.

    runs = train_beside(cfg, "runs/beside", targets=td_targets, loss=td_loss)   # {"library": ..., "yours": ...}
    print(compare_logs(runs))                        # the same games? how far apart are the losses?
    fig = plot_diagnostics(runs, "your rule beside the library's")
    fig = plot_diagnostics({"seed 3": "data/breakout-cpu-seed3"})   # any run folder with a log.csv
    diagnosed_runs()                                 # the recorded runs whose log.csv has the diagnostics
    targets, loss, epsilon = learner_rule(td_targets, td_loss, epsilon_schedule)  # 07c: yours once each passes
    loop = learner_loop(my_dqn)                      # 07c: your loop once it passes, else the worked one

A learner's function trains only once it passes its check (``dqn_course.lab.checks``), run quietly here:
a wrong target rule would train, badly, and the curve would not say why; the check's hint does.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
from collections.abc import Callable
from pathlib import Path

import numpy as np

from dqn_course.contracts import Count, check_module
from dqn_course import check_arg
from dqn_course.config import Config
from dqn_course.lab import checks
from dqn_course.lab.playback import moving_average, read_log, recorded_runs
from dqn_course.profiling import GB, MiB

# The learner's functions ``train.train`` takes, and the check (in ``checks``) each must pass before it trains.
CHECKS = {"targets": "check_td_targets", "loss": "check_td_loss", "epsilon": "check_epsilon_schedule"}


def verdict(name: str, fn: Callable | None) -> str | None:
    """Why the learner's ``fn`` for ``name`` ("targets", "loss" or "epsilon") cannot train yet, or None when it
    passes its check (whose printed lines are swallowed)."""
    if fn is None:
        return "not written yet"
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            passed = getattr(checks, CHECKS[name])(fn)
    except AssertionError as e:
        return f"fails its check ({str(e).splitlines()[0]})"
    return None if passed else "not written yet"


def _whose(why: str | None) -> str:
    """Whose function a run uses, given the learner's ``verdict``: "yours", or the library's and why not yours
    ("yours is not written yet", "yours fails its check (...)")."""
    if why is None:
        return "yours"
    return f"the library's: yours {why if why.startswith('fails') else f'is {why}'}"


_NOT_ASKED = object()  # a function the page does not ask for: the library's trains, and the line says only that


def train_beside(cfg: Config, out_root: str | Path, *, targets: Callable | None = _NOT_ASKED,
                 loss: Callable | None = _NOT_ASKED, epsilon: Callable | None = _NOT_ASKED) -> dict[str, dict]:
    """Train ``cfg`` (a ``train.Config``) with the library's rule into ``out_root/library``, and, when one of the
    learner's functions passes its check, again from the same seed with those functions (the library's for the
    rest) into ``out_root/yours``. Prints one line per function saying which one trains (None: the learner's is
    not written yet; a function left out is not this page's exercise). Returns each run's ``train.train`` summary
    (its folder is ``out_dir``): ``{"library": ...}`` or ``{"library": ..., "yours": ...}``."""
    from dqn_course.train import train

    out_root = Path(out_root)
    yours = {}
    for name, fn in (("targets", targets), ("loss", loss), ("epsilon", epsilon)):
        if fn is _NOT_ASKED:
            print(f"{name:8} the library's")
            continue
        why = verdict(name, fn)
        if why is None:
            yours[name] = fn
        print(f"{name:8} {_whose(why)}")
    runs = {"library": train(dataclasses.replace(cfg, out_dir=str(out_root / "library"), progress=False))}
    if yours:
        runs["yours"] = train(dataclasses.replace(cfg, out_dir=str(out_root / "yours"), progress=False), **yours)
    return runs


def _folder(run: str | Path | dict) -> Path:
    """A run's folder: given as a path, or as its ``train.train`` summary (``out_dir``)."""
    return Path(run["out_dir"] if isinstance(run, dict) else run)


def compare_logs(runs: dict[str, str | Path | dict], names: tuple[str, ...] = ()) -> str:
    """One line on two runs' ``log.csv`` ("library" and "yours", each a folder or a ``train.train`` summary): whether
    they played the same games (the same scores at the same steps), and the largest relative difference between
    their logged losses. Without "yours", the line says what to write first: ``names``, the functions the page asks
    the learner for (``("epsilon_schedule",)``), or "your functions" when it names none."""
    if "yours" not in runs:
        asked = " and ".join(names) if names else "your functions"
        return (f"only the library's run: write {asked} above, and run this again to train with "
                f"{'it' if len(names) == 1 else 'them'}")
    a, b = (read_log(_folder(runs[k]) / "log.csv") for k in ("library", "yours"))
    n = min(len(a["step"]), len(b["step"]))
    differ = (a["step"][:n] != b["step"][:n]) | (a["episode_return"][:n] != b["episode_return"][:n])
    first = int(np.argmax(differ)) if differ.any() else n  # the first game that differs (n: one run has more)
    la, lb = a["loss"][:n], b["loss"][:n]
    both = ~np.isnan(la) & ~np.isnan(lb)
    gap = float(np.max(np.abs(la[both] - lb[both]) / np.maximum(np.abs(la[both]), 1e-12))) if both.any() else 0.0
    games = ("the same games, score for score" if first == n == len(a["step"]) == len(b["step"]) else
             f"different games from the first {first} on ({len(a['step'])} and {len(b['step'])} games)")
    return f"yours beside the library's: {games}; largest relative difference in the logged loss: {gap:.1e}"


def diagnosed_runs(data_dir: str | Path | None = None) -> list[Path]:
    """The recorded runs (``playback.recorded_runs``, in that order) whose ``log.csv`` has the updates' diagnostics
    (loss, q_max, grad_norm): runs recorded before those were logged have the loss alone."""
    with_columns = []
    for run in recorded_runs(data_dir):
        with open(run / "log.csv", encoding="utf-8") as f:
            if {"q_max", "grad_norm"} <= set(f.readline().strip().split(",")):
                with_columns.append(run)
    return with_columns


# The panels of ``plot_diagnostics``: log.csv column, axis label, log scale.
PANELS = (("episode_return", "training game score", False),
          ("loss", "TD loss", True),
          ("q_max", "mean max-Q of sampled states", False),
          ("grad_norm", "gradient norm before clipping", True),
          ("epsilon", "ε (exploration)", False),
          ("replay_size", "transitions in the replay", False))
SMOOTHED = ("episode_return", "loss", "q_max", "grad_norm")


def plot_diagnostics(runs: dict[str, str | Path | dict], title: str = "", window: Count = 20,
                     max_step: int | None = None):
    """A ``matplotlib.figure.Figure`` of what ``log.csv`` records, against the agent step, one line per run (label ->
    run folder or ``train.train`` summary): score, TD loss, mean max-Q, gradient norm before clipping, ε and the
    replay's fill (RSS on a second axis, from 0 and below the line of a full replay, so that line hides none of
    it). Score, loss, max-Q and gradient norm are smoothed over ``window`` games.
    A run whose log lacks a column (one recorded before it was logged) is left out of that panel. ``max_step``: only
    the games logged up to that step (a long run drawn beside short ones)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    if max_step is not None:
        check_arg("max_step", max_step, integer=True, low=1)
    logs = {label: read_log(_folder(run) / "log.csv") for label, run in runs.items()}
    if max_step is not None:
        logs = {label: {k: v[log["step"] <= max_step] for k, v in log.items()} for label, log in logs.items()}
    fig = Figure(figsize=(11, 6.4), layout="constrained")
    axes = fig.subplots(2, 3).ravel()
    for ax, (column, label, log_scale) in zip(axes, PANELS):
        rss = ax.twinx() if column == "replay_size" and any("rss_mb" in log for log in logs.values()) else None
        for (name, log), color in zip(logs.items(), ("tab:blue", "tab:orange", "tab:green", "tab:red")):
            if column not in log or np.isnan(log[column]).all():
                continue
            values, steps = log[column], log["step"]
            keep = ~np.isnan(values)
            shown = moving_average(values[keep], window) if column in SMOOTHED else values[keep]
            ax.plot(steps[keep], shown, color=color, label=name)
            if rss is not None and "rss_mb" in log:
                rss.plot(steps, log["rss_mb"] * MiB / GB, color=color, linestyle=":", alpha=0.7)  # column in MiB
                rss.set_ylabel("RSS (GB, dotted)")
        top = max((float(np.max(log["rss_mb"][np.isfinite(log["rss_mb"])], initial=0)) for log in logs.values()
                   if "rss_mb" in log), default=0)
        if rss is not None and top > 0:  # from 0, its top at 60% of the panel: clear of a full replay's line
            rss.set_ylim(0, top * MiB / GB / 0.6)
        ax.set_title(label + (f" ({window}-game mean)" if column in SMOOTHED else ""), fontsize=9)
        ax.set_xlabel("agent step")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1000:g}k" if x else "0"))
        if log_scale and ax.has_data():
            ax.set_yscale("log")
    if len(logs) > 1:
        axes[0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return fig


def learner_rule(td_targets: Callable | None = None, td_loss: Callable | None = None,
                 epsilon_schedule: Callable | None = None) -> tuple:
    """``(td_targets, td_loss, epsilon_schedule)`` for notebook 07c's loop: each of the learner's that passes its
    check (``checks.check_td_targets`` ...), the library's for the others; prints one line per function saying
    which."""
    from dqn_course.agent import td_loss as library_loss
    from dqn_course.agent import td_targets as library_targets
    from dqn_course.train import linear_epsilon

    chosen = []
    for name, label, fn, library in (("targets", "td_targets", td_targets, library_targets),
                                     ("loss", "td_loss", td_loss, library_loss),
                                     ("epsilon", "epsilon_schedule", epsilon_schedule, linear_epsilon)):
        why = verdict(name, fn)
        chosen.append(fn if why is None else library)
        print(f"{label:<17} {_whose(why)}")
    return tuple(chosen)


def whose_rule(rule: tuple) -> str:
    """One line on ``rule`` (``learner_rule``'s tuple), for notebook 07c's long run and its gate: all the learner's,
    or which of its functions are the library's, so that a verdict on a run trained with it says what it judged."""
    from dqn_course.agent import td_loss as library_loss
    from dqn_course.agent import td_targets as library_targets
    from dqn_course.train import linear_epsilon

    names = ("td_targets", "td_loss", "epsilon_schedule")
    borrowed = [name for name, fn, library in zip(names, rule, (library_targets, library_loss, linear_epsilon))
                if fn is library]
    if not borrowed:
        return "the long run trains with your rule and schedule: a verdict judges your loop and your pieces"
    return (f"the long run trains with the library's {', '.join(borrowed)} (section 3: yours had not passed): "
            "a verdict judges your loop, not those pieces")


def learner_loop(my_dqn: Callable | None) -> Callable:
    """The learner's loop when it passes ``checks.check_capstone_loop`` (run quietly), else the worked loop
    (``capstone_solution.dqn_loop``); prints which (notebook 07c)."""
    from dqn_course.lab.capstone_solution import dqn_loop

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            passed = my_dqn is not None and checks.check_capstone_loop(my_dqn)
    except AssertionError as e:
        print(f"the worked loop: yours fails its check ({str(e).splitlines()[0]})")
        return dqn_loop
    print("your loop" if passed else "the worked loop: yours is not written yet")
    return my_dqn if passed else dqn_loop


check_module(globals())
