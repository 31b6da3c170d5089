"""The documents' generated blocks, made from the repository's own files (nothing typed by hand).

    python data/make_readme.py           # rewrite every generated block of README.md and benchmarks/README.md
    python data/make_readme.py --check   # exit 1 if any block differs from what its sources say

A document holds blocks between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` (``DOCUMENTS`` says which
document holds which); each is written here from committed files only:

* README.md: ``modules``, two tables, the library (``dqn_course/*.py`` and every sub-package but the lab, each
  sub-package followed by its modules) and the lab (``dqn_course/lab/*.py``), one row per module: its name
  and the first line of its docstring (a module without a docstring is an error); ``curriculum``, the machine
  and times of the recorded executions (``data/executions.json``), then one row per notebook
  (``notebooks/*.ipynb``, found by glob): its question (the title cell's heading) and what its committed outputs
  say (see ``notebook_answer``); ``guard``, the memory guard's refusal as a notebook printed it.
* benchmarks/README.md, the benchmark scripts' own runs: ``ladder``, ``sampling``, ``sampling-capacity``,
  ``storage``, ``million`` from ``data/bench/memory_ladder.json`` and ``data/bench/sampling.json``; ``per`` from
  ``data/bench/per.json``; ``throughput`` from ``data/bench/throughput*.json`` if recorded, else the CPU throughput
  runs of ``data/bench/refactor-before-after.json``; ``ray-scaling`` from ``data/bench/ray_scaling.json``;
  ``update-stats`` from ``data/bench/update-stats-ab.jsonl``; ``train-loop`` from ``data/bench/train-loop-ab.jsonl``;
  ``replay-state`` from ``data/bench/replay_state.json`` if recorded, else a one-line note; ``update-capture`` from
  ``data/bench/update-capture*.json``; ``capstone-loop`` from ``data/bench/capstone-loop.json``.

Each block's code lives beside its own reading of the data: ``readme_modules.py`` (the module tables),
``readme_curriculum.py`` (curriculum, guard), ``readme_memory.py`` and ``readme_speed.py`` (the benchmark tables,
over ``bench_files.py``, which reads ``data/bench``); this script holds which document has which block.

(``data/make_figures.py`` writes README's ``learning`` block from data/breakout-cpu/; it is not touched here.)
The files are read, not imported: no heavy dependency loads, so ``make readme`` needs no set-up.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

DATA = Path(__file__).resolve().parent
ROOT = DATA.parent
sys.path.insert(0, str(DATA))  # the block modules beside this script (it is run, and loaded by tests, by path)
import readme_curriculum  # noqa: E402
import readme_memory  # noqa: E402
import readme_modules  # noqa: E402
import readme_speed  # noqa: E402


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


BLOCKS: dict[str, Callable[[Path], str]] = {
    "modules": readme_modules.modules_body, "curriculum": readme_curriculum.curriculum_body,
    "guard": readme_curriculum.guard_body, "ladder": readme_memory.ladder_body, "sampling": readme_memory.sampling_body,
    "sampling-capacity": readme_memory.sampling_capacity_body, "storage": readme_memory.storage_body,
    "million": readme_memory.million_body, "per": readme_speed.per_body, "throughput": readme_speed.throughput_body,
    "ray-scaling": readme_speed.ray_scaling_body, "update-stats": readme_speed.update_stats_body,
    "train-loop": readme_speed.train_loop_body, "replay-state": readme_memory.replay_state_body,
    "update-capture": readme_speed.update_capture_body, "plan": readme_speed.plan_body,
    "capstone-loop": readme_speed.capstone_loop_body, "hot-checks": readme_speed.hot_checks_body,
}
# Which document holds which blocks. README shows what the notebooks measured (their summary lines) and nothing that
# a notebook measures again; the benchmark scripts' own runs (larger workloads, their own machine and date) are
# shown in benchmarks/README.md, so no figure has two values in one document.
DOCUMENTS: dict[str, tuple[str, ...]] = {
    "README.md": ("modules", "curriculum", "guard"),
    "benchmarks/README.md": ("ladder", "sampling", "sampling-capacity", "storage", "million", "per", "throughput",
                             "ray-scaling", "update-stats", "train-loop", "replay-state", "update-capture", "plan",
                             "capstone-loop", "hot-checks"),
}


# --- README --------------------------------------------------------------------------------------------------------

def block_span(text: str, name: str = "modules") -> tuple[int, int]:
    """Where README's block ``name`` starts and ends, its markers included."""
    begin, end = markers(name)
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise ValueError(f"README.md must hold {begin} ... {end} once, in that order: put the markers back where "
                         "the block belongs, then run python data/make_readme.py")
    return text.index(begin), text.index(end) + len(end)


def block(name: str, root: Path = ROOT) -> str:
    """README's block ``name`` as its sources say, its markers included."""
    begin, end = markers(name)
    return f"{begin}\n{BLOCKS[name](root)}\n{end}"


def render(text: str, root: Path = ROOT, doc: str = "README.md") -> str:
    """``text`` (document ``doc``) with each of its blocks rewritten from its sources; a missing block is an error."""
    for name in DOCUMENTS[doc]:
        start, end = block_span(text, name)
        text = text[:start] + block(name, root) + text[end:]
    return text


def differing_blocks(text: str, root: Path = ROOT, doc: str = "README.md") -> list[str]:
    """The blocks of ``text`` (document ``doc``) that differ from what their sources say."""
    return [name for name in DOCUMENTS[doc] if text[slice(*block_span(text, name))] != block(name, root)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="only compare the documents' blocks with their sources")
    args = p.parse_args()
    for doc in DOCUMENTS:
        path = ROOT / doc
        text = path.read_text(encoding="utf-8")
        if args.check:
            stale = differing_blocks(text, doc=doc)
            if stale:
                raise SystemExit(f"{doc}'s blocks {', '.join(stale)} differ from their sources: "
                                 "run python data/make_readme.py (make readme)")
            print(f"{doc}'s generated blocks match their sources")
            continue
        new = render(text, doc=doc)
        path.write_text(new, encoding="utf-8")
        print(f"{doc} " + ("updated" if new != text else "unchanged"))


if __name__ == "__main__":
    main()
