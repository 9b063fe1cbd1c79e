-- scenario: durations mean what PostgreSQL's interval input makes of them
-- wf._duration(text) is the C parser behind definitions and
-- wfengine.quarantine_delays.  Every duration in its canonical form (parts
-- in the order d, h, m, s, ms, each unit once, no "1." and no ".5" right
-- after a unit) is accepted by both, with the same value to the
-- microsecond, fractions and rounding included.  The other forms the C
-- parser accepts (kept so that published definitions stay valid) are
-- listed in docs/definitions.md "Durations"; interval refuses some of them,
-- and where it accepts one the value is the same too.
\set SHOW_CONTEXT never
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;

CREATE FUNCTION pg_temp.as_interval(s text) RETURNS interval LANGUAGE plpgsql AS $$
BEGIN
    RETURN s::interval;
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$$;

-- one to three parts of every unit order, numbers with and without
-- fractions, half microseconds, leading zeros, trailing points
SELECT setseed(0.146);
CREATE TEMP TABLE durations AS
WITH u(u) AS (VALUES ('d'), ('h'), ('m'), ('s'), ('ms')),
seqs AS (
    SELECT ARRAY[a.u] AS us FROM u a
    UNION ALL SELECT ARRAY[a.u, b.u] FROM u a, u b
    UNION ALL SELECT ARRAY[a.u, b.u, c.u] FROM u a, u b, u c),
nums(n) AS (VALUES (ARRAY['0', '1', '7', '30', '59', '1.5', '.25', '0.001', '1.0000005', '2.123456789',
                          '00012', '0.5', '3.0000015', '1.', '0.0000015', '366']))
SELECT DISTINCT (SELECT string_agg(n[1 + floor(random() * array_length(n, 1))::int] || x, '' ORDER BY o)
                 FROM unnest(us) WITH ORDINALITY t(x, o)) AS s
FROM seqs, nums, generate_series(1, 8) g
UNION
SELECT unnest(ARRAY['90s', '1h30m', '250ms', '2d', '7d', '1.5s', '.5s', '366d', '8784h', '527040m',
                    '31622400s', '31622400000ms', '1d2h3m4s5ms', '0.000001s', '0.0000005s', '0.0000006s',
                    '0.0005ms', '0.0006ms', '1.123456789s', '59.9999995s', '1.0000005m', '1.5d',
                    '000000000000000000000001s']);

CREATE TEMP TABLE verdicts AS
SELECT s, wf._duration(s) AS wf, pg_temp.as_interval(s) AS pg,
       -- canonical: units in decreasing order, each once; no "1." and no ".5" after a unit
       s ~ '^(([0-9]+(\.[0-9]+)?|\.[0-9]+)d)?(([0-9]+(\.[0-9]+)?|(?<![a-z])\.[0-9]+)h)?(([0-9]+(\.[0-9]+)?|(?<![a-z])\.[0-9]+)m(?!s))?(([0-9]+(\.[0-9]+)?|(?<![a-z])\.[0-9]+)s)?(([0-9]+(\.[0-9]+)?|(?<![a-z])\.[0-9]+)ms)?$'
           -- and interval takes no milliseconds after fractional seconds
           AND s !~ '\.[0-9]+s[0-9.]+ms$'
           AS canonical
FROM durations;

SELECT count(*) > 900 AS many,
       count(*) FILTER (WHERE canonical) > 100 AS many_canonical,
       count(*) FILTER (WHERE wf IS NULL) > 10 AS some_refused,
       count(*) FILTER (WHERE wf IS NOT NULL AND pg IS NOT NULL) > 200 AS many_both
FROM verdicts;

-- accepted by both: the same microseconds (expected: no rows)
SELECT s, wf, pg FROM verdicts
WHERE wf IS NOT NULL AND pg IS NOT NULL AND extract(epoch FROM wf) <> extract(epoch FROM pg)
ORDER BY s;

-- canonical and accepted by the C parser: interval accepts it (expected: no rows)
SELECT s, wf FROM verdicts WHERE canonical AND wf IS NOT NULL AND pg IS NULL ORDER BY s;

-- refused by the C parser and accepted by interval only when over 366 days
-- (expected: no rows)
SELECT s, pg FROM verdicts
WHERE wf IS NULL AND pg IS NOT NULL AND extract(epoch FROM pg) <= 366 * 86400
ORDER BY s;
SELECT count(*) FILTER (WHERE wf IS NULL AND pg IS NOT NULL) > 5 AS some_over_366_days FROM verdicts;

-- forms interval accepts and definitions do not, each refused by the C parser
SELECT s, pg_temp.as_interval(s) IS NOT NULL AS interval_accepts, wf._duration(s) AS wf
FROM unnest(ARRAY['1 h', '1H', '1 hour', '1 day 2 hours', '-5s', '+5s', '1mon', '1y', 'P1D', 'PT1H',
                  '01:30:00', '1.5', '90', '1us', '1min', '1e3s', '@ 1 hour ago', ' 5s', '5s ', '1h 30m', '.s']) s;
-- and forms both refuse
SELECT s, pg_temp.as_interval(s) IS NOT NULL AS interval_accepts, wf._duration(s) AS wf
FROM unnest(ARRAY['', 's', '1x', '0x10s', '1.5.5s', '1hh', '999999999999999999999s']) s;

DROP EXTENSION wfengine;
