"""The memory ladder: measured bytes per transition of every replay-memory design, on real Breakout frames.

    python benchmarks/memory_ladder.py                  # table; saves data/bench/memory_ladder.json
                                                        #        and data/memory_ladder.png
    python benchmarks/memory_ladder.py --transitions 50000 --json   # one JSON object per stage per line

Each stage runs in a fresh process (see dqn_course.lab.ladder). Quick mode (DQN_COURSE_QUICK=1) uses
2,000 transitions per stage and saves nothing unless --rows or --figure is given, so a smoke run
never overwrites the measured results.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from dqn_course import quick_mode
from dqn_course.cleanup import exit_on_signals
from dqn_course.lab.bench import print_results, save_results
from dqn_course.lab.ladder import default_transitions, format_table, plot_ladder, run_ladder

ROOT = Path(__file__).resolve().parents[1]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--transitions", type=int, default=None,
                   help=f"transitions per stage (default {default_transitions():,}; stages are capped at 2 GB, "
                        "so the raw RGB stages hold fewer)")
    p.add_argument("--json", action="store_true", help="print one JSON object per stage instead of the table")
    p.add_argument("--rows", type=Path, default=None,
                   help="where to save the rows (default data/bench/memory_ladder.json; quick mode: not saved)")
    p.add_argument("--figure", type=Path, default=None,
                   help="where to save the figure (default data/memory_ladder.png; quick mode: not saved)")
    p.add_argument("--no-tracemalloc", action="store_true", help="skip the tracemalloc cross-check (halves fill time)")
    return p.parse_args()


@exit_on_signals()  # SIGTERM and SIGHUP unwind like Ctrl-C, so the clean-ups run
def main() -> None:
    args = parse_args()
    save = not quick_mode()
    rows_path = args.rows or (ROOT / "data/bench/memory_ladder.json" if save else None)
    figure_path = args.figure or (ROOT / "data/memory_ladder.png" if save else None)
    t0 = time.perf_counter()
    rows = run_ladder(args.transitions, with_tracemalloc=not args.no_tracemalloc,
                      progress=lambda m: print(m, file=sys.stderr))
    seconds = time.perf_counter() - t0
    print_results(rows, args.json, lambda: format_table(rows), f"{len(rows)} stages", seconds)
    if rows_path:
        save_results(rows_path, rows, transitions=args.transitions or default_transitions(), quick=quick_mode(),
                     seconds=round(seconds, 1))
        print(f"rows saved to {rows_path}", file=sys.stderr)
    if figure_path:
        figure_path.parent.mkdir(parents=True, exist_ok=True)
        plot_ladder(rows, ram_bytes=rows[0]["available_ram_bytes"]).savefig(figure_path, dpi=120)
        print(f"figure saved to {figure_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
