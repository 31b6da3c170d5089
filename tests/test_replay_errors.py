"""Bad input gives a clear error and loses nothing; capacities that cannot fit are refused up front."""
from __future__ import annotations

import re
import tracemalloc

import numpy as np
import pytest

from dqn_course import profiling
from dqn_course.profiling import GB, InsufficientMemoryError, check_fits, fits_in_ram, format_bytes, rss_bytes
from dqn_course.replay import (
    MEMORY_CLASSES,
    FoldedRingMemory,
    FrameSharingMemory,
    NaiveDequeMemory,
    StackedRingMemory,
)

STACK, FRAME = 4, (6, 6)
OBS = (STACK, *FRAME)


def frame(c: int) -> np.ndarray:
    """A unique, never-zero 6x6 frame for counter ``c``."""
    f = np.full(FRAME, 1 + c % 250, np.uint8)
    f[0, 0], f[0, 1] = c % 256, c // 256
    return f


class Episodes:
    """Valid transitions: padded first states, next_state passed on by reference.

    ``peek()`` builds the next valid transition without moving on, so a test can spoil it, watch
    the add fail, and then add the real one."""

    def __init__(self):
        self.c = 0
        self.state = None
        self._pending = None

    def new_frame(self):
        self.c += 1
        return frame(self.c)

    def peek(self, done=False, episode_end=False, action=1, reward=1.0):
        if self._pending is None:
            state = self.state if self.state is not None else np.stack([self.new_frame()] * STACK)
            self._pending = (state, np.concatenate([state[1:], self.new_frame()[None]]))
        state, next_state = self._pending
        return (state, action, reward, next_state, done, episode_end)

    def step(self, done=False, episode_end=False, action=1, reward=1.0):
        tr = self.peek(done, episode_end, action, reward)
        self._pending = None
        self.state = None if episode_end else tr[3]
        return tr


FACTORIES = {
    "naive": lambda cap=50: NaiveDequeMemory(cap, OBS, seed=0),
    "naive_copy": lambda cap=50: NaiveDequeMemory(cap, OBS, seed=0, copy_states=True),
    "stacked": lambda cap=50: StackedRingMemory(cap, OBS, seed=0),
    "folded": lambda cap=50: FoldedRingMemory(cap, OBS, seed=0),
    "frame_sharing": lambda cap=50: FrameSharingMemory(cap, OBS, seed=0),
    "frame_sharing_zero": lambda cap=50: FrameSharingMemory(cap, OBS, seed=0, padding="zero"),
}


def test_factories_cover_every_memory_class():
    assert set(MEMORY_CLASSES.values()) <= {type(f()) for f in FACTORIES.values()}


@pytest.fixture(params=[(name, n) for name in sorted(FACTORIES) for n in (9, 12)],
                ids=lambda p: f"{p[0]}-{'between_episodes' if p[1] == 9 else 'mid_episode'}")
def filled(request):
    """A memory with valid transitions (a life loss and an episode end among them) and their source;
    the next add either opens a new episode (after 9) or continues one (after 12)."""
    name, n = request.param
    memory = FACTORIES[name]()
    env = Episodes()
    for i in range(n):
        memory.add(*env.step(done=i in (4, 8), episode_end=i == 8))
    return memory, env


def snapshot(memory) -> dict:
    """Everything an add could change: counters, flags, arrays, rows, the sampling generator."""
    snap = {"len": len(memory), "rng": repr(memory.rng.bit_generator.state)}
    for key, value in vars(memory).items():
        if isinstance(value, np.ndarray):
            snap[key] = value.copy()
        elif isinstance(value, (bool, int, float, np.integer)):
            snap[key] = value
        elif hasattr(value, "cpu") and hasattr(value, "clone"):  # torch storage
            snap[key] = value.clone()
    if isinstance(memory, NaiveDequeMemory):
        snap["rows"] = [(id(r[0]), r[1], r[2], id(r[3]), r[4], r[5]) for r in memory.memory]
    return snap


def assert_unchanged(before: dict, after: dict) -> None:
    assert before.keys() == after.keys()
    for key in before:
        a, b = before[key], after[key]
        same = np.array_equal(np.asarray(a), np.asarray(b)) if hasattr(a, "shape") else a == b
        assert same, f"a failed add changed {key!r}"


# -- each kind of bad input --------------------------------------------------------------------------
def _replace(tr, **kw):
    names = ("state", "action", "reward", "next_state", "done", "episode_end")
    d = dict(zip(names, tr))
    d.update(kw)
    return tuple(d[n] for n in names)


BAD_ADDS = {
    # name: (how to spoil a valid transition, exception type, message pattern)
    "state_wrong_shape": (lambda tr: _replace(tr, state=tr[0][:3]), ValueError, r"state has shape \(3, 6, 6\)"),
    "next_state_wrong_shape": (lambda tr: _replace(tr, next_state=tr[3][:, :, :5]), ValueError,
                               r"next_state has shape \(4, 6, 5\).*stores \(4, 6, 6\)"),
    "state_float32": (lambda tr: _replace(tr, state=tr[0].astype(np.float32)), TypeError,
                      r"state has dtype float32, this memory stores uint8"),
    "next_state_float64": (lambda tr: _replace(tr, next_state=tr[3] / 255.0), TypeError,
                           r"next_state has dtype float64"),
    "state_list": (lambda tr: _replace(tr, state=tr[0].tolist()), TypeError, r"state must be a numpy array.*list"),
    "state_none": (lambda tr: _replace(tr, state=None), TypeError, r"state must be a numpy array"),
    "action_float": (lambda tr: _replace(tr, action=1.5), TypeError, r"action must be an integer, got 1\.5"),
    "action_str": (lambda tr: _replace(tr, action="1"), TypeError, r"action must be an integer"),
    "action_bool": (lambda tr: _replace(tr, action=True), TypeError, r"action must be an integer"),
    "action_float_array": (lambda tr: _replace(tr, action=np.array(1.0)), TypeError, r"action must be an integer"),
    "action_negative": (lambda tr: _replace(tr, action=-1), ValueError, r"action must be in \[0, 256\), got -1"),
    "action_too_big": (lambda tr: _replace(tr, action=256), ValueError, r"action must be in \[0, 256\), got 256"),
    "reward_nan": (lambda tr: _replace(tr, reward=float("nan")), ValueError, r"reward must be finite, got nan"),
    "reward_inf": (lambda tr: _replace(tr, reward=np.inf), ValueError, r"reward must be finite, got inf"),
    "reward_neg_inf": (lambda tr: _replace(tr, reward=-np.float32(np.inf)), ValueError, r"reward must be finite"),
}


@pytest.mark.parametrize("bad", sorted(BAD_ADDS))
def test_bad_add_is_refused_and_changes_nothing(filled, bad):
    memory, env = filled
    spoil, exc, pattern = BAD_ADDS[bad]
    before = snapshot(memory)
    with pytest.raises(exc, match=pattern):
        memory.add(*spoil(env.peek()))
    assert_unchanged(before, snapshot(memory))
    # Nothing was lost: sampling works, and the real transition goes in next, as the newest one.
    n = len(memory)
    assert memory.sample(n).ids.max() < memory.added
    memory.add(*env.step())
    assert len(memory) == n + 1 and memory.added == before["added"] + 1
    ids = set(memory.sample(len(memory)).ids.tolist())
    assert max(ids) <= memory.added - 1
    seen = set()
    for _ in range(50):
        seen |= set(memory.sample(len(memory)).ids.tolist())
    assert memory.added - 1 in seen and len(seen) == len(memory)


@pytest.mark.parametrize("action", [0, 5, 255, np.int64(3), np.uint8(7), np.array(2)])
def test_integer_like_actions_are_accepted(filled, action):
    memory, env = filled
    n = memory.added
    memory.add(*_replace(env.step(), action=action))
    assert memory.added == n + 1


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("capacity", [0, -5, 1.5, 10.0, "10", None, True])
def test_bad_capacity(name, capacity):
    with pytest.raises(ValueError, match=r"capacity"):
        FACTORIES[name](capacity)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_sampling_too_early_says_how_many_are_stored(name):
    memory = FACTORIES[name]()
    with pytest.raises(ValueError, match=r"cannot sample 32 transitions: only 0 "):
        memory.sample(32)
    env = Episodes()
    for _ in range(3):
        memory.add(*env.step())
    with pytest.raises(ValueError, match=r"cannot sample 32 transitions: only 3 can be sampled"):
        memory.sample(32)
    with pytest.raises(ValueError, match=r"batch_size must be a whole number >= 1"):
        memory.sample(0)
    assert memory.sample(3).ids.shape == (3,)


@pytest.mark.parametrize("capacity", [1, 3, STACK])
def test_frame_sharing_needs_stack_plus_one_frames(capacity):
    with pytest.raises(ValueError, match=rf"at least stack\+1 = {STACK + 1} frames, got {capacity}"):
        FrameSharingMemory(capacity, OBS)
    assert len(FrameSharingMemory(STACK + 1, OBS)) == 0  # the minimum is fine


def test_frame_sharing_rejects_unknown_padding():
    with pytest.raises(ValueError, match=r"padding must be 'repeat' or 'zero', got 'reflect'"):
        FrameSharingMemory(10, OBS, padding="reflect")


@pytest.mark.parametrize("padding", ["repeat", "zero"])
def test_frame_sharing_state_must_continue_previous_next_state(padding):
    """Forgetting episode_end=True at a reset (or feeding the wrong state) is caught, not stored."""
    memory = FrameSharingMemory(30, OBS, seed=0, padding=padding)
    env = Episodes()
    for _ in range(5):
        memory.add(*env.step())
    # An unrelated state (e.g. after an env.reset() that the memory was not told about).
    other = np.stack([frame(999)] * STACK)
    before = snapshot(memory)
    with pytest.raises(ValueError, match=r"does not continue the previous transition's next_state.*episode_end=True"):
        memory.add(other, 0, 0.0, np.concatenate([other[1:], frame(998)[None]]), False, False)
    assert_unchanged(before, snapshot(memory))
    # A state whose newest frame is right but is not the previous next_state's newest: also refused.
    stale = env.step()
    memory.add(*stale)
    with pytest.raises(ValueError, match=r"does not continue"):
        memory.add(*stale)  # the same transition twice: its state is one frame behind now
    memory.add(*env.step())
    assert len(memory) == 7


@pytest.mark.parametrize("memory_padding", ["repeat", "zero"])
@pytest.mark.parametrize("state_kind", ["repeat", "zero", "full", "partly_repeat"])
def test_frame_sharing_first_state_of_any_padding_is_rebuilt_exactly(memory_padding, state_kind):
    """An episode's first state is stored from its first non-padding frame on, so whatever it
    looks like (padded either way, or already full of real frames as ale-py's vector env gives)
    the sampled state equals it bit for bit, and so does the next state."""
    f = [frame(100 + i) for i in range(STACK + 1)]
    zero = np.zeros(FRAME, np.uint8)
    first = {"repeat": [f[0]] * STACK, "zero": [zero] * (STACK - 1) + [f[0]], "full": f[:STACK],
             "partly_repeat": [f[0], f[0], f[1], f[2]]}[state_kind]
    state = np.stack(first)
    next_state = np.concatenate([state[1:], f[STACK][None]])
    memory = FrameSharingMemory(20, OBS, seed=0, padding=memory_padding)
    memory.add(state, 3, 1.0, next_state, False, False)
    batch = memory.sample(1)
    assert batch.ids.tolist() == [0]
    assert np.array_equal(batch.states[0], state) and np.array_equal(batch.next_states[0], next_state)


# -- the memory guard --------------------------------------------------------------------------------
_SIZE = re.compile(r"needs ([\d,.]+) (B|kB|MB|GB|TB) but this machine has "
                   r"([\d,.]+ (?:B|kB|MB|GB|TB)) available")
_UNIT = {"B": 1, "kB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def _parse_needed(message: str) -> tuple[float, str]:
    m = _SIZE.search(message)
    assert m, f"message does not say what is needed and what is available: {message!r}"
    return float(m.group(1).replace(",", "")) * _UNIT[m.group(2)], m.group(3)


GUARDED = {
    # name: (constructor, bytes per slot at least: the stored frames alone)
    "frame_sharing": (lambda cap: FrameSharingMemory(cap, (4, 84, 84)), 84 * 84),
    "stacked": (lambda cap: StackedRingMemory(cap, (4, 84, 84)), 2 * 4 * 84 * 84),
    "folded": (lambda cap: FoldedRingMemory(cap, (4, 84, 84)), 5 * 84 * 84),
}
try:
    from dqn_course.replay import MultiStreamMemory

    GUARDED["multi_stream"] = (lambda cap: MultiStreamMemory(cap, 2, (4, 84, 84)), 84 * 84)
except ImportError:  # pragma: no cover - older package
    pass


@pytest.mark.parametrize("name", sorted(GUARDED))
def test_guard_refuses_before_allocating(name, monkeypatch):
    make, frame_bytes = GUARDED[name]
    monkeypatch.setattr(profiling, "available_bytes", lambda: 8 * GB)
    capacity = 10**9
    rss0 = rss_bytes()
    tracemalloc.start()
    try:
        with pytest.raises(InsufficientMemoryError) as info:
            make(capacity)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(info.value, MemoryError)
    message = str(info.value)
    needed, available = _parse_needed(message)
    # format_bytes keeps one decimal: the stated need is the frames plus a few bytes of bookkeeping.
    assert frame_bytes * capacity * 0.99 <= needed <= (frame_bytes + 64) * capacity * 1.01, message
    assert available == "8.0 GB", message
    assert "capacity=1,000,000,000" in message
    assert peak < 5 * 2**20, f"the guard allocated {peak:,} bytes before refusing"
    assert rss_bytes() - rss0 < 50 * 2**20


def test_guard_uses_the_real_available_memory():
    rss0 = rss_bytes()
    with pytest.raises(InsufficientMemoryError, match=r"needs [\d,.]+ TB but this machine has [\d,.]+ \w+ available"):
        FrameSharingMemory(10**9, (4, 84, 84))
    with pytest.raises(MemoryError):  # catchable as the builtin
        StackedRingMemory(10**9, (4, 84, 84))
    assert rss_bytes() - rss0 < 50 * 2**20


def test_guard_lets_a_fitting_buffer_through(monkeypatch):
    monkeypatch.setattr(profiling, "available_bytes", lambda: 8 * GB)
    memory = FrameSharingMemory(1_000, (4, 84, 84))  # ~7 MB
    assert memory.nbytes >= 1_000 * 84 * 84


def test_check_fits_with_explicit_available():
    check_fits(900, available=1000)  # exactly 90%: fits
    # a figure given is worded as given, not as this machine's
    with pytest.raises(InsufficientMemoryError, match=r"needs 901 B but the available RAM given is 1\.0 kB \(") as info:
        check_fits(901, available=1000)
    assert "this machine" not in str(info.value)
    check_fits(500, available=1000, fraction=0.5)
    with pytest.raises(InsufficientMemoryError, match=r"limit: 50% of that = 500 B"):
        check_fits(501, available=1000, fraction=0.5)
    with pytest.raises(InsufficientMemoryError, match=r"my ring needs 2\.0 GB but the available RAM given is 1\.0 GB"):
        check_fits(2 * GB, "my ring", available=GB)


def test_fits_in_ram_with_explicit_available():
    r = fits_in_ram(1_000_000, 7_072, available=16 * GB)
    assert r.needed == 7_072_000_000 and r.available == 16 * GB and r.fits
    assert r.max_items == int(0.9 * 16 * GB // 7_072)
    r = fits_in_ram(1_000_000, 56_448, available=16 * GB)
    assert not r.fits and r.needed == 56_448_000_000
    assert r.max_items * 56_448 <= 0.9 * 16 * GB < (r.max_items + 1) * 56_448


def test_prefault_makes_rss_grow_by_the_buffer_size():
    """np.zeros pages are lazy; prefault=True writes them, so RSS grows by the buffer now."""
    from _subprocess_helpers import make_frame_sharing

    capacity = 14_000  # 14,000 x (7,056 + 16) bytes, about 99 MB
    lazy = profiling.measure_in_subprocess(make_frame_sharing, capacity, False, timeout=300)
    eager = profiling.measure_in_subprocess(make_frame_sharing, capacity, True, timeout=300)
    size = eager.result
    assert lazy.result == size and 98e6 < size < 101e6
    assert lazy.rss_growth < 0.2 * size, f"without prefault RSS grew {format_bytes(lazy.rss_growth)}"
    assert 0.9 * size < eager.rss_growth < 1.3 * size, (
        f"with prefault RSS grew {format_bytes(eager.rss_growth)} for a {format_bytes(size)} buffer")
