"""Shared test set-up: import paths and a reproducible hypothesis profile.

The repository root goes on ``sys.path`` so ``dqn_course`` imports even without ``pip install -e``;
the tests directory goes there too so helpers such as ``_subprocess_helpers`` can be imported by a
"spawn" subprocess (multiprocessing hands the parent's ``sys.path`` to the child).
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
for p in (str(REPO_ROOT), str(TESTS_DIR)):
    if p not in sys.path:
        sys.path.insert(0, p)

try:
    from hypothesis import HealthCheck, settings

    # Derandomized: the same examples every run, so CI is reproducible. No deadline: the first
    # example of a test pays for numpy/ring set-up and a busy 2-core CI box is slow.
    settings.register_profile(
        "ci", derandomize=True, deadline=None, print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    settings.register_profile("dev", deadline=None, max_examples=300)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # hypothesis is a dev extra; only test_replay_properties needs it
    pass


@contextlib.contextmanager
def cudnn_deterministic():
    """cuDNN's deterministic algorithms only (its default backward kernels sum in a schedule-dependent order, which
    moves weights by 1e-7 to 3e-5 between identical runs), no autotuning; the settings restored afterwards."""
    import torch

    saved = torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    try:
        yield
    finally:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved


@pytest.fixture
def deterministic_kernels():
    """For a test that compares two runs on a GPU: ``cudnn_deterministic`` around it, so other tests run as training
    does."""
    with cudnn_deterministic():
        yield
