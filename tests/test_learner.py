"""Learners: the fast path's DeviceLearner does exactly what ``agent.learn`` does on the same batches."""
from __future__ import annotations

import contextlib
import sys

import numpy as np
import pytest
import torch

from dqn_course.agent import DQNAgent
from dqn_course.learner import CudaGraphFallbackWarning, DeviceLearner, EagerLearner
from dqn_course.replay import MultiStreamMemory

OBS = (4, 84, 84)


def filled(device, seed=3, padding="repeat", streams=2, steps=120):
    """A memory of ``streams`` envs' random-frame episodes (rewards and dones varied)."""
    memory = MultiStreamMemory(streams * 100, streams, OBS, seed=seed, padding=padding, device=device)
    rng = np.random.default_rng(0)
    states = rng.integers(0, 256, (streams, *OBS), dtype=np.uint8)
    for t in range(steps):
        new = rng.integers(0, 256, (streams, 1, *OBS[1:]), dtype=np.uint8)
        next_states = np.concatenate([states[:, 1:], new], axis=1)
        ends = np.full(streams, t % 37 == 36)
        memory.add_batch(states, rng.integers(0, 4, streams), rng.choice([-1.0, 0.0, 1.0], streams), next_states,
                         dones=ends | (rng.random(streams) < 0.05), episode_ends=ends)
        states = rng.integers(0, 256, (streams, *OBS), dtype=np.uint8) if ends[0] else next_states
    return memory


@pytest.mark.parametrize("double", [False, True])
def test_device_learner_matches_agent_learn_on_the_same_batches(double):
    plain, fast = DQNAgent(4, seed=1, double=double), DQNAgent(4, seed=1, double=double)
    host, device = filled(None), filled("cpu")
    eager, learner = EagerLearner(plain, host, 32), DeviceLearner(fast, device, 32)
    assert not learner.graph_enabled  # on the CPU the update runs eagerly: the function a graph would capture
    for k in (1, 2, 3):
        eager.learn(k, step=0)
        learner.learn(k)
    assert learner.stats.count == eager.stats.count == 6
    means = eager.diagnostics()
    assert set(means) == {"loss", "q_max", "grad_norm"}
    assert learner.diagnostics() == pytest.approx(means, rel=1e-5)
    # read once per log row: the counts start over, and a read with no update since repeats the last means
    assert learner.stats.count == 0 and learner.diagnostics() == pytest.approx(means, rel=1e-5)
    for (name, a), b in zip(plain.q.state_dict().items(), fast.q.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    # both drew the same slots: the memories' generators moved alike
    assert host.rng.bit_generator.state == device.rng.bit_generator.state


def test_device_learner_refuses_memories_it_cannot_gather_from():
    agent = DQNAgent(4, seed=0)
    with pytest.raises(ValueError, match="one bank on cpu"):
        DeviceLearner(agent, filled(None), 32)
    with pytest.raises(ValueError, match="padding='repeat'"):
        DeviceLearner(agent, filled("cpu", padding="zero"), 32)


def test_window_at_names_the_frames_batch_at_returns():
    memory = filled("cpu")
    streams, slots = memory.draw(16)
    index, actions, rewards, dones = memory.window_at(streams, slots)
    batch = memory.batch_at(streams, slots)
    frames = memory.bank.tensor[torch.from_numpy(index)]
    assert torch.equal(frames[:, :-1], batch.states) and torch.equal(frames[:, 1:], batch.next_states)
    np.testing.assert_array_equal(actions, batch.actions)
    np.testing.assert_array_equal(rewards, batch.rewards)
    np.testing.assert_array_equal(dones, batch.dones)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("double", [False, True])
def test_cuda_graph_update_equals_the_eager_update(double):
    eager_agent, graph_agent = DQNAgent(4, "cuda", seed=2, double=double), DQNAgent(4, "cuda", seed=2, double=double)
    eager = DeviceLearner(eager_agent, filled("cuda"), 32, graph=False)
    graphed = DeviceLearner(graph_agent, filled("cuda"), 32, graph=True)
    for k in (1, 2, 5):
        eager.learn(k)
        graphed.learn(k)
    eager_agent.sync_target()
    graph_agent.sync_target()
    eager.learn(3)
    graphed.learn(3)
    assert graphed.diagnostics() == pytest.approx(eager.diagnostics(), rel=1e-4)
    for (name, a), b in zip(eager_agent.q.state_dict().items(), graph_agent.q.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("warm", [False, True])
def test_restore_in_place_undoes_warm_up_updates(warm):
    """What the CUDA-graph capture relies on: after warm-up updates and ``restore_in_place``, the next update is
    the one an agent that never warmed up makes (a fresh Adam, or one with state, as after a resume)."""
    from dqn_course.learner import restore_in_place, snapshot

    memory = filled("cpu")
    ref_agent, agent = DQNAgent(4, seed=5), DQNAgent(4, seed=5)
    ref, learner = DeviceLearner(ref_agent, filled("cpu"), 32), DeviceLearner(agent, memory, 32)
    if warm:  # both have Adam state already
        ref.learn(2)
        learner.learn(2)
    tensors = [t.data_ptr() for t in agent.q.state_dict().values()]
    saved = snapshot(agent)
    rng_state = memory.rng.bit_generator.state, [s.rng.bit_generator.state for s in memory.streams]
    learner.learn(3)  # the "warm-up": real updates
    restore_in_place(agent, saved)
    memory.rng.bit_generator.state = rng_state[0]
    for s, st in zip(memory.streams, rng_state[1]):
        s.rng.bit_generator.state = st
    assert [t.data_ptr() for t in agent.q.state_dict().values()] == tensors  # the same tensors, rewritten
    ref.learn(1)
    learner.learn(1)
    for (name, a), b in zip(ref_agent.q.state_dict().items(), agent.q.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU"))])
def test_device_learner_carries_on_identically_after_a_resume(tmp_path, device):
    """As ``train`` does on --resume: the learner is built first, the checkpoint restored into its agent and memory
    afterwards, and only then does it learn (on CUDA: captures its graph). It must go on as the saved run would."""
    from dqn_course.checkpoint import read_checkpoint, restore_training_state, training_state, write_checkpoint

    agent = DQNAgent(4, device, seed=7)
    memory = filled(device, seed=7)
    learner = DeviceLearner(agent, memory, 32)
    learner.learn(3)
    learner.diagnostics()
    write_checkpoint(tmp_path / "s.ckpt", *training_state(agent, memory, {"step": 1, "updates": 3, "episodes": 0},
                                                          {}))

    fresh_agent, fresh_memory = DQNAgent(4, device, seed=99), filled(device, seed=99, steps=50)
    fresh = DeviceLearner(fresh_agent, fresh_memory, 32)
    restore_training_state(*read_checkpoint(tmp_path / "s.ckpt"), fresh_agent, fresh_memory)
    learner.learn(4)
    fresh.learn(4)
    assert fresh.diagnostics() == pytest.approx(learner.diagnostics(), rel=1e-4)
    for (name, a), b in zip(agent.q.state_dict().items(), fresh_agent.q.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)


class _Stream:
    """Stands in for a CUDA stream on the CPU: work there is already in order."""

    def wait_stream(self, other) -> None:
        pass


def _capture_raises(*args, **kwargs):
    raise RuntimeError("operation not permitted when stream is capturing")


@pytest.fixture
def cuda_capture_on_cpu(monkeypatch):
    """The CUDA calls of the graph capture stood in for on the CPU, so that its warm-up runs real updates here (Adam
    ``capturable`` allowed on the CPU) and ``torch.cuda.graph`` raises: a GPU or driver that cannot capture."""
    monkeypatch.setattr(torch.cuda, "Stream", _Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", _Stream)
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "CUDAGraph", object)
    monkeypatch.setattr(torch.cuda, "graph", _capture_raises)
    adam = sys.modules[torch.optim.Adam.__module__]
    monkeypatch.setattr(adam, "_get_capturable_supported_devices", lambda *args, **kwargs: ["cpu"])


@pytest.mark.parametrize("adam_state", [False, True])
@pytest.mark.parametrize("fails", ["without CUDA", "in the warm-up", "in the capture"])
def test_a_failed_graph_capture_warns_once_and_runs_the_eager_updates(request, fails, adam_state):
    """Whatever fails (no CUDA at all; an update of the warm-up, after one real update; the capture itself, after the
    whole warm-up), the learner warns once, saying why and how to skip the capture, and then makes exactly the
    updates of a learner that never tried: the warm-up's updates and Adam state are undone."""
    if fails != "without CUDA":
        request.getfixturevalue("cuda_capture_on_cpu")
    ref_agent, agent = DQNAgent(4, seed=4), DQNAgent(4, seed=4)
    ref_memory, memory = filled("cpu"), filled("cpu")
    if adam_state:  # as after a resume: Adam has moments and a step count before the capture
        ref_agent.learn(ref_memory.sample(32))
        agent.learn(memory.sample(32))
    ref, learner = DeviceLearner(ref_agent, ref_memory, 32, graph=False), DeviceLearner(agent, memory, 32, graph=True)
    if fails == "in the warm-up":
        update, calls = learner._update, []

        def second_update_fails() -> None:
            calls.append(1)
            if len(calls) == 2:
                raise RuntimeError("CUDA error: out of memory")
            update()

        learner._update = second_update_fails
    with pytest.warns(CudaGraphFallbackWarning) as caught:
        for k in (1, 3, 2):
            ref.learn(k)
            learner.learn(k)
    ours = [w for w in caught if w.category is CudaGraphFallbackWarning]
    assert len(ours) == 1
    message = str(ours[0].message)
    assert "--cuda-graph false" in message and "RuntimeError" in message
    assert not learner.graph_enabled
    assert all(not g["capturable"] for g in agent.optimizer.param_groups)
    assert learner.diagnostics() == ref.diagnostics()
    for (name, a), b in zip(ref_agent.q.state_dict().items(), agent.q.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    for a, b in zip(ref_agent.optimizer.state.values(), agent.optimizer.state.values()):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
