"""Breakout with the DQN preprocessing: shapes, padding, determinism, lives, rewards; random_frames."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from dqn_course import envs
from dqn_course.envs import make_breakout, make_raw_breakout, make_vector_breakout, random_frames
from dqn_course.replay import FrameSharingMemory


@pytest.fixture(scope="module")
def random_game():
    """One whole game of random play (seeded): observations, rewards, infos, flags."""
    env = make_breakout(seed=3)
    first, info0 = env.reset(seed=3)
    steps = []
    while True:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        steps.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            break
        assert len(steps) < 30_000, "a random game did not end"
    env.close()
    return first, info0, steps


def test_observation_space_and_first_observation(random_game):
    first, info0, steps = random_game
    assert first.shape == (4, 84, 84) and first.dtype == np.uint8
    # Repeat padding: the first stack is four copies of the first frame.
    assert all(np.array_equal(first[0], first[i]) for i in range(1, 4))
    assert first.any(), "the first frame is blank"
    assert info0["life_lost"] is False and info0["lives"] == 5
    obs = steps[0][0]
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    assert np.array_equal(obs[:3], first[1:]), "a step must shift the stack by one frame"
    for (prev, *_), (nxt, *_) in zip(steps[:50], steps[1:51]):
        assert np.array_equal(nxt[:3], prev[1:])


def test_every_step_reports_life_lost(random_game):
    _, _, steps = random_game
    assert all(isinstance(info["life_lost"], bool) for *_, info in steps)


def test_a_lost_life_does_not_end_the_game(random_game):
    _, _, steps = random_game
    lost = [i for i, (_, _, term, trunc, info) in enumerate(steps) if info["life_lost"]]
    mid_game = [i for i in lost if not steps[i][2] and not steps[i][3]]
    assert len(mid_game) >= 1, "no life was lost before the game ended"
    lives = [info["lives"] for *_, info in steps]
    for i in lost:
        before = lives[i - 1] if i else 5
        assert lives[i] == before - 1
    assert all(not info["life_lost"] for i, (*_, info) in enumerate(steps) if i not in set(lost))
    assert len(lost) == 5  # Breakout has five lives; the game ends with the last one


def test_a_whole_game_ends_with_episode_statistics(random_game):
    _, _, steps = random_game
    *_, (obs, _, terminated, truncated, info) = steps
    assert terminated and not truncated and info["lives"] == 0
    assert "episode" in info
    total = sum(r for _, r, *_ in steps)
    assert float(info["episode"]["r"]) == pytest.approx(total)
    # The automatic FIRE after reset is one step of the game too.
    assert len(steps) <= int(info["episode"]["l"]) <= len(steps) + 1


def test_rewards_are_unclipped_game_points(random_game):
    _, _, steps = random_game
    rewards = np.array([r for _, r, *_ in steps], dtype=float)
    assert (rewards >= 0).all() and (rewards == np.round(rewards)).all()
    assert rewards.sum() > 0, "this seed's random game scores (checked when the test was written)"
    # Nothing in the wrapper stack clips or rescales rewards (a 4- or 7-point brick stays 4 or 7).
    env = make_breakout(seed=0)
    layer, names = env, []
    while isinstance(layer, gym.Wrapper):
        names.append(type(layer).__name__)
        layer = layer.env
    env.close()
    assert not [n for n in names if "Reward" in n and n != "RecordEpisodeStatistics"], names
    assert "AtariPreprocessing" in names and "FrameStackObservation" in names


def test_same_seed_same_game():
    def play(seed):
        env = make_breakout(seed=seed)
        obs, _ = env.reset(seed=seed)
        frames, rewards = [obs], []
        actions = np.random.default_rng(0).integers(0, env.action_space.n, 150)
        for a in actions:
            obs, r, term, trunc, _ = env.step(int(a))
            frames.append(obs)
            rewards.append(r)
            if term or trunc:
                obs, _ = env.reset()
        env.close()
        return np.stack(frames), rewards

    a, ra = play(5)
    b, rb = play(5)
    assert np.array_equal(a, b) and ra == rb
    # Another seed gives other no-op starts. Breakout's screen does not move before FIRE, so some
    # seeds still play the same game (5 and 6 do); 5 and 7 do not (checked when written).
    c, _ = play(7)
    assert not np.array_equal(a, c), "another seed should give another game (different no-op starts)"


def test_frame_stack_one_gives_single_frames():
    env = make_breakout(seed=0, frame_stack=1)
    obs, _ = env.reset(seed=0)
    env.close()
    assert obs.shape == (84, 84) and obs.dtype == np.uint8


def test_max_episode_steps_truncates():
    env = make_breakout(seed=0, max_episode_steps=20)
    env.reset(seed=0)
    for _ in range(20):
        _, _, term, trunc, info = env.step(0)  # NOOP: the ball is in play but nothing ends the game this soon
    env.close()
    assert trunc and not term


def test_raw_breakout_is_full_rgb():
    env = make_raw_breakout(seed=0)
    obs, _ = env.reset(seed=0)
    obs2, *_ = env.step(1)
    env.close()
    assert obs.shape == (210, 160, 3) and obs.dtype == np.uint8
    assert obs2.shape == (210, 160, 3) and obs2.dtype == np.uint8


def test_vector_breakout_steps_two_envs():
    env = make_vector_breakout(2, seed=0)
    try:
        for _ in range(5):
            obs, rewards, terminated, truncated, info = env.step(np.array([1, 3]))
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
        assert rewards.shape == terminated.shape == truncated.shape == (2,)
        assert np.asarray(info["lives"]).shape == (2,)
        assert env.single_observation_space.shape == (4, 84, 84) and env.single_action_space.n == 4
    finally:
        env.close()


@pytest.mark.parametrize("backend", ["gymnasium", "ale"])
def test_make_vector_envs_backends_agree_on_shapes(backend):
    env = envs.make_vector_envs(2, seed=0, backend=backend)
    try:
        obs, *_, info = env.step(np.array([1, 1]))
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
        assert np.asarray(info["lives"]).shape == (2,)
    finally:
        env.close()
    with pytest.raises(ValueError, match="backend"):
        envs.make_vector_envs(1, backend="nope")


def test_random_frames_feed_the_frame_sharing_memory():
    n = 400
    transitions = random_frames(n, seed=0)
    assert len(transitions) == n
    s, a, r, s2, done, end = transitions[0]
    assert s.shape == (4, 84, 84) and s.dtype == np.uint8 and isinstance(a, int) and isinstance(r, float)
    assert any(t[4] for t in transitions), "400 random steps should lose a life"
    # state = next_state is passed on by reference, as a training loop does.
    assert all(transitions[i][3] is transitions[i + 1][0] for i in range(n - 1) if not transitions[i][5])
    memory = FrameSharingMemory(n + 50, (4, 84, 84), seed=0)
    for t in transitions:
        memory.add(*t)
    assert len(memory) == n
    seen = set()
    for _ in range(20):
        batch = memory.sample(64)
        for k, i in enumerate(batch.ids):
            s, a, r, s2, done, _ = transitions[i]
            assert np.array_equal(batch.states[k], s) and np.array_equal(batch.next_states[k], s2)
            assert batch.actions[k] == a and batch.rewards[k] == np.float32(r) and batch.dones[k] == float(done)
        seen |= set(batch.ids.tolist())
    assert len(seen) > n // 2


def test_scale_obs_hands_out_the_same_frames_as_float32_in_0_1():
    """``make_breakout(scale_obs=True)`` (notebook 02's floats as they leave the environment): the same game, each
    frame float32 at 4 bytes a pixel, equal to the uint8 frame over 255; the default stays uint8."""
    plain, scaled = make_breakout(seed=5), make_breakout(seed=5, scale_obs=True)
    for env in (plain, scaled):
        env.action_space.seed(5)
    pairs = [(plain.reset(seed=5)[0], scaled.reset(seed=5)[0])]
    for _ in range(30):
        action = plain.action_space.sample()
        scaled.action_space.sample()
        pairs.append((plain.step(action)[0], scaled.step(action)[0]))
    plain.close(), scaled.close()
    for frames, floats in pairs:
        assert frames.dtype == np.uint8 and floats.dtype == np.float32 and floats.shape == frames.shape == (4, 84, 84)
        assert floats.nbytes == 4 * frames.nbytes and 0 <= floats.min() and floats.max() <= 1
        assert np.allclose(floats, frames / 255, atol=1e-6)
    with pytest.raises(TypeError):
        make_breakout(seed=0, scale_obs=1)
