"""The common result format of the benchmark scripts: one record per figure, always beside the baseline it was
measured against in the same run, with the machine's load average, the rows and the commit.

A script that accepts ``--json FILE`` appends its records there (one JSON object per line); ``python -m bench``
collects them into docs/benchmarks.md. Ratios, not seconds, are what compare on a shared machine.
"""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Result:
    """One figure and its baseline. ``unit``: "s" (wall time of ``repeat`` runs, the fastest or the median:
    ``stat``) or "MB" (peak resident memory)."""

    suite: str                    # the script: release, memory, arx, ...
    case: str                     # what was measured
    value: float
    baseline: str                 # what it is compared with, measured in the same run
    baseline_value: float
    rows: int | None = None
    unit: str = "s"
    repeat: int = 1
    target: str = ""              # the target for this figure, as text (e.g. "<= 1.5x")
    stat: str = "best"            # how the ``repeat`` runs make the figure: "best" (fastest) or "median"
    extra: dict[str, Any] = field(default_factory=dict)
    load: tuple[float, float, float] = field(default_factory=os.getloadavg)
    commit: str = field(default_factory=lambda: commit())   # the code measured (``+dirty``: uncommitted changes)

    @property
    def ratio(self) -> float:
        return self.value / self.baseline_value if self.baseline_value else float("nan")


def commit() -> str:
    """The worktree's short commit hash (``+dirty`` with uncommitted changes to tracked files)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def emit(results: list[Result], path: str | Path | None, echo: bool = True) -> None:
    """Append ``results`` to ``path`` (JSON lines) when a path is given; print them (``echo``), one line each."""
    if path:
        with open(path, "a") as f:
            for r in results:
                f.write(json.dumps({**asdict(r), "ratio": r.ratio}) + "\n")
    for r in results if echo else []:
        rows = f"{r.rows:,}" if r.rows else "-"
        print(f"[{r.suite}] {r.case} | rows {rows} | {r.value:.3f} {r.unit} vs {r.baseline} {r.baseline_value:.3f} "
              f"{r.unit} = {r.ratio:.2f}x | load {' '.join(f'{x:.2f}' for x in r.load)}", flush=True)


def read(path: str | Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines results file."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
