"""Notebook 08's self-check (right passes, wrong raises with a hint, None only prints) and dqn_course.lab.per_demo."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from dqn_course.lab import checks
from dqn_course.lab.bench import calls_per_second
from dqn_course.lab.per_demo import VectorReplay, filled_trees, interleaved_ms, run_cartpole
from dqn_course.per import PrioritizedMemory, importance_weights

# -- the exercise: the learner's is_weights(probabilities, n, beta) ----------------------------------------


def right_weights(probabilities, n, beta):
    w = (n * np.asarray(probabilities, dtype=np.float64)) ** -beta
    return w / w.max()


def float32_weights(probabilities, n, beta):  # another right answer: float32, as PrioritizedMemory hands them
    p = np.array(probabilities, np.float32)
    w = np.power(n * p, -np.float32(beta))
    return w / np.max(w)


def loop_weights(probabilities, n, beta):  # a list, one weight at a time
    raw = [(n * p) ** -beta for p in probabilities]
    return [w / max(raw) for w in raw]


@pytest.mark.parametrize("answer", [right_weights, float32_weights, loop_weights])
def test_is_weights_right(answer, capsys):
    assert checks.check_is_weights(answer) is True
    assert capsys.readouterr().out.startswith("✓")


def page_wrapper(probabilities, n, beta):
    return importance_weights(probabilities, n, beta)


@pytest.mark.parametrize("answer", [
    importance_weights,  # the course's own
    functools.partial(importance_weights),
    page_wrapper,  # a def that calls it
    lambda p, n, b: importance_weights(p, n, b),
    PrioritizedMemory,  # a class the page imports
    np.power,  # a library function
])
def test_is_weights_refuses_the_course_and_the_pages_imports(answer):
    with pytest.raises(AssertionError, match="write it yourself"):
        checks.check_is_weights(answer)


def unnormalised(probabilities, n, beta):
    return (n * np.asarray(probabilities)) ** -beta


def wrong_sign(probabilities, n, beta):
    w = (n * np.asarray(probabilities)) ** beta
    return w / w.max()


def by_the_sum(probabilities, n, beta):
    w = (n * np.asarray(probabilities)) ** -beta
    return w / w.sum()


def beta_one(probabilities, n, beta):
    w = 1 / (n * np.asarray(probabilities))
    return w / w.max()


def beta_fixed(probabilities, n, beta):  # right on the exercise's batch only
    w = (n * np.asarray(probabilities)) ** -0.5
    return w / w.max()


def in_place(probabilities, n, beta):  # right values, but the batch's probabilities are overwritten
    probabilities **= -beta
    probabilities /= probabilities.max()
    return probabilities


def one_short(probabilities, n, beta):
    w = (n * np.asarray(probabilities)) ** -beta
    return (w / w.max())[:-1]


def crashes(probabilities, n, beta):
    return probabilities.weights


def once_per_transition(probabilities, n, beta):  # one weight per distinct transition: a repeated draw is dropped
    raw = {float(p): (n * p) ** -beta for p in probabilities}
    return [w / max(raw.values()) for w in raw.values()]


@pytest.mark.parametrize("answer, hint", [
    (unnormalised, "divide by the batch's largest weight"),
    (wrong_sign, "exponent is -β"),
    (by_the_sum, "not by the sum"),
    (beta_one, "not 1"),
    (beta_fixed, "with β = 0 nothing is corrected"),
    (in_place, "changed the probabilities it was handed"),
    (one_short, "one weight per transition"),
    (crashes, "raised AttributeError"),
    (once_per_transition, r"returned shape \(3,\) for 4 sampled transitions"),
    (lambda p, n, b: np.full(len(p), 0.25), r"the formula of \*Why PER\*"),
])
def test_is_weights_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_is_weights(answer)


def test_is_weights_unanswered(capsys):
    assert checks.check_is_weights(None) is None
    assert "Not answered yet" in capsys.readouterr().out
    assert checks.check_is_weights(lambda p, n, b: None) is None
    assert "returns None" in capsys.readouterr().out


# -- per_demo ----------------------------------------------------------------------------------------------


def test_filled_trees_agree():
    priorities, trees = filled_trees(1_000, seed=3)
    assert sorted(trees) == ["compiled", "numpy", "per_item"]
    assert all(np.isclose(t.total, priorities.sum()) for t in trees.values())
    masses = np.random.default_rng(0).random(500) * priorities.sum()
    slow = trees["per_item"]
    for kind in ("numpy", "compiled"):
        assert [slow.find_one(m) for m in masses] == trees[kind].find(masses).tolist()
    slow.update([5], [0.0])  # the copied nodes make a tree its own update keeps consistent
    assert np.isclose(slow.total, priorities.sum() - priorities[5])
    assert trees["compiled"].nodes[trees["compiled"].size + 5] == priorities[5]  # a copy, not shared


def test_calls_per_second_counts_calls():
    calls = []
    r = calls_per_second(lambda: calls.append(1), 0.03, rounds=3)
    assert r > 0 and len(calls) > 3


def test_interleaved_ms_takes_turns_and_reports_medians():
    import time

    calls = []
    ms = interleaved_ms({"slow": lambda: (calls.append("slow"), time.sleep(0.004)),
                         "fast": lambda: calls.append("fast")}, 0.05)
    assert calls[:4] == ["slow", "fast", "slow", "fast"] and calls.count("slow") == calls.count("fast")
    assert ms["slow"] >= 4.0  # the sleep guarantees this much; how fast "fast" runs depends on the machine


def test_vector_replay_uniform_and_prioritized():
    for prioritized in (False, True):
        mem = VectorReplay(8, 2, prioritized, seed=0)
        for i in range(12):  # wraps: slots hold transitions 4..11
            mem.add([i, i], i % 2, 1.0, [i + 1, i + 1], False)
        obs, actions, rewards, next_obs, dones, weights, idx = mem.sample(16, beta=0.5)
        assert obs.shape == (16, 2) and set(obs[:, 0]) <= set(range(4, 12))
        np.testing.assert_array_equal(next_obs[:, 0], obs[:, 0] + 1)
        if prioritized:
            assert weights.shape == (16,) and weights.max() == pytest.approx(1.0)
            mem.update_priorities(np.arange(8), np.r_[np.zeros(7), 100.0])
            assert mem.max_priority >= 100
            _, _, _, _, _, _, idx = mem.sample(64, beta=0.5)
            assert np.mean(idx == 7) > 0.8  # one priority far above the rest dominates the draws
        else:
            assert weights is None


def test_run_cartpole_short_and_reproducible():
    import torch

    threads = torch.get_num_threads()
    a = run_cartpole(True, 700, seed=1, learning_starts=200)
    b = run_cartpole(True, 700, seed=1, learning_starts=200)
    assert len(a["returns"]) > 0 and len(a["returns"]) == len(a["ends"])
    np.testing.assert_array_equal(a["returns"], b["returns"])
    assert torch.get_num_threads() == threads
    u = run_cartpole(False, 400, seed=1, learning_starts=200)
    assert u["ends"][-1] <= 400


def test_solution_cell_passes_its_checks():
    """The solution cell (committed without outputs, skipped by nbval) passes every check it calls."""
    from _solutions import run_solutions

    out = run_solutions("08_prioritized_replay", {"checks": checks, "np": np})
    assert out.count("✓") == 4, out


def test_the_drawn_walk_finds_the_compiled_trees_leaf():
    """pictures_late.sum_tree_walk (drawn in notebook 08) ends at the leaf CompiledSumTree.find returns."""
    from dqn_course.lab.pictures_late import draw_sum_tree, sum_tree_walk
    from dqn_course.per import CompiledSumTree

    tree = CompiledSumTree(8)
    tree.update(np.arange(8), np.array([3.0, 0.0, 1.0, 2.0, 0.0, 4.0, 1.0, 5.0]))
    masses = np.array([0.0, 2.9, 3.0, 3.99, 4.5, 6.0, 9.99, 10.0, 15.9])
    assert [sum_tree_walk(tree.nodes, m)[-1][0] - 8 for m in masses] == tree.find(masses).tolist()
    assert draw_sum_tree(tree.nodes, mass=4.5).axes
