"""Notebook 08 (can PER be cheap?): its checks, prediction and questions.
"""
from __future__ import annotations

import weakref
from typing import Any

from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (PREDICTIONS, QUESTIONS, Prediction, _call_learner, _not_answered_yet, _passed,
                                        _require_learners_code)


_WALK = "section 1, *The sum tree, drawn*"
_TOTAL = "section 1, *A mass on the total*"
_ZERO = "section 1, the sweep that hits no leaf of priority 0"


_NODE_ARRAYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # each _CountedNodes' array, kept off it


class _CountedNodes:
    """A sum tree's node array, read-only, that counts the nodes read from it: ``reads`` grows by one for each node
    an index returns (a number, an array of numbers or a slice) and by every node for anything that takes the whole
    array (``np.asarray``, iteration, a method such as ``sum``). ``len``, ``shape``, ``size``, ``ndim`` and ``dtype``
    read no node. Writing to it raises ``TypeError``: a walk only reads the tree. The array itself is held in
    ``_NODE_ARRAYS``, not on the object, so no attribute of it hands the array over uncounted."""

    def __init__(self, nodes):
        import numpy as np

        array = np.array(nodes, np.float64)
        array.flags.writeable = False
        _NODE_ARRAYS[self] = array
        self.reads = 0
        self.shape, self.size, self.ndim, self.dtype = array.shape, array.size, array.ndim, array.dtype

    def __len__(self) -> int:
        return len(_NODE_ARRAYS[self])

    def __getitem__(self, key):
        import numpy as np

        out = _NODE_ARRAYS[self][key]
        self.reads += int(np.size(out))
        return out

    def __iter__(self):
        self.reads += self.size
        return iter(_NODE_ARRAYS[self])

    def __array__(self, dtype=None, copy=None):
        self.reads += self.size
        array = _NODE_ARRAYS[self]
        return array if dtype is None else array.astype(dtype)

    def __getattr__(self, name: str):  # the array's other methods (sum, tolist, copy, ...) read the whole array
        if name.startswith("_"):  # private names, and those looked up before __init__ ran (copy, pickle)
            raise AttributeError(name)
        attribute = getattr(_NODE_ARRAYS[self], name)
        self.reads += self.size
        return attribute


def _sum_tree(leaves) -> Any:
    """The node array of a sum tree over ``leaves`` in ``CompiledSumTree``'s layout (what section 1 prints)."""
    import numpy as np

    from dqn_course.per import CompiledSumTree

    tree = CompiledSumTree(len(leaves))
    tree.update(np.arange(len(leaves)), np.asarray(leaves, np.float64))
    return tree.nodes.copy()


def _leaves_for(nodes, masses) -> Any:
    """The reference: the leaf whose interval [before, before + priority) on the line of priorities holds each mass,
    by a cumulative sum searched over the whole row of leaves; a mass at the total ends on the last leaf with
    priority, as ``CompiledSumTree.find`` ends it."""
    import numpy as np

    leaves = nodes[len(nodes) // 2:]
    found = np.searchsorted(np.cumsum(leaves), masses, side="right")
    return np.minimum(found, np.flatnonzero(leaves > 0)[-1])


def _slipped_walk(nodes, mass: float, slip: str, guard: bool) -> int:
    """Where section 1's walk ends for ``mass`` with one typical slip: ``"tie"`` goes left on a mass equal to the
    left sum, ``"right"`` subtracts the right child's sum on going right, ``"none"`` subtracts nothing; with
    ``guard``, it also goes left wherever the right child's sum is 0 (*A mass on the total*)."""
    size, node = len(nodes) // 2, 1
    while node < size:
        left, right = nodes[2 * node], nodes[2 * node + 1]
        if ((mass <= left) if slip == "tie" else (mass < left)) or (guard and right == 0):
            node = 2 * node
        else:
            mass -= {"right": right, "none": 0.0}.get(slip, left)
            node = 2 * node + 1
    return node - size


_RULE = (f"at each level go left while the mass is below the left child's sum, else take that sum off the mass and "
         f"go right, down to the bottom row ({_WALK})")


_SLIPS = {
    "tie": f"a mass exactly on a boundary, where one leaf's interval ends and the next one's begins, belongs to the "
           f"next leaf: go left only while the mass is below the left child's sum, never when it equals it ({_WALK})",
    "right": f"on going right, the walk passes over the left child's part of the line, so it is the left child's sum "
             f"that comes off the mass, not the right child's ({_WALK})",
    "none": f"on going right, the mass still to place is measured from the start of the right child's part of the "
            f"line: take the left child's sum off it, or every level below compares it with the wrong sums ({_WALK})",
}


def check_sum_tree_find(find: Any) -> bool | None:
    """Notebook 08: ``find(nodes, masses)``, the leaf of a sum tree each mass lands in, found by walking from the root.

    ``nodes`` is a tree in ``CompiledSumTree``'s layout (node 1 the root, node n's children 2n and 2n+1, leaf i at node
    ``len(nodes) // 2 + i``), ``masses`` a 1-D float array of masses in [0, total]. Right when, for each mass, it
    returns the leaf the reference finds (a cumulative sum of the leaves searched in the check): on the page's
    8-leaf tree and its masses, then on trees of the check's own (capacities 1, 5, 13, 100 and 1,000, so padding
    leaves of priority 0 after the last slot, runs of zero-priority leaves, the first leaves among them, masses on
    every boundary between two intervals and random ones), never returning a leaf of priority 0, ending a mass equal
    to the total on the last leaf with priority, and reading O(log n) nodes: for 16 masses in a tree of 65,536
    leaves (capacity 40,000) at most three nodes per level and mass, counted through the read-only array it is
    handed, so a scan of the leaves fails. Typical slips (going left on a mass equal to the left sum, subtracting the
    right child's sum or none, returning node numbers) get their own hint. The course's trees and walks, anything
    else of the course and library functions are refused first (``_require_learners_code``). Raises
    ``AssertionError`` with a hint that names the section; prints a note (no error) while the answer, or what it
    returns, is ``None``.
    """
    if find is None:
        return _not_answered_yet("write find(nodes, masses)")
    call = "find(nodes, masses)"
    _require_learners_code(find, call, f"a def of {call} in the notebook that walks down from the root ({_WALK})")
    import numpy as np

    def run(nodes, masses):
        """The learner's leaves for ``masses`` (None if it returns None) and the nodes it read."""
        counted, masses = _CountedNodes(nodes), np.array(masses, np.float64)
        got = _call_learner(find, (counted, masses.copy()), call, {
            "does not support item assignment": f"find only reads the tree; the walk carries the mass still to "
                                                f"place and changes no node ({_WALK})"})
        if got is None:
            return None, counted.reads
        try:
            got = np.asarray(got)
        except (TypeError, ValueError):
            raise AssertionError(f"{call} returned {type(got).__name__}: return the leaves as an array (or list) of "
                                 f"whole numbers, one per mass") from None
        assert got.shape == masses.shape, (
            f"{call} returned shape {got.shape} for {masses.size} masses: one leaf per mass, in their order")
        assert got.dtype.kind in "iu" or (got.dtype.kind == "f" and np.array_equal(got, np.round(got))), (
            f"{call} returned {got.dtype} values {got[:4].tolist()}: a leaf is a whole number, its place in the row "
            f"of leaves")
        return got.astype(np.int64), counted.reads

    def compare(nodes, masses, what: str) -> None:
        """Fail with a hint unless the learner finds the reference's leaf for every mass in [0, total)."""
        got, _ = run(nodes, masses)
        want = _leaves_for(nodes, masses)
        if np.array_equal(got, want):
            return
        size = len(nodes) // 2
        leaves, ends = nodes[size:], np.cumsum(nodes[size:])
        k = int(np.flatnonzero(got != want)[0])
        mass, leaf = float(masses[k]), int(got[k])
        said = f"in {what}, mass {mass:g} ended on leaf {leaf}"
        if np.array_equal(got, want + size):
            hint = (f"those are node numbers; return the leaf's place in the row of leaves: leaf 0 is the first node "
                    f"of the bottom row ({_WALK})")
        elif not 0 <= leaf < size:
            hint = f"there are {size} leaves, numbered from 0 ({_WALK})"
        elif slip := next((s for s in _SLIPS for guard in (False, True)
                           if [_slipped_walk(nodes, m, s, guard) for m in masses] == got.tolist()), None):
            hint = _SLIPS[slip]
        elif leaves[leaf] == 0:
            hint = (f"leaf {leaf} has priority 0: it owns an empty interval of the line, so no mass can land in it "
                    f"({_ZERO}); " + (_SLIPS["tie"] if mass in ends else _RULE))
        else:
            start, end = float(ends[leaf] - leaves[leaf]), float(ends[leaf])
            hint = f"leaf {leaf} owns [{start:g}, {end:g}) of the line, and the mass is not in it: {_RULE}"
        raise AssertionError(f"{said}, the right leaf is {int(want[k])}: {hint}.")

    page = _sum_tree([3.0, 0.0, 1.0, 2.0, 0.0, 4.0, 1.0, 5.0])
    page_masses = [0.0, 2.9, 3.0, 3.99, 4.5, 6.0, 9.99, 10.0, 15.9]
    got, _ = run(page, page_masses)
    if got is None:
        return _not_answered_yet(f"{call} returns None; return the leaves")
    compare(page, page_masses, "section 1's tree of 8 leaves")

    rng = np.random.default_rng(808)
    trees = {}
    for capacity in (1, 5, 13, 100, 1_000):
        leaves = rng.integers(1, 12, capacity) * 0.25  # quarters: every sum exact, so no walk meets rounding
        leaves[rng.random(capacity) < 0.3] = 0.0  # runs of zero-priority leaves, as invalid slots
        leaves[: capacity // 4] = 0.0  # the first leaves among them
        leaves[-1] = 0.0 if capacity > 1 else leaves[-1]
        leaves[rng.integers(capacity // 4, capacity)] = 1.0  # at least one leaf with priority
        nodes = _sum_tree(leaves)
        trees[capacity] = nodes
        ends = np.cumsum(nodes[len(nodes) // 2:])
        boundaries = np.unique(np.r_[0.0, ends[ends < ends[-1]]])
        masses = np.r_[boundaries, rng.random(50) * ends[-1]]
        compare(nodes, masses, f"a tree of capacity {capacity:,} ({len(nodes) // 2:,} leaves, those past the last "
                               f"slot at priority 0)")

    for capacity, nodes in trees.items():
        total = nodes[1]
        got, _ = run(nodes, [total])
        want = int(_leaves_for(nodes, [total])[0])
        assert got is not None and got[0] == want, (
            f"in a tree of capacity {capacity:,}, a mass equal to the total ({total:g}) ended on leaf "
            f"{None if got is None else int(got[0])}, the right leaf is {want}, the last with priority: rounding can "
            f"draw a mass on the total, and a walk that steps into a subtree whose sum is 0 runs off the end of the "
            f"line into a leaf of priority 0 ({_TOTAL})")

    capacity, n_masses = 40_000, 16
    leaves = rng.integers(1, 12, capacity) * 0.25
    nodes = _sum_tree(leaves)
    masses = rng.random(n_masses) * nodes[1]
    compare(nodes, masses, f"a tree of capacity {capacity:,}")
    _, reads = run(nodes, masses)
    levels = (len(nodes) // 2).bit_length() - 1
    assert reads <= 3 * (levels + 1) * n_masses, (
        f"for {n_masses} masses in a tree of {len(nodes) // 2:,} leaves your find read {reads:,} nodes, about "
        f"{reads // n_masses:,} a mass (taking the whole array, converting or copying it, counts every node): a walk "
        f"goes down one path, reading a child's sum or two at each of the {levels} levels below the root, never the "
        f"row of leaves; that is what makes the tree worth having ({_WALK}, and the prediction under it)")
    return _passed(f"your walk finds the leaf of every mass, never one of priority 0, ends a mass on the total on the "
                   f"last leaf with priority, and read {reads / n_masses:.0f} nodes a mass in a tree of "
                   f"{len(nodes) // 2:,} leaves, where a scan would read them all")


PREDICTIONS.update({
    "08.walk_nodes": Prediction("the nodes one walk visits in a tree of 100,000 leaves", 0, lambda m: {
        m - 1: "count nodes, the root's and the leaf's included, not the steps between them; and a tree has whole "
               "levels: round the leaves up to a power of two (section 1)",
        m - 2: "both ends count: the root is a node of the walk, and the leaves are rounded up to a power of two, so "
               "the tree has a whole number of levels (section 1)",
        21: "that is a tree of a million leaves; this one has 100,000 (section 1: leaves rounded up to a power of two)",
        100_000: "a walk goes down one path, one node per level, not through every leaf (section 1, the walk drawn "
                 "above the prediction)"},
        "a walk visits one node per level: count the levels of a tree whose leaves are rounded up to a power of two "
        "(section 1)"),
    "08.per_step_ratio": Prediction("a CPU learner step's time with PER over its time without", 0.05, lambda m: {
        wrong: why for wrong, why in {
            100 * (m - 1): "the prediction is a ratio of two step times, not a percentage: a step that takes a "
                           "tenth longer is a ratio of 1.1",
            1.0: "PER's work per step is not nothing: besides the tree's draw and update, 32 weights go with the "
                 "batch and multiply a loss kept per transition, and 32 TD errors come back to be written as "
                 "priorities (*Why PER* and section 3)",
            2.0: "PER's work is per batch of 32, and most of a step is the Nature CNN's forward and backward passes, "
                 "which PER does not repeat: set section 2's compiled sample + update beside a step of that network "
                 "(section 3)"}.items()
        if abs(wrong - m) > 0.05 * m},  # a mistake this close to the measurement is no mistake on this machine
        "a step is the network's forward and backward passes plus, with PER, its work per batch: the compiled tree's "
        "sample + update (section 2), 32 weights, 32 TD errors brought back (section 3); price the second against "
        "the first"),
})


QUESTIONS.update({
    "08.doubled_priority": ("c", "a draw lands in a leaf with probability the leaf's value over the total, and the "
                                 "leaf holds p^α, not p: doubling p multiplies p^0.6 by 2^0.6 ≈ 1.52, and with the "
                                 "total about unchanged, so does P(i)",
                            {"a": "PER draws transition i with probability P(i), proportional to p^α, not to p (*Why "
                                  "PER*), and the tree's leaves hold what the draw is proportional to (section 1): at "
                                  "α = 0.6, what does doubling p do to a leaf's value?",
                             "b": "the importance-sampling weight scales a transition's loss after it is drawn (*Where "
                                  "the weight comes from*); the chance that a draw picks it is set by the leaves' "
                                  "values alone (section 1)"}),
    "08.where_tree_hurts": ("b", "a per-item tree walks once per item, so 256 items cost about 8 times the walk of 32, "
                                 "while an eager GPU update, mostly the price of launching its operations, barely "
                                 "lengthens: the factor grows",
                            {"a": "a per-item tree walks once for each item of the batch (sections 1 and 2): its time "
                                  "grows with the batch, it is not paid once per batch",
                             "c": "the walk grows with the batch, but an eager update on a GPU is mostly the launching "
                                  "of its operations, which does not (section 3, How to read these numbers)"}),
    "08.weight_ratio": ("a", "P(i) follows p^α, so a priority-1 transition is drawn (1/2)^0.6 times as often as a "
                             "priority-2 one, and w = (N·P(i))^−β turns that into a weight 2^(0.6 × 0.4) = 2^0.24 ≈ "
                             "1.18 times as large; N is the same for both, and dividing by the batch's largest weight "
                             "scales both alike, so neither changes the ratio",
                        {"b": "2^0.4 ≈ 1.32 is what the weights would be if P(i) followed p itself; the draw follows "
                              "p^α, so the two transitions' chances differ by less than their priorities (*Why PER*: "
                              "P(i) and its exponent α)",
                         "c": "2^0.6 ≈ 1.52 is how much more often the priority-2 transition is drawn, the weights' "
                              "ratio at β = 1; β = 0.4 corrects only part of that (*Where the weight comes from*: "
                              "what β does to the weight)"}),
})


check_module(globals())
