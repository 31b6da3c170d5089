"""A/B: the training loop's speed under two source trees (before and after a change to it), side by side in one run.

    git worktree add /tmp/before <commit before the change>
    python benchmarks/ab/ab_train_loop.py --before /tmp/before --save data/bench/train-loop-ab.jsonl

Each round runs ``train.train`` on the quick preset (one env, the plain learner, replay in RAM; evaluations and
checkpoints only at the end, which the learning rate leaves out) in a fresh interpreter under each tree
(PYTHONPATH), and reads its ``learning_steps_per_s``: agent steps per second from the first update on, acting,
storing and learning together. Rounds alternate the order (before-after, then after-before) so drift and order
hit both sides alike; each side's rounds are kept, and its best. One torch thread per side. The same seed gives
both trees the same games, so they do the same work.
"""
from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from _tree import ab_parser, append_result, rate_in  # this folder's helpers (its folder is first on the path)

REPO = Path(__file__).resolve().parents[2]


def rate(steps: int) -> float:
    """``learning_steps_per_s`` of a quick-preset run of ``steps`` agent steps, in a temporary folder."""
    import dataclasses

    import torch

    from dqn_course.train import PRESETS, train

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as out:
        cfg = dataclasses.replace(PRESETS["quick"], total_steps=steps, learning_starts=500, eval_every=steps,
                                  checkpoint_every=steps, out_dir=out, progress=False, prefault=False)
        return train(cfg)["learning_steps_per_s"]


def main() -> None:
    p = ab_parser(__doc__.split("\n")[0], rounds=3)
    p.add_argument("--steps", type=int, default=3_000, help="agent steps per run (updates from step 500 on)")
    args = p.parse_args()
    if args.child:
        print(rate(args.steps))
        return
    if args.before is None:
        p.error("--before: a checkout of the tree before the change is required")
    rates: dict[str, list[float]] = {"before": [], "after": []}
    sides = [("before", args.before), ("after", REPO)]
    for i in range(args.rounds):
        for side, tree in sides if i % 2 == 0 else sides[::-1]:  # ABBA: neither side always runs first
            rates[side].append(rate_in(tree, __file__, "--steps", str(args.steps), one_thread=True))
    best = {side: max(r) for side, r in rates.items()}
    row = {"before_steps_per_s": round(best["before"], 1), "after_steps_per_s": round(best["after"], 1),
           "after_over_before": round(best["after"] / best["before"], 3),
           **{f"rounds_{side}": [round(r, 1) for r in r_side] for side, r_side in rates.items()}}
    print(json.dumps(row))
    if args.save:
        commits = {side: git(tree, "rev-parse", "--short", "HEAD") for side, tree in sides}
        append_result(args.save, "benchmarks/ab/ab_train_loop.py", {
            "rounds": args.rounds, "steps": args.steps, "order": "alternating, before first in odd rounds",
            "before_commit": commits["before"], "after_commit": commits["after"],
            "after_uncommitted_changes": bool(git(REPO, "status", "--porcelain", "dqn_course")),  # the code measured
            **row})


def git(tree: Path, *args: str) -> str:
    """What ``git -C tree args`` prints, stripped."""
    return subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
