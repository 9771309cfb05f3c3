"""Adaptive generalization (seed 002) against Mondrian on Adult: IV-weighted distortion and coverage loss, run time,
re-identification probability under linking attacks, and classification accuracy (train 2/3 anonymized, test 1/3).

    python bench/bench_adaptive.py                       # every table, k = 5 10 50 100 150 200
    python bench/bench_adaptive.py --k 5 10 --skip-classification

Metrics are recomputed from the released values (released table ⋈ EC values ⋈ taxonomies), not taken from the method:
a taxonomy node counts at its level and covers its leaves; a Mondrian range "[lo-hi]" counts at the lowest level where
lo and hi share an ancestor and covers the leaves inside it.
"""
from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split
from sklearn.svm import LinearSVC
from sklearn.tree import DecisionTreeClassifier
from sqlglot import exp

import anon_sql
from anon_sql.catalog import store as catalog
from anon_sql.analytics.vulnerability import identity_vulnerability
from anon_sql.common.sqlbuild import alias, col, render, table
from anon_sql.data.builtin_taxonomies import load_builtin_taxonomy as builtin

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult" / "adult.csv"
QIS = ["age", "sex", "race", "native-country"]
SA = "salary-class"
TAX = {q: builtin(f"adult_{q}") for q in QIS}
RANGE = re.compile(r"^\[?(-?\d+(?:\.\d+)?)-(-?\d+(?:\.\d+)?)\]?$")
METHODS = {  # label → (method, method_params)
    "adaptive": ("adaptive", {}),
    "adaptive, IV-weighted similarity": ("adaptive", {"similarity_weights": "iv"}),
    "lower level only (boost 0)": ("adaptive", {"boost": 0}),
    "lower level only, IV-weighted similarity": ("adaptive", {"boost": 0, "similarity_weights": "iv"}),
    "Mondrian": ("mondrian", {}),
}
PLAIN = {  # --plain: the literal encoding of spec/03 §2 (min-max numbers, one-hot categories, no taxonomy ancestors)
    "lower level only, plain similarity": ("adaptive", {"boost": 0, "similarity": "plain"}),
    "adaptive, plain similarity": ("adaptive", {"similarity": "plain"}),
}


def policy(name: str, source: str, k: int, method: str, params: dict, seed: int) -> dict:
    return {"name": name, "source": source, "method": method, "seed": seed, "default_role": "insensitive",
            "attributes": {**{q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in QIS}, SA: {"role": "sensitive"}},
            "privacy": {"k": k}, "method_params": params}


def per_record(con, name: str) -> pd.DataFrame:
    """Original QIs, sensitive value, ec_id and released QIs ("r_" + QI) of every record, in row-key order."""
    query = (exp.select(*[col(q, "s") for q in QIS], col(SA, "s"), col("ec_id", "a"),
                        *[alias(col(q, "v"), "r_" + q) for q in QIS])
             .from_(table(name + "__source", alias="s"))
             .join(table(name + "__assignment", alias="a"), on=exp.EQ(this=col("__row", "s"), expression=col("__row", "a")))
             .join(table(name + "__ec_values", alias="v"), on=exp.EQ(this=col("ec_id", "a"), expression=col("ec_id", "v")))
             .order_by(col("__row", "s")))
    return con.execute(render(query)).df()


# -- released value → level, covered leaves -------------------------------------------------------------------------
class Domain:
    """One QI's taxonomy: which leaves each released value (node or numeric range) covers, and at which level."""

    def __init__(self, tax):
        self.tax = tax
        lv = tax.levels
        self.leaves = lv["level0"].to_numpy(dtype=object)
        self.numeric = pd.to_numeric(pd.Series(self.leaves), errors="coerce").to_numpy()
        self.node = {}                                      # value → (level, boolean mask over leaves)
        for level in range(tax.height, -1, -1):              # the lowest level wins for a label used twice
            for value, idx in lv.groupby(f"level{level}").indices.items():
                mask = np.zeros(len(lv), dtype=bool)
                mask[idx] = True
                self.node[value] = (level, mask)

    def cover(self, value) -> tuple[int, np.ndarray]:
        if value is None or value is pd.NA:
            return 0, self.leaves == None  # noqa: E711  (NULL covers NULL only)
        if value in self.node:
            return self.node[value]
        m = RANGE.match(str(value))
        if not m:
            raise ValueError(f"released value {value!r} is neither a taxonomy node nor a range")
        lo, hi = float(m.group(1)), float(m.group(2))
        mask = (self.numeric >= lo) & (self.numeric <= hi)
        anc = self.tax.levels
        ilo, ihi = np.flatnonzero(self.numeric == lo)[0], np.flatnonzero(self.numeric == hi)[0]
        level = next(L for L in range(self.tax.height + 1)
                     if anc[f"level{L}"].iloc[ilo] == anc[f"level{L}"].iloc[ihi])
        return level, mask


DOMAINS = {q: Domain(TAX[q]) for q in QIS}


def information_loss(df: pd.DataFrame, iv: dict[str, float]) -> tuple[float, float]:
    """IV-weighted distortion DM and coverage loss (spec/06), averaged over records."""
    w = np.array([iv[q] for q in QIS]) / sum(iv.values())
    dm = np.zeros(len(df))
    cov = np.zeros(len(df))
    for j, q in enumerate(QIS):
        d = DOMAINS[q]
        values = pd.Series(df["r_" + q].astype(object)).where(df["r_" + q].notna(), None)
        uniq = values.drop_duplicates()
        level = {v: d.cover(v)[0] for v in uniq}
        leaves = {v: int(d.cover(v)[1].sum()) for v in uniq}
        dm += values.map(level).to_numpy(dtype=float) / d.tax.height * w[j]
        base = len(d.leaves)
        cov += (values.map(leaves).to_numpy(dtype=float) - 1) / (base - 1) * w[j]
    return float(dm.mean()), float(cov.mean())


def reidentification(df: pd.DataFrame, known: list[str]) -> tuple[float, float]:
    """Linking attack knowing ``known``: per record 1 / #released records whose values cover its original values."""
    orig = df[known].astype(str)
    rel = df[["r_" + q for q in known]].astype(object)
    x, x_inv = np.unique(orig.to_numpy(dtype=str), axis=0, return_inverse=True)
    y_frame = rel.astype(str).value_counts().reset_index()
    y, n_y = y_frame[["r_" + q for q in known]].to_numpy(dtype=object), y_frame["count"].to_numpy()
    covers = []
    for j, q in enumerate(known):                          # per QI: original value × released value → covers?
        d = DOMAINS[q]
        xv, xi = np.unique(x[:, j], return_inverse=True)
        yv, yi = np.unique(y[:, j].astype(str), return_inverse=True)
        leaf_pos = pd.Index(d.leaves).get_indexer(xv)
        m = np.column_stack([d.cover(v)[1][leaf_pos] for v in yv])
        covers.append((m, xi, yi))
    count = np.empty(len(x))
    for s in range(0, len(x), 256):                        # chunks of distinct original tuples
        ok = np.ones((min(256, len(x) - s), len(y)), dtype=bool)
        for m, xi, yi in covers:
            ok &= m[np.ix_(xi[s:s + 256], yi)]
        count[s:s + 256] = ok @ n_y
    p = 1.0 / count[x_inv.ravel()]
    return float(p.mean()), float(p.std())


# -- classification ---------------------------------------------------------------------------------------------------
def features(df: pd.DataFrame, prefix: str, age_mid: float) -> np.ndarray:
    """Age as the midpoint of its interval ('*' → the middle of the domain), categorical QIs as the uniform
    distribution over the leaves their value covers (a leaf → one-hot)."""
    age = df[prefix + "age"].astype(str)
    parts = [age.str.extract(RANGE).astype(float).mean(axis=1).fillna(pd.to_numeric(age, errors="coerce"))
             .fillna(age_mid).to_numpy()[:, None] / 100.0]
    for q in QIS[1:]:
        d = DOMAINS[q]
        values = df[prefix + q].astype(str)
        uniq = values.unique()
        rows = {v: d.cover(v)[1] / max(d.cover(v)[1].sum(), 1) for v in uniq}
        parts.append(np.vstack(values.map(rows).to_numpy()))
    return np.hstack(parts)


def accuracy(x_train, y_train, x_test, y_test, seed: int) -> dict[str, float]:
    models = {"CT": DecisionTreeClassifier(random_state=seed),
              "SVM": LinearSVC(random_state=seed),
              "RF": RandomForestClassifier(n_estimators=100, random_state=seed, n_jobs=2)}
    return {name: float((m.fit(x_train, y_train).predict(x_test) == y_test).mean()) for name, m in models.items()}


# -- runs --------------------------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, nargs="+", default=[5, 10, 50, 100, 150, 200])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--iv-trees", type=int, default=100)
    ap.add_argument("--skip-classification", action="store_true")
    ap.add_argument("--plain", action="store_true", help="also the plain-similarity variants")
    args = ap.parse_args()
    methods = {**METHODS, **PLAIN} if args.plain else METHODS
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE adult AS SELECT * FROM read_csv(?, delim=';')", [str(DATA)])

    t = time.perf_counter()
    iv_df = identity_vulnerability(con, "adult", QIS, SA, seed=args.seed, n_estimators=args.iv_trees)
    iv_seconds = time.perf_counter() - t
    catalog.store_vulnerability(con, "adult", SA, iv_df)
    iv = dict(zip(iv_df["attribute"], iv_df["iv"]))
    print(f"IV ({args.iv_trees} trees, seed {args.seed}, {iv_seconds:.1f} s, OOB accuracy "
          f"{iv_df.attrs['oob_score']:.3f}): " + ", ".join(f"{a} {v:.3f} (importance {i:.4f} ± {s:.4f})" for a, v, i, s
                                                           in iv_df[["attribute", "iv", "importance",
                                                                     "importance_std"]].itertuples(index=False)))

    rows = []
    for k in args.k:
        for label, (method, params) in methods.items():
            name = f"b_{method}_{k}_{len(rows)}"
            t = time.perf_counter()
            rel = anon_sql.release(con, policy(name, "adult", k, method, params, args.seed))
            seconds = time.perf_counter() - t
            df = per_record(con, name)
            dm, cov = information_loss(df, iv)
            p2 = reidentification(df, ["age", "native-country"])
            p4 = reidentification(df, QIS)
            extra = rel.info.get("diverse_records")
            rows.append({"k": k, "method": label, "classes": len(rel.classes), "DM": dm, "coverage": cov,
                         "seconds": seconds, "p(age,country)": p2, "p(all QIs)": p4,
                         "diverse records": "" if extra is None else f"{extra / rel.records_in:.1%}"})
            print(f"k={k} {label}: {len(rel.classes)} classes, DM {dm:.4f}, coverage {cov:.4f}, {seconds:.2f} s, "
                  f"p2 {p2[0]:.5f}±{p2[1]:.5f}, p4 {p4[0]:.5f}±{p4[1]:.5f}", flush=True)

    print("\n| k | method | ECs | DM (IV) | coverage loss (IV) | release s | P re-id age+country mean (sd) | "
          "P re-id all QIs mean (sd) | records in diverse classes |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['k']} | {r['method']} | {r['classes']} | {r['DM']:.4f} | {r['coverage']:.4f} | "
              f"{r['seconds']:.2f} | {r['p(age,country)'][0]:.5f} ({r['p(age,country)'][1]:.5f}) | "
              f"{r['p(all QIs)'][0]:.5f} ({r['p(all QIs)'][1]:.5f}) | {r['diverse records']} |")

    if not args.skip_classification:
        classify(con, args)
    print(f"\ncommand: python bench/bench_adaptive.py --k {' '.join(map(str, args.k))} --seed {args.seed} "
          f"--iv-trees {args.iv_trees}{' --skip-classification' if args.skip_classification else ''}"
          f"{' --plain' if args.plain else ''}")


def classify(con, args) -> None:
    """Train on the anonymized 2/3 (levels and IV learned there), test on the original 1/3."""
    data = con.execute("SELECT * FROM adult").df()
    train, test = train_test_split(data, test_size=1 / 3, random_state=args.seed, stratify=data[SA])
    con.register("train_frame", train)
    con.execute("CREATE TABLE adult_train AS SELECT * FROM train_frame")
    y_test = test[SA].to_numpy()
    mid = float((data["age"].min() + data["age"].max()) / 2)
    x_test = features(test, "", mid)
    base = accuracy(features(train, "", mid), train[SA].to_numpy(), x_test, y_test, args.seed)
    print("\n| k | method | CT | SVM (linear) | RF |")
    print("| ---: | --- | ---: | ---: | ---: |")
    majority = float((y_test == pd.Series(train[SA]).mode()[0]).mean())
    print(f"| – | original data (majority class: {majority:.4f}) | {base['CT']:.4f} | {base['SVM']:.4f} | "
          f"{base['RF']:.4f} |")
    for k in args.k:
        for label in ("adaptive", "adaptive, IV-weighted similarity", "lower level only (boost 0)", "Mondrian"):
            method, params = METHODS[label]
            name = f"c_{method}_{k}_{len(label)}"
            anon_sql.release(con, policy(name, "adult_train", k, method, params, args.seed))
            df = per_record(con, name)
            acc = accuracy(features(df, "r_", mid), df[SA].to_numpy(), x_test, y_test, args.seed)
            print(f"| {k} | {label} | {acc['CT']:.4f} | {acc['SVM']:.4f} | {acc['RF']:.4f} |", flush=True)


if __name__ == "__main__":
    main()
