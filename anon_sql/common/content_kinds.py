"""The kinds of digest a release records of a table's rows (``released_values.content.kind``, and each related
table's in ``related_tables``): named here, apart from :mod:`anon_sql.runner.digests` which computes them, so that
``check``'s fast start (:mod:`anon_sql.audit.program`) reads a record without importing the compiler."""

# the sha256 of the sorted md5s of the rows: no edit can be computed to keep it (hostile round 10, B40)
CONTENT_SHA256 = "sha256 of sorted row md5s"
# the sum of the rows' DuckDB hash (above the sha256 digest's row cap, and every record made before kinds were kept):
# one scan; it catches edits, not a forger
CONTENT_HASH_SUM = "sum of row hashes"
KINDS = (CONTENT_SHA256, CONTENT_HASH_SUM)
# up to this many rows a release records the sha256 digest; a hash-sum record of a table this small is refused by
# check (hostile round 11, M24: the forgeable kind written into a record, or left from before sha256 digests)
CONTENT_MAX_ROWS = 1_000_000

__all__ = ["CONTENT_HASH_SUM", "CONTENT_MAX_ROWS", "CONTENT_SHA256", "KINDS"]
