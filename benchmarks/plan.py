"""The host's time to plan the fast path's updates: draw each update's transitions, turn them into frame slots of
the bank, and start one upload (``DeviceLearner.plan``), in microseconds per update.

    python benchmarks/plan.py --save data/bench/plan-cpu.json       # on this machine (the CPU's own plan)
    python benchmarks/plan.py --device cuda --save data/bench/plan-gpu.json

At the goal rate (6,700 agent steps/s, one update per 4 agent steps: about 1,700 updates/s) the host has about
600 µs per update for everything it does; planning may take 150 µs of it (``BUDGET_US``). Measured side by side in
one run, on one memory of random frames in 8 streams:

- ``per-update``: what planning cost before it was vectorised, kept here as the reference: for each update,
  ``memory.draw`` (one multinomial over the streams, then each stream's own draw) and ``memory.window_at``
  (each stream's windows), then one upload;
- ``vectorised``: ``DeviceLearner.plan``: ``memory.draw_windows(k * B)``, one pass over the joint ring for all k
  updates, then one upload.

``k`` is the updates planned at once: 2 per vector step of 8 envs at one update per 4 agent steps (the
``breakout-fast`` preset), more with more envs.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from dqn_course.agent import DQNAgent
from dqn_course.cleanup import exit_on_signals
from dqn_course.lab.bench import save_results
from dqn_course.gpu_check import random_frames_memory
from dqn_course.learner import DeviceLearner

BUDGET_US = 150.0  # the host's share of one update's ~600 µs at the goal rate that planning may take
BATCH = 32


def per_update_plan(learner: DeviceLearner, k: int) -> None:
    """The reference: k separate draws, windows stream by stream, then one upload."""
    memory, B = learner.memory, learner.batch_size
    index = np.empty((k, B, memory.stack + 1), np.int64)
    scalars = np.empty((k, 3, B), np.float64)
    for u in range(k):
        index[u], *scalars[u] = memory.window_at(*memory.draw(B))
    learner._upload(index, scalars)


def microseconds_per_update(plan, k: int, seconds: float) -> float:
    """Host µs per update of ``plan(k)``, repeated for about ``seconds`` after one untimed call."""
    plan(k)
    rounds, t0 = 0, time.perf_counter()
    while rounds < 5 or time.perf_counter() - t0 < seconds:
        plan(k)
        rounds += 1
    return (time.perf_counter() - t0) / (rounds * k) * 1e6


@exit_on_signals()  # SIGTERM and SIGHUP unwind like Ctrl-C
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--capacity", type=int, default=100_000, help="frames in the memory (8 streams)")
    parser.add_argument("--ks", default="1,2,4,8", help="updates planned at once, comma-separated")
    parser.add_argument("--seconds", type=float, default=1.0, help="timing per row")
    parser.add_argument("--save", default="", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    memory = random_frames_memory(args.device, args.capacity)
    learner = DeviceLearner(DQNAgent(4, args.device, seed=1), memory, BATCH, graph=False)
    rows = []
    for k in (int(x) for x in args.ks.split(",")):
        times = {name: microseconds_per_update(plan, k, args.seconds)
                 for name, plan in (("per-update", lambda k: per_update_plan(learner, k)),
                                    ("vectorised", learner.plan))}
        for name, us in times.items():
            row = {"variant": name, "k": k, "batch_size": BATCH, "plan_us_per_update": us,
                   "within_budget": us < BUDGET_US}
            if name == "vectorised":
                row["speedup_over_per_update"] = times["per-update"] / us
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.save:
        save_results(args.save, rows, device=args.device, capacity=args.capacity, streams=len(memory.streams),
                     budget_us=BUDGET_US, torch_threads=torch.get_num_threads())


if __name__ == "__main__":
    main()
