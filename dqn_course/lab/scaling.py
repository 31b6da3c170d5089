"""Scaling out on Ray, measured: env steps/s and updates/s of the single-process loop and of ``distributed.run``.

Shared by ``benchmarks/ray_scaling.py`` and notebook 10, so both time the same things the same way:

- ``time_single_process``: ``train.train`` over a fixed number of agent steps after learning starts
  (one env, one update per 4 agent steps, acting and learning in turn in one process);
- ``time_ray``: ``distributed.run`` with N rollout workers, timed for a number of seconds after the
  learner's first update (workers and learner each as fast as they can).

"env steps/s" counts transitions that reached the replay memory, "updates/s" gradient steps.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import warnings

from dqn_course.contracts import Count, check_module
from dqn_course.cleanup import OwnedTempDir

BATCH = 32
HELPS = 1.15  # a step up in workers "helps" when it ingests at least 15% more env steps/s


# Loggers whose notices would otherwise land in a notebook's outputs: the widget check at ``import ray``
# (ipywidgets is not installed) and the note that a local cluster uses token authentication.
_NOISY_LOGGERS = ("ray.widgets.util", "ray._private.authentication.authentication_token_setup")


def quiet_ray() -> None:
    """Keep Ray's notices out of a notebook's outputs; call it before ``import ray``.

    Sets ``RAY_COLOR_PREFIX=0`` and ``NO_COLOR=1`` (the lines Ray prints for its processes come without
    ANSI colour codes), ignores tqdm's warning that ipywidgets is missing (``import ray`` imports
    ``tqdm.auto``) and raises the level of the two Ray loggers that announce optional packages and token
    authentication. Errors still print. An environment variable the user set is kept.
    """
    os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    os.environ.setdefault("NO_COLOR", "1")
    warnings.filterwarnings("ignore", message="IProgress not found")
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


def busy_processes(workers: int) -> int:
    """The processes of ``distributed.run`` that each keep a core busy: the workers, the learner and the replay
    actor, which stores every chunk and assembles every batch. The driver, which routes their calls, and the
    parameter server, asked once per episode, come on top of them, lightly."""
    return workers + 2


def worker_counts(cores: int) -> list[int]:
    """1 and 2 workers always; 4, 8, 16, ... while each busy process (``busy_processes``) has a core of its own."""
    return [1, 2] + [n for n in (4, 8, 16, 32, 64) if busy_processes(n) <= cores]


def time_single_process(warmup: int, window: Count, buffer: int) -> dict:
    """The ``train`` loop over ``window`` agent steps after ``warmup``: its env steps/s and updates/s, both counted
    over the steps the learning clock times (from the first learn on, that learn's update left out).

    ``train`` closes every run with an evaluation, left out of its rates; nobody reads it here, so it plays one
    step (the preset's ten whole games of an untrained network took longer than the timed window)."""
    import torch

    from dqn_course.train import PRESETS, train, updates_due

    with OwnedTempDir("dqn-scaling-") as out:
        cfg = dataclasses.replace(PRESETS["breakout"], total_steps=warmup + window, learning_starts=warmup,
                                  buffer_size=buffer, batch_size=BATCH, eval_every=10**9, eval_episodes=1,
                                  eval_max_steps=1, checkpoint_every=10**9, prefault=False, progress=False,
                                  out_dir=out)
        r = train(cfg)
    steps_per_s = r["learning_steps_per_s"]
    learning_s = (r["steps"] - warmup) / steps_per_s
    updates = r["updates"] - updates_due(cfg, warmup)  # the clock starts after the first learn: its update is not timed
    return {"layout": "train (single process)", "workers": 1, "env_steps_per_s": steps_per_s,
            "updates_per_s": updates / learning_s, "window_s": learning_s, "updates": updates,
            "device": r["device"], "learner_threads": torch.get_num_threads()}


def time_ray(workers: int, warmup: int, seconds: float, buffer: int) -> dict:
    """``distributed.run`` with ``workers`` rollout workers, timed for ``seconds`` once the learner runs."""
    from dqn_course.distributed import DistConfig, run  # imported here: ``quiet_ray`` must come before Ray

    cfg = DistConfig(num_workers=workers, total_steps=10**12, max_learning_seconds=seconds, learning_starts=warmup,
                     buffer_size=buffer, batch_size=BATCH, eval_episodes=0, seed=0)
    r = run(cfg)
    return {"layout": "ray", "workers": workers, "env_steps_per_s": r["ingest_steps_per_s"],
            "updates_per_s": r["updates_per_s"], "window_s": r["window_s"], "updates": r["updates"],
            "device": r["learner_device"], "learner_threads": r["learner_threads"],
            "steps_per_worker": r["steps_per_worker"], "events": r["events"]}


def best_rounds(rows: list[dict]) -> list[dict]:
    """Per layout (in first-seen order) the round that ingested the most env steps/s.

    On a shared machine other work only ever slows a round down, so the best round is the least
    disturbed one (the same rule as ``bench.sampling_rates``); each kept row says how many it beat.
    """
    best: dict[tuple, dict] = {}
    for r in rows:
        key = (r["layout"], r["workers"])
        if key not in best or r["env_steps_per_s"] > best[key]["env_steps_per_s"]:
            best[key] = r
    for key, r in best.items():
        r["rounds"] = sum((x["layout"], x["workers"]) == key for x in rows)
    return list(best.values())


def add_ratios(rows: list[dict]) -> None:
    """Each row over the single-process loop measured in this run (``rows[0]``), its replay ratio (samples per step),
    and the env steps/s it would keep at the single-process loop's samples per step (``held_steps_per_s``, over the
    loop's as ``held_vs_train``): the smaller of its env steps/s and the steps its updates/s feed at that ratio.

    The held figure assumes each side keeps its free-run speed; a rate limiter that makes one side wait can free
    cores for the other, so a held run on a busy machine may beat it. It exists so that a layout is compared with
    the single process at the same samples per step, not only at whatever ratio its free run drifted to."""
    base = rows[0]
    base_samples_per_step = base["updates_per_s"] * BATCH / base["env_steps_per_s"]
    for r in rows:
        r["steps_vs_train"] = r["env_steps_per_s"] / base["env_steps_per_s"]
        r["updates_vs_train"] = r["updates_per_s"] / base["updates_per_s"]
        r["samples_per_step"] = r["updates_per_s"] * BATCH / r["env_steps_per_s"]
        r["held_steps_per_s"] = min(r["env_steps_per_s"], r["updates_per_s"] * BATCH / base_samples_per_step)
        r["held_vs_train"] = r["held_steps_per_s"] / base["env_steps_per_s"]


def steps_up(rows: list[dict]) -> list[tuple[int, int, float, float]]:
    """Each step up in workers among the Ray rows, in order: (workers before, workers after, env steps/s after over
    before, updates/s after over before)."""
    ray_rows = [r for r in rows if r["layout"] == "ray"]
    return [(a["workers"], b["workers"], b["env_steps_per_s"] / a["env_steps_per_s"],
             b["updates_per_s"] / a["updates_per_s"]) for a, b in zip(ray_rows, ray_rows[1:])]


def stops_helping(rows: list[dict]) -> tuple[int, int, float, float] | None:
    """The first step up in workers that does not help, as ``steps_up`` gives it (workers before, workers after,
    env steps/s ratio, updates/s ratio), or None when every step timed helps. A step helps when it adds at least
    ``HELPS - 1`` (15%) env steps/s and costs the learner at most ``1 - 1 / HELPS`` (13%) of its updates/s: one
    factor read both ways, a margin over the few percent by which two timings of one layout differ."""
    for step in steps_up(rows):
        if step[2] < HELPS or step[3] < 1 / HELPS:
            return step
    return None


def verdict(rows: list[dict], cores: int) -> str:
    """Where adding workers stops helping (``stops_helping``), in words, from this run's numbers."""
    ray_rows = [r for r in rows if r["layout"] == "ray"]
    one = ray_rows[0]
    lines = [f"Ray with 1 worker: {one['steps_vs_train']:.2f}x the single-process loop's env steps/s and "
             f"{one['updates_vs_train']:.2f}x its updates/s (acting and learning no longer wait for each other)."]
    lines += [f"{a} -> {b} workers: {steps:.2f}x env steps/s, {updates:.2f}x updates/s."
              for a, b, steps, updates in steps_up(rows)]
    stop = stops_helping(rows)
    if stop is None:
        n = ray_rows[-1]["workers"]
        room = ("each has a core of its own" if busy_processes(n) <= cores
                else "they take turns on the cores, and each step still helped")
        lines.append(f"Up to {n} workers, each step added at least {HELPS - 1:.0%} env steps/s and cost the learner "
                     f"less than {1 - 1 / HELPS:.0%} of its updates/s. {_processes(n, cores)}: {room}.")
        return "\n".join(lines)
    _, n, steps, updates = stop
    what = []
    if steps < HELPS:
        what.append(f"changes env steps/s by {steps - 1:+.0%}")
    if updates < 1 / HELPS:
        what.append(f"costs the learner {1 - updates:.0%} of its updates/s")
    why = ("they take turns on the same cores" if busy_processes(n) > cores
           else "the number of cores alone does not explain the step's cost")
    lines.append(f"On these {cores} cores adding workers stops helping at {n} workers: that step {' and '.join(what)}. "
                 f"{_processes(n, cores)}: {why}.")
    return "\n".join(lines)


def _processes(workers: int, cores: int) -> str:
    """The busy processes of a layout (``busy_processes``) set against the cores, as a sentence without its end."""
    busy = busy_processes(workers)
    return (f"With {workers} worker{'s' if workers > 1 else ''}, {busy} processes are busy (the workers, the learner "
            f"and the replay actor), {'more than' if busy > cores else 'within'} the {cores} cores, and the driver "
            f"routes their calls beside them")


def format_table(rows: list[dict]) -> str:
    """The rows ``add_ratios`` completed, one line each under a header: rates, ratios to the single-process loop,
    samples per step, the held comparison and the learner's threads."""
    head = (f"{'layout':<24} {'workers':>7} {'env steps/s':>12} {'updates/s':>10} {'steps/s vs train':>17} "
            f"{'updates/s vs train':>19} {'samples/step':>13} {'held vs train':>14} {'learner threads':>16}")
    out = [head, "-" * len(head)]
    for r in rows:
        out.append(f"{r['layout']:<24} {r['workers']:>7} {r['env_steps_per_s']:>12,.0f} {r['updates_per_s']:>10,.1f} "
                   f"{r['steps_vs_train']:>16.2f}x {r['updates_vs_train']:>18.2f}x {r['samples_per_step']:>13.1f} "
                   f"{r['held_vs_train']:>13.2f}x {r['learner_threads']:>16}")
    return "\n".join(out)


check_module(globals())
