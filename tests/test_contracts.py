"""dqn_course.contracts: the rule each annotation stands for, at the call (the sweep over the package is
tests/test_public_edges.py)."""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dqn_course.contracts import (ArgumentError, Count, Fraction, MaybeInf, Probability, Shape, SignedInt,
                                  StackShape, _accept_expr, check_module, checked, rule_for)


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


def test_a_missing_or_unknown_argument_is_pythons_own_type_error_naming_it():
    """The wrapper has the function's own parameters, so Python binds the arguments and says what is wrong."""
    with pytest.raises(TypeError, match=r"f\(\) missing 1 required positional argument: 'name'"):
        f(**{k: v for k, v in GOOD.items() if k != "name"})
    with pytest.raises(TypeError, match="unexpected keyword argument 'speed'"):
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


@checked
def h(p: Probability, q: Fraction, obs_shape: StackShape, frame: Shape(2) = (84, 84), /, *, eps: Probability = 0.5,
      **more: Count) -> str:
    return "ran"


@pytest.mark.parametrize("args, kwargs, words", [
    ((1.5, 0.5, (4, 84, 84)), {}, "h: p must be a number in [0, 1], got 1.5"),
    ((-0.1, 0.5, (4, 84, 84)), {}, "h: p must be a number in [0, 1], got -0.1"),
    ((0.5, 0, (4, 84, 84)), {}, "h: q must be a number in (0, 1], got 0"),
    ((0.5, 2, (4, 84, 84)), {}, "h: q must be a number in (0, 1], got 2"),
    ((0.5, 0.5, (84, 84)), {}, "h: obs_shape must be a shape of 3 positive whole numbers (stack, height, width), got "
                               "(84, 84)"),
    ((0.5, 0.5, (4, 0, 84)), {}, "obs_shape must be a shape of 3 positive whole numbers"),
    ((0.5, 0.5, (4, 84, 84), (84, 84, 1)), {}, "h: frame must be a shape of 2 positive whole numbers, got (84, 84, 1)"),
    ((0.5, 0.5, (4, 84, 84)), dict(eps=math.nan), "h: eps must be a number in [0, 1], got nan"),
    ((0.5, 0.5, (4, 84, 84)), dict(batch=0), "h: batch must be a whole number >= 1, got 0"),
])
def test_probabilities_fractions_and_shapes_are_refused_by_rule(args, kwargs, words):
    with pytest.raises(ArgumentError) as info:
        h(*args, **kwargs)
    assert words in str(info.value)


def test_the_edges_of_probabilities_fractions_and_shapes_are_taken():
    assert h(0, 1, [4, 84, 84], np.array([84, 84]), eps=1, batch=np.int64(2)) == "ran"
    assert h(1.0, 1e-9, (1, 1, 1)) == "ran"


values = st.one_of(
    st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(), st.text(max_size=2),
    st.sampled_from([np.int64(2), np.int64(-1), np.float32(0.5), np.float64(np.nan), np.bool_(True), np.zeros(2),
                     (4, 84, 84), [4, 0, 84], (84, 84), Path("x"), "", object()]))
HINTS = [int, Count, SignedInt, float, MaybeInf, Probability, Fraction, bool, str, np.ndarray, np.ndarray | None,
         int | None, Count | None, float | None, Probability | None, np.ndarray | Sequence[int], StackShape,
         str | Path, Path | None, bool | np.ndarray]


@settings(max_examples=400)
@given(hint=st.sampled_from(HINTS), value=values)
def test_the_inline_test_never_takes_what_the_rule_refuses_and_the_wrapper_agrees_with_the_rule(hint, value):
    """The compiled checker's fast path (``_accept_expr``) only skips the rule for values the rule accepts, and a
    wrapped function refuses exactly what the rule refuses."""
    names: dict = {"__c_inf": math.inf}
    expr = _accept_expr(hint, "v", names)
    verdict = rule_for(hint)(value)
    if expr is not None and eval(expr, {**names, "v": value}):  # noqa: S307 - the checker's own expression
        assert verdict is None, f"{expr} took {value!r}, which the rule refuses: {verdict}"

    def g(v):
        return "ran"

    g.__annotations__ = {"v": hint}
    wrapped = checked(g)
    if verdict is None:
        assert wrapped(value) == "ran"
    else:
        with pytest.raises(ArgumentError, match=f"g: v must be {re.escape(verdict)}"):
            wrapped(value)


def test_a_default_left_out_is_not_checked_and_a_wrapper_keeps_positional_and_keyword_only_parameters():
    def k(a: int, b: int = None, /, c: float = 0.5, *rest: Count, d: bool = False) -> tuple:  # None: "not given"
        return a, b, c, rest, d

    k = checked(k)
    assert k(1) == (1, None, 0.5, (), False) and k(1, 2, 0.25, 3, 4, d=True) == (1, 2, 0.25, (3, 4), True)
    with pytest.raises(ArgumentError, match=r"k: rest\[1\] must be a whole number >= 1, got 0"):
        k(1, 2, 0.25, 3, 0)
    with pytest.raises(TypeError, match="positional-only"):
        k(a=1)
    with pytest.raises(TypeError):
        k(1, 2, 0.5, 3, True)  # d is keyword-only: True goes into *rest, whose rule refuses it


PICKLED = """
import builtins, cloudpickle, numpy as np, dqn_course
from dqn_course.contracts import ArgumentError
from dqn_course.per import CompiledSumTree
builtins.input = lambda *args: ''  # what ipykernel does
cloudpickle.register_pickle_by_value(dqn_course)
fresh = cloudpickle.loads(cloudpickle.dumps(CompiledSumTree))  # its wrappers not called yet
CompiledSumTree(4).update(np.arange(4), np.ones(4))
called = cloudpickle.loads(cloudpickle.dumps(CompiledSumTree))
for cls in (fresh, called):
    tree = cls(4)
    tree.update(np.arange(4), np.arange(1.0, 5.0))
    assert tree.total == 10.0 and list(tree.get(np.array([3]))) == [4.0]
    try:
        cls(0)
    except ArgumentError as e:
        assert 'capacity must be a whole number >= 1, got 0' in str(e), e
    else:
        raise AssertionError('cls(0) was taken')
print('ok')
"""


def test_a_checked_class_pickled_by_value_works_and_checks_where_it_lands():
    """Ray pickles an actor class (and its checked methods) by value with cloudpickle, from a notebook whose kernel
    has replaced ``input``: the wrappers must pickle, and check and run in the copy, before and after a first call.
    In a fresh interpreter: unpickling a class by value in the same process rewrites the class it came from."""
    import subprocess
    import sys

    pytest.importorskip("cloudpickle")
    done = subprocess.run([sys.executable, "-c", PICKLED], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


DEFERRED_MODULE = '''
from __future__ import annotations
from typing import TYPE_CHECKING
from dqn_course.contracts import check_module
if TYPE_CHECKING:
    import deferred_lib
    from deferred_lib import Thing as Aliased


def place(device: deferred_lib.Thing | str | None = None, other: Aliased | None = None) -> str:
    """Names the kind it got."""
    return type(device).__name__
check_module(globals())
'''


def test_a_type_checking_only_name_is_checked_the_same_before_and_after_its_module_loads(tmp_path, monkeypatch):
    """``device: torch.device | str | None`` in a module that imports torch for type checkers only: the first call,
    made before torch is loaded, must not leave the parameter unchecked for the rest of the process."""
    import importlib
    import sys
    import types

    (tmp_path / "deferring_mod.py").write_text(DEFERRED_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "deferred_lib", raising=False)
    module = importlib.import_module("deferring_mod")
    assert module.place("cpu") == "str"  # the first call resolves the annotations: deferred_lib is not loaded
    with pytest.raises(ArgumentError, match=r"place: device must be None or a deferred_lib\.Thing or a string"):
        module.place(object())
    with pytest.raises(ArgumentError, match="other must be None or a deferred_lib.Thing"):
        module.place(other=3)
    lib = types.ModuleType("deferred_lib")
    lib.Thing = type("Thing", (), {"__module__": "deferred_lib"})
    monkeypatch.setitem(sys.modules, "deferred_lib", lib)  # loaded later: its real class decides from then on
    assert module.place(lib.Thing()) == "Thing"
    assert module.place(other=lib.Thing()) == "NoneType"
    with pytest.raises(ArgumentError, match="device must be"):
        module.place(object())
    monkeypatch.delitem(sys.modules, "deferring_mod")
