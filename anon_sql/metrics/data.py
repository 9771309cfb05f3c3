"""What every metric reads: the release table, its catalog row (policy, plan, counts), taxonomies and the source —
fetched once as aggregates (class sizes, distinct released and original QI tuples) and cached.

Every read is lazy and shared (docs/metrics.md): a metric of the release alone (k, DCP, l-diversity, ...) never
touches the source or the taxonomies; named taxonomies read no data, and a QI's domain is its taxonomy's leaves plus
one aggregate pass over the source (NULLs, min_T, max_T); the release is read by one GROUP BY per call (with the
first sensitive attribute when a metric needs its counts, class sizes summed from it), numbered by class in SQL; and
each GROUP BY runs on the raw columns (ENUM codes, numbers) and casts its few groups to text afterwards.

Conventions (spec/06): N counts released records; noise records a method flags in a column are left out of the
utility and risk-of-record metrics (an analyst filters them), but count in class sizes (they are what the checks saw);
suppressed records count as fully generalized (`*` for every QI) in NCP, precision, IV-weighted losses and KL.
"""
from __future__ import annotations

import json
from functools import cached_property, lru_cache, reduce
from typing import Any, Iterable

import numpy as np
import pandas as pd
from sqlglot import exp

from ..common.columns import UNIT, is_numeric
from ..compiler.views import EC_ID, ReleaseNames
from ..errors import SourceError
from ..models import ClassStats, SensitiveCounts
from ..policy.model import Policy
from ..data.source import Source, relation_exists, resolve_source
from ..common.sqlbuild import alias, and_all, col, ident, lit, record_count, render
from ..data.taxonomy import Taxonomy
from .coverage import covering_pairs
from .values import Cover, Domain, cover, domain, taxonomy_domain

def varchar(e: exp.Expression) -> exp.Expression:
    return exp.Cast(this=e, to=exp.DataType.build("VARCHAR"))


def _fetch(con, query: exp.Expression) -> pd.DataFrame:
    """Run a query tree and fetch its (aggregate) result as a DataFrame."""
    return con.execute(render(query)).df()


def _grouped(query: exp.Select, keys: list[exp.Expression]) -> exp.Select:
    """GROUP BY the keys and ORDER BY them, so that sums over the fetched groups are the same on every run."""
    exprs = [k.this if isinstance(k, exp.Alias) else k for k in keys]
    return (query.group_by(*[e.copy() for e in exprs], copy=False)
            .order_by(*[exp.Ordered(this=e.copy(), nulls_first=True) for e in exprs], copy=False))


def _text_groups(relation: exp.Expression, keys: list[tuple[str, exp.Expression, bool]],
                 weight: exp.Expression, number: int = 0) -> exp.Select:
    """Records per group of ``keys`` (alias, expression, as text?), in a fixed order: GROUP BY the raw expressions
    (fast on ENUM codes and numbers), then cast the text keys of the few groups to VARCHAR and re-sum (distinct raw
    values may share a text), so the result equals one GROUP BY of the casts at the cost of a bare GROUP BY.
    ``number`` > 0 adds column ``c``: the 0-based dense rank of the first ``number`` keys (the class number)."""
    inner = (exp.select(*[alias(e.copy(), a) for a, e, _ in keys], alias(weight, "n"))
             .from_(relation.copy(), copy=False).group_by(*[e.copy() for _, e, _ in keys], copy=False))
    outer = [alias(varchar(col(a)) if text else col(a), a) for a, _, text in keys]
    items = [*outer, alias(exp.Sum(this=col("n")), "n")]
    if number:
        rank = exp.Window(this=exp.Anonymous(this="DENSE_RANK"), order=exp.Order(expressions=[
            exp.Ordered(this=k.this.copy(), nulls_first=True) for k in outer[:number]]))
        items.append(alias(exp.Sub(this=rank, expression=lit(1)), "c"))
    return _grouped(exp.select(*items).from_(inner.subquery("g", copy=False), copy=False), outer)


@lru_cache(maxsize=1)
def _catalog_row_sql() -> str:
    """The released rows of ``anon.releases`` for one name (bound as ``?``): a release has one, a replaced one a
    few, so the latest is picked in Python (a top-N sort costs DuckDB a millisecond per call)."""
    return render(exp.select("policy_json", "plan", "source", "records_in", "suppressed", "noise", "created_at")
                  .from_(exp.Table(this=ident("releases"), db=ident("anon")))
                  .where(and_all([exp.EQ(this=col("release"), expression=exp.Placeholder()),
                                  exp.EQ(this=col("status"), expression=lit("released"))])))


def _class_key_exprs(quasi: list[str] | tuple[str, ...], noise_flag: str | None
                     ) -> list[tuple[str, exp.Expression, bool]]:
    """GROUP BY keys of a class: ec_id, released QI values (as text), the noise flag."""
    keys = [("e", col(EC_ID), False)] + [(f"q{i}", col(q), True) for i, q in enumerate(quasi)]
    if noise_flag:
        keys.append(("noise", exp.Coalesce(this=col(noise_flag), expressions=[exp.false()]), False))
    return keys


@lru_cache(maxsize=256)
def _class_sql(name: str, quasi: tuple[str, ...], noise_flag: str | None, count_column: str | None,
               sensitive: str | None, people: bool = False) -> str:
    """Rendered :func:`_text_groups` of a release by class (and sensitive value), numbered by class (column c).
    ``people``: a group's weight is its distinct privacy units (the table still holds ``__unit``), not its rows."""
    keys = _class_key_exprs(quasi, noise_flag) + ([("v", col(sensitive), False)] if sensitive is not None else [])
    weight = exp.Count(this=exp.Distinct(expressions=[col(UNIT)])) if people else record_count(count_column)
    return render(_text_groups(ReleaseNames(name).table, keys, weight, number=len(quasi) + 1))


class ReleaseData:
    """A release as the metrics see it; build it with :meth:`from_catalog` or (inside ``release()``) :meth:`live`."""

    def __init__(self, con, name: str, policy: Policy, plan: dict[str, Any], taxonomies: dict[str, Taxonomy] | None,
                 source: Source | str, records_in: int, suppressed: int, noise: int,
                 params: dict[str, Any] | None = None):
        """``taxonomies`` None: resolved on first use; ``source`` a label: resolved on first use."""
        self.con, self.name, self.policy, self.plan = con, name, policy, plan
        if taxonomies is not None:
            self.__dict__["taxonomies"] = taxonomies
        if isinstance(source, Source):
            self.__dict__["source"] = source
        self.source_label = source.label if isinstance(source, Source) else str(source)
        self.records_in, self.suppressed, self.noise = int(records_in), int(suppressed), int(noise)
        self.params = {**{k: v for k, v in (policy.metrics or {}).items() if k != "compute"}, **(params or {})}
        self.names = ReleaseNames(name)
        self.cache: dict[str, Any] = {}      # results shared between metrics (sensitive counts, workload, ...)
        # the table still holds the privacy unit (a live release before its unit leaves): the sensitive-value counts
        # are people holding the value (docs/units.md); the utility metrics keep weighting records
        self.people = False

    # -- construction --------------------------------------------------------------------------------------------
    @classmethod
    def from_catalog(cls, con, name: str, params: dict[str, Any] | None = None) -> "ReleaseData":
        """Read the release's catalog row (policy, plan, counts); source and taxonomies are resolved when needed."""
        from ..catalog.store import is_installed

        if not is_installed(con):    # a probe, not a failing query: a caller's open transaction stays usable
            raise SourceError("this database has no anon catalog, so no release to measure; create one with "
                              "anon_sql.release(...) or `anon-sql release POLICY --db FILE`")
        rows = con.execute(_catalog_row_sql(), [name]).fetchall()
        if not rows or not relation_exists(con, exp.Table(this=ident(name))):
            known = [r[0] for r in con.execute(render(
                exp.select("release").distinct().from_(exp.Table(this=ident("releases"), db=ident("anon")))
                .where(exp.EQ(this=col("status"), expression=lit("released"))))).fetchall()]
            raise SourceError(f"{name!r} is not a materialized release of this database (releases: {sorted(known)}); "
                              "create it with anon_sql.release(...) or `anon-sql release POLICY`")
        dated = [r for r in rows if r[-1] is not None]     # the latest release of that name (as ORDER BY ... DESC)
        policy_json, plan_json, label, records_in, suppressed, noise, _ = (max(dated, key=lambda r: r[-1]) if dated
                                                                           else rows[0])
        declared = json.loads(policy_json)
        for c in Policy.from_dict(declared).related_sensitive:   # released in <release>_<name>, not in this table:
            declared["attributes"].pop(c, None)                    # its people's values are verified by `check`
        policy = Policy.from_dict(declared)
        return cls(con, name, policy, json.loads(plan_json or "{}"), None, label, records_in or 0,
                   suppressed or 0, noise or 0, params)

    @classmethod
    def live(cls, con, rel, taxonomies: dict[str, Taxonomy], src: Source,
             params: dict[str, Any] | None = None) -> "ReleaseData":
        """From a :class:`~anon_sql.runner.run.Release` whose table exists in the open transaction (dry runs too)."""
        data = cls(con, rel.name, rel.policy, dict(rel.plan), taxonomies, src, rel.records_in, rel.suppressed,
                   rel.noise, params)
        if rel.policy.privacy_unit:
            probe = con.execute(render(exp.select("*").from_(data.names.table.copy()).limit(0)))
            data.people = UNIT in [d[0] for d in probe.description]
            probe.fetchall()
        return data

    @cached_property
    def source(self) -> Source:
        """The release's source: its table/file, else its working ``__source`` view (identifiers dropped)."""
        try:
            return resolve_source(self.con, self.source_label)
        except SourceError:
            if relation_exists(self.con, self.names.source):
                return resolve_source(self.con, self.names.source)
            raise SourceError(f"release {self.name!r}: its source {self.source_label!r} is gone (and so is the "
                              f"{render(self.names.source)} view); metrics that compare with the original data "
                              "need it back") from None

    # -- plan ----------------------------------------------------------------------------------------------------
    @property
    def quasi(self) -> list[str]:
        return list(self.policy.quasi)

    @property
    def is_levels(self) -> bool:
        return self.plan.get("kind") != "assignment"

    @property
    def noise_flag(self) -> str | None:
        return self.plan.get("noise_flag")

    @property
    def k(self) -> int:
        return int(self.policy.privacy.k or 1)

    def weight(self) -> exp.Expression:
        """Records of a group (the policy's count column, else COUNT(*))."""
        return record_count(self.policy.count_column)

    @cached_property
    def numeric(self) -> dict[str, bool]:
        return {q: is_numeric(self.source.types.get(q, "")) for q in self.quasi}

    @cached_property
    def taxonomies(self) -> dict[str, Taxonomy]:
        """The policy's taxonomies; inline builders read :attr:`value_counts`, named ones nothing (the release was
        checked against the source when it was made; a released value no taxonomy explains still fails in cover())."""
        from ..catalog.taxonomy_lookup import resolve_taxonomies

        return resolve_taxonomies(self.con, self.policy, self.source, False, catalog_con=self.con,
                                  value_counts=lambda q: self.value_counts[q], check=False)

    def prefetch(self, reads: Iterable[str]) -> None:
        """Read the shared aggregates the coming metrics need in as few passes as possible: ``sensitive`` → the
        release grouped with the first sensitive attribute (class sizes follow from it), ``tuples`` → the original QI
        tuples (per-QI value counts follow from them)."""
        reads = set(reads)
        if "sensitive" in reads and self.policy.sensitive and "groups" not in self.__dict__:
            self.sensitive_counts(self.policy.sensitive[0])
        if "tuples" in reads:
            self.original

    # -- the release ---------------------------------------------------------------------------------------------
    def _class_keys(self) -> list[tuple[str, exp.Expression, bool]]:
        """GROUP BY keys of a class: ec_id, released QI values (as text), the noise flag."""
        return _class_key_exprs(self.quasi, self.noise_flag)

    def _class_query(self, sensitive: str | None = None) -> str:
        """SQL of the release grouped by class (and a sensitive attribute), numbered by class; rendered once per
        process for the same release shape (the tree costs as much to build and render as DuckDB takes to run it
        over 10^5 rows). Sensitive counts count people when the table holds the unit."""
        return _class_sql(self.name, tuple(self.quasi), self.noise_flag, self.policy.count_column, sensitive,
                          self.people and sensitive is not None)

    @cached_property
    def groups(self) -> pd.DataFrame:
        """One row per (ec_id, released QI values[, noise flag]): columns e, q0..qn, [noise], n, c (class number)."""
        frame = self.con.execute(self._class_query()).df()
        frame["n"] = frame["n"].astype(float)
        return frame

    @cached_property
    def class_keys(self) -> pd.DataFrame:
        """One row per equivalence class (ec_id and released QI values), in ``class_sizes`` order (column c)."""
        return self.groups.drop_duplicates("c").sort_values("c").reset_index(drop=True)[self._class_cols()]

    def _class_cols(self) -> list[str]:
        return ["e"] + [f"q{i}" for i in range(len(self.quasi))]

    def class_index(self, frame: pd.DataFrame) -> np.ndarray:
        """Class number of each row of a frame holding the class columns (e, q0..qn): its column c when the SQL
        numbered the classes (the same dense rank of the class keys in every query), else a lookup."""
        if "c" in frame:
            return frame["c"].to_numpy(dtype=np.int64)
        keys = self.class_keys.assign(__c=np.arange(len(self.class_keys)))
        merged = frame[self._class_cols()].merge(keys, on=self._class_cols(), how="left")
        return merged["__c"].to_numpy(dtype=np.int64)

    @cached_property
    def class_sizes(self) -> np.ndarray:
        """Records per class (noise included: the class as released)."""
        return np.bincount(self.class_index(self.groups), weights=self.groups["n"].to_numpy(),
                           minlength=self.n_classes)

    @property
    def n_classes(self) -> int:
        """Number of equivalence classes."""
        c = self.groups["c"]
        return int(c.max()) + 1 if len(c) else 0

    @cached_property
    def tuples(self) -> pd.DataFrame:
        """Distinct released QI tuples with their record counts (flagged noise left out)."""
        g = self.groups
        if "noise" in g:
            g = g[~g["noise"].astype(bool)]
        cols = [f"q{i}" for i in range(len(self.quasi))]
        return g.groupby(cols, dropna=False, sort=False)["n"].sum().reset_index()

    @property
    def released_records(self) -> float:
        """N: released records, flagged noise excluded."""
        return float(self.tuples["n"].sum())

    # -- the source ----------------------------------------------------------------------------------------------
    @cached_property
    def original(self) -> pd.DataFrame:
        """Distinct original QI tuples (as text) with their record counts: columns q0..qn, n."""
        keys = [(f"q{i}", col(q), True) for i, q in enumerate(self.quasi)]
        frame = _fetch(self.con, _text_groups(self.source.relation, keys, self.weight()))
        frame["n"] = frame["n"].astype(float)
        return frame

    @cached_property
    def value_counts(self) -> dict[str, pd.DataFrame]:
        """Per QI: its distinct original values (as text, NULL kept) with record counts, columns v, n — summed from
        :attr:`original` when it was read, else one pass over the source (a UNION ALL of one GROUP BY per QI)."""
        if "original" in self.__dict__ or not self.quasi:
            o = self.original
            out = {}
            for i, q in enumerate(self.quasi):
                c = o.groupby(f"q{i}", dropna=False, sort=True)["n"].sum().rename_axis("v").reset_index()
                c["v"] = c["v"].astype(object).where(c["v"].notna(), None)
                out[q] = c
            return out
        parts = [exp.select(alias(lit(i), "j"), exp.Star()).from_(
                 _text_groups(self.source.relation, [("v", col(q), True)], self.weight()).subquery(f"c{i}", copy=False),
                 copy=False) for i, q in enumerate(self.quasi)]
        union = reduce(lambda a, b: exp.union(a, b, distinct=False, copy=False), parts)
        frame = _fetch(self.con, exp.select(exp.Star()).from_(union.subquery("u", copy=False), copy=False).order_by(
            col("j"), exp.Ordered(this=col("v"), nulls_first=True), copy=False))
        frame["n"] = frame["n"].astype(float)
        return {q: frame.loc[frame["j"] == i, ["v", "n"]].reset_index(drop=True) for i, q in enumerate(self.quasi)}

    @cached_property
    def source_summary(self) -> dict[str, tuple[bool, float | None, float | None]]:
        """Per QI: (NULLs in the source?, min_T, max_T for numeric QIs) — one aggregate pass, no GROUP BY."""
        items = []
        for i, q in enumerate(self.quasi):
            items.append(alias(exp.GT(this=exp.Sub(this=exp.Count(this=exp.Star()), expression=exp.Count(this=col(q))),
                                      expression=lit(0)), f"null{i}"))
            if self.numeric[q]:
                double = exp.DataType.build("DOUBLE")
                items += [alias(exp.Cast(this=exp.Min(this=col(q)), to=double), f"lo{i}"),
                          alias(exp.Cast(this=exp.Max(this=col(q)), to=double.copy()), f"hi{i}")]
        row = dict(zip([a.alias for a in items], self.con.execute(render(
            exp.select(*items).from_(self.source.relation.copy(), copy=False))).fetchall()[0]))
        return {q: (bool(row[f"null{i}"]), row.get(f"lo{i}"), row.get(f"hi{i}")) for i, q in enumerate(self.quasi)}

    @cached_property
    def domains(self) -> dict[str, Domain]:
        """Per QI its leaves: from the taxonomy plus :attr:`source_summary` when every QI has one (one aggregate pass
        over the source, no GROUP BY), else from the source's distinct values (:func:`~.values.domain`)."""
        tax = self.taxonomies
        if all(q in tax for q in self.quasi):
            return {q: taxonomy_domain(q, tax[q], self.numeric[q], *self.source_summary[q]) for q in self.quasi}
        return {q: domain(q, self.value_counts[q]["v"], self.numeric[q], tax.get(q)) for q in self.quasi}

    @cached_property
    def covers(self) -> dict[str, Cover]:
        """Per QI: what each distinct released value covers (level plans parse at the plan's level)."""
        out = {}
        for i, q in enumerate(self.quasi):
            level = self.plan.get(q) if self.is_levels and isinstance(self.plan.get(q), int) else None
            out[q] = cover(self.domains[q], self.groups[f"q{i}"], level if q in self.taxonomies else None)
        return out

    @cached_property
    def tuple_codes(self) -> np.ndarray:
        """Released tuples as value indexes into :attr:`covers` (rows of :attr:`tuples` × QIs)."""
        return np.column_stack([self.covers[q].index(self.tuples[f"q{i}"]) for i, q in enumerate(self.quasi)]) \
            if self.quasi else np.zeros((len(self.tuples), 0), np.int64)

    @cached_property
    def original_codes(self) -> np.ndarray:
        """Original tuples as leaf codes (rows of :attr:`original` × QIs)."""
        return np.column_stack([self.domains[q].codes(self.original[f"q{i}"]) for i, q in enumerate(self.quasi)])

    def per_value(self, attr: str) -> np.ndarray:
        """(released tuples × QIs) matrix of a Cover attribute (``ncp``, ``loss``, ``level``, ``mid``)."""
        return np.column_stack([getattr(self.covers[q], attr)[self.tuple_codes[:, i]]
                                for i, q in enumerate(self.quasi)])

    # -- sensitive attributes ------------------------------------------------------------------------------------
    def sensitive_counts(self, sa: str) -> tuple[SensitiveCounts, ClassStats, pd.Series]:
        """Per-class counts of a sensitive attribute (noise included), as the privacy models' numpy input; the first
        one read also gives :attr:`groups` (the same GROUP BY plus the attribute, summed over it)."""
        if ("sensitive", sa) in self.cache:
            return self.cache[("sensitive", sa)]
        keys = self._class_keys()
        frame = self.con.execute(self._class_query(sa)).df()
        frame["n"] = frame["n"].astype(float)
        if "groups" not in self.__dict__ and not self.people:   # c depends on the class keys only: kept as a key
            cols = [a for a, _, _ in keys] + ["c"]
            self.__dict__["groups"] = frame.groupby(cols, dropna=False, sort=False)["n"].sum().reset_index()
        cls = self.class_index(frame)
        codes, uniq = pd.factorize(frame["v"], sort=True, use_na_sentinel=False)
        n_values = len(uniq)
        rank = np.arange(n_values)
        sc = SensitiveCounts.from_codes(cls, codes, frame["n"].to_numpy(float), self.n_classes, n_values,
                                        value_rank=rank)
        sc.labels = np.asarray(uniq, dtype=object)
        stats = ClassStats(self.class_sizes, {sa: sc})
        self.cache[("sensitive", sa)] = sc, stats, pd.Series(uniq)
        return self.cache[("sensitive", sa)]

    # -- covering: which released tuples cover which original tuples --------------------------------------------
    def coverage(self, quasi: list[str], weights: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
        """For the original tuples projected on ``quasi``: Σ ``weights`` of the released tuples whose values cover
        them on every QI of ``quasi`` (see metrics/coverage.py). Returns (projected original tuples with column n,
        covered weight per tuple); the pairs are cached per QI subset."""
        key = ("pairs", tuple(quasi))
        if key not in self.cache:
            self.cache[key] = self._pairs(quasi)
        o, tuple_group, oi, ti = self.cache[key]
        w = np.bincount(tuple_group, weights=np.asarray(weights, dtype=float), minlength=int(tuple_group.max()) + 1
                        if len(tuple_group) else 0)
        return o, np.bincount(oi, weights=w[ti], minlength=len(o))

    def _pairs(self, quasi: list[str]) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
        """Projected original tuples, the projected group of each released tuple, and the covering (o, t) pairs."""
        idx = [self.quasi.index(q) for q in quasi]
        o = pd.DataFrame(self.original_codes[:, idx], columns=[f"o{j}" for j in range(len(idx))])
        o["n"] = self.original["n"].to_numpy()
        o = o.groupby([f"o{j}" for j in range(len(idx))], sort=False)["n"].sum().reset_index()
        tc, tuple_group = np.unique(self.tuple_codes[:, idx], axis=0, return_inverse=True)
        tuple_group = np.asarray(tuple_group, dtype=np.int64).ravel()
        oc = o[[f"o{j}" for j in range(len(idx))]].to_numpy(dtype=np.int64)
        oi, ti = covering_pairs(oc, tc, [self.covers[q] for q in quasi], [self.domains[q].n for q in quasi])
        return o, tuple_group, oi, ti
