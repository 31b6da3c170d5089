"""benchmarks/replay_state.py: the saved training state's size per replay storage, at tiny sizes (no timings asserted).

The benchmark builds the memory and agent as ``train.build`` does, fills the memory as the training loop stores,
and writes the state with ``records.save_training_state``; these tests check what it measures against what the file
must hold: a ``ram`` replay's frames raw (7,056 B each), an ``lz4`` replay's compressed, and a file that restores a
memory sampling what the saved one did. Its README block (``data/make_readme.py``) is checked on made-up rows.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _data_scripts import load_script

from dqn_course.checkpoint import read_checkpoint, restore_training_state
from dqn_course.lab.bench import play_frames

ROOT = Path(__file__).resolve().parents[1]
FRAME = 84 * 84
SIZES = (300, 1_500)


def _load_benchmark():
    spec = importlib.util.spec_from_file_location("bench_replay_state", ROOT / "benchmarks" / "replay_state.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load_benchmark()


@pytest.fixture(scope="module")
def pool():
    return play_frames(500, seed=0, policy="follow")


@pytest.fixture(scope="module")
def rows(pool, tmp_path_factory):
    state_dir = tmp_path_factory.mktemp("states")
    out = {(storage, n): bench.measure(storage, n, pool, str(state_dir)) for storage in ("ram", "lz4") for n in SIZES}
    assert list(state_dir.iterdir()) == []  # every file deleted once measured
    return out


def test_a_ram_state_holds_every_frame_raw(rows):
    small, large = rows["ram", SIZES[0]], rows["ram", SIZES[1]]
    for n, r in ((SIZES[0], small), (SIZES[1], large)):
        assert r["file_bytes"] >= n * FRAME + r["fixed_bytes"]
        assert r["file_bytes"] == r["replay_bytes"] + r["fixed_bytes"] + r["overhead_bytes"]
        assert 0 < r["stored"] <= n and r["stored"] > 0.95 * n  # a full ring: a few slots end an episode
    growth = (large["file_bytes"] - small["file_bytes"]) / (SIZES[1] - SIZES[0])
    assert FRAME <= growth <= FRAME + 16 + 64  # a frame and 16 B of bookkeeping per slot (+ header alignment)
    assert small["fixed_bytes"] == large["fixed_bytes"]  # networks and Adam's moments do not grow with the replay
    # online + target networks and Adam's two moments: 4 float32 copies of the Q-network's parameters
    assert small["fixed_bytes"] >= 4 * 4 * bench.network_parameters()


def test_an_lz4_state_is_much_smaller_than_a_ram_one(rows):
    for n in SIZES:
        ram, lz4 = rows["ram", n], rows["lz4", n]
        assert lz4["stored"] == ram["stored"]  # the same transitions went in
        assert lz4["replay_bytes"] < ram["replay_bytes"] / 5
        assert lz4["file_bytes"] < ram["file_bytes"]
        assert lz4["fixed_bytes"] == ram["fixed_bytes"]
    lz4_growth = (rows["lz4", SIZES[1]]["replay_bytes"] - rows["lz4", SIZES[0]]["replay_bytes"]) / (SIZES[1] - SIZES[0])
    assert 16 < lz4_growth < FRAME / 5


def test_every_file_restores_the_memory_it_saved(rows):
    for r in rows.values():
        assert r["digest_matches"] is True and r["restored_stored"] == r["stored"]


def test_the_file_read_back_restores_a_memory_of_the_same_length(pool, tmp_path):
    cfg = bench.run_config("lz4", SIZES[0], str(tmp_path))
    saved = bench.save_state(cfg, pool)
    assert saved["path"].name == f"state-{SIZES[0]:010d}.ckpt"  # the name --resume looks for
    arrays, meta = read_checkpoint(saved["path"])
    assert meta["replay_digest"] == saved["digest"] and meta["counters"]["step"] == SIZES[0]
    assert meta["config"]["replay_storage"] == "lz4" and meta["config"]["buffer_size"] == SIZES[0]
    assert any(k.startswith("agent/optimizer/") for k in arrays)  # one update ran: Adam's moments are saved
    memory, agent, _ = bench.build_run(cfg)
    restore_training_state(arrays, meta, agent, memory)  # CheckpointError if it would sample differently
    assert len(memory) == saved["stored"]


def test_the_cli_in_quick_mode_writes_the_rows(tmp_path):
    out = tmp_path / "x.json"
    env = {**os.environ, "DQN_COURSE_QUICK": "1"}
    run = subprocess.run([sys.executable, "benchmarks/replay_state.py", "--sizes", "300", "--storages", "ram", "lz4",
                          "--play-pool", "300", "--state-dir", str(tmp_path), "--out", str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "state file" in run.stdout  # the table
    doc = json.loads(out.read_text())
    assert [(r["storage"], r["transitions"]) for r in doc["rows"]] == [("ram", 300), ("lz4", 300)]
    assert all(r["file_bytes"] > 0 and r["digest_matches"] for r in doc["rows"])
    assert doc["settings"]["quick"] is True and doc["settings"]["play_pool"] == 300
    assert {"command", "environment"} <= set(doc)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]  # its temporary folder is gone


def test_the_readme_block_shows_the_recorded_rows(tmp_path):
    make_readme = load_script("make_readme")
    (tmp_path / "data" / "bench").mkdir(parents=True)
    assert make_readme.readme_memory.replay_state_body(tmp_path).startswith("Not recorded yet")
    env = {"date": "2026-11-25T12:00:00", "cpu_count": 2, "cpu": "some CPU", "ram_total": 24 * 2**30,
           "load_avg_1min": 0.5}
    row = {"storage": "lz4", "transitions": 100_000, "stored": 99_800, "file_bytes": 87_000_000,
           "bytes_per_transition": 871.7, "replay_bytes": 60_000_000, "replay_bytes_per_transition": 601.2,
           "fixed_bytes": 26_980_000, "write_s": 0.8, "read_s": 0.3, "restore_s": 0.5, "digest_matches": True}
    doc = {"command": "benchmarks/replay_state.py", "environment": env,
           "settings": {"seconds": 60.0, "preset": "breakout", "play_pool": 20_000, "filesystem": "ext4",
                        "read_cold": True, "keep_checkpoints": 2},
           "rows": [row, {"storage": "ram", "transitions": 1_000_000, "refused": "InsufficientMemoryError: no"}]}
    (tmp_path / "data" / "bench" / "replay_state.json").write_text(json.dumps(doc))
    body = make_readme.readme_memory.replay_state_body(tmp_path)
    assert "| `lz4` | 100,000 (99,800) | 87.0 MB | 872 B | 601 B | 27.0 MB | 0.80 s | 0.30 s | 0.50 s |" in body
    assert "| `ram` | 1,000,000 | refused: InsufficientMemoryError: no |" in body
    assert "same replay digest" in body and "`keep_checkpoints` = 2" in body
