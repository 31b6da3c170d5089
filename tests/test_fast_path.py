"""The fast path on the CPU: ale-py's vector env, multi-stream replay, frames held as a torch tensor."""
from __future__ import annotations

import csv
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from dqn_course.envs import make_vector_envs
from dqn_course.replay import FrameSharingMemory, MultiStreamMemory
from dqn_course.train import PRESETS, train

ROOT = Path(__file__).resolve().parents[1]


def play_vector(backend: str, num_envs: int, steps: int, seed: int = 0):
    """Random play as the training loop does it; returns the real transitions, keyed as MultiStreamMemory ids."""
    envs = make_vector_envs(num_envs, seed=seed, backend=backend)
    obs, info = envs.reset(seed=seed)
    lives, resetting = info["lives"].copy(), np.zeros(num_envs, bool)
    rng = np.random.default_rng(seed)
    counts = [0] * num_envs
    transitions, reference = [], {}
    for _ in range(steps):
        actions = rng.integers(0, 4, num_envs)
        next_obs, rewards, terminated, truncated, info = envs.step(actions)
        life_lost = info["lives"] < lives
        real = ~resetting
        transitions.append((obs, actions, np.sign(rewards), next_obs, terminated | life_lost,
                            terminated | truncated, real))
        for i in np.flatnonzero(real):
            reference[i + num_envs * counts[i]] = (obs[i], actions[i], next_obs[i], bool(terminated[i] or life_lost[i]))
            counts[i] += 1
        resetting = terminated | truncated
        obs, lives = next_obs, info["lives"].copy()
    envs.close()
    return transitions, reference


@pytest.mark.parametrize("backend", ["ale", "gymnasium"])
@pytest.mark.parametrize("device", [None, "cpu"])
def test_multistream_samples_match_vector_play(backend, device):
    num_envs = 3
    transitions, reference = play_vector(backend, num_envs, steps=400)
    memory = MultiStreamMemory(3 * 500, num_envs, seed=1, device=device)
    for s, a, r, s2, d, e, real in transitions:
        memory.add_batch(s, a, r, s2, d, e, mask=real)
    assert len(memory) > 0
    assert len(memory) <= len(reference)
    for _ in range(5):
        batch = memory.sample(64)
        states = np.asarray(batch.states)
        next_states = np.asarray(batch.next_states)
        if device is not None:
            assert isinstance(batch.states, torch.Tensor) and batch.states.device.type == "cpu"
        for j, i in enumerate(batch.ids):
            s, a, s2, d = reference[int(i)]
            assert np.array_equal(states[j], s)
            assert np.array_equal(next_states[j], s2)
            assert batch.actions[j] == a and batch.dones[j] == d


def test_ale_vector_env_starts_with_real_frames_and_memory_keeps_them():
    """AtariVectorEnv's first stack holds no-op/FIRE frames, not padding: they must survive replay."""
    transitions, reference = play_vector("ale", 1, steps=50)
    first_state = transitions[0][0][0]
    assert not all(np.array_equal(first_state[0], f) for f in first_state[1:])
    memory = MultiStreamMemory(200, 1, seed=0)
    for s, a, r, s2, d, e, real in transitions:
        memory.add_batch(s, a, r, s2, d, e, mask=real)
    batch = memory.streams[0].batch_at(np.array([memory.streams[0].ids.tolist().index(0)]))
    assert np.array_equal(batch.states[0], reference[0][0])


def test_device_storage_samples_identically_to_numpy_storage():
    transitions, _ = play_vector("gymnasium", 1, steps=300, seed=4)
    host = FrameSharingMemory(200, seed=7)
    dev = FrameSharingMemory(200, seed=7, device="cpu")
    for s, a, r, s2, d, e, real in transitions:
        if real[0]:
            host.add(s[0], a[0], r[0], s2[0], d[0], e[0])
            dev.add(s[0], a[0], r[0], s2[0], d[0], e[0])
    assert len(host) == len(dev)
    assert host.nbytes == dev.nbytes
    for _ in range(3):
        b1, b2 = host.sample(32), dev.sample(32)
        assert np.array_equal(b1.ids, b2.ids)
        assert np.array_equal(b1.states, b2.states.numpy())
        assert np.array_equal(b1.next_states, b2.next_states.numpy())


def test_multistream_refuses_impossible_capacity_before_allocating():
    with pytest.raises(MemoryError, match="needs"):
        MultiStreamMemory(10**10, 8)
    with pytest.raises(ValueError, match="num_streams"):
        MultiStreamMemory(10, 4)


@pytest.mark.slow
def test_fast_path_train_runs_and_keeps_one_update_per_four_agent_steps(tmp_path):
    cfg = dataclasses.replace(PRESETS["quick"], total_steps=800, learning_starts=400, num_envs=4, env_backend="ale",
                              replay_on_device=True, device="cpu", eval_every=10**9, checkpoint_every=10**9,
                              out_dir=str(tmp_path), progress=False)
    summary = train(cfg)
    assert summary["steps"] == 800
    # learning starts at step 400 and the counter moves 4 at a time: 4/4 = 1 update per vector step.
    assert summary["updates"] == (800 - 400) // 4 + 1
    assert summary["replay_device"] == "cpu"
    rows = list(csv.DictReader(open(tmp_path / "log.csv")))
    # Each row is one finished game of one of the 4 envs, logged in step order: their lengths add up to at most
    # the agent steps taken, and ε only falls.
    steps = [int(r["step"]) for r in rows]
    lengths = [int(r["episode_length"]) for r in rows]
    eps = [float(r["epsilon"]) for r in rows]
    assert rows and steps == sorted(steps) and steps[-1] <= 800
    assert all(n > 0 for n in lengths) and sum(lengths) <= 800
    assert all(a >= b for a, b in zip(eps, eps[1:]))
    assert (tmp_path / "checkpoint.pt").exists()


@pytest.mark.slow
def test_throughput_benchmark_prints_both_paths_and_ratio():
    out = subprocess.run([sys.executable, "benchmarks/throughput.py", "--device", "cpu", "--num-envs", "2",
                          "--warmup", "300", "--window", "200", "--buffer-size", "2000", "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    paths = [r for r in rows if "path" in r]
    assert [r["path"] for r in paths] == ["plain", "fast"]
    assert all(r["steps_per_s"] > 0 for r in paths)
    for r in paths:  # where the time went: the phases split the timed window
        assert set(r["phase_share"]) == {"act", "learn", "envs", "store", "other"}
        assert sum(r["phase_share"].values()) == pytest.approx(1.0)
        assert r["phase_share"]["learn"] > 0
    ratio = [r for r in rows if "ratio_fast_over_plain" in r][0]["ratio_fast_over_plain"]
    assert ratio == pytest.approx(paths[1]["steps_per_s"] / paths[0]["steps_per_s"])


@pytest.mark.parametrize("padding", ["repeat", "zero"])
def test_device_bank_returns_the_host_memorys_transitions_for_the_same_ids(padding):
    """Streams sharing one device bank (one gather per batch) == streams in host RAM, slot for slot."""
    num_envs = 3
    transitions, _ = play_vector("gymnasium", num_envs, steps=300, seed=2)
    host = MultiStreamMemory(3 * 120, num_envs, seed=5, padding=padding)
    dev = MultiStreamMemory(3 * 120, num_envs, seed=5, padding=padding, device="cpu")
    copies = []
    original = dev.bank._write
    dev.bank._write = lambda slots, frames: copies.append(len(slots)) or original(slots, frames)
    for s, a, r, s2, d, e, real in transitions:
        before = len(copies)
        host.add_batch(s, a, r, s2, d, e, mask=real)
        dev.add_batch(s, a, r, s2, d, e, mask=real)
        assert len(copies) == before + 1  # every env's new frames of the step: one transfer
    assert len(host) == len(dev)
    rng = np.random.default_rng(0)
    for _ in range(5):
        streams = np.sort(rng.integers(0, num_envs, 48))
        slots = np.array([host.streams[k].draw_slots(1)[0] for k in streams])
        b_host, b_dev = host.batch_at(streams, slots), dev.batch_at(streams, slots)
        assert isinstance(b_dev.states, torch.Tensor)
        np.testing.assert_array_equal(b_host.ids, b_dev.ids)
        np.testing.assert_array_equal(b_host.states, b_dev.states.numpy())
        np.testing.assert_array_equal(b_host.next_states, b_dev.next_states.numpy())
        for field in ("actions", "rewards", "dones"):
            np.testing.assert_array_equal(getattr(b_host, field), getattr(b_dev, field))


PEER = '''
import json, sys
settings = json.loads(sys.argv[1])
with open(sys.argv[0] + ".seen", "a") as f:
    f.write(json.dumps(settings) + "\\n")
if settings.get("fail"):
    sys.exit("no ROM")
print("A.L.E: a line that is not JSON")
print(json.dumps({"steps_per_s": 50.0, "window": settings["window"]}))
'''


@pytest.mark.slow
def test_the_throughput_benchmark_runs_a_peer_beside_the_plain_loop_with_the_same_settings(tmp_path):
    """``--cleanrl``: the peer (a stand-in here) runs before each plain run and once after, with the plain loop's
    warm-up, window, buffer, batch, update rate and ε; the ratio is of the medians."""
    peer = tmp_path / "dqn_atari.py"
    peer.write_text(PEER)
    out = subprocess.run([sys.executable, "benchmarks/throughput.py", "--device", "cpu", "--num-envs", "0",
                          "--warmup", "300", "--window", "100", "--buffer-size", "2000", "--epsilon", "0.5",
                          "--cleanrl", str(peer), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [r["path"] for r in rows if "path" in r] == ["cleanrl", "plain", "cleanrl"]
    plain = rows[1]["steps_per_s"]
    assert rows[-1]["plain_over_cleanrl"] == pytest.approx(plain / 50.0)
    seen = [json.loads(line) for line in (tmp_path / "dqn_atari.py.seen").read_text().splitlines()]
    assert len(seen) == 2 and seen[0] == seen[1]
    assert seen[0] == {"learning_starts": 300, "window": 100, "buffer_size": 2000, "start_e": 0.5, "end_e": 0.5,
                       "cuda": False, "batch_size": 32, "train_frequency": 4}


def test_a_peer_that_fails_is_reported_with_its_last_words(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import throughput
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    peer = tmp_path / "dqn_atari.py"
    peer.write_text(PEER.replace('settings.get("fail")', "True"))
    with pytest.raises(RuntimeError, match="failed \\(exit status 1\\).*no ROM"):
        throughput.cleanrl_once(str(peer), "cpu", 300, 100, 2000, 0.5)


def test_a_peer_that_is_not_there_is_refused_before_anything_runs(tmp_path):
    out = subprocess.run([sys.executable, "benchmarks/throughput.py", "--device", "cpu", "--num-envs", "0",
                          "--cleanrl", str(tmp_path / "missing.py")], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and "missing.py: no such file" in out.stderr and not out.stdout
