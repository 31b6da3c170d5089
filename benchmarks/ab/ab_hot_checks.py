"""A/B: what the input checks on the training step's hot paths cost, with and without them, in one run.

    python benchmarks/ab/ab_hot_checks.py --save data/bench/hot-checks-ab.jsonl

The hot paths are the calls a training step makes: ``DQNAgent.act``, the memory's ``add_batch``, and with
prioritized replay ``PrioritizedMemory.sample`` and ``update_priorities``. Side A runs this tree as it is; side B
runs the same tree with the checks on those paths replaced by no-ops (``without_checks``: the argument checks every
public callable makes at its edge, ``dqn_course.contracts``, and the bodies' own checks). Each measurement runs in a
fresh interpreter, one torch thread, the two sides alternating (A-B, then B-A) so drift hits both; each keeps its best
round.

Per call, each path is timed alone on a quick-preset-sized memory (1 env, 84x84 frames), by
``dqn_course.lab.bench.calls_per_second`` (best of three turns): the checks' cost in µs per call is the difference of
the two sides. A training step makes one ``act`` and one ``add_batch``, and one sample and
one priority update per ``train_every`` steps: the checks' cost per step is the sum of those costs times those
counts, and its share of a step divides it by the time of a step, measured by ``train`` itself (quick preset with
prioritized replay, agent steps per second from the first update on). ``train`` is also timed under both sides; at
this machine's noise that ratio only bounds the cost, the per-call sum is the measurement.
"""
from __future__ import annotations

import json
from pathlib import Path

from _tree import ab_parser, append_result, rate_in  # this folder's helpers (its folder is first on the path)

REPO = Path(__file__).resolve().parents[2]
PATHS = ("act", "add_batch", "sample", "update_priorities")
OBS = (4, 84, 84)


def without_checks() -> None:
    """Replace the input checks of the hot paths by no-ops, in this interpreter: every argument check at the
    package's edge (``dqn_course.contracts``' wrappers, taken off every loaded module and class) and the bodies'
    own checks (each a function of its own, so the switch names them, and fails if one is renamed)."""
    import sys

    import numpy as np

    from dqn_course import per
    from dqn_course.agent import DQNAgent
    from dqn_course.replay import base, frame_sharing, multi_stream

    def unwrapped(member):
        func = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
        if not getattr(func, "__checked__", False):
            return None
        return type(member)(func.__wrapped__) if isinstance(member, (staticmethod, classmethod)) else func.__wrapped__

    for module in [m for name, m in sys.modules.items() if name.startswith("dqn_course")]:
        for name, obj in list(vars(module).items()):
            if (bare := unwrapped(obj)) is not None:
                setattr(module, name, bare)
            elif isinstance(obj, type) and obj.__module__ == module.__name__:
                for attr, member in list(vars(obj).items()):
                    if (bare := unwrapped(member)) is not None:
                        setattr(obj, attr, bare)
    DQNAgent._check_act = lambda self, states, epsilon: None
    multi_stream.MultiStreamMemory._check_add_batch = lambda self, *args: None
    frame_sharing.FrameSharingMemory._checked = lambda self, state, action, reward, next_state: (
        state, action, reward, next_state)
    frame_sharing.FrameSharingMemory._check_flag = lambda self, name, value: value
    frame_sharing.check_stack_shift = lambda *args: None
    base.ReplayMemory._check_batch_size = lambda self, batch_size: None
    per.check_arg = lambda *args, **kwargs: None
    per.PrioritizedMemory._check_update = lambda self, indices, td_errors: None
    per.check_leaves = lambda name, values, integer=False, non_negative=True, any_shape=False: np.ascontiguousarray(
        values, np.int64 if integer else np.float64)


def path_rate(path: str, seconds: float) -> float:
    """Calls per second of one hot path, on a 10,000-frame memory of one stream (the quick preset's)."""
    import itertools

    import numpy as np
    import torch

    from dqn_course.agent import DQNAgent
    from dqn_course.lab.bench import calls_per_second
    from dqn_course.per import PrioritizedMemory
    from dqn_course.replay import MultiStreamMemory

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (4_000, 84, 84), dtype=np.uint8)
    T = len(frames) - 5

    def transition(i: int):  # stream 1's i-th transition: state i, next state shifted by one frame
        t = i % T
        return frames[None, t:t + 4], frames[None, t + 1:t + 5], t == T - 1

    memory = MultiStreamMemory(10_000, 1, OBS, seed=0)
    if path == "add_batch":
        step = itertools.count()

        def add() -> None:
            i = next(step)
            s, s2, end = transition(i)
            memory.add_batch(s, [i % 4], [0.0], s2, dones=[end], episode_ends=[end])
        return calls_per_second(add, seconds)
    if path == "act":
        agent, states = DQNAgent(4, "cpu", seed=0), frames[None, :4]
        return calls_per_second(lambda: agent.act(states, 1.0), seconds)  # ε = 1: no forward, the checks' largest share
    for i in range(T):
        s, s2, end = transition(i)
        memory.add_batch(s, [i % 4], [0.0], s2, dones=[end], episode_ends=[end])
    prioritized = PrioritizedMemory(memory, seed=0)
    if path == "sample":
        return calls_per_second(lambda: prioritized.sample(32, beta=0.5), seconds)
    batch = prioritized.sample(32, beta=0.5)
    errors = rng.random(32).astype(np.float32)
    return calls_per_second(lambda: prioritized.update_priorities(batch.indices, errors), seconds)


def step_rate(steps: int) -> float:
    """``learning_steps_per_s`` of a quick-preset run with prioritized replay, in a temporary folder."""
    import dataclasses
    import tempfile

    import torch

    from dqn_course.train import PRESETS, train

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as out:
        cfg = dataclasses.replace(PRESETS["quick"], total_steps=steps, learning_starts=500, eval_every=steps,
                                  checkpoint_every=steps, out_dir=out, progress=False, prefault=False, per=True)
        return train(cfg)["learning_steps_per_s"]


def main() -> None:
    p = ab_parser(__doc__.split("\n")[0], rounds=3, loads=[f"{side}:{what}" for side in ("with", "without")
                                                            for what in (*PATHS, "step")])
    p.add_argument("--seconds", type=float, default=2.0, help="timed seconds per path, round and side")
    p.add_argument("--steps", type=int, default=3_000, help="agent steps of each timed train() run")
    args = p.parse_args()
    if args.child:
        side, what = args.child.split(":")
        if side == "without":
            without_checks()
        print(step_rate(args.steps) if what == "step" else path_rate(what, args.seconds))
        return
    from dqn_course.config import PRESETS

    best = {(side, what): 0.0 for side in ("with", "without") for what in (*PATHS, "step")}
    for r in range(args.rounds):
        for what in (*PATHS, "step"):
            for side in ("with", "without") if r % 2 == 0 else ("without", "with"):
                extra = ["--steps", str(args.steps)] if what == "step" else ["--seconds", str(args.seconds)]
                best[side, what] = max(best[side, what],
                                       rate_in(REPO, __file__, f"{side}:{what}", *extra, one_thread=True))
    every = PRESETS["quick"].train_every
    per_step = {"act": 1.0, "add_batch": 1.0, "sample": 1 / every, "update_priorities": 1 / every}
    row: dict = {"rounds": args.rounds, "seconds": args.seconds, "steps": args.steps, "train_every": every}
    cost_per_step_us = 0.0
    for what in PATHS:
        cost = (1 / best["with", what] - 1 / best["without", what]) * 1e6
        cost_per_step_us += cost * per_step[what]
        row |= {f"{what}_per_s_with": round(best["with", what], 1),
                f"{what}_per_s_without": round(best["without", what], 1), f"{what}_check_us": round(cost, 2)}
    step_us = 1e6 / best["with", "step"]
    row |= {"step_per_s_with": round(best["with", "step"], 1), "step_per_s_without": round(best["without", "step"], 1),
            "checks_us_per_step": round(cost_per_step_us, 2), "step_us": round(step_us, 1),
            "checks_percent_of_step": round(100 * cost_per_step_us / step_us, 3)}
    print(json.dumps(row))
    if args.save:
        append_result(args.save, "benchmarks/ab/ab_hot_checks.py", row)


if __name__ == "__main__":
    main()
