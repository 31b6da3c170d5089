"""dqn_course: the helper package of the DQN memory course. Modules mirror the notebooks.

- ``envs``       Breakout with standard DQN preprocessing (notebooks 00, 02)
- ``replay``     the replay memories of the memory ladder (notebooks 01, 04, 05)
- ``networks``   the Nature DQN CNN
- ``agent``      acting and learning, batched and per-sample targets (notebook 06)
- ``train``      the training loop and its CLI (notebook 07)
- ``profiling``  RSS, tracemalloc, fresh-subprocess measurements, "does it fit?" (notebook 01)
"""
import os

__version__ = "0.1.0"


def quick_mode() -> bool:
    """True when DQN_COURSE_QUICK=1: every notebook and benchmark shrinks its workload (CI sets it)."""
    return os.environ.get("DQN_COURSE_QUICK", "0") not in ("", "0", "false", "False")
