"""The memory watchdog: quiet below its limits, one warning near them, a stop message past them."""
from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

from dqn_course import watchdog as wd
from dqn_course.watchdog import MemoryWarning, MemoryWatchdog


def fake_memory(monkeypatch, rss: int, available: int) -> None:
    monkeypatch.setattr(wd, "rss_bytes", lambda: rss)
    monkeypatch.setattr(wd, "available_bytes", lambda: available)


def test_off_by_default_and_quiet_below_the_limits(monkeypatch):
    fake_memory(monkeypatch, rss=10**12, available=0)
    assert not MemoryWatchdog().enabled and MemoryWatchdog().check(force=True) is None
    fake_memory(monkeypatch, rss=500, available=10_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert MemoryWatchdog(max_rss_bytes=1000, min_available_bytes=1000).check(force=True) is None


def test_rss_limit_warns_once_then_stops(monkeypatch):
    dog = MemoryWatchdog(max_rss_bytes=1000, interval_s=0)
    fake_memory(monkeypatch, rss=950, available=10**9)
    with pytest.warns(MemoryWarning, match="RSS 950 B is above 90% of the limit 1.0 kB"):
        assert dog.check() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second time near the limit: no new warning
        assert dog.check() is None
    fake_memory(monkeypatch, rss=1000, available=10**9)
    assert dog.check() == "memory watchdog: process RSS 1.0 kB reached the limit 1.0 kB"


def test_available_floor_warns_then_stops(monkeypatch):
    dog = MemoryWatchdog(min_available_bytes=900, interval_s=0)
    fake_memory(monkeypatch, rss=1, available=990)
    with pytest.warns(MemoryWarning, match="available RAM 990 B is within 11% of the floor 900 B"):
        assert dog.check() is None
    fake_memory(monkeypatch, rss=1, available=900)
    assert "available RAM 900 B fell to the floor 900 B" in dog.check()


def test_checks_are_rate_limited_unless_forced(monkeypatch):
    dog = MemoryWatchdog(max_rss_bytes=1000, interval_s=3600)
    fake_memory(monkeypatch, rss=1, available=10**9)
    assert dog.check() is None  # first look
    fake_memory(monkeypatch, rss=5000, available=10**9)
    assert dog.check() is None  # within the interval: not looked at
    assert dog.check(force=True) is not None


def test_the_real_process_trips_a_low_limit():
    assert "reached the limit" in MemoryWatchdog(max_rss_bytes=1).check()


@pytest.mark.parametrize("kwargs", [{"max_rss_bytes": -1}, {"min_available_bytes": -5}, {"warn_fraction": 0},
                                    {"warn_fraction": 1.5}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        MemoryWatchdog(**kwargs)


def test_the_warning_shows_under_pythons_default_filters():
    """Python hides ResourceWarning by default; a memory warning must reach a plain script's stderr."""
    code = ("from dqn_course import watchdog as wd\n"
            "wd.rss_bytes = lambda: 95\n"
            "assert wd.MemoryWatchdog(max_rss_bytes=100).check() is None\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "MemoryWarning: memory watchdog: process RSS 95 B is above 90% of the limit 100 B" in proc.stderr
