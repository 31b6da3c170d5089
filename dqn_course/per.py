"""Prioritized experience replay (Schaul et al., 2016) that costs almost nothing.

``CompiledSumTree`` is the classic binary sum tree with its loops compiled by numba, so a whole batch
is found or updated in one call (the slower trees notebook 08 compares it with are in
``dqn_course.lab.per_trees``). Interface of a tree: ``update``, ``find``, ``sample``, ``get``, ``total``,
``nbytes``.

``PrioritizedMemory`` puts a tree over the slots of a frame-sharing memory (or the slots of all
streams of a multi-stream one) without copying any frame. The memory tells it which slots became
valid or invalid (``watch_validity``); a slot's leaf holds ``priority ** alpha`` while the slot is
valid to sample and 0 otherwise, so only valid transitions can be drawn.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from dqn_course.contracts import Count, Probability, check_module
from dqn_course import check_arg
from dqn_course.replay import Batch, FrameSharingMemory, MultiStreamMemory
from dqn_course.replay.base import Seed
from dqn_course.rng import parse_rng_state, rng_state_array


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


@njit("int64(float64[::1], int64, int64, int64[::1], float64[::1])", cache=True, nogil=True)
def _gather(nodes, size, capacity, indices, out):
    """``out[k] = leaf indices[k]``; 1 (nothing read) if an index is outside [0, capacity), else 0."""
    for k in range(indices.size):
        if indices[k] < 0 or indices[k] >= capacity:
            return 1
    for k in range(indices.size):
        out[k] = nodes[size + indices[k]]
    return 0


def _leaf_row(name: str, values: np.ndarray | Sequence[float], integer: bool) -> np.ndarray:
    """``values`` as one contiguous int64 (``integer``) or float64 row, ``ValueError`` naming ``name`` for another
    shape or kind of entries; the ranges are the compiled kernels' to check (in the same pass as their work)."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one row (one entry per leaf), got shape {array.shape}")
    if array.size and array.dtype.kind not in ("iu" if integer else "iuf"):
        raise ValueError(f"{name} must hold {'whole' if integer else 'real'} numbers, got dtype {array.dtype}")
    return np.ascontiguousarray(array, np.int64 if integer else np.float64)


class CompiledSumTree:
    """The classic binary sum tree, its loops compiled with numba: what ``PrioritizedMemory`` uses.

    Node 1 is the root, node n has children 2n and 2n+1, leaf i is node ``size + i`` (``size``: the
    power of two at or above ``capacity``), and every internal node holds the sum of its children.
    ``SumTree``'s limit at batch 32 is not arithmetic but the fixed cost of each numpy call; here a
    whole sample is one call and a whole update another, each a few hundred tree steps of machine code.
    The random numbers come from the caller's numpy ``Generator`` (one per stratum, drawn exactly as
    ``SumTree.sample`` draws them), so a seeded run is reproducible and both trees see the same draws.
    """

    def __init__(self, capacity: Count):
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

    def get(self, indices: np.ndarray | Sequence[int]) -> np.ndarray:
        """The leaves' priorities; ``IndexError`` for an index outside [0, capacity)."""
        indices = _leaf_row("indices", indices, integer=True)
        out = np.empty(indices.size, np.float64)
        if _gather(self.nodes, self.size, self.capacity, indices, out):
            raise IndexError(f"leaf indices must be in [0, {self.capacity})")
        return out

    def update(self, indices: np.ndarray | Sequence[int], values: np.ndarray | Sequence[float]) -> None:
        """Set leaves (the last value wins for repeated indices) and refresh the sums above them. Refuses
        (nothing written) indices outside [0, capacity) (``IndexError``), negative or non-finite values and a
        count of values other than of indices (``ValueError``)."""
        indices = _leaf_row("indices", indices, integer=True)
        values = _leaf_row("values", values, integer=False)
        if indices.size != values.size:
            raise ValueError(f"got {indices.size} indices but {values.size} values")
        status = _update(self.nodes, self.size, self.capacity, indices, values)
        if status == 1:
            raise IndexError(f"leaf indices must be in [0, {self.capacity})")
        if status == 2:
            raise ValueError("values (priorities) must be finite and non-negative")

    def find(self, mass: np.ndarray | Sequence[float]) -> np.ndarray:
        """Leaves whose cumulative interval [before, before + priority) holds each mass."""
        if not self.nodes[1] > 0:
            raise ValueError("cannot search a tree whose priorities are all zero")
        # a copy: the walk subtracts from it in place; a mass just below 0 is rounding, and finds the first live leaf
        mass = check_leaves("mass", mass, non_negative=False, any_shape=True).copy()
        out = np.empty(mass.size, np.int64)
        _descend(self.nodes, self.size, mass.reshape(-1), out)
        return out.reshape(mass.shape)  # the shape of the masses given, like SumTree.find

    def sample(self, batch_size: Count, rng: np.random.Generator) -> np.ndarray:
        """Stratified: one draw in each of ``batch_size`` equal slices of the total mass."""
        if not self.nodes[1] > 0:
            raise ValueError("cannot sample from a tree whose priorities are all zero")
        out = np.empty(batch_size, np.int64)
        _sample(self.nodes, self.size, rng.random(batch_size), out)
        return out


def check_leaves(name: str, values: np.ndarray | Sequence[float], integer: bool = False, non_negative: bool = True,
                 any_shape: bool = False, below: int | None = None) -> np.ndarray:
    """``values`` for a sum tree as a contiguous int64 (``integer``: leaf indices) or float64 array (priorities,
    masses), one row unless ``any_shape``; ``ValueError`` naming ``name`` for another shape, entries of another
    kind, a non-finite number or (``non_negative``) a negative one; ``IndexError`` for a leaf index outside
    [0, ``below``)."""
    array = np.asarray(values)
    if array.ndim != 1 and not any_shape:
        raise ValueError(f"{name} must be one row (one entry per leaf), got shape {array.shape}")
    if array.size and array.dtype.kind not in ("iu" if integer else "iuf"):
        raise ValueError(f"{name} must hold {'whole' if integer else 'real'} numbers, got dtype {array.dtype}")
    array = np.ascontiguousarray(array, np.int64 if integer else np.float64)
    if array.size and not integer and not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite numbers")
    if array.size and below is not None and (array.min() < 0 or array.max() >= below):
        raise IndexError(f"leaf {name} must be in [0, {below})")
    if array.size and non_negative and array.min() < 0:
        raise ValueError(f"{name} must be >= 0, got {array.min()}")
    return array


TREES = {"compiled": CompiledSumTree}  # PrioritizedMemory's ``tree`` names; a tree class is taken too


def beta_at(step: int, total_steps: int, beta0: Probability = 0.4) -> float:
    """Importance-sampling exponent, annealed linearly from ``beta0`` to 1 over the run."""
    return min(1.0, beta0 + (1.0 - beta0) * step / max(1, total_steps))


def importance_weights(probabilities: np.ndarray, n: Count, beta: Probability) -> np.ndarray:
    """w_i = (N * P(i)) ** -beta, divided by the batch's largest weight so that w <= 1."""
    w = (n * np.asarray(probabilities, np.float64)) ** (-beta)
    return (w / w.max()).astype(np.float32)


class PrioritizedMemory:
    """Proportional PER over a ``FrameSharingMemory`` or ``MultiStreamMemory``, frames untouched.

    The memory stores; this object samples. It subscribes to the memory's validity changes: a slot
    that becomes valid enters the tree at the largest priority seen so far (so each new transition is
    replayed at least once soon), a slot that becomes invalid drops to 0. Leaf numbers are
    ``stream * stream_capacity + slot``.

    ``sample`` returns a ``Batch`` with ``weights`` (importance-sampling) and ``indices`` (tree leaves)
    filled in; give those indices and the new TD errors to ``update_priorities``. ``tree`` is a name in
    ``TREES`` or a tree class (e.g. ``dqn_course.lab.per_trees.SumTree``). ``state_dict`` /
    ``load_state_dict`` checkpoint the priorities together with the memory.

    ``alpha`` (how much the priorities count: 0 is uniform) is a finite number >= 0, ``eps`` (the priority of a zero
    TD error) a finite number > 0; ``ValueError`` names the one that is not. A memory that already holds
    transitions may be wrapped: those enter the tree at the starting priority, as new ones do.
    """

    def __init__(self, memory: FrameSharingMemory | MultiStreamMemory, alpha: float = 0.6, eps: float = 1e-6,
                 seed: Seed = None, tree: str | type = "compiled"):
        check_arg("alpha", alpha, low=0)
        check_arg("eps", eps, above=0)
        if isinstance(tree, str):
            if tree not in TREES:
                raise ValueError(f"tree must be one of {sorted(TREES)} or a tree class, got {tree!r}")
            tree = TREES[tree]
        self.memory = memory
        self.multi = isinstance(memory, MultiStreamMemory)
        self.streams = memory.streams if self.multi else [memory]
        self.stream_capacity = self.streams[0].capacity
        self.tree = tree(self.stream_capacity * len(self.streams))
        self.alpha, self.eps = alpha, eps
        self.max_priority = 1.0
        self.rng = np.random.default_rng(seed)
        self._live = np.zeros(self.tree.capacity, bool)  # which leaves the memory says are valid
        self._sampled = np.zeros(self.tree.capacity, bool)  # which leaves a batch has handed out: update_priorities
        self._restoring = False  # load_state_dict sets the leaves itself
        memory.watch_validity(self._validity_changed)
        held = np.flatnonzero(np.concatenate([s.valid for s in self.streams]))  # a memory wrapped when not empty
        if held.size:
            self._validity_changed(held, np.ones(held.size, bool))

    def _validity_changed(self, leaves: np.ndarray, valid: np.ndarray) -> None:
        """The memory's notice: valid slots get max priority (they are new), invalid ones 0."""
        self._live[leaves] = valid
        if not self._restoring:
            self.tree.update(leaves, np.where(valid, self.max_priority ** self.alpha, 0.0))

    def add(self, *args, **kwargs) -> None:
        self.memory.add(*args, **kwargs)

    def add_batch(self, *args, **kwargs) -> None:
        self.memory.add_batch(*args, **kwargs)

    def end_episode(self, *args) -> None:
        self.memory.end_episode(*args)

    def __len__(self) -> int:
        return len(self.memory)

    @property
    def nbytes(self) -> int:
        return self.memory.nbytes + self.tree.nbytes

    @property
    def device(self):
        return self.memory.device

    def generators(self) -> list[np.random.Generator]:
        """Every generator ``sample`` draws from (for checkpoints' digests)."""
        return [self.rng, *self.memory.generators()]

    def sample(self, batch_size: Count, beta: Probability = 0.4) -> Batch:
        """``batch_size`` transitions drawn in proportion to their priority, with importance weights for the
        exponent ``beta`` (in [0, 1]) and their tree leaves (``indices``, for ``update_priorities``)."""
        self.memory._check_batch_size(batch_size)  # an integer, and no more than the memory holds
        check_arg("beta", beta, low=0, high=1)
        leaves = self.tree.sample(batch_size, self.rng)
        self._sampled[leaves] = True
        streams, slots = np.divmod(leaves, self.stream_capacity)
        order = np.argsort(streams, kind="stable")  # group by stream; the learner does not care about order
        leaves, streams, slots = leaves[order], streams[order], slots[order]
        batch = self.memory.batch_at(streams, slots) if self.multi else self.memory.batch_at(slots)
        probs = self.tree.get(leaves) / self.tree.total
        return batch._replace(weights=importance_weights(probs, len(self.memory), beta), indices=leaves)

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """priority = |TD error| + eps; the tree stores priority ** alpha. ``indices``: leaves a ``sample`` handed
        out (its batch's ``indices``), one finite TD error each; a leaf whose slot was overwritten since keeps
        priority 0. Refuses (``ValueError``, nothing changed) other indices, other lengths, non-finite errors."""
        indices, td_errors = np.asarray(indices), np.asarray(td_errors)
        self._check_update(indices, td_errors)
        priorities = np.abs(td_errors.astype(np.float64)) + self.eps
        self.max_priority = max(self.max_priority, float(priorities.max(initial=0.0)))
        still_valid = self._live[indices]  # a slot overwritten since it was sampled keeps priority 0
        self.tree.update(indices[still_valid], priorities[still_valid] ** self.alpha)

    def _check_update(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """``update_priorities``' check (``ValueError``): 1-D integer leaves that a ``sample`` handed out, one
        finite TD error each."""
        if indices.ndim != 1 or indices.dtype.kind not in "iu":
            raise ValueError(f"indices must be a 1-D array of integers (a sampled batch's indices), got "
                             f"{indices.dtype}{list(indices.shape)}")
        if td_errors.shape != indices.shape or td_errors.dtype.kind not in "iuf":
            raise ValueError(f"td_errors must be numbers, one per index ({indices.size}), got "
                             f"{td_errors.dtype}{list(td_errors.shape)}")
        if not np.isfinite(td_errors).all():
            raise ValueError("td_errors must be finite: a NaN or infinite TD error would make every priority "
                             "meaningless (check the loss for divergence)")
        if ((indices < 0) | (indices >= self.tree.capacity)).any() or not self._sampled[indices].all():
            raise ValueError(f"indices must be leaves a sample() handed out (in [0, {self.tree.capacity})); got "
                             f"some that no batch returned: pass the batch's own indices")

    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything a resumed run needs, as flat numpy arrays: leaf priorities, max priority, the RNG.

        Only the leaves are saved; ``load_state_dict`` rebuilds the sums above them, so a checkpoint
        does not depend on which tree wrote it. The memory's arrays go under ``memory/``.
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
        self._restoring = True  # the memory re-announces every slot; the saved leaves hold their priorities
        try:
            self.memory.load_state_dict({k[len("memory/"):]: v for k, v in state.items() if k.startswith("memory/")})
        finally:
            self._restoring = False
        self.tree.update(np.arange(self.tree.capacity), leaves)  # rebuilds every sum from the leaves
        self.max_priority = float(state["max_priority"])
        self.rng.bit_generator.state = rng
        self._sampled[:] = False  # a batch handed out before the load belongs to the state it replaced

    def _saved_validity(self, state: dict[str, np.ndarray]) -> np.ndarray | None:
        """The saved memory's ``valid`` flags, leaf by leaf; None if absent or misshapen (its own load refuses it)."""
        prefixes = [f"memory/stream{k}/" for k in range(len(self.streams))] if self.multi else ["memory/"]
        parts = [np.asarray(state.get(p + "valid")) for p in prefixes]
        if any(v.shape != (self.stream_capacity,) or v.dtype != np.bool_ for v in parts):
            return None
        return np.concatenate(parts)


check_module(globals())
