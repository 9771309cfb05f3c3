"""SQL built once per plan shape (issue 17.1): a taxonomy level's VALUES list and ENUM domain are rendered once per
taxonomy *content* and reused — a changed taxonomy of the same name gets its own, and releases made from a warm
cache release the values the taxonomy says."""
from __future__ import annotations

import anon_sql
from anon_sql.data.taxonomy import from_arx_text


def _policy(parents: str, name: str = "r") -> dict:
    mapping = {v: [p] for v, p in zip("abc", parents.split(","))}
    return {"name": name, "source": "t", "method": "levels",
            "attributes": {"x": {"role": "quasi", "taxonomy": {"kind": "mapping", "mapping": mapping}},
                           "id": {"role": "insensitive"}},
            "privacy": {"k": 1}, "method_params": {"levels": {"x": 1}}}


def test_rendered_level_maps_follow_the_taxonomy_content(con):
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('a', 1), ('b', 2), ('c', 3), ('a', 4)) v(x, id)")
    first = anon_sql.compile(_policy("G1,G1,G2"))
    assert anon_sql.compile(_policy("G1,G1,G2")) == first            # warm: the same text
    other = anon_sql.compile(_policy("G1,G2,G2"))                    # same name, other content: other SQL
    assert other != first
    for parents, release in (("G1,G1,G2", "r1"), ("G1,G2,G2", "r2"), ("G1,G1,G2", "r3")):
        anon_sql.release(con, _policy(parents, release))
        got = dict(con.execute(f'SELECT id, CAST(x AS VARCHAR) FROM "{release}"').fetchall())
        want = dict(zip("abc", parents.split(",")))
        assert got == {1: want["a"], 2: want["b"], 3: want["c"], 4: want["a"]}, release


def test_fingerprint_is_content_not_name():
    a = from_arx_text("a;G1;*\nb;G1;*\n", "one")
    b = from_arx_text("a;G1;*\nb;G1;*\n", "two")
    c = from_arx_text("a;G1;*\nb;G2;*\n", "one")
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
    assert a.copy().fingerprint() == a.fingerprint()
