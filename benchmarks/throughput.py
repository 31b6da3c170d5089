"""Agent steps per second: the plain single-env loop vs the fast path, same learning problem, one run.

    python benchmarks/throughput.py                  # CUDA if available, else CPU
    python benchmarks/throughput.py --device cpu --json

Both runs use the ``breakout`` preset's learning problem (batch 32, one update per 4 agent steps
summed over all envs, same ε schedule and target sync) with a short warm-up, and are timed over a
fixed window of agent steps *after* learning starts, when the learner runs. They differ only in:

- plain: one gymnasium env stepped in Python, replay frames in host RAM;
- fast:  ``--num-envs`` envs in ale-py's C++ ``AtariVectorEnv``, replay frames on the training
  device (on a GPU: sampled there, no host copy of any frame).

Each run goes in a fresh subprocess so the two do not share allocator or thread state.
"""
from __future__ import annotations

import argparse
import dataclasses
import json

import torch

from dqn_course import quick_mode
from dqn_course.cleanup import OwnedTempDir, exit_on_signals
from dqn_course.profiling import measure_in_subprocess
from dqn_course.train import PRESETS, train


def run_once(overrides: dict) -> dict:
    """Train with the breakout preset plus ``overrides`` (module-level so a subprocess can import it)."""
    with OwnedTempDir("dqn-throughput-") as out:
        cfg = dataclasses.replace(PRESETS["breakout"], out_dir=out, progress=False, **overrides)
        return train(cfg)


@exit_on_signals()  # SIGTERM and SIGHUP unwind like Ctrl-C, so the clean-ups run
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=None, help="agent steps before learning starts")
    parser.add_argument("--window", type=int, default=None, help="agent steps timed after learning starts")
    parser.add_argument("--buffer-size", type=int, default=None)
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args()

    small = quick_mode()
    warmup = args.warmup or (500 if small else 5_000)
    window = args.window or ((400 if small else 4_000) if args.device == "cpu" else 50_000)
    buffer = args.buffer_size or (10_000 if small else 100_000 if args.device == "cpu" else 1_000_000)
    common = dict(device=args.device, learning_starts=warmup, total_steps=warmup + window, buffer_size=buffer,
                  eval_every=10**9, checkpoint_every=10**9, prefault=False)
    runs = {
        "plain": dict(num_envs=1, env_backend="gymnasium", replay_on_device=False),
        "fast": dict(num_envs=args.num_envs, env_backend="ale", replay_on_device=True),
    }
    rows = []
    for name, extra in runs.items():
        r = measure_in_subprocess(run_once, {**common, **extra}).result
        rows.append({"path": name, "device": args.device, "num_envs": extra["num_envs"],
                     "env_backend": extra["env_backend"], "replay": r["replay_device"],
                     "steps_per_s": r["learning_steps_per_s"], "updates": r["updates"], "window_steps": window,
                     "replay_mib": r["replay_bytes"] / 2**20, "rss_mib": r["rss_bytes"] / 2**20})
    ratio = rows[1]["steps_per_s"] / rows[0]["steps_per_s"]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        print(json.dumps({"ratio_fast_over_plain": ratio, "device": args.device}))
        return
    print(f"agent steps/s over {window:,} steps after learning starts (buffer {buffer:,}), device {args.device}")
    print(f"{'path':<6} {'envs':>4} {'backend':<10} {'replay':<8} {'steps/s':>9} {'updates':>8} {'RSS MiB':>8}")
    for row in rows:
        print(f"{row['path']:<6} {row['num_envs']:>4} {row['env_backend']:<10} {row['replay']:<8} "
              f"{row['steps_per_s']:>9,.0f} {row['updates']:>8,} {row['rss_mib']:>8,.0f}")
    print(f"fast / plain = {ratio:.2f}x")


if __name__ == "__main__":
    main()
