"""``lab.bench.timeit``, the one timing helper, and the rates built on it: turns, rounds, warm-up, sync, statistics.

The logic is checked on a fake clock that only the timed functions move, by binary fractions of a second (``MS``
is 1/1024 s), so sums are exact and so are counts and times; one test uses the real clock, with ``time.sleep``,
which guarantees a lower bound and nothing more.
"""
from __future__ import annotations

import time
import types

import pytest

from dqn_course.lab import bench
from dqn_course.lab.bench import calls_per_second, sampling_rates, timeit

MS = 1 / 1024  # a fake millisecond, exact in binary
STATS = {"best_ms", "median_ms", "cpu_best_ms", "calls", "turns", "turns_ms"}


@pytest.fixture
def clock(monkeypatch):
    """A fake ``time`` for bench: wall time moves only when a timed function says so; CPU time at half its pace."""
    fake = types.SimpleNamespace(now=0.0)
    fake.perf_counter = lambda: fake.now
    fake.process_time = lambda: fake.now / 2
    monkeypatch.setattr(bench, "time", fake)
    return fake


def taking(clock, seconds, log=None, name=None):
    """A function that lasts ``seconds`` on the fake clock (and logs its name)."""
    def fn():
        if log is not None:
            log.append(name)
        clock.now += seconds
    return fn


def test_turns_alternate_in_order_after_one_warm_up_each(clock):
    log = []
    stats = timeit({"b": taking(clock, 0.002, log, "b"), "a": taking(clock, 0.001, log, "a")},
                   min_seconds=0.0, rounds=3)
    assert list(stats) == ["b", "a"]  # the order of fns, not sorted
    assert log == ["b", "a"] + ["b", "a"] * 3  # warm-up, then one call each per round, in turn
    for s in stats.values():
        assert set(s) == STATS and s["turns"] == 3 and s["calls"] == 3  # warm-up calls are not counted
    assert stats["b"]["best_ms"] == pytest.approx(2.0) and stats["a"]["best_ms"] == pytest.approx(1.0)
    assert stats["b"]["median_ms"] == pytest.approx(2.0)
    assert stats["b"]["turns_ms"] == pytest.approx([2.0] * 3) and stats["a"]["turns_ms"] == pytest.approx([1.0] * 3)
    assert stats["b"]["cpu_best_ms"] == pytest.approx(1.0)  # the fake CPU clock runs at half speed


def test_no_warm_up_when_asked(clock):
    log = []
    timeit({"f": taking(clock, 0.001, log, "f")}, min_seconds=0.0, rounds=2, warmup=False)
    assert log == ["f", "f"]


def test_rounds_go_on_until_min_seconds_have_passed(clock):
    stats = timeit({"a": taking(clock, 3 * MS), "b": taking(clock, MS)}, min_seconds=20 * MS, rounds=2, warmup=False)
    assert stats["a"]["turns"] == stats["b"]["turns"] == 5  # 4 MS per round: 5 rounds reach 20 MS
    stats = timeit({"a": taking(clock, 3 * MS)}, min_seconds=MS, rounds=4, warmup=False)
    assert stats["a"]["turns"] == 4  # and never fewer than `rounds`


def test_a_turn_of_turn_seconds_makes_several_calls(clock):
    stats = timeit({"f": taking(clock, MS)}, min_seconds=0.0, rounds=3, turn_seconds=3.5 * MS, warmup=False)["f"]
    assert stats["turns"] == 3 and stats["calls"] == 12  # 4 calls reach 3.5 MS
    assert stats["best_ms"] == pytest.approx(1e3 * MS)  # per call, not per turn


def test_best_and_median_over_turns(clock):
    durations = iter([0.005, 0.001, 0.002, 0.009, 0.003])
    stats = timeit({"f": lambda: setattr(clock, "now", clock.now + next(durations))}, min_seconds=0.0, rounds=5,
                   warmup=False)["f"]
    assert stats["best_ms"] == pytest.approx(1.0) and stats["median_ms"] == pytest.approx(3.0)


def test_sync_runs_before_each_reading_of_the_clock(clock):
    log = []
    timeit({"a": taking(clock, 0.001, log, "a"), "b": taking(clock, 0.001, log, "b")}, min_seconds=0.0, rounds=1,
           warmup=False, sync=lambda: log.append("sync"))
    assert log == ["sync", "a", "sync", "sync", "b", "sync"]


def test_bad_or_empty_arguments():
    with pytest.raises(ValueError, match="rounds"):
        timeit({"f": lambda: None}, rounds=0)
    assert timeit({}, min_seconds=10.0) == {}  # returns at once


def test_rates_built_on_timeit(clock):
    assert calls_per_second(taking(clock, 2 * MS), 30 * MS, rounds=3) == pytest.approx(512.0)
    memory = types.SimpleNamespace(calls=0)

    def sample(batch_size):
        memory.calls += 1
        clock.now += 4 * MS

    memory.sample = sample
    rates = sampling_rates(memory, 32, min_seconds=60 * MS, rounds=3)
    assert memory.calls == 1 + 3 * 5  # one warm-up, then 3 turns of 20 MS
    assert rates["batches_per_s"] == pytest.approx(256.0) and rates["batches_per_cpu_s"] == pytest.approx(512.0)
    assert set(rates) == {"batches_per_s", "batches_per_cpu_s", "minor_faults_per_batch"}


def test_sampling_rates_counts_the_pages_a_batch_touches_for_the_first_time():
    """A sample that writes into a fresh anonymous mapping (pages never touched before) faults at least once per
    batch; one that touches no new memory faults far less."""
    import mmap

    def fresh_pages(batch_size):
        with mmap.mmap(-1, 64 * mmap.PAGESIZE) as m:
            for page in range(64):
                m[page * mmap.PAGESIZE] = 1

    touching = sampling_rates(types.SimpleNamespace(sample=fresh_pages), 32, min_seconds=0.05, rounds=2)
    idle = sampling_rates(types.SimpleNamespace(sample=lambda batch_size: None), 32, min_seconds=0.05, rounds=2)
    assert touching["minor_faults_per_batch"] >= 1 > idle["minor_faults_per_batch"]


def test_on_the_real_clock_a_longer_sleep_reports_more():
    stats = timeit({"long": lambda: time.sleep(0.02), "short": lambda: time.sleep(0.001)}, min_seconds=0.0, rounds=3)
    assert stats["long"]["best_ms"] >= 20.0  # sleep guarantees this much, never less
    assert stats["long"]["best_ms"] > stats["short"]["best_ms"]
    assert stats["long"]["median_ms"] > stats["short"]["median_ms"]
