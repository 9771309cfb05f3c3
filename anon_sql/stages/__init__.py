"""The stages of a release, one job each: resolve → plan → (compile: :mod:`anon_sql.compiler`) → materialize →
verify → (record: :mod:`anon_sql.catalog`). :mod:`anon_sql.release` strings them together."""
