"""One frame-sharing ring per environment of a vector env, sampled as one memory."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dqn_course.contracts import Count, StackShape, check_module
from dqn_course.profiling import check_fits
from dqn_course.replay.base import (_FLOAT32_MAX, Batch, ReplayMemory, Seed, check_array, check_obs_shape, check_seed,
                                    require_keys)
from dqn_course.replay.frame_sharing import FrameSharingMemory, ValidityListener, check_storage, stack_windows
from dqn_course.replay.stores import check_disk_space, make_store, planned_host_bytes
from dqn_course.rng import parse_rng_state, rng_state_array

if TYPE_CHECKING:  # torch is loaded only by memories that keep frames on a device
    import torch


_BATCH_NAMES = {"state": "states", "action": "actions", "reward": "rewards", "next_state": "next_states",
                "done": "dones", "episode_end": "episode_ends"}  # add's argument -> add_batch's


class MultiStreamMemory(ReplayMemory):
    """One ``FrameSharingMemory`` per environment of a vector env, sampled as one memory.

    N environments produce N interleaved frame streams; one ring would interleave their frames and
    break stacks-by-index, so each env gets its own ring of ``capacity // N`` frames. A batch draws
    from the streams in proportion to what they hold (uniform over all stored transitions).
    ``ids`` in a batch are ``stream_id + N * id_within_stream``.

    With ``storage="ram"`` (host or device) the streams' frames are regions of one bank: stream i owns
    slots ``[i * C, (i+1) * C)`` of it (C = ``capacity // N``), ``add_batch`` copies the new frames of
    all envs to a device in one transfer, and a batch is one gather over the bank, whatever streams its
    transitions come from. Other storages keep one store per stream.

    The streams' bookkeeping (``FrameSharingMemory.RING_ARRAYS``) is one joint array per name, ``ring[name]``
    of shape (N, C), each stream's arrays being its row: ``draw_windows`` plans many batches over all streams
    in one vectorised pass.
    """

    def __init__(self, capacity: Count, num_streams: Count, obs_shape: StackShape = (4, 84, 84), seed: Seed = None,
                 padding: str = "repeat", prefault: bool = False, device: torch.device | str | None = None,
                 storage: str = "ram", path: str | Path | None = None):
        obs_shape = check_obs_shape(obs_shape)  # before anything reads them
        check_seed(seed)
        if device is not None:
            from dqn_course.device import check_device  # torch: loaded only by memories that keep frames on a device

            check_device(device, f"device={str(device)!r}")
        super().__init__(capacity, obs_shape, np.uint8, seed)
        if isinstance(num_streams, (bool, np.bool_)) or not isinstance(num_streams, (int, np.integer)):
            raise ValueError(f"num_streams must be a whole number (one stream per env), got {num_streams!r}")
        if num_streams < 1 or capacity // num_streams < obs_shape[0] + 1:
            raise ValueError(f"need 1 <= num_streams and capacity // num_streams >= {obs_shape[0] + 1}, "
                             f"got capacity={capacity}, num_streams={num_streams}")
        check_storage(storage, path, device)
        what = f"MultiStreamMemory(capacity={capacity:,}, num_streams={num_streams})"
        frame_shape = tuple(obs_shape[1:])
        per_stream = capacity // num_streams
        # One check for the total, before any stream exists: the frames' host share + 16 B of per-slot bookkeeping.
        check_fits(planned_host_bytes(storage, capacity, frame_shape, device) + 16 * capacity, what)
        if storage == "disk":  # one file per stream; all of them checked before the first is made
            check_disk_space(per_stream * num_streams * int(np.prod(frame_shape)), path, what + " storage='disk'")
        self.bank = None
        if storage == "ram":
            self.bank = make_store("ram", per_stream * num_streams, frame_shape, device=device, prefault=prefault,
                                   what=what)
        self.ring = {name: np.zeros((num_streams, per_stream), dtype)
                     for name, dtype in FrameSharingMemory.RING_DTYPES.items()}
        if prefault:
            for arr in self.ring.values():
                arr.fill(0)
        self._flat_ring = {name: arr.reshape(-1) for name, arr in self.ring.items()}  # views, by bank slot i * C + k
        seeds = np.random.SeedSequence(seed).spawn(num_streams)
        self.streams = [FrameSharingMemory(per_stream, obs_shape, seed=sq, padding=padding, prefault=prefault,
                                           device=device, storage=storage, path=path,
                                           frames=None if self.bank is None else self.bank.region(i * per_stream,
                                                                                                  per_stream),
                                           ring={name: arr[i] for name, arr in self.ring.items()})
                        for i, sq in enumerate(seeds)]
        self.stream_capacity = per_stream
        self.device = self.streams[0].device
        self.storage = storage

    def _check_stream(self, stream) -> int:
        n = len(self.streams)
        if isinstance(stream, (bool, np.bool_)) or not isinstance(stream, (int, np.integer)) or not 0 <= stream < n:
            raise ValueError(f"stream must be a whole number in [0, {n}) (this memory has {n} streams), got {stream!r}")
        return int(stream)

    def add(self, state, action, reward, next_state, done, episode_end=None, stream: int = 0) -> None:
        self.streams[self._check_stream(stream)].add(state, action, reward, next_state, done, episode_end)
        self.added += 1

    def add_batch(self, states: np.ndarray | Sequence, actions: np.ndarray | Sequence,
                  rewards: np.ndarray | Sequence, next_states: np.ndarray | Sequence, dones: np.ndarray | Sequence,
                  episode_ends: np.ndarray | Sequence, mask: np.ndarray | Sequence | None = None) -> None:
        """Add one transition per env; ``mask[i] = False`` skips env i (e.g. an autoreset step).

        Every argument holds exactly one entry per stream (env) (numpy arrays, or lists of them, of numbers or of
        bools), ``mask`` None or that many bools.
        Every transition is checked (as ``FrameSharingMemory.add`` checks one) before any is stored, so a refused
        batch leaves the memory as it was.

        The transitions that continue an episode in a frame bank (nearly all of them, in a training run) are checked
        and stored for all their streams at once (``_steady_rows``, ``_store_steady``); episode starts, streams
        watched by a sampler and other stores go one stream at a time (``FrameSharingMemory._store``). Both keep
        the same invariants (``FrameSharingMemory``'s docstring).
        """
        states, actions, rewards, next_states, dones, episode_ends = (
            np.asarray(a) for a in (states, actions, rewards, next_states, dones, episode_ends))
        if mask is not None:
            mask = np.asarray(mask)
        self._check_add_batch(states, actions, rewards, next_states, dones, episode_ends, mask)
        live = np.ones(len(self.streams), bool) if mask is None else mask
        steady = self._steady_rows(live, states, actions, rewards, next_states)
        checked = []
        for i in np.flatnonzero(live & ~steady):
            stream = self.streams[i]
            try:
                checked.append((stream, stream._check_add(states[i], actions[i], rewards[i], next_states[i],
                                                          dones[i], episode_ends[i])))
            except (TypeError, ValueError) as error:  # its message starts with the argument's name
                first = str(error).split(" ", 1)[0]
                raise type(error)(f"{_BATCH_NAMES.get(first, 'the batch')}[{i}]: {error}") from None
        with self.streams[0].frames.deferred():  # one transfer of all new frames (device bank), at the end
            for stream, transition in checked:
                stream._store(*transition)
                self.added += 1
            rows = np.flatnonzero(steady)
            if len(rows):
                sel = slice(None) if len(rows) == len(steady) else rows  # all rows: views, no copies
                self._store_steady(rows, actions[sel], rewards[sel], next_states[sel], dones[sel],
                                   episode_ends[sel])

    def _steady_rows(self, live: np.ndarray, states: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
                     next_states: np.ndarray) -> np.ndarray:
        """Which streams' transitions ``_store_steady`` can take (bool per stream): stored in this memory's bank,
        continuing an episode, no sampler watching, and passing every check ``FrameSharingMemory._check_add`` makes,
        tested for all rows at once. A row that fails a check is left to the one-stream path, which raises its
        error."""
        steady = live.copy()
        if self.bank is None or states.dtype != np.uint8 or next_states.dtype != np.uint8:
            steady[:] = False
            return steady
        for i in np.flatnonzero(steady):
            s = self.streams[i]
            steady[i] = s._in_episode and not s._listeners and s._check_continuity
        rows = np.flatnonzero(steady)
        if not len(rows):
            return steady
        sel = slice(None) if len(rows) == len(steady) else rows  # all rows: views, no copies
        ok = (actions[sel] >= 0) & (actions[sel] < 256) & (np.abs(rewards[sel]) <= _FLOAT32_MAX)
        ok &= (next_states[sel, :-1] == states[sel, 1:]).reshape(len(rows), -1).all(axis=1)  # the stack shifts
        for j, i in enumerate(rows):  # the state is the stream's last next_state: its episode goes on
            ok[j] = ok[j] and states[i].tobytes() == self.streams[i]._next_state
        steady[rows[~ok]] = False
        return steady

    def _store_steady(self, rows: np.ndarray, actions: np.ndarray, rewards: np.ndarray, next_states: np.ndarray,
                      dones: np.ndarray, episode_ends: np.ndarray) -> None:
        """Store one checked transition continuing an episode in each stream of ``rows`` (distinct): what
        ``FrameSharingMemory._store`` does for one, on the joint ring for all, with the same invariants. The
        transition's slot k (its state's newest frame, before the head) gets its scalars and becomes valid
        (invariant 4); the new frame goes to the head, which first invalidates the transitions that needed the old
        frame there (invariant 3: the head's own, and up to stack-1 after it, stopping at an episode start)."""
        C, streams = self.stream_capacity, [self.streams[i] for i in rows]
        heads = np.fromiter((s.head for s in streams), np.int64, len(rows))
        ids = np.fromiter((s.added for s in streams), np.int64, len(rows))
        k = (heads - 1) % C
        valid, first = self.ring["valid"], self.ring["first"]
        self.ring["actions"][rows, k] = actions
        self.ring["rewards"][rows, k] = rewards
        self.ring["dones"][rows, k] = dones
        self.ring["ids"][rows, k] = ids
        lost = valid[rows, heads].astype(np.int64)  # invariant 3: the head's transition ...
        valid[rows, heads] = False
        looking = np.ones(len(rows), bool)
        for m in range(1, self.stack):  # ... and those that looked back through the head, up to an episode start
            j = (heads + m) % C
            looking &= ~first[rows, j]
            hit = looking & valid[rows, j]
            valid[rows[hit], j[hit]] = False
            lost += hit
        newest = next_states[:, -1]
        self.bank.put(rows * C + heads, newest)
        first[rows, heads] = False
        self.ring["ids"][rows, heads] = -1
        gained = ~valid[rows, k]  # invariant 4: the transition at k is complete now that its s' frame is in
        valid[rows, k] = True
        for j, s in enumerate(streams):
            s.num_valid += int(gained[j]) - int(lost[j])
            s.head = (s.head + 1) % C
            s.written += 1
            s.added += 1
            s._last_frame[...] = newest[j]
            s._next_state = next_states[j].tobytes()
            if episode_ends[j]:
                s._in_episode = False
        self.added += len(rows)

    def _check_add_batch(self, states, actions, rewards, next_states, dones, episode_ends, mask) -> None:
        """``add_batch``'s own check: one entry per stream in each argument (``ValueError``), each of its kind and
        shape (``TypeError``), ``mask`` None or that many bools. Each transition is then checked as its stream's
        ``add`` checks one (``_check_add``), all before any is stored."""
        n, obs = len(self.streams), self.streams[0].obs_shape
        for name, values, item, kinds in (("states", states, obs, "u"), ("actions", actions, (), "iu"),
                                          ("rewards", rewards, (), "iuf"), ("next_states", next_states, obs, "u"),
                                          ("dones", dones, (), "b"), ("episode_ends", episode_ends, (), "b")):
            entries = len(values) if values.ndim else 0  # a bare number is no entry per env
            if entries != n:
                raise ValueError(f"{name} has {entries} entries, this memory has {n} streams (one per env): pass "
                                 f"one entry per env, mask=False for the envs to skip")
            if values.shape[1:] != item or values.dtype.kind not in kinds:
                raise TypeError(f"{name} must hold {n} entries of shape {item} and dtype kind {kinds!r}, got "
                                f"{values.dtype}{list(values.shape)}")
        if mask is not None and (mask.shape != (n,) or mask.dtype != np.bool_):
            raise ValueError(f"mask must be None or {n} bools (one per stream), got {mask.dtype}{list(mask.shape)}")

    def watch_validity(self, listener: ValidityListener) -> None:
        """``listener(slots, now_valid)`` on validity flips of any stream, slots numbered ``stream * C + slot``."""
        for k, s in enumerate(self.streams):
            s.watch_validity(lambda slots, valid, offset=k * self.stream_capacity: listener(slots + offset, valid))

    def window_at(self, streams: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, ...]:
        """For a bank: each transition's (stack+1)-frame window as slots of the bank (s = ``[:, :-1]``, s' =
        ``[:, 1:]``), and its actions, rewards and dones; ``streams`` sorted ascending. Only ``padding="repeat"``
        (zero padding needs a mask: use ``batch_at``)."""
        present = np.unique(streams)
        mine = [slots[streams == k] for k in present]
        index = np.concatenate([self.streams[k].stack_index(s)[0] + k * self.stream_capacity
                                for k, s in zip(present, mine)])
        scalars = [self.streams[k].scalars_at(s) for k, s in zip(present, mine)]
        return (index, *(np.concatenate([p[i] for p in scalars]) for i in range(3)))

    def batch_at(self, streams: np.ndarray, slots: np.ndarray) -> Batch:
        """The transitions at (stream, slot) pairs, ``streams`` sorted ascending, as one batch."""
        present = np.unique(streams)
        mine = [slots[streams == k] for k in present]
        scalars = [self.streams[k].scalars_at(s) for k, s in zip(present, mine)]
        if self.bank is not None:  # one gather over the bank, with each stream's slots shifted to its region
            windows = [self.streams[k].stack_index(s) for k, s in zip(present, mine)]
            index = np.concatenate([w[0] + k * self.stream_capacity for k, w in zip(present, windows)])
            zero = None if windows[0][1] is None else np.concatenate([w[1] for w in windows])
            frames = self.bank.gather(index, zero)
            states, next_states = frames[:, :-1], frames[:, 1:]
        else:
            parts = [self.streams[k].stacks_at(s) for k, s in zip(present, mine)]
            states = np.concatenate([p[0] for p in parts])
            next_states = np.concatenate([p[1] for p in parts])
        return Batch(states, np.concatenate([p[0] for p in scalars]), np.concatenate([p[1] for p in scalars]),
                     next_states, np.concatenate([p[2] for p in scalars]),
                     np.concatenate([p[3] * len(self.streams) + k for k, p in zip(present, scalars)]))

    def draw(self, batch_size: Count) -> tuple[np.ndarray, np.ndarray]:
        """(streams, slots) of a uniform batch over all stored transitions, streams ascending."""
        sizes = np.array([len(s) for s in self.streams], dtype=np.float64)
        counts = self.rng.multinomial(batch_size, sizes / sizes.sum())
        streams = np.repeat(np.arange(len(self.streams)), counts)
        slots = np.concatenate([s.draw_slots(c) for s, c in zip(self.streams, counts) if c])
        return streams, slots

    def draw_windows(self, n: Count) -> tuple[np.ndarray, ...]:
        """``n`` transitions drawn uniformly, with replacement, over all that can be sampled, as ``window_at``
        returns them: (n, stack+1) frame slots of the bank (stream i's slot k is ``i * C + k``), then actions
        (int64), rewards (float32) and dones (float32); in no particular order.

        One vectorised pass over the joint ring for all n (the fast path plans k batches at once with it), drawing
        from this memory's own generator: a uniform (stream, slot) among the written slots, redrawn where the slot
        is not valid, which is uniform over the valid ones. Raises ``ValueError`` for n < 1, an empty memory, or
        ``padding="zero"`` (its windows need a mask: use ``batch_at``).
        """
        if self.streams[0].padding != "repeat":
            raise ValueError("draw_windows gives windows by index only: use padding='repeat'")
        if len(self) == 0:
            raise ValueError("cannot draw from an empty memory: add transitions first")
        C = self.stream_capacity
        ring = self._flat_ring
        filled = np.array([min(s.written, C) for s in self.streams], np.int64)
        ends = np.cumsum(filled)
        flat = self.rng.integers(0, ends[-1], size=n)  # a position among all written slots
        for _ in range(16):
            streams = np.searchsorted(ends, flat, side="right")
            slots = flat - (ends[streams] - filled[streams])
            bad = ~ring["valid"][streams * C + slots]
            if not bad.any():
                break
            flat[bad] = self.rng.integers(0, ends[-1], size=int(bad.sum()))
        else:  # sparse: draw among the valid slots exactly
            streams, slots = np.nonzero(self.ring["valid"] & (np.arange(C) < filled[:, None]))
            pick = self.rng.integers(0, len(streams), size=n)
            streams, slots = streams[pick], slots[pick]
        base = streams * C
        index, _ = stack_windows(slots, lambda window: ring["first"][window + base[:, None]], self.stack, C)
        at = base + slots
        return (index + base[:, None], ring["actions"][at].astype(np.int64), ring["rewards"][at],
                ring["dones"][at].astype(np.float32))

    def sample(self, batch_size: Count) -> Batch:
        self._check_batch_size(batch_size)
        return self.batch_at(*self.draw(batch_size))

    def __len__(self) -> int:
        return sum(len(s) for s in self.streams)

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.streams)

    def generators(self) -> list[np.random.Generator]:
        """Every generator ``sample`` draws from (for checkpoints' digests)."""
        return [self.rng, *(g for s in self.streams for g in s.generators())]

    def end_episode(self, stream: int | None = None) -> None:
        """End the current episode of one stream (None: of all), e.g. after resuming with fresh envs."""
        for s in self.streams if stream is None else [self.streams[self._check_stream(stream)]]:
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
        require_keys(state, ("num_streams", "added", "rng"))
        check_array("num_streams", state["num_streams"], (), np.int64)
        check_array("added", state["added"], (), np.int64)
        if int(state["added"]) < 0:
            raise ValueError(f"cannot load: saved added is {int(state['added'])}, a count (>= 0)")
        if int(state["num_streams"]) != len(self.streams):
            raise ValueError(f"cannot load: saved num_streams is {int(state['num_streams'])}, "
                             f"this memory's is {len(self.streams)}")
        parts = [{k[len(f"stream{i}/"):]: v for k, v in state.items() if k.startswith(f"stream{i}/")}
                 for i in range(len(self.streams))]
        checked = [s.checked_state(part) for s, part in zip(self.streams, parts)]  # all streams before any write
        rng = parse_rng_state(self.rng, state["rng"])
        for s, part, c in zip(self.streams, parts, checked):
            s.apply_state(part, c)
        self.rng.bit_generator.state = rng
        self.added = int(state["added"])


check_module(globals())
