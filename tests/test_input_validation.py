"""The Python API refuses nonsense at its edge (issue 24): configs, replay memories, checkpoint folders.

Every refusal is checked the same way: the error is raised by ``dqn_course``'s own code (the traceback's last
frame is in the package, not deep in numpy, torch or a comparison) and its message names the argument.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

import dqn_course
from dqn_course import ConfigError
from dqn_course.checkpoint import checkpoint_path, latest_checkpoint, list_checkpoints, prune_checkpoints, \
    write_checkpoint
from dqn_course.distributed import DistConfig
from dqn_course.allocation import check_run
from dqn_course.envs import learning_signals
from dqn_course.evaluate import play_games
from dqn_course.networks import NatureCNN
from dqn_course.profiling import check_fits, fit_linear
from dqn_course.replay import FoldedRingMemory, FrameSharingMemory, MultiStreamMemory
from dqn_course.train import PRESETS, Config
from dqn_course.train import ConfigError as TrainConfigError

PACKAGE = Path(dqn_course.__file__).resolve().parent
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: a CUDA device is no error here")
STACK, FRAME = 4, (6, 6)
OBS = (STACK, *FRAME)


def refused(info: pytest.ExceptionInfo, *words: str) -> str:
    """The error came from dqn_course's code and its message holds ``words``; returns the message."""
    last = Path(str(info.traceback[-1].path)).resolve()
    assert last.is_relative_to(PACKAGE), f"raised in {last}, not by the package's own check"
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    return message


# -- train.Config and distributed.DistConfig: one check, one error type ------------------------------------------

def quick(tmp_path, **change) -> Config:
    return dataclasses.replace(PRESETS["quick"], **{"out_dir": str(tmp_path / "run"), "progress": False,
                                                    "prefault": False, **change})


@pytest.mark.parametrize("change, words", [
    (dict(lr="fast"), ["--lr", "Config.lr", "'fast'", "must be a number"]),
    (dict(lr=None), ["--lr", "must be a number, got None"]),
    (dict(eps_fraction="x"), ["--eps-fraction", "Config.eps_fraction", "'x'"]),
    (dict(lr=float("nan")), ["--lr", "finite"]),
    (dict(keep_checkpoints=2.5), ["--keep-checkpoints", "whole number", "2.5"]),
    (dict(learning_starts=40.5), ["--learning-starts", "whole number", "40.5"]),
    (dict(total_steps=3000.0), ["--total-steps", "whole number", "use 3000"]),
    (dict(batch_size=True), ["--batch-size", "whole number", "True"]),
    (dict(double="false"), ["--double", "Config.double", "True or False", "'false'"]),
    (dict(progress=1), ["--progress", "True or False"]),
    (dict(seed="abc"), ["--seed", "whole number", "'abc'"]),
    (dict(seed=-1), ["--seed", ">= 0", "-1"]),
    (dict(resume=123), ["--resume", "string", "123"]),
    (dict(learning_starts=3000), ["--learning-starts 3000", "--total-steps 3000"]),
    (dict(per=True, replay_on_device=True), ["--per", "--replay-on-device"]),
    (dict(lr=-1), ["--lr must be > 0, got -1"]),
    (dict(max_grad_norm=0), ["--max-grad-norm must be > 0"]),
    (dict(eps_end=1.5), ["--eps-end must be between 0 and 1"]),
    (dict(eval_epsilon=-0.1), ["--eval-epsilon must be between 0 and 1"]),
    (dict(eval_episodes=0), ["--eval-episodes must be a positive whole number"]),
    (dict(device=3), ["--device", "string"]),
])
def test_config_refuses_bad_fields_with_the_projects_error(tmp_path, change, words):
    with pytest.raises(ConfigError) as info:
        quick(tmp_path, **change).validate()
    refused(info, *words)
    assert not (tmp_path / "run").exists()


def test_config_accepts_paths_and_numpy_numbers_as_plain_values(tmp_path):
    cfg = quick(tmp_path, out_dir=tmp_path / "run", total_steps=np.int64(3000), lr=np.float32(1e-3), double=np.True_)
    cfg.validate()
    assert cfg.out_dir == str(tmp_path / "run") and type(cfg.total_steps) is int and type(cfg.lr) is float
    assert cfg.double is True
    quick(tmp_path, eps_fraction=1, gamma=1).validate()  # a float field takes an int


def test_both_configs_share_the_check_and_the_error_type():
    assert TrainConfigError is ConfigError and issubclass(ConfigError, ValueError)
    for make in (lambda **c: dataclasses.replace(PRESETS["quick"], **c), DistConfig):
        with pytest.raises(ConfigError) as info:  # refused as the config is made
            make(gamma=5)
        refused(info, "--gamma must be between 0 and 1, got 5")
        with pytest.raises(ConfigError) as info:
            make(double="false")
        refused(info, "--double", "True or False")
        cfg = make()
        cfg.gamma = 5  # set after it was made: validate still refuses it
        with pytest.raises(ConfigError) as info:
            cfg.validate()
        refused(info, "--gamma must be between 0 and 1, got 5")


def test_distributed_config_refuses_what_it_used_to_accept():
    for change, word in [(dict(lr=-1), "--lr"), (dict(epsilon=-0.5), "--epsilon"), (dict(eval_epsilon=3), "--eval-"),
                         (dict(max_episode_steps=0), "--max-episode-steps"), (dict(num_workers=2.0), "--workers")]:
        with pytest.raises(ConfigError) as info:
            dataclasses.replace(DistConfig(), **change).validate()
        refused(info, word)
    DistConfig(epsilon=None, max_episode_steps=None, max_learning_seconds=None).validate()  # Optional: None is fine


@NO_CUDA
def test_a_cuda_device_without_a_gpu_gets_the_clis_message(tmp_path):
    with pytest.raises(ConfigError) as info:
        check_run(quick(tmp_path, device="cuda"))
    refused(info, "--device cuda asks for a CUDA GPU", "--device cpu")
    for make in (lambda: FrameSharingMemory(10, OBS, device="cuda"),
                 lambda: MultiStreamMemory(20, 2, OBS, device=torch.device("cuda"))):
        with pytest.raises(ConfigError) as info:
            make()
        refused(info, "device='cuda' asks for a CUDA GPU", "device='cpu'")


# -- memory constructors: obs_shape, seed and device before anything else runs -----------------------------------

@pytest.mark.parametrize("kwargs, words", [
    (dict(obs_shape=None), ["obs_shape", "None"]),
    (dict(obs_shape="abc"), ["obs_shape", "'abc'"]),
    (dict(obs_shape=(4, 84.5, 84)), ["obs_shape", "whole numbers", "84.5"]),
    (dict(obs_shape=(4,)), ["obs_shape"]),
    (dict(obs_shape=(4, 0, 6)), ["obs_shape", "positive"]),
    (dict(seed="x"), ["seed", "'x'"]),
    (dict(seed=-3), ["seed", "-3"]),
    (dict(seed=1.5), ["seed", "1.5"]),
    (dict(device="tpu9"), ["device='tpu9'", "is not a torch device"]),
    (dict(device=7), ["device", "7"]),
])
@pytest.mark.parametrize("cls", ["frame_sharing", "multi_stream"])
def test_memory_constructors_check_their_arguments_first(cls, kwargs, words):
    kwargs = {"obs_shape": OBS, **kwargs}
    with pytest.raises(ValueError) as info:
        if cls == "frame_sharing":
            FrameSharingMemory(20, **kwargs)
        else:
            MultiStreamMemory(40, 2, **kwargs)
    refused(info, *words)


def test_multi_stream_refuses_a_fractional_stream_count():
    with pytest.raises(ValueError) as info:
        MultiStreamMemory(40, 2.0, OBS)
    refused(info, "num_streams", "2.0")


# -- add: what would corrupt the ring ---------------------------------------------------------------------------

def frame(c: int) -> np.ndarray:
    f = np.full(FRAME, 1 + c % 250, np.uint8)
    f[0, 0] = c % 256
    return f


def episode(start: int, steps: int):
    """``steps`` transitions of one episode with a padded first state; frame counters from ``start``."""
    state = np.stack([frame(start)] * STACK)
    out = []
    for i in range(steps):
        nxt = np.concatenate([state[1:], frame(start + 1 + i)[None]])
        out.append((state, 1, 0.5, nxt, i == steps - 1, i == steps - 1))
        state = nxt
    return out


def filled_memory(steps=5, end=False) -> tuple[FrameSharingMemory, list]:
    memory = FrameSharingMemory(30, OBS, seed=0)
    transitions = episode(0, steps)
    for t in transitions[:-1] if not end else transitions:
        memory.add(*t)
    return memory, transitions


def unchanged(memory: FrameSharingMemory, before: dict) -> None:
    after = memory.state_dict()
    for key, value in before.items():
        assert np.array_equal(np.asarray(value), np.asarray(after[key])), f"{key} changed by a refused add"


def copy_state(memory) -> dict:
    return {k: np.array(v, copy=True) for k, v in memory.state_dict().items()}


def test_next_state_must_continue_state():
    memory, transitions = filled_memory()
    state, action, reward, nxt, done, end = transitions[-1]
    spoiled = nxt.copy()
    spoiled[0] = frame(99)  # not state[1]
    before = copy_state(memory)
    with pytest.raises(ValueError) as info:
        memory.add(state, action, reward, spoiled, done, end)
    refused(info, "next_state does not continue state")
    unchanged(memory, before)
    memory.add(*transitions[-1])  # the real one still goes in


def test_a_new_episode_is_checked_too():
    memory, _ = filled_memory(end=True)
    state, *rest = episode(100, 2)[0]
    bad_next = rest[2].copy()
    bad_next[1] = frame(77)
    with pytest.raises(ValueError) as info:
        memory.add(state, rest[0], rest[1], bad_next, rest[3], rest[4])
    refused(info, "next_state does not continue state")


def test_a_mid_episode_state_must_equal_what_is_stored():
    memory, transitions = filled_memory()
    state, action, reward, nxt, done, end = transitions[-1]
    spoiled = state.copy()
    spoiled[0] = frame(55)  # its newest frame matches; an older one does not
    before = copy_state(memory)
    with pytest.raises(ValueError) as info:
        memory.add(spoiled, action, reward, np.concatenate([spoiled[1:], nxt[-1:]]), done, end)
    refused(info, "state does not continue the previous transition's next_state", "episode_end=True")
    unchanged(memory, before)


def test_a_lost_life_is_no_episode_end_and_still_continues():
    memory = FrameSharingMemory(30, OBS, seed=0)
    for i, t in enumerate(episode(0, 8)):
        memory.add(*t[:4], i == 3, t[5])  # done (life lost) at step 3, the game goes on
    assert len(memory) == 8


@pytest.mark.parametrize("field, value, error, words", [
    ("done", "no", TypeError, ["done", "'no'"]),
    ("done", float("nan"), TypeError, ["done", "nan"]),
    ("done", 2, TypeError, ["done", "2"]),
    ("episode_end", "yes", TypeError, ["episode_end", "'yes'"]),
    ("reward", "1.0", TypeError, ["reward", "'1.0'"]),
    ("reward", True, TypeError, ["reward", "True"]),
    ("reward", 1e40, ValueError, ["reward", "float32"]),
    ("reward", float("inf"), ValueError, ["reward must be finite"]),
])
def test_flags_and_rewards_are_refused_when_not_what_they_say(field, value, error, words):
    memory, transitions = filled_memory()
    args = dict(zip(["state", "action", "reward", "next_state", "done", "episode_end"], transitions[-1]))
    args[field] = value
    before = copy_state(memory)
    with pytest.raises(error) as info:
        memory.add(**args)
    refused(info, *words)
    unchanged(memory, before)


def test_bool_like_flags_and_numpy_rewards_are_accepted():
    memory = FrameSharingMemory(30, OBS, seed=0)
    for i, (s, a, _, s2, _, _) in enumerate(episode(0, 6)):
        memory.add(s, a, [np.float32(1), 0, np.float64(-1.0), np.array(0.5), 1, 0][i], s2,
                   [np.False_, 0, False, np.array(False), 1, np.True_][i], [False, 0, np.False_, 0, 1, True][i])
    assert memory.sample(4).rewards.dtype == np.float32


def test_folded_ring_refuses_a_next_state_that_is_no_shift():
    memory = FoldedRingMemory(10, OBS, seed=0)
    state, a, r, nxt, d, e = episode(0, 1)[0]
    with pytest.raises(ValueError) as info:
        memory.add(state, a, r, np.stack([frame(9)] * STACK), d, e)
    refused(info, "next_state does not continue state")


# -- sample: integer batch sizes only ---------------------------------------------------------------------------

@pytest.mark.parametrize("batch_size", [2.5, True, "4", None, np.float64(4)])
@pytest.mark.parametrize("cls", ["frame_sharing", "multi_stream"])
def test_sample_takes_only_integer_batch_sizes(cls, batch_size):
    if cls == "frame_sharing":
        memory, _ = filled_memory(end=True)
    else:
        memory = MultiStreamMemory(60, 2, OBS, seed=0)
        for t in episode(0, 5):
            memory.add(*t, stream=0)
    with pytest.raises(TypeError) as info:
        memory.sample(batch_size)
    refused(info, "batch_size", repr(batch_size))
    assert len(memory.sample(np.int64(3)).ids) == 3


# -- MultiStreamMemory: one entry per stream, streams in range ----------------------------------------------------

def vector_step(n: int, start: int = 0):
    states = np.stack([np.stack([frame(start + i)] * STACK) for i in range(n)])
    nexts = np.concatenate([states[:, 1:], np.stack([frame(start + 50 + i) for i in range(n)])[:, None]], axis=1)
    return states, np.ones(n, np.int64), np.zeros(n), nexts, np.zeros(n, bool), np.zeros(n, bool)


def test_add_batch_needs_one_entry_per_stream():
    memory = MultiStreamMemory(40, 2, OBS, seed=0)
    with pytest.raises(ValueError) as info:
        memory.add_batch(*vector_step(3))
    refused(info, "states has 3 entries", "2 streams")
    states, actions, rewards, nexts, dones, ends = vector_step(2)
    with pytest.raises(ValueError) as info:
        memory.add_batch(states, actions[:1], rewards, nexts, dones, ends)
    refused(info, "actions has 1 entries")
    for mask in (np.array([True, False, True]), np.array([1, 0])):
        with pytest.raises(ValueError) as info:
            memory.add_batch(*vector_step(2), mask=mask)
        refused(info, "mask", "2 bools")
    assert memory.added == 0 and len(memory) == 0
    memory.add_batch(*vector_step(2), mask=[True, False])
    assert memory.added == 1


@pytest.mark.parametrize("stream", [-1, 2, 1.0, True])
def test_add_and_end_episode_refuse_a_stream_out_of_range(stream):
    memory = MultiStreamMemory(40, 2, OBS, seed=0)
    with pytest.raises(ValueError) as info:
        memory.add(*episode(0, 1)[0], stream=stream)
    refused(info, "stream", *(["[0, 2)"] if stream == 2 else []))
    with pytest.raises(ValueError) as info:
        memory.end_episode(stream)
    refused(info, "stream")
    assert memory.added == 0 and all(s.written == 0 for s in memory.streams)


# -- load_state_dict: invariants, not only shapes -----------------------------------------------------------------

def spoiled_state(change) -> tuple[FrameSharingMemory, dict]:
    memory, _ = filled_memory(steps=6)
    state = copy_state(memory)
    change(state)
    return FrameSharingMemory(30, OBS, seed=1), state


def _all_valid(s):
    s["valid"][:] = True
    s["num_valid"] = np.array(30, np.int64)


@pytest.mark.parametrize("change, words", [
    (_all_valid, ["valid slots outside"]),
    (lambda s: s.update(written=np.array(-50, np.int64), head=np.array(-50 % 30, np.int64)), ["negative", "-50"]),
    (lambda s: s.update(added=np.array(-5, np.int64)), ["negative", "added -5"]),
    (lambda s: s.update(in_episode=np.array("yes")), ["in_episode"]),
    (lambda s: s.update(written=np.array(7.0)), ["written", "float64"]),
    (lambda s: s["ids"].__setitem__(0, 10**6), ["ids"]),
    (lambda s: s["valid"].__setitem__((int(s["head"]) - 1) % 30, True) or s.update(
        num_valid=np.array(int(s["num_valid"]) + 1, np.int64)), ["newest frame"]),
])
def test_load_state_dict_checks_invariants(change, words):
    memory, state = spoiled_state(change)
    before = copy_state(memory)
    with pytest.raises(ValueError) as info:
        memory.load_state_dict(state)
    refused(info, "cannot load", *words)
    unchanged(memory, before)


def test_a_loaded_memory_checks_the_episode_it_continues():
    saved, transitions = filled_memory(steps=6)
    memory = FrameSharingMemory(30, OBS, seed=1)
    memory.load_state_dict(copy_state(saved))
    state, action, reward, nxt, done, end = transitions[-1]
    spoiled = state.copy()
    spoiled[1] = frame(66)
    with pytest.raises(ValueError) as info:
        memory.add(spoiled, action, reward, np.concatenate([spoiled[1:], nxt[-1:]]), done, end)
    refused(info, "does not continue")
    memory.add(*transitions[-1])  # the stacks rebuilt from the ring are what the saved memory had seen


# -- checkpoint folders: only our own names -----------------------------------------------------------------------

def test_list_and_prune_checkpoints_leave_other_files_alone(tmp_path):
    for step in (100, 200, 300):
        write_checkpoint(checkpoint_path(tmp_path, step), {"x": np.arange(3)}, {"step": step})
    strays = ["state-abc.ckpt", "state-.ckpt", "state-12x.ckpt", "state-1.ckpt.bak", "notes-state-5.ckpt",
              "state-abc.ckpt.tmp"]
    for name in strays:
        (tmp_path / name).write_text("mine")
    assert [p.name for p in list_checkpoints(tmp_path)] == [checkpoint_path(tmp_path, s).name for s in (100, 200, 300)]
    prune_checkpoints(tmp_path, keep=1, step=300)  # what the training loop calls after each checkpoint
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*strays, checkpoint_path(tmp_path, 300).name])
    assert latest_checkpoint(tmp_path)[1] == {"step": 300}


# -- what notebooks call: the agent and the env ------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, words", [
    (dict(n_actions=0), ["n_actions", ">= 1"]),
    (dict(n_actions=4.0), ["n_actions", "whole number"]),
    (dict(lr="fast"), ["lr", "'fast'"]),
    (dict(lr=0), ["lr", "> 0"]),
    (dict(gamma=1.5), ["gamma", "in [0, 1]"]),
    (dict(double="false"), ["double", "True or False"]),
    (dict(seed="abc"), ["seed", "'abc'"]),
    (dict(device="tpu9"), ["device='tpu9'", "is not a torch device"]),
])
def test_the_agent_refuses_nonsense(kwargs, words):
    from dqn_course.agent import DQNAgent

    with pytest.raises(ValueError) as info:
        DQNAgent(**{"n_actions": 4, **kwargs})
    refused(info, *words)


@pytest.mark.parametrize("kwargs, words", [
    (dict(seed="abc"), ["seed", "'abc'"]),
    (dict(seed=-1), ["seed", ">= 0"]),
    (dict(frame_stack=0), ["frame_stack", ">= 1"]),
    (dict(max_episode_steps=0), ["max_episode_steps", ">= 1"]),
    (dict(max_episode_steps=2.5), ["max_episode_steps", "whole number"]),
])
def test_make_breakout_refuses_nonsense(kwargs, words):
    from dqn_course.envs import make_breakout

    with pytest.raises(ValueError) as info:
        make_breakout(**kwargs)
    refused(info, *words)


# -- what a probe of functions no issue named let through: counts, probabilities, fractions, pairs, shapes ---------

@pytest.mark.parametrize("call, name", [
    (lambda: NatureCNN(0), "n_actions"),
    (lambda: play_games(None, games=0, seed=0, epsilon=0.05, max_steps=10), "games"),
    (lambda: play_games(None, games=1, seed=0, epsilon=2, max_steps=10), "epsilon"),
    (lambda: check_fits(10, fraction=2), "fraction"),
    (lambda: check_fits(10, fraction=0), "fraction"),
    (lambda: fit_linear([0, 1, 2], [5, 6]), "values"),
    (lambda: FoldedRingMemory(100, obs_shape=(84, 84)), "obs_shape"),
    (lambda: FrameSharingMemory(100, obs_shape=(4, 84, 84, 1)), "obs_shape"),
    (lambda: learning_signals(np.zeros(3), np.zeros(3, bool), np.zeros(2, bool), np.zeros(3, bool)), "truncated"),
])
def test_counts_probabilities_fractions_pairs_and_shapes_are_refused_naming_the_parameter(call, name):
    with pytest.raises(ValueError) as info:
        call()
    assert name in str(info.value)
