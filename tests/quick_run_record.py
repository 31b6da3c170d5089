"""The refactor guard's recordings: what a quick run decides, row by row, and the comparison of two of them.

``tests/test_train.py`` runs the quick preset through the CLI in float64 (``GUARD``) and compares what it decided
with ``tests/data/quick-run.json``. A run's decisions hang on rounding: with another CPU's kernels (an Intel Xeon's,
or this AMD's with its oneDNN, MKL or ATen kernels held to another instruction set) a float32 quick run drifts by
1e-6 within 1,000 steps and plays other games from step ~1,350 on. The float64 quick run with the same kernel
variations made the same games and evaluations, its logged losses apart by at most 3.6e-4 at the last game
(tests/data/README.md has the measurements, and a shorter run that did not hold). So the guard compares the discrete
columns exactly and the losses and statistics within ``RTOL``.

    python tests/quick_run_record.py                      # record tests/data/quick-run.json (a run of ~3 minutes)
    python tests/quick_run_record.py --plant lr           # record a planted change: tests/data/planted-lr.json
    python tests/quick_run_record.py --out /tmp/mine.json # this CPU's run, to compare (differences())

The planted changes (``PLANTS``) are the changes the guard must catch; their recordings let a test show that it
does, without three more runs in every test session.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
GOLDEN = DATA / "quick-run.json"
MACHINE_COLUMNS = ("rss_mb", "steps_per_s")  # what the machine, not the algorithm, decides
DISCRETE = ("step", "episode_return", "episode_length", "epsilon", "replay_size")  # compared exactly
MEASURED = ("loss", "q_max", "grad_norm")  # compared within RTOL
# The spread measured across kernels in float64: 0 in every logged digit to step ~2,100, then up to 3.6e-4 (the
# last game's gradient norm). RTOL is that with a margin of about 14x; a planted change moves the losses by percents
# and the games with them.
RTOL = 5e-3
GUARD = dict(float64=True)  # the quick preset's settings the guard changes (its CLI: GUARD_ARGS)
GUARD_ARGS = ("--float64", "true")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_record(out: Path) -> dict:
    """What a quick run in ``out`` decided, without what the machine did: every log.csv row (timings and RSS left
    out) and every eval.csv row, with the torch version and the CPU it ran on."""
    import csv

    import torch

    def rows(name: str) -> list[dict]:
        with open(out / name, newline="") as f:
            return list(csv.DictReader(f))

    return {"torch": torch.__version__, "machine": platform.machine(), "cpu": cpu_name(),
            "log": [{k: v for k, v in row.items() if k not in MACHINE_COLUMNS} for row in rows("log.csv")],
            "eval": rows("eval.csv")}


def _close(a: str, b: str) -> bool:
    if a == "" or b == "":
        return a == b
    x, y = float(a), float(b)
    return abs(x - y) <= RTOL * max(abs(x), abs(y))


def differences(recorded: dict, now: dict) -> list[str]:
    """What ``now`` did otherwise than ``recorded``, one line each (empty: the same run): another number of games
    or evaluations, any discrete column of a game row that differs at all, any loss or statistic beyond RTOL."""
    out = []
    for part in ("log", "eval"):
        old, new = recorded[part], now[part]
        if len(old) != len(new):
            out.append(f"{part}.csv: {len(new)} rows, recorded {len(old)}")
        for i, (a, b) in enumerate(zip(old, new)):
            for key in a:
                same = _close(a[key], b.get(key, "")) if key in MEASURED else a[key] == b.get(key)
                if not same:
                    out.append(f"{part}.csv row {i + 1} (step {a.get('step')}): {key} {b.get(key)!r}, recorded "
                               f"{a[key]!r}")
    return out


def epsilon_one_step_late(step, start, end, decay_steps):
    from dqn_course.train import linear_epsilon

    return linear_epsilon(step + 1, start, end, decay_steps)


PLANTS = {  # name -> (changed settings, train()'s hooks)
    "lr": (dict(lr=2e-4), {}),
    "target-never-synced": (dict(target_sync_every=10**9), {}),
    "epsilon-off-by-one": ({}, dict(epsilon=epsilon_one_step_late)),
}


def record(plant: str | None, out: Path | None = None) -> Path:
    """Run the quick preset with ``GUARD`` (one torch thread, as the test's CLI run) and write what it decided."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    import torch

    from dqn_course.config import PRESETS
    from dqn_course.train import train

    torch.set_num_threads(1)
    changes, hooks = PLANTS[plant] if plant else ({}, {})
    with tempfile.TemporaryDirectory() as tmp:
        cfg = dataclasses.replace(PRESETS["quick"], **GUARD, out_dir=tmp, progress=False, **changes)
        train(cfg, **hooks)
        path = out or DATA / (f"planted-{plant}.json" if plant else GOLDEN.name)
        path.write_text(json.dumps(run_record(Path(tmp)), indent=1) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plant", choices=sorted(PLANTS), help="record this planted change instead of the guard's run")
    parser.add_argument("--out", type=Path, help="write the record here instead (e.g. to compare another CPU's)")
    args = parser.parse_args()
    print(record(args.plant, args.out), file=sys.stderr)
