"""Prioritized replay's cost, side by side in one run.

    python benchmarks/per.py [--capacity 1000000] [--threads N] [--json] [--out PATH]

1. Index selection at ``--capacity`` leaves (the tree part; no frames needed): batches of 32 per
   second for uniform draws and for the PER cycle (one stratified sample plus one priority update of
   the 32 drawn leaves) on the per-item Python tree, the numpy tree and the compiled (numba) tree.
   The trees take turns in short rounds, best of five each, so all see the same machine load.
2. What checking the compiled tree's arguments costs a user's call: microseconds per ``get`` and ``update`` of
   ``BATCH`` leaves called from here (outside the package, so the arguments are checked) and of their bodies alone
   (the functions the checks wrap), in turns, best of five.
3. The full learner step on the CPU (sample 32 real Breakout transitions, one gradient step, and
   for PER the priority update through ``PrioritizedMemory``'s default tree), uniform vs prioritized,
   over the same frames, one step of each in turn (median ms per step). ``--threads`` sets torch's CPU threads:
   on a machine whose cores are busy with other work, 2-thread steps can stall waiting for a descheduled thread
   and take several times longer; 1 thread is steadier there.

Results are saved to ``data/bench/per.json`` (not in quick mode).
"""
from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from dqn_course import quick_mode
from dqn_course.agent import DQNAgent
from dqn_course.cleanup import exit_on_signals
from dqn_course.envs import random_frames
from dqn_course.lab.bench import environment_info, save_results, timeit
from dqn_course.lab.per_demo import filled_trees, interleaved_ms
from dqn_course.per import CompiledSumTree, PrioritizedMemory
from dqn_course.replay import FrameSharingMemory

ROOT = Path(__file__).resolve().parents[1]
BATCH = 32
TREES = ("per_item", "numpy", "compiled")


def best_of_alternating(fns: dict, seconds: float, rounds: int = 5) -> dict[str, float]:
    """Calls per second of each function, best of ``rounds`` rounds taken in turn (same load for all).

    Each function's turn in a round lasts ``seconds / rounds`` (``timeit``, after one warm-up call each).
    """
    stats = timeit(fns, min_seconds=0.0, rounds=rounds, turn_seconds=seconds / rounds)
    return {name: 1e3 / s["best_ms"] for name, s in stats.items()}


def tree_rates(capacity: int, seconds: float) -> dict[str, float]:
    """Batches/s: uniform index draws, and sample + update on each tree over the same priorities."""
    rng = np.random.default_rng(0)
    _, trees = filled_trees(capacity)

    def cycle(tree):
        def step():
            leaves = tree.sample(BATCH, rng)
            tree.update(leaves, rng.random(BATCH) + 0.01)
        return step

    fns = {"uniform": lambda: rng.integers(0, capacity, BATCH), **{k: cycle(trees[k]) for k in TREES}}
    return best_of_alternating(fns, seconds)  # timeit's warm-up call keeps any first-call cost out


def check_costs(capacity: int, seconds: float) -> dict[str, dict[str, float]]:
    """Per call of ``CompiledSumTree.get`` and ``update`` on a batch of leaves: µs checked (called from this
    script, outside the package) and for the body alone, and their ratio."""
    rng = np.random.default_rng(1)
    tree = CompiledSumTree(capacity)
    tree.update(np.arange(capacity), rng.random(capacity) + 0.01)
    leaves, values = tree.sample(BATCH, rng), rng.random(BATCH) + 0.01
    get, update = inspect.unwrap(CompiledSumTree.get), inspect.unwrap(CompiledSumTree.update)
    fns = {("get", "checked"): lambda: tree.get(leaves), ("get", "body"): lambda: get(tree, leaves),
           ("update", "checked"): lambda: tree.update(leaves, values),
           ("update", "body"): lambda: update(tree, leaves, values)}
    us = {k: 1e3 * s["best_ms"] for k, s in timeit(fns, min_seconds=0.0, rounds=5,
                                                   turn_seconds=seconds / 20).items()}
    return {call: {"checked_us": us[call, "checked"], "body_us": us[call, "body"],
                   "checked_over_body": us[call, "checked"] / us[call, "body"]} for call in ("get", "update")}


def learner_step_ms(transitions: int, seconds: float) -> dict[str, float]:
    """Median milliseconds per learner step, uniform and prioritized (default tree), over the same frames."""
    frames = random_frames(transitions, seed=0)
    uniform_mem = FrameSharingMemory(transitions + 100, seed=0)
    per_mem = PrioritizedMemory(FrameSharingMemory(transitions + 100, seed=0), seed=0)
    for t in frames:
        uniform_mem.add(*t)
        per_mem.add(*t)
    agent = DQNAgent(4, "cpu", seed=0)

    def uniform_step():
        agent.learn(uniform_mem.sample(BATCH))

    def per_step():
        batch = per_mem.sample(BATCH, beta=0.5)
        agent.learn(batch)
        per_mem.update_priorities(batch.indices, agent.last_td_errors)

    return interleaved_ms({"uniform": uniform_step, "prioritized": per_step}, seconds)


@exit_on_signals()  # SIGTERM and SIGHUP unwind like Ctrl-C, so the clean-ups run
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--capacity", type=int, default=1_000_000, help="leaves in the timed trees")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads for the learner step "
                        "(default: torch's own choice)")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--out", type=Path, default=None,
                        help="where to save the rows (default data/bench/per.json; quick mode: not saved)")
    args = parser.parse_args()
    if args.capacity < BATCH:
        parser.error(f"--capacity must be at least the batch size, {BATCH}")
    if args.threads is not None:
        if args.threads < 1:
            parser.error("--threads must be at least 1")
        torch.set_num_threads(args.threads)
    small = quick_mode()
    t0 = time.perf_counter()
    tree = tree_rates(args.capacity, seconds=1.5 if small else 6.0)
    checks = check_costs(args.capacity, seconds=1.0 if small else 4.0)
    step = learner_step_ms(1_000 if small else 5_000, seconds=3.0 if small else 12.0)
    seconds = time.perf_counter() - t0
    threads = torch.get_num_threads()
    rows = [{"part": "tree", "sampler": name, "capacity": args.capacity, "batch_size": BATCH, "batches_per_s": r,
             **({"over_per_item": r / tree["per_item"]} if name in TREES else {})} for name, r in tree.items()]
    rows += [{"part": "checks", "call": f"CompiledSumTree.{call}", "batch_size": BATCH, **c}
             for call, c in checks.items()]
    rows += [{"part": "learner_step", "sampler": name, "tree": "compiled" if name == "prioritized" else None,
              "ms_per_step": ms, "threads": threads} for name, ms in step.items()]
    ratios = {"numpy_over_per_item": tree["numpy"] / tree["per_item"],
              "compiled_over_per_item": tree["compiled"] / tree["per_item"],
              "per_step_over_uniform": step["prioritized"] / step["uniform"],
              **{f"checked_{call}_over_body": c["checked_over_body"] for call, c in checks.items()}}
    if args.json:
        for row in rows:
            print(json.dumps(row))
        print(json.dumps(ratios))
    else:
        print(f"index selection at capacity {args.capacity:,}, batch {BATCH} (PER: sample + priority update)")
        for name, r in tree.items():
            vs = f"  {r / tree['per_item']:6.1f}x per-item" if name in TREES else ""
            print(f"  {name:<16} {r:>10,.0f} batches/s  ({1e6 / r:7.1f} µs){vs}")
        print(f"checked calls of the compiled tree from user code, {BATCH} leaves (best of 5 turns)")
        for call, c in checks.items():
            print(f"  {call:<16} {c['checked_us']:>7.2f} µs checked, {c['body_us']:.2f} µs body alone: "
                  f"{c['checked_over_body']:.2f}x")
        print(f"learner step on the CPU ({threads} threads), real Breakout frames, PER on the compiled tree "
              "(median of interleaved steps)")
        for name, ms in step.items():
            print(f"  {name:<16} {ms:>10.2f} ms/step")
        print(f"  prioritized / uniform = {ratios['per_step_over_uniform']:.3f}x")
        env = environment_info()
        print(f"\n{seconds:.0f} s on {env['cpu_count']} cores; 1-min load average {env['load_avg_1min']}")
    out = args.out or (None if small else ROOT / "data/bench/per.json")
    if out:
        save_results(out, rows + [ratios], capacity=args.capacity, batch_size=BATCH, threads=threads, quick=small,
                     seconds=round(seconds, 1))
        print(f"rows saved to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
