"""The library's replay memory: one frame per agent step in a ring, stacks rebuilt by index at sample time."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dqn_course.contracts import Count, StackShape, check_module
from dqn_course.replay.base import (
    Batch,
    PreallocatedRing,
    Seed,
    check_array,
    check_obs_shape,
    check_seed,
    check_stack_shift,
    require_keys,
    shown,
    text_array,
)
from dqn_course.replay.stores import (
    STORAGES,
    HostStore,
    TorchFrames,
    check_disk_space,
    make_store,
    planned_host_bytes,
)
from dqn_course.rng import parse_rng_state, rng_state_array

if TYPE_CHECKING:  # torch is loaded only by memories that keep frames on a device
    import torch

ValidityListener = Callable[[np.ndarray, np.ndarray], None]  # (slots, now_valid) after each add


class FrameSharingMemory(PreallocatedRing):
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

    Where the frames live is the frame store's business (``dqn_course.replay.stores``): ``storage``
    ``"ram"`` (a numpy array), ``"lz4"`` / ``"zstd"`` (compressed in RAM; ``nbytes`` counts the payloads
    as they are), ``"disk"`` (a memory-mapped file in the directory ``path``, refused up front when the
    disk lacks the space; ``nbytes`` then counts only the RAM arrays), or ``device="cuda"`` (a tensor
    on the GPU: ``sample`` returns ``states``/``next_states`` as device tensors, gathered there). A
    ready store can be passed as ``frames`` (a region of a bank shared by several memories), and ready
    bookkeeping arrays as ``ring`` (name in ``RING_ARRAYS`` -> a (capacity,) array: one row each of the
    joint arrays of several memories, so they can be sampled together). The slots, the invariants and
    the sampling are the same for every store.

    Samplers that keep their own distribution over slots (prioritized replay) subscribe with
    ``watch_validity``: after each ``add`` (and after ``load_state_dict``) the memory tells them which
    slots became valid or invalid, so they never read its arrays.
    """

    RING_DTYPES = {"actions": np.uint8, "rewards": np.float32, "dones": np.bool_, "first": np.bool_,
                   "valid": np.bool_, "ids": np.int64}  # per-slot bookkeeping: 16 bytes a slot
    RING_ARRAYS = tuple(RING_DTYPES)

    def __init__(self, capacity: Count, obs_shape: StackShape = (4, 84, 84), seed: Seed = None,
                 padding: str = "repeat", prefault: bool = False, device: torch.device | str | None = None,
                 storage: str = "ram", path: str | Path | None = None, frames: HostStore | TorchFrames | None = None,
                 ring: dict[str, np.ndarray] | None = None):
        obs_shape = check_obs_shape(obs_shape)  # before anything reads it
        check_seed(seed)
        if device is not None and frames is None:  # given frames live where their store was made, checked there
            from dqn_course.device import check_device  # torch: loaded only by memories that keep frames on a device

            check_device(device, f"device={str(device)!r}")
        if padding not in ("repeat", "zero"):
            raise ValueError(f"padding must be 'repeat' or 'zero', got {padding!r}")
        check_storage(storage, path, device)
        # Non-integers fall through to the base class's "positive integer" error, not a raw TypeError.
        if isinstance(capacity, (int, np.integer)) and capacity < obs_shape[0] + 1:
            raise ValueError(f"capacity must be at least stack+1 = {obs_shape[0] + 1} frames, got {capacity}")
        frame_shape = tuple(obs_shape[1:])
        if storage == "disk" and isinstance(capacity, (int, np.integer)):  # before the RAM guard and any allocation
            check_disk_space(int(capacity) * int(np.prod(frame_shape)), path,
                             f"{type(self).__name__}(capacity={capacity:,}, storage='disk')")
        arrays = {name: ((), dtype) for name, dtype in self.RING_DTYPES.items()}
        extra = 0  # a capacity that is no whole number gets the base class's error
        if frames is None and isinstance(capacity, (int, np.integer)) and not isinstance(capacity, bool):
            extra = planned_host_bytes(storage, int(capacity), frame_shape, device)
        super().__init__(capacity, obs_shape, np.uint8, seed, arrays, prefault, extra, given=ring)
        self.storage = storage
        if frames is None:
            frames = make_store(storage, self.capacity, frame_shape, path, device, prefault,
                                what=f"{type(self).__name__}(capacity={self.capacity:,}, storage={storage!r})")
        elif frames.capacity != self.capacity or tuple(frames.frame_shape) != frame_shape:
            raise ValueError(f"frames holds {frames.capacity} frames of {frames.frame_shape}, this memory needs "
                             f"{self.capacity} of {frame_shape}")
        self.frames = frames  # the frame store: every read and write of a frame goes through it
        self.device = frames.device
        self.padding = padding
        self.head = 0  # next slot to write
        self.written = 0  # frames ever written (so min(written, capacity) slots hold data)
        self.num_valid = 0
        self._in_episode = False  # True once an episode's first frame is written and it has not ended
        self._last_frame = np.zeros(self.frame_shape, np.uint8)  # host copy of the newest frame
        self._next_state = b""  # the last next_state's bytes: a continuing state must equal them
        self._listeners: list[ValidityListener] = []
        self._flipped: list[int] = []  # slots whose validity changed during the current add

    @property
    def nbytes(self) -> int:
        """Bytes held: the per-slot bookkeeping arrays and the frame store."""
        return super().nbytes + self.frames.nbytes

    def watch_validity(self, listener: ValidityListener) -> None:
        """Call ``listener(slots, now_valid)`` after every ``add`` that changed which slots can be sampled,
        and once with every slot after ``load_state_dict``."""
        self._listeners.append(listener)

    def _set_valid(self, k: int, value: bool) -> None:
        if self.valid[k] != value:
            self.valid[k] = value
            self.num_valid += 1 if value else -1
            if self._listeners:
                self._flipped.append(k)

    def _notify(self, slots: np.ndarray) -> None:
        for listener in self._listeners:
            listener(slots, self.valid[slots])

    def _write_frame(self, frame: np.ndarray, first: bool) -> int:
        """Write one frame at the head, keeping invariant 3; returns its slot."""
        k, C = self.head, self.capacity
        self._set_valid(k, False)
        for m in range(1, self.stack):  # transitions that looked back through slot k
            j = (k + m) % C
            if self.first[j]:
                break
            self._set_valid(j, False)
        self.frames[k] = frame
        self._last_frame[...] = frame
        self.first[k] = first
        self.ids[k] = -1
        self.head = (k + 1) % C
        self.written += 1
        return k

    # False only in benchmarks/ab/ab_add_checks.py, which measures what the two stack checks cost against a
    # baseline that compares state's newest frame alone
    _check_continuity = True

    def add(self, state, action, reward, next_state, done, episode_end=None):
        """Store one transition. Everything is checked before anything is written, so a refused ``add`` leaves
        the memory as it was: ``next_state`` must be ``state`` shifted by one frame (a frame stack), and in an
        episode ``state`` must be the previous ``next_state`` (else pass ``episode_end=True`` on the step after
        which the env was reset); ``done``/``episode_end`` bools, ``reward`` finite."""
        self._store(*self._check_add(state, action, reward, next_state, done, episode_end))

    def _check_add(self, state, action, reward, next_state, done, episode_end) -> tuple:
        """``add``'s checks, writing nothing: the checked arguments and ``next_state``'s bytes, for ``_store``."""
        state, action, reward, next_state = self._checked(state, action, reward, next_state)
        done = self._check_flag("done", done)
        episode_end = done if episode_end is None else self._check_flag("episode_end", episode_end)
        next_bytes = None
        if self._check_continuity:  # both stack checks: two memcmp's of bytes
            state_bytes, next_bytes = state.tobytes(), next_state.tobytes()
            check_stack_shift(state_bytes, next_bytes, self.stack)
            if self._in_episode and state_bytes != self._next_state:
                raise ValueError(_NOT_CONTINUED)
        elif self._in_episode and not np.array_equal(self._last_frame, state[-1]):  # the A/B's baseline
            raise ValueError(_NOT_CONTINUED)
        return state, action, reward, next_state, done, episode_end, next_bytes

    def _store(self, state, action, reward, next_state, done, episode_end, next_bytes) -> None:
        """Write one transition ``_check_add`` passed."""
        if not self._in_episode:
            # Episode start: store the frames after the padding; stacks_at pads back to the left.
            p = self._padding_prefix(state)
            for i in range(p, self.stack):
                self._write_frame(state[i], first=(i == p))
            self._in_episode = True
        k = (self.head - 1) % self.capacity  # slot of state's newest frame (the last one written)
        self.actions[k], self.rewards[k], self.dones[k], self.ids[k] = action, reward, done, self.added
        self._write_frame(next_state[-1], first=False)
        if self._check_continuity:
            self._next_state = next_bytes
        self._set_valid(k, True)
        self.added += 1
        if episode_end:
            self._in_episode = False
        self.frames.flush()
        if self._flipped:
            slots = np.fromiter(self._flipped, np.int64, len(self._flipped))
            self._flipped.clear()
            self._notify(slots)

    def _padding_prefix(self, state: np.ndarray) -> int:
        """How many leading frames of ``state`` ``stacks_at`` can rebuild as padding (at most stack-1)."""
        p = 0
        while p < self.stack - 1:
            pad = state[p + 1] if self.padding == "repeat" else 0
            if not np.array_equal(state[: p + 1], np.broadcast_to(pad, state[: p + 1].shape)):
                break
            p += 1
        return p

    def draw_slots(self, batch_size: Count) -> np.ndarray:
        """Uniform over valid slots: rejection sampling, with an exact fallback for sparse rings."""
        filled = min(self.written, self.capacity)
        slots = self.rng.integers(0, filled, size=batch_size)
        for _ in range(16):
            bad = ~self.valid[slots]
            if not bad.any():
                return slots
            slots[bad] = self.rng.integers(0, filled, size=int(bad.sum()))
        return self.rng.choice(np.flatnonzero(self.valid[:filled]), size=batch_size)

    def stack_index(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Frame slots of the (stack+1)-frame window of each transition at ``slots``: s is ``[:, :S]``, s'
        ``[:, 1:]``; and where ``padding="zero"``, the mask of positions that read as zeros (else None)."""
        index, start = stack_windows(slots, self.first.__getitem__, self.stack, self.capacity)
        return index, (np.arange(self.stack + 1) < start[:, None] if self.padding == "zero" else None)

    def stacks_at(self, slots: np.ndarray):
        """(states, next_states) for the transitions at ``slots``, from one gather of stack+1 frames each."""
        frames = self.frames.gather(*self.stack_index(slots))  # (B, S+1, H, W)
        return frames[:, :-1], frames[:, 1:]

    def scalars_at(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(actions int64, rewards float32, dones float32, ids int64) of the transitions at ``slots``."""
        return (self.actions[slots].astype(np.int64), self.rewards[slots], self.dones[slots].astype(np.float32),
                self.ids[slots])

    def batch_at(self, slots: np.ndarray) -> Batch:
        states, next_states = self.stacks_at(slots)
        actions, rewards, dones, ids = self.scalars_at(slots)
        return Batch(states, actions, rewards, next_states, dones, ids)

    def sample(self, batch_size: Count) -> Batch:
        self._check_batch_size(batch_size)
        return self.batch_at(self.draw_slots(batch_size))

    def __len__(self) -> int:
        return self.num_valid

    def generators(self) -> list[np.random.Generator]:
        """Every generator ``sample`` draws from (for checkpoints' digests)."""
        return [self.rng]

    def end_episode(self) -> None:
        """End the current episode here: the next ``add`` opens a new one (e.g. after resuming a run).

        The episode's last frame stays as its final next-state frame, as after a truncation: its
        transitions keep bootstrapping from the real frame.
        """
        self._in_episode = False

    # -- checkpoints: flat dicts of numpy arrays, never pickles -----------------------------------
    def _config(self) -> dict[str, np.ndarray]:
        return {"capacity": np.array(self.capacity, np.int64), "obs_shape": np.array(self.obs_shape, np.int64),
                "storage": text_array(self.storage), "padding": text_array(self.padding)}

    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything ``sample`` depends on, as numpy arrays: the ring, the write head and the sampling RNG.

        Arrays may share memory with the memory (the frames are not copied: at 1M they are 7 GB, or a
        file); write them out before the next ``add``. A compressed store gives ``frames_blob`` and
        ``frames_offsets`` instead of ``frames``.
        """
        return {**self._config(), **{n: getattr(self, n) for n in self.RING_ARRAYS}, **self.frames.state_arrays(),
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
        self.apply_state(state, self.checked_state(state))

    def checked_state(self, state: dict[str, np.ndarray]) -> dict:
        """Validate a state dict against this memory (``ValueError`` naming the mismatch); parse its RNG."""
        config = self._config()
        require_keys(state, config)
        for key, mine in config.items():  # first, so a different storage is named as such
            if not np.array_equal(np.asarray(state[key]), mine):
                raise ValueError(f"cannot load: saved {key} is {shown(state[key])}, this memory's is {shown(mine)}")
        require_keys(state, (*self.RING_ARRAYS, *self.frames.STATE_KEYS, "head", "written", "num_valid", "added",
                             "in_episode", "last_frame", "rng"))
        for name in self.RING_ARRAYS:
            check_array(name, state[name], (self.capacity,), getattr(self, name).dtype)
        check_array("last_frame", state["last_frame"], self.frame_shape, np.uint8)
        self.frames.check_state_arrays(state)
        for name in ("head", "written", "num_valid", "added"):
            check_array(name, state[name], (), np.int64)
        check_array("in_episode", state["in_episode"], (), np.bool_)
        head, written, num_valid, added = (int(state[k]) for k in ("head", "written", "num_valid", "added"))
        valid, C = np.asarray(state["valid"]), self.capacity
        if min(written, num_valid, added) < 0:
            raise ValueError(f"cannot load: negative counts (written {written}, num_valid {num_valid}, added {added})")
        if head != written % C or num_valid != int(np.count_nonzero(valid)):
            raise ValueError(f"cannot load: inconsistent state (head {head}, written {written}, num_valid "
                             f"{num_valid} for {int(np.count_nonzero(valid))} valid slots)")
        filled = min(written, C)
        if valid[filled:].any() or (written and valid[(head - 1) % C]) or num_valid > added:
            raise ValueError(f"cannot load: valid slots outside the {filled} written ones, at the newest frame, or "
                             f"more than the {added} transitions ever added (num_valid {num_valid})")
        ids = np.asarray(state["ids"])[valid]
        if len(ids) and (ids.min() < 0 or ids.max() >= added or len(np.unique(ids)) != len(ids)):
            raise ValueError(f"cannot load: transition ids of valid slots must be distinct and in [0, {added})")
        if not np.isfinite(np.asarray(state["rewards"])[valid]).all():
            raise ValueError("cannot load: a valid slot holds a reward that is not finite")
        rng = parse_rng_state(self.rng, state["rng"])
        return {"head": head, "written": written, "num_valid": num_valid, "rng": rng}

    def apply_state(self, state: dict[str, np.ndarray], checked: dict) -> None:
        self.frames.load_state_arrays(state)
        for name in self.RING_ARRAYS:
            getattr(self, name)[...] = state[name]
        self.rng.bit_generator.state = checked["rng"]
        self.head, self.written, self.num_valid = checked["head"], checked["written"], checked["num_valid"]
        self.added = int(state["added"])
        self._in_episode = bool(state["in_episode"])
        self._last_frame[...] = state["last_frame"]
        if self._in_episode and self.written:  # the last next_state, rebuilt from the ring (what add compares with)
            stack = self.frames.gather(*self.stack_index(np.array([(self.head - 1) % self.capacity])))[0, :-1]
            self._next_state = np.ascontiguousarray(stack.cpu().numpy() if hasattr(stack, "cpu") else stack).tobytes()
        self._flipped.clear()
        if self._listeners:  # every slot may have changed
            self._notify(np.arange(self.capacity))


def stack_windows(slots: np.ndarray, first_at: Callable[[np.ndarray], np.ndarray], stack: Count,
                  capacity: Count) -> tuple[np.ndarray, np.ndarray]:
    """The (stack+1)-frame windows of the transitions at ``slots`` of a ring of ``capacity`` frames, padded by
    repeating each episode's first frame (invariant 2), and where each stack's real frames start.

    ``first_at(window)`` reads the ring's ``first`` flags at an int array of slots (same shape). Returns
    ``(index, start)``: ``index[b]`` the slots of s (``[:stack]``) and s' (``[1:]``); positions before
    ``start[b]`` are padding.
    """
    S = stack
    first = first_at((slots[:, None] + np.arange(-(S - 1), 1)) % capacity)  # (B, S): the flags of s's frames
    # Position of the episode's first frame inside the stack: the last flagged one (0 if it lies further back).
    start = (first * np.arange(S)).max(axis=1)
    pos = np.maximum(np.arange(S + 1), start[:, None])  # padding positions read the first frame
    return (slots[:, None] + (pos - (S - 1))) % capacity, start


_NOT_CONTINUED = ("state does not continue the previous transition's next_state: pass episode_end=True for the step "
                  "after which the environment was reset")


def check_storage(storage: str, path: str | Path | None, device: torch.device | str | None) -> None:
    """Storage options that cannot work together are refused before anything is built."""
    if storage not in STORAGES:
        raise ValueError(f"storage must be one of {STORAGES}, got {storage!r}")
    if storage != "ram" and device is not None:
        raise ValueError(f"device={device!r} keeps the frames as a torch tensor; it works with storage='ram' only, "
                         f"got storage={storage!r}")
    if (storage == "disk") != (path is not None):
        raise ValueError("storage='disk' needs path=<directory for the frames file>, and only it takes a path; "
                         f"got storage={storage!r}, path={path!r}")


check_module(globals())
