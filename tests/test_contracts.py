"""dqn_course.contracts: the rule each annotation stands for, at the call (the sweep over the package is
tests/test_public_edges.py)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from dqn_course.contracts import ArgumentError, Count, MaybeInf, SignedInt, check_module, checked


@checked
def f(n: int, k: Count, s: SignedInt, x: float, y: MaybeInf, flag: bool, path: str | Path, name: str,
      arr: np.ndarray | None = None, items: tuple[int, ...] = ()) -> str:
    return "ran"


GOOD = dict(n=0, k=1, s=-3, x=0.5, y=math.inf, flag=False, path="run", name="x")


@pytest.mark.parametrize("change, words", [
    (dict(n=-1), "n must be a whole number >= 0, got -1"),
    (dict(n=2.0), "n must be a whole number >= 0 (an int, e.g. 2), got 2.0"),
    (dict(n=True), "n must be a whole number >= 0 (an int), got True"),
    (dict(k=0), "k must be a whole number >= 1, got 0"),
    (dict(x=math.nan), "x must be a finite number, got nan"),
    (dict(x="0.5"), "x must be a number, got '0.5'"),
    (dict(y=-math.inf), "y must be a finite number (or +inf)"),
    (dict(flag=1), "flag must be True or False, got 1"),
    (dict(path=""), "path must be a path: a non-empty text without NUL bytes"),
    (dict(path=3), "path must be a path (str or pathlib.Path), got 3"),
    (dict(name=None), "name must be a string, got None"),
    (dict(arr=[1, 2]), "arr must be None or a numpy.ndarray, got [1, 2]"),
    (dict(items=(1, -2)), "items must be a tuple of items each a whole number >= 0"),
])
def test_a_wrong_argument_is_refused_naming_the_callable_and_the_parameter(change, words):
    with pytest.raises(ArgumentError) as info:
        f(**{**GOOD, **change})
    assert str(info.value).startswith("f: ") and words in str(info.value)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


def test_right_arguments_run_the_body_numpy_kinds_and_ints_for_floats_included():
    assert f(**GOOD) == "ran"
    assert f(**{**GOOD, "n": np.int64(3), "x": 2, "flag": np.True_, "path": Path("run"),
                "arr": np.zeros(2), "items": (1, 2)}) == "ran"


def test_a_missing_or_unknown_argument_is_an_argument_error():
    with pytest.raises(ArgumentError, match="f: missing a required argument: 'name'"):
        f(**{k: v for k, v in GOOD.items() if k != "name"})
    with pytest.raises(ArgumentError, match="unexpected keyword argument 'speed'"):
        f(**GOOD, speed=1)


def test_star_args_and_kwargs_are_checked_item_by_item():
    @checked
    def g(*sizes: int, **weights: float) -> None:
        pass

    g(1, 2, a=0.5)
    with pytest.raises(ArgumentError, match=r"g: sizes\[1\] must be a whole number >= 0, got -2"):
        g(1, -2)
    with pytest.raises(ArgumentError, match="g: b must be a finite number, got nan"):
        g(a=0.5, b=math.nan)


def test_check_module_wraps_functions_methods_and_constructors_and_keeps_defaults_identical():
    def helper(x: int) -> int:
        return x

    class Thing:
        def __init__(self, size: Count, fn=helper):
            self.size, self.fn = size, fn

        def grow(self, by: int) -> int:
            return self.size + by

    namespace = {"__name__": "planted", "helper": helper, "Thing": Thing}
    helper.__module__ = Thing.__module__ = "planted"
    check_module(namespace)
    with pytest.raises(ArgumentError, match="helper: x must be"):
        namespace["helper"]("1")
    with pytest.raises(ArgumentError, match="Thing: size must be a whole number >= 1"):
        Thing(0)
    with pytest.raises(ArgumentError, match="Thing.grow: by must be"):
        Thing(2).grow(-1)
    assert Thing(2).fn is namespace["helper"]  # the default now is the checked function callers see


def test_a_callable_given_nothing_to_check_is_refused_by_the_rule_itself():
    with pytest.raises(ArgumentError, match="checked: func must be a function"):
        checked(3)
    with pytest.raises(ArgumentError, match="check_module: namespace must be a module's globals"):
        check_module({"x": 1})


def test_only_calls_from_outside_the_package_are_checked():
    @checked
    def size(n: int) -> int:
        return n

    inside = {"__name__": "dqn_course.somewhere"}
    exec("def forward(f, value):\n    return f(value)\n", inside)  # a function of the package's own code
    assert inside["forward"](size, -1) == -1  # the package passes what it checked where it came in
    with pytest.raises(ArgumentError, match="size: n must be a whole number >= 0"):
        size(-1)
