"""Train DQN on Breakout: the whole loop on one screen, hyperparameters in one dataclass.

    python -m dqn_course.train --preset quick          # ~30 s on a laptop CPU: does it run?
    python -m dqn_course.train --preset breakout       # Nature/CleanRL settings, 10M steps: use a GPU
    python -m dqn_course.train --preset breakout-fast  # same learning problem: 8 C++ envs, replay on the GPU

Any field of ``Config`` can be overridden: ``--total-steps 200000 --double true``.
Writes ``log.csv`` (one row per finished game), ``eval.csv`` and ``checkpoint.pt`` into ``out_dir``.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from dqn_course.agent import DQNAgent
from dqn_course.device import pick_device
from dqn_course.envs import make_breakout, make_vector_envs
from dqn_course.per import PrioritizedMemory, beta_at
from dqn_course.profiling import rss_bytes
from dqn_course.replay import MultiStreamMemory


@dataclass
class Config:
    """Defaults are the ``breakout`` preset: the Nature DQN / CleanRL ``dqn_atari`` settings."""

    total_steps: int = 10_000_000  # agent steps (x4 frames)
    buffer_size: int = 1_000_000  # frames in the frame-sharing replay memory
    lr: float = 1e-4
    gamma: float = 0.99
    batch_size: int = 32
    target_sync_every: int = 1_000
    eps_start: float = 1.0
    eps_end: float = 0.01
    eps_fraction: float = 0.10  # ε decays linearly over this fraction of total_steps
    learning_starts: int = 80_000
    train_every: int = 4
    double: bool = False
    max_grad_norm: float = 10.0
    eval_every: int = 250_000
    eval_episodes: int = 10
    eval_epsilon: float = 0.05
    eval_max_steps: int = 27_000  # agent steps per evaluation game (the ALE's 108k-frame limit)
    checkpoint_every: int = 100_000
    seed: int = 1
    device: str = ""  # "" picks CUDA when available
    num_envs: int = 1  # agent steps are counted across all envs; updates stay one per train_every of them
    env_backend: str = "gymnasium"  # "gymnasium" (envs stepped in Python) or "ale" (AtariVectorEnv, C++ threads)
    replay_on_device: bool = False  # keep replay frames on the training device (1M frames = 7 GB of GPU memory)
    per: bool = False  # prioritized replay (proportional, Schaul et al. 2016)
    per_alpha: float = 0.6
    per_beta0: float = 0.4  # importance-sampling exponent, annealed to 1 over the run
    out_dir: str = "runs/breakout"
    prefault: bool = True  # touch the replay memory's pages at start: fail now, not in hour 5
    progress: bool = True


PRESETS: dict[str, Config] = {
    "breakout": Config(),
    "breakout-fast": Config(num_envs=8, env_backend="ale", replay_on_device=True, out_dir="runs/breakout-fast"),
    "quick": Config(total_steps=3_000, buffer_size=10_000, learning_starts=500, target_sync_every=250,
                    eps_fraction=0.5, eval_every=1_500, eval_episodes=2, eval_max_steps=300, checkpoint_every=1_000,
                    out_dir="runs/quick"),
}


def epsilon_at(step: int, cfg: Config) -> float:
    """Linear decay from eps_start to eps_end over eps_fraction of the run, then flat."""
    span = max(1, int(cfg.eps_fraction * cfg.total_steps))
    return cfg.eps_end + (cfg.eps_start - cfg.eps_end) * max(0.0, 1.0 - step / span)


def evaluate(agent: DQNAgent, cfg: Config, episodes: int) -> list[float]:
    """Whole-game returns (unclipped) of the ε-greedy policy with ε = eval_epsilon."""
    env = make_breakout(seed=cfg.seed + 10_000, max_episode_steps=cfg.eval_max_steps)
    returns = []
    for _ in range(episodes):
        state, _ = env.reset()
        while True:
            state, _, terminated, truncated, info = env.step(int(agent.act(state, cfg.eval_epsilon)[0]))
            if terminated or truncated:
                returns.append(float(info["episode"]["r"]))
                break
    env.close()
    return returns


def save_checkpoint(path: Path, agent: DQNAgent, cfg: Config, step: int) -> None:
    """Write to a temporary file, then rename: a crash mid-write never leaves a half checkpoint."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save({"agent": agent.state_dict(), "config": dataclasses.asdict(cfg), "step": step}, tmp)
    os.replace(tmp, path)


class CsvLog:
    """Append rows to a CSV file, flushing each so a killed run keeps its log."""

    def __init__(self, path: Path, fields: list[str]):
        self.file = open(path, "w", newline="")
        self.writer = csv.DictWriter(self.file, fields)
        self.writer.writeheader()

    def write(self, **row) -> None:
        self.writer.writerow(row)
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def crossed(before: int, now: int, every: int) -> bool:
    """Did the step counter pass a multiple of ``every`` (it moves by num_envs at a time)?"""
    return now // every > before // every


def train(cfg: Config) -> dict:
    """Run DQN with ``cfg``; returns a summary (steps/s, last returns, replay size, files written)."""
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    device = pick_device(cfg.device or None)
    np.random.seed(cfg.seed)

    n = cfg.num_envs
    envs = make_vector_envs(n, seed=cfg.seed, backend=cfg.env_backend)
    obs_shape = envs.single_observation_space.shape
    memory = MultiStreamMemory(cfg.buffer_size, n, obs_shape, seed=cfg.seed, prefault=cfg.prefault,
                               device=device if cfg.replay_on_device else None)
    if cfg.per:
        memory = PrioritizedMemory(memory, alpha=cfg.per_alpha, seed=cfg.seed)
    agent = DQNAgent(int(envs.single_action_space.n), device, lr=cfg.lr, gamma=cfg.gamma, double=cfg.double,
                     max_grad_norm=cfg.max_grad_norm, seed=cfg.seed)
    log = CsvLog(out / "log.csv", ["step", "episode_return", "episode_length", "loss", "epsilon", "rss_mb",
                                   "steps_per_s"])
    eval_log = CsvLog(out / "eval.csv", ["step", "mean_return", "std_return", "episodes"])

    obs, info = envs.reset(seed=cfg.seed)
    lives = info["lives"].copy()
    resetting = np.zeros(n, bool)  # next-step autoreset: this step only resets these envs
    ep_return, ep_length = np.zeros(n), np.zeros(n, int)
    losses: list[float] = []
    returns: list[float] = []
    step, learn_start = 0, None
    t0 = last_t = time.perf_counter()
    last_step = 0
    bar = tqdm(total=cfg.total_steps, disable=not cfg.progress, mininterval=1.0, desc="train")
    while step < cfg.total_steps:
        before, step = step, step + n
        eps = epsilon_at(step, cfg)
        actions = agent.act(obs, eps)
        next_obs, rewards, terminated, truncated, info = envs.step(actions)
        life_lost = info["lives"] < lives
        real = ~resetting
        # Learn from clipped rewards; a lost life is terminal for the target but not for the game.
        memory.add_batch(obs, actions, np.sign(rewards), next_obs, dones=terminated | life_lost,
                         episode_ends=terminated | truncated, mask=real)
        ep_return += rewards * real
        ep_length += real
        for i in np.flatnonzero(real & (terminated | truncated)):
            now = time.perf_counter()
            returns.append(float(ep_return[i]))
            log.write(step=step, episode_return=returns[-1], episode_length=int(ep_length[i]),
                      loss=np.mean(losses[-100:]) if losses else "", epsilon=round(eps, 4),
                      rss_mb=round(rss_bytes() / 2**20, 1), steps_per_s=round((step - last_step) / (now - last_t), 1))
            last_t, last_step = now, step
            bar.set_postfix(ret=returns[-1], eps=round(eps, 3), refresh=False)
            ep_return[i], ep_length[i] = 0, 0
        resetting = terminated | truncated
        obs, lives = next_obs, info["lives"].copy()

        if step >= cfg.learning_starts:  # one update per train_every agent steps, summed over the envs
            if learn_start is None:
                learn_start = (step, time.perf_counter())
            # Updates due = multiples of train_every in [learning_starts, step]: with one env, exactly
            # "update when step % train_every == 0"; with n envs, n / train_every per vector step.
            due = step // cfg.train_every - (cfg.learning_starts - 1) // cfg.train_every
            while len(losses) < due:
                if cfg.per:
                    batch = memory.sample(cfg.batch_size, beta=beta_at(step, cfg.total_steps, cfg.per_beta0))
                    losses.append(agent.learn(batch))
                    memory.update_priorities(batch.indices, agent.last_td_errors)
                else:
                    losses.append(agent.learn(memory.sample(cfg.batch_size)))
        if crossed(before, step, cfg.target_sync_every):
            agent.sync_target()
        if crossed(before, step, cfg.eval_every):
            r = evaluate(agent, cfg, cfg.eval_episodes)
            eval_log.write(step=step, mean_return=float(np.mean(r)), std_return=float(np.std(r)), episodes=len(r))
        if crossed(before, step, cfg.checkpoint_every) or step >= cfg.total_steps:
            save_checkpoint(out / "checkpoint.pt", agent, cfg, step)
        bar.update(n)

    bar.close()
    log.close()
    eval_log.close()
    envs.close()
    end = time.perf_counter()
    learning = (step - learn_start[0]) / (end - learn_start[1]) if learn_start and end > learn_start[1] else None
    return {"steps": step, "seconds": end - t0, "steps_per_s": step / (end - t0), "learning_steps_per_s": learning,
            "updates": len(losses), "episodes": len(returns), "last_returns": returns[-10:],
            "replay_bytes": memory.nbytes, "replay_device": str(memory.device or "host"), "rss_bytes": rss_bytes(),
            "device": str(device), "out_dir": str(out)}


def _parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def parse_args(argv: list[str] | None = None) -> Config:
    """``--preset NAME`` then ``--field value`` overrides for any ``Config`` field."""
    parser = argparse.ArgumentParser(prog="python -m dqn_course.train", description=__doc__.split("\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    for f in dataclasses.fields(Config):
        kind = _parse_bool if f.type in (bool, "bool") else {"int": int, "float": float, "str": str}.get(str(f.type), f.type)
        parser.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=kind, default=None)
    args = vars(parser.parse_args(argv))
    overrides = {k: v for k, v in args.items() if k != "preset" and v is not None}
    return dataclasses.replace(PRESETS[args["preset"]], **overrides)


def main(argv: list[str] | None = None) -> None:
    cfg = parse_args(argv)
    summary = train(cfg)
    print(f"done: {summary['steps']:,} steps in {summary['seconds']:.0f} s "
          f"({summary['steps_per_s']:.0f} steps/s on {summary['device']}), {summary['episodes']} games, "
          f"replay {summary['replay_bytes'] / 2**20:,.0f} MiB; files in {summary['out_dir']}")


if __name__ == "__main__":
    main()
