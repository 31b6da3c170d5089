"""Agent steps per second: the plain single-env loop vs the fast path, same learning problem, one run.

    python benchmarks/throughput.py                                  # CUDA if available, else CPU
    python benchmarks/throughput.py --device cuda --num-envs 8,16,32 --save data/bench/throughput-gpu.json
    python benchmarks/throughput.py --device cpu --json              # one JSON object per line

Every run uses the ``breakout`` preset's learning problem (batch 32, one update per 4 agent steps summed
over all envs, same ε schedule and target sync) with a short warm-up, and is timed over a fixed window
of agent steps *after* learning starts, when the learner runs. They differ only in:

- plain: one gymnasium env stepped in Python, replay frames in host RAM, ``agent.learn`` per update;
- fast:  ``--num-envs`` envs in ale-py's C++ ``AtariVectorEnv`` (stepping while the learner works), replay
  frames in one bank on the training device, ``DeviceLearner`` (a CUDA graph per update on a GPU).

For each run the table says where the loop's wall time went after learning started (host time per
phase: ``act`` = ε-greedy forward + actions back, ``learn`` = drawing slots + launching updates,
``envs`` = waiting for the envs beyond what overlapped, ``store`` = replay writes and logs). Each run
goes in a fresh subprocess so runs do not share allocator or thread state.
"""
from __future__ import annotations

import argparse
import dataclasses
import json

import torch

from dqn_course import quick_mode
from dqn_course.cleanup import OwnedTempDir, exit_on_signals
from dqn_course.lab.bench import save_results
from dqn_course.profiling import measure_in_subprocess
from dqn_course.train import PRESETS, train

PHASES = ("act", "learn", "envs", "store", "other")


def run_once(overrides: dict) -> dict:
    """Train with the breakout preset plus ``overrides`` (module-level so a subprocess can import it)."""
    with OwnedTempDir("dqn-throughput-") as out:
        cfg = dataclasses.replace(PRESETS["breakout"], out_dir=out, progress=False, **overrides)
        return train(cfg)


def device_name(device: str) -> str:
    return torch.cuda.get_device_name() if device == "cuda" else "cpu"


def profile(path: str, overrides: dict, device: str) -> None:
    """One fast run under ``torch.profiler``, in this process; the top operators by self time go to ``path``."""
    from torch.profiler import ProfilerActivity

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch.profiler.profile(activities=activities) as prof:
        summary = run_once(overrides)
    sort = "self_cuda_time_total" if device == "cuda" else "self_cpu_time_total"
    table = prof.key_averages().table(sort_by=sort, row_limit=30)
    with open(path, "w") as f:
        f.write(f"{summary['learning_steps_per_s']:.0f} agent steps/s (under the profiler), phases "
                f"{summary['phase_seconds']}\n{table}\n")
    print(f"profile written to {path}")


@exit_on_signals()  # SIGTERM and SIGHUP unwind like Ctrl-C, so the clean-ups run
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--num-envs", default="8", help="envs of the fast path; a comma list runs each (8,16,32)")
    parser.add_argument("--warmup", type=int, default=None, help="agent steps before learning starts")
    parser.add_argument("--window", type=int, default=None, help="agent steps timed after learning starts")
    parser.add_argument("--buffer-size", type=int, default=None)
    parser.add_argument("--compile", action="store_true", help="also each fast run with --compile-update true")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--save", default="", help="also write the rows, settings and machine to this JSON file")
    parser.add_argument("--profile", default="", help="instead: profile the (first) fast run with torch.profiler "
                                                      "and write its table of top operators to this file")
    args = parser.parse_args()

    small = quick_mode()
    warmup = args.warmup or (500 if small else 5_000)
    window = args.window or ((400 if small else 4_000) if args.device == "cpu" else 50_000)
    buffer = args.buffer_size or (10_000 if small else 100_000 if args.device == "cpu" else 1_000_000)
    common = dict(device=args.device, learning_starts=warmup, total_steps=warmup + window, buffer_size=buffer,
                  eval_every=10**9, checkpoint_every=10**9, prefault=False)
    runs = {"plain": dict(num_envs=1, env_backend="gymnasium", replay_on_device=False)}
    for n in (int(x) for x in args.num_envs.split(",")):
        runs[f"fast-{n}" if "," in args.num_envs else "fast"] = dict(num_envs=n, env_backend="ale",
                                                                     replay_on_device=True)
        if args.compile:
            runs[f"fast-{n}-compiled" if "," in args.num_envs else "fast-compiled"] = dict(
                num_envs=n, env_backend="ale", replay_on_device=True, compile_update=True)
    if args.profile:
        profile(args.profile, {**common, **list(runs.values())[1]}, args.device)
        return
    rows = []
    for name, extra in runs.items():
        r = measure_in_subprocess(run_once, {**common, **extra}).result
        phases = r["phase_seconds"]
        total = sum(phases.values()) or 1.0
        rows.append({"path": name, "device": args.device, "gpu": device_name(args.device),
                     "num_envs": extra["num_envs"], "env_backend": extra["env_backend"], "replay": r["replay_device"],
                     "steps_per_s": r["learning_steps_per_s"], "updates": r["updates"], "window_steps": window,
                     "replay_mib": r["replay_bytes"] / 2**20, "rss_mib": r["rss_bytes"] / 2**20,
                     "phase_share": {p: phases.get(p, 0.0) / total for p in PHASES}})
    plain = rows[0]["steps_per_s"]
    for row in rows[1:]:
        row["ratio_over_plain"] = row["steps_per_s"] / plain
    best = max(rows[1:], key=lambda row: row["steps_per_s"])
    if args.save:
        save_results(args.save, rows, device=args.device, gpu=device_name(args.device), warmup=warmup,
                     window=window, buffer_size=buffer, ratio_fast_over_plain=best["ratio_over_plain"])
    if args.json:
        for row in rows:
            print(json.dumps(row))
        print(json.dumps({"ratio_fast_over_plain": best["ratio_over_plain"], "device": args.device}))
        return
    print(f"agent steps/s over {window:,} steps after learning starts (buffer {buffer:,}), "
          f"device {device_name(args.device)}, {torch.get_num_threads()} torch threads")
    print(f"{'path':<8} {'envs':>4} {'replay':<7} {'steps/s':>9} {'x plain':>7} {'RSS MB':>8}  "
          + " ".join(f"{p:>6}" for p in PHASES))
    for row in rows:
        shares = " ".join(f"{row['phase_share'][p]:>6.0%}" for p in PHASES)
        print(f"{row['path']:<8} {row['num_envs']:>4} {row['replay']:<7} {row['steps_per_s']:>9,.0f} "
              f"{row.get('ratio_over_plain', 1.0):>7.2f} {row['rss_mib'] * 2**20 / 1e6:>8,.0f}  {shares}")
    print(f"fast / plain = {best['ratio_over_plain']:.2f}x (best: {best['path']})")


if __name__ == "__main__":
    main()
