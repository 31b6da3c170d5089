"""A worked answer to notebook 07c's exercise: a DQN training loop written from the course's pieces, one screen.

The notebook's *Solution* cell shows this function; the course's recorded capstone runs and
``benchmarks/capstone_loop.py`` run it, so what they measure is the answer a learner can read.

    python -m dqn_course.lab.capstone_solution runs/my-dqn              # breakout-cpu, seed 1; carries on if saved
    python -m dqn_course.lab.capstone_solution runs/my-dqn --seed 2 --minutes 30

Its argument ``minutes`` stops the loop after that much wall time (saving first), so a long run can be done in
sessions: calling it again with the same folder carries on from the last save. Ctrl-C (or the notebook's stop
button; SIGTERM or SIGHUP for the command) saves the steps finished so far, then stops; the step it interrupted is
played again after a resume.
"""
from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from dqn_course.contracts import check_module
from dqn_course.agent import td_loss as library_td_loss
from dqn_course.agent import td_targets as library_td_targets
from dqn_course.cleanup import exit_on_signals
from dqn_course.device import pick_device
from dqn_course.envs import make_breakout
from dqn_course.lab.capstone import Run, settings, to_tensors
from dqn_course.networks import NatureCNN
from dqn_course.replay import FrameSharingMemory
from dqn_course.train import Config, linear_epsilon


def dqn_loop(cfg: Config, folder: str | Path, td_targets: Callable = library_td_targets,
             td_loss: Callable = library_td_loss, epsilon_schedule: Callable = linear_epsilon,
             minutes: float | None = None) -> int:
    """Train a DQN on Breakout with ``cfg`` into ``folder`` (carrying on from its newest save); returns the last
    step. ``td_targets``, ``td_loss`` and ``epsilon_schedule`` take the arguments of notebooks 06 and 07's."""
    device = pick_device(cfg.device or None)
    env = make_breakout(seed=cfg.seed)
    n_actions = int(env.action_space.n)
    q = NatureCNN(n_actions).to(device)
    target = copy.deepcopy(q).requires_grad_(False)
    optimizer = torch.optim.Adam(q.parameters(), lr=cfg.lr)
    memory = FrameSharingMemory(cfg.buffer_size, seed=cfg.seed)
    rng = np.random.default_rng(cfg.seed)  # the ε draws
    run = Run(folder, cfg)
    step = run.resume(q, target, optimizer, memory, rng)
    state, _ = env.reset(seed=cfg.seed + step)  # a resumed run starts a new game, not the same one again
    score, length = 0.0, 0
    decay_steps = max(1, int(cfg.eps_fraction * cfg.total_steps))
    deadline = time.monotonic() + 60 * minutes if minutes else float("inf")
    try:
        while step < cfg.total_steps and time.monotonic() < deadline:
            t = step + 1  # the step in progress; `step` counts the finished ones (what a save records)
            # act ε-greedily
            epsilon = epsilon_schedule(t, cfg.eps_start, cfg.eps_end, decay_steps)
            if rng.random() < epsilon:
                action = int(rng.integers(n_actions))
            else:
                with torch.no_grad():
                    action = int(q(torch.as_tensor(state, device=device)[None]).argmax())
            next_state, reward, terminated, truncated, info = env.step(action)
            # store: clipped reward; a lost life ends the episode for the target, not the game
            memory.add(state, action, np.sign(reward), next_state, done=terminated or info["life_lost"],
                       episode_end=terminated or truncated)
            score, length, state = score + reward, length + 1, next_state
            if terminated or truncated:
                run.game_over(t, score, length, epsilon, len(memory))
                state, _ = env.reset()
                score, length = 0.0, 0
            # learn: one update per train_every steps, from a uniformly sampled batch
            if t >= cfg.learning_starts and t % cfg.train_every == 0:
                batch = to_tensors(memory.sample(cfg.batch_size), device)
                targets = td_targets(batch.rewards, batch.dones, batch.next_states, q, target, cfg.gamma,
                                     cfg.double)
                q_values = q(batch.states)
                loss = td_loss(q_values, batch.actions, targets)
                optimizer.zero_grad()
                loss.backward()
                norm = torch.nn.utils.clip_grad_norm_(q.parameters(), cfg.max_grad_norm)
                optimizer.step()
                run.updated(loss, q_values, norm)
            if t % cfg.target_sync_every == 0:
                target.load_state_dict(q.state_dict())
            if t % cfg.eval_every == 0 or t == cfg.total_steps:
                run.evaluate(t, q)
            step = t
            if run.save_due():
                run.save(step, q, target, optimizer, memory, rng)
    finally:  # the end, the deadline, Ctrl-C or an error: keep what was learned
        run.save(step, q, target, optimizer, memory, rng)
        run.close()
        env.close()
    return step


@exit_on_signals()  # SIGTERM and SIGHUP unwind like Ctrl-C: the loop's `finally` saves before the exit
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dqn_course.lab.capstone_solution",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("folder", help="the run folder (carried on from its newest save when it holds one)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=None, help="stop (saving first) after this wall time")
    parser.add_argument("--quick", action="store_true", help="the quick settings (a smoke run)")
    args = parser.parse_args(argv)
    cfg = settings(quick=args.quick, seed=args.seed, out_dir=args.folder)
    t0 = time.perf_counter()
    step = dqn_loop(cfg, args.folder, minutes=args.minutes)
    print(f"{'done' if step >= cfg.total_steps else 'stopped'} at step {step:,} of {cfg.total_steps:,} after "
          f"{time.perf_counter() - t0:,.0f} s; run folder {args.folder}", flush=True)


if __name__ == "__main__":
    main()


check_module(globals())
