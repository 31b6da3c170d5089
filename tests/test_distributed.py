"""dqn_course.distributed on local Ray with tiny sizes: chunks, the replay actor, weights, a killed worker, cleanup.

One Ray session serves the whole module (starting Ray costs several seconds); the last test closes it and
checks that no Ray process and no temporary folder is left behind (the fixture checks again at teardown).
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import ray
import torch

from dqn_course.agent import DQNAgent
from dqn_course.distributed import (Chunk, ClusterTooSmallError, DistConfig, Learner, ParameterServer, RaySession,
                                    ReplayServer, RolloutWorker, check_cluster_fits, main, parse_command, run,
                                    weights_to_numpy, worker_epsilons)
from dqn_course.envs import make_breakout
from dqn_course.lab.scaling import add_ratios, best_rounds, format_table, verdict, worker_counts

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = DistConfig(num_workers=1, total_steps=200, buffer_size=600, chunk=20, learning_starts=60, batch_size=8,
                  push_every=3, updates_per_call=3, prefetch=2, max_episode_steps=25, eval_episodes=0, seed=3)


def _ray_tmp_entries() -> set[str]:
    return {n for n in os.listdir(tempfile.gettempdir()) if "ray" in n.lower()}


@pytest.fixture(scope="module")
def session():
    before = _ray_tmp_entries()
    s = RaySession(num_cpus=6, object_store_mb=256)
    s.tmp_before = before
    yield s
    s.close()
    assert not s.leftovers(), f"Ray left behind: {s.leftovers()}"
    assert _ray_tmp_entries() - before == set()


def play(n: int, seed: int = 0, max_episode_steps: int = 12) -> list[tuple]:
    """(state, action, reward, next_state, done, episode_end) of random play with short episodes."""
    env = make_breakout(seed=seed, max_episode_steps=max_episode_steps)
    state, _ = env.reset()
    out = []
    for _ in range(n):
        action = int(env.action_space.sample())
        next_state, reward, terminated, truncated, info = env.step(action)
        end = terminated or truncated
        out.append((state, action, float(np.sign(reward)), next_state, terminated or info["life_lost"], end))
        state = env.reset()[0] if end else next_state
    env.close()
    return out


def assert_same_transitions(batch, transitions) -> None:
    """A batch from the replay (in order) holds exactly these transitions."""
    assert len(batch.actions) == len(transitions)
    np.testing.assert_array_equal(batch.states, np.stack([t[0] for t in transitions]))
    np.testing.assert_array_equal(batch.next_states, np.stack([t[3] for t in transitions]))
    np.testing.assert_array_equal(batch.actions, [t[1] for t in transitions])
    np.testing.assert_array_equal(batch.rewards, np.array([t[2] for t in transitions], np.float32))
    np.testing.assert_array_equal(batch.dones, np.array([t[4] for t in transitions], np.float32))


# -- without Ray -----------------------------------------------------------------------------------------


def test_worker_epsilons_follow_apex():
    eps = worker_epsilons(8)
    assert eps[0] == pytest.approx(0.4) and eps[-1] == pytest.approx(0.4**8)
    assert all(a > b for a, b in zip(eps, eps[1:]))
    assert worker_epsilons(1) == [0.4] and worker_epsilons(3, fixed=0.05) == [0.05] * 3
    assert worker_epsilons(3, base=0.5, alpha=2.0) == pytest.approx([0.5, 0.25, 0.125])
    with pytest.raises(ValueError, match="num_workers"):
        worker_epsilons(0)


@pytest.mark.parametrize("change, message", [
    (dict(num_workers=0), "--workers must be a positive whole number, got 0"),
    (dict(chunk=2.5), r"--chunk \(DistConfig.chunk\) must be a whole number \(int\), got 2.5"),
    (dict(learning_starts=5), "--learning-starts must be at least"),
    (dict(learning_starts=200), "--learning-starts 200 is not below --total-steps 200"),
    (dict(buffer_size=20), "--buffer-size // --workers"),
    (dict(max_learning_seconds=0), "--max-learning-seconds must be > 0"),
    (dict(max_restarts=-1), "--max-restarts must be >= 0"),
    (dict(cpus_per_actor=1.5), "--cpus-per-actor must be a fraction"),
    (dict(cpus_per_actor=0), "--cpus-per-actor must be a fraction"),
    (dict(pending_report_seconds=0), "--pending-report-seconds must be > 0"),
    (dict(start_timeout_seconds=-1), "--start-timeout-seconds must be >= 0"),
    # what validate used to let through
    (dict(lr=-1), "--lr must be > 0, got -1"),
    (dict(gamma=5), "--gamma must be between 0 and 1, got 5"),
    (dict(epsilon=-0.5), "--epsilon must be between 0 and 1, got -0.5"),
    (dict(eval_epsilon=3), "--eval-epsilon must be between 0 and 1, got 3"),
    (dict(max_episode_steps=0), "--max-episode-steps must be a positive whole number, got 0"),
    (dict(double="false"), r"--double \(DistConfig.double\) must be True or False, got 'false'"),
    (dict(seed="abc"), r"--seed \(DistConfig.seed\) must be a whole number \(int\), got 'abc'"),
    (dict(lr="fast"), r"--lr \(DistConfig.lr\) must be a number, got 'fast'"),
    (dict(lr=float("nan")), "must be a finite number"),
    (dict(epsilon="x"), "must be a number"),
])
def test_config_refuses_bad_settings(change, message):
    from dqn_course import ConfigError

    with pytest.raises(ConfigError, match=message) as info:
        dataclasses.replace(TINY, **change).validate()
    assert info.traceback[-1].path.parent.name == "dqn_course", "the error comes from the package's check"


def test_config_accepts_optional_none_and_numpy_numbers():
    cfg = dataclasses.replace(TINY, epsilon=None, max_episode_steps=None, batch_size=np.int64(8), lr=np.float32(1e-3))
    cfg.validate()
    assert type(cfg.batch_size) is int and type(cfg.lr) is float  # plain numbers: the config stays JSON-able


def _nodes(*cpus: float, gpus: tuple = ()) -> list[dict]:
    return [{"name": f"n{i}", "CPU": float(c), "GPU": float(gpus[i]) if i < len(gpus) else 0.0}
            for i, c in enumerate(cpus)]


def test_fit_check_counts_the_learner_and_every_worker_per_node():
    cfg = dataclasses.replace(TINY, num_workers=2)
    # learner + 2 workers on 3 CPUs: the evaluator later takes a worker's place
    check_cluster_fits(cfg, _nodes(1, 2))
    check_cluster_fits(dataclasses.replace(cfg, cpus_per_actor=2), _nodes(2, 4))
    check_cluster_fits(dataclasses.replace(cfg, num_workers=3, cpus_per_actor=0.5), _nodes(1, 1))
    with pytest.raises(ClusterTooSmallError) as err:
        check_cluster_fits(dataclasses.replace(cfg, num_workers=3), _nodes(1, 2))
    message = str(err.value)
    assert "needs 4 actors of 1 CPU at once, 4 CPUs in all" in message and "the cluster has 3 CPUs" in message
    assert "n0: 1 CPU, n1: 2 CPU" in message and "room for 3 such actors" in message
    assert "--workers 2" in message and "--cpus-per-actor 0.5" in message and "--num-cpus=1" in message
    # 3 CPUs are enough CPUs for 4 x 0.75, but no node holds more than floor(CPUs / 0.75) of them
    with pytest.raises(ClusterTooSmallError, match=r"4 actors of 0.75 CPU at once, 3 CPUs in all .* room for 3"):
        check_cluster_fits(dataclasses.replace(cfg, num_workers=3, cpus_per_actor=0.75), _nodes(1, 2))
    with pytest.raises(ClusterTooSmallError, match="no live node"):
        check_cluster_fits(cfg, [])


def test_fit_check_puts_the_learner_on_a_gpu_node():
    cfg = dataclasses.replace(TINY, num_workers=2, device="cuda")
    check_cluster_fits(cfg, _nodes(1, 2, gpus=(1,)), learner_gpus=1)
    check_cluster_fits(cfg, _nodes(2, 1, gpus=(0, 1)), learner_gpus=1)
    with pytest.raises(ClusterTooSmallError, match=r"needs 1 CPU \+ 1 GPU on one node .*--device cpu"):
        check_cluster_fits(cfg, _nodes(4, 4), learner_gpus=1)
    with pytest.raises(ClusterTooSmallError, match="no node of the cluster has that"):  # the GPU node has no CPU
        check_cluster_fits(cfg, _nodes(0.5, 4, gpus=(1,)), learner_gpus=1)
    with pytest.raises(ClusterTooSmallError, match="--workers 1"):
        check_cluster_fits(dataclasses.replace(cfg, num_workers=3), _nodes(1, 1, gpus=(1,)), learner_gpus=1)


def test_cli_reports_bad_settings_like_argparse(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--workers", "2", "--cpus-per-actor", "1.5"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == ("error: --cpus-per-actor must be a fraction in (0, 1] or a whole number "
                                               "of CPUs (Ray's rule), got 1.5")
    assert not ray.is_initialized()  # refused before Ray was started


def test_chunk_round_trip_and_size():
    transitions = play(40)
    assert sum(t[5] for t in transitions) >= 2  # episode ends inside the chunk
    chunk = Chunk.from_transitions(0, transitions)
    again = list(chunk.transitions())
    assert len(again) == len(chunk) == 40
    for (s, a, r, s2, d, e), (s_, a_, r_, s2_, d_, e_) in zip(transitions, again):
        np.testing.assert_array_equal(s, s_)
        np.testing.assert_array_equal(s2, s2_)
        assert (a, r, d, e) == (a_, r_, d_, e_)
    stacks = sum(t[0].nbytes + t[3].nbytes for t in transitions)  # s and s' as the single-process memory gets them
    assert chunk.nbytes < stacks / 4


def test_chunk_refuses_broken_streams():
    transitions = play(6, max_episode_steps=100)
    with pytest.raises(ValueError, match="at least one"):
        Chunk.from_transitions(0, [])
    broken = [transitions[0], transitions[2]]
    with pytest.raises(ValueError, match="does not start from"):
        Chunk.from_transitions(0, broken)
    s, a, r, s2, d, e = transitions[0]
    with pytest.raises(ValueError, match="shifted by one frame"):
        Chunk.from_transitions(0, [(s, a, r, s2[::-1].copy(), d, e)])


def test_replay_server_holds_back_last_transition_and_cuts_on_restart():
    replay = ReplayServer(400, 2, seed=0)
    first = play(30, seed=1, max_episode_steps=100)  # one game, cut mid-episode after 30 steps
    restarted = play(20, seed=2, max_episode_steps=100)  # what a restarted worker sends: a new game
    assert replay.add_chunk(Chunk.from_transitions(0, first, new_episode=True)) == 30
    assert_same_transitions(replay.stream_transitions(0), first[:-1])  # the last one waits for what follows
    with pytest.raises(ValueError, match="does not continue"):  # without the restart flag: refused, not spliced
        replay.add_chunk(Chunk.from_transitions(0, restarted))
    replay = ReplayServer(400, 2, seed=0)
    replay.add_chunk(Chunk.from_transitions(0, first, new_episode=True))
    assert replay.add_chunk(Chunk.from_transitions(0, restarted, new_episode=True)) == 50
    assert_same_transitions(replay.stream_transitions(0), first + restarted[:-1])
    assert len(replay.stream_transitions(1).actions) == 0
    with pytest.raises(ValueError, match="streams 0..1"):
        replay.add_chunk(Chunk.from_transitions(5, first))


def _row(layout, workers, steps, updates):
    return {"layout": layout, "workers": workers, "env_steps_per_s": steps, "updates_per_s": updates}


def test_scaling_verdict_names_where_workers_stop_helping():
    rows = best_rounds([_row("train", 1, 100, 25), _row("ray", 1, 500, 20), _row("ray", 2, 900, 19),
                        _row("ray", 1, 400, 30), _row("ray", 2, 950, 10), _row("ray", 4, 1000, 19)])
    assert [(r["workers"], r["env_steps_per_s"], r["rounds"]) for r in rows] == [(1, 100, 1), (1, 500, 2),
                                                                                  (2, 950, 2), (4, 1000, 1)]
    add_ratios(rows)
    assert rows[1]["steps_vs_train"] == 5 and rows[1]["samples_per_step"] == pytest.approx(20 * 32 / 500)
    # held at the single process's 8 samples per step (25 x 32 / 100), 20 updates/s feed 80 of ray's 500 steps/s
    assert rows[0]["held_vs_train"] == pytest.approx(1) and rows[1]["held_steps_per_s"] == pytest.approx(80)
    assert rows[1]["held_vs_train"] == pytest.approx(0.8)
    rows[1]["env_steps_per_s"] = 60  # fewer steps than its updates could use: the steps bound it
    add_ratios(rows)
    assert rows[1]["held_steps_per_s"] == pytest.approx(60) and rows[1]["held_vs_train"] == pytest.approx(0.6)
    assert "held vs train" in format_table([{**r, "learner_threads": 1} for r in rows])
    rows[1]["env_steps_per_s"] = 500
    add_ratios(rows)
    text = verdict(rows, cores=2)  # 1 -> 2 workers: 1.90x the steps but half the updates
    assert "1 -> 2 workers: 1.90x env steps/s, 0.50x updates/s" in text
    assert "stops helping at 2 workers" in text and "costs the learner 50%" in text
    # every process that keeps a core busy is counted: the workers, the learner and the replay actor
    assert "With 2 workers, 4 processes are busy" in text and "more than the 2 cores" in text and "take turns" in text
    rows[2]["updates_per_s"] = 19  # now 1 -> 2 helps; 2 -> 4 adds only 5% steps
    text = verdict(rows, cores=8)
    assert "stops helping at 4 workers: that step changes env steps/s by +5%" in text
    assert "6 processes are busy" in text and "within the 8 cores" in text and "take turns" not in text
    assert "6 processes are busy" in verdict(rows, cores=5) and "take turns" in verdict(rows, cores=5)
    assert "Up to 2 workers" in verdict(rows[:3], cores=8) and "a core of its own" in verdict(rows[:3], cores=8)
    assert "take turns" in verdict(rows[:3], cores=3)  # 4 busy processes on 3 cores, though each step helped


def test_scaling_times_worker_counts_that_leave_each_busy_process_a_core():
    assert worker_counts(2) == [1, 2] and worker_counts(5) == [1, 2]  # 4 workers + learner + replay actor: 6
    assert worker_counts(6) == [1, 2, 4] and worker_counts(9) == [1, 2, 4] and worker_counts(10) == [1, 2, 4, 8]


# -- on local Ray ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def roles(session):
    """A replay actor with 2 streams and a parameter server holding a fresh network (version 0), found by name.

    Shared by the tests below to save process start-ups; each test uses its own stream, and a test that
    pushes weights checks versions relative to what it found.
    """
    replay = ray.remote(ReplayServer).options(name="replay-t", num_cpus=0).remote(TINY.buffer_size, 2, TINY.seed)
    ps = ray.remote(ParameterServer).options(name="ps-t", num_cpus=0).remote()
    ray.get(ps.push.remote(0, weights_to_numpy(DQNAgent(4, seed=TINY.seed).q)))
    yield replay, ps
    if ray.is_initialized():  # the last test shuts Ray down itself (and a ray call now would start a new Ray)
        for actor in (replay, ps):
            ray.kill(actor)


def test_worker_transitions_arrive_intact(roles):
    replay, _ = roles
    worker = ray.remote(RolloutWorker).options(num_cpus=1).remote(0, TINY, "ps-t", "replay-t")
    for _ in range(3):
        ray.get(worker.collect.remote(20))
    threads = torch.get_num_threads()
    try:  # the same worker, seeded alike, in this process: the transitions it should have sent
        replica = RolloutWorker(0, TINY, "ps-t")
        sent = [t for _ in range(3) for t in replica.rollout(20).transitions()]
    finally:
        torch.set_num_threads(threads)
    assert sum(t[5] for t in sent) >= 2 and sum(t[1] != 0 for t in sent) > 0  # resets and real actions crossed
    assert ray.get(replay.stats.remote())["received"][0] == 60
    assert_same_transitions(ray.get(replay.stream_transitions.remote(0)), sent[:-1])
    ray.kill(worker)


def test_learner_weights_reach_workers(roles):
    replay, ps = roles
    learner = ray.remote(Learner).options(num_cpus=1).remote(TINY, "replay-t", "ps-t")
    ray.get(replay.add_chunk.remote(Chunk.from_transitions(1, play(80, seed=4), new_episode=True)))
    threads = torch.get_num_threads()
    try:  # a worker in this process: same code path (parameter server, object store), no extra process to start
        worker = RolloutWorker(0, TINY, "ps-t")
        worker.rollout(5)
        start_version, start_digest = worker.weights_info()
        assert (start_version, ray.get(ps.latest.remote(start_version))) == (0, None)
        stats = ray.get(learner.train.remote(3))  # push_every=3: the third update pushes version 3
        assert stats["updates"] == 3 and np.isfinite(stats["loss"])
        version, digest = ray.get(learner.weights_info.remote())
        assert version == 3 and digest != start_digest
        worker.rollout(TINY.max_episode_steps)  # crosses an episode start, where a worker pulls
        assert worker.weights_info() == (3, digest)
    finally:
        torch.set_num_threads(threads)
    ray.kill(learner)


def test_killed_workers_are_restarted_or_reported(session):
    cfg = dataclasses.replace(TINY, num_workers=2, total_steps=400, buffer_size=1_000, max_restarts=1)
    kills = {}

    def chaos(progress):
        if "restart" not in kills and progress.steps >= 100:
            kills["restart"] = progress.steps
            ray.kill(progress.workers[0], no_restart=False)  # a crash: Ray restarts it
        elif "dead" not in kills and progress.steps >= 160:
            kills["dead"] = progress.steps
            ray.kill(progress.workers[1])  # gone for good: must be reported, and the run goes on

    summary = run(cfg, callback=chaos)
    assert set(kills) == {"restart", "dead"}
    events = [(e["worker"], e["event"]) for e in summary["events"]]
    assert events.count((0, "restarted")) == 1 and events.count((1, "died")) == 1 and len(events) == 2
    assert summary["dead_workers"] == [1]
    assert summary["steps"] >= cfg.total_steps and summary["steps_per_worker"][0] > kills["dead"]
    # every reported step is in the replay; a chunk stored just before its worker died may be there unreported
    for received, reported in zip(summary["replay"]["received"], summary["steps_per_worker"]):
        assert received - reported in (0, cfg.chunk)
    # the learner's pushes reached the (restarted) worker: it acts with a version newer than the initial one
    assert summary["updates"] >= cfg.push_every and summary["worker_weight_versions"][0] > 0


class _Limiter:
    """A rate limiter like notebook 10's exercise asks for: samples owed = target x inserts beyond the minimum."""

    def __init__(self, samples_per_insert, min_size, error_buffer):
        self.spi, self.min_size, self.buf = samples_per_insert, min_size, error_buffer

    def may_insert(self, inserted, sampled):
        return inserted < self.min_size or self.spi * (inserted + 1 - self.min_size) - sampled <= self.buf

    def may_sample(self, inserted, sampled):
        return inserted >= self.min_size and self.spi * (inserted - self.min_size) - sampled - 1 >= -self.buf


def test_a_rate_limiter_holds_samples_per_step(session):
    # a tolerance of 8 samples, below what one worker call (20 steps x 2 = 40 samples owed) or one learner call (3
    # batches of 8 = 24 samples) would move: the driver grants each call what the limiter allows, a transition or a
    # sample at a time, so a limiter right for single requests is not deadlocked by the size of the calls
    cfg = dataclasses.replace(TINY, num_workers=2, total_steps=400, buffer_size=1_000)
    summary = run(cfg, rate_limiter=_Limiter(2.0, cfg.learning_starts, 8))
    beyond = summary["steps"] - cfg.learning_starts
    assert summary["updates"] > 0 and summary["steps"] >= cfg.total_steps
    assert abs(summary["updates"] * cfg.batch_size - 2.0 * beyond) <= 8
    # the replay drew exactly the batches the limiter granted: none drawn ahead of a grant (prefetch)
    assert summary["replay"]["sampled"] == summary["updates"] * cfg.batch_size


class _Never(_Limiter):
    def may_sample(self, inserted, sampled):
        return False


@pytest.mark.parametrize("limiter, message", [
    (_Never(2.0, TINY.learning_starts, 48), "refuses both sides with nothing in flight.*whole batch of 8"),
    # its minimum below learning_starts: samples are owed before the learner may start, and the workers are held
    (_Limiter(2.0, TINY.learning_starts // 3, 8), "before the learner starts at learning_starts = 60"),
])
def test_a_limiter_that_refuses_both_sides_stops_the_run(session, limiter, message):
    with pytest.raises(RuntimeError, match=f"{message}.*deadlock|deadlock.*{message}"):
        run(TINY, rate_limiter=limiter)


JOIN = """
import json, sys
import ray
from dqn_course.distributed import RaySession, worker_epsilons

with RaySession(address=sys.argv[1]) as session:
    remote_epsilons = ray.remote(worker_epsilons).remote(2)  # runs in the cluster, on the shipped package
    print(json.dumps({"cpus": ray.cluster_resources()["CPU"], "epsilons": ray.get(remote_epsilons),
                      "temp_dir": session.temp_dir}))
"""


def test_session_joins_a_running_cluster_and_leaves_it_running(session, roles):
    """``address=`` (the CLI's ``--address``) connects to an existing cluster, here the tests' own local one."""
    out = subprocess.run([sys.executable, "-c", JOIN, ray.get_runtime_context().gcs_address], capture_output=True,
                         text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    joined = json.loads(out.stdout.strip().splitlines()[-1])
    assert joined == {"cpus": 6.0, "epsilons": worker_epsilons(2), "temp_dir": None}
    assert ray.get(roles[1].latest.remote())[0] >= 0  # the cluster outlived the visitor's close()


def test_cli_flags_become_the_config():
    command = parse_command(["--workers", "3", "--total-steps", "500", "--double", "true", "--epsilon", "0.1",
                             "--max-learning-seconds", "30", "--address", "10.0.0.1:6379", "--json",
                             "--cpus-per-actor", "0.5", "--pending-report-seconds", "5"])
    assert command.cfg == dataclasses.replace(DistConfig(), num_workers=3, total_steps=500, double=True,
                                              epsilon=0.1, max_learning_seconds=30.0, cpus_per_actor=0.5,
                                              pending_report_seconds=5.0)
    assert command.address == "10.0.0.1:6379" and command.json
    with pytest.raises(SystemExit):
        parse_command(["--double", "maybe"])


def test_close_leaves_no_process_or_folder(session):
    """Runs last: shutting the module's session down leaves no Ray process and nothing new in /tmp."""
    assert ray.is_initialized() and session.leftovers()  # live processes and the session folder, before
    session.close()
    assert not ray.is_initialized()
    assert session.leftovers() == []
    assert _ray_tmp_entries() - session.tmp_before == set()
