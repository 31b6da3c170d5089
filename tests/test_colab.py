"""The Colab path, tested without Colab: the notebooks' first code cell under a fake ``google.colab``, and a run on
a stand-in Google Drive folder that stops at its time limit and resumes to the end (notebook 07b's session loop).

The first cell is turned into Python the way IPython does (``TransformerManager``) and run with a fake shell that
records its ``!`` and ``%`` lines instead of running them; the recorded commands are then checked, and the clone
command is run for real against this repository.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest
from IPython.core.inputtransformer2 import TransformerManager
from packaging.requirements import Requirement

from _data_scripts import load_script
from dqn_course.checkpoint import read_checkpoint
from dqn_course.lab import colab, playback

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
cells = load_script("make_colab_cells")
URL = cells.repository_url()


class FakeShell:
    """What ``get_ipython()`` gives the cell: ``!`` lines and line magics are recorded, not run."""

    def __init__(self):
        self.calls: list[tuple[str, str]] = []

    def system(self, command: str) -> None:
        self.calls.append(("!", command))

    def run_line_magic(self, name: str, line: str, _stack_depth: int = 1) -> None:
        self.calls.append(("%" + name, line))


def first_code_cell(path: Path) -> str:
    return "".join(cells.first_code_cell(json.loads(path.read_text(encoding="utf-8")))["source"])


def run_cell(source: str, on_colab: bool, clone_exists: bool, monkeypatch) -> tuple[FakeShell, list[str]]:
    """Run ``source`` as IPython would, with or without a fake ``google.colab``; returns the shell's record and
    the ``sys.path`` the cell left (the real one is restored afterwards)."""
    if on_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    real_isdir = os.path.isdir
    monkeypatch.setattr(os.path, "isdir", lambda p: clone_exists if p == cells.CLONE else real_isdir(p))
    monkeypatch.setattr(sys, "path", list(sys.path))
    shell = FakeShell()
    exec(TransformerManager().transform_cell(source), {"get_ipython": lambda: shell, "__name__": "__main__"})
    return shell, list(sys.path)


def test_url_is_written_in_one_place():
    """pyproject.toml holds the address; every other tracked file that names it is a generated first cell."""
    assert URL.startswith("https://github.com/")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    named = []
    for name in tracked.stdout.splitlines():
        path = ROOT / name
        if path.suffix in {".png", ".gif", ".pt", ".ckpt"} or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".ipynb":  # the notebook without its generated first code cell
            nb = json.loads(text)
            nb["cells"].remove(cells.first_code_cell(nb))
            text = json.dumps(nb)
        if URL.removeprefix("https://") in text:
            named.append(name)
    assert named == ["pyproject.toml"], f"the repository address is also written in {named}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_first_code_cell_is_the_template(path):
    expected = cells.first_cell(path.stem, URL)
    assert first_code_cell(path) == expected, f"{path.name}: run `make colab-cells` (python data/make_colab_cells.py)"
    nb = json.loads(path.read_text(encoding="utf-8"))
    before = nb["cells"][:nb["cells"].index(cells.first_code_cell(nb))]
    assert all(c["cell_type"] == "markdown" for c in before), "only the title and introduction precede it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_on_colab_the_first_cell_clones_installs_and_moves_into_the_clone(path, monkeypatch):
    shell, path_after = run_cell(first_code_cell(path), on_colab=True, clone_exists=False, monkeypatch=monkeypatch)
    (kind1, clone), (kind2, pip), (kind3, cd) = shell.calls
    assert (kind1, kind2, kind3) == ("!", "%pip", "%cd")
    assert shlex.split(clone) == ["git", "clone", "-q", "--depth", "1", URL, cells.CLONE]
    args = shlex.split(pip)
    extras = cells.EXTRAS.get(path.stem, cells.DEFAULT_EXTRAS)
    assert args == ["install", "-q", "-e", f"{cells.CLONE}[{extras}]"]
    assert not {"-U", "--upgrade", "--force-reinstall", "--ignore-installed", "-I"} & set(args)
    assert not any("torch" in a for a in args), "Colab's preinstalled torch is kept, never named"
    assert cd == f"{cells.CLONE}/notebooks"
    assert path_after[0] == cells.CLONE, "the running kernel imports the clone (the new install's .pth is unread)"


def test_run_again_on_colab_the_first_cell_skips_the_clone(monkeypatch):
    shell, _ = run_cell(first_code_cell(NOTEBOOKS[0]), on_colab=True, clone_exists=True, monkeypatch=monkeypatch)
    assert [kind for kind, _ in shell.calls] == ["%pip", "%cd"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_elsewhere_the_first_cell_does_nothing(path, monkeypatch):
    before, cwd = list(sys.path), os.getcwd()
    shell, path_after = run_cell(first_code_cell(path), on_colab=False, clone_exists=False, monkeypatch=monkeypatch)
    assert shell.calls == [] and path_after == before and os.getcwd() == cwd


def test_the_install_keeps_colabs_torch():
    """pip leaves an installed package alone when it satisfies the requirement: any torch 2.x from 2.4 on does."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    torch_req = next(Requirement(r) for r in project["dependencies"] if Requirement(r).name == "torch")
    for version in ("2.4.0", "2.5.1+cu121", "2.8.0+cu126", "2.9.0+cu128", "2.13.0"):
        assert torch_req.specifier.contains(version), f"{torch_req} would replace Colab's torch {version}"


def test_the_clone_the_cell_makes_holds_the_data_the_notebooks_read(tmp_path, monkeypatch):
    """The clone command the cell gives on Colab, run for real against this repository: the package and data/
    arrive, and the clone's package finds its recorded runs and figures from the notebooks folder the cell moves
    into."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    shell, _ = run_cell(first_code_cell(ROOT / "notebooks" / "07_train_breakout.ipynb"), on_colab=True,
                        clone_exists=False, monkeypatch=monkeypatch)
    monkeypatch.undo()
    clone = tmp_path / "content" / "dqn-course"
    command = shlex.split(shell.calls[0][1])
    command[command.index(URL)], command[-1] = f"file://{ROOT}", str(clone)  # this repository, a local folder
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=clone, capture_output=True,
                          text=True).stdout.strip() == "true"
    probe = ("from dqn_course.lab import figures, playback; print(playback.DATA_DIR); "
             "print(len(playback.recorded_runs())); print(len(list(figures.MEASURED_DIR.glob('*.json'))))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=clone / "notebooks", capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(clone)})
    assert out.returncode == 0, out.stderr
    data_dir, runs, measured = out.stdout.split()
    assert Path(data_dir) == clone / "data" and int(runs) >= 1 and int(measured) >= 1


# -- the session loop on a stand-in Drive folder ---------------------------------------------------------------

SMALL = dict(total_steps=700, eval_every=350, eval_episodes=1, eval_max_steps=50, checkpoint_every=200,
             progress=False)


def test_session_command_starts_then_resumes(tmp_path):
    run = tmp_path / "MyDrive" / "dqn-course" / "quick"
    first = colab.session_command("quick", run, 90, **SMALL)
    assert first[:3] == [sys.executable, "-m", "dqn_course.train"] and "--resume" not in first
    i = first.index("--time-limit")
    assert first[i + 1] == "90" and first[first.index("--replay-storage") + 1] == "lz4"
    assert first[first.index("--progress") + 1] == "false" and first[first.index("--total-steps") + 1] == "700"
    run.mkdir(parents=True)
    (run / "state-0000000200.ckpt").write_bytes(b"")  # a saved state (its content is checked by the run itself)
    assert colab.session_command("quick", run, 90, **SMALL)[-2:] == ["--resume", str(run)]
    assert colab.latest_step(run) == 200 and not colab.finished(run, 700) and colab.finished(run, 200)


def test_session_command_resumes_from_the_file_a_function_chooses(tmp_path):
    run = tmp_path / "runs" / "quick"
    run.mkdir(parents=True)
    (run / "state-0000000200.ckpt").write_bytes(b"")
    chosen = colab.session_command("quick", "runs/quick", 90, cwd=tmp_path,
                                   resume_from=lambda folder: folder / "state-0000000200.ckpt")
    assert chosen[-2:] == ["--resume", os.path.join("runs", "quick", "state-0000000200.ckpt")]
    assert "--resume" not in colab.session_command("quick", "runs/quick", 90, cwd=tmp_path, resume_from=lambda f: None)


def test_kill_session_kills_once_the_games_are_logged_and_reports_what_is_left(tmp_path):
    # a stand-in session: logs a game every 0.2 s and would run for a minute
    script = ("import pathlib, sys, time; out = pathlib.Path(sys.argv[2]); out.mkdir(); log = out / 'log.csv'\n"
              "log.write_text('step,episode_return\\n')\n"
              "for i in range(300):\n    time.sleep(0.2)\n"
              "    with log.open('a') as f: f.write(f'{(i + 1) * 100},0.0\\n')")
    left = colab.kill_session([sys.executable, "-c", script, "--out-dir", "run"], tmp_path, games=3)
    assert left["games"] in (3, 4) and left["last_game_step"] == 100 * left["games"]
    assert left["states"] == [] and left["seconds"] < 30


@pytest.mark.parametrize("limit, words", [(0, "time_limit must be > 0"), (-5, "time_limit must be > 0"),
                                          (float("nan"), "time_limit must be a finite number")])
def test_a_session_without_a_positive_time_limit_is_refused(tmp_path, limit, words):
    with pytest.raises(ValueError, match=words):
        colab.session_command("quick", tmp_path, limit)


def test_run_session_shows_the_output_as_it_comes_and_returns_the_exit_status(tmp_path, capsys):
    code = "import sys; print('out é'); print('err', file=sys.stderr); sys.exit(3)"
    assert colab.run_session([sys.executable, "-c", code], cwd=tmp_path) == 3
    assert capsys.readouterr().out.splitlines() == ["out é", "err"]


def test_interrupting_run_session_stops_the_run_the_clean_way(tmp_path, monkeypatch):
    """The cell is interrupted while the run works: the run gets SIGINT, its last words are still shown, and the
    interrupt goes on to the notebook."""
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGINT, lambda *a: (print('saved the training state', flush=True), sys.exit(0)))\n"
            "sys.stdout.write('working\\n'); sys.stdout.flush()\n"
            "time.sleep(60)\n")
    shown = []

    def write(text):  # the learner presses stop as the first output arrives
        shown.append(text)
        if len(shown) == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(sys.stdout, "write", write)
    with pytest.raises(KeyboardInterrupt):
        colab.run_session([sys.executable, "-c", code], cwd=tmp_path)
    assert "".join(shown) == "working\nsaved the training state\n"


@pytest.mark.slow
def test_a_run_on_a_stand_in_drive_stops_at_its_time_limit_and_resumes_to_the_end(tmp_path, capsys):
    """Session 1's time limit passes after its first step: it evaluates, saves (lz4 replay) and exits 0. Session 2,
    the same call after a "reconnect", resumes from that state and runs to the last step; the log reads as one run.
    As in notebook 07b, the run folder is given relative to the mounted Drive, where the sessions run."""
    mount = tmp_path / "drive"
    relative = Path("MyDrive") / "dqn-course" / "quick"
    run = mount / relative
    mount.mkdir()
    shown = []
    for limit in (1e-6, 60):
        command = colab.session_command("quick", relative, limit, cwd=mount, **SMALL)
        assert colab.run_session(command, cwd=mount) == 0, capsys.readouterr().out[-3000:]
        shown.append(capsys.readouterr().out)
        if len(shown) == 1:
            assert "time limit of" in shown[0] and "resume with:" in shown[0] and "--resume" not in command
            assert colab.latest_step(run) == 1 and not colab.finished(run, SMALL["total_steps"])
    assert command[-2:] == ["--resume", str(relative)]
    assert "resumed from" in shown[1] and "at step 1" in shown[1]
    assert colab.finished(run, SMALL["total_steps"])
    arrays, meta = read_checkpoint(sorted(run.glob("state-*.ckpt"))[-1])
    assert meta["config"]["replay_storage"] == "lz4" and meta["config"]["total_steps"] == 700
    log = playback.read_log(run / "log.csv")
    assert log["step"].size > 0 and (log["step"][1:] > log["step"][:-1]).all() and log["step"][-1] <= 700
    evals = [int(r.split(",")[0]) for r in (run / "eval.csv").read_text().splitlines()[1:]]
    assert evals == [1, 350, 700], "the deadline's evaluation, then the resumed run's own"
    fig = colab.plot_sessions(run, [1], "two sessions")
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend[-2:] == ["a session stopped, the next resumed", "ε"] and "one game's return" in legend
