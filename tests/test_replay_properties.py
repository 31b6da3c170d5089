"""Differential, property-based tests: every replay memory against a plain list of transitions.

Hypothesis generates random add sequences (tiny frames, stacks of 2-4, random episode lengths, life
losses = ``done`` without ``episode_end``, truncations = ``episode_end`` without ``done``,
terminations = both, capacities small enough that the ring wraps many times). States come from a
reference frame stacker that behaves like gymnasium's ``FrameStackObservation`` (``padding_type=
"reset"``: repeat the episode's first frame; or zeros for ``FrameSharingMemory(padding="zero")``).
Every frame is unique (a counter is written into its pixels), so any mix-up of frames shows.

Episodes open either with a padded first state or (as ale-py's ``AtariVectorEnv`` gives) with a
stack already holding up to ``stack`` real frames.

A reference list holds every transition ever added (index = id). After (and during) the adds, every
sampled transition must equal the reference transition with the same id, bit for bit, only
transitions the memory can still hold may come back, and over many draws every one of them does.
``FrameSharingMemory`` is also checked white-box after every add (its ``valid`` flags mark exactly
the transitions whose frames are all still in the ring), with its torch storage (``device="cpu"``),
and as the per-env rings of ``MultiStreamMemory``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dqn_course.replay import (
    MEMORY_CLASSES,
    FoldedRingMemory,
    FrameSharingMemory,
    MultiStreamMemory,
    NaiveDequeMemory,
    StackedRingMemory,
)

MAX_EXAMPLES = 60


# -- unique frames --------------------------------------------------------------------------------
def make_frame(counter: int, frame_shape: tuple[int, ...]) -> np.ndarray:
    """A frame whose first two pixels spell ``counter`` (little endian); never all zeros."""
    n = int(np.prod(frame_shape))
    flat = (np.arange(n, dtype=np.int64) * 11 + counter * 37 + 1) % 256
    flat[0], flat[1] = counter % 256, counter // 256
    flat[-1] = 1 + counter % 255  # so a real frame is never mistaken for zero padding
    return flat.astype(np.uint8).reshape(frame_shape)


def frame_counter(frames: np.ndarray) -> np.ndarray:
    """Inverse of ``make_frame`` over the trailing frame axes; -1 for an all-zero (padding) frame."""
    flat = frames.reshape(*frames.shape[: -2], -1).astype(np.int64)
    counters = flat[..., 0] + 256 * flat[..., 1]
    return np.where((flat == 0).all(-1), -1, counters)


# -- the reference ----------------------------------------------------------------------------------
@dataclass
class Reference:
    """Every transition ever added, as arrays indexed by id, plus which frames each one needs."""

    stack: int
    frame_shape: tuple[int, ...]
    padding: str
    states: list = field(default_factory=list)
    actions: list = field(default_factory=list)
    rewards: list = field(default_factory=list)
    next_states: list = field(default_factory=list)
    dones: list = field(default_factory=list)
    episode_ends: list = field(default_factory=list)
    frame_of: list = field(default_factory=list)  # global index of the state's newest frame
    episode_first: list = field(default_factory=list)  # global index of its episode's first frame
    frames_written: int = 0  # what a one-frame-per-step ring has written (first frames included)
    frame_episode: dict = field(default_factory=dict)  # frame counter -> episode number
    episode_first_frame: dict = field(default_factory=dict)  # episode number -> its first frame counter

    def __len__(self) -> int:
        return len(self.actions)

    def arrays(self):
        return (np.stack(self.states), np.array(self.actions, np.int64), np.array(self.rewards, np.float32),
                np.stack(self.next_states), np.array(self.dones, np.float32))

    def frame_sharing_sampleable(self, capacity: int) -> set[int]:
        """Ids whose needed frames (back to the episode start, at most stack-1 back, through s') are
        among the last ``capacity`` frames written."""
        oldest_kept = self.frames_written - capacity
        return {t for t in range(len(self))
                if max(self.episode_first[t], self.frame_of[t] - (self.stack - 1)) >= oldest_kept
                and self.frame_of[t] + 1 < self.frames_written}


class StackingEnv:
    """Emits unique frames and stacks them like FrameStackObservation (reset padding or zeros)."""

    def __init__(self, ref: Reference):
        self.ref = ref
        self.state = None
        self.episode = -1

    def _new_frame(self) -> tuple[np.ndarray, int]:
        g = self.ref.frames_written
        self.ref.frames_written += 1
        self.ref.frame_episode[g] = self.episode
        return make_frame(g, self.ref.frame_shape), g

    def step(self, action: int, reward: float, done: bool, episode_end: bool, real_at_start: int = 1) -> tuple:
        """One transition (s, a, r, s', done, episode_end); records it in the reference.

        ``real_at_start`` real frames open a new episode's first state (1: a padded stack, as from
        ``FrameStackObservation``; up to ``stack``: a stack already full of real frames, as from
        ale-py's ``AtariVectorEnv`` after its no-op and FIRE steps)."""
        ref, S = self.ref, self.ref.stack
        if self.state is None:  # env.reset()
            self.episode += 1
            k = max(1, min(S, real_at_start))
            real = [self._new_frame() for _ in range(k)]
            f0, g0 = real[0]
            ref.episode_first_frame[self.episode] = g0
            pad = f0 if ref.padding == "repeat" else np.zeros_like(f0)
            self.state = np.stack([pad] * (S - k) + [f for f, _ in real])
            self.g, self.first = real[-1][1], g0
        f, _ = self._new_frame()
        next_state = np.concatenate([self.state[1:], f[None]])
        tr = (self.state, action, reward, next_state, done, episode_end)
        ref.states.append(self.state)
        ref.actions.append(action)
        ref.rewards.append(np.float32(reward))
        ref.next_states.append(next_state)
        ref.dones.append(done)
        ref.episode_ends.append(episode_end)
        ref.frame_of.append(self.g)
        ref.episode_first.append(self.first)
        # The training loop passes next_state on by reference: state = next_state.
        self.state = None if episode_end else next_state
        self.g += 1
        return tr


# -- the memories under test ------------------------------------------------------------------------
def make_memories(stack, frame_shape, capacity, seed, padding="repeat", torch_cpu=False) -> dict:
    obs_shape = (stack, *frame_shape)
    memories = {
        "naive": NaiveDequeMemory(capacity, obs_shape, seed=seed),
        "naive_copy": NaiveDequeMemory(capacity, obs_shape, seed=seed, copy_states=True),
        "stacked": StackedRingMemory(capacity, obs_shape, seed=seed),
        "folded": FoldedRingMemory(capacity, obs_shape, seed=seed),
        "frame_sharing": FrameSharingMemory(capacity, obs_shape, seed=seed, padding=padding),
    }
    if torch_cpu:
        # The device code path (frames as a torch tensor, gathered with torch indexing), on the CPU.
        memories["frame_sharing_torch"] = FrameSharingMemory(capacity, obs_shape, seed=seed, padding=padding,
                                                             device="cpu")
    return memories


def test_every_memory_class_is_covered():
    memories = make_memories(4, (3, 3), 10, seed=0)
    covered = {type(m) for m in memories.values()}
    missing = set(MEMORY_CLASSES.values()) - covered
    assert not missing, f"add {missing} to make_memories so the differential tests cover it"
    assert memories["naive_copy"].copy_states and not memories["naive"].copy_states


def as_numpy(x) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else x.cpu().numpy()


def is_frame_sharing(name: str) -> bool:
    return name.startswith("frame_sharing")


def allowed_ids(name: str, ref: Reference, capacity: int) -> set[int]:
    """What the memory may hand back: what it can hold, and nothing not yet added."""
    if is_frame_sharing(name):
        return ref.frame_sharing_sampleable(capacity)
    return set(range(max(0, len(ref) - capacity), len(ref)))


def assert_batch_matches(name: str, batch, lookup, allowed: set[int], added: int, batch_size: int,
                         stack: int, frame_shape) -> None:
    """``lookup(ids)`` gives the reference (states, actions, rewards, next_states, dones) for ``ids``."""
    B = batch_size
    got_states, got_next = as_numpy(batch.states), as_numpy(batch.next_states)
    assert got_states.shape == (B, stack, *frame_shape) and got_states.dtype == np.uint8, name
    assert got_next.shape == (B, stack, *frame_shape) and got_next.dtype == np.uint8, name
    assert batch.actions.shape == (B,) and batch.actions.dtype == np.int64, name
    assert batch.rewards.shape == (B,) and batch.rewards.dtype == np.float32, name
    assert batch.dones.shape == (B,) and batch.dones.dtype == np.float32, name
    assert batch.ids.shape == (B,) and batch.ids.dtype == np.int64, name
    ids = batch.ids
    assert ((ids >= 0) & (ids < added)).all(), f"{name}: ids {ids} refer to transitions not added (added={added})"
    stray = set(ids.tolist()) - allowed
    assert not stray, f"{name}: sampled ids {sorted(stray)} the memory cannot hold any more (allowed {sorted(allowed)})"
    states, actions, rewards, next_states, dones = lookup(ids)
    for what, got, want in (("state", got_states, states), ("action", batch.actions, actions),
                            ("reward", batch.rewards, rewards), ("next_state", got_next, next_states),
                            ("done", batch.dones, dones)):
        if not np.array_equal(got, want):
            bad = next(i for i in range(B) if not np.array_equal(got[i], want[i]))
            raise AssertionError(f"{name}: {what} of transition id {ids[bad]} differs from what was added:\n"
                                 f"got\n{got[bad]}\nwant\n{want[bad]}")


def assert_no_stack_crosses_episode_start(states: np.ndarray, ref: Reference) -> None:
    """Decode frame counters: a stack is padding (repeat of the first frame, or zeros) followed by
    consecutive frames of one episode, and padding only ever stands before the episode's first frame."""
    counters = frame_counter(states)  # (B, stack)
    for row in counters:
        real = row[row >= 0]
        assert real.size, f"stack {row} holds no real frame"
        episode = ref.frame_episode[int(real[-1])]
        assert all(ref.frame_episode[int(c)] == episode for c in real), f"stack {row} mixes episodes"
        first_pos = len(row) - 1
        for pos, c in enumerate(row[:-1]):
            if c >= 0 and row[pos + 1] != c:
                first_pos = pos
                break
        tail = row[first_pos:]
        assert (np.diff(tail) == 1).all(), f"stack {row} skips or repeats frames"
        if first_pos > 0:  # padded: the real frames must start at the episode's first frame
            first_frame = ref.episode_first_frame[episode]
            assert tail[0] == first_frame, f"stack {row} is padded but does not start at its episode start"
            pad = row[:first_pos]
            assert ((pad == -1).all() if ref.padding == "zero" else (pad == first_frame).all()), \
                f"stack {row}: padding should be {ref.padding!r}"


# -- scenarios --------------------------------------------------------------------------------------
@dataclass
class Scenario:
    stack: int
    frame_shape: tuple[int, ...]
    capacity: int
    steps: list  # (action, reward, done, episode_end, real frames if this step opens an episode)
    seed: int


@st.composite
def step_lists(draw, n, stack):
    # Per-list event rates, so some runs have one long episode and others many one-step ones.
    end_pct = draw(st.sampled_from([0, 2, 10, 30, 80]))
    life_pct = draw(st.sampled_from([0, 5, 30]))
    # Mostly padded first states (FrameStackObservation); sometimes full ones (AtariVectorEnv).
    prefill = draw(st.sampled_from(["padded", "padded", "mixed", "full"]))
    rolls = draw(st.lists(st.integers(0, 99), min_size=n, max_size=n))
    kinds = draw(st.lists(st.sampled_from(["trunc", "term"]), min_size=n, max_size=n))
    actions = draw(st.lists(st.integers(0, 17), min_size=n, max_size=n))
    rewards = draw(st.lists(st.floats(-10, 10, width=32, allow_nan=False), min_size=n, max_size=n))
    reals = draw(st.lists(st.integers(1, stack), min_size=n, max_size=n))
    steps = []
    for roll, kind, a, r, k in zip(rolls, kinds, actions, rewards, reals):
        if roll < end_pct:
            done, end = kind == "term", True  # truncation: episode_end without done
        elif roll < end_pct + life_pct:
            done, end = True, False  # lost life: done without episode_end
        else:
            done, end = False, False
        real = {"padded": 1, "mixed": k, "full": stack}[prefill]
        steps.append((a, r, done, end, real))
    return steps


@st.composite
def scenarios(draw, stacks=(2, 3, 4)):
    stack = draw(st.sampled_from(stacks))
    frame_shape = draw(st.sampled_from([(3, 3), (2, 4)]))
    capacity = draw(st.integers(stack + 1, 40))
    n = draw(st.integers(1, 200))
    return Scenario(stack, frame_shape, capacity, draw(step_lists(n, stack)), draw(st.integers(0, 2**16)))


def run_scenario(sc: Scenario, padding: str = "repeat", check_every: int = 1, final_draws: int = 3000,
                 torch_cpu: bool = False) -> None:
    ref = Reference(sc.stack, sc.frame_shape, padding)
    env = StackingEnv(ref)
    memories = make_memories(sc.stack, sc.frame_shape, sc.capacity, sc.seed, padding, torch_cpu)

    cache: dict[int, tuple] = {}

    def lookup(ids):
        if len(ref) not in cache:  # stack the reference once per add, not once per batch
            cache.clear()
            cache[len(ref)] = ref.arrays()
        return tuple(a[ids] for a in cache[len(ref)])

    for n, (a, r, done, end, real) in enumerate(sc.steps, start=1):
        tr = env.step(a, r, done, end, real_at_start=real)
        for memory in memories.values():
            memory.add(*tr)
        assert len(ref) == n
        sampleable = ref.frame_sharing_sampleable(sc.capacity)
        # The newest transition can always be sampled right after its add.
        assert n - 1 in sampleable
        for name, memory in memories.items():
            expected_len = len(sampleable) if is_frame_sharing(name) else min(n, sc.capacity)
            assert len(memory) == expected_len, f"{name}: len {len(memory)} != {expected_len} after {n} adds"
            if is_frame_sharing(name):  # white box: the valid flags mark exactly the sampleable ids
                filled = min(memory.written, memory.capacity)
                valid_ids = set(memory.ids[:filled][memory.valid[:filled]].tolist())
                assert valid_ids == sampleable, (f"{name}: valid ids {sorted(valid_ids)} != sampleable "
                                                 f"{sorted(sampleable)} after {n} adds")
        if n % check_every == 0 or n == len(sc.steps):
            for name, memory in memories.items():
                bs = min(len(memory), 8)
                assert_batch_matches(name, memory.sample(bs), lookup, allowed_ids(name, ref, sc.capacity), n, bs,
                                     sc.stack, sc.frame_shape)

    # Many draws at the end: only allowed ids, and every allowed id eventually.
    for name, memory in memories.items():
        allowed = allowed_ids(name, ref, sc.capacity)
        seen: dict[int, tuple] = {}  # id -> (state, next_state) as sampled, first time seen
        bs = min(len(memory), 32)
        for _ in range(max(1, final_draws // bs)):
            batch = memory.sample(bs)
            assert_batch_matches(name, batch, lookup, allowed, len(ref), bs, sc.stack, sc.frame_shape)
            states, next_states = as_numpy(batch.states), as_numpy(batch.next_states)
            for i, t in enumerate(batch.ids.tolist()):
                seen.setdefault(t, (states[i], next_states[i]))
        assert set(seen) == allowed, f"{name}: never sampled {sorted(allowed - set(seen))}"
        assert_no_stack_crosses_episode_start(np.stack([s for s, _ in seen.values()]), ref)
        assert_no_stack_crosses_episode_start(np.stack([s2 for _, s2 in seen.values()]), ref)


# -- the tests --------------------------------------------------------------------------------------
@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True)
@given(scenarios())
def test_memories_match_reference_repeat_padding(sc):
    run_scenario(sc, padding="repeat", check_every=3, final_draws=1500)


@settings(max_examples=MAX_EXAMPLES // 2, deadline=None, derandomize=True)
@given(scenarios())
def test_memories_match_reference_zero_padding(sc):
    run_scenario(sc, padding="zero", check_every=3, final_draws=1500)


@settings(max_examples=MAX_EXAMPLES // 4, deadline=None, derandomize=True)
@given(scenarios(), st.sampled_from(["repeat", "zero"]))
def test_frame_sharing_torch_storage_matches_reference(sc, padding):
    """``device=...`` stores frames as a torch tensor and gathers with torch: same transitions."""
    run_scenario(sc, padding=padding, torch_cpu=True, check_every=5, final_draws=1000)


def _fixed(stack, capacity, pattern, n, frame_shape=(3, 3), real=1):
    steps = [(i % 4, float(i % 3) - 1.0, *pattern(i), real) for i in range(n)]
    return Scenario(stack, frame_shape, capacity, steps, seed=123)


FIXED = {
    # every episode is a single step: two frames each, the ring holds capacity // 2 transitions
    "one_step_episodes": _fixed(4, 5, lambda i: (True, True), 60),
    "one_step_truncations": _fixed(3, 7, lambda i: (False, True), 60),
    # full first states (AtariVectorEnv): stack+1 frames per one-step episode, the ring's minimum
    "one_step_full_starts": _fixed(4, 5, lambda i: (True, True), 40, real=4),
    # one episode far longer than the ring
    "one_long_episode": _fixed(4, 5, lambda i: (False, False), 120),
    "life_losses_only": _fixed(4, 9, lambda i: (i % 5 == 4, False), 120),
    "episode_length_equals_stack": _fixed(4, 13, lambda i: (i % 4 == 3, i % 4 == 3), 120, (2, 4)),
    "stack_two_mixed": _fixed(2, 3, lambda i: (i % 7 == 6, i % 3 == 2), 150),
}


@pytest.mark.parametrize("padding", ["repeat", "zero"])
@pytest.mark.parametrize("name", sorted(FIXED))
def test_fixed_scenarios(name, padding):
    run_scenario(FIXED[name], padding=padding)


def test_frame_sharing_len_counts_one_extra_frame_per_episode():
    """The docstring's arithmetic: an episode of T transitions uses T+1 slots."""
    ref = Reference(4, (3, 3), "repeat")
    env = StackingEnv(ref)
    memory = FrameSharingMemory(100, (4, 3, 3), seed=0)
    for episode_len in (10, 20, 30):
        for t in range(episode_len):
            memory.add(*env.step(0, 0.0, t == episode_len - 1, t == episode_len - 1))
    assert memory.written == 60 + 3 and len(memory) == 60
    # A 4th episode of 36 transitions writes 37 frames: the ring (100 frames) is exactly full.
    for _ in range(36):
        memory.add(*env.step(0, 0.0, False, False))
    assert memory.written == 100 and len(memory) == 96
    # One more frame overwrites the first episode's first frame: transition 0 goes, and so do
    # transitions 1-3, whose stacks are padded with that frame. The new transition comes in.
    memory.add(*env.step(0, 0.0, False, False))
    valid = set(memory.ids[memory.valid].tolist())
    assert memory.written == 101 and len(memory) == 96 + 1 - 4
    assert not {0, 1, 2, 3} & valid and {4, 96} <= valid
    assert valid == ref.frame_sharing_sampleable(100)


def test_reference_helpers_roundtrip():
    """The test's own decoding must be right, or the crossing check proves nothing."""
    frames = np.stack([make_frame(c, (2, 4)) for c in (0, 1, 255, 256, 399)] + [np.zeros((2, 4), np.uint8)])
    assert frame_counter(frames).tolist() == [0, 1, 255, 256, 399, -1]
    assert len({make_frame(c, (3, 3)).tobytes() for c in range(1000)}) == 1000
    ref = Reference(3, (3, 3), "repeat")
    env = StackingEnv(ref)
    s, *_ = env.step(0, 0.0, False, False)
    assert frame_counter(s).tolist() == [0, 0, 0]
    env.step(0, 0.0, True, True)
    s, *_ = env.step(0, 0.0, False, False, real_at_start=2)
    assert frame_counter(s).tolist() == [3, 3, 4] and ref.episode_first == [0, 0, 3]
    with pytest.raises(AssertionError, match="mixes episodes"):
        assert_no_stack_crosses_episode_start(np.stack([make_frame(c, (3, 3)) for c in (2, 3, 4)])[None], ref)
    with pytest.raises(AssertionError):
        assert_no_stack_crosses_episode_start(np.stack([make_frame(c, (3, 3)) for c in (0, 0, 2)])[None], ref)


# -- MultiStreamMemory: one frame-sharing ring per env of a vector env ------------------------------


@st.composite
def multi_stream_scenarios(draw):
    stack = draw(st.sampled_from((2, 3, 4)))
    streams = draw(st.integers(1, 3))
    capacity = draw(st.integers(streams * (stack + 1), 60))
    n = draw(st.integers(1, 150))
    which = draw(st.lists(st.integers(0, streams - 1), min_size=n, max_size=n))
    steps = draw(step_lists(n, stack))
    return stack, streams, capacity, which, steps, draw(st.integers(0, 2**16))


@settings(max_examples=MAX_EXAMPLES // 2, deadline=None, derandomize=True)
@given(multi_stream_scenarios(), st.sampled_from(["repeat", "zero"]))
def test_multi_stream_memory_matches_per_stream_references(scenario, padding):
    """Each env's transitions go to its own ring of capacity // N frames; a batch's ids are
    ``stream + N * id_within_stream`` and every sampled transition equals the one added."""
    stack, N, capacity, which, steps, seed = scenario
    frame_shape = (3, 3)
    per_stream = capacity // N
    refs = [Reference(stack, frame_shape, padding) for _ in range(N)]
    envs = [StackingEnv(r) for r in refs]
    memory = MultiStreamMemory(capacity, N, (stack, *frame_shape), seed=seed, padding=padding)

    # Unique frames across streams too: each stream's frame counters start at its own offset.
    offsets = [10_000 * i for i in range(N)]
    for env, off in zip(envs, offsets):
        env.ref.frames_written = off

    def allowed() -> set[int]:
        return {stream + N * t for stream, r in enumerate(refs) for t in r.frame_sharing_sampleable(per_stream)}

    def lookup(ids):
        rows = [tuple(a[t // N] for a in refs[t % N].arrays()) for t in ids]
        return tuple(np.stack([row[k] for row in rows]) for k in range(5))

    for n, ((a, r, done, end, real), stream) in enumerate(zip(steps, which), start=1):
        memory.add(*envs[stream].step(a, r, done, end, real_at_start=real), stream=stream)
        ok = allowed()
        assert len(memory) == len(ok), f"len {len(memory)} != {len(ok)} sampleable after {n} adds"
        assert memory.added == n
        if n % 10 == 0 or n == len(steps):
            bs = min(len(memory), 8)
            assert_batch_matches("multi_stream", memory.sample(bs), lookup, ok, N * n, bs, stack, frame_shape)
    ok, seen = allowed(), set()
    for _ in range(60):
        batch = memory.sample(min(len(memory), 32))
        seen |= set(batch.ids.tolist())
        assert seen <= ok
    assert seen == ok, f"never sampled {sorted(ok - seen)}"
    if padding == "repeat":
        assert_draw_windows_match(memory, ok)


def assert_draw_windows_match(memory: MultiStreamMemory, ok: set[int]) -> None:
    """``draw_windows`` (the fast path's planning) draws only what ``sample`` may, all of it, with the windows and
    scalars ``window_at`` gives for the same transitions; the streams' arrays are rows of the joint ring."""
    C, N = memory.stream_capacity, len(memory.streams)
    for name in FrameSharingMemory.RING_ARRAYS:
        assert all(np.shares_memory(getattr(s, name), memory.ring[name][i]) for i, s in enumerate(memory.streams))
    seen = set()
    for _ in range(60):
        index, actions, rewards, dones = memory.draw_windows(32)
        streams, slots = index[:, -1] // C, (index[:, -1] % C - 1) % C  # s' is the frame after the slot's
        assert memory.ring["valid"][streams, slots].all()
        order = np.argsort(streams, kind="stable")
        for got, expected in zip((index, actions, rewards, dones), memory.window_at(streams[order], slots[order])):
            np.testing.assert_array_equal(got[order], expected)
        seen |= set((streams + N * memory.ring["ids"][streams, slots]).tolist())
    assert seen == ok, f"draw_windows never drew {sorted(ok - seen)}"


def _uniform_fill(memory_factory, stream_of=lambda i: 0, n_streams=1, n=120):
    """Fill with episodes of 7 steps (a life loss in each) and return the memory."""
    refs = [Reference(4, (3, 3), "repeat") for _ in range(n_streams)]
    envs = [StackingEnv(r) for r in refs]
    for k, r in enumerate(refs):
        r.frames_written = 10_000 * k
    memory = memory_factory()
    for i in range(n):
        s = stream_of(i)
        tr = envs[s].step(i % 4, 1.0, i % 7 in (3, 6), i % 7 == 6)
        if n_streams > 1:
            memory.add(*tr, stream=s)
        else:
            memory.add(*tr)
    return memory


UNIFORM = {
    "naive": lambda: NaiveDequeMemory(40, (4, 3, 3), seed=1),
    "stacked": lambda: StackedRingMemory(40, (4, 3, 3), seed=1),
    "folded": lambda: FoldedRingMemory(40, (4, 3, 3), seed=1),
    "frame_sharing": lambda: FrameSharingMemory(40, (4, 3, 3), seed=1),
}


@pytest.mark.parametrize("name", sorted(UNIFORM))
def test_sampling_is_uniform_over_what_is_held(name):
    memory = _uniform_fill(UNIFORM[name])
    n = len(memory)
    ids = np.concatenate([memory.sample(min(n, 32)).ids for _ in range(40_000 // min(n, 32))])
    counts = np.unique(ids, return_counts=True)[1]
    assert len(counts) == n
    expected = ids.size / n  # ~1,000 draws each: +-25% is over 7 standard deviations
    assert counts.min() > 0.75 * expected and counts.max() < 1.25 * expected, (counts.min(), counts.max(), expected)


def test_multi_stream_draws_streams_in_proportion_to_what_they_hold():
    # Stream 0 gets 6 of every 7 transitions: uniform over transitions means ~6/7 of draws from it.
    memory = _uniform_fill(lambda: MultiStreamMemory(440, 2, (4, 3, 3), seed=3),
                           stream_of=lambda i: int(i % 7 == 0), n_streams=2, n=200)
    sizes = [len(s) for s in memory.streams]
    assert sizes[0] > 3 * sizes[1] > 0
    ids = np.concatenate([memory.sample(32).ids for _ in range(600)])
    share0 = np.mean(ids % 2 == 0)
    assert share0 == pytest.approx(sizes[0] / sum(sizes), abs=0.02)
    counts = np.unique(ids, return_counts=True)[1]
    assert len(counts) == len(memory)
    expected = ids.size / len(memory)
    assert counts.min() > 0.6 * expected and counts.max() < 1.4 * expected
    # draw_windows: the same distribution, 64 at a time (two updates' batches)
    C = memory.stream_capacity
    index = np.concatenate([memory.draw_windows(64)[0] for _ in range(300)])
    streams, slots = index[:, -1] // C, (index[:, -1] % C - 1) % C
    assert np.mean(streams == 0) == pytest.approx(sizes[0] / sum(sizes), abs=0.02)
    counts = np.unique(streams * C + slots, return_counts=True)[1]
    assert len(counts) == len(memory)
    assert counts.min() > 0.6 * expected and counts.max() < 1.4 * expected


@pytest.mark.parametrize("n", [0, -1, 2.5, True, "32"])
def test_draw_windows_refuses_what_is_not_a_count_and_an_empty_memory(n):
    memory = _uniform_fill(lambda: MultiStreamMemory(440, 2, (4, 3, 3), seed=3), n_streams=2,
                           stream_of=lambda i: i % 2, n=20)
    with pytest.raises(ValueError, match="whole number >= 1"):
        memory.draw_windows(n)
    with pytest.raises(ValueError, match="empty"):
        MultiStreamMemory(440, 2, (4, 3, 3)).draw_windows(8)
    with pytest.raises(ValueError, match="padding='repeat'"):
        MultiStreamMemory(440, 2, (4, 3, 3), padding="zero").draw_windows(8)


def _stream_state(memory: MultiStreamMemory) -> dict:
    """Everything a stream's later adds and samples depend on, with the bank's frames."""
    bank = memory.bank
    frames = bank.array if hasattr(bank, "array") else bank.tensor.numpy()
    return {"ring": {name: arr.copy() for name, arr in memory.ring.items()}, "frames": frames.copy(),
            "added": memory.added,
            "streams": [(s.head, s.written, s.num_valid, s.added, s._in_episode, s._next_state,
                         s._last_frame.tobytes()) for s in memory.streams]}


@settings(max_examples=MAX_EXAMPLES // 2, deadline=None, derandomize=True)
@given(multi_stream_scenarios(), st.sampled_from([None, "cpu"]), st.integers(0, 2**16))
def test_add_batch_stores_what_adding_each_stream_alone_stores(scenario, device, mask_seed):
    """``add_batch`` takes the transitions that continue an episode for all streams at once (``_store_steady``)
    and the rest one stream at a time; either way the rings, the bank and every stream's counters end up as
    ``add(stream=i)`` of each transition leaves them, step after step (episode starts, ends, skipped envs)."""
    stack, N, capacity, _, steps, seed = scenario
    frame_shape = (3, 3)
    batched = MultiStreamMemory(capacity, N, (stack, *frame_shape), seed=seed, device=device)
    alone = MultiStreamMemory(capacity, N, (stack, *frame_shape), seed=seed, device=device)
    envs = [StackingEnv(Reference(stack, frame_shape, "repeat")) for _ in range(N)]
    for i, env in enumerate(envs):
        env.ref.frames_written = 10_000 * i
    rng = np.random.default_rng(mask_seed)
    for t in range(0, len(steps), N):
        mask = rng.random(N) < 0.8
        rows = []
        for i in range(N):
            a, r, done, end, real = steps[(t + i) % len(steps)]
            rows.append(envs[i].step(a, r, done, end, real_at_start=real) if mask[i] else None)
        filler = next(row for row in rows if row is not None) if mask.any() else None
        if filler is None:
            continue
        batch = [row or filler for row in rows]
        batched.add_batch(*(np.array([row[k] for row in batch]) for k in range(6)), mask=mask)
        for i, row in enumerate(rows):
            if row is not None:
                alone.add(*row, stream=i)
        got, want = _stream_state(batched), _stream_state(alone)
        for name in want["ring"]:
            np.testing.assert_array_equal(got["ring"][name], want["ring"][name], err_msg=name)
        np.testing.assert_array_equal(got["frames"], want["frames"])
        assert got["streams"] == want["streams"] and got["added"] == want["added"]
