"""``RaySession``: ``ray.init`` that cleans up after itself, on this machine or joining a cluster."""
from __future__ import annotations

import atexit
import logging
import os

import psutil
import ray

from dqn_course.contracts import check_module
from dqn_course.cleanup import OwnedTempDir, hold_exit_signals, release_exit_signals
from dqn_course.distributed.ray_private import init_local


class ClusterJoinError(ConnectionError):
    """``RaySession(address=...)`` could not join the cluster; the message says why and what to check."""


def _join_failure(address: str, err: BaseException) -> str:
    """Why joining ``address`` failed, in one message: Ray's innermost reason and what to check."""
    reasons, e = [], err
    while e is not None and len(reasons) < 5:
        reasons.append(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
        e = e.__cause__ or e.__context__
    text = f"cannot join the Ray cluster at {address}: {reasons[-1]}"
    if any("auth" in r.lower() for r in reasons):
        return (text + ". The cluster uses token authentication: set RAY_AUTH_MODE=token here, with the cluster's "
                "token in ~/.ray/auth_token, RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN (worker nodes need it too)")
    return text + ". Is `ray start --head` running there, and is its port reachable from this machine?"


class RaySession:
    """``ray.init`` that cleans up after itself: local by default, or joining a cluster at ``address``.

    Locally Ray starts a GCS server, a raylet, worker processes and a session folder. Here the folder is
    a fresh ``cleanup.OwnedTempDir`` (``dqn-ray-<pid>-...``), and ``close`` shuts Ray down, waits for (and
    if need be ends) exactly the processes this session started, and removes the folder, so nothing is
    left in /tmp. With ``address`` the cluster is someone else's: ``close`` only disconnects (the cluster
    stays up), and the package's code is shipped to the cluster's nodes (``py_modules``; they still need
    torch, gymnasium and ale-py); a cluster that cannot be joined raises ``ClusterJoinError`` saying why, and a
    Ray that cannot keep a local session's files in its folder ``ray_private.RayVersionError``.
    Use it as a context manager, or call ``close()``; it also closes at interpreter exit. A session made
    in the main thread holds ``cleanup.exit_on_signals`` until it closes, so SIGTERM or SIGHUP end the
    program through ``close`` too (``ray.init`` puts its own SIGTERM handler in, which raises
    ``SystemExit`` as well; ``close`` restores the default); after a SIGKILL the next local session
    removes the folder. ``object_store_mb``: a local session's object store, in MB (10⁶ bytes, the course's unit).
    """

    def __init__(self, address: str | None = None, num_cpus: int | None = None, object_store_mb: int = 512,
                 log_to_driver: bool = False):
        if ray.is_initialized():
            raise RuntimeError("Ray is already running in this process: close that session first "
                               "(session.close() or ray.shutdown())")
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        self.address, self.temp_dir, self._processes, self.closed = address, None, [], False
        self._temp: OwnedTempDir | None = None
        self._signals = hold_exit_signals()  # ray.init replaces the SIGTERM handler; close() restores it
        try:
            if address:
                import dqn_course

                try:
                    ray.init(address=address, runtime_env={"py_modules": [dqn_course]},
                             logging_level=logging.WARNING, log_to_driver=log_to_driver)
                except ConnectionError as err:
                    raise ClusterJoinError(_join_failure(address, err)) from err
            else:
                self._temp = OwnedTempDir("dqn-ray-")
                self.temp_dir = self._temp.name
                init_local(self.temp_dir, num_cpus=num_cpus or os.cpu_count(), include_dashboard=False,
                           object_store_memory=object_store_mb * 10**6, logging_level=logging.WARNING,
                           log_to_driver=log_to_driver)
        except BaseException:
            self.close()
            raise
        atexit.register(self.close)

    def _ray_processes(self) -> list[psutil.Process]:
        """This process's descendants that belong to Ray (GCS, raylet, its workers, agents)."""
        out = []
        for p in psutil.Process().children(recursive=True):
            try:
                cmd = " ".join(p.cmdline())
                if "ray::" in cmd or "/ray/" in cmd or p.name() in ("raylet", "gcs_server"):
                    out.append(p)
            except psutil.Error:
                pass
        return out

    def close(self, timeout: float = 15.0) -> None:
        """Shut Ray down; locally also wait for its processes to exit and delete the session folder."""
        atexit.unregister(self.close)
        if self.closed:
            return
        self.closed = True
        if self.temp_dir is not None:  # remember who to wait for before raylet goes (workers are its children)
            self._processes = self._ray_processes()
        try:
            if ray.is_initialized():
                ray.shutdown()
            if self._temp is None:
                return
            _, alive = psutil.wait_procs(self._processes, timeout=timeout)
            for p in alive:  # only processes of this session, by pid
                p.kill()
            psutil.wait_procs(alive, timeout=5)
            self._temp.cleanup()
        finally:
            release_exit_signals(self._signals)

    def leftovers(self) -> list[str]:
        """What this session left behind after ``close``: live processes and the session folder."""
        left = []
        for p in self._processes:
            try:
                if p.status() != psutil.STATUS_ZOMBIE:
                    left.append(f"pid {p.pid} ({p.name()})")
            except psutil.NoSuchProcess:
                pass
        if self.temp_dir is not None and os.path.exists(self.temp_dir):
            left.append(self.temp_dir)
        return left

    def __enter__(self) -> RaySession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


check_module(globals())
