"""Does it learn? Reading a run's logs, watching a checkpoint play, and the replay memory at full size (notebook 07).

    run = find_recorded_run()                        # data/breakout-fast or data/breakout, if one was recorded
    fig = plot_run("runs/quick", "CPU demo run")     # log.csv + eval.csv of any run directory
    agent, info = load_agent("runs/quick/checkpoint.pt")
    episode = play_episode(agent, max_steps=300)     # Episode(frames, score, steps, lives_lost)
    HTML(animate(episode.frames).to_jshtml())        # inline animation in Jupyter
    play_scores(None, games=5)                       # agent=None plays uniformly random actions
    recorded_random("data/breakout-cpu")             # random play recorded beside a run, same protocol

A recorded run is what ``python -m dqn_course.train`` writes into its ``--out-dir`` (``log.csv``,
``eval.csv``, ``checkpoint.pt``), copied to ``data/breakout-fast/`` (or ``data/breakout/``).

Module-level imports stay light (numpy and the replay memories): ``allocate_replay`` runs in a fresh
"spawn" process under ``profiling.measure_in_subprocess``, which imports this module before it reads
the baseline RSS. torch, gymnasium and matplotlib are imported inside the functions that need them.
"""
from __future__ import annotations

import csv
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dqn_course.contracts import Count, Probability, check_module
from dqn_course.replay import FrameSharingMemory, MultiStreamMemory

if TYPE_CHECKING:
    import torch

    from dqn_course.agent import DQNAgent

DATA_DIR = Path(__file__).resolve().parents[2] / "data"
# Sub-directories of data/ that may hold a recorded run, the longest-trained first (breakout-cpu-seed2 and -seed3
# ran the breakout-cpu preset to its end, seed 3 with the updates' diagnostics in its log; breakout-cpu, seed 1,
# stopped at 40% of it).
RECORDED_RUN_NAMES = ("breakout-gpu-10m", "breakout-gpu", "breakout-fast", "breakout", "breakout-cpu-seed2",
                      "breakout-cpu-seed3", "breakout-cpu")
# Runs of notebook 07c's worked loop (the learner's own loop, not train()) on the breakout-cpu problem.
CAPSTONE_RUN_NAMES = ("capstone-seed1", "capstone-seed2")
# Published Breakout scores with their sources and protocols (random play, Atari-100k methods, Dopamine, CleanRL).
PUBLISHED = DATA_DIR / "published.json"


def published_scores(path: str | Path = PUBLISHED) -> list[dict]:
    """The published scores of ``data/published.json``: method, agent steps (None for random play), score, protocol,
    source and link. Each was measured with its own protocol, not the course's; the file says so."""
    return json.loads(Path(path).read_text(encoding="utf-8"))["scores"]


def recorded_evaluation(run_dir: str | Path) -> dict | None:
    """A run's ``evaluation.json``: what ``python -m dqn_course.evaluate <run> --json`` measured on its committed
    ``checkpoint.pt`` (fresh seeds, the policy and random play on the same games, the file's SHA-256); None when the
    run has none."""
    path = Path(run_dir) / "evaluation.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


# -- logs ------------------------------------------------------------------------------------------------

def recorded_runs(data_dir: str | Path | None = None) -> list[Path]:
    """The folders of ``RECORDED_RUN_NAMES`` under ``data/`` that hold a ``log.csv``, in that order."""
    return _runs_named(RECORDED_RUN_NAMES, data_dir)


def capstone_runs(data_dir: str | Path | None = None) -> list[Path]:
    """The folders of ``CAPSTONE_RUN_NAMES`` under ``data/`` that hold a ``log.csv``, in that order."""
    return _runs_named(CAPSTONE_RUN_NAMES, data_dir)


def _runs_named(names: tuple[str, ...], data_dir: str | Path | None) -> list[Path]:
    root = Path(data_dir) if data_dir is not None else DATA_DIR
    return [root / name for name in names if (root / name / "log.csv").is_file()]


def run_config(run_dir: str | Path):
    """The ``train.Config`` a run was trained with, as its ``checkpoint.pt`` saved it."""
    import torch

    from dqn_course.train import Config

    saved = torch.load(Path(run_dir) / "checkpoint.pt", map_location="cpu", weights_only=True)["config"]
    return Config(**{k: v for k, v in saved.items() if k in Config.__dataclass_fields__})


def last_evaluation(run_dir: str | Path) -> dict:
    """The last row of a run's ``eval.csv``: step, mean, std and number of games."""
    ev = read_log(Path(run_dir) / "eval.csv")
    if not len(ev["step"]):
        raise ValueError(f"{run_dir}/eval.csv has no evaluation yet")
    return {"step": int(ev["step"][-1]), "mean": float(ev["mean_return"][-1]), "std": float(ev["std_return"][-1]),
            "games": int(ev["episodes"][-1])}


def recorded_random(run_dir: str | Path) -> dict | None:
    """The random play recorded beside a run, ``random.json``: uniformly random actions under the run's own
    evaluation protocol (``records.play_evaluation(None, ...)``), with ``games``, ``mean``, ``std`` and every game's
    score under ``returns``. None when the run has no such file. The ratio "score over random play" uses this record.
    """
    path = Path(run_dir) / "random.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


_FINISHED = re.compile(r"^done: ([\d,]+) steps in ([\d.]+) s", re.MULTILINE)  # train()'s last line, stdout.txt


def recorded_wall_time(run_dir: str | Path) -> tuple[int, float]:
    """The agent steps a recorded run finished and the wall seconds it took, read from the last line ``train()``
    printed into its ``stdout.txt`` (``done: 500,000 steps in 3037 s ...``): the run's overall rate, evaluations and
    saves included, is their ratio. Raises FileNotFoundError without the file, ValueError when no run finished in it
    in one session (a resumed run's line gives its last session's seconds, from which no overall rate follows).
    """
    text = (Path(run_dir) / "stdout.txt").read_text(encoding="utf-8")
    finished = _FINISHED.findall(text)
    if not finished:
        raise ValueError(f"{run_dir}/stdout.txt holds no finished run (no line 'done: N steps in S s')")
    steps, seconds = finished[-1]
    return int(steps.replace(",", "")), float(seconds)


def find_recorded_run(data_dir: str | Path | None = None) -> Path | None:
    """The first of ``recorded_runs``: the longest-trained recorded run; None if there is none."""
    runs = recorded_runs(data_dir)
    return runs[0] if runs else None


def read_log(path: str | Path) -> dict[str, np.ndarray]:
    """A CSV written by ``records.CsvLog`` as float columns (empty cells, e.g. no loss yet, become NaN)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        with open(path, newline="") as f:
            header = next(csv.reader(f), [])
        return {name: np.array([], dtype=float) for name in header}
    return {name: np.array([float(r[name]) if r[name] not in ("", None) else np.nan for r in rows])
            for name in rows[0]}


def moving_average(values: np.ndarray | Sequence[float], window: Count) -> np.ndarray:
    """Mean of the last ``window`` values at each point (fewer at the start); same length as ``values``."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return values
    cumsum = np.cumsum(np.insert(values, 0, 0.0))
    idx = np.arange(1, values.size + 1)
    lo = np.maximum(0, idx - window)
    return (cumsum[idx] - cumsum[lo]) / (idx - lo)


def plot_run(run_dir: str | Path, title: str = "", window: Count | None = None):
    """Two panels: every game's return (and a moving average, ε on a second axis); evaluation mean ± std.

    Returns a ``matplotlib.figure.Figure`` (Jupyter displays it). ``window`` (games in the moving
    average) defaults to a tenth of the games, at least 5 (or all of them, if fewer) and at most 100.
    """
    from matplotlib.figure import Figure

    run_dir = Path(run_dir)
    log = read_log(run_dir / "log.csv")
    eval_path = run_dir / "eval.csv"
    ev = read_log(eval_path) if eval_path.is_file() else {"step": np.array([])}
    steps, returns = log.get("step", np.array([])), log.get("episode_return", np.array([]))
    window = window or int(np.clip(len(returns) // 10, min(5, max(1, len(returns))), 100))

    fig = Figure(figsize=(10, 3.6), layout="constrained")
    ax, ax_eval = fig.subplots(1, 2)
    ax.plot(steps, returns, "o", color="tab:blue", alpha=0.4, markersize=3, label="one game's return")
    if len(returns) > 1:
        ax.plot(steps, moving_average(returns, window), color="tab:blue", label=f"mean of the last {window} games")
    if len(returns):
        eps = ax.twinx()
        eps.plot(steps, log["epsilon"], color="tab:gray", linestyle=":", label="ε")
        eps.set_ylim(0, 1.05)
        eps.set_ylabel("ε (exploration)", color="tab:gray")
    ax.set_xlabel("agent step")
    ax.set_ylabel("game return (unclipped score)")
    ax.set_title("training games (ε-greedy)", fontsize=10)
    legend_with_twins(ax)

    if len(ev["step"]):
        ax_eval.errorbar(ev["step"], ev["mean_return"], yerr=ev["std_return"], marker="o", capsize=3,
                         color="tab:green")
    else:
        ax_eval.text(0.5, 0.5, "no evaluation yet", ha="center", va="center", transform=ax_eval.transAxes)
    ax_eval.set_xlabel("agent step")
    ax_eval.set_ylabel("mean return ± std")
    ax_eval.set_title("evaluation (ε = 0.05)", fontsize=10)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def legend_with_twins(ax) -> None:
    """One legend, upper left on ``ax``, for the labelled lines of ``ax`` and of the axes that share its x axis
    (``twinx``: ``plot_run``'s ε), which a plain ``ax.legend()`` leaves out."""
    handles, labels = [], []
    for axes in [ax, *(a for a in ax.get_shared_x_axes().get_siblings(ax) if a is not ax)]:
        h, lab = axes.get_legend_handles_labels()
        handles, labels = handles + h, labels + lab
    ax.legend(handles, labels, loc="upper left", fontsize=8)


def plot_learning(runs: dict[str, str | Path], random_mean: float, published: list[dict] | None = None,
                  window: Count = 100, fresh: bool = True):
    """Recorded runs' evaluations (mean ± std) and training games (moving average) against random play.

    ``runs`` maps a label to a run folder (``log.csv``, ``eval.csv``). Horizontal lines mark ``random_mean``
    (measured with the same protocol as the evaluations) and five times it; ``published`` scores (rows of
    ``published_scores()``) with a step count are drawn as hollow markers at that step, labelled with their method.
    ``fresh``: a run's ``evaluation.json`` (its saved policy on fresh games, ``recorded_evaluation``) is a star.
    The score axis is linear up to 10 and logarithmic above, so a CPU run's first points and a 10M-step score fit.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.6), layout="constrained")
    ax = fig.subplots()
    colors = iter(["tab:blue", "tab:green", "tab:purple", "tab:brown"])
    for label, run_dir in runs.items():
        color, run_dir = next(colors), Path(run_dir)
        log = read_log(run_dir / "log.csv")
        if len(log["step"]):
            ax.plot(log["step"], moving_average(log["episode_return"], window), color=color, alpha=0.35,
                    label=f"{label}: training games (ε-greedy), mean of {window}")
        if (run_dir / "eval.csv").is_file():
            ev = read_log(run_dir / "eval.csv")
            ax.errorbar(ev["step"], ev["mean_return"], yerr=ev["std_return"], color=color, marker="o", capsize=3,
                        label=f"{label}: evaluation (ε = 0.05), mean ± std")
        e = recorded_evaluation(run_dir) if fresh else None
        if e:
            ax.errorbar([e["step"]], [e["policy"]["mean"]], yerr=[e["policy"]["std"]], color=color, marker="*",
                        markersize=12, capsize=3, linestyle="none",
                        label=f"{label}: saved policy, {e['policy']['games']} fresh games: {e['policy']['mean']:.1f}")
    ax.axhline(random_mean, color="tab:gray", linestyle="--", label=f"random actions, same protocol: {random_mean:.2f}")
    ax.axhline(5 * random_mean, color="tab:red", linestyle=":", label=f"5 × random: {5 * random_mean:.1f}")
    markers = iter("sD^vP*X")
    by_method: dict[str, list[dict]] = {}
    for row in published or []:
        if row.get("agent_steps"):
            by_method.setdefault(row["method"], []).append(row)
    for method, rows in by_method.items():
        ax.errorbar([r["agent_steps"] for r in rows], [r["score"] for r in rows],
                    yerr=[r.get("std", 0) for r in rows], marker=next(markers), markerfacecolor="none", color="black",
                    linestyle="none", capsize=3,
                    label=f"published: {method} (" + ", ".join(f"{r['score']:g}" for r in rows) + ")")
    ax.set_yscale("symlog", linthresh=10, linscale=1.5)
    ax.set_ylim(0, 600 if any(r["score"] > 100 for rows in by_method.values() for r in rows) else None)
    if by_method:
        ax.set_xscale("log")
    ticks = [t for t in (0, 2, 4, 6, 8, 10, 20, 50, 100, 200, 500) if t <= ax.get_ylim()[1]]
    ax.set_yticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("agent step (4 emulator frames each)")
    ax.set_ylabel("game score (unclipped)")
    ax.set_title("Breakout: does it learn? (published scores use their own protocols)", fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    return fig


def save_gif(frames: np.ndarray | Sequence[np.ndarray], path: str | Path, every: Count = 2, fps: Count = 15,
             scale: int = 1) -> Path:
    """Write RGB screens (every ``every``-th one) as a looping GIF with Pillow; returns the path."""
    from PIL import Image

    shown = list(frames)[::every]
    if not shown:
        raise ValueError("no frames to write")
    images = [Image.fromarray(np.asarray(f, dtype=np.uint8)) for f in shown]
    if scale != 1:
        images = [im.resize((im.width * scale, im.height * scale), Image.NEAREST) for im in images]
    path = Path(path)
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0, optimize=True)
    return path


# -- checkpoints and play ---------------------------------------------------------------------------------

def load_agent(path: str | Path, device: str | torch.device | None = None) -> tuple[DQNAgent, dict]:
    """A ``DQNAgent`` playing with the weights of a ``records.save_checkpoint`` file; also returns its step and config.

    The file holds the online network alone (``{"q", "config", "step", "evaluation"}``); the target network is set
    to the same weights, and no optimiser state is loaded (that lives in ``state-<step>.ckpt``, for resuming).
    ``dqn_course.evaluate.load_policy`` reads it, and raises ``PolicyFileError`` for a missing or foreign file.
    """
    from dqn_course.evaluate import load_policy

    agent, info = load_policy(path, device if device is not None else "cpu")
    return agent, {"step": info["step"], "config": info["config"]}


@dataclass
class Episode:
    """One game (or its first ``max_steps`` agent steps): the screens and what was scored."""

    score: float  # unclipped points
    steps: int  # agent steps played (4 emulator frames each)
    lives_lost: int
    finished: bool  # the game ended (all lives lost) before max_steps
    frames: list = field(default_factory=list, repr=False)  # RGB screens (210, 160, 3), one per agent step


def play_episode(agent: DQNAgent | None = None, epsilon: Probability = 0.05, max_steps: Count = 300, seed: int = 0,
                 render: bool = True) -> Episode:
    """Play one Breakout game with ``agent`` (ε-greedy) or, for ``agent=None``, uniformly random actions.

    ``max_steps`` cuts the game short (in agent steps; the FIRE press after reset is the first of them).
    ``render=True`` keeps the emulator's RGB screen after every step (``env.render()``), for ``animate``.
    The game (no-op start) and the random draws (ε and random actions) are seeded with ``seed``, so the
    same checkpoint and seed play the same game again (the agent's own generator is restored after).
    """
    from dqn_course.envs import make_breakout
    from dqn_course.evaluate import play_game

    env = make_breakout(seed=seed, max_episode_steps=max_steps, render_mode="rgb_array" if render else None)
    rng = np.random.default_rng(seed)
    if agent is not None:
        agent_rng, agent.rng = agent.rng, rng
    try:
        state, _ = env.reset(seed=seed)
        frames = [env.render()] if render else []
        game = play_game(env, state, agent, epsilon, lambda: int(rng.integers(env.action_space.n)),
                         (lambda: frames.append(env.render())) if render else None)
    finally:
        env.close()
        if agent is not None:
            agent.rng = agent_rng
    return Episode(*game, frames)


def play_scores(agent: DQNAgent | None, games: Count, epsilon: Probability = 0.05, max_steps: Count = 1_000,
                seed: int = 100) -> list[float]:
    """Scores of ``games`` games (seeds ``seed``, ``seed+1``, ...), each cut at ``max_steps`` agent steps."""
    return [play_episode(agent, epsilon, max_steps, seed + i, render=False).score for i in range(games)]


def animate(frames: np.ndarray | Sequence[np.ndarray], fps: Count = 10, every: Count = 3, title: str = "",
            scale: float = 1.5):
    """A matplotlib animation of RGB screens (every ``every``-th one); ``.to_jshtml()`` shows it inline.

    Screens are drawn ``scale`` times their size with nearest-neighbour pixels (crisp, and small as
    PNG frames). The figure is made without pyplot, so Jupyter does not also show it as a still picture.
    """
    from matplotlib.animation import FuncAnimation
    from matplotlib.figure import Figure

    shown = list(frames)[::every]
    if not shown:
        raise ValueError("no frames to animate")
    dpi, text_h = 80, 0.4  # inches of space above the screen for two lines of text
    h, w = shown[0].shape[:2]
    fig = Figure(figsize=(w * scale / dpi, h * scale / dpi + text_h), dpi=dpi)
    ax = fig.add_axes((0, 0, 1, 1 - text_h / fig.get_figheight()))
    image = ax.imshow(shown[0], interpolation="nearest")
    ax.axis("off")
    label = fig.text(0.5, 0.995, "", ha="center", va="top", fontsize=8)

    def draw(i):
        image.set_data(shown[i])
        label.set_text(f"{title}\nagent step {i * every}" if title else f"agent step {i * every}")
        return image, label

    return FuncAnimation(fig, draw, frames=len(shown), interval=1000 / fps, blit=False)


# -- the replay memory at full size ----------------------------------------------------------------------

_KEPT: list = []  # keeps the measured memory alive until the measuring child process reads its RSS


def allocate_replay(capacity: Count, num_streams: Count = 1, prefault: bool = True) -> dict:
    """Build the training loop's replay memory in host RAM and keep it; returns its size.

    For ``profiling.measure_in_subprocess``: that reads the child's RSS *after* this returns, so the
    memory is parked in a module-level list instead of being freed on return. ``num_streams > 1``
    is the fast path's ``MultiStreamMemory`` (one ring per env, the same bytes in total).
    """
    if num_streams == 1:
        memory = FrameSharingMemory(capacity, prefault=prefault)
    else:
        memory = MultiStreamMemory(capacity, num_streams, prefault=prefault)
    _KEPT.append(memory)
    return {"capacity": capacity, "num_streams": num_streams, "nbytes": int(memory.nbytes)}


check_module(globals())
