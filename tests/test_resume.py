"""Checkpoint/resume of the whole training state, the watchdog's clean stop, and a run killed with SIGKILL."""
from __future__ import annotations

import dataclasses
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

from dqn_course.agent import DQNAgent
from dqn_course.checkpoint import (CheckpointError, list_checkpoints, read_checkpoint, replay_digest,
                                   restore_training_state, training_state, write_checkpoint)
from dqn_course.lab import resume_demo
from dqn_course.per import PrioritizedMemory
from dqn_course.replay import MultiStreamMemory
from dqn_course.records import load_resume
from dqn_course.train import PRESETS, train

OBS = (4, 84, 84)


def filled_memory(seed: int, per: bool, transitions: int = 300):
    """A two-stream memory with episodes of random length, optionally wrapped in prioritized replay."""
    memory = MultiStreamMemory(120, 2, OBS, seed=seed)
    if per:
        memory = PrioritizedMemory(memory, alpha=0.6, seed=seed)
    rng = np.random.default_rng(seed)
    states = rng.integers(0, 256, size=(2, *OBS), dtype=np.uint8)
    for _ in range(transitions):
        frames = rng.integers(0, 256, size=(2, 1, *OBS[1:]), dtype=np.uint8)
        next_states = np.concatenate([states[:, 1:], frames], axis=1)
        ends = rng.random(2) < 0.05
        memory.add_batch(states, rng.integers(0, 4, 2), rng.normal(size=2), next_states, ends, ends)
        states = np.where(ends[:, None, None, None], rng.integers(0, 256, size=(2, *OBS), dtype=np.uint8), next_states)
    return memory


@pytest.mark.parametrize("per", [False, True], ids=["uniform", "prioritized"])
def test_training_state_round_trip_restores_everything(tmp_path, per):
    memory = filled_memory(seed=3, per=per)
    agent = DQNAgent(4, "cpu", seed=3)
    for _ in range(3):
        agent.learn(memory.sample(8))
    counters = {"step": 1234, "updates": 56, "episodes": 7}
    arrays, meta = training_state(agent, memory, counters, {"note": "test"})
    write_checkpoint(tmp_path / "s.ckpt", arrays, meta)

    fresh_memory = filled_memory(seed=99, per=per, transitions=10)  # same shape, different contents
    fresh_agent = DQNAgent(4, "cpu", seed=99)
    loaded, loaded_meta = read_checkpoint(tmp_path / "s.ckpt")
    assert restore_training_state(loaded, loaded_meta, fresh_agent, fresh_memory) == counters

    for a, b in [(agent.q, fresh_agent.q), (agent.target, fresh_agent.target)]:
        for (name, p), (_, q) in zip(a.state_dict().items(), b.state_dict().items()):
            assert torch.equal(p, q), name
    saved_opt, restored_opt = agent.optimizer.state_dict(), fresh_agent.optimizer.state_dict()
    assert saved_opt["param_groups"] == restored_opt["param_groups"]
    for i, slots in saved_opt["state"].items():
        for key, value in slots.items():
            assert torch.equal(value, restored_opt["state"][i][key]), (i, key)
    # Every generator continues where the saved one was: ε-greedy draws, torch, and the replay's batches.
    assert np.array_equal(agent.rng.random(5), fresh_agent.rng.random(5))
    for _ in range(3):
        a, b = memory.sample(16), fresh_memory.sample(16)
        for field in ("states", "actions", "rewards", "next_states", "dones", "ids"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    # ... and training goes on identically from here.
    torch.manual_seed(0)
    batch = memory.sample(8)
    assert agent.learn(batch) == fresh_agent.learn(batch)


def test_a_restored_memory_that_samples_differently_is_refused(tmp_path):
    memory = filled_memory(seed=4, per=False)
    agent = DQNAgent(4, "cpu", seed=4)
    arrays, meta = training_state(agent, memory, {"step": 1}, {})
    digest_before = replay_digest(memory)
    assert replay_digest(memory) == digest_before, "taking the digest must not move the memory's generators"
    meta["replay_digest"] = "0" * 64  # as if the frames on disk had been swapped for others
    with pytest.raises(CheckpointError, match="does not sample what the saved one did"):
        restore_training_state(arrays, meta, DQNAgent(4, "cpu", seed=4), filled_memory(seed=5, per=False))


def quick_config(out: Path, **overrides):
    return dataclasses.replace(PRESETS["quick"], out_dir=str(out), progress=False, prefault=False, **overrides)


def test_resume_refuses_a_different_replay_shape(tmp_path):
    summary = train(quick_config(tmp_path, total_steps=600, max_rss_gb=1e-6))  # the watchdog stops it at step 1
    assert summary["stopped"]
    with pytest.raises(CheckpointError, match="buffer_size: saved 10000, now 20000"):
        load_resume(quick_config(tmp_path, resume=str(tmp_path), buffer_size=20_000))
    with pytest.raises(CheckpointError, match="per: saved False, now True; per_alpha: saved 0.6, now 0.5"):
        load_resume(quick_config(tmp_path, resume=str(tmp_path), per=True, per_alpha=0.5))
    load_resume(quick_config(tmp_path, resume=str(tmp_path), total_steps=10**6, batch_size=64))  # free to change


@pytest.mark.slow
def test_watchdog_stops_the_run_with_a_checkpoint_and_the_run_resumes(tmp_path):
    stopped = train(quick_config(tmp_path, total_steps=600, max_rss_gb=1e-6))  # any process is above 1 kB
    assert "memory watchdog: process RSS" in stopped["stopped"]
    assert stopped["steps"] == 1, "the first check is at the first step"
    assert [p.name for p in list_checkpoints(tmp_path)] == ["state-0000000001.ckpt"]
    assert not (tmp_path / "checkpoint.pt").exists(), "no evaluation yet: no measured policy to keep"

    resumed = train(quick_config(tmp_path, total_steps=600, resume=str(tmp_path)))
    assert resumed["stopped"] is None and resumed["resumed_from"] == 1 and resumed["steps"] == 600
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=True)["step"] == 600  # evaluated at the last step
    assert resumed["updates"] == 600 // 4 - (500 - 1) // 4  # the update count carried on from the checkpoint
    assert [p.name for p in list_checkpoints(tmp_path)] == ["state-0000000001.ckpt", "state-0000000600.ckpt"]


def read_rows(path: Path) -> list[str]:
    return path.read_text().splitlines()[1:]


@pytest.mark.slow
def test_waiting_for_a_game_after_a_checkpoint_sees_whole_rows_only(tmp_path):
    import subprocess
    import sys

    (tmp_path / "state-0000000500.ckpt").write_bytes(b"")
    (tmp_path / "log.csv").write_text("step,episode_return\n230,1.0\n480,0.0\n")
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stderr=subprocess.PIPE,
                               text=True)
    try:
        with pytest.raises(TimeoutError):  # no game logged after the checkpoint at step 500 yet
            resume_demo.wait_for_game_after_checkpoint(running, tmp_path, min_step=500, timeout=0.3)
        (tmp_path / "log.csv").write_text("step,episode_return\n230,1.0\n480,0.0\n61")  # a row being written
        with pytest.raises(TimeoutError):
            resume_demo.wait_for_game_after_checkpoint(running, tmp_path, min_step=500, timeout=0.3)
        (tmp_path / "log.csv").write_text("step,episode_return\n230,1.0\n480,0.0\n612,2.0\n")
        assert resume_demo.wait_for_game_after_checkpoint(running, tmp_path, min_step=500) == (500, 612)
    finally:
        running.kill()
        running.communicate()
    ended = subprocess.Popen([sys.executable, "-c", "pass"], stderr=subprocess.PIPE, text=True)
    ended.wait()
    with pytest.raises(RuntimeError, match="the run ended"):
        resume_demo.wait_for_game_after_checkpoint(ended, tmp_path, min_step=750)


def test_kill_9_mid_run_then_resume_loses_nothing_before_the_last_checkpoint(tmp_path):
    """SIGKILL gives the process no chance to clean up; the resumed run must pick up at the last checkpoint."""
    out = tmp_path / "run"
    args = ("--checkpoint-every", "250", "--total-steps", "2000", "--prefault", "false")
    proc = resume_demo.start_run(out, *args)
    try:  # wait for a checkpoint taken after learning started (optimiser state and a full-ish replay)
        resume_demo.wait_for_checkpoint(proc, out, min_step=750)
    finally:
        returncode = resume_demo.kill_hard(proc)
    assert returncode == -signal.SIGKILL

    killed_log = read_rows(out / "log.csv")
    last = list_checkpoints(out)[-1]
    _, meta = read_checkpoint(last)  # the newest checkpoint is whole: written to a .tmp, then renamed
    saved_step = meta["counters"]["step"]
    assert saved_step >= 750 and meta["replay_digest"] is not None

    resumed = resume_demo.run(out, *args, "--resume", str(out))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    # The resume checks the restored replay against the digest of the batch it would have drawn at save time.
    assert f"resumed from {last} at step {saved_step:,}" in resumed.stdout
    assert f"done: 2,000 steps ({2_000 - saved_step:,} this session) in " in resumed.stdout  # its own time and rate

    kept = [r for r in killed_log if int(r.split(",")[0]) <= saved_step]
    log = read_rows(out / "log.csv")
    assert log[: len(kept)] == kept, "games logged before the checkpoint must survive the resume unchanged"
    steps = [int(r.split(",")[0]) for r in log]
    assert steps == sorted(steps) and all(s > saved_step for s in steps[len(kept):])
    assert not list(out.glob("*.tmp"))
    assert len(list_checkpoints(out)) == PRESETS["quick"].keep_checkpoints


@pytest.mark.slow
@pytest.mark.parametrize("storage, per", [("lz4", False), ("disk", True)])
def test_other_storages_and_prioritized_replay_resume_too(tmp_path, storage, per):
    """The CLI's --replay-storage and --per go through the same checkpoint (frames compressed / on disk, the tree)."""
    first = train(quick_config(tmp_path, total_steps=540, replay_storage=storage, per=per))
    assert first["stopped"] is None and first["updates"] == 540 // 4 - (500 - 1) // 4
    if storage == "disk":
        assert (tmp_path / "replay").is_dir(), "the disk store's file lives in <out_dir>/replay"
        (tmp_path / "replay" / "frames-killed.u8").write_bytes(b"left by a run killed with SIGKILL")
    resumed = train(quick_config(tmp_path, total_steps=580, replay_storage=storage, per=per, resume=str(tmp_path)))
    assert resumed["resumed_from"] == 540 and resumed["steps"] == 580
    assert resumed["updates"] == 580 // 4 - (500 - 1) // 4
    if storage == "disk":
        assert not (tmp_path / "replay" / "frames-killed.u8").exists(), "a killed run's frames file must not pile up"
