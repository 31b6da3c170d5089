"""Sampling speed: batches of 32 (s and s', 4x84x84 uint8) per second from every replay memory, side by side.

    python benchmarks/sampling.py                       # tables; saves data/bench/sampling.json
    python benchmarks/sampling.py --capacity 50000 --json   # one JSON object per measurement per line
    python benchmarks/sampling.py --million 0           # skip the 1M-frame compressed fill (~1 min)

Every memory is filled with the same real Breakout transitions (a pool of random play replayed
cyclically, see dqn_course.lab.bench), ``capacity`` transitions each; the deque keeps one distinct stack
array per step (next state shared by reference, as in a training loop), so its memory is honest.
A second table times the deque and the frame-sharing ring at growing capacities: indexing a deque
walks its blocks (O(N) per draw), a ring's fancy indexing does not. Memories are built one at a
time and freed before the next (the stacked ring at 100k and the deque at 200k hold 5.6-5.7 GB).

Then the frame-sharing ring's storages (dqn_course.replay.stores: numpy array, lz4, zstd, memory-mapped
file), on frames of real play (a scripted policy that keeps the ball in play): each one filled with
``capacity`` transitions and timed in its own fresh process, with its RSS growth per transition;
the file store warm (pages cached after the fill) and cold (page cache dropped before every batch);
the compressed stores once more on random play, which compresses better.
A codec table gives compression ratios and speeds on scripted and random play, and a 1,000,000-frame
lz4 memory is filled in a fresh process to *measure* what 1M transitions cost. Everything runs with
one thread (OMP_NUM_THREADS=1): decompression is single-threaded anyway.

Quick mode (DQN_COURSE_QUICK=1) uses small capacities and short timings and saves nothing unless
--out is given.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core; set before numpy loads (fresh processes inherit it)

from dqn_course import quick_mode  # noqa: E402
from dqn_course.cleanup import OwnedTempDir, exit_on_signals  # noqa: E402
from dqn_course.lab.bench import (FramePool, print_results, fill, play_frames, sampling_rates,  # noqa: E402
                                  save_results)
from dqn_course.profiling import measure_in_subprocess  # noqa: E402
from dqn_course.replay import MEMORY_CLASSES  # noqa: E402
from dqn_course.lab.stores import compare_codecs, measure_storage  # noqa: E402
from dqn_course.replay.stores import CODECS, STORAGES  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BATCH = 32
# Rings first: freed numpy rings go back to the OS, a freed deque's many small arrays may not.
ORDER = ("stacked", "folded", "frame_sharing", "naive")
SWEEP_BUFFERS = ("naive", "frame_sharing")


def defaults() -> dict:
    """Capacity, sweep and timing per run mode: ~1.5 min at the defaults, seconds in quick mode.

    The sweep goes to 200k (deque 5.7 GB) because the deque's O(N) draw is the point; 1M would need 28 GB.
    """
    if quick_mode():
        return {"capacity": 5_000, "sweep": (1_000, 2_000), "seconds": 0.3, "pool": 1_000, "play_pool": 1_000,
                "million": 20_000}
    return {"capacity": 100_000, "sweep": (10_000, 50_000, 200_000), "seconds": 3.0, "pool": 3_000,
            "play_pool": 10_000, "million": 1_000_000}


def measure(buffer: str, capacity: int, pool: FramePool, seconds: float) -> dict:
    """Fill one memory with ``capacity`` transitions, time its sampling, free it."""
    memory = MEMORY_CLASSES[buffer](capacity, seed=0)
    t0 = time.perf_counter()
    fill(memory, pool, capacity)
    fill_s = time.perf_counter() - t0
    rates = sampling_rates(memory, BATCH, min_seconds=seconds)
    row = {"buffer": type(memory).__name__, "key": buffer, "capacity": capacity, "stored": len(memory),
           "batches_per_s": round(rates["batches_per_s"], 1), "ms_per_batch": round(1e3 / rates["batches_per_s"], 3),
           "batches_per_cpu_s": round(rates["batches_per_cpu_s"], 1),
           "minor_faults_per_batch": round(rates["minor_faults_per_batch"], 1), "nbytes": memory.nbytes,
           "fill_s": round(fill_s, 1)}
    del memory
    gc.collect()
    return row


def add_ratios(rows: list[dict]) -> None:
    """``vs_deque`` (wall clock) and ``cpu_vs_deque``: each rate over the deque's at the same capacity, this run."""
    deque = {r["capacity"]: r for r in rows if r["key"] == "naive"}
    for r in rows:
        r["vs_deque"] = round(r["batches_per_s"] / deque[r["capacity"]]["batches_per_s"], 2)
        r["cpu_vs_deque"] = round(r["batches_per_cpu_s"] / deque[r["capacity"]]["batches_per_cpu_s"], 2)


def format_tables(rows: list[dict], capacity: int) -> str:
    """Side-by-side table at ``capacity``, then the capacity sweep for the deque and the frame-sharing ring."""
    head = (f"{'buffer':<20} {'capacity':>9} {'batches/s':>10} {'ms/batch':>9} {'vs deque':>9} "
            f"{'per CPU s':>10} {'vs deque':>9} {'faults/batch':>12} {'memory':>10}")
    out = [f"batches of {BATCH} per second, all memories at {capacity:,} transitions", head, "-" * len(head)]
    for r in sorted((r for r in rows if r["capacity"] == capacity), key=lambda r: r["batches_per_s"]):
        out.append(f"{r['buffer']:<20} {r['capacity']:>9,} {r['batches_per_s']:>10,.0f} {r['ms_per_batch']:>9.3f} "
                   f"{r['vs_deque']:>8.1f}x {r['batches_per_cpu_s']:>10,.0f} {r['cpu_vs_deque']:>8.1f}x "
                   f"{r['minor_faults_per_batch']:>12,.1f} {r['nbytes'] / 1e9:>7.2f} GB")
    out += ["", "sampling rate vs capacity (batches/s)"]
    caps = sorted({r["capacity"] for r in rows if r["key"] in SWEEP_BUFFERS})
    out.append(f"{'buffer':<20} " + " ".join(f"{c:>10,}" for c in caps))
    for key in SWEEP_BUFFERS:
        rate = {r["capacity"]: r["batches_per_s"] for r in rows if r["key"] == key}
        name = MEMORY_CLASSES[key].__name__
        out.append(f"{name:<20} " + " ".join(f"{rate[c]:>10,.0f}" for c in caps))
    ratio = {r["capacity"]: r["vs_deque"] for r in rows if r["key"] == "frame_sharing"}
    out.append(f"{'frame-sharing/deque':<20} " + " ".join(f"{ratio[c]:>9.1f}x" for c in caps))
    return "\n".join(out)


STORAGE_TARGET_BATCHES = 3_000  # target: a compressed store samples >= 3,000 batches of 32 per second on one core
MILLION_TARGET_BYTES = 10**9  # target: 1M Breakout transitions in <= 1 GB


def measure_storages(plan, capacity: int, seconds: float, disk_dir: str) -> list[dict]:
    """Each (storage, play label, pool) of ``plan`` filled and timed in its own fresh process; ratios to "ram"."""
    rows = []
    for name, play, pool in plan:
        m = measure_in_subprocess(measure_storage, name, capacity, pool, path=disk_dir if name == "disk" else None,
                                  seconds=seconds, cold_seconds=seconds, timeout=900)
        row = {"section": "storage", "play": play, **m.result}
        row["rss_per_transition"] = round(row["rss_growth"] / row["transitions"], 1)
        row["anon_per_transition"] = round(row["rss_anon_growth"] / row["transitions"], 1)  # without file pages
        row["nbytes_per_transition"] = round(row["nbytes"] / row["transitions"], 1)
        rows.append(row)
        print(f"storage {name} ({play} play) @ {capacity:,}: {row['batches_per_s']:,.0f} batches/s, "
              f"{row['anon_per_transition']:,.0f} B/transition", file=sys.stderr)
    ram = next((r for r in rows if r["storage"] == "ram" and r["play"] == "scripted"), None)  # same run only
    for r in rows:
        r["vs_ram"] = round(r["batches_per_s"] / ram["batches_per_s"], 3) if ram else None
        r["memory_vs_ram"] = round(r["anon_per_transition"] / ram["anon_per_transition"], 4) if ram else None
    return rows


def measure_million(frames: int, pool: FramePool, seconds: float) -> dict:
    """A ``frames``-slot lz4 memory, filled with real play in a fresh process: RSS growth and nbytes, measured."""
    m = measure_in_subprocess(measure_storage, "lz4", frames, pool, seconds=seconds, timeout=1800)
    row = {"section": "million", **m.result}
    row["rss_per_transition"] = round(row["rss_growth"] / row["transitions"], 1)
    print(f"lz4 @ {frames:,} frames: RSS growth {row['rss_growth'] / 1e9:.3f} GB", file=sys.stderr)
    return row


def format_storage(storage_rows: list[dict], codec_rows: list[dict], million: dict | None) -> str:
    """The storage table (with the target checks), the codec table and the 1M fill."""
    out = []
    if storage_rows:
        head = (f"{'storage':<13} {'batches/s':>10} {'per CPU s':>10} {'vs ram':>7} {'RSS B/tr':>9} {'anon B/tr':>10} "
                f"{'nbytes B/tr':>11} {'fill s':>7}")
        out += [f"FrameSharingMemory storages, {storage_rows[0]['capacity']:,} transitions of scripted play each "
                "(random play where it says so), each filled and timed in a fresh process", head, "-" * len(head)]
        for r in storage_rows:
            vs_ram = "-" if r["vs_ram"] is None else f"{r['vs_ram']:.2f}x"
            label = r["storage"] if r["play"] == "scripted" else f"{r['storage']} ({r['play']})"
            out.append(f"{label:<13} {r['batches_per_s']:>10,.0f} {r['batches_per_cpu_s']:>10,.0f} "
                       f"{vs_ram:>7} {r['rss_per_transition']:>9,.0f} {r['anon_per_transition']:>10,.0f} "
                       f"{r['nbytes_per_transition']:>11,.0f} {r['fill_s']:>7.1f}")
            if r["storage"] == "disk":
                cached = r["cached_before_cold"]
                cached = "" if cached is None else f"; at most {cached:.2%} of the file cached before a batch"
                warm = r["cold_batches_per_s"] / r["batches_per_s"]
                out.append(f"{'disk cold':<13} {r['cold_batches_per_s']:>10,.0f} {'':>10} {'':>7}  page cache "
                           f"dropped before each of {r['cold_batches']} batches ({warm:.3f}x warm){cached}")
        out.append("RSS: growth of the fresh process's resident memory; anon: without file-backed pages (a disk "
                   "store's mapped file is the kernel's page cache, reclaimable); nbytes: what the memory reports")
        for r in storage_rows:
            if r["storage"] in ("lz4", "zstd") and r["play"] == "scripted":
                met = "met" if r["batches_per_s"] >= STORAGE_TARGET_BATCHES else "NOT met"
                out.append(f"target {r['storage']} >= {STORAGE_TARGET_BATCHES:,} batches/s on one core: {met} "
                           f"({r['batches_per_s']:,.0f} per wall-clock second, {r['batches_per_cpu_s']:,.0f} per CPU "
                           "second)")
    if codec_rows:
        head = (f"{'codec':<6} {'frames':<14} {'mean B/frame':>12} {'ratio':>7} {'compress us':>12} "
                f"{'decompress us':>14}")
        out += ["", "codecs on single 84x84 frames (7,056 B)", head, "-" * len(head)]
        for r in codec_rows:
            out.append(f"{r['codec']:<6} {r['pool']:<14} {r['mean_bytes']:>12,.0f} {r['ratio']:>6.1f}x "
                       f"{r['compress_us']:>12.2f} {r['decompress_us']:>14.2f}")
    if million:
        out += ["", f"{million['capacity']:,}-frame FrameSharingMemory(storage='lz4'), scripted play, fresh process: "
                    f"{million['transitions']:,} transitions; RSS growth {million['rss_growth'] / 1e9:.3f} GB "
                    f"({million['rss_per_transition']:,.0f} B/transition); nbytes {million['nbytes'] / 1e9:.3f} GB; "
                    f"filled in {million['fill_s']:.0f} s; sampling {million['batches_per_s']:,.0f} batches/s "
                    f"({million['batches_per_cpu_s']:,.0f} per CPU second)"]
        if million["capacity"] >= 1_000_000:
            met = "met" if million["rss_growth"] <= MILLION_TARGET_BYTES else "NOT met"
            out.append(f"target 1M transitions in <= 1 GB: {met} (measured, not extrapolated)")
    return "\n".join(out)


def parse_args() -> argparse.Namespace:
    d = defaults()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--capacity", type=int, default=d["capacity"],
                   help=f"transitions per memory (default {d['capacity']:,})")
    p.add_argument("--sweep", type=int, nargs="*", default=d["sweep"],
                   help="extra capacities for the deque vs frame-sharing sweep (--capacity is always included)")
    p.add_argument("--seconds", type=float, default=d["seconds"], help="timing per measurement (best of 3 rounds)")
    p.add_argument("--storages", nargs="*", default=list(STORAGES), choices=STORAGES,
                   help="FrameSharingMemory storages to compare (default: all; none: skip the section)")
    p.add_argument("--play-pool", type=int, default=d["play_pool"],
                   help=f"frames of scripted play for the storage section (default {d['play_pool']:,})")
    p.add_argument("--million", type=int, default=d["million"],
                   help=f"frames of the lz4 fill measured in a fresh process (default {d['million']:,}; 0: skip)")
    p.add_argument("--disk-dir", default=None,
                   help="directory for the disk store's file (default: a new one in the system's temp directory)")
    p.add_argument("--json", action="store_true", help="print one JSON object per measurement instead of tables")
    p.add_argument("--out", type=Path, default=None,
                   help="where to save the rows (default data/bench/sampling.json; quick mode: not saved)")
    return p.parse_args()


@exit_on_signals()  # SIGTERM and SIGHUP unwind like Ctrl-C, so the clean-ups run
def main() -> None:
    args = parse_args()
    t0 = time.perf_counter()
    pool = play_frames(min(defaults()["pool"], args.capacity + 1), seed=0)
    plan = [(b, args.capacity) for b in ORDER] + [(b, c) for c in sorted(set(args.sweep) - {args.capacity})
                                                   for b in SWEEP_BUFFERS]
    rows = []
    for buffer, capacity in plan:
        rows.append(measure(buffer, capacity, pool, args.seconds))
        print(f"{rows[-1]['buffer']} @ {capacity:,}: {rows[-1]['batches_per_s']:,.0f} batches/s", file=sys.stderr)
    add_ratios(rows)
    for row in rows:
        row["section"] = "memories"
    storage_rows, codec_rows, million = [], [], None
    if args.storages or args.million:
        play = play_frames(args.play_pool, seed=0, policy="follow")
        codec_rows = [{"section": "codec", "pool": label, **r}
                      for label, frames in (("scripted play", play.frames), ("random play", pool.frames))
                      for r in compare_codecs(frames)]
        # Every storage on scripted play; the compressed ones on random play too (it compresses better).
        plan = [(name, "scripted", play) for name in args.storages]
        plan += [(name, "random", pool) for name in args.storages if name in CODECS]
        with OwnedTempDir("dqn-sampling-", dir=args.disk_dir) as disk_dir:
            storage_rows = measure_storages(plan, args.capacity, args.seconds, disk_dir)
        if args.million:
            million = measure_million(args.million, play, args.seconds)
    seconds = time.perf_counter() - t0
    all_rows = rows + storage_rows + codec_rows + ([million] if million else [])

    def tables() -> str:
        return f"{format_tables(rows, args.capacity)}\n\n{format_storage(storage_rows, codec_rows, million)}"

    print_results(all_rows, args.json, tables, f"{len(rows)} measurements", seconds)
    out = args.out or (None if quick_mode() else ROOT / "data/bench/sampling.json")
    if out:
        save_results(out, all_rows, capacity=args.capacity, sweep=sorted(args.sweep), batch_size=BATCH,
                     seconds_per_measurement=args.seconds, storages=args.storages, play_pool=args.play_pool,
                     million=args.million, quick=quick_mode(), seconds=round(seconds, 1))
        print(f"rows saved to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
