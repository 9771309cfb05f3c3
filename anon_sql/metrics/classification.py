"""Classification utility (spec/06, seeds 001–003): scikit-learn classifiers on the release beside the original.

Protocols, each reported with the original-data baseline under the same split:

* ``cv`` — stratified k-fold cross-validation on the released table (the papers' protocol);
* ``holdout`` — a seeded stratified split of the *source* rows: train on the released version of the training rows
  (rows of suppressed classes left out), test on the original values of the held-out rows (the honest protocol).
  The release was computed once on all rows, so generalization boundaries did see the held-out rows; no held-out
  record is ever trained on.

Quasi-identifiers are encoded in one space for both sides (metrics/features.py): numbers by value / interval
midpoint, categories by taxonomy position / mean leaf position; other columns as numbers or ordinal codes.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from sqlglot import exp

from ..errors import PolicyError
from ..common.sqlbuild import alias, col, render
from ..common.columns import is_numeric
from .data import ReleaseData, varchar
from .features import assignment_rows, encode_original, encode_released, generalize

PROTOCOLS = ("cv", "holdout")


def _models(seed: int) -> dict[str, Callable[[], Any]]:
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC
    from sklearn.tree import DecisionTreeClassifier

    imp = lambda: SimpleImputer(strategy="median", keep_empty_features=True)  # noqa: E731
    return {
        "tree_gini": lambda: make_pipeline(imp(), DecisionTreeClassifier(criterion="gini", random_state=seed)),
        "c45": lambda: make_pipeline(imp(), DecisionTreeClassifier(criterion="entropy", random_state=seed)),
        "naive_bayes": lambda: make_pipeline(imp(), GaussianNB()),
        "svm": lambda: make_pipeline(imp(), StandardScaler(), SVC(random_state=seed)),
        "random_forest": lambda: make_pipeline(imp(), RandomForestClassifier(n_estimators=100, random_state=seed,
                                                                             n_jobs=2)),
        "mlp": lambda: make_pipeline(imp(), StandardScaler(), MLPClassifier(hidden_layer_sizes=(32,), max_iter=300,
                                                                           random_state=seed)),
    }


MODELS = ("tree_gini", "c45", "naive_bayes", "svm", "random_forest", "mlp")


def _features(d: ReleaseData, target: str, features: Sequence[str] | None) -> list[str]:
    policy = d.policy
    columns = [c for c in d.source.columns if c in policy.attributes]
    if target not in columns:
        raise PolicyError(f"classification target {target!r} is not a column of the release ({columns})")
    if target in policy.quasi:
        raise PolicyError(f"classification target {target!r} is a quasi-identifier (generalized in the release); "
                          "choose a sensitive or insensitive column, e.g. salary-class on Adult")
    if features is None:
        features = [c for c in columns if c != target and policy.attributes[c].role != "identifier"]
    bad = [c for c in features if c not in columns or c == target or policy.attributes[c].role == "identifier"]
    if bad:
        raise PolicyError(f"classification features {bad} are not released non-identifier columns other than the "
                          f"target; choose among {[c for c in columns if c != target]}")
    return list(features)


def _rows(d: ReleaseData, cols: Sequence[str]) -> pd.DataFrame:
    """Source rows: original values (QIs as text) of ``cols``, their released QI values ``r:<qi>`` (None when the row's
    class was suppressed) and the record weight ``__w``."""
    quasi = [c for c in cols if c in d.quasi]
    others = [c for c in cols if c not in d.quasi]
    if d.is_levels:
        items = [alias(varchar(col(q)), f"q{d.quasi.index(q)}") for q in d.quasi]
        items += [alias(col(c), f"x{i}") for i, c in enumerate(others)]
        if d.policy.count_column:
            items.append(alias(col(d.policy.count_column), "__w"))
        frame = d.con.execute(render(exp.select(*items).from_(d.source.relation.copy()))).df()
        released = pd.DataFrame({f"q{i}": generalize(d, q, frame[f"q{i}"]) for i, q in enumerate(d.quasi)})
        kept = released.merge(d.tuples[[f"q{i}" for i in range(len(d.quasi))]].assign(__kept=True),
                              how="left", on=[f"q{i}" for i in range(len(d.quasi))])["__kept"].fillna(False)
        kept = kept.to_numpy(dtype=bool)
    else:
        frame = assignment_rows(d, others + ([d.policy.count_column] if d.policy.count_column else []))
        if d.policy.count_column:
            frame = frame.rename(columns={f"x{len(others)}": "__w"})
        values = d.groups.drop_duplicates("e").set_index("e")
        released = pd.DataFrame({f"q{i}": frame["__ec"].map(values[f"q{i}"]) for i in range(len(d.quasi))})
        kept = np.ones(len(frame), dtype=bool)   # assignment_rows leaves out suppressed classes
    out = pd.DataFrame({c: frame[f"x{i}"] for i, c in enumerate(others)})
    for q in quasi:
        i = d.quasi.index(q)
        out[q] = frame[f"q{i}"].astype(object).where(frame[f"q{i}"].notna(), None)
        out["r:" + q] = released[f"q{i}"].astype(object).where(kept, None)
    out["__kept"] = kept
    out["__w"] = frame["__w"].to_numpy(dtype=np.int64) if "__w" in frame else 1
    return out


def _release_rows(d: ReleaseData, cols: Sequence[str], target: str) -> pd.DataFrame:
    """The released table's rows (flagged noise left out): QIs as text, other columns as released, weight ``__w``."""
    items = [alias(varchar(col(c)) if c in d.quasi else col(c), f"c{i}") for i, c in enumerate(cols)]
    items.append(alias(col(target), "__y"))
    items.append(alias(col(d.policy.count_column), "__w") if d.policy.count_column else alias(exp.Literal.number(1),
                                                                                                "__w"))
    q = exp.select(*items).from_(d.names.table.copy())
    if d.noise_flag:
        q = q.where(exp.Not(this=exp.Coalesce(this=col(d.noise_flag), expressions=[exp.false()])))
    frame = d.con.execute(render(q)).df()
    out = frame.rename(columns={f"c{i}": c for i, c in enumerate(cols)})
    return out


class _Encoder:
    """Turns original or released rows into one numeric matrix (QIs via the cover parser, others as codes)."""

    def __init__(self, d: ReleaseData, cols: Sequence[str], frames: Sequence[pd.DataFrame]):
        self.d, self.cols = d, list(cols)
        self.categories = {}
        for c in cols:
            if c in d.quasi or is_numeric(d.source.types.get(c, "")):
                continue
            values = pd.concat([f[c] for f in frames if c in f], ignore_index=True)
            self.categories[c] = pd.Index(pd.unique(values.dropna().astype(str)))

    def matrix(self, frame: pd.DataFrame, released: bool) -> np.ndarray:
        out = []
        for c in self.cols:
            if c in self.d.quasi:
                v = encode_released(self.d, c, frame[c]) if released else encode_original(self.d, c, frame[c])
            elif c in self.categories:
                v = self.categories[c].get_indexer(frame[c].astype(object).where(frame[c].notna(), None)
                                                   .astype(str)).astype(float)
                v[frame[c].isna().to_numpy()] = np.nan
            else:
                v = pd.to_numeric(frame[c], errors="coerce").to_numpy(dtype=float)
            out.append(v)
        return np.column_stack(out)


def _repeat(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows with a count column stand for several records: repeat them (vectorized)."""
    w = np.asarray(w, dtype=np.int64)
    if (w == 1).all():
        return x, y
    idx = np.repeat(np.arange(len(w)), np.maximum(w, 0))
    return x[idx], y[idx]


def _subsample(n: int, sample: int | None, seed: int) -> np.ndarray:
    if sample is None or sample >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=sample, replace=False))


def classify(con, release_name: str | ReleaseData, target: str, models: Sequence[str] | None = None,
             protocols: Sequence[str] = PROTOCOLS, folds: int = 10, test_size: float = 1 / 3,
             sample: int | None = None, features: Sequence[str] | None = None,
             seed: int | None = None) -> pd.DataFrame:
    """Accuracy of each classifier and protocol on the release and on the original data (same folds / split).

    ``sample`` draws a seeded subsample of rows first (SVM and MLP are slow on tens of thousands of rows).
    Returns one row per (model, protocol): accuracy_original, accuracy_release, difference, train/test sizes.
    """
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():   # an MLP that stops at max_iter still gives its (reported) accuracy
        warnings.simplefilter("ignore", ConvergenceWarning)
        return _classify(con, release_name, target, models, protocols, folds, test_size, sample, features, seed)


def _check(names: list[str], protocols: Sequence[str], folds: int, test_size: float) -> None:
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        raise PolicyError(f"unknown classifier(s) {unknown}; choose among {', '.join(MODELS)}")
    bad = [p for p in protocols if p not in PROTOCOLS]
    if bad:
        raise PolicyError(f"unknown protocol(s) {bad}; choose among {', '.join(PROTOCOLS)}")
    if not isinstance(folds, int) or folds < 2:
        raise PolicyError(f"folds must be an integer >= 2 (the papers use 10), got {folds!r}")
    if not 0 < test_size < 1:
        raise PolicyError(f"test_size must be a fraction in (0, 1) (spec: 1/3), got {test_size!r}")


def _classify(con, release_name, target, models, protocols, folds, test_size, sample, features, seed) -> pd.DataFrame:
    d = release_name if isinstance(release_name, ReleaseData) else ReleaseData.from_catalog(con, release_name)
    seed = d.policy.seed if seed is None else int(seed)
    names = list(models or MODELS)
    _check(names, protocols, folds, test_size)
    cols = _features(d, target, features)
    rows = _rows(d, cols + [target])
    rows = rows.iloc[_subsample(len(rows), sample, seed)].reset_index(drop=True)
    rel = _release_rows(d, cols, target)
    rel = rel.iloc[_subsample(len(rel), sample, seed)].reset_index(drop=True)
    enc = _Encoder(d, cols, [rows, rel])
    labels = pd.Index(pd.unique(pd.concat([rows[target], rel["__y"]]).astype(str)))
    y_orig = labels.get_indexer(rows[target].astype(str))
    factories = _models(seed)
    out = []
    if "cv" in protocols:
        y_rel = labels.get_indexer(rel["__y"].astype(str))
        out += _cv(enc, rows, rel, y_orig, y_rel, names, factories, folds, seed, target)
    if "holdout" in protocols:
        out += _holdout(d, enc, rows, cols, y_orig, names, factories, test_size, seed)
    return pd.DataFrame(out)


def _cv(enc, rows, rel, y_orig, y_rel, names, factories, folds, seed, target) -> list[dict[str, Any]]:
    """Stratified k-fold CV on the release and, with the same splitter, on the original rows."""
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    xo, yo = _repeat(enc.matrix(rows, released=False), y_orig, rows["__w"].to_numpy())
    xr, yr = _repeat(enc.matrix(rel, released=True), y_rel, rel["__w"].to_numpy())
    k = min(folds, _min_class(yo), _min_class(yr))
    if k < 2:
        raise PolicyError(f"target {target!r} has a class with fewer than 2 records: stratified CV impossible")
    cv = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    out = []
    for m in names:
        a0 = cross_val_score(factories[m](), xo, yo, cv=cv).mean()
        a1 = cross_val_score(factories[m](), xr, yr, cv=cv).mean()
        out.append(_row(m, f"cv{k}", a0, a1, len(yr) * (k - 1) // k, len(yr) // k))
    return out


def _holdout(d, enc, rows, cols, y_orig, names, factories, test_size, seed) -> list[dict[str, Any]]:
    """Split the source rows; train on the released version of the training rows, test on original held-out rows."""
    from sklearn.model_selection import train_test_split

    strat = y_orig if _min_class(y_orig) >= 2 else None
    train, test = train_test_split(np.arange(len(rows)), test_size=test_size, random_state=seed, stratify=strat)
    train_rel = train[rows["__kept"].to_numpy()[train]]
    released = rows.iloc[train_rel].assign(**{q: rows["r:" + q].iloc[train_rel] for q in cols if q in d.quasi})
    x_orig = enc.matrix(rows, released=False)
    w = rows["__w"].to_numpy()
    xo_tr, yo_tr = _repeat(x_orig[train], y_orig[train], w[train])
    xr_tr, yr_tr = _repeat(enc.matrix(released, released=True), y_orig[train_rel], w[train_rel])
    x_te, y_te = _repeat(x_orig[test], y_orig[test], w[test])
    out = []
    for m in names:
        a0 = factories[m]().fit(xo_tr, yo_tr).score(x_te, y_te)
        a1 = factories[m]().fit(xr_tr, yr_tr).score(x_te, y_te)
        out.append(_row(m, "holdout", a0, a1, len(yr_tr), len(y_te)))
    return out


def _min_class(y: np.ndarray) -> int:
    return int(np.unique(y, return_counts=True)[1].min()) if len(y) else 0


def _row(model: str, protocol: str, original: float, released: float, n_train: int, n_test: int) -> dict[str, Any]:
    return {"model": model, "protocol": protocol, "accuracy_original": float(original),
            "accuracy_release": float(released), "difference": float(released - original), "train": int(n_train),
            "test": int(n_test)}
