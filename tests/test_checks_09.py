"""Notebook 09's self-check: right passes, each usual mistake raises with its hint, None only prints."""
from __future__ import annotations

import functools
import sys
import zlib

import lz4.block
import numpy as np
import pytest

from dqn_course.lab import checks
from dqn_course.lab.stores import compare_codecs
from dqn_course.replay import stores

def test_overheads_match_the_memory():
    """The check's per-slot figures are what a compressed FrameSharingMemory really spends besides payloads."""
    from dqn_course.replay import FrameSharingMemory

    memory = FrameSharingMemory(100, (4, 84, 84), storage="lz4")
    o = checks.ch09._slot_overheads()
    bookkeeping = sum(getattr(memory, n).nbytes for n in memory.RING_ARRAYS)
    assert bookkeeping == 100 * o["bookkeeping"]
    assert sys.getsizeof(memory.frames._payloads) - sys.getsizeof([]) == 100 * o["list_slot"]
    assert o["bytes_header"] == sys.getsizeof(b"x") - 1


@pytest.mark.parametrize("policy", ["follow", "random"])
def test_stack_payload_ram_key_matches_lz4_on_breakout(policy):
    """09's Q1 (09.stack_payload_ram): a slot holding a 4-frame stack as one lz4 payload costs between 1.2 and 2 times
    a one-frame slot (key b), not about four times (a) nor within 10% (c); the slot's fixed costs counted in both."""
    from dqn_course.lab.bench import play_frames

    assert checks.QUESTIONS["09.stack_payload_ram"][0] == "b"
    pool = play_frames(1_000, seed=0, policy=policy)
    fixed = 16 + stores.POINTER_BYTES + sys.getsizeof(b"")  # bookkeeping, list pointer, bytes header (section 2)
    one = np.mean([len(lz4.block.compress(np.ascontiguousarray(f))) for f in pool.frames])
    stacks = [len(lz4.block.compress(np.ascontiguousarray(pool.frames[i:i + 4]))) for i in range(len(pool) - 3)
              if not pool.first[i + 1:i + 4].any()]  # four consecutive frames of one game
    ratio = (np.mean(stacks) + fixed) / (one + fixed)
    assert 1.2 < ratio < 2, ratio


def test_solution_cell_passes_its_checks():
    """Notebook 09's solution cell (committed without outputs, skipped by nbval) passes every check it calls."""
    from _solutions import run_solutions

    out = run_solutions("09_compressed_and_disk", {"checks": checks})
    assert out.count("✓") == 3, out


def test_describe_disk_names_what_the_kernel_says():
    from dqn_course.lab.stores import describe_disk, filesystem_type

    here = describe_disk(".")
    assert here.startswith(filesystem_type(".") or "unknown filesystem")
    if filesystem_type("/dev/shm") == "tmpfs":
        assert describe_disk("/dev/shm") == "tmpfs: a filesystem held in RAM, no device under it"


def test_kill_resume_timeline_draws():
    from dqn_course.lab.pictures_late import draw_kill_resume

    fig = draw_kill_resume([180, 420], [250, 500], 500, [700, 1100], 2_000, killed_after=520)
    assert fig.axes[0].get_xlabel() == "agent step"


def test_compressed_slot_draws_the_overheads_it_is_given():
    from dqn_course.lab.pictures_late import draw_compressed_slot

    o = checks.ch09._slot_overheads()
    fig = draw_compressed_slot({"actions": 1, "ids": o["bookkeeping"] - 1}, o["list_slot"], o["bytes_header"])
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert f"header\n{o['bytes_header']} B" in texts and f"pointer\n{o['list_slot']} B" in texts
    assert any(t.endswith(f"{o['bookkeeping']} B") for t in texts)


# -- can a cold read be measured? (notebook 09's honest "disk cold" line) ---------------------------------


def test_can_drop_page_cache_agrees_with_the_kernel(tmp_path):
    """The probe's answer for a real folder is what mincore reports after the store drops its pages."""
    from dqn_course.lab.stores import can_drop_page_cache
    from dqn_course.replay.stores import DiskFrames

    ok, why = can_drop_page_cache(tmp_path)
    assert isinstance(ok, bool) and (str(tmp_path) in why or "mincore" in why)
    store = DiskFrames(64, (84, 84), tmp_path)
    store.array[:] = 1
    store.drop_page_cache()
    left = store.cached_fraction()
    store.close()
    if left is not None:
        assert ok == (left <= 0.05), (ok, why, left)
    assert list(tmp_path.iterdir()) == []  # the probe's file is gone


def test_can_drop_page_cache_says_no_on_tmpfs(monkeypatch):
    """tmpfs holds its files in RAM: refused by name, and by measurement when the name is not known."""
    import os

    from dqn_course.lab import stores

    if not os.path.isdir("/dev/shm") or stores.filesystem_type("/dev/shm") != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm here")
    ok, why = stores.can_drop_page_cache("/dev/shm")
    assert not ok and "tmpfs" in why
    monkeypatch.setattr(stores, "filesystem_type", lambda path: None)
    ok, why = stores.can_drop_page_cache("/dev/shm")
    assert not ok and "stayed in the page cache" in why


def test_measure_storage_skips_the_cold_read_when_asked(tmp_path):
    import numpy as np

    from dqn_course.lab.bench import FramePool
    from dqn_course.lab.stores import measure_storage

    frames = np.random.default_rng(0).integers(0, 256, (60, 84, 84), dtype=np.uint8)
    first = np.zeros(60, bool)
    first[0] = True
    pool = FramePool(frames=frames, first=first, actions=np.zeros(60, np.int64), rewards=np.zeros(60, np.float32),
                     dones=np.zeros(60, bool), episode_start=np.zeros(60, np.int64))
    row = measure_storage("disk", 50, pool, path=tmp_path, seconds=0.01, cold_seconds=None)
    assert "cold_batches_per_s" not in row and row["batches_per_s"] > 0


def test_cold_sampling_rate_counts_cpu_time_apart_from_waiting(tmp_path):
    """The cold row's *per CPU s* (notebook 09, section 3): a rate per second of this process's CPU time, which the
    time a batch waits for the device does not enter, so it is never below the wall-clock rate."""
    from dqn_course.lab.bench import play_frames
    from dqn_course.lab.stores import measure_storage

    row = measure_storage("disk", 300, play_frames(200, seed=0), path=tmp_path, seconds=0.05, cold_seconds=0.01)
    assert row["cold_batches_per_cpu_s"] > 0 and row["cold_batches"] >= 20
    assert row["cold_batches_per_cpu_s"] >= 0.9 * row["cold_batches_per_s"], row  # CPU time <= wall time, rounding


# -- the exercise: the learner's compressed slot, compress(frames) and decompress(payload, shape) ------------------


def lz4_compress(frames):
    if frames.dtype != np.uint8:
        raise TypeError(f"a slot stores uint8 frames, got {frames.dtype}")
    return lz4.block.compress(np.ascontiguousarray(frames))


def lz4_decompress(payload, shape):
    return np.frombuffer(lz4.block.decompress(payload), dtype=np.uint8).reshape(shape)


def zlib_compress(frames):  # another codec, another way to refuse
    if frames.dtype != np.uint8:
        raise ValueError("uint8 frames only")
    return zlib.compress(frames.tobytes())


def zlib_decompress(payload, shape):
    return np.frombuffer(zlib.decompress(payload), np.uint8).reshape(shape).copy()


def lz4_gather(payloads, indices, shape):
    return np.stack([lz4_decompress(payloads[i], shape) for i in indices])


def zlib_gather(payloads, indices, shape):  # another way to fill a batch: into an array made first
    batch = np.empty((len(indices), *shape), np.uint8)
    for k, i in enumerate(indices):
        batch[k] = zlib_decompress(payloads[i], shape)
    return batch


@pytest.mark.parametrize("compress, decompress, gather", [(lz4_compress, lz4_decompress, lz4_gather),
                                                          (zlib_compress, zlib_decompress, zlib_gather)])
def test_compressed_slot_right(compress, decompress, gather, capsys):
    assert checks.check_compressed_slot(compress, decompress, gather) is True
    assert capsys.readouterr().out.startswith("✓")


def gather_decompressing_all(payloads, indices, shape):
    every = [lz4_decompress(p, shape) for p in payloads]
    return np.stack([every[i] for i in indices])


def gather_decompressing_the_written(payloads, indices, shape):
    written = {i: lz4_decompress(payloads[i], shape) for i in range(len(payloads)) if payloads[i] is not None}
    return np.stack([written[i] for i in indices])


@pytest.mark.parametrize("gather, hint", [
    (gather_decompressing_all, "slots the batch did not draw"),
    (gather_decompressing_the_written, "slots the batch did not draw"),
    (lambda payloads, indices, shape: [lz4_decompress(payloads[i], shape) for i in indices], "one numpy array"),
    (lambda payloads, indices, shape: np.concatenate([lz4_decompress(payloads[i], shape) for i in indices]),
     "the indices drawn first"),
    (lambda payloads, indices, shape: lz4_gather(payloads, np.unique(indices), shape), "the indices drawn first"),
    (lambda payloads, indices, shape: lz4_gather(payloads, indices[::-1], shape), "other frames than the slots"),
    (lambda payloads, indices, shape: lz4_gather(payloads, indices, shape).astype(np.int16), "uint8 of shape"),
    (lambda payloads, indices, shape: stores.CompressedFrames(1, shape)._decompress(payloads[0]), "write it yourself"),
])
def test_compressed_slot_gather_wrong(gather, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_compressed_slot(lz4_compress, lz4_decompress, gather)


def course_codec_compress(frames):
    return stores.codec_functions("lz4")[0](np.ascontiguousarray(frames))


def course_store_decompress(payload, shape):
    return stores.CompressedFrames(1, shape)._decompress(payload)


@pytest.mark.parametrize("compress, decompress", [
    stores.codec_functions("lz4"),  # the course's codec functions: lz4's own, a library's
    (stores.CompressedFrames(2, (84, 84)).__setitem__, lz4_decompress),  # the course's store
    (lz4_compress, stores.CompressedFrames(2, (84, 84)).__getitem__),
    (course_codec_compress, lz4_decompress),  # defs that call the course's code
    (lz4_compress, course_store_decompress),
    (lambda frames: compare_codecs(frames), lz4_decompress),  # something else the page imports
    (zlib.compress, zlib_decompress),  # a library function handed in as it is
    (lz4_compress, functools.partial(lz4.block.decompress)),
])
def test_compressed_slot_refuses_the_course_and_the_pages_imports(compress, decompress):
    with pytest.raises(AssertionError, match="write it yourself"):
        checks.check_compressed_slot(compress, decompress)


def no_compression(frames):
    if frames.dtype != np.uint8:
        raise TypeError("uint8")
    return frames.tobytes()


def raw_decompress(payload, shape):
    return np.frombuffer(payload, np.uint8).reshape(shape)


def takes_any_dtype(frames):
    return lz4.block.compress(np.ascontiguousarray(frames))


def lossy(frames):  # keeps 6 bits a pixel
    if frames.dtype != np.uint8:
        raise TypeError("uint8")
    return lz4.block.compress(np.ascontiguousarray(frames) & 0xFC)


_KEPT_FRAMES = {}


def key_compress(frames):
    """Compresses nothing: keeps a copy of the frames in a dict and returns a short key to them."""
    if frames.dtype != np.uint8:
        raise TypeError("uint8")
    key = len(_KEPT_FRAMES).to_bytes(8, "little")
    _KEPT_FRAMES[key] = np.array(frames)
    return key


def key_decompress(payload, shape):
    return _KEPT_FRAMES[payload].reshape(shape)


_LAST = None


def last_frames_compress(frames):
    """Compresses, but hands the decoder the frames of the last call, not its own payload's."""
    global _LAST
    _LAST = np.array(frames)
    return lz4_compress(frames)


def last_frames_decompress(payload, shape):
    return _LAST.reshape(shape) if _LAST.size == np.prod(shape) else lz4_decompress(payload, shape)


@pytest.mark.parametrize("compress, decompress, hint", [
    (key_compress, key_decompress, r"random bytes \(4, 84, 84\).*lossless compression.*not kept somewhere else"),
    (last_frames_compress, last_frames_decompress, "other values than a stack of random bytes"),
    (lambda frames: lz4.block.compress(frames), lz4_decompress, "a view whose bytes are not in order"),
    (no_compression, raw_decompress, "far smaller than the frames"),
    (lz4_compress, lambda payload, shape: np.frombuffer(lz4.block.decompress(payload)), "dtype float64"),
    (lz4_compress, lambda payload, shape: np.frombuffer(lz4.block.decompress(payload), np.uint8), "not the shape"),
    (lossy, lz4_decompress, "lossless"),
    (takes_any_dtype, lz4_decompress, "accepted a float32 stack"),
    (lambda frames: bytearray(lz4_compress(frames)), lz4_decompress, "a payload is a bytes object"),
    (lz4_compress, lambda payload, shape: lz4.block.decompress(payload), "numpy array"),
])
def test_compressed_slot_wrong(compress, decompress, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_compressed_slot(compress, decompress)


def test_compressed_slot_unanswered(capsys):
    assert checks.check_compressed_slot(None, None) is None
    assert checks.check_compressed_slot(lz4_compress, None) is None
    assert checks.check_compressed_slot(lambda frames: None, lz4_decompress) is None
    assert checks.check_compressed_slot(lz4_compress, lz4_decompress) is None  # gather not written yet
    assert checks.check_compressed_slot(lz4_compress, lz4_decompress, lambda payloads, indices, shape: None) is None
    assert capsys.readouterr().out.count("Not answered yet") == 5
