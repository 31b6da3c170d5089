"""Replay memories, one per rung of the memory ladder, behind one API.

Every memory here takes whole transitions and hands back whole batches::

    memory.add(state, action, reward, next_state, done, episode_end)
    batch = memory.sample(32)        # Batch(states, actions, rewards, next_states, dones, ids)
    memory.nbytes                    # bytes the memory holds right now

``done`` means "do not bootstrap from ``next_state``" (the game ended, or a life was lost and the
learner treats that as terminal). ``episode_end`` means "the observation stream restarts after this
step" (``env.reset()`` is called: the game ended or was truncated). They differ twice: a lost life
is ``done`` without ``episode_end`` (the game and its frames go on); a time-limit truncation is
``episode_end`` without ``done`` (the learner must still bootstrap from the real last frame).

The memories differ only in how they store the same transitions:

=========================  ===========================================  ======================
class                      stores per transition                        bytes (84x84, 4-stack)
=========================  ===========================================  ======================
``NaiveDequeMemory``       a Python list of arrays in a deque           28,224 or 56,448 + ~
``StackedRingMemory``      s and s' stacks in preallocated arrays       56,448 + 14
``FoldedRingMemory``       one 5-frame "folded" stack (s = 0..3,        35,280 + 14
                           s' = 1..4), as in seed 004
``FrameSharingMemory``     one 84x84 frame; stacks built by index       7,056 + 16
=========================  ===========================================  ======================

``ids`` in a batch are the transitions' running numbers (0 for the first ``add`` ever), so a test
can look every sampled transition up in a plain list.

``FrameSharingMemory(storage=...)`` (and ``MultiStreamMemory``) can keep the frames lz4/zstd-compressed
in RAM or in a memory-mapped file (``dqn_course.storage``, notebook 09); ``state_dict`` /
``load_state_dict`` save and restore either memory as plain numpy arrays, for checkpoints.
"""
from __future__ import annotations

import random
import sys
from collections import deque
from typing import NamedTuple

import numpy as np

from dqn_course.profiling import check_fits
from dqn_course.storage import (STORAGES, check_disk_space, make_store, parse_rng_state, planned_host_bytes,
                                rng_state_array)

__all__ = [
    "Batch",
    "ReplayMemory",
    "NaiveDequeMemory",
    "StackedRingMemory",
    "FoldedRingMemory",
    "FrameSharingMemory",
    "MEMORY_CLASSES",
    "held_bytes",
    "root_buffer",
]


class Batch(NamedTuple):
    """A sampled minibatch; arrays share their first axis (the batch)."""

    states: np.ndarray  # (B, stack, H, W), the memory's observation dtype
    actions: np.ndarray  # (B,) int64
    rewards: np.ndarray  # (B,) float32
    next_states: np.ndarray  # (B, stack, H, W)
    dones: np.ndarray  # (B,) float32, 1.0 where the target must not bootstrap
    ids: np.ndarray  # (B,) int64, running number of each transition
    weights: np.ndarray | None = None  # (B,) float32 importance-sampling weights (prioritized replay only)
    indices: np.ndarray | None = None  # (B,) int64 where to send new priorities (prioritized replay only)


class ReplayMemory:
    """What all memories share: input checks, the seeded generator, the sample-size check."""

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype=np.uint8, seed: int | None = None):
        if not isinstance(capacity, (int, np.integer)) or isinstance(capacity, bool) or capacity < 1:
            raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
        obs_shape = tuple(int(d) for d in obs_shape)
        if len(obs_shape) < 2 or min(obs_shape) < 1:
            raise ValueError(f"obs_shape must be (stack, *frame_shape) with positive sizes, got {obs_shape}")
        self.capacity = int(capacity)
        self.obs_shape = obs_shape
        self.obs_dtype = np.dtype(obs_dtype)
        self.stack = obs_shape[0]
        self.frame_shape = obs_shape[1:]
        self.rng = np.random.default_rng(seed)
        self.added = 0  # transitions ever added; the next one gets this id

    # -- input checks ---------------------------------------------------------------------------
    def _check_obs(self, name: str, obs) -> np.ndarray:
        if not isinstance(obs, np.ndarray):
            raise TypeError(f"{name} must be a numpy array of shape {self.obs_shape}, got {type(obs).__name__}")
        if obs.shape != self.obs_shape:
            raise ValueError(f"{name} has shape {obs.shape}, this memory stores {self.obs_shape}")
        if obs.dtype != self.obs_dtype:
            raise TypeError(
                f"{name} has dtype {obs.dtype}, this memory stores {self.obs_dtype} "
                f"(convert on purpose, e.g. obs.astype(np.{self.obs_dtype}), so the cost is visible)"
            )
        return obs

    @staticmethod
    def _check_action(action) -> int:
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
            if isinstance(action, np.ndarray) and action.ndim == 0 and np.issubdtype(action.dtype, np.integer):
                action = int(action)
            else:
                raise TypeError(f"action must be an integer, got {action!r}")
        if not 0 <= action < 256:
            raise ValueError(f"action must be in [0, 256), got {action}")
        return int(action)

    @staticmethod
    def _check_reward(reward) -> float:
        reward = float(reward)
        if not np.isfinite(reward):
            raise ValueError(f"reward must be finite, got {reward}")
        return reward

    def _check_batch_size(self, batch_size: int) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if len(self) < batch_size:
            raise ValueError(
                f"cannot sample {batch_size} transitions: only {len(self)} can be sampled so far "
                f"(fill the memory first, e.g. wait until len(memory) >= batch_size)"
            )

    def _checked(self, state, action, reward, next_state):
        return (self._check_obs("state", state), self._check_action(action), self._check_reward(reward),
                self._check_obs("next_state", next_state))

    # -- the API --------------------------------------------------------------------------------
    def add(self, state, action, reward, next_state, done: bool, episode_end: bool | None = None) -> None:
        raise NotImplementedError

    def sample(self, batch_size: int) -> Batch:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def nbytes(self) -> int:
        raise NotImplementedError


def root_buffer(arr: np.ndarray):
    """The object that really owns ``arr``'s bytes: follow ``.base`` until it ends.

    For an array that owns its data that is the array itself; for a view, the array (or foreign
    buffer, such as the ALE's screen) it was sliced from. Its size is what keeping ``arr`` costs.
    """
    b = arr
    while isinstance(b, np.ndarray) and b.base is not None:
        b = b.base
    return b


def held_bytes(rows) -> int:
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

    def __init__(self, capacity: int, obs_shape=(4, 84, 84), obs_dtype=np.uint8, seed: int | None = None,
                 copy_states: bool = False):
        super().__init__(capacity, obs_shape, obs_dtype, seed)
        self.copy_states = copy_states
        self.memory: deque = deque(maxlen=self.capacity)
        self._py_rng = random.Random(seed)

    def add(self, state, action, reward, next_state, done, episode_end=None):
        state, action, reward, next_state = self._checked(state, action, reward, next_state)
        if self.copy_states:
            state, next_state = state.copy(), next_state.copy()
        self.memory.append([state, action, reward, next_state, bool(done), self.added])
        self.added += 1

    def sample(self, batch_size: int) -> Batch:
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


class _PreallocatedRing(ReplayMemory):
    """A ring of preallocated arrays; the memory guard runs before any of them exists.

    ``arrays`` maps a name to (shape without the capacity axis, dtype). ``prefault=True`` writes
    every page once, so a capacity the machine cannot really back fails now, not hours later
    (``np.zeros`` only reserves address space; pages arrive when first written). Arrays named in
    ``device_arrays`` become torch tensors on ``device`` (e.g. the frames, on the GPU), checked
    against that device's free memory instead of the host's RAM. ``extra_host_bytes`` is host RAM a
    subclass preallocates outside ``arrays`` (a compressed frame store's slot list), checked with them.
    """

    def __init__(self, capacity, obs_shape, obs_dtype, seed, arrays: dict, prefault: bool,
                 device=None, device_arrays: tuple[str, ...] = (), extra_host_bytes: int = 0):
        super().__init__(capacity, obs_shape, obs_dtype, seed)

        def planned(names) -> int:
            return sum(self.capacity * int(np.prod(arrays[n][0], dtype=np.int64)) * np.dtype(arrays[n][1]).itemsize
                       for n in names)

        what = f"{type(self).__name__}(capacity={self.capacity:,})"
        self.device = None
        host_names = list(arrays)
        if device is not None and device_arrays:
            import torch  # only memories that keep arrays on a device need torch

            self.device = torch.device(device)
            if self.device.type == "cuda":  # GPU arrays are checked against the GPU's free memory
                free, _ = torch.cuda.mem_get_info(self.device)
                check_fits(planned(device_arrays), what + f" on {self.device}", available=free)
                host_names = [n for n in arrays if n not in device_arrays]
        check_fits(planned(host_names) + extra_host_bytes, what)
        for name, (shape, dt) in arrays.items():
            if self.device is not None and name in device_arrays:
                arr = torch.zeros((self.capacity, *shape), dtype=getattr(torch, np.dtype(dt).name), device=self.device)
            else:
                arr = np.zeros((self.capacity, *shape), dtype=dt)
                if prefault:
                    arr.fill(0)
            setattr(self, name, arr)
        self._array_names = tuple(arrays)

    @property
    def nbytes(self) -> int:
        """Bytes held by the ring's arrays (torch tensors and frame stores report their own)."""
        return sum(a.numel() * a.element_size() if hasattr(a, "element_size") else int(a.nbytes)
                   for a in (getattr(self, n) for n in self._array_names))


class StackedRingMemory(_PreallocatedRing):
    """A preallocated ring holding s and s' as full stacks: fast, but every frame is stored 8 times."""

    def __init__(self, capacity: int, obs_shape=(4, 84, 84), obs_dtype=np.uint8, seed: int | None = None,
                 prefault: bool = False):
        arrays = {"states": (obs_shape, obs_dtype), "next_states": (obs_shape, obs_dtype),
                  "actions": ((), np.uint8), "rewards": ((), np.float32), "dones": ((), np.bool_),
                  "ids": ((), np.int64)}
        super().__init__(capacity, obs_shape, obs_dtype, seed, arrays, prefault)

    def add(self, state, action, reward, next_state, done, episode_end=None):
        state, action, reward, next_state = self._checked(state, action, reward, next_state)
        i = self.added % self.capacity
        self.states[i], self.next_states[i] = state, next_state
        self.actions[i], self.rewards[i], self.dones[i], self.ids[i] = action, reward, done, self.added
        self.added += 1

    def sample(self, batch_size: int) -> Batch:
        self._check_batch_size(batch_size)
        i = self.rng.integers(0, len(self), size=batch_size)
        # s and s' gathered into one block: two fresh ~0.9 MB outputs per batch made glibc hand the
        # heap top back to the OS after every batch and fault it in again (~400 page faults, 3x slower).
        both = np.empty((2, batch_size, *self.obs_shape), self.obs_dtype)
        np.take(self.states, i, axis=0, out=both[0], mode="clip")  # indices are in range; "clip" avoids a buffer
        np.take(self.next_states, i, axis=0, out=both[1], mode="clip")
        return Batch(both[0], self.actions[i].astype(np.int64), self.rewards[i], both[1],
                     self.dones[i].astype(np.float32), self.ids[i])

    def __len__(self) -> int:
        return min(self.added, self.capacity)


class FoldedRingMemory(_PreallocatedRing):
    """Seed 004's ring: one (stack+1)-frame array per transition; s = frames[:-1], s' = frames[1:].

    This relies on s' being s shifted by one new frame, which a frame stack guarantees.
    """

    def __init__(self, capacity: int, obs_shape=(4, 84, 84), obs_dtype=np.uint8, seed: int | None = None,
                 prefault: bool = False):
        folded = (obs_shape[0] + 1, *obs_shape[1:])
        arrays = {"folded": (folded, obs_dtype), "actions": ((), np.uint8), "rewards": ((), np.float32),
                  "dones": ((), np.bool_), "ids": ((), np.int64)}
        super().__init__(capacity, obs_shape, obs_dtype, seed, arrays, prefault)

    def add(self, state, action, reward, next_state, done, episode_end=None):
        state, action, reward, next_state = self._checked(state, action, reward, next_state)
        i = self.added % self.capacity
        self.folded[i, :-1] = state
        self.folded[i, -1] = next_state[-1]
        self.actions[i], self.rewards[i], self.dones[i], self.ids[i] = action, reward, done, self.added
        self.added += 1

    def sample(self, batch_size: int) -> Batch:
        self._check_batch_size(batch_size)
        i = self.rng.integers(0, len(self), size=batch_size)
        f = self.folded[i]
        return Batch(f[:, :-1], self.actions[i].astype(np.int64), self.rewards[i], f[:, 1:],
                     self.dones[i].astype(np.float32), self.ids[i])

    def __len__(self) -> int:
        return min(self.added, self.capacity)


class FrameSharingMemory(_PreallocatedRing):
    """One frame per step in a ring; states are built at sample time from ``stack`` consecutive slots.

    Layout. Slot k holds one frame and, if a transition starts at that frame, the transition's
    action, reward, done and id. An episode of T transitions uses T+1 slots::

        slot:     k      k+1    ...    k+T-1    k+T
        frame:    o_0    o_1    ...    o_{T-1}  o_T      (o_T: the last next-state frame)
        first:    True   False  ...    False    False
        valid:    True   True   ...    True     False    (no transition starts at o_T)

    So ``capacity`` counts frames: it holds ``capacity`` transitions minus one per episode.

    Invariants (kept by ``add``, relied on by ``sample``):

    1. ``valid[k]`` is True exactly when the transition at slot k can be sampled: its own frame,
       its s' frame (slot k+1) and the up to ``stack-1`` frames before it back to its episode's
       first frame are all still in the ring.
    2. A stack never reaches across an episode start. Positions before the episode's first frame
       are padding: a copy of the first frame (``padding="repeat"``, what gymnasium's
       ``FrameStackObservation`` does by default) or zeros (``padding="zero"``).
    3. Writing slot k (the write head) invalidates what needed the old frame there: the transition
       at k itself, and the transitions at k+1 .. k+stack-1 that looked back through k, stopping at
       the first of them that starts an episode (its lookback ends there).
    4. A new transition becomes valid only when its s' frame is written, so the newest frame (the
       head's last write) never starts a valid transition.

    Episode starts. The first state of an episode is stored from its first non-padding frame on:
    one frame when the stack is padded (gymnasium's ``FrameStackObservation``), up to ``stack``
    frames when it already holds real frames (ale-py's ``AtariVectorEnv`` after its no-op and FIRE
    steps). Either way the rebuilt stacks equal what the agent saw.

    ``device="cuda"`` keeps the frames as a torch tensor on the GPU (1M frames = 7 GB there, almost
    nothing in host RAM); ``sample`` then returns ``states``/``next_states`` as device tensors,
    gathered on the device, with no host copy of any frame.

    ``storage`` says where the frames live in host memory (``dqn_course.storage``): ``"ram"`` (a
    numpy array), ``"lz4"`` / ``"zstd"`` (each frame compressed on write, decompressed on sampling;
    ``nbytes`` counts the payloads as they are) or ``"disk"`` (a memory-mapped file in the directory
    ``path``, refused up front when the disk lacks the space; ``nbytes`` then counts only the RAM
    arrays). Only the frames move: slots, invariants and sampling are the same for every storage.
    """

    RING_ARRAYS = ("actions", "rewards", "dones", "first", "valid", "ids")  # per-slot bookkeeping

    def __init__(self, capacity: int, obs_shape=(4, 84, 84), seed: int | None = None, padding: str = "repeat",
                 prefault: bool = False, device=None, storage: str = "ram", path=None):
        if padding not in ("repeat", "zero"):
            raise ValueError(f"padding must be 'repeat' or 'zero', got {padding!r}")
        _check_storage(storage, path, device)
        # Non-integers fall through to the base class's "positive integer" error, not a raw TypeError.
        if isinstance(capacity, (int, np.integer)) and capacity < obs_shape[0] + 1:
            raise ValueError(f"capacity must be at least stack+1 = {obs_shape[0] + 1} frames, got {capacity}")
        frame_shape = tuple(obs_shape[1:])
        if storage == "disk" and isinstance(capacity, (int, np.integer)):  # before the RAM guard and any allocation
            check_disk_space(int(capacity) * int(np.prod(frame_shape)), path,
                             f"{type(self).__name__}(capacity={capacity:,}, storage='disk')")
        arrays = {"actions": ((), np.uint8), "rewards": ((), np.float32), "dones": ((), np.bool_),
                  "first": ((), np.bool_), "valid": ((), np.bool_), "ids": ((), np.int64)}
        if storage == "ram":
            arrays = {"frames": (frame_shape, np.uint8), **arrays}
        extra = 0 if storage == "ram" else planned_host_bytes(storage, int(capacity), frame_shape)
        super().__init__(capacity, obs_shape, np.uint8, seed, arrays, prefault, device, ("frames",), extra)
        self.storage = storage
        if storage != "ram":
            self.frames = make_store(storage, self.capacity, frame_shape, path,
                                     what=f"{type(self).__name__}(capacity={self.capacity:,}, storage={storage!r})")
            self._array_names += ("frames",)
        self.padding = padding
        self.head = 0  # next slot to write
        self.written = 0  # frames ever written (so min(written, capacity) slots hold data)
        self.num_valid = 0
        self._in_episode = False  # True once an episode's first frame is written and it has not ended
        self._last_frame = np.zeros(self.frame_shape, np.uint8)  # host copy of the newest frame
        self.track_validity = False  # prioritized replay turns this on to mirror validity in its tree
        self.validity_changes: list[int] = []

    def _set_valid(self, k: int, value: bool) -> None:
        if self.valid[k] != value:
            self.valid[k] = value
            self.num_valid += 1 if value else -1
            if self.track_validity:
                self.validity_changes.append(k)

    def _write_frame(self, frame: np.ndarray, first: bool) -> int:
        """Write one frame at the head, keeping invariant 3; returns its slot."""
        k, C = self.head, self.capacity
        self._set_valid(k, False)
        for m in range(1, self.stack):  # transitions that looked back through slot k
            j = (k + m) % C
            if self.first[j]:
                break
            self._set_valid(j, False)
        self.frames[k] = frame if self.device is None else self._torch.as_tensor(frame).to(self.device)
        self._last_frame[...] = frame
        self.first[k] = first
        self.ids[k] = -1
        self.head = (k + 1) % C
        self.written += 1
        return k

    def add(self, state, action, reward, next_state, done, episode_end=None):
        state, action, reward, next_state = self._checked(state, action, reward, next_state)
        if episode_end is None:
            episode_end = done
        if not self._in_episode:
            # Episode start: store the frames after the padding; stacks_at pads back to the left.
            p = self._padding_prefix(state)
            for i in range(p, self.stack):
                self._write_frame(state[i], first=(i == p))
            self._in_episode = True
        k = (self.head - 1) % self.capacity  # slot of state's newest frame (the last one written)
        if not np.array_equal(self._last_frame, state[-1]):
            raise ValueError("state does not continue the previous transition's next_state: pass "
                             "episode_end=True for the step after which the environment was reset")
        self.actions[k], self.rewards[k], self.dones[k], self.ids[k] = action, reward, done, self.added
        self._write_frame(next_state[-1], first=False)
        self._set_valid(k, True)
        self.added += 1
        if episode_end:
            self._in_episode = False

    def _padding_prefix(self, state: np.ndarray) -> int:
        """How many leading frames of ``state`` ``stacks_at`` can rebuild as padding (at most stack-1)."""
        p = 0
        while p < self.stack - 1:
            pad = state[p + 1] if self.padding == "repeat" else 0
            if not np.array_equal(state[: p + 1], np.broadcast_to(pad, state[: p + 1].shape)):
                break
            p += 1
        return p

    @property
    def _torch(self):
        import torch

        return torch

    def _draw_slots(self, batch_size: int) -> np.ndarray:
        """Uniform over valid slots: rejection sampling, with an exact fallback for sparse rings."""
        filled = min(self.written, self.capacity)
        slots = self.rng.integers(0, filled, size=batch_size)
        for _ in range(16):
            bad = ~self.valid[slots]
            if not bad.any():
                return slots
            slots[bad] = self.rng.integers(0, filled, size=int(bad.sum()))
        return self.rng.choice(np.flatnonzero(self.valid[:filled]), size=batch_size)

    def stacks_at(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Build (states, next_states) for transitions at ``slots`` from one gather of stack+1 frames."""
        S = self.stack
        window = (slots[:, None] + np.arange(-(S - 1), 2)) % self.capacity  # (B, S+1): s's frames, then s'
        first = self.first[window[:, :S]]
        # Position of the episode's first frame inside the stack (0 if it lies further back).
        start = np.where(first.any(1), S - 1 - np.argmax(first[:, ::-1], axis=1), 0)
        pos = np.maximum(np.arange(S + 1), start[:, None])  # padding positions read the first frame
        index = np.take_along_axis(window, pos, axis=1)
        padded = np.arange(S + 1) < start[:, None]
        if self.device is not None:  # gather on the device: only the small index array travels
            index = self._torch.as_tensor(index).to(self.device)
            padded = self._torch.as_tensor(padded).to(self.device)
        frames = self.frames[index]  # (B, S+1, H, W)
        if self.padding == "zero":
            frames[padded] = 0
        return frames[:, :S], frames[:, 1:]

    def batch_at(self, slots: np.ndarray) -> Batch:
        states, next_states = self.stacks_at(slots)
        return Batch(states, self.actions[slots].astype(np.int64), self.rewards[slots], next_states,
                     self.dones[slots].astype(np.float32), self.ids[slots])

    def sample(self, batch_size: int) -> Batch:
        self._check_batch_size(batch_size)
        return self.batch_at(self._draw_slots(batch_size))

    def __len__(self) -> int:
        return self.num_valid

    def end_episode(self) -> None:
        """End the current episode here: the next ``add`` opens a new one (e.g. after resuming a run).

        The episode's last frame stays as its final next-state frame, as after a truncation: its
        transitions keep bootstrapping from the real frame.
        """
        self._in_episode = False

    # -- checkpoints: flat dicts of numpy arrays, never pickles -----------------------------------
    def _config(self) -> dict[str, np.ndarray]:
        return {"capacity": np.array(self.capacity, np.int64), "obs_shape": np.array(self.obs_shape, np.int64),
                "storage": _text(self.storage), "padding": _text(self.padding)}

    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything ``sample`` depends on, as numpy arrays: the ring, the write head and the sampling RNG.

        Arrays may share memory with the memory (the frames are not copied: at 1M they are 7 GB, or a
        file); write them out before the next ``add``. A compressed store gives ``frames_blob`` and
        ``frames_offsets`` instead of ``frames``.
        """
        if self.storage != "ram":
            frames = self.frames.state_arrays()
        elif self.device is not None:
            frames = {"frames": self.frames.cpu().numpy()}
        else:
            frames = {"frames": self.frames}
        return {**self._config(), **{n: getattr(self, n) for n in self.RING_ARRAYS}, **frames,
                "head": np.array(self.head, np.int64), "written": np.array(self.written, np.int64),
                "num_valid": np.array(self.num_valid, np.int64), "added": np.array(self.added, np.int64),
                "in_episode": np.array(self._in_episode), "last_frame": self._last_frame.copy(),
                "rng": rng_state_array(self.rng)}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restore ``state_dict()`` in place; a memory of another capacity, shape, storage or padding is refused.

        Everything is checked before anything is written, so a refused state leaves the memory as it
        was. Afterwards ``sample`` returns exactly what the saved memory would have. Call
        ``end_episode`` before adding from a freshly reset environment.
        """
        self._apply_state(state, self._checked_state(state))

    def _checked_state(self, state: dict[str, np.ndarray]) -> dict:
        """Validate a state dict against this memory (``ValueError`` naming the mismatch); parse its RNG."""
        config = self._config()
        _require_keys(state, config)
        for key, mine in config.items():  # first, so a different storage is named as such
            if not np.array_equal(np.asarray(state[key]), mine):
                raise ValueError(f"cannot load: saved {key} is {_shown(state[key])}, this memory's is {_shown(mine)}")
        frame_keys = ("frames",) if self.storage in ("ram", "disk") else ("frames_blob", "frames_offsets")
        _require_keys(state, (*self.RING_ARRAYS, *frame_keys, "head", "written", "num_valid", "added", "in_episode",
                              "last_frame", "rng"))
        for name in self.RING_ARRAYS:
            _check_array(name, state[name], (self.capacity,), getattr(self, name).dtype)
        _check_array("last_frame", state["last_frame"], self.frame_shape, np.uint8)
        if "frames" in frame_keys:
            _check_array("frames", state["frames"], (self.capacity, *self.frame_shape), np.uint8)
        else:
            self.frames.check_state_arrays(state)
        head, written, num_valid = (int(state[k]) for k in ("head", "written", "num_valid"))
        if head != written % self.capacity or num_valid != int(np.count_nonzero(state["valid"])):
            raise ValueError(f"cannot load: inconsistent state (head {head}, written {written}, num_valid "
                             f"{num_valid} for {int(np.count_nonzero(state['valid']))} valid slots)")
        rng = parse_rng_state(self.rng, state["rng"])
        return {"head": head, "written": written, "num_valid": num_valid, "rng": rng}

    def _apply_state(self, state: dict[str, np.ndarray], checked: dict) -> None:
        if self.storage != "ram":
            self.frames.load_state_arrays(state)
        elif self.device is None:
            self.frames[...] = state["frames"]
        else:
            self.frames.copy_(self._torch.from_numpy(np.ascontiguousarray(state["frames"])))
        for name in self.RING_ARRAYS:
            getattr(self, name)[...] = state[name]
        self.rng.bit_generator.state = checked["rng"]
        self.head, self.written, self.num_valid = checked["head"], checked["written"], checked["num_valid"]
        self.added = int(state["added"])
        self._in_episode = bool(state["in_episode"])
        self._last_frame[...] = state["last_frame"]
        if self.track_validity:  # prioritized replay re-reads every slot's validity
            self.validity_changes.extend(range(self.capacity))


def _check_storage(storage: str, path, device) -> None:
    """Storage options that cannot work together are refused before anything is built."""
    if storage not in STORAGES:
        raise ValueError(f"storage must be one of {STORAGES}, got {storage!r}")
    if storage != "ram" and device is not None:
        raise ValueError(f"device={device!r} keeps the frames as a torch tensor; it works with storage='ram' only, "
                         f"got storage={storage!r}")
    if (storage == "disk") != (path is not None):
        raise ValueError("storage='disk' needs path=<directory for the frames file>, and only it takes a path; "
                         f"got storage={storage!r}, path={path!r}")


def _text(value: str) -> np.ndarray:
    return np.frombuffer(value.encode(), np.uint8).copy()


def _shown(array) -> str:
    """A config value from a state dict, readable in an error message."""
    array = np.asarray(array)
    return repr(array.tobytes().decode()) if array.dtype == np.uint8 else str(array.tolist())


def _require_keys(state: dict, keys) -> None:
    missing = [k for k in keys if k not in state]
    if missing:
        raise ValueError(f"cannot load: the state has no {', '.join(missing)}")


def _check_array(name: str, saved, shape: tuple[int, ...], dtype) -> None:
    saved = np.asarray(saved)
    if saved.shape != tuple(shape) or saved.dtype != np.dtype(dtype):
        raise ValueError(f"cannot load: saved {name} is {saved.dtype}{list(saved.shape)}, "
                         f"this memory's is {np.dtype(dtype)}{list(shape)}")


class MultiStreamMemory(ReplayMemory):
    """One ``FrameSharingMemory`` per environment of a vector env, sampled as one memory.

    N environments produce N interleaved frame streams; one ring would interleave their frames and
    break stacks-by-index, so each env gets its own ring of ``capacity // N`` frames. A batch draws
    from the streams in proportion to what they hold (uniform over all stored transitions).
    ``ids`` in a batch are ``stream_id + N * id_within_stream``.
    """

    def __init__(self, capacity: int, num_streams: int, obs_shape=(4, 84, 84), seed: int | None = None,
                 padding: str = "repeat", prefault: bool = False, device=None, storage: str = "ram", path=None):
        super().__init__(capacity, obs_shape, np.uint8, seed)
        if num_streams < 1 or capacity // num_streams < obs_shape[0] + 1:
            raise ValueError(f"need 1 <= num_streams and capacity // num_streams >= {obs_shape[0] + 1}, "
                             f"got capacity={capacity}, num_streams={num_streams}")
        _check_storage(storage, path, device)
        what = f"MultiStreamMemory(capacity={capacity:,}, num_streams={num_streams})"
        frame_shape = tuple(obs_shape[1:])
        if device is None or str(device).startswith("cpu"):  # one check for the total, before any stream exists
            # frames (or what their store preallocates) + 16 B of per-slot bookkeeping (see FrameSharingMemory)
            check_fits(planned_host_bytes(storage, capacity, frame_shape) + 16 * capacity, what)
        if storage == "disk":  # one file per stream; all of them checked before the first is made
            stream_frames = capacity // num_streams * num_streams
            check_disk_space(stream_frames * int(np.prod(frame_shape)), path, what + " storage='disk'")
        seeds = np.random.SeedSequence(seed).spawn(num_streams)
        self.streams = [FrameSharingMemory(capacity // num_streams, obs_shape, seed=sq, padding=padding,
                                           prefault=prefault, device=device, storage=storage, path=path)
                        for sq in seeds]
        self.device = self.streams[0].device
        self.storage = storage

    def add(self, state, action, reward, next_state, done, episode_end=None, stream: int = 0) -> None:
        self.streams[stream].add(state, action, reward, next_state, done, episode_end)
        self.added += 1

    def add_batch(self, states, actions, rewards, next_states, dones, episode_ends, mask=None) -> None:
        """Add one transition per env; ``mask[i] = False`` skips env i (e.g. an autoreset step)."""
        for i, stream in enumerate(self.streams):
            if mask is None or mask[i]:
                stream.add(states[i], actions[i], rewards[i], next_states[i], dones[i], episode_ends[i])
                self.added += 1

    def batch_at(self, streams: np.ndarray, slots: np.ndarray) -> Batch:
        """The transitions at (stream, slot) pairs, ``streams`` sorted ascending, as one batch."""
        parts = [(k, self.streams[k].batch_at(slots[streams == k])) for k in np.unique(streams)]
        if self.device is None:
            cat = np.concatenate
        else:
            import torch

            cat = torch.cat
        return Batch(cat([p.states for _, p in parts]), np.concatenate([p.actions for _, p in parts]),
                     np.concatenate([p.rewards for _, p in parts]), cat([p.next_states for _, p in parts]),
                     np.concatenate([p.dones for _, p in parts]),
                     np.concatenate([p.ids * len(self.streams) + k for k, p in parts]))

    def sample(self, batch_size: int) -> Batch:
        self._check_batch_size(batch_size)
        sizes = np.array([len(s) for s in self.streams], dtype=np.float64)
        counts = self.rng.multinomial(batch_size, sizes / sizes.sum())
        streams = np.repeat(np.arange(len(self.streams)), counts)
        slots = np.concatenate([s._draw_slots(c) for s, c in zip(self.streams, counts) if c])
        return self.batch_at(streams, slots)

    def __len__(self) -> int:
        return sum(len(s) for s in self.streams)

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.streams)

    def end_episode(self, stream: int | None = None) -> None:
        """End the current episode of one stream (None: of all), e.g. after resuming with fresh envs."""
        for s in self.streams if stream is None else [self.streams[stream]]:
            s.end_episode()

    def state_dict(self) -> dict[str, np.ndarray]:
        """Each stream's ``state_dict`` under ``stream{i}/``, plus this memory's own counters and RNG."""
        state = {"num_streams": np.array(len(self.streams), np.int64), "added": np.array(self.added, np.int64),
                 "rng": rng_state_array(self.rng)}
        for i, s in enumerate(self.streams):
            state.update({f"stream{i}/{k}": v for k, v in s.state_dict().items()})
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restore ``state_dict()`` in place (same capacity, streams, shape and storage, or ``ValueError``, and
        then nothing is changed)."""
        _require_keys(state, ("num_streams", "added", "rng"))
        if int(state["num_streams"]) != len(self.streams):
            raise ValueError(f"cannot load: saved num_streams is {int(state['num_streams'])}, "
                             f"this memory's is {len(self.streams)}")
        parts = [{k[len(f"stream{i}/"):]: v for k, v in state.items() if k.startswith(f"stream{i}/")}
                 for i in range(len(self.streams))]
        checked = [s._checked_state(part) for s, part in zip(self.streams, parts)]  # all streams before any write
        rng = parse_rng_state(self.rng, state["rng"])
        for s, part, c in zip(self.streams, parts, checked):
            s._apply_state(part, c)
        self.rng.bit_generator.state = rng
        self.added = int(state["added"])


MEMORY_CLASSES = {
    "naive": NaiveDequeMemory,
    "stacked": StackedRingMemory,
    "folded": FoldedRingMemory,
    "frame_sharing": FrameSharingMemory,
}
