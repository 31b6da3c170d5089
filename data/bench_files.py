"""What the documents' benchmark tables read: ``data/bench`` files, and how they name a machine and a ratio."""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench(root: Path, name: str) -> dict:
    return json.loads((root / "data" / "bench" / name).read_text(encoding="utf-8"))


def _bench_rows(root: Path, name: str) -> list[dict]:
    """The rows of a JSON-lines file of data/bench (one per run of an A/B script)."""
    text = (root / "data" / "bench" / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _bench_files(root: Path, pattern: str) -> list[tuple[Path, dict]]:
    """``(path, document)`` of each ``data/bench/<pattern>`` file, by name."""
    return [(path, json.loads(path.read_text(encoding="utf-8")))
            for path in sorted((root / "data" / "bench").glob(pattern))]


def _machine(env: dict) -> str:
    """``2026-11-21 10:55, 2-core Intel(R) Xeon(R) Processor, 25 GB RAM, 1-minute load average 0.97``."""
    return (f"{env['date'][:16].replace('T', ' ')}, {env['cpu_count']}-core {env['cpu']}, "
            f"{env['ram_total'] / 1e9:.0f} GB RAM, 1-minute load average {env['load_avg_1min']:.2f} at the end")


def _x(value: float) -> str:
    """A ratio: two decimals, three below 0.1."""
    return f"{value:.3f}×" if value < 0.1 else f"{value:.2f}×"

