"""Assess an existing table: "is this extract safe to share?" — k, l, t, α, β, δ, re-identification risks and
population uniqueness of a table, view, file or DataFrame, without a release and without writing anything.

One GROUP BY over the rows (quasi-identifiers and sensitive attributes, with record counts) is the only pass over
the data; it is fetched as Arrow and every further aggregate (classes, per-value counts, QI combinations, population
matches) runs in a private in-memory DuckDB over that aggregate, so the user's database is only read. Formulas live in
udfs/risk_kernels.py and udfs/kernels.py (numpy) and sql/macros.sql (SQL); docs/assess.md cites each one.
"""
from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import duckdb
import numpy as np
import pandas as pd
from sqlglot import exp

from ..errors import PolicyError, SourceError
from ..models import ClassStats, SensitiveCounts, TCloseness
from ..models.hierarchical import resolve_taxonomy, taxonomy_nodes
from ..data.source import Source, resolve_source, unregister
from ..common.columns import UNIT
from ..common.sqlbuild import alias, and_all, col, ident, null_safe_eq, record_count, render, scratch_name
from ..data.taxonomy import Taxonomy
from ..udfs import kernels
from ..udfs import risk_kernels as rk

COUNT = "__n"
SIZE = "__size"
MAX_GROUPING_SETS = 4096


@dataclass
class Assessment:
    """The measures of one table: ``measures`` (name → value; docs/assess.md), ``classes`` (one row per equivalence
    class: quasi-identifier values and ``__size``), ``class_sizes`` (size → classes, records), ``attributes``
    (distinction and separation per QI combination), ``notes`` (what could not be computed, and why)."""

    source: str
    quasi: list[str]
    sensitive: list[str]
    measures: dict[str, Any]
    classes: pd.DataFrame
    class_sizes: pd.DataFrame
    attributes: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    # with suda=True: one row per record (the key values, suda_score, dis_suda_score, msu_count, msu_min_size) and
    # one per quasi-identifier (variable, contribution in % of the total SUDA score; sdcMicro's contributions)
    records: pd.DataFrame | None = None
    contributions: pd.DataFrame | None = None
    # with weights= or household=: one row per record (the key values, risk, household_risk)
    risk_records: pd.DataFrame | None = None
    # the column whose distinct values were counted instead of rows (None: every count is rows)
    privacy_unit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the ``--json`` output; the per-record frames stay in Python)."""
        out = {"source": self.source, "quasi": self.quasi, "sensitive": self.sensitive,
               "privacy_unit": self.privacy_unit,
               "measures": self.measures, "class_sizes": self.class_sizes.to_dict(orient="records"),
               "attributes": self.attributes.to_dict(orient="records"), "notes": self.notes}
        if self.contributions is not None:
            out["suda_contributions"] = self.contributions.to_dict(orient="records")
        return out

    def report(self, format: str = "text") -> str:
        """The assessment as ``text``, ``json`` or ``html`` (anon_sql.report.assessment)."""
        from ..report.assessment import render_assessment

        return render_assessment(self, format)


# -- input checks -------------------------------------------------------------------------------------------------
def _names(value: Sequence[str] | str | None, what: str) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    if not all(isinstance(v, str) and v for v in items):
        raise PolicyError(f"{what} must be column names (strings), got {items!r}")
    if len(set(items)) != len(items):
        raise PolicyError(f"{what} lists a column twice: {items}")
    return items


def _check_columns(src: Source, quasi: list[str], sensitive: list[str]) -> None:
    if not quasi:
        raise PolicyError("assess needs at least one quasi-identifier (quasi=[...] / --quasi a,b)")
    missing = [c for c in quasi + sensitive if c not in src.columns]
    if missing:
        raise PolicyError(f"column(s) {missing} are not in {src.label!r}; its columns are {src.columns}")
    both = sorted(set(quasi) & set(sensitive))
    if both:
        raise PolicyError(f"column(s) {both} are both quasi-identifier and sensitive; give each one role")
    reserved = [c for c in quasi + sensitive if c.startswith("__")]
    if reserved:
        raise PolicyError(f"column name(s) {reserved} start with '__', which assess reserves; rename them in a view")


def _population_size(population: Any, sampling_fraction: float | None, n: float,
                     counted: str = "records") -> float | None:
    if sampling_fraction is not None:
        if isinstance(sampling_fraction, bool) or not isinstance(sampling_fraction, (int, float)) \
                or not 0 < sampling_fraction <= 1:
            raise PolicyError(f"sampling_fraction must be a number in (0, 1], got {sampling_fraction!r}")
        return n / float(sampling_fraction)
    if population is None:
        return None
    if isinstance(population, bool) or not isinstance(population, (int, float)) or not math.isfinite(population):
        raise PolicyError(f"population must be a size (a number >= the records) or a table; got {population!r}")
    if population < n:
        raise PolicyError(f"population size {population} is smaller than the {int(n)} {counted} assessed; "
                          "give the size of the population the table was drawn from")
    return float(population)


# -- the computation ----------------------------------------------------------------------------------------------
def assess(con: duckdb.DuckDBPyConnection, source: Any, quasi: Sequence[str] | str,
           sensitive: Sequence[str] | str | None = None, *, population: Any = None,
           sampling_fraction: float | None = None, threshold: float = 0.2,
           taxonomies: dict[str, Any] | None = None, combination_size: int = 1,
           count_column: str | None = None, privacy_unit: str | None = None, suda: bool = False,
           dis_fraction: float = 0.01, weights: str | None = None, household: str | None = None) -> Assessment:
    """Measure a table as it is (see docs/assess.md for every measure and its formula).

    ``source``: a table or view name, a .csv / .parquet path (str or Path), a pandas or Polars DataFrame, an Arrow
    table or a DuckDB relation (as :func:`anon_sql.runner.run.release_with_duckdb` accepts).
    ``population``: the size of the population the table was sampled from, or a table / view / file / DataFrame
    holding that population (it must contain every record of the table; journalist risk, k-map and δ-presence need
    it); ``sampling_fraction``: n / population size instead. ``threshold``: the highest acceptable prosecutor risk
    for ``records_at_risk``. ``taxonomies``: sensitive attribute → taxonomy, for ``t_hierarchical``.
    ``combination_size``: distinction and separation for every QI combination up to this many QIs.
    ``count_column``: a column giving the records each row stands for. ``privacy_unit``: the column identifying
    the person when a person may have several rows: every measure then counts people (class sizes are distinct
    people, a sensitive value's count the people holding it; docs/units.md). Nothing is written to ``con``.
    ``suda``: SUDA2 over the quasi-identifiers (``suda_msus_size_1`` … ``_M``, DIS-SUDA with ``dis_fraction``; the
    per-record frame in ``records``, the per-attribute contributions in ``contributions``). ``weights``: a column of
    sampling weights for the Benedetti–Franconi individual risk (``risk_*``); ``household``: a household id column
    for the household risk (``household_risk_*``); per-record values in ``risk_records`` (docs/sdc.md).
    """
    if not isinstance(suda, bool):
        raise PolicyError(f"suda must be true or false, got {suda!r}")
    if (suda or weights or household) and count_column is not None:
        raise PolicyError("suda, weights and household measure single records: expand count_column "
                          f"{count_column!r} to one row per record, or leave them out")
    quasi, sensitive = _names(quasi, "quasi"), _names(sensitive, "sensitive")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
        raise PolicyError(f"threshold must be a risk in (0, 1], got {threshold!r}")
    if population is not None and sampling_fraction is not None:
        raise PolicyError("give population or sampling_fraction, not both")
    if isinstance(combination_size, bool) or not isinstance(combination_size, int) or combination_size < 0:
        raise PolicyError(f"combination_size must be an integer >= 0, got {combination_size!r}")
    unknown_tax = sorted(set(taxonomies or {}) - set(sensitive))
    if unknown_tax:
        raise PolicyError(f"taxonomies given for {unknown_tax}, which are not sensitive attributes ({sensitive})")
    registered: list[str] = []
    try:
        src = _resolve(con, source, scratch_name("__anon_assess_source"), registered)
        _check_columns(src, quasi, sensitive)
        if count_column is not None and (count_column not in src.columns or count_column in quasi + sensitive):
            raise PolicyError(f"count_column {count_column!r} must be another column of {src.label!r} "
                              f"({src.columns})")
        holdings = None
        if privacy_unit is not None:
            base, holdings = _people_counts(con, src, quasi, sensitive, privacy_unit, count_column)
        else:
            base = _base_counts(con, src, quasi + sensitive, count_column)
        pop_counts = None
        if population is not None and (isinstance(population, bool) or not isinstance(population, (int, float))):
            psrc = _resolve(con, population, scratch_name("__anon_assess_population"), registered)
            missing = [q for q in quasi if q not in psrc.columns]
            if missing:
                raise PolicyError(f"population {psrc.label!r} lacks quasi-identifier(s) {missing}")
            pop_counts = _base_counts(con, psrc, quasi, None)
        result = _measure(src.label, base, quasi, sensitive, population, sampling_fraction, threshold,
                          {sa: resolve_taxonomy(t, sa, con) for sa, t in (taxonomies or {}).items()},
                          combination_size, pop_counts, src, holdings)
        if privacy_unit is not None:
            result.privacy_unit = privacy_unit
            result.notes.append(f"counted in people: privacy_unit = {privacy_unit!r} (class sizes are distinct "
                                "people, a sensitive value's count the people holding it; docs/units.md)")
        sdc_measures(con, result, src, quasi, suda=suda, dis_fraction=dis_fraction, weights=weights,
                     household=household)
        return result
    finally:
        for name in registered:
            unregister(con, name)


def sdc_measures(con, a: Assessment, src: Source, quasi: list[str], *, suda: bool, dis_fraction: float,
                 weights: str | None, household: str | None) -> None:
    """sdcMicro's risk measures (anon_sql/sdc: SUDA2, individual and household risk) added to ``a``."""
    from ..sdc.risk import household_risk, individual_risk
    from ..sdc.suda import suda2

    if suda:
        found = suda2(con, src.relation, quasi, dis_fraction=dis_fraction)
        a.measures.update(found.measures)
        a.records, a.contributions = found.records, found.contributions
    if household is not None:
        found = household_risk(con, src.relation, quasi, household, weights)
    elif weights is not None:
        found = individual_risk(con, src.relation, quasi, weights)
    else:
        return
    a.measures.update(found.measures)
    a.risk_records = found.records


def _resolve(con, source: Any, label: str, registered: list[str]) -> Source:
    """A table / view name or a path as it is; any other accepted object (DataFrame, Arrow, Polars, relation)
    registered as the connection-local view ``label``, unregistered when the assessment ends."""
    if isinstance(source, (str, os.PathLike)):
        return resolve_source(con, source)
    registered.append(label)
    return resolve_source(con, source, label=label)


def _base_counts(con, src: Source, keys: list[str], count_column: str | None):
    """The one pass over the rows: records per distinct combination of ``keys`` (an Arrow table)."""
    cols = [col(k) for k in keys]
    query = exp.select(*cols, alias(record_count(count_column), COUNT)).from_(src.relation.copy()).group_by(
        *[c.copy() for c in cols])
    try:
        return con.sql(render(query)).to_arrow_table()
    except duckdb.Error as err:
        raise SourceError(f"cannot read {src.label!r}: {err}") from None


def _people_counts(con, src: Source, quasi: list[str], sensitive: list[str], unit: str, count_column: str | None):
    """With a privacy unit: people per distinct (QI, sensitive) combination, each person counted once (an Arrow
    table shaped like :func:`_base_counts`'s), and per sensitive attribute the people of each class holding each
    value (``__v``, ``__c``) with the class's people (``__p``). Refuses what the release refuses: a unit that is
    not another column, NULL units, QIs that vary within a unit."""
    from ..methods.people import SIZE_WEIGHT, people_counts
    from ..runner.units import count_units, varying_quasi

    if unit not in src.columns or unit in quasi + sensitive or unit == count_column:
        raise PolicyError(f"privacy_unit {unit!r} must be another column of {src.label!r} ({src.columns}), not a "
                          "quasi-identifier, sensitive attribute or count column")
    if count_column is not None:
        raise PolicyError("privacy_unit and count_column cannot be combined: remove one")
    count_units(con, unit, src)
    varying_quasi(con, unit, quasi, src)
    with_unit = exp.Subquery(this=exp.select(exp.Star(), alias(col(unit), UNIT)).from_(src.relation.copy()),
                             alias=exp.TableAlias(this=ident("__src")))
    counts = people_counts(with_unit, quasi + sensitive, sensitive, "__held")
    weight = col(SIZE_WEIGHT) if sensitive else col("__held")
    base = (exp.select(*[col(c) for c in quasi + sensitive],
                       alias(exp.Cast(this=weight, to=exp.DataType.build("BIGINT")), COUNT))
            .from_(exp.Subquery(this=counts, alias=exp.TableAlias(this=ident("g")))).where(
                exp.GT(this=weight.copy(), expression=exp.Literal.number(0))))
    holdings = {}
    people = exp.Count(this=exp.Distinct(expressions=[col(UNIT)]))
    for sa in sensitive:
        q_cols = [col(q) for q in quasi]
        held = (exp.select(*q_cols, alias(col(sa), "__v"), alias(people.copy(), "__c")).from_(with_unit.copy())
                .group_by(*[c.copy() for c in q_cols], col(sa)))
        sizes = (exp.select(*[c.copy() for c in q_cols], alias(people.copy(), "__p")).from_(with_unit.copy())
                 .group_by(*[c.copy() for c in q_cols]))
        on = and_all(null_safe_eq(col(q, "h"), col(q, "s")) for q in quasi)
        holdings[sa] = (exp.select(*[col(q, "h") for q in quasi], col("__v", "h"), col("__c", "h"), col("__p", "s"))
                        .from_(exp.Subquery(this=held, alias=exp.TableAlias(this=ident("h"))))
                        .join(exp.Subquery(this=sizes, alias=exp.TableAlias(this=ident("s"))), on=on))
    try:
        return (con.sql(render(base)).to_arrow_table(),
                {sa: con.sql(render(q)).to_arrow_table() for sa, q in holdings.items()})
    except duckdb.Error as err:
        raise SourceError(f"cannot read {src.label!r}: {err}") from None


def _measure(label: str, base, quasi: list[str], sensitive: list[str], population: Any,
             sampling_fraction: float | None, threshold: float, taxonomies: dict[str, Taxonomy],
             combination_size: int, pop_counts, src: Source, holdings: dict[str, Any] | None = None) -> Assessment:
    work = duckdb.connect()
    try:
        work.register("b", base)
        if pop_counts is not None:
            work.register("p", pop_counts)
        q_cols = [col(q) for q in quasi]
        classes = work.execute(render(
            exp.select(*q_cols, alias(exp.Sum(this=col(COUNT)), SIZE)).from_("b")
            .group_by(*[c.copy() for c in q_cols])
            .order_by(*[exp.Ordered(this=c.copy(), nulls_first=True) for c in q_cols]))).df()
        classes[SIZE] = classes[SIZE].astype("int64")
        sizes, freqs = rk.histogram(classes[SIZE].to_numpy())
        if not len(sizes):
            raise SourceError(f"{label!r} has no records to assess")
        measures: dict[str, Any] = rk.size_measures(sizes, freqs, threshold)
        n = measures["records"]
        notes: list[str] = []
        measures.update(_sensitive_measures(work, quasi, sensitive, taxonomies, n, src, notes, holdings))
        pop_size = _population_size(population if pop_counts is None else None, sampling_fraction, n,
                                    "records" if holdings is None else "people")
        if pop_counts is not None:
            total = exp.select(exp.Sum(this=col(COUNT))).from_("p")
            pop_size = float(work.execute(render(total)).fetchall()[0][0] or 0)
            measures.update(_population_table_measures(work, quasi))
        else:
            nan = float("nan")
            measures.update({f"journalist_risk_{s}": nan for s in ("lowest", "avg_records", "avg_classes",
                                                                   "highest")})
            measures["marketer_risk"] = measures["classes"] / n
            notes.append("journalist risk needs the population the table was drawn from as a table "
                         "(population=<table>): it is 1/F for F the population records matching a class, never "
                         "above the prosecutor risk, which bounds it here. marketer_risk is the sample-based "
                         "value #classes / n (every record matched against the table itself).")
        if pop_size is not None:
            if pop_size < n:
                raise PolicyError(f"the population ({pop_size:g} records) is smaller than the table ({n:g})")
            measures["population_size"] = pop_size
            measures["sampling_fraction"] = n / pop_size
            measures.update(rk.population_uniques(sizes, freqs, pop_size))
        else:
            for m in ("pitman", "zayatz", "snb", "snb_nb", "dankar"):
                measures[f"population_uniques_{m}"] = float("nan")
            notes.append("population uniqueness (Pitman, Zayatz, SNB, Dankar) needs population=<size> or "
                         "sampling_fraction=<n / population size>")
        attributes = _attribute_table(work, quasi, combination_size)
        full = attributes[attributes["size"] == len(quasi)].iloc[0] if len(attributes) else None
        if full is not None:
            measures["distinction"], measures["separation"] = float(full["distinction"]), float(full["separation"])
        class_sizes = pd.DataFrame({"size": sizes, "classes": freqs, "records": sizes * freqs})
        return Assessment(label, quasi, sensitive, measures, classes, class_sizes, attributes, notes)
    finally:
        work.close()


def _sensitive_measures(work, quasi: list[str], sensitive: list[str], taxonomies: dict[str, Taxonomy], n: float,
                        src: Source, notes: list[str], holdings: dict[str, Any] | None = None) -> dict[str, Any]:
    """l, t, α, β, δ and recursive c per sensitive attribute; with several attributes the key without suffix holds
    the worst and ``<key>__<attribute>`` each one. ``holdings``: with a privacy unit, per attribute the people of
    each class holding each value and the class's people (:func:`_people_counts`): the shares are normalized over
    the holdings, α is the people holding a value over the class's people."""
    if not sensitive:
        notes.append("no sensitive attribute given: l-diversity, t-closeness, α, β and δ are not measured")
        return {}
    per: dict[str, dict[str, Any]] = {}
    for sa in sensitive:
        q_cols = [col(q) for q in quasi]
        if holdings is None:
            frame = work.execute(render(
                exp.select(*q_cols, alias(col(sa), "__v"), alias(exp.Sum(this=col(COUNT)), "__c")).from_("b")
                .group_by(*[c.copy() for c in q_cols], col(sa)))).df()
        else:
            frame = holdings[sa].to_pandas()
        cls = frame.groupby(quasi, dropna=False, sort=False).ngroup().to_numpy(dtype=np.int64)
        vals, labels = pd.factorize(frame["__v"], use_na_sentinel=False)
        vals = np.asarray(vals, dtype=np.int64)
        cnt = frame["__c"].to_numpy(dtype=np.float64)
        n_cls, n_val = int(cls.max()) + 1, len(labels)
        q = np.bincount(vals, weights=cnt, minlength=n_val) / (n if holdings is None else cnt.sum())
        people = None
        if holdings is not None:
            people = np.zeros(n_cls)
            people[cls] = frame["__p"].to_numpy(dtype=np.float64)
        per[sa] = _one_attribute(sa, cls, vals, cnt, n_cls, labels, q, taxonomies.get(sa), src, notes, people)
    out: dict[str, Any] = {}
    worst_max = ("t_equal", "t_ordered", "t_hierarchical", "alpha", "beta_basic", "beta_enhanced",
                 "beta_enhanced_pycanon", "delta_disclosure", "delta_disclosure_log2")
    for key in per[sensitive[0]]:
        values = [per[sa][key] for sa in sensitive]
        if key == "recursive_c":
            ls = sorted(set().union(*[v.keys() for v in values]))
            out[key] = {l: max(v.get(l, math.inf) for v in values) for l in ls}
        else:
            pick = max if key in worst_max else min
            finite = [v for v in values if not (isinstance(v, float) and math.isnan(v))]
            out[key] = pick(finite) if finite else float("nan")
        if len(sensitive) > 1:
            out.update({f"{key}__{sa}": per[sa][key] for sa in sensitive})
    return out


def _one_attribute(sa: str, cls: np.ndarray, vals: np.ndarray, cnt: np.ndarray, n_cls: int, labels, q: np.ndarray,
                   taxonomy: Taxonomy | None, src: Source, notes: list[str],
                   people: np.ndarray | None = None) -> dict[str, Any]:
    order = np.argsort(cls, kind="stable")
    cls, vals, cnt = cls[order], vals[order], cnt[order]
    out: dict[str, Any] = {}
    distinct = np.bincount(cls, minlength=n_cls)
    out["l_distinct"] = float(distinct.min())
    out["l_entropy"] = float(np.exp(kernels.entropy_segments(cnt, cls, n_cls)).min())
    out["recursive_c"] = {l: float(rk.recursive_c_segments(cnt, cls, n_cls, l).max())
                          for l in range(2, max(2, int(distinct.min())) + 1)}
    rank = _value_rank(labels, src.types.get(sa, ""))
    sc = SensitiveCounts(cls, vals, cnt, len(labels), q, rank)
    stats = ClassStats(np.bincount(cls, weights=cnt, minlength=n_cls), {sa: sc})
    out["t_equal"] = float(TCloseness(sa, 1.0, "equal").measure(stats).max())
    out["t_ordered"] = float(TCloseness(sa, 1.0, "ordered").measure(stats).max())
    if taxonomy is not None:
        out["t_hierarchical"] = float(rk.t_hierarchical_segments(cnt, cls, n_cls, vals, q,
                                                                 taxonomy_nodes(taxonomy, labels, sa)).max())
    else:
        out["t_hierarchical"] = float("nan")
        notes.append(f"t_hierarchical of {sa!r} needs its taxonomy (taxonomies={{'{sa}': ...}} / --taxonomy "
                     f"{sa}=FILE)")
    if people is None:
        out["alpha"] = float(rk.alpha_segments(cnt, cls, n_cls).max())
    else:   # the confidence: people holding the value over the class's people (docs/units.md)
        largest = np.zeros(n_cls)
        np.maximum.at(largest, cls, cnt)
        out["alpha"] = float((largest / people).max())
    beta = float(rk.beta_segments(cnt, cls, n_cls, vals, q).max())
    out["beta_basic"] = beta
    out["beta_enhanced"] = float(rk.beta_enhanced_segments(cnt, cls, n_cls, vals, q).max())
    out["beta_enhanced_pycanon"] = rk.beta_enhanced_capped(beta, q)
    out["delta_disclosure"] = float(rk.delta_segments(cnt, cls, n_cls, vals, q).max())
    out["delta_disclosure_log2"] = float(rk.delta_segments(cnt, cls, n_cls, vals, q, base=2.0).max())
    return out


def _value_rank(labels, type_name: str) -> np.ndarray:
    """Rank of each value code in the ordered domain (numbers numerically, else text order; NULL last)."""
    from ..common.columns import is_numeric

    keys = pd.Series(list(labels), dtype=object)
    if is_numeric(type_name):
        keys = pd.to_numeric(keys, errors="coerce")
    else:
        keys = keys.map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    order = keys.sort_values(na_position="last", kind="stable").index.to_numpy()
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank


def _population_table_measures(work, quasi: list[str]) -> dict[str, Any]:
    """Journalist and marketer risk, k-map and δ-presence from the population records matching each class."""
    q_cols = [col(q) for q in quasi]
    pop = exp.select(*q_cols, alias(exp.Sum(this=col(COUNT)), "__pop")).from_("p").group_by(*[c.copy() for c in q_cols])
    smp = exp.select(*[c.copy() for c in q_cols], alias(exp.Sum(this=col(COUNT)), "__smp")).from_("b").group_by(
        *[c.copy() for c in q_cols])
    on = and_all(null_safe_eq(col(q, "s"), col(q, "pp")) for q in quasi)
    query = (exp.select(col("__smp", "s"), alias(exp.Coalesce(this=col("__pop", "pp"), expressions=[exp.Literal.number(0)]),
                                               "__pop"))
             .from_(exp.Subquery(this=smp, alias=exp.TableAlias(this=ident("s"))))
             .join(exp.Subquery(this=pop, alias=exp.TableAlias(this=ident("pp"))), on=on, join_type="left"))
    fr = work.execute(render(query)).df()
    f, big_f = fr["__smp"].to_numpy(dtype=float), fr["__pop"].to_numpy(dtype=float)
    if (big_f < f).any():
        raise PolicyError("the population table does not contain every record of the table: "
                          f"{int((big_f < f).sum())} class(es) have more records in the table than in the "
                          "population; give the population the table was drawn from")
    n = f.sum()
    return {
        "journalist_risk_lowest": float(1.0 / big_f.max()),
        "journalist_risk_avg_records": float((f / big_f).sum() / n),
        "journalist_risk_avg_classes": float((1.0 / big_f).mean()),
        "journalist_risk_highest": float(1.0 / big_f.min()),
        "marketer_risk": float((f / big_f).sum() / n),
        "k_map": float(big_f.min()),
        "delta_presence_min": float((f / big_f).min()),
        "delta_presence_max": float((f / big_f).max()),
    }


def _attribute_table(work, quasi: list[str], max_size: int) -> pd.DataFrame:
    """Distinction and separation of every QI combination of up to ``max_size`` QIs, and of all QIs together, from
    one GROUPING SETS query over the class table (coarser classes are unions of the finest ones)."""
    combos = [c for r in range(1, min(max_size, len(quasi)) + 1) for c in itertools.combinations(quasi, r)]
    if tuple(quasi) not in combos:
        combos.append(tuple(quasi))
    if len(combos) > MAX_GROUPING_SETS:
        raise PolicyError(f"{len(combos)} QI combinations exceed {MAX_GROUPING_SETS}; lower combination_size")
    q_cols = [col(q) for q in quasi]
    sets = [exp.Tuple(expressions=[col(c) for c in combo]) for combo in combos]
    grouping = exp.Anonymous(this="GROUPING_ID", expressions=[c.copy() for c in q_cols])
    inner = (exp.select(alias(grouping, "__g"), alias(exp.Sum(this=col(COUNT)), "__s")).from_("b"))
    inner.set("group", exp.Group(expressions=[exp.GroupingSets(expressions=sets)]))
    outer = (exp.select(col("__g"), alias(col("__s"), "size"), alias(exp.Count(this=exp.Star()), "freq"))
             .from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=ident("g"))))
             .group_by(col("__g"), col("__s")))
    hist = work.execute(render(outer)).df()
    rows = []
    bit = {q: 1 << (len(quasi) - 1 - i) for i, q in enumerate(quasi)}
    full = (1 << len(quasi)) - 1
    for combo in combos:
        gid = full - sum(bit[c] for c in combo)
        h = hist[hist["__g"] == gid]
        s, fq = h["size"].to_numpy(dtype=float), h["freq"].to_numpy(dtype=float)
        rows.append({"quasi": ", ".join(combo), "size": len(combo), "distinction": rk.distinction(s, fq),
                     "separation": rk.separation(s, fq)})
    return pd.DataFrame(rows)
