"""The learning rule as replaceable functions (targets, loss, ε schedule), the updates' diagnostics, and the lab's
helpers that train a learner's rule beside the library's and plot what log.csv records."""
from __future__ import annotations

import csv
import dataclasses
import importlib.util

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dqn_course import ConfigError
from dqn_course.contracts import ArgumentError
from dqn_course.agent import UPDATE_STATS, DQNAgent, batch_to_tensors, grad_norm, td_loss, td_targets
from dqn_course.learner import UpdateStats
from dqn_course.replay import Batch
from dqn_course.records import LOG_FIELDS
from dqn_course.train import PRESETS, epsilon_at, linear_epsilon, train

# A run of a few hundred updates: enough to log games with diagnostics, small enough for seconds.
TINY = dataclasses.replace(PRESETS["quick"], total_steps=900, learning_starts=300, eval_every=900, eval_episodes=1,
                           eval_max_steps=100, checkpoint_every=900, progress=False)


def batch(n=16, seed=0) -> Batch:
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, (n, 5, 84, 84), dtype=np.uint8)
    return Batch(frames[:, :4], rng.integers(0, 4, n), rng.choice([-1.0, 0.0, 1.0], n).astype(np.float32),
                 frames[:, 1:], (rng.random(n) < 0.3).astype(np.float32), np.arange(n))


def read_rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# -- the agent's update and its stats --------------------------------------------------------------------------

def test_update_returns_the_loss_the_mean_max_q_and_the_norm_before_clipping():
    agent = DQNAgent(4, seed=1, max_grad_norm=1e-4)  # so small that every update is clipped
    b = batch()
    t = batch_to_tensors(b, agent.device)
    with torch.no_grad():
        q = agent.q(t["states"])
        target = agent.batched_targets(t)
    expected_loss = F.smooth_l1_loss(q.gather(1, t["actions"].long().unsqueeze(1)).squeeze(1), target)
    probe = DQNAgent(4, seed=1, max_grad_norm=None)  # the same weights: its gradient norm is the unclipped one
    probe_loss = td_loss(probe.q(t["states"]), t["actions"], target)
    probe_loss.backward()
    unclipped = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in probe.q.parameters()]))

    stats = agent.update(b)
    assert stats.shape == (len(UPDATE_STATS),) and not stats.requires_grad
    loss, q_max, norm = stats.tolist()
    assert loss == pytest.approx(float(expected_loss), rel=1e-5)
    assert q_max == pytest.approx(float(q.max(1).values.mean()), rel=1e-5)
    assert norm == pytest.approx(float(unclipped), rel=1e-4) and norm > 1e-4, "the norm is read before clipping"
    after = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in agent.q.parameters()]))
    assert float(after) == pytest.approx(1e-4, rel=1e-3), "and the gradient that stepped was clipped"


def test_grad_norm_without_clipping_is_the_global_norm_and_leaves_the_gradient_alone():
    net = torch.nn.Linear(3, 2)
    net(torch.ones(4, 3)).pow(2).sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    expected = torch.sqrt(sum((g ** 2).sum() for g in grads))
    assert float(grad_norm(net.parameters(), None)) == pytest.approx(float(expected), rel=1e-6)
    assert all(torch.equal(p.grad, g) for p, g in zip(net.parameters(), grads))


def test_the_agent_learns_by_the_rule_it_is_given():
    calls = []

    def my_targets(rewards, dones, next_states, online, target, gamma, double=False):
        calls.append("targets")
        return td_targets(rewards, dones, next_states, online, target, gamma, double)

    def my_loss(q_values, actions, targets):
        calls.append("loss")
        return 2 * td_loss(q_values, actions, targets)

    mine, library = DQNAgent(4, seed=2, targets=my_targets, loss=my_loss), DQNAgent(4, seed=2)
    b = batch(seed=3)
    assert mine.learn(b) == pytest.approx(2 * library.learn(b), rel=1e-5)
    assert calls == ["targets", "loss"]


@pytest.mark.parametrize("kwargs, message", [({"targets": "td_targets"}, "targets must be a function"),
                                             ({"loss": 1.0}, "loss must be a function")])
def test_the_agent_refuses_a_rule_that_is_no_function(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DQNAgent(4, **kwargs)


def test_prioritized_weights_refuse_a_loss_that_cannot_take_them():
    agent = DQNAgent(4, seed=0, loss=lambda q, a, y: td_loss(q, a, y))
    with pytest.raises(ValueError, match="cannot take those weights"):
        agent.update(batch()._replace(weights=np.ones(16, np.float32)))


def test_update_stats_average_since_the_last_read_and_repeat_it_when_nothing_came():
    stats = UpdateStats(torch.device("cpu"))
    assert stats.mean() is None
    stats.add(torch.tensor([1.0, 2.0, 3.0]))
    stats.add(torch.tensor([3.0, 4.0, 5.0]))
    assert stats.mean() == {"loss": 2.0, "q_max": 3.0, "grad_norm": 4.0}
    assert stats.count == 0 and stats.mean() == {"loss": 2.0, "q_max": 3.0, "grad_norm": 4.0}
    stats.add(torch.tensor([5.0, 5.0, 5.0]))
    assert stats.mean() == {"loss": 5.0, "q_max": 5.0, "grad_norm": 5.0}


# -- the ε schedule --------------------------------------------------------------------------------------------

def test_linear_epsilon_falls_from_start_to_end_then_holds():
    assert linear_epsilon(0, 1.0, 0.1, 100) == 1.0
    assert linear_epsilon(50, 1.0, 0.1, 100) == pytest.approx(0.55)
    assert linear_epsilon(100, 1.0, 0.1, 100) == pytest.approx(0.1)
    assert linear_epsilon(10_000, 1.0, 0.1, 100) == pytest.approx(0.1)


def test_epsilon_at_hands_the_schedule_the_runs_settings():
    seen = []
    cfg = PRESETS["quick"]
    assert epsilon_at(7, cfg, lambda *args: seen.append(args) or 0.25) == 0.25
    assert seen == [(7, cfg.eps_start, cfg.eps_end, int(cfg.eps_fraction * cfg.total_steps))]


# -- train() with a learner's functions --------------------------------------------------------------------------

@pytest.mark.slow
def test_train_with_the_same_rule_in_other_functions_plays_the_same_games(tmp_path):
    library = train(dataclasses.replace(TINY, out_dir=str(tmp_path / "library")))
    copies = train(dataclasses.replace(TINY, out_dir=str(tmp_path / "copies")),
                   targets=lambda *args: td_targets(*args), loss=lambda *args: td_loss(*args),
                   epsilon=lambda *args: linear_epsilon(*args))
    assert library["updates"] == copies["updates"] > 0
    a, b = read_rows(tmp_path / "library" / "log.csv"), read_rows(tmp_path / "copies" / "log.csv")
    assert len(a) > 1 and list(a[0]) == LOG_FIELDS
    same = ("step", "episode_return", "loss", "q_max", "grad_norm", "epsilon", "replay_size")
    assert [[r[k] for k in same] for r in a] == [[r[k] for k in same] for r in b]


@pytest.mark.slow
def test_train_acts_by_the_learners_schedule(tmp_path):
    train(dataclasses.replace(TINY, total_steps=400, out_dir=str(tmp_path)), epsilon=lambda step, *_: 0.5)
    rows = read_rows(tmp_path / "log.csv")
    assert rows and {r["epsilon"] for r in rows} == {"0.5"}


@pytest.mark.parametrize("kwargs, message", [({"targets": None}, "train: targets must be a function .*, got None"),
                                             ({"epsilon": 0.1}, "train: epsilon must be a function .*, got 0.1")])
def test_train_refuses_a_rule_that_is_no_function_before_writing(tmp_path, kwargs, message):
    with pytest.raises(ArgumentError, match=message):
        train(dataclasses.replace(TINY, out_dir=str(tmp_path / "run")), **kwargs)
    assert not (tmp_path / "run").exists()


def test_train_refuses_a_learners_loss_with_prioritized_replay(tmp_path):
    with pytest.raises(ConfigError, match="use the default loss with PER"):
        train(dataclasses.replace(TINY, per=True, out_dir=str(tmp_path / "run")),
              loss=lambda *args: td_loss(*args))
    assert not (tmp_path / "run").exists()


# -- TensorBoard -------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_tensorboard_gets_the_scalars_of_the_log_and_the_evaluations(tmp_path):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    train(dataclasses.replace(TINY, out_dir=str(tmp_path), tensorboard=True))
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {f"train/{c}" for c in ("episode_return", "loss", "q_max", "grad_norm", "epsilon", "replay_size")} <= tags
    assert "eval/mean_return" in tags
    rows = read_rows(tmp_path / "log.csv")
    logged = [(int(r["step"]), float(r["q_max"])) for r in rows if r["q_max"]]
    written = [(e.step, e.value) for e in events.Scalars("train/q_max")]
    assert [s for s, _ in written] == [s for s, _ in logged]
    assert [v for _, v in written] == pytest.approx([v for _, v in logged], rel=1e-5)  # the CSV's own numbers


def test_tensorboard_without_its_package_is_refused_with_the_install_line(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else real(name, *a))
    with pytest.raises(ConfigError, match=r'pip install "dqn-course\[tensorboard\]"'):
        dataclasses.replace(TINY, out_dir=str(tmp_path / "run"), tensorboard=True).validate()
