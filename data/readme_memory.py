"""benchmarks/README.md's tables of replay memory: the ladder, sampling, storage, a million transitions, and the
replay state a checkpoint holds."""
from __future__ import annotations

import json
from pathlib import Path

from bench_files import ROOT, _bench, _machine, _x


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
