"""dqn_course: the helper package of the DQN memory course. Modules mirror the notebooks.

- ``envs``       Breakout with standard DQN preprocessing; vector envs (notebooks 00, 02, 07)
- ``frames``     preprocessing step by step: gray, downsample, max-pool, the blog recipe (02, 03)
- ``naive``      the blog-post agent, reproduced to be measured (01)
- ``replay``     the replay memories of the memory ladder, and the memory guard (01, 04, 05)
- ``toy``        numbered toy transitions that make stacks readable (04)
- ``profiling``  RSS, tracemalloc, fresh-subprocess measurements, "does it fit?" (01, 05)
- ``bench``      timing helpers shared by notebooks and benchmarks (05)
- ``ladder``     the memory ladder, measured rung by rung, and its figure (06, README)
- ``networks``   the Nature DQN CNN
- ``agent``      acting and learning, batched and per-sample targets (06)
- ``train``      the training loop, its presets and its CLI (07)
- ``stopping``   a deadline and SIGINT/SIGTERM turned into "save, then exit" (07, 09)
- ``cleanup``    temporary folders removed on Ctrl-C/SIGTERM, and after a killed run (09, 10)
- ``playback``   watching a checkpoint play, replay RAM at 1M (07)
- ``per``        prioritized replay: sum trees, IS weights, PrioritizedMemory (08)
- ``per_demo``   notebook 08's CartPole comparison and filled trees (08)
- ``storage``    where a frame-sharing memory keeps its frames: RAM, lz4/zstd bytes, a memmap file (09)
- ``checkpoint`` the whole training state as one checked, atomic file of arrays; resume (09)
- ``watchdog``   warn, checkpoint and stop before the OOM killer strikes (09)
- ``resume_demo`` pickle vs raw arrays, and a training run killed with SIGKILL (09)
- ``distributed`` DQN on Ray Core: replay actor, parameter server, rollout workers, learner, evaluator (10)
- ``scaling``    timing the single-process loop against Ray layouts (10)
- ``checks``     one-call self-checks for the exercises (all)
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
