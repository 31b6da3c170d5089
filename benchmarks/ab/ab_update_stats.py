"""A/B: what logging the updates' diagnostics costs the learner, side by side in one run. Prints one JSON line.

    git worktree add /tmp/before <commit before the diagnostics>
    python benchmarks/ab/ab_update_stats.py --before /tmp/before --save data/bench/update-stats-ab.jsonl

Each round times ``EagerLearner.learn`` (the loop's plain learner: sample a batch of 32, one update) in a fresh
interpreter under each tree (PYTHONPATH): "before" returns each update's loss as a number, "after" also sums the
mean max-Q and the gradient norm before clipping on the device and reads them once per ``--read-every`` updates,
as ``log.csv`` does once per game. Rounds alternate A and B so drift hits both; the best rate of each side is kept.
The same seeded memory of 8 envs' random 84x84 frames and the same network on the CPU, one torch thread per side.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from _tree import ab_parser, append_result, rate_in  # this folder's helpers (its folder is first on the path)

REPO = Path(__file__).resolve().parents[2]


def rate(seconds: float, read_every: int) -> float:
    """Updates per second over ``seconds`` (after 20 untimed updates), reading the learner's log values (whatever
    this tree's learner offers) once per ``read_every`` updates."""
    import torch

    from dqn_course.agent import DQNAgent
    from dqn_course.learner import EagerLearner
    from dqn_course.replay import MultiStreamMemory

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    n = 8
    memory = MultiStreamMemory(8_000, n, seed=0)
    state = rng.integers(0, 256, (n, 4, 84, 84), dtype=np.uint8)
    for t in range(600):
        nxt = np.concatenate([state[:, 1:], rng.integers(0, 256, (n, 1, 84, 84), dtype=np.uint8)], axis=1)
        ends = np.full(n, t % 200 == 199)
        memory.add_batch(state, rng.integers(0, 4, n), rng.choice([-1.0, 0.0, 1.0], n), nxt, ends, ends)
        state = nxt
    learner = EagerLearner(DQNAgent(4, seed=0), memory, 32)
    read = learner.diagnostics if hasattr(learner, "diagnostics") else learner.mean_loss  # after, before
    learner.learn(20, 0)
    read()
    done, t0 = 0, time.perf_counter()
    while True:
        learner.learn(1, 0)
        done += 1
        if done % read_every == 0:
            read()
            if time.perf_counter() - t0 >= seconds:
                return done / (time.perf_counter() - t0)


def child_rate(tree: Path, seconds: float, read_every: int) -> float:
    return rate_in(tree, __file__, "--seconds", str(seconds), "--read-every", str(read_every), one_thread=True)


def main() -> None:
    p = ab_parser(__doc__.split("\n")[0], rounds=5,
                  before_help="a checkout of the tree before the diagnostics (required)")
    p.add_argument("--seconds", type=float, default=4.0, help="timed seconds per round and side")
    p.add_argument("--read-every", type=int, default=50, help="updates between two reads (a game is ~50-200)")
    args = p.parse_args()
    if args.child:
        print(rate(args.seconds, args.read_every))
        return
    if args.before is None:
        p.error("--before: a checkout of the tree before the diagnostics is required")
    best = {"before": 0.0, "after": 0.0}
    for _ in range(args.rounds):
        for side, tree in (("before", args.before), ("after", REPO)):
            best[side] = max(best[side], child_rate(tree, args.seconds, args.read_every))
    row = {"before_updates_per_s": round(best["before"], 2), "after_updates_per_s": round(best["after"], 2),
           "cost_percent": round(100 * (best["before"] / best["after"] - 1), 2)}
    print(json.dumps(row))
    if args.save:
        append_result(args.save, "benchmarks/ab/ab_update_stats.py",
                      {"rounds": args.rounds, "seconds": args.seconds, "read_every": args.read_every, **row})


if __name__ == "__main__":
    main()
