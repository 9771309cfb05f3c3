"""UPA (seed 003) on Pima beside Mondrian on the same quasi-identifiers and the original data: DM, C_AVG, KL,
silhouette, and C4.5 (entropy tree) / Gaussian naive Bayes accuracy under two protocols.

    python bench/bench_upa.py                       # k = 5 10 25 50 100, seed 3, 10 folds
    python bench/bench_upa.py --k 5 25 --folds 5
    python bench/bench_upa.py --scale 10000 --k 5 50   # release time vs Mondrian on synthetic records

Protocols: "cv on release" = stratified 10-fold CV on the released table (the paper's); "holdout" (train release /
test original) = for each of 10 stratified folds, release the other nine folds (KTFS selection included) and test on the
held-out original rows. Generalized values enter the classifiers as interval midpoints.
"""
from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
from sklearn.metrics import silhouette_score
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.naive_bayes import GaussianNB
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

import anon_sql

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "pima" / "pima-indians-diabetes.data.csv"
PIMA = ["preg", "plas", "pres", "skin", "insu", "mass", "pedi", "age"]
TARGET = "class"
NUM = r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
RANGE = re.compile(rf"^\[({NUM})-({NUM})\]$")


def policy(name: str, source: str, k: int, seed: int, method: str, quasi: list[str] | None = None) -> dict:
    """UPA with KTFS (δ = 0.2, age vulnerable, age rule), or Mondrian over ``quasi`` (others insensitive)."""
    if method == "upa":
        attrs = {q: {"role": "quasi"} for q in PIMA}
        params = {"quasi": "ktfs", "target": TARGET, "delta": 0.2, "vulnerable": ["age"],
                  "generalize_unique_only": ["age"]}
    else:
        attrs = {q: {"role": "quasi"} for q in quasi}
        params = {}
    return {"name": name, "source": source, "method": method, "seed": seed, "default_role": "insensitive",
            "attributes": attrs, "privacy": {"k": k}, "method_params": params}


def bounds(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Released labels ("[lo-hi]" or a number) → (lo, hi) arrays."""
    text = values.astype(str)
    m = text.str.extract(RANGE)
    single = pd.to_numeric(text, errors="coerce")
    lo = pd.to_numeric(m[0], errors="coerce").fillna(single).to_numpy(float)
    hi = pd.to_numeric(m[1], errors="coerce").fillna(single).to_numpy(float)
    return lo, hi


def midpoints(released: pd.DataFrame) -> np.ndarray:
    cols = []
    for a in PIMA:
        lo, hi = bounds(released[a])
        cols.append((lo + hi) / 2)
    return np.column_stack(cols)


def kl_divergence(orig: pd.DataFrame, released: pd.DataFrame, quasi: list[str]) -> float:
    """spec/06: P = distribution of the original QI tuples; Q spreads each class's records uniformly over the
    distinct original tuples inside its box; KL = Σ P ln(P/Q) (nats). Over one attribute: per-attribute KL."""
    n = len(orig)
    tuples, counts = np.unique(orig[quasi].to_numpy(float), axis=0, return_counts=True)
    cls = released.groupby("ec_id")
    size = cls.size().to_numpy(float)
    first = cls[quasi].first()
    inside = np.ones((len(first), len(tuples)), dtype=bool)
    for j, a in enumerate(quasi):
        lo, hi = bounds(first[a])
        inside &= (lo[:, None] <= tuples[None, :, j]) & (tuples[None, :, j] <= hi[:, None])
    cover = inside.sum(axis=1)
    q = (inside * (size / (n * cover))[:, None]).sum(axis=0)
    p = counts / n
    return float(np.sum(p * np.log(p / q)))


def silhouette(orig: pd.DataFrame, ec: np.ndarray, quasi: list[str]) -> float:
    X = StandardScaler().fit_transform(orig[quasi].to_numpy(float))
    return float(silhouette_score(X, ec))


def classifiers(seed: int) -> dict:
    return {"C4.5": DecisionTreeClassifier(criterion="entropy", random_state=seed), "NB": GaussianNB()}


def original_with_ec(con, name: str, source: pd.DataFrame) -> pd.DataFrame:
    """Source rows in the source view's row order (row number over all columns) with their released class."""
    src = source.sort_values(list(source.columns), kind="stable").reset_index(drop=True)
    src["__row"] = np.arange(1, len(src) + 1)
    assign = con.execute(f'SELECT * FROM "{name}__assignment"').df()
    return src.merge(assign, on="__row")


def run(ks: list[int], seed: int, folds: int) -> None:
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE pima AS SELECT * FROM read_csv(?, header = false, names = ?)",
                [str(DATA), PIMA + [TARGET]])
    orig = con.execute("SELECT * FROM pima").df()
    X0, y0 = orig[PIMA].to_numpy(float), orig[TARGET].to_numpy()
    skf = StratifiedKFold(folds, shuffle=True, random_state=seed)
    splits = list(skf.split(X0, y0))
    base = {n: 100 * float(np.mean(cross_val_score(c, X0, y0, cv=skf))) for n, c in classifiers(seed).items()}

    rows = []
    selected = None
    for k in ks:
        for method in ("upa", "mondrian"):
            name = f"{method}_{k}"
            t = time.perf_counter()
            rel = anon_sql.release(con, policy(name, "pima", k, seed, method, selected))
            seconds = time.perf_counter() - t
            if method == "upa":
                selected = rel.plan["released_quasi"]
            released = con.execute(f'SELECT * FROM "{name}"').df()
            joined = original_with_ec(con, name, orig)
            row = {"k": k, "method": method, "classes": len(rel.classes), "DM": rel.metrics["discernibility"],
                   "C_AVG": rel.metrics["cavg"], "KL": kl_divergence(orig, released, selected),
                   "KL attr": float(np.mean([kl_divergence(orig, released, [a]) for a in selected])),
                   "silhouette": silhouette(joined, joined["ec_id"].to_numpy(), selected), "seconds": seconds}
            Xr, yr = midpoints(released), released[TARGET].to_numpy()
            for n, c in classifiers(seed).items():
                row[f"{n} cv"] = 100 * float(np.mean(cross_val_score(c, Xr, yr, cv=skf)))
            # honest protocol: release the training folds only, test on the held-out original rows
            acc = {n: [] for n in classifiers(seed)}
            for i, (train, test) in enumerate(splits):
                part = orig.iloc[train].reset_index(drop=True)
                con.register("__fold", part)
                con.execute("CREATE OR REPLACE TABLE pima_fold AS SELECT * FROM __fold")
                con.unregister("__fold")
                fname = f"{method}_{k}_fold"
                anon_sql.release(con, policy(fname, "pima_fold", k, seed, method, selected), replace=True)
                fr = con.execute(f'SELECT * FROM "{fname}"').df()
                for n, c in classifiers(seed).items():
                    c.fit(midpoints(fr), fr[TARGET].to_numpy())
                    acc[n].append(c.score(X0[test], y0[test]))
            for n in acc:
                row[f"{n} holdout"] = 100 * float(np.mean(acc[n]))
            rows.append(row)
            print(f"k={k} {method}: {seconds:.2f}s", flush=True)
    out = pd.DataFrame(rows)
    print(f"\nselected (KTFS, δ = 0.2, age vulnerable): {selected}")
    print(f"original data, {folds}-fold CV: C4.5 {base['C4.5']:.2f}  NB {base['NB']:.2f}\n")
    print(markdown(out))


def markdown(frame: pd.DataFrame) -> str:
    """A markdown table (numbers: 4 significant digits, DM as an integer)."""
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.0f}" if v >= 1000 else f"{v:.4g}"
        return str(v)
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def scale(n: int, ks: list[int], seed: int) -> None:
    """Release time of UPA vs Mondrian on n seeded uniform records with 3 numeric quasi-identifiers."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"age": rng.integers(17, 78, n), "hours": rng.integers(0, 100, n),
                          "x": np.round(rng.uniform(0, 10, n), 2)})
    con = duckdb.connect()
    anon_sql.install(con)
    con.register("__frame", frame)
    con.execute("CREATE TABLE synth AS SELECT * FROM __frame")
    print("| records | k | UPA (s) | Mondrian (s) | centroids | Lloyd iterations | merges | classes UPA / Mondrian |")
    print("|---|---|---|---|---|---|---|---|")
    for k in ks:
        pol = {"name": "synth_upa", "source": "synth", "method": "upa", "seed": seed, "privacy": {"k": k},
               "attributes": {a: {"role": "quasi"} for a in frame.columns}}
        t = time.perf_counter()
        rel = anon_sql.release(con, pol, replace=True)
        upa = time.perf_counter() - t
        t = time.perf_counter()
        mon = anon_sql.release(con, {**pol, "name": "synth_mondrian", "method": "mondrian"}, replace=True)
        mondrian = time.perf_counter() - t
        p = rel.plan
        print(f"| {n} | {k} | {upa:.2f} | {mondrian:.2f} | {p['centroids']} | {p['kmeans_iterations']} | "
              f"{p['merges']} | {p['clusters']} / {len(mon.classes)} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, nargs="+", default=[5, 10, 25, 50, 100])
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--folds", type=int, default=10)
    ap.add_argument("--scale", type=int, default=0, help="instead: time UPA vs Mondrian on this many records")
    args = ap.parse_args()
    if args.scale:
        scale(args.scale, args.k, args.seed)
    else:
        run(args.k, args.seed, args.folds)


if __name__ == "__main__":
    main()
