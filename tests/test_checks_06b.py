"""Notebook 06b: its exercise check (the learner's bytes_per_transition: a reading in a fresh interpreter passes; a
reading in this process or in a fork of it, after the check's free, fails with the hint on freed memory; a figure
worked out from the fill's arguments fails, since the bytes a fill keeps come from the check, at random, not from
its arguments; each other typical slip raises with its hint; the course's code and the page's imports are refused;
None only prints), the ladder's 1M figure from two fills and the ladder picture's rows."""
from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import numpy as np
import psutil
import pytest

from dqn_course.lab import checks, figures, ladder
from dqn_course.lab.checks.ch06b import FILL_CASES, KEPT_VARIABLE, Filled, fill_frames
from dqn_course.lab.ladder_plots import course_order, plot_course_ladder
from dqn_course.profiling import measure_in_subprocess, rss_bytes
from dqn_course.replay import FrameSharingMemory


def _in_a_new_interpreter(fill, args, reading, env=None):
    """Run ``fill(*args)`` in a new interpreter (with the environment ``env``, default this process's) and return
    what it prints: ``reading``, a Python expression of ``before`` (RSS before the fill), ``after`` and ``memory``."""
    code = (f"import gc, psutil\nfrom {fill.__module__} import {fill.__name__} as fill\ngc.collect()\n"
            f"before = psutil.Process().memory_info().rss\nmemory = fill(*{args!r})\n"
            f"after = psutil.Process().memory_info().rss\nprint({reading})\n")
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                env=env).stdout)


def fresh(fill, *args):
    return _in_a_new_interpreter(fill, args, "(after - before) / len(memory)")


def _child(fill, args, conn):
    before = psutil.Process().memory_info().rss
    memory = fill(*args)
    conn.send((psutil.Process().memory_info().rss - before) / len(memory))


def forked(fill, *args):
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(fill, args, child))
    process.start()
    reading = parent.recv()
    process.join()
    return reading


def same_process(fill, *args):
    before = rss_bytes()
    memory = fill(*args)
    return (rss_bytes() - before) / len(memory)


def over_frames(fill, *args):
    return _in_a_new_interpreter(fill, args, "(after - before) / len(memory.frames)")


def whole_rss(fill, *args):
    return _in_a_new_interpreter(fill, args, "after / len(memory)")


def frames_only(fill, *args):  # runs the fill in a new interpreter, but counts its frames instead of reading RSS
    return _in_a_new_interpreter(fill, args, "sum(f.nbytes for f in memory.frames) / len(memory)")


def worked_out(fill, frames, frame_bytes, episode, *rest):  # never runs the fill
    return frames * frame_bytes / (frames - frames // episode)


def worked_out_after_running(fill, frames, frame_bytes, episode, report):
    """Runs the fill where it should, then returns arithmetic on its arguments: the frames and as many bytes beside
    each (the check's fills kept that much before the check drew what they keep)."""
    _in_a_new_interpreter(fill, (frames, frame_bytes, episode, report), "0")
    return frames * 2 * frame_bytes / (frames - frames // episode)


def without_the_environment(fill, *args):  # a new interpreter, but not given the variables of this process
    env = {key: value for key, value in os.environ.items() if key != KEPT_VARIABLE}
    return _in_a_new_interpreter(fill, args, "(after - before) / len(memory)", env=env)


def traced_here(fill, *args):  # tracemalloc in this process: the fill ran here
    import tracemalloc

    tracemalloc.start()
    try:
        memory = fill(*args)
        return tracemalloc.get_traced_memory()[0] / len(memory)
    finally:
        tracemalloc.stop()


def by_a_notebook_function(fill, *args):
    code = f"print(my_fill(*{args!r}))"  # a name the new interpreter was never given
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def by_the_helper(fill, *args):
    seen = measure_in_subprocess(fill, *args)
    return seen.rss_growth / len(seen.result)


def as_text(fill, *args):
    return "7056"


def unanswered(fill, *args):
    pass


def by_the_course(fill, *args):
    """Reads the course's ladder: refused, whatever it returns."""
    return ladder.measure_stage("frame_sharing", 100)["rss_growth"]


def test_a_fresh_interpreters_reading_passes(capsys):
    assert checks.check_bytes_per_transition(fresh) is True
    out = capsys.readouterr().out
    assert out.startswith("✓") and "Read in this process right after a free" in out


@pytest.mark.parametrize("answer, hint", [
    (forked, "the fill ran in a fork, a copy of this process"),
    (same_process, "the fill ran in this process"),
    (traced_here, "the fill ran in this process"),
    (worked_out, "never ran"),
    (worked_out_after_running, "the same figure for two fills of the same arguments"),
    (without_the_environment, "without this process's environment variables"),
    (frames_only, "too low: the growth of the process's RSS"),
    (over_frames, "divide by n, the transitions the memory holds"),
    (whole_rss, "too high"),
    (by_a_notebook_function, "imports what it runs by name"),
    (as_text, "should return a number"),
])
def test_each_slip_fails_with_its_hint(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_bytes_per_transition(answer)


@pytest.mark.parametrize("answer", [ladder.run_ladder, ladder.measure_stage, measure_in_subprocess, rss_bytes,
                                    fill_frames, FrameSharingMemory, course_order, plot_course_ladder, by_the_course,
                                    by_the_helper, max])
def test_the_course_and_the_pages_imports_are_refused(answer):
    with pytest.raises(AssertionError, match="course's own|not yours|not a function of yours"):
        checks.check_bytes_per_transition(answer)


def test_unanswered(capsys):
    assert checks.check_bytes_per_transition(None) is None
    assert checks.check_bytes_per_transition(unanswered) is None
    assert capsys.readouterr().out.count("Not answered yet") == 2


@pytest.mark.parametrize("frames, frame_bytes, episode", FILL_CASES)
def test_a_fill_writes_its_frames_keeps_more_and_reports_where_it_ran(frames, frame_bytes, episode, tmp_path,
                                                                       monkeypatch):
    from dqn_course.lab.checks import ch06b

    report = tmp_path / "report.txt"
    kept = len(ch06b._KEPT)
    kept_bytes = frame_bytes // 3
    monkeypatch.setenv(KEPT_VARIABLE, str(kept_bytes))  # as the check hands it over
    memory = fill_frames(frames, frame_bytes, episode, str(report))
    assert isinstance(memory, Filled) and len(memory.frames) == frames
    assert len(memory) == frames - frames // episode < frames
    assert all(frame.nbytes == frame_bytes and frame.dtype == np.uint8 for frame in memory.frames)
    assert all(frame[0] == i % 251 for i, frame in enumerate(memory.frames[:300]))  # written, not left as zero pages
    assert sum(a.nbytes for a in ch06b._KEPT[kept:]) == frames * kept_bytes  # kept beside the memory, not in it
    assert frames * frame_bytes >= 20_000_000  # tens of MB: a page's rounding or a start-up's frees are small beside
    assert report.read_text().split() == [str(os.getpid()), str(int(bool(ch06b._IN_THE_CHECK))), str(kept_bytes)]
    ch06b._KEPT[kept:] = []


def test_a_fill_refuses_counts_below_one_and_a_kept_size_that_is_no_number(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="at least 1"):
        fill_frames(10, 0, 4, str(tmp_path / "r.txt"))
    monkeypatch.setenv(KEPT_VARIABLE, "-5")
    with pytest.raises(ValueError, match=KEPT_VARIABLE):
        fill_frames(10, 10, 4, str(tmp_path / "r.txt"))


def test_the_fills_of_one_case_keep_far_apart_bytes():
    """The first case is filled twice: its two kept sizes lie so far apart that no one figure is within the check's
    15% of both (a figure worked out from the arguments is one figure)."""
    from dqn_course.lab.checks.ch06b import KEPT_FACTORS, REL

    (_, low_hi), (high_lo, _) = KEPT_FACTORS[0], KEPT_FACTORS[-1]
    assert len(KEPT_FACTORS) == len(FILL_CASES) + 1
    assert (1 + high_lo) * (1 - REL) > (1 + low_hi) * (1 + REL)


def _ladder_row(n, growth):
    return {"stage": "frame_sharing", "label": "FrameSharingMemory (1 frame/step)", "transitions": n,
            "rss_growth_bytes": growth, "bytes_per_transition": growth / n, "arithmetic_bytes": 7_056,
            "counted_bytes_per_transition": 7_117.0, "measured_over_counted": 1.01, "gb_per_million": growth / n / 1e3,
            "fits_1m_in_ram": True, "max_transitions_in_ram": None, "available_ram_bytes": 8 * 10**9,
            "traced_bytes_per_transition": None}


def test_the_1m_figure_from_two_fills_pays_the_fill_cost_once():
    """A fill that costs 2 MB once and 7,100 B per transition: scaling one fill's bytes per transition by 1M / n
    pays the 2 MB 1M / n times; two fills give the slope and the intercept, and 1M costs 7.1 GB + 2 MB."""
    small, large = _ladder_row(5_000, 2_000_000 + 7_100 * 5_000), _ladder_row(20_000, 2_000_000 + 7_100 * 20_000)
    row = ladder.scaled_to_million(large, small)
    assert row["per_transition_bytes"] == pytest.approx(7_100) and row["fill_cost_bytes"] == 2_000_000
    assert row["gb_per_million"] == round((7_100 * 10**6 + 2_000_000) / 1e9, 2) < large["gb_per_million"]
    assert row["max_transitions_in_ram"] == int((0.9 * 8e9 - 2_000_000) // 7_100)
    table = ladder.format_table([large, row])
    assert "7.1 GB* yes" in table and "(*: two fills" in table and "7.1 GB* yes" not in ladder.format_table([large])
    with pytest.raises(ValueError, match="smaller must hold fewer transitions"):
        ladder.scaled_to_million(small, large)
    with pytest.raises(ValueError, match="smaller must be a row of larger's stage"):
        ladder.scaled_to_million(large, {**small, "stage": "folded_ring"})


def test_the_blog_agents_row_sits_among_the_rungs_by_its_bytes():
    """Section 2's picture: the star's row lies below every rung that needs more bytes than the blog agent, above
    the others."""
    rows = [{"stage": s.name, "label": s.label, "bytes_per_transition": s.arithmetic_bytes * 1.01,
             "arithmetic_bytes": s.arithmetic_bytes, "gb_per_million": s.arithmetic_bytes / 1e3}
            for s in ladder.STAGES]
    ax = plot_course_ladder(rows, 36_000).axes[0]
    labels = [t.get_text() for _, t in sorted(zip(ax.get_yticks(), ax.get_yticklabels()), key=lambda p: -p[0])]
    assert [label[:2] for label in labels] == ["00", "02", "03", "01", "04", "04", "04"]
    assert labels[3] == "01: the blog agent (measured)"


def test_the_bottom_bar_is_labelled_with_the_two_fill_figure():
    """Section 2's picture gives the bottom rung the same 1/N as the answer cell and the summary: the top rung's GB
    per 1M over the bottom rung's from its two fills, not over its one fill's bytes per transition."""
    rows = [{"stage": s.name, "label": s.label, "bytes_per_transition": s.arithmetic_bytes * 1.01,
             "arithmetic_bytes": s.arithmetic_bytes, "gb_per_million": s.arithmetic_bytes * 1.01 / 1e3}
            for s in ladder.STAGES]
    bottom = course_order(rows)[-1]
    bottom.update(bytes_per_transition=7_200.0, per_transition_bytes=7_100.0, gb_per_million=7.1)
    ax = plot_course_ladder([bottom if r["stage"] == bottom["stage"] else r for r in rows]).axes[0]
    top_gb = course_order(rows)[0]["gb_per_million"]
    texts = [t.get_text() for t in ax.texts]
    assert any(t.startswith(f"1/{top_gb / 7.1:,.0f} of the top rung's bytes; 7.1 GB") for t in texts), texts


def test_the_blog_figure_the_prediction_reads_is_recorded():
    """The answer cell divides notebook 01's recorded figure without learning by the bottom rung's: the record must
    hold it."""
    assert figures.load("01_naive_agent")["figures"]["blog_no_learning_bytes_per_step"] > 33_600


def test_what_a_rung_keeps_beside_its_pixels_is_counted_by_part():
    """Section 2's second table: a deque row's list, scalars, headers and pointer; a ring slot's bookkeeping by the
    itemsizes of its per-slot arrays (notebook 04's 16 bytes for the bottom rung)."""
    copies = ladder.beside_pixels(ladder.STAGES_BY_NAME["gray_uint8_copies"])
    shared = ladder.beside_pixels(ladder.STAGES_BY_NAME["gray_uint8_shared"])
    assert set(copies) == {"list+scalars", "headers", "pointer"} and copies["pointer"] == 8
    assert copies["list+scalars"] == shared["list+scalars"] > 100
    assert copies["headers"] == 2 * shared["headers"] > 0  # copies add two arrays per row, a shared next state one
    assert ladder.beside_pixels(ladder.STAGES_BY_NAME["frame_sharing"]) == {"bookkeeping": 16}
    assert ladder.beside_pixels(ladder.STAGES_BY_NAME["folded_ring"]) == {"bookkeeping": 1 + 4 + 1 + 8}


def test_a_rung_measured_after_freeing_grows_by_what_it_keeps():
    """measure_stage hands back what playing the frames freed before it reads RSS (the page's *How*): its growth
    meets the memory's own count (``nbytes``: pixels, lists, scalars, headers)."""
    m = measure_in_subprocess(ladder.measure_stage, "gray_uint8_copies", 300, with_tracemalloc=False, timeout=300)
    row = m.result
    assert row["transitions"] == 300 and row["counted_bytes"] > 300 * 56_448
    assert row["rss_growth"] == pytest.approx(row["counted_bytes"], rel=0.03)


def test_the_table_counts_and_shows_traced_only_when_measured():
    row = {"label": "x", "bytes_per_transition": 7_100.0, "arithmetic_bytes": 7_056, "counted_bytes_per_transition":
           7_072.0, "measured_over_counted": 1.004, "transitions": 1_999, "gb_per_million": 7.1,
           "fits_1m_in_ram": True, "max_transitions_in_ram": None, "available_ram_bytes": 8 * 10**9,
           "traced_bytes_per_transition": None}
    plain = ladder.format_table([row])
    assert "traced" not in plain and "counted" in plain and "7,072" in plain
    assert "traced" in ladder.format_table([{**row, "traced_bytes_per_transition": 7_080.0}])
    assert max(len(line) for line in plain.splitlines()) <= 120
    assert isinstance(ladder.return_freed_memory(), bool)


def test_solution_cell_passes_its_checks():
    """The solution cell (committed without outputs, skipped by nbval) passes every check it calls."""
    from _solutions import run_solutions

    out = run_solutions("06b_the_whole_ladder", {"checks": checks, "np": np, "measured_top": 807.27 / 7.1,
                                                 "measured_blog": 38_580 / 7_213})
    assert out.count("✓") == 5, out
