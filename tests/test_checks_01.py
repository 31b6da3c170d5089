"""Notebook 01's checks: right answers pass, wrong ones raise with a hint, None is 'not answered yet'."""
from __future__ import annotations

import functools
import json
import mmap
import re
import sys
import tracemalloc
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import dqn_course
from _solutions import run_solutions
from dqn_course.lab import checks, naive
from dqn_course.profiling import fit_linear, measure_in_subprocess


def own_preprocess(frame):
    """The worked answer: the blog's values, cast after the slice, so the state owns its 8,400 bytes."""
    return np.mean(frame, axis=2)[::2, ::2, None].astype(np.uint8)


def test_none_is_not_answered_yet(capsys):
    assert checks.check_own_preprocess(None) is None
    assert "Not answered yet" in capsys.readouterr().out


def test_own_preprocess_right(capsys):
    assert checks.check_own_preprocess(own_preprocess) is True
    assert checks.check_own_preprocess(lambda f: np.mean(f, axis=2).astype(np.uint8)[::2, ::2, None].copy()) is True
    out = capsys.readouterr().out
    assert out.startswith("✓") and "the blog's recipe: 33," in out  # the 210 x 160 image the blog's view keeps


@pytest.mark.parametrize("course", [naive.preprocess, functools.partial(naive.preprocess, cast=True),
                                    lambda f: naive.preprocess(f).copy()])
def test_own_preprocess_refuses_the_course_code(course):
    with pytest.raises(AssertionError, match="course's own"):
        checks.check_own_preprocess(course)


@pytest.mark.parametrize("library", [np.ascontiguousarray, np.copy])
def test_own_preprocess_refuses_what_the_page_imports(library):
    with pytest.raises(AssertionError, match="not a function of yours|library"):
        checks.check_own_preprocess(library)


@pytest.mark.parametrize("wrong, hint", [
    (lambda f: np.mean(f, axis=2).astype(np.uint8)[::2, ::2, None], "view of a bigger array"),  # the blog's bug
    (lambda f: np.mean(f, axis=2).astype(np.uint8)[::2, ::2][..., None], "view of a bigger array"),
    (lambda f: np.mean(f, axis=2)[::2, ::2, None], "float64"),
    (lambda f: np.mean(f, axis=2)[::2, ::2].astype(np.uint8), "channel"),
    (lambda f: np.mean(f, axis=2)[None, ::2, ::2, None].astype(np.uint8), r"as section 1 prints it stored, \(1, 105"),
    (lambda f: f[::2, ::2, :1], "differs from the blog's recipe"),  # a slice of the raw frame
    (lambda f: f.mean(axis=2)[1::2, ::2, None].astype(np.uint8), "differs from the blog's recipe"),
    (lambda f: [[0]], "NumPy array"),
])
def test_own_preprocess_wrong(wrong, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_own_preprocess(wrong)


def test_own_preprocess_sees_a_state_that_keeps_the_raw_frame_alive():
    """Right values, yet a reference to the raw frame rides along: the weak reference catches it."""
    class State(np.ndarray):
        pass

    def keeps_frame(frame):
        state = own_preprocess(frame).view(State)
        state.frame = frame
        return state

    with pytest.raises(AssertionError, match="raw frame stays alive"):
        checks.check_own_preprocess(keeps_frame)


def test_the_checks_of_notebook_01_are_the_exercise_and_its_quizzes():
    """Notebook 01's learner writes one function, the fix; the formulas its page states are no exercise: its checks
    module defines none (another chapter's check may share a name with the old ones), and the page calls no other."""
    from dqn_course.lab.checks import ch00_01

    assert not hasattr(ch00_01, "check_bytes_per_transition") and not hasattr(ch00_01, "check_killed_at_step")
    page = json.loads((Path(__file__).resolve().parent.parent / "notebooks" / "01_naive_agent.ipynb").read_text())
    called = {name for c in page["cells"] if c["cell_type"] == "code"
              for name in re.findall(r"checks\.(check_\w+)", "".join(c["source"]))}
    assert called == {"check_own_preprocess", "check_prediction_of", "check_question"}


def test_naive_run_stores_the_states_of_the_preprocess_it_is_given():
    agent = naive.NaiveAgent(4, preprocess=own_preprocess)
    frame = np.random.default_rng(0).integers(0, 256, size=naive.RAW_FRAME_SHAPE, dtype=np.uint8)
    state = agent.to_state(frame)
    assert state.shape == (1, *naive.BLOG_FRAME_SHAPE) and naive.root_buffer(state).nbytes == state.nbytes
    assert np.array_equal(state, naive.NaiveAgent(4).to_state(frame))  # the blog's values
    with pytest.raises(ValueError, match="frames='blog'"):
        naive.NaiveAgent(4, frames="raw", preprocess=own_preprocess)


def _measuring_cell_namespace(steps: int) -> dict:
    """What notebook 01's re-measuring cell reads: the names its earlier cells define, with a short run."""
    cells = json.loads((Path(__file__).resolve().parent.parent / "notebooks" / "01_naive_agent.ipynb").read_text())
    sources = ["".join(c["source"]) for c in cells["cells"] if c["cell_type"] == "code"]
    fit_source = next(s for s in sources if "def fit_run(" in s)
    fit_def = fit_source[fit_source.index("def fit_run("):fit_source.index("\n\n\n", fit_source.index("def fit_run("))]
    namespace = {"np": np, "naive": naive, "measure_in_subprocess": measure_in_subprocess, "fit_linear": fit_linear,
                 "STEPS": steps, "MILLION": 1_000_000, "common": {"record_every": steps // 10, "batch_size": 32}}
    exec(fit_def, namespace)  # noqa: S102
    measuring = next(s for s in sources if "naive.measure_run(" in s)
    return namespace, measuring


def test_notebook_01_measuring_cell_says_not_answered_yet(capsys):
    namespace, measuring = _measuring_cell_namespace(100)
    namespace["own_preprocess"] = None
    exec(measuring, namespace)  # noqa: S102
    assert "Not answered yet" in capsys.readouterr().out


def _notebook_function(source: str, name: str):
    """A function defined as a notebook cell defines it: in ``__main__``, which a fresh interpreter cannot import."""
    namespace = {"__name__": "__main__", "np": np}
    exec(source, namespace)  # noqa: S102
    return namespace[name]


NOTEBOOK_OWN_PREPROCESS = """
def own_preprocess(frame):
    return np.mean(frame, axis=2)[::2, ::2, None].astype(np.uint8)
"""


@pytest.mark.skipif(not naive.fork_is_safe(), reason="the re-measurement forks the kernel only where fork is safe")
def test_notebook_01_measuring_cell_runs_the_learners_fix_in_a_fork(capsys):
    """The payoff: with the worked answer, a forked run of the agent grows by about the 8,400-byte state a step,
    several times less than the blog's recipe in the same conditions."""
    namespace, measuring = _measuring_cell_namespace(400)
    namespace["own_preprocess"] = _notebook_function(NOTEBOOK_OWN_PREPROCESS, "own_preprocess")
    exec(measuring, namespace)  # noqa: S102
    out = capsys.readouterr().out
    assert "Not answered yet" not in out and "x less" in out and "started by fork" in out
    blog, own = (namespace["remeasured"][name] for name in namespace["remeasured"])
    assert own["held"] / own["memory_len"] < 9_000 < 33_600 < blog["held"] / blog["memory_len"]


def test_notebook_01_measuring_cell_spawns_where_fork_is_unsafe(capsys, monkeypatch):
    """macOS and Windows: no fork. The cell's runs start as fresh interpreters that get the learner's function, defined
    in a notebook cell, by value, and still store its states."""
    monkeypatch.setattr(naive, "fork_is_safe", lambda: False)
    namespace, measuring = _measuring_cell_namespace(100)
    namespace["own_preprocess"] = _notebook_function(NOTEBOOK_OWN_PREPROCESS, "own_preprocess")
    exec(measuring, namespace)  # noqa: S102
    out = capsys.readouterr().out
    assert "Not answered yet" not in out and "started by spawn" in out
    blog, own = (namespace["remeasured"][name] for name in namespace["remeasured"])
    # the 8,400-byte state and each row's list and scalars, over only 100 rows
    assert own["held"] / own["memory_len"] < 8_400 * 1.1 < 33_600 < blog["held"] / blog["memory_len"]


@pytest.mark.parametrize("platform, methods, safe", [
    ("linux", ["fork", "spawn", "forkserver"], True),
    ("darwin", ["spawn", "fork", "forkserver"], False),  # offered, but unsafe in a process that runs threads
    ("win32", ["spawn"], False),
    ("linux", ["spawn"], False),
])
def test_fork_is_safe_only_on_linux_with_fork(monkeypatch, platform, methods, safe):
    monkeypatch.setattr(naive.sys, "platform", platform)
    monkeypatch.setattr(naive.mp, "get_all_start_methods", lambda: methods)
    assert naive.fork_is_safe() is safe


def test_measure_run_reports_a_failure_in_the_spawned_process(monkeypatch):
    monkeypatch.setattr(naive, "fork_is_safe", lambda: False)
    broken = _notebook_function("def broken(frame):\n    raise ValueError('no state')\n", "broken")
    with pytest.raises(RuntimeError, match="no state"):
        naive.measure_run(10, preprocess=broken, learn_every=0, record_every=5)


def test_count_predict_calls_is_two_per_sampled_transition_one_where_the_game_ends():
    assert naive.count_predict_calls(32) == 64
    assert naive.count_predict_calls(4) == 8
    assert naive.count_predict_calls(32, ending=3) == 61  # Q(s) for all 32, Q(s') for the 29 whose game goes on
    assert naive.count_predict_calls(4, ending=4) == 4
    with pytest.raises(ValueError, match="at most the 4"):
        naive.count_predict_calls(4, ending=5)


def test_prediction_check_on_predict_calls(capsys):
    measured = naive.count_predict_calls(32, ending=3)
    assert checks.check_prediction_of("01.predict_calls", 61, measured, batch=32, ending=3)
    for wrong, words in ((64, "ends a game needs no Q-values"), (32, "half the story"), (29, "still needs"),
                         (1, "one batched call"), (244, "all 4 actions"), (62, "act()"), (50, "count the forward")):
        with pytest.raises(AssertionError, match=words):
            checks.check_prediction_of("01.predict_calls", wrong, measured, batch=32, ending=3)
    assert checks.check_prediction_of("01.predict_calls", None, measured, batch=32, ending=3) is None
    assert "Not answered yet" in capsys.readouterr().out


def test_prediction_check_on_kept_alive(capsys):
    """01's first prediction: the blog's stored state is a view of the 210 x 160 uint8 gray image (the cast comes
    before the slice), so one state keeps that image's bytes allocated; each likely mistake gets its own hint."""
    frame = np.zeros((210, 160, 3), np.uint8)
    state = naive.preprocess(frame)[None, :]
    measured = naive.root_buffer(state).nbytes
    assert measured == 210 * 160
    given = {"frame": frame.nbytes, "state": state.nbytes}
    assert checks.check_prediction_of("01.kept_alive", measured, measured, **given)
    for wrong, words in ((8_400, "owns none"), (100_800, "raw frame"), (268_800, "float64"),
                         (42_000, "adds none"), (5_000, "step by step")):
        with pytest.raises(AssertionError, match=words):
            checks.check_prediction_of("01.kept_alive", wrong, measured, **given)
    assert checks.check_prediction_of("01.kept_alive", None, measured, **given) is None
    assert "Not answered yet" in capsys.readouterr().out


def test_killed_scaling_question_key_by_arithmetic():
    """01's question: a memory with no maxlen is killed where baseline + slope x step reaches the RAM available, so
    twice the RAM gives twice your step plus the baseline over the slope: a bit more than twice (option b)."""
    baseline, slope, ram = 0.3e9, 40_000.0, 24e9
    fit = fit_linear([0, 1_000, 2_000], [baseline, baseline + 1_000 * slope, baseline + 2_000 * slope])
    yours, theirs = fit.step_at(ram), fit.step_at(2 * ram)
    assert theirs == pytest.approx(2 * yours + baseline / slope) and theirs > 2 * yours
    assert checks.check_question("01.killed_scaling", "b") is True
    for wrong in ("a", "c"):
        with pytest.raises(AssertionError, match="section 3"):
            checks.check_question("01.killed_scaling", wrong)


def test_notebook_01_solution_cell_passes_its_checks():
    """The solution cell is committed without outputs and skipped by nbval; it runs here instead."""
    out = run_solutions("01_naive_agent", {"checks": checks, "naive": naive, "np": np})
    assert out.count("✓") == 4 and "Not answered yet" not in out  # the exercise, the two predictions, the quiz


def test_notebook_01b_solution_cell_passes_its_checks():
    """01b's exercise and questions: its solution cell, committed without outputs and skipped by nbval, runs here."""
    out = run_solutions("01b_measuring_honestly", {"checks": checks, "np": np, "mmap": mmap})
    assert out.count("✓") == 3 and "Not answered yet" not in out  # the exercise and the two questions


# --- notebook 01b: pretouch ------------------------------------------------------------------------

def pretouch(buf):
    """The worked answer: one real write per page (a copy, since NumPy skips assigning an array to itself), of the
    value already there, and one of the last byte, whose page a buffer that starts inside a page spills into."""
    flat = buf.reshape(-1).view(np.uint8)
    flat[::mmap.PAGESIZE] = flat[::mmap.PAGESIZE].copy()
    flat[-1:] = flat[-1:].copy()


def _stride_from_the_first_byte(buf):
    """A page's step from the array's first byte and no more: right on a buffer that starts on a page boundary."""
    flat = buf.reshape(-1).view(np.uint8)
    flat[::mmap.PAGESIZE] = flat[::mmap.PAGESIZE].copy()


def _off_by_one(buf):
    """A page's step that stops one page early, ``range(0, n - P, P)``: misses the buffer's last page."""
    flat = buf.reshape(-1).view(np.uint8)
    for i in range(0, flat.size - mmap.PAGESIZE, mmap.PAGESIZE):
        flat[i] = flat[i]


def as_course_code(fn):
    """``fn`` with its code moved into the course's package: what a helper of ``dqn_course`` doing the same is."""
    code = fn.__code__.replace(co_filename=str(Path(dqn_course.__file__).parent / "replay" / "base.py"))
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def test_pretouch_right(capsys):
    assert checks.check_pretouch(pretouch) is True
    assert capsys.readouterr().out.startswith("✓")


def test_pretouch_buffer_counts_writes_and_reads_as_an_array():
    """The check's buffer counts the values written through any view of it, by assignment, a ufunc's ``out=`` or
    ``np.copyto``, and reads like a plain array, counting nothing."""
    from dqn_course.lab.checks.ch00_01 import _WriteCounting

    buf = np.zeros((4, 8), np.float32).view(_WriteCounting)
    buf.writes = [0]
    flat = buf.reshape(-1).view(np.uint8)
    assert isinstance(flat, _WriteCounting) and flat.writes is buf.writes
    flat[::16] = 0  # 8 bytes
    buf[0] = 1  # 8 values
    buf[buf > 0] = 1  # a mask selecting those 8
    buf += 0  # 32 values through out=
    np.add.at(buf, (0, [1, 2]), 0)  # 2
    np.copyto(buf[1], 2)  # 8
    assert buf.writes[0] == 8 + 8 + 8 + 32 + 2 + 8
    assert buf.sum() == 8 + 16 and (buf == 2).sum() == 8 and buf.copy().max() == 2 and buf.writes[0] == 66
    assert type(buf.sum()) is np.float32 and type(buf + 1) is np.ndarray


def test_pretouch_measures_a_fresh_buffer_untouched():
    """The behaviour check's premise: a fresh buffer costs (almost) no RSS until written, then a page per page."""
    from dqn_course.lab.checks.ch00_01 import PRETOUCH_SLACK, _fresh_buffer
    from dqn_course.profiling import rss_bytes

    page = mmap.PAGESIZE
    before = rss_bytes()
    buf = _fresh_buffer(1_000 * page, "uint8", (1_000 * page,))
    assert rss_bytes() - before < PRETOUCH_SLACK * page and not buf.any()
    before = rss_bytes()
    buf[::2 * page] = 1  # every other page
    assert abs(rss_bytes() - before - 500 * page) < PRETOUCH_SLACK * page


def test_pretouch_refuses_the_courses_own_function_and_the_pages_imports():
    """The same code, from the course's package, or a library function the page imports, is not the learner's."""
    with pytest.raises(AssertionError, match="not yours"):
        checks.check_pretouch(as_course_code(pretouch))
    for library in (np.ndarray.sort, np.asarray, functools.partial(np.copyto, src=0), torch.nn.init.zeros_,
                    tracemalloc.start):
        with pytest.raises(AssertionError, match="not yours|not a function of yours"):
            checks.check_pretouch(library)


def _self_assigned(buf):
    flat = buf.reshape(-1).view(np.uint8)
    flat[::mmap.PAGESIZE] = flat[::mmap.PAGESIZE]  # the same memory: NumPy writes nothing


WRONG_PRETOUCH = {
    "nothing": (lambda buf: buf, "no page became resident"),
    "assigned to itself": (_self_assigned, "no page became resident"),
    "a page of values": (lambda buf: buf.reshape(-1).__setitem__(slice(None, None, mmap.PAGESIZE), 0), "quarter"),
    "first axis only": (lambda buf: buf.__setitem__(slice(None, None, mmap.PAGESIZE), 0), "page became resident"),
    "half the pages": (lambda buf: buf.reshape(-1).view(np.uint8).__setitem__(slice(None, buf.nbytes // 2), 0),
                       "only part of the pages"),
    # caught by its allocation, whatever share of the copy's pages the allocator leaves resident
    "a copy written": (lambda buf: np.ones_like(buf), "allocated .* while it ran"),
    "fill with zeros": (lambda buf: buf.fill(0), "changed"),
    "a 1 in each page": (lambda buf: buf.reshape(-1).view(np.uint8).__setitem__(
        np.r_[0:buf.nbytes:mmap.PAGESIZE, buf.nbytes - 1], 1), "changed"),
    # the small buffers, read with no slack: the last page missed, the buffer's own or the one it spills into
    "stops a page early": (_off_by_one, "every page but the last was written: the last page holds"),
    "a page's step from the first byte": (_stride_from_the_first_byte, "starts 16 bytes into a page"),
    "crashes": (lambda buf: buf.view(np.uint8)[::mmap.PAGESIZE, 0], "raised IndexError"),
    "a copy of the whole buffer": (lambda buf: buf.__setitem__(Ellipsis, buf.copy()), "allocated .* while it ran"),
    # every value written: the pages become resident, at a pass over the whole buffer where one write a page does
    "every byte, += 0": (lambda buf: buf.reshape(-1).view(np.uint8).__iadd__(0), "one write per page is enough"),
    "every value, += 0": (lambda buf: buf.__iadd__(0), "one write per page is enough"),
    "the buffer assigned to itself": (lambda buf: buf.__setitem__(slice(None), buf), "one write per page is enough"),
}


@pytest.mark.parametrize("name", list(WRONG_PRETOUCH))
def test_pretouch_wrong(name):
    wrong, hint = WRONG_PRETOUCH[name]
    with pytest.raises(AssertionError, match=hint):
        checks.check_pretouch(wrong)


def test_pretouch_small_buffers_are_read_with_no_slack():
    """Missing one page of a few thousand passes the large buffers' slack; the small ones catch it, aligned or not,
    and the fresh buffer that starts inside a page spans one page more than its bytes fill."""
    from dqn_course.lab.checks.ch00_01 import (PRETOUCH_OFFSET, PRETOUCH_SLACK, PRETOUCH_SMALL, _fresh_buffer,
                                               _pretouch_cases, _pretouch_growth)

    page = mmap.PAGESIZE
    large_uint8, _, small_uint8, unaligned = _pretouch_cases(page)
    assert unaligned[3] == PRETOUCH_OFFSET and unaligned[4] == small_uint8[4] == 0 < large_uint8[4] == PRETOUCH_SLACK
    buf = _fresh_buffer(PRETOUCH_SMALL * page, "float32", (PRETOUCH_SMALL * page // 4,), PRETOUCH_OFFSET)
    assert buf.ctypes.data % page == PRETOUCH_OFFSET and not buf.any()
    dtype, nbytes, shape, offset, _ = large_uint8  # the off-by-one passes where a few pages may be missed
    growth, _, writes = _pretouch_growth(_off_by_one, nbytes, dtype, shape, offset)
    assert writes == -(-nbytes // page) - 1  # one value per page, the last page's missing
    assert growth >= (-(-nbytes // page) - PRETOUCH_SLACK) * page
    dtype, nbytes, shape, offset, _ = unaligned
    assert _pretouch_growth(pretouch, nbytes, dtype, shape, offset)[0] >= (PRETOUCH_SMALL + 1) * page
    with pytest.raises(AssertionError, match=f"{PRETOUCH_SMALL + 1} pages of .* grew by {PRETOUCH_SMALL} pages"):
        checks.check_pretouch(_stride_from_the_first_byte)


@pytest.mark.parametrize("page, measured", [(4_096, 81.92), (16_384, 200.0)], ids=["4 KiB pages", "16 KiB pages"])
def test_page_rss_mistakes_follow_the_page_size(page, measured):
    """01b's prediction: its hints are built from the page size against the 10,000-byte stride, so that they hold
    on an Apple-silicon Mac's 16 KiB pages too (every page written there: the whole array is the answer)."""
    from dqn_course.lab.checks.ch00_01 import _page_rss_mistakes

    mistakes = _page_rss_mistakes(measured, page=page)
    assert all(abs(wrong - measured) > 0.02 * measured for wrong in mistakes)
    assert (200.0 in mistakes) == (page == 4_096)  # the whole array: a mistake only where pages are smaller
    if page == 4_096:
        assert "smaller than the 10,000 bytes" in mistakes[200.0]
    else:
        assert "16,384 bytes here) is larger" in mistakes[327.68] and "4,096 bytes" in mistakes[81.92]
    for wrong, why in mistakes.items():
        with pytest.raises(AssertionError) as raised:
            checks.check_prediction_of("01b.page_rss", wrong, measured, page=page)
        assert why in str(raised.value)
    assert checks.check_prediction_of("01b.page_rss", measured, measured, page=page) is True


def test_pretouch_peak_is_read_with_tracing_on_or_off():
    """The copy is caught whether or not the learner's kernel is tracing already, and tracing is left as it was."""
    copying = WRONG_PRETOUCH["a copy of the whole buffer"][0]
    assert not tracemalloc.is_tracing()
    with pytest.raises(AssertionError, match="allocated"):
        checks.check_pretouch(copying)
    assert not tracemalloc.is_tracing()
    tracemalloc.start()
    try:
        with pytest.raises(AssertionError, match="allocated"):
            checks.check_pretouch(copying)
        assert tracemalloc.is_tracing()
        assert checks.check_pretouch(pretouch) is True  # a page's worth of values is no copy
    finally:
        tracemalloc.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux maps unwritten pages read to one zero page")
def test_pretouch_that_only_reads_fails():
    with pytest.raises(AssertionError, match="reading it is not enough"):
        checks.check_pretouch(lambda buf: buf.sum())


def test_pretouch_none(capsys):
    assert checks.check_pretouch(None) is None
    assert "Not answered yet" in capsys.readouterr().out


def test_refill_rss_question_takes_b_and_hints_the_others():
    """01b's question: with glibc and no malloc_trim, round 2's fill reuses the blocks round 1 freed (near zero)."""
    assert checks.check_question("01b.refill_rss", "b") is True
    for wrong, words in (("a", "malloc_trim"), ("c", "as many bytes")):
        with pytest.raises(AssertionError, match=words):
            checks.check_question("01b.refill_rss", wrong)
