"""Notebook 09b's experiments on checkpoints: pickle against raw arrays, and a training run killed with SIGKILL.

``pickle_vs_arrays`` answers the posts that pickled their deque of transitions and found saving "extremely
slow". ``start_run`` / ``wait_for_checkpoint`` / ``kill_hard`` drive the training CLI in
a child process, so the notebook (and tests/test_resume.py) can pull the plug on a real run.
"""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from dqn_course.contracts import Count, check_module
from dqn_course.checkpoint import checkpoint_step, list_checkpoints, read_checkpoint, write_checkpoint
from dqn_course.lab.bench import FramePool, fill, timeit
from dqn_course.replay import FrameSharingMemory, NaiveDequeMemory

REPO_ROOT = Path(__file__).resolve().parents[2]


def pickle_vs_arrays(pool: FramePool, n: int, folder: str | os.PathLike, rounds: Count = 5) -> list[dict]:
    """Save and load ``n`` transitions three ways, so that each pair of neighbours differs in one thing: the blog's
    deque pickled; the frame-sharing ring pickled (same format, another layout); the ring as the checkpoint's raw
    arrays (same layout, another format).

    Returns one row per way, in that order: file bytes, and the median seconds of a save and of a load over
    ``rounds`` rounds (``bench.timeit``: each round saves and loads every way in turn, so a burst of other work lands
    on all alike; every save ends with ``fsync``, so each reaches the disk, and each load follows its own save, warm).
    The raw row also has ``seconds_sha256``: the median time of the SHA-256 of as many bytes as its file, the hash
    its save and its load each compute. The files are deleted afterwards. Raises ValueError for ``rounds`` below 1.
    """
    import hashlib

    folder = Path(folder)
    obs_shape = (4, *pool.frames.shape[1:])
    deque_memory = NaiveDequeMemory(n, obs_shape, copy_states=True)  # s and s' preprocessed apart, as blogs do
    ring = FrameSharingMemory(n + n // 10, obs_shape)  # room for n transitions plus one frame per episode
    fill(deque_memory, pool, n)
    fill(ring, pool, n)

    def pickle_save(path: Path, content) -> Callable[[], None]:
        def save():  # flushed to disk like a checkpoint, so every timing includes the disk
            with open(path, "wb") as f:
                pickle.dump(content, f, protocol=pickle.HIGHEST_PROTOCOL)
                f.flush()
                os.fsync(f.fileno())
        return save

    def pickle_load(path: Path, load) -> Callable[[], None]:
        def load_back():
            with open(path, "rb") as f:
                load(pickle.load(f))
        return load_back

    deque_path, ring_path, raw_path = folder / "deque.pkl", folder / "ring.pkl", folder / "ring.ckpt"
    ways = {"pickle of the deque of lists": (deque_path, pickle_save(deque_path, deque_memory.memory),
                                             pickle_load(deque_path, lambda _: None)),
            "pickle of the frame-sharing ring": (ring_path, pickle_save(ring_path, ring.state_dict()),
                                                 pickle_load(ring_path, ring.load_state_dict)),
            "frame-sharing ring as raw arrays": (raw_path, lambda: write_checkpoint(raw_path, ring.state_dict(), {}),
                                                 lambda: ring.load_state_dict(read_checkpoint(raw_path)[0]))}
    write_checkpoint(raw_path, ring.state_dict(), {})
    payload = bytes(raw_path.stat().st_size)  # SHA-256 takes as long whatever the bytes hold
    fns = {}
    for way, (_, save, load) in ways.items():  # in each round a way's save comes right before its load
        fns[way, "save"], fns[way, "load"] = save, load
    fns["sha256"] = lambda: hashlib.sha256(payload).digest()
    times = timeit(fns, min_seconds=0.0, rounds=rounds, warmup=False)
    rows = [{"way": way, "transitions": n, "bytes": path.stat().st_size,
             "seconds_save": times[way, "save"]["median_ms"] / 1e3,
             "seconds_load": times[way, "load"]["median_ms"] / 1e3} for way, (path, _, _) in ways.items()]
    rows[-1]["seconds_sha256"] = times["sha256"]["median_ms"] / 1e3
    for path, _, _ in ways.values():
        path.unlink()
    return rows


def train_command(out_dir: str | os.PathLike, *args: str) -> list[str]:
    """The training CLI (quick preset, no progress bar) as an argument list for ``subprocess``."""
    return [sys.executable, "-m", "dqn_course.train", "--preset", "quick", "--out-dir", str(out_dir),
            "--progress", "false", *args]


def _child_env() -> dict:
    # One OpenMP thread: on a small shared CPU, torch's spinning worker threads slow a child run ~10x.
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def start_run(out_dir: str | os.PathLike, *args: str) -> subprocess.Popen:
    """Start a training run in a child process (its output is captured)."""
    return subprocess.Popen(train_command(out_dir, *args), cwd=REPO_ROOT, env=_child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def run(out_dir: str | os.PathLike, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run a training run to the end in a child process."""
    return subprocess.run(train_command(out_dir, *args), cwd=REPO_ROOT, env=_child_env(), capture_output=True,
                          text=True, timeout=timeout)


def newest_step(out_dir: str | os.PathLike) -> int:
    """The step of the newest ``state-<step>.ckpt`` in ``out_dir``, -1 if there is none yet."""
    return max((checkpoint_step(p) for p in list_checkpoints(out_dir)), default=-1)


def _wait_until(proc: subprocess.Popen, seen, what: str, timeout: float):
    """Poll ``seen()`` until it returns something other than None and return that; raises RuntimeError (with the
    run's last stderr) if the run ends first, TimeoutError after ``timeout`` seconds. ``what``: what is awaited."""
    deadline = time.monotonic() + timeout
    while (found := seen()) is None:
        if proc.poll() is not None:
            raise RuntimeError(f"the run ended (exit {proc.returncode}) before a {what}:\n"
                               + proc.communicate()[1][-3000:])
        if time.monotonic() > deadline:
            raise TimeoutError(f"still no {what} after {timeout:.0f} s")
        time.sleep(0.05)
    return found


def wait_for_checkpoint(proc: subprocess.Popen, out_dir: str | os.PathLike, min_step: int,
                        timeout: float = 600) -> int:
    """Block until the run has written a checkpoint at ``min_step`` or later; returns that step."""
    def seen():
        step = newest_step(out_dir)
        return step if step >= min_step else None
    return _wait_until(proc, seen, f"checkpoint at step {min_step} or later", timeout)


def _logged_steps(out_dir: str | os.PathLike) -> list[int]:
    """The steps of the games in ``log.csv`` whose rows are whole (a row being written has no newline yet)."""
    path = Path(out_dir) / "log.csv"
    if not path.is_file():
        return []
    rows = path.read_text(encoding="utf-8").split("\n")[1:-1]  # the header, then whole rows only
    return [int(row.split(",", 1)[0]) for row in rows if row]


def wait_for_game_after_checkpoint(proc: subprocess.Popen, out_dir: str | os.PathLike, min_step: int,
                                   timeout: float = 600) -> tuple[int, int]:
    """Block until the run has a checkpoint at ``min_step`` or later and has logged a game after its newest
    checkpoint: a kill then lands between two checkpoints, with work done since the last one. Returns (the newest
    checkpoint's step, the last logged game's step) as seen; raises RuntimeError if the run ends first."""
    def seen():
        step, games = newest_step(out_dir), _logged_steps(out_dir)
        return (step, games[-1]) if step >= min_step and games and games[-1] > step else None
    return _wait_until(proc, seen, f"game logged after a checkpoint at step {min_step} or later", timeout)


def kill_hard(proc: subprocess.Popen) -> int:
    """SIGKILL: what the OOM killer sends. No handler or clean-up code of the child runs (the kernel still closes its
    files; what sat in its own buffers is lost). Returns the exit code: ``-9``, minus the signal's number."""
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    return proc.returncode


check_module(globals())
