-- anon_sql catalog: plain tables analysts can query. Idempotent (IF NOT EXISTS); loaded by anon_sql.install().
CREATE SCHEMA IF NOT EXISTS anon;

CREATE TABLE IF NOT EXISTS anon.taxonomies (
    name        VARCHAR PRIMARY KEY,
    kind        VARCHAR,
    height      INTEGER,
    leaves      INTEGER,
    spec        VARCHAR,          -- JSON of the builder spec (or file path)
    created_at  TIMESTAMP DEFAULT current_timestamp
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
