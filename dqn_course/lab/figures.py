"""Figures shown in more than one place: written once by the notebook that measures them, read everywhere else.

    from dqn_course.lab import figures
    figures.record("01_naive_agent", blog_bytes_per_step=38_635)            # in notebook 01, after measuring
    b = figures.quote("01_naive_agent", "blog_bytes_per_step", by="06b_the_whole_ladder")   # in notebook 06b
    figures.context("01_naive_agent")   # "measured by notebook 01_naive_agent on 2-core AMD EPYC, 2026-11-24 10:02"

Each measuring notebook owns one file, ``data/measured/<notebook>.json``::

    {"notebook": ..., "written": ISO time, "machine": {...}, "figures": {name: number or text},
     "reads": {"<notebook>.<name>": value it quoted}}

Contract:

* ``record`` and ``quote``'s note of what was read write only in default mode. Quick mode (CI's nbval run) reads
  the committed files and writes nothing, so a test run never replaces a measurement with a quick-mode one.
* ``quote`` raises ``FigureMissing`` (a ``LookupError`` that names the notebook to run) when the file or the
  figure is not there.
* ``tests/test_figures.py`` fails when a file was not written during its notebook's recorded execution
  (``data/executions.json``) or when a value a notebook quoted differs from its source's current value: the
  copies of a figure cannot drift apart unnoticed.
"""
from __future__ import annotations

import json
import os
import platform
from datetime import datetime, timezone
from pathlib import Path

from dqn_course.contracts import check_module
from dqn_course import quick_mode

MEASURED_DIR = Path(__file__).resolve().parents[2] / "data" / "measured"


class FigureMissing(LookupError):
    """A quoted figure that its notebook has not recorded yet."""


def _dir() -> Path:
    return Path(os.environ.get("DQN_COURSE_MEASURED_DIR", MEASURED_DIR))


def path_of(notebook: str) -> Path:
    """The file that holds ``notebook``'s figures."""
    return _dir() / f"{notebook}.json"


def load(notebook: str) -> dict:
    """``notebook``'s whole file (``{}`` when it has none yet)."""
    path = path_of(notebook)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def machine() -> dict:
    """The machine a figure is measured on: CPU model, cores, RAM, torch threads, GPU (if any)."""
    import psutil
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "torch_threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def describe(m: dict) -> str:
    """``2-core AMD EPYC, 25 GB RAM`` (plus the GPU when there was one)."""
    text = f"{m['cores']}-core {m['cpu']}, {m['ram_gib'] * 2**30 / 1e9:.0f} GB RAM"
    return text + (f", {m['gpu']}" if m.get("gpu") else "")


def _write(notebook: str, doc: dict) -> None:
    path = path_of(notebook)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.update(notebook=notebook, written=datetime.now(timezone.utc).isoformat(timespec="seconds"),
               machine=machine())
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)


def record(notebook: str, **values: float | int | str) -> None:
    """Write ``values`` as ``notebook``'s figures (default mode only; quick mode writes nothing).

    Raises ``TypeError`` for a value that is not a finite number or a string (a figure is one number or one line):
    the annotation's rule, checked at the call (``dqn_course.contracts``).
    """
    if quick_mode():
        return
    doc = load(notebook)
    doc.setdefault("figures", {}).update(values)
    _write(notebook, doc)


def quote(notebook: str, name: str, *, by: str) -> float | int | str:
    """``notebook``'s recorded figure ``name``, noted (in default mode) as read by notebook ``by``."""
    figures = load(notebook).get("figures", {})
    if name not in figures:
        raise FigureMissing(f"no figure {name!r} from notebook {notebook} in {path_of(notebook)}: "
                            f"run notebooks/{notebook}.ipynb (it records it), then this cell again")
    value = figures[name]
    if not quick_mode():
        doc = load(by)
        doc.setdefault("reads", {})[f"{notebook}.{name}"] = value
        _write(by, doc)
    return value


def context(notebook: str) -> str:
    """Where and when ``notebook``'s figures were measured, for printing beside a quoted figure."""
    doc = load(notebook)
    if not doc:
        return f"notebook {notebook} has not recorded its figures yet"
    when = doc["written"][:16].replace("T", " ")
    return f"measured by notebook {notebook} on a {describe(doc['machine'])}, {when} UTC"


# --- figures recorded by a benchmark script, not by a notebook ------------------------------------------------------

BENCH_DIR = MEASURED_DIR.parent / "bench"


def bench(name: str) -> dict:
    """The committed record ``data/bench/<name>`` of a script in ``benchmarks/`` (its command, settings, machine and
    rows): a figure no notebook can measure on a learner's machine (a GPU's, say), read where it is shown.
    Raises ``ValueError`` naming the files there when ``name`` is not one of them."""
    path = BENCH_DIR / name if isinstance(name, str) else None
    if path is None or path.parent != BENCH_DIR or path.suffix != ".json" or not path.is_file():
        known = ", ".join(sorted(p.name for p in BENCH_DIR.glob("*.json")))
        raise ValueError(f"name must be a JSON file of data/bench (one of: {known}), got {name!r}")
    return json.loads(path.read_text(encoding="utf-8"))


def bench_context(name: str) -> str:
    """Which script recorded ``data/bench/<name>``, on what machine and when, for printing beside a figure from it."""
    doc = bench(name)
    env, gpu = doc.get("environment", {}), doc.get("settings", {}).get("gpu")
    where = f"a {env.get('cpu_count', '?')}-core {env.get('cpu', 'CPU')}" + (f" with one {gpu}" if gpu else "")
    when = str(env.get("date", "an unrecorded date"))[:16].replace("T", " ")
    return f"recorded by {doc.get('command', 'a benchmark').split()[0]} on {where}, {when} (data/bench/{name})"


check_module(globals())
