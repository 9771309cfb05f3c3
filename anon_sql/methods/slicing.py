"""``method = "slicing"``: l-diverse slicing (seed 001 Algorithms 2–4; Li, Li, Zhang & Molloy, TKDE 2012).

* :func:`phi2` — mean-square contingency coefficient (Cramér's V² = χ²/(N (min(d1, d2) − 1)), scipy) of two coded attributes;
* :func:`correlation_matrix` — φ² of every attribute pair from ``GROUP BY`` counts computed in DuckDB, numeric
  attributes discretized into equal-width bins;
* :func:`pam` — k-medoids (PAM build + swap) on the small attribute distance matrix 1 − φ²;
* :func:`form_columns` — column groups; the sensitive column sized by α (the paper) with a one-bucket feasibility test;
* :func:`slice_plan` — Mondrian buckets under |B| >= k and the slicing guide (models/slicing.py, sufficient for p(t, s) <= 1/l),
  exact kernel check (``anon_sql.udfs.slicing``), seeded per-bucket permutation, validity rules and their repair.
The release's own check is the model's SQL over the materialized table (models/slicing.py, models/slicing_sql.py).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
import sqlglot
from scipy.stats import chi2_contingency
from sqlglot import exp

from ..errors import PolicyError, PrivacyRequirementError
from ..models import ClassStats, SensitiveCounts, make_model
from ..models.base import PrivacyModel, find
from ..models.slicing import PAIR
from ..common.sqlbuild import alias, col, lit, render, table as table_ref
from ..udfs.slicing import slicing_max_p
from ..policy.keys import Boolean, ListOf, Text, any_of, choice, integer, key
from . import register_method
from .base import ROW_ID, AssignmentPlan, Method, MethodContext
from .local_values import QIColumn, SourceData, load_source
from .mondrian import StatsBuilder, partition


def phi2(table: np.ndarray) -> float:
    """φ²(R1, R2) = Σ (f_ij − f_i f_j)² / (f_i f_j) / (min(d1, d2) − 1) of a contingency table of counts; 0 when an
    attribute has a single value (it carries no information about the other)."""
    t = np.asarray(table, dtype=np.float64)
    t = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0]
    if min(t.shape) < 2:
        return 0.0
    chi2 = chi2_contingency(t, correction=False)[0]   # counts may be fractional (count column)
    return float(min(1.0, chi2 / t.sum() / (min(t.shape) - 1)))


def _binned(attr: str, numeric: bool, bins: int, lo: float | None, hi: float | None) -> exp.Expression:
    """An attribute's value for the contingency table: text, or the equal-width bin of a numeric value."""
    if not numeric or lo is None or hi is None or hi == lo:
        return exp.Cast(this=col(attr), to=exp.DataType.build("VARCHAR"))
    width = (hi - lo) / bins
    raw = exp.Floor(this=exp.Div(this=exp.Paren(this=exp.Sub(this=col(attr), expression=lit(lo))),
                                 expression=lit(width)))
    return exp.Cast(this=exp.Least(this=lit(bins - 1), expressions=[raw]), to=exp.DataType.build("VARCHAR"))


def correlation_matrix(con, relation: str, attrs: Sequence[str], numeric: Sequence[str] = (), bins: int = 10,
                       weight: str | None = None) -> np.ndarray:
    """φ² of every attribute pair of ``relation`` (one GROUP BY count query per pair, in DuckDB)."""
    table = table_ref(relation)
    bounds: dict[str, tuple[float | None, float | None]] = {}
    for a in attrs:
        if a in numeric:
            lo, hi = con.execute(render(exp.select(exp.Min(this=col(a)), exp.Max(this=col(a)))
                                        .from_(table.copy()))).fetchall()[0]
            bounds[a] = (None if lo is None else float(lo), None if hi is None else float(hi))
    w = exp.Sum(this=col(weight)) if weight else exp.Count(this=exp.Star())
    m = len(attrs)
    out = np.eye(m)
    for i in range(m):
        for j in range(i + 1, m):
            a, b = attrs[i], attrs[j]
            xa = _binned(a, a in numeric, bins, *bounds.get(a, (None, None)))
            xb = _binned(b, b in numeric, bins, *bounds.get(b, (None, None)))
            q = (exp.select(alias(xa, "a"), alias(xb, "b"), alias(w, "n")).from_(table.copy())
                 .group_by(xa.copy(), xb.copy()))
            rows = con.execute(render(q)).fetchall()
            ua = {v: k for k, v in enumerate(sorted({r[0] for r in rows}, key=str))}
            ub = {v: k for k, v in enumerate(sorted({r[1] for r in rows}, key=str))}
            ct = np.zeros((len(ua), len(ub)))
            ct[[ua[r[0]] for r in rows], [ub[r[1]] for r in rows]] = [float(r[2]) for r in rows]
            out[i, j] = out[j, i] = phi2(ct)
    return out


def pam(dist: np.ndarray, c: int, max_iter: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Partitioning around medoids (Kaufman & Rousseeuw): greedy BUILD, then SWAP while the total distance to the
    nearest medoid decreases. Returns (cluster label per point, medoid indices). Deterministic (ties: lowest index)."""
    d = np.asarray(dist, dtype=np.float64)
    m = len(d)
    if not 1 <= c <= m:
        raise ValueError(f"columns (c) must be between 1 and the number of attributes ({m}), got {c}")
    medoids = [int(np.argmin(d.sum(axis=1)))]
    while len(medoids) < c:
        near = d[:, medoids].min(axis=1)
        gain = np.maximum(near[None, :] - d, 0).sum(axis=1)   # gain[i]: cost drop when point i becomes a medoid
        gain[medoids] = -np.inf
        medoids.append(int(np.argmax(gain)))

    def cost(ms: Sequence[int]) -> float:
        return float(d[:, list(ms)].min(axis=1).sum())

    best = cost(medoids)
    for _ in range(max_iter):
        improved = False
        for pos in range(c):
            for h in range(m):
                if h in medoids:
                    continue
                trial = medoids.copy()
                trial[pos] = h
                ct = cost(trial)
                if ct < best - 1e-12:
                    best, medoids, improved = ct, trial, True
        if not improved:
            break
    medoids_arr = np.array(medoids)
    labels = np.argmin(d[:, medoids_arr], axis=1)
    return labels, medoids_arr


MODES = ("alpha", "pam")


def sensitive_column(phi: np.ndarray, attrs: Sequence[str], sensitive: str, alpha: int,
                     feasible: Callable[[list[str]], bool] | None = None) -> tuple[list[str], list[str]]:
    """S plus up to ``alpha`` − 1 QIs, the most correlated with S first (ties: the earlier attribute). A QI with which
    the table as one bucket would fail ``feasible`` is skipped (no bucketing can repair that). Returns
    (members, skipped)."""
    si = list(attrs).index(sensitive)
    members, skipped = [sensitive], []
    for j in np.argsort(-phi[si], kind="stable"):
        if len(members) >= alpha:
            break
        if j == si:
            continue
        if feasible is None or feasible([*members, attrs[j]]):
            members.append(attrs[j])
        else:
            skipped.append(attrs[j])
    return members, skipped


def form_columns(phi: np.ndarray, attrs: Sequence[str], sensitive: str, c: int, alpha: int = 2,
                 mode: str = "pam", feasible: Callable[[list[str]], bool] | None = None) -> list[list[str]]:
    """Column groups, the sensitive column last; the order inside a group follows ``attrs``.

    ``mode = "pam"``: PAM on 1 − φ² over all attributes, S's cluster topped up to ``alpha`` attributes with the QIs
    most correlated with S (spec/02 §2.1: "at least α"). ``mode = "alpha"`` (the seed paper's "the size of the
    sensitive column is determined by α"): the sensitive column is :func:`sensitive_column`, and PAM clusters the
    other attributes into c − 1 columns."""
    if mode == "alpha":
        members, _ = sensitive_column(phi, attrs, sensitive, alpha, feasible)
        rest = [a for a in attrs if a not in members]
        if c <= 1 or not rest:
            return [list(attrs)] if c <= 1 else [[a for a in attrs if a in members]]
        idx = [list(attrs).index(a) for a in rest]
        labels, _ = pam(1.0 - phi[np.ix_(idx, idx)], min(c - 1, len(rest)))
        groups = [[a for a, g in zip(rest, labels) if g == lab] for lab in dict.fromkeys(labels.tolist())]
        return groups + [[a for a in attrs if a in members]]
    labels, _ = pam(1.0 - phi, c)
    si = list(attrs).index(sensitive)
    for j in np.argsort(-phi[si], kind="stable"):
        if int((labels == labels[si]).sum()) >= alpha:
            break
        if j != si and labels[j] != labels[si]:
            labels[j] = labels[si]
    groups = [[a for a, g in zip(attrs, labels) if g == lab] for lab in dict.fromkeys(labels.tolist())]
    sens = next(g for g in groups if sensitive in g)
    return [g for g in groups if g is not sens and g] + [sens]


def max_conditional_share(key: np.ndarray, sens: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Largest share of one sensitive value among the rows sharing a key: max p(t, s) of the table as one bucket
    when ``key`` codes C_c − {S} — the slicing guide's measure of that one bucket."""
    key, sens = np.asarray(key, dtype=np.int64), np.asarray(sens, dtype=np.int64)
    w = np.ones(len(key)) if weights is None else np.asarray(weights, dtype=np.float64)
    if len(key) == 0:
        return 0.0
    ns = int(sens.max()) + 1
    one = np.zeros(len(key), dtype=np.int64)
    stats = ClassStats(np.array([w.sum()]),
                       {PAIR: SensitiveCounts.from_codes(one, key * ns + sens, w, 1, (int(key.max()) + 1) * ns)})
    return float(make_model("slicing_guide", 1.0, ns).measure(stats)[0])


def group_codes(codes: dict[str, np.ndarray], group: Sequence[str], n: int) -> np.ndarray:
    """One code per row for the value combination of ``group`` (all 0 for an empty group)."""
    if not group:
        return np.zeros(n, dtype=np.int64)
    stacked = np.stack([codes[a] for a in group], axis=1)
    return np.unique(stacked, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def permute_within_buckets(bucket: np.ndarray, seed: int, groups: int) -> list[np.ndarray]:
    """For each of ``groups`` column groups, the source row (index) whose values row i receives: an independent
    uniform permutation inside every bucket (seeded)."""
    rng = np.random.default_rng(seed)
    n = len(bucket)
    base = np.lexsort((np.arange(n), bucket))
    out = []
    for _ in range(groups):
        order = np.lexsort((rng.random(n), bucket))
        src = np.empty(n, dtype=np.int64)
        src[base] = order
        out.append(src)
    return out


def share_suppression(sens: np.ndarray, cell: np.ndarray, l: float, seed: int) -> np.ndarray:
    """Rows to suppress (boolean) so that no sensitive value holds more than 1/l of the records left: the fewest
    records, all of over-represented values. Within a value, records are taken one at a time from the
    (QI combination, value) cell that currently holds the most copies (``cell`` codes the QI combination; ties and
    the order inside a cell drawn with ``seed``), so rare combinations are the last to lose a record."""
    sens, cell = np.asarray(sens, dtype=np.int64), np.asarray(cell, dtype=np.int64)
    n = len(sens)
    freq = np.bincount(sens)
    if l > np.count_nonzero(freq):   # Σ_s freq_s = N' <= (distinct values) · N' / l is then impossible
        raise ValueError(f"l = {l:g} exceeds the {np.count_nonzero(freq)} distinct sensitive values")

    def cap(r: int) -> int:
        return int(np.floor((n - r) / l + 1e-9))   # most records one value may keep when r are suppressed

    # need(r) = Σ_s max(0, freq_s − cap(r)) grows with r; its least fixed point is the fewest records to suppress
    r = 0
    while (need := int(np.maximum(freq - cap(r), 0).sum())) > r:
        r = need
    return drop_from_cells(sens, cell, np.maximum(freq - cap(r), 0), seed)


def drop_from_cells(sens: np.ndarray, cell: np.ndarray, take: np.ndarray, seed: int) -> np.ndarray:
    """Rows to suppress (boolean): ``take[v]`` records of each sensitive value v, one at a time from the
    (QI combination, value) cell that currently holds the most copies (ties and the order inside a cell seeded)."""
    sens, cell = np.asarray(sens, dtype=np.int64), np.asarray(cell, dtype=np.int64)
    take = np.asarray(take, dtype=np.int64)
    drop = np.zeros(len(sens), dtype=bool)
    over = np.flatnonzero(take[sens] > 0)
    if not len(over):
        return drop
    rng = np.random.default_rng([seed, 61])
    s, c, noise = sens[over], cell[over], rng.random(len(over))
    # rank j of a record inside its (value, cell) in seeded order; priority = cell size − j (water-filling)
    order = np.lexsort((noise, c, s))
    key = s[order] * (int(c.max()) + 1) + c[order]
    start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    size = np.diff(np.r_[start, len(order)])
    j = np.arange(len(order)) - np.repeat(start, size)
    prio = np.empty(len(over), dtype=np.int64)
    prio[order] = np.repeat(size, size) - j
    pick = np.lexsort((noise, -prio, s))            # per value: highest priority first, seeded ties
    sp = s[pick]
    first = np.searchsorted(sp, sp, side="left")
    drop[over[pick[np.arange(len(pick)) - first < take[sp]]]] = True
    return drop


def subset_column(column: QIColumn, keep: np.ndarray) -> QIColumn:
    """``column`` restricted to the rows where ``keep`` holds (per-code tables unchanged)."""
    return replace(column, order=column.order[keep], x=None if column.x is None else column.x[keep], _anc=None)


def slicing_requirements(policy, models: Sequence[PrivacyModel]) -> tuple[PrivacyModel, int]:
    """The l-diverse slicing model of a slicing policy and its k (minimum bucket size), or a PolicyError saying
    what to write."""
    if len(policy.sensitive) != 1:
        raise PolicyError(f"method {policy.method!r} needs exactly one sensitive attribute (role = \"sensitive\"), "
                          f"got {list(policy.sensitive)}")
    model = find(models, "slicing_l_diversity")
    if model is None:
        raise PolicyError(f'method {policy.method!r} needs privacy.l_diversity = {{ kind = "slicing", l = ... }}')
    if model.l < 1:
        raise PolicyError(f"privacy.l_diversity.l must be a number >= 1, got {model.l!r}")
    if not policy.quasi:
        raise PolicyError(f"method {policy.method!r} needs at least one quasi-identifier to slice")
    if policy.count_column:
        raise PolicyError(f"method {policy.method!r} does not take count_column = {policy.count_column!r}: a permuted "
                          "row takes each column group from another record, so no single count fits it; expand the "
                          "counted rows first (one row per record) and drop count_column")
    return model, find(models, "k_anonymity").k


# -- validity rules (seed 001 §V: invalid tuples created by the permutation) ------------------------------------------
_RULE_NODES = (exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.And, exp.Or, exp.Not,
               exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.In, exp.Is, exp.Between, exp.Like, exp.ILike,
               exp.Neg, exp.Tuple)


def parse_rules(rules: Sequence[str], attrs: Sequence[str]) -> exp.Expression:
    """OR of the rules (each an SQL condition over the attributes, e.g. ``sex = 'Male' AND diagnosis = 'Breast
    Cancer'``); only comparisons, IN, BETWEEN, LIKE, IS NULL, AND/OR/NOT, literals and attribute names."""
    conds = []
    for rule in rules:
        if not isinstance(rule, str) or not rule.strip():
            raise PolicyError(f"method_params.invalid_tuples: every rule must be a non-empty SQL condition, got {rule!r}")
        try:
            tree = sqlglot.parse_one(rule, read="duckdb")
        except sqlglot.errors.ParseError as err:
            raise PolicyError(f"method_params.invalid_tuples: cannot parse rule {rule!r}: {err}") from None
        for node in tree.walk():
            if not isinstance(node, _RULE_NODES):
                raise PolicyError(f"method_params.invalid_tuples: rule {rule!r} uses {type(node).__name__}; only "
                                  "comparisons, IN, BETWEEN, LIKE, IS NULL, AND/OR/NOT over attributes and literals "
                                  '(quote names with special characters: "marital-status")')
            if isinstance(node, exp.Column) and (node.table or node.name not in attrs):
                raise PolicyError(f"method_params.invalid_tuples: rule {rule!r} names {node.sql()!r}, which is not an "
                                  f"attribute of the release; attributes: {list(attrs)}")
        conds.append(exp.Paren(this=tree))
    out = conds[0]
    for c in conds[1:]:
        out = exp.Or(this=out, expression=c)
    return out


def flag_rows(con, frame: pd.DataFrame, condition: exp.Expression) -> np.ndarray:
    """Boolean per row of ``frame``: does it satisfy ``condition`` (an invalid tuple)? Evaluated by DuckDB."""
    if len(frame) == 0:
        return np.zeros(0, dtype=bool)
    f = frame.assign(__i=np.arange(len(frame)))
    con.register("__anon_rules_frame", f)
    try:
        q = (exp.select(alias(exp.Coalesce(this=condition.copy(), expressions=[exp.false()]), "bad"))
             .from_(table_ref("__anon_rules_frame")).order_by(col("__i")))
        return np.array(con.execute(render(q)).df()["bad"].to_numpy(dtype=bool), dtype=bool, copy=True)
    finally:
        con.unregister("__anon_rules_frame")


def repair_invalid(con, condition: exp.Expression, typed: dict[str, np.ndarray], sources: dict[str, np.ndarray],
                   groups: list[list[str]], bucket: np.ndarray, seed: int, rounds: int = 50
                   ) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """Re-draw the permutation of the buckets that hold an invalid tuple (a set of value swaps inside the bucket),
    keeping a bucket's new draw only when it has fewer invalid tuples; seeded. Returns (sources, invalid flags,
    rounds used)."""
    sources = dict(sources)
    frame = pd.DataFrame({a: typed[a][sources[a]] for a in typed})
    bad = flag_rows(con, frame, condition)
    rng = np.random.default_rng([seed, 6])
    used = 0
    for used in range(1, rounds + 1):
        if not bad.any():
            used -= 1
            break
        rows = np.flatnonzero(np.isin(bucket, np.unique(bucket[bad])))
        sub = permute_within_buckets(bucket[rows], int(rng.integers(2 ** 31)), len(groups) - 1)
        trial = dict(sources)
        for g, src in zip(groups[:-1], sub):
            for a in g:
                trial[a] = sources[a].copy()
                trial[a][rows] = sources[a][rows[src]]
        new_bad = flag_rows(con, pd.DataFrame({a: typed[a][trial[a][rows]] for a in typed}), condition)
        nb = int(bucket.max()) + 1
        before = np.bincount(bucket[rows], weights=bad[rows], minlength=nb)
        after = np.bincount(bucket[rows], weights=new_bad, minlength=nb)
        take = (after < before)[bucket[rows]]
        for g in groups[:-1]:
            for a in g:
                sources[a][rows[take]] = trial[a][rows[take]]
        bad[rows[take]] = new_bad[take]
    return sources, bad, used


# -- the method -----------------------------------------------------------------------------------------------------
@dataclass
class _Formed:
    """What the column formation leaves for the rest of :func:`slice_plan`: the records kept (the suppression of
    over-represented sensitive values), their data, and the column groups."""

    data: SourceData
    columns: list[QIColumn]
    override: dict[str, tuple[np.ndarray, np.ndarray]]
    codes: dict[str, np.ndarray]
    keep: np.ndarray
    suppressed: dict[str, int]
    phi: np.ndarray
    groups: list[list[str]]
    skipped: list[str]
    notes: list[str]


def _formed(ctx: MethodContext, data: SourceData, columns: Sequence[QIColumn], *, c: int, alpha: int, mode: str,
            bins: int, strict_alpha: bool, override: dict[str, tuple[np.ndarray, np.ndarray]]) -> _Formed:
    """The suppression of over-represented sensitive values (within the budget) and the column formation over the
    records kept: the first steps of :func:`slice_plan`, which ``check`` re-runs (:func:`slicing_groups`)."""
    policy = ctx.policy
    model, _ = slicing_requirements(policy, ctx.models)
    sa, l = model.attribute, model.l
    attrs = [*policy.quasi, sa]
    n, w = data.n, data.weights
    bound = 1.0 / l + 1e-12
    codes = {col_.name: col_.order for col_ in columns}
    codes[sa] = data.sensitive[sa]
    labels = data.sensitive_values[sa]

    def share(members: Sequence[str]) -> float:
        return max_conditional_share(group_codes(codes, [a for a in members if a != sa], n), codes[sa], w)

    freq = np.bincount(codes[sa], weights=w, minlength=len(labels))
    suppressed: dict[str, int] = {}
    if freq.max() > bound * freq.sum():
        # the buckets' shares of a value average (size-weighted) to its global share: above 1/l, no bucketing of
        # all records is l-diverse; suppress the fewest records of the over-represented values, within the budget
        top = int(np.argmax(freq))
        why = (f"{policy.method}: the most frequent value {labels.iloc[top]!r} of {sa!r} holds "
               f"{freq[top] / freq.sum():.4g} of the records > 1/l = {1 / l:.4g}, so no sliced table of all records "
               "is l-diverse (the buckets' shares of it average to that fraction, and one bucket gives exactly it)")
        try:
            drop = share_suppression(codes[sa], group_codes(codes, [c_.name for c_ in columns], n), l, policy.seed)
        except ValueError as err:
            raise PrivacyRequirementError(f"{why}, and suppression cannot help: {err}; no release was created: "
                                          f"lower privacy.l_diversity.l to at most {freq.sum() / freq.max():.4g}"
                                          ) from None
        need = int(drop.sum())
        budget = policy.privacy.max_suppression * n
        per = np.bincount(codes[sa][drop], minlength=len(labels))
        suppressed = {str(labels.iloc[i]): int(per[i]) for i in np.flatnonzero(per)}
        if need > budget + 1e-9:
            frac = np.ceil(need / n * 1e4) / 1e4   # rounded up, so that it covers the records
            raise PrivacyRequirementError(
                f"{why}; l = {l:g} needs the suppression of {need} of {n} records "
                f"({', '.join(f'{v}: {c}' for v, c in suppressed.items())}) "
                f"but privacy.max_suppression = {policy.privacy.max_suppression:g} allows {int(budget + 1e-9)}; no "
                f"release was created: allow it with max_suppression = {frac:.4g} (or more), or lower "
                f"privacy.l_diversity.l to at most {freq.sum() / freq.max():.4g}")
        ctx.progress(f"{policy.method}: suppressing {need} records of over-represented {sa!r} values")
        keep = ~drop
        data = replace(data, rows=data.rows[keep], weights=data.weights[keep],
                       sensitive={a: v[keep] for a, v in data.sensitive.items()})
        columns = [subset_column(c_, keep) for c_ in columns]
        override = {a: (t[keep], np.asarray(x)[keep]) for a, (t, x) in override.items()}
        codes = {a: v[keep] for a, v in codes.items()}
        n, w = data.n, data.weights
    else:
        keep = np.ones(n, dtype=bool)
    numeric = [col_.name for col_ in data.columns if col_.numeric]
    phi = correlation_matrix(ctx.con, ctx.source_view, attrs, numeric, bins, policy.count_column)
    c = min(c, len(attrs))
    feasible = lambda members: share(members) <= bound   # noqa: E731
    groups = form_columns(phi, attrs, sa, c, alpha, mode, feasible)
    skipped: list[str] = []
    notes: list[str] = []
    if mode == "alpha" and c > 1:
        members, skipped = sensitive_column(phi, attrs, sa, alpha, feasible)
        if len(members) < min(alpha, len(attrs) - c + 1) and not strict_alpha:
            notes.append(f"sensitive_column_size = {alpha} (the default) not reached: only {len(members) - 1} QIs keep "
                         f"the table as one bucket l-diverse next to {sa!r} (skipped: {skipped})")
        elif len(members) < min(alpha, len(attrs) - c + 1):
            raise PrivacyRequirementError(
                f"{policy.method}: sensitive_column_size = {alpha} asks for {alpha - 1} QIs next to {sa!r}, but only "
                f"{len(members) - 1} keep even the whole table as one bucket l-diverse (skipped: {skipped}); no "
                f"release was created: set method_params.sensitive_column_size = {len(members)} or lower l")
    return _Formed(data, list(columns), override, codes, keep, suppressed, phi, groups, skipped, notes)


def slicing_groups(ctx: MethodContext, data: SourceData, columns: Sequence[QIColumn], *, c: int, alpha: int,
                   mode: str, bins: int, strict_alpha: bool = True,
                   override: dict[str, tuple[np.ndarray, np.ndarray]] | None = None, **_: Any) -> list[list[str]]:
    """The column groups :func:`slice_plan` forms from this source (the same code, stopped before the buckets):
    what ``check`` compares a recorded layout with (issue 28.8: the grouping depends on the data, not the policy)."""
    return _formed(ctx, data, columns, c=c, alpha=alpha, mode=mode, bins=bins, strict_alpha=strict_alpha,
                   override=override or {}).groups


def slice_plan(ctx: MethodContext, data: SourceData, columns: Sequence[QIColumn], *, c: int, alpha: int, mode: str,
               bins: int, rules: Sequence[str] = (), repair: bool = False, strict_alpha: bool = True,
               override: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
               intervals: dict[str, list[dict]] | None = None, info: dict[str, Any] | None = None) -> AssignmentPlan:
    """Algorithms 2–4 over ``columns`` (the QIs as partitioned and matched: original values, or fixed-interval
    values with ``override`` = attribute → (released text, released number) per row): column formation, Mondrian
    buckets under |B| >= k and the model's guide, exact kernel check, seeded permutation, validity rules."""
    policy = ctx.policy
    model, k = slicing_requirements(policy, ctx.models)
    sa, l = model.attribute, model.l
    attrs = [*policy.quasi, sa]
    bound = 1.0 / l + 1e-12
    labels = data.sensitive_values[sa]
    f = _formed(ctx, data, columns, c=c, alpha=alpha, mode=mode, bins=bins, strict_alpha=strict_alpha,
                override=override or {})
    data, columns, override, codes, keep, suppressed = f.data, f.columns, f.override, f.codes, f.keep, f.suppressed
    phi, groups, skipped, notes = f.phi, f.groups, f.skipped, f.notes
    n, w = data.n, data.weights
    xattrs = [a for a in groups[-1] if a != sa]
    skey = group_codes(codes, xattrs, n)
    root = max_conditional_share(skey, codes[sa], w)
    if root > bound:
        raise PrivacyRequirementError(
            f"{policy.method}: with column groups {groups}, even one bucket of all {n} rows has max p(t, s) = "
            f"{root:.4g} > 1/l = {1 / l:.4g}; no release was created: use sensitive_column = \"alpha\", a smaller "
            "sensitive_column_size, or lower l")
    # tuple partitioning: Mondrian under |B| >= k and the guide, then the exact Definition 10 check (kernel)
    ns = len(labels)
    nx = int(skey.max()) + 1 if n else 1
    pair = skey * ns + codes[sa]
    stats = StatsBuilder(w, {PAIR: pair}, {PAIR: np.arange(nx * ns)},
                         {PAIR: np.bincount(pair, weights=w, minlength=nx * ns)}, True)
    models = [make_model("k_anonymity", k), model.guide(ns, xattrs)]
    pid = partition(list(columns), models, stats, ctx.progress).pid if n else np.zeros(0, dtype=np.int64)
    gcodes = (np.stack([group_codes(codes, g, n) for g in groups[:-1]], axis=1) if len(groups) > 1
              else np.zeros((n, 0), dtype=np.int64))
    maxp = slicing_max_p(pid, gcodes, skey, codes[sa], w) if n else np.zeros(0)
    worst = float(maxp.max()) if n else 0.0
    if worst > bound:   # cannot happen (the guide is sufficient); fail closed all the same
        raise PrivacyRequirementError(f"{policy.method}: partition has max p(t, s) = {worst:.4g} > 1/l; no release")
    # release: original (or fixed-interval) values; every column group (the sensitive one too, so that a row's
    # position says nothing) permuted independently inside each bucket
    perms = permute_within_buckets(pid, policy.seed, len(groups))
    sources = {a: src for g, src in zip(groups, perms) for a in g}
    items = [col(ROW_ID)]
    for a in attrs:
        items += [alias(col(a), a), alias(exp.Cast(this=col(a), to=exp.DataType.build("VARCHAR")), "__t_" + a)]
    frame = ctx.con.execute(render(exp.select(*items).from_(table_ref(ctx.source_view)).order_by(col(ROW_ID)))).df()
    frame = frame[keep].reset_index(drop=True)   # suppressed records are not released (nor in the assignment)
    typed = {a: frame[a] for a in attrs}
    text = {a: frame["__t_" + a].to_numpy(dtype=object) for a in attrs}
    for a, (t, x) in override.items():
        text[a], typed[a] = t, pd.Series(x)
    validity: dict[str, Any] = {}
    if rules:
        condition = parse_rules(rules, attrs)
        arrays = {a: typed[a].to_numpy() for a in attrs}
        validity["invalid_original"] = int(flag_rows(ctx.con, pd.DataFrame(arrays), condition).sum())
        bad = flag_rows(ctx.con, pd.DataFrame({a: arrays[a][sources[a]] for a in attrs}), condition)
        validity["invalid_released"] = int(bad.sum())
        if repair and bad.any() and len(groups) > 1:
            sources, bad, used = repair_invalid(ctx.con, condition, arrays, sources, groups, pid, policy.seed)
            validity["repair_rounds"] = used
        validity["invalid_after_repair" if repair else "invalid_left"] = int(bad.sum())
        validity["rules"] = list(rules)
    values = pd.DataFrame({ROW_ID: data.rows, "ec_id": pid + 1})
    for a in policy.quasi:
        values[a] = pd.Series(text[a][sources[a]], dtype="string")
    values[sa] = typed[sa].iloc[sources[sa]].reset_index(drop=True)
    out = dict(info or {})
    if suppressed:
        out["suppressed_by_value"] = suppressed
        out["suppression"] = ("fewest records of the over-represented sensitive values, from their most common QI "
                              "combinations (seeded ties)")
    out.update({"columns": groups, "l": l, "buckets": int(pid.max()) + 1 if n else 0, "max_p": worst,
                "sensitive_column": mode, "sensitive_column_skipped": skipped, "notes": notes,
                "phi2": {f"{a}|{b}": float(phi[i, j]) for i, a in enumerate(attrs) for j, b in enumerate(attrs)
                         if i < j},
})
    if validity:
        out["validity"] = validity
    return AssignmentPlan(pd.DataFrame({ROW_ID: data.rows, "ec_id": pid + 1}), values, None, out,
                          released_quasi=[], row_values=True,
                          table_check={"columns": groups, "sensitive": sa, "l": l, "intervals": intervals or {}},
                          value_intervals=intervals or None)


@register_method
class Slicing(Method):
    """l-diverse slicing: ``[method_params] columns`` (c, default 2), ``sensitive_column_size`` (α, default 2),
    ``sensitive_column`` ("alpha" default | "pam"), ``bins`` (φ² discretization, default 10), ``invalid_tuples``
    (SQL conditions) and ``repair_invalid``; ``[privacy] l_diversity = { kind = "slicing", l = ... }``, k = minimum
    bucket size."""

    name = "slicing"
    plan_kind = "assignment"
    releases_rows = True
    needs_taxonomies = False
    parameters = (
        key("columns", integer(ge=1), "number of columns c the attributes are grouped into", 2),
        key("sensitive_column_size", integer(ge=1), "attributes α in the sensitive column (explicit: a requirement)",
            2),
        key("bins", integer(ge=1), "bins of the φ² discretization of numeric attributes", 10),
        key("sensitive_column", choice(*MODES), "how the sensitive column is formed", "alpha"),
        key("invalid_tuples", any_of(Text(what="SQL condition"), ListOf(Text(what="SQL condition"))),
            "SQL conditions a permuted row must not meet, e.g. \"sex = 'Male' AND diagnosis = 'Breast Cancer'\""),
        key("repair_invalid", Boolean(), "repair invalid permuted rows instead of refusing", False),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.columns, self.sensitive_column_size, self.bins = (self.param(n) for n in
                                                                ("columns", "sensitive_column_size", "bins"))
        # an explicit α is a requirement (fail when it cannot be met); the default 2 is a target
        self.strict_alpha = "sensitive_column_size" in params
        self.mode = self.param("sensitive_column")
        rules = params.get("invalid_tuples", [])
        self.rules = [rules] if isinstance(rules, str) else list(rules)
        self.repair = self.param("repair_invalid")

    def options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`slice_plan` this method's parameters give."""
        return {"c": self.columns, "alpha": self.sensitive_column_size, "mode": self.mode, "bins": self.bins,
                "rules": self.rules, "repair": self.repair, "strict_alpha": self.strict_alpha}

    def plan(self, ctx: MethodContext) -> AssignmentPlan:
        data, columns, extra = self.prepared(ctx)
        return slice_plan(ctx, data, columns, **extra, **self.options())

    def prepared(self, ctx: MethodContext) -> tuple[SourceData, list[QIColumn], dict[str, Any]]:
        """The source as :func:`slice_plan` reads it: its data, the QI columns it slices and any further keyword
        arguments (a subclass recodes columns first)."""
        slicing_requirements(ctx.policy, ctx.models)
        data = load_source(ctx)
        return data, data.columns, {}

    def column_groups(self, ctx: MethodContext) -> list[list[str]]:
        """The column groups a release of ``ctx``'s source forms: the plan's first steps, nothing released."""
        data, columns, extra = self.prepared(ctx)
        return slicing_groups(ctx, data, columns, **extra, **self.options())


__all__ = ["MODES", "Slicing", "correlation_matrix", "flag_rows", "form_columns", "group_codes",
           "max_conditional_share", "pam", "parse_rules", "permute_within_buckets", "phi2", "repair_invalid",
           "sensitive_column", "share_suppression", "slicing_groups", "drop_from_cells", "subset_column", "slice_plan",
           "slicing_requirements"]
