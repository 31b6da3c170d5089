"""One command that says whether the GPU path works here and how fast it is, within a short GPU window.

    python -m dqn_course.gpu_check OUT              # or: make gpu-check OUT=folder
    python -m dqn_course.gpu_check OUT --budget 300
    python -m dqn_course.gpu_check OUT --device cpu # a rehearsal of every stage on the CPU, small sizes

Stages, in this order, each in its own process with its own time limit, all within ``--budget`` seconds (480 by default,
8 minutes); a stage that fails is reported and the next one runs:

1. ``cuda``: torch sees a CUDA GPU and runs a matmul on it (refused up front, exit status 2, saying what is missing:
   a CPU-only torch build, no GPU visible, or a device number this machine lacks);
2. ``tests``: the test suite's CUDA tests (graph == eager, resume on the GPU), where pytest and ``tests/`` are here;
3. ``quick``: the ``quick`` preset on the fast path (8 C++ envs, replay frames on the GPU);
4. ``self-check``: a ``DeviceLearner`` captures its update as a CUDA graph and checks it against the eager update
   (``DeviceLearner.self_check``): which way the updates run, and why if not by the graph;
5. ``plan``: the host's µs per update to plan updates (``benchmarks/plan.py``; budget 150 µs);
6. ``capture``: the update launched several ways (``benchmarks/update_capture.py``: eager, own graph, tensordict's
   ``CudaGraphModule``, each graph with and without ``torch.compile``), updates/s in one run;
7. ``throughput``: agent steps/s after learning starts, in one run (``benchmarks/throughput.py``): the plain loop,
   the fast path at each of ``SWEEP_ENVS`` envs, and CleanRL's ``dqn_atari.py`` beside them where a copy is at
   ``CLEANRL`` (adapted as benchmarks/README.md says; its code is not part of the course); the fastest envs count;
8. ``profile``: that fastest fast path once under ``torch.profiler``, its top operators kept in ``summary.json``;
9. ``burst``: ``breakout-fast`` at the fastest envs count trains for the time left (then evaluates, saves, stops).

``OUT`` (the argument, else $OUT, else ``gpu-check``) receives at most ``MAX_FILES`` files of at most
``MAX_FILE_BYTES`` each (what a GPU window can bring back): ``summary.json`` (every stage's result), ``verdict.txt``
(one line), ``check.log`` (the stages' output), ``throughput.json``, and the burst's ``log.csv``, ``eval.csv`` and
``checkpoint.pt`` (its policy); files already in ``OUT`` are left alone and not counted. Exit status 0 when every
stage ran, 1 when one failed, 2 when CUDA is not usable. The stage processes run
``python -m dqn_course.gpu_check --stage NAME``.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from dqn_course.contracts import Count, check_module
from dqn_course.cleanup import exit_on_signals

MAX_FILES = 7  # a GPU window brings back 8 files; its runner keeps one (gpu.txt)
MAX_FILE_BYTES = 16 * 2**20
GOAL_STEPS_PER_S = 6_700  # 10M agent steps in 25 minutes on one H100
GOAL_RATIO = 10.0  # fast path over the plain loop, same run
PLAN_BUDGET_US = 150.0
ROOT = Path(__file__).resolve().parents[1]  # the checkout: benchmarks/ and tests/ live there
STAGES = ("cuda", "tests", "quick", "self-check", "plan", "capture", "throughput", "profile", "burst")
SWEEP_ENVS = (16, 32, 64, 128)  # the fast path's envs counts the throughput stage tries, in this order
CLEANRL = ROOT / ".whl" / "cleanrl" / "dqn_atari.py"  # where a GPU window's checkout carries CleanRL (git-ignored)


class GpuCheckError(Exception):
    """The check cannot run here (no usable CUDA device); the message says what is missing."""


def cuda_problem(device: str) -> str | None:
    """Why ``device`` cannot be used for the GPU check here (what is missing), or None when it can."""
    dev = torch.device(device)
    if dev.type != "cuda":
        return f"{device} is not a CUDA device: the GPU check needs --device cuda or cuda:N"
    if torch.version.cuda is None:
        return (f"this torch ({torch.__version__}) is a CPU-only build: install a CUDA build of torch "
                f"(https://pytorch.org/get-started/locally/)")
    if not torch.cuda.is_available():
        return (f"this torch is a CUDA {torch.version.cuda} build but sees no GPU: check nvidia-smi, the NVIDIA "
                f"driver and CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        return f"{device}: this machine has {torch.cuda.device_count()} CUDA device(s), numbered from 0"
    return None


def cap_output(folder: Path, max_files: int = MAX_FILES, max_bytes: int = MAX_FILE_BYTES,
               keep_first: tuple[str, ...] = (), others: frozenset[str] = frozenset()) -> list[str]:
    """Make ``folder`` hold at most ``max_files`` files of at most ``max_bytes`` each, not counting ``others`` (files
    someone else put there, left alone): a larger text file keeps its last ``max_bytes`` (logs end with what
    matters), a larger binary file and the files beyond the count go (those named in ``keep_first`` are kept first,
    then the smallest). Returns what was cut or removed, one line each."""
    notes = []
    for f in sorted(p for p in folder.iterdir() if p.is_file() and p.name not in others):
        size = f.stat().st_size
        if size <= max_bytes:
            continue
        if f.suffix in (".log", ".txt", ".csv"):
            with open(f, "rb") as src:
                src.seek(size - max_bytes)
                tail = src.read()
            f.write_bytes(tail)
            notes.append(f"{f.name}: cut to its last {max_bytes:,} bytes (was {size:,})")
        else:
            f.unlink()
            notes.append(f"{f.name}: removed ({size:,} bytes, over {max_bytes:,})")
    files = sorted((p for p in folder.iterdir() if p.is_file() and p.name not in others),
                   key=lambda p: (p.name not in keep_first, p.stat().st_size))
    for f in files[max_files:]:
        notes.append(f"{f.name}: removed (more than {max_files} files)")
        f.unlink()
    return notes


# -- the stages that run inside a stage process ---------------------------------------------------------------------

def random_frames_memory(device: str | torch.device, capacity: Count, streams: Count = 8, seed: int = 0):
    """A ``MultiStreamMemory`` (frame bank on ``device``, ``padding="repeat"``) filled to capacity with random
    84x84 frames in episodes of 500 steps: what the fast path's checks and benchmarks update from."""
    from dqn_course.replay import MultiStreamMemory

    obs = (4, 84, 84)
    memory = MultiStreamMemory(capacity, streams, obs, seed=seed, padding="repeat", device=device)
    rng = np.random.default_rng(seed)
    states = rng.integers(0, 256, (streams, *obs), dtype=np.uint8)
    for t in range(capacity // streams):
        new = rng.integers(0, 256, (streams, 1, *obs[1:]), dtype=np.uint8)
        next_states = np.concatenate([states[:, 1:], new], axis=1)
        ends = np.full(streams, t % 500 == 499)
        memory.add_batch(states, rng.integers(0, 4, streams), rng.choice([-1.0, 0.0, 1.0], streams), next_states,
                         dones=ends, episode_ends=ends)
        states = next_states
    memory.bank.flush()
    return memory


def stage_cuda(device: str) -> dict:
    dev = torch.device(device)
    x = torch.randn(256, 256, device=dev)
    ok = torch.allclose((x @ x).cpu(), x.cpu() @ x.cpu(), rtol=1e-3, atol=1e-2)
    info = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "matmul_ok": bool(ok)}
    if dev.type == "cuda":
        free, total = torch.cuda.mem_get_info(dev)
        info.update(gpu=torch.cuda.get_device_name(dev), capability=list(torch.cuda.get_device_capability(dev)),
                    devices=torch.cuda.device_count(), free_gib=free / 2**30, total_gib=total / 2**30)
    return info


def stage_self_check(device: str) -> dict:
    """Capture (on CUDA) and self-check the update on a memory of random frames, on ``device`` and, where the
    machine has two GPUs, on the second one too (its objects must land there, the current device unchanged)."""
    from dqn_course.agent import DQNAgent
    from dqn_course.learner import DeviceLearner, snapshot

    devices = [torch.device(device)]
    if devices[0].type == "cuda" and torch.cuda.device_count() > 1:
        devices.append(torch.device("cuda", 1 if (devices[0].index or 0) == 0 else 0))
    out = {}
    for dev in devices:
        current = torch.cuda.current_device() if dev.type == "cuda" else None
        memory = random_frames_memory(dev, 20_000)
        learner = DeviceLearner(DQNAgent(4, dev, seed=1), memory, 32)
        learner.learn(2)
        again = None
        if learner._replay is not None:  # the check once more, after real updates (Adam with a history)
            with learner._on_device():
                again = learner.self_check(learner._replay, snapshot(learner.agent))
        learner.learn(8)
        loss = learner.diagnostics()
        out[str(dev)] = {"updates_ran": learner.path, "fallback_reason": learner.fallback_reason,
                         "self_check_after_updates": again or "agrees", "diagnostics": loss,
                         "current_device_unchanged": current is None or torch.cuda.current_device() == current}
    return out


def stage_quick(device: str, folder: str) -> dict:
    import dataclasses

    from dqn_course.train import PRESETS, train

    small = {} if torch.device(device).type == "cuda" else {"total_steps": 1_000, "eval_every": 1_000}  # a rehearsal
    cfg = dataclasses.replace(PRESETS["quick"], device=device, num_envs=8, env_backend="ale", replay_on_device=True,
                              out_dir=folder, progress=False, **small)
    summary = train(cfg)
    keys = ("steps", "seconds", "steps_per_s", "updates", "episodes", "updates_ran", "graph_fallback", "stopped")
    return {k: summary.get(k) for k in keys}


STAGE_FUNCTIONS = {"cuda": stage_cuda, "self-check": stage_self_check, "quick": stage_quick}


# -- the driver -------------------------------------------------------------------------------------------------------

class Check:
    """Runs the stages as processes within a deadline, keeping their results and their output in ``out``."""

    def __init__(self, out: Path, device: str, budget: float):
        self.out, self.device, self.start = out, device, time.monotonic()
        self.deadline = self.start + budget
        self.rehearsal = torch.device(device).type != "cuda"
        self.results: dict[str, dict] = {}
        self.others = frozenset(p.name for p in out.iterdir() if p.name != "check.log")  # e.g. a window's gpu.txt
        self.log = open(out / "check.log", "a")
        self.work = Path(tempfile.mkdtemp(prefix="gpu-check-"))

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, name: str, command: list[str], limit: float, parse: Callable[[str], object] | None = None) -> dict:
        """Run one stage's command (at most ``limit`` s, never past the deadline); its result is ``parse(stdout)``
        (by default the last JSON line it printed), with ``seconds`` and ``ok``; output goes to check.log."""
        limit = min(limit, self.left() - 5)
        result: dict = {"command": " ".join(command)}
        if limit < 5:
            result.update(ok=False, error="skipped: no time left in the budget")
            self.results[name] = result
            return result
        t0 = time.monotonic()
        self.log.write(f"\n== {name} (limit {limit:.0f} s, t={t0 - self.start:.0f} s): {' '.join(command)}\n")
        self.log.flush()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               "PYTHONUNBUFFERED": "1"}
        try:
            proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=limit)
            stdout, rc = proc.stdout, proc.returncode
            self.log.write(stdout[-20_000:] + proc.stderr[-20_000:])
        except subprocess.TimeoutExpired as e:
            stdout, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), None
            self.log.write(stdout[-20_000:] + f"\n(stopped after {limit:.0f} s)\n")
        result["seconds"] = round(time.monotonic() - t0, 1)
        result["returncode"] = rc
        try:
            result.update((parse or last_json)(stdout))
            result["ok"] = rc == 0 and "error" not in result
        except (ValueError, KeyError, IndexError) as error:
            result.update(ok=False, error=f"{'timed out; ' if rc is None else ''}no result ({error})")
        self.log.flush()
        self.results[name] = result
        return result

    def stage(self, name: str, limit: float, *args: str) -> dict:
        return self.run(name, [sys.executable, "-m", "dqn_course.gpu_check", "--stage", name, "--device",
                               self.device, *args], limit)

    def all(self) -> None:
        small = self.rehearsal
        py = sys.executable
        cuda = self.stage("cuda", 60)
        if not cuda.get("ok"):
            return
        if (ROOT / "tests").is_dir() and _has("pytest") and not small:
            self.run("tests", [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_learner.py", "-k",
                               "cuda"], 90, parse=pytest_summary)
        self.stage("quick", 120, str(self.work / "quick"))
        self.stage("self-check", 90)
        self.run("plan", [py, "benchmarks/plan.py", "--device", self.device, "--ks", "2,8", "--seconds", "0.5",
                          "--capacity", "20000"], 60, parse=json_rows)
        self.run("capture", [py, "benchmarks/update_capture.py", "--device", self.device, "--capacity", "20000",
                             "--updates", "20" if small else "300"], 45, parse=json_rows)
        window = ["--warmup", "300", "--window", "300", "--buffer-size", "5000"] if small else \
            ["--warmup", "2000", "--window", "6000"]
        sweep = "2,4" if small else ",".join(map(str, SWEEP_ENVS))
        peer = ["--cleanrl", str(CLEANRL)] if CLEANRL.is_file() else []
        speed = self.run("throughput", [py, "benchmarks/throughput.py", "--device", self.device, *window,
                                        "--num-envs", sweep, *peer, "--save", str(self.out / "throughput.json"),
                                        "--json"], 300, parse=throughput_result)
        envs = speed.get("fast_num_envs", 2 if small else 8)
        table = self.work / "profile.txt"
        self.run("profile", [py, "benchmarks/throughput.py", "--device", self.device, *window, "--num-envs",
                             str(envs), "--profile", str(table)], 90, parse=lambda _: profile_result(table))
        self.burst(envs)

    def burst(self, num_envs: Count) -> None:
        """``breakout-fast`` on ``num_envs`` envs for the time left: ``--time-limit`` leaves a minute to evaluate
        and save; a hard stop (SIGTERM: the run saves, then exits) 15 s before the deadline."""
        run = self.work / "run"
        hard = self.left() - 20
        minutes = round((hard - 75) / 60, 2)
        if minutes < 0.5:
            self.results["burst"] = {"ok": False, "error": f"skipped: {hard:.0f} s left, too little for a burst"}
            return
        extra = ["--buffer-size", "20000", "--learning-starts", "2000", "--eval-episodes", "2"] if self.rehearsal \
            else []
        command = [sys.executable, "-m", "dqn_course.train", "--preset", "breakout-fast", "--device", self.device,
                   "--num-envs", str(num_envs), "--out-dir", str(run), "--progress", "false", "--checkpoint-every",
                   str(10**9), "--time-limit",
                   str(minutes), *extra]
        result = self.run("burst", command, hard, parse=lambda stdout: burst_result(stdout, run))
        for name in ("log.csv", "eval.csv", "checkpoint.pt"):
            if (run / name).is_file():
                shutil.copy(run / name, self.out / name)
        result["copied"] = sorted(n for n in ("log.csv", "eval.csv", "checkpoint.pt") if (self.out / n).is_file())

    def finish(self) -> int:
        verdict, status = self.verdict()
        summary = {"device": self.device, "rehearsal": self.rehearsal, "budget_s": round(self.deadline - self.start),
                   "wall_s": round(time.monotonic() - self.start, 1), "verdict": verdict, "stages": self.results,
                   "goals": {"steps_per_s": GOAL_STEPS_PER_S, "ratio_fast_over_plain": GOAL_RATIO,
                             "plan_us_per_update": PLAN_BUDGET_US}}
        (self.out / "verdict.txt").write_text(verdict + "\n")
        self.log.close()
        shutil.rmtree(self.work, ignore_errors=True)
        (self.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
        notes = cap_output(self.out, keep_first=("summary.json", "verdict.txt", "throughput.json", "eval.csv",
                                                 "log.csv", "checkpoint.pt", "check.log"), others=self.others)
        if notes:
            summary["output_cut"] = notes
            (self.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
        print(verdict)
        return status

    def verdict(self) -> tuple[str, int]:
        """One line: does the GPU path work, how fast, against which goals; and the exit status."""
        r = self.results
        if not r.get("cuda", {}).get("ok"):
            return f"GPU check: CUDA not usable on {self.device}: {r.get('cuda', {}).get('error', '?')}", 2
        failed = [name for name, res in r.items() if not res.get("ok")]
        where = r["cuda"].get("gpu", self.device)
        checked = r.get("self-check", {}).get(str(torch.device(self.device)), {})
        graph = checked.get("updates_ran", "?")
        parts = [f"{'REHEARSAL on the CPU (no GPU checked)' if self.rehearsal else 'GPU check'} on {where}: "
                 + ("every stage ran" if not failed else f"FAILED: {', '.join(failed)}"),
                 f"updates: {graph}"]
        t = r.get("throughput", {})
        if "fast_steps_per_s" in t:
            rate, ratio = t["fast_steps_per_s"], t["ratio_fast_over_plain"]
            parts.append(f"fast {rate:,.0f} agent steps/s = {ratio:.1f}x plain "
                         f"(goal {GOAL_STEPS_PER_S:,} steps/s: {'met' if rate >= GOAL_STEPS_PER_S else 'not met'}; "
                         f"goal {GOAL_RATIO:.0f}x: {'met' if ratio >= GOAL_RATIO else 'not met'}) "
                         f"at {t.get('fast_num_envs', '?')} envs")
        if "plain_over_cleanrl" in t:
            parts.append(f"plain {t['plain_steps_per_s']:,.0f} agent steps/s = {t['plain_over_cleanrl']:.2f}x "
                         f"CleanRL's dqn_atari.py (goal 1x: {'met' if t['plain_over_cleanrl'] >= 1 else 'not met'})")
        plan = [row for row in r.get("plan", {}).get("rows", []) if row.get("variant") == "vectorised"]
        if plan:
            parts.append("plan " + ", ".join(f"{row['plan_us_per_update']:.0f} µs/update at k={row['k']}"
                                             for row in plan) + f" (budget {PLAN_BUDGET_US:.0f})")
        b = r.get("burst", {})
        if "steps" in b:
            took = f" in {b['seconds_training']:.0f} s" if b.get("seconds_training") is not None else ""
            parts.append(f"burst {b['steps']:,} steps{took}"
                         + (f", last evaluation {b['last_eval']:.1f}" if b.get("last_eval") is not None else ""))
        return "; ".join(parts), 1 if failed else 0


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def last_json(stdout: str) -> dict:
    """The last line of ``stdout`` that is a JSON object."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON line in the output")


def json_rows(stdout: str) -> dict:
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    if not rows:
        raise ValueError("no JSON rows in the output")
    errors = [row["error"] for row in rows if "error" in row]
    return {"rows": rows, **({"variant_errors": errors} if errors else {})}


def pytest_summary(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if " passed" in line or " failed" in line or " error" in line]
    if not lines:
        raise ValueError("no pytest summary line")
    return {"summary": lines[-1].strip("= ")} | ({"error": lines[-1]} if "failed" in lines[-1]
                                                   or "error" in lines[-1] else {})


def throughput_result(stdout: str) -> dict:
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    paths = {row["path"]: row for row in rows if "path" in row}
    fast = max((row for name, row in paths.items() if name.startswith("fast")), key=lambda row: row["steps_per_s"])
    ratios = next((row for row in rows if "path" not in row), {})
    return {"steps_per_s": {name: row["steps_per_s"] for name, row in paths.items()}, "fast_path": fast["path"],
            "fast_num_envs": fast["num_envs"], "plain_steps_per_s": paths["plain"]["steps_per_s"],
            "fast_steps_per_s": fast["steps_per_s"],
            "ratio_fast_over_plain": fast["steps_per_s"] / paths["plain"]["steps_per_s"],
            "fast_phase_share": fast.get("phase_share"),
            **({"plain_over_cleanrl": ratios["plain_over_cleanrl"],
                "cleanrl_steps_per_s": [row["steps_per_s"] for row in rows if row.get("path") == "cleanrl"]}
               if "plain_over_cleanrl" in ratios else {}),
            "phase_share": {name: row.get("phase_share") for name, row in paths.items() if "phase_share" in row}}


def profile_result(table: Path) -> dict:
    """The profile stage's result: the rate under the profiler and the table of top operators (its lines)."""
    return {"table": table.read_text().splitlines()}


def burst_result(stdout: str, run: Path) -> dict:
    """What the burst reached: steps and games from its log, the last evaluation, and its last lines."""
    with open(run / "log.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    evals = []
    if (run / "eval.csv").is_file():
        with open(run / "eval.csv", newline="") as f:
            evals = list(csv.DictReader(f))
    done = [line for line in stdout.splitlines() if line.startswith(("done:", "stopped:", "why:", "updates ran"))]
    end = next((line.split(": ", 1)[1] for line in done if line.startswith(("done:", "stopped:"))), None)
    if end is None:  # killed before its last line: what its log reached
        steps, seconds = (int(rows[-1]["step"]) if rows else 0), None
    else:  # "3,584 steps in 83 s (43 steps/s on cpu), ..." or, resumed, "3,584 steps (1,000 this session) in ..."
        found = re.match(r"([\d,]+) steps(?: \([\d,]+ this session\))? in ([\d.]+) s", end)
        steps, seconds = int(found[1].replace(",", "")), float(found[2])
    return {"steps": steps, "games": len(rows), "seconds_training": seconds,
            "last_eval": float(evals[-1]["mean_return"]) if evals else None,
            "evaluations": [{k: float(v) for k, v in e.items()} for e in evals], "lines": done}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m dqn_course.gpu_check", description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", default=None, help="output folder (default: $OUT, else gpu-check)")
    parser.add_argument("--device", default="cuda", help="cuda or cuda:N; cpu rehearses every stage, small")
    parser.add_argument("--budget", type=float, default=480.0, help="seconds for the whole check (default 480)")
    parser.add_argument("--stage", choices=sorted(STAGE_FUNCTIONS), help=argparse.SUPPRESS)
    parser.add_argument("stage_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 60 <= args.budget <= 600:
        parser.error(f"--budget must be between 60 and 600 seconds (a GPU window runs one command of at most "
                     f"10 minutes), got {args.budget:g}")
    try:
        torch.device(args.device)
    except RuntimeError:
        parser.error(f"--device {args.device!r} is not a torch device: use cuda, cuda:N or cpu (a rehearsal)")
    return args


@exit_on_signals()  # SIGTERM (a window's hard stop) unwinds like Ctrl-C: the summary is still written
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.stage:  # inside a stage process: one stage, its result as one JSON line
        extra = [args.out, *args.stage_args] if args.out else args.stage_args
        print(json.dumps(STAGE_FUNCTIONS[args.stage](args.device, *extra), default=str))
        return 0
    if torch.device(args.device).type == "cuda":
        problem = cuda_problem(args.device)
        if problem:
            print(f"GPU check refused: {problem}", file=sys.stderr)
            return 2
    out = Path(args.out or os.environ.get("OUT") or "gpu-check")
    out.mkdir(parents=True, exist_ok=True)
    check = Check(out, args.device, args.budget)
    try:
        check.all()
    finally:
        status = check.finish()
    return status


if __name__ == "__main__":
    sys.exit(main())


check_module(globals())
