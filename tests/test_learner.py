"""Learners: the fast path's DeviceLearner does exactly what ``agent.learn`` does on the same batches."""
from __future__ import annotations

import contextlib
import re
import sys

import numpy as np
import pytest
import torch

from dqn_course.agent import UPDATE_STATS, DQNAgent
from dqn_course.learner import CudaGraphFallbackWarning, DeviceLearner
from dqn_course.replay import Batch, MultiStreamMemory

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


def recording_draws(memory: MultiStreamMemory) -> list:
    """Make ``memory.draw_windows`` keep a copy of what it returns, in the list returned."""
    drawn, draw = [], memory.draw_windows

    def draw_windows(n):
        out = draw(n)
        drawn.append(tuple(a.copy() for a in out))
        return out

    memory.draw_windows = draw_windows
    return drawn


@pytest.mark.parametrize("double", [False, True])
def test_device_learner_matches_agent_update_on_the_same_batches(double):
    """k updates planned at once are k updates of ``agent.update``, each on its own batch of the draw, in order."""
    plain, fast = DQNAgent(4, seed=1, double=double), DQNAgent(4, seed=1, double=double)
    memory = filled("cpu")
    learner = DeviceLearner(fast, memory, 32)
    drawn = recording_draws(memory)
    assert not learner.graph_enabled  # on the CPU the update runs eagerly: the function a graph would capture
    stats = []
    for k in (1, 2, 3):
        learner.learn(k)
        index, actions, rewards, dones = drawn[-1]
        assert index.shape == (k * 32, memory.stack + 1)
        for u in range(k):
            part = slice(32 * u, 32 * (u + 1))
            frames = memory.bank.tensor[torch.from_numpy(index[part])]
            stats.append(plain.update(Batch(frames[:, :-1], actions[part], rewards[part], frames[:, 1:], dones[part],
                                            np.zeros(32, np.int64))))
    assert learner.stats.count == 6
    means = dict(zip(UPDATE_STATS, torch.stack(stats).mean(0).tolist()))
    assert learner.diagnostics() == pytest.approx(means, rel=1e-5)
    # read once per log row: the counts start over, and a read with no update since repeats the last means
    assert learner.stats.count == 0 and learner.diagnostics() == pytest.approx(means, rel=1e-5)
    for (name, a), b in zip(plain.q.state_dict().items(), fast.q.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)


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
    # Not bit for bit: the captured kernels (cuBLAS on the capture's stream) may sum in another order, and Adam's
    # early steps move a weight by ~lr whatever the size of its gradient, so a ~0 gradient's sign decides. Measured
    # on an H100 after these 11 updates: 4e-4 relative on max-Q, the weights within a few lr.
    assert graphed.diagnostics() == pytest.approx(eager.diagnostics(), rel=2e-3)
    lr = eager_agent.optimizer.param_groups[0]["lr"]
    for (name, a), b in zip(eager_agent.q.state_dict().items(), graph_agent.q.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=11 * 2 * lr, msg=name)


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
    """Stands in for a CUDA stream on the CPU (work there is already in order), noting the device it was made for."""

    made: list = []

    def __init__(self, device=None):
        _Stream.made.append(device)

    def wait_stream(self, other) -> None:
        pass


def _capture_raises(error):
    def graph(*args, **kwargs):
        raise error
    return graph


@pytest.fixture
def cuda_capture_on_cpu(monkeypatch):
    """The CUDA calls of the graph capture stood in for on the CPU, so that its warm-up runs real updates here (Adam
    ``capturable`` allowed on the CPU) and ``torch.cuda.graph`` raises what a GPU or driver that cannot capture
    raises. Returns a function making a CPU learner try the capture (as ``graph=True`` on a GPU would)."""
    _Stream.made = []
    monkeypatch.setattr(torch.cuda, "Stream", _Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", _Stream)
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "CUDAGraph", object)
    monkeypatch.setattr(torch.cuda, "graph", _capture_raises(RuntimeError("operation not permitted when stream is "
                                                                          "capturing")))
    adam = sys.modules[torch.optim.Adam.__module__]
    monkeypatch.setattr(adam, "_get_capturable_supported_devices", lambda *args, **kwargs: ["cpu"])

    def trying_to_capture(learner: DeviceLearner) -> DeviceLearner:
        learner.graph_enabled = True
        learner._capturable_adam(True)
        return learner
    return trying_to_capture


class _Replay:
    """A captured update stood in for on the CPU: ``replay`` runs ``update`` (the learner's eager update, or a
    wrong one)."""

    def __init__(self, update):
        self.replay = update


def _twin_runs(adam_state: bool):
    """Two agents and memories alike; with ``adam_state``, Adam has moments and a step count (as after a resume)."""
    ref_agent, agent = DQNAgent(4, seed=4), DQNAgent(4, seed=4)
    ref_memory, memory = filled("cpu"), filled("cpu")
    if adam_state:
        ref_agent.learn(ref_memory.sample(32))
        agent.learn(memory.sample(32))
    return ref_agent, agent, ref_memory, memory


def _assert_same_state(ref_agent: DQNAgent, agent: DQNAgent) -> None:
    for (name, a), b in zip(ref_agent.q.state_dict().items(), agent.q.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    for a, b in zip(ref_agent.optimizer.state.values(), agent.optimizer.state.values()):
        assert a.keys() == b.keys() and all(torch.equal(a[k].cpu(), b[k].cpu()) for k in a)


@pytest.mark.parametrize("adam_state", [False, True])
@pytest.mark.parametrize("fails", ["in the capture", "in the self-check"])
def test_a_graph_given_up_warns_once_records_why_and_runs_the_eager_updates(cuda_capture_on_cpu, fails, adam_state):
    """A capture the GPU cannot make (a RuntimeError while capturing) or a captured update that disagrees with the
    eager one: the learner warns once, records why (``fallback_reason``, ``path``), and then makes exactly the
    updates of a learner that never tried: the warm-up's and the self-check's updates and Adam state are undone."""
    ref_agent, agent, ref_memory, memory = _twin_runs(adam_state)
    ref = DeviceLearner(ref_agent, ref_memory, 32, graph=False)
    learner = cuda_capture_on_cpu(DeviceLearner(agent, memory, 32, graph=False))
    if fails == "in the self-check":
        def twice() -> None:  # a "graph" that updates twice: what a capture that went wrong could do
            learner._update()
            learner._update()
        learner._record_graph = lambda: _Replay(twice)
    with pytest.warns(CudaGraphFallbackWarning) as caught:
        for k in (1, 3, 2):
            ref.learn(k)
            learner.learn(k)
    ours = [str(w.message) for w in caught if w.category is CudaGraphFallbackWarning]
    assert len(ours) == 1 and "--cuda-graph false" in ours[0] and learner.fallback_reason in ours[0]
    expected = "RuntimeError: operation not permitted" if fails == "in the capture" else "self-check"
    assert expected in learner.fallback_reason and learner.path.startswith("eager (fell back: ")
    assert not learner.graph_enabled
    assert all(not g["capturable"] for g in agent.optimizer.param_groups)
    assert learner.diagnostics() == ref.diagnostics()
    _assert_same_state(ref_agent, agent)


@pytest.mark.parametrize("adam_state", [False, True])
def test_a_graph_that_passes_its_self_check_makes_the_eager_updates(cuda_capture_on_cpu, adam_state):
    """The self-check's and the warm-up's updates leave no trace: the first replayed update is the first update."""
    ref_agent, agent, ref_memory, memory = _twin_runs(adam_state)
    ref = DeviceLearner(ref_agent, ref_memory, 32, graph=False)
    learner = cuda_capture_on_cpu(DeviceLearner(agent, memory, 32, graph=False))
    learner._record_graph = lambda: _Replay(learner._update)
    ref._capturable_adam(True)  # Adam's step counts where a captured Adam keeps them, as the learner's are
    for k in (1, 3, 2):
        ref.learn(k)
        learner.learn(k)
    assert learner.path == "cuda graph" and learner.fallback_reason is None
    assert learner.diagnostics() == pytest.approx(ref.diagnostics(), rel=1e-6)
    for (name, a), b in zip(ref_agent.q.state_dict().items(), agent.q.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=name)


@pytest.mark.parametrize("error", [ValueError("shapes (32, 4) and (32,) do not match"),
                                   RuntimeError("mat1 and mat2 shapes cannot be multiplied")])
def test_an_error_in_the_eager_warm_up_is_raised_as_itself_with_the_state_put_back(cuda_capture_on_cpu, error):
    """A bug in the rule or a shape error shows before any capture, in the eager warm-up: it is the learner's own
    error, not a reason to run without the graph. Weights and Adam's state are as they were."""
    ref_agent, agent, _, memory = _twin_runs(adam_state=True)
    learner = cuda_capture_on_cpu(DeviceLearner(agent, memory, 32, graph=False))
    update, calls = learner._update, []

    def second_update_fails() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise error
        update()

    learner._update = second_update_fails
    with pytest.raises(type(error), match=re.escape(str(error))):
        learner.learn(1)
    assert learner.fallback_reason is None
    for (name, a), b in zip(ref_agent.q.state_dict().items(), agent.q.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    for a, b in zip(ref_agent.optimizer.state.values(), agent.optimizer.state.values()):
        assert all(torch.equal(a[k].cpu().float(), b[k].cpu().float()) for k in a)


def test_an_error_of_another_kind_in_the_capture_is_raised_not_caught(cuda_capture_on_cpu, monkeypatch):
    monkeypatch.setattr(torch.cuda, "graph", _capture_raises(TypeError("update() takes 0 arguments")))
    learner = cuda_capture_on_cpu(DeviceLearner(DQNAgent(4, seed=0), filled("cpu"), 32, graph=False))
    with pytest.raises(TypeError, match="takes 0 arguments"):
        learner.learn(1)
    assert learner.fallback_reason is None


def test_self_check_compares_one_update_with_the_eager_one_and_puts_the_state_back():
    from dqn_course.learner import snapshot

    agent, memory = DQNAgent(4, seed=6), filled("cpu")
    learner = DeviceLearner(agent, memory, 32, graph=False)
    learner.learn(2)  # Adam has state
    ints, floats = learner.plan(1)
    learner._ints.copy_(ints[0])
    learner._floats.copy_(floats[0])
    before = [t.clone() for t in agent.q.state_dict().values()]
    saved = snapshot(agent)
    assert learner.self_check(learner._update, saved) is None

    def clipped_less() -> None:  # the same update with the gradient-norm clipping forgotten
        agent.max_grad_norm, kept = None, agent.max_grad_norm
        try:
            learner._update()
        finally:
            agent.max_grad_norm = kept

    agent.max_grad_norm = 1e-3  # so clipping matters on this batch
    assert "self-check" in learner.self_check(clipped_less, saved)
    for a, b in zip(before, agent.q.state_dict().values()):
        assert torch.equal(a, b)
    assert learner.stats.sums.abs().sum() == 0


def test_a_graph_on_a_device_without_cuda_is_refused():
    with pytest.raises(ValueError, match="CUDA device"):
        DeviceLearner(DQNAgent(4, seed=0), filled("cpu"), 32, graph=True)


def test_the_capture_makes_its_cuda_objects_for_the_runs_device_not_the_current_one(cuda_capture_on_cpu,
                                                                                      monkeypatch):
    """``--device cuda:1`` on a 2-GPU machine: the side stream, the stream waits, the graph and the uploads' events are
    made for cuda:1, and all of the capture runs with cuda:1 current (mocks: no GPU here)."""
    current = []

    @contextlib.contextmanager
    def device(d):
        current.append(torch.device(d))
        yield
        current.pop()

    made_in = []
    monkeypatch.setattr(torch.cuda, "device", device)
    monkeypatch.setattr(torch.cuda, "graph", lambda graph: made_in.append(list(current)) or contextlib.nullcontext())
    learner = cuda_capture_on_cpu(DeviceLearner(DQNAgent(4, seed=0), filled("cpu"), 32, graph=False))
    learner._record_graph = lambda: made_in.append(list(current)) or _Replay(learner._update)
    learner.device = torch.device("cuda", 1)  # what it would be on a second GPU; the tensors stay on the CPU
    learner.learn(2)
    assert _Stream.made and all(d == torch.device("cuda", 1) for d in _Stream.made)
    assert made_in == [[torch.device("cuda", 1)]]


def test_the_uploader_records_its_copies_on_its_own_devices_stream(monkeypatch):
    """Each set of pinned buffers waits for its own last copies, recorded on the stream of the uploader's device."""
    from dqn_course.device import Uploader

    streams, events = [], []

    class Event:
        def __init__(self):
            self.stream, self.waited = None, 0
            events.append(self)

        def record(self, stream=None):
            self.stream = stream

        def synchronize(self):
            self.waited += 1

    monkeypatch.setattr(torch.cuda, "current_stream",
                        lambda device=None: streams.append(device) or f"stream of {device}")
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self, *a, **k: self)
    moved = []
    monkeypatch.setattr(torch.Tensor, "to", lambda self, device, non_blocking=False: moved.append(
        (torch.device(device), non_blocking)) or self.clone())
    upload = Uploader("cuda:1", depth=2)
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    for _ in range(3):
        out, = upload(a)
        assert torch.equal(out, torch.from_numpy(a))
    assert streams == [torch.device("cuda", 1)] * 3 and all(e.stream == "stream of cuda:1" for e in events)
    assert moved == [(torch.device("cuda", 1), True)] * 3
    assert [e.waited for e in events] == [1, 0, 0]  # the third upload reuses the first set: waits for its copies
    with pytest.raises(ValueError, match="depth"):
        Uploader("cuda:1", depth=0)


def test_compile_runs_the_update_through_torch_compile_and_the_self_check_against_the_plain_one(
        cuda_capture_on_cpu, monkeypatch):
    """``compile=True``: the warm-up and the capture run the compiled update; the self-check's reference is the plain
    eager update, so a compiled update that computed something else would be given up (torch.compile stood in for:
    compiling for real takes a minute on this CPU)."""
    ran = []

    def fake_compile(fn):
        def compiled():
            ran.append("compiled")
            fn()
        return compiled

    monkeypatch.setattr(torch, "compile", fake_compile)
    learner = cuda_capture_on_cpu(DeviceLearner(DQNAgent(4, seed=0), filled("cpu"), 32, graph=False, compile=True))
    captured = []

    def record_graph():
        captured.append(len(ran))
        learner._step()  # what the graph would replay: the compiled update as captured
        return _Replay(lambda: learner._step())

    learner._record_graph = record_graph
    learner.learn(3)
    assert learner.path == "cuda graph"
    assert captured == [3]  # three compiled warm-up updates, then the capture of the compiled one
    assert len(ran) == 3 + 1 + 1 + 3  # warm-up, capture, the self-check's replay, three real updates


def test_a_compiled_update_that_computes_something_else_is_given_up(cuda_capture_on_cpu, monkeypatch):
    learner = None

    def wrong_compile(fn):
        def compiled():  # the update with the gradient clipping lost: what a miscompiled update could do
            kept, learner.agent.max_grad_norm = learner.agent.max_grad_norm, None
            try:
                fn()
            finally:
                learner.agent.max_grad_norm = kept
        return compiled

    monkeypatch.setattr(torch, "compile", wrong_compile)
    agent = DQNAgent(4, seed=0, max_grad_norm=1e-3)
    learner = cuda_capture_on_cpu(DeviceLearner(agent, filled("cpu"), 32, graph=False, compile=True))
    learner._record_graph = lambda: _Replay(lambda: learner._step())
    with pytest.warns(CudaGraphFallbackWarning, match="self-check"):
        learner.learn(1)
    assert learner.path.startswith("eager (fell back: self-check")
    assert learner._compiled is None  # from now on the plain update, not the compiled one
