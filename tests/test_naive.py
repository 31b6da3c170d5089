"""Fast tests of dqn_course.lab.naive: the blog-post agent, its preprocessing traps and its memory growth."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from dqn_course.lab import naive
from dqn_course.profiling import TraceMalloc


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny single-state forwards: one thread is faster (and polite on a busy 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _frames(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=naive.RAW_FRAME_SHAPE, dtype=np.uint8) for _ in range(n)]


# -- preprocessing --------------------------------------------------------------------------------
def test_preprocess_shape_dtype_and_values():
    frame = _frames(1)[0]
    out = naive.preprocess(frame)
    assert out.shape == naive.BLOG_FRAME_SHAPE == (105, 80, 1)
    assert out.dtype == np.uint8
    assert out.nbytes == 105 * 80
    expected = np.mean(frame, axis=2).astype(np.uint8)[::2, ::2]
    np.testing.assert_array_equal(out[..., 0], expected)


def test_np_mean_is_float64_and_cast_false_keeps_it():
    frame = _frames(1)[0]
    assert np.mean(frame, axis=2).dtype == np.float64  # whatever the input dtype
    trap = naive.preprocess(frame, cast=False)
    assert trap.dtype == np.float64 and trap.shape == (105, 80, 1)
    assert trap.nbytes == 8 * naive.preprocess(frame).nbytes
    assert naive.root_buffer(trap).nbytes == 210 * 160 * 8


def test_preprocessed_state_is_a_view_of_the_whole_gray_image():
    frame = _frames(1)[0]
    out = naive.preprocess(frame)
    root = naive.root_buffer(out)
    assert out.base is not None and not out.flags["OWNDATA"]
    assert root.shape == (210, 160) and root.nbytes == 33_600 == 4 * out.nbytes
    owner = np.zeros(3)
    assert naive.root_buffer(owner) is owner


# -- the network and the agent --------------------------------------------------------------------
def test_network_sees_the_same_picture_from_raw_and_blog_frames():
    frame = _frames(1)[0]
    torch.manual_seed(0)
    blog = naive.BlogCNN(4, naive.BLOG_FRAME_SHAPE)
    raw = naive.BlogCNN(4, naive.RAW_FRAME_SHAPE)
    raw.load_state_dict(blog.state_dict())
    q_blog = naive.NaiveAgent.predict(blog, naive.preprocess(frame)[None])
    q_raw = naive.NaiveAgent.predict(raw, frame[None])
    assert q_blog.shape == (1, 4)
    np.testing.assert_allclose(q_raw, q_blog, rtol=1e-5, atol=1e-6)


def test_act_decays_epsilon_on_every_call():
    agent = naive.NaiveAgent(4, capacity=10, seed=0)
    state = agent.to_state(_frames(1)[0])
    for _ in range(10):
        a = agent.act(state)
        assert 0 <= a < 4
    assert agent.eps == pytest.approx(0.95**10)
    for _ in range(200):
        agent.act(state)
    assert agent.eps == 0.01


def test_soft_target_update_every_step():
    agent = naive.NaiveAgent(4, capacity=10, seed=0)
    before = [t.clone() for t in agent.target_model.parameters()]
    online = [p.detach().clone() for p in agent.model.parameters()]
    agent.train_target()
    for t, b, p in zip(agent.target_model.parameters(), before, online):
        torch.testing.assert_close(t, 0.875 * b + 0.125 * p)


def test_replay_does_one_forward_per_state_and_learns():
    agent = naive.NaiveAgent(4, capacity=100, seed=0)
    frames = _frames(21)
    state = agent.to_state(frames[0])
    for i, f in enumerate(frames[1:]):
        new_state = agent.to_state(f)
        agent.remember(state, i % 4, 1.0, new_state, done=(i % 5 == 0))
        state = new_state
    assert agent.replay(32) is None  # fewer transitions than a batch: nothing happens
    calls = []
    hook = agent.target_model.register_forward_hook(lambda m, inp, out: calls.append(inp[0].shape[0]))
    before = [p.detach().clone() for p in agent.model.parameters()]
    twin = random.Random()
    twin.setstate(agent.py_rng.getstate())  # draws the same rows replay() will draw
    rows = twin.sample(agent.memory.memory, 8)
    loss = agent.replay(8)
    hook.remove()
    n_done = sum(bool(r[4]) for r in rows)
    assert calls == [1] * (2 * 8 - n_done)  # one state per forward: Q(s) always, Q(s') unless done
    assert np.isfinite(loss)
    assert any(not torch.equal(p, b) for p, b in zip(agent.model.parameters(), before))


def test_agent_refuses_unknown_frames():
    with pytest.raises(ValueError):
        naive.NaiveAgent(4, frames="gray84")


# -- memory growth: references vs copies -------------------------------------------------------------
def _fill(copy_states: bool, n: int = 150) -> tuple[int, naive.NaiveAgent]:
    agent = naive.NaiveAgent(4, capacity=1_000, seed=0)
    frames = _frames(n + 1)
    obs = frames[0]
    state = agent.to_state(obs)
    with TraceMalloc() as tm:
        for next_obs in frames[1:]:
            new_state = agent.to_state(next_obs)
            if copy_states:  # blog code that preprocesses obs and next_obs separately
                agent.remember(agent.to_state(obs), 0, 0.0, agent.to_state(next_obs), False)
            else:  # state = new_state: consecutive transitions share one array
                agent.remember(state, 0, 0.0, new_state, False)
            obs, state = next_obs, new_state
        del obs, state, new_state, next_obs
    return tm.current, agent


def test_references_hold_one_gray_image_per_transition():
    n = 150
    traced, agent = _fill(copy_states=False, n=n)
    per = traced / n
    assert 33_600 <= per <= 33_600 + 2_000, per
    held = naive.held_bytes(agent.memory.memory)
    assert held == pytest.approx(traced, rel=0.03)
    # NaiveDequeMemory.nbytes follows each view to the 210x160 image it keeps alive
    assert agent.memory.nbytes == pytest.approx(traced, rel=0.05)


def test_copies_hold_two_gray_images_per_transition():
    n = 150
    traced, agent = _fill(copy_states=True, n=n)
    per = traced / n
    assert 2 * 33_600 <= per <= 2 * 33_600 + 3_000, per
    assert naive.held_bytes(agent.memory.memory) == pytest.approx(traced, rel=0.03)


# -- the measured run and the small experiments (real Breakout) -----------------------------------------
def test_run_records_readings_and_learns():
    out = naive.run(60, learn_every=20, batch_size=8, record_every=20, seed=1)
    assert out["step"] == [0, 20, 40, 60]
    assert len(out["rss"]) == len(out["traced"]) == len(out["seconds"]) == 4
    assert out["replays"] == 3 and out["memory_len"] == 60
    assert out["state_shape"] == [1, 105, 80, 1]
    assert out["held"] / 60 > 33_600  # each state keeps its 210x160 gray image
    json.dumps(out)  # plain data: picklable and JSON-able


def test_run_raw_copies_hold_two_raw_frames_per_transition():
    out = naive.run(40, frames="raw", copy_states=True, learn_every=0, record_every=40, seed=2)
    assert out["replays"] == 0
    assert 2 * 100_800 <= out["held"] / 40 <= 2 * 100_800 + 2_000
    assert out["traced"][-1] / 40 >= 2 * 100_800  # np.array copies are numpy allocations: traced


def test_fill_free_refill_traces_the_same_bytes_every_round():
    rounds = naive.fill_free_refill(n=50, rounds=2)
    assert [r["round"] for r in rounds] == [1, 2]
    for r in rounds:
        assert 2 * 50 * 8_400 <= r["traced"] <= 2 * 50 * 8_400 + 50_000


def test_tracemalloc_does_not_see_the_emulators_frames():
    out = naive.hold_env_frames(n=20)
    assert out["as returned"]["nbytes_per_frame"] == 100_800
    assert out["as returned"]["traced_per_frame"] < 5_000
    assert out["np.array copies"]["traced_per_frame"] >= 100_800


def test_cli_writes_json(tmp_path):
    path = tmp_path / "run.json"
    naive.main(["--steps", "30", "--learn-every", "0", "--record-every", "10", "--json", str(path)])
    out = json.loads(path.read_text())
    assert out["step"] == [0, 10, 20, 30] and out["copy_states"] is False
