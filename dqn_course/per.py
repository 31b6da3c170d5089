"""Prioritized experience replay (Schaul et al., 2016) that costs almost nothing.

Seed 004 sampled its Fenwick tree one item at a time in Python and found PER "several times
slower". The tree is not the slow part; walking it in the interpreter, one item and one level at a
time, is. Three trees with one interface (``update``, ``find``, ``sample``, ``get``, ``total``,
``nbytes``), compared in notebook 08 and ``benchmarks/per.py``:

- ``PerItemSumTree``: the slow way, a binary tree in Python lists walked per item;
- ``SumTree``: numpy only, a whole batch found with two ``searchsorted`` calls over prefix sums.
  At batch 32 it stops at a few times the per-item tree: each numpy call costs microseconds of
  fixed overhead whatever its size, and an update rewrites whole blocks of prefix sums;
- ``CompiledSumTree``: the classic binary sum tree, its loops compiled by numba, so a batch costs
  a few microseconds in all. ``PrioritizedMemory`` uses it by default.

``PrioritizedMemory`` puts a tree over the slots of a frame-sharing memory (or the slots of all
streams of a multi-stream one) without copying any frame: a slot's leaf holds ``priority ** alpha``
while the slot is valid to sample and 0 otherwise, so only valid transitions can be drawn.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from dqn_course.replay import Batch, FrameSharingMemory, MultiStreamMemory
from dqn_course.storage import parse_rng_state, rng_state_array


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


# -- the compiled tree ------------------------------------------------------------------------------------------
# Eager signatures: the kernels are compiled (or loaded from numba's on-disk cache) when this module is
# imported, never on a first call inside a timing, and an argument of another dtype is an error, not a
# silent recompilation. ``CompiledSumTree`` converts its arguments before calling them.

@njit("void(float64[::1], int64, float64[::1], int64[::1])", cache=True, nogil=True)
def _descend(nodes, size, mass, out):
    """Walk every mass from the root down to its leaf, one tree level at a time for the whole batch.

    Level by level, the batch's loads at one level do not depend on each other, so the CPU overlaps
    their cache misses; the branch-free step avoids a mispredicted branch per level and item.
    Go right only into a subtree with positive mass: since every node is exactly the float sum of its
    children, a walk that starts at a positive root never enters a zero subtree, so it always ends on a
    leaf with positive priority (a mass at or past the total ends on the last live leaf).
    """
    node = np.ones(mass.size, np.int64)
    width = size
    while width > 1:
        for k in range(mass.size):
            left = 2 * node[k]
            before = nodes[left]
            right = (nodes[left + 1] > 0.0) & ((mass[k] >= before) | (before <= 0.0))
            mass[k] -= before if right else 0.0
            node[k] = left + right
        width //= 2
    for k in range(mass.size):
        out[k] = node[k] - size


@njit("void(float64[::1], int64, float64[::1], int64[::1])", cache=True, nogil=True)
def _sample(nodes, size, u, out):
    """Stratified: mass k = (k + u[k]) * total / n, one uniform ``u[k]`` in [0, 1) per stratum."""
    segment = nodes[1] / u.size
    mass = np.empty(u.size)
    for k in range(u.size):
        mass[k] = (k + u[k]) * segment
    _descend(nodes, size, mass, out)


@njit("int64(float64[::1], int64, int64, int64[::1], float64[::1])", cache=True, nogil=True)
def _update(nodes, size, capacity, indices, values):
    """Check everything first (0: done, 1: an index out of range, 2: a bad priority), then write in order.

    Writes in order, so the last value wins for a repeated index. Each written leaf's ancestors are
    recomputed from their children (no running deltas, so no drift); when so many leaves change that
    walking up from each costs more than rebuilding, every internal node is rebuilt bottom-up instead.
    """
    total = 0.0
    for k in range(indices.size):
        if indices[k] < 0 or indices[k] >= capacity:
            return 1
        if not values[k] >= 0.0:  # also catches NaN
            return 2
        total += values[k]
    if not np.isfinite(total):
        return 2
    levels = 0
    while (1 << levels) < size:
        levels += 1
    rebuild = indices.size * levels > size
    for k in range(indices.size):
        node = indices[k] + size
        nodes[node] = values[k]
        if not rebuild:
            node //= 2
            while node >= 1:
                nodes[node] = nodes[2 * node] + nodes[2 * node + 1]
                node //= 2
    if rebuild:
        for node in range(size - 1, 0, -1):
            nodes[node] = nodes[2 * node] + nodes[2 * node + 1]
    return 0


class CompiledSumTree:
    """The classic binary sum tree, its loops compiled with numba: what ``PrioritizedMemory`` uses.

    Node 1 is the root, node n has children 2n and 2n+1, leaf i is node ``size + i`` (``size``: the
    power of two at or above ``capacity``), and every internal node holds the sum of its children.
    ``SumTree``'s limit at batch 32 is not arithmetic but the fixed cost of each numpy call; here a
    whole sample is one call and a whole update another, each a few hundred tree steps of machine code.
    The random numbers come from the caller's numpy ``Generator`` (one per stratum, drawn exactly as
    ``SumTree.sample`` draws them), so a seeded run is reproducible and both trees see the same draws.
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.capacity = capacity
        self.size = 1 << (capacity - 1).bit_length()
        self.nodes = np.zeros(2 * self.size, np.float64)

    @property
    def total(self) -> float:
        return float(self.nodes[1])

    @property
    def nbytes(self) -> int:
        return self.nodes.nbytes

    def get(self, indices) -> np.ndarray:
        indices = np.asarray(indices)
        if indices.size and (indices.min() < 0 or indices.max() >= self.capacity):
            raise IndexError(f"leaf indices must be in [0, {self.capacity})")
        return self.nodes[self.size + indices]

    def update(self, indices, values) -> None:
        """Set leaves (the last value wins for repeated indices) and refresh the sums above them."""
        indices = np.ascontiguousarray(indices, np.int64).reshape(-1)
        values = np.ascontiguousarray(values, np.float64).reshape(-1)
        if indices.size != values.size:
            raise ValueError(f"got {indices.size} indices but {values.size} values")
        status = _update(self.nodes, self.size, self.capacity, indices, values)
        if status == 1:
            raise IndexError(f"leaf indices must be in [0, {self.capacity})")
        if status == 2:
            raise ValueError("priorities must be finite and non-negative")

    def find(self, mass) -> np.ndarray:
        """Leaves whose cumulative interval [before, before + priority) holds each mass."""
        if not self.nodes[1] > 0:
            raise ValueError("cannot search a tree whose priorities are all zero")
        mass = np.array(mass, np.float64)  # a copy: the walk subtracts from it in place
        out = np.empty(mass.size, np.int64)
        _descend(self.nodes, self.size, mass.reshape(-1), out)
        return out.reshape(mass.shape)  # the shape of the masses given, like SumTree.find

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Stratified: one draw in each of ``batch_size`` equal slices of the total mass."""
        if not self.nodes[1] > 0:
            raise ValueError("cannot sample from a tree whose priorities are all zero")
        out = np.empty(batch_size, np.int64)
        _sample(self.nodes, self.size, rng.random(batch_size), out)
        return out


TREES = {"compiled": CompiledSumTree, "numpy": SumTree}  # PrioritizedMemory's ``tree`` choices


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
    ``tree="numpy"`` swaps the compiled tree for the numpy one (same draws up to rounding, slower).
    ``state_dict`` / ``load_state_dict`` checkpoint the priorities together with the wrapped memory.
    """

    def __init__(self, memory: FrameSharingMemory | MultiStreamMemory, alpha: float = 0.6, eps: float = 1e-6,
                 seed: int | None = None, tree: str = "compiled"):
        if tree not in TREES:
            raise ValueError(f"tree must be one of {sorted(TREES)}, got {tree!r}")
        self.memory = memory
        self.streams = memory.streams if isinstance(memory, MultiStreamMemory) else [memory]
        self.stream_capacity = self.streams[0].capacity
        self.tree = TREES[tree](self.stream_capacity * len(self.streams))
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
        still_valid = np.zeros(indices.size, bool)
        for k, s in enumerate(self.streams):
            mine = streams == k
            still_valid[mine] = s.valid[slots[mine]]
        # A slot overwritten since it was sampled keeps priority 0.
        self.tree.update(indices[still_valid], priorities[still_valid] ** self.alpha)

    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything a resumed run needs, as flat numpy arrays: leaf priorities, max priority, the RNG.

        Only the leaves are saved; ``load_state_dict`` rebuilds the sums above them, so a checkpoint
        does not depend on which tree wrote it. The wrapped memory's arrays go under ``memory/``.
        """
        state = {"tree/leaves": self.tree.get(np.arange(self.tree.capacity)),
                 "max_priority": np.array(self.max_priority), "alpha": np.array(self.alpha),
                 "eps": np.array(self.eps), "rng": rng_state_array(self.rng)}
        state.update({f"memory/{k}": v for k, v in self.memory.state_dict().items()})
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restore what ``state_dict`` saved; from here on ``sample`` draws what the saved memory would.

        Everything is checked before anything is written (``ValueError`` naming the problem), so a
        refused state leaves this memory as it was.
        """
        missing = [k for k in ("tree/leaves", "max_priority", "alpha", "eps", "rng") if k not in state]
        if missing:
            raise ValueError(f"cannot load: the state has no {', '.join(missing)}")
        leaves = np.asarray(state["tree/leaves"])
        if leaves.shape != (self.tree.capacity,) or leaves.dtype != np.float64:
            raise ValueError(f"cannot load: saved tree/leaves is {leaves.dtype}{list(leaves.shape)}, "
                             f"this tree's is float64[{self.tree.capacity}]")
        if not (np.isfinite(leaves).all() and leaves.min() >= 0):
            raise ValueError("cannot load: saved priorities must be finite and non-negative")
        if (float(state["alpha"]), float(state["eps"])) != (self.alpha, self.eps):
            raise ValueError(f"cannot load: saved with alpha={float(state['alpha'])}, eps={float(state['eps'])}, but "
                             f"this memory has alpha={self.alpha}, eps={self.eps} (the leaves hold priority ** alpha)")
        rng = parse_rng_state(self.rng, state["rng"])
        valid = self._saved_validity(state)
        if valid is not None and (leaves[~valid] > 0).any():
            raise ValueError("cannot load: the saved tree gives priority to slots its memory cannot sample")
        self.memory.load_state_dict({k[len("memory/"):]: v for k, v in state.items() if k.startswith("memory/")})
        for s in self.streams:
            s.validity_changes.clear()  # the saved leaves already reflect every validity flip
        self.tree.update(np.arange(self.tree.capacity), leaves)  # rebuilds every sum from the leaves
        self.max_priority = float(state["max_priority"])
        self.rng.bit_generator.state = rng

    def _saved_validity(self, state: dict[str, np.ndarray]) -> np.ndarray | None:
        """The saved memory's ``valid`` flags, leaf by leaf; None if absent or misshapen (its own load refuses it)."""
        prefixes = ([f"memory/stream{k}/" for k in range(len(self.streams))]
                    if isinstance(self.memory, MultiStreamMemory) else ["memory/"])
        parts = [np.asarray(state.get(p + "valid")) for p in prefixes]
        if any(v.shape != (self.stream_capacity,) or v.dtype != np.bool_ for v in parts):
            return None
        return np.concatenate(parts)
