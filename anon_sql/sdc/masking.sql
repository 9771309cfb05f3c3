-- Masking functions as SQL macros (PostgreSQL Anonymizer's vocabulary), installed by anon_sql.sdc.masking.install_masking.
-- They are stored in the database file and run in any DuckDB client without Python. NULL in, NULL out.
-- Random macros draw from DuckDB's random() (per call, seeded only by SELECT setseed(x) for the session); each has a
-- seeded overload (..., seed, key) whose uniform draw is the first 52 bits of sha256(seed || chr(31) || key): the same
-- seed and key give the same value in every DuckDB version.
CREATE SCHEMA IF NOT EXISTS anon;

-- first keep_start characters || pad || last keep_end characters; a text shorter than keep_start + keep_end is
-- replaced by pad alone (nothing of it is kept). Written for speed (bench/bench_sdc_masking.py): substr, not
-- left/right, and no CASE over the text — only the two counts depend on the row (0 for a short text: substr(t, 1, 0)
-- and substr(t, -0, 0) are ''); substr and || propagate NULL.
CREATE OR REPLACE MACRO anon.partial(txt, keep_start, pad, keep_end) AS
    substr(CAST(txt AS VARCHAR), 1,
           CASE WHEN keep_start IS NULL OR keep_end IS NULL THEN NULL
                WHEN length(CAST(txt AS VARCHAR)) < greatest(keep_start, 0) + greatest(keep_end, 0) THEN 0
                ELSE greatest(keep_start, 0) END)
    || CAST(pad AS VARCHAR)
    || substr(CAST(txt AS VARCHAR),
              -CASE WHEN keep_start IS NULL OR keep_end IS NULL THEN NULL
                    WHEN length(CAST(txt AS VARCHAR)) < greatest(keep_start, 0) + greatest(keep_end, 0) THEN 0
                    ELSE greatest(keep_end, 0) END,
              CASE WHEN keep_start IS NULL OR keep_end IS NULL THEN NULL
                   WHEN length(CAST(txt AS VARCHAR)) < greatest(keep_start, 0) + greatest(keep_end, 0) THEN 0
                   ELSE greatest(keep_end, 0) END);

-- the first character of the local part and the domain's top level: 'bruce.lee@enter.dragon.hk' -> 'b******@******.hk';
-- a value without '@' is not an email and keeps nothing: '******'. Without split_part on '@': the text after the
-- last '.' is the top level exactly when it holds no '@' (the domain has a dot); NULL propagates through contains.
CREATE OR REPLACE MACRO anon.partial_email(email) AS
    CASE
        WHEN NOT contains(CAST(email AS VARCHAR), '@') THEN '******'
        ELSE left(CAST(email AS VARCHAR), least(strpos(CAST(email AS VARCHAR), '@') - 1, 1)) || '******@******'
             || CASE WHEN contains(split_part(CAST(email AS VARCHAR), '.', -1), '@') THEN ''
                     ELSE '.' || split_part(CAST(email AS VARCHAR), '.', -1) END
    END;

-- a constant that hides the value and its length
CREATE OR REPLACE MACRO anon.redact(txt) AS
    CASE WHEN txt IS NULL THEN NULL ELSE '[REDACTED]' END,
    (txt, replacement) AS
    CASE WHEN txt IS NULL THEN NULL ELSE CAST(replacement AS VARCHAR) END;

-- sha256 (hex) of salt || text: a keyed pseudonym; the salt must stay secret (without it small domains are guessable)
CREATE OR REPLACE MACRO anon.hash(txt, salt) AS
    sha256(CAST(salt AS VARCHAR) || CAST(txt AS VARCHAR));

-- x times a uniform factor in [1 - ratio, 1 + ratio]
CREATE OR REPLACE MACRO anon.noise(x, ratio) AS
    x * (1 + ratio * (2 * random() - 1)),
    (x, ratio, seed, key) AS
    x * (1 + ratio * (2 * (CAST(('0x' || left(sha256(CAST(seed AS VARCHAR) || chr(31)
        || coalesce(CAST(key AS VARCHAR), '')), 13)) AS BIGINT) / 4503599627370496.0) - 1));

-- a date or timestamp shifted by a uniform offset in [-iv, +iv] (microsecond resolution; a DATE comes back as a
-- TIMESTAMP: cast it back with CAST(... AS DATE))
CREATE OR REPLACE MACRO anon.dnoise(d, iv) AS
    d + to_microseconds(CAST((2 * random() - 1) * epoch(iv) * 1000000 AS BIGINT)),
    (d, iv, seed, key) AS
    d + to_microseconds(CAST((2 * (CAST(('0x' || left(sha256(CAST(seed AS VARCHAR) || chr(31)
        || coalesce(CAST(key AS VARCHAR), '')), 13)) AS BIGINT) / 4503599627370496.0) - 1)
        * epoch(iv) * 1000000 AS BIGINT));
