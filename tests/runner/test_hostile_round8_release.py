"""Hostile round 8's release-side findings (docs/hostile-round-8.md), each failing on the code before its fix:

* M3 / P06, P06c: an identifier masked with `shuffle` (or `noise`/`dnoise`) released every raw identifier; a `partial`
  keeping as many characters as a value has released it whole;
* M4 / P30, S05, D29: a release (and a DP query) ran over macros that shadow what its SQL calls: a `main.hash` made
  SafePub's sample keep every record, a redefined `anon.hash` released raw values, a DP query was charged for nothing;
* E08 (related names with `/` or `..`), U26 (`rows_are_people` on the unit), A2 (NaN weights), N15 (a related name
  changed only in case on replace);
* the check-program cache keyed on the audit folder only (a compiler change kept stale programs).
"""
from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main as cli
from units_fixtures import KEY


@pytest.fixture
def con(monkeypatch):
    monkeypatch.setenv("ANON_SQL_KEY", KEY)
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute("""CREATE TABLE custs AS SELECT i::BIGINT AS cid, 20 + 10 * (i % 5) AS age,
        CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex, lpad(i::VARCHAR, 9, '0') AS ssn,
        '4111' || lpad(i::VARCHAR, 12, '0') AS card, (i * 37) % 5000 AS income FROM range(200) t(i)""")
    yield c
    c.close()


def _policy(**ssn) -> dict:
    return {"name": "rel", "source": "custs",
            "attributes": {"cid": {"role": "identifier"}, "age": {"role": "quasi", "taxonomy": {"kind": "top"}},
                           "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
                           "ssn": {"role": "identifier", **ssn}, "card": {"role": "identifier"},
                           "income": {"role": "insensitive"}},
            "method": "levels", "method_params": {"levels": {"age": 0, "sex": 0}}, "privacy": {"k": 5}}


def _objects(c) -> list:
    return c.execute("SELECT schema_name, table_name FROM duckdb_tables() ORDER BY ALL").fetchall()


@pytest.mark.parametrize("function", ["shuffle", "noise", "dnoise"])
def test_m3_a_mask_that_keeps_an_identifiers_values_is_refused(con, function):
    extra = {"noise": {"ratio": 0.0}, "dnoise": {"interval": "1 day"}}.get(function, {})
    before = _objects(con)
    with pytest.raises(anon_sql.PolicyError, match=f"function = '{function}' .*never released as it is"):
        anon_sql.release(con, _policy(mask={"function": function, **extra}))
    assert _objects(con) == before


def test_m3_a_partial_keeping_a_whole_identifier_is_refused(con):
    mask = {"function": "partial", "keep_start": 5, "pad": "", "keep_end": 4}   # 9-character SSNs: all kept
    with pytest.raises(anon_sql.PolicyError, match=r"the whole of 200 value\(s\) of identifier 'ssn'"):
        anon_sql.release(con, _policy(mask=mask))
    mask = {"function": "partial", "keep_start": 0, "pad": "XXXXX", "keep_end": 4}
    anon_sql.release(con, _policy(mask=mask))
    assert con.execute("SELECT count(*) FROM rel WHERE ssn LIKE 'XXXXX____'").fetchall() == [(200,)]


def test_m3_the_cli_exits_2(tmp_path, monkeypatch):
    monkeypatch.setenv("ANON_SQL_KEY", KEY)
    db = str(tmp_path / "m3.duckdb")
    with duckdb.connect(db) as c:
        c.execute("CREATE TABLE custs AS SELECT range AS cid, 30 AS age, 'F' AS sex, 's' || range AS ssn, "
                  "'c' || range AS card, 1 AS income FROM range(20)")
    res = CliRunner().invoke(cli, ["run", "-", "--db", db], input=(
        "CREATE ANONYMIZED VIEW rel WITH (k = 5, method = 'levels', method_params = {'levels': {'age': 0, 'sex': 0}})"
        " AS SELECT identifier(cid), quasi(age, taxonomy => {'kind': 'top'}), quasi(sex, taxonomy => {'kind': 'top'}),"
        " identifier(ssn, mask => {'function': 'shuffle'}), identifier(card), insensitive(income) FROM custs;"))
    assert res.exit_code == 2 and "shuffle" in res.output, res.output


def test_m4_a_redefined_anon_macro_stops_the_release(con):
    con.execute("CREATE OR REPLACE MACRO anon.hash(t, salt) AS t")
    before = _objects(con)
    with pytest.raises(anon_sql.PolicyError, match="redefined anon.hash"):
        anon_sql.release(con, _policy(mask={"function": "hash", "salt": "s3cret"}))
    assert _objects(con) == before
    anon_sql.install(con)   # the fix the message names
    anon_sql.release(con, _policy(mask={"function": "hash", "salt": "s3cret"}))
    assert con.execute("SELECT count(*) FROM rel r JOIN custs c ON r.ssn = c.ssn").fetchall() == [(0,)]


def test_m4_a_macro_shadowing_a_builtin_stops_safepub_and_dp(con):
    con.execute("CREATE MACRO main.hash(a) AS 0::UBIGINT, (a, b) AS 0::UBIGINT, (a, b, c) AS 0::UBIGINT")
    p = _policy()
    p["privacy"] = {"k": 2, "differential_privacy": {"epsilon": 2.0, "delta": 1e-5}}
    with pytest.raises(anon_sql.PolicyError, match="shadowing a built-in function main.hash"):
        anon_sql.release(con, p)
    anon_sql.execute(con, "CREATE PRIVACY BUDGET ON custs WITH (epsilon = 10, delta = 1e-5, privacy_unit = 'cid')")
    with pytest.raises(anon_sql.AnonSQLError, match="shadowing a built-in function main.hash"):
        anon_sql.execute(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-7, "
                              "max_groups_contributed = 1) sex, COUNT(*) AS n FROM custs GROUP BY sex")
    spent = con.execute("SELECT count(*) FROM anon.privacy_ledger").fetchall()
    assert spent == [(0,)]


@pytest.mark.parametrize("name", ["a/b", "../../escaped", "x\\y"])
def test_e08_related_names_that_are_no_file_part_are_refused(name):
    p = {"name": "r", "source": "t", "privacy_unit": "id",
         "attributes": {"id": {"role": "identifier"}, "age": {"role": "quasi", "taxonomy": {"kind": "top"}}},
         "related": {name: {"source": "c", "key": "id", "default_role": "insensitive"}}, "privacy": {"k": 2}}
    with pytest.raises(anon_sql.PolicyError, match="may not hold '/'"):
        anon_sql.Policy.from_dict(p)


def test_u26_rows_are_people_on_the_unit_is_a_contradiction():
    p = {"name": "r", "source": "t", "privacy_unit": "id",
         "attributes": {"id": {"role": "identifier", "rows_are_people": True},
                        "age": {"role": "quasi", "taxonomy": {"kind": "top"}}}, "privacy": {"k": 2}}
    with pytest.raises(anon_sql.PolicyError, match="rows_are_people = true says its rows are different people"):
        anon_sql.Policy.from_dict(p)


def test_a2_nan_and_infinite_weights_are_refused(con):
    con.execute("CREATE TABLE people AS SELECT range AS id, 30 + range % 3 AS age, 'F' AS sex, "
                "CASE WHEN range = 0 THEN 'nan'::DOUBLE WHEN range = 1 THEN 'inf'::DOUBLE ELSE 2.0 END AS w "
                "FROM range(30)")
    with pytest.raises(anon_sql.PolicyError, match="2 NaN or infinite"):
        anon_sql.assess(con, "people", quasi=["age", "sex"], weights="w")


def test_n15_a_related_name_changed_only_in_case_replaces_the_table(monkeypatch):
    from test_units_related import flu, plain_policy

    monkeypatch.setenv("ANON_SQL_KEY", KEY)
    with duckdb.connect() as c:
        anon_sql.install(c)
        flu(c)
        p = plain_policy(max_suppression=0.5)
        anon_sql.release(c, p)
        p["related"] = {"Conditions": p["related"].pop("conditions")}
        anon_sql.release(c, p, replace=True)
        names = [r[0] for r in c.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
                                         "AND lower(table_name) = 'synth_conditions'").fetchall()]
        assert names == ["synth_Conditions"]


def test_the_check_program_cache_keys_on_the_whole_package():
    from anon_sql.audit import program

    assert program._PACKAGE == Path(anon_sql.__file__).resolve().parent


# -- hostile round 9 (docs/hostile-round-9.md): M6 (the macro test missed case variants and TEMP macros), M10 (a
# user's table whose name differs only in case from a related table was replaced)
@pytest.mark.parametrize("macro", ["CREATE MACRO SHA256(x) AS x", "CREATE TEMP MACRO sha256(x) AS x",
                                   "CREATE OR REPLACE MACRO anon.HASH(txt, salt) AS txt",
                                   "CREATE MACRO Sha256(x) AS system.main.sha256(substr(x, 7))"],
                         ids=["upper", "temp", "anon-upper", "mixed"])
def test_m6_macros_in_another_case_or_temp_stop_the_release(con, macro):
    con.execute(macro)
    before = _objects(con)
    with pytest.raises(anon_sql.PolicyError, match="cannot run over this database's SQL macros"):
        anon_sql.release(con, _policy(mask={"function": "hash", "salt": "pepper"}))
    assert _objects(con) == before


@pytest.mark.parametrize("macro", ["CREATE MACRO LEAST(a, b) AS a", "CREATE TEMP MACRO least(a, b) AS a",
                                   "CREATE TEMP MACRO hash(a, b, c) AS 0::UBIGINT"])
def test_m6_dp_refuses_case_and_temp_shadows_before_charging(con, macro):
    anon_sql.execute(con, "CREATE PRIVACY BUDGET ON custs WITH (epsilon = 10, delta = 1e-5, privacy_unit = 'cid')")
    con.execute(macro)
    with pytest.raises(anon_sql.AnonSQLError, match="shadowing a built-in function"):
        anon_sql.execute(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-7, "
                              "max_groups_contributed = 1) sex, SUM(income, contribution_bounds_per_group => (0, 1)) "
                              "AS s FROM custs GROUP BY sex")
    assert con.execute("SELECT count(*) FROM anon.privacy_ledger").fetchall() == [(0,)]


def test_m10_a_users_table_named_like_a_related_table_in_another_case_is_never_replaced(monkeypatch):
    from test_units_related import flu, plain_policy

    monkeypatch.setenv("ANON_SQL_KEY", KEY)
    with duckdb.connect() as c:
        anon_sql.install(c)
        flu(c)
        anon_sql.release(c, plain_policy(max_suppression=0.5))
        c.execute("DROP TABLE synth_conditions")
        c.execute('CREATE TABLE "SYNTH_CONDITIONS" AS SELECT \'mine\' AS note')
        with pytest.raises(anon_sql.AnonSQLError, match="differs only in case"):
            anon_sql.execute(c, "REFRESH ANONYMIZED VIEW synth")
        with pytest.raises(anon_sql.AnonSQLError, match="differs only in case"):
            anon_sql.release(c, plain_policy(max_suppression=0.5), replace=True)
        assert c.execute('SELECT * FROM "SYNTH_CONDITIONS"').fetchall() == [("mine",)]
        p = plain_policy(max_suppression=0.5)
        p["related"]["X"] = dict(p["related"]["conditions"])
        c.execute('CREATE TABLE "SYNTH_x" AS SELECT \'mine too\' AS note')
        with pytest.raises(anon_sql.AnonSQLError):
            anon_sql.release(c, p, replace=True)
        assert c.execute('SELECT * FROM "SYNTH_x"').fetchall() == [("mine too",)]


@pytest.mark.parametrize("mask", [{"function": "noise", "ratio": 0.5}, {"function": "dnoise", "interval": "30 days"}])
def test_m7_a_value_keyed_noise_mask_under_the_default_seed_is_refused(con, mask):
    """Round 9, P09: with seed 0 (the default, public) anon.noise(x, 0.5, 0, x) over the candidates inverted all 200
    released incomes of a shared file that held no seed."""
    con.execute("CREATE TABLE dated AS SELECT *, DATE '1970-01-01' + (cid * 97)::INTEGER AS born FROM custs")
    p = _policy()
    p["source"] = "dated"
    p["attributes"]["born"] = {"role": "insensitive"}
    p["attributes"]["income" if mask["function"] == "noise" else "born"] = {"role": "insensitive", "mask": mask}
    before = _objects(con)
    with pytest.raises(anon_sql.PolicyError, match="seed = 0 is the default; set seed to a secret random integer"):
        anon_sql.release(con, p)
    assert _objects(con) == before
    anon_sql.release(con, {**p, "seed": 4_611_686_018_427})


def test_a_users_macro_named_like_an_anon_macro_in_main_is_no_shadow(con):
    """The compiled SQL calls the package's macros qualified (`anon.partial`): a user's `main.partial` changes
    nothing, so it does not stop a release."""
    con.execute("CREATE MACRO main.partial(a) AS a")
    anon_sql.release(con, _policy(mask={"function": "partial", "keep_start": 0, "pad": "XXXXX", "keep_end": 4}))
    assert con.execute("SELECT count(*) FROM rel WHERE ssn LIKE 'XXXXX____'").fetchall() == [(200,)]


@pytest.mark.parametrize("attr", [{"role": "insensitive", "mask": {"function": "partial", "keep_start": 0,
                                                                    "pad": "X", "keep_end": 4}},
                                  {"role": "insensitive", "perturb": {"kind": "noise", "scale": 0.5}},
                                  {"role": "identifier", "mask": {"function": "redact"}}],
                         ids=["mask", "perturb", "identifier-mask"])
def test_m11_a_mask_or_perturbation_on_a_related_column_is_refused(attr):
    """Round 9, M11: accepted, never applied; the related table released the raw values."""
    p = {"name": "r", "source": "t", "privacy_unit": "id",
         "attributes": {"id": {"role": "identifier"}, "age": {"role": "quasi", "taxonomy": {"kind": "top"}}},
         "related": {"rx": {"source": "rx", "key": "id", "default_role": "insensitive",
                            "attributes": {"doc_ssn": attr}}}, "privacy": {"k": 2}}
    with pytest.raises(anon_sql.PolicyError, match=r"\[related.rx.attributes.doc_ssn\] (mask|perturb): a related"):
        anon_sql.Policy.from_dict(p)


def test_q06b_a_macro_of_an_attached_database_on_the_search_path_stops_the_release(con, tmp_path):
    """Round 9, Q06b: `SET search_path = 'memory.main,evil.main'` put an attached database's `sha256` before the
    built-in, and a hash mask released the salt followed by the raw SSN."""
    evil = str(tmp_path / "evil.duckdb")
    with duckdb.connect(evil) as e:
        e.execute("CREATE MACRO sha256(x) AS x")
    con.execute(f"ATTACH '{evil}' AS evil (READ_ONLY)")
    con.execute("SET search_path = 'memory.main,evil.main'")
    with pytest.raises(anon_sql.PolicyError, match="evil.main.sha256"):
        anon_sql.release(con, _policy(mask={"function": "hash", "salt": "pepper"}))
