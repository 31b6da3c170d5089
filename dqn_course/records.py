"""A run's record-keeping: its logs, its timer, its evaluations and the policy and state files it writes.

The logs are ``log.csv`` (a row per game), ``eval.csv`` (a row per evaluation) and, when asked, TensorBoard; the files
are the policy ``checkpoint.pt`` and the training states ``state-<step>.ckpt``, which a resume reads back.

``RunRecords`` opens them all for one run and closes them whatever happens; a write that fills the disk ends the
run as ``DiskFullError`` (what was kept, what the next save needs), the way a signal ends it.
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import shutil
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm import tqdm

from dqn_course.contracts import Count, Probability, check_module
from dqn_course.agent import UPDATE_STATS, DQNAgent
from dqn_course.checkpoint import (
    CheckpointError,
    checkpoint_path,
    checkpoint_step,
    latest_checkpoint,
    list_checkpoints,
    prune_checkpoints,
    replacing,
    TrainingParts,
    training_state,
    write_checkpoint,
)
from dqn_course.evaluate import EVAL_SEED_OFFSET, play_games
from dqn_course.profiling import MiB, rss_bytes
from dqn_course.replay.base import MemoryLike
from dqn_course.stopping import DiskFullError, is_disk_full

if TYPE_CHECKING:  # the settings' type only (config sits below this module)
    from dqn_course.config import Config

# -- the logs -------------------------------------------------------------------------------------------------------

# One row per finished game; rss_mb is the process's resident set size in MiB (2^20 bytes), the unit every recorded
# log.csv under data/ has.
LOG_FIELDS = ["step", "episode_return", "episode_length", *UPDATE_STATS, "epsilon", "replay_size", "rss_mb",
              "steps_per_s"]
EVAL_FIELDS = ["step", "mean_return", "std_return", "episodes"]  # one row of eval.csv per evaluation


class CsvLog:
    """Append rows to a CSV file, flushing each so a killed run keeps its log.

    ``resume_step``: keep the rows of an earlier run up to that step (what the checkpoint covers)
    and append after them, so the log of a resumed run reads as one run.
    """

    def __init__(self, path: Path, fields: list[str], resume_step: int | None = None):
        kept = []
        if resume_step is not None and path.is_file():
            with open(path, newline="") as f:  # a row cut short by a full disk or a kill is dropped
                kept = [r for r in csv.DictReader(f) if None not in r and None not in r.values()
                        and r["step"].isdigit() and int(r["step"]) <= resume_step]
        # The kept rows go to a new file that replaces the log only once written: a full disk leaves the old one.
        with replacing(path) as partial, open(partial, "w", newline="") as f:
            writer = csv.DictWriter(f, fields)
            writer.writeheader()
            writer.writerows(kept)
        self.file = open(path, "a", newline="")
        self.writer = csv.DictWriter(self.file, fields)

    def write(self, **row) -> None:
        self.writer.writerow(row)
        self.file.flush()

    def close(self) -> None:
        self.file.close()


class GameLog:
    """The games in progress in each env; one ``log.csv`` row per finished game (``LOG_FIELDS``): its score and
    length, the updates' diagnostics since the last row (mean loss, mean max-Q of the sampled states, mean gradient
    norm before clipping; blank before the first update), ε, the transitions in the replay, RSS and the agent
    steps/s since the last row. ``scalars``: also written there (TensorBoard), per step."""

    def __init__(self, log: CsvLog, num_envs: Count, step: int, counters: dict,
                 scalars: TensorBoardScalars | None = None):
        self.log, self.counters, self.scalars = log, counters, scalars
        self.returns, self.lengths = np.zeros(num_envs), np.zeros(num_envs, int)
        self.last: deque[float] = deque(maxlen=10)  # returns of the last finished games
        self.last_t, self.last_step = time.perf_counter(), step

    def record(self, rewards: np.ndarray, real: np.ndarray, ended: np.ndarray, step: int, eps: Probability,
               diagnostics: Callable[[], dict | None], replay_size: int) -> None:
        """Add one vector step's rewards (``real`` envs only) and log the games that ``ended`` there
        (``diagnostics()`` is asked only then: reading a value from a GPU waits for it)."""
        self.returns += rewards * real
        self.lengths += real
        for i in np.flatnonzero(real & ended):
            self.game(step, float(self.returns[i]), int(self.lengths[i]), eps, diagnostics() or {}, replay_size)
            self.returns[i], self.lengths[i] = 0, 0

    def game(self, step: int, score: float, length: int, eps: Probability, stats: dict, replay_size: int) -> None:
        """Log one finished game: its row of ``log.csv`` (``stats``: the updates' means, empty before the first)."""
        now = time.perf_counter()
        self.last.append(score)
        self.counters["episodes"] += 1
        row = {"step": step, "episode_return": score, "episode_length": length,
               **{k: _blank_if_none(_significant(stats.get(k))) for k in UPDATE_STATS}, "epsilon": round(eps, 4),
               "replay_size": replay_size, "rss_mb": round(rss_bytes() / MiB, 1),
               "steps_per_s": round((step - self.last_step) / max(now - self.last_t, 1e-9), 1)}
        self.log.write(**row)
        if self.scalars is not None:
            self.scalars.write(row)
        self.last_t, self.last_step = now, step


def _blank_if_none(value):
    """A log cell: ``value``, or empty for None."""
    return "" if value is None else value


def _significant(value: float | None, digits: int = 6) -> float | None:
    """``value`` rounded to ``digits`` significant digits (a log row's diagnostics: more is noise), None as None."""
    return None if value is None else float(f"{value:.{digits}g}")


class TensorBoardScalars:
    """The log rows as TensorBoard scalars in ``<out_dir>/tensorboard`` (``--tensorboard true``), one tag per
    column (``train/<column>``, ``eval/<column>``) at its agent step. A resumed run drops the events after the step
    it resumes from (``purge_step``), as ``CsvLog`` drops those rows."""

    def __init__(self, out: Path, resume_step: int | None):
        from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package: loaded only when asked

        self.writer = SummaryWriter(str(out / "tensorboard"), purge_step=resume_step)

    def write(self, row: dict, prefix: str = "train") -> None:
        for name, value in row.items():
            if name != "step" and value != "":
                self.writer.add_scalar(f"{prefix}/{name}", float(value), row["step"])

    def close(self) -> None:
        self.writer.close()


class RunTimer:
    """Wall time of a run, split so benchmarks can compare agent steps/s of acting *and learning*.

    ``learning_steps_per_s`` counts from the end of the first ``learn`` call (whose one-off CUDA graph capture or
    compilation is not the loop's pace) and leaves out checkpoint writes and evaluations.
    ``lap(phase)`` adds the time since the previous lap to ``phase``; from the first update on, the
    phases say where the loop's wall time went (host time: GPU work shows where the host waits for it).
    """

    def __init__(self, step: int):
        self.t0 = self.last_lap = time.perf_counter()
        self.saved_seconds = 0.0
        self.learn_start: tuple[int, float, float] | None = None  # (step, time, seconds saving by then)
        self.phases: dict[str, float] = {}

    def learning_from(self, step: int) -> None:
        """Start the learning clock at ``step`` (the first call counts): from now on, phases and steps/s."""
        if self.learn_start is None:
            self.learn_start = (step, time.perf_counter(), self.saved_seconds)
            self.phases.clear()
            self.last_lap = self.learn_start[1]

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self.last_lap
        self.last_lap = now

    @contextlib.contextmanager
    def saving(self):
        t = time.perf_counter()
        try:
            yield
        finally:
            self.saved_seconds += time.perf_counter() - t

    def summary(self, step: int, first_step: int) -> dict:
        end = time.perf_counter()
        learning = None
        if self.learn_start:
            seconds = end - self.learn_start[1] - (self.saved_seconds - self.learn_start[2])
            learning = (step - self.learn_start[0]) / seconds if seconds > 0 else None
        return {"steps": step, "seconds": end - self.t0, "steps_per_s": (step - first_step) / (end - self.t0),
                "learning_steps_per_s": learning, "checkpoint_seconds": self.saved_seconds,
                "phase_seconds": {k: round(v, 3) for k, v in self.phases.items()}}


# -- evaluations and files -----------------------------------------------------------------------------------------

def play_evaluation(agent: DQNAgent | None, cfg: Config, episodes: Count) -> list[float]:
    """Whole-game returns (unclipped) of the ε-greedy policy with ε = eval_epsilon.

    ``agent=None`` plays uniformly random actions under the very same protocol (games, seeds, step
    cap): the baseline a learning curve is compared with.
    """
    return play_games(agent, episodes, cfg.seed + EVAL_SEED_OFFSET, cfg.eval_epsilon, cfg.eval_max_steps,
                      seed_epsilon=False)


def evaluate_and_log(agent: DQNAgent, cfg: Config, eval_log: CsvLog, step: int,
                     scalars: TensorBoardScalars | None = None) -> list[float]:
    """``cfg.eval_episodes`` evaluation games, their mean and spread written as one row of ``eval.csv`` (and to
    ``scalars``, TensorBoard, when given); returns the games' scores."""
    r = play_evaluation(agent, cfg, cfg.eval_episodes)
    row = {"step": step, "mean_return": float(np.mean(r)), "std_return": float(np.std(r)), "episodes": len(r)}
    eval_log.write(**row)
    if scalars is not None:
        scalars.write(row, "eval")
    return r


def save_checkpoint(path: Path, agent: DQNAgent, cfg: Config, step: int, returns: list[float] | None = None) -> None:
    """The policy alone, for playing: the online network's weights, the config, the step and, when it was just
    evaluated, that evaluation (``{"games", "mean", "std"}``; None otherwise).

    The target network and Adam's state belong to resuming, which ``state-<step>.ckpt`` covers. Written
    to a temporary file, then renamed (``checkpoint.replacing``), so it is never half written and a failed write
    leaves the previous file. ``dqn_course.evaluate`` and
    ``dqn_course.lab.playback.load_agent`` read it.
    """
    evaluation = None if returns is None else {"games": len(returns), "mean": float(np.mean(returns)),
                                               "std": float(np.std(returns))}
    with replacing(path) as tmp:
        torch.save({"q": agent.q.state_dict(), "config": dataclasses.asdict(cfg), "step": step,
                    "evaluation": evaluation}, tmp)


# Fields the saved state depends on (the replay's shape and kind, PER's α, the optimiser's saved lr): a resume
# must keep them. The rest (total_steps, eval and checkpoint intervals, watchdog limits...) may change.
RESUME_FIXED = ("buffer_size", "num_envs", "env_backend", "per", "per_alpha", "replay_storage", "lr")


def save_training_state(out: Path, agent: TrainingParts, memory: MemoryLike, cfg: Config, counters: dict) -> Path:
    """The whole training state as ``state-<step>.ckpt`` (see ``dqn_course.checkpoint``); keeps the newest few."""
    arrays, meta = training_state(agent, memory, counters, dataclasses.asdict(cfg))
    path = checkpoint_path(out, counters["step"])
    write_checkpoint(path, arrays, meta)
    prune_checkpoints(out, cfg.keep_checkpoints, counters["step"])
    return path


def load_resume(cfg: Config) -> tuple[dict[str, np.ndarray], dict, Path] | tuple[None, None, None]:
    """The checkpoint ``cfg.resume`` names (file or folder), checked against ``cfg``; (None, None, None) if none."""
    if not cfg.resume:
        return None, None, None
    arrays, meta, path = latest_checkpoint(cfg.resume)
    saved = meta["config"]
    changed = [f"{k}: saved {saved[k]!r}, now {getattr(cfg, k)!r}" for k in RESUME_FIXED if saved[k] != getattr(cfg, k)]
    if changed:
        raise CheckpointError(f"cannot resume from {path} with a different " + "; ".join(changed))
    return arrays, meta, path


def disk_full(cause: OSError, out: Path, memory: MemoryLike) -> DiskFullError:
    """What a run that filled its disk kept (its newest training state) and what its next save needs (the size of
    that state, or the replay memory's bytes when there is none yet)."""
    states = list_checkpoints(out)
    kept = states[-1] if states else None
    needed = kept.stat().st_size if kept is not None else memory.nbytes
    return DiskFullError(cause, kept, checkpoint_step(kept) if kept is not None else None, needed,
                         shutil.disk_usage(out).free)


class RunRecords:
    """One run's logs, timer, progress bar and files, opened at agent step ``step`` and closed on leaving the
    ``with`` block, whatever ends it: ``with RunRecords(cfg, step, resumed, counters, memory) as records``.

    ``resumed``: the step a resumed run carries on from (the logs' later rows are dropped), None for a new run.
    ``counters``: the run's step, update and game counters, saved with each training state. ``closing``: more to
    close with the logs (the envs). A write that fills the disk (ENOSPC, EDQUOT) inside the block is raised as
    ``DiskFullError`` (``disk_full``: what was kept, what the next save needs); after a failed write, what can still
    be closed is closed without hiding that error. Raises ``OSError`` when the folder or logs cannot be opened.
    """

    def __init__(self, cfg: Config, step: int, resumed: int | None, counters: dict, memory: MemoryLike,
                 closing: Sequence = ()):
        self.cfg, self.out, self.memory, self.counters = cfg, Path(cfg.out_dir), memory, counters
        self.out.mkdir(parents=True, exist_ok=True)  # only now: a run refused while building leaves no folder
        self.scalars = TensorBoardScalars(self.out, resumed) if cfg.tensorboard else None
        self.games = GameLog(CsvLog(self.out / "log.csv", LOG_FIELDS, resumed), cfg.num_envs, step, counters,
                             self.scalars)
        self.evals = CsvLog(self.out / "eval.csv", EVAL_FIELDS, resumed)
        self.timer = RunTimer(step)
        self.bar = tqdm(initial=step, total=cfg.total_steps, disable=not cfg.progress, mininterval=1.0, desc="train")
        self._closing = [self.bar, self.games.log, self.evals, *closing, *([self.scalars] if self.scalars else [])]

    def evaluate(self, agent: DQNAgent, step: int) -> list[float]:
        """An evaluation at ``step`` (``evaluate_and_log``), and the policy it measured as ``checkpoint.pt``: the
        policy file on disk is always one that was measured. Its time is left out of the learning rate."""
        with self.timer.saving():
            returns = evaluate_and_log(agent, self.cfg, self.evals, step, self.scalars)
            save_checkpoint(self.out / "checkpoint.pt", agent, self.cfg, step, returns)
        return returns

    def save_state(self, agent: DQNAgent, step: int) -> Path:
        """The whole training state at ``step`` (``save_training_state``), its time left out of the learning rate."""
        self.counters["step"] = step
        with self.timer.saving():
            return save_training_state(self.out, agent, self.memory, self.cfg, self.counters)

    def __enter__(self) -> RunRecords:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        for thing in self._closing:
            with contextlib.suppress(*(() if kind is None else (OSError,))):
                thing.close()
        if isinstance(error, OSError) and is_disk_full(error):
            raise disk_full(error, self.out, self.memory) from None


check_module(globals())
