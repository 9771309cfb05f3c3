"""Round 10's last majors (docs/hostile-round-10.md): the `contents` row was a sum of DuckDB's invertible row hash, so
rows could be computed to keep it (B40); the `masks` row re-derived from whatever a schema on the `search_path`
named like the source held (B42); a related table's rows were not checked, only their count (C12). Now a table of
up to a million rows records the sha256 of its sorted row md5s, a source name that several objects answer to is
never re-derived from, and each related table records and checks the same digest. Round 11's M24: the sum stayed
for tables of over a million rows; every table now records the sha256 of its distinct rows' md5s with their counts
(one GROUP BY; a JSON column by its stored text: round 12, M25), and a hash-sum or session 14 record fails.
"""
from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from sqlglot import exp

import anon_sql
from anon_sql.errors import AnonSQLError
from anon_sql.cli.main import main
from anon_sql.common.content_kinds import CONTENT_HASH_SUM, CONTENT_SHA256, CONTENT_SHA256_COUNTED
from anon_sql.common.sqlbuild import render
from anon_sql.runner.digests import content_digest_query
from test_hostile_round9_values import db, failing  # noqa: F401  (round 9's `lv` over `patients`)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
from related_set_fixtures import db as related_db  # noqa: E402,F401  (release `synth` with `synth_conditions`)


def refused(path: str, name: str, tmp_path) -> bool:
    """check exits 3 and export writes nothing."""
    out = tmp_path / "out.duckdb"
    return (CliRunner().invoke(main, ["check", name, "--db", path]).exit_code == 3
            and CliRunner().invoke(main, ["export", name, "--db", path, "--to", str(out)]).exit_code == 3
            and not out.exists())


# the types whose values the counted digest groups as they are (VARCHAR and JSON: by their stored text); any other
# type is grouped, and written, as its JSON text and its text
IDENTITY = {"BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
            "UBIGINT", "UHUGEINT", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", "UUID",
            "BLOB", "BIT"}


def _compact(text: str | None) -> str:
    """A JSON text as Python's json writes it compactly (DuckDB's JSON read back), ``null`` for SQL NULL."""
    return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False) if text is not None else "null"


def _string(text: str | None) -> str:
    """A text as a JSON string, ``null`` for SQL NULL."""
    return json.dumps(text, ensure_ascii=False) if text is not None else "null"


def oracle_digest(con, table: str) -> str:
    """The digest recomputed outside SQL: each row's keys — an identity type's value as DuckDB's JSON writes it,
    a VARCHAR or JSON value's stored text, any other value's JSON text and text (both as JSON strings) — the
    distinct rows counted in Python (``Counter``), each ``{"c0": …, "n": count}``, md5 (hashlib), sorted,
    concatenated, sha256 (hashlib)."""
    described = [(c, t) for c, t, *_ in con.execute(f'DESCRIBE "{table}"').fetchall()]
    selected = []
    for c, t in described:
        if t in IDENTITY or t.startswith(("DECIMAL(", "ENUM(")):
            selected.append(f'to_json("{c}")')
        elif t in ("VARCHAR", "JSON"):
            selected.append(f'"{c}"::VARCHAR')
        else:
            selected += [f'to_json("{c}")::VARCHAR', f'"{c}"::VARCHAR']
    cells = con.execute("SELECT " + ", ".join(selected) + f' FROM "{table}"').fetchall()
    plain = [s.startswith("to_json") and not s.endswith("::VARCHAR") for s in selected]
    keys = Counter(tuple(_compact(v) if keep else _string(v) for v, keep in zip(row, plain)) for row in cells)
    lines = ["{" + "".join(f'"c{i}":{v},' for i, v in enumerate(key)) + f'"n":{n}' + "}" for key, n in keys.items()]
    return hashlib.sha256("".join(sorted(hashlib.md5(line.encode()).hexdigest() for line in lines)).encode()).hexdigest()


def recorded_content(con, release: str = "lv") -> dict:
    return json.loads(con.execute("SELECT released_values FROM anon.releases WHERE release = ?",
                                  [release]).fetchall()[0][0])["content"]


def test_the_contents_record_is_the_sha256_of_the_sorted_md5s_of_the_distinct_rows_with_counts(db):
    with duckdb.connect(db) as c:
        content = recorded_content(c)
        assert content["kind"] == CONTENT_SHA256_COUNTED and content["rows"] == 200
        assert content["hash"] == oracle_digest(c, "lv")
        assert c.execute("SELECT count(*) FROM (SELECT DISTINCT * FROM lv)").fetchall()[0][0] < 200   # rows repeat


def test_b40_values_moved_between_rows_of_two_classes_fail_contents_alone(db, tmp_path):
    """Two rows of two classes trade their `diag`: every column's values, every class and every QI combination stay
    as released (the `values` rows pass); only a digest of whole rows binds each value to its row."""
    with duckdb.connect(db) as c:
        low, high = c.execute("SELECT min(ec_id), max(ec_id) FROM lv").fetchall()[0]
        a, = c.execute("SELECT min(rowid) FROM lv WHERE ec_id = ? AND diag = 'd0'", [low]).fetchall()[0]
        b, = c.execute("SELECT min(rowid) FROM lv WHERE ec_id = ? AND diag = 'd1'", [high]).fetchall()[0]
        assert low != high and a is not None and b is not None
        c.execute("UPDATE lv SET diag = CASE WHEN rowid = ? THEN 'd1' ELSE 'd0' END WHERE rowid IN (?, ?)", [a, a, b])
    assert failing(db) == {"contents"}
    assert refused(db, "lv", tmp_path)


def test_b40_a_row_replaced_keeping_every_count_fails_contents(db, tmp_path):
    """One row deleted and a copy of another row of its class inserted: the row count, every class size and every
    QI value count stay; the rows do not."""
    with duckdb.connect(db) as c:
        ec, = c.execute("SELECT ec_id FROM lv GROUP BY ec_id HAVING count(DISTINCT diag) > 1 LIMIT 1").fetchall()[0]
        keep, drop = c.execute("SELECT arg_min(rowid, diag), arg_max(rowid, diag) FROM lv WHERE ec_id = ?",
                               [ec]).fetchall()[0]
        c.execute("INSERT INTO lv SELECT * FROM lv WHERE rowid = ?", [keep])
        c.execute("DELETE FROM lv WHERE rowid = ?", [drop])
        assert c.execute("SELECT count(*) FROM lv").fetchall() == [(200,)]
    assert failing(db) == {"contents"}
    assert refused(db, "lv", tmp_path)


def test_m24_a_table_of_any_size_records_the_counted_sha256_never_a_sum():
    """Hostile round 11, M24: over a million rows the release recorded the forgeable sum. 1.2M rows now record the
    counted sha256 (one GROUP BY: the released rows repeat), and rows traded between two classes fail."""
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute("CREATE TABLE p AS SELECT i AS pid, 20 + i % 40 AS age, 'd' || (i % 7) AS n FROM range(1200000) t(i)")
    anon_sql.execute(c, "CREATE ANONYMIZED VIEW big WITH (k = 5, method = 'levels', method_params = {'levels': "
                        "{'age': 0}}) AS SELECT identifier(pid), quasi(age, taxonomy => {'kind': 'top'}), "
                        "insensitive(n) FROM p")
    content = recorded_content(c, "big")
    assert content["kind"] == CONTENT_SHA256_COUNTED and content["rows"] == 1_200_000
    assert content["hash"] == oracle_digest(c, "big")
    row = anon_sql.check(c, "big").set_index("check").loc["contents"]
    assert row["passed"] and row["basis"] == "table"
    low, high = c.execute("SELECT min(ec_id), max(ec_id) FROM big").fetchall()[0]
    c.execute("UPDATE big SET n = CASE n WHEN 'd0' THEN 'd1' ELSE 'd0' END WHERE rowid IN "
              "(SELECT min(rowid) FROM big WHERE ec_id = ? AND n = 'd0' UNION ALL "
              "SELECT min(rowid) FROM big WHERE ec_id = ? AND n = 'd1')", [low, high])
    assert not anon_sql.check(c, "big").set_index("check").loc["contents", "passed"]


@pytest.mark.parametrize("edit", ["legacy", "downgraded", "downgraded, over a million rows"])
def test_m24_a_hash_sum_record_fails_at_any_size(db, edit):
    """Hostile round 11, M24 (P04, P05): a record from before sha256 digests (no kind) holds the forgeable sum, and
    so does one whose kind was set to the sum by hand, whatever row count it claims: check asks for a new
    release."""
    with duckdb.connect(db) as c:
        record = json.loads(c.execute("SELECT released_values FROM anon.releases WHERE release = 'lv'").fetchall()[0][0])
        columns = record["content"]["columns"]
        total = c.execute(f"SELECT sum(hash({', '.join(columns)})::HUGEINT)::VARCHAR FROM lv").fetchall()[0][0]
        rows = 2_000_000 if "million" in edit else 200
        record["content"] = {"hash": total, "columns": columns, "duckdb": record["content"]["duckdb"],
                             **({"kind": CONTENT_HASH_SUM, "rows": rows} if edit != "legacy" else {})}
        c.execute("UPDATE anon.releases SET released_values = ? WHERE release = 'lv'", [json.dumps(record)])
    with duckdb.connect(db, read_only=True) as c:
        row = anon_sql.check(c, "lv").set_index("check").loc["contents"]
    assert not row["passed"] and "release it again" in row["message"]


def test_m25_a_session_14_record_of_every_rows_json_text_fails(db):
    """Session 14 recorded the sha256 of every row's md5 of its to_json text, which re-writes a JSON column (round
    12, M25): check asks for a new release instead of trusting it."""
    with duckdb.connect(db) as c:
        record = json.loads(c.execute("SELECT released_values FROM anon.releases WHERE release = 'lv'").fetchall()[0][0])
        record["content"].update(kind=CONTENT_SHA256)
        c.execute("UPDATE anon.releases SET released_values = ? WHERE release = 'lv'", [json.dumps(record)])
    with duckdb.connect(db, read_only=True) as c:
        row = anon_sql.check(c, "lv").set_index("check").loc["contents"]
    assert not row["passed"] and "release it again" in row["message"]


@pytest.mark.parametrize("column, edit", [
    ("name VARCHAR COLLATE NOCASE", "UPDATE cv SET name = upper(name) WHERE rowid = 0"),
    ("name VARCHAR", "SET default_collation = 'nocase'; UPDATE cv SET name = upper(name) WHERE rowid = 0"),
    ("span INTERVAL",   # DuckDB's UPDATE skips a value equal to the old one: the row is replaced
     "INSERT INTO cv SELECT * REPLACE (INTERVAL 30 DAY AS span) FROM cv WHERE rowid = 0; DELETE FROM cv WHERE rowid = 0"),
    ("tags VARCHAR[]", "UPDATE cv SET tags = [upper(tags[1])] WHERE rowid = 0"),
    ("meta JSON", """UPDATE cv SET meta = '{ "plan" :  "p2"}' WHERE rowid = 0"""),   # round 12, M25 (A01)
    ("meta JSON", """UPDATE cv SET meta = '{"\\u0070lan":"p2"}' WHERE rowid = 0"""),  # A02b: an escape
    ("meta JSON", "UPDATE cv SET meta = NULL WHERE rowid = 0"),                 # A02: SQL NULL for 'null'
    ("metas JSON[]", """UPDATE cv SET metas = ['{ "plan":"p2"}'] WHERE rowid = 0"""),   # JSON inside a list
], ids=["nocase column", "nocase session", "interval of equal length", "list", "json spacing", "json escape",
        "json null", "json in a list"])
def test_m24_values_duckdb_calls_equal_but_that_read_otherwise_are_told_apart(column, edit):
    """The counted digest groups the rows: a value DuckDB's `=` or `to_json` merges with another that reads
    differently ('a' under NOCASE and 'A', '1 month' and '30 days', a JSON text's spacing, escapes and `null`, a
    VARIANT's inner type) must not keep the digest when put in its place."""
    c = duckdb.connect()
    anon_sql.install(c)
    name = column.split()[0]
    value = {"name": "'a'", "span": "INTERVAL 1 MONTH", "tags": "['a']", "meta": """'{"plan":"p2"}'""",
             "metas": """['{"plan":"p2"}']""", "v": "5::BIGINT::VARIANT"}[name]
    c.execute(f"CREATE TABLE src (pid INTEGER, age INTEGER, {column})")
    c.execute(f"INSERT INTO src SELECT i, 30 + (i % 3) * 10, {value} FROM range(60) t(i)")
    anon_sql.execute(c, "CREATE ANONYMIZED VIEW cv WITH (k = 5, method = 'levels', method_params = {'levels': "
                        f"{{'age': 0}}}}) AS SELECT identifier(pid), quasi(age, taxonomy => {{'kind': 'top'}}), "
                        f"insensitive({name}) FROM src")
    assert anon_sql.check(c, "cv").set_index("check").loc["contents", "passed"]
    for statement in edit.split("; "):
        c.execute(statement)
    assert not anon_sql.check(c, "cv").set_index("check").loc["contents", "passed"]


def test_an_unknown_digest_kind_fails(db):
    with duckdb.connect(db) as c:
        record = json.loads(c.execute("SELECT released_values FROM anon.releases WHERE release = 'lv'").fetchall()[0][0])
        record["content"]["kind"] = "crc32"
        c.execute("UPDATE anon.releases SET released_values = ? WHERE release = 'lv'", [json.dumps(record)])
    assert failing(db) == {"contents"}


LV = """CREATE ANONYMIZED VIEW cm WITH (k = 5, method = 'levels', method_params = {'levels': {'age': 0}}) AS
  SELECT identifier(pid), quasi(age, taxonomy => {'kind': 'top'}),
         insensitive(card, mask => {'function': 'partial', 'keep_start': 2, 'pad': 'XXXX', 'keep_end': 2}) FROM people"""


@pytest.mark.parametrize("shadow", [
    "CREATE SCHEMA evil; CREATE TABLE evil.people AS {q}; SET search_path = 'evil,main'",
    'CREATE SCHEMA "Evil"; CREATE TABLE "Evil"."PEOPLE" AS {q}; SET search_path = \'"Evil",main\'',
], ids=["schema on the search_path", "case variants"])
def test_b42_masks_are_never_re_derived_from_a_source_name_two_objects_answer_to(shadow):
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute("CREATE TABLE people AS SELECT i AS pid, 30 + (i % 3) * 10 AS age, "
              "'4111' || lpad(i::VARCHAR, 12, '0') AS card FROM range(60) t(i)")
    anon_sql.execute(c, LV)
    assert anon_sql.check(c, "cm")["passed"].all()
    c.execute("UPDATE cm SET card = substr(card, 1, 2) || 'XXXX' || '00'")   # every card's last digits edited
    crafted = "SELECT pid, age, substr(card, 1, 2) || '000000000000' || '00' AS card FROM memory.main.people"
    for statement in shadow.format(q=crafted).split("; "):
        c.execute(statement)
    frame = anon_sql.check(c, "cm").set_index("check")
    message = frame.loc["masks card", "message"]
    assert not frame.loc["masks card", "passed"] and "memory.main.people" in message and ".people" in message


def test_b42_one_object_of_the_name_is_re_derived_from_as_before():
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute("CREATE SCHEMA archive; CREATE TABLE archive.other AS SELECT 1 AS x")   # a schema, no second people
    c.execute("CREATE TABLE people AS SELECT i AS pid, 30 + (i % 3) * 10 AS age, "
              "'4111' || lpad(i::VARCHAR, 12, '0') AS card FROM range(60) t(i)")
    anon_sql.execute(c, LV)
    row = anon_sql.check(c, "cm").set_index("check").loc["masks card"]
    assert row["passed"] and row["basis"] == "source"


def test_c12_a_related_rows_insensitive_column_set_to_the_raw_id_fails_its_contents(related_db, tmp_path):
    """Each released condition's `visit` set to the person's raw Id (the key stays the pseudonym): the columns,
    types and row count are as released; the related table's content digest is not."""
    with duckdb.connect(related_db) as c:
        assert anon_sql.check(c, "synth")["passed"].all()
        content = json.loads(c.execute("SELECT related_tables FROM anon.releases WHERE release = 'synth'")
                             .fetchall()[0][0])["conditions"]["content"]
        assert content["kind"] == CONTENT_SHA256_COUNTED and content["hash"] == oracle_digest(c, "synth_conditions")
        c.execute("UPDATE synth_conditions SET visit = 100 + visit WHERE visit < 5")
    with duckdb.connect(related_db, read_only=True) as c:
        frame = anon_sql.check(c, "synth").set_index("check")
    assert set(frame.index[~frame["passed"]]) == {"related conditions contents"}
    assert refused(related_db, "synth", tmp_path)


def test_c12_a_shared_files_related_table_is_checked_against_its_metadata(related_db, tmp_path):
    out = str(tmp_path / "s.duckdb")
    assert CliRunner().invoke(main, ["export", "synth", "--db", related_db, "--to", out]).exit_code == 0
    with duckdb.connect(out) as c:
        assert anon_sql.check(c, "synth").set_index("check").loc["related conditions contents", "passed"]
        c.execute("UPDATE synth_conditions SET visit = visit + 1")
        row = anon_sql.check(c, "synth").set_index("check").loc["related conditions contents"]
    assert not row["passed"] and "metadata" in row["basis"]


def test_h108_a_timestamptz_column_checks_in_any_time_zone(tmp_path):
    """Hostile round 11, H108: JSON writes a TIMESTAMPTZ in the session's zone, so an untouched release failed
    `contents` when checked elsewhere; the digest writes it in UTC. An edit of it still fails."""
    path = str(tmp_path / "tz.duckdb")
    with duckdb.connect(path) as c:
        c.execute("SET TimeZone = 'UTC'")
        anon_sql.install(c)
        c.execute("CREATE TABLE ev AS SELECT i AS pid, 30 + (i % 3) * 10 AS age, "
                  "TIMESTAMPTZ '2024-03-01 08:00:00+00' + i * INTERVAL 7 MINUTE AS seen FROM range(60) t(i)")
        anon_sql.execute(c, "CREATE ANONYMIZED VIEW tz WITH (k = 5, method = 'levels', method_params = {'levels': "
                            "{'age': 0}}) AS SELECT identifier(pid), quasi(age, taxonomy => {'kind': 'top'}), "
                            "insensitive(seen) FROM ev")
    with duckdb.connect(path) as c:
        c.execute("SET TimeZone = 'America/New_York'")
        assert anon_sql.check(c, "tz").set_index("check").loc["contents", "passed"]
        c.execute("UPDATE tz SET seen = seen + INTERVAL 1 SECOND WHERE rowid = 0")
        assert not anon_sql.check(c, "tz").set_index("check").loc["contents", "passed"]


@pytest.mark.parametrize("column", ["v VARIANT", "s STRUCT(v VARIANT)", "l VARIANT[]"])
def test_m30_a_variant_column_is_refused_at_release(column):
    """Hostile round 12, A07, and round 13, M30: a VARIANT (at the top or nested) keeps its number and text while its
    inner type changes (INT64 -> INT8 in 100 rows passed check). Nothing can digest that, so the release refuses
    the column, naming the fix; the database is as before."""
    c = duckdb.connect()
    anon_sql.install(c)
    name = column.split()[0]
    value = {"v": "i::BIGINT::VARIANT", "s": "{'v': i::BIGINT::VARIANT}", "l": "[i::BIGINT::VARIANT]"}[name]
    c.execute(f"CREATE TABLE src AS SELECT i AS pid, 30 + (i % 3) * 10 AS age, {value} AS {name} FROM range(60) t(i)")
    before = c.execute("SELECT database_name, schema_name, table_name FROM duckdb_tables() ORDER BY ALL").fetchall()
    with pytest.raises(AnonSQLError, match=f"column '{name}' is of type .*VARIANT.*cast the column to JSON"):
        anon_sql.execute(c, "CREATE ANONYMIZED VIEW cv WITH (k = 5, method = 'levels', method_params = {'levels': "
                            "{'age': 0}}) AS SELECT identifier(pid), quasi(age, taxonomy => {'kind': 'top'}), "
                            f"insensitive({name}) FROM src")
    assert c.execute("SELECT database_name, schema_name, table_name FROM duckdb_tables() ORDER BY ALL").fetchall() == before


def test_the_bucketed_digest_is_the_one_sorted_listagg_over_every_bucket():
    """The digest query joins the sorted md5s in 256 buckets by their first two hex digits (issue 24.6: one ordered
    group ran on one thread): on a table whose distinct rows fill every bucket, it is the oracle's digest — the same
    text, not a tree of digests."""
    from anon_sql.runner.digests import content_digest_query

    with duckdb.connect() as c:
        c.execute("CREATE TABLE big AS SELECT 'v' || (range % 3000) AS a, range % 7 AS b, NULL::VARCHAR AS c "
                  "FROM range(9000)")
        types = {c_: t for c_, t, *_ in c.execute("DESCRIBE big").fetchall()}
        query = content_digest_query(exp.Table(this=exp.to_identifier("big")), list(types), types)
        assert c.execute(render(query)).fetchall()[0][0] == oracle_digest(c, "big")   # 9,000 distinct rows: every
        # one of the 256 buckets holds about 35 of them
