"""README's measured tables are written by data/make_readme.py from committed files (the notebooks' outputs,
data/bench/*.json): README must say what those files say, and the generator must cope with any notebook."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _data_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


make_readme = load_script("make_readme")


@pytest.mark.parametrize("doc", list(make_readme.DOCUMENTS))
def test_blocks_match_their_sources(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    stale = make_readme.differing_blocks(text, doc=doc)
    assert not stale, (f"{doc}'s blocks {stale} differ from the notebooks / data / dqn_course: "
                       "run `make readme` (python data/make_readme.py) and commit it")
    assert text == make_readme.render(text, doc=doc)


def test_every_block_appears_once_in_one_document():
    placed = [name for names in make_readme.DOCUMENTS.values() for name in names]
    assert sorted(placed) == sorted(make_readme.BLOCKS)
    for doc, names in make_readme.DOCUMENTS.items():
        text = (ROOT / doc).read_text(encoding="utf-8")
        for name in make_readme.BLOCKS:
            begin, end = make_readme.markers(name)
            assert text.count(begin) == (name in names) and text.count(end) == (name in names), (doc, name)
            if name in names:
                assert text.index(begin) < text.index(end), name


def test_readme_states_no_acceptance_target():
    for doc in make_readme.DOCUMENTS:
        text = (ROOT / doc).read_text(encoding="utf-8")
        for name in make_readme.DOCUMENTS[doc]:
            body = text[slice(*make_readme.block_span(text, name))]
            assert not re.search(r"\bmet\b|\btargets?:|\btargets? \(", body, re.IGNORECASE), (doc, name)


def test_curriculum_has_one_row_per_notebook():
    names = [name for name, _, _ in make_readme.readme_curriculum.curriculum_rows()]
    assert names == sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert len(names) >= 11


def _notebook(title: str, *printed: str | None) -> dict:
    """A notebook with a title cell and one code cell per ``printed`` (None: a cell that was not run)."""
    cells = [{"cell_type": "markdown", "metadata": {}, "source": [f"# {title}\n", "\n", "Some text.\n"]}]
    for text in printed:
        outputs = [] if text is None else [{"output_type": "stream", "name": "stdout", "text": text}]
        cells.append({"cell_type": "code", "metadata": {}, "source": "print(...)", "outputs": outputs,
                      "execution_count": None})
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _write(root: Path, name: str, nb: dict) -> None:
    (root / "notebooks").mkdir(exist_ok=True)
    (root / "notebooks" / f"{name}.ipynb").write_text(json.dumps(nb), encoding="utf-8")


def test_rows_from_summary_ladder_and_plain_outputs(tmp_path):
    _write(tmp_path, "00_a", _notebook("00 · Is it here?", "memory ladder | raw | 201,600 bytes | 1M: 201.6 GB\n"))
    _write(tmp_path, "01_b", _notebook("01 · Why?", "Rung 01: 7.6x faster | at 100,000\nand a second line\n",
                                       "printed later\n"))
    _write(tmp_path, "01b_c", _notebook("01b · Plain?", "first\n", "last   measured  line\n",
                                        "✓ the exercise's check\n"))
    _write(tmp_path, "02_d", _notebook("02 · Not run?", None))
    _write(tmp_path, "03_e", _notebook("03 · No rung?", "Notebook 03: 2.4x faster\n"))
    curriculum = make_readme.readme_curriculum
    rows = {name: (question, answer) for name, question, answer in curriculum.curriculum_rows(tmp_path)}
    assert list(rows) == ["00_a", "01_b", "01b_c", "02_d", "03_e"]  # found by glob, 01b between 01 and 02
    assert rows["03_e"] == ("No rung?", "2.4x faster")
    assert rows["00_a"] == ("Is it here?", "raw: 201,600 bytes, 1M: 201.6 GB")
    assert rows["01_b"] == ("Why?", r"7.6x faster \| at 100,000<br>and a second line")
    assert rows["01b_c"][1] == f"{curriculum.NO_SUMMARY}; its last printed output:<br>last measured line"
    assert rows["02_d"] == ("Not run?", curriculum.NO_SUMMARY)


def test_the_check_fails_when_a_notebook_changes(tmp_path):
    _write(tmp_path, "05_x", _notebook("05 · Fast?", "Rung 05: 7.6x faster\n"))
    readme = f"intro\n{make_readme.block('curriculum', tmp_path)}\nmore\n"
    assert readme[slice(*make_readme.block_span(readme, "curriculum"))] == make_readme.block("curriculum", tmp_path)
    _write(tmp_path, "05_x", _notebook("05 · Fast?", "Rung 05: 6.1x faster\n"))
    assert readme[slice(*make_readme.block_span(readme, "curriculum"))] != make_readme.block("curriculum", tmp_path)


def test_the_check_fails_when_a_document_is_edited_by_hand():
    doc = "benchmarks/README.md"
    text = make_readme.render((ROOT / doc).read_text(encoding="utf-8"), doc=doc)  # as the sources say now
    start, end = make_readme.block_span(text, "sampling")
    edited = text[:start] + text[start:end].replace("|", "| 1", 3) + text[end:]
    assert make_readme.differing_blocks(edited, doc=doc) == ["sampling"]
    assert make_readme.render(edited, doc=doc) == make_readme.render(text, doc=doc)


def test_the_curriculum_names_the_recorded_machine(tmp_path):
    (tmp_path / "data").mkdir()
    assert "No notebook execution is recorded" in make_readme.readme_curriculum.executions_line(tmp_path)
    record = {"machine": {"cores": 2, "cpu": "AMD EPYC", "ram_gib": 23.5, "torch_threads": 2},
              "start": "2026-11-24T10:00:00+00:00", "end": "2026-11-24T10:03:00+00:00", "others_cores": 0.02}
    (tmp_path / "data" / "executions.json").write_text(json.dumps({"executions": {"00_a": record}}))
    line = make_readme.readme_curriculum.executions_line(tmp_path)
    assert "on 2-core AMD EPYC, 25 GB RAM, 2 torch threads" in line and "2026-11-24 10:00" in line
    assert "at most 2% of a core" in line


def test_a_recorded_throughput_run_replaces_the_fallback(tmp_path):
    bench = tmp_path / "data" / "bench"
    bench.mkdir(parents=True)
    env = {"date": "2026-11-23T12:00:00", "cpu_count": 16, "cpu": "some CPU", "ram_total": 128 * 2**30,
           "load_avg_1min": 0.5}
    rows = [{"path": "plain", "num_envs": 1, "replay": "host", "steps_per_s": 400.0, "rss_mib": 900.0},
            {"path": "fast", "num_envs": 8, "replay": "cuda", "steps_per_s": 2_000.0, "rss_mib": 1_500.0,
             "ratio_over_plain": 5.0}]
    doc = {"command": "benchmarks/throughput.py --device cuda", "environment": env, "rows": rows,
           "settings": {"device": "cuda", "gpu": "a GPU", "window": 50_000, "buffer_size": 1_000_000}}
    (bench / "throughput-gpu.json").write_text(json.dumps(doc), encoding="utf-8")
    body = make_readme.readme_speed.throughput_body(tmp_path)
    assert "| fast | 8 | cuda | 2,000 | 5.00× | 1,573 |" in body and "a GPU" in body
    assert "refactor-before-after" not in body
