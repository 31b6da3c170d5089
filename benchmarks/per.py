"""Prioritized replay's cost, side by side in one run.

    python benchmarks/per.py [--capacity 1000000] [--json]

1. Index selection at ``--capacity`` leaves (the tree part; no frames needed): batches of 32 per
   second for uniform draws, the per-item Python tree and the vectorised tree, each PER cycle
   being one stratified sample plus one priority update of the 32 drawn leaves.
2. The full learner step on the CPU (sample 32 real Breakout transitions, one gradient step, and
   for PER the priority update), uniform vs prioritized, over the same frame-sharing memory.
"""
from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from dqn_course import quick_mode
from dqn_course.agent import DQNAgent
from dqn_course.bench import calls_per_second
from dqn_course.envs import random_frames
from dqn_course.per import PrioritizedMemory
from dqn_course.per_demo import filled_trees
from dqn_course.replay import FrameSharingMemory


def tree_rates(capacity: int, seconds: float, batch: int = 32) -> dict[str, float]:
    rng = np.random.default_rng(0)
    _, fast, slow = filled_trees(capacity)

    def cycle(tree):
        def step():
            leaves = tree.sample(batch, rng)
            tree.update(leaves, rng.random(batch) + 0.01)
        return step

    return {"uniform": calls_per_second(lambda: rng.integers(0, capacity, batch), seconds),
            "per_item_tree": calls_per_second(cycle(slow), seconds),
            "vectorised_tree": calls_per_second(cycle(fast), seconds)}


def learner_step_ms(transitions: int, seconds: float) -> dict[str, float]:
    frames = random_frames(transitions, seed=0)
    uniform_mem = FrameSharingMemory(transitions + 100, seed=0)
    per_mem = PrioritizedMemory(FrameSharingMemory(transitions + 100, seed=0), seed=0)
    for t in frames:
        uniform_mem.add(*t)
        per_mem.add(*t)
    agent = DQNAgent(4, "cpu", seed=0)

    def uniform_step():
        agent.learn(uniform_mem.sample(32))

    def per_step():
        batch = per_mem.sample(32, beta=0.5)
        agent.learn(batch)
        per_mem.update_priorities(batch.indices, agent.last_td_errors)

    # Alternate short rounds so both see the same machine load.
    u, p = [], []
    for _ in range(3):
        u.append(calls_per_second(uniform_step, seconds / 3, rounds=1))
        p.append(calls_per_second(per_step, seconds / 3, rounds=1))
    return {"uniform": 1000 / np.mean(u), "prioritized": 1000 / np.mean(p)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args()
    small = quick_mode()
    tree = tree_rates(args.capacity, seconds=1.0 if small else 3.0)
    step = learner_step_ms(1_000 if small else 5_000, seconds=3.0 if small else 12.0)
    ratio_tree = tree["vectorised_tree"] / tree["per_item_tree"]
    ratio_step = step["prioritized"] / step["uniform"]
    if args.json:
        for name, r in tree.items():
            print(json.dumps({"part": "tree", "sampler": name, "capacity": args.capacity, "batches_per_s": r}))
        for name, ms in step.items():
            print(json.dumps({"part": "learner_step", "sampler": name, "ms_per_step": ms, "threads": torch.get_num_threads()}))
        print(json.dumps({"vectorised_over_per_item": ratio_tree, "per_step_over_uniform": ratio_step}))
        return
    print(f"index selection at capacity {args.capacity:,}, batch 32 (PER: sample + priority update)")
    for name, r in tree.items():
        print(f"  {name:<16} {r:>10,.0f} batches/s")
    print(f"  vectorised / per-item = {ratio_tree:.1f}x")
    print(f"learner step on the CPU ({torch.get_num_threads()} threads), real Breakout frames")
    for name, ms in step.items():
        print(f"  {name:<16} {ms:>10.2f} ms/step")
    print(f"  prioritized / uniform = {ratio_step:.3f}x")


if __name__ == "__main__":
    main()
