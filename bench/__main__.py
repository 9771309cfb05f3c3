"""Every benchmark in one command: runs the bench/ scripts (each in its own process, each writing the common result
format of bench/results.py) and writes docs/benchmarks.md — every figure as a ratio to its baseline measured in the
same run, with the load average, rows, commit and date.

    python -m bench                 # --quick (default): a few minutes
    python -m bench --full          # the scale curve at 1M, 10M and 100M rows (out of core), releases at 2M / 10M
                                    # rows, every ARX case, units, DP, Spark (12 minutes on an idle 2-core
                                    # machine, +3 for the first run's 100M-row file)
    python -m bench --only memory release --out /tmp/benchmarks.md
    python -m bench --full --max-rows 1000000   # leave the 10M / 100M runs out (a loaded machine)
    python -m bench --full --only units         # privacy units at 1M and 10M rows (opt-in: not in --quick)
    python -m bench --full --only dp            # DP GROUP BY at 1M and 10M rows (opt-in: not in --quick)

ARX runs only when ../shared/tools/arx/arx-bench and Java are present (never a CI dependency), Spark (--full) only
with pyspark and Java. The peers (bench_mondrian.py's anonypy) are not part of the profiles: run that script by hand.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from results import ROOT, commit, load_average, read  # noqa: E402
from targets import ISSUE, standing  # noqa: E402

ARX = ROOT.parent / "shared" / "tools" / "arx" / "arx-bench"


@dataclass(frozen=True)
class Run:
    """One script run of a suite: its arguments (the script first) and the largest table it makes, so that
    ``--max-rows`` can leave the large cases out (and the page says which were not run)."""

    args: list[str]
    rows: int = 0


# suite → its runs per profile. Each suite is pluggable: another branch adds a suite here (and its title below) or
# a run to a suite, and its targets to bench/targets.py; the page needs nothing else.
PROFILES: dict[str, dict[str, list[Run]]] = {
    "quick": {
        "startup": [Run(["bench_startup.py", "--repeat", "2"])],
        "phases": [Run(["bench_release_phases.py", "--repeat", "5"], 30_162)],
        "release": [Run(["bench_release.py", "--rows", "1000000", "--extra", "0", "1", "10", "--repeats", "2"],
                        1_000_000)],
        "assess": [Run(["bench_assess.py", "--rows", "1000000", "--repeat", "2"], 1_000_000)],
        "memory": [Run(["bench_memory.py", "--cases", "optimal:300000", "mondrian:30162", "mondrian:1000000"],
                       1_000_000)],
        "arx": [Run(["bench_arx.py", "--cases", "q8_k5_s0", "q8_k5_s4", "--repeat", "3"], 30_162),
                Run(["bench_arx.py", "--mixed", "1000000", "--cases", "q8_k5_s0", "--repeat", "2", "--warmup", "1"],
                    1_000_000),
                Run(["bench_arx.py", "--mixed", "1000000", "--cases", "q8_k5_s4", "--repeat", "1", "--warmup", "0"],
                    1_000_000)],
        "scale": [Run(["bench_scale.py", "--rows", "300000", "1000000"], 1_000_000)],
        "large": [Run(["bench_large.py", "--rows", "1000000", "--repeat", "3"], 1_000_000)],
    },
    "full": {
        "startup": [Run(["bench_startup.py", "--repeat", "5"])],
        "phases": [Run(["bench_release_phases.py", "--repeat", "9"], 30_162),
                   Run(["bench_release_phases.py", "--case", "q8_k5_s4", "--repeat", "5"], 30_162)],
        "release": [Run(["bench_release.py", "--rows", "2000000", "--extra", "0", "1", "10", "--repeats", "2"],
                        2_000_000),
                    Run(["bench_release.py", "--rows", "10000000", "--extra", "0", "1", "10", "--repeats", "2"],
                        10_000_000)],
        "assess": [Run(["bench_assess.py", "--rows", "1000000", "--repeat", "2"], 1_000_000),
                   Run(["bench_assess.py", "--rows", "10000000", "--repeat", "2"], 10_000_000)],
        "memory": [Run(["bench_memory.py", "--cases", "optimal:300000", "mondrian:30162", "mondrian:1000000"],
                       1_000_000)],
        # ARX's 4 % search of the 1M rows takes 12 s idle, 200 s at load 17: one timed run
        "arx": [Run(["bench_arx.py", "--repeat", "5"], 30_162),
                Run(["bench_arx.py", "--mixed", "1000000", "--cases", "q8_k5_s0", "--repeat", "3", "--warmup", "1"],
                    1_000_000),
                Run(["bench_arx.py", "--mixed", "1000000", "--cases", "q8_k5_s4", "--repeat", "1", "--warmup", "0"],
                    1_000_000)],
        "scale": [Run(["bench_scale.py", "--rows", "1000000"], 1_000_000),
                  Run(["bench_scale.py", "--rows", "10000000"], 10_000_000),
                  # out of core (issue 29.2): a DuckDB file that spills through a 4 GB limit; the file (~4 GB) and
                  # the Parquet it loads are kept in bench/data for later runs (--max-rows 10000000 leaves it out)
                  Run(["bench_scale.py", "--rows", "100000000", "--methods", "mondrian", "optimal", "--database",
                       "bench/data/scale100m.duckdb", "--memory-limit", "4GB", "--temp-directory", "bench/data/tmp"],
                      100_000_000)],
        "large": [Run(["bench_large.py", "--rows", "1000000", "--repeat", "3"], 1_000_000),
                  Run(["bench_large.py", "--rows", "10000000", "--repeat", "3"], 10_000_000)],   # 100M: by hand
        # privacy units (issue 24.6): opt-in, full profile only (`--full --only units`; the 10M run takes minutes)
        "units": [Run(["bench_units.py", "--rows", "1000000", "--repeat", "3"], 1_000_000),
                  Run(["bench_units.py", "--rows", "10000000", "--repeat", "3"], 10_000_000)],
        # DP aggregates (issue 25.7): opt-in, full profile only (`--full --only dp`; the 10M run takes minutes)
        "dp": [Run(["bench_dp.py", "--rows", "1000000", "--repeat", "5"], 1_000_000),
               Run(["bench_dp.py", "--rows", "10000000", "--repeat", "3"], 10_000_000)],
        # Spark's first level release of a fresh session (issue 29.4): needs the spark extra and Java
        "spark": [Run(["bench_spark.py", "--rows", "10000000", "--methods", "levels", "optimal"], 10_000_000)],
    },
}
TITLES = {
    "startup": "Start-up (wall time of a fresh process)",
    "phases": "A warm release, stage by stage (issue 29.1): Python time against the DuckDB statements' time",
    "release": "Level-vector release (issue 2, issue 17.5): against a copy of the source + one bare GROUP BY",
    "assess": "Assessment (issue 15): against one bare GROUP BY",
    "memory": "Peak resident memory (issue 17.3): a fresh process per case",
    "arx": "ARX side by side (issue 17.1, 29.1, 29.3): Adult and 1M mixed rows, warm, medians",
    "scale": "Scale curve (issue 17.6): against one bare GROUP BY",
    "large": "Large tables, fewer passes (issue 29.2): median of N beside one bare GROUP BY",
    "units": "Privacy units (issue 24.6): ~10 rows per person, medians of rounds beside their floor",
    "dp": "DP aggregates (issue 25.7): a DP GROUP BY beside the same query without DP, medians",
    "spark": "Spark (issue 14.4, 29.4): a fresh session's releases beside one bare Spark GROUP BY",
}


def spark_usable() -> bool:
    import importlib.util
    return importlib.util.find_spec("pyspark") is not None and shutil.which("java") is not None


def arx_usable() -> bool:
    return ARX.exists() and os.access(ARX, os.X_OK) and shutil.which("java") is not None


def run_suite(name: str, args: list[str], out: Path, log: Path) -> tuple[bool, float]:
    """One script in its own process, its JSON lines appended to ``out``; its stdout/stderr to ``log``."""
    t = time.perf_counter()
    with open(log, "a") as f:
        f.write(f"\n== {name}: python bench/{' '.join(args)}\n")
        f.flush()
        proc = subprocess.run([sys.executable, str(HERE / args[0]), *args[1:], "--json", str(out)], cwd=ROOT,
                              stdout=f, stderr=subprocess.STDOUT)
    return proc.returncode == 0, time.perf_counter() - t


def _num(v: float, unit: str) -> str:
    return f"{v:.0f} MB" if unit == "MB" else (f"{v * 1e3:.0f} ms" if v < 1 else f"{v:.2f} s")


def plot(records: list[dict], path: Path) -> bool:
    """Release time / bare GROUP BY against rows, one line per method (matplotlib, if installed)."""
    scale = [r for r in records if r["suite"] == "scale"]
    if not scale:
        return False
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for case in dict.fromkeys(r["case"] for r in scale):
        pts = sorted((r["rows"], r["ratio"], r["value"]) for r in scale if r["case"] == case)
        ax1.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=case)
        ax2.plot([p[0] for p in pts], [p[2] for p in pts], marker="o", label=case)
    fastest: dict[int, float] = {}
    for r in scale:                          # one bare GROUP BY per method and size: the fastest of them
        fastest[r["rows"]] = min(fastest.get(r["rows"], float("inf")), r["baseline_value"])
    pts = sorted(fastest.items())
    ax2.plot([p[0] for p in pts], [p[1] for p in pts], marker="x", linestyle="--", label="bare GROUP BY")
    for ax, label in ((ax1, "cost / bare GROUP BY (same run)"), (ax2, "seconds (shared 2-core machine)")):
        ax.set_xscale("log")
        ax.set_xlabel("rows")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    ax2.set_yscale("log")
    ax1.legend(fontsize=8)
    ax2.legend(fontsize=8)
    fig.suptitle("anon_sql cost against rows (Adult resampled)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def write_doc(records: list[dict], profile: str, skipped: list[str], failed: list[str], load_before: str,
              load_after: str, out: Path, command: str, plotted: bool) -> None:
    lines = [
        "# Benchmarks",
        "",
        f"Written by `{command}` on {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC at commit `{commit()}`, "
        f"profile `{profile}`. The machine has 2 cores shared with other work: every figure is a best of N (or a "
        "median, where the row says so) beside its baseline measured in the same run, and the ratio is what "
        f"compares. Load average (1, 5, 15 min): {load_before} before, {load_after} after; each row carries the "
        "load when it was measured and the commit it measured.",
        "",
        f"## Where issue {ISSUE}'s targets stand",
        "",
        *standing(records),
        "",
        "Where the time goes for each target not met, its floor and what would meet it: the reading of the figures "
        "below the tables (bench/benchmarks_notes.md).",
        "",
        "Regenerate: `python -m bench` (a few minutes) or `python -m bench --full` (the scale curve to 100M rows "
        "out of core, units, DP and Spark; 12 minutes on an idle machine, 3 more the first time for the 100M-row "
        "file; its plot needs the `bench` extra, `pip install -e \".[bench]\"`); `--max-rows N` leaves out the runs "
        "of larger tables (the page lists them under Not run), `--render FILE` writes the page from kept records "
        "(`--results`). The targets' table comes from `bench/targets.py`. The Python peers "
        "(`bench/bench_mondrian.py` beside anonypy) and the search at scale (`bench/bench_search.py --rows ...`) run "
        "by hand. Each script also runs alone (see its docstring) and `--json FILE` appends its records in the "
        "common format of `bench/results.py`.",
        "",
    ]
    for suite in TITLES:
        rows = [r for r in records if r["suite"] == suite]
        if not rows:
            continue
        lines += [f"## {TITLES[suite]}", "",
                  "| case | rows | value | baseline (same run) | baseline value | ratio | target | load avg | of runs "
                  "| commit |",
                  "| --- | ---: | ---: | --- | ---: | ---: | --- | --- | --- | --- |"]
        for r in rows:
            load = " ".join(f"{x:.1f}" for x in r["load"])
            n = f"{r['rows']:,}" if r.get("rows") else "-"
            lines.append(f"| {r['case']} | {n} | {_num(r['value'], r['unit'])} | {r['baseline']} | "
                         f"{_num(r['baseline_value'], r['unit'])} | **{r['ratio']:.2f}x** | {r['target']} | "
                         f"{load} | {r.get('stat', 'best')} of {r['repeat']} | `{r.get('commit', '-')}` |")
        extras = [r for r in rows if r.get("extra")]
        if extras:
            lines.append("")
            for r in extras:
                detail = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                   for k, v in r["extra"].items())
                lines.append(f"- {r['case']} ({r['rows'] or '-'} rows): {detail}")
        if suite == "scale" and plotted:
            lines += ["", "![cost against rows](benchmarks-scale.png)"]
        lines.append("")
    notes = HERE / "benchmarks_notes.md"
    if notes.exists():                       # the hand-written reading of the figures (profiles, shortfalls)
        lines += [notes.read_text().rstrip(), ""]
    if skipped or failed:
        lines += ["## Not run", ""]
        lines += [f"- {s}" for s in skipped]
        lines += [f"- {s}: failed (see the log)" for s in failed]
        lines.append("")
    out.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="the default: 9 minutes at load 12 on 2 cores")
    group.add_argument("--full", action="store_true", help="+ the scale curve and the 10M-row releases")
    ap.add_argument("--only", nargs="*", default=None, choices=list(TITLES), help="run only these suites")
    ap.add_argument("--max-rows", type=int, default=None, metavar="N",
                    help="leave out the runs whose tables exceed N rows (e.g. --full --max-rows 1000000: the small "
                         "and 1M cases on a loaded machine); the page lists them as not run")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    ap.add_argument("--log", type=Path, default=Path(tempfile.gettempdir()) / "anon_sql_bench.log")
    ap.add_argument("--results", type=Path, default=None, help="keep the JSON lines here (default: a temp file)")
    ap.add_argument("--render", type=Path, default=None,
                    help="run nothing: write the page from this JSON-lines file (e.g. a run's --results plus records "
                         "a script appended by hand with --json)")
    ap.add_argument("--ran", default=None, metavar="TEXT",
                    help="with --render: what made the records (e.g. the command and its hours), said on the page")
    args = ap.parse_args(argv)
    if args.render:
        records = read(args.render)
        plotted = plot(records, args.out.parent / "benchmarks-scale.png")
        made = f"rendered from {args.render.name}" + (f", the records of {args.ran}" if args.ran else "")
        write_doc(records, made, [], [], "-", "-", args.out,
                  f"python -m bench --render {args.render.name}", plotted)
        print(f"wrote {args.out} ({len(records)} figures)")
        return
    profile = "full" if args.full else "quick"
    command = "python -m bench" + (" --full" if args.full else "") + (
        f" --only {' '.join(args.only)}" if args.only else "") + (
        f" --max-rows {args.max_rows}" if args.max_rows else "")
    results = args.results or Path(tempfile.mkstemp(suffix=".jsonl")[1])
    results.write_text("")
    load_before = load_average()
    skipped, failed = [], []
    for suite, runs in PROFILES[profile].items():
        if args.only is not None and suite not in args.only:
            continue
        if suite == "arx" and not arx_usable():
            skipped.append(f"{TITLES[suite]}: ../shared/tools/arx/arx-bench or Java not found")
            continue
        if suite == "spark" and not spark_usable():
            skipped.append(f"{TITLES[suite]}: pyspark (pip install -e \".[spark]\") or Java not found")
            continue
        for run in runs:
            script = run.args
            if args.max_rows is not None and run.rows > args.max_rows:
                skipped.append(f"{suite}: `python bench/{' '.join(script)}` ({run.rows:,} rows > --max-rows "
                               f"{args.max_rows:,})")
                continue
            print(f"{suite}: python bench/{' '.join(script)}  (log: {args.log})", flush=True)
            ok, took = run_suite(suite, script, results, args.log)
            print(f"  {'done' if ok else 'FAILED'} in {took:.0f} s", flush=True)
            if not ok:
                failed.append(f"{suite} (`python bench/{' '.join(script)}`)")
    records = read(results)
    plotted = plot(records, args.out.parent / "benchmarks-scale.png")
    write_doc(records, profile, skipped, failed, load_before, load_average(), args.out, command, plotted)
    print(f"wrote {args.out} ({len(records)} figures)")


if __name__ == "__main__":
    main()
