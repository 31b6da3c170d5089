"""benchmarks/README.md's tables of speed: PER's trees, the training loop's throughput, Ray, the A/B runs of the
update, the loop and the checks, the captured update, the plan and the capstone's loop."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from bench_files import ROOT, _bench, _bench_files, _bench_rows, _machine


TREE_NAMES = {"uniform": "uniform indices (no tree)", "per_item": "per-item Python tree",
              "numpy": "numpy-vectorised tree", "compiled": "compiled (numba) tree"}


def per_body(root: Path = ROOT) -> str:
    doc = _bench(root, "per.json")
    s, env = doc["settings"], doc["environment"]
    tree = {r["sampler"]: r for r in doc["rows"] if r.get("part") == "tree"}
    step = {r["sampler"]: r for r in doc["rows"] if r.get("part") == "learner_step"}
    lines = [f"`python {doc['command']}` ({_machine(env)}; {s['seconds']:.0f} s): index selection at capacity "
             f"{s['capacity']:,}, batch {s['batch_size']} (PER: sample + priority update), and a learner step on the "
             f"CPU ({s['threads']} threads, real Breakout frames, median of interleaved steps):", "",
             "| what | rate | time | × per-item tree |", "|---|---:|---:|---:|"]
    for name, r in tree.items():
        over = f"{r['over_per_item']:.1f}×" if "over_per_item" in r else "—"
        lines.append(f"| {TREE_NAMES.get(name, name)} | {r['batches_per_s']:,.0f} batches/s | "
                     f"{1e6 / r['batches_per_s']:.1f} µs | {over} |")
    for name, r in step.items():
        lines.append(f"| learner step, {name} | | {r['ms_per_step']:.2f} ms | |")
    ratio = step["prioritized"]["ms_per_step"] / step["uniform"]["ms_per_step"]
    lines += ["", (f"The compiled (numba) sum tree ran {tree['compiled']['over_per_item']:.1f}× the per-item Python "
                   f"tree's rate, the numpy-vectorised tree {tree['numpy']['over_per_item']:.1f}×; a learner step "
                   f"with PER took {ratio:.3f}× as long as without.")]
    checks = [r for r in doc["rows"] if r.get("part") == "checks"]
    if checks:  # recorded since the argument checks were compiled per signature
        lines += ["", "Checked calls from user code (the arguments checked at the package's edge) against the same "
                      "functions' bodies alone, in turns:", "", "| call | checked | body alone | ratio |",
                  "|---|---:|---:|---:|"]
        lines += [f"| `{r['call']}` of {r['batch_size']} leaves | {r['checked_us']:.2f} µs | {r['body_us']:.2f} µs | "
                  f"{r['checked_over_body']:.2f}× |" for r in checks]
    return "\n".join(lines)


def throughput_body(root: Path = ROOT) -> str:
    saved = _bench_files(root, "throughput*.json")
    lines = []
    for path, doc in saved:
        s = doc["settings"]
        eps = f", ε {s['epsilon']:.3f}" if "epsilon" in s else ""
        lines += [f"`{path.relative_to(root)}`: `python {doc['command']}` ({_machine(doc['environment'])}; "
                  f"{s['window']:,} agent steps timed after learning starts, buffer {s['buffer_size']:,}{eps}, "
                  f"device {s.get('gpu') or s['device']}):", "",
                  "| path | envs | replay | agent steps/s | × plain | RSS MB |", "|---|---:|---|---:|---:|---:|"]
        plain = statistics.median(r["steps_per_s"] for r in doc["rows"] if r["path"] == "plain")
        lines += [f"| {r['path']} | {r['num_envs']} | {r.get('replay', 'its own')} | {r['steps_per_s']:,.0f} | "
                  f"{r['steps_per_s'] / plain:.2f}× | "
                  f"{format(r['rss_mib'] * 2**20 / 1e6, ',.0f') if 'rss_mib' in r else ''} |" for r in doc["rows"]]
        if "plain_over_cleanrl" in s:
            lines += ["", f"The plain loop ran at {s['plain_over_cleanrl']:.2f}× CleanRL's `dqn_atari.py` (medians of "
                          f"the rows above; CleanRL before each plain run and once after the last)."]
        lines.append("")
    if not saved:
        doc = _bench(root, "refactor-before-after.json")
        rows = [r for r in doc["rows"]
                if r["benchmark"].startswith("benchmarks/throughput.py") and r["tree"] == "after"]
        rounds = sorted({r["round"] for r in rows})
        lines += [f"No `data/bench/throughput*.json` is recorded yet (`python benchmarks/throughput.py --save "
                  f"data/bench/throughput-cpu.json` writes one). The CPU runs recorded in "
                  f"`data/bench/refactor-before-after.json` ({doc['date']}, {doc['machine']}), "
                  f"`python {rows[0]['benchmark']}`, the refactored code (its `after` rows):", "",
                  "| round | plain (1 env) steps/s | fast (8 envs) steps/s | fast / plain | load average |",
                  "|---:|---:|---:|---:|---:|"]
        for k in rounds:
            by = {r["path"]: r for r in rows if r["round"] == k}
            lines.append(f"| {k} | {by['plain']['steps_per_s']:,.1f} | {by['fast']['steps_per_s']:,.1f} | "
                         f"{by['fast']['steps_per_s'] / by['plain']['steps_per_s']:.2f}× | "
                         f"{by['plain']['load_avg_1min']:.2f} |")
    return "\n".join(lines).rstrip()


def ray_scaling_body(root: Path = ROOT) -> str:
    doc = _bench(root, "ray_scaling.json")
    s = doc["settings"]
    lines = [f"Timed side by side in one run of `OMP_NUM_THREADS=1 python {doc['command']}` "
             f"({_machine(doc['environment'])}; best of {s['rounds']} interleaved rounds, every learner on 1 torch "
             "thread):", "",
             "| layout | env steps/s ingested | learner updates/s | vs single process (steps, updates) |",
             "|---|---:|---:|---:|"]
    for r in doc["rows"]:
        name = ("single process (`train`, 1 update per 4 steps)" if r["layout"].startswith("train")
                else f"Ray, {r['workers']} worker{'s' if r['workers'] > 1 else ''} + learner")
        lines.append(f"| {name} | {r['env_steps_per_s']:,.0f} | {r['updates_per_s']:.1f} | "
                     f"{r['steps_vs_train']:.2f}×, {r['updates_vs_train']:.2f}× |")
    ray = sorted((r for r in doc["rows"] if r["layout"] == "ray"), key=lambda r: r["workers"])
    for a, b in zip(ray, ray[1:]):
        steps = b["env_steps_per_s"] / a["env_steps_per_s"] - 1
        upd = 1 - b["updates_per_s"] / a["updates_per_s"]
        lines += ["", (f"Going from {a['workers']} to {b['workers']} workers changed env steps/s by {steps:+.0%} and "
                       f"{'cost' if upd > 0 else 'gave'} the learner {abs(upd):.0%} of its updates/s.")]
    return "\n".join(lines)


def update_stats_body(root: Path = ROOT) -> str:
    """The diagnostics' A/B (``data/bench/update-stats-ab.jsonl``, one row per run of
    ``benchmarks/ab/ab_update_stats.py``): updates/s before and after, per run."""
    runs = _bench_rows(root, "update-stats-ab.jsonl")
    lines = ["| run | machine | before, updates/s | after, updates/s | after vs before |", "|---|---|---:|---:|---:|"]
    for i, r in enumerate(runs, 1):
        lines.append(f"| {i}: {r['rounds']} rounds of {r['seconds']:g} s, a read every {r['read_every']} updates | "
                     f"{_machine(r['environment'])} | {r['before_updates_per_s']:.1f} | {r['after_updates_per_s']:.1f}"
                     f" | {r['after_updates_per_s'] / r['before_updates_per_s'] - 1:+.1%} |")
    return "\n".join(lines)


def train_loop_body(root: Path = ROOT) -> str:
    """The training loop's A/B (``data/bench/train-loop-ab.jsonl``, one row per run of
    ``benchmarks/ab/ab_train_loop.py``): agent steps/s from the first update on, before and after, per run."""
    runs = _bench_rows(root, "train-loop-ab.jsonl")
    lines = ["| run | machine | before | after | steps/s before (rounds) | steps/s after (rounds) "
             "| after / before: best, median |", "|---|---|---|---|---|---|---:|"]
    for i, r in enumerate(runs, 1):
        rounds = {side: ", ".join(f"{x:.1f}" for x in r[f"rounds_{side}"]) for side in ("before", "after")}
        after = r["after_commit"] + (" + uncommitted changes" if r["after_uncommitted_changes"] else "")
        order = r.get("order", "before first in every round")
        lines.append(f"| {i}: {r['rounds']} rounds of {r['steps']:,} steps ({order}) | "
                     f"{_machine(r['environment'])} | "
                     f"{r['before_commit']} | {after} | {r['before_steps_per_s']:.1f} ({rounds['before']}) | "
                     f"{r['after_steps_per_s']:.1f} ({rounds['after']}) | {r['after_over_before']:.3f}, "
                     f"{statistics.median(r['rounds_after']) / statistics.median(r['rounds_before']):.3f} |")
    return "\n".join(lines)


def hot_checks_body(root: Path = ROOT) -> str:
    """The hot paths' checks A/B (``data/bench/hot-checks-ab.jsonl``, one row per run of
    ``benchmarks/ab/ab_hot_checks.py``): µs per call with and without the checks, and their share of a step."""
    runs = _bench_rows(root, "hot-checks-ab.jsonl")
    paths = ("act", "add_batch", "sample", "update_priorities")
    lines = ["| run | machine | " + " | ".join(f"`{p}`: µs with / without (checks)" for p in paths)
             + " | checks per step | step (train) | share of a step |", "|---|---|" + "---:|" * (len(paths) + 3)]
    for i, r in enumerate(runs, 1):
        cells = [f"{1e6 / r[f'{p}_per_s_with']:.1f} / {1e6 / r[f'{p}_per_s_without']:.1f} ({r[f'{p}_check_us']:+.1f})"
                 for p in paths]
        lines.append(f"| {i}: {r['rounds']} rounds, {r['seconds']:g} s per path, train_every {r['train_every']} | "
                     f"{_machine(r['environment'])} | " + " | ".join(cells) + f" | {r['checks_us_per_step']:.1f} µs | "
                     f"{r['step_us']:,.0f} µs | {r['checks_percent_of_step']:.2f}% |")
    return "\n".join(lines)


def update_capture_body(root: Path = ROOT) -> str:
    """Updates/s of the update launched several ways, and the host's planning time per update, from each
    ``data/bench/update-capture*.json`` (``benchmarks/update_capture.py --save``)."""
    lines = []
    for path, doc in _bench_files(root, "update-capture*.json"):
        s = doc["settings"]
        lines += [f"`{path.relative_to(root)}` ({_machine(doc['environment'])}; {s['gpu']}, torch "
                  f"{s['torch_version']}, {doc['rows'][0]['updates']:,} timed updates per variant, a "
                  f"{s['capacity']:,}-frame memory):", "",
                  "| variant | updates/s | × eager | wall s (compile and capture included) |", "|---|---:|---:|---:|"]
        eager = next(r["updates_per_s"] for r in doc["rows"] if r["variant"] == "eager")
        for r in doc["rows"]:
            if "updates_per_s" in r:
                lines.append(f"| {r['variant']} | {r['updates_per_s']:,.0f} | {r['updates_per_s'] / eager:.2f}× | "
                             f"{r['wall_s']:.1f} |")
            else:
                lines.append(f"| {r['variant']} | failed: {r['error']} | | |")
        plan = next(r["plan_us_per_update"] for r in doc["rows"] if "plan_us_per_update" in r)
        lines += ["", f"Planning one update on the host (`DeviceLearner.plan`): {plan:,.0f} µs.", ""]
    return "\n".join(lines).rstrip() or "Not recorded yet."


def plan_body(root: Path = ROOT) -> str:
    """The host's µs per update to plan the fast path's updates, per-update vs vectorised, from each
    ``data/bench/plan*.json`` (``benchmarks/plan.py --save``)."""
    lines = []
    for path, doc in _bench_files(root, "plan*.json"):
        s = doc["settings"]
        lines += [f"`{path.relative_to(root)}`: `python {doc['command']}` ({_machine(doc['environment'])}; device "
                  f"{s['device']}, a {s['capacity']:,}-frame memory in {s['streams']} streams, batch 32, "
                  f"{s['torch_threads']} torch thread{'s' if s['torch_threads'] > 1 else ''}; budget "
                  f"{s['budget_us']:.0f} µs):", "",
                  "| updates planned at once (k) | per-update, µs/update | vectorised, µs/update | speed-up | "
                  "within budget |", "|---:|---:|---:|---:|---|"]
        by_k: dict[int, dict] = {}
        for r in doc["rows"]:
            by_k.setdefault(r["k"], {})[r["variant"]] = r
        for k, rows in sorted(by_k.items()):
            old, new = rows["per-update"], rows["vectorised"]
            lines.append(f"| {k} | {old['plan_us_per_update']:,.0f} | {new['plan_us_per_update']:,.0f} | "
                         f"{new['speedup_over_per_update']:.1f}× | {'yes' if new['within_budget'] else 'no'} |")
        lines.append("")
    return "\n".join(lines).rstrip() or "Not recorded yet: `python benchmarks/plan.py --save data/bench/plan-cpu.json`."


def capstone_loop_body(root: Path = ROOT) -> str:
    """Agent steps/s of notebook 07c's worked loop beside ``train()``, per round (``data/bench/capstone-loop.json``,
    written by ``benchmarks/capstone_loop.py --save``)."""
    path = root / "data" / "bench" / "capstone-loop.json"
    if not path.is_file():
        return "Not recorded yet: `python benchmarks/capstone_loop.py --save data/bench/capstone-loop.json`."
    doc = json.loads(path.read_text(encoding="utf-8"))
    s = doc["settings"]
    lines = [f"`python {doc['command']}` ({_machine(doc['environment'])}; the {s['preset']} problem, learning from "
             f"step {s['warmup']:,} to {s['warmup'] + s['window']:,}, a {s['buffer_size']:,}-frame replay, "
             f"{s['torch_threads']} torch threads):", "",
             "| round | `train()`, agent steps/s | 07c's loop, agent steps/s | loop / train |", "|---:|---:|---:|---:|"]
    by = {(r["round"], r["which"]): r["steps_per_s"] for r in doc["rows"]}
    for k, ratio in enumerate(s["ratio_loop_over_train"], 1):
        lines.append(f"| {k} | {by[k, 'train']:,.1f} | {by[k, 'loop']:,.1f} | {ratio:.3f} |")
    return "\n".join(lines)
