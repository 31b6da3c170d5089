"""Prioritized replay: the trees agree with their definition, and only valid transitions come out."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dqn_course.lab.toy import numbered_transitions
from dqn_course.lab.per_trees import PerItemSumTree, SumTree
from dqn_course.per import CompiledSumTree, PrioritizedMemory, beta_at, importance_weights
from dqn_course.replay import FrameSharingMemory, MultiStreamMemory


BATCH_TREES = [SumTree, CompiledSumTree]  # the two that PrioritizedMemory can use
MEMORY_TREES = {"compiled": CompiledSumTree, "numpy": SumTree}  # by name: the library's, and the lab's numpy one


@pytest.mark.parametrize("tree_cls", [*BATCH_TREES, PerItemSumTree])
def test_sampling_frequencies_match_priorities_chi_square(tree_cls):
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    cap = 50
    p = rng.random(cap) + 0.05
    p[::5] = 0.0
    tree = tree_cls(cap)
    tree.update(np.arange(cap), p)
    draws = np.concatenate([tree.sample(32, rng) for _ in range(2_000)])
    counts = np.bincount(draws, minlength=cap)
    assert counts[::5].sum() == 0  # zero priority: never drawn
    live = p > 0
    expected = p[live] / p.sum() * draws.size
    assert scipy_stats.chisquare(counts[live], expected).pvalue > 1e-3


@pytest.mark.parametrize("tree_cls", BATCH_TREES)
def test_sampling_frequencies_match_priorities_without_scipy(tree_cls):
    rng = np.random.default_rng(1)
    p = np.array([1.0, 0.0, 3.0, 6.0])
    tree = tree_cls(4)
    tree.update(np.arange(4), p)
    draws = np.concatenate([tree.sample(32, rng) for _ in range(3_000)])
    freq = np.bincount(draws, minlength=4) / draws.size
    np.testing.assert_allclose(freq, p / p.sum(), atol=0.01)


@pytest.mark.parametrize("kind", ["numpy", "compiled"])
@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(1, 700), st.lists(st.tuples(st.integers(0, 10**6), st.floats(0, 100)), min_size=1, max_size=300),
       st.integers(1, 64))
def test_totals_stay_consistent_after_many_updates(kind, cap, updates, block):
    tree = SumTree(cap, block=block) if kind == "numpy" else CompiledSumTree(cap)
    reference = np.zeros(cap)
    for i, v in updates:
        i %= cap
        tree.update([i], [v])
        reference[i] = v
    assert tree.total == pytest.approx(reference.sum(), rel=1e-9, abs=1e-9)
    np.testing.assert_array_equal(tree.get(np.arange(cap)), reference)
    if reference.sum() > 0:
        drawn = tree.sample(64, np.random.default_rng(0))
        assert (drawn < cap).all() and (reference[drawn] > 0).all()


@pytest.mark.parametrize("tree_cls", BATCH_TREES)
def test_batch_and_per_item_trees_find_the_same_leaves(tree_cls):
    rng = np.random.default_rng(3)
    p = rng.random(1_000) * (rng.random(1_000) > 0.3)
    fast, slow = tree_cls(1_000), PerItemSumTree(1_000)
    fast.update(np.arange(1_000), p)
    slow.update(range(1_000), p)
    masses = rng.random(500) * p.sum()
    found_fast = fast.find(masses)
    found_slow = np.array([slow.find_one(m) for m in masses])
    if tree_cls is CompiledSumTree:  # the same tree walked by the same rule: the same float sums, the same leaves
        np.testing.assert_array_equal(found_fast, found_slow)
    else:  # the same inverse CDF from other sums: rounding may only move a boundary case by one live leaf
        assert np.mean(found_fast == found_slow) > 0.99


def test_compiled_and_numpy_trees_draw_the_same_batches_from_the_same_generator():
    p = np.random.default_rng(4).random(5_000) * (np.arange(5_000) % 7 != 0)
    trees = {kind: MEMORY_TREES[kind](5_000) for kind in MEMORY_TREES}
    draws = {}
    for kind, tree in trees.items():
        tree.update(np.arange(5_000), p)
        rng = np.random.default_rng(5)
        draws[kind] = np.concatenate([tree.sample(32, rng) for _ in range(50)])
    assert np.mean(draws["compiled"] == draws["numpy"]) > 0.999
    assert (p[draws["compiled"]] > 0).all()


@pytest.mark.parametrize("tree_cls", BATCH_TREES)
def test_masses_at_the_edges_find_only_live_leaves(tree_cls):
    """Rounding can hand ``find`` a mass at or past the total, or just below 0: it must still land on a live leaf."""
    p = np.array([0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.1, 0.0, 0.0])
    tree = tree_cls(9)
    tree.update(np.arange(9), p)
    edges = [tree.total, np.nextafter(tree.total, np.inf), 2 * tree.total, -1e-12, -1.0, 1.0, 3.0, 3.1]
    found = tree.find(np.array(edges))
    assert (p[found] > 0).all(), found
    assert found[0] == found[1] == found[2] == 6 and found[3] == found[4] == 1 and found[5] == 2


@pytest.mark.parametrize("tree_cls", BATCH_TREES)
def test_repeated_indices_keep_the_last_value(tree_cls):
    tree = tree_cls(16)
    tree.update([3, 5, 3, 3], [1.0, 2.0, 7.0, 4.0])
    np.testing.assert_array_equal(tree.get([3, 5]), [4.0, 2.0])
    assert tree.total == 6.0


def test_compiled_tree_rebuild_equals_walking_up_from_each_leaf():
    """A large update rebuilds every sum bottom-up; it must give the very nodes the per-leaf walk gives."""
    p = np.random.default_rng(6).random(3_000)
    walked, rebuilt = CompiledSumTree(3_000), CompiledSumTree(3_000)
    for chunk in np.array_split(np.arange(3_000), 300):  # 10 leaves per call: walks up from each
        walked.update(chunk, p[chunk])
    rebuilt.update(np.arange(3_000), p)  # 3,000 leaves x 12 levels > 4,096 nodes: rebuilds
    np.testing.assert_array_equal(walked.nodes, rebuilt.nodes)
    masses = np.random.default_rng(7).random(1_000) * p.sum()
    np.testing.assert_array_equal(walked.find(masses), rebuilt.find(masses))


def test_importance_weights_hand_computed():
    # N = 4, P = [0.1, 0.2, 0.4], beta = 0.5: w = (N P)^-0.5 = [1/sqrt(.4), 1/sqrt(.8), 1/sqrt(1.6)], / max.
    w = importance_weights(np.array([0.1, 0.2, 0.4]), n=4, beta=0.5)
    np.testing.assert_allclose(w, [1.0, np.sqrt(0.4 / 0.8), np.sqrt(0.4 / 1.6)], rtol=1e-6)
    assert beta_at(0, 100) == pytest.approx(0.4) and beta_at(50, 100) == pytest.approx(0.7) and beta_at(500, 100) == 1


@pytest.mark.parametrize("tree_cls", BATCH_TREES)
def test_update_rejects_bad_input_and_leaves_the_tree_as_it_was(tree_cls):
    tree = tree_cls(8)
    with pytest.raises(ValueError, match="all zero"):
        tree.sample(4, np.random.default_rng(0))
    tree.update([1, 2], [1.0, 2.0])
    for indices, values, error in [([8], [1.0], IndexError), ([-1], [1.0], IndexError),
                                   ([0, 1], [5.0, -1.0], ValueError), ([0], [np.nan], ValueError),
                                   ([0], [np.inf], ValueError), ([0, 1], [1e308, 1e308], ValueError),
                                   ([0, 1, 2], [1.0, 1.0], ValueError)]:
        with pytest.raises(error):
            tree.update(indices, values)
        assert tree.total == 3.0  # nothing of a rejected update was written
        np.testing.assert_array_equal(tree.get(np.arange(8)), [0, 1, 2, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("kind", sorted(MEMORY_TREES))
@pytest.mark.parametrize("streams", [1, 2])
def test_prioritized_memory_only_draws_valid_transitions_and_matches_reference(streams, kind):
    transitions = numbered_transitions([7, 3, 12, 5, 9, 4, 11] * 3, frame_shape=(2, 2))
    inner = FrameSharingMemory(24, (4, 2, 2), seed=0) if streams == 1 else MultiStreamMemory(48, 2, (4, 2, 2), seed=0)
    memory = PrioritizedMemory(inner, seed=0, tree=MEMORY_TREES[kind])
    assert isinstance(memory.tree, MEMORY_TREES[kind])
    rng = np.random.default_rng(0)
    for t in transitions:
        if streams == 1:
            memory.add(*t)
        else:  # each stream must see a continuous episode stream: give both the same one
            inner.add(*t, stream=0)
            memory.add(*t, stream=1)
        if len(memory) >= 8:
            batch = memory.sample(8, beta=0.5)
            stream, slots = np.divmod(batch.indices, memory.stream_capacity)
            assert all(memory.streams[k].valid[j] for k, j in zip(stream, slots))
            assert batch.weights.max() == pytest.approx(1.0) and (batch.weights > 0).all()
            memory.update_priorities(batch.indices, rng.random(8) * 3)
    # The tree's live leaves are exactly the memory's valid slots.
    live = memory.tree.get(np.arange(memory.tree.capacity)) > 0
    valid = np.concatenate([s.valid for s in memory.streams])
    np.testing.assert_array_equal(live, valid)


@pytest.mark.parametrize("kind", sorted(MEMORY_TREES))
def test_prioritized_memory_samples_equal_reference_transitions(kind):
    transitions = numbered_transitions([30, 25, 40], frame_shape=(1, 1))
    memory = PrioritizedMemory(FrameSharingMemory(60, (4, 1, 1), seed=1), seed=1, tree=MEMORY_TREES[kind])
    for t in transitions:
        memory.add(*t)
    for _ in range(20):
        batch = memory.sample(16)
        for j, i in enumerate(batch.ids):
            s, a, r, s2, d, _ = transitions[int(i)]
            assert np.array_equal(batch.states[j], s) and np.array_equal(batch.next_states[j], s2)
            assert batch.dones[j] == d
        memory.update_priorities(batch.indices, np.arange(16, dtype=float))


def test_weighted_learn_with_unit_weights_equals_plain_learn_and_reports_td_errors():
    import torch

    from dqn_course.agent import DQNAgent
    from dqn_course.replay import Batch

    rng = np.random.default_rng(0)
    b = Batch(rng.integers(0, 256, (8, 4, 84, 84), dtype=np.uint8), rng.integers(0, 4, 8),
              rng.random(8, dtype=np.float32), rng.integers(0, 256, (8, 4, 84, 84), dtype=np.uint8),
              (rng.random(8) < 0.3).astype(np.float32), np.arange(8))
    plain, weighted = DQNAgent(4, seed=3), DQNAgent(4, seed=3)
    loss_plain = plain.learn(b)
    loss_weighted = weighted.learn(b._replace(weights=np.ones(8, np.float32), indices=np.arange(8)))
    assert loss_weighted == pytest.approx(loss_plain, rel=1e-5)
    assert weighted.last_td_errors.shape == (8,) and (weighted.last_td_errors >= 0).all()
    for p1, p2 in zip(plain.q.parameters(), weighted.q.parameters()):
        assert torch.allclose(p1, p2, atol=1e-6)
    # Zero weights: no gradient, so the network does not move.
    frozen = DQNAgent(4, seed=3)
    before = [p.detach().clone() for p in frozen.q.parameters()]
    frozen.learn(b._replace(weights=np.zeros(8, np.float32), indices=np.arange(8)))
    assert all(torch.equal(p0, p1) for p0, p1 in zip(before, frozen.q.parameters()))


@pytest.mark.slow
def test_training_with_per_runs_end_to_end(tmp_path):
    import dataclasses

    from dqn_course.train import PRESETS, train

    cfg = dataclasses.replace(PRESETS["quick"], total_steps=600, learning_starts=300, per=True, eval_every=10**9,
                              checkpoint_every=10**9, out_dir=str(tmp_path), progress=False)
    summary = train(cfg)
    assert summary["updates"] == (600 - 300) // 4 + 1
    assert (tmp_path / "checkpoint.pt").exists()


@pytest.mark.parametrize("kind", ["numpy", "compiled"])
@pytest.mark.parametrize("cap,block", [(2, 1), (1_000, 16), (1_000, 256)])
def test_partly_filled_tree_never_returns_an_empty_or_out_of_range_leaf(cap, block, kind):
    """Regression: untouched blocks must keep the shifted prefix array sorted (numpy tree)."""
    tree = SumTree(cap, block=block) if kind == "numpy" else CompiledSumTree(cap)
    tree.update([0], [0.5])
    drawn = tree.sample(64, np.random.default_rng(0))
    assert (drawn == 0).all()
    tree.update([cap // 2], [1.5])
    drawn = tree.sample(256, np.random.default_rng(1))
    assert set(drawn.tolist()) <= {0, cap // 2} and (drawn == cap // 2).mean() > 0.6


# -- checkpoints ----------------------------------------------------------------------------------------------------

def _filled_prioritized(streams: int, kind: str, seed: int = 0) -> PrioritizedMemory:
    """A prioritized memory that has wrapped around its ring and had many priorities rewritten."""
    inner = (FrameSharingMemory(40, (4, 2, 2), seed=seed) if streams == 1
             else MultiStreamMemory(80, 2, (4, 2, 2), seed=seed))
    memory = PrioritizedMemory(inner, seed=seed, tree=MEMORY_TREES[kind])
    rng = np.random.default_rng(seed)
    for t in numbered_transitions([9, 4, 13, 6, 11, 5] * 2, frame_shape=(2, 2)):
        for k in range(streams):
            memory.add(*t, **({"stream": k} if streams > 1 else {}))
        if len(memory) >= 8:
            batch = memory.sample(8, beta=0.5)
            memory.update_priorities(batch.indices, rng.random(8) * 5)
    return memory


def _copied(state: dict) -> dict:
    return {k: np.array(v) for k, v in state.items()}  # a memory's state may share its arrays


@pytest.mark.parametrize("kind", sorted(MEMORY_TREES))
@pytest.mark.parametrize("streams", [1, 2])
def test_state_dict_round_trip_samples_exactly_as_the_original(streams, kind):
    original = _filled_prioritized(streams, kind, seed=0)
    state = _copied(original.state_dict())
    assert all(isinstance(v, np.ndarray) for v in state.values())
    assert state["rng"].dtype == np.uint8 and any(k.startswith("memory/") for k in state)
    restored = _filled_prioritized(streams, kind, seed=1)  # same shape, different contents and generators
    restored.load_state_dict(state)
    np.testing.assert_array_equal(restored.tree.get(np.arange(restored.tree.capacity)), state["tree/leaves"])
    assert restored.tree.total == original.tree.total and restored.max_priority == original.max_priority
    if kind == "compiled":  # every sum is a function of the leaves alone: the rebuilt tree is the same tree
        np.testing.assert_array_equal(restored.tree.nodes, original.tree.nodes)
    rng = np.random.default_rng(2)
    for _ in range(10):  # the same batches, and the same after the same priority updates
        a, b = original.sample(16, beta=0.6), restored.sample(16, beta=0.6)
        for field in ("indices", "ids", "weights", "states", "next_states", "actions", "rewards", "dones"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        td = rng.random(16) * 3
        original.update_priorities(a.indices, td)
        restored.update_priorities(b.indices, td)
    # Adding after the restore keeps the tree in step with the memory's validity.
    t = numbered_transitions([5], frame_shape=(2, 2))
    for memory in (original, restored):
        memory.memory.end_episode()
        for tr in t:
            memory.add(*tr, **({"stream": 0} if streams > 1 else {}))
    np.testing.assert_array_equal(original.tree.get(np.arange(original.tree.capacity)),
                                  restored.tree.get(np.arange(restored.tree.capacity)))
    live = restored.tree.get(np.arange(restored.tree.capacity)) > 0
    np.testing.assert_array_equal(live, np.concatenate([s.valid for s in restored.streams]))


def test_a_checkpoint_does_not_depend_on_the_tree_that_wrote_it():
    state = _copied(_filled_prioritized(1, "numpy").state_dict())
    restored = _filled_prioritized(1, "compiled", seed=1)
    restored.load_state_dict(state)
    np.testing.assert_array_equal(restored.tree.get(np.arange(restored.tree.capacity)), state["tree/leaves"])


@pytest.mark.parametrize("change, match", [
    (lambda s: s.pop("tree/leaves"), "no tree/leaves"),
    (lambda s: s.update({"tree/leaves": s["tree/leaves"][:-1]}), "tree/leaves is float64"),
    (lambda s: s.update({"alpha": np.array(0.7)}), "alpha"),
    (lambda s: s["tree/leaves"].__setitem__(0, -1.0), "non-negative"),
    (lambda s: s["tree/leaves"].__setitem__(np.flatnonzero(~s["memory/valid"])[0], 2.0), "cannot sample"),
    (lambda s: s.update({"rng": np.frombuffer(b"not json", np.uint8)}), "rng"),
    (lambda s: s.update({"memory/capacity": np.array(41)}), "capacity"),
])
def test_load_state_dict_refuses_a_bad_state_and_changes_nothing(change, match):
    state = _copied(_filled_prioritized(1, "compiled").state_dict())
    change(state)
    target = _filled_prioritized(1, "compiled", seed=1)
    before = _copied(target.state_dict())
    nodes = target.tree.nodes.copy()
    with pytest.raises(ValueError, match=match):
        target.load_state_dict(state)
    after = target.state_dict()
    assert before.keys() == after.keys() and all(np.array_equal(before[k], after[k]) for k in before)
    np.testing.assert_array_equal(target.tree.nodes, nodes)


def test_prioritized_memory_rejects_an_unknown_tree():
    with pytest.raises(ValueError, match="tree must be one of"):
        PrioritizedMemory(FrameSharingMemory(24, (4, 2, 2)), tree="fenwick")


@pytest.mark.parametrize("kwargs, match", [
    ({"alpha": -0.1}, "alpha must be >= 0"), ({"alpha": float("nan")}, "alpha must be a finite number"),
    ({"alpha": "0.6"}, "alpha must be a number"), ({"eps": 0.0}, "eps must be > 0"),
    ({"eps": float("inf")}, "eps must be a finite number"),
])
def test_prioritized_memory_refuses_exponents_and_eps_outside_their_ranges(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PrioritizedMemory(FrameSharingMemory(24, (4, 2, 2)), **kwargs)


def test_prioritized_memory_refuses_a_memory_that_cannot_report_its_valid_slots():
    from dqn_course.replay.rungs import StackedRingMemory

    with pytest.raises(TypeError, match="memory must be a .*FrameSharingMemory or a .*MultiStreamMemory"):
        PrioritizedMemory(StackedRingMemory(24, (4, 2, 2)))


@pytest.mark.parametrize("streams", [1, 2])
def test_wrapping_a_memory_that_holds_transitions_gives_them_priorities(streams):
    """Transitions stored before the wrap are drawn too, at the starting priority: not left at 0 forever."""
    inner = (FrameSharingMemory(40, (4, 2, 2), seed=0) if streams == 1
             else MultiStreamMemory(80, 2, (4, 2, 2), seed=0))
    for t in numbered_transitions([9, 6], frame_shape=(2, 2)):
        for k in range(streams):
            inner.add(*t, **({"stream": k} if streams > 1 else {}))
    memory = PrioritizedMemory(inner, seed=0)
    valid = np.flatnonzero(np.concatenate([s.valid for s in memory.streams]))
    assert valid.size == len(inner) > 0
    np.testing.assert_allclose(memory.tree.get(valid), 1.0)  # the starting priority, 1 ** alpha
    assert memory.tree.total == pytest.approx(valid.size)
    assert set(memory.sample(len(inner), beta=0.5).indices) <= set(valid)


@pytest.mark.parametrize("indices, errors, match", [
    (np.arange(3), np.ones(2), "one per index"),
    ("sampled", np.full(8, np.nan), "must be finite"),
    ("sampled", np.full(8, np.inf), "must be finite"),
    (np.array([39]), np.ones(1), "leaves a sample\\(\\) handed out"),
    (np.array([-1]), np.ones(1), "leaves a sample\\(\\) handed out"),
    (np.array([1_000]), np.ones(1), "leaves a sample\\(\\) handed out"),
    (np.array([0.5]), np.ones(1), "indices must be a 1-D array of integers"),
    ("sampled", np.array(["x"] * 8), "td_errors must be numbers"),
])
def test_update_priorities_refuses_what_no_batch_handed_out_and_changes_nothing(indices, errors, match):
    memory = PrioritizedMemory(FrameSharingMemory(40, (4, 2, 2), seed=0), seed=0)
    for t in numbered_transitions([9, 6], frame_shape=(2, 2)):
        memory.add(*t)
    batch = memory.sample(8, beta=0.5)
    assert 39 not in batch.indices  # slot 39 holds nothing yet: never handed out
    before, top = _copied(memory.state_dict()), memory.max_priority
    with pytest.raises(ValueError, match=match):
        memory.update_priorities(batch.indices if isinstance(indices, str) else indices, errors)
    after = memory.state_dict()
    assert all(np.array_equal(before[k], after[k]) for k in before) and memory.max_priority == top
    memory.update_priorities(batch.indices, -np.arange(8.0))  # a TD error's sign does not matter: |error| + eps
    assert memory.max_priority == pytest.approx(7.0 + memory.eps)


def test_sample_refuses_beta_outside_zero_one():
    memory = PrioritizedMemory(FrameSharingMemory(40, (4, 2, 2), seed=0), seed=0)
    for t in numbered_transitions([9], frame_shape=(2, 2)):
        memory.add(*t)
    for beta in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="beta must be"):
            memory.sample(4, beta=beta)
