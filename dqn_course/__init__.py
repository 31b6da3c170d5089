"""dqn_course: the DQN memory course's library (what training runs) and, in ``dqn_course.lab``, the notebooks' helpers.

README.md's "The package" lists every module with the first line of its docstring (``make readme`` writes
that list; a test keeps it current); ARCHITECTURE.md says how the pieces fit. The library never imports
the lab: ``tests/test_architecture.py`` checks.
"""
import argparse
import os

__version__ = "0.1.0"


def quick_mode() -> bool:
    """True when DQN_COURSE_QUICK=1: every notebook and benchmark shrinks its workload (CI sets it)."""
    return os.environ.get("DQN_COURSE_QUICK", "0") not in ("", "0", "false", "False")


def parse_bool(text: str) -> bool:
    """A command-line true/false (1/0, yes/no, on/off), for the CLIs' ``--flag true`` options."""
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")
