"""`anon-sql analyze`: leakage / vulnerability / relevance reports from a table in --db or a CSV/Parquet path."""
from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from anon_sql.cli.analyze import analyze

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TABLE1 = str(DATA / "examples" / "seed000_table1.csv")


def run(*args: str):
    return CliRunner().invoke(analyze, [str(a) for a in args])


def test_leakage_from_csv_ranked_with_qi_suggestion():
    res = run(TABLE1, "--leakage", "--count-column", "n", "--quasi", "sex,alcohol,age,zip,weight,race")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    ranked = [line.split()[0] for line in lines[2:8]]
    assert ranked == ["age", "zip", "race", "weight", "alcohol", "sex"]
    assert "0.6024" in res.stdout  # age, seed 000 Table 2: 0.60
    assert "Suggested quasi-identifiers (normalized leakage >= 0.30): age, zip, race, weight, alcohol" in res.stdout


def test_table_in_db_file_with_combinations(tmp_path):
    db = tmp_path / "clinic.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE patients AS SELECT * FROM read_csv(?)", [TABLE1])
    res = run("patients", "--db", db, "--combinations", "2", "--quasi", "sex,age,zip", "--count-column", "n",
              "--qi-threshold", "0.64")
    assert res.exit_code == 0, res.output
    assert "set of 2 attributes" in res.stdout
    assert "age + zip" in res.stdout and "sex + age" in res.stdout
    assert "normalized leakage >= 0.64): age + zip\n" in res.stdout
    # the database was opened read-only: the source is untouched
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM patients").fetchall() == [(22,)]


def test_adult_semicolon_crlf_vulnerability():
    res = run(DATA / "adult" / "adult.csv", "--vulnerability", "--target", "salary-class",
              "--quasi", "age,sex,race,native-country", "--n-estimators", "20", "--seed", "1")
    assert res.exit_code == 0, res.output
    rows = [line.split()[0] for line in res.stdout.splitlines()[2:6]]
    assert rows[:2] == ["age", "sex"]
    assert "OOB score (classification): 0.7" in res.stdout
    assert "below 0.90" in res.stderr


def test_relevance_on_headerless_pima_and_parquet(tmp_path):
    pq = tmp_path / "pima.parquet"
    with duckdb.connect() as con:
        con.execute("SELECT * FROM read_csv(?, header = false, names = ['preg', 'plas', 'pres', 'skin', 'insu', "
                    "'mass', 'pedi', 'age', 'class'])",
                    [str(DATA / "pima" / "pima-indians-diabetes.data.csv")]).df().to_parquet(pq)
    res = run(pq, "--relevance", "--target", "class")
    assert res.exit_code == 0, res.output
    assert "Selected for anonymization (|tau_b| < 0.20, not redundant): insu, preg, skin, pres, pedi" in res.stdout
    # the raw CSV has no header: DuckDB names its columns column0..column8
    res = run(DATA / "pima" / "pima-indians-diabetes.data.csv", "--relevance", "--target", "column8")
    assert res.exit_code == 0, res.output
    assert "column1" in res.stdout


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["patients.csv"], 2, "does not exist"),      # a missing file is bad input
        ([TABLE1, "--quasi", "sex,zipcode"], 2, "unknown attribute column(s) 'zipcode'"),
        ([TABLE1, "--vulnerability"], 2, "need --target"),
        (["patients"], 2, "pass its database with --db"),
        ([TABLE1, "--relevance", "--target", "sex", "--quasi", "sex,age"], 2, "also listed as a feature"),
    ],
)
def test_errors(args, code, message):
    res = run(*args)
    assert res.exit_code == code, res.output
    assert message in res.output


def test_unknown_table_lists_tables(tmp_path):
    db = tmp_path / "x.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE patients AS SELECT 1 AS a")
    res = run("patient", "--db", db)
    assert res.exit_code == 2   # bad input
    assert "unknown table 'patient'; tables and views in this database: patients" in res.output
