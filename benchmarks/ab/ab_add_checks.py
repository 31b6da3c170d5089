"""A/B: what add_batch's input checks cost, side by side in one run. Prints one JSON line.

    python benchmarks/ab/ab_add_checks.py                     # in-process: the stack checks on vs off
    git worktree add /tmp/before <commit before the checks>
    python benchmarks/ab/ab_add_checks.py --before /tmp/before   # every check: that tree vs this one

In-process, ``FrameSharingMemory._check_continuity`` switches the two stack comparisons (next_state continues
state; a mid-episode state equals the stored one) off for the "off" rounds; the flag and reward checks stay on.
With ``--before`` each round times the same loop in a fresh interpreter under each tree (PYTHONPATH), so
everything that changed is in the comparison. Rounds alternate A and B so drift hits both; the best
rate of each side is kept. 8 envs of 84x84 frames, an episode end every 400 steps, prefaulted memory.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from _tree import ab_parser, append_result, rate_in  # this folder's helpers (its folder is first on the path)

REPO = Path(__file__).resolve().parents[2]


def rate(seconds: float, check: bool | None = None) -> float:
    """add_batch calls per second over ``seconds`` (after one untimed pass of 200 steps)."""
    from dqn_course.replay import FrameSharingMemory, MultiStreamMemory

    if check is not None:
        FrameSharingMemory._check_continuity = check
    rng = np.random.default_rng(0)
    n = 8
    pool = rng.integers(0, 2, (1000, 84, 84), dtype=np.uint8) * 100
    memory = MultiStreamMemory(40_000, n, seed=0, prefault=True)
    state = np.stack([np.stack([pool[0]] * 4)] * n)
    actions, rewards = np.zeros(n, np.int64), np.zeros(n)
    t, timed, t0 = 0, 0, None
    while True:
        if t == 200:
            t0 = time.perf_counter()
        nxt = np.concatenate([state[:, 1:], pool[(t * n + np.arange(n)) % 1000][:, None]], axis=1)
        ends = np.full(n, t % 400 == 399)
        memory.add_batch(state, actions, rewards, nxt, ends, ends)
        state = np.stack([np.stack([pool[(t + 1) % 1000]] * 4)] * n) if ends[0] else nxt
        t += 1
        if t0 is not None:
            timed += 1
            if timed % 50 == 0 and time.perf_counter() - t0 >= seconds:
                return timed / (time.perf_counter() - t0)


def child_rate(tree: Path, seconds: float) -> float:
    return rate_in(tree, __file__, "--seconds", str(seconds))


def main() -> None:
    p = ab_parser(__doc__.split("\n")[0], rounds=5,
                  before_help="a checkout of the tree to compare with (else: in-process toggle)")
    p.add_argument("--seconds", type=float, default=3.0, help="timed seconds per round and side")
    args = p.parse_args()
    if args.child:
        print(rate(args.seconds))
        return
    best = {"a": 0.0, "b": 0.0}
    for _ in range(args.rounds):
        for side in ("a", "b"):
            if args.before:
                r = child_rate(args.before if side == "a" else REPO, args.seconds)
            else:
                r = rate(args.seconds, check=side == "b")
            best[side] = max(best[side], r)
    label = ("before", "after") if args.before else ("stack_checks_off", "stack_checks_on")
    row = {f"{label[0]}_add_batch8_per_s": round(best["a"], 1), f"{label[1]}_add_batch8_per_s": round(best["b"], 1),
           "cost_percent": round(100 * (best["a"] / best["b"] - 1), 2)}
    print(json.dumps(row))
    if args.save:
        append_result(args.save, "benchmarks/ab/ab_add_checks.py",
                      {"rounds": args.rounds, "seconds": args.seconds, **row})


if __name__ == "__main__":
    main()
