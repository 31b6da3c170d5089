"""A/B: what ``DQNAgent.act``'s input checks cost, side by side in one run. Prints one JSON line.

    git worktree add /tmp/before-act <commit before the checks>
    python benchmarks/ab/ab_act_checks.py --before /tmp/before-act --save data/bench/act-checks-ab.jsonl

Each round times ``act`` on a batch of 8 stacked states in a fresh interpreter under each tree (PYTHONPATH), so
everything that changed is in the comparison; rounds alternate A and B so drift hits both, and the best rate of each
side is kept. Two loads: ε = 1 (every action random: no forward, so the checks are the largest share act can have)
and ε = 0.05 (the training loop's usual case: one forward for the batch). A training step does the act and more
(the envs, storing, an update every 4 steps), so the cost relative to ``act`` bounds the cost relative to a step.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from _tree import ab_parser, append_result, rate_in  # this folder's helpers (its folder leads the import path)

REPO = Path(__file__).resolve().parents[2]

LOADS = {"random": 1.0, "greedy": 0.05}


def rate(epsilon: float, seconds: float) -> float:
    """act() calls per second on 8 states of shape (4, 84, 84), after 50 untimed calls; one torch thread."""
    import torch

    from dqn_course.agent import DQNAgent

    torch.set_num_threads(1)
    agent = DQNAgent(n_actions=4, device="cpu", seed=0)
    states = np.random.default_rng(0).integers(0, 255, (8, 4, 84, 84), dtype=np.uint8)
    for _ in range(50):
        agent.act(states, epsilon)
    calls, t0 = 0, time.perf_counter()
    while True:
        agent.act(states, epsilon)
        calls += 1
        if calls % 20 == 0 and time.perf_counter() - t0 >= seconds:
            return calls / (time.perf_counter() - t0)


def child_rate(tree: Path, load: str, seconds: float) -> float:
    return rate_in(tree, __file__, load, "--seconds", str(seconds), one_thread=True)


def main() -> None:
    p = ab_parser(__doc__.split("\n")[0], rounds=5, before_help="a checkout of the tree before the checks (required)",
                  loads=list(LOADS))
    p.add_argument("--seconds", type=float, default=3.0, help="timed seconds per round, side and load")
    args = p.parse_args()
    if args.child:
        print(rate(LOADS[args.child], args.seconds))
        return
    if args.before is None:
        p.error("--before is required: a checkout of the tree before the checks")
    best = {(side, load): 0.0 for side in ("before", "after") for load in LOADS}
    for _ in range(args.rounds):
        for load in LOADS:
            for side, tree in (("before", args.before), ("after", REPO)):
                best[side, load] = max(best[side, load], child_rate(tree, load, args.seconds))
    row = {"rounds": args.rounds, "seconds": args.seconds}
    for load in LOADS:
        before, after = best["before", load], best["after", load]
        row |= {f"before_act_{load}_per_s": round(before, 1), f"after_act_{load}_per_s": round(after, 1),
                f"cost_us_per_call_{load}": round((1 / after - 1 / before) * 1e6, 2),
                f"cost_percent_of_act_{load}": round((before / after - 1) * 100, 2)}
    print(json.dumps(row))
    if args.save:
        append_result(args.save, "benchmarks/ab/ab_act_checks.py", row)


if __name__ == "__main__":
    main()
