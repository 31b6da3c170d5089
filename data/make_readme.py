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

(``data/make_figures.py`` writes README's ``learning`` block from data/breakout-cpu/; it is not touched here.)
The files are read, not imported: no heavy dependency loads, so ``make readme`` needs no set-up.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

DATA = Path(__file__).resolve().parent
ROOT = DATA.parent
PACKAGE = "dqn_course"
LAB = "lab"
BEGIN, END = "<!-- modules:begin -->", "<!-- modules:end -->"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


# --- modules -----------------------------------------------------------------------------------------------------

def first_docstring_line(path: Path) -> str:
    """The first line of a module's docstring, as Markdown (``code`` becomes `code`, pipes escaped)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    if not doc or not doc.strip():
        raise ValueError(f"{path.relative_to(ROOT)} has no module docstring: its first line is the module's "
                         "row in README.md's module tables")
    line = doc.strip().splitlines()[0].strip()
    return re.sub(r"``(.+?)``", r"`\1`", line).replace("|", r"\|")


def _modules_of(folder: Path, name: str) -> list[tuple[str, Path]]:
    """``(dotted name, file)`` of a package folder's modules, sorted: ``.py`` files (not ``__init__``), then
    each sub-package (its ``__init__.py``) followed by its own modules."""
    rows = []
    for path in sorted(folder.iterdir()):
        if path.suffix == ".py" and path.name != "__init__.py":
            rows.append((f"{name}.{path.stem}", path))
        elif path.is_dir() and (path / "__init__.py").is_file():
            rows.append((f"{name}.{path.name}", path / "__init__.py"))
            rows += _modules_of(path, f"{name}.{path.name}")
    return sorted(rows)


def module_rows(root: Path = ROOT) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(module, first docstring line)`` rows for the library and for the lab."""
    package = root / PACKAGE
    lab_name = f"{PACKAGE}.{LAB}"
    library, lab = [], []
    for name, path in _modules_of(package, PACKAGE):
        in_lab = name == lab_name or name.startswith(lab_name + ".")
        if name == lab_name:
            continue  # the lab package itself is described by the text above its table
        (lab if in_lab else library).append((name, first_docstring_line(path)))
    return library, lab


def _table(rows: list[tuple[str, str]]) -> list[str]:
    return ["| module | what it holds |", "|---|---|"] + [f"| `{name}` | {line} |" for name, line in rows]


def modules_body(root: Path = ROOT) -> str:
    library, lab = module_rows(root)
    lines = [f"**The library** ({len(library)} modules): what training and the distributed run are built from.", ""]
    lines += _table(library)
    lines += ["", (f"**The lab** (`{PACKAGE}.{LAB}`, {len(lab)} modules): the notebooks' and benchmarks' helpers, "
                   "which the library never imports."), ""]
    lines += _table(lab)
    return "\n".join(lines)


def readme_block(root: Path = ROOT) -> str:
    """README's module block, its markers included."""
    return f"{BEGIN}\n{modules_body(root)}\n{END}"


# --- notebooks -----------------------------------------------------------------------------------------------------

SUMMARY = re.compile(r"^(?:Rung|Notebook) \w+: ")  # a summary line: "Rung 05: ..." (a rung of the memory ladder) or
#                                                    "Notebook 06: ..." (a chapter that takes no rung off it)
LADDER = re.compile(r"^memory ladder \| ")  # a rung of the memory ladder: "memory ladder | what | bytes | 1M"
NO_SUMMARY = "(no summary line)"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
MAX_LINES = 8


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else (value or "")


def stdout_lines(cell: dict) -> list[str]:
    """What a code cell printed to stdout, as non-empty lines with runs of spaces collapsed."""
    text = "".join(_text(o.get("text")) for o in cell.get("outputs", [])
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")
    return [re.sub(r"\s+", " ", ANSI.sub("", line)).strip() for line in text.splitlines() if line.strip()]


def _is_exercise_or_solution(cell: dict) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    lines = stdout_lines(cell)
    return ("solution" in tags or _text(cell.get("source")).lstrip().startswith("# Solution")
            or bool(lines) and lines[0].startswith(("✓", "Not answered yet", "Answer both")))


def notebook_question(nb: dict) -> str:
    """The title cell's heading without its number: ``# 05 · Why is the deque slow and fat?`` -> the question."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for line in _text(cell.get("source")).splitlines():
                if line.startswith("#"):
                    heading = line.lstrip("#").strip()
                    return heading.split("·", 1)[1].strip() if "·" in heading else heading
            break
    return "(no title cell)"


def notebook_answer(nb: dict) -> tuple[str, list[str]]:
    """``(kind, lines)``: what a notebook's committed outputs answer, from the first of

    * ``"summary"``: the last cell that printed a summary line (``Rung NN: ...`` or ``Notebook NN: ...``):
      everything that cell printed, the prefix dropped;
    * ``"ladder"``: the last cell that printed a memory-ladder line (``memory ladder | ...``): everything it printed;
    * ``"last output"``: no such line: the last cell that printed anything (exercises and solutions left out);
    * ``"none"``: nothing printed at all.
    """
    cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    for kind, pattern in (("summary", SUMMARY), ("ladder", LADDER)):
        for cell in reversed(cells):
            lines = stdout_lines(cell)
            if any(pattern.match(line) for line in lines):
                return kind, [SUMMARY.sub("", line) for line in lines]
    for cell in reversed(cells):
        lines = stdout_lines(cell)
        if lines and not _is_exercise_or_solution(cell):
            return "last output", lines
    return "none", []


def _cell_text(line: str) -> str:
    """One printed line as Markdown table-cell text."""
    if LADDER.match(line):
        parts = [p.strip() for p in line.split("|")[1:]]
        line = f"{parts[0]}: {', '.join(parts[1:])}"
    return line.replace("|", r"\|").replace("*", r"\*").replace("<", "&lt;")


def notebook_paths(root: Path = ROOT) -> list[Path]:
    return sorted((root / "notebooks").glob("*.ipynb"))


def curriculum_rows(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """``(notebook, question, answer)`` for every notebook, the answer as Markdown (lines joined by ``<br>``)."""
    rows = []
    for path in notebook_paths(root):
        nb = json.loads(path.read_text(encoding="utf-8"))
        kind, lines = notebook_answer(nb)
        cut = lines[:MAX_LINES] + (["…"] if len(lines) > MAX_LINES else [])
        answer = "<br>".join(_cell_text(line) for line in cut)
        if kind in ("last output", "none"):
            answer = NO_SUMMARY + (f"; its last printed output:<br>{answer}" if answer else "")
        rows.append((path.stem, notebook_question(nb).replace("|", r"\|"), answer))
    return rows


def executions_line(root: Path = ROOT) -> str:
    """Where and when the committed outputs were made, from ``data/executions.json`` (``make execute``)."""
    path = root / "data" / "executions.json"
    records = json.loads(path.read_text(encoding="utf-8"))["executions"] if path.is_file() else {}
    if not records:
        return "No notebook execution is recorded yet (`make execute` records them in `data/executions.json`)."
    if str(ROOT) not in sys.path:  # dqn_course.lab.figures needs only the standard library: no set-up either
        sys.path.insert(0, str(ROOT))
    from dqn_course.lab.figures import describe  # the records' machine is figures.machine(): described the same way

    machines = sorted({f"{describe(r['machine'])}, {r['machine']['torch_threads']} torch threads"
                       for r in records.values()})
    starts = sorted(r["start"] for r in records.values())
    ends = sorted(r["end"] for r in records.values())
    most = max(r["others_cores"] for r in records.values())
    return (f"Executed by `make execute`, one notebook at a time, in default mode, on {' and on '.join(machines)}, "
            f"between {starts[0][:16].replace('T', ' ')} and {ends[-1][:16].replace('T', ' ')} UTC; other processes "
            f"used at most {most:.0%} of a core while a notebook ran (`data/executions.json`).")


def curriculum_body(root: Path = ROOT) -> str:
    lines = [executions_line(root), "",
             "| notebook | the question | what its committed outputs answer (summary line) |", "|---|---|---|"]
    lines += [f"| [`{name}`](notebooks/{name}.ipynb) | {question} | {answer} |"
              for name, question, answer in curriculum_rows(root)]
    return "\n".join(lines)


def guard_body(root: Path = ROOT) -> str:
    """The first refusal of a ``FrameSharingMemory`` by the memory guard that a notebook printed."""
    for path in notebook_paths(root):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb.get("cells", []):
            for line in stdout_lines(cell) if cell.get("cell_type") == "code" else []:
                if line.startswith("InsufficientMemoryError: "):
                    return (f"What notebook `{path.stem}` printed when it asked for more than the machine has:\n\n"
                            f"```text\n{line}\n```")
    return "(no notebook printed a memory-guard refusal)"


# --- data/bench ----------------------------------------------------------------------------------------------------

def _bench(root: Path, name: str) -> dict:
    return json.loads((root / "data" / "bench" / name).read_text(encoding="utf-8"))


def _bench_rows(root: Path, name: str) -> list[dict]:
    """The rows of a JSON-lines file of data/bench (one per run of an A/B script)."""
    text = (root / "data" / "bench" / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _machine(env: dict) -> str:
    """``2026-11-21 10:55, 2-core Intel(R) Xeon(R) Processor, 25 GB RAM, 1-minute load average 0.97``."""
    return (f"{env['date'][:16].replace('T', ' ')}, {env['cpu_count']}-core {env['cpu']}, "
            f"{env['ram_total'] / 1e9:.0f} GB RAM, 1-minute load average {env['load_avg_1min']:.2f} at the end")


def _x(value: float) -> str:
    """A ratio: two decimals, three below 0.1."""
    return f"{value:.3f}×" if value < 0.1 else f"{value:.2f}×"


def ladder_body(root: Path = ROOT) -> str:
    doc = _bench(root, "memory_ladder.json")
    lines = [f"Measured with `python {doc['command']}` ({_machine(doc['environment'])}; up to "
             f"{doc['settings']['transitions']:,} transitions per rung, {doc['settings']['seconds']:.0f} s in all):",
             "", "| rung | bytes / transition (RSS) | tracemalloc | arithmetic | 1M transitions |",
             "|---|---:|---:|---:|---:|"]
    for r in doc["rows"]:
        lines.append(f"| {r['label']} | {r['bytes_per_transition']:,.0f} | {r['traced_bytes_per_transition']:,.0f} | "
                     f"{r['arithmetic_bytes']:,} | {r['gb_per_million']:.1f} GB |")
    fs = next(r for r in doc["rows"] if r["memory"] == "frame_sharing")
    lines += ["", (f"The frame-sharing memory's {fs['bytes_per_transition'] - fs['arithmetic_bytes']:.0f} bytes over "
                   f"its {fs['arithmetic_bytes']:,} of pixels are its per-slot bookkeeping (16 B) and one extra frame "
                   "per game (the last next-state frame).")]
    return "\n".join(lines)


def _sampling_rows(doc: dict, section: str) -> list[dict]:
    return [r for r in doc["rows"] if r.get("section") == section]


def sampling_body(root: Path = ROOT) -> str:
    doc = _bench(root, "sampling.json")
    cap = doc["settings"]["capacity"]
    rows = sorted((r for r in _sampling_rows(doc, "memories") if r["capacity"] == cap),
                  key=lambda r: r["batches_per_s"])
    lines = [f"Batches of {doc['settings']['batch_size']} per second, every memory filled with the same real "
             f"Breakout transitions and timed side by side in one run of `python {doc['command']}` "
             f"({_machine(doc['environment'])}):", "",
             f"| memory ({cap:,} transitions) | batches/s | × deque | RAM |", "|---|---:|---:|---:|"]
    lines += [f"| {r['buffer']} | {r['batches_per_s']:,.0f} | {r['vs_deque']:.1f}× | {r['nbytes'] / 1e9:.2f} GB |"
              for r in rows]
    return "\n".join(lines)


def _capacity_sweep(doc: dict) -> dict[int, dict[str, dict]]:
    sweep: dict[int, dict[str, dict]] = {}
    for r in _sampling_rows(doc, "memories"):
        if r["key"] in ("naive", "frame_sharing"):
            sweep.setdefault(r["capacity"], {})[r["key"]] = r
    return {c: v for c, v in sorted(sweep.items()) if len(v) == 2}


def sampling_capacity_body(root: Path = ROOT) -> str:
    sweep = _capacity_sweep(_bench(root, "sampling.json"))
    caps = list(sweep)
    lines = ["| capacity | " + " | ".join(f"{c:,}" for c in caps) + " |", "|---|" + "---:|" * len(caps),
             "| deque | " + " | ".join(f"{sweep[c]['naive']['batches_per_s']:,.0f}" for c in caps) + " |",
             "| frame sharing | " + " | ".join(f"{sweep[c]['frame_sharing']['batches_per_s']:,.0f}"
                                               for c in caps) + " |",
             "| frame sharing / deque | " + " | ".join(
                 f"{sweep[c]['frame_sharing']['batches_per_s'] / sweep[c]['naive']['batches_per_s']:.1f}×"
                 for c in caps) + " |"]
    return "\n".join(lines)


def storage_body(root: Path = ROOT) -> str:
    doc = _bench(root, "sampling.json")
    rows = {r["storage"]: r for r in _sampling_rows(doc, "storage") if r["play"] == "scripted"}
    ratio = {r["codec"]: r["ratio"] for r in _sampling_rows(doc, "codec") if r["pool"] == "scripted play"}
    ram = rows["ram"]["batches_per_s"]
    lines = ["| storage | batches/s (one core) | × ram | RAM per transition |", "|---|---:|---:|---:|"]
    names = {"ram": "`ram` (numpy array)",
             "lz4": f"`lz4` (one payload per frame; {ratio.get('lz4', 0):.1f}× smaller)",
             "zstd": f"`zstd` (level 3; {ratio.get('zstd', 0):.1f}× smaller)",
             "disk": "`disk` (memmap), page cache warm"}
    for key, label in names.items():
        if key not in rows:
            continue
        r = rows[key]
        per = r["anon_per_transition"] if key == "disk" else r["rss_per_transition"]
        note = " (+ reclaimable file pages)" if key == "disk" else ""
        lines.append(f"| {label} | {r['batches_per_s']:,.0f} | {_x(r['batches_per_s'] / ram)} | {per:,.0f} B{note} |")
        if key == "disk" and "cold_batches_per_s" in r:
            lines.append(f"| `disk`, page cache dropped before every batch | {r['cold_batches_per_s']:,.0f} | "
                         f"{_x(r['cold_batches_per_s'] / ram)} | {per:,.0f} B |")
    return "\n".join(lines)


def million_body(root: Path = ROOT) -> str:
    doc = _bench(root, "sampling.json")
    m = next(r for r in _sampling_rows(doc, "million"))
    storage = {r["storage"]: r for r in _sampling_rows(doc, "storage") if r["play"] == "scripted"}
    text = (f"**1M transitions, measured.** A fresh process filled a {m['capacity']:,}-frame `{m['storage']}` "
            f"memory ({m['transitions']:,} transitions of scripted play; the recorded frames are cycled, each "
            f"compressed on its own) and grew by **{m['rss_growth'] / 1e9:.3f} GB of RSS** "
            f"({m['rss_per_transition']:,.0f} B/transition; `nbytes` {m['nbytes'] / 1e9:.3f} GB), then sampled "
            f"{m['batches_per_s']:,.0f} batches/s on one core.")
    ram, z = storage.get("ram"), storage.get("zstd")
    if ram:
        text += (f" The uncompressed ring of the same run keeps {ram['rss_per_transition']:,.0f} B per transition "
                 f"and sampled {ram['batches_per_s']:,.0f} batches/s at {ram['capacity']:,}.")
    if z and m["storage"] != "zstd":
        text += (f" zstd keeps {z['rss_per_transition']:,.0f} B per transition against lz4's "
                 f"{storage[m['storage']]['rss_per_transition']:,.0f} and samples {z['batches_per_s']:,.0f} batches/s "
                 f"against {storage[m['storage']]['batches_per_s']:,.0f}.")
    return text


TREE_NAMES = {"uniform": "uniform indices (no tree)", "per_item": "per-item Python tree",
              "numpy": "numpy-vectorised tree", "compiled": "compiled (numba) tree"}


def per_body(root: Path = ROOT) -> str:
    doc = _bench(root, "per.json")
    s, env = doc["settings"], doc["environment"]
    tree = {r["sampler"]: r for r in doc["rows"] if r.get("part") == "tree"}
    step = {r["sampler"]: r for r in doc["rows"] if r.get("part") == "learner_step"}
    lines = [f"`python {doc['command']}` ({_machine(env)}; {s['seconds']:.0f} s): index selection at capacity "
             f"{s['capacity']:,}, batch {s['batch_size']} (PER: sample + priority update), and a learner step on the "
             f"CPU ({s['threads']} threads, real Breakout frames, median of interleaved steps):", "",
             "| what | rate | time | × per-item tree |", "|---|---:|---:|---:|"]
    for name, r in tree.items():
        over = f"{r['over_per_item']:.1f}×" if "over_per_item" in r else "—"
        lines.append(f"| {TREE_NAMES.get(name, name)} | {r['batches_per_s']:,.0f} batches/s | "
                     f"{1e6 / r['batches_per_s']:.1f} µs | {over} |")
    for name, r in step.items():
        lines.append(f"| learner step, {name} | | {r['ms_per_step']:.2f} ms | |")
    ratio = step["prioritized"]["ms_per_step"] / step["uniform"]["ms_per_step"]
    lines += ["", (f"The compiled (numba) sum tree ran {tree['compiled']['over_per_item']:.1f}× the per-item Python "
                   f"tree's rate, the numpy-vectorised tree {tree['numpy']['over_per_item']:.1f}×; a learner step "
                   f"with PER took {ratio:.3f}× as long as without.")]
    checks = [r for r in doc["rows"] if r.get("part") == "checks"]
    if checks:  # recorded since the argument checks were compiled per signature
        lines += ["", "Checked calls from user code (the arguments checked at the package's edge) against the same "
                      "functions' bodies alone, in turns:", "", "| call | checked | body alone | ratio |",
                  "|---|---:|---:|---:|"]
        lines += [f"| `{r['call']}` of {r['batch_size']} leaves | {r['checked_us']:.2f} µs | {r['body_us']:.2f} µs | "
                  f"{r['checked_over_body']:.2f}× |" for r in checks]
    return "\n".join(lines)


def _bench_files(root: Path, pattern: str) -> list[tuple[Path, dict]]:
    """``(path, document)`` of each ``data/bench/<pattern>`` file, by name."""
    return [(path, json.loads(path.read_text(encoding="utf-8")))
            for path in sorted((root / "data" / "bench").glob(pattern))]


def throughput_body(root: Path = ROOT) -> str:
    saved = _bench_files(root, "throughput*.json")
    lines = []
    for path, doc in saved:
        s = doc["settings"]
        lines += [f"`{path.relative_to(root)}`: `python {doc['command']}` ({_machine(doc['environment'])}; "
                  f"{s['window']:,} agent steps timed after learning starts, buffer {s['buffer_size']:,}, "
                  f"device {s.get('gpu') or s['device']}):", "",
                  "| path | envs | replay | agent steps/s | × plain | RSS MB |", "|---|---:|---|---:|---:|---:|"]
        lines += [f"| {r['path']} | {r['num_envs']} | {r['replay']} | {r['steps_per_s']:,.0f} | "
                  f"{r.get('ratio_over_plain', 1.0):.2f}× | {r['rss_mib'] * 2**20 / 1e6:,.0f} |" for r in doc["rows"]]
        lines.append("")
    if not saved:
        doc = _bench(root, "refactor-before-after.json")
        rows = [r for r in doc["rows"]
                if r["benchmark"].startswith("benchmarks/throughput.py") and r["tree"] == "after"]
        rounds = sorted({r["round"] for r in rows})
        lines += [f"No `data/bench/throughput*.json` is recorded yet (`python benchmarks/throughput.py --save "
                  f"data/bench/throughput-cpu.json` writes one). The CPU runs recorded in "
                  f"`data/bench/refactor-before-after.json` ({doc['date']}, {doc['machine']}), "
                  f"`python {rows[0]['benchmark']}`, the refactored code (its `after` rows):", "",
                  "| round | plain (1 env) steps/s | fast (8 envs) steps/s | fast / plain | load average |",
                  "|---:|---:|---:|---:|---:|"]
        for k in rounds:
            by = {r["path"]: r for r in rows if r["round"] == k}
            lines.append(f"| {k} | {by['plain']['steps_per_s']:,.1f} | {by['fast']['steps_per_s']:,.1f} | "
                         f"{by['fast']['steps_per_s'] / by['plain']['steps_per_s']:.2f}× | "
                         f"{by['plain']['load_avg_1min']:.2f} |")
    return "\n".join(lines).rstrip()


def ray_scaling_body(root: Path = ROOT) -> str:
    doc = _bench(root, "ray_scaling.json")
    s = doc["settings"]
    lines = [f"Timed side by side in one run of `OMP_NUM_THREADS=1 python {doc['command']}` "
             f"({_machine(doc['environment'])}; best of {s['rounds']} interleaved rounds, every learner on 1 torch "
             "thread):", "",
             "| layout | env steps/s ingested | learner updates/s | vs single process (steps, updates) |",
             "|---|---:|---:|---:|"]
    for r in doc["rows"]:
        name = ("single process (`train`, 1 update per 4 steps)" if r["layout"].startswith("train")
                else f"Ray, {r['workers']} worker{'s' if r['workers'] > 1 else ''} + learner")
        lines.append(f"| {name} | {r['env_steps_per_s']:,.0f} | {r['updates_per_s']:.1f} | "
                     f"{r['steps_vs_train']:.2f}×, {r['updates_vs_train']:.2f}× |")
    ray = sorted((r for r in doc["rows"] if r["layout"] == "ray"), key=lambda r: r["workers"])
    for a, b in zip(ray, ray[1:]):
        steps = b["env_steps_per_s"] / a["env_steps_per_s"] - 1
        upd = 1 - b["updates_per_s"] / a["updates_per_s"]
        lines += ["", (f"Going from {a['workers']} to {b['workers']} workers changed env steps/s by {steps:+.0%} and "
                       f"{'cost' if upd > 0 else 'gave'} the learner {abs(upd):.0%} of its updates/s.")]
    return "\n".join(lines)


def update_stats_body(root: Path = ROOT) -> str:
    """The diagnostics' A/B (``data/bench/update-stats-ab.jsonl``, one row per run of
    ``benchmarks/ab/ab_update_stats.py``): updates/s before and after, per run."""
    runs = _bench_rows(root, "update-stats-ab.jsonl")
    lines = ["| run | machine | before, updates/s | after, updates/s | after vs before |", "|---|---|---:|---:|---:|"]
    for i, r in enumerate(runs, 1):
        lines.append(f"| {i}: {r['rounds']} rounds of {r['seconds']:g} s, a read every {r['read_every']} updates | "
                     f"{_machine(r['environment'])} | {r['before_updates_per_s']:.1f} | {r['after_updates_per_s']:.1f}"
                     f" | {r['after_updates_per_s'] / r['before_updates_per_s'] - 1:+.1%} |")
    return "\n".join(lines)


def train_loop_body(root: Path = ROOT) -> str:
    """The training loop's A/B (``data/bench/train-loop-ab.jsonl``, one row per run of
    ``benchmarks/ab/ab_train_loop.py``): agent steps/s from the first update on, before and after, per run."""
    runs = _bench_rows(root, "train-loop-ab.jsonl")
    lines = ["| run | machine | before | after | steps/s before (rounds) | steps/s after (rounds) "
             "| after / before: best, median |", "|---|---|---|---|---|---|---:|"]
    for i, r in enumerate(runs, 1):
        rounds = {side: ", ".join(f"{x:.1f}" for x in r[f"rounds_{side}"]) for side in ("before", "after")}
        after = r["after_commit"] + (" + uncommitted changes" if r["after_uncommitted_changes"] else "")
        order = r.get("order", "before first in every round")
        lines.append(f"| {i}: {r['rounds']} rounds of {r['steps']:,} steps ({order}) | "
                     f"{_machine(r['environment'])} | "
                     f"{r['before_commit']} | {after} | {r['before_steps_per_s']:.1f} ({rounds['before']}) | "
                     f"{r['after_steps_per_s']:.1f} ({rounds['after']}) | {r['after_over_before']:.3f}, "
                     f"{statistics.median(r['rounds_after']) / statistics.median(r['rounds_before']):.3f} |")
    return "\n".join(lines)


def hot_checks_body(root: Path = ROOT) -> str:
    """The hot paths' checks A/B (``data/bench/hot-checks-ab.jsonl``, one row per run of
    ``benchmarks/ab/ab_hot_checks.py``): µs per call with and without the checks, and their share of a step."""
    runs = _bench_rows(root, "hot-checks-ab.jsonl")
    paths = ("act", "add_batch", "sample", "update_priorities")
    lines = ["| run | machine | " + " | ".join(f"`{p}`: µs with / without (checks)" for p in paths)
             + " | checks per step | step (train) | share of a step |", "|---|---|" + "---:|" * (len(paths) + 3)]
    for i, r in enumerate(runs, 1):
        cells = [f"{1e6 / r[f'{p}_per_s_with']:.1f} / {1e6 / r[f'{p}_per_s_without']:.1f} ({r[f'{p}_check_us']:+.1f})"
                 for p in paths]
        lines.append(f"| {i}: {r['rounds']} rounds, {r['seconds']:g} s per path, train_every {r['train_every']} | "
                     f"{_machine(r['environment'])} | " + " | ".join(cells) + f" | {r['checks_us_per_step']:.1f} µs | "
                     f"{r['step_us']:,.0f} µs | {r['checks_percent_of_step']:.2f}% |")
    return "\n".join(lines)


def update_capture_body(root: Path = ROOT) -> str:
    """Updates/s of the update launched several ways, and the host's planning time per update, from each
    ``data/bench/update-capture*.json`` (``benchmarks/update_capture.py --save``)."""
    lines = []
    for path, doc in _bench_files(root, "update-capture*.json"):
        s = doc["settings"]
        lines += [f"`{path.relative_to(root)}` ({_machine(doc['environment'])}; {s['gpu']}, torch "
                  f"{s['torch_version']}, {doc['rows'][0]['updates']:,} timed updates per variant, a "
                  f"{s['capacity']:,}-frame memory):", "",
                  "| variant | updates/s | × eager | wall s (compile and capture included) |", "|---|---:|---:|---:|"]
        eager = next(r["updates_per_s"] for r in doc["rows"] if r["variant"] == "eager")
        for r in doc["rows"]:
            if "updates_per_s" in r:
                lines.append(f"| {r['variant']} | {r['updates_per_s']:,.0f} | {r['updates_per_s'] / eager:.2f}× | "
                             f"{r['wall_s']:.1f} |")
            else:
                lines.append(f"| {r['variant']} | failed: {r['error']} | | |")
        plan = next(r["plan_us_per_update"] for r in doc["rows"] if "plan_us_per_update" in r)
        lines += ["", f"Planning one update on the host (`DeviceLearner.plan`): {plan:,.0f} µs.", ""]
    return "\n".join(lines).rstrip() or "Not recorded yet."


def plan_body(root: Path = ROOT) -> str:
    """The host's µs per update to plan the fast path's updates, per-update vs vectorised, from each
    ``data/bench/plan*.json`` (``benchmarks/plan.py --save``)."""
    lines = []
    for path, doc in _bench_files(root, "plan*.json"):
        s = doc["settings"]
        lines += [f"`{path.relative_to(root)}`: `python {doc['command']}` ({_machine(doc['environment'])}; device "
                  f"{s['device']}, a {s['capacity']:,}-frame memory in {s['streams']} streams, batch 32, "
                  f"{s['torch_threads']} torch thread{'s' if s['torch_threads'] > 1 else ''}; budget "
                  f"{s['budget_us']:.0f} µs):", "",
                  "| updates planned at once (k) | per-update, µs/update | vectorised, µs/update | speed-up | "
                  "within budget |", "|---:|---:|---:|---:|---|"]
        by_k: dict[int, dict] = {}
        for r in doc["rows"]:
            by_k.setdefault(r["k"], {})[r["variant"]] = r
        for k, rows in sorted(by_k.items()):
            old, new = rows["per-update"], rows["vectorised"]
            lines.append(f"| {k} | {old['plan_us_per_update']:,.0f} | {new['plan_us_per_update']:,.0f} | "
                         f"{new['speedup_over_per_update']:.1f}× | {'yes' if new['within_budget'] else 'no'} |")
        lines.append("")
    return "\n".join(lines).rstrip() or "Not recorded yet: `python benchmarks/plan.py --save data/bench/plan-cpu.json`."


def capstone_loop_body(root: Path = ROOT) -> str:
    """Agent steps/s of notebook 07c's worked loop beside ``train()``, per round (``data/bench/capstone-loop.json``,
    written by ``benchmarks/capstone_loop.py --save``)."""
    path = root / "data" / "bench" / "capstone-loop.json"
    if not path.is_file():
        return "Not recorded yet: `python benchmarks/capstone_loop.py --save data/bench/capstone-loop.json`."
    doc = json.loads(path.read_text(encoding="utf-8"))
    s = doc["settings"]
    lines = [f"`python {doc['command']}` ({_machine(doc['environment'])}; the {s['preset']} problem, learning from "
             f"step {s['warmup']:,} to {s['warmup'] + s['window']:,}, a {s['buffer_size']:,}-frame replay, "
             f"{s['torch_threads']} torch threads):", "",
             "| round | `train()`, agent steps/s | 07c's loop, agent steps/s | loop / train |", "|---:|---:|---:|---:|"]
    by = {(r["round"], r["which"]): r["steps_per_s"] for r in doc["rows"]}
    for k, ratio in enumerate(s["ratio_loop_over_train"], 1):
        lines.append(f"| {k} | {by[k, 'train']:,.1f} | {by[k, 'loop']:,.1f} | {ratio:.3f} |")
    return "\n".join(lines)


def _size(n: float) -> str:
    """A file size in decimal units: ``87 MB``, ``7.10 GB``."""
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB"


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


def replay_state_body(root: Path = ROOT) -> str:
    """The saved training state's size per replay storage and size (``data/bench/replay_state.json``, written by
    ``benchmarks/replay_state.py``); a one-line note while none is recorded."""
    path = root / "data" / "bench" / "replay_state.json"
    if not path.is_file():
        return ("Not recorded yet: `python benchmarks/replay_state.py` writes `data/bench/replay_state.json`, "
                "and `make readme` then fills this table.")
    doc = json.loads(path.read_text(encoding="utf-8"))
    s = doc["settings"]
    read = ("each file read back with its pages dropped from the page cache first" if s.get("read_cold")
            else "each file read back from the page cache (it could not be dropped there)")
    lines = [f"`python {doc['command']}` ({_machine(doc['environment'])}; {s['seconds']:.0f} s; the `{s['preset']}` "
             f"preset's memory and agent, filled from {s['play_pool']:,} frames of scripted play replayed cyclically; "
             f"files on {s.get('filesystem') or 'an unknown filesystem'}, {read}):", "",
             "| storage | transitions (stored) | state file | per stored transition | replay part, per transition | "
             "networks + Adam | write | read | restore |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    measured = [r for r in doc["rows"] if "refused" not in r]
    for r in doc["rows"]:
        if "refused" in r:
            lines.append(f"| `{r['storage']}` | {r['transitions']:,} | refused: {r['refused'].replace('|', '/')} "
                         "| | | | | | |")
            continue
        replay = "—" if r.get("replay_bytes_per_transition") is None else f"{r['replay_bytes_per_transition']:,.0f} B"
        fixed = "—" if r.get("fixed_bytes") is None else _size(r["fixed_bytes"])
        lines.append(f"| `{r['storage']}` | {r['transitions']:,} ({r['stored']:,}) | {_size(r['file_bytes'])} | "
                     f"{r['bytes_per_transition']:,.0f} B | {replay} | {fixed} | {_s(r['write_s'])} | "
                     f"{_s(r.get('read_s'))} | {_s(r.get('restore_s'))} |")
    checked = [r for r in measured if r.get("digest_matches") is not None]
    if checked:
        bad = [f"`{r['storage']}` at {r['transitions']:,}" for r in checked if not r["digest_matches"]]
        lines += ["", ("Every file read back restored a memory that samples what the saved one did (same replay "
                       "digest)." if not bad else f"Restored memories that do not sample what the saved one did: "
                                                  f"{', '.join(bad)}.")]
    lines += ["", f"A run keeps `keep_checkpoints` = {s['keep_checkpoints']} of these files and writes the next one "
                  "before it deletes the oldest."]
    return "\n".join(lines)


BLOCKS: dict[str, Callable[[Path], str]] = {
    "modules": modules_body, "curriculum": curriculum_body, "guard": guard_body, "ladder": ladder_body,
    "sampling": sampling_body, "sampling-capacity": sampling_capacity_body, "storage": storage_body,
    "million": million_body, "per": per_body, "throughput": throughput_body, "ray-scaling": ray_scaling_body,
    "update-stats": update_stats_body, "train-loop": train_loop_body, "replay-state": replay_state_body,
    "update-capture": update_capture_body, "plan": plan_body, "capstone-loop": capstone_loop_body,
    "hot-checks": hot_checks_body,
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
