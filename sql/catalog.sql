-- anon_sql catalog: plain tables analysts can query. Idempotent (IF NOT EXISTS); loaded by anon_sql.install().
CREATE SCHEMA IF NOT EXISTS anon;

CREATE TABLE IF NOT EXISTS anon.taxonomies (
    name        VARCHAR PRIMARY KEY,
    kind        VARCHAR,
    height      INTEGER,
    leaves      INTEGER,
    spec        VARCHAR,          -- JSON of the builder spec (or file path)
    created_at  TIMESTAMP DEFAULT current_timestamp,
    marker      VARCHAR           -- anon_sql's random marker (issue 28.1), recorded in anon.owned_objects
);

CREATE TABLE IF NOT EXISTS anon.taxonomy_nodes (
    taxonomy    VARCHAR,
    leaf        VARCHAR,
    level       INTEGER,
    value       VARCHAR           -- the ancestor of leaf at level (level 0: the leaf itself)
);

CREATE TABLE IF NOT EXISTS anon.policies (
    name        VARCHAR PRIMARY KEY,
    policy_toml VARCHAR,
    policy_json VARCHAR,
    updated_at  TIMESTAMP DEFAULT current_timestamp
);

CREATE TABLE IF NOT EXISTS anon.releases (
    release         VARCHAR,
    policy          VARCHAR,
    method          VARCHAR,
    source          VARCHAR,
    records_in      BIGINT,
    records_out     BIGINT,
    suppressed      BIGINT,
    noise           BIGINT,
    k_achieved      BIGINT,
    classes         BIGINT,
    status          VARCHAR,      -- released | failed
    message         VARCHAR,
    plan            VARCHAR,      -- JSON
    policy_json     VARCHAR,
    generated_sql   VARCHAR,
    created_at      TIMESTAMP DEFAULT current_timestamp
);

CREATE TABLE IF NOT EXISTS anon.equivalence_classes (
    release     VARCHAR,
    ec_id       BIGINT,
    size        BIGINT,
    qi_values   VARCHAR,          -- JSON object: quasi-identifier -> released value
    stats       VARCHAR           -- JSON object: per-class statistics (distinct/entropy/Simpson/θ per sensitive attribute)
);

CREATE TABLE IF NOT EXISTS anon.metrics (
    release     VARCHAR,
    metric      VARCHAR,
    value       DOUBLE,
    direction   VARCHAR           -- lower | higher (is better) | info
);

CREATE TABLE IF NOT EXISTS anon.search_trace (
    release     VARCHAR,
    step        INTEGER,
    node        VARCHAR,          -- JSON level vector
    event       VARCHAR,          -- generated | evaluated | expanded | chosen
    violations  BIGINT,
    distinct_rows BIGINT,
    feasible    BOOLEAN,
    score       DOUBLE
);

-- identity vulnerability of quasi-identifiers (seed 002): written by `anon-sql analyze --vulnerability --store` and
-- by method "adaptive" (iv = "computed"); one current estimate per (source, target, quasi set)
CREATE TABLE IF NOT EXISTS anon.identity_vulnerability (
    source          VARCHAR,      -- the table analysed
    target          VARCHAR,      -- the sensitive attribute the random forest predicts
    quasi           VARCHAR,      -- JSON list of the forest's quasi-identifiers, sorted (the IV depends on the set)
    attribute       VARCHAR,
    iv              DOUBLE,       -- importance clamped at 0, normalized to sum 1
    importance      DOUBLE,       -- mean increase of the held-out error when the attribute is permuted
    importance_std  DOUBLE,
    relative        DOUBLE,       -- importance / std
    oob_score       DOUBLE,       -- out-of-bag accuracy (classification) or R² (regression)
    seed            INTEGER,
    n_estimators    INTEGER,
    created_at      TIMESTAMP DEFAULT current_timestamp
);

-- one row per version of an anonymized view: created, replaced or refreshed (anon_sql.views / REFRESH ANONYMIZED VIEW).
-- policy_json is the policy as declared (REFRESH re-runs it); plan is the plan that made this version.
-- rows_* compare the released rows (ec_id aside) with the previous version, classes_* its classes by released
-- quasi-identifier values; NULL where there was nothing to compare with.
CREATE TABLE IF NOT EXISTS anon.release_versions (
    release         VARCHAR,
    version         INTEGER,
    action          VARCHAR,      -- create | replace | refresh | refresh keep plan
    method          VARCHAR,      -- the method that made this version (levels for KEEP PLAN)
    plan            VARCHAR,      -- JSON
    policy_json     VARCHAR,      -- the declared policy
    records_in      BIGINT,
    records_out     BIGINT,
    suppressed      BIGINT,
    classes         BIGINT,
    k_achieved      BIGINT,
    plan_changed    BOOLEAN,
    rows_added      BIGINT,
    rows_removed    BIGINT,
    classes_added   BIGINT,
    classes_removed BIGINT,
    classes_resized BIGINT,
    created_at      TIMESTAMP DEFAULT current_timestamp
);

-- what anon_sql wrote, by identity (issue 28.1): a table is the release's own only while its comment is `marker`
-- (COMMENT ON TABLE, a random token) and its columns are those `fingerprint` digests; a user's table of the same
-- name never matches, so replace, refresh and drop refuse it
CREATE TABLE IF NOT EXISTS anon.owned_objects (
    release         VARCHAR,
    schema_name     VARCHAR,      -- NULL: the schema the release was created in (the connection's current one)
    object          VARCHAR,
    marker          VARCHAR,
    fingerprint     VARCHAR,      -- sha256 of the columns' names and types, in order
    created_at      TIMESTAMP DEFAULT current_timestamp
);

-- the digest of every taxonomy a release used (JSON: quasi-identifier -> {taxonomy, digest}; issue 28.3): KEEP PLAN
-- refuses when a digest no longer matches, and plan_changed is true when they differ between versions
ALTER TABLE anon.releases ADD COLUMN IF NOT EXISTS taxonomy_digests VARCHAR;
ALTER TABLE anon.release_versions ADD COLUMN IF NOT EXISTS taxonomy_digests VARCHAR;

-- the policy as the user declared it (issue 28.8: `check` derives the released policy_json from it and the method,
-- so a QI turned insensitive by the method is still checked as a QI), and the source's digest at release
-- (JSON: rows, an order-independent content hash, the columns hashed, DuckDB's version)
ALTER TABLE anon.releases ADD COLUMN IF NOT EXISTS declared_policy VARCHAR;
ALTER TABLE anon.releases ADD COLUMN IF NOT EXISTS source_digest VARCHAR;
-- each related table as released (docs/units.md): its columns with their types and its rows, which check compares
ALTER TABLE anon.releases ADD COLUMN IF NOT EXISTS related_tables VARCHAR;
-- the digest of each quasi-identifier's released values with their rows (JSON: column -> sha256; hostile round 9,
-- M9): check recomputes it, so a value put back or changed since the release fails even where every class keeps its size
ALTER TABLE anon.releases ADD COLUMN IF NOT EXISTS released_values VARCHAR;

-- the version of the anonymized view whose search a trace row belongs to (anon.release_versions; hostile round 5,
-- R11: a refresh kept no earlier search): NULL until a version row numbers it; a new release of the name replaces
-- only its unnumbered rows, so every version keeps the search that made it
ALTER TABLE anon.search_trace ADD COLUMN IF NOT EXISTS version INTEGER;
