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

ε is held constant over the run (``--epsilon``; by default the breakout preset's ε where its 10M-step schedule
stands at the end of the warm-up: almost every action random, as early in a real run). With ``--cleanrl PATH``
CleanRL's ``dqn_atari.py`` (a copy kept outside this repository, adapted as benchmarks/README.md says) runs with
the same settings before each plain run and once after the last, in this one run: the peer's rate beside ours.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from dqn_course import quick_mode
from dqn_course.cleanup import OwnedTempDir, exit_on_signals
from dqn_course.lab.bench import save_results
from dqn_course.profiling import measure_in_subprocess
from dqn_course.train import PRESETS, epsilon_at, train

PHASES = ("act", "learn", "envs", "store", "other")


def run_once(overrides: dict) -> dict:
    """Train with the breakout preset plus ``overrides`` (module-level so a subprocess can import it)."""
    with OwnedTempDir("dqn-throughput-") as out:
        cfg = dataclasses.replace(PRESETS["breakout"], out_dir=out, progress=False, **overrides)
        return train(cfg)


def device_name(device: str) -> str:
    return torch.cuda.get_device_name() if device == "cuda" else "cpu"


def cleanrl_once(path: str, device: str, warmup: int, window: int, buffer: int, epsilon: float) -> dict:
    """CleanRL's ``dqn_atari.py`` at ``path`` with the breakout learning problem of our runs: its own loop, replay
    and network, ``window`` agent steps timed after ``warmup``. The adapted copy takes its ``Args`` overrides as
    one JSON argument and prints one JSON line with ``steps_per_s`` (benchmarks/README.md)."""
    settings = {"learning_starts": warmup, "window": window, "buffer_size": buffer, "start_e": epsilon,
                "end_e": epsilon, "cuda": device == "cuda", "batch_size": 32, "train_frequency": 4}
    with OwnedTempDir("dqn-cleanrl-") as work:
        proc = subprocess.run([sys.executable, str(Path(path).resolve()), json.dumps(settings)], cwd=work,
                              capture_output=True, text=True, timeout=1800)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode or not lines:
        raise RuntimeError(f"CleanRL's run at {path} failed (exit status {proc.returncode}): "
                           f"{proc.stderr.strip().splitlines()[-1:] or 'no output'}")
    return json.loads(lines[-1])


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


def row_of(name: str, extra: dict, r: dict, device: str, window: int) -> dict:
    """One table row of a run of ours: its rate after learning starts and where its wall time went."""
    phases = r["phase_seconds"]
    total = sum(phases.values()) or 1.0
    return {"path": name, "device": device, "gpu": device_name(device), "num_envs": extra["num_envs"],
            "env_backend": extra["env_backend"], "replay": r["replay_device"], "steps_per_s": r["learning_steps_per_s"],
            "updates": r["updates"], "window_steps": window, "replay_mib": r["replay_bytes"] / 2**20,
            "rss_mib": r["rss_bytes"] / 2**20, "phase_share": {p: phases.get(p, 0.0) / total for p in PHASES}}


@exit_on_signals()  # SIGTERM and SIGHUP unwind like Ctrl-C, so the clean-ups run
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--num-envs", default="8", help="envs of the fast path; a comma list runs each "
                                                        "(16,32,64,128); 0: no fast run")
    parser.add_argument("--warmup", type=int, default=None, help="agent steps before learning starts")
    parser.add_argument("--window", type=int, default=None, help="agent steps timed after learning starts")
    parser.add_argument("--buffer-size", type=int, default=None)
    parser.add_argument("--epsilon", type=float, default=None, help="ε of every run, held constant (default: the "
                                                                    "breakout schedule's at the warm-up's end)")
    parser.add_argument("--rounds", type=int, default=1, help="plain runs (each after a CleanRL run, with "
                                                              "--cleanrl); the table keeps every one")
    parser.add_argument("--cleanrl", default="", help="CleanRL's dqn_atari.py, adapted (benchmarks/README.md), "
                                                      "outside this repository: run beside ours")
    parser.add_argument("--compile", action="store_true", help="also each fast run with --compile-update true")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--save", default="", help="also write the rows, settings and machine to this JSON file")
    parser.add_argument("--profile", default="", help="instead: profile the (first) fast run with torch.profiler "
                                                      "and write its table of top operators to this file")
    args = parser.parse_args()
    if args.cleanrl and not Path(args.cleanrl).is_file():
        parser.error(f"--cleanrl {args.cleanrl}: no such file (CleanRL's dqn_atari.py, adapted as "
                     f"benchmarks/README.md says)")

    small = quick_mode()
    warmup = args.warmup or (500 if small else 5_000)
    window = args.window or ((400 if small else 4_000) if args.device == "cpu" else 50_000)
    buffer = args.buffer_size or (10_000 if small else 100_000 if args.device == "cpu" else 1_000_000)
    eps = epsilon_at(warmup, PRESETS["breakout"]) if args.epsilon is None else args.epsilon
    common = dict(device=args.device, learning_starts=warmup, total_steps=warmup + window, buffer_size=buffer,
                  eps_start=eps, eps_end=eps, eval_every=10**9, checkpoint_every=10**9, prefault=False)
    plain = dict(num_envs=1, env_backend="gymnasium", replay_on_device=False)
    fast = {}
    for n in (int(x) for x in args.num_envs.split(",") if int(x)):
        fast[f"fast-{n}" if "," in args.num_envs else "fast"] = dict(num_envs=n, env_backend="ale",
                                                                     replay_on_device=True)
        if args.compile:
            fast[f"fast-{n}-compiled" if "," in args.num_envs else "fast-compiled"] = dict(
                num_envs=n, env_backend="ale", replay_on_device=True, compile_update=True)
    if args.profile:
        profile(args.profile, {**common, **next(iter(fast.values()), plain)}, args.device)
        return

    def peer() -> dict:
        r = cleanrl_once(args.cleanrl, args.device, warmup, window, buffer, eps)
        return {"path": "cleanrl", "device": args.device, "gpu": device_name(args.device), "num_envs": 1,
                "steps_per_s": r["steps_per_s"], "window_steps": window}

    rows = []
    for _ in range(args.rounds):
        if args.cleanrl:
            rows.append(peer())
        rows.append(row_of("plain", plain, measure_in_subprocess(run_once, {**common, **plain}).result,
                           args.device, window))
    for name, extra in fast.items():
        rows.append(row_of(name, extra, measure_in_subprocess(run_once, {**common, **extra}).result, args.device,
                           window))
    if args.cleanrl:
        rows.append(peer())
    rates = {path: [row["steps_per_s"] for row in rows if row["path"] == path] for path in ("plain", "cleanrl")}
    plain_rate = statistics.median(rates["plain"])
    ratios = {}
    for row in rows:
        if row["path"].startswith("fast"):
            row["ratio_over_plain"] = ratios[row["path"]] = row["steps_per_s"] / plain_rate
    if args.cleanrl:
        ratios["plain_over_cleanrl"] = plain_rate / statistics.median(rates["cleanrl"])
    best = max((row for row in rows if row["path"].startswith("fast")), key=lambda row: row["steps_per_s"],
               default=None)
    if best:
        ratios["ratio_fast_over_plain"] = best["ratio_over_plain"]
    if args.save:
        save_results(args.save, rows, device=args.device, gpu=device_name(args.device), warmup=warmup,
                     window=window, buffer_size=buffer, epsilon=eps, rounds=args.rounds,
                     cleanrl=bool(args.cleanrl), **ratios)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        print(json.dumps({**ratios, "device": args.device}))
        return
    print(f"agent steps/s over {window:,} steps after learning starts (buffer {buffer:,}, ε {eps:.3f}), "
          f"device {device_name(args.device)}, {torch.get_num_threads()} torch threads")
    print(f"{'path':<8} {'envs':>4} {'replay':<7} {'steps/s':>9} {'x plain':>7} {'RSS MB':>8}  "
          + " ".join(f"{p:>6}" for p in PHASES))
    for row in rows:
        shares = " ".join(f"{row['phase_share'][p]:>6.0%}" for p in PHASES) if "phase_share" in row else ""
        rss = f"{row['rss_mib'] * 2**20 / 1e6:>8,.0f}" if "rss_mib" in row else f"{'':>8}"
        print(f"{row['path']:<8} {row['num_envs']:>4} {row.get('replay', ''):<7} {row['steps_per_s']:>9,.0f} "
              f"{row['steps_per_s'] / plain_rate:>7.2f} {rss}  {shares}")
    if best:
        print(f"fast / plain = {best['ratio_over_plain']:.2f}x (best: {best['path']})")
    if args.cleanrl:
        print(f"plain / CleanRL = {ratios['plain_over_cleanrl']:.2f}x (medians)")


if __name__ == "__main__":
    main()
