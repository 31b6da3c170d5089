"""Clean-ups that also run when the process is told to stop, and temporary folders that a killed process cannot leak.

Python runs ``finally`` blocks, ``with`` exits, ``atexit`` hooks and ``weakref.finalize`` callbacks when a
program returns, raises, or gets Ctrl-C (SIGINT raises ``KeyboardInterrupt``). SIGTERM and SIGHUP (``kill``,
``timeout``, a job scheduler, a closed terminal) end it at once by default, running none of them.
``exit_on_signals`` makes those two raise ``Terminated`` (a ``SystemExit``) in the main thread instead, so the
same clean-ups run and the exit status is still 128 + the signal number.

SIGKILL cannot be caught. ``OwnedTempDir`` therefore puts its owner's pid in the folder's name and keeps a lock
on a file inside it for as long as the owner lives (the kernel drops the lock when the process dies, however it
dies); each new ``OwnedTempDir`` first removes the folders of the same prefix whose owner is gone.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

import psutil

from dqn_course.contracts import check_module

try:
    import fcntl
except ImportError:  # not POSIX: a folder's owner is then told by its pid alone
    fcntl = None

EXIT_SIGNALS: tuple[int, ...] = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None))
                                      if s is not None)
LOCK_NAME = ".owner.lock"  # inside every OwnedTempDir; its owner holds an exclusive flock on it

_lock = threading.Lock()
_holders: dict[int, int] = {}  # signal number -> how many holds are active (our handler is installed while > 0)


class Terminated(SystemExit):
    """Raised in the main thread by a signal that ``exit_on_signals`` holds; exit status 128 + the signal number."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"terminated by {signal.Signals(self.signum).name}"


def _raise_terminated(signum: int, frame) -> None:
    raise Terminated(signum)


def hold_exit_signals(signals: tuple[int, ...] = EXIT_SIGNALS) -> tuple[int, ...]:
    """Make ``signals`` raise ``Terminated`` until ``release_exit_signals`` is given what this returns.

    Only in the main thread (Python runs handlers there; elsewhere this does nothing and returns ``()``),
    and only for signals whose action is the default one: an ignored signal (SIGHUP under ``nohup``) or a
    handler someone else set stays as it is. Holds nest: the first installs the handler, the last release
    puts the default action back. Returns the signals this call holds.
    """
    if threading.current_thread() is not threading.main_thread():
        return ()
    held = []
    with _lock:
        for signum in signals:
            if _holders.get(signum, 0) > 0:
                _holders[signum] += 1
            elif signal.getsignal(signum) in (signal.SIG_DFL, _raise_terminated):
                signal.signal(signum, _raise_terminated)
                _holders[signum] = 1
            else:
                continue
            held.append(signum)
    return tuple(held)


def release_exit_signals(held: tuple[int, ...]) -> None:
    """Undo one ``hold_exit_signals``: the last holder of a signal restores its default action.

    That replaces whatever handler was installed meanwhile too (``ray.init`` installs one for SIGTERM), so
    the process is left as it was before the first hold. From a thread other than the main one the count
    still drops, but the handler stays (Python cannot change it there); a later hold takes it over.
    """
    main = threading.current_thread() is threading.main_thread()
    with _lock:
        for signum in held:
            _holders[signum] -= 1
            if _holders[signum] == 0:
                del _holders[signum]
                if main:
                    signal.signal(signum, signal.SIG_DFL)


@contextlib.contextmanager
def exit_on_signals(signals: tuple[int, ...] = EXIT_SIGNALS) -> Iterator[None]:
    """Inside the block (or the decorated function), SIGTERM and SIGHUP raise ``Terminated``; see ``hold_exit_signals``.

    Each signal raises again, like Ctrl-C: a second one during the clean-ups cuts them short.
    """
    held = hold_exit_signals(signals)
    try:
        yield
    finally:
        release_exit_signals(held)


def _name_pattern(prefix: str) -> re.Pattern:
    # mkdtemp adds 8 characters from [a-z0-9_]: "<prefix><pid>-" + those, nothing else
    return re.compile(re.escape(prefix) + r"(\d+)-[a-z0-9_]{8}")


def _remove_if_abandoned(path: str) -> bool:
    """Remove ``path`` if its lock file exists and can be locked (no live process holds it); True if removed."""
    try:
        fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:  # no lock file (not made by OwnedTempDir, or its owner died before locking): keep it
        return False
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # held: the owner, or a process it forked, is alive (maybe in another pid namespace)
                return False
        shutil.rmtree(path, ignore_errors=True)
        return not os.path.lexists(path)
    finally:
        os.close(fd)


def sweep_stale(prefix: str, dir: str | os.PathLike | None = None) -> list[str]:
    """Remove the folders that ``OwnedTempDir(prefix, dir)`` made for processes that have died; returns their paths.

    A folder goes only if it belongs to this user, its owner pid is not running (a zombie counts as running)
    and the lock file inside it can be locked, so no live process still holds it. Anything else is kept.
    """
    base = Path(dir) if dir is not None else Path(tempfile.gettempdir())
    pattern = _name_pattern(prefix)
    try:
        entries = list(os.scandir(base))
    except OSError:
        return []
    removed = []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None:
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue
        pid = int(match.group(1))
        if pid == os.getpid() or psutil.pid_exists(pid):
            continue
        if _remove_if_abandoned(entry.path):
            removed.append(entry.path)
    return removed


def _remove_folder(path: str, fd: int | None, owner: int) -> None:
    """Remove the folder ``path`` and close its lock file ``fd``, in process ``owner`` only."""
    if os.getpid() != owner:  # a forked child exiting must not take its parent's folder
        return
    shutil.rmtree(path, ignore_errors=True)
    if fd is not None:
        os.close(fd)


class OwnedTempDir:
    """A new folder ``<dir>/<prefix><pid>-<8 random characters>``, removed with its contents when its owner is done.

    ``dir`` defaults to the system's temporary directory. The folder is removed by ``cleanup()``, at the end
    of a ``with`` block, when this object is garbage-collected, and at interpreter exit, but only by the
    process that made it. Used as a context manager it also holds ``exit_on_signals``, so SIGTERM and SIGHUP
    inside the block remove it too (Ctrl-C does anyway). Making one first calls ``sweep_stale(prefix, dir)``,
    which removes what killed owners left (``removed_stale`` lists it). ``__enter__`` returns the path, as
    ``tempfile.TemporaryDirectory`` does.
    """

    def __init__(self, prefix: str = "dqn-", dir: str | os.PathLike | None = None):
        if not prefix or os.sep in prefix:
            raise ValueError(f"prefix must be a non-empty file name part, got {prefix!r}")
        self.removed_stale = sweep_stale(prefix, dir)
        self.name = tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=dir)
        fd = None
        try:
            fd = os.open(os.path.join(self.name, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            _remove_folder(self.name, fd, os.getpid())
            raise
        self._finalizer = weakref.finalize(self, _remove_folder, self.name, fd, os.getpid())
        self._held: list[tuple[int, ...]] = []

    def cleanup(self) -> None:
        """Remove the folder and everything in it now; later calls do nothing."""
        self._finalizer()

    def __enter__(self) -> str:
        self._held.append(hold_exit_signals())
        return self.name

    def __exit__(self, *exc) -> None:
        try:
            self.cleanup()
        finally:
            release_exit_signals(self._held.pop())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


check_module(globals())
