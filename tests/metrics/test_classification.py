"""Classification utility (spec/06): encodings, both protocols with the original baseline, clear errors.

Adult runs use a seeded 2,000–3,000-row subsample, 3 folds and the fast models, to stay within the time budget.
"""
from __future__ import annotations

import numpy as np
import pytest

import anon_sql
from anon_sql.errors import PolicyError
from anon_sql.metrics import ReleaseData
from anon_sql.metrics.classification import classify
from anon_sql.metrics.features import encode_original, encode_released
from conftest import adult_policy, load_adult

LEVELS = {"age": 2, "education": 1, "marital-status": 1, "race": 1, "sex": 0, "native-country": 1,
          "workclass": 1, "occupation": 1}
ZERO = {q: 0 for q in LEVELS}


@pytest.fixture
def adult(con):
    load_adult(con)
    return con


def test_encodings_share_one_space(con):
    con.execute("CREATE TABLE e AS SELECT * FROM (VALUES (20, 'A1'), (24, 'A2'), (30, 'B1'), (39, 'B2')) t(age, city)")
    city = {"kind": "mapping", "mapping": {"A1": ["A"], "A2": ["A"], "B1": ["B"], "B2": ["B"]}}
    anon_sql.release(con, {"name": "e1", "source": "e", "method": "levels",
                           "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10]}},
                                          "city": {"role": "quasi", "taxonomy": city}},
                           "privacy": {"k": 2}, "method_params": {"levels": {"age": 1, "city": 1}}})
    d = ReleaseData.from_catalog(con, "e1")
    assert encode_released(d, "age", ["[20-29]", "[30-39]"]).tolist() == [24.5, 34.5]   # interval midpoints
    assert encode_original(d, "age", ["24", None]).tolist()[0] == 24
    # categories: leaf positions in taxonomy order A1 A2 B1 B2 = 0..3; A = mean(0, 1), B = mean(2, 3)
    assert encode_original(d, "city", ["A1", "B2"]).tolist() == [0, 3]
    assert encode_released(d, "city", ["A", "B"]).tolist() == [0.5, 2.5]


def test_unchanged_release_matches_the_baseline_on_holdout(adult):
    """At level 0 the released training rows are the original ones: both accuracies must be equal."""
    anon_sql.release(adult, adult_policy(ZERO, **{"k": 1}))
    out = classify(adult, "adult_rel", "salary-class", models=["c45", "naive_bayes"], protocols=["holdout"],
                   sample=2000, seed=1)
    assert list(out["model"]) == ["c45", "naive_bayes"]
    assert np.allclose(out["accuracy_release"], out["accuracy_original"])
    assert (out["train"] + out["test"] == 2000).all()


def test_generalized_release_both_protocols(adult):
    anon_sql.release(adult, adult_policy(LEVELS, max_suppression=0.05))
    out = classify(adult, "adult_rel", "salary-class", models=["tree_gini", "naive_bayes"], folds=3, sample=3000)
    assert set(out["protocol"]) == {"cv3", "holdout"}
    assert out[["accuracy_original", "accuracy_release"]].apply(lambda s: s.between(0.5, 1)).all().all()
    assert np.allclose(out["difference"], out["accuracy_release"] - out["accuracy_original"])
    holdout = out[out["protocol"] == "holdout"].iloc[0]
    assert holdout["test"] == 1000                          # 1/3 of the 3,000 sampled rows
    assert holdout["train"] <= 2000                         # rows of suppressed classes are not trained on
    again = classify(adult, "adult_rel", "salary-class", models=["tree_gini", "naive_bayes"], folds=3, sample=3000)
    assert again.equals(out)                                # seeded: same result twice


def test_local_recoding_release(adult):
    adult.execute("CREATE TABLE small AS SELECT * FROM adult USING SAMPLE reservoir(1500 ROWS) REPEATABLE (7)")
    pol = adult_policy()
    pol.update(name="small_m", source="small", method="mondrian")
    pol.pop("method_params")
    pol["attributes"]["age"] = {"role": "quasi"}            # numeric ranges, no taxonomy
    anon_sql.release(adult, pol)
    out = classify(adult, "small_m", "salary-class", models=["c45"], folds=3)
    assert len(out) == 2 and out["accuracy_release"].between(0.5, 1).all()


def test_clear_errors(adult):
    anon_sql.release(adult, adult_policy(LEVELS, max_suppression=0.05))
    with pytest.raises(PolicyError, match="quasi-identifier"):
        classify(adult, "adult_rel", "age")
    with pytest.raises(PolicyError, match="unknown classifier"):
        classify(adult, "adult_rel", "salary-class", models=["xgboost"])
    with pytest.raises(PolicyError, match="not a column"):
        classify(adult, "adult_rel", "income")
    with pytest.raises(PolicyError, match="folds"):
        classify(adult, "adult_rel", "salary-class", folds=1)
