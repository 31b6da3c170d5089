"""dqn_course.distributed joining a real Ray cluster: two nodes started with ``ray start`` on this machine.

A head node (1 CPU) and a second node (2 CPUs) joined to it, each a ``ray start --block`` process of the
tests' own, with its own folder under one ``OwnedTempDir``: actors land on both raylets, and objects cross
between their object stores. The driver runs as a user runs it, ``python -m dqn_course.distributed
--address ...`` from a folder without the package, so the actors get the code through ``py_modules``.
The cluster uses token authentication with a token made up here (in the environment, nothing written to
~/.ray). At the end exactly the processes these tests started are stopped, and the folder removed.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from dqn_course.cleanup import OwnedTempDir

pytestmark = pytest.mark.slow

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAD_CPUS, NODE_CPUS = 1, 2  # 3 CPUs: the learner and 2 workers fit, a third worker does not
ROLES = ("ray::Learner", "ray::RolloutWorker", "ray::ReplayServer", "ray::ParameterServer", "ray::Evaluator")
SMALL = ["--total-steps", "300", "--buffer-size", "1000", "--chunk", "25", "--learning-starts", "100",
         "--batch-size", "16", "--updates-per-call", "5", "--max-episode-steps", "60"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _name(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.Error:
        return ""


def _title(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""


class LoopbackCluster:
    """A head and one more node on 127.0.0.1, in a short folder of their own (Ray's sockets need short paths)."""

    def __init__(self):
        self.folder = OwnedTempDir("dqnrc-", dir="/tmp" if os.path.isdir("/tmp") else None)
        self.root = self.folder.name
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH")}
        self.env.update(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32),
                        OMP_NUM_THREADS="1")
        self.starters: list[subprocess.Popen] = []
        self.seen: dict[int, psutil.Process] = {}  # every process of this cluster met so far, by pid

    def _start_node(self, name: str, args: list[str]) -> None:
        log = os.path.join(self.root, f"{name}.log")
        cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", "--node-ip-address=127.0.0.1",
               f"--temp-dir={os.path.join(self.root, name)}", "--disable-usage-stats", *args]
        with open(log, "w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=self.root,
                                    start_new_session=True)  # a Ctrl-C at the terminal reaches them through stop()
        self.starters.append(proc)
        deadline = time.monotonic() + 240  # a hang guard: a node starts in 5-30 s
        while time.monotonic() < deadline:
            with open(log) as f:
                if "Ray runtime started" in f.read():
                    self.processes()
                    return
            if proc.poll() is not None:
                break
            time.sleep(0.5)
        with open(log) as f:
            raise RuntimeError(f"ray start ({name}) did not come up; its output:\n{f.read()[-3000:]}")

    def start(self) -> LoopbackCluster:
        self._start_node("head", ["--head", f"--port={self.port}", f"--num-cpus={HEAD_CPUS}",
                                  "--include-dashboard=false", "--object-store-memory=200000000"])
        self._start_node("node", [f"--address={self.address}", f"--num-cpus={NODE_CPUS}",
                                  "--object-store-memory=200000000"])
        return self

    def processes(self) -> list[psutil.Process]:
        """The cluster's live processes: the ``ray start`` processes, their descendants (GCS, raylets, Ray's
        workers and agents), and any process whose command line names this cluster's folder. Remembered."""
        found = []
        for starter in self.starters:
            try:
                p = psutil.Process(starter.pid)
                found += [p, *p.children(recursive=True)]
            except psutil.Error:
                pass
        for p in psutil.process_iter():
            if self.root in _title(p):
                found.append(p)
        for p in found:
            self.seen.setdefault(p.pid, p)
        return [p for p in found if _alive(p)]

    def role_processes(self) -> list[str]:
        """The run's actors still alive on the cluster (Ray names an actor's process ``ray::<Class>...``)."""
        return [t for t in map(_title, self.processes()) if t.startswith(ROLES)]

    def driver(self, *args: str, timeout: float = 600, **popen) -> subprocess.CompletedProcess | subprocess.Popen:
        """``python -m dqn_course.distributed --address ... ARGS`` from the cluster's folder (not the repository)."""
        env = dict(self.env, PYTHONPATH=os.pathsep.join(filter(None, [REPO, self.env.get("PYTHONPATH")])))
        cmd = [sys.executable, "-m", "dqn_course.distributed", "--address", self.address, *args]
        if popen:
            return subprocess.Popen(cmd, env=env, cwd=self.root, text=True, **popen)
        return subprocess.run(cmd, env=env, cwd=self.root, text=True, capture_output=True, timeout=timeout)

    def python(self, code: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        env = dict(self.env, PYTHONPATH=os.pathsep.join(filter(None, [REPO, self.env.get("PYTHONPATH")])))
        return subprocess.run([sys.executable, "-c", code, self.address, *args], env=env, cwd=self.root, text=True,
                              capture_output=True, timeout=timeout)

    def stop(self) -> None:
        """SIGTERM to each ``ray start`` (the node, then the head: each ends what it started), then SIGKILL, by
        pid, to whatever of this cluster is still there; then remove the folder."""
        self.processes()
        for starter in reversed(self.starters):
            if starter.poll() is None:
                starter.send_signal(signal.SIGTERM)
                try:
                    starter.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    starter.kill()
                    starter.wait(timeout=10)
        self.processes()
        _, alive = psutil.wait_procs([p for p in self.seen.values() if _alive(p)], timeout=20)
        for p in alive:
            p.kill()
        psutil.wait_procs(alive, timeout=10)
        self.folder.cleanup()

    def leftovers(self) -> list[str]:
        left = [f"pid {p.pid} ({_title(p)[:80]})" for p in self.seen.values() if _alive(p)]
        left += [f"pid {p.pid} ({_title(p)[:80]})" for p in psutil.process_iter()
                 if self.root in _title(p) and _alive(p) and p.pid not in self.seen]
        return left + ([self.root] if os.path.exists(self.root) else [])


@pytest.fixture(scope="module")
def cluster():
    c = LoopbackCluster()
    try:
        yield c.start()
    finally:
        c.stop()
        assert not c.leftovers(), f"the test cluster left behind: {c.leftovers()}"


def _summary(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_run_that_cannot_fit_fails_at_once_saying_what_to_change(cluster):
    out = cluster.driver("--workers", "3", *SMALL, "--json", timeout=300)  # needs 4 CPUs, the cluster has 3
    assert out.returncode == 2 and out.stdout == "", out.stderr[-3000:]
    error = out.stderr.strip().splitlines()[-1]
    assert error.startswith("error: this run needs 4 actors of 1 CPU at once") and "Traceback" not in out.stderr
    assert "the cluster has 3 CPUs" in error and "room for 3" in error
    assert "--workers 2" in error and "--cpus-per-actor 0.5" in error and "--num-cpus=1" in error
    assert "not started" not in out.stderr  # refused before any actor was made, not after waiting for one
    out = cluster.driver("--workers", "1", "--device", "cuda", *SMALL, timeout=300)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert "needs 1 CPU + 1 GPU on one node" in out.stderr and "--device cpu" in out.stderr


@pytest.fixture(scope="module")
def long_run(cluster):
    """A run that holds the learner's and one worker's CPUs (2 of 3) until it is stopped."""
    proc = cluster.driver("--workers", "1", "--total-steps", "1000000000", "--buffer-size", "1000", "--chunk", "25",
                          "--learning-starts", "100", "--batch-size", "16", "--eval-episodes", "0",
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300  # hang guard
    while not any(t.startswith("ray::RolloutWorker") and "__init__" not in t for t in cluster.role_processes()):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the long run's worker never started collecting"
        time.sleep(0.5)
    yield proc
    if proc.poll() is None:
        proc.terminate()
    proc.communicate(timeout=120)


def test_an_actor_that_waits_for_resources_is_reported_then_given_up_on(cluster, long_run):
    """1 CPU is free and this run needs 2: it fits the cluster, so it starts and waits, loudly, then gives up."""
    out = cluster.driver("--workers", "1", *SMALL, "--pending-report-seconds", "2", "--start-timeout-seconds", "12",
                         timeout=300)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    lines = out.stderr.strip().splitlines()
    assert any("the run needs 2 CPUs and other jobs hold the cluster's now (1 of 3 free)" in line for line in lines)
    reports = [line for line in lines if "not started after" in line and line.endswith(", still waiting")]
    assert reports and "not running yet" in reports[-1], out.stderr[-3000:]
    assert "waiting for resources no node has free: 1 request for 1 CPU" in reports[-1], out.stderr[-3000:]
    assert lines[-1].startswith("error: ") and "Gave up after start_timeout_seconds=12" in lines[-1]
    assert long_run.poll() is None  # the other run went on


def test_sigterm_ends_the_runs_actors_and_leaves_the_cluster_up(cluster, long_run):
    long_run.send_signal(signal.SIGTERM)
    _, stderr = long_run.communicate(timeout=120)
    assert long_run.returncode != 0 and "Traceback" not in stderr, stderr[-3000:]
    deadline = time.monotonic() + 60  # ray.kill returns at once; the processes go a moment later
    while cluster.role_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert cluster.role_processes() == []
    assert all(s.poll() is None for s in cluster.starters)  # both nodes still up (the next test uses them)
    assert {"gcs_server", "raylet"} <= {_name(p) for p in cluster.processes()}


def test_a_run_that_fits_finishes_on_both_nodes_with_the_shipped_code(cluster):
    """2 workers and the learner take all 3 CPUs; the evaluator then takes a finished worker's place."""
    summary = _summary(cluster.driver("--workers", "2", *SMALL, "--eval-episodes", "1", "--eval-max-steps", "60",
                                      "--json"))
    assert summary["steps"] >= 300 and summary["dead_workers"] == [] and summary["events"] == []
    assert summary["replay"]["received"] == summary["steps_per_worker"] and min(summary["steps_per_worker"]) > 0
    assert summary["replay"]["stored"] == summary["steps"] - 2  # each stream holds back its newest transition
    assert summary["updates"] > 0 and len(summary["eval"]["returns"]) == 1
    assert summary["cluster"] == {"nodes": 2, "CPU": 3.0, "GPU": 0.0}
    placement = summary["placement"]
    busy = [placement["learner"], *placement["workers"]]  # 3 CPUs' worth: the head alone has 1
    assert len({p["node"] for p in busy}) == 2 and summary["nodes_used"] == 2
    for p in [*busy, placement["replay"], placement["params"], placement["evaluator"]]:
        assert os.path.commonpath([cluster.root, p["package"]]) == cluster.root, p  # unpacked from py_modules
        assert "runtime_resources" in p["package"] and p["package"] != os.path.join(REPO, "dqn_course")


ACROSS = textwrap.dedent("""
    import json, sys
    import numpy as np, ray, torch
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On
    from dqn_course.agent import DQNAgent
    from dqn_course.distributed import (DistConfig, ParameterServer, RaySession, ReplayServer, RolloutWorker,
                                        weights_to_numpy)

    cfg = DistConfig(num_workers=1, buffer_size=600, chunk=20, learning_starts=60, batch_size=8,
                     max_episode_steps=25, seed=5)
    with RaySession(address=sys.argv[1]):
        head, other = sorted((n for n in ray.nodes() if n["Alive"]), key=lambda n: n["Resources"]["CPU"])
        here = lambda n: On(n["NodeID"], soft=False)
        replay = ray.remote(ReplayServer).options(name="x-replay", num_cpus=0, scheduling_strategy=here(head)).remote(
            cfg.buffer_size, 1, cfg.seed)
        ps = ray.remote(ParameterServer).options(name="x-ps", num_cpus=0, scheduling_strategy=here(head)).remote()
        ray.get(ps.push.remote(0, weights_to_numpy(DQNAgent(4, seed=cfg.seed).q)))
        worker = ray.remote(RolloutWorker).options(num_cpus=0, scheduling_strategy=here(other)).remote(
            0, cfg, "x-ps", "x-replay")
        for _ in range(3):
            ray.get(worker.collect.remote(20))
        replica = RolloutWorker(0, cfg, "x-ps")  # the same worker, seeded alike, in this process: what it sent
        sent = [t for _ in range(3) for t in replica.rollout(20).transitions()][:-1]  # the replay holds back the last
        got = ray.get(replay.stream_transitions.remote(0))
        same = (np.array_equal(got.states, np.stack([t[0] for t in sent]))
                and np.array_equal(got.next_states, np.stack([t[3] for t in sent]))
                and np.array_equal(got.actions, [t[1] for t in sent])
                and np.array_equal(got.rewards, np.array([t[2] for t in sent], np.float32))
                and np.array_equal(got.dones, np.array([t[4] for t in sent], np.float32)))
        print(json.dumps({"same": bool(same), "transitions": len(sent), "resets": sum(t[5] for t in sent),
                          "replay_node": ray.get(replay.where.remote())["node"],
                          "worker_node": ray.get(worker.where.remote())["node"],
                          "nodes": [head["NodeID"], other["NodeID"]]}))
""")


def test_transitions_cross_from_one_raylet_to_the_other_intact(cluster):
    """A worker on the second node sends chunks to a replay actor on the head: byte for byte what it played."""
    out = cluster.python(ACROSS)
    result = _summary(out)
    assert result["replay_node"] == result["nodes"][0] and result["worker_node"] == result["nodes"][1]
    assert result["transitions"] == 59 and result["resets"] >= 2 and result["same"], result


def test_stopping_the_cluster_leaves_no_process_or_folder(cluster):
    """Runs last: the fixture's teardown stops the cluster again (a no-op) and checks the same."""
    assert cluster.processes() and os.path.isdir(cluster.root)
    cluster.stop()
    assert cluster.leftovers() == []
