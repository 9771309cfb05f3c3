"""PII detection: name hints (multilingual), value patterns in SQL over a sample, pasteable policy lines."""
from __future__ import annotations

import tomllib
from pathlib import Path

import duckdb
import pytest

from anon_sql.errors import PolicyError, SourceError
from anon_sql.sdc.detect import detect, name_hints

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def nir(body13: str) -> str:
    return body13 + f"{97 - int(body13) % 97:02d}"


@pytest.fixture(scope="module")
def found():
    con = duckdb.connect()
    con.execute("CREATE TABLE people AS SELECT i AS n FROM range(400) r(i)")
    con.execute("ALTER TABLE people ADD COLUMN c1 VARCHAR")   # value columns with neutral names: patterns only
    con.execute("""CREATE TABLE p AS SELECT n,
        'user' || n || '@example.org' AS c1,
        '+33 6 12 34 ' || lpad(CAST(n % 100 AS VARCHAR), 2, '0') || ' 00' AS c2,
        lpad(CAST(100 + n % 500 AS VARCHAR), 3, '0') || '-45-' || lpad(CAST(1000 + n AS VARCHAR), 4, '0') AS c3,
        CASE WHEN n % 2 = 0 THEN 'GB82 WEST 1234 5698 7654 32' ELSE 'DE89370400440532013000' END AS c4,
        CASE WHEN n % 2 = 0 THEN 'GB83WEST12345698765432' ELSE 'DE88370400440532013000' END AS c5,
        ? AS c6,
        DATE '1940-01-01' + CAST(n * 53 AS INTEGER) AS c7,
        lpad(CAST(75000 + n % 20 AS VARCHAR), 5, '0') AS c8,
        n * 1.5 AS c9,
        CASE WHEN n % 3 = 0 THEN 'a' ELSE 'b' END AS "Prénom",
        'x' AS "Geburtsdatum", 'y' AS "e-mail", 'z' AS hotel, 'w' AS "code postal", 'v' AS "SocialSecurity"
        FROM people""", [nir("1850775123456")])
    return detect(con, "p", sample=300).set_index("column")


@pytest.mark.parametrize("column, role, words", [
    ("c1", "identifier", "email addresses"), ("c2", "identifier", "phone numbers"),
    ("c3", "identifier", "US social security numbers"), ("c4", "identifier", "IBANs with a valid mod-97 check"),
    ("c6", "identifier", "French INSEE numbers"), ("c7", "quasi", "dates of birth"), ("c8", "quasi", "postcodes"),
])
def test_value_patterns(found, column, role, words):
    assert found.loc[column, "role"] == role and words in found.loc[column, "reason"]
    assert 0.5 <= found.loc[column, "confidence"] <= 1


def test_invalid_ibans_and_plain_numbers_are_not_flagged(found):
    assert "c5" not in found.index                 # the right shape, a wrong mod-97 check digit
    assert "c9" not in found.index and "hotel" not in found.index     # 'tel' is not a token of 'hotel'


@pytest.mark.parametrize("column, role", [("Prénom", "identifier"), ("Geburtsdatum", "quasi"),
                                          ("e-mail", "identifier"), ("code postal", "quasi"),
                                          ("SocialSecurity", "identifier")])
def test_multilingual_name_hints(found, column, role):
    assert found.loc[column, "role"] == role and f"name {column!r}" in found.loc[column, "reason"]


def test_unique_values_suggest_an_identifier(found):
    assert found.loc["n", "role"] == "identifier" and "distinct value" in found.loc["n", "reason"]


def test_policy_lines_paste_into_toml(found):
    text = "\n".join(found["policy"])
    parsed = tomllib.loads(text)["attributes"]
    assert parsed["Prénom"] == {"role": "identifier"} and parsed["code postal"] == {"role": "quasi"}
    assert set(parsed) == set(found.index)


def test_adult_quasi_identifiers():
    con = duckdb.connect()
    con.execute("CREATE TABLE adult AS SELECT * FROM read_csv(?, delim=';', header=true)",
                [str(DATA / "adult" / "adult.csv")])
    d = detect(con, "adult", sample=2000).set_index("column")
    for c in ["age", "sex", "race", "marital-status", "education", "native-country", "occupation"]:
        assert d.loc[c, "role"] == "quasi", c
    assert "salary-class" not in d.index


def test_name_hints_need_whole_tokens_for_short_words():
    assert name_hints("tel_mobile") and not name_hints("hotel") and not name_hints("capacity")
    assert [r for r, _, _ in name_hints("dateOfBirth")] == ["quasi"]


def test_bad_input():
    con = duckdb.connect()
    with pytest.raises(SourceError, match="no table or view 'nope'"):
        detect(con, "nope")
    con.execute("CREATE TABLE t (a INT)")
    with pytest.raises(PolicyError, match="sample is a number of rows"):
        detect(con, "t", sample=0)
    assert detect(con, "t").empty
