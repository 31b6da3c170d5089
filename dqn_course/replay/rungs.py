"""The teaching rungs of the memory ladder: the blog's deque, full stacks in a ring, folded stacks.

=========================  ===========================================  ======================
class                      stores per transition                        bytes (84x84, 4-stack)
=========================  ===========================================  ======================
``NaiveDequeMemory``       a Python list of arrays in a deque           28,224 or 56,448 + ~
``StackedRingMemory``      s and s' stacks in preallocated arrays       56,448 + 14
``FoldedRingMemory``       one 5-frame "folded" stack (s = 0..3,        35,280 + 14
                           s' = 1..4)
``FrameSharingMemory``     one 84x84 frame; stacks built by index       7,056 + 16
=========================  ===========================================  ======================

The last one is the library's memory (``frame_sharing.py``); these three are kept to be measured
against it (notebooks 01-06, ``benchmarks/memory_ladder.py``).
"""
from __future__ import annotations

import random
import sys
from collections import deque
from collections.abc import Iterable, Sequence

import numpy as np

from dqn_course.contracts import Count, StackShape, check_module
from dqn_course.replay.base import Batch, DType, PreallocatedRing, ReplayMemory, Seed, check_stack_shift


def root_buffer(arr: np.ndarray):
    """The object that really owns ``arr``'s bytes: follow ``.base`` until it ends.

    For an array that owns its data that is the array itself; for a view, the array (or foreign
    buffer, such as the ALE's screen) it was sliced from. Its size is what keeping ``arr`` costs.
    """
    b = arr
    while isinstance(b, np.ndarray) and b.base is not None:
        b = b.base
    return b


def held_bytes(rows: Iterable) -> int:
    """Bytes that ``[state, action, reward, next_state, done, ...]`` rows keep alive.

    A view (``frame[::2, ::2]``, or an observation the emulator hands out) keeps its whole base
    buffer alive, so every state is followed to its root buffer and each buffer is counted once,
    plus the array headers, the row lists and their scalars (small ints, True and False are shared
    by all of Python but counted anyway: a few dozen bytes per row too many).
    """
    seen: set[int] = set()
    total = 0
    for row in rows:
        total += sys.getsizeof(row) + sum(sys.getsizeof(x) for i, x in enumerate(row) if i not in (0, 3))
        for arr in (row[0], row[3]):
            b = arr
            while isinstance(b, np.ndarray):  # headers along the view chain
                if id(b) in seen:
                    break
                seen.add(id(b))
                total += sys.getsizeof(b)  # header, plus data when b owns it
                b = b.base
            else:
                if b is not None and id(b) not in seen:  # a foreign buffer (memoryview, bytes, ...)
                    seen.add(id(b))
                    total += sys.getsizeof(b) + int(getattr(b, "nbytes", 0))
    return total


class NaiveDequeMemory(ReplayMemory):
    """The blog-post memory: ``deque(maxlen=N)`` of ``[state, action, reward, next_state, done]``.

    With ``copy_states=False`` it keeps whatever arrays it is given. If the caller hands the
    same array object on as the next ``state`` (``state = next_state``), consecutive transitions
    share it and each stack is held once. With ``copy_states=True`` it copies both, as blog code
    that preprocesses ``obs`` and ``next_obs`` separately effectively does: twice the memory.

    Sampling is ``random.sample(deque, k)``: indexing a deque walks its blocks, so each draw costs
    O(N), and ``np.stack`` then copies the batch together.
    """

    def __init__(self, capacity: Count, obs_shape: Sequence[int] = (4, 84, 84), obs_dtype: DType = np.uint8,
                 seed: Seed = None,
                 copy_states: bool = False):
        super().__init__(capacity, obs_shape, obs_dtype, seed)
        self.copy_states = copy_states
        self.memory: deque = deque(maxlen=self.capacity)
        self._py_rng = random.Random(seed)

    def add(self, state, action, reward, next_state, done, episode_end=None):
        state, action, reward, next_state = self._checked(state, action, reward, next_state)
        done = self._check_flag("done", done)
        if self.copy_states:
            state, next_state = state.copy(), next_state.copy()
        self.memory.append([state, action, reward, next_state, bool(done), self.added])
        self.added += 1

    def sample(self, batch_size: Count) -> Batch:
        self._check_batch_size(batch_size)
        # random.sample draws without replacement, as the blog code does.
        rows = self._py_rng.sample(self.memory, batch_size)
        s, a, r, s2, d, i = zip(*rows)
        return Batch(np.stack(s), np.array(a, np.int64), np.array(r, np.float32), np.stack(s2),
                     np.array(d, np.float32), np.array(i, np.int64))

    def __len__(self) -> int:
        return len(self.memory)

    @property
    def nbytes(self) -> int:
        """Bytes held: the deque, and what its rows keep alive (``held_bytes``: views count their base)."""
        return sys.getsizeof(self.memory) + held_bytes(self.memory)


class StackedRingMemory(PreallocatedRing):
    """A preallocated ring holding s and s' as full stacks: fast, but every frame is stored 8 times."""

    def __init__(self, capacity: Count, obs_shape: StackShape = (4, 84, 84), obs_dtype: DType = np.uint8,
                 seed: Seed = None,
                 prefault: bool = False):
        arrays = {"states": (obs_shape, obs_dtype), "next_states": (obs_shape, obs_dtype),
                  "actions": ((), np.uint8), "rewards": ((), np.float32), "dones": ((), np.bool_),
                  "ids": ((), np.int64)}
        super().__init__(capacity, obs_shape, obs_dtype, seed, arrays, prefault)

    def add(self, state, action, reward, next_state, done, episode_end=None):
        state, action, reward, next_state = self._checked(state, action, reward, next_state)
        done = self._check_flag("done", done)
        i = self.added % self.capacity
        self.states[i], self.next_states[i] = state, next_state
        self.actions[i], self.rewards[i], self.dones[i], self.ids[i] = action, reward, done, self.added
        self.added += 1

    def sample(self, batch_size: Count) -> Batch:
        self._check_batch_size(batch_size)
        i = self.rng.integers(0, len(self), size=batch_size)
        # s and s' gathered into one block: two fresh outputs of this size per batch can make glibc hand the
        # heap top back to the OS after every batch and fault it in again (page faults on every batch).
        both = np.empty((2, batch_size, *self.obs_shape), self.obs_dtype)
        np.take(self.states, i, axis=0, out=both[0], mode="clip")  # indices are in range; "clip" avoids a buffer
        np.take(self.next_states, i, axis=0, out=both[1], mode="clip")
        return Batch(both[0], self.actions[i].astype(np.int64), self.rewards[i], both[1],
                     self.dones[i].astype(np.float32), self.ids[i])

    def __len__(self) -> int:
        return min(self.added, self.capacity)


class FoldedRingMemory(PreallocatedRing):
    """One (stack+1)-frame array per transition; s = frames[:-1], s' = frames[1:].

    This relies on s' being s shifted by one new frame, which a frame stack guarantees.
    """

    def __init__(self, capacity: Count, obs_shape: StackShape = (4, 84, 84), obs_dtype: DType = np.uint8,
                 seed: Seed = None,
                 prefault: bool = False):
        folded = (obs_shape[0] + 1, *obs_shape[1:])
        arrays = {"folded": (folded, obs_dtype), "actions": ((), np.uint8), "rewards": ((), np.float32),
                  "dones": ((), np.bool_), "ids": ((), np.int64)}
        super().__init__(capacity, obs_shape, obs_dtype, seed, arrays, prefault)

    def add(self, state, action, reward, next_state, done, episode_end=None):
        state, action, reward, next_state = self._checked(state, action, reward, next_state)
        done = self._check_flag("done", done)
        check_stack_shift(state.tobytes(), next_state.tobytes(), self.stack)  # only next_state's newest frame is kept
        i = self.added % self.capacity
        self.folded[i, :-1] = state
        self.folded[i, -1] = next_state[-1]
        self.actions[i], self.rewards[i], self.dones[i], self.ids[i] = action, reward, done, self.added
        self.added += 1

    def sample(self, batch_size: Count) -> Batch:
        self._check_batch_size(batch_size)
        i = self.rng.integers(0, len(self), size=batch_size)
        f = self.folded[i]
        return Batch(f[:, :-1], self.actions[i].astype(np.int64), self.rewards[i], f[:, 1:],
                     self.dones[i].astype(np.float32), self.ids[i])

    def __len__(self) -> int:
        return min(self.added, self.capacity)


check_module(globals())
