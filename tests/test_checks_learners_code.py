"""The one rule every coding exercise's check applies first (``core._require_learners_code``): the answer is code
the learner wrote. The course's reference, a library's function, a subclass of a course class and a wrapper that
calls the course's code are refused, each with a message naming what it is; the learner's own def, lambda,
decorated function, partial, bound method and class pass."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from torch import nn

from dqn_course.lab.checks.core import _require_learners_code
from dqn_course.lab.frames import downsample
from dqn_course.replay.frame_sharing import FrameSharingMemory


def own(frame):
    return frame.copy()


class OwnRing:
    def __init__(self, capacity):
        self.capacity = capacity

    def add(self, item):
        return item


class OwnNet(nn.Module):
    def forward(self, x):
        return x.float() / 255


def calls_course(frame):
    return downsample(frame)


def closes_over_course():
    helper = downsample
    return lambda frame: helper(frame)


def imports_course_by_name(frame):
    import importlib

    return importlib.import_module("dqn_course.lab.frames").to_gray(frame)


def reads_course_from_sys_modules(frame):
    import sys

    return sys.modules["dqn_course.lab.frames"].to_gray(frame)


def mentions_the_course_in_a_message(frame):
    print("not dqn_course's, mine")
    return frame.copy()


def by_default(frame, shrink=downsample):
    return shrink(frame)


def by_keyword_default(frame, *, shrink=downsample):
    return shrink(frame)


def own_helper(frame):
    return calls_course(frame)


TOOLS = {"shrink": downsample}
SHRINK = functools.partial(downsample)
A_MEMORY = FrameSharingMemory(8, (4, 84, 84))


def through_a_table(frame):
    return TOOLS["shrink"](frame)


def through_a_partial(frame):
    return SHRINK(frame)


def through_an_instance(frame):
    import sys

    return vars(sys.modules[type(A_MEMORY).__module__])["stack_windows"]


class HelperClass:
    def go(self, frame):
        return downsample(frame)


def through_a_class_of_its_own(frame):
    return HelperClass().go(frame)


def recursive(n):
    return recursive(n - 1) if n else own(n)


class RingOverCourse:
    def add(self, item):
        return FrameSharingMemory


class SubclassOfCourse(FrameSharingMemory):
    pass


@pytest.mark.parametrize("answer", [own, mentions_the_course_in_a_message, lambda frame: frame,
                                    functools.lru_cache(own), functools.partial(own), OwnRing, OwnRing(3).add, OwnNet,
                                    OwnNet(), recursive],
                         ids=["def", "a message naming the course", "lambda", "decorated", "partial", "class",
                              "bound method", "module class", "module", "recursive, through its own helper"])
def test_the_learners_code_passes(answer):
    assert _require_learners_code(answer, "f(x)") is None


@pytest.mark.parametrize("answer, said", [
    (downsample, "course's own `downsample`"),
    (FrameSharingMemory, "course's own `FrameSharingMemory`"),
    (SubclassOfCourse, "course's own `FrameSharingMemory`"),
    (functools.partial(downsample), "course's own `downsample`"),
    (calls_course, "calls the course's own `downsample`"),
    (closes_over_course(), "calls the course's own `helper`"),
    (RingOverCourse, "calls the course's own `FrameSharingMemory`"),
    (imports_course_by_name, "calls the course's own `dqn_course.lab.frames`"),
    (reads_course_from_sys_modules, "calls the course's own `dqn_course.lab.frames`"),
    (by_default, "course's own `the default of shrink`"),
    (by_keyword_default, "course's own `the default of shrink`"),
    (own_helper, "course's own `calls_course → downsample`"),
    (through_a_table, "course's own `TOOLS`"),
    (through_a_partial, "course's own `SHRINK`"),
    (through_an_instance, "course's own `A_MEMORY`"),
    (through_a_class_of_its_own, "course's own `HelperClass → downsample`"),
    (np.copy, "not a function of yours|a library's, not yours"),
    (np.ascontiguousarray, "not a function of yours"),
    (np.sqrt, "a library's, not yours"),
    (nn.Identity, "a library's, not yours"),
    (nn.Identity(), "a library's, not yours"),
    (len, "not a function of yours"),
], ids=["reference", "course class", "subclass", "partial of it", "wrapper", "closure", "class calling it",
        "import by name", "sys.modules", "default", "keyword default", "own helper", "table", "partial global",
        "course instance", "own class calling it", "numpy function", "numpy builtin", "ufunc", "library class",
        "library instance", "builtin"])
def test_anything_else_is_refused_saying_what_it_is(answer, said):
    with pytest.raises(AssertionError, match=said) as caught:
        _require_learners_code(answer, "f(x)", "the idea of section 2")
    assert "the idea of section 2" in str(caught.value) or "not a function of yours" in str(caught.value)


def test_a_value_that_cannot_be_called_is_refused_naming_the_call():
    with pytest.raises(AssertionError, match=r"pass the function itself, e.g. check_f\(f\), got 3"):
        _require_learners_code(3, "f(x)")
