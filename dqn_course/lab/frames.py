"""From the Atari screen to the frame a DQN stores, and what each pixel costs (notebooks 02 and 03).

The standard DQN preprocessing, written out by hand so it can be compared with gymnasium's
``AtariPreprocessing`` (which ``envs.make_breakout`` uses)::

    two last raw screens of a skipped step (210x160x3 RGB uint8)
      -> luminance gray each (cv2.COLOR_RGB2GRAY; ALE's own grayscale screen gives the same bytes)
      -> pixel-wise maximum of the two (objects drawn on alternate frames are not lost)
      -> cv2.resize to 84x84 with INTER_AREA (each output pixel averages the input pixels it covers)
      -> (84, 84) uint8: 7,056 bytes instead of 100,800

``blog_preprocess`` is the other recipe, the one of the Stack Overflow question's agent (mean over colour
channels, keep every second row and column); it is here to be measured, not used.
"""
from __future__ import annotations

from collections import deque

import cv2
import gymnasium as gym
import numpy as np

from dqn_course.contracts import Count, check_module
from dqn_course.envs import ENV_ID, _register, make_raw_breakout

RAW_SHAPE = (210, 160, 3)
SCREEN_SIZE = 84

__all__ = [
    "RAW_SHAPE",
    "SCREEN_SIZE",
    "to_gray",
    "downsample",
    "max_pool_downsample",
    "blog_preprocess",
    "raw_frames",
    "RecordScreens",
    "preprocessing_trace",
    "consecutive_screens",
    "state_bytes",
]


def to_gray(rgb: np.ndarray) -> np.ndarray:
    """(H, W, 3) RGB uint8 -> (H, W) uint8 luminance (0.299 R + 0.587 G + 0.114 B, rounded)."""
    return cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)


def downsample(rgb: np.ndarray, size: Count = SCREEN_SIZE) -> np.ndarray:
    """One RGB screen -> (size, size) gray uint8, the way ``AtariPreprocessing`` shrinks a screen."""
    return cv2.resize(to_gray(rgb), (size, size), interpolation=cv2.INTER_AREA)


def max_pool_downsample(prev_rgb: np.ndarray, last_rgb: np.ndarray, size: Count = SCREEN_SIZE) -> np.ndarray:
    """The last two screens of a skipped step -> one (size, size) frame: gray, maximum, resize."""
    pooled = np.maximum(to_gray(prev_rgb), to_gray(last_rgb))
    return cv2.resize(pooled, (size, size), interpolation=cv2.INTER_AREA)


def blog_preprocess(rgb: np.ndarray, cast: bool = True) -> np.ndarray:
    """The Stack Overflow question's recipe: unweighted channel mean, cast to uint8, every second row and column.

    Returns a *view* (105, 80) of the full (210, 160) gray array: ``nbytes`` counts the view's 8,400
    bytes, but the 33,600-byte array behind it stays alive as long as the view does. ``np.mean``
    returns float64 whatever the input; ``cast=False`` skips the cast (the trap: 8 bytes a pixel).
    """
    gray = np.mean(rgb, axis=2)
    return (gray.astype(np.uint8) if cast else gray)[::2, ::2]


def raw_frames(n: int, seed: int = 0, every: Count = 1) -> np.ndarray:
    """(n, 210, 160, 3) uint8 screens of random Breakout play (frame skip 4), FIRE pressed to serve.

    ``every`` keeps one screen in that many agent steps, so a few frames can span a longer stretch
    of a game. Deterministic for a given ``seed``.
    """
    env = make_raw_breakout(seed=seed)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = np.empty((n, *RAW_SHAPE), np.uint8)
    lives, kept, step = None, 0, 0
    obs, _, _, _, info = env.step(1)  # FIRE: serve the ball
    while kept < n:
        if step % every == 0:
            out[kept] = obs
            kept += 1
        step += 1
        serve = lives is not None and info["lives"] < lives
        lives = info["lives"]
        obs, _, terminated, truncated, info = env.step(1 if serve else int(rng.integers(4)))
        if terminated or truncated:
            env.reset()
            obs, _, _, _, info = env.step(1)
            lives = None
    env.close()
    return out


class RecordScreens(gym.Wrapper):
    """Sits *under* ``AtariPreprocessing`` and keeps the last two RGB screens the emulator returned."""

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.screens = deque([obs], maxlen=2)
        return obs, info

    def step(self, action: int):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.screens.append(obs)
        return obs, reward, terminated, truncated, info


def preprocessing_trace(n_steps: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(previous screen, last screen, AtariPreprocessing's 84x84 frame) for ``n_steps`` agent steps.

    Breakout (frame skip 1 underneath, skip 4 with max-pool in the wrapper, as ``make_breakout``),
    random actions with FIRE after every lost life. Steps cut short by the end of a game (whose
    frame is not a max over the last two screens) are left out.
    """
    from gymnasium.wrappers import AtariPreprocessing

    _register()
    base = gym.make(ENV_ID, frameskip=1, repeat_action_probability=0.0)
    recorder = RecordScreens(base)
    env = AtariPreprocessing(recorder, noop_max=30, frame_skip=4, screen_size=SCREEN_SIZE,
                             terminal_on_life_loss=False, grayscale_obs=True, scale_obs=False)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    out, lives, action = [], None, 1
    while len(out) < n_steps:
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            env.reset()
            lives, action = None, 1
            continue
        prev, last = recorder.screens
        out.append((prev.copy(), last.copy(), obs.copy()))
        action = 1 if lives is not None and info["lives"] < lives else int(rng.integers(4))
        lives = info["lives"]
    env.close()
    return out


def consecutive_screens(game: str = "ALE/SpaceInvaders-v5", n: int = 200, seed: int = 0) -> np.ndarray:
    """(n, 210, 160, 3) screens of random play with *no* frame skip: every frame the console drew."""
    _register()
    env = gym.make(game, frameskip=1, repeat_action_probability=0.0)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    out = np.empty((n, *env.observation_space.shape), np.uint8)
    for i in range(n):
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        out[i] = obs
        if terminated or truncated:
            env.reset()
    env.close()
    return out


def state_bytes(dtype: type | np.dtype | str, stack: Count = 4, size: Count = SCREEN_SIZE) -> int:
    """Bytes of one (stack, size, size) state in ``dtype``: pixels x bytes per pixel."""
    return stack * size * size * np.dtype(dtype).itemsize


check_module(globals())
