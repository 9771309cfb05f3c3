"""How fast `anon-sql` starts: wall time (best of N) and the heaviest imports (python -X importtime) per command,
beside a bare `python -c pass` measured in the same run (report ratios: the machine is shared).

    python bench/bench_startup.py [--repeat 7] [--db FILE]

Without --db a demo database is created in a temp folder for `check` and `report`."""
from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = [sys.executable, "-m", "anon_sql.cli"]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import Result, emit  # noqa: E402


def best_wall_and_cpu(cmd: list[str], repeat: int) -> tuple[float, float]:
    """Best wall time and best CPU time (user + sys of the child): CPU time moves less when the machine is loaded."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=False)
        best = min(best, time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best_cpu = min(best_cpu, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best, best_cpu


def heaviest_imports(cmd: list[str], top: int = 5) -> list[tuple[str, float]]:
    """Top-level packages by cumulative import time (ms), from -X importtime."""
    err = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], capture_output=True, text=True).stderr
    cumulative: dict[str, float] = {}
    for line in err.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if m and len(m.group(2)) == 1:                     # a top-level import
            name = m.group(3).split(".")[0]
            cumulative[name] = cumulative.get(name, 0.0) + int(m.group(1)) / 1000
    return sorted(cumulative.items(), key=lambda kv: -kv[1])[:top]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--db", default=None)
    ap.add_argument("--json", default=None, help="append the results to this JSON-lines file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "demo.duckdb")
        if args.db is None:
            subprocess.run([*CLI, "demo", "--db", db], capture_output=True, check=True)
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "anon-sql --help": [*CLI, "--help"],
            "anon-sql check adult_demo": [*CLI, "check", "adult_demo", "--db", db],
            "anon-sql sql --help": [*CLI, "sql", "--help"],
            "anon-sql analyze --help": [*CLI, "analyze", "--help"],
        }
        with open("/proc/loadavg") as f:
            load = f.read().split()[:3]
        print(f"load average {' '.join(load)}; best of {args.repeat}")
        base = None
        results = []
        print("| command | wall (s) | CPU (s) | CPU ratio to python -c pass | heaviest imports (ms, cumulative) |")
        print("| --- | ---: | ---: | ---: | --- |")
        for label, cmd in cases.items():
            wall, cpu = best_wall_and_cpu(cmd, args.repeat)
            base = base or cpu
            heavy = ", ".join(f"{n} {ms:.0f}" for n, ms in heaviest_imports(cmd))
            print(f"| `{label}` | {wall:.3f} | {cpu:.3f} | {cpu / base:.1f}x | {heavy} |")
            if cmd[0] == sys.executable and label != "python -c pass":
                results.append(Result("startup", f"`{label}` CPU time (user + sys)", cpu, "`python -c pass`", base,
                                      repeat=args.repeat, extra={"wall (s)": round(wall, 3),
                                                                 "heaviest imports (ms)": heavy}))
        emit(results, args.json)


if __name__ == "__main__":
    main()
