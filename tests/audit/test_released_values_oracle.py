"""The released-values digest (`values <column>` and the combination, hostile round 9, M9) against a Python oracle
on generated tables: NULLs, separators and digits inside values, empty tables, one to three columns. The query was
rewritten in session 15 (one GROUP BY over the spread rows instead of a subquery per digest: 56 → 12 ms on Adult);
the digests recorded before must still verify, so the oracle is the recorded formula itself."""
from __future__ import annotations

import hashlib

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from anon_sql.common.sqlbuild import render
from anon_sql.runner.digests import released_values_query

VALUES = st.one_of(st.none(), st.text(alphabet="ab1:\x1e\x1fNUL", max_size=4))


def text(v: str | None) -> str:
    return "NULL" if v is None else f"{len(v)}:{v}"


def digest(keys: list[tuple]) -> str:
    """sha256 of the sorted ``text…<US>rows`` items joined by <RS>, rows counted per distinct key."""
    counts: dict[tuple, int] = {}
    for k in keys:
        counts[k] = counts.get(k, 0) + 1
    items = sorted(f"{''.join(map(text, k))}\x1f{n}" for k, n in counts.items())
    return hashlib.sha256("\x1e".join(items).encode()).hexdigest()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(width=st.integers(1, 3), rows=st.lists(st.tuples(VALUES, VALUES, VALUES), max_size=25))
def test_the_digests_are_the_recorded_formula(width, rows):
    columns = ["b", "q1", "n"][:width]   # `q1` and `n`: names the query's own aliases use
    c = duckdb.connect()
    c.execute("CREATE TABLE t (" + ", ".join(f'"{x}" VARCHAR' for x in columns) + ")")
    if rows:
        c.executemany("INSERT INTO t VALUES (" + ", ".join("?" for _ in columns) + ")", [r[:width] for r in rows])
    found = c.execute(render(released_values_query(exp.Table(this=exp.to_identifier("t")), columns))).fetchall()[0]
    kept = [r[:width] for r in rows]
    wanted = [digest([(r[i],) for r in kept]) for i in range(width)]
    if width > 1:
        wanted.append(digest(kept))
    assert list(found) == wanted
