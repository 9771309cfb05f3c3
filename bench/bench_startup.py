"""How fast `anon-sql` starts: wall and CPU time (best of N) and the heaviest imports (python -X importtime) per
command, beside two baselines measured in the same run (report ratios: the machine is shared): a bare
`python -c pass` and `python -c "import duckdb"` (the floor of any command that opens a database).

    python bench/bench_startup.py [--repeat 7] [--db FILE]

Without --db a demo database is created in a temp folder. `check` is measured twice: with its program cached (a
release checked before on this machine, or released by `anon-sql release`; the cache is a temp folder here) and
compiled from the stored policy (ANON_SQL_CACHE=off: sqlglot, numpy and the compiler load)."""
from __future__ import annotations

import argparse
import os
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


def best_wall_and_cpu(cmd: list[str], repeat: int, env: dict[str, str]) -> tuple[float, float]:
    """Best wall time and best CPU time (user + sys of the child): CPU time moves less when the machine is loaded."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=False, env=env)
        best = min(best, time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best_cpu = min(best_cpu, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best, best_cpu


def heaviest_imports(cmd: list[str], env: dict[str, str], top: int = 5) -> list[tuple[str, float]]:
    """Top-level packages by cumulative import time (ms), from -X importtime."""
    err = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], capture_output=True, text=True, env=env).stderr
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
    ap.add_argument("--before", default=None, metavar="CHECKOUT",
                    help="also time `check` with the anon_sql of another checkout (e.g. the main branch)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cached = {**os.environ, "ANON_SQL_CACHE": str(Path(tmp) / "cache")}
        compiled = {**os.environ, "ANON_SQL_CACHE": "off"}
        db = args.db or str(Path(tmp) / "demo.duckdb")
        if args.db is None:
            subprocess.run([*CLI, "demo", "--db", db], capture_output=True, check=True, env=cached)
        check = [*CLI, "check", "adult_demo", "--db", db]
        subprocess.run(check, capture_output=True, check=True, env=cached)      # compiles and caches the program
        cases = {
            "python -c pass": ([sys.executable, "-c", "pass"], cached),
            'python -c "import duckdb"': ([sys.executable, "-c", "import duckdb"], cached),
            "anon-sql --help": ([*CLI, "--help"], cached),
            "anon-sql check adult_demo (program cached)": (check, cached),
            "anon-sql check adult_demo (compiled, ANON_SQL_CACHE=off)": (check, compiled),
            **({f"anon-sql check adult_demo (code of {args.before})": (
                [sys.executable, "-c", f"import sys; sys.path.insert(0, {args.before!r}); "
                 "from anon_sql.cli.main import main; main()", *check[3:]], compiled)} if args.before else {}),
            "anon-sql sql --help": ([*CLI, "sql", "--help"], cached),
            "anon-sql analyze --help": ([*CLI, "analyze", "--help"], cached),
            "anon-sql run --help": ([*CLI, "run", "--help"], cached),
        }
        with open("/proc/loadavg") as f:
            load = f.read().split()[:3]
        print(f"load average {' '.join(load)}; best of {args.repeat}")
        base: dict[str, tuple[float, float]] = {}
        results = []
        print("| command | wall (s) | CPU (s) | wall / python -c pass | wall / import duckdb | CPU / python -c pass | "
              "CPU / import duckdb | heaviest imports (ms, cumulative) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for label, (cmd, env) in cases.items():
            wall, cpu = best_wall_and_cpu(cmd, args.repeat, env)
            if label.startswith("python"):
                base[label] = (wall, cpu)
            (pass_wall, pass_cpu), (duck_wall, duck_cpu) = base.get("python -c pass", (wall, cpu)), base.get(
                'python -c "import duckdb"', (wall, cpu))
            heavy = ", ".join(f"{n} {ms:.0f}" for n, ms in heaviest_imports(cmd, env))
            print(f"| `{label}` | {wall:.3f} | {cpu:.3f} | {wall / pass_wall:.1f}x | {wall / duck_wall:.2f}x | "
                  f"{cpu / pass_cpu:.1f}x | {cpu / duck_cpu:.2f}x | {heavy} |")
            if not label.startswith("python"):
                results.append(Result("startup", f"`{label}` wall time", wall, "`python -c pass`", pass_wall,
                                      repeat=args.repeat,
                                      extra={"CPU (s)": round(cpu, 3),
                                             "CPU / python -c pass": round(cpu / pass_cpu, 2),
                                             'wall / python -c "import duckdb"': round(wall / duck_wall, 2),
                                             'CPU / python -c "import duckdb"': round(cpu / duck_cpu, 2),
                                             "heaviest imports (ms)": heavy}))
        emit(results, args.json)


if __name__ == "__main__":
    main()
