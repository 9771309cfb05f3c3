"""What every metric reads: the release table, its catalog row (policy, plan, counts), taxonomies and the source —
fetched once as aggregates (class sizes, distinct released and original QI tuples) and cached.

Conventions (spec/06): N counts released records; noise records a method flags in a column are left out of the
utility and risk-of-record metrics (an analyst filters them), but count in class sizes (they are what the checks saw);
suppressed records count as fully generalized (`*` for every QI) in NCP, precision, IV-weighted losses and KL.
"""
from __future__ import annotations

import json
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from sqlglot import exp

from ..compiler import EC_ID, ReleaseNames
from ..errors import SourceError
from ..models import ClassStats, SensitiveCounts
from ..policy import Policy
from ..source import Source, relation_exists, resolve
from ..sqlbuild import alias, and_all, col, ident, lit, render
from ..taxonomy import Taxonomy
from .coverage import covering_pairs
from .values import Cover, Domain, cover, domain

NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
           "UHUGEINT", "FLOAT", "DOUBLE", "DECIMAL", "REAL", "NUMERIC", "INT")


def is_numeric(type_name: str) -> bool:
    t = str(type_name).upper()
    return t.startswith(NUMERIC) and "[]" not in t


def _varchar(e: exp.Expression) -> exp.Expression:
    return exp.Cast(this=e, to=exp.DataType.build("VARCHAR"))


def _fetch(con, query: exp.Expression) -> pd.DataFrame:
    return con.execute(render(query)).df()


def _grouped(query: exp.Select, keys: list[exp.Expression]) -> exp.Select:
    """GROUP BY the keys and ORDER BY them, so that sums over the fetched groups are the same on every run."""
    exprs = [k.this if isinstance(k, exp.Alias) else k for k in keys]
    return (query.group_by(*[e.copy() for e in exprs])
            .order_by(*[exp.Ordered(this=e.copy(), nulls_first=True) for e in exprs]))


class ReleaseData:
    """A release as the metrics see it; build it with :meth:`from_catalog` or (inside ``release()``) :meth:`live`."""

    def __init__(self, con, name: str, policy: Policy, plan: dict[str, Any], taxonomies: dict[str, Taxonomy],
                 source: Source, records_in: int, suppressed: int, noise: int, params: dict[str, Any] | None = None):
        self.con, self.name, self.policy, self.plan = con, name, policy, plan
        self.taxonomies, self.source = taxonomies, source
        self.records_in, self.suppressed, self.noise = int(records_in), int(suppressed), int(noise)
        self.params = {**{k: v for k, v in (policy.metrics or {}).items() if k != "compute"}, **(params or {})}
        self.names = ReleaseNames(name)
        self.cache: dict[str, Any] = {}      # results shared between metrics (sensitive counts, workload, ...)

    # -- construction --------------------------------------------------------------------------------------------
    @classmethod
    def from_catalog(cls, con, name: str, params: dict[str, Any] | None = None) -> "ReleaseData":
        """Read the release's catalog row (policy, plan, counts) and reload its taxonomies through the policy."""
        from ..catalog import is_installed
        from ..release import resolve_taxonomies

        if not is_installed(con):
            raise SourceError("this database has no anon catalog, so no release to measure; create one with "
                              "anon_sql.release(...) or `anon-sql release POLICY --db FILE`")
        q = (exp.select("policy_json", "plan", "source", "records_in", "suppressed", "noise")
             .from_(exp.Table(this=ident("releases"), db=ident("anon")))
             .where(and_all([exp.EQ(this=col("release"), expression=lit(name)),
                             exp.EQ(this=col("status"), expression=lit("released"))]))
             .order_by(exp.Ordered(this=col("created_at"), desc=True)).limit(1))
        rows = con.execute(render(q)).fetchall()
        if not rows or not relation_exists(con, name):
            known = [r[0] for r in con.execute(render(
                exp.select("release").distinct().from_(exp.Table(this=ident("releases"), db=ident("anon")))
                .where(exp.EQ(this=col("status"), expression=lit("released"))))).fetchall()]
            raise SourceError(f"{name!r} is not a materialized release of this database (releases: {sorted(known)}); "
                              "create it with anon_sql.release(...) or `anon-sql release POLICY`")
        policy_json, plan_json, label, records_in, suppressed, noise = rows[0]
        policy = Policy.from_dict(json.loads(policy_json))
        src = cls._source(con, name, label)
        taxonomies = resolve_taxonomies(con, policy, src, False, catalog_con=con)
        return cls(con, name, policy, json.loads(plan_json or "{}"), taxonomies, src, records_in or 0,
                   suppressed or 0, noise or 0, params)

    @staticmethod
    def _source(con, name: str, label: str) -> Source:
        """The release's source: its table/file, else the ``<release>__source`` view (identifiers dropped)."""
        try:
            return resolve(con, label)
        except SourceError:
            if relation_exists(con, name + "__source"):
                return resolve(con, name + "__source")
            raise SourceError(f"release {name!r}: its source {label!r} is gone (and so is the {name}__source view); "
                              "metrics that compare with the original data need it back") from None

    @classmethod
    def live(cls, con, rel, taxonomies: dict[str, Taxonomy], src: Source,
             params: dict[str, Any] | None = None) -> "ReleaseData":
        """From a :class:`~anon_sql.release.Release` whose table exists in the open transaction (dry runs too)."""
        plan = dict(rel.plan)
        if "noise_flag" in rel.info and "noise_flag" not in plan:
            plan["noise_flag"] = rel.info["noise_flag"]
        return cls(con, rel.name, rel.policy, plan, taxonomies, src, rel.records_in, rel.suppressed, rel.noise,
                   params)

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
        c = self.policy.count_column
        return exp.Sum(this=col(c)) if c else exp.Count(this=exp.Star())

    @cached_property
    def numeric(self) -> dict[str, bool]:
        return {q: is_numeric(self.source.types.get(q, "")) for q in self.quasi}

    # -- the release ---------------------------------------------------------------------------------------------
    @cached_property
    def groups(self) -> pd.DataFrame:
        """One row per (ec_id, released QI values[, noise flag]): columns e, q0..qn, [noise], n."""
        keys = [alias(col(EC_ID), "e")] + [alias(_varchar(col(q)), f"q{i}") for i, q in enumerate(self.quasi)]
        if self.noise_flag:
            keys.append(alias(exp.Coalesce(this=col(self.noise_flag), expressions=[exp.false()]), "noise"))
        q = _grouped(exp.select(*keys, alias(self.weight(), "n")).from_(self.names.table.copy()), keys)
        frame = _fetch(self.con, q)
        frame["n"] = frame["n"].astype(float)
        return frame

    @cached_property
    def class_keys(self) -> pd.DataFrame:
        """One row per equivalence class (ec_id and released QI values), in ``class_sizes`` order."""
        return self.groups.drop_duplicates(self._class_cols()).reset_index(drop=True)[self._class_cols()]

    def _class_cols(self) -> list[str]:
        return ["e"] + [f"q{i}" for i in range(len(self.quasi))]

    def class_index(self, frame: pd.DataFrame) -> np.ndarray:
        """Class number of each row of a frame holding the class columns (e, q0..qn)."""
        keys = self.class_keys.assign(__c=np.arange(len(self.class_keys)))
        merged = frame[self._class_cols()].merge(keys, on=self._class_cols(), how="left")
        return merged["__c"].to_numpy(dtype=np.int64)

    @cached_property
    def class_sizes(self) -> np.ndarray:
        """Records per class (noise included: the class as released)."""
        return np.bincount(self.class_index(self.groups), weights=self.groups["n"], minlength=len(self.class_keys))

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
        keys = [alias(_varchar(col(q)), f"q{i}") for i, q in enumerate(self.quasi)]
        q = _grouped(exp.select(*keys, alias(self.weight(), "n")).from_(self.source.relation.copy()), keys)
        frame = _fetch(self.con, q)
        frame["n"] = frame["n"].astype(float)
        return frame

    @cached_property
    def domains(self) -> dict[str, Domain]:
        return {q: domain(q, self.original[f"q{i}"], self.numeric[q], self.taxonomies.get(q))
                for i, q in enumerate(self.quasi)}

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
        """Per-class counts of a sensitive attribute (noise included), as the privacy models' numpy input."""
        if ("sensitive", sa) in self.cache:
            return self.cache[("sensitive", sa)]
        keys = [alias(col(EC_ID), "e")] + [alias(_varchar(col(q)), f"q{i}") for i, q in enumerate(self.quasi)]
        q = _grouped(exp.select(*keys, alias(col(sa), "v"), alias(self.weight(), "n")).from_(self.names.table.copy()),
                     keys + [col(sa)])
        frame = _fetch(self.con, q)
        cls = self.class_index(frame)
        codes, uniq = pd.factorize(frame["v"], sort=True, use_na_sentinel=False)
        n_values = len(uniq)
        rank = np.arange(n_values)
        sc = SensitiveCounts.from_codes(cls, codes, frame["n"].to_numpy(float), len(self.class_keys), n_values,
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
