"""A/B: the training loop's speed under two source trees (before and after a change to it), side by side in one run.

    git worktree add /tmp/before <commit before the change>
    python benchmarks/ab/ab_train_loop.py --before /tmp/before --save data/bench/train-loop-ab.jsonl

Each round runs ``train.train`` on the quick preset (one env, the plain learner, replay in RAM; evaluations and
checkpoints only at the end, which the learning rate leaves out) in a fresh interpreter under each tree
(PYTHONPATH), and reads its ``learning_steps_per_s``: agent steps per second from the first update on, acting,
storing and learning together. Rounds alternate A and B so drift hits both; the best rate of each side is kept.
One torch thread per side. The same seed gives both trees the same games, so they do the same work.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _tree import rate_in  # this folder's helper (a script's folder is first on the import path)

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
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--before", type=Path, help="a checkout of the tree before the change (required)")
    p.add_argument("--steps", type=int, default=3_000, help="agent steps per run (updates from step 500 on)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--save", type=Path, help="append the result, with the command and machine, to this JSON-lines file")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(rate(args.steps))
        return
    if args.before is None:
        p.error("--before: a checkout of the tree before the change is required")
    rates: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        for side, tree in (("before", args.before), ("after", REPO)):
            rates[side].append(rate_in(tree, __file__, "--steps", str(args.steps), one_thread=True))
    best = {side: max(r) for side, r in rates.items()}
    row = {"before_steps_per_s": round(best["before"], 1), "after_steps_per_s": round(best["after"], 1),
           "after_over_before": round(best["after"] / best["before"], 3),
           **{f"rounds_{side}": [round(r, 1) for r in r_side] for side, r_side in rates.items()}}
    print(json.dumps(row))
    if args.save:
        from dqn_course.lab.bench import environment_info

        trees = {side: subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                                      text=True).stdout.strip()
                 for side, tree in (("before", args.before), ("after", REPO))}
        row = {"command": " ".join(["benchmarks/ab/ab_train_loop.py"] + sys.argv[1:]), "rounds": args.rounds,
               "steps": args.steps, "before_commit": trees["before"], "after_commit": trees["after"],
               "after_uncommitted_changes": bool(subprocess.run(  # in the package measured
                   ["git", "-C", str(REPO), "status", "--porcelain", "dqn_course"], capture_output=True,
                   text=True).stdout.strip()),
               **row, "environment": environment_info()}
        with open(args.save, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
