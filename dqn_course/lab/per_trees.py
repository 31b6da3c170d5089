"""The two slower sum trees of notebook 08, kept to be compared with ``dqn_course.per.CompiledSumTree``.

- ``PerItemSumTree``: a binary tree in Python lists, walked one item and one level at a time;
- ``SumTree``: numpy only, a whole batch found with two ``searchsorted`` calls over prefix sums. Each
  numpy call pays a fixed overhead whatever its size, and an update rewrites whole blocks of prefix sums.

Both have the compiled tree's interface (``update``, ``find``/``find_one``, ``sample``, ``get``, ``total``,
``nbytes``), so ``PrioritizedMemory(memory, tree=SumTree)`` runs on the numpy one.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from dqn_course.contracts import Count, check_module
from dqn_course.per import check_leaves


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

    def __init__(self, capacity: Count, block: int = 256):
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

    def get(self, indices: np.ndarray | Sequence[int]) -> np.ndarray:
        return self.leaves.reshape(-1)[check_leaves("indices", indices, integer=True, below=self.capacity)]

    def update(self, indices: np.ndarray | Sequence[int], values: np.ndarray | Sequence[float]) -> None:
        """Set leaves (the last value wins for repeated indices) and refresh the sums above them."""
        indices = check_leaves("indices", indices, integer=True, below=self.capacity)
        values = check_leaves("values", values)
        if indices.size != values.size:
            raise ValueError(f"got {indices.size} indices but {values.size} values")
        if indices.size == 0:
            return
        with np.errstate(over="ignore"):  # an overflowing sum is the error reported below, not a warning
            finite = np.isfinite(values.sum())
        if not (values.min() >= 0 and finite):  # NaN fails the first test
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

    def find(self, mass: np.ndarray | Sequence[float]) -> np.ndarray:
        """Leaves whose cumulative interval [before, before + priority) holds each mass, all at once."""
        mass = check_leaves("mass", mass, non_negative=False, any_shape=True)  # below 0: rounding
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

    def sample(self, batch_size: Count, rng: np.random.Generator) -> np.ndarray:
        """Stratified: one draw in each of ``batch_size`` equal slices of the total mass."""
        if self.total <= 0:
            raise ValueError("cannot sample from a tree whose priorities are all zero")
        return self.find((np.arange(batch_size) + rng.random(batch_size)) * (self.total / batch_size))


class PerItemSumTree:
    """The same tree with plain Python lists and one item at a time: what notebook 08 measures against."""

    def __init__(self, capacity: Count):
        self.capacity = capacity
        self.size = 1 << (capacity - 1).bit_length()
        self.tree = [0.0] * (2 * self.size)

    @property
    def total(self) -> float:
        return self.tree[1]

    def update(self, indices: np.ndarray | Sequence[int], values: np.ndarray | Sequence[float]) -> None:
        indices, values = check_leaves("indices", indices, integer=True), check_leaves("values", values)
        if indices.size != values.size or (indices.size and indices.max() >= self.capacity):
            raise ValueError(f"indices ({indices.size}, in [0, {self.capacity})) and values ({values.size}) "
                             f"must pair one value with each leaf")
        for i, v in zip(indices, values):
            node = int(i) + self.size
            self.tree[node] = float(v)
            node //= 2
            while node >= 1:
                self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]
                node //= 2

    def find_one(self, mass: float | torch.Tensor) -> int:
        node = 1
        while node < self.size:
            left = 2 * node
            if mass >= self.tree[left] and self.tree[left + 1] > 0:
                mass -= self.tree[left]
                node = left + 1
            else:
                node = left
        return node - self.size

    def sample(self, batch_size: Count, rng: np.random.Generator) -> np.ndarray:
        segment = self.total / batch_size
        return np.array([self.find_one((k + rng.random()) * segment) for k in range(batch_size)])


# -- the compiled tree ------------------------------------------------------------------------------------------
# Eager signatures: the kernels are compiled (or loaded from numba's on-disk cache) when this module is
# imported, never on a first call inside a timing, and an argument of another dtype is an error, not a
# silent recompilation. ``CompiledSumTree`` converts its arguments before calling them.


check_module(globals())
