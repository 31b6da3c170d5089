"""Measuring tools: line fits, "does it fit?", byte formatting, tracemalloc, fresh-subprocess RSS."""
from __future__ import annotations

import math

import numpy as np
import pytest

from _subprocess_helpers import allocate_and_keep, die_hard, raise_value_error, sleep_for
from dqn_course.profiling import (
    GB,
    MB,
    FitReport,
    LinearFit,
    TraceMalloc,
    available_bytes,
    fit_linear,
    fits_in_ram,
    format_bytes,
    machine_summary,
    measure_in_subprocess,
    rss_bytes,
)


# -- fit_linear / LinearFit -------------------------------------------------------------------------
def test_fit_linear_recovers_an_exact_line():
    steps = np.arange(0, 5_000, 250)
    fit = fit_linear(steps, 7_056 * steps + 123_456_789)
    assert fit.slope == pytest.approx(7_056, rel=1e-9)
    assert fit.intercept == pytest.approx(123_456_789, rel=1e-9)
    assert fit.r2 == pytest.approx(1.0, abs=1e-12)
    assert fit.predict(1_000_000) == pytest.approx(123_456_789 + 7_056e6)


def test_fit_linear_r2_drops_with_noise():
    rng = np.random.default_rng(0)
    x = np.arange(100.0)
    y = 3 * x + rng.normal(0, 100, x.size)
    fit = fit_linear(x, y)
    assert 0 < fit.r2 < 0.8 and fit.slope == pytest.approx(3, abs=1.0)
    assert fit.r2 == pytest.approx(np.corrcoef(x, y)[0, 1] ** 2)  # for a least-squares line, R² = r²
    flat = fit_linear(x, np.full(x.size, 5.0))
    assert flat.slope == pytest.approx(0, abs=1e-9) and flat.r2 == 1.0


@pytest.mark.parametrize("steps, values", [([], []), ([1], [2]), ([3, 3, 3], [1, 2, 3])])
def test_fit_linear_needs_two_distinct_steps(steps, values):
    with pytest.raises(ValueError, match="at least two readings at different steps"):
        fit_linear(steps, values)


def test_step_at():
    fit = LinearFit(slope=1_000.0, intercept=5_000.0, r2=1.0)
    assert fit.step_at(1_005_000) == pytest.approx(1_000)
    assert fit.step_at(fit.predict(123_456)) == pytest.approx(123_456)
    assert math.isinf(LinearFit(0.0, 5.0, 1.0).step_at(1e9))
    assert math.isinf(LinearFit(-2.0, 5.0, 1.0).step_at(1e9))


# -- fits_in_ram / format_bytes ---------------------------------------------------------------------
def test_fits_in_ram_arithmetic():
    r = fits_in_ram(10, 100, fraction=0.5, available=2_000)
    assert r == FitReport(items=10, bytes_per_item=100, needed=1_000, available=2_000, fits=True, max_items=10)
    r = fits_in_ram(11, 100, fraction=0.5, available=2_000)
    assert not r.fits and r.needed == 1_100 and r.max_items == 10
    # The memory ladder's bottom and top rungs on a 16 GB laptop.
    assert fits_in_ram(1_000_000, 7_072, available=16 * GB).fits
    big = fits_in_ram(1_000_000, 201_600, available=16 * GB)
    assert not big.fits and big.needed == 201_600_000_000 and big.max_items == int(0.9 * 16 * GB // 201_600)
    assert fits_in_ram(5, 0, available=100).max_items == 0


def test_fits_in_ram_defaults_to_this_machine():
    r = fits_in_ram(1, 1)
    assert r.fits and 0 < r.available <= machine_summary()["ram_total"]
    assert 0 < available_bytes() and 0 < rss_bytes() < machine_summary()["ram_total"]


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (512, "512 B"), (999, "999 B"), (1000, "1.0 kB"), (1536, "1.5 kB"), (7_056, "7.1 kB"),
    (MB, "1.0 MB"), (7_056_000_000, "7.1 GB"), (GB, "1.0 GB"), (5 * 10**12, "5.0 TB"),
    (2_048 * 10**12, "2,048.0 TB"), (-1536, "-1.5 kB"), (2**30, "1.1 GB"),
])
def test_format_bytes(n, text):
    assert format_bytes(n) == text


# -- TraceMalloc ------------------------------------------------------------------------------------
def test_tracemalloc_sees_numpy_allocations():
    with TraceMalloc() as kept:
        a = np.ones(1_000_000)  # 8 MB of float64
    assert 8e6 <= kept.current < 8.5e6 and kept.peak >= kept.current
    with TraceMalloc() as freed:
        b = np.ones(1_000_000)
        del b
    assert freed.current < 0.5e6 and 8e6 <= freed.peak < 8.5e6
    with TraceMalloc() as lazy:  # address space only: still counted, it is what numpy asked for
        c = np.zeros(2_000_000, np.uint8)
    assert 2e6 <= lazy.current < 2.5e6
    del a, c


# -- measure_in_subprocess --------------------------------------------------------------------------
def test_measure_in_subprocess_reports_rss_growth():
    m = measure_in_subprocess(allocate_and_keep, 200, timeout=300)
    assert m.result == 200_000_000
    assert 150e6 < m.rss_growth < 300e6, f"RSS grew {format_bytes(m.rss_growth)} for 200 MB kept"
    assert m.peak_rss >= m.rss_after > m.rss_before > 0
    assert m.seconds > 0 and m.traced_current == m.traced_peak == 0  # trace off


def test_measure_in_subprocess_with_tracemalloc():
    m = measure_in_subprocess(allocate_and_keep, 50, trace=True, timeout=300)
    assert 50e6 <= m.traced_current < 52e6 and m.traced_peak >= m.traced_current
    assert 40e6 < m.rss_growth < 100e6


def test_measure_in_subprocess_reports_a_failure():
    with pytest.raises(RuntimeError, match=r"measurement failed in the subprocess: ValueError: boom from the child"):
        measure_in_subprocess(raise_value_error, timeout=300)
    with pytest.raises(RuntimeError, match=r"ValueError: custom message"):
        measure_in_subprocess(raise_value_error, "custom message", timeout=300)


def test_measure_in_subprocess_reports_a_dead_child():
    with pytest.raises(RuntimeError, match=r"the measurement process died \(exit code 3\)"):
        measure_in_subprocess(die_hard, 3, timeout=300)


def test_measure_in_subprocess_times_out():
    with pytest.raises(TimeoutError, match=r"sleep_for did not finish within 0.5 s"):
        measure_in_subprocess(sleep_for, 2.0, timeout=0.5)
