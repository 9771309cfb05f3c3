-- The masking macros of session 10 (before the issue-26 rewrite), as former_partial / former_partial_email:
-- tests/sdc/test_sdc_masking_oracle.py pins the new bodies to their values, bench/bench_sdc_masking.py times both.
CREATE OR REPLACE MACRO former_partial(txt, keep_start, pad, keep_end) AS
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
CREATE OR REPLACE MACRO former_partial_email(email) AS
    CASE
        WHEN NOT contains(CAST(email AS VARCHAR), '@') THEN '******'
        ELSE left(CAST(email AS VARCHAR), least(strpos(CAST(email AS VARCHAR), '@') - 1, 1)) || '******@******'
             || CASE WHEN contains(split_part(CAST(email AS VARCHAR), '.', -1), '@') THEN ''
                     ELSE '.' || split_part(CAST(email AS VARCHAR), '.', -1) END
    END;
