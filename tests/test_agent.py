"""The agent: batched targets equal the per-sample loop, ε-greedy acting, learning, target sync, state."""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from dqn_course.agent import DQNAgent, batch_to_tensors
from dqn_course.device import Uploader
from dqn_course.lab.targets import per_sample_targets
from dqn_course.networks import NatureCNN
from dqn_course.replay import Batch

N_ACTIONS = 4


@pytest.fixture(autouse=True)
def _one_thread():
    # Tiny batches: one thread is fastest, and it does not fight other processes on a busy CI box.
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def random_batch(size: int, seed: int = 0, dones=None) -> Batch:
    rng = np.random.default_rng(seed)
    states = rng.integers(0, 256, (size, 4, 84, 84), dtype=np.uint8)
    next_states = rng.integers(0, 256, (size, 4, 84, 84), dtype=np.uint8)
    if dones is None:
        dones = (np.arange(size) % 3 == 0).astype(np.float32)  # some terminal, most not
    return Batch(states, rng.integers(0, N_ACTIONS, size).astype(np.int64),
                 rng.choice([-1.0, 0.0, 1.0], size).astype(np.float32), next_states, dones,
                 np.arange(size, dtype=np.int64))


def make_agent(double: bool, seed: int = 0, **kw) -> DQNAgent:
    agent = DQNAgent(N_ACTIONS, "cpu", double=double, seed=seed, **kw)
    # Make the target differ from the online net, so Double DQN's choice of network matters.
    with torch.no_grad():
        for p in agent.target.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return agent


@pytest.mark.parametrize("double", [False, True])
def test_batched_targets_equal_per_sample_targets(double):
    agent = make_agent(double)
    t = batch_to_tensors(random_batch(16), agent.device)
    batched, looped = agent.batched_targets(t), agent.batched_targets(t, per_sample_targets)
    assert batched.shape == looped.shape == (16,)
    assert torch.allclose(batched, looped, atol=1e-5), (batched - looped).abs().max()
    # Terminal transitions get exactly their reward; the others bootstrap (differ from it).
    done = t["dones"].bool()
    assert torch.equal(batched[done], t["rewards"][done])
    assert not torch.allclose(batched[~done], t["rewards"][~done])


def test_double_dqn_values_the_online_argmax_with_the_target_net():
    agent = make_agent(True)
    t = batch_to_tensors(random_batch(16, dones=np.zeros(16, np.float32)), agent.device)
    with torch.no_grad():
        q_online, q_target = agent.q(t["next_states"]), agent.target(t["next_states"])
    expected = t["rewards"] + agent.gamma * q_target.gather(1, q_online.argmax(1, keepdim=True)).squeeze(1)
    assert torch.allclose(agent.batched_targets(t), expected, atol=1e-6)
    plain = make_agent(False)
    plain.q.load_state_dict(agent.q.state_dict())
    plain.target.load_state_dict(agent.target.state_dict())
    vanilla = t["rewards"] + agent.gamma * q_target.max(1).values
    assert torch.allclose(plain.batched_targets(t), vanilla, atol=1e-6)
    # max over actions >= the value of any one action; here they must differ somewhere.
    assert (vanilla >= expected - 1e-6).all() and not torch.allclose(vanilla, expected)


@pytest.mark.parametrize("double", [False, True])
def test_learn_gives_the_same_loss_with_either_target_computation(double):
    batch = random_batch(8, seed=3)
    losses = []
    for per_sample in (False, True):
        agent = make_agent(double, seed=7)
        losses.append(agent.learn(batch, targets=per_sample_targets if per_sample else None))
    assert losses[0] == pytest.approx(losses[1], rel=1e-5, abs=1e-7)



def test_learn_uses_the_targets_it_is_given():
    batch = random_batch(8, seed=3)
    seen = []

    def zero_targets(rewards, dones, next_states, online, target, gamma, double):
        seen.append((online, target, gamma, double, next_states.shape))
        return torch.zeros_like(rewards)

    agent = make_agent(False, seed=7)
    with torch.no_grad():
        q = agent.q(torch.as_tensor(batch.states)).gather(1, torch.as_tensor(batch.actions).unsqueeze(1)).squeeze(1)
    loss = agent.learn(batch, targets=zero_targets)
    assert seen == [(agent.q, agent.target, agent.gamma, False, (8, 4, 84, 84))]
    assert loss == pytest.approx(float(torch.nn.functional.smooth_l1_loss(q, torch.zeros(8))), rel=1e-5)

def test_act_returns_valid_actions_for_batches_and_single_states():
    agent = make_agent(False)
    states = random_batch(32).states
    for eps in (0.0, 0.3, 1.0):
        actions = agent.act(states, eps)
        assert actions.shape == (32,) and np.issubdtype(actions.dtype, np.integer)
        assert ((actions >= 0) & (actions < N_ACTIONS)).all()
    single = agent.act(states[0], 0.0)
    assert single.shape == (1,) and 0 <= single[0] < N_ACTIONS


def test_epsilon_one_acts_at_random():
    agent = make_agent(False, seed=1)
    states = random_batch(32).states
    a, b = agent.act(states, 1.0), agent.act(states, 1.0)
    assert not np.array_equal(a, b), "ε=1 gave the same 32 actions twice"
    many = np.concatenate([agent.act(states, 1.0) for _ in range(20)])
    counts = np.bincount(many, minlength=N_ACTIONS)
    assert (counts > 0.15 * many.size).all(), f"ε=1 actions are not uniform: {counts}"
    # Under ε=1 the greedy choice plays no role: the actions differ from the argmax somewhere.
    greedy = agent.act(states, 0.0)
    assert not np.array_equal(a, greedy)


def test_epsilon_zero_is_greedy():
    agent = make_agent(False, seed=2)
    states = random_batch(32, seed=5).states
    with torch.no_grad():
        expected = agent.q(torch.as_tensor(states)).argmax(1).numpy()
    assert np.array_equal(agent.act(states, 0.0), expected)
    assert np.array_equal(agent.act(states, 0.0), expected)  # deterministic


def test_nature_cnn_takes_uint8_only():
    net = NatureCNN(N_ACTIONS)
    x = torch.zeros(2, 4, 84, 84, dtype=torch.uint8)
    assert net(x).shape == (2, N_ACTIONS)
    for dtype in (torch.float32, torch.float64, torch.int64):
        with pytest.raises(TypeError, match=r"NatureCNN takes uint8 frames.*got torch\." + str(dtype).split(".")[1]):
            net(x.to(dtype))


def test_nature_cnn_scales_inside():
    """255 in, 1.0 seen: the network must equal its layers applied to frames / 255."""
    net = NatureCNN(N_ACTIONS)
    x = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    with torch.no_grad():
        assert torch.allclose(net(x), net.net(x.float() / 255.0))


def test_a_few_learning_steps_reduce_the_loss():
    torch.manual_seed(0)
    agent = DQNAgent(N_ACTIONS, "cpu", lr=1e-3, seed=0)
    batch = random_batch(8, seed=11)
    # Fixed targets: the target network is never synced here, so the regression problem is fixed.
    losses = [agent.learn(batch) for _ in range(25)]
    assert all(np.isfinite(losses))
    start, end = np.mean(losses[:3]), np.mean(losses[-3:])
    assert end < 0.2 * start, f"loss went {start:.4g} -> {end:.4g}"


def test_learning_changes_only_the_online_network_until_sync():
    agent = DQNAgent(N_ACTIONS, "cpu", lr=1e-3, seed=0)
    target_before = {k: v.clone() for k, v in agent.target.state_dict().items()}
    for _ in range(3):
        agent.learn(random_batch(8, seed=4))
    assert all(torch.equal(v, agent.target.state_dict()[k]) for k, v in target_before.items())
    q_sd = agent.q.state_dict()
    assert any(not torch.equal(q_sd[k], target_before[k]) for k in q_sd)
    agent.sync_target()
    assert all(torch.equal(v, agent.target.state_dict()[k]) for k, v in agent.q.state_dict().items())
    # A copy, not a shared tensor: learning again moves q but not the target.
    agent.learn(random_batch(8, seed=5))
    assert any(not torch.equal(agent.q.state_dict()[k], agent.target.state_dict()[k]) for k in q_sd)
    assert not any(p.requires_grad for p in agent.target.parameters())


def test_state_dict_round_trip():
    a = DQNAgent(N_ACTIONS, "cpu", lr=1e-3, seed=0)
    for _ in range(2):
        a.learn(random_batch(8, seed=6))
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    buffer.seek(0)
    b = DQNAgent(N_ACTIONS, "cpu", lr=1e-3, seed=123)
    x = torch.as_tensor(random_batch(8, seed=9).states)
    with torch.no_grad():
        assert not torch.allclose(a.q(x), b.q(x))  # different before loading
    b.load_state_dict(torch.load(buffer, weights_only=True))
    with torch.no_grad():
        assert torch.equal(a.q(x), b.q(x)) and torch.equal(a.target(x), b.target(x))
    # The optimiser state came along too: the next step is identical.
    batch = random_batch(8, seed=10)
    assert a.learn(batch) == b.learn(batch)
    for (ka, va), (kb, vb) in zip(a.q.state_dict().items(), b.q.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)


def test_batch_to_tensors_keeps_frames_uint8():
    t = batch_to_tensors(random_batch(4), torch.device("cpu"))
    assert t["states"].dtype == torch.uint8 and t["next_states"].dtype == torch.uint8
    assert t["actions"].dtype == torch.int64 and t["rewards"].dtype == torch.float32
    assert t["dones"].dtype == torch.float32 and t["states"].shape == (4, 4, 84, 84)
    assert "weights" not in t


def test_batch_to_tensors_carries_weights_and_keeps_tensors_where_they_are():
    batch = random_batch(4)
    states = torch.from_numpy(batch.states.copy())  # device replay hands over tensors already in place
    weighted = batch._replace(states=states, weights=np.linspace(0.5, 1, 4, dtype=np.float32))
    t = batch_to_tensors(weighted, "cpu", Uploader("cpu"))
    assert t["states"] is states and torch.equal(t["next_states"], torch.from_numpy(batch.next_states))
    assert t["weights"].dtype == torch.float32 and torch.equal(t["weights"], torch.from_numpy(weighted.weights))


@pytest.mark.parametrize("upload, error, message", [
    (Uploader("meta"), ValueError, "the uploader goes to meta, the batch to cpu"),
    ("cpu", TypeError, "upload must be None or a dqn_course.device.Uploader"),
])
def test_batch_to_tensors_refuses_an_uploader_it_cannot_use(upload, error, message):
    with pytest.raises(error, match=message):
        batch_to_tensors(random_batch(2), "cpu", upload)


@pytest.mark.parametrize("states, epsilon, message", [
    (np.zeros((2, 4, 84, 84), np.float32), 0.1, "uint8 frame stacks"),
    (np.zeros((2, 4, 84, 83), np.uint8), 0.1, r"got uint8\[2, 4, 84, 83\]"),
    (np.zeros((3, 84, 84), np.uint8), 0.1, "shape \\(4, 84, 84\\)"),
    (np.zeros((0, 4, 84, 84), np.uint8), 0.1, "N >= 1"),
    (np.zeros((2, 4, 84, 84), np.uint8), 1.5, r"epsilon must be a number in \[0, 1\], got 1.5"),
    (np.zeros((2, 4, 84, 84), np.uint8), -0.1, r"epsilon must be a number in \[0, 1\], got -0.1"),
    (np.zeros((2, 4, 84, 84), np.uint8), float("nan"), r"epsilon must be a number in \[0, 1\], got nan"),
])
def test_act_refuses_states_and_epsilons_it_cannot_act_on_and_draws_nothing(states, epsilon, message):
    """Refused before anything is drawn: the agent's generator (checkpointed) is where it was."""
    agent = DQNAgent(N_ACTIONS, seed=0)
    before = agent.rng.bit_generator.state
    with pytest.raises(ValueError, match=message):
        agent.act(states, epsilon)
    assert agent.rng.bit_generator.state == before
