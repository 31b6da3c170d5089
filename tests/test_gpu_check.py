"""``python -m dqn_course.gpu_check``: what can be checked without a GPU. Its arguments, its refusal without CUDA
(naming what is missing), its output folder (layout, at most 7 files of at most 16 MiB), its stages' processes
within the budget, and the one-line verdict. The GPU stages themselves run where there is a GPU."""
from __future__ import annotations

import json
import sys

import pytest
import torch

from dqn_course import gpu_check
from dqn_course.gpu_check import Check, burst_result, cap_output, cuda_problem, main, parse_args


@pytest.mark.parametrize("argv, message", [
    (["out", "--budget", "30"], "between 60 and 600"),
    (["out", "--budget", "900"], "between 60 and 600"),
    (["out", "--device", "gpu0"], "not a torch device"),
])
def test_arguments_out_of_range_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_the_check_is_refused_saying_what_is_missing(tmp_path, capsys, monkeypatch):
    assert main([str(tmp_path / "out"), "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "GPU check refused" in err
    assert ("CPU-only build" in err) if torch.version.cuda is None else ("sees no GPU" in err)
    assert not (tmp_path / "out").exists()  # nothing written by a refused check


def test_each_missing_piece_is_named(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    assert "CPU-only build" in cuda_problem("cuda")
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "sees no GPU" in cuda_problem("cuda") and "CUDA_VISIBLE_DEVICES" in cuda_problem("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert "1 CUDA device(s)" in cuda_problem("cuda:1")
    assert cuda_problem("cuda:0") is None and cuda_problem("cuda") is None
    assert "not a CUDA device" in cuda_problem("cpu")


def test_the_output_folder_keeps_at_most_its_files_each_under_the_cap(tmp_path):
    names = ["summary.json", "verdict.txt", "check.log", "checkpoint.pt", "a.csv", "b.csv", "c.csv", "d.csv",
             "e.csv"]
    for i, name in enumerate(names):
        (tmp_path / name).write_bytes(b"x" * (10 + i))
    (tmp_path / "check.log").write_bytes(b"early\n" * 50 + b"the end\n")
    (tmp_path / "checkpoint.pt").write_bytes(b"\0" * 500)
    notes = cap_output(tmp_path, max_files=5, max_bytes=200, keep_first=("summary.json", "verdict.txt", "check.log"))
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 5 and {"summary.json", "verdict.txt", "check.log"} <= set(files)
    assert all(p.stat().st_size <= 200 for p in tmp_path.iterdir())
    assert (tmp_path / "check.log").read_bytes().endswith(b"the end\n")  # a log keeps its end
    assert "checkpoint.pt" not in files  # a binary over the cap cannot be cut: it goes, and the notes say so
    assert any("checkpoint.pt: removed" in n for n in notes) and any("more than 5 files" in n for n in notes)


def test_stages_run_as_processes_with_their_results_and_output_kept(tmp_path):
    check = Check(tmp_path, "cpu", budget=60)
    ok = check.run("one", [sys.executable, "-c", "print('noise'); print('{\"x\": 1}')"], 30)
    assert ok["ok"] and ok["x"] == 1 and ok["returncode"] == 0
    failed = check.run("two", [sys.executable, "-c", "import sys; print('{\"x\": 2}'); sys.exit(3)"], 30)
    assert not failed["ok"] and failed["returncode"] == 3
    silent = check.run("three", [sys.executable, "-c", "print('no json')"], 30)
    assert not silent["ok"] and "no JSON line" in silent["error"]
    slow = check.run("four", [sys.executable, "-c", "import time; time.sleep(30)"], 6)
    assert not slow["ok"] and slow["returncode"] is None and "timed out" in slow["error"]
    check.deadline = check.start  # the budget is spent: what is left is skipped, not run
    skipped = check.run("five", [sys.executable, "-c", "print('{}')"], 30)
    assert not skipped["ok"] and "no time left" in skipped["error"]
    log = (tmp_path / "check.log").read_text()
    assert "== one" in log and "noise" in log and "(stopped after" in log


def _finished(tmp_path, results: dict) -> tuple[int, dict, str]:
    check = Check(tmp_path, "cuda", budget=60)
    check.rehearsal = False
    check.results = results
    status = check.finish()
    return status, json.loads((tmp_path / "summary.json").read_text()), (tmp_path / "verdict.txt").read_text()


def test_the_verdict_says_in_one_line_what_worked_how_fast_and_against_which_goals(tmp_path):
    results = {
        "cuda": {"ok": True, "gpu": "Some GPU"},
        "self-check": {"ok": True, "cuda": {"updates_ran": "cuda graph"}},
        "plan": {"ok": True, "rows": [{"variant": "vectorised", "k": 2, "plan_us_per_update": 40.0}]},
        "throughput": {"ok": True, "fast_steps_per_s": 7000.0, "ratio_fast_over_plain": 12.0},
        "burst": {"ok": True, "steps": 500_000, "seconds_training": 80.0, "last_eval": 12.5},
    }
    status, summary, verdict = _finished(tmp_path, results)
    assert status == 0 and verdict.count("\n") == 1
    for part in ("GPU check on Some GPU: every stage ran", "updates: cuda graph", "7,000 agent steps/s",
                 "12.0x plain", "goal 6,700 steps/s: met; goal 10x: met", "40 µs/update at k=2",
                 "burst 500,000 steps in 80 s", "12.5"):
        assert part in verdict, part
    assert summary["verdict"] == verdict.strip() and summary["stages"]["burst"]["steps"] == 500_000
    assert summary["goals"]["steps_per_s"] == gpu_check.GOAL_STEPS_PER_S

    results["throughput"].update(fast_steps_per_s=2000.0, ratio_fast_over_plain=7.0)
    results["quick"] = {"ok": False, "error": "timed out"}
    status, _, verdict = _finished(tmp_path, results)
    assert status == 1 and "FAILED: quick" in verdict and "steps/s: not met; goal 10x: not met" in verdict

    results["throughput"].update(ratio_fast_over_plain=10.04)
    status, _, verdict = _finished(tmp_path, results)
    assert "goal 6,700 steps/s: not met; goal 10x: met" in verdict


def test_a_check_whose_cuda_stage_failed_exits_2(tmp_path):
    status, _, verdict = _finished(tmp_path, {"cuda": {"ok": False, "error": "no driver"}})
    assert status == 2 and "CUDA not usable" in verdict and "no driver" in verdict


def test_the_burst_reports_steps_time_and_evaluations_from_its_files(tmp_path):
    (tmp_path / "log.csv").write_text("step,episode_return\n100,1.0\n200,2.0\n")
    (tmp_path / "eval.csv").write_text("step,mean_return,std_return,episodes\n200,3.5,1.0,10\n")
    stdout = ("stopped: 3,584 steps in 83 s (43 steps/s on cuda), 16 games, replay 135 MiB; files in x\n"
              "why: time limit of 1.19 minutes reached\n")
    result = burst_result(stdout, tmp_path)
    assert result["steps"] == 3584 and result["seconds_training"] == 83.0 and result["games"] == 2
    assert result["last_eval"] == 3.5 and result["lines"][1].startswith("why:")
    resumed = burst_result("done: 3,584 steps (1,000 this session) in 21 s (48 steps/s on cuda), 16 games\n",
                           tmp_path)
    assert resumed["steps"] == 3584 and resumed["seconds_training"] == 21.0
    killed = burst_result("", tmp_path)  # no last line: the log's last step
    assert killed["steps"] == 200 and killed["seconds_training"] is None


def test_the_cuda_and_self_check_stages_run_on_the_cpu_too():
    """The stage functions a GPU runs, here on the CPU (the update runs eagerly; the self-check has no graph)."""
    assert gpu_check.stage_cuda("cpu")["matmul_ok"] is True
    result = gpu_check.stage_self_check("cpu")["cpu"]
    assert result["updates_ran"] == "eager" and result["fallback_reason"] is None
    assert set(result["diagnostics"]) == {"loss", "q_max", "grad_norm"}


def test_the_throughput_stage_reads_the_sweep_and_the_peer_and_the_verdict_quotes_them():
    rows = [{"path": "cleanrl", "num_envs": 1, "steps_per_s": 320.0},
            {"path": "plain", "num_envs": 1, "steps_per_s": 352.0, "phase_share": {"act": 0.2}},
            {"path": "fast-16", "num_envs": 16, "steps_per_s": 5000.0, "phase_share": {"act": 0.3}},
            {"path": "fast-64", "num_envs": 64, "steps_per_s": 7100.0, "phase_share": {"act": 0.4}},
            {"path": "fast-128", "num_envs": 128, "steps_per_s": 6900.0, "phase_share": {"act": 0.5}},
            {"path": "cleanrl", "num_envs": 1, "steps_per_s": 330.0},
            {"plain_over_cleanrl": 352.0 / 325.0, "device": "cuda"}]
    result = gpu_check.throughput_result("\n".join(json.dumps(r) for r in rows) + "\n")
    assert result["fast_path"] == "fast-64" and result["fast_num_envs"] == 64
    assert result["cleanrl_steps_per_s"] == [320.0, 330.0]
    assert result["plain_over_cleanrl"] == pytest.approx(352.0 / 325.0)
    assert set(result["phase_share"]) == {"plain", "fast-16", "fast-64", "fast-128"}
    check = Check.__new__(Check)
    check.device, check.rehearsal = "cuda", False
    check.results = {"cuda": {"ok": True, "gpu": "Some GPU"}, "throughput": {"ok": True, **result}}
    verdict, _ = check.verdict()
    assert "fast 7,100 agent steps/s" in verdict and "met) at 64 envs" in verdict
    assert "plain 352 agent steps/s = 1.08x CleanRL's dqn_atari.py (goal 1x: met)" in verdict
