-- scenario: wf._cron_check agrees with pg_cron's cron.schedule on every input
-- Every expression below (and 2000 generated ones) goes through both:
-- wf._cron_check, and cron.schedule in a subtransaction that is rolled
-- back.  wf._cron_check must never accept what pg_cron refuses (wf.schedule
-- would then fail inside cron.schedule), and where pg_cron accepts what
-- wf._cron_check refuses, the reason must be one that docs/schedules.md
-- lists ("Expressions pg_cron accepts and wfengine refuses").  The test runs
-- in the database where pg_cron runs its jobs (cron.database_name), as
-- 140_schedules does; without pg_cron there is nothing to compare.
SELECT current_setting('cron.database_name') AS cron_db \gset
\c :cron_db
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SELECT NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_cron') AS own_cron,
       NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'wfengine') AS own_wf \gset
\if :own_cron
CREATE EXTENSION pg_cron;
\endif
\if :own_wf
CREATE EXTENSION wfengine;
\endif
RESET client_min_messages;

-- the verdict of each: 'ok' or the SQLSTATE of the refusal
CREATE FUNCTION pg_temp.verdicts(e text, OUT wf text, OUT pg_cron text) LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        PERFORM wf._cron_check(e);
        wf := 'ok';
    EXCEPTION WHEN OTHERS THEN
        wf := SQLSTATE;
    END;
    BEGIN
        PERFORM cron.schedule('wfengine:agreement', e, 'SELECT 1');
        RAISE EXCEPTION USING ERRCODE = 'P0099';   -- undo the job
    EXCEPTION WHEN SQLSTATE 'P0099' THEN
        pg_cron := 'ok';
    WHEN OTHERS THEN
        pg_cron := SQLSTATE;
    END;
END
$$;

-- hand-picked inputs; reason: why pg_cron accepts it and wfengine does not
--   step       a step longer than the field (pg_cron 1.4 takes its first value, 1.6 refuses it)
--   backwards  a range that runs backwards (pg_cron selects nothing: the job never runs)
--   trailing   text after the fifth field or a shorthand (pg_cron ignores it)
--   junk       text after a value inside a field (pg_cron ignores the rest of the field)
--   never      no day ever matches (pg_cron keeps a job that never runs)
--   reboot     @reboot/@restart (no scheduled instant to key a run on)
CREATE TEMP TABLE inputs (expr text, reason text);
INSERT INTO inputs VALUES
  (E'* * * * *', NULL),
  (E'0 3 * * *', NULL),
  (E'  0 3 * * *  ', NULL),
  (E'0	3	*	*	*', NULL),
  (E'*/15 * * * *', NULL),
  (E'0-59/15 * * * *', NULL),
  (E'5-59/15 * * * *', NULL),
  (E'5/15 * * * *', NULL),
  (E'*/0 * * * *', NULL),
  (E'*/60 * * * *', 'step'),
  (E'*/59 * * * *', NULL),
  (E'*/100 * * * *', 'step'),
  (E'*/x * * * *', NULL),
  (E'1,,2 * * * *', NULL),
  (E'1, * * * *', NULL),
  (E',1 * * * *', NULL),
  (E'1,2,3 * * * *', NULL),
  (E'60 * * * *', NULL),
  (E'* 24 * * *', NULL),
  (E'* * 0 * *', NULL),
  (E'* * 32 * *', NULL),
  (E'* * * 0 *', NULL),
  (E'* * * 13 *', NULL),
  (E'* * * * 8', NULL),
  (E'* * * * 7', NULL),
  (E'* * * * 0', NULL),
  (E'* * * * sun', NULL),
  (E'* * * * SUN', NULL),
  (E'* * * * Sun', NULL),
  (E'* * * * mon-fri', NULL),
  (E'* * * * MON-FRI', NULL),
  (E'* * * * monday', NULL),
  (E'* * * jan *', NULL),
  (E'* * * JAN-dec *', NULL),
  (E'* * * january *', NULL),
  (E'* * * jan-mar/2 *', NULL),
  (E'* 5-2 * * *', 'backwards'),
  (E'* * * *', NULL),
  (E'* * * * * *', 'trailing'),
  (E'* * * * * foo', 'trailing'),
  (E'0 0 31 2,4 *', 'never'),
  (E'0 0 30 2 *', 'never'),
  (E'0 0 29 2 *', NULL),
  (E'@reboot', 'reboot'),
  (E'@restart', 'reboot'),
  (E'@yearly', NULL),
  (E'@annually', NULL),
  (E'@monthly', NULL),
  (E'@weekly', NULL),
  (E'@daily', NULL),
  (E'@midnight', NULL),
  (E'@hourly', NULL),
  (E'@DAILY', NULL),
  (E'@Daily', NULL),
  (E'@fortnightly', NULL),
  (E'@daily x', 'trailing'),
  (E'@ daily', NULL),
  (E'30 seconds', NULL),
  (E'1 second', NULL),
  (E'1 seconds', NULL),
  (E'59 seconds', NULL),
  (E'60 seconds', NULL),
  (E'0 seconds', NULL),
  (E'30 Seconds', NULL),
  (E'30seconds', NULL),
  (E'30 secs', NULL),
  (E'005 * * * *', NULL),
  (E'0000005 * * * *', NULL),
  (E'5; * * * *', 'junk'),
  (E'1-5-7 * * * *', 'junk'),
  (E'5x * * * *', NULL),
  (E'* * * * * ', NULL),
  (E'1-5/2 * * * *', NULL),
  (E'1-5/0 * * * *', NULL),
  (E'*/ * * * *', NULL),
  (E'1- * * * *', NULL),
  (E'-1 * * * *', NULL),
  (E' ', NULL),
  (E'#comment', NULL),
  (E'0 3 * * * # comment', 'trailing'),
  (E'*/5,10 * * * *', NULL),
  (E'*,5 * * * *', NULL),
  (E'*-5 * * * *', 'junk'),
  (E'**/5 * * * *', 'junk'),
  (E'0 0 1,15 * 1-5', NULL),
  (E'0 0 * * 7-7', NULL),
  (E'0 0 * * 6-7', NULL),
  (E'0 0 * * 0-7', NULL),
  (E'0 0 * * 5-0', 'backwards'),
  (E'1 2 3 4 5', NULL),
  (E'0 12 * * sat,sun', NULL),
  (E'0 12 * * sat-sun', 'backwards'),
  (E'0 12 * * fri-sun', 'backwards'),
  (E'0 0 1 feb-jan *', 'backwards'),
  (E'\r0 3 * * *', NULL),
  (E'\x0b0 3 * * *', NULL),
  (E'\n0 3 * * *', NULL),
  (E'\n\n  0 3 * * *', NULL),
  (E'\t\n0 3 * * *', NULL),
  (E'0 3 * * *\n', NULL),
  (E'0 3 * * *\r', NULL),
  (E'0 3 * * *\x0b\f', NULL),
  (E'0\x0b3 * * *', NULL),
  (E'0\n3 * * *', NULL),
  (E'0 3 * *\x0b *', 'junk'),
  (E'0 3 * *\n*', NULL),
  (E'@daily\r', NULL),
  (E'@daily\n', NULL),
  (E'@daily \r', NULL),
  (E'@daily\t', NULL),
  (E'\n@daily', NULL),
  (E'@daily\x0b', NULL),
  (E'\r30 seconds', NULL),
  (E'30 seconds\r', NULL),
  (E'0000000000000000030 seconds', NULL),
  (E'30 seconds x', NULL),
  (E'+30 seconds', NULL),
  (E'*/05 * * * *', NULL),
  (E'00-05 * * * *', NULL),
  (E'0 0 * * 00', NULL),
  ('', NULL),
  (repeat('0,', 495) || '0 * * * *', NULL),   -- 999 bytes
  (repeat('0,', 495) || '00 * * * *', NULL);  -- 1000 bytes

-- generated inputs: five fields of values, ranges, steps, lists and names,
-- a few out of range or malformed
SELECT setseed(0.145);
CREATE TEMP TABLE generated AS
SELECT DISTINCT (SELECT string_agg(
           (ARRAY['*', '*/' || (1 + floor(random() * 70))::int, (floor(random() * 62))::int::text,
                  (floor(random() * 30))::int || '-' || (floor(random() * 62))::int,
                  (floor(random() * 10))::int || '-' || (10 + floor(random() * 50))::int || '/' || (floor(random() * 9))::int,
                  (floor(random() * 24))::int || ',' || (floor(random() * 32))::int,
                  (ARRAY['jan', 'Feb', 'MAR', 'sun', 'mon', 'fri', 'sat', 'x', '7', '0'])[1 + floor(random() * 10)::int],
                  (ARRAY['mon-fri', 'jan-jun', '1,,2', '5/', '-', '1-', '?', 'L'])[1 + floor(random() * 8)::int]
                 ])[1 + floor(random() * random() * 8)::int],
           (ARRAY[' ', ' ', ' ', E'\t', '  '])[1 + floor(random() * 5)::int])
        FROM generate_series(1, CASE WHEN random() < 0.9 THEN 5 ELSE 4 + floor(random() * 3)::int END) f
        WHERE g > 0) AS expr
FROM generate_series(1, 2000) g;

CREATE TEMP TABLE verdicts AS
SELECT i.expr, i.reason, false AS generated, v.wf, v.pg_cron
FROM inputs i, pg_temp.verdicts(i.expr) v
UNION ALL
SELECT g.expr, NULL, true, v.wf, v.pg_cron
FROM generated g, pg_temp.verdicts(g.expr) v;

-- both sides have something to say: many inputs are accepted, many refused
SELECT generated, count(*) > 50 AS many,
       count(*) FILTER (WHERE wf = 'ok' AND pg_cron = 'ok') > 25 AS many_accepted,
       count(*) FILTER (WHERE wf <> 'ok' AND pg_cron <> 'ok') > 25 AS many_refused,
       count(*) FILTER (WHERE wf NOT IN ('ok', '22023')) AS other_errors
FROM verdicts GROUP BY generated ORDER BY generated;

-- wf._cron_check accepts nothing that pg_cron refuses (expected: no rows)
SELECT to_json(expr) AS expr, generated, pg_cron FROM verdicts
WHERE wf = 'ok' AND pg_cron <> 'ok' ORDER BY verdicts.expr;

-- what pg_cron accepts and wf._cron_check refuses has a listed reason
-- (expected: no rows; the generated inputs are checked below)
SELECT to_json(expr) AS expr FROM verdicts
WHERE NOT generated AND pg_cron = 'ok' AND wf <> 'ok' AND reason IS NULL ORDER BY verdicts.expr;
SELECT reason, count(*) AS inputs FROM verdicts
WHERE NOT generated AND pg_cron = 'ok' AND wf <> 'ok' GROUP BY reason ORDER BY reason;

-- generated inputs pg_cron accepts and wf._cron_check refuses fall under a
-- listed reason, recognised by its shape (expected: no rows)
SELECT to_json(expr) AS expr FROM verdicts
WHERE generated AND pg_cron = 'ok' AND wf <> 'ok'
  AND NOT (expr ~ '(^|[ \t,])[*0-9]+/([6-9][0-9]|[0-9]{3,})'                          -- step
           OR expr ~ '(\d+)-(\d+)' AND EXISTS (SELECT FROM regexp_matches(expr, '(\d+)-(\d+)', 'g') m
                                             WHERE m[1]::int > m[2]::int)               -- backwards
           OR array_length(regexp_split_to_array(btrim(expr, E' \t'), E'[ \t]+'), 1) > 5 -- trailing
           OR expr ~ '(,,|[0-9*][-/]?(?=[ \t]|$)|[0-9*]-[0-9]+-|\?|L|x|[0-9]/(?=[ \t,]|$))'  -- junk
           OR expr ~ '(^|[ \t])(3[01]|(3[01]|2[0-9]),[0-9,]*)[ \t]+2([ \t]|$)')            -- never
ORDER BY verdicts.expr;

-- the form "N seconds" follows the installed pg_cron (1.5 has it)
SELECT (SELECT extversion FROM pg_extension WHERE extname = 'pg_cron') ~ '^1\.[0-4]([^0-9]|$)' AS old_pg_cron,
       wf, pg_cron FROM verdicts WHERE expr = '30 seconds';

SET client_min_messages = warning;
\if :own_wf
DROP EXTENSION wfengine;
\endif
\if :own_cron
DROP EXTENSION pg_cron;
\endif
