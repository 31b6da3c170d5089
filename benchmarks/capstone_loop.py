"""Agent steps/s of the capstone's loop (notebook 07c's worked answer) against the library's ``train()``, same run.

    python benchmarks/capstone_loop.py --save data/bench/capstone-loop.json
    DQN_COURSE_QUICK=1 python benchmarks/capstone_loop.py     # a few hundred steps each: a smoke run, saves nothing

Both run the ``breakout-cpu`` learning problem (batch 32, one update per 4 agent steps, target sync every 1,000,
Adam 1e-4) from the same seed, shortened: learning from step ``--warmup`` to ``--warmup + --window``, a replay of
``--buffer-size`` frames, one short evaluation game at the end (the same for both). Rounds alternate the two, each
run in a fresh subprocess, so neither inherits the other's allocator or thread state. A row's ``steps_per_s`` is
agent steps over the whole call's wall time (setup, acting, learning, the final evaluation and save), the learner's
view of "how long does my run take"; ``ratio_loop_over_train`` compares the two within each round.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from dqn_course import quick_mode
from dqn_course.cleanup import OwnedTempDir, exit_on_signals
from dqn_course.lab.bench import save_results
from dqn_course.lab.capstone import settings
from dqn_course.profiling import measure_in_subprocess


def run_once(which: str, overrides: dict) -> dict:
    """One run of ``which`` ("loop" or "train") with the breakout-cpu settings plus ``overrides``; wall time."""
    from dqn_course.lab.capstone_solution import dqn_loop
    from dqn_course.train import train

    with OwnedTempDir(f"dqn-capstone-{which}-") as out:
        cfg = settings(quick=False, out_dir=out, **overrides)
        t0 = time.perf_counter()
        steps = dqn_loop(cfg, out) if which == "loop" else train(cfg)["steps"]
        return {"steps": steps, "seconds": time.perf_counter() - t0}


@exit_on_signals()  # SIGTERM and SIGHUP unwind like Ctrl-C, so the temporary folders go
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--warmup", type=int, default=None, help="agent steps before learning starts")
    parser.add_argument("--window", type=int, default=None, help="agent steps of learning after it")
    parser.add_argument("--buffer-size", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--save", default="", help="also write the rows and the machine to this JSON file")
    args = parser.parse_args()
    small = quick_mode()
    warmup = args.warmup or (200 if small else 1_000)
    window = args.window or (200 if small else 5_000)
    overrides = dict(total_steps=warmup + window, learning_starts=warmup, buffer_size=args.buffer_size,
                     eval_every=10**9, eval_episodes=1, eval_max_steps=100, checkpoint_every=10**9, prefault=False)
    rows = []
    for k in range(1, args.rounds + 1):
        for which in ("train", "loop") if k % 2 else ("loop", "train"):
            r = measure_in_subprocess(run_once, which, overrides).result
            rows.append({"round": k, "which": which, "steps": r["steps"], "seconds": r["seconds"],
                         "steps_per_s": r["steps"] / r["seconds"]})
            print(json.dumps(rows[-1]), flush=True)
    by = {(r["round"], r["which"]): r["steps_per_s"] for r in rows}
    ratios = [by[k, "loop"] / by[k, "train"] for k in range(1, args.rounds + 1)]
    print(f"loop / train, per round: {', '.join(f'{x:.3f}' for x in ratios)} (mean {np.mean(ratios):.3f}); "
          f"{torch.get_num_threads()} torch threads")
    if args.save:
        save_results(args.save, rows, warmup=warmup, window=window, buffer_size=args.buffer_size,
                     rounds=args.rounds, preset="breakout-cpu", ratio_loop_over_train=ratios,
                     torch_threads=torch.get_num_threads())


if __name__ == "__main__":
    main()
