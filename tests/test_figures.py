"""A figure shown in several places has one source: the file its notebook wrote, during its recorded execution.

``data/measured/<notebook>.json`` (``dqn_course.lab.figures``) holds what a notebook measured and what it quoted
from others. These tests fail when a quoted copy differs from its source, or when a file was not written by the
notebook execution that ``data/executions.json`` records (so the notebook's committed outputs and the file agree).
"""
from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from dqn_course.lab import figures

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "data" / "measured"
EXECUTIONS = json.loads((ROOT / "data" / "executions.json").read_text(encoding="utf-8"))["executions"]


def stale_reads(folder: Path) -> list[str]:
    """Every quoted value in ``folder``'s files that differs from its source's current value."""
    docs = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")}
    stale = []
    for reader, doc in docs.items():
        for key, value in doc.get("reads", {}).items():
            source, name = key.rsplit(".", 1)
            current = docs.get(source, {}).get("figures", {}).get(name, "<missing>")
            if current != value:
                stale.append(f"{reader} quotes {key} = {value!r}, but {source} now says {current!r}")
    return stale


def test_every_quoted_figure_equals_its_source():
    assert not stale_reads(MEASURED), "re-execute the quoting notebooks (make execute NB=...)"


@pytest.mark.parametrize("path", sorted(MEASURED.glob("*.json")), ids=lambda p: p.stem)
def test_each_file_was_written_by_its_notebooks_recorded_execution(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    record = EXECUTIONS.get(path.stem)
    assert record, f"{path.name} belongs to no executed notebook"
    written = datetime.fromisoformat(doc["written"])
    assert datetime.fromisoformat(record["start"]) <= written <= datetime.fromisoformat(record["end"]), (
        f"{path.name} was written at {doc['written']}, outside {path.stem}'s recorded execution: its figures are "
        "not the ones its committed outputs show; re-execute it with make execute")
    assert doc["figures"] or doc["reads"]


def test_a_planted_disagreement_is_caught(tmp_path):
    for p in MEASURED.glob("*.json"):
        shutil.copy(p, tmp_path)
    reader = next((p for p in tmp_path.glob("*.json") if json.loads(p.read_text()).get("reads")), None)
    assert reader is not None, "no notebook quotes another's figure"
    key = next(iter(json.loads(reader.read_text())["reads"]))
    source, name = key.rsplit(".", 1)
    doc = json.loads((tmp_path / f"{source}.json").read_text())
    value = doc["figures"][name]
    doc["figures"][name] = value + 1 if isinstance(value, int | float) else value + " (planted)"
    (tmp_path / f"{source}.json").write_text(json.dumps(doc))
    assert stale_reads(tmp_path) and key in stale_reads(tmp_path)[0]


# --- the module's contract ------------------------------------------------------------------------------------------

@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("DQN_COURSE_MEASURED_DIR", str(tmp_path))
    monkeypatch.delenv("DQN_COURSE_QUICK", raising=False)
    return tmp_path


def test_record_then_quote_notes_the_read(folder):
    figures.record("01_a", blog_bytes_per_step=38_635, label="as posted")
    assert figures.quote("01_a", "blog_bytes_per_step", by="06b_b") == 38_635
    assert json.loads((folder / "06b_b.json").read_text())["reads"] == {"01_a.blog_bytes_per_step": 38_635}
    assert "measured by notebook 01_a on a " in figures.context("01_a")
    assert stale_reads(folder) == []
    figures.record("01_a", blog_bytes_per_step=40_000)
    assert stale_reads(folder) == ["06b_b quotes 01_a.blog_bytes_per_step = 38635, but 01_a now says 40000"]


def test_quick_mode_writes_nothing(folder, monkeypatch):
    figures.record("01_a", x=1)
    monkeypatch.setenv("DQN_COURSE_QUICK", "1")
    figures.record("01_a", x=2)
    assert figures.quote("01_a", "x", by="02_b") == 1
    assert sorted(p.name for p in folder.iterdir()) == ["01_a.json"]


def test_a_missing_figure_names_the_notebook_to_run(folder):
    with pytest.raises(figures.FigureMissing, match=r"run notebooks/01_a.ipynb"):
        figures.quote("01_a", "x", by="02_b")


@pytest.mark.parametrize("bad", [True, None, [1], {"a": 1}])
def test_a_figure_is_a_number_or_a_line(folder, bad):
    with pytest.raises(TypeError, match="record: x must be a number or a string"):
        figures.record("01_a", x=bad)
