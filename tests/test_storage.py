"""Frame stores (``dqn_course.replay.stores``): every storage samples exactly what ``"ram"`` samples, and checkpoints.

The differential tests reuse ``test_replay_properties``: its hypothesis scenarios (random episode
ends, life losses, truncations, padded and full first states, rings that wrap many times), its frame
stacker and its reference. A ``"ram"`` memory is checked against the reference; every other storage
must then hand back bit-for-bit the same batches from the same seed, and the same validity flags.
"""
from __future__ import annotations

import shutil
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dqn_course.lab.stores import compare_codecs, measure_storage
from dqn_course.profiling import InsufficientMemoryError
from dqn_course.replay import FrameSharingMemory, MultiStreamMemory
from dqn_course.replay import stores as storage
from dqn_course.replay.stores import CompressedFrames, InsufficientDiskError
from test_replay_properties import Reference, StackingEnv, assert_batch_matches, scenarios

STORAGES = ("ram", "lz4", "zstd", "disk")


def make(storage_name: str, capacity: int, obs_shape, seed, directory, padding="repeat", **kw) -> FrameSharingMemory:
    path = directory if storage_name == "disk" else None
    return FrameSharingMemory(capacity, obs_shape, seed=seed, padding=padding, storage=storage_name, path=path, **kw)


def assert_same_batch(name: str, got, want) -> None:
    for field, a, b in zip(want._fields, got, want):
        if b is not None:
            assert np.array_equal(np.asarray(a), np.asarray(b)), f"{name}: {field} differs from storage='ram'"


def transitions_of(sc):
    """The scenario's transitions, recorded in a reference (frames unique, states passed on by reference)."""
    ref = Reference(sc.stack, sc.frame_shape, "repeat")
    env = StackingEnv(ref)
    return [env.step(a, r, done, end, real_at_start=real) for a, r, done, end, real in sc.steps], ref


# -- every storage samples what "ram" samples ---------------------------------------------------------------
@settings(max_examples=60, deadline=None, derandomize=True)
@given(scenarios(), st.sampled_from(["repeat", "zero"]))
def test_every_storage_samples_what_ram_samples(sc, padding):
    ref = Reference(sc.stack, sc.frame_shape, padding)
    env = StackingEnv(ref)
    obs_shape = (sc.stack, *sc.frame_shape)
    with tempfile.TemporaryDirectory() as directory:
        memories = {s: make(s, sc.capacity, obs_shape, sc.seed, directory, padding) for s in STORAGES}
        lookup = lambda ids: tuple(a[ids] for a in ref.arrays())  # noqa: E731
        for n, (a, r, done, end, real) in enumerate(sc.steps, start=1):
            tr = env.step(a, r, done, end, real_at_start=real)
            for memory in memories.values():
                memory.add(*tr)
            ram = memories["ram"]
            for name, memory in memories.items():
                assert np.array_equal(memory.valid, ram.valid) and len(memory) == len(ram), name
            if n % 4 == 0 or n == len(sc.steps):
                bs = min(len(ram), 8)
                want = ram.sample(bs)
                assert_batch_matches("ram", want, lookup, ref.frame_sharing_sampleable(sc.capacity), n, bs,
                                     sc.stack, sc.frame_shape)
                for name, memory in memories.items():
                    if name != "ram":
                        assert_same_batch(name, memory.sample(bs), want)
        memories["disk"].frames.close()  # before the directory goes


@pytest.mark.parametrize("storage_name", ["lz4", "disk"])
def test_multi_stream_passes_storage_through(storage_name, tmp_path):
    steps = [(i % 4, 1.0, i % 9 == 8, i % 9 == 8, 1) for i in range(90)]
    refs = [Reference(4, (3, 3), "repeat") for _ in range(2)]
    envs = [StackingEnv(r) for r in refs]
    refs[1].frames_written = 10_000
    ram = MultiStreamMemory(60, 2, (4, 3, 3), seed=7)
    other = MultiStreamMemory(60, 2, (4, 3, 3), seed=7, storage=storage_name,
                              path=tmp_path if storage_name == "disk" else None)
    for i, (a, r, done, end, real) in enumerate(steps):
        tr = envs[i % 2].step(a, r, done, end, real_at_start=real)
        ram.add(*tr, stream=i % 2)
        other.add(*tr, stream=i % 2)
    for _ in range(20):
        assert_same_batch(storage_name, other.sample(16), ram.sample(16))
    if storage_name == "disk":
        files = sorted(tmp_path.iterdir())
        assert len(files) == 2 and {s.frames.path for s in other.streams} == set(files)


def test_compressed_store_reads_like_an_array():
    frames = np.random.default_rng(0).integers(0, 4, size=(6, 5, 7), dtype=np.uint8)
    for codec in storage.CODECS:
        store = CompressedFrames(6, (5, 7), codec)
        assert np.array_equal(store[3], np.zeros((5, 7), np.uint8))  # unwritten slots read as zeros
        for k, f in enumerate(frames):
            store[k] = f
        index = np.array([[5, 0, 0], [2, 3, 4]])
        assert np.array_equal(store[index], frames[index]) and store[index].flags.writeable
        assert np.array_equal(store[1:4], frames[1:4]) and np.array_equal(store[-1], frames[-1])
        with pytest.raises(ValueError, match="shape"):
            store[0] = frames[0, :4]
        with pytest.raises(IndexError):
            store[np.array([6])]


def test_compressed_nbytes_counts_payloads_and_headers():
    memory = FrameSharingMemory(300, (4, 84, 84), seed=0, storage="lz4")
    ram = FrameSharingMemory(300, (4, 84, 84), seed=0)
    rng = np.random.default_rng(0)
    state = np.repeat(rng.integers(0, 2, size=(1, 84, 84), dtype=np.uint8) * 142, 4, axis=0)
    for t in range(250):
        frame = np.zeros((84, 84), np.uint8)
        frame[t % 80: t % 80 + 4, 10:14] = 200  # a moving ball on a flat background: compresses well
        next_state = np.concatenate([state[1:], frame[None]])
        memory.add(state, 1, 0.0, next_state, False)
        ram.add(state, 1, 0.0, next_state, False)
        state = next_state
    store = memory.frames
    payloads = store._payloads
    held = sum(sys.getsizeof(p) for p in payloads if p is not store._empty)
    assert store.nbytes == held + sys.getsizeof(store._empty) + sys.getsizeof(payloads)
    bookkeeping = ram.nbytes - ram.frames.nbytes
    assert memory.nbytes == bookkeeping + store.nbytes
    assert memory.nbytes < ram.nbytes / 10
    assert len(store.payload_sizes()) == memory.written and store.payload_sizes().min() > 0


# -- what is checked before anything is built ----------------------------------------------------------------
def test_disk_is_refused_before_the_file_exists(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**12, 10**12 - 10**6, 10**6))
    with pytest.raises(InsufficientDiskError, match=r"needs 7\.1 MB on disk but .* has 1\.0 MB free"):
        FrameSharingMemory(1_000, storage="disk", path=tmp_path)
    with pytest.raises(InsufficientDiskError, match="MultiStreamMemory"):
        MultiStreamMemory(1_000, 4, storage="disk", path=tmp_path)
    # The disk is checked before the RAM guard: a capacity too big for both names the disk.
    monkeypatch.setattr("dqn_course.profiling.available_bytes", lambda: 10**6)
    with pytest.raises(InsufficientDiskError):
        FrameSharingMemory(10**9, storage="disk", path=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_ram_guard_checks_only_what_is_preallocated(tmp_path, monkeypatch):
    monkeypatch.setattr("dqn_course.profiling.available_bytes", lambda: 10 * 2**20)
    with pytest.raises(InsufficientMemoryError):
        FrameSharingMemory(20_000)  # 141 MB of frames
    with pytest.raises(InsufficientMemoryError):
        MultiStreamMemory(20_000, 2)
    # The compressed store preallocates one list slot per frame, the file store nothing in RAM.
    for name in ("lz4", "disk"):
        FrameSharingMemory(20_000, storage=name, path=tmp_path if name == "disk" else None)
        MultiStreamMemory(20_000, 2, storage=name, path=tmp_path if name == "disk" else None)
    with pytest.raises(InsufficientMemoryError):
        FrameSharingMemory(500_000, storage="lz4")  # 500k x (16 B bookkeeping + 8 B slot) = 12 MB


def test_disk_file_lives_in_the_directory_and_goes_with_the_memory(tmp_path):
    memory = FrameSharingMemory(50, (4, 6, 6), storage="disk", path=tmp_path)
    (file,) = tmp_path.iterdir()
    assert file == memory.frames.path and file.stat().st_size == 50 * 36
    assert memory.nbytes == 50 * 16  # frames are in the file; nbytes counts RAM
    del memory
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError, match="existing directory"):
        FrameSharingMemory(50, (4, 6, 6), storage="disk", path=tmp_path / "missing")


@pytest.mark.parametrize("kwargs, match", [
    ({"storage": "gzip"}, "storage must be one of"),
    ({"storage": "disk"}, "needs path="),
    ({"storage": "lz4", "path": "/tmp"}, "only it takes a path"),
    ({"storage": "lz4", "device": "cpu"}, "storage='ram' only"),
])
def test_bad_storage_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FrameSharingMemory(50, (4, 6, 6), **kwargs)
    with pytest.raises(ValueError, match=match):
        MultiStreamMemory(50, 2, (4, 6, 6), **kwargs)


@pytest.mark.parametrize("codec, package", [("lz4", "lz4"), ("zstd", "zstandard")])
def test_missing_codec_says_how_to_install_it(codec, package, monkeypatch):
    monkeypatch.setitem(sys.modules, storage._PACKAGES[codec], None)  # import now raises ImportError
    with pytest.raises(ImportError, match=rf'{package} package.*pip install "dqn-course\[compress\]"'):
        FrameSharingMemory(50, (4, 6, 6), storage=codec)


# -- checkpoints -------------------------------------------------------------------------------------------------
def fill_from(memory, transitions) -> None:
    for tr in transitions:
        memory.add(*tr)


def assert_same_samples(a, b, draws: int = 10, batch_size: int = 8) -> None:
    for _ in range(draws):
        assert_same_batch("restored", b.sample(batch_size), a.sample(batch_size))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(scenarios(), st.sampled_from(STORAGES + ("torch",)), st.floats(0.2, 1.0))
def test_state_dict_round_trip_samples_identically(sc, storage_name, cut):
    """Save after some adds (often mid-episode), load into a memory with another seed, then both go on alike."""
    steps, _ = transitions_of(sc)
    k = max(1, int(cut * len(steps)))
    obs_shape = (sc.stack, *sc.frame_shape)
    kw = {"device": "cpu"} if storage_name == "torch" else {}
    name = "ram" if storage_name == "torch" else storage_name
    with tempfile.TemporaryDirectory() as directory:
        original = make(name, sc.capacity, obs_shape, sc.seed, directory, **kw)
        restored = make(name, sc.capacity, obs_shape, sc.seed + 1, directory, **kw)
        fill_from(original, steps[:k])
        state = original.state_dict()
        assert all(isinstance(v, np.ndarray) and v.dtype != object for v in state.values())
        restored.load_state_dict(state)
        assert_same_samples(original, restored, batch_size=min(len(original), 8))
        fill_from(original, steps[k:])  # an unfinished episode goes on in both
        fill_from(restored, steps[k:])
        assert_same_samples(original, restored, batch_size=min(len(original), 8))
        assert restored.added == original.added and np.array_equal(restored.valid, original.valid)


@pytest.mark.parametrize("storage_name", STORAGES)
def test_resume_mid_episode_needs_end_episode(storage_name, tmp_path):
    ref = Reference(4, (3, 3), "repeat")
    env = StackingEnv(ref)
    original = make(storage_name, 40, (4, 3, 3), 0, tmp_path)
    fill_from(original, [env.step(1, 0.0, t == 10, t == 10) for t in range(25)])  # mid-episode at the end
    restored = make(storage_name, 40, (4, 3, 3), 9, tmp_path)
    restored.load_state_dict(original.state_dict())
    fresh = StackingEnv(Reference(4, (3, 3), "repeat"))
    fresh.ref.frames_written = 5_000  # a freshly reset environment: new frames
    first = fresh.step(2, 1.0, False, False)
    with pytest.raises(ValueError, match="episode_end=True"):
        restored.add(*first)
    for memory in (original, restored):
        memory.end_episode()
        memory.add(*first)
    before = len(restored)
    assert_same_samples(original, restored)
    assert len(restored) == before and restored.added == 26


def test_multi_stream_state_dict_and_end_episode(tmp_path):
    refs = [Reference(4, (3, 3), "repeat") for _ in range(3)]
    envs = [StackingEnv(r) for r in refs]
    for i, r in enumerate(refs):
        r.frames_written = 10_000 * i
    original = MultiStreamMemory(90, 3, (4, 3, 3), seed=1, storage="lz4")
    for i in range(60):
        original.add(*envs[i % 3].step(i % 4, 1.0, i % 11 == 10, i % 11 == 10), stream=i % 3)
    state = original.state_dict()
    assert "rng" in state and "stream2/frames_blob" in state and "stream0/head" in state
    restored = MultiStreamMemory(90, 3, (4, 3, 3), seed=2, storage="lz4")
    restored.load_state_dict(state)
    assert restored.added == 60
    assert_same_samples(original, restored)
    restored.end_episode(stream=1)
    assert not restored.streams[1]._in_episode and restored.streams[0]._in_episode
    restored.end_episode()
    assert not any(s._in_episode for s in restored.streams)


def _filled(storage_name="lz4", capacity=40, obs_shape=(4, 3, 3), path=None) -> FrameSharingMemory:
    env = StackingEnv(Reference(obs_shape[0], obs_shape[1:], "repeat"))
    memory = FrameSharingMemory(capacity, obs_shape, seed=3, storage=storage_name, path=path)
    fill_from(memory, [env.step(1, 0.0, t % 7 == 6, t % 7 == 6) for t in range(30)])
    return memory


@pytest.mark.parametrize("change, match", [
    (lambda s: s.update(capacity=np.array(41)), "saved capacity is 41, this memory's is 40"),
    (lambda s: s.update(obs_shape=np.array([3, 3, 3])), "saved obs_shape is .3, 3, 3., this memory's is .4, 3, 3."),
    (lambda s: s.update(padding=np.frombuffer(b"zero", np.uint8)), "saved padding is 'zero'"),
    (lambda s: s.pop("frames_offsets"), "has no frames_offsets"),
    (lambda s: s.update(valid=s["valid"][:-1]), r"saved valid is bool\[39\], this memory's is bool\[40\]"),
    (lambda s: s.update(num_valid=np.array(int(s["num_valid"]) + 1)), "inconsistent state"),
    (lambda s: s.update(frames_offsets=s["frames_offsets"][::-1].copy()), "frames_offsets must rise"),
    (lambda s: s.update(rng=np.frombuffer(b"{not json", np.uint8)), "not JSON"),
])
def test_mismatched_load_is_refused_and_changes_nothing(change, match):
    source, target = _filled(), _filled()
    state = dict(source.state_dict())
    change(state)
    before = target.state_dict()
    with pytest.raises(ValueError, match=match):
        target.load_state_dict(state)
    after = target.state_dict()
    assert all(np.array_equal(before[k], after[k]) for k in before)


def test_load_names_a_different_storage_or_stream_count(tmp_path):
    with pytest.raises(ValueError, match="saved storage is 'ram', this memory's is 'zstd'"):
        _filled("zstd").load_state_dict(_filled("ram").state_dict())
    with pytest.raises(ValueError, match="saved storage is 'lz4', this memory's is 'disk'"):
        _filled("disk", path=tmp_path).load_state_dict(_filled("lz4").state_dict())
    with pytest.raises(ValueError, match="saved num_streams is 2, this memory's is 3"):
        MultiStreamMemory(60, 3, (4, 3, 3)).load_state_dict(MultiStreamMemory(60, 2, (4, 3, 3)).state_dict())
    # A refused multi-stream load changes no stream, even those that would have loaded.
    good = MultiStreamMemory(60, 2, (4, 3, 3), seed=1)
    other = MultiStreamMemory(60, 2, (4, 3, 3), seed=2)
    env = StackingEnv(Reference(4, (3, 3), "repeat"))
    for _ in range(12):
        good.add(*env.step(1, 0.0, False, False), stream=0)
    state = good.state_dict()
    state["stream1/capacity"] = np.array(31)
    with pytest.raises(ValueError, match="saved capacity is 31"):
        other.load_state_dict(state)
    assert len(other) == 0 and other.streams[0].written == 0


# -- frames from real play ---------------------------------------------------------------------------------------
def test_breakout_ram_bytes_track_the_screen():
    """The bytes ``follow_ball`` reads: ball x (99) and paddle x (72) against the red pixels on the screen."""
    from dqn_course.envs import make_raw_breakout
    from dqn_course.lab.bench import BALL_X, PADDLE_X

    env = make_raw_breakout(seed=0)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    checked_ball = checked_paddle = 0
    for t in range(400):
        obs, _, terminated, truncated, _ = env.step(1 if t % 25 == 0 else int(rng.integers(4)))
        if terminated or truncated:
            env.reset()
            continue
        ram = env.unwrapped.ale.getRAM()
        red = (obs[..., 0] == 200) & (obs[..., 1] == 72) & (obs[..., 2] == 72)  # ball and paddle colour
        ball_cols = np.flatnonzero(red[95:188].any(0))  # below the bricks, above the paddle
        paddle_cols = np.flatnonzero(red[189:193, :152].any(0))  # (columns 152-159 hold a fixed red mark)
        if ball_cols.size and 8 < ball_cols.min() and ball_cols.max() < 151:  # walls hide part of what touches them
            assert ball_cols.min() == int(ram[BALL_X]) - 49, t
            checked_ball += 1
        # One run of columns (the ball is not passing the paddle's rows), not clipped by the left wall.
        if paddle_cols.size and 8 < paddle_cols.min() and (np.diff(paddle_cols) == 1).all():
            assert paddle_cols.min() == int(ram[PADDLE_X]) - 47, t
            checked_paddle += 1
    env.close()
    assert checked_ball > 50 and checked_paddle > 100


def test_follow_policy_keeps_the_ball_in_play_longer_than_random():
    from dqn_course.lab.bench import play_frames

    follow = play_frames(2_500, seed=0, policy="follow")
    random = play_frames(2_500, seed=0, policy="random")
    assert follow.frames.shape == (2_500, 84, 84) and len(random.episode_lengths()) >= 5
    # Random play loses the ball in well under 300 steps; the follower plays on (at most one whole game here).
    longest_follow = max(np.diff(np.r_[np.flatnonzero(follow.first), len(follow)]))
    assert longest_follow > 3 * random.episode_lengths().mean()
    assert follow.rewards.sum() > 3 * random.rewards.sum()
    with pytest.raises(ValueError, match="policy"):
        play_frames(10, policy="greedy")


def _page_cache_drop_problem(directory) -> str | None:
    """Why the disk store's page cache cannot be dropped in ``directory`` (None: it can, cold reads are cold).

    tmpfs, ramfs and some overlay filesystems keep a file's pages in RAM whatever ``posix_fadvise`` asks.
    """
    memory = make("disk", 300, (4, 84, 84), 0, directory)
    try:
        memory.frames.array[...] = 7  # every page written, so every page is cached now
        before = memory.frames.cached_fraction()
        if before is None:
            return f"mincore cannot report the page cache on {sys.platform}"
        memory.frames.drop_page_cache()
        after = memory.frames.cached_fraction()
        if after >= 0.05:
            return (f"the filesystem holding {directory} keeps {after:.0%} of a file's pages cached after "
                    f"posix_fadvise(DONTNEED) (tmpfs or another RAM-backed filesystem?): no cold reads to measure")
        return None
    finally:
        memory.frames.close()


def test_measure_storage_times_cold_batches_from_the_disk(tmp_path):
    """Where the filesystem can drop its cache, each cold batch starts with (almost) none of the file cached."""
    problem = _page_cache_drop_problem(tmp_path)
    if problem:
        pytest.skip(problem)
    from dqn_course.lab.bench import play_frames

    row = measure_storage("disk", 300, play_frames(200, seed=0), path=tmp_path, seconds=0.05, cold_seconds=0.01)
    assert row["cached_before_cold"] is not None and row["cached_before_cold"] < 0.05


def test_measure_storage_and_compare_codecs_run_small(tmp_path):
    from dqn_course.lab.bench import play_frames

    pool = play_frames(200, seed=0)
    rows = compare_codecs(pool.frames[:50], rounds=1)
    assert [r["codec"] for r in rows] == list(storage.CODECS) and all(r["ratio"] > 2 for r in rows)
    row = measure_storage("disk", 300, pool, path=tmp_path, seconds=0.05, cold_seconds=0.01)
    assert row["transitions"] > 250 and row["batches_per_s"] > 0 and row["cold_batches"] >= 20
    assert row["file_bytes"] == 300 * 7056 and row["nbytes"] == 300 * 16
    row = measure_storage("lz4", 300, pool, seconds=0.05)
    assert row["mean_payload_bytes"] < 7056 / 2 and row["nbytes"] < 300 * 7056 / 2
