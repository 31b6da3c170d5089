"""Scaling out on Ray: env steps/s ingested and learner updates/s, 1, 2, ... workers next to the single-process loop.

    python benchmarks/ray_scaling.py                  # table; saves data/bench/ray_scaling.json
    python benchmarks/ray_scaling.py --json           # one JSON object per row, then the verdict
    python benchmarks/ray_scaling.py --workers 1 2 3 --seconds 30

All rows are measured in one run on this machine, after a warm-up, over a window in which the learner is
running; the layouts take turns for ``--rounds`` rounds and each keeps its best round (other work on a
shared machine only ever slows a round down):

- ``train`` is the single-process loop of ``dqn_course.train`` (one env, one update per 4 agent steps,
  everything in turn in one process), timed over a fixed number of agent steps after learning starts;
- ``ray`` is ``dqn_course.distributed.run`` with N rollout workers, a replay actor, a parameter server
  and a learner that updates as fast as batches arrive, timed for ``--seconds`` after its first update.

"env steps/s" counts transitions that reached the replay memory; "updates/s" counts gradient steps of
batch 32. Rollout workers take 1 core each and the learner what is left (at least 1 thread), so past
``cores - 1`` workers the processes share cores: the table shows where adding workers stops helping.
Quick mode (DQN_COURSE_QUICK=1) shortens everything and saves nothing unless --out is given.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from dqn_course import quick_mode
from dqn_course.cleanup import exit_on_signals
from dqn_course.distributed import RaySession
from dqn_course.lab.bench import environment_info, save_results
from dqn_course.lab.scaling import (BATCH, add_ratios, best_rounds, format_table, time_ray, time_single_process,
                                    verdict, worker_counts)

ROOT = Path(__file__).resolve().parents[1]


def defaults() -> dict:
    """Warm-up, timing window, rounds and replay size: ~3 minutes at the defaults on 2 cores, ~40 s in quick mode."""
    if quick_mode():
        return {"warmup": 200, "train_window": 400, "seconds": 6.0, "buffer": 5_000, "rounds": 1}
    return {"warmup": 1_000, "train_window": 1_500, "seconds": 15.0, "buffer": 50_000, "rounds": 2}


def parse_args() -> argparse.Namespace:
    d = defaults()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", type=int, nargs="+", default=None,
                   help="worker counts to time (default: 1, 2, then 4, 8, ... while a core is left for the learner)")
    p.add_argument("--seconds", type=float, default=d["seconds"], help="timing window per Ray row, after warm-up")
    p.add_argument("--warmup", type=int, default=d["warmup"], help="env steps before learning starts")
    p.add_argument("--train-window", type=int, default=d["train_window"],
                   help="agent steps timed in the single-process loop after learning starts")
    p.add_argument("--buffer-size", type=int, default=d["buffer"])
    p.add_argument("--rounds", type=int, default=d["rounds"],
                   help="rounds over all layouts, interleaved; each layout keeps its best round")
    p.add_argument("--json", action="store_true", help="one JSON object per row, then the verdict")
    p.add_argument("--out", type=Path, default=None,
                   help="where to save (default data/bench/ray_scaling.json; quick mode: not saved)")
    args = p.parse_args()
    args.workers = sorted(set(args.workers or worker_counts(os.cpu_count() or 1)))
    if len(args.workers) < 2 or min(args.workers) < 1:
        p.error("--workers needs at least two positive counts (e.g. 1 2) to say what adding workers does")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    return args


@exit_on_signals()  # SIGTERM and SIGHUP unwind like Ctrl-C, so the clean-ups run
def main() -> None:
    args = parse_args()
    cores = os.cpu_count() or 1
    t0 = time.perf_counter()
    measured = []
    with RaySession(num_cpus=max(cores, max(args.workers) + 2)):
        for r in range(args.rounds):  # interleaved, so every layout sees the same spells of load
            measured.append(time_single_process(args.warmup, args.train_window, args.buffer_size))
            measured += [time_ray(n, args.warmup, args.seconds, args.buffer_size) for n in args.workers]
            for row in measured[-1 - len(args.workers):]:
                print(f"round {r + 1}: {row['layout']}, {row['workers']} worker(s): {row['env_steps_per_s']:,.0f} "
                      f"env steps/s, {row['updates_per_s']:,.1f} updates/s", file=sys.stderr)
    rows = best_rounds(measured)
    add_ratios(rows)
    text = verdict(rows, cores)
    seconds = time.perf_counter() - t0
    if args.json:
        for row in rows:
            print(json.dumps(row))
        print(json.dumps({"verdict": text, "cores": cores}))
    else:
        env = environment_info()
        print(f"env steps/s ingested and learner updates/s (batch {BATCH}, learner on {rows[-1]['device']}), "
              f"one run, side by side, best of {args.rounds} interleaved round(s)")
        print(format_table(rows))
        print()
        print(text)
        print(f"\n{len(rows)} layouts x {args.rounds} round(s) in {seconds:.0f} s on {cores} cores; 1-min load average "
              f"{env['load_avg_1min']}")
    out = args.out or (None if quick_mode() else ROOT / "data/bench/ray_scaling.json")
    if out:
        save_results(out, rows, workers=args.workers, seconds=args.seconds, warmup=args.warmup,
                     train_window=args.train_window, buffer_size=args.buffer_size, batch_size=BATCH,
                     rounds=args.rounds, quick=quick_mode(), verdict=text, total_seconds=round(seconds, 1),
                     all_rounds=measured)
        print(f"rows saved to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
