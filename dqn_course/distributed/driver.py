"""The driver: ``run`` starts the run's actors, keeps them busy until the run is done, and sums the run up.

The summary: rates over the learning window, worker restarts and deaths, returns, where each actor ran.

Ray restarts a dead worker (``max_restarts``) and re-sends the call it was running; once its restarts run out
it is reported dead and the run goes on without it. The learner runs as fast as batches arrive, not one
update per 4 steps as in ``train``: that decoupling is what the distribution buys.
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import ray
from ray.exceptions import ActorDiedError, ActorUnavailableError

from dqn_course.contracts import check_module
from dqn_course.cleanup import exit_on_signals
from dqn_course.distributed.config import DistConfig, worker_epsilons
from dqn_course.distributed.placement import (actor_status, check_cluster_fits, cluster_nodes, cluster_state,
                                              learner_gpus, report, wait_started)
from dqn_course.distributed.roles import Evaluator, Learner, ParameterServer, ReplayServer, RolloutWorker
from dqn_course.distributed.session import RaySession


@runtime_checkable
class _RateLimiting(Protocol):
    """What ``run`` asks of a rate limiter (notebook 10's exercise): yes or no, on the counts so far, to one more
    transition stored (``may_insert``) and to one more transition drawn for a batch (``may_sample``)."""

    def may_insert(self, inserted: int, sampled: int) -> bool: ...

    def may_sample(self, inserted: int, sampled: int) -> bool: ...


@dataclass
class Progress:
    """What the driver knows after each event; ``run``'s callback gets it (e.g. to kill a worker in a test)."""

    steps: int = 0
    updates: int = 0
    elapsed: float = 0.0
    workers: list = dataclasses.field(default_factory=list)  # actor handles, index = worker id
    alive: set = dataclasses.field(default_factory=set)


def run(cfg: DistConfig, address: str | None = None, callback: Callable[[Progress], None] | None = None,
        rate_limiter: _RateLimiting | None = None) -> dict:
    """Train with ``cfg`` on Ray; returns a summary (rates over the learning window, worker events, returns).

    Uses the Ray session this process already has (a notebook's, a test's; ``address`` is then not used)
    or starts one: local (with the CPUs the run needs, at least this machine's) unless ``address`` names
    a cluster to join. Before creating any actor it checks that the run fits the cluster
    (``placement.check_cluster_fits``: ``ClusterTooSmallError`` otherwise); actors slow to start are reported
    on stderr (``placement.wait_started``). The run's actors are ended however it ends, Ctrl-C, SIGTERM and
    SIGHUP included (``cleanup.exit_on_signals``); a session started here is closed (a joined cluster stays up).

    ``rate_limiter``, when given, holds samples per step at its target (notebook 10's exercise): an object with
    ``may_insert(inserted, sampled)`` and ``may_sample(inserted, sampled)``. Before each worker call the driver asks
    it about each transition of the call in turn and sends the worker for those it grants (up to ``cfg.chunk``);
    before each learner call it asks about each sample and sends the learner for the whole batches it grants (up
    to ``cfg.updates_per_call``), drawn from the replay only then (``Learner.train``'s ``draw_ahead``). A side
    granted nothing waits (``_Gate``); with no limiter, workers and learner run free. A limiter that refuses both
    sides while nothing is in flight stops the run with ``RuntimeError`` (a deadlock).
    """
    cfg.validate()
    with exit_on_signals():
        session = None
        if not ray.is_initialized():
            cpus = max(os.cpu_count() or 1, math.ceil(cfg.actors_at_once() * cfg.cpus_per_actor))
            session = RaySession(address, num_cpus=cpus)
        actors: list = []
        try:
            t_start = time.perf_counter()
            started = _start_actors(cfg, actors)
            tally = _event_loop(cfg, started, callback, t_start, rate_limiter)
            return _summarise(cfg, started, tally, t_start, actors)
        finally:
            for actor in actors:
                ray.kill(actor)
            if session is not None:
                session.close()


# -- set-up ------------------------------------------------------------------------------------------------


@dataclass
class _Started:
    """The run's actors, all started, and what the summary reports about where they run."""

    replay: Any
    ps: Any
    ps_name: str
    learner: Any
    workers: list
    requests: dict[str, tuple[Any, dict]]  # name -> (handle, resources it asked for)
    where: dict[str, dict]  # name -> its where(): node, IP, pid, package folder
    nodes: list[dict]
    gpus: int


def _start_actors(cfg: DistConfig, actors: list) -> _Started:
    """Check the run fits, create its actors (appended to ``actors`` as they are made, for ``run`` to end) and
    wait until each has started and the learner has published its first weights."""
    gpus = learner_gpus(cfg)
    nodes = cluster_nodes()
    check_cluster_fits(cfg, nodes, gpus)  # before any actor exists: a run that cannot fit is refused, not left waiting
    c = cfg.cpus_per_actor
    free = ray.available_resources().get("CPU", 0)
    if free < cfg.actors_at_once() * c:
        report(f"the run needs {cfg.actors_at_once() * c:g} CPUs and other jobs hold the cluster's now ({free:g} of "
               f"{sum(n['CPU'] for n in nodes):g} free): its actors start as those free up")
    run_id = uuid.uuid4().hex[:8]  # actor names unique to this run, so runs sharing a cluster never mix
    replay_name, ps_name = f"dqn-replay-{run_id}", f"dqn-params-{run_id}"
    replay = ray.remote(ReplayServer).options(name=replay_name, num_cpus=0).remote(
        cfg.buffer_size, cfg.num_workers, cfg.seed, cfg.prefault)
    ps = ray.remote(ParameterServer).options(name=ps_name, num_cpus=0).remote()
    actors += [replay, ps]
    learner = ray.remote(Learner).options(num_cpus=c, num_gpus=gpus).remote(cfg, replay_name, ps_name)
    actors.append(learner)
    published = learner.publish.remote()  # version 0; the workers start meanwhile and wait for it
    # Ray restarts a dead worker (max_restarts) and re-sends the call it was running (max_task_retries=-1);
    # once restarts run out, calls fail with ActorDiedError and the worker is reported dead.
    worker_cls = ray.remote(RolloutWorker).options(num_cpus=c, max_restarts=cfg.max_restarts, max_task_retries=-1)
    workers = [worker_cls.remote(i, cfg, ps_name, replay_name) for i in range(cfg.num_workers)]
    actors += workers
    requests = {"replay": (replay, {}), "parameter server": (ps, {}),
                "learner": (learner, {"CPU": c, "GPU": gpus}), **{f"worker {i}": (w, {"CPU": c})
                                                                   for i, w in enumerate(workers)}}
    where = wait_started(requests, cfg)
    ray.get(published)  # a learner that cannot start (no GPU, bad config) fails the run here
    return _Started(replay, ps, ps_name, learner, workers, requests, where, nodes, gpus)


# -- the event loop ----------------------------------------------------------------------------------------


@dataclass
class _Tally:
    """What the event loop counted: steps and updates (``progress``), per-worker figures, events, returns."""

    progress: Progress
    per_worker: list[int]
    versions: list[int]  # the weights version each worker last acted with
    incarnation: list  # each worker's Ray worker id: a new one means Ray restarted it
    events: list[dict] = dataclasses.field(default_factory=list)
    returns: list[float] = dataclasses.field(default_factory=list)
    window: tuple[float, int, int] | None = None  # (time, steps, updates) at the learner's first result
    last_update: tuple[float, int] = (0.0, 0)  # (time, updates) of the newest learner result
    t_end: float = 0.0

    def done(self, cfg: DistConfig) -> bool:
        """The run has its steps, or has learned for ``cfg.max_learning_seconds``."""
        if self.progress.steps >= cfg.total_steps:
            return True
        return (cfg.max_learning_seconds is not None and self.window is not None
                and time.perf_counter() - self.window[0] >= cfg.max_learning_seconds)

    def learner_result(self, stats: dict, now: float) -> None:
        """Count a learner call's updates; its first result opens the learning window."""
        self.progress.updates = stats["updates"]
        self.last_update = (now, stats["updates"])
        if self.window is None:
            self.window = (now, self.progress.steps, stats["updates"])

    def worker_result(self, i: int, stats: dict) -> None:
        """Count worker ``i``'s chunk (steps, returns, weights version) and note a restart."""
        # a restart shows as a new process (or, before its first reply, as a restarted one)
        if stats["incarnation"] != self.incarnation[i] and (self.incarnation[i] is not None or stats["restarted"]):
            self.events.append({"worker": i, "event": "restarted", "at_step": self.progress.steps})
        self.incarnation[i], self.versions[i] = stats["incarnation"], stats["version"]
        self.progress.steps += stats["steps"]
        self.per_worker[i] += stats["steps"]
        self.returns += stats["returns"]

    def worker_died(self, i: int, err: ActorDiedError) -> None:
        """Report worker ``i`` dead; raises ``RuntimeError`` when no worker is left."""
        self.progress.alive.discard(i)
        self.events.append({"worker": i, "event": "died", "at_step": self.progress.steps, "error": str(err)[:200]})
        if not self.progress.alive:
            raise RuntimeError(f"all {len(self.per_worker)} rollout workers died: {self.events}") from err


@dataclass
class _Gate:
    """Asks a rate limiter (or nobody) how much of a worker call or a learner call may start now.

    It asks one transition, or one sample, at a time, as the limiter expects, and stops at the first refusal.
    Counts are the completed ones, and the calls in flight on the side that asks: a worker call is judged as if
    every chunk in flight were stored and the learner call in flight had sampled nothing yet, a learner call the
    other way round, so neither side goes on a count the other has not reached. With nothing in flight the counts
    are exact.
    """

    limiter: _RateLimiting | None
    cfg: DistConfig

    def steps(self, tally: _Tally, steps_in_flight: int) -> int:
        """The transitions, 0 to ``cfg.chunk``, the next worker call may play and store."""
        if self.limiter is None:
            return self.cfg.chunk
        inserted, sampled = tally.progress.steps + steps_in_flight, tally.progress.updates * self.cfg.batch_size
        granted = 0
        while granted < self.cfg.chunk and self.limiter.may_insert(inserted + granted, sampled):
            granted += 1
        return granted

    def updates(self, tally: _Tally) -> int:
        """The updates, 0 to ``cfg.updates_per_call``, the next learner call may make: whole batches, each of
        whose samples the limiter grants."""
        if self.limiter is None:
            return self.cfg.updates_per_call
        inserted, sampled = tally.progress.steps, tally.progress.updates * self.cfg.batch_size
        granted, most = 0, self.cfg.updates_per_call * self.cfg.batch_size
        while granted < most and self.limiter.may_sample(inserted, sampled + granted):
            granted += 1
        return granted // self.cfg.batch_size


def _event_loop(cfg: DistConfig, started: _Started, callback: Callable[[Progress], None] | None,
                t_start: float, rate_limiter: _RateLimiting | None = None) -> _Tally:
    """Keep every worker collecting and the learner training until the run is done, each call as large as
    ``rate_limiter`` lets it be (``_Gate``); then wait for the calls in flight. After each result ``callback`` gets
    the progress; a silence of ``cfg.pending_report_seconds`` is reported on stderr with where each awaited actor
    stands. Raises ``RuntimeError`` when the limiter holds back both sides with nothing in flight."""
    n, workers, learner = cfg.num_workers, started.workers, started.learner
    tally = _Tally(Progress(workers=workers, alive=set(range(n))), [0] * n, [-1] * n, [None] * n)
    gate = _Gate(rate_limiter, cfg)
    pending: dict = {}  # worker call -> (worker, its steps)
    idle = set(range(n))  # live workers with no call in flight
    learner_ref = None
    last_result = time.monotonic()
    while True:
        if not tally.done(cfg):
            for i in sorted(idle & tally.progress.alive):
                steps = gate.steps(tally, sum(k for _, k in pending.values()))
                if steps == 0:
                    break
                pending[workers[i].collect.remote(steps)] = (i, steps)
                idle.discard(i)
            if learner_ref is None and tally.progress.steps >= cfg.learning_starts:
                updates = gate.updates(tally)
                if updates > 0:
                    learner_ref = learner.train.remote(updates, draw_ahead=rate_limiter is None)
        if not pending and learner_ref is None:
            if tally.done(cfg):
                break
            raise _deadlock(cfg, tally)
        waiting = list(pending) + ([learner_ref] if learner_ref is not None else [])
        ready, _ = ray.wait(waiting, num_returns=1, timeout=cfg.pending_report_seconds)
        if not ready:  # nothing for a while: say who we wait for and how they stand, then keep waiting
            names = [f"worker {i}" for i, _ in sorted(pending.values())] + (["learner"] if learner_ref else [])
            unavailable: list[str] = []
            report(f"no result for {time.monotonic() - last_result:.0f} s from "
                   + "; ".join(f"{name} ({actor_status(started.requests[name][0], unavailable)})" for name in names)
                   + f" ({cluster_state(unavailable)}), still waiting")
            continue
        [ref] = ready
        last_result = time.monotonic()
        now = time.perf_counter()
        if ref == learner_ref:
            tally.learner_result(ray.get(ref), now)
            learner_ref = None
        else:
            i, steps = pending.pop(ref)
            try:
                stats = ray.get(ref)
            except ActorUnavailableError:  # unreachable for a moment (restarting, network): ask again
                pending[workers[i].collect.remote(steps)] = (i, steps)
                continue
            except ActorDiedError as err:  # killed for good or out of restarts: report it, go on without it
                tally.worker_died(i, err)
                continue
            tally.worker_result(i, stats)
            idle.add(i)
        tally.progress.elapsed = now - t_start
        if callback is not None:
            callback(tally.progress)
    tally.t_end = time.perf_counter()
    return tally


def _deadlock(cfg: DistConfig, tally: _Tally) -> RuntimeError:
    """The error for a rate limiter that grants neither side anything while nothing is in flight."""
    steps, updates = tally.progress.steps, tally.progress.updates
    if steps < cfg.learning_starts:
        return RuntimeError(
            f"the rate limiter refuses the workers after {steps:,} transitions, before the learner starts at "
            f"learning_starts = {cfg.learning_starts:,}: nothing can move (a deadlock); a limiter must let the "
            f"workers store freely until then (its minimum size at least learning_starts)")
    return RuntimeError(
        f"the rate limiter refuses both sides with nothing in flight, after {steps:,} transitions and {updates:,} "
        f"updates: no worker may store one more transition and the learner may not draw a whole batch of "
        f"{cfg.batch_size} samples (a deadlock)")


# -- the summary -------------------------------------------------------------------------------------------


def _summarise(cfg: DistConfig, started: _Started, tally: _Tally, t_start: float, actors: list) -> dict:
    """End the workers (their CPUs go back to the cluster), let the evaluator play the final weights when
    ``cfg.eval_episodes`` asks for it (appended to ``actors``), and return the run's summary."""
    for worker in started.workers:  # done: their CPUs go back to the cluster (the evaluator takes one)
        ray.kill(worker)
    progress, where, nodes, c = tally.progress, started.where, started.nodes, cfg.cpus_per_actor
    placement = {"learner": where["learner"], "replay": where["replay"], "params": where["parameter server"],
                 "workers": [where[f"worker {i}"] for i in range(cfg.num_workers)]}
    summary = {"workers": cfg.num_workers, "steps": progress.steps, "updates": progress.updates,
               "seconds": tally.t_end - t_start, "steps_per_worker": tally.per_worker,
               "worker_weight_versions": tally.versions, "episodes": len(tally.returns),
               "last_returns": tally.returns[-10:], "events": tally.events,
               "dead_workers": sorted(set(range(cfg.num_workers)) - progress.alive),
               "epsilons": worker_epsilons(cfg.num_workers, cfg.eps_base, cfg.eps_alpha, cfg.epsilon),
               "learner_gpus": started.gpus,
               **{f"learner_{k}": v for k, v in ray.get(started.learner.describe.remote()).items()},
               "replay": ray.get(started.replay.stats.remote()), "cpus_per_actor": c,
               "cluster": {"nodes": len(nodes), "CPU": sum(n["CPU"] for n in nodes),
                           "GPU": sum(n["GPU"] for n in nodes)},
               "placement": placement}
    window, last_update, t_end = tally.window, tally.last_update, tally.t_end
    if window is not None and last_update[0] > window[0]:  # rates need a learner result after the first one
        summary["window_s"] = t_end - window[0]
        summary["ingest_steps_per_s"] = (progress.steps - window[1]) / (t_end - window[0])
        summary["updates_per_s"] = (last_update[1] - window[2]) / (last_update[0] - window[0])
    summary["weights_version"] = ray.get(started.ps.latest.remote())[0]
    if cfg.eval_episodes > 0:
        evaluator = ray.remote(Evaluator).options(num_cpus=c).remote(cfg, started.ps_name)
        actors.append(evaluator)
        summary["weights_version"] = ray.get(started.learner.publish.remote())  # evaluate the final network
        placement["evaluator"] = wait_started({"evaluator": (evaluator, {"CPU": c})}, cfg)["evaluator"]
        summary["eval"] = ray.get(evaluator.evaluate.remote(cfg.eval_episodes))
    summary["nodes_used"] = len({p["node"] for p in (placement["learner"], placement["replay"], placement["params"],
                                                      *placement["workers"], placement.get("evaluator"))
                                 if p is not None})
    return summary


check_module(globals())
