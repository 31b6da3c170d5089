"""Breakout with the standard DQN preprocessing, from gymnasium and ale-py (ROMs ship in the wheel).

The wrapper stack of ``make_breakout``, inside out::

    ALE/Breakout-v5 (frameskip=1, sticky actions off, 108k-frame limit -> truncation)
    AtariPreprocessing   no-op reset (<= 30), frame skip 4 with max-pool, 84x84 gray, uint8
    RecordEpisodeStatistics   info["episode"] = whole-game return and length
    LifeLossInfo        info["life_lost"] = True on the step a life is lost
    FireOnReset         press FIRE after reset so the ball is in play
    FrameStackObservation(4)   (4, 84, 84) uint8 stacks, padded by repeating the first frame

Two choices the course makes on purpose:

* A lost life is reported in ``info["life_lost"]``; the learner treats it as terminal (no
  bootstrap), but the game, its frames and its return go on. So episode returns are whole-game
  scores, and replay frames are shared across lives (see ``replay.FrameSharingMemory``).
* Rewards come out unclipped; the training loop clips what it stores for learning
  (``np.sign``), so logged returns stay comparable with published scores.

``learning_signals`` is where both choices are made, for every loop that stores transitions.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, RecordEpisodeStatistics

from dqn_course.contracts import Count, check_module
from dqn_course import check_arg

ENV_ID = "ALE/Breakout-v5"
_registered = False


def _register() -> None:
    global _registered
    if not _registered:
        import ale_py

        gym.register_envs(ale_py)
        _registered = True


class LifeLossInfo(gym.Wrapper):
    """Adds ``info["life_lost"]``: True on the step where the ALE's life counter went down."""

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._lives = info.get("lives", 0)
        info["life_lost"] = False
        return obs, info

    def step(self, action: int):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = info.get("lives", 0)
        info["life_lost"] = bool(lives < self._lives)
        self._lives = lives
        return obs, reward, terminated, truncated, info


class FireOnReset(gym.Wrapper):
    """Presses FIRE once after every reset: Breakout waits for it before serving the ball."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        meanings = env.unwrapped.get_action_meanings()
        if len(meanings) < 2 or meanings[1] != "FIRE":
            raise ValueError(f"FireOnReset needs FIRE as action 1, this game has {meanings}")

    def reset(self, **kwargs):
        self.env.reset(**kwargs)
        obs, _, terminated, truncated, info = self.env.step(1)
        if terminated or truncated:  # practically never; start again rather than hand out a dead game
            return self.env.reset(**kwargs)
        return obs, info


def make_breakout(seed: int | None = None, frame_stack: Count = 4, max_episode_steps: int | None = None,
                  render_mode: str | None = None, noop_max: int = 30, scale_obs: bool = False) -> gym.Env:
    """One Breakout environment with the DQN preprocessing above; ``reset(seed=...)`` is done for you.

    ``max_episode_steps`` caps an episode in agent steps (for quick demos); by default the ALE's
    own limit of 108,000 frames (27,000 agent steps) truncates it. ``frame_stack=1`` gives single
    84x84 frames, which is what the frame-sharing memory stores. ``scale_obs=True`` hands out the frames
    as float32 in [0, 1] (``AtariPreprocessing``'s own flag, 4 bytes a pixel), the common practice
    notebook 02 measures; the course's memories and networks take the default, ``uint8``.
    """
    check_arg("seed", seed, integer=True, low=0, optional=True)
    check_arg("frame_stack", frame_stack, integer=True, low=1)
    check_arg("max_episode_steps", max_episode_steps, integer=True, low=1, optional=True)
    check_arg("noop_max", noop_max, integer=True, low=0)
    _register()
    env = gym.make(ENV_ID, frameskip=1, repeat_action_probability=0.0, render_mode=render_mode)
    env = AtariPreprocessing(env, noop_max=noop_max, frame_skip=4, screen_size=84, terminal_on_life_loss=False,
                             grayscale_obs=True, scale_obs=scale_obs)
    if max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, max_episode_steps)
    env = RecordEpisodeStatistics(env)
    env = LifeLossInfo(env)
    env = FireOnReset(env)
    if frame_stack > 1:
        env = FrameStackObservation(env, frame_stack, padding_type="reset")
    env.action_space.seed(seed)
    env.reset(seed=seed)
    return env


def make_raw_breakout(seed: int | None = None, render_mode: str | None = None) -> gym.Env:
    """Unprocessed Breakout (210x160x3 RGB, frame skip 4): what the blog-post agents consume."""
    _register()
    env = gym.make(ENV_ID, frameskip=4, repeat_action_probability=0.0, render_mode=render_mode)
    env.action_space.seed(seed)
    env.reset(seed=seed)
    return env


def make_vector_breakout(num_envs: Count, seed: int = 0, num_threads: int = 0, frame_stack: Count = 4):
    """``num_envs`` Breakouts stepped in C++ threads by ale-py's ``AtariVectorEnv``.

    Same preprocessing as ``make_breakout`` (no-op reset, skip 4 + max-pool, 84x84 gray, FIRE on
    reset, 4-stack); life loss comes back as ``terminated`` with ``life_loss_info`` semantics left
    to the caller, and rewards are not clipped here (the learner clips). The caller resets with
    ``env.reset(seed=seed)``; this function does it once so the env is ready to step.
    """
    _register()
    from ale_py.vector_env import AtariVectorEnv

    env = AtariVectorEnv("breakout", num_envs, num_threads=num_threads, stack_num=frame_stack, img_height=84,
                         img_width=84, grayscale=True, frameskip=4, maxpool=True, noop_max=30,
                         repeat_action_probability=0.0, reward_clipping=False, use_fire_reset=True,
                         episodic_life=False)
    env.reset(seed=seed)
    return env


def learning_signals(reward: float | np.ndarray, terminated: bool | np.ndarray, truncated: bool | np.ndarray,
                     life_lost: bool | np.ndarray):
    """What a replay memory stores of one env step besides the frames and the action: ``(reward, done,
    episode_end)``, for one env (bools and a float) or a vector of envs (arrays, element by element).

    ``reward``: clipped to its sign, -1, 0 or 1 (what the agent learns from; the score stays unclipped).
    ``done``: no bootstrap from the next state: the game ended (``terminated``) or a life was lost.
    ``episode_end``: the next step starts a new game (it ended, or a time limit cut it: ``truncated``); a lost life
    is not one, the game and its frames go on.
    """
    shapes = {name: np.shape(value) for name, value in (("reward", reward), ("terminated", terminated),
                                                         ("truncated", truncated), ("life_lost", life_lost))}
    if len(set(shapes.values())) > 1:
        raise ValueError("learning_signals: reward, terminated, truncated and life_lost must be one env's values or "
                         "arrays of one shape (one entry per env), got shapes "
                         + ", ".join(f"{name} {list(shape)}" for name, shape in shapes.items()))
    return np.sign(reward), terminated | life_lost, terminated | truncated


def random_frames(n: Count, seed: int = 0, frame_stack: Count = 4) -> list[tuple]:
    """``n`` transitions of random play as (state, action, reward, next_state, done, episode_end).

    Real Breakout frames for memory measurements and tests. ``state = next_state`` is passed on by
    reference, as a training loop does.
    """
    env = make_breakout(seed=seed, frame_stack=frame_stack)
    state, _ = env.reset(seed=seed)
    out = []
    for _ in range(n):
        action = int(env.action_space.sample())
        next_state, reward, terminated, truncated, info = env.step(action)
        _, done, episode_end = learning_signals(reward, terminated, truncated, info["life_lost"])
        out.append((state, action, float(reward), next_state, done, episode_end))
        state = env.reset()[0] if episode_end else next_state
    env.close()
    return out


class SyncVectorBreakout(gym.vector.SyncVectorEnv):
    """gymnasium's ``SyncVectorEnv`` with ``AtariVectorEnv``'s ``send`` / ``recv`` split, so one training loop
    drives both backends: ``send`` keeps the actions, ``recv`` steps every env in this process."""

    def send(self, actions: np.ndarray) -> None:
        self._sent = actions

    def recv(self):
        return self.step(self._sent)


def make_vector_envs(num_envs: Count = 1, seed: int = 0, backend: str = "gymnasium"):
    """N Breakouts behind gymnasium's vector API, with next-step autoreset in both backends.

    ``backend="gymnasium"`` steps ``make_breakout`` copies one after another in this process (the
    plain path; N=1 is the classic single-env loop); ``backend="ale"`` is ale-py's C++
    ``AtariVectorEnv``, stepping all N in threads (the fast path). Either way ``info["lives"]`` is
    an array the training loop uses to detect a lost life, and the step after an episode ends only
    resets that env (its transition is not a real one). Both step as ``step(actions)`` or as
    ``send(actions)`` then ``recv()``: ale-py's threads step the envs between the two calls.
    """
    if backend == "ale":
        return make_vector_breakout(num_envs, seed=seed)
    if backend != "gymnasium":
        raise ValueError(f"backend must be 'gymnasium' or 'ale', got {backend!r}")
    from functools import partial

    envs = SyncVectorBreakout([partial(make_breakout, seed=seed + i) for i in range(num_envs)],
                              autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
    envs.reset(seed=seed)
    return envs


check_module(globals())
