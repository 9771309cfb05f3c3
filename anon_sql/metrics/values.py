"""What a released value covers — the one parser shared by NCP, precision, KL divergence, query error,
re-identification and the classification encoding.

Every quasi-identifier has a *domain* of leaves: its taxonomy's leaves (or, without a taxonomy, the source's distinct
values), plus a NULL leaf when the source holds NULLs. A released value covers a set of leaves:

* a taxonomy label at level L → the leaves under it (level plans know L; local recoding takes every level at which
  the label occurs, and its lowest such level);
* ``*`` → every leaf;  NULL → the NULL leaf;
* ``[lo-hi]`` (local recoding of numbers) → the numeric leaves in [lo, hi];  a plain number → the leaf equal to it.

For numeric QIs the width of a value is the interval its label states (``[20-29]``, ``20-29``, ``[20, 30)`` — also
for taxonomy labels), else the range of the leaves it covers; NCP = min(1, width / (max_T − min_T)).
"""
from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

import numpy as np
import pandas as pd

from ..errors import AnonSQLError
from ..data.taxonomy import TOP, Taxonomy
from ..udfs.utility import ncp_categorical, ncp_numeric


T = TypeVar("T")

_NUM = r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
_INTERVAL = re.compile(rf"^\s*[\[(]?\s*({_NUM})\s*(?:-|,|\.\.)\s*({_NUM})\s*[\])\[]?\s*$")


def parse_interval(label: object) -> tuple[float, float] | None:
    """``[lo-hi]``, ``lo-hi``, ``[lo, hi)``, ``[lo, hi[`` → (lo, hi); a plain number → (v, v); else None."""
    if label is None:
        return None
    text = str(label)
    m = _INTERVAL.match(text)
    if m:
        lo, hi = float(m.group(1)), float(m.group(2))
        return (lo, hi) if lo <= hi else None
    try:
        v = float(text)
    except ValueError:
        return None
    return (v, v) if np.isfinite(v) else None


def _to_float(labels: Sequence) -> np.ndarray:
    return pd.to_numeric(pd.Series(list(labels), dtype=object), errors="coerce").to_numpy(dtype=np.float64)


@dataclass
class Domain:
    """The leaves of one quasi-identifier (``labels``; None = the NULL leaf) with their numeric values and order."""

    name: str
    numeric: bool
    labels: np.ndarray          # object: leaf text, None for NULL
    x: np.ndarray               # float value of each leaf (NaN when not a number / NULL)
    order: np.ndarray           # position of each leaf in taxonomy (or numeric/text) order, 0..n-1
    in_data: np.ndarray         # bool: the leaf occurs in the source (all False when ``bounds`` is given instead)
    taxonomy: Taxonomy | None = None
    bounds: tuple[float, float] | None = None   # (min_T, max_T) read from the source when the leaves weren't
    tax_rows: np.ndarray | None = None          # leaf index of each row of ``taxonomy.levels`` (when it has one)

    @property
    def n(self) -> int:
        return len(self.labels)

    @property
    def lo(self) -> float:
        """Smallest value of the source (numeric QIs; NaN otherwise)."""
        return self._extreme(0, np.nanmin)

    @property
    def hi(self) -> float:
        """Largest value of the source (numeric QIs; NaN otherwise)."""
        return self._extreme(1, np.nanmax)

    def _extreme(self, side: int, reduce) -> float:
        """``bounds[side]`` when read from the source, else ``reduce`` over the leaves that occur in it."""
        if self.bounds is not None:
            return float(self.bounds[side]) if self.numeric else float("nan")
        v = self.x[self.in_data]
        return float(reduce(v)) if self.numeric and np.isfinite(v).any() else float("nan")

    @property
    def null_leaf(self) -> int:
        """Index of the NULL leaf, −1 when the source has no NULL."""
        hits = np.flatnonzero(pd.isna(self.labels))
        return int(hits[0]) if len(hits) else -1

    def codes(self, values: Sequence | pd.Series) -> np.ndarray:
        """Leaf code of each original value (text or None); −1 for a value outside the domain."""
        if "_index" not in self.__dict__:
            known = np.flatnonzero(~pd.isna(self.labels))
            self.__dict__["_index"] = (pd.Index(self.labels[known].astype(str)), known)
        idx, known = self.__dict__["_index"]
        # factorize first: the text lookup then runs once per distinct value, not once per row of the frame
        series = values if isinstance(values, pd.Series) else pd.Series(values, dtype=object)
        fc, uniq = pd.factorize(series, use_na_sentinel=True)     # a fetched text column stays in its own dtype
        pos = idx.get_indexer(pd.Index(np.asarray(uniq, dtype=object)).astype(str))
        mapped = np.where(pos >= 0, known[np.maximum(pos, 0)], -1) if len(known) else np.full(len(uniq), -1)
        return np.where(fc >= 0, mapped[np.maximum(fc, 0)] if len(mapped) else -1, self.null_leaf).astype(np.int64)


def domain(name: str, values: pd.Series, numeric: bool, taxonomy: Taxonomy | None) -> Domain:
    """A quasi-identifier's domain from its taxonomy (leaves in top-down order) or from the source's values."""
    present = pd.Series(values, dtype=object)
    has_null = bool(present.isna().any())
    texts = present[present.notna()].astype(str)
    tax_rows = None
    if taxonomy is not None:
        labels, x, tax_rows = _taxonomy_leaves(taxonomy, numeric)
    else:
        labels = np.array(sorted(set(texts)), dtype=object)
        x = _to_float(labels)
        if numeric:
            s = np.argsort(x, kind="stable")
            labels, x = labels[s], x[s]
    if has_null:
        labels = np.append(labels, None)
        x = np.append(x, np.nan)
    in_data = np.zeros(len(labels), dtype=bool)
    dom = Domain(name, numeric, labels, x, np.arange(len(labels)), in_data, taxonomy, tax_rows=tax_rows)
    c = dom.codes(present)
    in_data[c[c >= 0]] = True
    return dom


_MEMO: OrderedDict[tuple, object] = OrderedDict()
_MEMO_SIZE = 256


def _memo(what: str, tax: Taxonomy, arg: object, compute: Callable[[], T]) -> T:
    """``compute()`` memoized by the taxonomy's content (name and every level value: hashing a few hundred strings
    is cheaper than the pandas work it saves on every metrics call); results are read-only arrays and dicts."""
    if "_content_key" not in tax.__dict__:     # once per instance (taxonomies are never changed in place)
        tax.__dict__["_content_key"] = (tax.name, tax.levels.shape, tuple(tax.levels.to_numpy().ravel().tolist()))
    key = (what, arg, tax.__dict__["_content_key"])
    if key in _MEMO:
        _MEMO.move_to_end(key)
        return _MEMO[key]            # type: ignore[return-value]
    value = _MEMO[key] = compute()
    if len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)
    return value


def _taxonomy_leaves(taxonomy: Taxonomy, numeric: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A taxonomy's leaves (and their float values) in numeric order, else in top-down path order; and the leaf index
    of each taxonomy row."""
    labels, x, rows = _memo("leaves", taxonomy, numeric, lambda: _leaves_of(taxonomy, numeric))
    return labels.copy(), x.copy(), rows.copy()


def _leaves_of(taxonomy: Taxonomy, numeric: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_taxonomy_leaves`, computed."""
    lv = taxonomy.levels
    labels = lv["level0"].to_numpy(dtype=object)
    x = _to_float(labels)
    if numeric and np.isfinite(x).all():
        order = np.argsort(x, kind="stable")
    else:   # top-down path order, so that taxonomy siblings are adjacent
        keys = [np.arange(len(lv))] + [pd.factorize(lv[c], sort=True)[0] for c in lv.columns[1:]]
        order = np.lexsort(keys)
    return labels[order], x[order], np.argsort(order)


def taxonomy_domain(name: str, taxonomy: Taxonomy, numeric: bool, has_null: bool, lo: float, hi: float) -> Domain:
    """A quasi-identifier's domain from its taxonomy and a summary of the source (NULLs present, min_T, max_T):
    the same leaves as :func:`domain`, without reading the source's distinct values (its leaves cover them)."""
    labels, x, tax_rows = _taxonomy_leaves(taxonomy, numeric)
    if has_null:
        labels = np.append(labels, None)
        x = np.append(x, np.nan)
    bounds = (float(lo), float(hi)) if numeric and lo is not None and hi is not None else (np.nan, np.nan)
    return Domain(name, numeric, labels, x, np.arange(len(labels)), np.zeros(len(labels), dtype=bool), taxonomy,
                  bounds, tax_rows)


@dataclass
class Cover:
    """Distinct released values of one QI and what each covers (per value arrays, plus sparse value→leaf pairs)."""

    labels: np.ndarray          # object, the released values (None = NULL)
    size: np.ndarray            # leaves covered
    level: np.ndarray           # generalization height fraction (level / height; ranges: normalized width)
    ncp: np.ndarray             # normalized certainty penalty
    loss: np.ndarray            # (leaves − 1) / (all leaves − 1)
    mid: np.ndarray             # encoding: interval midpoint (numeric) or mean leaf position (categorical)
    pair_val: np.ndarray        # value index of each (value, leaf) pair
    pair_leaf: np.ndarray       # leaf index of each pair

    def index(self, values: Sequence | pd.Series) -> np.ndarray:
        """Index of each released value (text or None) among :attr:`labels`."""
        s = pd.Series(values, dtype=object)
        keys = pd.Series(self.labels, dtype=object).fillna("\x00NULL")
        idx = pd.Index(keys).get_indexer(s.fillna("\x00NULL"))
        if (idx < 0).any():
            raise AnonSQLError(f"released value(s) {sorted(map(str, set(s[idx < 0])))[:5]} were not parsed")
        return idx

    def fraction(self, leaf_mask: np.ndarray) -> np.ndarray:
        """Per released value: the share of its leaves inside ``leaf_mask`` (uniform spread)."""
        hit = np.bincount(self.pair_val, weights=leaf_mask[self.pair_leaf].astype(float), minlength=len(self.labels))
        return hit / self.size


def _taxonomy_index(tax: Taxonomy, level: int | None) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Label → taxonomy row positions under it, and label → lowest level (all levels, or the one given)."""
    return _memo("index", tax, level, lambda: _index_of(tax, level))


def _index_of(tax: Taxonomy, level: int | None) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """:func:`_taxonomy_index`, computed."""
    lv = tax.levels
    levels = [level] if level is not None else range(lv.shape[1])
    rows: dict[str, list[np.ndarray]] = {}
    low: dict[str, int] = {}
    for j in levels:
        for label, pos in lv.groupby(f"level{j}", sort=False).indices.items():
            rows.setdefault(label, []).append(pos)
            low.setdefault(label, j)
    return {k: np.unique(np.concatenate(v)) for k, v in rows.items()}, low


def cover(dom: Domain, released: Sequence, level: int | None = None) -> Cover:
    """Parse the distinct released values of one QI (see the module docstring); raise on a value nothing explains."""
    labels = pd.unique(pd.Series(list(released), dtype=object))
    tax = dom.taxonomy
    by_label, low = _taxonomy_index(tax, level) if tax is not None else ({}, {})
    if tax is not None:   # taxonomy rows → domain leaf codes
        leaf_of_row = dom.tax_rows if dom.tax_rows is not None else dom.codes(tax.levels["level0"])
    height = tax.height if tax is not None and tax.height > 0 else 1
    every = np.arange(dom.n)
    leaf_pos = {str(label): i for i, label in enumerate(dom.labels) if label is not None}
    span = dom.hi - dom.lo if dom.numeric else float("nan")
    vals, leaves, lvl = [], [], []
    for i, v in enumerate(labels):   # one step per distinct released value (an aggregate), never per row
        if v is None or (isinstance(v, float) and np.isnan(v)):
            got, frac = np.array([dom.null_leaf]) if dom.null_leaf >= 0 else every, 0.0
        elif str(v) in by_label:
            got = leaf_of_row[by_label[str(v)]]
            if str(v) == TOP or low[str(v)] == tax.height:
                got = np.union1d(got, [dom.null_leaf]) if dom.null_leaf >= 0 else got
            frac = low[str(v)] / height
        elif str(v) == TOP:
            got, frac = every, 1.0
        elif str(v) in leaf_pos:
            got, frac = np.array([leaf_pos[str(v)]]), 0.0
        else:
            rng = parse_interval(v) if dom.numeric else None
            got = (np.flatnonzero((dom.x >= rng[0]) & (dom.x <= rng[1])) if rng is not None
                   else np.zeros(0, np.int64))
            frac = float("nan")          # a range's height fraction is its normalized width (filled in below)
            if not len(got):
                raise AnonSQLError(
                    f"quasi-identifier {dom.name!r}: released value {v!r} is neither a taxonomy label, '*', a "
                    "number nor a [lo-hi] range of the data; the metrics cannot tell what it covers (was the "
                    "taxonomy changed after the release?)")
        got = got[got >= 0]
        vals.append(np.full(len(got), i))
        leaves.append(got)
        lvl.append(frac)
    pair_val = np.concatenate(vals).astype(np.int64) if vals else np.zeros(0, np.int64)
    pair_leaf = np.concatenate(leaves).astype(np.int64) if leaves else np.zeros(0, np.int64)
    k = len(labels)
    size = np.bincount(pair_val, minlength=k).astype(float)
    loss = ncp_categorical(size, dom.n)
    if dom.numeric:
        xs = dom.x[pair_leaf]
        finite = np.isfinite(xs)
        lo = np.full(k, np.inf)
        hi = np.full(k, -np.inf)
        np.minimum.at(lo, pair_val[finite], xs[finite])
        np.maximum.at(hi, pair_val[finite], xs[finite])
        for i, v in enumerate(labels):   # an interval label states its own bounds ([20-29] spans 9 even over 2 leaves)
            rng = parse_interval(v)
            if rng is not None and str(v) != TOP:
                lo[i], hi[i] = rng
        width = np.where(np.isfinite(lo) & np.isfinite(hi), np.maximum(hi - lo, 0.0), 0.0)
        has_null = np.bincount(pair_val, weights=(pair_leaf == dom.null_leaf).astype(float), minlength=k) > 0
        ncp = ncp_numeric(width, span, has_null & (size > 1), flat=(size > 1).astype(float))
        mid = np.where(np.isfinite(lo) & np.isfinite(hi), (lo + hi) / 2, (dom.lo + dom.hi) / 2)
    else:
        ncp = loss.copy()
        mid = np.bincount(pair_val, weights=dom.order[pair_leaf].astype(float), minlength=k) / size
    level_frac = np.array(lvl, dtype=float)
    level_frac = np.where(np.isnan(level_frac), ncp, level_frac)
    return Cover(np.asarray(labels, dtype=object), size, level_frac, np.clip(ncp, 0, 1), loss, mid,
                 pair_val, pair_leaf)
