"""Sampling speed: batches of 32 (s and s', 4x84x84 uint8) per second from every replay memory, side by side.

    python benchmarks/sampling.py                       # tables; saves data/bench/sampling.json
    python benchmarks/sampling.py --capacity 50000 --json   # one JSON object per measurement per line

Every memory is filled with the same real Breakout transitions (a pool of random play replayed
cyclically, see dqn_course.bench), ``capacity`` transitions each; the deque keeps one distinct stack
array per step (next state shared by reference, as in a training loop), so its memory is honest.
A second table times the deque and the frame-sharing ring at growing capacities: indexing a deque
walks its blocks (O(N) per draw), a ring's fancy indexing does not. Memories are built one at a
time and freed before the next (the stacked ring at 100k and the deque at 200k hold 5.6-5.7 GB).

Quick mode (DQN_COURSE_QUICK=1) uses small capacities and short timings and saves nothing unless
--out is given.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

from dqn_course import quick_mode
from dqn_course.bench import FramePool, environment_info, fill, play_frames, sampling_rates, save_results
from dqn_course.replay import MEMORY_CLASSES

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
        return {"capacity": 5_000, "sweep": (1_000, 2_000), "seconds": 0.3, "pool": 1_000}
    return {"capacity": 100_000, "sweep": (10_000, 50_000, 200_000), "seconds": 3.0, "pool": 3_000}


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


def parse_args() -> argparse.Namespace:
    d = defaults()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--capacity", type=int, default=d["capacity"],
                   help=f"transitions per memory (default {d['capacity']:,})")
    p.add_argument("--sweep", type=int, nargs="*", default=d["sweep"],
                   help="extra capacities for the deque vs frame-sharing sweep (--capacity is always included)")
    p.add_argument("--seconds", type=float, default=d["seconds"], help="timing per measurement (best of 3 rounds)")
    p.add_argument("--json", action="store_true", help="print one JSON object per measurement instead of tables")
    p.add_argument("--out", type=Path, default=None,
                   help="where to save the rows (default data/bench/sampling.json; quick mode: not saved)")
    return p.parse_args()


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
    seconds = time.perf_counter() - t0
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        print(format_tables(rows, args.capacity))
        env = environment_info()
        print(f"\n{len(rows)} measurements in {seconds:.0f} s on {env['cpu_count']} cores, "
              f"{env['ram_total'] / 1024**3:.1f} GiB RAM; 1-min load average {env['load_avg_1min']}")
    out = args.out or (None if quick_mode() else ROOT / "data/bench/sampling.json")
    if out:
        save_results(out, rows, capacity=args.capacity, sweep=sorted(args.sweep), batch_size=BATCH,
                     seconds_per_measurement=args.seconds, quick=quick_mode(), seconds=round(seconds, 1))
        print(f"rows saved to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
