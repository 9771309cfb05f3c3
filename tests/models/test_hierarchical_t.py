"""t-closeness with the hierarchical ground distance over the sensitive attribute's taxonomy: golden EMDs by hand,
releases that pass and are refused (levels, Mondrian, optimal search), and the SQL EMD equal to the numpy kernel."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import anon_sql
from anon_sql.errors import PolicyError, PrivacyRequirementError
from anon_sql.models import ClassStats, HierarchicalTCloseness, SensitiveCounts
from anon_sql.data.taxonomy import from_mapping
from conftest import load_classes

TAX = {"kind": "mapping", "mapping": {"a": ["X"], "b": ["X"], "c": ["Y"], "d": ["Y"]}}
GOLDEN = {"1": "aabb", "2": "ccdd", "3": "abcd"}        # table shares 1/4 each


def test_golden_numpy():
    tax = from_mapping("s", {v: [p] for v, p in (("a", "X"), ("b", "X"), ("c", "Y"), ("d", "Y"))})
    labels = np.array(list("abcd"), dtype=object)
    # classes aabb, ccdd, abcd, aaaa over table shares (3/13, 3/13, 3/13 ... ) — use explicit codes and weights
    classes = ["aabb", "ccdd", "abcd", "aaaa"]
    codes = np.array([ord(v) - 97 for c in classes for v in c])
    cls = np.repeat(np.arange(4), 4)
    sc = SensitiveCounts.from_codes(cls, codes, np.ones(16), 4, 4)
    sc.labels = labels
    sc.global_freq = np.ones(4)                       # compare against the uniform distribution (q = 1/4 each)
    got = HierarchicalTCloseness("s", 0.5, tax).measure(ClassStats(np.full(4, 4.0), {"s": sc}))
    # aabb: ½ of the mass crosses the root (distance 1); aaaa: ¼ moves to b inside X (½) and ½ to Y (1): 0.625
    assert got == pytest.approx([0.5, 0.5, 0.0, 0.625])


@pytest.fixture
def golden(con):
    load_classes(con, GOLDEN)
    return con


def _policy(t: float, method: str = "levels", taxonomy=TAX) -> dict:
    extra = {"method_params": {"levels": {"zip": 0}}} if method == "levels" else {}
    return {"name": "rel", "source": "golden", "method": method,
            "attributes": {"zip": {"role": "quasi", "taxonomy": {"kind": "mask"}},
                           "s": {"role": "sensitive", "taxonomy": taxonomy}},
            "privacy": {"k": 2, "t_closeness": {"t": t, "distance": "hierarchical"}}, **extra}


def test_release_passes_and_is_refused(golden):
    rel = anon_sql.release(golden, _policy(0.5))
    assert sorted(rel.classes["t_closeness__s_value"]) == pytest.approx([0.0, 0.5, 0.5])
    golden.execute("DROP TABLE rel")
    with pytest.raises(PrivacyRequirementError, match="t_closeness__s"):
        anon_sql.release(golden, _policy(0.45))


@pytest.mark.parametrize("method", ["mondrian", "optimal"])
def test_methods_generalize_to_meet_it(golden, method):
    rel = anon_sql.release(golden, _policy(0.3, method))
    assert rel.checks["passed"].all()
    assert rel.classes["t_closeness__s_value"].max() <= 0.3 + 1e-9


def test_taxonomy_required_and_covering(golden):
    d = _policy(0.5)
    del d["attributes"]["s"]["taxonomy"]
    with pytest.raises(PolicyError, match="needs a taxonomy"):
        anon_sql.release(golden, d)
    partial = {"kind": "mapping", "mapping": {"a": ["X"], "b": ["X"], "c": ["Y"]}}
    with pytest.raises(anon_sql.TaxonomyError, match="does not cover"):
        anon_sql.release(golden, _policy(0.5, "mondrian", partial))
    # the levels method checks in SQL only: a value outside the taxonomy gives NULL, and the check fails closed
    with pytest.raises(PrivacyRequirementError, match="t_closeness__s"):
        anon_sql.release(golden, _policy(0.5, "levels", partial))


def test_insensitive_attributes_take_no_taxonomy():
    d = _policy(0.5)
    d["attributes"]["s"]["role"] = "insensitive"
    d["privacy"] = {"k": 2}
    with pytest.raises(PolicyError, match=r"`taxonomy` does not apply to role = 'insensitive', only to role = "
                                          r"'quasi' \| 'sensitive'"):
        anon_sql.Policy.from_dict(d)


@pytest.mark.parametrize("seed", range(4))
def test_sql_equals_numpy_and_assess(con, seed):
    rng = np.random.default_rng(seed)
    leaves = [f"v{i}" for i in range(8)]
    mapping = {v: [f"m{int(rng.integers(0, 3))}"] for v in leaves}
    mapping = {v: [p[0], f"g{int(p[0][1]) % 2}"] for v, p in mapping.items()}
    n = 250
    frame = pd.DataFrame({"zip": rng.integers(0, 12, n).astype(str), "s": rng.choice(leaves, n)})
    con.register("src", frame)
    con.execute("CREATE TABLE golden AS SELECT * FROM src")
    pol = _policy(1.0, taxonomy={"kind": "mapping", "mapping": mapping})
    rel = anon_sql.release(con, pol)
    sql = rel.classes.sort_values("zip")["t_closeness__s_value"].to_numpy()
    tax = from_mapping("s", mapping)
    # numpy: the kernel through the model on the same classes
    cls, zips = pd.factorize(frame["zip"], sort=True)
    codes, labels = pd.factorize(frame["s"])
    sc = SensitiveCounts.from_codes(cls, codes, np.ones(n), len(zips), len(labels))
    sc.labels = np.asarray(labels, dtype=object)
    numpy = HierarchicalTCloseness("s", 1.0, tax).measure(ClassStats(np.bincount(cls).astype(float), {"s": sc}))
    assert sql == pytest.approx(numpy, abs=1e-9)
    assert anon_sql.assess(con, frame, ["zip"], ["s"], taxonomies={"s": tax}).measures["t_hierarchical"] == \
        pytest.approx(numpy.max(), abs=1e-9)
