"""Updates per second of the fast path's DQN update, captured four ways, side by side in one run; and what the host
spends planning one update.

    python benchmarks/update_capture.py --device cuda --save data/bench/update-capture-gpu.json
    python benchmarks/update_capture.py --device cpu              # eager only (graphs need CUDA); the plan timing

The same update (gather from the device's frame bank, TD targets, Huber loss, backward, gradient-norm clipping,
Adam) on the same memory of random frames, from the same weights, run ``--updates`` times after a warm-up, two
updates per plan (8 envs, one update per 4 agent steps):

- ``eager``:       ``DeviceLearner(graph=False)``: one launch per operator;
- ``own-graph``:   ``DeviceLearner(graph=True)``: the course's own capture (warm-up on a side stream, snapshot and
  restore, ``torch.cuda.graph``);
- ``compile+own-graph``: ``DeviceLearner(graph=True, compile=True)``: the update through ``torch.compile``, then
  the own capture (``--compile-update true`` in a run);
- ``cudagraphmodule``: the same update function wrapped in tensordict's ``CudaGraphModule`` (LeanRL's way), Adam
  with ``capturable=True``;
- ``compile+cudagraphmodule``: that function through ``torch.compile`` first, then ``CudaGraphModule``.

A variant that cannot run here (no CUDA, no tensordict, a capture error) is reported with its error, not hidden.
``plan_us_per_update`` is the host's time to draw one update's slots, turn them into frame indices and start the
upload (``DeviceLearner.plan``), measured alone.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from dqn_course.agent import DQNAgent
from dqn_course.cleanup import exit_on_signals
from dqn_course.gpu_check import random_frames_memory
from dqn_course.lab.bench import save_results
from dqn_course.learner import DeviceLearner

PER_PLAN = 2  # updates due per vector step of 8 envs at one update per 4 agent steps


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_learner(learner: DeviceLearner, updates: int, warmup: int) -> float:
    """Updates/s of ``learner.learn(PER_PLAN)`` (planning included), after ``warmup`` updates."""
    for _ in range(warmup // PER_PLAN):
        learner.learn(PER_PLAN)
    sync(learner.device.type)
    t0 = time.perf_counter()
    for _ in range(updates // PER_PLAN):
        learner.learn(PER_PLAN)
    sync(learner.device.type)
    return updates // PER_PLAN * PER_PLAN / (time.perf_counter() - t0)


def time_module(learner: DeviceLearner, compile_first: bool, updates: int, warmup: int) -> float:
    """Updates/s of the learner's update as a plain function wrapped in tensordict's ``CudaGraphModule``."""
    from tensordict.nn import CudaGraphModule

    agent, bank = learner.agent, learner.frames
    learner._capturable_adam(learner.device.type == "cuda")

    def update(index, actions, rewards, dones):
        frames = bank[index]
        return agent.gradient_step(frames[:, :-1], actions, rewards, frames[:, 1:], dones)

    fn = torch.compile(update) if compile_first else update
    wrapped = CudaGraphModule(fn, warmup=3)
    sums = torch.zeros(3, device=learner.device)
    window = learner.memory.stack + 1

    def run(n: int) -> None:
        for _ in range(n // PER_PLAN):
            learner.memory.bank.flush()
            ints, floats = learner.plan(PER_PLAN)
            for u in range(PER_PLAN):
                sums.add_(wrapped(ints[u, :, :window], ints[u, :, window], floats[u, 0], floats[u, 1]))

    run(warmup)
    sync(learner.device.type)
    t0 = time.perf_counter()
    run(updates)
    sync(learner.device.type)
    return updates // PER_PLAN * PER_PLAN / (time.perf_counter() - t0)


def plan_us(learner: DeviceLearner, rounds: int) -> float:
    """Host microseconds per update of ``learner.plan`` (draw, window, upload), PER_PLAN updates at a time."""
    learner.plan(PER_PLAN)
    t0 = time.perf_counter()
    for _ in range(rounds):
        learner.plan(PER_PLAN)
    return (time.perf_counter() - t0) / (rounds * PER_PLAN) * 1e6


@exit_on_signals()  # SIGTERM and SIGHUP unwind like Ctrl-C
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--updates", type=int, default=None, help="timed updates per variant")
    parser.add_argument("--capacity", type=int, default=100_000, help="frames in the memory")
    parser.add_argument("--save", default="", help="also write the rows to this JSON file")
    args = parser.parse_args()
    device = args.device
    updates = args.updates or (2_000 if device == "cuda" else 20)
    memory = random_frames_memory(device, args.capacity)
    variants = {"eager": None, "own-graph": None}
    if device == "cuda":
        variants.update({"compile+own-graph": None, "cudagraphmodule": False, "compile+cudagraphmodule": True})
    rows = []
    for name, compile_first in variants.items():
        agent = DQNAgent(4, device, seed=1)
        learner = DeviceLearner(agent, memory, 32, graph="own-graph" in name and device == "cuda",
                                compile=name.startswith("compile"))
        row = {"variant": name, "device": device, "updates": updates}
        t0 = time.perf_counter()
        try:
            if compile_first is None:
                row["updates_per_s"] = time_learner(learner, updates, warmup=10)
            else:
                row["updates_per_s"] = time_module(learner, compile_first, updates, warmup=10)
        except Exception as error:  # a variant this machine cannot run is a result too
            row["error"] = f"{type(error).__name__}: {error}"[:500]
        row["wall_s"] = time.perf_counter() - t0
        if name == "eager":
            row["plan_us_per_update"] = plan_us(learner, rounds=500)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.save:
        gpu = torch.cuda.get_device_name() if device == "cuda" else "cpu"
        save_results(args.save, rows, device=device, gpu=gpu, capacity=args.capacity, per_plan=PER_PLAN,
                     torch_version=torch.__version__)


if __name__ == "__main__":
    main()
