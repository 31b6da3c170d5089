"""Notebook 08's helpers: trees filled alike, step and tree-walk timing, a PER-vs-uniform run on CartPole.

The learning comparison needs vector observations, which the frame-sharing memories do not take, so
``VectorReplay`` is a plain numpy ring for (obs, action, reward, next_obs, done) with the course's
``CompiledSumTree`` and ``importance_weights`` on top (nothing of the tree is re-implemented here).
``run_cartpole`` trains a tiny MLP Q-network with it, uniform or prioritized, and returns the
episode returns: a demonstration that PER plugs into a learner, not a benchmark of PER.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from dqn_course.contracts import Count, Probability, check_module
from dqn_course.lab.bench import timeit
from dqn_course.lab.per_trees import PerItemSumTree, SumTree
from dqn_course.per import CompiledSumTree, beta_at, check_leaves, importance_weights


def filled_trees(capacity: Count, seed: int = 0) -> tuple[np.ndarray, dict]:
    """Random priorities and every tree holding them: ``{"per_item": ..., "numpy": ..., "compiled": ...}``.

    The per-item tree is not filled through its own ``update`` (that would walk 1M leaves in
    Python): it has the compiled tree's node layout (node n has children 2n and 2n+1, leaf i is node
    ``size + i``), so it starts from a copy of the compiled tree's nodes.
    """
    priorities = np.random.default_rng(seed).random(capacity) + 0.01
    trees = {"per_item": PerItemSumTree(capacity), "numpy": SumTree(capacity), "compiled": CompiledSumTree(capacity)}
    for kind in ("numpy", "compiled"):
        trees[kind].update(np.arange(capacity), priorities)
    trees["per_item"].tree = trees["compiled"].nodes.tolist()
    return priorities, trees


def interleaved_ms(fns: dict, seconds: float) -> dict[str, float]:
    """Median milliseconds per call of each function, called in turn one call at a time (warm-up first): ``timeit``.

    For calls of tens of milliseconds on a shared machine: a burst of other work lands on both
    functions alike, and the median ignores the calls it stretched.
    """
    return {name: stats["median_ms"] for name, stats in timeit(fns, min_seconds=seconds, rounds=1).items()}


def interleaved_ratios(fns: dict, seconds: float, reference: str, resamples: Count = 2_000, seed: int = 0) -> dict:
    """Each function's median milliseconds per call and the ratio of its median to ``reference``'s, with a 95%
    bootstrap interval for that ratio.

    The functions are called in turn, one call each per round, in the order of ``fns`` (each called once first,
    untimed), for at least ``seconds`` and at least 3 rounds, so a burst of other work lands on all of them alike.
    The interval resamples whole rounds (a burst stretches the calls of one round together) ``resamples`` times and
    takes the 2.5th and 97.5th percentiles of the ratio of medians: where the ratio could land if this timing were
    repeated on this machine, so one A/A pair's luck is not mistaken for the noise floor.

    Returns ``{name: {"median_ms", "ratio", "low", "high", "rounds"}}`` in the order of ``fns``; ``reference``'s
    ratio is 1. Raises ``KeyError`` when ``reference`` is not a key of ``fns``.
    """
    if reference not in fns:
        raise KeyError(f"reference {reference!r} is not one of the functions timed: {list(fns)}")
    names = list(fns)
    timed = timeit(fns, min_seconds=seconds, rounds=3)
    ms = np.array([timed[name]["turns_ms"] for name in names]).T  # (rounds, functions)
    ref = names.index(reference)
    picks = np.random.default_rng(seed).integers(0, len(ms), size=(resamples, len(ms)))
    medians = np.median(ms[picks], axis=1)  # (resamples, functions): each resample's median per function
    low, high = np.percentile(medians / medians[:, [ref]], [2.5, 97.5], axis=0)
    median = np.median(ms, axis=0)
    return {name: {"median_ms": float(median[k]), "ratio": float(median[k] / median[ref]), "low": float(low[k]),
                   "high": float(high[k]), "rounds": len(ms)} for k, name in enumerate(names)}



def time_find(find: Callable | None, capacity: Count = 100_000, batch: Count = 32, seconds: float = 1.0,
              seed: int = 0) -> dict | None:
    """Notebook 08's exercise timed: the learner's ``find(nodes, masses)`` beside ``CompiledSumTree.find``, on one tree
    of ``capacity`` leaves at random priorities and one batch of ``batch`` masses drawn as ``CompiledSumTree.sample``
    draws them (one in each of ``batch`` equal parts of [0, total)). The two take turns (``bench.timeit``, for at
    least ``seconds``), so a burst of other work lands on both alike.

    Returns ``{"yours_ms", "compiled_ms", "ratio", "capacity", "batch"}`` (median milliseconds per call; ``ratio`` is
    yours over the compiled one), or None while ``find`` is None or returns None (not written yet). Raises
    ``ValueError`` when its leaves differ from ``CompiledSumTree.find``'s: a wrong walk's time says nothing.
    """
    if find is None:
        return None
    rng = np.random.default_rng(seed)
    tree = CompiledSumTree(capacity)
    tree.update(np.arange(capacity), rng.random(capacity) + 0.01)
    masses = (np.arange(batch) + rng.random(batch)) * tree.total / batch
    yours = find(tree.nodes, masses)
    if yours is None:
        return None
    right = tree.find(masses)
    if not np.array_equal(np.asarray(yours).ravel(), right):
        raise ValueError(f"find's leaves differ from CompiledSumTree.find's on {batch} masses in a tree of "
                         f"{capacity:,} leaves: make it pass checks.check_sum_tree_find first")
    times = timeit({"yours": lambda: find(tree.nodes, masses), "compiled": lambda: tree.find(masses)},
                   min_seconds=seconds, turn_seconds=0.05)
    ms = {name: stats["median_ms"] for name, stats in times.items()}
    return {"yours_ms": ms["yours"], "compiled_ms": ms["compiled"], "ratio": ms["yours"] / ms["compiled"],
            "capacity": capacity, "batch": batch}

class VectorReplay:
    """A numpy ring of vector transitions, sampled uniformly or in proportion to |TD error| ** alpha."""

    def __init__(self, capacity: Count, obs_dim: Count, prioritized: bool, alpha: float = 0.6, eps: float = 1e-6,
                 seed: int = 0):
        self.capacity, self.prioritized, self.alpha, self.eps = capacity, prioritized, alpha, eps
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.actions = np.zeros(capacity, np.int64)
        self.rewards = np.zeros(capacity, np.float32)
        self.dones = np.zeros(capacity, np.float32)
        self.head = self.size = 0
        self.tree = CompiledSumTree(capacity) if prioritized else None
        self.max_priority = 1.0
        self.rng = np.random.default_rng(seed)

    def add(self, obs: np.ndarray | Sequence[float], action: int, reward: float,
            next_obs: np.ndarray | Sequence[float], done: bool) -> None:
        for name, value in (("obs", obs), ("next_obs", next_obs)):
            value = np.asarray(value)
            if value.shape != self.obs.shape[1:] or value.dtype.kind not in "iuf" or not np.isfinite(value).all():
                raise ValueError(f"{name} must be {self.obs.shape[1]} finite floats, got "
                                 f"{value.dtype}{list(value.shape)}")
        k = self.head
        self.obs[k], self.actions[k], self.rewards[k] = obs, action, reward
        self.next_obs[k], self.dones[k] = next_obs, done
        if self.tree is not None:  # new transitions enter at the largest priority so far
            self.tree.update([k], [self.max_priority ** self.alpha])
        self.head = (k + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size: Count, beta: Probability):
        """(obs, actions, rewards, next_obs, dones, weights or None, indices)."""
        if self.tree is None:
            idx, weights = self.rng.integers(0, self.size, batch_size), None
        else:
            idx = self.tree.sample(batch_size, self.rng)
            weights = importance_weights(self.tree.get(idx) / self.tree.total, self.size, beta)
        return self.obs[idx], self.actions[idx], self.rewards[idx], self.next_obs[idx], self.dones[idx], weights, idx

    def update_priorities(self, indices: np.ndarray | Sequence[int], td_errors: np.ndarray | Sequence[float]) -> None:
        indices = check_leaves("indices", indices, integer=True)
        td_errors = check_leaves("td_errors", td_errors, non_negative=False)
        if td_errors.size != indices.size or (indices.size and indices.max() >= self.size):
            raise ValueError(f"indices ({indices.size}, each a stored transition in [0, {self.size})) and td_errors "
                             f"({td_errors.size}) must pair one error with each index")
        priorities = np.abs(td_errors) + self.eps
        self.tree.update(indices, priorities ** self.alpha)
        self.max_priority = max(self.max_priority, float(priorities.max()))


def run_cartpole(prioritized: bool, steps: int, seed: int = 0, *, capacity: Count = 10_000, batch_size: Count = 64,
                 lr: float = 1e-3, gamma: Probability = 0.99, learning_starts: int = 500, target_every: int = 250,
                 explore_steps: int | None = None, alpha: float = 0.6, beta0: Probability = 0.4,
                 hidden: Count = 64) -> dict:
    """DQN with a 4-64-64-2 MLP on CartPole-v1 for ``steps`` agent steps, one update per step.

    Returns ``{"returns", "ends" (agent step at which each episode ended), "seconds"}``. Runs on one
    CPU thread (a network this small gains nothing from more) and restores the thread count after.
    """
    import gymnasium as gym
    import torch
    import torch.nn.functional as F

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        env = gym.make("CartPole-v1")
        q = torch.nn.Sequential(torch.nn.Linear(4, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                                torch.nn.ReLU(), torch.nn.Linear(hidden, 2))
        target = torch.nn.Sequential(*[type(m)(m.in_features, m.out_features) if isinstance(m, torch.nn.Linear)
                                       else torch.nn.ReLU() for m in q])
        target.load_state_dict(q.state_dict())
        opt = torch.optim.Adam(q.parameters(), lr=lr)
        memory = VectorReplay(capacity, 4, prioritized, alpha=alpha, seed=seed)
        explore_steps = explore_steps or max(1, steps // 3)
        returns, ends, ret = [], [], 0.0
        obs, _ = env.reset(seed=seed)
        t0 = time.perf_counter()
        for step in range(steps):
            eps = max(0.05, 1.0 - 0.95 * step / explore_steps)
            if rng.random() < eps:
                action = int(rng.integers(2))
            else:
                with torch.no_grad():
                    action = int(q(torch.as_tensor(obs)).argmax())
            next_obs, reward, terminated, truncated, _ = env.step(action)
            memory.add(obs, action, reward, next_obs, terminated)  # a time limit is no terminal state
            ret += reward
            obs = next_obs
            if terminated or truncated:
                returns.append(ret)
                ends.append(step + 1)
                ret = 0.0
                obs, _ = env.reset()
            if step >= learning_starts:
                s, a, r, s2, d, w, idx = memory.sample(batch_size, beta_at(step, steps, beta0))
                s, a, r, s2, d = map(torch.as_tensor, (s, a, r, s2, d))
                with torch.no_grad():
                    y = r + gamma * (1.0 - d) * target(s2).max(1).values
                pred = q(s).gather(1, a.unsqueeze(1)).squeeze(1)
                if w is None:
                    loss = F.smooth_l1_loss(pred, y)
                else:
                    loss = (torch.as_tensor(w) * F.smooth_l1_loss(pred, y, reduction="none")).mean()
                    memory.update_priorities(idx, (y - pred).detach().abs().numpy())
                opt.zero_grad()
                loss.backward()
                opt.step()
                if step % target_every == 0:
                    target.load_state_dict(q.state_dict())
        env.close()
        return {"returns": np.array(returns), "ends": np.array(ends), "seconds": time.perf_counter() - t0}
    finally:
        torch.set_num_threads(threads)


check_module(globals())
