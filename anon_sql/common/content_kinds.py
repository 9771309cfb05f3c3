"""The kinds of digest a release records of a table's rows (``released_values.content.kind``, and each related
table's in ``related_tables``): named here, apart from :mod:`anon_sql.runner.digests` which computes them, so that
``check``'s fast start (:mod:`anon_sql.audit.program`) reads a record without importing the compiler."""

# what a release records, at every size: the sha256 of the sorted md5s of the distinct rows, each with its count
# (one GROUP BY of the rows; no edit can be computed to keep it: hostile round 11, M24)
CONTENT_SHA256_COUNTED = "sha256 of sorted md5s of distinct rows with counts"
# session 14's kind (tables of up to a million rows): the sha256 of every row's md5 of its to_json text, which
# re-writes a JSON column (whitespace, escapes: hostile round 12, M25), so check refuses such a record
CONTENT_SHA256 = "sha256 of sorted row md5s"
# the sum of the rows' DuckDB hash (larger tables in session 14, and every record made before kinds were kept): rows
# can be computed to keep it (round 11, M24), so check refuses such a record too
CONTENT_HASH_SUM = "sum of row hashes"
# the kinds check recomputes
KINDS = (CONTENT_SHA256_COUNTED,)

__all__ = ["CONTENT_HASH_SUM", "CONTENT_SHA256", "CONTENT_SHA256_COUNTED", "KINDS"]
