"""Learners: the fast path's DeviceLearner does exactly what ``agent.learn`` does on the same batches."""
from __future__ import annotations

import re

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
def test_cuda_graph_update_equals_the_eager_update(double, deterministic_kernels):
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
def test_device_learner_carries_on_identically_after_a_resume(tmp_path, device, deterministic_kernels):
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


class CaptureOnCpu:
    """``GraphCapture``'s interface on the CPU, for the learner's capture logic: ``warm_up`` runs the update, and
    ``record`` hands back what ``replays`` makes of the update (the update itself: a capture that worked), or raises
    ``fails`` (what a GPU, driver or build that cannot capture raises). Notes what it was asked to do."""

    optimizer_on_device = False  # a CPU Adam keeps its step counts where it always does

    def __init__(self, replays=None, fails: Exception | None = None):
        self.replays, self.fails, self.calls = replays or (lambda update: update), fails, []

    def warm_up(self, fn, times: int) -> None:
        self.calls.append(("warm_up", times))
        for _ in range(times):
            fn()

    def record(self, fn):
        self.calls.append(("record", fn))
        if self.fails is not None:
            raise self.fails
        return self.replays(fn)

    def synchronize(self) -> None:
        self.calls.append(("synchronize",))


CANNOT_CAPTURE = RuntimeError("operation not permitted when stream is capturing")


def twice(update):
    """A replay that updates twice: what a capture that went wrong could do."""
    def replay() -> None:
        update()
        update()
    return replay


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
@pytest.mark.parametrize("failing", [dict(fails=CANNOT_CAPTURE), dict(replays=twice)],
                         ids=["in the capture", "in the self-check"])
def test_a_graph_given_up_warns_once_records_why_and_runs_the_eager_updates(failing, adam_state):
    """A capture the GPU cannot make (a RuntimeError while capturing) or a captured update that disagrees with the
    eager one: the learner warns once, records why (``fallback_reason``, ``path``), and then makes exactly the
    updates of a learner that never tried: the warm-up's and the self-check's updates and Adam state are undone."""
    ref_agent, agent, ref_memory, memory = _twin_runs(adam_state)
    ref = DeviceLearner(ref_agent, ref_memory, 32, graph=False)
    capture = CaptureOnCpu(**failing)
    learner = DeviceLearner(agent, memory, 32, capture=capture)
    assert learner.graph_enabled
    with pytest.warns(CudaGraphFallbackWarning) as caught:
        for k in (1, 3, 2):
            ref.learn(k)
            learner.learn(k)
    ours = [str(w.message) for w in caught if w.category is CudaGraphFallbackWarning]
    assert len(ours) == 1 and "--cuda-graph false" in ours[0] and learner.fallback_reason in ours[0]
    expected = "RuntimeError: operation not permitted" if capture.fails else "self-check"
    assert expected in learner.fallback_reason and learner.path.startswith("eager (fell back: ")
    assert not learner.graph_enabled
    assert [c[0] for c in capture.calls] == ["warm_up", "record", "synchronize"]  # one attempt, waited for
    assert learner.diagnostics() == ref.diagnostics()
    _assert_same_state(ref_agent, agent)


@pytest.mark.parametrize("adam_state", [False, True])
def test_a_graph_that_passes_its_self_check_makes_the_eager_updates(adam_state):
    """The self-check's and the warm-up's updates leave no trace: the first replayed update is the first update."""
    ref_agent, agent, ref_memory, memory = _twin_runs(adam_state)
    ref = DeviceLearner(ref_agent, ref_memory, 32, graph=False)
    capture = CaptureOnCpu()
    learner = DeviceLearner(agent, memory, 32, capture=capture)
    for k in (1, 3, 2):
        ref.learn(k)
        learner.learn(k)
    assert learner.path == "cuda graph" and learner.fallback_reason is None
    assert [c[0] for c in capture.calls] == ["warm_up", "record"]  # captured once, replayed since
    assert learner.diagnostics() == pytest.approx(ref.diagnostics(), rel=1e-6)
    for (name, a), b in zip(ref_agent.q.state_dict().items(), agent.q.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=name)


@pytest.mark.parametrize("error", [ValueError("shapes (32, 4) and (32,) do not match"),
                                   RuntimeError("mat1 and mat2 shapes cannot be multiplied")])
def test_an_error_in_the_eager_warm_up_is_raised_as_itself_with_the_state_put_back(error):
    """A bug in the rule or a shape error shows before any capture, in the eager warm-up: it is the learner's own
    error, not a reason to run without the graph. Weights and Adam's state are as they were."""
    ref_agent, agent, _, memory = _twin_runs(adam_state=True)
    calls = []

    def second_update_fails(*args):
        calls.append(1)
        if len(calls) == 2:
            raise error
        return gradient_step(*args)

    gradient_step, agent.gradient_step = agent.gradient_step, second_update_fails  # a rule that fails on its 2nd call
    learner = DeviceLearner(agent, memory, 32, capture=CaptureOnCpu())
    with pytest.raises(type(error), match=re.escape(str(error))):
        learner.learn(1)
    assert learner.fallback_reason is None
    _assert_same_state(ref_agent, agent)


def test_an_error_of_another_kind_in_the_capture_is_raised_not_caught():
    capture = CaptureOnCpu(fails=TypeError("update() takes 0 arguments"))
    learner = DeviceLearner(DQNAgent(4, seed=0), filled("cpu"), 32, capture=capture)
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
    from dqn_course.device import GraphCapture

    with pytest.raises(ValueError, match="CUDA device"):
        DeviceLearner(DQNAgent(4, seed=0), filled("cpu"), 32, graph=True)
    with pytest.raises(ValueError, match="CUDA device"):
        GraphCapture("cpu")
    assert DeviceLearner(DQNAgent(4, seed=0), filled("cpu"), 32).capture is None  # graph=None: eager on the CPU


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_cuda_capture_on_the_second_gpu_makes_its_objects_there_and_leaves_the_current_device():
    """``--device cuda:1`` with cuda:0 current: the learner captures on cuda:1 and the current device stays cuda:0."""
    torch.cuda.set_device(0)
    learner = DeviceLearner(DQNAgent(4, "cuda:1", seed=0), filled("cuda:1"), 32)
    learner.learn(2)
    assert learner.path == "cuda graph" and torch.cuda.current_device() == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_a_capture_given_up_hands_adam_back_to_the_host_and_makes_the_eager_updates(deterministic_kernels):
    """On a GPU, a capture that fails after a real warm-up: Adam is a plain Adam again (not capturable, step counts on
    the host) and the learner makes the eager learner's updates."""
    from dqn_course.device import GraphCapture

    class CannotCapture(GraphCapture):
        def record(self, fn):
            raise CANNOT_CAPTURE

    ref_agent, agent = DQNAgent(4, "cuda", seed=4), DQNAgent(4, "cuda", seed=4)
    ref = DeviceLearner(ref_agent, filled("cuda"), 32, graph=False)
    learner = DeviceLearner(agent, filled("cuda"), 32, capture=CannotCapture("cuda"))
    assert all(g["capturable"] for g in agent.optimizer.param_groups)
    with pytest.warns(CudaGraphFallbackWarning):
        for k in (1, 3):
            ref.learn(k)
            learner.learn(k)
    assert all(not g["capturable"] for g in agent.optimizer.param_groups)
    assert all(st["step"].device.type == "cpu" for st in agent.optimizer.state.values())
    assert learner.diagnostics() == pytest.approx(ref.diagnostics(), rel=1e-4)
    for (name, a), b in zip(ref_agent.q.state_dict().items(), agent.q.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_uploader_lets_callers_reuse_their_arrays_at_once():
    """The uploader's promise: an array may be overwritten as soon as the call returns, even while the device is
    still busy with earlier work (a long matmul queued first holds the copies back). Each upload keeps its own
    values; with depth 2, the third upload reuses the first set of buffers and must wait for its copies."""
    from dqn_course.device import Uploader

    upload = Uploader("cuda", depth=2)
    big = torch.randn(4096, 4096, device="cuda")
    a = np.zeros(2_000_000, dtype=np.float32)
    outs = []
    for i in range(6):
        for _ in range(4):
            big = big @ big / 64  # keeps the stream busy, so the copies queued after it wait
        a[:] = i
        outs += upload(a)
    torch.cuda.synchronize()
    assert [float(o.min()) for o in outs] == [float(o.max()) for o in outs] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_the_uploader_copies_arrays_as_they_are_and_refuses_a_depth_below_one():
    from dqn_course.device import Uploader

    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    out, = Uploader("cpu")(a)
    assert torch.equal(out, torch.from_numpy(a)) and out.dtype == torch.int64
    with pytest.raises(ValueError, match="depth"):
        Uploader("cpu", depth=0)


def test_compile_runs_the_update_through_torch_compile_and_the_self_check_against_the_plain_one(monkeypatch):
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
    capture = CaptureOnCpu()
    learner = DeviceLearner(DQNAgent(4, seed=0), filled("cpu"), 32, compile=True, capture=capture)
    learner.learn(3)
    assert learner.path == "cuda graph"
    assert len(ran) == 3 + 1 + 3  # warm-up, the self-check's replay, three real updates
    recorded = capture.calls[1][1]
    recorded()
    assert len(ran) == 3 + 1 + 3 + 1  # what was captured is the compiled update


def test_a_compiled_update_that_computes_something_else_is_given_up(monkeypatch):
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
    learner = DeviceLearner(agent, filled("cpu"), 32, compile=True, capture=CaptureOnCpu())
    with pytest.warns(CudaGraphFallbackWarning, match="self-check"):
        learner.learn(1)
    assert learner.path.startswith("eager (fell back: self-check")
    assert learner._compiled is None  # from now on the plain update, not the compiled one


def test_the_deterministic_kernels_fixture_sets_cudnn_and_restores_it():
    """What the GPU comparisons above rely on, checked on any machine: inside, cuDNN picks deterministic algorithms
    and does not autotune; afterwards the settings are as they were."""
    before = torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    try:
        from conftest import cudnn_deterministic

        with cudnn_deterministic():
            assert torch.backends.cudnn.deterministic is True and torch.backends.cudnn.benchmark is False
        assert torch.backends.cudnn.deterministic is before[0] and torch.backends.cudnn.benchmark is True
    finally:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before
