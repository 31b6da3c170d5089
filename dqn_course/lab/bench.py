"""Benchmark helpers shared by ``benchmarks/`` and the notebooks: real-frame streams, and ``timeit`` for timing.

Playing Breakout costs ~0.4 ms a step, so measuring a 100k-transition memory by playing 100k steps
would mostly measure the emulator. Instead a ``FramePool`` plays the game once for a few thousand
real frames, and ``transitions`` replays them cyclically as an endless stream of transitions. Each
state is a *new* stack array, built the way ``FrameStackObservation`` builds one, and is passed on
by reference as the next step's state (``state = next_state``), so a memory that keeps references
keeps one distinct array per step, exactly as it would in a training loop.

Every timing in the lab, the notebooks and ``benchmarks/`` goes through ``timeit``: the functions
compared take turns, round after round, and each reports its best and median time per call.
``calls_per_second`` and ``sampling_rates`` are views of it.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from collections.abc import Callable, Hashable, Iterator
from itertools import count, islice
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from dqn_course.contracts import Count, Probability, check_module
from dqn_course.envs import make_breakout, make_raw_breakout
from dqn_course.profiling import machine_summary
from dqn_course.replay.base import MemoryLike

try:
    import resource
except ImportError:  # Windows: no page-fault counter, reported as 0
    resource = None

Transition = tuple  # (state, action, reward, next_state, done, episode_end)


@dataclass
class FramePool:
    """Frames of real play, in order, with the bookkeeping to rebuild every stack.

    ``frames[i]`` is the observation after step i-1, or after a reset where ``first[i]`` (the frame
    before it is then the game's last). ``actions/rewards/dones[i]`` describe the step from frame i
    to frame i+1.
    """

    frames: np.ndarray  # (K, *frame_shape) uint8
    first: np.ndarray  # (K,) bool, True where an episode starts (a reset observation)
    actions: np.ndarray  # (K,) int64
    rewards: np.ndarray  # (K,) float32
    dones: np.ndarray  # (K,) bool: game over or life lost (no bootstrap)
    episode_start: np.ndarray  # (K,) int64: index of the first frame of each frame's episode

    def __len__(self) -> int:
        return len(self.frames)

    def episode_lengths(self) -> np.ndarray:
        """Agent steps of each episode the pool holds whole (an episode of T steps has T+1 frames)."""
        starts = np.flatnonzero(self.first)
        return np.diff(starts) - 1


# Breakout's RAM: ball x at byte 99, ball y at 101 (0 while no ball is in play), paddle x at 72. Found by
# correlating every RAM byte with the ball and paddle found in the screen (tests/test_storage.py checks it).
BALL_X, BALL_Y, PADDLE_X = 99, 101, 72
NOOP, FIRE, RIGHT, LEFT = range(4)


def follow_ball(ram: np.ndarray, rng: np.random.Generator, epsilon: Probability = 0.1) -> int:
    """A scripted Breakout policy that keeps the ball in play: serve, then move the paddle under the ball.

    Screen x of the ball's centre is RAM[99] - 48 and of the (16-pixel) paddle's centre RAM[72] - 39.
    ``epsilon`` of the actions are random, so games differ and the frames cover more of the game.
    """
    if rng.random() < epsilon:
        return int(rng.integers(4))
    if ram[BALL_Y] == 0:
        return FIRE
    offset = int(ram[BALL_X]) - int(ram[PADDLE_X]) - 9  # ball centre minus paddle centre, in pixels
    return RIGHT if offset > 2 else LEFT if offset < -2 else NOOP


def play_frames(n_frames: int, raw: bool = False, seed: int = 0, policy: str = "random") -> FramePool:
    """Play Breakout for ``n_frames`` observations: 84x84 gray by default, 210x160x3 if ``raw``.

    ``policy="random"`` presses random buttons (the ball is mostly lost within a few hundred steps);
    ``policy="follow"`` is ``follow_ball``, which keeps it in play, breaks bricks and lasts longer:
    frames closer to a trained agent's.
    """
    if policy not in ("random", "follow"):
        raise ValueError(f"policy must be 'random' or 'follow', got {policy!r}")
    env = make_raw_breakout(seed=seed) if raw else make_breakout(seed=seed, frame_stack=1)
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    frames = np.empty((n_frames, *obs.shape), np.uint8)
    first = np.zeros(n_frames, bool)
    actions, rewards = np.zeros(n_frames, np.int64), np.zeros(n_frames, np.float32)
    dones = np.zeros(n_frames, bool)
    frames[0], first[0] = obs, True
    i = 0  # index of the newest frame written
    while i + 1 < n_frames:
        actions[i] = env.action_space.sample() if policy == "random" else follow_ball(env.unwrapped.ale.getRAM(), rng)
        obs, rewards[i], terminated, truncated, info = env.step(int(actions[i]))
        dones[i] = terminated or info.get("life_lost", False)
        i += 1
        frames[i] = obs  # kept even when the game ended: the last transition's next state
        if (terminated or truncated) and i + 1 < n_frames:
            obs, _ = env.reset()
            i += 1
            frames[i], first[i] = obs, True
    env.close()
    episode_start = np.maximum.accumulate(np.where(first, np.arange(n_frames), 0))
    return FramePool(frames, first, actions, rewards, dones, episode_start)


def _stack_at(pool: FramePool, i: int, stack: int) -> np.ndarray:
    """A new (stack, *frame) array ending at frame i, padded by repeating the episode's first frame."""
    idx = np.maximum(np.arange(i - stack + 1, i + 1), pool.episode_start[i])
    return pool.frames[idx]  # fancy indexing: a fresh array, like FrameStackObservation's output


def transitions(pool: FramePool, stack: Count = 4) -> Iterator[Transition]:
    """Endless (state, action, reward, next_state, done, episode_end) from the pool, cycling over it.

    The pool's last frame ends an episode (the wrap goes back to a reset frame), so every episode
    in the stream is a real stretch of play.
    """
    K = len(pool)
    state = None
    for n in count():
        i = n % K
        if i + 1 == K or pool.first[i + 1]:  # frame i is an episode's last observation: no step from it
            state = None
            continue
        if state is None:
            state = _stack_at(pool, i, stack)
        next_state = _stack_at(pool, i + 1, stack)
        episode_end = i + 2 == K or bool(pool.first[i + 2])
        yield state, int(pool.actions[i]), float(pool.rewards[i]), next_state, bool(pool.dones[i]), episode_end
        state = None if episode_end else next_state


def fill(memory: MemoryLike, pool: FramePool, n: int) -> None:
    """Add ``n`` transitions from the pool's stream, stacked to the memory's stack size."""
    for state, action, reward, next_state, done, episode_end in islice(transitions(pool, memory.stack), n):
        memory.add(state, action, reward, next_state, done, episode_end)


def timeit(fns: dict[Hashable, Callable[[], object]], min_seconds: float = 1.0, rounds: Count = 3, *,
           turn_seconds: float = 0.0, warmup: bool = True, sync: Callable[[], object] | None = None) -> dict:
    """Time functions side by side: per function, milliseconds per call, best and median over its turns.

    Each round gives every function one turn, in the order of ``fns``: one call, or with ``turn_seconds``
    as many calls as fit in that time (at least one; for calls too short to time one by one), and the
    turn's time per call is its elapsed time over its calls. Rounds go on until at least ``rounds`` were
    run and ``min_seconds`` have passed since the first. Taking turns makes a burst of other work on a
    shared machine land on every function alike; the best turn is the least disturbed one (other work
    only ever slows a call down) and the median ignores the turns a burst stretched.

    ``warmup`` calls each function once first, untimed (a first call allocates, compiles, picks kernels).
    ``sync`` runs before each reading of the clock, e.g. ``torch.cuda.synchronize``, so the GPU work a
    turn queues is finished, and counted, within that turn.

    Returns ``{name: {"best_ms", "median_ms", "cpu_best_ms", "calls", "turns", "turns_ms"}}`` in the order of
    ``fns``. ``cpu_best_ms`` is this process's CPU time per call in its least costly turn: all threads count, so
    it exceeds the wall time when several threads work, and falls short of it when the process waited.
    ``turns_ms`` lists each turn's milliseconds per call, round by round (for statistics over the rounds).
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    if warmup:
        for fn in fns.values():
            fn()
    wall: dict = {name: [] for name in fns}
    cpu: dict = {name: [] for name in fns}
    calls = dict.fromkeys(fns, 0)
    done, start = 0, time.perf_counter()
    while fns and (done < rounds or time.perf_counter() - start < min_seconds):
        for name, fn in fns.items():
            if sync is not None:
                sync()
            c0, t0, n = time.process_time(), time.perf_counter(), 0
            while True:
                fn()
                n += 1
                if turn_seconds <= 0 or time.perf_counter() - t0 >= turn_seconds:
                    break
            if sync is not None:
                sync()
            t1, c1 = time.perf_counter(), time.process_time()
            wall[name].append((t1 - t0) / n)
            cpu[name].append((c1 - c0) / n)
            calls[name] += n
        done += 1
    return {name: {"best_ms": 1e3 * min(wall[name]), "median_ms": 1e3 * float(np.median(wall[name])),
                   "cpu_best_ms": 1e3 * min(cpu[name]), "calls": calls[name], "turns": len(wall[name]),
                   "turns_ms": [1e3 * t for t in wall[name]]}
            for name in fns}


@runtime_checkable
class _Sampler(Protocol):
    """What ``sampling_rates`` times: anything with ``sample(batch_size)`` (a replay memory, or a stand-in)."""

    def sample(self, batch_size: Count, *args, **kwargs) -> object: ...


def sampling_rates(memory: _Sampler, batch_size: Count = 32, min_seconds: float = 1.0, rounds: Count = 3) -> dict:
    """Batches per wall-clock second and per CPU second, best of ``rounds`` rounds, and page faults per batch.

    ``timeit`` with one turn of ``min_seconds / rounds`` per round. The best round, not the mean: on a
    shared machine other work only ever slows a round down. CPU seconds (this process only) hide time
    spent waiting for a core; page faults per batch show when fresh output arrays cost more than the copy itself.
    """
    memory.sample(batch_size)  # warm up caches and lazy imports outside the timing (and the fault count)
    f0 = _minor_faults()
    stats = timeit({"sample": lambda: memory.sample(batch_size)}, min_seconds=0.0, rounds=rounds,
                   turn_seconds=min_seconds / rounds, warmup=False)["sample"]
    faults = _minor_faults() - f0
    return {"batches_per_s": 1e3 / stats["best_ms"], "batches_per_cpu_s": 1e3 / max(stats["cpu_best_ms"], 1e-9),
            "minor_faults_per_batch": faults / stats["calls"]}


def calls_per_second(fn: Callable, seconds: float, rounds: Count = 3) -> float:
    """Calls per second: ``timeit``'s best of ``rounds`` turns of ``seconds / rounds`` each, after one warm-up call."""
    stats = timeit({"fn": fn}, min_seconds=0.0, rounds=rounds, turn_seconds=seconds / rounds)["fn"]
    return 1e3 / stats["best_ms"]


def _minor_faults() -> int:
    """Minor page faults of this process so far (a fresh page touched for the first time)."""
    return 0 if resource is None else resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _cpu_model() -> str:
    """The CPU's name: /proc/cpuinfo on Linux (``platform.processor()`` is often empty there)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def environment_info() -> dict:
    """When and where a benchmark ran, for its JSON file and README (timings mean little without it)."""
    load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None  # other work on the cores
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"), "python": platform.python_version(),
            "numpy": np.__version__, "cpu": _cpu_model(), "load_avg_1min": load, **machine_summary()}


def print_results(rows: list[dict], as_json: bool, tables: Callable[[], str], what: str, seconds: float,
                  note: str = "") -> None:
    """A benchmark's results on stdout: one JSON object per row (``as_json``), or ``tables()`` and then one line of
    what ran, for how long, on which machine (cores, RAM, ``note``, the 1-minute load average)."""
    if as_json:
        for row in rows:
            print(json.dumps(row))
        return
    print(tables())
    env = environment_info()
    print(f"\n{what} in {seconds:.0f} s on {env['cpu_count']} cores, {env['ram_total'] / 1e9:.1f} GB RAM; "
          + (f"{note}; " if note else "") + f"1-min load average {env['load_avg_1min']}")


def save_results(path: str | Path, rows: list[dict], **settings) -> Path:
    """Write rows with the command, settings and environment that produced them, as one JSON file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"command": " ".join(sys.argv), "settings": settings, "environment": environment_info(), "rows": rows}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


check_module(globals())
