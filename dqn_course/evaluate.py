"""Evaluate a saved policy the course's way: whole games, unclipped score, ε-greedy, beside random play.

    python -m dqn_course.evaluate data/breakout-cpu                      # a run folder (its checkpoint.pt) ...
    python -m dqn_course.evaluate runs/q/checkpoint.pt --games 30         # ... or a policy file
    python -m dqn_course.evaluate data/breakout-cpu --games 30 --json > data/breakout-cpu/evaluation.json

The protocol is the one a training run's evaluations play (``records.play_evaluation``): one Breakout environment made
with ``make_breakout(seed, max_episode_steps)``, whole games (a lost life does not end one), the score unclipped,
actions ε-greedy with ε = ``--epsilon``. The ε draws come from a generator seeded with ``--seed`` too, so the same
file, seed and settings give the same scores. Uniformly random actions play the very same games (same seed, cap
and environment) as the baseline.

Seeds: a run's training environments use seeds from its ``seed`` up to ``seed + total_steps + num_envs``, and its
evaluations ``seed + 10,000``. The default ``--seed`` lies far above both for any preset; a seed inside a run's
range is refused unless ``--allow-run-seeds`` says it is meant (to reproduce the run's own evaluations, say).

Bad input ends with ``error: <what to change>`` and status 2: a missing file, a damaged one, a file that is not a
policy (a ``state-<step>.ckpt`` holds a whole training state; ``checkpoint.pt`` is the policy).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import gymnasium as gym
import numpy as np

from dqn_course.contracts import Count, Probability, check_module
from dqn_course.agent import DQNAgent
from dqn_course.envs import make_breakout

if TYPE_CHECKING:  # the device's type only: torch is loaded with the agent
    import torch

POLICY_FILE = "checkpoint.pt"
DEFAULT_SEED = 123_456_789  # above every preset's training and evaluation seeds
EVAL_SEED_OFFSET = 10_000  # a run's own evaluations use seed + this (records.play_evaluation)


class PolicyFileError(ValueError):
    """A path that does not hold a policy ``records.save_checkpoint`` wrote; the message says what is wrong."""


def policy_path(path: str | Path) -> Path:
    """``path`` itself, or the ``checkpoint.pt`` inside a run folder; raises ``PolicyFileError`` when missing."""
    path = Path(path)
    file = path / POLICY_FILE if path.is_dir() else path
    if not file.is_file():
        where = f"{path} holds no {POLICY_FILE}" if path.is_dir() else f"no file at {path}"
        raise PolicyFileError(f"{where}: give a policy file (a run's {POLICY_FILE}) or the run folder holding one")
    return file


def load_policy(path: str | Path, device: str | torch.device = "cpu") -> tuple[DQNAgent, dict]:
    """The agent a policy file describes (online network = target network, no optimiser) and its
    ``{"step", "config", "file", "sha256"}`` (the file's SHA-256, so a result names the exact file it
    measured). Raises ``PolicyFileError`` for a missing, damaged or foreign file."""
    import torch

    file = policy_path(path)
    try:
        state = torch.load(file, map_location=device, weights_only=True)
    except Exception as e:  # torch raises pickle, zip and runtime errors alike for a bad file
        raise PolicyFileError(f"{file} is damaged or not a torch file ({type(e).__name__}: {e})") from None
    if isinstance(state, dict) and "q" not in state and isinstance(state.get("agent"), dict):
        state = {**state, "q": state["agent"].get("q")}  # a whole-agent export holds the policy one level down
    if not isinstance(state, dict) or not isinstance(state.get("q"), dict) or "step" not in state:
        keys = sorted(state)[:6] if isinstance(state, dict) else type(state).__name__
        raise PolicyFileError(f"{file} is not a policy file: it holds {keys}, not the {{q, config, step}} that "
                              f"records.save_checkpoint writes (a run's {POLICY_FILE})")
    q = state["q"]
    try:
        agent = DQNAgent(q["net.9.weight"].shape[0], device, in_channels=q["net.0.weight"].shape[1])
        agent.q.load_state_dict(q)
    except (KeyError, RuntimeError, AttributeError) as e:
        raise PolicyFileError(f"{file}'s network is not the course's Nature DQN ({type(e).__name__}: {e})") from None
    agent.sync_target()
    agent.q.eval()
    digest = hashlib.sha256(file.read_bytes()).hexdigest()
    return agent, {"step": int(state["step"]), "config": state.get("config") or {}, "file": str(file), "sha256": digest}


class Game(NamedTuple):
    """One game played by ``play_game``."""

    score: float  # unclipped points
    steps: int  # agent steps played (4 emulator frames each)
    lives_lost: int
    finished: bool  # the game ended (all lives lost), rather than being cut by the env's step limit


def play_game(env: gym.Env, state: np.ndarray, agent: DQNAgent | None, epsilon: Probability,
              random_action: Callable[[], int], each_step: Callable[[], None] | None = None) -> Game:
    """Play ``env`` (a ``make_breakout`` env, just reset to ``state``) until its game ends or is cut: the agent
    acts ε-greedily with ``epsilon``, or ``agent=None`` takes ``random_action()`` at every step. ``each_step`` is
    called after every step (e.g. to render the screen)."""
    score, steps, lost = 0.0, 0, 0
    while True:
        action = random_action() if agent is None else int(agent.act(state, epsilon)[0])
        state, reward, terminated, truncated, info = env.step(action)
        score, steps, lost = score + float(reward), steps + 1, lost + int(info["life_lost"])
        if each_step is not None:
            each_step()
        if terminated or truncated:
            return Game(score, steps, lost, bool(terminated))


def play_games(agent: DQNAgent | None, games: Count, seed: int, epsilon: Probability, max_steps: Count,
               progress: bool = False, seed_epsilon: bool = True) -> list[float]:
    """Unclipped scores of ``games`` whole games in one environment seeded with ``seed``; ``agent=None`` plays
    uniformly random actions. With ``seed_epsilon`` the agent's ε draws use a generator seeded with ``seed`` (its
    own is restored after); without, they come from the agent's own generator (as a training run's evaluations)."""
    from tqdm import tqdm  # the plain bar (the CLI's --progress): tqdm.auto warns in a notebook without ipywidgets

    env = make_breakout(seed=seed, max_episode_steps=max_steps)
    scores: list[float] = []
    if agent is not None and seed_epsilon:
        saved, agent.rng = agent.rng, np.random.default_rng(seed)
    try:
        for _ in tqdm(range(games), disable=not progress, desc="random" if agent is None else "policy"):
            game = play_game(env, env.reset()[0], agent, epsilon, lambda: int(env.action_space.sample()))
            scores.append(game.score)
    finally:
        env.close()
        if agent is not None and seed_epsilon:
            agent.rng = saved
    return scores


def run_seeds(config: dict) -> tuple[int, int]:
    """The smallest and largest environment seed a run with ``config`` used (training and its evaluations)."""
    seed = int(config.get("seed", 0))
    return seed, seed + max(int(config.get("total_steps", 0)) + int(config.get("num_envs", 1)), EVAL_SEED_OFFSET)


def policy_vs_random(path: str | Path, games: Count = 30, seed: int = DEFAULT_SEED, epsilon: Probability = 0.05,
                     max_steps: Count | None = None, allow_run_seeds: bool = False, progress: bool = False) -> dict:
    """Play the policy at ``path`` and random actions under one protocol; returns both, their ratio and the
    protocol. ``max_steps=None`` takes the run's own evaluation cap. Raises ``PolicyFileError`` for a bad file and
    ``ValueError`` for settings that cannot work (a seed inside the run's range unless ``allow_run_seeds``)."""
    for name, value, low in (("games", games, 1), ("seed", seed, 0), ("max_steps", max_steps, 1)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise ValueError(f"--{name.replace('_', '-')} must be an integer >= {low}, got {value!r}")
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float) or not 0 <= epsilon <= 1:
        raise ValueError(f"--epsilon must be a number in [0, 1], got {epsilon!r}")
    agent, info = load_policy(path)
    low, high = run_seeds(info["config"])
    if low <= seed <= high and not allow_run_seeds:
        raise ValueError(f"--seed {seed} lies inside the seeds this run trained and evaluated on ({low:,} to "
                         f"{high:,}): choose another (the default {DEFAULT_SEED:,} is outside), or pass "
                         "--allow-run-seeds to reproduce the run's own games on purpose")
    cap = max_steps or int(info["config"].get("eval_max_steps", 27_000))
    scores = play_games(agent, games, seed, epsilon, cap, progress)
    random = play_games(None, games, seed, epsilon, cap, progress)
    summary = {name: {"mean": float(np.mean(s)), "std": float(np.std(s)), "games": len(s), "scores": s}
               for name, s in (("policy", scores), ("random", random))}
    return {"file": info["file"], "sha256": info["sha256"], "step": info["step"], **summary,
            "ratio": summary["policy"]["mean"] / summary["random"]["mean"] if summary["random"]["mean"] else None,
            "protocol": {"games": games, "seed": seed, "epsilon": epsilon, "max_steps": cap,
                         "environment": "dqn_course.envs.make_breakout(seed, max_episode_steps): whole games, "
                                        "unclipped score, one seeded environment for all games",
                         "command": "python -m dqn_course.evaluate " + " ".join(sys.argv[1:])}}


def report(result: dict) -> str:
    p, r = result["policy"], result["random"]
    ratio = f"{result['ratio']:.1f}x random" if result["ratio"] else "random play scored 0"
    return (f"{result['file']} (step {result['step']:,}): {p['mean']:.1f} ± {p['std']:.1f} over {p['games']} games; "
            f"random play {r['mean']:.2f} ± {r['std']:.2f} on the same games: {ratio}\n"
            f"games (seed {result['protocol']['seed']}, ε {result['protocol']['epsilon']}, cap "
            f"{result['protocol']['max_steps']:,} steps): {', '.join(f'{s:g}' for s in p['scores'])}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m dqn_course.evaluate", description=__doc__.split("\n")[0])
    p.add_argument("path", help="a policy file (checkpoint.pt) or a run folder holding one")
    p.add_argument("--games", type=int, default=30, help="whole games to play (default 30)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seeds the games and the ε draws")
    p.add_argument("--epsilon", type=float, default=0.05, help="ε of the ε-greedy policy (default 0.05)")
    p.add_argument("--max-steps", type=int, default=None, help="agent steps per game (default: the run's cap)")
    p.add_argument("--allow-run-seeds", action="store_true", help="allow a seed the run itself used")
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    p.add_argument("--progress", action="store_true", help="a progress bar per player")
    args = p.parse_args(argv)
    try:
        result = policy_vs_random(args.path, args.games, args.seed, args.epsilon, args.max_steps, args.allow_run_seeds,
                          args.progress)
    except ValueError as e:  # PolicyFileError included: a file or a setting to change, not a bug
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    print(json.dumps(result, indent=1) if args.json else report(result))


if __name__ == "__main__":
    main()


check_module(globals())
