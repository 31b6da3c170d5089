"""The exercise checks of notebooks 00, 02 and 03: right answers pass, wrong ones raise, ``None`` only reminds."""
from __future__ import annotations

import functools
import types
from pathlib import Path

import cv2
import numpy as np
import pytest

import dqn_course
from _solutions import run_solutions
from dqn_course.lab import checks
from dqn_course.lab.frames import (blog_preprocess, downsample, max_pool_downsample, preprocessing_trace, raw_frames,
                                   state_bytes, to_gray)


# --- notebook 00 ----------------------------------------------------------------------------------

def next_stack(state, screen):
    """The worked answer: the 3 newest screens of the state, then the new one, in a new array."""
    return np.concatenate([state[1:], screen[None]])


def as_course_code(fn):
    """``fn`` with its code moved into the course's package: what a helper of ``dqn_course`` doing the same is."""
    code = fn.__code__.replace(co_filename=str(Path(dqn_course.__file__).parent / "lab" / "frames.py"))
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def test_next_stack_right(capsys):
    assert checks.check_next_stack(next_stack) is True
    assert checks.check_next_stack(lambda s, x: np.stack([*s[1:], x])) is True  # another way to the same array
    out = capsys.readouterr().out
    assert out.startswith("✓") and "806,400 bytes" in out and "806.4 GB" in out  # the figure notebook 00 is for


def test_next_stack_refuses_the_courses_own_function_and_the_pages_imports():
    """The same code, from the course's package, or a library function the page imports, is not the learner's."""
    with pytest.raises(AssertionError, match="not yours"):
        checks.check_next_stack(as_course_code(next_stack))
    for library in (np.roll, np.append, np.ndarray.sort, functools.partial(np.concatenate, axis=0)):
        with pytest.raises(AssertionError, match="not yours|not a function of yours"):
            checks.check_next_stack(library)


WRONG_NEXT_STACK = {
    "in place": (lambda s, x: (s.__setitem__(slice(0, 3), s[1:].copy()), s.__setitem__(3, x), s)[2],
                 "changed the state it was given"),
    "the state back": (lambda s, x: s.copy(), "new screen is missing"),
    "newest first": (lambda s, x: np.concatenate([x[None], s[1:]]), "new screen goes last"),
    "reversed": (lambda s, x: np.concatenate([s[1:], x[None]])[::-1].copy(), "order is reversed"),
    "drops the newest": (lambda s, x: np.concatenate([s[:3], x[None]]), "the oldest, the first one"),
    "np.roll alone": (lambda s, x: np.roll(s, -1, axis=0), "3 newest screens of s"),
    "a view of 5": (lambda s, x: np.concatenate([s, x[None]])[1:], "view"),
    "float32": (lambda s, x: np.concatenate([s[1:], x[None]]).astype(np.float32), "uint8"),
    "five screens": (lambda s, x: np.concatenate([s, x[None]]), "shape"),
    "a list": (lambda s, x: [*s[1:], x], "one NumPy array"),
    "crashes": (lambda s, x: np.concatenate([s[1:], x]), "raised ValueError"),
}


@pytest.mark.parametrize("name", list(WRONG_NEXT_STACK))
def test_next_stack_wrong(name):
    wrong, hint = WRONG_NEXT_STACK[name]
    with pytest.raises(AssertionError, match=hint):
        checks.check_next_stack(wrong)


def test_next_stack_none(capsys):
    assert checks.check_next_stack(None) is None
    assert checks.check_next_stack(lambda s, x: None) is None  # the exercise cell's function, not written yet
    assert capsys.readouterr().out.count("Not answered yet") == 2


def test_notebook_00_solution_cell_passes_its_check():
    """The solution cell is committed without outputs and skipped by nbval; it runs here instead."""
    out = run_solutions("00_setup", {"checks": checks, "np": np})
    assert out.count("✓") == 2 and "806,400" in out  # the exercise and the Pong question


# --- notebook 02 ----------------------------------------------------------------------------------

def _worked_preprocess(frame):
    gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
    return cv2.resize(gray, (84, 84), interpolation=cv2.INTER_AREA)


def _off_by_one_preprocess(frame):
    """Luminance by hand, truncated instead of rounded: differs from the reference by at most 1."""
    gray = (frame @ np.array([0.299, 0.587, 0.114])).astype(np.uint8)
    return cv2.resize(gray, (84, 84), interpolation=cv2.INTER_AREA)


@pytest.mark.parametrize("fn", [_worked_preprocess, _off_by_one_preprocess, downsample])
def test_preprocess_right(fn, capsys):
    assert checks.check_preprocess(fn) is True
    assert "✓" in capsys.readouterr().out


WRONG_PREPROCESS = {
    "blog [::2, ::2]": blog_preprocess,
    "float64 output": lambda f: _worked_preprocess(f) / 1.0,
    "float32 scaled": lambda f: (_worked_preprocess(f) / 255.0).astype(np.float32),
    "channel axis kept": lambda f: _worked_preprocess(f)[:, :, None],
    "still colour": lambda f: cv2.resize(f, (84, 84), interpolation=cv2.INTER_AREA),
    "BGR": lambda f: cv2.resize(cv2.cvtColor(f, cv2.COLOR_BGR2GRAY), (84, 84), interpolation=cv2.INTER_AREA),
    "channel mean": lambda f: cv2.resize(f.mean(axis=2).astype(np.uint8), (84, 84), interpolation=cv2.INTER_AREA),
    "INTER_NEAREST": lambda f: cv2.resize(to_gray(f), (84, 84), interpolation=cv2.INTER_NEAREST),
    "INTER_LINEAR": lambda f: cv2.resize(to_gray(f), (84, 84), interpolation=cv2.INTER_LINEAR),
    "transposed": lambda f: _worked_preprocess(f).T,
    "cropped": lambda f: _worked_preprocess(f[34:194]),
    "constant": lambda f: np.zeros((84, 84), np.uint8),
    "list": lambda f: _worked_preprocess(f).tolist(),
}


@pytest.mark.parametrize("name", list(WRONG_PREPROCESS))
def test_preprocess_wrong(name):
    with pytest.raises(AssertionError):
        checks.check_preprocess(WRONG_PREPROCESS[name])


def test_preprocess_hints_name_the_mistake():
    for name, words in [("BGR", "red the weight that belongs to blue"), ("INTER_LINEAR", "area averaging"),
                        ("transposed", "transposed"), ("channel mean", "luminance"), ("float64 output", "uint8"),
                        ("blog [::2, ::2]", "resize")]:
        with pytest.raises(AssertionError, match=words):
            checks.check_preprocess(WRONG_PREPROCESS[name])


def test_preprocess_not_callable():
    with pytest.raises(AssertionError):
        checks.check_preprocess(np.zeros((84, 84), np.uint8))


def test_preprocess_none(capsys):
    assert checks.check_preprocess(None) is None
    assert "not answered yet" in capsys.readouterr().out.lower()


def test_notebook_02_solution_cell_passes_its_check():
    out = run_solutions("02_downsample", {"checks": checks, "cv2": cv2})
    assert out.count("✓") == 2 and "Not answered yet" not in out


# --- dqn_course.lab.frames, which the checks and notebooks 02-03 rely on -------------------------

def test_hand_written_pipeline_equals_atari_preprocessing():
    trace = preprocessing_trace(40, seed=0)
    assert len(trace) == 40
    for prev, last, obs in trace:
        assert obs.shape == (84, 84) and obs.dtype == np.uint8
        assert np.array_equal(max_pool_downsample(prev, last), obs)


def test_raw_frames_deterministic_and_shaped():
    a, b = raw_frames(3, seed=2, every=5), raw_frames(3, seed=2, every=5)
    assert a.shape == (3, 210, 160, 3) and a.dtype == np.uint8
    assert np.array_equal(a, b)


def test_blog_preprocess_is_a_view_of_a_bigger_array():
    frame = raw_frames(1, seed=0)[0]
    small = blog_preprocess(frame)
    assert small.shape == (105, 80) and small.dtype == np.uint8 and small.nbytes == 8_400
    assert small.base is not None and small.base.nbytes == 33_600


def test_state_bytes():
    assert state_bytes(np.uint8) == 28_224
    assert state_bytes(np.float32) == 112_896
    assert state_bytes("float64", stack=1) == 56_448


def test_notebook_03_solution_cell_passes_its_checks(capsys):
    """The solution cell is committed without outputs and skipped by nbval; it runs here instead."""
    import json
    from pathlib import Path

    import numpy as np

    path = Path(__file__).resolve().parents[1] / "notebooks" / "03_dtypes.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    sources = ["".join(c["source"]) for c in cells if "solution" in c.get("metadata", {}).get("tags", [])]
    assert sources
    for source in sources:
        exec(compile(source, "03:solution", "exec"), {"np": np, "checks": checks})
    out = capsys.readouterr().out
    assert out.count("✓") == 4 and "Not answered yet" not in out
