"""Classic DQN mistakes, each one small change to the capstone's worked loop, for notebook 07c's failure gallery.

    python -m dqn_course.lab.capstone_gallery no-done-mask data/capstone-gallery/no-done-mask --steps 50000

Each mistake runs ``capstone_solution.dqn_loop`` on the ``breakout-cpu`` problem, stopped after its first
``steps`` agent steps (the settings unchanged, so ε and the evaluations follow the working run's), with one thing
wrong: a learning rule that forgets something (``targets``), a schedule that does not move (``epsilon``) or one
setting off (``changes``). The notebook plots the recordings beside a working run and asks the learner to diagnose
each one before it names the mistake; nobody waits for them in class.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from dqn_course.contracts import Probability, check_module
from dqn_course.agent import td_targets
from dqn_course.lab.capstone import settings
from dqn_course.train import linear_epsilon


@torch.no_grad()
def targets_without_done_mask(rewards: torch.Tensor, dones: torch.Tensor, next_states: torch.Tensor,
                              online: torch.nn.Module, target: torch.nn.Module, gamma: Probability,
                              double: bool = False) -> torch.Tensor:
    """TD targets that bootstrap through every transition, the end of a life or a game included."""
    return rewards + gamma * target(next_states).max(1).values


@torch.no_grad()
def targets_from_the_online_network(rewards: torch.Tensor, dones: torch.Tensor, next_states: torch.Tensor,
                                    online: torch.nn.Module, target: torch.nn.Module, gamma: Probability,
                                    double: bool = False) -> torch.Tensor:
    """TD targets valued by the network being trained instead of its frozen copy."""
    return rewards + gamma * (1.0 - dones) * online(next_states).max(1).values


def epsilon_that_never_decays(step: int, start: Probability, end: Probability, decay_steps: int) -> float:
    """ε stuck at its start: every action random, for the whole run."""
    return start


@dataclass(frozen=True)
class Mistake:
    """One thing wrong in the loop: the rule, the schedule or a setting (``changes``, applied to the preset)."""

    title: str
    targets: Callable = td_targets
    epsilon: Callable = linear_epsilon
    changes: dict = field(default_factory=dict)


MISTAKES: dict[str, Mistake] = {
    "no-done-mask": Mistake("(1 − done) forgotten in the target", targets=targets_without_done_mask),
    "lr-100x": Mistake("a learning rate 100× too large (1e-2)", changes={"lr": 1e-2}),
    "eps-never-decays": Mistake("ε that never decays", epsilon=epsilon_that_never_decays),
    "online-target": Mistake("the online network used for the target", targets=targets_from_the_online_network),
}


# Notebook 07c shows the recorded mistakes as runs A, B and C, in this order, and asks which is which.
GALLERY_ORDER = {"A": "lr-100x", "B": "eps-never-decays", "C": "no-done-mask"}
GALLERY_FOLDER = "capstone-gallery"  # under data/: one folder per mistake
WORKING_RUN = "capstone-seed1"  # the working run they are drawn beside


def recorded_steps(run: str | Path) -> int:
    """The agent steps a gallery recording played: the step of its last evaluation (``record`` evaluates at the step
    it stops), else the last step its ``log.csv`` logged."""
    from dqn_course.lab.playback import read_log

    run = Path(run)
    log = read_log(run / "eval.csv") if (run / "eval.csv").is_file() else read_log(run / "log.csv")
    return int(log["step"][-1])


def recorded_log(label: str, data_dir: str | Path | None = None) -> dict | None:
    """The ``log.csv`` columns (``playback.read_log``) of the recording shown as ``label`` ("A", "B" or "C"), None
    while it is missing; like the plots, it names no mistake. Raises ValueError for another label."""
    from dqn_course.lab.playback import DATA_DIR, read_log

    if label not in GALLERY_ORDER:
        raise ValueError(f"label must be one of {', '.join(GALLERY_ORDER)}, got {label!r}")
    log = (Path(data_dir) if data_dir is not None else DATA_DIR) / GALLERY_FOLDER / GALLERY_ORDER[label] / "log.csv"
    return read_log(log) if log.is_file() else None


def plot_beside_working(label: str, data_dir: str | Path | None = None, steps: int | None = None):
    """The recorded run shown as ``label`` ("A", "B" or "C") beside the working run's first ``steps`` agent steps
    (``diagnostics.plot_diagnostics``; by default as many as the recording played, ``recorded_steps``), titled by its
    label only; None while either recording is missing."""
    from dqn_course.lab.diagnostics import plot_diagnostics
    from dqn_course.lab.playback import DATA_DIR

    if label not in GALLERY_ORDER:
        raise ValueError(f"label must be one of {', '.join(GALLERY_ORDER)}, got {label!r}")
    root = Path(data_dir) if data_dir is not None else DATA_DIR
    run, working = root / GALLERY_FOLDER / GALLERY_ORDER[label], root / WORKING_RUN
    if not ((run / "log.csv").is_file() and (working / "log.csv").is_file()):
        return None
    steps = recorded_steps(run) if steps is None else steps
    return plot_diagnostics({"working run": working, f"run {label}": run},
                            f"run {label} beside the working run, its first {steps:,} agent steps", window=10,
                            max_step=steps)


class _Enough(Exception):
    """Raised by the capped schedule once a gallery run has played its steps."""


def _capped(schedule: Callable, steps: int) -> Callable:
    """``schedule`` for the first ``steps`` agent steps; at the next it stops the loop (which saves, then returns)."""
    def epsilon(step, start, end, decay_steps):
        if step > steps:
            raise _Enough
        return schedule(step, start, end, decay_steps)
    return epsilon


def record(name: str, folder: str | Path, steps: int, seed: int = 1, quick: bool = False) -> int:
    """Run the worked loop with mistake ``name`` for its first ``steps`` agent steps into ``folder``; returns
    ``steps``. The settings are the working run's (``capstone.settings``: ε decays over the same steps, evaluations at
    the same steps) with the mistake's ``changes``; ``quick``: the smoke settings."""
    from dqn_course.lab.capstone_solution import dqn_loop

    if name not in MISTAKES:
        raise ValueError(f"no mistake called {name!r}: choose one of {', '.join(MISTAKES)}")
    mistake = MISTAKES[name]
    cfg = settings(quick=quick, seed=seed, out_dir=str(folder), **mistake.changes)
    if not isinstance(steps, int) or isinstance(steps, bool) or not 0 < steps <= cfg.total_steps:
        raise ValueError(f"steps must be a whole number in 1..{cfg.total_steps:,}, got {steps!r}")
    try:
        return dqn_loop(cfg, folder, td_targets=mistake.targets, epsilon_schedule=_capped(mistake.epsilon, steps))
    except _Enough:
        return steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dqn_course.lab.capstone_gallery",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("mistake", choices=sorted(MISTAKES))
    parser.add_argument("folder")
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    step = record(args.mistake, args.folder, args.steps, args.seed)
    print(f"{args.mistake}: stopped at step {step:,} of {args.steps:,}; run folder {args.folder}", flush=True)


if __name__ == "__main__":
    main()


check_module(globals())
