"""Every committed notebook was executed by data/execute_notebooks.py, alone, and is committed as it came out.

The manifest ``data/executions.json`` holds one record per notebook; these tests read it against the committed
notebooks, and plant each kind of disagreement in a copy to show that the check catches it.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from _data_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MAX_OTHERS_CORES = 0.15  # what other processes may have kept busy, in cores, while a notebook ran


ex = load_script("execute_notebooks")
RECORDS = ex.load_manifest()


def _nb(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_notebook_is_committed_as_its_recorded_execution_wrote_it(path):
    record = RECORDS.get(path.stem)
    assert record, f"{path.stem} has no record in data/executions.json: run `make execute NB={path.stem}`"
    assert record["cells_sha256"] == ex.cells_digest(_nb(path)), (
        f"{path.stem}'s code cells differ from what its recorded execution wrote: re-execute it with "
        f"`make execute NB={path.stem}` (never commit outputs from another run)")
    assert record["mode"].startswith("default")


def test_no_two_executions_overlap():
    assert not ex.overlaps(RECORDS), "executions that ran at the same time measured each other: re-execute one"


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_nothing_else_ran_beside_an_execution(name):
    r = RECORDS[name]
    assert r["others_cores"] <= MAX_OTHERS_CORES, (
        f"{name}: other processes kept {r['others_cores']:.2f} cores busy while it ran: re-execute it alone")
    for key in ("cpu", "cores", "ram_gib", "torch_threads"):
        assert key in r["machine"]


def test_every_record_is_a_notebook():
    assert set(RECORDS) <= {p.stem for p in NOTEBOOKS}


# --- the checks themselves catch planted disagreements ------------------------------------------------------------

def _record(start: str, end: str) -> dict:
    return {"start": start, "end": end}


def test_overlap_is_found():
    records = {"a": _record("2026-01-01T10:00:00+00:00", "2026-01-01T10:05:00+00:00"),
               "b": _record("2026-01-01T10:05:00+00:00", "2026-01-01T10:06:00+00:00"),
               "c": _record("2026-01-01T10:04:00+00:00", "2026-01-01T10:07:00+00:00")}
    assert sorted(ex.overlaps(records)) == [("a", "c"), ("c", "b")]  # in order of start
    del records["c"]
    assert ex.overlaps(records) == []


def test_a_changed_output_or_source_changes_the_digest_but_markdown_does_not():
    nb = _nb(NOTEBOOKS[0])
    digest = ex.cells_digest(nb)
    md = copy.deepcopy(nb)
    next(c for c in md["cells"] if c["cell_type"] == "markdown")["source"] += "\nmore words"
    assert ex.cells_digest(md) == digest
    out = copy.deepcopy(nb)
    cell = next(c for c in out["cells"] if c["cell_type"] == "code" and c.get("outputs"))
    cell["outputs"] = cell["outputs"] + [{"output_type": "stream", "name": "stdout", "text": "planted\n"}]
    assert ex.cells_digest(out) != digest
    src = copy.deepcopy(nb)
    next(c for c in src["cells"] if c["cell_type"] == "code")["source"] += "\n# planted"
    assert ex.cells_digest(src) != digest


def test_answer_and_solution_cells_lose_their_outputs():
    out = [{"output_type": "stream", "name": "stdout", "text": "42\n"}]
    nb = {"cells": [{"cell_type": "code", "metadata": {"tags": tags}, "source": "x", "outputs": list(out),
                     "execution_count": 3} for tags in (["answer", "nbval-ignore-output"], ["solution"], [])]}
    ex.hide_answers(nb)
    assert [c["outputs"] for c in nb["cells"]] == [[], [], out]
    assert [c["execution_count"] for c in nb["cells"]] == [None, None, 3]


def test_resolve_names_and_refuse_unknown():
    assert [p.stem for p in ex.resolve(["06b"])] == ["06b_the_whole_ladder"]
    assert ex.resolve([]) == NOTEBOOKS
    with pytest.raises(SystemExit, match="no single notebook named '99'"):
        ex.resolve(["99"])


def test_a_second_execution_is_refused_while_the_lock_is_held(tmp_path):
    lock = tmp_path / "lock"
    with ex.exclusive_lock(lock):
        with pytest.raises(SystemExit, match="another notebook execution holds"):
            with ex.exclusive_lock(lock):
                pass
    with ex.exclusive_lock(lock):  # free again once released
        pass
