"""Notebook 08 (can PER be cheap?): its checks, prediction and questions.
"""
from __future__ import annotations

from typing import Any

from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (PREDICTIONS, QUESTIONS, Prediction, _not_answered_yet, _passed)


IS_PROBABILITIES = (0.4, 0.3, 0.2, 0.1)  # P(i) of the four sampled transitions in notebook 08's exercise


IS_N, IS_BETA = 1_000, 0.5


def check_is_weights(answer: Any) -> bool | None:
    """Notebook 08: importance-sampling weights of transitions drawn with P = (0.4, 0.3, 0.2, 0.1), N = 1,000, β = 0.5.

    w_i = (N · P(i)) ** -β, divided by the largest w in the batch: (0.5, 0.577, 0.707, 1.0).
    """
    if answer is None:
        return _not_answered_yet("set `weights` to the four importance-sampling weights")
    import numpy as np

    from dqn_course.per import importance_weights

    try:
        got = np.asarray(answer, np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise AssertionError(f"weights should be four numbers (a list or an array), got {answer!r}") from None
    p = np.array(IS_PROBABILITIES)
    assert got.size == p.size, f"weights should hold one number per sampled transition ({p.size}), got {got.size}"
    expected = importance_weights(p, IS_N, IS_BETA).astype(np.float64)

    def close(value) -> bool:
        return bool(np.allclose(got, value, rtol=1e-3, atol=1e-4))

    if close(expected):
        return _passed("w = (N·P)^-β / max w: the rarest transition gets weight 1 and the most frequent the "
                       "smallest")
    raw = (IS_N * p) ** -IS_BETA
    hints = [
        (raw, "divide by the batch's largest weight, so that every w is at most 1 (*Where the weight comes "
              "from*)"),
        ((IS_N * p) ** IS_BETA / ((IS_N * p) ** IS_BETA).max(), "the exponent is -β: frequent transitions must get "
                                                                 "smaller weights, not larger (*Why PER*)"),
        (raw / raw.sum(), "normalise by the largest weight, not by the sum (*Where the weight comes from*)"),
        ((IS_N * p) ** -1.0 / ((IS_N * p) ** -1.0).max(), "use β = 0.5, not β = 1 (β is annealed towards 1 "
                                                           "over the run: *Why PER*)"),
        (p ** -IS_BETA, "divide by the largest weight, so that every w is at most 1 (*Where the weight comes "
                        "from*)"),
        (1 / (IS_N * p), "that is the full correction, β = 1: the exercise's β is 0.5, the exponent of *Why PER*'s "
                         "weight; then divide by the largest weight"),
    ]
    hint = next((h for value, h in hints if close(value)),
                "each weight is the formula of *Why PER* (its exponent is the exercise's β), then every weight is "
                "divided by the batch's largest (*Where the weight comes from* says why)")
    raise AssertionError(f"weights {np.round(got, 4).tolist()} are not it: {hint}.")


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
    "08.mass_leaf": ("c", "with leaves 0 and 1 at priority 0 the line starts with leaf 2's interval, [0, 1): at the "
                          "root 0.0 is below the left sum 3, so the walk goes left; below it the left sum is 0, and "
                          "0.0 is not below 0, so it goes right, then left, to leaf 2",
                     {"a": "a leaf of priority 0 owns an empty interval, even at the start of the line: walk down as "
                           "section 1 says, going left only where the mass is below the left child's sum",
                      "b": "leaf 1's priority is 0 as well in section 1's tree: it owns no interval either, so no "
                           "walk can end there (section 1, zero priority)"}),
    "08.where_tree_hurts": ("b", "a per-item tree walks once per item, so 256 items cost about 8 times the walk of 32, "
                                 "while an eager GPU update, mostly the price of launching its operations, barely "
                                 "lengthens: the factor grows",
                            {"a": "a per-item tree walks once for each item of the batch (sections 1 and 2): its time "
                                  "grows with the batch, it is not paid once per batch",
                             "c": "the walk grows with the batch, but an eager update on a GPU is mostly the launching "
                                  "of its operations, which does not (section 3, How to read these numbers)"}),
    "08.weights_n": ("b", "N multiplies every weight by the same factor, which the division by the largest removes",
                     {"a": "N multiplies every weight before the division: what does dividing by the batch's largest "
                           "weight do to a factor they all share? (*Why PER*, the weight's last step, and *Where the "
                           "weight comes from*)",
                      "c": "a square root of 10 would be β = 0.5 applied to N with nothing after it: finish the weight "
                           "of *Why PER*, divided by the batch's largest"}),
})


check_module(globals())
