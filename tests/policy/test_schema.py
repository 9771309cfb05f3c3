"""The strict policy schema (issue 13.1): typos are refused in every form, types and ranges are checked, every
documented policy still loads, and docs/policy.md is exactly what the schema generates."""
from __future__ import annotations

import copy
import random
import re
import tomllib
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from anon_sql import Policy, PolicyError
from anon_sql.policy import keys as schema, docs as schema_docs
from anon_sql.cli.main import main
from anon_sql.methods import method_class, method_names
from anon_sql.policy.model import dump_toml
from anon_sql.policy.sql import render_policy_sql

ROOT = Path(__file__).resolve().parents[2]
ALPHABET = "abcdefghijklmnopqrstuvwxyz_"


def base() -> dict:
    """A valid policy with every section present (each location below adds one table to it)."""
    return {
        "name": "r", "source": "t", "method": "levels", "seed": 1, "count_column": "n", "default_role": "insensitive",
        "attributes": {"id": {"role": "identifier", "action": "pseudonymize", "key_file": "k.txt"},
                       "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [5, 10]}, "iv": 0.5},
                       "zip": {"role": "quasi", "taxonomy": "zip_h"},
                       "s": {"role": "sensitive", "taxonomy": {"kind": "top"}}, "w": {"role": "insensitive"}},
        "privacy": {"k": 2, "max_suppression": 0.1, "t_closeness": {"t": 0.5, "distance": "equal"},
                    "simpson": {"diversity": 1.5, "evenness": 0.5}, "theta": {"mu": 0.6},
                    "p_sensitive": {"p": 2, "categories": {"a": ["x"]}, "plus": True, "alpha": 0.5,
                                    "weights": {"a": 1.0}},
                    "alpha": 0.8, "beta_likeness": {"beta": 1.0, "kind": "enhanced"},
                    "delta_disclosure": {"delta": 1.2, "log": "2"}, "requirements": [{"quasi": ["age"], "k": 2}],
                    "k_map": {"k": 5, "population": "pop"},
                    "delta_presence": {"delta_min": 0.1, "delta_max": 0.5, "population": "pop"}},
        "method_params": {"levels": {"age": 1}},
        "metrics": {"compute": ["k"], "risk_threshold": 3, "reid_quasi": ["age"], "weights": {"age": 1.0},
                    "iv": {"age": 1.0}, "iv_trees": 5, "queries": 10, "query_dims": [1], "query_selectivity": [0.1],
                    "query_seed": 1, "recursive_l": 2, "t_distance": "equal", "silhouette_sample": 100},
    }


# a valid value for every method parameter (the fuzz needs the base to load before a key is misspelled)
METHOD_VALUES = {"levels": {"age": 1}, "objective": "ncp", "max_nodes": 10, "categorical_width": "leaves",
                 "window": 8, "order": "sorted", "noise_flag": "noise", "intervals": 3, "strategy": "width",
                 "theta": 1, "columns": 2, "sensitive_column_size": 2, "bins": 10, "sensitive_column": "alpha",
                 "invalid_tuples": ["s = 'x'"], "repair_invalid": True, "iv": "computed", "diversity": 1.5,
                 "evenness": 0.5, "boost": 1, "similarity": "plain", "similarity_weights": "equal", "iv_trees": 5,
                 "quasi": "ktfs", "target": "w", "delta": 0.2, "redundancy": 0.8, "score": "kendall",
                 "vulnerable": ["age"], "generalize_unique_only": ["age"], "init": "kmeans||", "oversampling": 2.0,
                 "rounds": 2, "max_iter": 10, "tol": 0.001, "monotone": True, "importance": {"age": 1.0}}
PERTURB_VALUES = {"microaggregation": {"k": 3, "method": "mdav", "group": "g"},
                  "top_code": {"above": 10, "replacement": 9}, "bottom_code": {"below": 1, "replacement": 2},
                  "pram": {"retain": 0.8, "invariant": True}, "noise": {"scale": 0.1, "correlated": True, "group": "g"},
                  "swap": {"window": 5}}
MASK_VALUES = {"partial": {"keep_start": 1, "pad": "X", "keep_end": 1}, "partial_email": {},
               "redact": {"replacement": "R"}, "hash": {"salt": "s"}, "noise": {"ratio": 0.1},
               "dnoise": {"interval": "1 day"}, "shuffle": {},
               "fake": {"provider": "first_name", "locale": "en_US", "consistent": True}}
TAXONOMY_VALUES = {"interval": {"widths": [5], "top": True}, "mask": {"levels": 2}, "date": {}, "top": {},
                   "mapping": {"mapping": {"a": ["A"]}, "top": True}, "file": {"path": "h.csv"}}
L_VALUES = {"distinct": {"l": 2}, "entropy": {"l": 1.5}, "recursive": {"c": 3, "l": 2}, "slicing": {"l": 2}}


def _minimal(**extra) -> dict:
    return {"name": "r", "source": "t", "attributes": {"age": {"role": "quasi"}, "s": {"role": "sensitive"}}, **extra}


def locations():
    """(label, policy, the table inside it whose keys are fuzzed, form) for every section of the schema, each in a
    small policy; form is how the SQL form spells the table's keys: "with" (WITH options), "role" (role function
    options), "nested" (a struct value, read by the same code as the dict form)."""
    top = _minimal(method="levels", seed=1, count_column="n", default_role="insensitive", privacy={"k": 2},
                   method_params={"levels": {"age": 0}}, metrics={"compute": ["k"]})
    privacy = _minimal(privacy=base()["privacy"])
    out = [("top level", top, top, "with"), ("[privacy]", privacy, privacy["privacy"], "with")]
    for name in ("t_closeness", "simpson", "theta", "p_sensitive", "beta_likeness", "delta_disclosure", "k_map",
                 "delta_presence"):
        p = _minimal(privacy={name: base()["privacy"][name]})
        out.append((f"privacy.{name}", p, p["privacy"][name], "nested"))
    p = _minimal(privacy={"requirements": [{"quasi": ["age"], "k": 2}]})
    out.append(("[[privacy.requirements]]", p, p["privacy"]["requirements"][0], "nested"))
    for kind, values in L_VALUES.items():
        p = _minimal(privacy={"l_diversity": {"kind": kind, **values}}, **({"method": "slicing"} if kind == "slicing"
                                                                            else {}))
        out.append((f"l_diversity kind={kind}", p, p["privacy"]["l_diversity"], "nested"))
    for col, spec in base()["attributes"].items():
        p = _minimal()
        p["attributes"][col] = spec
        out.append((f"[attributes.{col}]", p, spec, "role"))
    for kind, values in TAXONOMY_VALUES.items():
        p = _minimal()
        p["attributes"]["age"]["taxonomy"] = {"kind": kind, **copy.deepcopy(values)}
        out.append((f"taxonomy kind={kind}", p, p["attributes"]["age"]["taxonomy"], "nested"))
    for kind, values in PERTURB_VALUES.items():
        p = _minimal()
        p["attributes"]["s"]["perturb"] = {"kind": kind, **copy.deepcopy(values)}
        out.append((f"perturb kind={kind}", p, p["attributes"]["s"]["perturb"], "nested"))
    for function, values in MASK_VALUES.items():
        p = _minimal()
        p["attributes"]["w"] = {"role": "insensitive", "mask": {"function": function, **copy.deepcopy(values)}}
        out.append((f"mask function={function}", p, p["attributes"]["w"]["mask"], "nested"))
    p = _minimal(metrics=base()["metrics"])
    out.append(("[metrics]", p, p["metrics"], "nested"))
    for method in method_names():
        p = _minimal(method=method, method_params={k.name: copy.deepcopy(METHOD_VALUES[k.name])
                                                   for k in method_class(method).parameters
                                                   if not (method == "upa" and k.name == "generalize_unique_only")})
        out.append((f"method_params of {method}", p, p["method_params"], "nested"))
    return out


def mutations(word: str, rng: random.Random) -> set[str]:
    """Every deletion and transposition of ``word``, and a seeded sample of its insertions and substitutions."""
    dels = {word[:i] + word[i + 1:] for i in range(len(word))}
    swaps = {word[:i] + word[i + 1] + word[i] + word[i + 2:] for i in range(len(word) - 1)}
    ins = [word[:i] + c + word[i:] for i in range(len(word) + 1) for c in ALPHABET]
    subs = [word[:i] + c + word[i + 1:] for i in range(len(word)) for c in ALPHABET if c != word[i]]
    return {m for m in dels | swaps | set(rng.sample(ins, 4)) | set(rng.sample(subs, 4)) if m and m != word}


def _sql(d: dict) -> str:
    """The SQL form of a policy dict (top-level options ride as WITH options: render_policy_sql lists privacy items
    verbatim, so a misspelled top-level key is put there)."""
    d = copy.deepcopy(d)
    extra = {k: d.pop(k) for k in list(d) if k not in schema.TOP.keys}
    d.setdefault("privacy", {}).update(extra)
    return render_policy_sql(d, pretty=False)


def test_every_fuzz_location_is_valid_before_the_typo():
    for label, policy, _, _ in locations():
        p = Policy.from_dict(policy)
        assert Policy.from_dict(p.to_dict()) == p, label


def test_a_one_edit_typo_of_any_key_is_refused_in_dict_toml_and_sql():
    """Every key the schema declares, mutated by one edit, is refused in Policy.from_dict and in TOML (the message
    names the typo, or for a tag such as kind / role the key it lacks), and WITH / role-function options in SQL.
    (Struct values inside WITH are read by the same code as the dict form, so SQL fuzzes the options it parses.)"""
    rng = random.Random(13)
    counts, escaped = {"dict": 0, "toml": 0, "sql": 0}, []
    for label, policy, table_, form in locations():
        known = set(table_) | ({*schema.SQL_TOP_LEVEL, *schema.PRIVACY.keys} if form == "with" else set())
        for key in list(table_):
            typos = sorted(m for m in mutations(key, rng) if m not in known)   # known: not a typo, another key
            in_sql = set(rng.sample(typos, min(8, len(typos))))                # sqlglot parses take ~10 ms each
            for typo in typos:
                table_[typo] = table_.pop(key)
                forms = {"dict": lambda: Policy.from_dict(policy), "toml": lambda: Policy.from_toml(dump_toml(policy))}
                if form != "nested" and key not in ("name", "source", "attributes", "role") and typo in in_sql:
                    forms["sql"] = lambda: Policy.from_sql(_sql(policy))
                for how, load in forms.items():
                    counts[how] += 1
                    try:
                        load()
                        escaped.append((label, key, typo, how))
                    except PolicyError as err:
                        if f"`{typo}`" not in str(err) and f"`{key}`" not in str(err) and how != "sql":
                            escaped.append((label, key, typo, how, str(err)))
                table_[key] = table_.pop(typo)
    assert not escaped, escaped[:10]
    assert counts["dict"] == counts["toml"] > 2000 and counts["sql"] > 120, counts


# -- types and ranges -------------------------------------------------------------------------------------------------
def _set(path: str, value):
    p = base()
    parts = path.split(".")
    target = p
    for part in parts[:-1]:
        target = target[int(part)] if isinstance(target, list) else target[part]
    target[parts[-1]] = value
    return p


BAD = [
    ("privacy.k", [0, -1, True, "5", 5.0, 2.5, [5]]),
    ("privacy.max_suppression", [-0.1, 1.01, "0.1", True, float("nan")]),
    ("privacy.t_closeness", [0, -0.1, 5, 1.01, "0.2", True, {"t": 0}, {"t": 0.2, "distance": "manhattan"}]),
    ("privacy.theta.mu", [0, -0.5, 1.5, "0.6", True]),
    ("privacy.simpson.evenness", [1.5, -0.1, "0.5"]),
    ("privacy.simpson.diversity", [0.5, "2"]),
    ("privacy.p_sensitive.p", [0, "2", 1.5, True]),
    ("privacy.p_sensitive.plus", ["yes", 1]),
    ("privacy.requirements.0.k", [0, "3", True]),
    ("privacy.requirements.0.quasi", [[], "age", [1]]),
    ("privacy.alpha", [0, 1.5, "0.5"]),
    ("privacy.beta_likeness.beta", [0, -1, "1"]),
    ("privacy.beta_likeness.kind", ["strong"]),
    ("privacy.delta_disclosure.delta", [0, "1"]),
    ("privacy.delta_disclosure.log", ["10", 2]),
    ("privacy.k_map.k", [0, -1, "5", 2.5, True]),
    ("privacy.k_map.population", ["", 3, ["pop"]]),
    ("privacy.delta_presence.delta_max", [-0.1, 1.5, "0.5", True]),
    ("privacy.delta_presence.delta_min", [-0.1, 1.01, "0"]),
    ("privacy.delta_presence.population", ["", 3]),
    ("seed", [1.5, "1", True]),
    ("method", ["optimla", 3]),
    ("default_role", ["quasy"]),
    ("count_column", ["", 3]),
    ("attributes.age.taxonomy.widths", [[0], [-5], ["5"], [], 5]),
    ("attributes.age.iv", [-1, "0.5"]),
    ("attributes.id.action", ["hash"]),
    ("metrics.queries", [0, "10"]),
    ("metrics.query_selectivity", [[0], [1.5], 0.1]),
    ("metrics.compute", ["everything", [1]]),
]


@pytest.mark.parametrize("path,values", BAD, ids=[b[0] for b in BAD])
def test_out_of_range_and_wrong_type_values_are_refused_with_what_is_allowed(path, values):
    for value in values:
        with pytest.raises(PolicyError) as err:
            Policy.from_dict(_set(path, value))
        msg = str(err.value)
        assert path.split(".")[-1] in msg and ("must be" in msg or "unknown" in msg or "one of" in msg), msg


@pytest.mark.parametrize("spec,allowed", [
    ({"kind": "distinct", "l": 0}, "an integer >= 1"), ({"kind": "distinct", "l": "2"}, "an integer >= 1"),
    ({"l": 1.5}, "an integer >= 1"), ({"kind": "entropy", "l": 0.9}, ">= 1"),
    ({"kind": "recursive", "c": 0, "l": 2}, "> 0"), ({"kind": "recursive", "c": 3}, "needs `l`"),
    ({"kind": "recursive", "c": "3", "l": 2}, "> 0"), ({"kind": "entropic", "l": 2}, "did you mean 'entropy'"),
])
def test_l_diversity_is_checked_per_kind(spec, allowed):
    with pytest.raises(PolicyError, match=re.escape(allowed)):
        Policy.from_dict(_set("privacy.l_diversity", spec))


def test_valid_boundaries_are_accepted():
    for path, value in [("privacy.k", 1), ("privacy.max_suppression", 0), ("privacy.max_suppression", 1),
                        ("privacy.t_closeness", 1), ("privacy.t_closeness", 0.01), ("privacy.theta.mu", 1),
                        ("seed", -7), ("privacy.l_diversity", {"kind": "entropy", "l": 1}),
                        ("privacy.l_diversity", {"kind": "recursive", "c": 0.5, "l": 1})]:
        Policy.from_dict(_set(path, value))


@pytest.mark.parametrize("method,params,fragment", [
    ("mondrian", {"categorical_width": "wide"}, "categorical_width must be one of"),
    ("theta", {"window": 0}, "window must be an integer >= 1"),
    ("slicing", {"columns": "2"}, "columns must be an integer >= 1"),
    ("slicing", {"repair_invalid": "yes"}, "repair_invalid must be true or false"),
    ("upa", {"delta": 2}, "delta must be a number in [0, 1]"),
    ("adaptive", {"boost": -1}, "boost must be an integer >= 0"),
    ("optimal", {"objective": "ncpp"}, "did you mean 'ncp'"),
    ("fixed_interval", {"intervals": 0}, "intervals must be an integer >= 1"),
])
def test_method_params_are_checked_by_the_declarations_next_to_each_method(method, params, fragment):
    d = base()
    d.update(method=method, method_params=params)
    with pytest.raises(PolicyError, match=re.escape(fragment)):
        Policy.from_dict(d)


def test_the_policy_constructor_is_checked_like_the_other_forms():
    from anon_sql import Attribute, Privacy
    attrs = {"age": Attribute("age", "quasi")}
    with pytest.raises(PolicyError, match="privacy.k must be an integer >= 1"):
        Policy("r", "t", attrs, Privacy(k="5"))
    with pytest.raises(PolicyError, match="unknown key `categorical_widht`.*did you mean `categorical_width`"):
        Policy("r", "t", attrs, method="mondrian", method_params={"categorical_widht": "leaves"})
    with pytest.raises(PolicyError, match="unknown key `ivv`"):
        Policy("r", "t", {"age": Attribute("age", "quasi", options={"ivv": 1})})
    with pytest.raises(PolicyError, match="role"):
        Attribute("age", "quasy")


def test_unknown_with_option_is_an_error_never_a_privacy_setting():
    sql = "CREATE ANONYMIZED VIEW r WITH (methd = 'optimal', k = 5) AS SELECT quasi(age) FROM t"
    with pytest.raises(PolicyError, match=r"unknown key `methd` in the WITH \(\.\.\.\) options: did you mean `method`"):
        Policy.from_sql(sql)
    with pytest.raises(PolicyError, match="given twice"):
        Policy.from_sql("CREATE ANONYMIZED VIEW r WITH (k = 5, k = 3) AS SELECT quasi(age) FROM t")
    # a method's parameter at the top level says where it goes (hostile round 4, U01a)
    with pytest.raises(PolicyError, match=r"`levels` is a parameter of method\(s\) levels.*method_params = \{'levels'"):
        Policy.from_sql("CREATE ANONYMIZED VIEW r WITH (levels = {'age': 0}, k = 5) AS SELECT quasi(age) FROM t")
    with pytest.raises(PolicyError, match="is not a WITH option"):
        Policy.from_sql("CREATE ANONYMIZED VIEW r WITH (name = 'x') AS SELECT quasi(age) FROM t")
    with pytest.raises(PolicyError, match="did you mean `quasi`"):
        Policy.from_sql("CREATE ANONYMIZED VIEW r WITH (k = 5) AS SELECT quasy(age) FROM t")
    with pytest.raises(PolicyError, match=r"insensitive\(s, ...\): `taxonomy` does not apply to role = .insensitive."):
        Policy.from_sql("CREATE ANONYMIZED VIEW r WITH (k = 5) AS SELECT quasi(a), insensitive(s, taxonomy => 'x') "
                        "FROM t")


# -- every documented policy still loads, and round-trips unchanged --------------------------------------------------
def _documented() -> list[tuple[str, dict]]:
    """Policies (and policy fragments, completed with a minimal policy) from README.md, docs/ and the examples."""
    out = [(str(p), tomllib.loads(p.read_text())) for p in (ROOT / "anon_sql" / "examples").glob("*.toml")]
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = md.read_text()
        for i, block in enumerate(re.findall(r"```toml\n(.*?)```", text, re.S)):
            out.append((f"{md.name} toml #{i}", tomllib.loads(block)))
        statements = [st.strip() for block in re.findall(r"```sql\n(.*?)```", text, re.S)
                      for st in re.split(r";\s*\n", block.replace("[OR REPLACE] ", ""))]
        for i, st in enumerate(st for st in statements if re.match(r"CREATE (OR REPLACE )?ANONYMIZED VIEW", st)):
            out.append((f"{md.name} sql #{i}", Policy.from_sql(st.rstrip(";")).to_dict()))
    assert len(out) >= 8
    return out


def test_documented_policies_load_and_round_trip():
    minimal = {"name": "x", "source": "t", "attributes": {"age": {"role": "quasi"}, "s": {"role": "sensitive"}}}
    for label, d in _documented():
        if "name" not in d:      # a fragment: the keys it shows, in a minimal policy
            d = {**minimal, **d}
        p = Policy.from_dict(d)
        assert Policy.from_toml(p.to_toml()) == p, label
        assert Policy.from_sql(p.to_sql()) == p, label
        assert Policy.from_dict(p.to_dict()) == p, label


def test_every_listed_method_loads_by_its_name_and_declares_its_parameters():
    from anon_sql.methods import REGISTRY, method_parameters
    names = method_names()
    assert names[0] == "levels" and len(names) >= 12
    for name in names:
        assert all(isinstance(k, schema.Key) for k in method_parameters(name))
    assert set(REGISTRY) == set(names)        # each module registered what the name map says


def test_docs_policy_reference_is_generated_from_the_schema():
    doc = (ROOT / "docs" / "policy.md").read_text(encoding="utf-8")
    fix = "run python -m anon_sql.policy.docs --write docs/policy.md"
    assert schema_docs.BEGIN in doc, f"docs/policy.md has no generated block: {fix}"
    assert schema_docs.splice(doc) == doc, f"docs/policy.md drifted from anon_sql/policy/keys.py: {fix}"
    for method in method_names():            # and it covers every section
        assert f'method = `"{method}"`' in doc


def test_cli_refuses_a_misspelled_policy_with_exit_2_and_leaves_the_database_unchanged(tmp_path):
    db = tmp_path / "w.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t AS SELECT range AS age, range % 3 AS s FROM range(20)")
    con.close()
    before = db.read_bytes()
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "r"\nsource = "t"\n[attributes.age]\nrole = "quasi"\ntaxonomy = { kind = "interval", '
                   'widths = [5] }\n[attributes.s]\nrole = "sensitive"\n[privacy]\nk = 2\n'
                   'l_diversty = { kind = "distinct", l = 2 }\n')
    res = CliRunner().invoke(main, ["release", str(bad), "--db", str(db)])
    assert res.exit_code == 2, res.output
    assert "unknown key `l_diversty` in [privacy]: did you mean `l_diversity`?" in res.output
    assert db.read_bytes() == before
