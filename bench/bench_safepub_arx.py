"""SafePub side by side with ARX (issue 25 item 4): Adult, the 9 attributes as QIs at ARX's LOW_MEDIUM levels,
ε = 2, δ = 1e-5; records suppressed (unsampled plus classes below k) over repeated seeds, ours against ARX's
EDDifferentialPrivacy over as many of its own (unseeded) runs.

    python bench/bench_safepub_arx.py                  # 20 seeds / 20 ARX runs
    python bench/bench_safepub_arx.py --runs 50 --epsilon 1.0

The prebuilt arx-bench driver has no SafePub configuration: bench/ArxSafePub.java runs ARX's jar directly (compiled
into a temp folder on first use; needs Java 17). Bench only.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb

import anon_sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import Result, emit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT.parent / "shared" / "tools" / "arx" / "lib"
DATA = ROOT.parent / "shared" / "data" / "adult"
# ARX's LOW_MEDIUM scheme on Adult (spec/09; ArxSafePub prints the levels ARX used, compared below)
LEVELS = {"sex": 0, "age": 2, "race": 0, "marital-status": 1, "education": 1, "native-country": 1, "workclass": 1,
          "occupation": 1, "salary-class": 0}


def run_arx(runs: int, epsilon: float, delta: float) -> dict:
    build = Path(os.environ.get("ARX_SAFEPUB_BUILD", Path(tempfile.gettempdir()) / "arx-safepub-classes"))
    source = ROOT / "bench" / "ArxSafePub.java"
    if not (build / "ArxSafePub.class").exists() or source.stat().st_mtime > (build / "ArxSafePub.class").stat().st_mtime:
        build.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-nowarn", "-cp", f"{LIB}/*", "-d", str(build), str(source)], check=True)
    out = subprocess.run(["java", "-cp", f"{LIB}/*{os.pathsep}{build}", "ArxSafePub", str(DATA), str(runs),
                          str(epsilon), str(delta)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def policy(seed: int, epsilon: float, delta: float) -> dict:
    return {"name": "adult_safepub", "source": "adult", "method": "levels", "seed": seed,
            "default_role": "insensitive",
            "attributes": {a: {"role": "quasi", "taxonomy": str(DATA / f"adult_hierarchy_{a}.csv")} for a in LEVELS},
            "privacy": {"differential_privacy": {"epsilon": epsilon, "delta": delta}},
            "method_params": {"levels": dict(LEVELS)}}


def run_ours(runs: int, epsilon: float, delta: float) -> dict:
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE adult AS SELECT * FROM read_csv(?, delim = ';', header = true)", [str(DATA / "adult.csv")])
    suppressed, unsampled, rel = [], [], None
    for seed in range(1, runs + 1):
        rel = anon_sql.release(con, policy(seed * 7919, epsilon, delta), replace=True)
        suppressed.append(rel.suppressed)
        unsampled.append(int(rel.info["differential_privacy"]["dp_unsampled"]))
    assert rel is not None
    return {"k": int(rel.info["differential_privacy"]["dp_k"]), "beta": rel.info["differential_privacy"]["dp_beta"],
            "records": rel.records_in, "suppressed": suppressed, "unsampled": unsampled}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--epsilon", type=float, default=2.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--json", default=None, help="append the results to this JSON-lines file")
    args = ap.parse_args(argv)
    print(f"command: python bench/bench_safepub_arx.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    arx = run_arx(args.runs, args.epsilon, args.delta)
    ours = run_ours(args.runs, args.epsilon, args.delta)
    if arx["levels"] != LEVELS:
        print(f"warning: ARX's LOW_MEDIUM levels {arx['levels']} differ from ours {LEVELS}")
    n = ours["records"]
    print(f"Adult, {n} records, 9 QIs at LOW_MEDIUM, epsilon = {args.epsilon:g}, delta = {args.delta:g}; "
          f"{args.runs} runs each")
    print(f"{'':<8} {'k':>4} {'beta':>9} {'suppressed mean':>15} {'sd':>7} {'min':>6} {'max':>6} {'share':>7}")
    for who, r in (("ARX", arx), ("anon_sql", ours)):
        s = r["suppressed"]
        print(f"{who:<8} {r['k']:>4} {r['beta']:>9.6f} {statistics.mean(s):>15.1f} {statistics.stdev(s):>7.1f} "
              f"{min(s):>6} {max(s):>6} {statistics.mean(s) / n:>7.3f}")
    print(f"anon_sql unsampled mean {statistics.mean(ours['unsampled']):.1f} (expected n(1 - beta) = "
          f"{n * (1 - ours['beta']):.1f}); small classes {statistics.mean(ours['suppressed']) - statistics.mean(ours['unsampled']):.1f}")
    ratio = statistics.mean(ours["suppressed"]) / statistics.mean(arx["suppressed"])
    print(f"mean suppressed, anon_sql / ARX: {ratio:.4f}")
    emit([Result("safepub", f"records suppressed, eps {args.epsilon:g} delta {args.delta:g} (mean of {args.runs})",
                 statistics.mean(ours["suppressed"]), "ARX EDDifferentialPrivacy mean",
                 statistics.mean(arx["suppressed"]), rows=n, unit="records", repeat=args.runs,
                 target="within a few %", extra={"k": ours["k"], "arx_k": arx["k"]})], args.json)


if __name__ == "__main__":
    main()
