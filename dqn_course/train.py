"""Train DQN on Breakout: the whole loop on one screen, hyperparameters in one dataclass.

    python -m dqn_course.train --preset quick          # ~30 s on a laptop CPU: does it run?
    python -m dqn_course.train --preset breakout       # Nature/CleanRL settings, 10M steps: use a GPU
    python -m dqn_course.train --preset breakout-fast  # same learning problem: 8 C++ envs, replay on the GPU

Any field of ``Config`` can be overridden: ``--total-steps 200000 --double true``.
Writes ``log.csv`` (one row per finished game), ``eval.csv``, ``checkpoint.pt`` (the agent alone, for playing:
always the policy of the last evaluation, so the file on disk is a measured policy) and ``state-<step>.ckpt`` (the
whole training state: for resuming) into ``out_dir``. A run evaluates every ``eval_every`` steps, at its last step
and at its deadline; a stop between evaluations (a signal, the watchdog) saves the training state only.

    python -m dqn_course.train --preset quick --resume runs/quick        # carry on after a crash or kill -9
    python -m dqn_course.train --preset quick --max-rss-gb 4             # checkpoint and stop before 4 GB
    python -m dqn_course.train --preset quick --replay-storage lz4       # compressed replay frames
    python -m dqn_course.train --preset breakout-cpu --time-limit 60     # an hour now, --resume later
    python -m dqn_course.train --preset breakout-fast --dry-run         # what it would allocate where, then exit

A run stops cleanly (evaluation at a deadline, the whole state saved at the current step, logs closed,
the ``--resume`` command printed, exit status 0) at ``--time-limit`` minutes, on SIGINT (Ctrl-C) or
SIGTERM (``timeout``, a scheduler's preemption), and when the memory watchdog trips. A second signal
stops at once.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import importlib.util
import shlex
import shutil
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from dqn_course import ConfigError, check_fields, check_ranges, parse_bool, require
from dqn_course.agent import UPDATE_STATS, DQNAgent, td_loss, td_targets
from dqn_course.checkpoint import (
    CheckpointError,
    checkpoint_path,
    checkpoint_step,
    latest_checkpoint,
    list_checkpoints,
    prune_checkpoints,
    replacing,
    restore_training_state,
    training_state,
    write_checkpoint,
)
from dqn_course.device import FIT_FRACTION, check_device, check_fits_on_device, free_memory, pick_device
from dqn_course.envs import make_vector_envs
from dqn_course.evaluate import EVAL_SEED_OFFSET, play_games
from dqn_course.learner import DeviceLearner, EagerLearner
from dqn_course.networks import NatureCNN
from dqn_course.profiling import InsufficientMemoryError, MiB, available_bytes, check_fits, format_bytes, rss_bytes
from dqn_course.replay import MultiStreamMemory
from dqn_course.replay.stores import CODECS, STORAGES, InsufficientDiskError, check_disk_space, planned_host_bytes
from dqn_course.stopping import DiskFullError, StopRequests, is_disk_full
from dqn_course.watchdog import MemoryWatchdog

FRAME_SHAPE = (84, 84)  # one preprocessed screen: what the replay memory stores per agent step
N_ACTIONS = 4  # Breakout's action set: the size of the networks' last layer
SLOT_BYTES = 16  # replay bookkeeping per frame slot: action (uint8), reward (float32), done, first, valid, id (int64)


@dataclass
class Config:
    """Defaults are the ``breakout`` preset: the Nature DQN / CleanRL ``dqn_atari`` settings."""

    total_steps: int = 10_000_000  # agent steps (x4 frames)
    buffer_size: int = 1_000_000  # frames in the frame-sharing replay memory
    lr: float = 1e-4
    gamma: float = 0.99
    batch_size: int = 32
    target_sync_every: int = 1_000
    eps_start: float = 1.0
    eps_end: float = 0.01
    eps_fraction: float = 0.10  # ε decays linearly over this fraction of total_steps
    learning_starts: int = 80_000
    train_every: int = 4
    double: bool = False
    max_grad_norm: float = 10.0
    eval_every: int = 250_000
    eval_episodes: int = 10
    eval_epsilon: float = 0.05
    eval_max_steps: int = 27_000  # agent steps per evaluation game (the ALE's 108k-frame limit)
    checkpoint_every: int = 100_000  # agent steps between checkpoints (agent export + full training state)
    keep_checkpoints: int = 2  # full training states kept (0 = all); older ones go once a newer one is written
    resume: str = ""  # a state-*.ckpt file, or a run folder to resume from its newest good checkpoint
    time_limit: float = 0.0  # minutes of wall time; then evaluate, save the whole state and stop (0 = none)
    max_rss_gb: float = 0.0  # memory watchdog: checkpoint and stop when this process's RSS reaches it (0 = off)
    min_available_gb: float = 0.0  # ... or when the machine's available RAM falls to it (0 = off)
    replay_storage: str = "ram"  # replay frames: "ram", "lz4" / "zstd" (compressed in RAM) or "disk" (memmap)
    replay_path: str = ""  # folder for replay_storage="disk" ("" = <out_dir>/replay); the run owns its frames-*.u8
    seed: int = 1
    device: str = ""  # "" picks CUDA when available
    num_envs: int = 1  # agent steps are counted across all envs; updates stay one per train_every of them
    env_backend: str = "gymnasium"  # "gymnasium" (envs stepped in Python) or "ale" (AtariVectorEnv, C++ threads)
    replay_on_device: bool = False  # keep replay frames on the training device (1M frames = 7 GB of GPU memory)
    cuda_graph: bool = True  # frames on a GPU: capture each update as one CUDA graph (false: plain eager updates)
    compile_update: bool = False  # frames on the device: the update through torch.compile (then captured as it is)
    per: bool = False  # prioritized replay (proportional, Schaul et al. 2016)
    per_alpha: float = 0.6
    per_beta0: float = 0.4  # importance-sampling exponent, annealed to 1 over the run
    out_dir: str = "runs/breakout"
    prefault: bool = True  # touch the replay memory's pages at start: fail now, not in hour 5
    progress: bool = True
    tensorboard: bool = False  # also write log.csv's and eval.csv's scalars to <out_dir>/tensorboard (needs the
    # tensorboard extra: pip install "dqn-course[tensorboard]"); log.csv stays the record the notebooks read

    def validate(self) -> None:
        """Refuse settings that cannot work, before anything is built; raises ``ConfigError`` saying what to change.

        Every field is checked against its annotation (``dqn_course.check_fields``, shared with ``DistConfig``:
        ``double="false"`` or ``lr="fast"`` are refused by name), then ranges and the rules between fields.
        numpy numbers and paths are stored back as plain ints, floats and strings. Also refuses
        (``InsufficientMemoryError`` / ``InsufficientDiskError``) a replay memory that does not fit in this
        machine's RAM, in its GPU's free memory (``replay_on_device``) or on its disk, and a ``device`` that
        torch cannot use.
        """
        _check_settings(self)
        check_device(self.device)
        _check_machine(self, plan_allocation(self))


PRESETS: dict[str, Config] = {
    "breakout": Config(),
    "breakout-fast": Config(num_envs=8, env_backend="ale", replay_on_device=True, out_dir="runs/breakout-fast"),
    # A laptop CPU (2 cores, one update of batch 32 takes ~50-70 ms there): the same learning problem, shrunk
    # to fit hours instead of days. Each change from the Nature settings, and why:
    # - total_steps 500k (not 10M): at tens of agent steps/s, 10M steps would take days; the
    #   schedules below are sized so learning shows within the first few hundred thousand steps.
    # - buffer_size 100k frames (not 1M): 500k steps would fill 1M only half; 100k is 0.7 GB and the
    #   oldest data it drops is from the exploration phase.
    # - learning_starts 20k (not 80k) and ε over the first 100k steps (eps_fraction 0.2; Nature: 1M):
    #   every hour of a CPU run spent acting at random is an hour not learning.
    # - eval every 50k steps (not 250k), 10 games as in Nature: a curve with ten points; checkpoints
    #   every 25k steps, so a stopped laptop loses minutes, not an hour.
    # Unchanged: DQN with a target network synced every 1,000 steps, Huber loss, Adam 1e-4, batch 32,
    # one update per 4 agent steps, γ 0.99, gradient norm 10, lost life = terminal for learning.
    "breakout-cpu": Config(total_steps=500_000, buffer_size=100_000, learning_starts=20_000, eps_fraction=0.2,
                           eval_every=50_000, checkpoint_every=25_000, out_dir="runs/breakout-cpu"),
    "quick": Config(total_steps=3_000, buffer_size=10_000, learning_starts=500, target_sync_every=250,
                    eps_fraction=0.5, eval_every=1_500, eval_episodes=2, eval_max_steps=300, checkpoint_every=1_000,
                    out_dir="runs/quick"),
}


ENV_BACKENDS = ("gymnasium", "ale")
_POSITIVE = ("total_steps", "buffer_size", "batch_size", "target_sync_every", "train_every", "eval_every",
             "eval_episodes", "eval_max_steps", "checkpoint_every", "num_envs", "lr", "max_grad_norm")
_NON_NEGATIVE = ("learning_starts", "keep_checkpoints", "time_limit", "max_rss_gb", "min_available_gb", "per_alpha",
                 "seed")
_FRACTIONS = ("gamma", "eps_start", "eps_end", "eval_epsilon", "per_beta0")  # each in [0, 1]


def _writable_folder(path: Path, what: str) -> None:
    """``path`` is a writable folder, or can be made in one: a probe file is created (and removed) in the
    nearest folder that exists, so permissions, read-only mounts and pseudo-filesystems all count."""
    existing = next(p for p in (path, *path.parents) if p.exists())
    try:
        if not existing.is_dir():
            raise NotADirectoryError(f"{existing} is a file")
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        raise ConfigError(f"{what} {path} cannot be written ({e}): choose another folder") from None


def _check_settings(cfg: Config) -> None:
    """``Config.validate``'s checks of the settings alone (``ConfigError``), cheapest first: every field against its
    annotation (``dqn_course.check_fields``, shared with ``DistConfig``), then ranges, then the rules between fields.
    """
    check_fields(cfg)
    check_ranges(cfg, positive=_POSITIVE, non_negative=_NON_NEGATIVE, fractions=_FRACTIONS)
    require(0 < cfg.eps_fraction <= 1, f"--eps-fraction (of total steps over which ε decays) must be in (0, 1], "
                                       f"got {cfg.eps_fraction!r}")
    if cfg.replay_storage not in STORAGES:
        raise ConfigError(f"--replay-storage must be one of {', '.join(STORAGES)}, got {cfg.replay_storage!r}")
    if cfg.env_backend not in ENV_BACKENDS:
        raise ConfigError(f"--env-backend must be one of {', '.join(ENV_BACKENDS)}, got {cfg.env_backend!r}")
    if cfg.replay_on_device and cfg.replay_storage != "ram":
        raise ConfigError(f"--replay-on-device keeps frames as a tensor on the device; it works with "
                          f"--replay-storage ram only, got {cfg.replay_storage!r}")
    per_stream = cfg.buffer_size // cfg.num_envs
    if per_stream < 5:
        raise ConfigError(f"--buffer-size {cfg.buffer_size} over {cfg.num_envs} envs leaves {per_stream} frames per "
                          f"env; each env's ring needs at least 5 (a 4-frame stack and the next frame)")
    if cfg.learning_starts < cfg.batch_size:
        raise ConfigError(f"--learning-starts {cfg.learning_starts} is too early for --batch-size {cfg.batch_size}: "
                          f"the first update samples {cfg.batch_size} stored transitions; use --learning-starts "
                          f"{cfg.batch_size} or more (the Nature setting is 50,000)")
    require(cfg.learning_starts < cfg.total_steps,
            f"--learning-starts {cfg.learning_starts} is not below --total-steps {cfg.total_steps}: the run would "
            f"end before its first update; lower --learning-starts or raise --total-steps")
    if cfg.tensorboard and importlib.util.find_spec("tensorboard") is None:
        raise ConfigError('--tensorboard true needs the tensorboard package: pip install "dqn-course[tensorboard]" '
                          "(or pip install tensorboard), or --tensorboard false (log.csv has the same numbers)")
    require(not (cfg.per and cfg.replay_on_device),
            "--per true needs --replay-on-device false: prioritized replay samples on the host (its sum tree and "
            "importance weights), and the device learner samples on the device; drop one of the two")


def _check_machine(cfg: Config, plan: AllocationPlan) -> None:
    """``Config.validate``'s checks against this machine (its device checked before): the folders can be written,
    and the replay (``plan``) fits in RAM, in the GPU's free memory and on the disk. Raises ``ConfigError``,
    ``InsufficientMemoryError`` or ``InsufficientDiskError``."""
    out = Path(cfg.out_dir)
    _writable_folder(out, "--out-dir")
    if REPLAY_FRAMES in plan.device_memory:
        _check_device_replay_fits(cfg, plan)
        check_fits(plan.host[STAGING] + plan.host[BOOKKEEPING],
                   f"a checkpoint of the replay on {plan.device} ({plan.frames:,} frames copied to host RAM to be "
                   f"written, --buffer-size {cfg.buffer_size:,})")
    else:
        check_fits(plan.host[REPLAY_FRAMES] + plan.host[BOOKKEEPING],
                   f"the replay memory (--buffer-size {cfg.buffer_size:,}, --replay-storage {cfg.replay_storage})")
    if cfg.replay_storage == "disk":
        folder = Path(cfg.replay_path or out / "replay")
        _writable_folder(folder, "--replay-path")
        check_disk_space(plan.disk[REPLAY_FILE], _existing(folder),
                         f"the replay memory (--buffer-size {cfg.buffer_size:,}, --replay-storage disk)")


def _existing(folder: Path) -> Path:
    """The nearest folder of ``folder``'s path that exists: the disk it will be on."""
    return next(p for p in (folder, *folder.parents) if p.exists())


def _check_device_replay_fits(cfg: Config, plan: AllocationPlan) -> None:
    """Refuse a replay bank on a CUDA device that cannot hold it with the networks, before anything is built:
    ``InsufficientMemoryError`` naming the bank's size, the device's free memory and the two fixes (the largest
    ``--buffer-size`` that fits, ``--replay-on-device false``)."""
    free = free_memory(plan.device)
    if free is None:
        return
    bank, networks = plan.device_memory[REPLAY_FRAMES], plan.device_memory[NETWORKS]
    frame_bytes = int(np.prod(FRAME_SHAPE))
    fits = max(0, int(FIT_FRACTION * free - networks)) // frame_bytes // cfg.num_envs * cfg.num_envs
    check_fits_on_device(
        bank + networks, plan.device,
        f"the replay bank on the GPU (--buffer-size {cfg.buffer_size:,} frames: {format_bytes(bank)}) with the "
        f"networks ({format_bytes(networks)})",
        f"Fixes: --buffer-size {fits:,} or less (what fits in the free memory), or --replay-on-device false (the "
        f"frames stay in host RAM and each update copies its batch to the GPU).")


# -- what a run allocates where ------------------------------------------------------------------------------------

REPLAY_FRAMES = "replay frames"
BOOKKEEPING = f"replay bookkeeping ({SLOT_BYTES} B per frame slot)"
NETWORKS = "networks (online, target, gradients, Adam's 2 moments)"
STAGING = "checkpoint writes: the device's frames copied to host RAM"
REPLAY_FILE = "replay frames file"
STATES = "state checkpoints (state-*.ckpt)"
POLICY = "policy checkpoint (checkpoint.pt)"


@dataclass(frozen=True)
class AllocationPlan:
    """What a run preallocates, in bytes, by where and what (``plan_allocation``)."""

    device: torch.device  # the training device
    frames: int  # replay frame slots: buffer_size rounded down to a multiple of num_envs
    host: dict[str, int]  # host RAM
    device_memory: dict[str, int]  # memory on ``device`` (empty when that is the CPU: it is host RAM then)
    disk: dict[str, int]  # the most the run's files take at once
    state_files: int  # state checkpoints on disk at once, at most (while a new one is written)

    def total(self, where: str) -> int:
        """Bytes in ``where``: "host", "device_memory" or "disk"."""
        return sum(getattr(self, where).values())


def network_parameters(in_channels: int = 4) -> int:
    """Parameters of the Q-network (``NatureCNN`` for Breakout), counted on the meta device: nothing allocated."""
    with torch.device("meta"):
        return sum(p.numel() for p in NatureCNN(N_ACTIONS, in_channels).parameters())


def plan_allocation(cfg: Config, device: torch.device | None = None) -> AllocationPlan:
    """What the run ``cfg`` describes would preallocate, where, by arithmetic: nothing is built or measured.

    Host RAM: the replay's frames (``replay.stores.planned_host_bytes``: a numpy array, a compressed store's list
    slots, nothing for a disk or GPU store) and its per-slot bookkeeping; for frames on a GPU, the copy of them a
    checkpoint write makes in host RAM. GPU memory (``device`` not the CPU): the replay bank when
    ``replay_on_device``, and the networks (on the CPU those are host RAM). Disk: the replay file
    (``replay_storage="disk"``) and the checkpoints, ``keep_checkpoints`` state files (plus the one being written;
    0 = one per ``checkpoint_every``) each the size of the replay's frames, bookkeeping and the networks (a
    compressed store's are smaller: its frames are written compressed). Not counted: the process itself (Python,
    torch, the envs), CUDA's context and the learner's work buffers. ``device``: the training device
    (default: the one ``cfg.device`` picks here).
    """
    device = pick_device(cfg.device or None) if device is None else torch.device(device)
    frames = cfg.buffer_size // cfg.num_envs * cfg.num_envs
    frame_bytes = int(np.prod(FRAME_SHAPE))
    params = network_parameters()
    networks = 5 * 4 * params  # float32: online weights, target weights, gradients, Adam's exp_avg and exp_avg_sq
    on_gpu = device.type != "cpu"
    host = {REPLAY_FRAMES: planned_host_bytes(cfg.replay_storage, frames, FRAME_SHAPE,
                                              device if cfg.replay_on_device else None),
            BOOKKEEPING: SLOT_BYTES * frames}
    device_memory: dict[str, int] = {}
    if cfg.replay_on_device and on_gpu:
        device_memory[REPLAY_FRAMES] = frames * frame_bytes
        host[STAGING] = frames * frame_bytes
    (device_memory if on_gpu else host)[NETWORKS] = networks
    saved = cfg.total_steps // cfg.checkpoint_every + int(cfg.total_steps % cfg.checkpoint_every != 0)
    state_files = saved if cfg.keep_checkpoints == 0 else min(cfg.keep_checkpoints + 1, saved)
    state_bytes = frames * (frame_bytes + SLOT_BYTES) + 4 * 4 * params  # + online, target, Adam's 2 moments
    disk = {STATES: state_files * state_bytes, POLICY: 4 * params}
    if cfg.replay_storage == "disk":
        disk[REPLAY_FILE] = frames * frame_bytes
    return AllocationPlan(device, frames, host, device_memory, disk, state_files)


def dry_run(cfg: Config, preset: str) -> str:
    """What ``--dry-run`` prints: the run's ``plan_allocation`` and whether this machine would take it.

    The settings are checked as a run checks them (``ConfigError``); the machine's refusals (RAM, GPU memory,
    disk, a device it lacks) are reported, not raised: the plan is worth reading on a machine that cannot run it.
    A device this machine lacks (``--device cuda`` on a laptop) is planned for all the same.
    """
    _check_settings(cfg)
    try:
        device = pick_device(cfg.device or None)
    except RuntimeError as e:
        raise ConfigError(f"--device {cfg.device}: not a torch device ({e}); use cpu, cuda, cuda:N or mps") from None
    plan = plan_allocation(cfg, device)
    out = Path(cfg.out_dir)
    visible = device.type == "cuda" and torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count()
    free = free_memory(device) if visible else None
    sections = [("host RAM", "host", f"{format_bytes(available_bytes())} available here"),
                (f"{device} memory", "device_memory", None if free is None else f"{format_bytes(free)} free here"),
                (f"disk ({out})", "disk", f"{format_bytes(shutil.disk_usage(_existing(out)).free)} free here")]
    lines = [f"dry run: --preset {preset} on {device}, {plan.frames:,} replay frames ({cfg.replay_storage}"
             f"{f', on {device}' if cfg.replay_on_device else ''}); nothing allocated, no envs built"]
    for title, where, have in sections:
        items = getattr(plan, where)
        if not items:
            continue
        lines.append(f"{title + ':':<62}{format_bytes(plan.total(where)):>12}" + (f"   ({have})" if have else ""))
        for what, n in items.items():
            if not n:
                continue
            shown = f"{what}, {plan.state_files} at once" if what == STATES else what
            lines.append(f"  {shown:<60}{format_bytes(n):>12}")
    if cfg.replay_storage in CODECS:
        lines.append(f"+ the {cfg.replay_storage} frames, in host RAM as they arrive (not preallocated; less than "
                     f"{format_bytes(plan.frames * int(np.prod(FRAME_SHAPE)))} uncompressed), and in the state "
                     f"checkpoints (smaller than planned above)")
    lines.append("not counted: the process itself (Python, torch, the envs), CUDA's context and work buffers")
    try:
        check_device(cfg.device)
        _check_machine(cfg, plan)
        lines.append("this machine: the run passes its RAM, GPU memory and disk checks")
    except (ConfigError, InsufficientMemoryError, InsufficientDiskError) as e:
        lines.append(f"this machine would refuse the run: {e}")
    return "\n".join(lines)


def linear_epsilon(step: int, start: float, end: float, decay_steps: int) -> float:
    """ε of ε-greedy at agent step ``step``: ``start`` at step 0, falling linearly to ``end`` at ``decay_steps``,
    then ``end`` for the rest of the run. A learner's own schedule takes the same arguments (``train(cfg,
    epsilon=...)``)."""
    return end + (start - end) * max(0.0, 1.0 - step / decay_steps)


def epsilon_at(step: int, cfg: Config, schedule: Callable[[int, float, float, int], float] = linear_epsilon
               ) -> float:
    """ε at ``step`` of the run ``cfg``: ``schedule`` from eps_start to eps_end over eps_fraction of the run."""
    return schedule(step, cfg.eps_start, cfg.eps_end, max(1, int(cfg.eps_fraction * cfg.total_steps)))


def evaluate(agent: DQNAgent | None, cfg: Config, episodes: int) -> list[float]:
    """Whole-game returns (unclipped) of the ε-greedy policy with ε = eval_epsilon.

    ``agent=None`` plays uniformly random actions under the very same protocol (games, seeds, step
    cap): the baseline a learning curve is compared with.
    """
    return play_games(agent, episodes, cfg.seed + EVAL_SEED_OFFSET, cfg.eval_epsilon, cfg.eval_max_steps,
                      seed_epsilon=False)


def evaluate_and_log(agent: DQNAgent, cfg: Config, eval_log: CsvLog, step: int, scalars=None) -> list[float]:
    """``cfg.eval_episodes`` evaluation games, their mean and spread written as one row of ``eval.csv`` (and to
    ``scalars``, TensorBoard, when given); returns the games' scores."""
    r = evaluate(agent, cfg, cfg.eval_episodes)
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


def save_training_state(out: Path, agent: DQNAgent, memory, cfg: Config, counters: dict) -> Path:
    """The whole training state as ``state-<step>.ckpt`` (see ``dqn_course.checkpoint``); keeps the newest few."""
    arrays, meta = training_state(agent, memory, counters, dataclasses.asdict(cfg))
    path = checkpoint_path(out, counters["step"])
    write_checkpoint(path, arrays, meta)
    prune_checkpoints(out, cfg.keep_checkpoints, counters["step"])
    return path


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


def crossed(before: int, now: int, every: int) -> bool:
    """Did the step counter pass a multiple of ``every`` (it moves by num_envs at a time)?"""
    return now // every > before // every


def replay_storage_args(cfg: Config) -> dict:
    """Where the replay frames live: ``storage`` for the memory, and a folder when that is the disk."""
    if cfg.replay_storage == "ram":
        return {}
    if cfg.replay_storage == "disk":
        folder = Path(cfg.replay_path or Path(cfg.out_dir) / "replay")
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("frames-*.u8"):  # left by a killed run of this folder (no finalizer ran)
            stale.unlink()
        return {"storage": "disk", "path": str(folder)}
    return {"storage": cfg.replay_storage}


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


def _blank_if_none(value):
    return "" if value is None else value


def _significant(value: float | None, digits: int = 6) -> float | None:
    """``value`` rounded to ``digits`` significant digits (a log row's diagnostics: more is noise), None as None."""
    return None if value is None else float(f"{value:.{digits}g}")


# One row per finished game; rss_mb is the process's resident set size in MiB (2^20 bytes), the unit every recorded
# log.csv under data/ has.
LOG_FIELDS = ["step", "episode_return", "episode_length", *UPDATE_STATS, "epsilon", "replay_size", "rss_mb",
              "steps_per_s"]


class GameLog:
    """The games in progress in each env; one ``log.csv`` row per finished game (``LOG_FIELDS``): its score and
    length, the updates' diagnostics since the last row (mean loss, mean max-Q of the sampled states, mean gradient
    norm before clipping; blank before the first update), ε, the transitions in the replay, RSS and the agent
    steps/s since the last row. ``scalars``: also written there (TensorBoard), per step."""

    def __init__(self, log: CsvLog, num_envs: int, step: int, counters: dict, scalars=None):
        self.log, self.counters, self.scalars = log, counters, scalars
        self.returns, self.lengths = np.zeros(num_envs), np.zeros(num_envs, int)
        self.last: deque[float] = deque(maxlen=10)  # returns of the last finished games
        self.last_t, self.last_step = time.perf_counter(), step

    def record(self, rewards, real, ended, step: int, eps: float, diagnostics, replay_size: int) -> None:
        """Add one vector step's rewards (``real`` envs only) and log the games that ``ended`` there
        (``diagnostics()`` is asked only then: reading a value from a GPU waits for it)."""
        self.returns += rewards * real
        self.lengths += real
        for i in np.flatnonzero(real & ended):
            self.game(step, float(self.returns[i]), int(self.lengths[i]), eps, diagnostics() or {}, replay_size)
            self.returns[i], self.lengths[i] = 0, 0

    def game(self, step: int, score: float, length: int, eps: float, stats: dict, replay_size: int) -> None:
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


def updates_due(cfg: Config, step: int) -> int:
    """Updates due by ``step``: one per ``train_every`` agent steps since ``learning_starts``.

    Steps are summed over the envs: with one env, exactly "update when step % train_every == 0"; with
    n envs, n / train_every updates per vector step.
    """
    return step // cfg.train_every - (cfg.learning_starts - 1) // cfg.train_every


def build(cfg: Config, device: torch.device, targets: Callable = td_targets, loss: Callable = td_loss):
    """The vector envs, the replay memory (prioritized if ``cfg.per``), the agent (learning by ``targets`` and
    ``loss``) and its learner ``cfg`` describes.

    Frames on the device (``replay_on_device``) get the ``DeviceLearner`` (one CUDA graph per update on a GPU);
    otherwise updates are ``agent.update`` calls on sampled batches.
    """
    envs = make_vector_envs(cfg.num_envs, seed=cfg.seed, backend=cfg.env_backend)
    memory = MultiStreamMemory(cfg.buffer_size, cfg.num_envs, envs.single_observation_space.shape, seed=cfg.seed,
                               prefault=cfg.prefault, device=device if cfg.replay_on_device else None,
                               **replay_storage_args(cfg))
    agent = DQNAgent(int(envs.single_action_space.n), device, lr=cfg.lr, gamma=cfg.gamma, double=cfg.double,
                     max_grad_norm=cfg.max_grad_norm, seed=cfg.seed, targets=targets, loss=loss)
    if cfg.per:
        from dqn_course.per import PrioritizedMemory, beta_at  # numba: loaded only by runs that use it

        memory = PrioritizedMemory(memory, alpha=cfg.per_alpha, seed=cfg.seed)
        learner = EagerLearner(agent, memory, cfg.batch_size, lambda step: beta_at(step, cfg.total_steps,
                                                                                   cfg.per_beta0))
    elif cfg.replay_on_device:
        learner = DeviceLearner(agent, memory, cfg.batch_size, graph=None if cfg.cuda_graph else False,
                                compile=cfg.compile_update)
    else:
        learner = EagerLearner(agent, memory, cfg.batch_size)
    return envs, memory, agent, learner


def train(cfg: Config, *, targets: Callable = td_targets, loss: Callable = td_loss,
          epsilon: Callable[[int, float, float, int], float] = linear_epsilon) -> dict:
    """Run DQN with ``cfg``; returns a summary (steps/s, last returns, replay size, files written, why it stopped,
    how the updates ran: ``updates_ran``, and ``graph_fallback``, why a CUDA graph was given up, or None).

    ``targets``, ``loss`` and ``epsilon`` are the learning rule and the exploration schedule, with the arguments
    of ``agent.td_targets``, ``agent.td_loss`` and ``linear_epsilon``: a learner's own functions train the agent
    in their place (a custom ``loss`` cannot take prioritized replay's weights: refused with ``cfg.per``).
    Raises ``ConfigError``, ``InsufficientMemoryError``, ``InsufficientDiskError`` or ``CheckpointError``
    before anything is written when the settings, the machine or the checkpoint to resume cannot work.
    """
    # -- set up: check, build, resume -------------------------------------------------------------------
    cfg.validate()
    for name, fn in (("targets", targets), ("loss", loss), ("epsilon", epsilon)):
        require(callable(fn), f"train(cfg, {name}=...) takes a function, got {fn!r}")
    require(not (cfg.per and loss is not td_loss),
            "--per true weights each transition's Huber loss by its importance weight; a loss function given to "
            "train() cannot take those weights: use the default loss with PER, or --per false")
    resume_arrays, resume_meta, resume_path = load_resume(cfg)  # before allocating: a bad file fails fast
    out, device, n = Path(cfg.out_dir), pick_device(cfg.device or None), cfg.num_envs
    np.random.seed(cfg.seed)
    envs, memory, agent, learner = build(cfg, device, targets, loss)
    counters = {"step": 0, "updates": 0, "episodes": 0}
    if resume_arrays is not None:
        counters = restore_training_state(resume_arrays, resume_meta, agent, memory)
        del resume_arrays
        memory.end_episode()  # the envs restart below: the next transition begins a new episode
        print(f"resumed from {resume_path} at step {counters['step']:,}")
    step = first_step = counters["step"]
    resume_step = step if resume_path else None
    out.mkdir(parents=True, exist_ok=True)  # only now: a run refused while building leaves no folder
    scalars = TensorBoardScalars(out, resume_step) if cfg.tensorboard else None
    games = GameLog(CsvLog(out / "log.csv", LOG_FIELDS, resume_step), n, step, counters, scalars)
    eval_log = CsvLog(out / "eval.csv", ["step", "mean_return", "std_return", "episodes"], resume_step)
    watchdog = MemoryWatchdog(int(cfg.max_rss_gb * 1e9), int(cfg.min_available_gb * 1e9))
    timer = RunTimer(step)
    stopped = None
    obs, info = envs.reset(seed=cfg.seed + step)  # a resumed run starts new games, not the same ones again
    lives = info["lives"].copy()
    resetting = np.zeros(n, bool)  # next-step autoreset: this step only resets these envs
    bar = tqdm(initial=step, total=cfg.total_steps, disable=not cfg.progress, mininterval=1.0, desc="train")

    finished = False
    try:
        with StopRequests(cfg.time_limit * 60) as stop:
            while step < cfg.total_steps:
                # -- act in every env; learn while they step -------------------------------------------------
                before, step = step, step + n
                eps = epsilon_at(step, cfg, epsilon)
                timer.lap("other")
                actions = agent.act(obs, eps)
                envs.send(actions)  # ale-py's C++ threads step the envs during the updates below
                timer.lap("act")
                # The updates due by this step, from what is stored so far. The step after a finished game stores
                # nothing, so the memory can hold a little less than learning_starts: wait for a batch.
                if step >= cfg.learning_starts and len(memory) >= cfg.batch_size:
                    due = updates_due(cfg, step)
                    learner.learn(due - counters["updates"], step)
                    counters["updates"] = max(counters["updates"], due)
                    timer.learning_from(step)  # the clock starts after the first learn: its one-off capture left out
                timer.lap("learn")

                # -- store what happened ------------------------------------------------------------------------
                next_obs, rewards, terminated, truncated, info = envs.recv()
                timer.lap("envs")  # what the envs took beyond the acting and learning they overlapped
                life_lost, real = info["lives"] < lives, ~resetting
                # Learn from clipped rewards; a lost life is terminal for the target but not for the game.
                memory.add_batch(obs, actions, np.sign(rewards), next_obs, dones=terminated | life_lost,
                                 episode_ends=terminated | truncated, mask=real)
                games.record(rewards, real, terminated | truncated, step, eps, learner.diagnostics, len(memory))
                resetting = terminated | truncated
                obs, lives = next_obs, info["lives"].copy()
                timer.lap("store")

                # -- the target network; evaluations, each keeping the policy it measured ----------------------
                if crossed(before, step, cfg.target_sync_every):
                    agent.sync_target()
                stopped = watchdog.check() or stop.reason()
                if crossed(before, step, cfg.eval_every) or step >= cfg.total_steps or (stopped and stop.timed_out):
                    with timer.saving():  # evaluating is not training: left out of the learning rate, like saving
                        returns = evaluate_and_log(agent, cfg, eval_log, step, scalars)
                        save_checkpoint(out / "checkpoint.pt", agent, cfg, step, returns)

                # -- save the training state when due or stopping --------------------------------------------
                if crossed(before, step, cfg.checkpoint_every) or step >= cfg.total_steps or stopped:
                    counters["step"] = step
                    with timer.saving():
                        save_training_state(out, agent, memory, cfg, counters)
                bar.update(n)
                if stopped:
                    print(f"{stopped}: saved the training state at step {step:,} and stopped", flush=True)
                    break
        finished = True
    except OSError as e:
        if not is_disk_full(e):
            raise
        raise disk_full(e, out, memory) from None
    finally:
        for closing in (bar, games.log, eval_log, envs, *([scalars] if scalars else [])):
            with contextlib.suppress(*(() if finished else (OSError,))):  # after a failed write, close what can be
                closing.close()
    return {**timer.summary(step, first_step), "updates": counters["updates"], "episodes": counters["episodes"],
            "last_returns": list(games.last), "replay_bytes": memory.nbytes,
            "replay_device": str(memory.device or "host"), "rss_bytes": rss_bytes(), "device": str(device),
            "out_dir": str(out), "resumed_from": resume_step, "stopped": stopped, "updates_ran": learner.path,
            "graph_fallback": learner.fallback_reason}


def disk_full(cause: OSError, out: Path, memory) -> DiskFullError:
    """What a run that filled its disk kept (its newest training state) and what its next save needs (the size of
    that state, or the replay memory's bytes when there is none yet)."""
    states = list_checkpoints(out)
    kept = states[-1] if states else None
    needed = kept.stat().st_size if kept is not None else memory.nbytes
    return DiskFullError(cause, kept, checkpoint_step(kept) if kept is not None else None, needed,
                         shutil.disk_usage(out).free)


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


def parse_command(argv: list[str] | None = None) -> tuple[Config, str, bool]:
    """``--preset NAME``, ``--field value`` overrides for any ``Config`` field, and ``--dry-run``: returns the
    config, the preset's name and whether to dry-run."""
    parser = argparse.ArgumentParser(prog="python -m dqn_course.train", description=__doc__.split("\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    parser.add_argument("--dry-run", action="store_true",
                        help="print what the run would allocate where (host RAM, GPU memory, disk) and exit")
    for f in dataclasses.fields(Config):
        types = {"int": int, "float": float, "str": str}
        kind = parse_bool if f.type in (bool, "bool") else types.get(str(f.type), f.type)
        parser.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=kind, default=None)
    args = vars(parser.parse_args(argv))
    preset, dry = args.pop("preset"), args.pop("dry_run")
    overrides = {k: v for k, v in args.items() if v is not None}
    return dataclasses.replace(PRESETS[preset], **overrides), preset, dry


def parse_args(argv: list[str] | None = None) -> Config:
    """The ``Config`` of a command line (``parse_command`` without the rest)."""
    return parse_command(argv)[0]


def resume_command(argv: list[str], out_dir: str) -> str:
    """The command line that carries on a stopped run: the same arguments, ``--resume`` pointing at its folder."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--resume":
            skip = True
        elif not arg.startswith("--resume="):
            kept.append(arg)
    return " ".join(["python -m dqn_course.train", *map(shlex.quote, kept), "--resume", shlex.quote(out_dir)])


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    cfg, preset, dry = parse_command(argv)
    try:
        if dry:
            print(dry_run(cfg, preset))
            return
        summary = train(cfg)
    except (ConfigError, CheckpointError, InsufficientMemoryError, InsufficientDiskError) as e:
        print(f"error: {e}", file=sys.stderr)  # a setting to change, not a bug: no traceback, argparse's status
        raise SystemExit(2) from None
    except DiskFullError as e:  # stopped like a signal stops it, from the other side: what was kept, how to go on
        print(f"stopped: {e.strerror}", file=sys.stderr)
        then = (f"resume with: {resume_command(argv, cfg.out_dir)}" if e.kept is not None
                else "run the same command again")
        print(f"free {format_bytes(e.needed)} or more there, then {then}", file=sys.stderr)
        raise SystemExit(3) from None
    except OSError as e:
        if not is_disk_full(e):
            raise
        print(f"stopped: the disk filled while the run set up its files ({e.filename or 'a file'}: {e.strerror}); "
              "no training state was changed: free space there, then run the same command again", file=sys.stderr)
        raise SystemExit(3) from None
    print(f"{'stopped' if summary['stopped'] else 'done'}: {summary['steps']:,} steps in {summary['seconds']:.0f} s "
          f"({summary['steps_per_s']:.0f} steps/s on {summary['device']}), {summary['episodes']} games, "
          f"replay {format_bytes(summary['replay_bytes'])}; files in {summary['out_dir']}")
    if summary["graph_fallback"]:
        print(f"updates ran eagerly, without a CUDA graph: {summary['graph_fallback']}")
    if summary["stopped"]:
        print(f"why: {summary['stopped']}\nresume with: {resume_command(argv, summary['out_dir'])}")


if __name__ == "__main__":
    main()
