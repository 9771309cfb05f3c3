-- Masking functions as SQL macros (PostgreSQL Anonymizer's vocabulary), installed by anon_sql.sdc.masking.install_masking.
-- They are stored in the database file and run in any DuckDB client without Python. NULL in, NULL out.
-- Random macros draw from DuckDB's random() (per call, seeded only by SELECT setseed(x) for the session); each has a
-- seeded overload (..., seed, key) whose uniform draw is the first 52 bits of sha256(seed || chr(31) || key): the same
-- seed and key give the same value in every DuckDB version.
CREATE SCHEMA IF NOT EXISTS anon;

-- first keep_start characters || pad || last keep_end characters; a text shorter than keep_start + keep_end is
-- replaced by pad alone (nothing of it is kept). Written for speed (bench/bench_sdc_masking.py): one length() and one
-- concat() of two substr (left/right and a chain of || cost more in DuckDB 2.0). concat() skips NULLs, so a NULL text
-- is tested after the long-text branch (length(NULL) >= n is NULL, so it falls through); with constant parameters
-- the first branch folds away.
CREATE OR REPLACE MACRO anon.partial(txt, keep_start, pad, keep_end) AS
    CASE
        WHEN keep_start IS NULL OR keep_end IS NULL OR pad IS NULL THEN NULL
        WHEN length(CAST(txt AS VARCHAR)) >= greatest(keep_start, 0) + greatest(keep_end, 0)
            THEN concat(substr(CAST(txt AS VARCHAR), 1, greatest(keep_start, 0)), CAST(pad AS VARCHAR),
                        substr(CAST(txt AS VARCHAR), -greatest(keep_end, 0), greatest(keep_end, 0)))
        WHEN txt IS NULL THEN NULL
        ELSE CAST(pad AS VARCHAR)
    END;

-- the first character of the local part and the domain's top level: 'bruce.lee@enter.dragon.hk' -> 'b******@******.hk';
-- a value without '@' is not an email and keeps nothing: '******'. The top level is one regexp from the end: a '.'
-- followed by neither '.' nor '@' up to the end exists exactly when the domain (after the last '@') has a dot, and
-- regexp_extract gives '' when it does not (cheaper than split_part, which builds a list). '[.]', not a backslash:
-- Spark's SQL literals would eat it. NULL: strpos(NULL) = 0 is NULL, so NULL falls to the second branch.
CREATE OR REPLACE MACRO anon.partial_email(email) AS
    CASE
        WHEN strpos(CAST(email AS VARCHAR), '@') = 0 THEN '******'
        WHEN email IS NULL THEN NULL
        ELSE concat(substr(CAST(email AS VARCHAR), 1, least(strpos(CAST(email AS VARCHAR), '@') - 1, 1)),
                    '******@******', regexp_extract(CAST(email AS VARCHAR), '[.][^.@]*$', 0))
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
