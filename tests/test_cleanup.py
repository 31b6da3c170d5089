"""dqn_course.cleanup: SIGTERM/SIGHUP as exceptions, pid-named temp folders, the sweep of folders left by dead owners.

The subprocess tests start a real child, wait until it reports its folder, signal it and check that the folder
(and, for the Ray session, every process the child started) is gone once it has exited.
"""
from __future__ import annotations

import ast
import os
import re
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from dqn_course.cleanup import (EXIT_SIGNALS, LOCK_NAME, OwnedTempDir, Terminated, exit_on_signals, hold_exit_signals,
                                release_exit_signals, sweep_stale)

try:
    import fcntl
except ImportError:
    fcntl = None

REPO = Path(__file__).resolve().parents[1]
HANG_GUARD = 300  # seconds: only to fail instead of hanging, never a speed expectation
PREFIX = "dqn-test-"


@pytest.fixture
def default_handlers():
    """The exit signals at their default action for the test, and whatever they were put back afterwards."""
    saved = {s: signal.getsignal(s) for s in EXIT_SIGNALS}
    for s in EXIT_SIGNALS:
        signal.signal(s, signal.SIG_DFL)
    yield
    for s, handler in saved.items():
        if handler is not None:  # None: set outside Python, cannot be put back from here
            signal.signal(s, handler)


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=HANG_GUARD)
    assert not psutil.pid_exists(proc.pid)
    return proc.pid


def fake_folder(parent: Path, pid: int, prefix: str = PREFIX, lock: bool = True) -> Path:
    """A folder named as ``OwnedTempDir`` names them, for owner ``pid``, with a lock file unless ``lock`` is False."""
    folder = parent / f"{prefix}{pid}-abcd_123"
    folder.mkdir()
    (folder / "data.bin").write_bytes(b"x" * 100)
    if lock:
        (folder / LOCK_NAME).touch()
    return folder


# -- signals -> exceptions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", EXIT_SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_an_exit_signal_raises_terminated_and_the_default_comes_back(default_handlers, signum):
    with pytest.raises(Terminated) as caught:
        with exit_on_signals():
            assert signal.getsignal(signum) not in (signal.SIG_DFL, signal.SIG_IGN)
            signal.raise_signal(signum)
    assert caught.value.signum == signum and caught.value.code == 128 + signum
    assert isinstance(caught.value, SystemExit)  # passes through `except Exception`, exits with that status
    assert signal.getsignal(signum) is signal.SIG_DFL


def test_holds_nest_and_the_last_release_restores(default_handlers):
    outer = hold_exit_signals()
    inner = hold_exit_signals()
    assert set(outer) == set(inner) == set(EXIT_SIGNALS)
    release_exit_signals(outer)  # the inner hold still counts
    with pytest.raises(Terminated):
        signal.raise_signal(signal.SIGTERM)
    release_exit_signals(inner)
    assert all(signal.getsignal(s) is signal.SIG_DFL for s in EXIT_SIGNALS)


def test_a_handler_installed_inside_the_block_is_replaced_by_the_default(default_handlers):
    """As ``ray.init`` does: the block's end puts the process back as it was before it."""
    with exit_on_signals():
        signal.signal(signal.SIGTERM, lambda *_: None)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_ignored_signals_and_other_handlers_are_left_alone(default_handlers):
    def theirs(signum, frame):
        pass

    signal.signal(signal.SIGTERM, theirs)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    with exit_on_signals():
        assert signal.getsignal(signal.SIGTERM) is theirs
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) is theirs
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


def test_nothing_changes_outside_the_main_thread(default_handlers):
    seen = []

    def worker():
        held = hold_exit_signals()
        seen.append((held, signal.getsignal(signal.SIGTERM)))
        release_exit_signals(held)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(HANG_GUARD)
    assert seen == [((), signal.SIG_DFL)]


# -- OwnedTempDir and the sweep -----------------------------------------------------------------------------


def test_the_folder_carries_the_pid_and_goes_at_the_end_of_the_block(tmp_path):
    with OwnedTempDir(PREFIX, dir=tmp_path) as name:
        folder = Path(name)
        assert folder.parent == tmp_path and folder.is_dir()
        assert re.fullmatch(rf"{PREFIX}{os.getpid()}-[a-z0-9_]{{8}}", folder.name)
        (folder / "sub").mkdir()
        (folder / "sub" / "file").write_text("x")
    assert not folder.exists()


def test_the_folder_goes_on_an_exception_and_on_sigterm(tmp_path, default_handlers):
    with pytest.raises(ValueError):
        with OwnedTempDir(PREFIX, dir=tmp_path) as name:
            raise ValueError("boom")
    assert not os.path.exists(name)
    with pytest.raises(Terminated):
        with OwnedTempDir(PREFIX, dir=tmp_path) as name:
            signal.raise_signal(signal.SIGTERM)
    assert not os.path.exists(name)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_cleanup_garbage_collection_and_repeats(tmp_path):
    tmp = OwnedTempDir(PREFIX, dir=tmp_path)
    name = tmp.name
    tmp.cleanup()
    tmp.cleanup()
    assert not os.path.exists(name)
    tmp = OwnedTempDir(PREFIX, dir=tmp_path)
    name = tmp.name
    del tmp
    assert not os.path.exists(name)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_remove_its_parents_folder(tmp_path):
    tmp = OwnedTempDir(PREFIX, dir=tmp_path)
    pid = os.fork()
    if pid == 0:  # the child: what its exit-time finalizers would do
        tmp.cleanup()
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.path.isdir(tmp.name)
    tmp.cleanup()


def test_a_folder_of_a_dead_owner_is_swept_and_live_or_unknown_ones_are_kept(tmp_path):
    gone = dead_pid()
    stale = fake_folder(tmp_path, gone)
    no_lock = fake_folder(tmp_path, gone, prefix="dqn-test-nolock-", lock=False)
    other_prefix = fake_folder(tmp_path, gone, prefix="other-")
    mine = fake_folder(tmp_path, os.getpid())  # this process is alive
    parent = fake_folder(tmp_path, os.getppid())
    made = OwnedTempDir(PREFIX, dir=tmp_path)
    assert made.removed_stale == [str(stale)] and not stale.exists()
    for kept in (mine, parent, other_prefix):
        assert kept.is_dir()
    assert sweep_stale("dqn-test-nolock-", tmp_path) == [] and no_lock.is_dir()  # no lock file: not ours to judge
    assert os.path.isdir(made.name)
    made.cleanup()


@pytest.mark.skipif(fcntl is None, reason="needs flock")
def test_a_held_lock_keeps_a_folder_whose_pid_looks_dead(tmp_path):
    """The pid may belong to another pid namespace sharing the folder: a held lock means its owner lives."""
    folder = fake_folder(tmp_path, dead_pid())
    fd = os.open(folder / LOCK_NAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert sweep_stale(PREFIX, tmp_path) == [] and folder.is_dir()
    finally:
        os.close(fd)
    assert sweep_stale(PREFIX, tmp_path) == [str(folder)] and not folder.exists()


# -- real processes, real signals ------------------------------------------------------------------------------

# A test runner in the background may pass SIGINT or SIGHUP on ignored: the children start from the defaults.
DEFAULT_SIGNALS = """
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
for s in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_DFL)
"""

MAKE_FOLDER = DEFAULT_SIGNALS + """
import sys, time
from dqn_course.cleanup import OwnedTempDir

with OwnedTempDir(sys.argv[1], dir=sys.argv[2]) as name:
    print(name, flush=True)
    while True:
        time.sleep(0.05)
"""

RAY_SESSION = DEFAULT_SIGNALS + """
import os, time
import ray
from dqn_course.distributed import RaySession

def pid():
    return os.getpid()

with RaySession(num_cpus=1, object_store_mb=128) as session:
    ray.get(ray.remote(pid).remote())  # a worker process too, not only GCS and raylet
    print(session.temp_dir, flush=True)
    while True:
        time.sleep(0.05)
"""


def start(code: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def first_line(proc: subprocess.Popen) -> str:
    """The child's first line of output; fails (and kills it) if it exits or hangs first."""
    ready, _, _ = select.select([proc.stdout], [], [], HANG_GUARD)
    line = proc.stdout.readline().strip() if ready else ""
    if not line:
        proc.kill()
        pytest.fail(f"the child printed nothing: {proc.communicate(timeout=HANG_GUARD)[1][-3000:]}")
    return line


def stop(proc: subprocess.Popen, signum: int) -> tuple[int, str]:
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=HANG_GUARD)
    return proc.returncode, err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=lambda s: signal.Signals(s).name)
def test_a_child_stopped_by_a_signal_removes_its_folder(tmp_path, signum):
    proc = start(MAKE_FOLDER, PREFIX, str(tmp_path))
    folder = Path(first_line(proc))
    assert folder.is_dir() and folder.parent == tmp_path
    returncode, err = stop(proc, signum)
    assert not folder.exists(), err
    assert list(tmp_path.iterdir()) == []
    # SIGTERM/SIGHUP: Terminated, exit status 128 + signal; SIGINT: Python re-raises it after the clean-ups
    assert returncode == (-signum if signum == signal.SIGINT else 128 + signum), err


def test_a_child_killed_with_sigkill_leaves_its_folder_to_the_next_one(tmp_path):
    proc = start(MAKE_FOLDER, PREFIX, str(tmp_path))
    folder = Path(first_line(proc))
    proc.kill()
    proc.communicate(timeout=HANG_GUARD)  # reaped: its pid is gone
    assert folder.is_dir()  # nothing can run on SIGKILL
    with OwnedTempDir(PREFIX, dir=tmp_path) as name:
        assert not folder.exists()
        assert [p.name for p in tmp_path.iterdir()] == [Path(name).name]


def test_every_benchmark_main_holds_the_exit_signals():
    for script in sorted((REPO / "benchmarks").glob("*.py")):
        tree = ast.parse(script.read_text())
        (main,) = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "main"]
        decorators = [ast.unparse(d) for d in main.decorator_list]
        assert "exit_on_signals()" in decorators, f"{script.name}: main() is not wrapped in exit_on_signals()"


@pytest.mark.slow
def test_a_ray_session_stopped_by_sigterm_ends_its_processes_and_removes_its_folder():
    pytest.importorskip("ray")
    proc = start(RAY_SESSION)
    folder = Path(first_line(proc))
    started = psutil.Process(proc.pid).children(recursive=True)
    assert folder.is_dir() and started
    assert re.fullmatch(rf"dqn-ray-{proc.pid}-[a-z0-9_]{{8}}", folder.name)
    returncode, err = stop(proc, signal.SIGTERM)
    assert returncode != 0  # Ray's own SIGTERM handler exits with status 15 once its session is up
    assert not folder.exists(), err
    _, alive = psutil.wait_procs(started, timeout=HANG_GUARD)
    left = []
    for p in alive:
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{p.pid} {p.name()}")
        except psutil.NoSuchProcess:
            pass
    assert left == [], err[-3000:]
