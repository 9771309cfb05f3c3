"""``method = "adaptive"``: identity-vulnerability- and diversity-aware adaptive generalization (seed 002, spec/03).

Steps (the paper's Algorithms 1–2 are images missing from its text; this is the project's reading of the prose):
1. identity vulnerability IV of every QI: given in the policy, reused from ``anon.identity_vulnerability``, or
   computed with a seeded random forest (:mod:`anon_sql.analytics.vulnerability`) and stored there;
2. classes of k cosine-similar users (:mod:`anon_sql.analytics.similarity`);
3. Simpson diversity D and evenness E of each class's sensitive values (``udfs/kernels.py``); a class is diverse when
   D >= T_d and E >= T_e;
4. per class and QI a taxonomy level: the lowest level at which the class shares one value ("lower level"), raised by
   ``boost`` levels (capped at the top) for the QIs with IV at or above the median when the class is not diverse;
5. classes whose released values coincide merge into one equivalence class (so the release is k-anonymous).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from sqlglot import exp

from ..catalog import store as catalog
from ..errors import PolicyError
from ..models import PrivacyModel
from ..models.base import find
from ..common.sqlbuild import alias, col, render, table as table_ref
from ..udfs import kernels
from ..policy.keys import MapOf, any_of, choice, integer, key, number
from . import register_method
from .base import ROW_ID, AssignmentPlan, Method, MethodContext, single_record_sensitive
from ..common.columns import is_numeric
from .local_values import QIColumn, encode_categorical, lca_level

DIVERSITY, EVENNESS, BOOST = 1.75, 0.75, 1      # paper defaults T_d, T_e and one level up
IV_TREES = 100                                  # trees of the IV forest (paper: 500; the ranking is the same)
EPS = 1e-9


@dataclass
class AdaptiveResult:
    """Per similarity class (rows of the arrays, C classes) and per record: what :func:`adaptive_generalize` chose."""

    cls: np.ndarray          # similarity class of each record, 0 .. C−1
    ec: np.ndarray           # released equivalence class of each record, 1 .. (merged classes share one)
    sizes: np.ndarray        # records per similarity class
    diversity: np.ndarray    # Simpson D per class
    evenness: np.ndarray     # Simpson E per class
    diverse: np.ndarray      # D >= T_d and E >= T_e
    lower: np.ndarray        # C × Q lowest level at which the class shares one value
    levels: np.ndarray       # C × Q chosen level
    class_ec: np.ndarray     # EC of each similarity class
    values: pd.DataFrame     # ec_id + the released (text) value of every QI
    ec_diversity: np.ndarray  # Simpson D of each released EC (ec_id order 1, 2, ...)
    ec_evenness: np.ndarray

    def class_table(self, quasi: Sequence[str]) -> pd.DataFrame:
        """One row per similarity class: ec_id, size, D, E, diverse, chosen and lower level per QI."""
        out = pd.DataFrame({"class": np.arange(len(self.sizes)), "ec_id": self.class_ec, "size": self.sizes,
                            "simpson_d": self.diversity, "simpson_e": self.evenness, "diverse": self.diverse})
        for j, q in enumerate(quasi):
            out[f"level__{q}"] = self.levels[:, j]
        for j, q in enumerate(quasi):
            out[f"lower__{q}"] = self.lower[:, j]
        return out

    def ec_table(self, quasi: Sequence[str]) -> pd.DataFrame:
        """One row per released EC: Simpson D and E of the EC, its similarity classes (all, non-diverse), levels."""
        parts = pd.DataFrame({"ec_id": self.class_ec, "nd": ~self.diverse}).groupby("ec_id")["nd"]
        first = np.unique(self.class_ec, return_index=True)[1]
        out = pd.DataFrame({"ec_id": self.class_ec[first], "simpson_d": self.ec_diversity,
                            "simpson_e": self.ec_evenness, "similarity_classes": parts.size().to_numpy(),
                            "non_diverse_classes": parts.sum().to_numpy().astype(np.int64)})
        for j, q in enumerate(quasi):
            out[f"level__{q}"] = self.levels[first, j]
        return out


def _segments(cls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by class and the start of each class's segment (classes 0 .. C−1 all present)."""
    order = np.argsort(cls, kind="stable")
    c = cls[order]
    return order, np.flatnonzero(np.r_[True, c[1:] != c[:-1]])


def class_levels(columns: Sequence[QIColumn], cls: np.ndarray) -> np.ndarray:
    """C × Q: per class and QI the lowest taxonomy level at which all its records share one value."""
    order, starts = _segments(cls)
    return np.column_stack([lca_level(c, order, starts) for c in columns]) if columns else np.zeros((len(starts), 0))


def heights(columns: Sequence[QIColumn]) -> np.ndarray:
    """Top level of every encoded QI."""
    return np.array([c.anc.shape[1] - 1 for c in columns], dtype=np.int64)


def boosted(iv: np.ndarray) -> np.ndarray:
    """QIs whose IV is at or above the median IV (they get higher-level generalization in non-diverse classes)."""
    iv = np.asarray(iv, dtype=np.float64)
    return iv >= np.median(iv) - EPS if len(iv) else np.zeros(0, dtype=bool)


def choose_levels(lower: np.ndarray, top: np.ndarray, iv: np.ndarray, diverse: np.ndarray, boost: int) -> np.ndarray:
    """Lower-level generalization for diverse classes; ``boost`` levels more (capped at the top) on the QIs with
    IV >= median for the others (spec/03 §4)."""
    raise_by = np.where(~np.asarray(diverse)[:, None] & boosted(iv)[None, :], int(boost), 0)
    return np.minimum(lower + raise_by, top[None, :])


def released_values(columns: Sequence[QIColumn], cls: np.ndarray, levels: np.ndarray) -> pd.DataFrame:
    """Per class: the ancestor at the chosen level of its first record, per QI (NULL stays NULL below the top)."""
    order, starts = _segments(cls)
    first = order[starts]
    out: dict[str, Any] = {}
    for j, c in enumerate(columns):
        lv = levels[:, j]
        code = c.anc[first, lv]
        text = np.empty(len(first), dtype=object)
        for level in np.unique(lv):
            m = lv == level
            text[m] = c.labels[level][code[m]]
        out[c.name] = text
    return pd.DataFrame(out)


def simpson(sensitive: np.ndarray, cls: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Simpson diversity D and evenness E of the sensitive codes of each class (the kernels of udfs/kernels.py)."""
    seg = kernels.group_counts(sensitive, cls, n_classes)
    return kernels.simpson_diversity_segments(*seg), kernels.simpson_evenness_segments(*seg)


def adaptive_generalize(columns: Sequence[QIColumn], sensitive: np.ndarray, cls: np.ndarray, iv: np.ndarray, *,
                        diversity: float = DIVERSITY, evenness: float = EVENNESS,
                        boost: int = BOOST) -> AdaptiveResult:
    """Algorithm 2 (spec/03 §3–4) over given similarity classes ``cls`` (0 .. C−1): levels, released values, merge."""
    cls = np.asarray(cls, dtype=np.int64)
    n_classes = int(cls.max()) + 1 if len(cls) else 0
    sizes = np.bincount(cls, minlength=n_classes)
    d, e = simpson(np.asarray(sensitive, dtype=np.int64), cls, n_classes)
    diverse = (d >= diversity - EPS) & (e >= evenness - EPS)
    lower = class_levels(columns, cls)
    levels = choose_levels(lower, heights(columns), iv, diverse, boost)
    per_class = released_values(columns, cls, levels)
    # classes with the same released values are one equivalence class (ids in order of first appearance)
    keys = per_class.astype(object).where(per_class.notna(), "\x00NULL")
    class_ec = (keys.groupby(list(keys.columns), sort=False, dropna=False).ngroup().to_numpy() + 1
                if len(keys.columns) else np.ones(n_classes, dtype=np.int64))
    first = np.unique(class_ec, return_index=True)[1]
    values = per_class.iloc[first].reset_index(drop=True)
    values.insert(0, "ec_id", class_ec[first])
    for c in columns:
        values[c.name] = values[c.name].astype("string")
    ec = class_ec[cls]
    ec_d, ec_e = simpson(np.asarray(sensitive, dtype=np.int64), ec - 1, len(first))
    return AdaptiveResult(cls, ec, sizes, d, e, diverse, lower, levels, class_ec, values, ec_d, ec_e)


# -- IV-weighted information loss (spec/06) ------------------------------------------------------------------------
def normalize_iv(iv: Sequence[float] | np.ndarray) -> np.ndarray:
    """IV clamped at 0 and scaled to sum 1 (equal weights when all are 0)."""
    v = np.clip(np.asarray(iv, dtype=np.float64), 0.0, None)
    return v / v.sum() if v.sum() > 0 else np.full(len(v), 1.0 / max(len(v), 1))


def iv_distortion(levels: np.ndarray, top: np.ndarray, iv: np.ndarray, sizes: np.ndarray | None = None) -> float:
    """DM = (1/N) Σ_r Σ_q (level/height)·IV_q (IV normalized); ``levels`` per record, or per class with ``sizes``."""
    lv = np.asarray(levels, dtype=np.float64)
    w = np.ones(len(lv)) if sizes is None else np.asarray(sizes, dtype=np.float64)
    frac = np.divide(lv, top[None, :], out=np.zeros_like(lv), where=top[None, :] > 0)
    return float((w @ (frac @ normalize_iv(iv))) / w.sum()) if w.sum() else 0.0


def iv_coverage_loss(coverage: np.ndarray, base: np.ndarray, iv: np.ndarray,
                     sizes: np.ndarray | None = None) -> float:
    """(1/N) Σ_r Σ_q IV_q (coverage − 1)/(base − 1), QIs with base <= 1 contributing 0; per record or per class."""
    cov = np.asarray(coverage, dtype=np.float64)
    base = np.asarray(base, dtype=np.float64)
    w = np.ones(len(cov)) if sizes is None else np.asarray(sizes, dtype=np.float64)
    frac = np.divide(cov - 1.0, base[None, :] - 1.0, out=np.zeros_like(cov), where=base[None, :] > 1)
    return float((w @ (frac @ normalize_iv(iv))) / w.sum()) if w.sum() else 0.0


def coverage_at(columns: Sequence[QIColumn], cls: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """C × Q: leaves under the released node of each class (its first record's ancestor at the level)."""
    order, starts = _segments(cls)
    first = order[starts]
    return np.column_stack([_leaves(c, levels[:, j], first) for j, c in enumerate(columns)])


def _leaves(c: QIColumn, level: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Leaves under the ancestor at ``level`` of each row in ``rows``."""
    code = c.anc[rows, level]
    out = np.empty(len(rows), dtype=np.int64)
    for lv in np.unique(level):
        m = level == lv
        out[m] = c.leaves[lv][code[m]]
    return out


# -- the method ----------------------------------------------------------------------------------------------------
class AdaptivePlan(AssignmentPlan):
    """An assignment plan whose per-similarity-class table (``info["class_table"]``, a report) stays out of
    ``as_dict``; its per-EC statistics are the typed ``ec_stats``."""

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        out.pop("class_table", None)
        return out


@register_method
class Adaptive(Method):
    """Vulnerability- and diversity-aware adaptive generalization (local recoding through taxonomies)."""

    name = "adaptive"
    plan_kind = "assignment"
    needs_taxonomies = True
    parameters = (
        key("iv", any_of(choice("computed", "recompute"), MapOf(number(ge=0), "qi")),
            "identity vulnerability per QI: `computed` (reuse anon.identity_vulnerability or compute it), "
            "`recompute`, or weights, e.g. { age = 0.6, sex = 0.4 }", "computed"),
        key("diversity", number(ge=1), "Simpson diversity threshold T_d (default: the policy's simpson, else 1.75)"),
        key("evenness", number(ge=0), "Simpson evenness threshold T_e (default: the policy's simpson, else 0.75)"),
        key("boost", integer(ge=0), "levels added for non-diverse classes", BOOST),
        key("similarity", choice("taxonomy", "plain"), "record similarity: values and their taxonomy ancestors, or "
            "min-max numbers and one-hot categories", "taxonomy"),
        key("similarity_weights", choice("equal", "iv"), "QI weights in the cosine: equal, or by IV", "equal"),
        key("iv_trees", integer(ge=1), "trees of the IV random forest", IV_TREES),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.iv, self.boost, self.iv_trees = self.param("iv"), self.param("boost"), self.param("iv_trees")
        self.similarity, self.similarity_weights = self.param("similarity"), self.param("similarity_weights")
        d, e = self.param("diversity"), self.param("evenness")
        self.diversity, self.evenness = (None if d is None else float(d)), (None if e is None else float(e))

    # -- inputs ----------------------------------------------------------------------------------------------------
    def _validate(self, ctx: MethodContext) -> tuple[int, str]:
        policy = ctx.policy
        sensitive = single_record_sensitive(policy, "adaptive", "measures the diversity of",
                                            "forms classes of k single records")
        return find(ctx.models, "k_anonymity").k, sensitive

    def thresholds(self, models: Sequence[PrivacyModel]) -> tuple[float, float]:
        """T_d, T_e: method_params, else the policy's simpson model, else the paper's 1.75 / 0.75."""
        model = find(models, "simpson")
        d = self.diversity if self.diversity is not None else (model and model.diversity) or DIVERSITY
        e = self.evenness if self.evenness is not None else (model and model.evenness) or EVENNESS
        return float(d), float(e)

    @staticmethod
    def _load(ctx: MethodContext, sa: str) -> tuple[pd.DataFrame, list[str]]:
        """``__row``, every QI as text (numeric ones also as DOUBLE) and the sensitive attribute, in row-key order."""
        view = table_ref(ctx.source_view)
        described = ctx.con.execute(render(exp.Describe(this=exp.select("*").from_(view.copy())))).fetchall()
        types = {r[0]: str(r[1]) for r in described}
        items: list[exp.Expression] = [alias(col(ROW_ID), "r"), alias(col(sa), "s")]
        numeric = []
        for i, q in enumerate(ctx.policy.quasi):
            items.append(alias(exp.Cast(this=col(q), to=exp.DataType.build("VARCHAR")), f"t{i}"))
            if is_numeric(types.get(q, "")):
                numeric.append(q)
                items.append(alias(exp.Cast(this=col(q), to=exp.DataType.build("DOUBLE")), f"n{i}"))
        frame = ctx.con.execute(render(exp.select(*items).from_(view).order_by(col(ROW_ID)))).df()
        return frame, numeric

    def _iv(self, ctx: MethodContext, sa: str) -> tuple[np.ndarray, dict[str, Any]]:
        quasi = list(ctx.policy.quasi)
        if isinstance(self.iv, Mapping):
            missing = [q for q in quasi if q not in self.iv]
            extra = [q for q in self.iv if q not in quasi]
            if missing or extra:
                raise PolicyError(f"method_params.iv must give a weight to every quasi-identifier {quasi}: "
                                  f"missing {missing}, not quasi-identifiers {extra}")
            raw = np.array([float(self.iv[q]) for q in quasi])   # non-negative numbers (the schema checked them)
            if raw.sum() <= 0:
                raise PolicyError("method_params.iv weights are all 0; give at least one positive weight")
            return raw / raw.sum(), {"iv_source": "policy"}
        source = str(ctx.policy.source)
        stored = None if self.iv == "recompute" else catalog.load_vulnerability(ctx.con, source, sa, quasi)
        if stored is not None:
            by = stored.set_index("attribute")
            info = {"iv_source": "catalog", "iv_oob_score": _float(by["oob_score"].iloc[0])}
            return normalize_iv(by.loc[quasi, "iv"].to_numpy()), info
        from ..analytics.vulnerability import identity_vulnerability

        ctx.progress("adaptive: identity vulnerability (random forest)")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            df = identity_vulnerability(ctx.con, ctx.source_view, quasi, sa, seed=ctx.policy.seed,
                                        n_estimators=self.iv_trees)
        catalog.store_vulnerability(ctx.con, source, sa, df, transaction=False)   # inside the release's
        info = {"iv_source": "computed", "iv_oob_score": _float(df.attrs.get("oob_score"))}
        weak = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        if weak:
            info["iv_warning"] = weak[0]
        by = df.set_index("attribute")
        return normalize_iv(by.loc[quasi, "iv"].to_numpy()), info

    # -- plan ------------------------------------------------------------------------------------------------------
    def plan(self, ctx: MethodContext) -> AdaptivePlan:
        from ..analytics.similarity import encode_qis, similarity_classes

        k, sa = self._validate(ctx)
        quasi = list(ctx.policy.quasi)
        t_d, t_e = self.thresholds(ctx.models)
        iv, iv_info = self._iv(ctx, sa)
        frame, numeric = self._load(ctx, sa)
        texts = pd.DataFrame({q: frame[f"t{i}"] for i, q in enumerate(quasi)})
        columns = [encode_categorical(q, texts[q], ctx.taxonomies[q]) for q in quasi]
        ctx.progress("adaptive: classes of similar users")
        numbers = {q: frame[f"n{i}"] for i, q in enumerate(quasi) if q in numeric}
        weights = dict(zip(quasi, iv)) if self.similarity_weights == "iv" else None
        features = encode_qis(texts, ctx.taxonomies, numbers, use_taxonomy=self.similarity == "taxonomy",
                              weights=weights)
        cls = similarity_classes(features, k, ctx.policy.seed)
        s_codes = pd.factorize(frame["s"], sort=True, use_na_sentinel=False)[0]
        ctx.progress("adaptive: diversity and levels")
        res = adaptive_generalize(columns, s_codes, cls, iv, diversity=t_d, evenness=t_e, boost=self.boost)
        assignment = pd.DataFrame({ROW_ID: frame["r"].to_numpy(dtype=np.int64), "ec_id": res.ec})
        return AdaptivePlan(assignment, res.values, None, self._info(res, columns, quasi, iv, iv_info, t_d, t_e),
                            ec_stats=res.ec_table(quasi))

    def _info(self, res: AdaptiveResult, columns: Sequence[QIColumn], quasi: list[str], iv: np.ndarray,
              iv_info: dict[str, Any], t_d: float, t_e: float) -> dict[str, Any]:
        top = heights(columns)
        cov = coverage_at(columns, res.cls, res.levels)
        base = np.array([c.total_leaves for c in columns])
        w = res.sizes.astype(np.float64)
        info: dict[str, Any] = {
            "iv": {q: float(v) for q, v in zip(quasi, iv)}, **iv_info,
            "boosted": [q for q, b in zip(quasi, boosted(iv)) if b],
            "diversity": t_d, "evenness": t_e, "boost": self.boost, "similarity": self.similarity,
            "similarity_weights": self.similarity_weights,
            "similarity_classes": int(len(res.sizes)), "diverse_classes": int(res.diverse.sum()),
            "non_diverse_classes": int((~res.diverse).sum()),
            "diverse_records": int(res.sizes[res.diverse].sum()),
            "mean_level": {q: round(float(w @ res.levels[:, j] / w.sum()), 6) for j, q in enumerate(quasi)},
            "iv_distortion": iv_distortion(res.levels, top, iv, res.sizes),
            "iv_coverage_loss": iv_coverage_loss(cov, base, iv, res.sizes),
            "class_table": res.class_table(quasi),
        }
        if len(res.sizes) <= 50:
            info["simpson_d"] = [round(float(v), 6) for v in res.diversity]
            info["simpson_e"] = [round(float(v), 6) for v in res.evenness]
            info["levels"] = {q: res.levels[:, j].tolist() for j, q in enumerate(quasi)}
        return info


def _float(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and np.isnan(v)) else float(v)


__all__ = ["Adaptive", "AdaptivePlan", "AdaptiveResult", "adaptive_generalize", "boosted", "choose_levels",
           "class_levels", "coverage_at", "heights", "iv_coverage_loss", "iv_distortion", "normalize_iv",
           "released_values", "simpson"]
