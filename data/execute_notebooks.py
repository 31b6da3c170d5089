"""Execute notebooks one at a time, in default mode, on a quiet machine, and record each execution.

    python data/execute_notebooks.py            # every notebook, in course order   (make execute)
    python data/execute_notebooks.py 07 06b     # just these                        (make execute NB="07 06b")

Why: a notebook's committed timings are only worth reading if nothing else ran beside it. So this command

* refuses to start while another execution holds its lock (one lock per machine, in the temporary folder) or while
  the 1-minute load average is above ``--max-load``, and refuses the next notebook while other processes stay busy
  for about a minute;
* runs each notebook top to bottom in a fresh kernel (``nbclient``), with ``DQN_COURSE_QUICK`` unset, and writes it
  back in place with the outputs of its ``answer`` and ``solution`` cells removed (they would give answers away);
* appends to ``data/executions.json`` one record per notebook (the newest replaces the older): the machine (CPU
  model, cores, RAM, torch threads), start and end (UTC), wall time, the load average before and after, the CPU
  seconds that processes outside this execution used meanwhile, a SHA-256 of the notebook's code cells
  (sources and outputs) as written, and what each ``answer`` cell printed before it was emptied (for
  ``tests/test_predictions.py``).

``tests/test_executions.py`` fails when two recorded executions overlap in time, when a committed notebook has no
record whose hash matches it, or when a record shows other processes busy beside it.
Raises ``SystemExit`` with a message saying what to do when it refuses.
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
MANIFEST = ROOT / "data" / "executions.json"
LOCK = Path(tempfile.gettempdir()) / "dqn-course-execute.lock"
HIDDEN_OUTPUT_TAGS = ("answer", "solution")  # committed without outputs
BUSY_PROBE_SECONDS = 3.0
QUIET_TRIES = 20  # probes of BUSY_PROBE_SECONDS before a notebook is refused: about a minute


# --- what is recorded (pure functions, tested) ------------------------------------------------------------------

def cells_digest(nb: dict) -> str:
    """SHA-256 of a notebook's code cells: each one's source and outputs (execution metadata left out)."""
    cells = [("".join(c["source"]) if isinstance(c["source"], list) else c["source"], c.get("outputs", []))
             for c in nb["cells"] if c["cell_type"] == "code"]
    return hashlib.sha256(json.dumps(cells, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


def answers(nb: dict) -> dict[str, str]:
    """The text each ``answer`` cell printed, by cell index: what the learner measures after predicting, kept in the
    record (not on the page) so that a test can check that nothing above the prediction states it."""
    found = {}
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code" and "answer" in cell.get("metadata", {}).get("tags", []):
            found[str(i)] = "".join("".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
                                    for out in cell.get("outputs", []) if out.get("name") != "stderr")
    return found


def hide_answers(nb: dict) -> None:
    """Remove the outputs and execution counts of ``answer`` and ``solution`` cells, in place."""
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and set(HIDDEN_OUTPUT_TAGS) & set(cell.get("metadata", {}).get("tags", [])):
            cell["outputs"], cell["execution_count"] = [], None


def overlaps(records: dict[str, dict]) -> list[tuple[str, str]]:
    """Pairs of notebooks whose recorded executions overlap in time."""
    spans = sorted((datetime.fromisoformat(r["start"]), datetime.fromisoformat(r["end"]), name)
                   for name, r in records.items())
    return [(a[2], b[2]) for i, a in enumerate(spans) for b in spans[i + 1:] if b[0] < a[1]]


def load_manifest(path: Path = MANIFEST) -> dict[str, dict]:
    return json.loads(path.read_text(encoding="utf-8"))["executions"] if path.is_file() else {}


def save_manifest(records: dict[str, dict], path: Path = MANIFEST) -> None:
    doc = {"about": "one record per notebook: its newest execution by data/execute_notebooks.py (make execute)",
           "executions": dict(sorted(records.items()))}
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


# --- the machine and who else is busy --------------------------------------------------------------------------

def _ours() -> set[int]:
    import psutil

    me = psutil.Process()
    return {me.pid} | {p.pid for p in me.children(recursive=True)}


class OthersCPU:
    """CPU seconds used by processes outside this one and its descendants, sampled once a second.

    A process is "ours" while it descends from this one (the kernel and whatever it starts, Ray included).
    Processes that start and end between two samples are missed; the load average before and after is recorded
    beside it for that reason.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self._seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self, count: bool) -> None:
        import psutil

        ours = _ours()
        for p in psutil.process_iter(["cpu_times"]):
            t = p.info["cpu_times"]
            if t is None or p.pid in ours:
                self._seen.pop(p.pid, None)
                continue
            total = t.user + t.system
            if count:
                self.seconds += max(0.0, total - self._seen.get(p.pid, total))
            self._seen[p.pid] = total

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self._sample(count=True)

    def __enter__(self) -> OthersCPU:
        self._sample(count=False)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample(count=True)


def others_busy(seconds: float = BUSY_PROBE_SECONDS) -> float:
    """How many cores other processes kept busy over ``seconds``."""
    with OthersCPU() as others:
        time.sleep(seconds)
    return others.seconds / seconds


def wait_for_quiet(limit: float, tries: int = QUIET_TRIES) -> float:
    """Probe up to ``tries`` times until other processes keep at most ``limit`` cores busy; the last reading.

    A short burst (a shell command, a cron job) passes; work that keeps going does not.
    """
    for _ in range(tries):
        busy = others_busy()
        if busy <= limit:
            break
    return busy


def machine() -> dict:
    sys.path.insert(0, str(ROOT))
    from dqn_course.lab.figures import machine as figures_machine

    import torch

    return {**figures_machine(), "python": sys.version.split()[0], "torch": torch.__version__}


@contextmanager
def exclusive_lock(path: Path = LOCK):
    """Hold the machine's execution lock, or exit saying who holds it."""
    handle = open(path, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        raise SystemExit(f"another notebook execution holds {path} ({handle.read().strip() or 'unknown'}): "
                         "wait for it to end; two executions at once measure each other") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} since {datetime.now(timezone.utc).isoformat(timespec='seconds')}")
    handle.flush()
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


# --- executing ---------------------------------------------------------------------------------------------------

def resolve(names: list[str]) -> list[Path]:
    """Notebook paths for names like ``07``, ``06b`` or ``07_train_breakout`` (all notebooks when none)."""
    every = sorted(NOTEBOOKS.glob("*.ipynb"))
    if not names:
        return every
    chosen = []
    for name in names:
        found = [p for p in every if p.stem == name or p.stem.split("_", 1)[0] == name]
        if len(found) != 1:
            raise SystemExit(f"no single notebook named {name!r}: choose from "
                             f"{', '.join(p.stem.split('_', 1)[0] for p in every)}")
        chosen += found
    return chosen


def forget_reads(notebook: str) -> None:
    """Drop the figures ``notebook`` noted as read from other notebooks (``data/measured/<notebook>.json``'s
    ``reads``): this run notes again what it reads, and a figure it no longer reads must not stay listed as quoted
    (``tests/test_figures.py`` would hold it to its source)."""
    path = ROOT / "data" / "measured" / f"{notebook}.json"
    if not path.is_file():
        return
    doc = json.loads(path.read_text(encoding="utf-8"))
    if doc.pop("reads", None) is not None:
        path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def execute(path: Path, timeout: int) -> dict:
    """Run ``path`` in a fresh kernel in default mode, write it back, and return its record."""
    import nbformat
    from nbclient import NotebookClient

    os.environ.pop("DQN_COURSE_QUICK", None)
    forget_reads(path.stem)
    nb = nbformat.read(path, as_version=4)
    load_before = os.getloadavg()
    start = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    with OthersCPU() as others:
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    wall = time.perf_counter() - t0
    end = datetime.now(timezone.utc)
    measured = answers(nb)
    hide_answers(nb)
    nbformat.write(nb, path)
    written = json.loads(path.read_text(encoding="utf-8"))
    cores = os.cpu_count() or 1
    return {"mode": "default (DQN_COURSE_QUICK unset)", "machine": machine(),
            "start": start.isoformat(timespec="seconds"), "end": end.isoformat(timespec="seconds"),
            "wall_s": round(wall, 1), "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "others_cpu_s": round(others.seconds, 1), "others_cores": round(others.seconds / wall, 3),
            "cores": cores, "cells_sha256": cells_digest(written), "answers": measured}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("notebooks", nargs="*", help="e.g. 07 06b (default: all, in order)")
    p.add_argument("--max-load", type=float, default=1.0, help="refuse to start above this 1-minute load average")
    p.add_argument("--max-others", type=float, default=0.15,
                   help="refuse the next notebook while other processes keep more than this many cores busy")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    args = p.parse_args()
    paths = resolve(args.notebooks)
    with exclusive_lock():
        load = os.getloadavg()[0]
        if load > args.max_load:
            raise SystemExit(f"the 1-minute load average is {load:.2f} (limit {args.max_load}): something else is "
                             "running; stop it (a training run, tests, a benchmark) and try again")
        for path in paths:
            busy = wait_for_quiet(args.max_others)
            if busy > args.max_others:
                raise SystemExit(f"other processes keep {busy:.2f} cores busy (limit {args.max_others}): stop them, "
                                 f"then run this again from {path.stem}")
            print(f"{path.stem}: executing ...", flush=True)
            record = execute(path, args.timeout)
            records = load_manifest()
            records[path.stem] = record
            save_manifest(records)
            print(f"{path.stem}: {record['wall_s']:.0f} s, others used {record['others_cpu_s']:.1f} CPU s, "
                  f"load {record['load_before'][0]:.2f} -> {record['load_after'][0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
