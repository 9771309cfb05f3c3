"""Local suppression (sdcMicro ``localSuppression``; issue 26 part 2): blank cells of the quasi-identifiers, not
records, until every record matches at least k records, where a suppressed cell (NULL) matches any value.

Matching rule (sdcMicro ``freqCalc``: "a missing value stands for any of the possible categories"): records r and s
match when, on every quasi-identifier, they hold the same value or at least one of the two is NULL. A record's
frequency f_k is the number of records it matches (itself included); k-anonymity with wildcards is f_k ≥ k for every
record. NULLs already in the source count as suppressed cells. The relation is not transitive, so "classes" overlap.

The search works on the distinct key combinations and their counts (never on rows): f_k of every combination is
summed over pairs of suppression masks, records of a combination are always treated alike, and the result is
written back with one SQL join. ``kanonymity_with_wildcards_sql`` verifies it independently in SQL.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from sqlglot import exp

from ..errors import PolicyError, PrivacyRequirementError
from .sqlparts import (claim_output, create_output, execute_tree, fill, ident, render, store_frame,
                       table_or_subquery)
from ..common.sqlbuild import scratch_name

SUPPRESSED = -1  # the code of a suppressed (NULL) cell


@dataclass
class LocalSuppression:
    """The output table, the cells suppressed per quasi-identifier (records, source NULLs not counted), the rounds."""

    output: str
    k: int
    suppressed: dict[str, int] = field(default_factory=dict)
    rounds: int = 0
    order: list[str] = field(default_factory=list)  # quasi-identifiers, first suppressed first

    @property
    def total(self) -> int:
        return sum(self.suppressed.values())


def _ids(parts: np.ndarray) -> np.ndarray:
    """One integer id per row of a (rows × keys) code array, equal rows ↔ equal ids."""
    if parts.shape[1] == 0:
        return np.zeros(parts.shape[0], dtype=np.int64)
    shifted = parts.astype(np.int64) + 1
    radix = shifted.max(axis=0) + 1
    if float(np.prod(radix.astype(float))) < 2.0**62:
        ids = np.zeros(parts.shape[0], dtype=np.int64)
        for j in range(parts.shape[1]):  # a loop over keys, not rows
            ids = ids * radix[j] + shifted[:, j]
        return ids
    return np.unique(shifted, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def wildcard_frequencies(codes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """f_k of every distinct combination (rows of ``codes``, SUPPRESSED for a blank cell) under the wildcard rule:
    the sum of the counts of all combinations agreeing with it on the keys blank in neither. Computed per pair of
    suppression masks (A, B): an equi-join on the keys outside A ∪ B."""
    codes = np.asarray(codes)
    counts = np.asarray(counts, dtype=np.int64)
    blank = codes == SUPPRESSED
    masks = _ids(blank.astype(np.int64))
    mask_values, mask_of = np.unique(masks, return_inverse=True)
    fk = np.zeros(codes.shape[0], dtype=np.int64)
    members = [np.flatnonzero(mask_of == i) for i in range(mask_values.size)]
    for a in members:
        blank_a = blank[a[0]]
        for b in members:
            keys = np.flatnonzero(~(blank_a | blank[b[0]]))
            if keys.size == 0:
                fk[a] += counts[b].sum()
                continue
            ids = _ids(np.concatenate([codes[a][:, keys], codes[b][:, keys]]))
            uniq, inv = np.unique(ids, return_inverse=True)
            inv = inv.reshape(-1)
            sums = np.bincount(inv[a.size:], weights=counts[b], minlength=uniq.size)
            fk[a] += sums[inv[: a.size]].astype(np.int64)
    return fk


def suppress_codes(codes: np.ndarray, counts: np.ndarray, k: int, importance: np.ndarray) -> tuple[np.ndarray, int]:
    """sdcMicro's heuristic on combinations: while some combination has f_k < k, blank in each such combination its
    non-blank key of lowest importance; iterate. One refinement keeps suppression small: unsafe combinations that
    become equal once blanked (same other keys) need not all be blanked — the largest keeps its value, the others'
    blanks match it. Returns the new codes and the number of rounds."""
    codes = np.array(codes, dtype=np.int64, copy=True)
    counts = np.asarray(counts, dtype=np.int64)
    importance = np.asarray(importance, dtype=float)
    rounds = 0
    while True:
        fk = wildcard_frequencies(codes, counts)
        unsafe = np.flatnonzero(fk < k)
        if unsafe.size == 0:
            return codes, rounds
        rounds += 1
        weight = np.where(codes[unsafe] == SUPPRESSED, np.inf, importance[None, :])
        key = np.argmin(weight, axis=1)
        if np.isinf(weight[np.arange(unsafe.size), key]).any():
            raise PrivacyRequirementError(f"local suppression cannot reach k = {k}: fewer than k records in all")
        # unsafe combinations that coincide once `key` is blanked: the largest of each keeps its value
        blanked = codes[unsafe].copy()
        blanked[np.arange(unsafe.size), key] = SUPPRESSED
        together = _ids(np.column_stack([blanked, key]))
        order = np.lexsort((-counts[unsafe], together))  # by coincidence group, largest first
        first = np.r_[True, together[order][1:] != together[order][:-1]]
        alone = np.bincount(np.unique(together, return_inverse=True)[1].reshape(-1)) == 1
        group_of = np.unique(together, return_inverse=True)[1].reshape(-1)
        keep = np.zeros(unsafe.size, dtype=bool)
        keep[order[first]] = True
        keep &= ~alone[group_of]  # a combination alone in its group is blanked
        chosen = unsafe[~keep]
        codes[chosen, key[~keep]] = SUPPRESSED


def default_importance(codes: np.ndarray) -> np.ndarray:
    """Without an importance: the key with more distinct values is suppressed first (it identifies most)."""
    distinct = np.array([np.unique(codes[codes[:, j] != SUPPRESSED, j]).size for j in range(codes.shape[1])])
    return -distinct.astype(float)


def validate_local_suppression(quasi: Sequence[str], k: int, importance: Mapping[str, float] | None,
                               columns: Sequence[str]) -> None:
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 2:
        raise PolicyError(f"privacy.k = {k!r} must be an integer >= 2 for local suppression; set k = 2 or more")
    if not quasi:
        raise PolicyError("local suppression needs quasi-identifiers: give some attributes role = \"quasi\"")
    missing = [q for q in quasi if q not in columns]
    if missing:
        raise PolicyError(f"local suppression: no column {missing[0]!r} in the source (columns: {list(columns)})")
    if importance is not None:
        unknown = sorted(set(importance) - set(quasi))
        if unknown:
            raise PolicyError(f"method_params.importance: {unknown[0]!r} is not a quasi-identifier "
                              f"(quasi-identifiers: {list(quasi)}); remove it")
        bad = [q for q, w in importance.items()
               if not isinstance(w, (int, float, np.integer, np.floating)) or isinstance(w, bool) or not np.isfinite(w)]
        if bad:
            raise PolicyError(f"method_params.importance.{bad[0]} = {importance[bad[0]]!r} must be a number "
                              "(higher = more important, suppressed later)")


def decide_suppression(codes: np.ndarray, counts: np.ndarray, quasi: Sequence[str], k: int,
                       importance: Mapping[str, float] | None, output: str = "") -> tuple[np.ndarray, LocalSuppression]:
    """The driver's half of local suppression, on any engine: the distinct combinations' codes (in code order, so
    ties break alike everywhere) and counts → which of their cells to blank (combinations × QIs) and what was
    done. Raises when the source has fewer than k records."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.sum() < k:
        raise PrivacyRequirementError(f"local suppression cannot reach k = {k}: the source has only "
                                      f"{int(counts.sum())} records; lower k")
    weights = (np.array([float((importance or {}).get(q, 0.0)) for q in quasi]) if importance is not None
               else default_importance(codes))
    new, rounds = suppress_codes(codes, counts, k, weights)
    flags = (new == SUPPRESSED) & (codes != SUPPRESSED)
    return flags, LocalSuppression(output=output, k=int(k), rounds=rounds,
                                   suppressed={q: int(counts[flags[:, j]].sum()) for j, q in enumerate(quasi)},
                                   order=[quasi[j] for j in np.argsort(weights, kind="stable")])


def local_suppression(con, source: str | exp.Table, quasi: Sequence[str], k: int, *,
                      importance: Mapping[str, float] | None = None, output: str | None = None,
                      temporary: bool = False) -> LocalSuppression:
    """Write ``output`` (default ``<source>__suppressed``): the source with cells of ``quasi`` set to NULL so that
    it is k-anonymous under the wildcard rule. ``importance`` maps a QI to a weight: higher = more important =
    suppressed later (sdcMicro's ``importance`` ranks are the reverse: rank 1 is the most important); ``temporary``:
    a TEMP output (what a release's method writes inside its transaction); QIs left out
    weigh 0; without it, QIs with more distinct values go first. Deterministic (no randomness)."""
    quasi = list(quasi)
    source_name = source.name if isinstance(source, exp.Table) else str(source)
    output = output or f"{source_name}__suppressed"
    claim_output(con, output, "local_suppression", temporary)
    rel = con.sql(render(fill("SELECT * FROM __s", tables={"__s": source})))
    columns = list(rel.columns)
    validate_local_suppression(quasi, k, importance, columns)
    code_names = [f"__anon_code_{j}" for j in range(len(quasi))]
    clash = set(code_names) & set(columns)
    if clash:
        raise PolicyError(f"the source has a column named {sorted(clash)[0]!r}, which local suppression uses; rename it")
    coded, mapping = scratch_name(f"{output}__sdc_coded"), scratch_name(f"{output}__sdc_map")   # round 19, M51
    codes_sql = [fill("CASE WHEN __q IS NULL THEN -1 ELSE DENSE_RANK() OVER (ORDER BY __q) - 1 END",
                      names={"__q": q}).as_(ident(c)) for q, c in zip(quasi, code_names)]
    try:
        execute_tree(con, exp.Create(this=table_or_subquery(coded), kind="TABLE", replace=True,
                            properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
                            expression=exp.select(exp.Star(), *codes_sql).from_(table_or_subquery(source))))
        patterns_q = exp.select(*[exp.column(c, quoted=True) for c in code_names],
                                exp.func("COUNT", exp.Star()).as_("__n")).from_(table_or_subquery(coded)).group_by(
            *[exp.column(c, quoted=True) for c in code_names]).order_by(
            *[exp.column(c, quoted=True) for c in code_names])   # in code order: the heuristic's ties follow it
        data = con.execute(render(patterns_q)).fetchnumpy()
        codes = np.column_stack([np.asarray(data[c], dtype=np.int64) for c in code_names])
        flags, result = decide_suppression(codes, np.asarray(data["__n"], dtype=np.int64), quasi, k, importance,
                                           output)
        frame = pd.DataFrame({**{c: codes[:, j] for j, c in enumerate(code_names)},
                              **{f"__anon_blank_{j}": flags[:, j] for j in range(len(quasi))}})
        frame = frame[flags.any(axis=1)]
        store_frame(con, mapping, frame)
        projections = []
        for c in columns:
            if c in quasi:
                j = quasi.index(c)
                projections.append(fill("CASE WHEN m.__b THEN NULL ELSE s.__q END",
                                        names={"__b": f"__anon_blank_{j}", "__q": c}).as_(ident(c)))
            else:
                projections.append(exp.column(c, table="s", quoted=True).as_(ident(c)))
        on = exp.and_(*[exp.column(c, table="s", quoted=True).eq(exp.column(c, table="m", quoted=True))
                        for c in code_names])
        q = exp.select(*projections).from_(exp.alias_(table_or_subquery(coded), "s", table=True)).join(
            exp.alias_(table_or_subquery(mapping), "m", table=True), on=on, join_type="left")
        create_output(con, output, q, temporary)
        return result
    finally:
        for t in (coded, mapping):
            execute_tree(con, fill("DROP TABLE IF EXISTS __t", tables={"__t": t}))


def kanonymity_with_wildcards_sql(source: str | exp.Table, quasi: Sequence[str], k: int) -> exp.Select:
    """SQL verifying k-anonymity under the wildcard rule, independent of how the table was made: one row per
    distinct QI combination (NULL = suppressed) whose records match fewer than k records — (QI values…, records,
    matching). Empty result ⇔ k-anonymous. A self-join of the distinct combinations (O(combinations²))."""
    if not quasi:
        raise PolicyError("kanonymity_with_wildcards_sql needs at least one quasi-identifier")
    pattern = exp.select(*[exp.column(q, quoted=True) for q in quasi],
                         exp.func("COUNT", exp.Star()).as_("__records")).from_(table_or_subquery(source)).group_by(
        *[exp.column(q, quoted=True) for q in quasi])
    match = exp.and_(*[exp.or_(exp.column(q, table="a", quoted=True).is_(exp.null()),
                               exp.column(q, table="b", quoted=True).is_(exp.null()),
                               exp.column(q, table="a", quoted=True).eq(exp.column(q, table="b", quoted=True)))
                       for q in quasi])
    matching = exp.func("SUM", exp.column("__records", table="b"))
    keys = [exp.column(q, table="a", quoted=True) for q in quasi] + [exp.column("__records", table="a")]
    return (exp.select(*[exp.column(q, table="a", quoted=True).as_(ident(q)) for q in quasi],
                       exp.column("__records", table="a").as_("records"), matching.as_("matching"))
            .with_("__patterns", as_=pattern)
            .from_(exp.alias_(exp.to_table("__patterns"), "a", table=True))
            .join(exp.alias_(exp.to_table("__patterns"), "b", table=True), on=match)
            .group_by(*keys)
            .having(matching.copy() < exp.Literal.number(int(k))))


def is_kanonymous_with_wildcards(con, source: str | exp.Table, quasi: Sequence[str], k: int) -> bool:
    """Run the verifier: True when no record matches fewer than k records."""
    q = exp.select(exp.func("COUNT", exp.Star())).from_(kanonymity_with_wildcards_sql(source, quasi, k).subquery("v"))
    return con.execute(render(q)).fetchall()[0][0] == 0
