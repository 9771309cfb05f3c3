-- anon_sql diversity macros (schema anon): the formulas of udfs/kernels.py as DuckDB SQL macros.
-- They persist in the database file and need no Python. Install with anon_sql.udfs.duckdb_udfs.install_macros(con)
-- (which creates the schema first) or run this file after CREATE SCHEMA IF NOT EXISTS anon.
-- c = list of per-value counts (any numeric list, cast to DOUBLE[]; counts <= 0 are ignored); l = list of raw values, where NULL elements count as one
-- value of their own (each element is wrapped in a struct before counting: DuckDB's list functions drop NULLs).
-- NULL lists and empty value lists give NULL. Lambdas use the DuckDB 2.0 syntax `lambda x: ...`;
-- `list_transform([e], lambda _f: ...)[1]` binds e once (a "let"). Lambda parameters start with an underscore so
-- they do not capture columns of the caller's arguments. Every statement ends with ';' at the end of a line.

-- per-value counts of a list, NULL counted as a value
CREATE OR REPLACE MACRO anon.value_counts(l) AS
    map_values(list_aggregate(list_transform(l, lambda _v: {'v': _v}), 'histogram'));

-- Shannon entropy in nats: -Σ p ln p (entropy l-diversity = exp of it)
CREATE OR REPLACE MACRO anon.entropy_counts(c) AS
    list_transform([list_filter(c::DOUBLE[], lambda _n: _n > 0)], lambda _f:
        list_transform([list_sum(_f)::DOUBLE], lambda _m:
            -list_sum(list_transform(_f, lambda _n: (_n / _m) * ln(_n / _m))))[1])[1];

CREATE OR REPLACE MACRO anon.entropy(l) AS
    anon.entropy_counts(anon.value_counts(l));

-- Simpson diversity D = 1 / Σ p²
CREATE OR REPLACE MACRO anon.simpson_diversity_counts(c) AS
    list_transform([list_filter(c::DOUBLE[], lambda _n: _n > 0)], lambda _f:
        list_transform([list_sum(_f)::DOUBLE], lambda _m:
            1.0 / list_sum(list_transform(_f, lambda _n: (_n / _m) * (_n / _m))))[1])[1];

CREATE OR REPLACE MACRO anon.simpson_diversity(l) AS
    anon.simpson_diversity_counts(anon.value_counts(l));

-- Simpson evenness E = D / #distinct
CREATE OR REPLACE MACRO anon.simpson_evenness_counts(c) AS
    list_transform([list_filter(c::DOUBLE[], lambda _n: _n > 0)], lambda _f:
        anon.simpson_diversity_counts(_f) / len(_f))[1];

CREATE OR REPLACE MACRO anon.simpson_evenness(l) AS
    anon.simpson_evenness_counts(anon.value_counts(l));

-- θ-sensitivity variance: the values ranked by descending frequency get weights x = 1, 2, ...;
-- σ² = Σ f x² / m − (Σ f x / m)²  (ties in frequency do not change it)
CREATE OR REPLACE MACRO anon.theta_variance_counts(c) AS
    list_transform([list_sort(list_filter(c::DOUBLE[], lambda _n: _n > 0), 'DESC')], lambda _f:
        list_transform([list_sum(_f)::DOUBLE], lambda _m:
            list_sum(list_transform(_f, lambda _n, _x: _n * _x * _x)) / _m
            - pow(list_sum(list_transform(_f, lambda _n, _x: _n * _x)) / _m, 2))[1])[1];

CREATE OR REPLACE MACRO anon.theta_variance(l) AS
    anon.theta_variance_counts(anon.value_counts(l));

-- σ² of a fully diverse class of m records, (m² − 1) / 12, and the threshold θ(m) = μ (m² − 1) / 12
CREATE OR REPLACE MACRO anon.theta_full(m) AS
    (m::DOUBLE * m::DOUBLE - 1.0) / 12.0;

CREATE OR REPLACE MACRO anon.theta_threshold(m, mu) AS
    mu::DOUBLE * anon.theta_full(m);

-- σ² >= θ(m) with a 1e-9 tolerance, m = Σ counts (for a value list: its length, NULL elements included)
CREATE OR REPLACE MACRO anon.theta_ok_counts(c, mu) AS
    list_transform([list_filter(c::DOUBLE[], lambda _n: _n > 0)], lambda _f:
        anon.theta_variance_counts(_f) >= anon.theta_threshold(list_sum(_f), mu) - 1e-9)[1];

CREATE OR REPLACE MACRO anon.theta_ok(l, mu) AS
    anon.theta_ok_counts(anon.value_counts(l), mu);

-- recursive (cc, l)-diversity: r1 < cc · (r_l + r_{l+1} + ...), r_i the i-th largest count; false with < l values
CREATE OR REPLACE MACRO anon.recursive_l_ok_counts(c, cc, l) AS
    list_transform([list_sort(list_filter(c::DOUBLE[], lambda _n: _n > 0), 'DESC')], lambda _f:
        CASE WHEN len(_f) < l THEN false
             ELSE _f[1] < cc * coalesce(list_sum(_f[l:]), 0.0) END)[1];

CREATE OR REPLACE MACRO anon.recursive_l_ok(vals, cc, l) AS
    anon.recursive_l_ok_counts(anon.value_counts(vals), cc, l);

-- ---------------------------------------------------------------------------------------------------------------
-- Table measures of any table from plain SQL (docs/assess.md; the numpy forms are udfs/risk_kernels.py):
--   SELECT * FROM anon.k_anonymity('adult', ['age', 'sex']);
-- tbl = a table or view name (query_table); qi = a list of column names; s = a list with the sensitive column.
-- NULL is a value of its own in every column (GROUP BY groups NULLs together).

-- records per equivalence class: the QI columns and size (one row per class)
CREATE OR REPLACE MACRO anon.class_sizes(tbl, qi) AS TABLE
    SELECT COLUMNS(qi), count(*) AS size FROM query_table(tbl) GROUP BY ALL;

-- k = the smallest class, with the number of classes and records
CREATE OR REPLACE MACRO anon.k_anonymity(tbl, qi) AS TABLE
    SELECT min(size) AS k, count(*) AS classes, sum(size) AS records FROM anon.class_sizes(tbl, qi);

-- distinct and entropy l-diversity of the sensitive column s (a one-element list)
CREATE OR REPLACE MACRO anon.l_diversity(tbl, qi, s) AS TABLE
    SELECT min(l_distinct) AS l_distinct, min(exp(anon.entropy_counts(counts))) AS l_entropy FROM (
        SELECT COLUMNS(qi), count(*) AS l_distinct, list(c) AS counts FROM (
            SELECT COLUMNS(qi), COLUMNS(s), count(*) AS c FROM query_table(tbl) GROUP BY ALL)
        GROUP BY ALL);

-- share of records alone in their class, and their number
CREATE OR REPLACE MACRO anon.sample_uniques(tbl, qi) AS TABLE
    SELECT coalesce(sum(size) FILTER (WHERE size = 1), 0) / sum(size) AS sample_uniques,
           coalesce(sum(size) FILTER (WHERE size = 1), 0) AS unique_records
    FROM anon.class_sizes(tbl, qi);

-- prosecutor risk: highest 1/min|E|, lowest 1/max|E|, average over records #E/n, average over classes mean 1/|E|,
-- and the share of records whose risk 1/|E| exceeds the threshold
CREATE OR REPLACE MACRO anon.prosecutor_risk(tbl, qi, threshold := 0.2) AS TABLE
    SELECT 1.0 / min(size) AS highest, 1.0 / max(size) AS lowest, count(*) / sum(size) AS avg_records,
           avg(1.0 / size) AS avg_classes,
           coalesce(sum(size) FILTER (WHERE 1.0 / size > threshold), 0) / sum(size) AS records_at_risk
    FROM anon.class_sizes(tbl, qi);

-- (α, k)-anonymity: the largest share of one sensitive value in a class, from its per-value counts
CREATE OR REPLACE MACRO anon.alpha_counts(c) AS
    list_transform([list_filter(c::DOUBLE[], lambda _n: _n > 0)], lambda _f: list_max(_f) / list_sum(_f))[1];

-- Σ_v min(c_v, cap): the records a class can give when each value fills at most `cap` slots (θ's split guides)
CREATE OR REPLACE MACRO anon.capped_sum(c, cap) AS
    list_sum(list_transform(c, lambda _x: least(_x, cap)));

-- ---------------------------------------------------------------------------------------------------------------
-- Utility formulas (the numpy forms are udfs/utility.py; cross-tested in tests/udfs/test_kernels.py).

-- NCP of a numeric released value: width / span of the attribute's domain, at most 1 (a NaN, NULL or −∞ ratio counts
-- 0); 1 where NULL and numbers mix (the value is released as `*`); `flat` when the domain has no width
CREATE OR REPLACE MACRO anon.ncp_numeric(width, span, mixed := false, flat := 0.0) AS
    CASE WHEN mixed THEN 1.0
         WHEN span::DOUBLE > 0 AND NOT isnan(span::DOUBLE) THEN
             CASE WHEN isfinite(least(width::DOUBLE / span::DOUBLE, 1.0)) AND NOT isnan(width::DOUBLE / span::DOUBLE)
                  THEN least(width::DOUBLE / span::DOUBLE, 1.0) ELSE 0.0 END
         ELSE flat::DOUBLE END;

-- NCP of a categorical released value: (leaves it covers − 1) / (leaves of the domain − 1); 0 for a one-leaf domain
CREATE OR REPLACE MACRO anon.ncp_categorical(leaves, total_leaves) AS
    CASE WHEN total_leaves > 1 THEN (leaves::DOUBLE - 1.0) / (total_leaves::DOUBLE - 1.0) ELSE 0.0 END;

-- discernibility (ARX's DM): Σ |EC|² over the released class sizes + records_in · suppressed
CREATE OR REPLACE MACRO anon.discernibility_sizes(sizes, records_in, suppressed) AS
    coalesce(list_sum(list_transform(sizes::DOUBLE[], lambda _s: _s * _s)), 0.0)
    + records_in::DOUBLE * suppressed::DOUBLE;

-- C_AVG = (released records / classes) / k; `empty` when there is no class
CREATE OR REPLACE MACRO anon.cavg(released, classes, k, empty := CAST('NaN' AS DOUBLE)) AS
    CASE WHEN classes <> 0 THEN released::DOUBLE / classes / k ELSE empty::DOUBLE END;

-- discernibility of any table: Σ |E|² over its classes (nothing suppressed)
CREATE OR REPLACE MACRO anon.discernibility(tbl, qi) AS TABLE
    SELECT anon.discernibility_sizes(list(size), sum(size), 0) AS discernibility, count(*) AS classes,
           sum(size) AS records
    FROM anon.class_sizes(tbl, qi);

-- ---------------------------------------------------------------------------------------------------------------
-- slicing's partitioning guide (models/slicing.py SlicingGuide): p = a bucket's rows as a list of {x, s, w} — x the
-- row's (C_c − {S}) value (a struct), s its sensitive value, w its records. Per distinct x: the largest record count
-- of one s (top) and all records (total); NULL is a value of its own (compared with IS NOT DISTINCT FROM)
CREATE OR REPLACE MACRO anon.slicing_guide_parts(p) AS
    list_transform(list_distinct(list_transform(p, lambda _r: {'x': _r.x})), lambda _g:
        list_transform([list_filter(p, lambda _r: {'x': _r.x} IS NOT DISTINCT FROM _g)], lambda _in:
            {'top': list_max(list_transform(list_distinct(list_transform(_in, lambda _r: {'s': _r.s})), lambda _h:
                        list_sum(list_transform(list_filter(_in, lambda _r: {'s': _r.s} IS NOT DISTINCT FROM _h),
                                                lambda _r: _r.w::DOUBLE)))),
             'total': list_sum(list_transform(_in, lambda _r: _r.w::DOUBLE))})[1]);

-- the guide's value: the largest share one sensitive value holds among tuples sharing an x (NULL for no rows)
CREATE OR REPLACE MACRO anon.slicing_guide_share(p) AS
    list_max(list_transform(anon.slicing_guide_parts(p), lambda _t: _t.top / _t.total));

-- the guide holds: top · l <= total (1 + 1e-12) for every x (true for no rows)
CREATE OR REPLACE MACRO anon.slicing_guide_ok(p, l) AS
    coalesce(list_bool_and(list_transform(anon.slicing_guide_parts(p),
                                          lambda _t: _t.top * l <= _t.total * (1 + 1e-12))), true);
