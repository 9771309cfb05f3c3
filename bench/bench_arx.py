"""ARX side by side (issue 17.1/17.2): ARX's prebuilt benchmark driver and anon_sql on the same Adult cases, in
one run, as ratios.

    python bench/bench_arx.py                      # every case, best of 5 (ARX: 5 timed runs after 3 warm-ups)
    python bench/bench_arx.py --cases q8_k5_s4 --repeat 9
    python bench/bench_arx.py --mixed 1000000 --cases q8_k5_s0 q8_k5_s4 --repeat 3 --warmup 1   # issue 29.3

Cases are ARX's driver configurations (../shared/tools/arx/ArxBench.java): ``q8`` = sex, age, race, marital-status,
education, native-country, workclass, occupation; ``q9`` = q8 + salary-class; ``l2`` = q8 without occupation + salary-class
with occupation sensitive (distinct 2-diversity); ``_s4`` = 4 % suppression limit; metric DM* (our ``dm_star``), or
with ``_dm`` ARX's non-monotone DM (our ``discernibility``). ARX: the fastest ``anonymize()`` and
``anonymize()`` + output materialization; ours: the fastest warm ``anon_sql.runner.run`` (search + SQL release +
verification, Adult already loaded, taxonomies cached) and the search alone. The machine is shared: the load
average is printed, every figure is a best of N, and the ratios are what compare. Needs Java 17; bench only.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb

import anon_sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import Result, emit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ARX = ROOT.parent / "shared" / "tools" / "arx" / "arx-bench"
DATA = ROOT.parent / "shared" / "data" / "adult"
Q8 = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
L8 = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "salary-class"]
CASES = ["q8_k5_s0", "q8_k5_s4", "q8_k5_s0_dm", "q8_k5_s4_dm", "q9_k5_s0", "q9_k5_s4", "l2_k5_s0", "l2_k5_s4"]


def policy(case: str) -> dict:
    """Our policy for an ARX driver configuration."""
    l2 = case.startswith("l2")
    qis = L8 if l2 else (Q8 + ["salary-class"] if case.startswith("q9") else Q8)
    attrs = {a: {"role": "quasi", "taxonomy": str(DATA / f"adult_hierarchy_{a}.csv")} for a in qis}
    privacy: dict = {"k": 5, "max_suppression": 0.04 if "_s4" in case else 0.0}
    if l2:
        attrs["occupation"] = {"role": "sensitive"}
        privacy["l_diversity"] = {"kind": "distinct", "l": 2}
    objective = "discernibility" if "_dm" in case else "dm_star"
    return {"name": "bench_" + case, "source": "adult", "method": "optimal", "default_role": "insensitive",
            "attributes": attrs, "privacy": privacy, "method_params": {"objective": objective}}


def run_arx(case: str, repeat: int, data: Path = DATA, warmup: int = 3) -> dict:
    """ARX's driver on ``data``'s adult.csv (ADULT_DIR: the folder of bench/generate_mixed.py, say)."""
    out = subprocess.run([str(ARX), case, str(repeat), str(warmup)], capture_output=True, text=True, check=True,
                         env={**os.environ, "ADULT_DIR": str(data)})
    return json.loads(out.stdout.strip().splitlines()[-1])


def target(case: str, mixed: bool) -> str:
    """Issue 29's goal for a case (the ratio to ARX's anonymize() + output), or "" when it sets none."""
    goals = ({"q8_k5_s0": "<= 0.5x", "q8_k5_s4": "<= 0.1x"} if mixed else {"q8_k5_s0": "<= 2x", "q8_k5_s4": "<= 0.5x"})
    return goals.get(case, "")


def run_ours(con: duckdb.DuckDBPyConnection, case: str, repeat: int) -> dict:
    pol = policy(case)
    times, searches, rel = [], [], None
    for _ in range(repeat + 1):               # the first run warms the caches (taxonomies, SQL templates)
        t = time.perf_counter()
        rel = anon_sql.release(con, pol, replace=True)
        times.append(time.perf_counter() - t)
        searches.append(rel.info["seconds"])
    assert rel is not None
    return {"release_ms": min(times[1:]) * 1e3, "search_ms": min(searches[1:]) * 1e3,
            "release_ms_median": statistics.median(times[1:]) * 1e3, "levels": rel.plan,
            "score": rel.info["score"], "nodes": rel.info["nodes_evaluated"], "suppressed": rel.suppressed}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", default=CASES)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None, help="append the results to this JSON-lines file")
    ap.add_argument("--mixed", type=int, default=None, metavar="ROWS",
                    help="instead of Adult: bench/generate_mixed.py's data set of ROWS rows (issue 29.3), made in "
                         "bench/data/ when missing; ARX reads the same adult.csv (ADULT_DIR)")
    ap.add_argument("--warmup", type=int, default=3, help="ARX's warm-up runs before the timed ones")
    args = ap.parse_args(argv)
    data, label = DATA, ""
    if args.mixed:
        from generate_mixed import generate_mixed

        data = generate_mixed(args.mixed, Path(__file__).resolve().parent / "data" / f"adult_mixed_{args.mixed}")
        label = f"mixed {args.mixed:,} rows, "
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE adult AS SELECT * FROM read_csv(?, delim = ';', header = true)", [str(data / "adult.csv")])
    n_rows = con.execute("SELECT count(*) FROM adult").fetchall()[0][0]
    print(f"command: python bench/bench_arx.py {' '.join(argv or sys.argv[1:])}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.repeat} timed runs each "
          "(best of them, and the median ratio)")
    print(f"{'case':<13} {'ARX anon ms':>11} {'ARX +out ms':>11} {'ARX nodes':>9} {'our search ms':>13} "
          f"{'our release ms':>14} {'our nodes':>9} {'search/ARX':>10} {'release/ARX+out':>15} {'median ratio':>12} "
          f"{'same optimum':>12}")
    rows = {}
    for case in args.cases:
        arx = run_arx(case, args.repeat, data, args.warmup)
        ours = run_ours(con, case, args.repeat)
        same = ours["levels"] == arx["levels"] and abs(ours["score"] - float(arx["loss"])) <= 1e-9 * abs(ours["score"])
        rows[case] = (arx, ours)
        print(f"{case:<13} {arx['anonymize_ms_min']:>11.1f} {arx['anonymize_plus_output_ms_min']:>11.1f} "
              f"{arx['checked_nodes']:>9} {ours['search_ms']:>13.1f} {ours['release_ms']:>14.1f} {ours['nodes']:>9} "
              f"{ours['search_ms'] / arx['anonymize_ms_min']:>9.2f}x "
              f"{ours['release_ms'] / arx['anonymize_plus_output_ms_min']:>14.2f}x "
              f"{ours['release_ms_median'] / statistics.median(arx['anonymize_plus_output_ms']):>11.2f}x "
              f"{str(same):>12}", flush=True)
    for base in ("q8_k5", "q9_k5", "l2_k5", "q8_k5_s0_dm"):
        s0, s4 = (base + "_s0", base + "_s4") if not base.endswith("_dm") else ("q8_k5_s0_dm", "q8_k5_s4_dm")
        if s0 in rows and s4 in rows:
            print(f"budget cost {s4} / {s0}: ours {rows[s4][1]['search_ms'] / rows[s0][1]['search_ms']:.2f}x "
                  f"(search), ARX {rows[s4][0]['anonymize_ms_min'] / rows[s0][0]['anonymize_ms_min']:.2f}x")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results = []
    for case, (arx, ours) in rows.items():
        same = ours["levels"] == arx["levels"]
        arx_median = statistics.median(arx["anonymize_plus_output_ms"])
        results.append(Result("arx", f"{label}{case}: warm release (search + SQL + verification)",
                              ours["release_ms_median"] / 1e3, "ARX anonymize() + output",
                              arx_median / 1e3, rows=n_rows, repeat=args.repeat, stat="median",
                              target=target(case, bool(args.mixed)),
                              extra={"same optimum": same, "best-of ratio": ours["release_ms"] / arx[
                                  "anonymize_plus_output_ms_min"], "our search s": ours["search_ms"] / 1e3,
                                     "ARX anonymize s": arx["anonymize_ms_min"] / 1e3}))
    emit(results, args.json)


if __name__ == "__main__":
    main()
