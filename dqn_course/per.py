"""Prioritized experience replay (Schaul et al., 2016) that costs almost nothing.

Seed 004 sampled its Fenwick tree one item at a time in Python and found PER "several times
slower". The tree is not the slow part; walking it in Python, one item and one level at a time,
is. ``SumTree`` finds a whole batch with two numpy ``searchsorted`` calls over prefix sums;
``PerItemSumTree`` is the slow way, a binary tree in Python lists walked per item, kept for the
comparison in notebook 08 and ``benchmarks/per.py``.

``PrioritizedMemory`` puts a tree over the slots of a frame-sharing memory (or the slots of all
streams of a multi-stream one) without copying any frame: a slot's leaf holds ``priority ** alpha``
while the slot is valid to sample and 0 otherwise, so only valid transitions can be drawn.
"""
from __future__ import annotations

import numpy as np

from dqn_course.replay import Batch, FrameSharingMemory, MultiStreamMemory


class SumTree:
    """A two-level sum tree over ``capacity`` leaves, searched for a whole batch with ``searchsorted``.

    Leaves live in blocks of ``block`` (256). Each block keeps the prefix sums of its leaves, and the
    block totals keep their own prefix sums. Finding the leaf that holds a given mass is then two
    binary searches, both done by numpy for the whole batch:

    1. ``searchsorted(block_prefix, mass)`` picks the block;
    2. the rest of the mass is searched in that block's prefix sums. To do that for every query in
       one call, the blocks' prefix sums sit end to end in one array with block ``b`` shifted up by
       ``b * stride`` (``stride`` > any block total), which keeps the whole array sorted.

    An update rewrites the prefix sums of the touched blocks only (at most ``block`` values each)
    and the block prefix (``capacity / block`` values). Zero-priority leaves have empty intervals
    and are never found.
    """

    def __init__(self, capacity: int, block: int = 256):
        if capacity < 1:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.capacity, self.block = capacity, block
        self.n_blocks = -(-capacity // block)
        self.leaves = np.zeros((self.n_blocks, block), np.float64)
        self.block_sums = np.zeros(self.n_blocks, np.float64)
        self.block_prefix = np.zeros(self.n_blocks, np.float64)
        self.stride = 1.0
        # Each block's prefix sums plus b * stride, end to end: one sorted array for all blocks.
        # Empty blocks must sit at b * stride too, or the array is unsorted until every block is written.
        self.shifted = np.repeat(np.arange(self.n_blocks, dtype=np.float64)[:, None] * self.stride, block, axis=1)

    @property
    def total(self) -> float:
        return float(self.block_prefix[-1])

    @property
    def nbytes(self) -> int:
        return self.leaves.nbytes + self.block_sums.nbytes + self.block_prefix.nbytes + self.shifted.nbytes

    def get(self, indices) -> np.ndarray:
        return self.leaves.reshape(-1)[np.asarray(indices)]

    def update(self, indices, values) -> None:
        """Set leaves (the last value wins for repeated indices) and refresh the sums above them."""
        indices = np.asarray(indices, np.int64)
        values = np.asarray(values, np.float64)
        if indices.size == 0:
            return
        if indices.min() < 0 or indices.max() >= self.capacity:
            raise IndexError(f"leaf indices must be in [0, {self.capacity})")
        if values.min() < 0 or not np.isfinite(values.sum()):
            raise ValueError("priorities must be finite and non-negative")
        self.leaves.reshape(-1)[indices] = values  # numpy assigns repeated indices in order: the last one stays
        blocks = np.unique(indices // self.block)
        rows = np.cumsum(self.leaves[blocks], axis=1)
        self.block_sums[blocks] = rows[:, -1]
        np.cumsum(self.block_sums, out=self.block_prefix)
        if rows[:, -1].max() >= self.stride:  # a block outgrew the shift: widen it and rebuild every block
            self.stride = 2.0 * float(self.block_sums.max())
            blocks = np.arange(self.n_blocks)
            rows = np.cumsum(self.leaves, axis=1)
        self.shifted[blocks] = rows + blocks[:, None] * self.stride

    def find(self, mass) -> np.ndarray:
        """Leaves whose cumulative interval [before, before + priority) holds each mass, all at once."""
        mass = np.asarray(mass, np.float64)
        b = np.minimum(np.searchsorted(self.block_prefix, mass, side="right"), self.n_blocks - 1)
        rest = mass - np.where(b > 0, self.block_prefix[b - 1], 0.0)
        rest = np.minimum(rest, np.nextafter(self.block_sums[b], 0))  # rounding must not spill into block b+1
        leaf = np.searchsorted(self.shifted.reshape(-1), rest + b * self.stride, side="right")
        flat = self.leaves.reshape(-1)
        bad = (leaf // self.block != b) | (flat[np.minimum(leaf, flat.size - 1)] <= 0)
        if bad.any():  # rounding at the edges (a priority far below the stride, mass == total): exact, rare
            live = np.flatnonzero(flat > 0)
            cumulative = np.cumsum(flat[live])
            leaf[bad] = live[np.minimum(np.searchsorted(cumulative, mass[bad], side="right"), live.size - 1)]
        return leaf

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Stratified: one draw in each of ``batch_size`` equal slices of the total mass."""
        if self.total <= 0:
            raise ValueError("cannot sample from a tree whose priorities are all zero")
        return self.find((np.arange(batch_size) + rng.random(batch_size)) * (self.total / batch_size))


class PerItemSumTree:
    """The same tree with plain Python lists and one item at a time: what notebook 08 measures against."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.size = 1 << (capacity - 1).bit_length()
        self.tree = [0.0] * (2 * self.size)

    @property
    def total(self) -> float:
        return self.tree[1]

    def update(self, indices, values) -> None:
        for i, v in zip(indices, values):
            node = int(i) + self.size
            self.tree[node] = float(v)
            node //= 2
            while node >= 1:
                self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]
                node //= 2

    def find_one(self, mass: float) -> int:
        node = 1
        while node < self.size:
            left = 2 * node
            if mass >= self.tree[left] and self.tree[left + 1] > 0:
                mass -= self.tree[left]
                node = left + 1
            else:
                node = left
        return node - self.size

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        segment = self.total / batch_size
        return np.array([self.find_one((k + rng.random()) * segment) for k in range(batch_size)])


def beta_at(step: int, total_steps: int, beta0: float = 0.4) -> float:
    """Importance-sampling exponent, annealed linearly from ``beta0`` to 1 over the run."""
    return min(1.0, beta0 + (1.0 - beta0) * step / max(1, total_steps))


def importance_weights(probabilities: np.ndarray, n: int, beta: float) -> np.ndarray:
    """w_i = (N * P(i)) ** -beta, divided by the batch's largest weight so that w <= 1."""
    w = (n * np.asarray(probabilities, np.float64)) ** (-beta)
    return (w / w.max()).astype(np.float32)


class PrioritizedMemory:
    """Proportional PER over a ``FrameSharingMemory`` or ``MultiStreamMemory``, frames untouched.

    New transitions enter at the largest priority seen so far, so each is replayed at least once
    soon. ``sample`` returns a ``Batch`` with ``weights`` (importance-sampling) and ``indices``
    (tree leaves) filled in; give those indices and the new TD errors to ``update_priorities``.
    """

    def __init__(self, memory: FrameSharingMemory | MultiStreamMemory, alpha: float = 0.6, eps: float = 1e-6,
                 seed: int | None = None):
        self.memory = memory
        self.streams = memory.streams if isinstance(memory, MultiStreamMemory) else [memory]
        self.stream_capacity = self.streams[0].capacity
        self.tree = SumTree(self.stream_capacity * len(self.streams))
        self.alpha, self.eps = alpha, eps
        self.max_priority = 1.0
        self.rng = np.random.default_rng(seed)
        for s in self.streams:
            s.track_validity = True  # the memory records the slots whose validity flipped

    def _sync(self) -> None:
        """Mirror validity flips into the tree: valid slots get max priority (new), invalid ones 0."""
        for k, s in enumerate(self.streams):
            if not s.validity_changes:
                continue
            slots = np.fromiter(s.validity_changes, np.int64)
            s.validity_changes.clear()
            valid = s.valid[slots]
            self.tree.update(slots + k * self.stream_capacity, np.where(valid, self.max_priority ** self.alpha, 0.0))

    def add(self, *args, **kwargs) -> None:
        self.memory.add(*args, **kwargs)
        self._sync()

    def add_batch(self, *args, **kwargs) -> None:
        self.memory.add_batch(*args, **kwargs)
        self._sync()

    def __len__(self) -> int:
        return len(self.memory)

    @property
    def nbytes(self) -> int:
        return self.memory.nbytes + self.tree.nbytes

    @property
    def device(self):
        return self.memory.device

    def sample(self, batch_size: int, beta: float = 0.4) -> Batch:
        if len(self.memory) < batch_size:
            raise ValueError(f"cannot sample {batch_size} transitions: only {len(self.memory)} can be sampled so far")
        leaves = self.tree.sample(batch_size, self.rng)
        streams, slots = np.divmod(leaves, self.stream_capacity)
        order = np.argsort(streams, kind="stable")  # group by stream; the learner does not care about order
        leaves, streams, slots = leaves[order], streams[order], slots[order]
        if isinstance(self.memory, MultiStreamMemory):
            batch = self.memory.batch_at(streams, slots)
        else:
            batch = self.memory.batch_at(slots)
        probs = self.tree.get(leaves) / self.tree.total
        return batch._replace(weights=importance_weights(probs, len(self.memory), beta), indices=leaves)

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """priority = |TD error| + eps; the tree stores priority ** alpha."""
        priorities = np.abs(np.asarray(td_errors, np.float64)) + self.eps
        self.max_priority = max(self.max_priority, float(priorities.max()))
        indices = np.asarray(indices)
        streams, slots = np.divmod(indices, self.stream_capacity)
        still_valid = np.array([self.streams[k].valid[j] for k, j in zip(streams, slots)], bool)
        # A slot overwritten since it was sampled keeps priority 0.
        self.tree.update(indices[still_valid], priorities[still_valid] ** self.alpha)
