"""How big is a run's saved training state: ``state-<step>.ckpt`` (what ``--resume`` reads) per replay storage and size.

    python benchmarks/replay_state.py                          # table; saves data/bench/replay_state.json
    python benchmarks/replay_state.py --storages lz4 --sizes 100000 --json   # one JSON object per row
    python benchmarks/replay_state.py --state-dir /content/drive/MyDrive/x  # write the files on that disk
    DQN_COURSE_QUICK=1 python benchmarks/replay_state.py      # 2,000 and 20,000 transitions; saves nothing

For each ``--storages`` (default ram, lz4, zstd) and each ``--sizes`` (default 100,000 and 1,000,000 transitions)
the replay memory, the agent and its learner are built exactly as a training run builds them:
``train.build`` on the ``breakout`` preset with ``buffer_size`` = the size and ``replay_storage`` = the storage,
on the CPU (after ``Config.validate``, so a memory this machine cannot hold is refused as a run refuses it). The
memory is filled with that many transitions of real Breakout play (``--play-pool`` frames of the scripted
``bench.follow_ball`` policy, replayed cyclically; rewards clipped by their sign and stored with ``add_batch``, as
the training loop stores them), so the ring is full, every slot written. One update runs (``learner.learn``), so
the optimiser holds Adam's two moments, as in every run past ``learning_starts``. Then the library's own writer,
``records.save_training_state`` (counters: step = the size, 1 update), writes the file; measured:

* the file's size on disk, and per stored transition (``len(memory)``: a little under the size, since an
  episode's last frame starts no transition);
* its parts, from the arrays read back: the replay (frames, per-slot bookkeeping, RNG), the fixed part (online
  and target networks, Adam's moments, RNG states: the same at every size) and the header, alignment and digest;
* the seconds to write it (the whole ``save_training_state`` call: gathering the arrays, the replay digest, the
  writing, ``fsync``), to read it with ``checkpoint.read_checkpoint`` (which checks its SHA-256; the file's pages
  are dropped from the page cache first where the filesystem allows, as after a restart: ``read_cold`` says
  whether it did) and to restore it into a freshly built agent and memory (``restore_training_state``, which
  refuses a memory that would not sample what the saved one did), as ``--resume`` does.

Each file is written in a temporary folder (``--state-dir``: where to make it; default the system's temporary
directory) and deleted after it is measured; every memory is freed before the next is built. A run that the
machine cannot hold (RAM for the memory, disk for the file) is reported as refused and the others go on.
Quick mode (DQN_COURSE_QUICK=1) measures 2,000 and 20,000 transitions from a 2,000-frame pool and saves nothing
unless --out is given.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import sys
import time
from itertools import islice
from pathlib import Path

import numpy as np
import torch

from dqn_course import ConfigError, quick_mode
from dqn_course.allocation import check_run
from dqn_course.checkpoint import read_checkpoint, replay_digest, restore_training_state
from dqn_course.cleanup import OwnedTempDir, exit_on_signals
from dqn_course.lab.bench import FramePool, play_frames, print_results, save_results, transitions
from dqn_course.lab.stores import can_drop_page_cache, filesystem_type
from dqn_course.profiling import InsufficientMemoryError, format_bytes
from dqn_course.replay.stores import STORAGES, InsufficientDiskError, check_disk_space
from dqn_course.allocation import FRAME_SHAPE, SLOT_BYTES, network_parameters
from dqn_course.records import save_training_state
from dqn_course.train import PRESETS, Config, build

ROOT = Path(__file__).resolve().parents[1]
PRESET = "breakout"
DEFAULT_STORAGES = ("ram", "lz4", "zstd")
MIN_SIZE = 200  # an update samples a batch of 32 and the replay digest 64 stored transitions


def defaults() -> dict:
    """Sizes and play pool per run mode."""
    if quick_mode():
        return {"sizes": (2_000, 20_000), "play_pool": 2_000}
    return {"sizes": (100_000, 1_000_000), "play_pool": 20_000}


def run_config(storage: str, size: int, state_dir: str) -> Config:
    """The ``breakout`` preset with a replay of ``size`` frames in ``storage``, on the CPU, writing to ``state_dir``."""
    return dataclasses.replace(PRESETS[PRESET], buffer_size=size, replay_storage=storage, device="cpu",
                               out_dir=state_dir, replay_path="", resume="", progress=False)


def build_run(cfg: Config):
    """(memory, agent, learner) as ``train.build`` makes them for ``cfg`` (its envs closed: nothing is played)."""
    envs, memory, agent, learner = build(cfg, torch.device("cpu"))
    envs.close()
    return memory, agent, learner


def fill_like_a_run(memory, pool: FramePool, n: int) -> None:
    """``n`` transitions from the pool's stream, stored as the training loop stores them (one env):
    ``add_batch`` with the reward clipped to its sign, ``done`` = game over or life lost."""
    for state, action, reward, next_state, done, episode_end in islice(transitions(pool, memory.streams[0].stack), n):
        memory.add_batch((state,), (action,), (float(np.sign(reward)),), (next_state,), (done,), (episode_end,))


def check_state_fits_on_disk(cfg: Config, memory=None) -> None:
    """Refuse (``InsufficientDiskError``) a state file the disk of ``cfg.out_dir`` cannot take, by an upper bound of
    its size: the frames (raw; a compressed ``memory``'s payloads as it holds them), the per-slot bookkeeping,
    the networks and Adam's moments, and 1 MB more. Without ``memory`` a compressed replay is not checked."""
    if cfg.replay_storage in ("ram", "disk"):
        frames = cfg.buffer_size * int(np.prod(FRAME_SHAPE))
    elif memory is not None:
        frames = memory.nbytes
    else:
        return
    needed = frames + SLOT_BYTES * cfg.buffer_size + 4 * 4 * network_parameters() + 2**20
    check_disk_space(needed, cfg.out_dir, f"the training state of {cfg.buffer_size:,} {cfg.replay_storage} replay "
                                          "frames")


def drop_from_page_cache(path: str | os.PathLike) -> None:
    """Evict a written file's pages from the page cache (its data is on disk after the writer's ``fsync``)."""
    if hasattr(os, "posix_fadvise"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def save_state(cfg: Config, pool: FramePool) -> dict:
    """Build the run ``cfg`` describes, fill its memory with ``cfg.buffer_size`` transitions, run one update and write
    its training state with ``records.save_training_state``; the memory and agent are freed before this returns.

    Returns the file's path and what was measured on the way: ``stored`` (``len(memory)``), ``memory_nbytes``,
    ``digest`` (``checkpoint.replay_digest`` of the memory written), ``fill_s`` and ``write_s``. Raises
    ``InsufficientMemoryError`` / ``InsufficientDiskError`` (nothing written) where the machine cannot take it.
    """
    check_run(cfg)  # the checks a run makes before building: RAM for the replay, the folders, the device
    check_state_fits_on_disk(cfg)  # a raw replay's file size is known before filling it
    memory, agent, learner = build_run(cfg)
    try:
        t0 = time.perf_counter()
        fill_like_a_run(memory, pool, cfg.buffer_size)
        fill_s = time.perf_counter() - t0
        learner.learn(1, cfg.buffer_size)  # Adam's moments exist from the first update on: a real state holds them
        check_state_fits_on_disk(cfg, memory)
        info = {"stored": len(memory), "memory_nbytes": memory.nbytes, "digest": replay_digest(memory),
                "fill_s": fill_s}
        t0 = time.perf_counter()
        path = save_training_state(Path(cfg.out_dir), agent, memory, cfg, {"step": cfg.buffer_size, "updates": 1,
                                                                          "episodes": 0})
        info.update(path=path, write_s=time.perf_counter() - t0)
    finally:
        del memory, agent, learner
        gc.collect()
    return info


def restore_state(cfg: Config, path: str | os.PathLike) -> dict:
    """Read ``path`` with ``read_checkpoint`` (page cache dropped first where possible), then restore it into a
    freshly built agent and memory as ``--resume`` does (``CheckpointError`` if the memory would not sample what the
    saved one did). Returns the parts of the file (``replay_bytes``: arrays under ``replay/``; ``fixed_bytes``: the
    rest, networks, Adam's moments and RNG states), ``read_s``, ``restore_s``, the restored memory's ``stored``
    and ``digest``; everything is freed before it returns."""
    drop_from_page_cache(path)
    t0 = time.perf_counter()
    arrays, meta = read_checkpoint(path)
    read_s = time.perf_counter() - t0
    parts = {"replay_bytes": sum(int(a.nbytes) for k, a in arrays.items() if k.startswith("replay/")),
             "fixed_bytes": sum(int(a.nbytes) for k, a in arrays.items() if not k.startswith("replay/"))}
    memory, agent, learner = build_run(cfg)
    try:
        t0 = time.perf_counter()
        counters = restore_training_state(arrays, meta, agent, memory)
        restore_s = time.perf_counter() - t0
        out = {**parts, "read_s": read_s, "restore_s": restore_s, "stored": len(memory),
               "digest": replay_digest(memory), "step": counters["step"]}
    finally:
        del arrays, memory, agent, learner
        gc.collect()
    return out


def measure(storage: str, size: int, pool: FramePool, state_dir: str, restore: bool = True,
            read_cold: bool | None = None) -> dict:
    """One row: the training state of a ``size``-frame ``storage`` replay, written in ``state_dir``, measured and
    deleted. ``restore=False`` skips reading it back: no ``read_s``/``restore_s``, and the file's parts
    (``replay_bytes``, ``fixed_bytes``, ``overhead_bytes``) are None. ``read_cold``: whether dropping the page cache
    works in ``state_dir`` (recorded as given)."""
    cfg = run_config(storage, size, state_dir)
    saved = save_state(cfg, pool)
    path = saved.pop("path")
    try:
        file_bytes = os.path.getsize(path)
        back = restore_state(cfg, path) if restore else {}
    finally:
        Path(path).unlink(missing_ok=True)
    stored = saved["stored"]
    row = {"storage": storage, "transitions": size, "stored": stored, "file_bytes": file_bytes,
           "bytes_per_transition": round(file_bytes / stored, 1), "memory_nbytes": saved["memory_nbytes"],
           "kept_bytes": cfg.keep_checkpoints * file_bytes, "keep_checkpoints": cfg.keep_checkpoints,
           "fill_s": round(saved["fill_s"], 2), "write_s": round(saved["write_s"], 3)}
    if restore:
        overhead = file_bytes - back["replay_bytes"] - back["fixed_bytes"]
        row.update({"replay_bytes": back["replay_bytes"],
                    "replay_bytes_per_transition": round(back["replay_bytes"] / stored, 1),
                    "fixed_bytes": back["fixed_bytes"], "overhead_bytes": overhead,
                    "read_s": round(back["read_s"], 3), "restore_s": round(back["restore_s"], 3),
                    "read_cold": read_cold, "restored_stored": back["stored"],
                    "digest_matches": back["digest"] == saved["digest"] and back["step"] == size})
    else:
        row.update({"replay_bytes": None, "replay_bytes_per_transition": None, "fixed_bytes": None,
                    "overhead_bytes": None, "read_s": None, "restore_s": None, "read_cold": None,
                    "restored_stored": None, "digest_matches": None})
    return row


def refused_row(storage: str, size: int, error: Exception) -> dict:
    return {"storage": storage, "transitions": size, "refused": f"{type(error).__name__}: {error}"}


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_table(rows: list[dict]) -> str:
    """Storage, transitions, file size, bytes per stored transition, its parts, and the write/read/restore times."""
    head = (f"{'storage':<8} {'transitions':>11} {'stored':>9} {'state file':>11} {'B/transition':>12} "
            f"{'replay B/tr':>11} {'fixed':>9} {'write s':>8} {'read s':>7} {'restore s':>9}")
    out = [f"state-<step>.ckpt of the {PRESET} preset (what --resume reads), per replay storage and size",
           head, "-" * len(head)]
    for r in rows:
        if "refused" in r:
            out.append(f"{r['storage']:<8} {r['transitions']:>11,} refused: {r['refused']}")
            continue
        replay = "-" if r["replay_bytes_per_transition"] is None else f"{r['replay_bytes_per_transition']:,.0f}"
        fixed = "-" if r["fixed_bytes"] is None else format_bytes(r["fixed_bytes"])
        out.append(f"{r['storage']:<8} {r['transitions']:>11,} {r['stored']:>9,} {format_bytes(r['file_bytes']):>11} "
                   f"{r['bytes_per_transition']:>12,.0f} {replay:>11} {fixed:>9} {r['write_s']:>8.2f} "
                   f"{_seconds(r['read_s']):>7} {_seconds(r['restore_s']):>9}")
    out.append("fixed: online and target networks, Adam's moments, RNG states (the same at every size); "
               "a run keeps keep_checkpoints of these files")
    return "\n".join(out)


def parse_args() -> argparse.Namespace:
    d = defaults()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--storages", nargs="+", default=list(DEFAULT_STORAGES), choices=STORAGES,
                   help=f"replay storages (default: {' '.join(DEFAULT_STORAGES)})")
    sizes = " ".join(f"{s:,}" for s in d["sizes"])
    p.add_argument("--sizes", type=int, nargs="+", default=list(d["sizes"]),
                   help=f"replay sizes in transitions (--buffer-size; default {sizes})")
    p.add_argument("--play-pool", type=int, default=d["play_pool"],
                   help=f"frames of scripted play, replayed cyclically (default {d['play_pool']:,})")
    p.add_argument("--state-dir", default=None,
                   help="where to make the temporary folder the files are written in (default: the system's temp "
                        "directory); e.g. a mounted Google Drive folder, to time writes there")
    p.add_argument("--no-restore", action="store_true", help="skip reading each file back and restoring it")
    p.add_argument("--json", action="store_true", help="print one JSON object per row instead of the table")
    p.add_argument("--out", type=Path, default=None,
                   help="where to save the rows (default data/bench/replay_state.json; quick mode: not saved)")
    args = p.parse_args()
    if min(args.sizes) < MIN_SIZE:
        p.error(f"--sizes must be at least {MIN_SIZE} (an update and the replay digest sample stored transitions)")
    if args.play_pool < 10:
        p.error("--play-pool must be at least 10 frames")
    return args


@exit_on_signals()  # SIGTERM and SIGHUP unwind like Ctrl-C, so the temporary folder and its files go
def main() -> None:
    args = parse_args()
    t0 = time.perf_counter()
    pool = play_frames(args.play_pool, seed=0, policy="follow")
    rows = []
    with OwnedTempDir("dqn-replay-state-", dir=args.state_dir) as state_dir:
        cold, why = can_drop_page_cache(state_dir)
        fs = filesystem_type(state_dir)
        for size in sorted(args.sizes):
            for storage in args.storages:
                try:
                    row = measure(storage, size, pool, state_dir, restore=not args.no_restore, read_cold=cold)
                except (InsufficientMemoryError, InsufficientDiskError, ConfigError) as e:
                    row = refused_row(storage, size, e)
                    print(f"{storage} @ {size:,}: refused: {e}", file=sys.stderr)
                else:
                    print(f"{storage} @ {size:,}: {format_bytes(row['file_bytes'])} "
                          f"({row['bytes_per_transition']:,.0f} B/transition)", file=sys.stderr)
                rows.append(row)
    seconds = time.perf_counter() - t0
    read = "page cache dropped before each read" if cold else f"reads may be warm: {why}"
    print_results(rows, args.json, lambda: format_table(rows), f"{len(rows)} rows", seconds,
                  f"files on {fs or 'an unknown'} filesystem, {read}")
    out = args.out or (None if quick_mode() else ROOT / "data/bench/replay_state.json")
    if out:
        save_results(out, rows, preset=PRESET, storages=args.storages, sizes=sorted(args.sizes),
                     play_pool=args.play_pool, policy="follow", restore=not args.no_restore,
                     keep_checkpoints=PRESETS[PRESET].keep_checkpoints, filesystem=fs, read_cold=cold,
                     read_cold_why=why, torch=torch.__version__, quick=quick_mode(), seconds=round(seconds, 1))
        print(f"rows saved to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
