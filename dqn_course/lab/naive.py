"""The Stack Overflow question's agent in PyTorch: the Keras DQN whose process grew past 100 GB (notebook 01).

The *pattern* of the blog-post agent, rebuilt so a learner can measure where its memory goes:

* **Preprocessing the blog way** (``preprocess``): the mean over the colour axis (``np.mean`` gives
  float64: 8 bytes a pixel), a cast to uint8, every second row and column, a trailing channel axis:
  210x160x3 -> 105x80x1. The slice ``[::2, ::2]`` is a *view*: the 105x80 state keeps the whole
  210x160 uint8 image alive, 4x what its ``nbytes`` says.
* **The memory**: ``deque(maxlen=1_000_000)`` of ``[state, action, reward, new_state, done]``, one
  array per state (``replay.NaiveDequeMemory`` with ``copy_states=False``: it keeps what it is given).
* **Per-sample targets** (``NaiveAgent.replay``): for each of the sampled transitions one forward
  pass for Q(s) and one for Q(s'), then one fit on the stacked batch (MSE over all actions).
* **A soft target update every step** (tau = 0.125) and **epsilon decay on every act call**
  (x0.95 per call, floor 0.01: after about 90 steps the agent is almost always greedy).

Two ways a training loop hands states to the memory (``run(copy_states=...)``):

* ``copy_states=False``: ``state = new_state``. Consecutive transitions share one array (the s' of
  one transition *is* the s of the next), so each frame is held once.
* ``copy_states=True``: each transition gets its own s and s' arrays, as loops that call
  ``preprocess(obs)`` and ``preprocess(next_obs)`` separately do (``frames="blog"``), or that
  convert both with ``np.array`` (code written for LazyFrames; ``frames="raw"``). Twice the frames.

``frames="raw"`` stores the environment's own 210x160x3 frames (the network does the blog
preprocessing itself, in torch): what the first answer to the seed assumed, and the first rung of
the course's memory ladder (s and s' copies: 2 x 100,800 = 201,600 bytes per transition).

What differs from the blog post, on purpose, so a few thousand steps run in seconds on a CPU:

* The network is the blog's shape (3 conv layers + 1 hidden layer) but thinner (16/32/32 filters,
  256 hidden units instead of 32/64/64 and 512).
* ``replay`` runs every ``learn_every`` steps (default 4; notebook 01 uses 16) instead of every
  step; ``run`` reports the time of one ``replay`` call, so the blog's cost per step can be
  computed from it. The batch stays the blog's 32 unless ``batch_size`` says otherwise.
* torch runs on one CPU thread by default (``torch_threads``).

None of these changes what the memory stores, which is what notebook 01 measures. ``run`` is a
module-level function with picklable arguments and result, for ``profiling.measure_in_subprocess``;
``python -m dqn_course.lab.naive --steps N --json out.json`` runs it as a plain process too (for
memory-profiler's ``memory_usage(Popen(...))``).
"""
from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import random
import sys
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from dqn_course.contracts import Count, Probability, check_module
from dqn_course.lab.frames import blog_preprocess
from dqn_course.profiling import measure_in_subprocess, rss_bytes
from dqn_course.replay import NaiveDequeMemory, held_bytes, root_buffer

RAW_FRAME_SHAPE = (210, 160, 3)
BLOG_FRAME_SHAPE = (105, 80, 1)
FRAMES = ("blog", "raw")

__all__ = [
    "RAW_FRAME_SHAPE", "BLOG_FRAME_SHAPE", "preprocess", "root_buffer", "held_bytes", "BlogCNN", "NaiveAgent",
    "run", "fork_is_safe", "measure_run", "count_predict_calls", "fill_free_refill", "hold_env_frames",
]


# -- preprocessing ----------------------------------------------------------------------------------
def preprocess(frame: np.ndarray, cast: bool = True) -> np.ndarray:
    """The blog's preprocessing (``frames.blog_preprocess``) with its trailing channel axis: 105x80x1.

    The result is a view of the whole 210x160 gray image, which stays alive as long as the state
    does (see ``root_buffer``); ``cast=False`` keeps the float64 trap (8x the bytes).
    """
    return blog_preprocess(frame, cast)[..., None]


# -- the network ------------------------------------------------------------------------------------
class BlogCNN(nn.Module):
    """The blog's network shape, thinner: 3 conv layers, one hidden layer, linear Q-values.

    Input: uint8 states shaped like the blog's, channels last, with a batch axis:
    (B, 105, 80, 1) preprocessed frames, or (B, 210, 160, 3) raw frames, which it preprocesses
    itself (mean over colour, every second row and column) so both see the same picture.
    """

    def __init__(self, n_actions: Count, frame_shape: tuple[int, ...] = BLOG_FRAME_SHAPE,
                 widths: tuple[int, int, int] = (16, 32, 32), hidden: Count = 256):
        super().__init__()
        self.frame_shape = tuple(frame_shape)
        self.raw = self.frame_shape == RAW_FRAME_SHAPE
        c1, c2, c3 = widths
        self.features = nn.Sequential(
            nn.Conv2d(1, c1, kernel_size=8, stride=4), nn.ReLU(),
            nn.Conv2d(c1, c2, kernel_size=4, stride=2), nn.ReLU(),
            nn.Conv2d(c2, c3, kernel_size=3, stride=1), nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            n_flat = self.features(torch.zeros(1, 1, *BLOG_FRAME_SHAPE[:2])).shape[1]
        self.head = nn.Sequential(nn.Linear(n_flat, hidden), nn.ReLU(), nn.Linear(hidden, n_actions))

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        x = states.float()
        if self.raw:
            x = x.mean(dim=-1, keepdim=True).floor()[:, ::2, ::2]
        x = x.permute(0, 3, 1, 2) / 255.0  # channels last (Keras) -> channels first (torch)
        return self.head(self.features(x))


# -- the agent --------------------------------------------------------------------------------------
class NaiveAgent:
    """The Keras-style agent of the Stack Overflow question, method for method: ``act``, ``remember``, ``replay``,
    ``train_target``. States are arrays with a leading batch axis of 1, as in the blog.
    """

    def __init__(self, n_actions: Count, frames: str = "blog", capacity: Count = 1_000_000, gamma: Probability = 0.99,
                 eps: Probability = 1.0, eps_min: Probability = 0.01, eps_decay: Probability = 0.95, lr: float = 2.5e-4,
                 tau: Probability = 0.125, seed: int = 0, widths: tuple[int, int, int] = (16, 32, 32),
                 hidden: Count = 256, preprocess: Callable[[np.ndarray], np.ndarray] | None = None):
        if frames not in FRAMES:
            raise ValueError(f"frames must be one of {FRAMES}, got {frames!r}")
        if preprocess is not None and frames != "blog":
            raise ValueError("preprocess replaces the blog's preprocessing: it needs frames='blog'")
        # the argument shadows the module's preprocess (the blog's recipe), the default
        self.preprocess = preprocess if preprocess is not None else globals()["preprocess"]
        torch.manual_seed(seed)
        self.n_actions = n_actions
        self.frames = frames
        frame_shape = BLOG_FRAME_SHAPE if frames == "blog" else RAW_FRAME_SHAPE
        self.state_shape = (1, *frame_shape)
        # The deque of [state, action, reward, new_state, done]; it stores the arrays it is given.
        self.memory = NaiveDequeMemory(capacity, obs_shape=self.state_shape, obs_dtype=np.uint8, seed=seed,
                                       copy_states=False)
        self.gamma, self.eps, self.eps_min, self.eps_decay, self.tau = gamma, eps, eps_min, eps_decay, tau
        # Two independently initialised models, as the blog creates them.
        self.model = BlogCNN(n_actions, frame_shape, widths, hidden)
        self.target_model = BlogCNN(n_actions, frame_shape, widths, hidden).requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.rng = np.random.default_rng(seed)
        self.py_rng = random.Random(seed)

    def to_state(self, obs: np.ndarray) -> np.ndarray:
        """An observation as the agent stores it: the blog's ``preprocess(obs)[None, :]`` (a view
        of the 210x160 gray image; with the agent's ``preprocess`` argument, that function's 105x80x1
        state instead), or for ``frames="raw"`` the frame itself with a batch axis (a view of the
        environment's own buffer)."""
        return (self.preprocess(obs) if self.frames == "blog" else obs)[None, :]

    @staticmethod
    @torch.no_grad()
    def predict(model: nn.Module, states: np.ndarray) -> np.ndarray:
        """Keras' ``model.predict``: numpy in, numpy out, one forward pass."""
        return model(torch.as_tensor(states)).numpy()

    def act(self, state: np.ndarray) -> int:
        self.eps = max(self.eps_min, self.eps * self.eps_decay)  # decays on every call, as in the blog
        if self.rng.random() < self.eps:
            return int(self.rng.integers(self.n_actions))
        return int(np.argmax(self.predict(self.model, state)[0]))

    def remember(self, state: np.ndarray, action: int, reward: float, new_state: np.ndarray, done: bool) -> None:
        self.memory.add(state, action, reward, new_state, done)

    def replay(self, batch_size: Count) -> float | None:
        """One learning step with per-sample targets: 2 forward passes per sampled transition."""
        if batch_size > len(self.memory):
            return None
        samples = self.py_rng.sample(self.memory.memory, batch_size)  # random.sample on the deque
        all_states, all_targets = [], []
        for state, action, reward, new_state, done, *_ in samples:
            target = self.predict(self.target_model, state)  # Q(s), one forward for one state
            if done:
                target[0][action] = reward
            else:  # Q(s'), another forward for one state
                target[0][action] = reward + self.gamma * np.max(self.predict(self.target_model, new_state)[0])
            all_states.append(state)
            all_targets.append(target)
        x = torch.as_tensor(np.vstack(all_states))
        y = torch.as_tensor(np.vstack(all_targets))
        loss = nn.functional.mse_loss(self.model(x), y)  # Keras: fit(..., epochs=1) on the batch
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    @torch.no_grad()
    def train_target(self) -> None:
        """Soft update, every step: target = (1 - tau) * target + tau * model."""
        for t, p in zip(self.target_model.parameters(), self.model.parameters()):
            t.mul_(1.0 - self.tau).add_(p, alpha=self.tau)


# -- the measured run -------------------------------------------------------------------------------
def run(steps: int = 2000, *, frames: str = "blog", copy_states: bool = False, learn_every: int = 4,
        batch_size: Count = 32, record_every: Count = 100, trace: bool = True, seed: int = 0,
        capacity: Count = 1_000_000, torch_threads: int | None = 1,
        preprocess: Callable[[np.ndarray], np.ndarray] | None = None) -> dict:
    """Play and learn for ``steps`` agent steps with the blog's loop; return the readings.

    Every ``record_every`` steps it records the step, the process's RSS (psutil), the bytes traced
    by tracemalloc (if ``trace``; started after the imports and the networks, so it sees what the
    loop allocates) and the seconds since the loop started. ``learn_every=0`` turns learning off.
    A lost life gives reward -1; ``done`` is the game's end, as in the blog. ``preprocess`` replaces the blog's
    preprocessing (``frames="blog"`` only; it must return the 105x80x1 uint8 state): notebook 01 runs the
    learner's fixed one this way, in a new process (``measure_run``).

    Returns a dict of plain lists and numbers (picklable, JSON-able): ``step``, ``rss``,
    ``traced``, ``seconds``, the replay count and time, the memory's length, its ``nbytes`` and ``held``
    (what its rows keep alive, without the deque itself; see ``replay.held_bytes``) and
    ``started_unix`` (``time.time()`` when the loop started; ``seconds`` count from there).
    """
    from dqn_course.envs import make_raw_breakout

    if torch_threads:
        torch.set_num_threads(torch_threads)
    env = make_raw_breakout(seed=seed)
    agent = NaiveAgent(env.action_space.n, frames=frames, capacity=capacity, seed=seed, preprocess=preprocess)
    obs, info = env.reset(seed=seed)
    state = agent.to_state(obs)
    lives = info["lives"]
    copy = (lambda o: agent.to_state(o)) if frames == "blog" else (lambda o: np.array(o)[None, :])

    gc.collect()
    if trace:
        tracemalloc.start()
    out = {"step": [0], "rss": [rss_bytes()], "traced": [0], "seconds": [0.0]}
    replays, replay_seconds, episodes = 0, 0.0, 0
    started_unix = time.time()  # wall-clock start of the loop, to line readings up with outside samplers
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        action = agent.act(state)
        next_obs, reward, terminated, truncated, info = env.step(action)
        if info["lives"] < lives:
            reward, lives = -1.0, info["lives"]
        new_state = agent.to_state(next_obs)
        if copy_states:  # each transition gets its own s and s' arrays
            agent.remember(copy(obs), action, reward, copy(next_obs), terminated)
        else:  # the blog: s is the previous transition's s' (the same array object)
            agent.remember(state, action, reward, new_state, terminated)
        if learn_every and step % learn_every == 0:
            r0 = time.perf_counter()
            if agent.replay(batch_size) is not None:
                replays += 1
                replay_seconds += time.perf_counter() - r0
        agent.train_target()
        obs, state = next_obs, new_state
        if terminated or truncated:
            episodes += 1
            obs, info = env.reset()
            state, lives = agent.to_state(obs), info["lives"]
        if step % record_every == 0 or step == steps:
            out["step"].append(step)
            out["rss"].append(rss_bytes())
            out["traced"].append(tracemalloc.get_traced_memory()[0] if trace else 0)
            out["seconds"].append(time.perf_counter() - t0)
    if trace:
        tracemalloc.stop()
    env.close()
    out.update(
        frames=frames, copy_states=copy_states, steps=steps, learn_every=learn_every, batch_size=batch_size,
        replays=replays, replay_seconds=replay_seconds, episodes=episodes, eps=agent.eps,
        memory_len=len(agent.memory), memory_nbytes=agent.memory.nbytes, held=held_bytes(agent.memory.memory),
        state_shape=list(agent.state_shape), torch_threads=torch.get_num_threads(), started_unix=started_unix,
    )
    return out


def fork_is_safe() -> bool:
    """Whether a new process may start as a fork (a copy of this one) here: on Linux only.

    Windows has no fork. macOS offers it, but a forked child of a process whose system libraries run threads (a
    notebook's kernel, torch) can crash, which is why Python starts processes there with "spawn" since 3.8.
    """
    return sys.platform.startswith("linux") and "fork" in mp.get_all_start_methods()


def _run_unpickled(pickled_preprocess: bytes, steps: int, kwargs: dict) -> dict:
    """``run`` with a preprocessing function sent by value (cloudpickle): what a fresh interpreter executes."""
    import pickle

    return run(steps, preprocess=pickle.loads(pickled_preprocess), **kwargs)


def measure_run(steps: int, *, preprocess: Callable[[np.ndarray], np.ndarray] | None = None,
                timeout: float | None = 600, **kwargs) -> tuple[dict, str]:
    """``run(steps, preprocess=preprocess, **kwargs)`` in a new process: its readings, and how the process started.

    ``preprocess`` may be defined in a notebook cell, which a brand-new interpreter cannot import by name. Where
    ``fork_is_safe()``, the process is a fork of this one ("fork"): it has the function already, and starts with this
    process's memory, so compare its RSS growth with another run made the same way, not with a fresh process's.
    Elsewhere (macOS, Windows) it is a fresh interpreter ("spawn") that receives the function by value, pickled with
    cloudpickle (which gymnasium installs); the function must then be picklable that way (a function defined in a
    cell is). Raises ``RuntimeError`` when the run fails in the new process and ``TimeoutError`` past ``timeout`` s.
    """
    if fork_is_safe():
        measured = measure_in_subprocess(run, steps, preprocess=preprocess, timeout=timeout, start_method="fork",
                                         **kwargs)
        return measured.result, "fork"
    import cloudpickle

    measured = measure_in_subprocess(_run_unpickled, cloudpickle.dumps(preprocess), steps, kwargs, timeout=timeout,
                                     start_method="spawn")
    return measured.result, "spawn"


def count_predict_calls(batch_size: Count = 32, ending: int = 0, seed: int = 0) -> int:
    """The ``predict`` calls (Keras' ``model.predict``) that one ``NaiveAgent.replay(batch_size)`` makes.

    The memory holds exactly ``batch_size`` transitions of random blog-shaped states, ``ending`` of which end a game
    (``done``), so ``replay`` samples every one of them: each needs Q(s), and each that does not end a game needs
    Q(s') too. With ``ending=0``, the most calls a ``replay`` can make. Raises ``ValueError`` when ``ending`` is
    more than ``batch_size``.
    """
    if ending > batch_size:
        raise ValueError(f"ending={ending}: at most the {batch_size} sampled transitions can end a game")
    agent = NaiveAgent(4, seed=seed)
    rng = np.random.default_rng(seed)
    for i in range(batch_size):
        state = rng.integers(0, 256, size=agent.state_shape, dtype=np.uint8)
        agent.remember(state, 0, 0.0, state, i < ending)
    calls = 0
    predict = agent.predict

    def counting_predict(model, states):
        nonlocal calls
        calls += 1
        return predict(model, states)

    agent.predict = counting_predict  # the instance attribute shadows the static method
    agent.replay(batch_size)
    return calls


# -- small fresh-process experiments ----------------------------------------------------------------
def fill_free_refill(n: int = 2000, frame_shape: tuple[int, ...] = BLOG_FRAME_SHAPE, rounds: Count = 3,
                     trim: bool = False) -> list[dict]:
    """Fill a ``NaiveDequeMemory`` with ``n`` transitions (s and s' copies), free it, again ``rounds`` times.

    For each round: the RSS growth while filling, the RSS change when freeing, and the bytes that
    tracemalloc saw allocated by the fill. Run it in a fresh process: the first round takes pages
    from the OS; later rounds reuse what the allocator kept, so RSS reads less growth although
    tracemalloc sees the same bytes every time. ``trim=True`` calls glibc's ``malloc_trim(0)``
    after each free, which hands the kept memory back to the OS (Linux only).
    """
    import ctypes

    shape = (1, *frame_shape)
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, size=shape, dtype=np.uint8)
    out = []
    for r in range(rounds):
        gc.collect()
        rss0 = rss_bytes()
        tracemalloc.start()
        memory = NaiveDequeMemory(n, obs_shape=shape, obs_dtype=np.uint8, seed=r, copy_states=True)
        for i in range(n):
            memory.add(frame, i % 4, 0.0, frame, False)
        traced = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        rss1 = rss_bytes()
        del memory
        gc.collect()
        if trim:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        rss2 = rss_bytes()
        out.append({"round": r + 1, "fill_growth": rss1 - rss0, "after_free": rss2 - rss0, "traced": traced})
    return out


def hold_env_frames(n: int = 1000, seed: int = 0) -> dict:
    """Keep ``n`` raw Breakout frames as the environment returns them, then ``n`` ``np.array`` copies.

    For each, the RSS growth and the bytes tracemalloc saw, per frame. ALE frames are allocated by
    the emulator's C++ code, not by numpy: tracemalloc never sees their pixels, only the small Python
    objects wrapped around them; RSS sees everything. Both lists stay alive to the end, so the second
    measurement cannot reuse memory freed by the first.
    """
    from dqn_course.envs import make_raw_breakout

    env = make_raw_breakout(seed=seed)
    env.reset(seed=seed)
    result, keep = {}, []
    for how in ("as returned", "np.array copies"):
        kept = []
        gc.collect()
        rss0 = rss_bytes()
        tracemalloc.start()
        for _ in range(n):
            obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
            kept.append(obs if how == "as returned" else np.array(obs))
            if terminated or truncated:
                env.reset()
        traced = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        result[how] = {"rss_per_frame": (rss_bytes() - rss0) / n, "traced_per_frame": traced / n,
                       "nbytes_per_frame": kept[0].nbytes}
        keep.append(kept)
    env.close()
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Run the Stack Overflow question's agent; record RSS every few steps.")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--frames", choices=FRAMES, default="blog")
    p.add_argument("--copy-states", action="store_true")
    p.add_argument("--learn-every", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--record-every", type=int, default=100)
    p.add_argument("--no-trace", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the readings here (default: print them)")
    a = p.parse_args(argv)
    result = run(a.steps, frames=a.frames, copy_states=a.copy_states, learn_every=a.learn_every,
                 batch_size=a.batch_size, record_every=a.record_every, trace=not a.no_trace, seed=a.seed)
    text = json.dumps(result)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()


check_module(globals())
