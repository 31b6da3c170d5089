"""What a run allocates where: ``plan_allocation`` against measured allocations, ``--dry-run``, and the refusal of a
GPU too small for the device replay (its free-memory query faked: no GPU needed)."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import torch

from dqn_course import profiling
from dqn_course import train as train_module
from dqn_course.agent import DQNAgent
from dqn_course.checkpoint import training_state, write_checkpoint
from dqn_course.device import pick_device
from dqn_course.lab import playback
from dqn_course.profiling import GB, InsufficientMemoryError, format_bytes, measure_in_subprocess
from dqn_course.replay import MultiStreamMemory
from dqn_course.replay.stores import TorchFrames
from dqn_course.allocation import BOOKKEEPING, NETWORKS, REPLAY_FRAMES, STATES, check_run, plan_allocation
from dqn_course.train import PRESETS, main

CPU = torch.device("cpu")


def filled(memory: MultiStreamMemory, steps: int, seed: int = 0) -> MultiStreamMemory:
    """``memory`` after ``steps`` vector steps of random frames, one episode per stream."""
    rng = np.random.default_rng(seed)
    n = len(memory.streams)
    states = rng.integers(0, 256, (n, 4, 84, 84), dtype=np.uint8)
    for _ in range(steps):
        next_states = np.concatenate([states[:, 1:], rng.integers(0, 256, (n, 1, 84, 84), dtype=np.uint8)], axis=1)
        memory.add_batch(states, rng.integers(0, 4, n), np.zeros(n), next_states, np.zeros(n, bool),
                         np.zeros(n, bool))
        states = next_states
    return memory


def test_planned_host_ram_is_what_the_replay_memory_takes_in_a_fresh_process():
    cfg = dataclasses.replace(PRESETS["quick"], buffer_size=20_000, num_envs=4)
    plan = plan_allocation(cfg, CPU)
    planned = plan.host[REPLAY_FRAMES] + plan.host[BOOKKEEPING]
    m = measure_in_subprocess(playback.allocate_replay, cfg.buffer_size, cfg.num_envs, prefault=True, timeout=300)
    assert m.result["nbytes"] == planned
    assert m.rss_growth == pytest.approx(planned, rel=0.05)  # every page written (prefault): RSS shows them all


@pytest.mark.parametrize("storage", ["ram", "lz4"])
def test_planned_host_ram_is_the_memorys_nbytes_before_any_frame(storage):
    cfg = dataclasses.replace(PRESETS["quick"], buffer_size=3_000, num_envs=3, replay_storage=storage)
    plan = plan_allocation(cfg, CPU)
    memory = MultiStreamMemory(cfg.buffer_size, cfg.num_envs, storage=storage)
    # a compressed store preallocates list slots; its payload objects (a shared empty one per stream) come on top
    assert memory.nbytes == pytest.approx(plan.host[REPLAY_FRAMES] + plan.host[BOOKKEEPING], rel=0.01)


def test_planned_networks_and_checkpoints_are_what_a_real_agent_and_checkpoint_take(tmp_path):
    cfg = dataclasses.replace(PRESETS["quick"], buffer_size=1_000, num_envs=2)
    rng_before = torch.get_rng_state()
    plan = plan_allocation(cfg, CPU)
    assert torch.equal(torch.get_rng_state(), rng_before)  # counting parameters draws no random numbers
    memory = filled(MultiStreamMemory(cfg.buffer_size, cfg.num_envs, seed=0), steps=100)
    agent = DQNAgent(4, seed=0)
    agent.learn(memory.sample(32))
    tensors = [*agent.q.parameters(), *agent.target.parameters(), *(p.grad for p in agent.q.parameters()),
               *(v for st in agent.optimizer.state.values() for k, v in st.items() if k != "step")]
    assert plan.host[NETWORKS] == sum(t.nbytes for t in tensors)
    size = write_checkpoint(tmp_path / "state.ckpt", *training_state(agent, memory, {"step": 1}, {}))
    assert plan.disk[STATES] / plan.state_files == pytest.approx(size, rel=0.01)


def test_state_checkpoints_on_disk_at_once():
    quick = PRESETS["quick"]  # 3,000 steps, one every 1,000: 3 in all
    assert plan_allocation(quick, CPU).state_files == 3  # keep 2, and a third while it is written
    assert plan_allocation(dataclasses.replace(quick, keep_checkpoints=1), CPU).state_files == 2
    assert plan_allocation(dataclasses.replace(quick, keep_checkpoints=0, total_steps=3_500), CPU).state_files == 4


def test_a_gpu_plan_puts_the_bank_and_networks_on_the_gpu_and_a_checkpoint_copy_in_ram():
    plan = plan_allocation(PRESETS["breakout-fast"], torch.device("cuda"))
    bank = 1_000_000 * 84 * 84
    assert plan.device_memory[REPLAY_FRAMES] == bank and NETWORKS in plan.device_memory
    assert plan.host[REPLAY_FRAMES] == 0 and sum(plan.host.values()) == bank + 16 * 1_000_000
    assert REPLAY_FRAMES not in plan_allocation(PRESETS["breakout"], torch.device("cuda")).device_memory


@pytest.fixture
def small_gpu(monkeypatch):
    """A CUDA GPU with 4 GB free, as torch reports it (nothing else of CUDA may be used), and RAM to spare."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (4 * GB, 16 * GB))
    monkeypatch.setattr(profiling, "available_bytes", lambda: 1024 * GB)

    def refuse(*args, **kwargs):
        raise AssertionError("built before the memory check")

    monkeypatch.setattr(train_module, "make_vector_envs", refuse)
    monkeypatch.setattr(train_module, "DQNAgent", refuse)


def test_a_gpu_that_cannot_hold_the_device_replay_is_refused_before_anything_is_built(small_gpu, tmp_path, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as info:
        main(["--preset", "breakout-fast", "--device", "cuda", "--out-dir", str(out), "--progress", "false"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--buffer-size 1,000,000 frames: 7.1 GB" in err and "4.0 GB free" in err
    assert "--replay-on-device false" in err
    fits = int(re.search(r"--buffer-size ([\d,]+) or less", err).group(1).replace(",", ""))
    assert 0 < fits < 1_000_000 and fits % 8 == 0
    assert not out.exists()
    cfg = dataclasses.replace(PRESETS["breakout-fast"], device="cuda", out_dir=str(out))
    check_run(dataclasses.replace(cfg, buffer_size=fits))  # the size it names passes
    with pytest.raises(InsufficientMemoryError):
        check_run(dataclasses.replace(cfg, buffer_size=fits + 8))


def test_a_device_frame_store_checks_the_gpus_free_memory_before_allocating(small_gpu):
    with pytest.raises(InsufficientMemoryError, match=r"needs 7\.1 GB on cuda, which has 4\.0 GB free"):
        TorchFrames(1_000_000, (84, 84), "cuda", what="a bank")


@pytest.mark.parametrize("preset", ["quick", "breakout-fast"])
def test_dry_run_prints_the_plan_and_builds_nothing(preset, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(train_module, "make_vector_envs", lambda *a, **k: pytest.fail("dry run built the envs"))
    out = tmp_path / "run"
    main(["--preset", preset, "--out-dir", str(out), "--dry-run"])
    printed = capsys.readouterr().out
    plan = plan_allocation(dataclasses.replace(PRESETS[preset], out_dir=str(out)), pick_device())  # as the run picks
    assert printed.startswith(f"dry run: --preset {preset} on {plan.device}")
    for where in ("host", "device_memory", "disk"):
        for what, n in getattr(plan, where).items():
            if n:
                assert re.search(re.escape(what) + r".*\s" + re.escape(format_bytes(n)) + "$", printed, re.M), what
    assert "this machine" in printed.splitlines()[-1]
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="plans for a GPU this machine lacks")
def test_dry_run_plans_for_a_gpu_this_machine_lacks(tmp_path, capsys):
    main(["--preset", "breakout-fast", "--device", "cuda", "--out-dir", str(tmp_path), "--dry-run"])
    printed = capsys.readouterr().out
    assert re.search(r"^cuda memory:\s+7\.1 GB$", printed, re.M)
    assert "this machine would refuse the run: --device cuda asks for a CUDA GPU" in printed


def test_dry_run_refuses_bad_settings_as_a_run_does(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["--preset", "quick", "--out-dir", str(tmp_path), "--replay-storage", "tape", "--dry-run"])
    assert info.value.code == 2 and "--replay-storage must be one of" in capsys.readouterr().err
