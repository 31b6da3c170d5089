"""The checkpoint file format: round trips, and every way a bad file is refused without losing the good one."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from dqn_course.checkpoint import (FORMAT_VERSION, MAGIC, CheckpointError, checkpoint_path, latest_checkpoint,
                                   list_checkpoints, prune_checkpoints, read_checkpoint, write_checkpoint)


def sample_arrays(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "frames": rng.integers(0, 256, size=(300, 84, 84), dtype=np.uint8),  # > 1 MB: read through a memmap
        "rewards": rng.normal(size=17).astype(np.float32),
        "valid": rng.random(17) < 0.5,
        "ids": np.arange(-3, 14, dtype=np.int64),
        "head": np.array(7, np.int64),  # 0-d
        "empty": np.zeros((0, 4), np.float64),
        "half": rng.normal(size=(2, 3)).astype(np.float16),
        "strided": np.arange(40, dtype=np.int32).reshape(5, 8)[:, ::2],  # not contiguous
    }


def test_round_trip_keeps_every_array_and_the_meta(tmp_path):
    arrays = sample_arrays(np.random.default_rng(0))
    meta = {"step": 1234, "config": {"lr": 1e-4, "name": "quick"}, "big": 2**70, "nested": [1, [2, None]]}
    size = write_checkpoint(tmp_path / "a.ckpt", arrays, meta)
    assert size == (tmp_path / "a.ckpt").stat().st_size
    loaded, loaded_meta = read_checkpoint(tmp_path / "a.ckpt")
    assert loaded_meta == meta
    assert list(loaded) == list(arrays)
    for name, a in arrays.items():
        assert loaded[name].dtype == a.dtype and loaded[name].shape == a.shape, name
        np.testing.assert_array_equal(loaded[name], a, err_msg=name)
    assert not list(tmp_path.glob("*.tmp"))


def test_arrays_of_python_objects_are_refused(tmp_path):
    with pytest.raises(TypeError, match="'bad'.*object"):
        write_checkpoint(tmp_path / "a.ckpt", {"bad": np.array([{"a": 1}], dtype=object)}, {})
    with pytest.raises(TypeError, match="'lst'.*list"):
        write_checkpoint(tmp_path / "a.ckpt", {"lst": [1, 2]}, {})
    assert not list(tmp_path.iterdir())


@pytest.fixture
def good_file(tmp_path):
    path = tmp_path / "good.ckpt"
    write_checkpoint(path, sample_arrays(np.random.default_rng(1)), {"step": 5})
    return path


@pytest.mark.parametrize("keep", [0, 10, 1000, -33, -1])
def test_a_truncated_file_is_refused(good_file, keep):
    data = good_file.read_bytes()
    good_file.write_bytes(data[:keep] if keep >= 0 else data[:keep])
    with pytest.raises(CheckpointError, match="truncated|not a DQN course checkpoint"):
        read_checkpoint(good_file)


@pytest.mark.parametrize("where", ["header", "frames", "last array", "digest"])
def test_a_flipped_byte_is_refused(good_file, where):
    data = bytearray(good_file.read_bytes())
    arrays_start = data.index(b"}", 24)  # past the JSON header's first object
    position = {"header": 40, "frames": len(data) // 2, "last array": len(data) - 40, "digest": len(data) - 1}[where]
    assert where != "header" or position < arrays_start
    data[position] ^= 0x01
    good_file.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupt|truncated|too long"):
        read_checkpoint(good_file)


def test_other_files_and_newer_formats_are_refused_by_name(tmp_path, good_file):
    (tmp_path / "notes.ckpt").write_text("hello")
    with pytest.raises(CheckpointError, match="not a DQN course checkpoint"):
        read_checkpoint(tmp_path / "notes.ckpt")
    data = bytearray(good_file.read_bytes())
    data[len(MAGIC): len(MAGIC) + 4] = np.array([FORMAT_VERSION + 1], "<u4").tobytes()
    good_file.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=f"version {FORMAT_VERSION + 1}.*upgrade"):
        read_checkpoint(good_file)
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        read_checkpoint(tmp_path / "missing.ckpt")


def test_a_failed_write_keeps_the_previous_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "state.ckpt"
    write_checkpoint(path, {"x": np.arange(5)}, {"step": 1})
    before = path.read_bytes()

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_checkpoint(path, {"x": np.arange(1000)}, {"step": 2})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert read_checkpoint(path)[1] == {"step": 1}
    assert not list(tmp_path.glob("*.tmp"))


def test_latest_checkpoint_falls_back_to_the_newest_good_one(tmp_path):
    for step in (100, 200, 300):
        write_checkpoint(checkpoint_path(tmp_path, step), {"w": np.full(3, step)}, {"step": step})
    assert [p.name for p in list_checkpoints(tmp_path)] == [f"state-{s:010d}.ckpt" for s in (100, 200, 300)]
    arrays, meta, path = latest_checkpoint(tmp_path)
    assert meta["step"] == 300 and path == checkpoint_path(tmp_path, 300)

    newest = checkpoint_path(tmp_path, 300)
    newest.write_bytes(newest.read_bytes()[:-7])  # e.g. the disk filled up while it was written by another tool
    with pytest.warns(UserWarning, match="skipping a checkpoint.*truncated"):
        arrays, meta, path = latest_checkpoint(tmp_path)
    assert meta["step"] == 200 and path == checkpoint_path(tmp_path, 200)
    np.testing.assert_array_equal(arrays["w"], [200] * 3)
    assert newest.exists(), "a refused file is reported, not deleted: it may be worth a look"

    with pytest.raises(CheckpointError, match="truncated"):  # naming the bad file itself: refused outright
        latest_checkpoint(newest)


def test_latest_checkpoint_says_when_nothing_is_usable(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint"):
        latest_checkpoint(tmp_path)
    checkpoint_path(tmp_path, 1).write_bytes(b"junk")
    with pytest.warns(UserWarning), pytest.raises(CheckpointError, match="every checkpoint .* was refused"):
        latest_checkpoint(tmp_path)


def test_prune_keeps_the_newest_and_removes_stale_temporaries(tmp_path):
    for step in range(1, 6):
        write_checkpoint(checkpoint_path(tmp_path, step), {"s": np.array(step)}, {})
    (tmp_path / "state-0000000009.ckpt.tmp").write_bytes(b"half written by a killed run")
    prune_checkpoints(tmp_path, keep=2, step=5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state-0000000004.ckpt", "state-0000000005.ckpt"]
    prune_checkpoints(tmp_path, keep=0, step=5)  # 0 keeps all
    assert len(list_checkpoints(tmp_path)) == 2


def test_prune_drops_the_timeline_a_resume_abandoned(tmp_path):
    """Resumed from step 2 and saved step 3: the old run's steps 4 and 5 must not win a later resume."""
    for step in (1, 2, 4, 5):
        write_checkpoint(checkpoint_path(tmp_path, step), {"s": np.array(step)}, {"step": step})
    write_checkpoint(checkpoint_path(tmp_path, 3), {"s": np.array(3)}, {"step": 3})
    prune_checkpoints(tmp_path, keep=2, step=3)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["state-0000000002.ckpt", "state-0000000003.ckpt"]
    assert latest_checkpoint(tmp_path)[1] == {"step": 3}


def test_a_damaged_header_that_still_parses_is_refused_as_corrupt(good_file):
    data = good_file.read_bytes()
    damaged = data.replace(b'"arrays"', b'"arrayz"', 1)  # valid JSON, missing key: caught before the SHA-256 check
    assert damaged != data
    good_file.write_bytes(damaged)
    with pytest.raises(CheckpointError, match="corrupt header"):
        read_checkpoint(good_file)


def test_the_header_is_plain_json_a_reader_can_inspect(good_file):
    data = good_file.read_bytes()
    assert data.startswith(MAGIC)
    header_len = int(np.frombuffer(data, "<u8", 1, len(MAGIC) + 8)[0])
    header = json.loads(data[24: 24 + header_len])
    names = [e["name"] for e in header["arrays"]]
    assert "frames" in names and all(e["offset"] % 64 == 0 for e in header["arrays"])
