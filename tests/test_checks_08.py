"""Notebook 08's self-check (right passes, wrong raises with a hint, None only prints) and dqn_course.lab.per_demo."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy.stats import chisquare

from dqn_course.lab import checks
from dqn_course.lab.bench import calls_per_second
from dqn_course.lab.per_demo import VectorReplay, filled_trees, interleaved_ms, interleaved_ratios, run_cartpole
from dqn_course.lab.per_trees import PerItemSumTree, SumTree
from dqn_course.lab.pictures_late import sum_tree_walk
from dqn_course.per import CompiledSumTree, PrioritizedMemory

# -- the exercise: the learner's find(nodes, masses), the walk down a sum tree ----------------------------------


def walk(nodes, masses):  # the solution's walk, one mass at a time
    size = len(nodes) // 2
    leaves = []
    for mass in masses:
        node = 1
        while node < size:
            left = nodes[2 * node]
            if mass < left or nodes[2 * node + 1] == 0:
                node = 2 * node
            else:
                mass -= left
                node = 2 * node + 1
        leaves.append(node - size)
    return np.array(leaves)


def level_by_level(nodes, masses):  # another right answer: every mass one level at a time, as CompiledSumTree does
    size = len(nodes) // 2
    node, mass = np.ones(len(masses), np.int64), np.array(masses, np.float64)
    for _ in range(size.bit_length() - 1):
        left, right = nodes[2 * node], nodes[2 * node + 1]
        go_right = (mass >= left) & (right > 0)
        mass = np.where(go_right, mass - left, mass)
        node = 2 * node + go_right
    return (node - size).tolist()


def recursive(nodes, masses):  # another right answer: the walk as a recursion, leaves as floats that are whole
    size = len(nodes) // 2

    def down(node, mass):
        if node >= size:
            return float(node - size)
        left = nodes[2 * node]
        if mass < left or not nodes[2 * node + 1] > 0:
            return down(2 * node, mass)
        return down(2 * node + 1, mass - left)

    return [down(1, m) for m in masses]


@pytest.mark.parametrize("answer", [walk, level_by_level, recursive])
def test_sum_tree_find_right(answer, capsys):
    assert checks.check_sum_tree_find(answer) is True
    assert capsys.readouterr().out.startswith("✓")


def page_wrapper(nodes, masses):
    return [sum_tree_walk(nodes, m)[-1][0] - len(nodes) // 2 for m in masses]


def tree_wrapper(nodes, masses):
    tree = CompiledSumTree(len(nodes) // 2)
    tree.nodes[:] = np.asarray(nodes)
    return tree.find(masses)


@pytest.mark.parametrize("answer", [
    CompiledSumTree(8).find,  # the course's own walk, as section 1 calls it
    SumTree(8).find,
    PerItemSumTree(8).find_one,
    sum_tree_walk,  # the walk section 1 prints
    functools.partial(sum_tree_walk),
    page_wrapper,  # a def that calls it
    tree_wrapper,
    lambda nodes, masses: CompiledSumTree(8).find(masses),
    PrioritizedMemory,  # a class the page imports
    np.searchsorted,  # a library function
    chisquare,
])
def test_sum_tree_find_refuses_the_course_and_the_pages_imports(answer):
    with pytest.raises(AssertionError, match="write it yourself"):
        checks.check_sum_tree_find(answer)


def _walk_with(tie_left=False, subtract="left", guard=True):
    """The walk with one slip: go left on a mass equal to the left sum, subtract another child's sum, or no guard
    against a subtree of sum 0."""
    def find(nodes, masses):
        size = len(nodes) // 2
        leaves = []
        for mass in masses:
            node = 1
            while node < size:
                left, right = nodes[2 * node], nodes[2 * node + 1]
                if (mass <= left if tie_left else mass < left) or (guard and right == 0):
                    node = 2 * node
                else:
                    mass -= {"left": left, "right": right, "none": 0.0}[subtract]
                    node = 2 * node + 1
            leaves.append(node - size)
        return leaves
    return find


def linear_scan(nodes, masses):  # right leaves, but found by a cumulative sum over the whole row of leaves
    leaves = np.asarray(nodes)[len(nodes) // 2:]
    found = np.searchsorted(np.cumsum(leaves), masses, side="right")
    return np.minimum(found, np.flatnonzero(leaves > 0)[-1])


def scan_in_a_loop(nodes, masses):  # the same scan, leaf by leaf
    size, out = len(nodes) // 2, []
    for mass in masses:
        before, last = 0.0, 0
        for leaf in range(size):
            if nodes[size + leaf] > 0:
                last = leaf
                if mass < before + nodes[size + leaf]:
                    break
            before += nodes[size + leaf]
        out.append(last)
    return out


def node_numbers(nodes, masses):
    return np.asarray(walk(nodes, masses)) + len(nodes) // 2


def swapped_children(nodes, masses):  # node n's children taken as 2n + 1 (left) and 2n (right)
    size, out = len(nodes) // 2, []
    for mass in masses:
        node = 1
        while node < size:
            left = nodes[2 * node + 1]
            if mass < left or nodes[2 * node] == 0:
                node = 2 * node + 1
            else:
                mass -= left
                node = 2 * node
        out.append(node - size)
    return out


def scans_the_hidden_array(nodes, masses):  # a blind grader's way round the count, when the array sat on the wrapper
    leaves = np.asarray(nodes._nodes)[len(nodes) // 2:]
    return np.searchsorted(np.cumsum(leaves), masses, side="right")


def writes_the_tree(nodes, masses):
    nodes[1] = 0.0
    return walk(nodes, masses)


@pytest.mark.parametrize("answer, hint", [
    (_walk_with(tie_left=True), "belongs to the next leaf"),
    (_walk_with(subtract="right"), "the left child's sum that comes off the mass, not the right child's"),
    (_walk_with(subtract="none"), "take the left child's sum off it"),
    (_walk_with(guard=False), r"a mass equal to the total .* ended on leaf 7, the right leaf is 3.*A mass on the "
                              r"total"),
    (linear_scan, r"read 131,072 nodes.*never the row of leaves"),
    (scan_in_a_loop, r"your find read [\d,]+ nodes.*never the row of leaves"),
    (node_numbers, "those are node numbers"),
    (swapped_children, "ended on leaf 7, the right leaf is 0: leaf 7 owns"),
    (writes_the_tree, "find only reads the tree"),
    (scans_the_hidden_array, "raised AttributeError"),
    (lambda nodes, masses: walk(nodes, masses)[:-1], r"returned shape \(8,\) for 9 masses"),
    (lambda nodes, masses: [str(leaf) for leaf in walk(nodes, masses)], "a leaf is a whole number"),
    (lambda nodes, masses: np.zeros(len(masses), int), "leaf 0 owns"),
])
def test_sum_tree_find_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_sum_tree_find(answer)


def test_sum_tree_find_never_a_zero_priority_leaf():
    """A walk that lands on leaves of priority 0 (mass 0.0 going left into an empty subtree on a tree whose first
    leaves are 0) is told those leaves own empty intervals, whatever it returns elsewhere."""
    def left_on_zero(nodes, masses):
        return [0 if m == 0 else leaf for m, leaf in zip(masses, walk(nodes, masses))]

    with pytest.raises(AssertionError, match=r"leaf 0 has priority 0: it owns an empty interval"):
        checks.check_sum_tree_find(left_on_zero)


def test_sum_tree_find_unanswered(capsys):
    assert checks.check_sum_tree_find(None) is None
    assert "Not answered yet" in capsys.readouterr().out
    assert checks.check_sum_tree_find(lambda nodes, masses: None) is None
    assert "returns None" in capsys.readouterr().out


def test_counted_nodes_counts_what_is_read():
    """The wrapper the check hands over counts one read per node an index returns and every node for the whole
    array; shape and length read none; writing is refused."""
    from dqn_course.lab.checks.ch08 import _CountedNodes

    counted = _CountedNodes(np.arange(16.0))
    assert (len(counted), counted.shape, counted.size, counted.reads) == (16, (16,), 16, 0)
    assert counted[3] == 3.0 and counted.reads == 1
    assert counted[np.array([2, 5])].tolist() == [2.0, 5.0] and counted.reads == 3
    assert counted[8:].size == 8 and counted.reads == 11
    np.asarray(counted)
    assert counted.reads == 27
    assert counted.sum() == 120.0 and counted.reads == 43
    with pytest.raises(TypeError):
        counted[1] = 0.0
    assert not any(isinstance(v, np.ndarray) for v in vars(counted).values())  # no attribute hands the array over


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


def test_interleaved_ratios_take_turns_and_bracket_the_ratio():
    import time

    calls = []
    r = interleaved_ratios({"fast": lambda: calls.append("fast"),
                            "slow": lambda: (calls.append("slow"), time.sleep(0.004)),
                            "fast again": lambda: calls.append("fast again")}, 0.05, reference="fast")
    assert calls[:6] == ["fast", "slow", "fast again"] * 2 and calls.count("slow") == calls.count("fast")
    assert r["fast"]["ratio"] == r["fast"]["low"] == r["fast"]["high"] == 1.0
    assert r["slow"]["median_ms"] >= 4.0 and r["slow"]["low"] <= r["slow"]["ratio"] <= r["slow"]["high"]
    assert r["slow"]["low"] > 1 and r["slow"]["rounds"] >= 3
    with pytest.raises(KeyError, match="reference"):
        interleaved_ratios({"fast": lambda: None}, 0.01, reference="slow")


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


def test_weight_ratio_key_is_what_prioritized_memory_computes():
    """Question 3's key (half the memory at priority 2, half at 1, alpha 0.6, beta 0.4: a priority-1 weight over a
    priority-2 one) is the ratio dqn_course.per.importance_weights gives, and each option is the number its
    mistake makes: alpha left out (b) or beta taken as 1 (c)."""
    from dqn_course.per import importance_weights

    n = 400_000
    leaves = np.repeat([2.0, 1.0], n // 2) ** 0.6  # what the tree holds: p^alpha
    probs = leaves / leaves.sum()
    weights = importance_weights(probs[[0, -1]], n, 0.4)
    ratio = weights[1] / weights[0]
    assert round(float(ratio), 2) == 1.18
    assert round(2 ** 0.4, 2) == 1.32 and round(2 ** 0.6, 2) == 1.52
    assert checks.check_question("08.weight_ratio", "a")
    for letter, section in (("b", "Why PER"), ("c", "Where the weight comes from")):
        with pytest.raises(AssertionError, match=section):
            checks.check_question("08.weight_ratio", letter)


def test_doubled_priority_key_is_what_the_tree_draws():
    """Question 1's key (a million transitions, alpha 0.6, one transition's |delta| doubles, the rest unchanged):
    the chance a CompiledSumTree draw picks it, its leaf over the total, grows by 2^0.6, about 1.52 (c); a (2)
    leaves alpha out, b (1) takes the weight for the draw, each refused with a hint naming its section."""
    from dqn_course.per import CompiledSumTree

    n, alpha = 1_000_000, 0.6
    p = np.random.default_rng(0).random(n) + 0.01
    tree = CompiledSumTree(n)
    tree.update(np.arange(n), p**alpha)
    before = tree.nodes[tree.size + 7] / tree.total
    tree.update(np.array([7]), np.array([(2 * p[7]) ** alpha]))
    after = tree.nodes[tree.size + 7] / tree.total
    assert round(float(after / before), 2) == round(2**alpha, 2) == 1.52
    assert checks.check_question("08.doubled_priority", "c")
    for letter, section in (("a", "Why PER"), ("b", "section 1")):
        with pytest.raises(AssertionError, match=section):
            checks.check_question("08.doubled_priority", letter)


def test_the_drawn_walk_finds_the_compiled_trees_leaf():
    """pictures_late.sum_tree_walk (drawn in notebook 08) ends at the leaf CompiledSumTree.find returns."""
    from dqn_course.lab.pictures_late import draw_sum_tree, sum_tree_walk
    from dqn_course.per import CompiledSumTree

    tree = CompiledSumTree(8)
    tree.update(np.arange(8), np.array([3.0, 0.0, 1.0, 2.0, 0.0, 4.0, 1.0, 5.0]))
    masses = np.array([0.0, 2.9, 3.0, 3.99, 4.5, 6.0, 9.99, 10.0, 15.9])
    assert [sum_tree_walk(tree.nodes, m)[-1][0] - 8 for m in masses] == tree.find(masses).tolist()
    assert draw_sum_tree(tree.nodes, mass=4.5).axes


def test_time_find_times_the_learners_walk_beside_the_compiled_one():
    """per_demo.time_find (notebook 08, after the exercise): the walk's leaves checked against CompiledSumTree.find,
    then both timed; None while the learner's find is not written; a wrong walk is not timed."""
    from dqn_course.lab.per_demo import time_find

    timed = time_find(walk, capacity=1_000, batch=8, seconds=0.05)
    assert set(timed) == {"yours_ms", "compiled_ms", "ratio", "capacity", "batch"}
    assert (timed["capacity"], timed["batch"]) == (1_000, 8)
    assert timed["yours_ms"] > 0 and timed["compiled_ms"] > 0
    assert timed["ratio"] == pytest.approx(timed["yours_ms"] / timed["compiled_ms"])
    assert time_find(None) is None
    assert time_find(lambda nodes, masses: None, capacity=1_000) is None
    with pytest.raises(ValueError, match="differ from CompiledSumTree.find's"):
        time_find(lambda nodes, masses: np.zeros(len(masses), int), capacity=1_000, seconds=0.05)
