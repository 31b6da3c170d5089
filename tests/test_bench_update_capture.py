"""benchmarks/update_capture.py on the CPU at tiny sizes (no timings asserted): the rows it writes, and their README
block (``data/make_readme.py``), a failed variant included."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _data_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


def test_the_cpu_run_writes_the_eager_and_own_graph_rows_with_the_plan_time(tmp_path):
    out = tmp_path / "capture.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "update_capture.py"), "--device", "cpu", "--updates",
                    "4", "--capacity", "800", "--save", str(out)], check=True, env=env, cwd=tmp_path,
                   capture_output=True)
    doc = json.loads(out.read_text())
    rows = {r["variant"]: r for r in doc["rows"]}
    assert list(rows) == ["eager", "own-graph"]  # the CUDA-graph variants need CUDA: not tried on the CPU
    assert all(r["updates_per_s"] > 0 and "error" not in r for r in rows.values())
    assert rows["eager"]["plan_us_per_update"] > 0
    assert doc["settings"]["device"] == "cpu" and doc["settings"]["capacity"] == 800


def test_the_readme_block_lists_every_variant_and_shows_a_failed_one(tmp_path):
    make_readme = load_script("make_readme")
    bench = tmp_path / "data" / "bench"
    bench.mkdir(parents=True)
    env = {"date": "2026-11-26T14:09:25", "cpu": "Test CPU", "cpu_count": 4, "ram_total": 8 * 2**30,
           "load_avg_1min": 0.5}
    rows = [{"variant": "eager", "updates": 10, "updates_per_s": 100.0, "wall_s": 1.0, "plan_us_per_update": 250.0},
            {"variant": "own-graph", "updates": 10, "updates_per_s": 400.0, "wall_s": 0.5},
            {"variant": "cudagraphmodule", "updates": 10, "error": "RuntimeError: no capture", "wall_s": 0.1}]
    (bench / "update-capture-x.json").write_text(json.dumps(
        {"command": "benchmarks/update_capture.py", "environment": env, "rows": rows,
         "settings": {"gpu": "Test GPU", "torch_version": "2.11.0", "capacity": 800}}))
    body = make_readme.readme_speed.update_capture_body(tmp_path)
    assert "| own-graph | 400 | 4.00× |" in body
    assert "| cudagraphmodule | failed: RuntimeError: no capture |" in body
    assert "250 µs" in body
