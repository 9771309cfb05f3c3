"""Generalization taxonomies: one leaf → ancestor map per level, loaded from ARX CSV or built from the data.

A taxonomy is a table of strings with one row per leaf and one column per level (``level0`` = the leaf itself,
the last level usually ``*``). Level values are compared as text: the source column is cast to VARCHAR.
"""
from __future__ import annotations

import copy
import csv
import hashlib
import io
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
import warnings
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from ..errors import TaxonomyError

if TYPE_CHECKING:
    import pandas as pd

TOP = "*"


@dataclass
class Taxonomy:
    """A full-domain generalization hierarchy: ``levels`` holds one column per level, ``level0`` the leaves."""

    name: str
    levels: pd.DataFrame
    kind: str = "explicit"
    spec: dict[str, Any] = field(default_factory=dict)
    null_parent: str | None = None

    def __post_init__(self) -> None:
        self.levels = self.levels.astype(str).reset_index(drop=True)
        self.levels.columns = [f"level{i}" for i in range(self.levels.shape[1])]
        self._validate_shape()

    def copy(self, keep_fingerprint: bool = False) -> "Taxonomy":
        """An independent copy (own levels frame and spec), without validating again. ``keep_fingerprint``: a
        cache hands the copy out as it is (:func:`from_arx_csv`, the built-ins): it takes the original's content
        digest, computed once per cached taxonomy instead of once per copy; the cached original stays unchanged
        whatever a caller does to its copy."""
        out = copy.copy(self)
        out.levels, out.spec = self.levels.copy(), dict(self.spec)
        out.__dict__.pop("_content_key", None)      # memo key of metrics/values.py: the copy may change
        out.__dict__.pop("_fingerprint", None)
        if keep_fingerprint:
            out.__dict__["_fingerprint"] = self.fingerprint()
        return out

    def fingerprint(self) -> str:
        """A digest of the content (every level's values and the NULL parent): the key of caches of what is built
        from a taxonomy (the compiler's rendered level maps). Computed once per instance (never changed in place)."""
        if "_fingerprint" not in self.__dict__:
            content = repr((self.null_parent, self.levels.shape, self.levels.to_numpy().tolist()))
            self.__dict__["_fingerprint"] = hashlib.sha256(content.encode("utf-8")).hexdigest()
        return self.__dict__["_fingerprint"]

    # -- structure -------------------------------------------------------------------------------------------
    @property
    def height(self) -> int:
        """Highest level index (levels run 0..height)."""
        return self.levels.shape[1] - 1

    @property
    def leaves(self) -> list[str]:
        return self.levels["level0"].tolist()

    def mapping(self, level: int) -> dict[str, str]:
        """Leaf → value at ``level``."""
        self._check_level(level)
        return dict(zip(self.levels["level0"], self.levels[f"level{level}"]))

    def leaf_counts(self, level: int) -> dict[str, int]:
        """Number of leaves under each value of ``level`` (for NCP / coverage)."""
        self._check_level(level)
        return self.levels.groupby(f"level{level}")["level0"].nunique().to_dict()

    def _check_level(self, level: int) -> None:
        if not 0 <= level <= self.height:
            raise TaxonomyError(
                f"taxonomy {self.name!r} has levels 0..{self.height}; level {level} does not exist"
            )

    def _validate_shape(self) -> None:
        import pandas as pd
        lv = self.levels
        if lv.empty:
            raise TaxonomyError(f"taxonomy {self.name!r} has no leaves")
        dup = lv["level0"][lv["level0"].duplicated()]
        if len(dup):
            raise TaxonomyError(
                f"taxonomy {self.name!r} lists leaf value(s) more than once: {sorted(set(dup))[:10]}"
            )
        codes = [pd.factorize(lv[c])[0] for c in lv.columns]
        for i in range(1, lv.shape[1]):
            # a value at level i-1 must have exactly one parent at level i: as many distinct (child, parent) pairs
            # as children (integer codes, cheap); the grouped search below only names the offenders
            child, parent = codes[i - 1], codes[i]
            if len(np.unique(child * (int(parent.max()) + 1) + parent)) == len(np.unique(child)):
                continue
            parents = lv.groupby(f"level{i - 1}")[f"level{i}"].nunique()
            bad = parents[parents > 1]
            if len(bad):
                examples = ", ".join(
                    f"{v!r} → {sorted(lv.loc[lv[f'level{i - 1}'] == v, f'level{i}'].unique())}"
                    for v in bad.index[:5]
                )
                raise TaxonomyError(
                    f"taxonomy {self.name!r} is inconsistent: at level {i - 1} a value has more than one parent "
                    f"at level {i} ({examples}); each value needs exactly one parent per level"
                )
        leaves = lv["level0"]
        for i in range(1, lv.shape[1]):
            # a label above the leaves that is another leaf's value, where that leaf generalizes to something else
            # (`Male;Female;*`: "Female" at level 1 stands for Male): a released value would read as the wrong leaf
            # (hostile round 3, X02). A label equal to a leaf that it covers (`a;a;*`, `b;a;*`) is no lie
            labels = lv[f"level{i}"]
            own = pd.Series(labels.to_numpy(), index=leaves.to_numpy())
            named = labels[labels.isin(leaves)]
            wrong = named[named.map(own).to_numpy() != named.to_numpy()]
            if len(wrong):
                shown = ", ".join(f"{v!r} (the leaf {v!r} is {own[v]!r} at level {i})" for v in sorted(set(wrong))[:5])
                raise TaxonomyError(
                    f"taxonomy {self.name!r}: level {i} uses leaf values as labels for other leaves: {shown}; a "
                    "released value would read as the wrong leaf. Rename those labels (e.g. 'Female-group')")

    def check_covers(self, values: pd.Series, counts: pd.Series | None = None, column: str | None = None) -> None:
        """Raise if a (non-NULL) data value has no leaf; the error lists up to 10 missing values and their counts."""
        import pandas as pd
        arr = np.asarray(values, dtype=object)    # no Series: a small release checks 8 columns every time
        present = pd.notna(arr)
        bad = np.zeros(len(arr), dtype=bool)
        # both sides as numpy text: text against an object array is a per-pair comparison in np.isin (minutes for
        # 300,000 distinct values, where text against text sorts: 0.3 s)
        leaves = self.levels["level0"].dropna().to_numpy(dtype=str)
        bad[present] = ~np.isin(arr[present].astype(str), leaves)
        if bad.any():     # the common case (every value has a leaf) stays one vectorized membership test
            v = pd.Series(arr, dtype=object)
            n = np.ones(len(v)) if counts is None else pd.Series(counts).to_numpy()
            missing = pd.DataFrame({"v": v[bad].to_numpy(), "n": n[bad]})
            agg = missing.groupby("v")["n"].sum().sort_values(ascending=False)
            shown = ", ".join(f"{v!r} ({int(n)} records)" for v, n in agg.head(10).items())
            more = f" and {len(agg) - 10} more" if len(agg) > 10 else ""
            where = f" for column {column!r}" if column else ""
            raise TaxonomyError(
                f"taxonomy {self.name!r}{where} has no leaf for {len(agg)} value(s) in the data: {shown}{more}. "
                "Add these values to the taxonomy (or use a builder such as interval/mask that covers the data)."
            )

    def to_frame(self) -> pd.DataFrame:
        """Long form (leaf, level, value) as stored in ``anon.taxonomy_nodes``."""
        import pandas as pd
        long = self.levels.melt(id_vars="level0", var_name="level", value_name="value", ignore_index=True)
        long["level"] = long["level"].str.slice(5).astype(int)
        long = long.rename(columns={"level0": "leaf"})
        base = pd.DataFrame({"leaf": self.levels["level0"], "level": 0, "value": self.levels["level0"]})
        out = pd.concat([base, long[long["level"] > 0]], ignore_index=True)
        out.insert(0, "taxonomy", self.name)
        return out.sort_values(["level", "leaf"], kind="stable").reset_index(drop=True)

    @classmethod
    def from_frame(cls, name: str, long: pd.DataFrame, kind: str = "explicit", spec: dict | None = None) -> "Taxonomy":
        """Inverse of :meth:`to_frame`."""
        wide = long.pivot(index="leaf", columns="level", values="value").sort_index(axis=1)
        wide = wide.reset_index(drop=True)
        return cls(name, wide, kind=kind, spec=spec or {})

    def to_arx_csv(self) -> str:
        """ARX format: one row per leaf, ``value;level1;...;*``."""
        buf = io.StringIO()
        self.levels.to_csv(buf, sep=";", header=False, index=False, lineterminator="\n")
        return buf.getvalue()


# -- loaders and builders ----------------------------------------------------------------------------------------
def from_arx_csv(path: str | Path, name: str | None = None) -> Taxonomy:
    """Load an ARX hierarchy CSV (``value;level1;...;*``, no header, any line ending)."""
    path = Path(path)
    if not path.exists():
        raise TaxonomyError(f"taxonomy file {str(path)!r} does not exist")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise TaxonomyError(f"taxonomy file {str(path)!r} is not UTF-8 text (byte {err.object[err.start]:#04x} at "
                            f"offset {err.start}); save it as UTF-8, e.g. iconv -f latin1 -t utf-8 "
                            f"{path.name} > {path.stem}.utf8{path.suffix}") from None
    except OSError as err:
        raise TaxonomyError(f"taxonomy file {str(path)!r} cannot be read: {err.strerror}") from None
    # parsed, validated and fingerprinted once per content: a warm release re-reads a few kB (so a changed file is
    # always seen, whatever its size and modification time), not the parse, the checks and the digest
    return _arx_cached(text, name or path.stem.replace("adult_hierarchy_", ""), str(path)).copy(keep_fingerprint=True)


@lru_cache(maxsize=256)
def _arx_cached(text: str, name: str, path: str) -> Taxonomy:
    """One parsed and validated taxonomy per (file content, name, path); callers get independent copies (never this
    instance, so none can change what the next load returns)."""
    return from_arx_text(text, name, spec={"kind": "file", "path": path})


def from_arx_text(text: str, name: str, spec: dict | None = None) -> Taxonomy:
    """Parse ARX hierarchy text; rows may have ragged lengths only if padded by repeating the last value."""
    import pandas as pd
    rows = [r for r in csv.reader(io.StringIO(text), delimiter=";") if r and any(c.strip() for c in r)]
    if not rows:
        raise TaxonomyError(f"taxonomy {name!r}: the file has no rows")
    width = max(len(r) for r in rows)
    if width < 2:
        where = f" ({spec['path']!r})" if spec and "path" in spec else ""
        hint = ("; this one looks comma-separated: use ';' between the columns" if any("," in r[0] for r in rows)
                else "")
        raise TaxonomyError(f"taxonomy {name!r}{where} has a single column: an ARX hierarchy gives each value and its "
                            f"generalizations on one line, separated by ';' (value;level1;...;*){hint}")
    padded = [r + [r[-1]] * (width - len(r)) for r in rows]
    try:
        return Taxonomy(name, pd.DataFrame(padded), kind="file", spec=spec or {"kind": "file"})
    except TaxonomyError as err:   # a short row's padding may be the conflict: say which row was padded (round 22, Y60)
        short = next((r for r in rows if len(r) < width), None)
        if short is None or "inconsistent" not in str(err):
            raise
        raise TaxonomyError(f"{err} — note: row {';'.join(short)!r} has {len(short)} of {width} values and was "
                            f"padded with its last value {short[-1]!r}; give every row all {width} levels if that "
                            "was not meant") from None


def from_mapping(name: str, mapping: dict[Any, Sequence[Any]], top: bool = True) -> Taxonomy:
    """Explicit tree: leaf → [level1, level2, ...]; a ``*`` top level is added when missing and ``top``."""
    import pandas as pd
    rows = [[str(leaf), *[str(a) for a in ancestors]] for leaf, ancestors in mapping.items()]
    width = max(len(r) for r in rows)
    rows = [r + [r[-1]] * (width - len(r)) for r in rows]
    frame = pd.DataFrame(rows)
    return _with_top(name, frame, top, "mapping", {"kind": "mapping", "mapping": {str(k): [str(x) for x in v] for k, v in mapping.items()}})


def _with_top(name: str, frame: pd.DataFrame, top: bool, kind: str, spec: dict) -> Taxonomy:
    if top and not (frame.iloc[:, -1] == TOP).all():
        frame = frame.copy()
        frame[frame.shape[1]] = TOP
    return Taxonomy(name, frame, kind=kind, spec=spec)


def _present(values: Iterable[Any]) -> list[Any]:
    """The non-NULL values (None, NaN and pd.NA are NULL: a NULL is a value of its own, never a leaf)."""
    import pandas as pd
    return [v for v in values if not pd.isna(v)]


def _numbers(values: Iterable[Any]) -> tuple[list[str], np.ndarray]:
    texts = sorted({str(v) for v in _present(values)})
    try:
        nums = np.array([float(t) for t in texts])
    except ValueError as err:
        raise TaxonomyError(f"interval taxonomies need numeric values: {err}") from None
    return texts, nums


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def interval(name: str, values: Iterable[Any], widths: Sequence[float] | None = None,
             bounds: Sequence[Sequence[float]] | None = None, top: bool = True) -> Taxonomy:
    """Numeric interval hierarchy: per level either a width (bins aligned at 0) or explicit cut points.

    Integer data gets closed labels ``[20-34]``; non-integer data half-open labels ``[20.5, 25.5)``.
    """
    import pandas as pd
    texts, nums = _numbers(values)
    if not texts:
        raise TaxonomyError(f"interval taxonomy {name!r}: the column has no non-NULL values")
    with np.errstate(invalid="ignore"):   # NaN / inf are not integral (no numpy warning on stderr: V02)
        integral = bool(np.all(np.mod(nums, 1) == 0))
    columns = [texts]
    specs = []
    if widths:
        for w in widths:
            if not w or w <= 0:
                raise TaxonomyError(f"interval taxonomy {name!r}: widths must be positive, got {w!r}")
        for lower, upper in zip(widths, widths[1:]):   # a bin must fall in one bin of the next level
            if upper < lower or not float(upper / lower).is_integer():
                raise TaxonomyError(
                    f"interval taxonomy {name!r}: widths {list(widths)}: each level's width must be a multiple of "
                    f"the level below's ({upper!r} is not a multiple of {lower!r}), so that every bin falls in one "
                    f"bin of the next level; e.g. widths {[lower, lower * 2]}")
        for w in widths:
            lo = np.floor(nums / w) * w
            columns.append([_label(a, a + w, integral) for a in lo])
        specs = list(widths)
    elif bounds:
        for cuts in bounds:
            cuts = sorted(float(c) for c in cuts)
            if nums.min() < cuts[0] or nums.max() >= cuts[-1]:
                raise TaxonomyError(
                    f"interval taxonomy {name!r}: cut points {cuts} must cover the data range "
                    f"[{_fmt(nums.min())}, {_fmt(nums.max())}] (last cut is exclusive)"
                )
            idx = np.searchsorted(cuts, nums, side="right") - 1
            columns.append([_label(cuts[i], cuts[i + 1], integral) for i in idx])
        specs = [list(b) for b in bounds]
    else:
        raise TaxonomyError(f"interval taxonomy {name!r} needs `widths` or `bounds`")
    frame = pd.DataFrame(dict(enumerate(columns)))
    spec = {"kind": "interval", "widths": specs} if widths else {"kind": "interval", "bounds": specs}
    return _with_top(name, frame, top, "interval", spec)


def _label(lo: float, hi: float, integral: bool) -> str:
    if integral:
        return f"[{_fmt(lo)}-{_fmt(hi - 1)}]"
    return f"[{_fmt(lo)}, {_fmt(hi)})"


def mask(name: str, values: Iterable[Any], levels: int | None = None, char: str = "*") -> Taxonomy:
    """Masking hierarchy for codes: level L replaces the last L characters by ``*`` (52003 → 5200* → ... → *****)."""
    import pandas as pd
    texts = sorted({str(v) for v in _present(values)})
    if not texts:
        raise TaxonomyError(f"mask taxonomy {name!r}: the column has no non-NULL values")
    longest = max(len(t) for t in texts)
    n = levels if levels is not None else longest
    if n < 1:
        raise TaxonomyError(f"mask taxonomy {name!r}: levels must be >= 1, got {levels!r}")
    if n > longest:   # every level past the longest value masks nothing more: the same level stored again
        raise TaxonomyError(f"mask taxonomy {name!r}: levels = {n} masks more characters than the longest value has "
                            f"({longest}); give --levels {longest} or fewer")
    columns = [texts]
    for lvl in range(1, n + 1):
        columns.append([t[: max(len(t) - lvl, 0)] + char * min(lvl, len(t)) for t in texts])
    frame = pd.DataFrame(dict(enumerate(columns)))
    return _with_top(name, frame, len(set(columns[-1])) > 1, "mask", {"kind": "mask", "levels": n})


def dates(name: str, values: Iterable[Any]) -> Taxonomy:
    """Date hierarchy: day (YYYY-MM-DD) → month (YYYY-MM) → year (YYYY) → ``*``."""
    import pandas as pd
    texts = sorted({str(v) for v in _present(values)})
    with warnings.catch_warnings():   # pandas' "could not infer format" on text that is no date (X21): the
        warnings.simplefilter("ignore", UserWarning)   # values are then refused below, by name
        parsed = pd.to_datetime(pd.Series(texts), errors="coerce")
    if parsed.isna().any():
        bad = [t for t, p in zip(texts, parsed) if pd.isna(p)][:10]
        raise TaxonomyError(f"date taxonomy {name!r}: values are not dates: {bad}")
    frame = pd.DataFrame({0: texts, 1: parsed.dt.strftime("%Y-%m").tolist(), 2: parsed.dt.strftime("%Y").tolist()})
    return _with_top(name, frame, True, "date", {"kind": "date"})


def top_only(name: str, values: Iterable[Any]) -> Taxonomy:
    """The trivial hierarchy: each value, then ``*``."""
    import pandas as pd
    texts = sorted({str(v) for v in _present(values)})
    return Taxonomy(name, pd.DataFrame({0: texts, 1: TOP}), kind="top", spec={"kind": "top"})


def build_taxonomy(name: str, spec: dict[str, Any], values: Iterable[Any] | None = None) -> Taxonomy:
    """Build a taxonomy from an inline policy spec such as ``{kind = "interval", widths = [5, 10]}``."""
    kind = spec.get("kind")
    vals = list(values) if values is not None else []
    if kind == "file":
        if "path" not in spec:
            raise TaxonomyError(f"taxonomy {name!r}: kind = 'file' needs a `path`")
        tax = from_arx_csv(spec["path"], name)
        return tax
    if kind == "interval":
        return interval(name, vals, widths=spec.get("widths"), bounds=spec.get("bounds"), top=spec.get("top", True))
    if kind == "mask":
        return mask(name, vals, levels=spec.get("levels"))
    if kind == "date":
        return dates(name, vals)
    if kind == "top":
        return top_only(name, vals)
    if kind == "mapping":
        return from_mapping(name, spec["mapping"], top=spec.get("top", True))
    raise TaxonomyError(
        f"taxonomy {name!r}: unknown kind {kind!r}; use one of file, interval, mask, date, top, mapping"
    )


def needs_values(spec: dict[str, Any]) -> bool:
    """Whether a builder spec derives its leaves from the data."""
    return spec.get("kind") in {"interval", "mask", "date", "top"}
