"""Notebook 08 (can PER be cheap?): its checks, prediction and questions.
"""
from __future__ import annotations

from typing import Any

from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (PREDICTIONS, QUESTIONS, Prediction, _call_learner, _not_answered_yet, _passed,
                                        _require_learners_code)


IS_PROBABILITIES = (0.4, 0.3, 0.2, 0.1)  # P(i) of the four sampled transitions in notebook 08's exercise


IS_N, IS_BETA = 1_000, 0.5


_WEIGHT = "*Why PER*, the importance-sampling weight"


_DERIVED = "*Where the weight comes from*"


def check_is_weights(is_weights: Any) -> bool | None:
    """Notebook 08: ``is_weights(probabilities, n, beta)``, the importance-sampling weights of a sampled batch.

    Right when it returns one weight per sampled transition, w_i = (N · P(i)) ** -β divided by the batch's largest
    (the exercise's batch P = (0.4, 0.3, 0.2, 0.1), N = 1,000, β = 0.5 gives (0.5, 0.577, 0.707, 1.0)), on that batch
    and on batches of the check's own that test behaviour: β = 0 (no correction: every weight 1), β = 1 (the full
    correction), a batch of one, a batch that drew one transition twice, probabilities of a million-slot memory,
    and the probabilities handed in left unchanged. The course's ``importance_weights``, anything else of the course
    and library functions are refused first (``_require_learners_code``). Raises ``AssertionError`` with a hint that
    names the section; prints a note (no error) while the answer, or what it returns, is ``None``.
    """
    if is_weights is None:
        return _not_answered_yet("write is_weights(probabilities, n, beta)")
    call = "is_weights(probabilities, n, beta)"
    _require_learners_code(is_weights, call, f"a def of {call} in the notebook, the weight of {_WEIGHT}")
    import numpy as np

    def weights(p, n, beta):
        p = np.array(p, np.float64)
        given = p.copy()
        got = _call_learner(is_weights, (p, n, beta), call)
        if got is None:
            return None
        assert np.array_equal(p, given), (
            f"{call} changed the probabilities it was handed: the memory's batch still needs them; compute the "
            f"weights in a new array ({_WEIGHT})")
        try:
            got = np.asarray(got, np.float64)
        except (TypeError, ValueError):
            raise AssertionError(f"{call} returned {type(got).__name__}: it should return the weights as an array "
                                 f"of numbers") from None
        assert got.shape == p.shape, (
            f"{call} returned shape {got.shape} for {p.size} sampled transitions: one weight per transition, in "
            f"their order ({_WEIGHT})")
        return got

    def right(p, n, beta):
        w = (n * np.asarray(p, np.float64)) ** -beta
        return w / w.max()

    def close(got, want) -> bool:
        return bool(np.allclose(got, want, rtol=1e-3, atol=1e-6))

    p, n, beta = np.array(IS_PROBABILITIES), IS_N, IS_BETA
    got = weights(p, n, beta)
    if got is None:
        return _not_answered_yet(f"{call} returns None; return the weights")
    if not close(got, right(p, n, beta)):
        raw = (n * p) ** -beta
        hints = [
            (raw, f"divide by the batch's largest weight, so that every w is at most 1 ({_DERIVED})"),
            ((n * p) ** beta / ((n * p) ** beta).max(), f"the exponent is -β: frequent transitions must get smaller "
                                                        f"weights, not larger ({_WEIGHT})"),
            (raw / raw.sum(), f"normalise by the largest weight, not by the sum ({_DERIVED})"),
            (right(p, n, 1.0), f"the exponent is the β handed in (here 0.5), not 1: β is annealed towards 1 over "
                               f"the run ({_WEIGHT})"),
            (1 / (n * p), f"that is the full correction, β = 1, and not yet divided by the largest weight ({_WEIGHT} "
                          f"and {_DERIVED})"),
        ]
        hint = next((h for value, h in hints if close(got, value)),
                    f"each weight is the formula of {_WEIGHT} (its exponent is the β handed in), then every weight "
                    f"is divided by the batch's largest ({_DERIVED} says why)")
        raise AssertionError(f"for P = {list(IS_PROBABILITIES)}, N = {n:,}, β = {beta} your weights were "
                             f"{np.round(got, 4).tolist()}: {hint}.")
    cases = [
        ((0.4, 0.3, 0.2, 0.1), 1_000, 0.0, "with β = 0 nothing is corrected and every weight is 1: the exponent is "
                                           f"the β handed in ({_WEIGHT})"),
        ((0.05, 0.01, 0.2, 0.01), 50, 1.0, f"with β = 1 the correction is full, w proportional to 1 / (N·P), then "
                                           f"divided by the largest ({_DERIVED})"),
        ((0.3,), 1_000, 0.7, f"a batch of one transition: it is its own largest weight, so its weight is 1 "
                             f"({_DERIVED})"),
        ((0.25, 0.1, 0.25, 0.05), 400, 0.6, f"a batch that drew one transition twice (the first and third "
                                             f"draws): each draw gets its own weight, in the batch's order, and "
                                             f"the two draws of one transition get the same ({_WEIGHT})"),
        ((2e-7, 1e-6, 5e-7, 1e-6), 1_000_000, 0.4, f"a million-slot memory at β = 0.4, the start of the anneal: the "
                                                    f"weight depends on the β and N handed in ({_WEIGHT})"),
    ]
    for p, n, beta, hint in cases:
        got = weights(p, n, beta)
        assert got is not None and close(got, right(p, n, beta)), (
            f"for P = {list(p)}, N = {n:,}, β = {beta} your weights were "
            f"{None if got is None else np.round(got, 4).tolist()}: {hint}.")
    return _passed("w = (N·P)^-β / max w on every batch: β = 0 leaves every weight 1, the rarest transition of a "
                   "batch gets weight 1 and the most frequent the smallest")


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
})


QUESTIONS.update({
    "08.mass_leaf": ("c", "with leaves 0 and 1 at priority 0 the line starts with leaf 2's interval, [0, 5): at the "
                          "root the left sum is 0, and 0.0 is not below 0, so the walk goes right; there 0.0 is below "
                          "the left child's 5, so it goes left, to leaf 2",
                     {"a": "a leaf of priority 0 owns an empty interval, even at the start of the line: walk down as "
                           "section 1 says, going left only where the mass is below the left child's sum",
                      "b": "leaf 1's priority is 0 as well: it owns no interval either, so no walk can end there "
                           "(section 1, zero priority)"}),
    "08.where_tree_hurts": ("b", "a per-item tree walks once per item, so 256 items cost about 8 times the walk of 32, "
                                 "while an eager GPU update, mostly the price of launching its operations, barely "
                                 "lengthens: the factor grows",
                            {"a": "a per-item tree walks once for each item of the batch (sections 1 and 2): its time "
                                  "grows with the batch, it is not paid once per batch",
                             "c": "the walk grows with the batch, but an eager update on a GPU is mostly the launching "
                                  "of its operations, which does not (section 3, How to read these numbers)"}),
    "08.equal_priorities": ("a", "with equal priorities every P(i) is 1/N, so every N·P(i) is 1 and so is every "
                                 "weight: the draws are uniform, and there is no bias to correct",
                            {"b": "the weight of *Why PER* multiplies P(i) by N before the exponent, and is then "
                                  "divided by the batch's largest: with equal priorities P(i) is 1/N, so what is "
                                  "N·P(i)? (*Where the weight comes from*)",
                             "c": "β sets how much of the bias is corrected; with equal priorities the draws are "
                                  "uniform and every N·P(i) is the same, so every weight is too (*Where the weight "
                                  "comes from*)"}),
})


check_module(globals())
