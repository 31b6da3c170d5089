"""Figures and the README's learning summary, made from the runs recorded under data/ (nothing typed by hand).

    python data/make_figures.py                   # figure, GIF and README block from the recorded files
    python data/make_figures.py --measure-random  # first (re-)measure random play with each run's protocol
    python data/make_figures.py --check           # exit 1 if README's block differs from the recorded files

For every recorded run (``playback.recorded_runs``: data/breakout-cpu, data/breakout-gpu, ...):

* ``random.json``: uniformly random actions played with the run's own evaluation protocol
  (``records.play_evaluation(None, cfg, games)``: same game settings, seeds and step cap as its eval.csv rows),
  measured once and kept, so the comparison is with the same games the agent was scored on;
* ``data/figures/learning_curve.png``: every run's evaluations and training games against random
  play, five times random, and the published scores at their step counts (``playback.plot_learning``);
* ``data/figures/agent.gif``: the longest-trained run's policy (``checkpoint.pt``) playing one game;
* README.md, between ``<!-- learning:begin -->`` and ``<!-- learning:end -->``: each run's committed policy (and
  each of notebook 07c's loop, ``playback.capstone_runs``) as
  ``python -m dqn_course.evaluate`` measured it (``evaluation.json``, refused unless its SHA-256 is the committed
  ``checkpoint.pt``'s), then the published scores of ``data/published.json`` with their sources and protocols.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent
ROOT = DATA.parent
sys.path.insert(0, str(ROOT))

from dqn_course.lab import playback  # noqa: E402
from dqn_course.records import play_evaluation  # noqa: E402

FIGURES = DATA / "figures"
README = ROOT / "README.md"
BEGIN, END = "<!-- learning:begin -->", "<!-- learning:end -->"
RANDOM_GAMES = 100


def measure_random(run_dir: Path, games: int = RANDOM_GAMES) -> dict:
    """Random play under the run's evaluation protocol; written to ``random.json`` and returned."""
    cfg = playback.run_config(run_dir)
    returns = play_evaluation(None, cfg, games)
    result = {"protocol": "dqn_course.records.play_evaluation(agent=None): uniformly random actions, the run's "
                          f"evaluation settings (eval_max_steps={cfg.eval_max_steps}, seed={cfg.seed} + 10000, "
                          "games in the same order as each evaluation's)",
              "games": games, "mean": float(np.mean(returns)), "std": float(np.std(returns)),
              "mean_first_10": float(np.mean(returns[:10])), "returns": returns}
    (run_dir / "random.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def checked_evaluation(run_dir: Path) -> dict:
    """The run's ``evaluation.json``, refused unless it measured the very ``checkpoint.pt`` committed beside it."""
    result = playback.recorded_evaluation(run_dir)
    if result is None:
        raise SystemExit(f"data/{run_dir.name} has no evaluation.json: run python -m dqn_course.evaluate "
                         f"data/{run_dir.name} --games 30 --json > data/{run_dir.name}/evaluation.json")
    digest = hashlib.sha256((run_dir / "checkpoint.pt").read_bytes()).hexdigest()
    if result["sha256"] != digest:
        raise SystemExit(f"data/{run_dir.name}/evaluation.json measured another checkpoint.pt than the one committed "
                         "beside it: evaluate the committed file again (python -m dqn_course.evaluate ...)")
    return result


def readme_block(runs: list[Path], loop_runs: list[Path] = ()) -> str:
    """The README's learning tables: each run's committed policy as ``dqn_course.evaluate`` measured it (fresh seeds,
    random play on the same games), the library's ``train()`` runs then notebook 07c's loop's (``loop_runs``), then
    the published scores of ``data/published.json`` with their sources."""
    lines = [BEGIN, "| run | trained by | policy saved at agent step | score, fresh games (ε = 0.05) | random play, "
             "same games | ratio |", "|---|---|---|---|---|---|"]
    for run_dir in [*runs, *loop_runs]:
        e = checked_evaluation(run_dir)
        who = "notebook 07c's loop" if run_dir in loop_runs else "`train()`"
        lines.append(f"| [`data/{run_dir.name}`](data/{run_dir.name}/README.md) | {who} | {e['step']:,} | "
                     f"{e['policy']['mean']:.1f} ± {e['policy']['std']:.1f} ({e['policy']['games']} games, seed "
                     f"{e['protocol']['seed']:,}) | {e['random']['mean']:.2f} ± {e['random']['std']:.2f} | "
                     f"**{e['ratio']:.1f}×** |")
    lines += ["", "Published Breakout scores, each measured with its own protocol (not the course's: read them as "
              "ballpark):", "", "| method | agent steps | score | how it was measured | source |",
              "|---|---:|---:|---|---|"]
    for r in playback.published_scores():
        steps = f"{r['agent_steps']:,}" if r["agent_steps"] else "—"
        score = f"{r['score']:g}" + (f" ± {r['std']:g}" if r.get("std") else "")
        lines.append(f"| {r['method']} | {steps} | {score} | {r['protocol']} | [{r['source']}]({r['url']}) |")
    return "\n".join(lines + [END])


def block_span(text: str) -> tuple[int, int]:
    """Where README's learning block starts and ends, its markers included."""
    return text.index(BEGIN), text.index(END) + len(END)


def write_readme_block(block: str) -> bool:
    """Replace README's block; returns whether anything changed."""
    text = README.read_text()
    start, end = block_span(text)
    new = text[:start] + block + text[end:]
    README.write_text(new)
    return new != text


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--measure-random", action="store_true", help="re-measure random play even if recorded")
    p.add_argument("--check", action="store_true", help="only compare README's block with the recorded files")
    p.add_argument("--gif-steps", type=int, default=1_500, help="agent steps of the GIF's game at most")
    args = p.parse_args()
    runs = [r for r in playback.recorded_runs() if (r / "eval.csv").is_file() and (r / "checkpoint.pt").is_file()]
    if not runs:
        raise SystemExit("no recorded run with eval.csv and checkpoint.pt under data/")
    loop_runs = playback.capstone_runs()
    if args.check:
        text = README.read_text()
        if text[slice(*block_span(text))] != readme_block(runs, loop_runs):
            raise SystemExit("README.md's learning table differs from data/: run python data/make_figures.py")
        print("README.md's learning table matches data/")
        return
    for run_dir in runs:
        if args.measure_random or not (run_dir / "random.json").is_file():
            r = measure_random(run_dir)
            print(f"{run_dir.name}: random play {r['mean']:.2f} ± {r['std']:.2f} over {r['games']} games")
    FIGURES.mkdir(exist_ok=True)
    random_mean = json.loads((runs[0] / "random.json").read_text())["mean"]
    fig = playback.plot_learning({r.name: r for r in runs}, random_mean, playback.published_scores())
    fig.savefig(FIGURES / "learning_curve.png", dpi=110)
    agent, info = playback.load_agent(runs[0] / "checkpoint.pt")
    game = playback.play_episode(agent, epsilon=0.05, max_steps=args.gif_steps, seed=0)
    playback.save_gif(game.frames, FIGURES / "agent.gif")
    print(f"agent.gif: data/{runs[0].name} at step {info['step']:,}, {game.score:.0f} points in {game.steps} steps")
    print("README.md " + ("updated" if write_readme_block(readme_block(runs, loop_runs)) else "unchanged"))


if __name__ == "__main__":
    main()
