"""The model contract, after ARX's criteria: one battery runs every registered privacy model (every example setting
its ``ModelKey`` declares in anon_sql/models/registry.py, plus k-anonymity), so a new model gets all of it by
registering.

Each model must: pass or fail the same classes in numpy (what searches prune with) and in SQL (the ``__classes``
view the release is verified by), on random classes (hypothesis); keep a merge of two passing classes passing when it
declares ``monotone`` (a lattice search prunes on it); keep a passing class passing when merged with any class when it
declares ``suppression_monotone``; and keep every kept class passing once the failing ones are suppressed when it
declares ``class_local``.
"""
from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

import anon_sql
from anon_sql.models import ClassColumns, ClassStats, SensitiveCounts, build_models, model_keys
from anon_sql.policy.model import Policy
from conftest import working

VALUES = "abcdef"
# keys whose release reads a seeded sample of the source (SafePub), not the source the battery builds classes from
SAMPLED = {"differential_privacy"}
# the sensitive attribute's taxonomy (hierarchical t-closeness reads it; the other models ignore it)
SENSITIVE_TAXONOMY = {"kind": "mapping", "mapping": {"a": ["ab"], "b": ["ab"], "c": ["cd"], "d": ["cd"],
                                                     "e": ["ef"], "f": ["ef"]}}
CASES = [pytest.param("k", 2, id="k-0")] + [
    pytest.param(m.key.name, example, id=f"{m.key.name}-{i}") for m in model_keys()
    for i, example in enumerate(m.examples)]

# one class: its sensitive values (one character each) and the population records it matches besides its own
classes_strategy = st.lists(st.tuples(st.text(alphabet=VALUES, min_size=1, max_size=9), st.integers(0, 12)),
                            min_size=2, max_size=7)
BATTERY = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_every_registered_model_key_has_examples_and_builds_its_classes():
    """A registered key without an example would escape the battery; its examples build only classes it lists."""
    con = duckdb.connect()
    for entry in model_keys():
        assert entry.examples, f"{entry.key.name}: declare examples in its ModelKey"
        for example in entry.examples:
            built = targets(con, entry.key.name, example)
            assert built and all(isinstance(m, entry.classes) for m in built), (entry.key.name, built)


def policy_dict(key: str, setting) -> dict:
    return {"name": "mb", "source": "mb_src", "method": "levels", "method_params": {"levels": {"zip": 0}}, "seed": 1,
            "attributes": {"zip": {"role": "quasi", "taxonomy": {"kind": "mask"}},
                           "s": {"role": "sensitive", "taxonomy": SENSITIVE_TAXONOMY}},
            "privacy": {"k": 1, "max_suppression": 1.0, key: setting}}


def targets(con, key: str, setting) -> list:
    """The models ``key = setting`` adds to a policy (k-anonymity itself for ``k``)."""
    models = build_models(Policy.from_dict(policy_dict(key, setting)), con)
    return models[:1] if key == "k" else models[1:]


def frames(classes) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The source (zip, s) and the population (zip): the source's records and each class's extra ones."""
    zips = [f"{i:02d}" for i in range(len(classes))]
    source = pd.DataFrame([(z, v) for z, (values, _) in zip(zips, classes) for v in values], columns=["zip", "s"])
    extra = pd.DataFrame([(z,) for z, (_, n) in zip(zips, classes) for _ in range(n)], columns=["zip"])
    return source, pd.concat([source[["zip"]], extra], ignore_index=True)


def stats_of(labels: np.ndarray, values: pd.Series, population: np.ndarray) -> ClassStats:
    """numpy statistics of classes ``labels`` (0..n-1 per record), as the searches build them."""
    n = int(labels.max()) + 1
    domain = np.array(sorted(values.unique()), dtype=object)
    codes = np.searchsorted(domain, values.to_numpy(dtype=object))
    sc = SensitiveCounts.from_codes(labels, codes, np.ones(len(labels)), n, len(domain), np.arange(len(domain)))
    sc.labels = domain
    return ClassStats(np.bincount(labels, minlength=n).astype(float), {"s": sc},
                      population=np.asarray(population, dtype=float))


def merged(labels: np.ndarray, population: np.ndarray, i: int, j: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Classes ``i`` and ``j`` merged into one: new labels, population per class, the merged class's label."""
    joined = np.where(labels == j, i, labels)
    kept, new = np.unique(joined, return_inverse=True)
    pop = np.bincount(np.where(np.arange(len(population)) == j, i, np.arange(len(population))),
                      weights=population, minlength=len(population))[kept]
    return new, pop, int(np.searchsorted(kept, i))


@pytest.mark.parametrize("key, setting", CASES)
@BATTERY
@given(classes=classes_strategy)
def test_numpy_check_equals_sql_check(mcon, key, setting, classes):
    if key in SAMPLED:
        pytest.skip(f"{key}: the release samples the records before classes form, so its classes view is not the "
                    "battery's classes; tests/dp/test_safepub_release.py recomputes its classes and k with pandas")
    source, population = frames(classes)
    mcon.register("mb_frame", source)
    mcon.register("mb_pop_frame", population)
    mcon.execute("CREATE OR REPLACE TABLE mb_src AS SELECT * FROM mb_frame")
    mcon.execute("CREATE OR REPLACE TABLE population AS SELECT * FROM mb_pop_frame")
    models = [m for m in targets(mcon, key, setting) if m.per_class and not m.whole_table]
    if not models:
        pytest.skip(f"{key} = {setting!r} is decided over the whole table, not per class")
    for statement in anon_sql.compile(policy_dict(key, setting), con=mcon):
        mcon.execute(statement)
        if working("mb", "classes") in statement.split(" AS ")[0]:
            break
    cols = ClassColumns(exp.column)
    for model in models:
        oks = [f'COALESCE("{chk.name}_ok", FALSE)' for chk in model.sql_checks(cols)]
        sql = mcon.execute(f'SELECT zip, {" AND ".join(oks)} FROM {working("mb", "classes")} ORDER BY zip').fetchall()
        labels, zips = pd.factorize(source["zip"], sort=True)
        pop = population["zip"].value_counts().reindex(zips).to_numpy()
        want = model.check(stats_of(labels, source["s"], pop))
        assert [z for z, _ in sql] == list(zips)
        assert [bool(ok) for _, ok in sql] == want.tolist(), (model.describe(), classes)


@pytest.mark.parametrize("key, setting", CASES)
@BATTERY
@given(classes=classes_strategy, data=st.data())
def test_merging_classes_keeps_what_the_model_declares(key, setting, classes, data):
    """``monotone``: two passing classes merged pass; ``suppression_monotone``: a passing class merged with any
    class passes (the table's distribution and the population do not change when classes merge)."""
    source, population = frames(classes)
    labels, zips = pd.factorize(source["zip"], sort=True)
    pop = population["zip"].value_counts().reindex(zips).to_numpy(dtype=float)
    for model in [m for m in targets(None, key, setting) if m.per_class]:   # population models: counts only
        if not (model.monotone or model.suppression_monotone):
            continue
        ok = model.check(stats_of(labels, source["s"], pop))
        passing = np.flatnonzero(ok)
        if len(passing) == 0:
            continue
        i = int(data.draw(st.sampled_from(passing.tolist())))
        others = [j for j in range(len(zips)) if j != i and (ok[j] or model.suppression_monotone)]
        if not others:
            continue
        j = int(data.draw(st.sampled_from(others)))
        new, new_pop, at = merged(labels, pop, min(i, j), max(i, j))
        assert model.check(stats_of(new, source["s"], new_pop))[at], (model.describe(), classes, i, j)


@pytest.mark.parametrize("key, setting", CASES)
@BATTERY
@given(classes=classes_strategy)
def test_suppressing_the_failing_classes_keeps_the_rest_passing(key, setting, classes):
    """``class_local``: a class's pass depends on that class alone, so once the failing classes are suppressed (their
    records removed: the table's distribution changes) every kept class still passes."""
    source, population = frames(classes)
    labels, zips = pd.factorize(source["zip"], sort=True)
    pop = population["zip"].value_counts().reindex(zips).to_numpy(dtype=float)
    for model in [m for m in targets(None, key, setting) if m.class_local]:
        ok = model.check(stats_of(labels, source["s"], pop))
        keep = ok[labels]
        if not keep.any():
            continue
        kept, new = np.unique(labels[keep], return_inverse=True)
        after = model.check(stats_of(new, source["s"][keep].reset_index(drop=True), pop[kept]))
        assert after.all(), (model.describe(), classes)
