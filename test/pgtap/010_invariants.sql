-- test/pgtap/010_invariants.sql
--
-- Invariants of the engine over many runs driven through every path:
-- completions, retryable failures, non-retryable failures (by flag and by
-- error code), retries exhausted, duplicate reports, leases that expire
-- and are re-claimed (late reports of the old worker are stale), and
-- workers that vanish.  After the drive, the stored state must satisfy:
--
--   * every run is finished, and the verdicts were the expected ones;
--   * events are gap-free per run (seq = 1..n) and runs.seq = max(seq);
--   * wf.verify_run is true for every run;
--   * no step visit has two accepted results;
--   * at most one live attempt per step, none for a finished run;
--   * a finished run has exactly one run_completed/run_failed event, and
--     it is its last event apart from recorded (duplicate/stale) results;
--   * the idempotency key of a step is the same for all its attempts and
--     deliveries;
--   * wf.events refuses UPDATE, DELETE and TRUNCATE;
--   * wf.verify_run detects a changed payload, a removed last event,
--     reordered events, a changed snapshot and a stray live task.
--
-- Leases are expired by moving the task row's lease into the past (as
-- superuser), except in one section that uses a real 1 ms lease.
-- Everything happens inside one transaction that is rolled back.

\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
SET LOCAL client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS wfengine;

-- quarantine of poison tasks is tested in sql/100_timers.sql; here leases
-- are lost at random and must simply be redelivered
SET LOCAL wfengine.poison_threshold = 0;
SELECT plan(51);

-- ---------------------------------------------------------------------
-- definitions
-- ---------------------------------------------------------------------
-- three steps, each with a retry policy; "bad" is a non-retryable code
SELECT wf.publish_definition('inv_three', $${
  "steps": [
    {"name": "a", "queue": "inv_q", "input": {"i": "$.input.i"},
     "retry": {"max_attempts": 3, "initial_interval": "1ms", "backoff_coefficient": 2,
               "max_interval": "4ms", "jitter": 0.5, "non_retryable_errors": ["bad"]}},
    {"name": "b", "queue": "inv_q", "input": {"from_a": "$.steps.a.output.v"},
     "retry": {"max_attempts": 2, "initial_interval": "1ms", "non_retryable_errors": ["bad"]}},
    {"name": "c", "queue": "inv_q", "activity": "finish",
     "retry": {"max_attempts": 4, "initial_interval": "1ms", "max_interval": "2ms"}}
  ]}$$) AS inv_three \gset
-- two steps with an output mapping, default retry policy (1 s backoff:
-- retries are brought forward by the driver) apart from the "bad" code
SELECT wf.publish_definition('inv_two', $${
  "steps": [
    {"name": "x", "queue": "inv_q", "retry": {"non_retryable_errors": ["bad"]}},
    {"name": "y", "queue": "inv_q", "input": {"x": "$.steps.x.output"}}
  ],
  "output": {"x": "$.steps.x.output.v", "y": "$.steps.y.output.v"}}$$) AS inv_two \gset
-- one step, one attempt
SELECT wf.publish_definition('inv_one', $${
  "steps": [{"name": "only", "queue": "inv_q", "retry": {"max_attempts": 1, "non_retryable_errors": ["bad"]}}]}$$) AS inv_one \gset

-- ---------------------------------------------------------------------
-- the driver
-- ---------------------------------------------------------------------
CREATE TEMP TABLE inv_runs (run_id uuid PRIMARY KEY, i integer NOT NULL, key text);
CREATE TEMP TABLE inv_claims (task_id bigint, run_id uuid, step text, attempt integer,
                              fence bigint, idempotency_key text, deliveries integer);
CREATE TEMP TABLE inv_reports (n serial, task_id bigint, fence bigint, kind text,
                               expected text, got text);
CREATE TEMP TABLE inv_reclaims (task_id bigint, old_fence bigint, new_task_id bigint,
                                new_fence bigint, old_attempt integer, new_attempt integer);

-- report: send one report and log its verdict next to the expected one
CREATE FUNCTION pg_temp.report(p_task bigint, p_fence bigint, p_kind text, p_expected text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v text;
BEGIN
    v := CASE p_kind
        WHEN 'complete' THEN wf.complete_task(p_task, p_fence, jsonb_build_object('v', p_task * 10 + p_fence))
        WHEN 'fail' THEN wf.fail_task(p_task, p_fence, '{"code": "transient"}', true)
        WHEN 'fail_final' THEN wf.fail_task(p_task, p_fence, '{"code": "fatal"}', false)
        WHEN 'fail_bad' THEN wf.fail_task(p_task, p_fence, '{"code": "bad"}', true)
    END;
    INSERT INTO inv_reports (task_id, fence, kind, expected, got)
    VALUES (p_task, p_fence, p_kind, p_expected, v);
    RETURN v;
END
$$;

DO $$
DECLARE
    c record;
    c2 record;
    r float8;
    n integer;
    i integer;
    rnd integer;
BEGIN
    PERFORM setseed(0.2026);
    FOR i IN 1..200 LOOP
        INSERT INTO inv_runs
        SELECT wf.start_run(CASE i % 3 WHEN 0 THEN 'inv_three' WHEN 1 THEN 'inv_two' ELSE 'inv_one' END,
                            jsonb_build_object('i', i),
                            CASE WHEN i % 4 = 0 THEN 'inv-key-' || i END),
               i, CASE WHEN i % 4 = 0 THEN 'inv-key-' || i END;
    END LOOP;

    FOR rnd IN 1..200 LOOP
        n := 0;
        FOR c IN SELECT * FROM wf.claim_tasks('inv_q', 'inv-w1', 40, '5 minutes') LOOP
            n := n + 1;
            INSERT INTO inv_claims
            VALUES (c.task_id, c.run_id, c.step, c.attempt, c.fence, c.idempotency_key, c.deliveries);
            r := random();
            IF r < 0.45 THEN
                PERFORM pg_temp.report(c.task_id, c.fence, 'complete', 'accepted');
            ELSIF r < 0.60 THEN
                PERFORM pg_temp.report(c.task_id, c.fence, 'fail', 'accepted');
            ELSIF r < 0.63 THEN
                PERFORM pg_temp.report(c.task_id, c.fence, 'fail_final', 'accepted');
            ELSIF r < 0.66 THEN
                PERFORM pg_temp.report(c.task_id, c.fence, 'fail_bad', 'accepted');
            ELSIF r < 0.76 THEN
                -- the worker reports twice (a retried RPC): the second is a duplicate
                PERFORM pg_temp.report(c.task_id, c.fence, 'complete', 'accepted');
                PERFORM pg_temp.report(c.task_id, c.fence, 'complete', 'duplicate');
                PERFORM pg_temp.report(c.task_id, c.fence, 'fail', 'duplicate');
            ELSIF r < 0.78 THEN
                -- a failure reported twice
                PERFORM pg_temp.report(c.task_id, c.fence, 'fail', 'accepted');
                PERFORM pg_temp.report(c.task_id, c.fence, 'fail', 'duplicate');
            ELSIF r < 0.92 THEN
                -- the lease expires and another worker re-claims the same attempt
                UPDATE wf.tasks t
                SET lease_expires_at = clock_timestamp() - interval '1 day',
                    deadline_at = clock_timestamp() - interval '1 day'
                WHERE t.task_id = c.task_id;
                PERFORM wf.tick();
                -- put it first in the queue, so that the next claim re-claims it
                UPDATE wf.tasks t SET available_at = clock_timestamp() - interval '1 day'
                WHERE t.task_id = c.task_id;
                SELECT * INTO c2 FROM wf.claim_tasks('inv_q', 'inv-w2', 1, '5 minutes');
                INSERT INTO inv_reclaims VALUES (c.task_id, c.fence, c2.task_id, c2.fence, c.attempt, c2.attempt);
                INSERT INTO inv_claims
                VALUES (c2.task_id, c2.run_id, c2.step, c2.attempt, c2.fence, c2.idempotency_key, c2.deliveries);
                IF r < 0.85 THEN
                    -- the old worker reports late, then the new one
                    PERFORM pg_temp.report(c.task_id, c.fence, 'complete', 'stale');
                    PERFORM pg_temp.report(c2.task_id, c2.fence, 'complete', 'accepted');
                ELSE
                    -- the new worker reports first, then the old one (a failure)
                    PERFORM pg_temp.report(c2.task_id, c2.fence,
                                           CASE WHEN r < 0.89 THEN 'complete' ELSE 'fail' END, 'accepted');
                    PERFORM pg_temp.report(c.task_id, c.fence, 'fail', 'stale');
                END IF;
                -- and the old worker insists
                PERFORM pg_temp.report(c.task_id, c.fence, 'complete', 'stale');
            ELSE
                -- the worker vanishes: its lease expires, a later round re-claims
                UPDATE wf.tasks t
                SET lease_expires_at = clock_timestamp() - interval '1 second',
                    deadline_at = clock_timestamp() - interval '1 second'
                WHERE t.task_id = c.task_id;
            END IF;
        END LOOP;
        IF n = 0 THEN
            -- nothing claimable: bring retry timers and lost leases forward
            UPDATE wf.timers tm SET fire_at = clock_timestamp() - interval '1 millisecond'
            WHERE tm.status = 'pending' AND tm.fire_at > clock_timestamp();
            EXIT WHEN wf.tick() = 0;
        END IF;
    END LOOP;
END
$$;

-- ---------------------------------------------------------------------
-- the drive went through every path, with the expected verdicts
-- ---------------------------------------------------------------------
SELECT is((SELECT count(*)::int FROM inv_runs), 200, '200 runs were started');
SELECT is((SELECT count(*)::int FROM inv_runs r JOIN wf.runs w USING (run_id) WHERE w.status = 'running'), 0,
          'every run was driven to its end');
SELECT cmp_ok((SELECT count(*)::int FROM inv_runs JOIN wf.runs USING (run_id) WHERE status = 'completed'), '>=', 50,
              'many runs completed');
SELECT cmp_ok((SELECT count(*)::int FROM inv_runs JOIN wf.runs USING (run_id) WHERE status = 'failed'), '>=', 20,
              'many runs failed');
SELECT is((SELECT count(*)::int FROM inv_reports WHERE got IS DISTINCT FROM expected), 0,
          'every report got the expected verdict (accepted, duplicate or stale)');
SELECT results_eq($$SELECT v, count(got) >= 10 FROM (VALUES ('accepted'), ('duplicate'), ('stale')) AS x(v)
                    LEFT JOIN inv_reports ON got = v GROUP BY v ORDER BY v$$,
                  $$VALUES ('accepted'::text, true), ('duplicate', true), ('stale', true)$$,
                  'each verdict occurred at least 10 times');
SELECT results_eq($$SELECT final FROM (VALUES ('attempts_exhausted'), ('non_retryable'), ('non_retryable_error')) AS x(final)
                    WHERE EXISTS (SELECT 1 FROM inv_runs JOIN wf.event_log e USING (run_id)
                                  WHERE e.type = 'task_failed' AND e.payload->>'final' = x.final)
                    ORDER BY 1$$,
                  $$VALUES ('attempts_exhausted'::text), ('non_retryable'), ('non_retryable_error')$$,
                  'runs failed for each reason: attempts exhausted, non-retryable flag, non-retryable code');
SELECT cmp_ok((SELECT count(*)::int FROM inv_runs JOIN wf.event_log e USING (run_id)
                WHERE e.attempt > 1 AND e.type = 'task_completed'), '>=', 5,
              'some steps completed after a retry');
SELECT cmp_ok((SELECT count(*)::int FROM inv_runs JOIN wf.tasks USING (run_id) WHERE deliveries > 1), '>=', 20,
              'many attempts were delivered more than once');

-- a re-claim after an expired lease is the same attempt with a higher fence
SELECT cmp_ok((SELECT count(*)::int FROM inv_reclaims), '>=', 10, 'leases expired and were re-claimed');
SELECT is((SELECT count(*)::int FROM inv_reclaims
           WHERE new_task_id IS DISTINCT FROM task_id OR NOT new_fence > old_fence
              OR new_attempt IS DISTINCT FROM old_attempt), 0,
          'every re-claim returned the same task and attempt with a higher fence');
SELECT is((SELECT count(*)::int - count(DISTINCT fence)::int FROM inv_claims), 0,
          'every delivery of every attempt had a fence of its own');
SELECT is((SELECT count(*)::int FROM inv_claims a JOIN inv_claims b USING (task_id)
           WHERE b.deliveries > a.deliveries AND NOT b.fence > a.fence), 0,
          'the fences of an attempt rise with its deliveries');

-- ---------------------------------------------------------------------
-- the history
-- ---------------------------------------------------------------------
SELECT is((SELECT count(*)::int FROM inv_runs r
           WHERE NOT EXISTS (SELECT 1 FROM wf.event_log e WHERE e.run_id = r.run_id)), 0,
          'every run has events');
SELECT is((SELECT count(*)::int FROM (
               SELECT e.run_id FROM wf.event_log e JOIN inv_runs USING (run_id)
               GROUP BY e.run_id HAVING min(e.seq) <> 1 OR max(e.seq) <> count(*)) AS x), 0,
          'events are gap-free per run: seq = 1..n');
SELECT is((SELECT count(*)::int FROM inv_runs r JOIN wf.runs w USING (run_id)
           WHERE w.seq IS DISTINCT FROM (SELECT max(e.seq) FROM wf.event_log e WHERE e.run_id = r.run_id)), 0,
          'runs.seq = max(events.seq) for every run');
SELECT is((SELECT count(*)::int FROM inv_runs r JOIN wf.runs w USING (run_id)
           WHERE w.last_hash IS DISTINCT FROM
                 (SELECT e.hash FROM wf.events e WHERE e.run_id = r.run_id ORDER BY e.seq DESC LIMIT 1)), 0,
          'runs.last_hash is the hash of the last event of every run');
SELECT is((SELECT count(*)::int FROM inv_runs JOIN wf.events e USING (run_id)
           CROSS JOIN LATERAL json_array_elements(e.more) m(x)
           WHERE m.x->>0 NOT IN ('task_scheduled', 'run_completed')), 0,
          'only task_scheduled and run_completed share the row of the event before them');
SELECT cmp_ok((SELECT count(*)::int FROM inv_runs JOIN wf.events e USING (run_id)
               WHERE e.type = 'task_completed' AND e.more IS NOT NULL), '>=', 10,
              'a step''s completion and its next attempt share a row');
SELECT is((SELECT count(*)::int FROM inv_runs r
           WHERE (SELECT array_agg(ROW(e.seq, e.type, e.step, e.attempt, e.actor)::text ORDER BY e.seq)
                  FROM wf.event_log e WHERE e.run_id = r.run_id)
                 IS DISTINCT FROM
                 (SELECT array_agg(ROW(h.seq, h.type, h.step, h.attempt, h.actor)::text ORDER BY h.seq)
                  FROM wf.history(r.run_id) h)), 0,
          'wf.event_log has the events wf.history shows, run by run');
SELECT is((SELECT count(*)::int FROM inv_runs r WHERE NOT wf.verify_run(r.run_id)), 0,
          'wf.verify_run is true for every run');

-- one accepted result per step visit, and it matches the task rows
SELECT is((SELECT count(*)::int FROM (
               SELECT e.run_id, e.step, e.payload->>'visit'
               FROM wf.event_log e JOIN inv_runs USING (run_id)
               WHERE e.type = 'task_completed'
               GROUP BY 1, 2, 3 HAVING count(*) > 1) AS x), 0,
          'no step visit has two accepted completions');
SELECT is((SELECT count(*)::int FROM (
               SELECT e.run_id, e.step, e.attempt
               FROM wf.event_log e JOIN inv_runs USING (run_id)
               WHERE e.type IN ('task_completed', 'task_failed')
               GROUP BY 1, 2, 3 HAVING count(*) > 1) AS x), 0,
          'no attempt has two accepted results');
-- a completed attempt's row is deleted (since 0.3.0): the attempts scheduled
-- that have no row are exactly those task_completed names, and no row says
-- 'completed' (no result was held for a paused run here)
SELECT set_eq($$SELECT e.run_id, e.step, e.attempt, (e.payload->>'task_id')::bigint AS task_id
                FROM wf.event_log e JOIN inv_runs USING (run_id) WHERE e.type = 'task_completed'$$,
              $$SELECT e.run_id, e.step, e.attempt, (e.payload->>'task_id')::bigint
                FROM wf.event_log e JOIN inv_runs USING (run_id) WHERE e.type = 'task_scheduled'
                  AND NOT EXISTS (SELECT 1 FROM wf.tasks t WHERE t.task_id = (e.payload->>'task_id')::bigint)$$,
              'the task_completed events are exactly the completed attempts (scheduled, their rows deleted)');
SELECT is((SELECT count(*)::int FROM wf.tasks t JOIN inv_runs USING (run_id) WHERE t.status = 'completed'), 0,
          'no completed attempt keeps its row');
SELECT set_eq($$SELECT e.run_id, e.step, e.attempt FROM wf.event_log e JOIN inv_runs USING (run_id) WHERE e.type = 'task_failed'$$,
              $$SELECT t.run_id, t.step, t.attempt FROM wf.tasks t JOIN inv_runs USING (run_id) WHERE t.status = 'failed'$$,
              'the task_failed events are exactly the failed attempts');
SELECT set_eq($$SELECT e.run_id, e.step, e.attempt, (e.payload->>'task_id')::bigint AS task_id
                FROM wf.event_log e JOIN inv_runs USING (run_id) WHERE e.type = 'task_scheduled'$$,
              $$SELECT t.run_id, t.step, t.attempt, t.task_id FROM wf.tasks t JOIN inv_runs USING (run_id)
                UNION ALL
                SELECT e.run_id, e.step, e.attempt, (e.payload->>'task_id')::bigint
                FROM wf.event_log e JOIN inv_runs USING (run_id) WHERE e.type = 'task_completed'$$,
              'every task row and every completed attempt was scheduled by exactly one task_scheduled event');
SELECT is((SELECT count(*)::int FROM inv_reports WHERE got = 'duplicate'),
          (SELECT count(*)::int FROM wf.event_log e JOIN inv_runs USING (run_id) WHERE e.type = 'result_duplicate'),
          'every duplicate report is recorded as one result_duplicate event');
SELECT is((SELECT count(*)::int FROM inv_reports WHERE got = 'stale'),
          (SELECT count(*)::int FROM wf.event_log e JOIN inv_runs USING (run_id) WHERE e.type = 'result_stale'),
          'every stale report is recorded as one result_stale event');
SELECT is((SELECT count(*)::int FROM inv_reports WHERE got = 'accepted'),
          (SELECT count(*)::int FROM wf.event_log e JOIN inv_runs USING (run_id)
           WHERE e.type IN ('task_completed', 'task_failed')),
          'every accepted report is recorded as one task_completed or task_failed event');

-- attempts
SELECT is((SELECT count(*)::int FROM (
               SELECT t.run_id, t.step, t.visit FROM wf.tasks t JOIN inv_runs USING (run_id)
               GROUP BY 1, 2, 3 HAVING min(t.attempt) <> 1 OR max(t.attempt) <> count(*)) AS x), 0,
          'the attempts of a step are numbered 1..n');
SELECT is((SELECT count(*)::int FROM wf.tasks t JOIN inv_runs USING (run_id)
           WHERE t.status <> 'failed'
             AND t.attempt < (SELECT max(t2.attempt) FROM wf.tasks t2
                              WHERE t2.run_id = t.run_id AND t2.step = t.step AND t2.visit = t.visit)), 0,
          'only the last attempt of a step can be other than failed');
SELECT is((SELECT count(*)::int FROM wf.tasks t JOIN inv_runs r USING (run_id) JOIN wf.runs w USING (run_id)
           JOIN wf.definitions d USING (definition_id),
                LATERAL (SELECT coalesce((s->'retry'->>'max_attempts')::int, 3) AS max_attempts
                         FROM jsonb_array_elements(d.spec->'steps') s WHERE s->>'name' = t.step) p
           WHERE t.attempt > p.max_attempts), 0,
          'no step was attempted more often than its retry.max_attempts');
SELECT is((SELECT count(*)::int FROM (
               SELECT t.run_id, t.step FROM wf.tasks t JOIN inv_runs USING (run_id)
               WHERE t.status IN ('ready', 'leased') GROUP BY 1, 2 HAVING count(*) > 1) AS x), 0,
          'at most one live attempt per step');
SELECT is((SELECT count(*)::int FROM wf.tasks t JOIN inv_runs USING (run_id) JOIN wf.runs w USING (run_id)
           WHERE t.status IN ('ready', 'leased') AND w.status <> 'running'), 0,
          'a finished run has no live attempt');

-- the end of a run
SELECT is((SELECT count(*)::int FROM inv_runs r JOIN wf.runs w USING (run_id)
           WHERE (SELECT count(*) FROM wf.event_log e WHERE e.run_id = r.run_id
                    AND e.type IN ('run_completed', 'run_failed'))
                 <> CASE WHEN w.status = 'running' THEN 0 ELSE 1 END), 0,
          'a finished run has exactly one run_completed or run_failed event, a running run none');
SELECT is((SELECT count(*)::int FROM inv_runs r JOIN wf.runs w USING (run_id)
           WHERE w.status = 'completed'
             AND (SELECT e.type FROM wf.event_log e WHERE e.run_id = r.run_id
                    AND e.type NOT IN ('result_duplicate', 'result_stale')
                  ORDER BY e.seq DESC LIMIT 1) IS DISTINCT FROM 'run_completed'), 0,
          'run_completed is the last event of a completed run, apart from recorded results');
SELECT is((SELECT count(*)::int FROM inv_runs r JOIN wf.runs w USING (run_id)
           WHERE w.status = 'failed'
             AND (SELECT e.type FROM wf.event_log e WHERE e.run_id = r.run_id
                    AND e.type NOT IN ('result_duplicate', 'result_stale')
                  ORDER BY e.seq DESC LIMIT 1) IS DISTINCT FROM 'run_failed'), 0,
          'run_failed is the last event of a failed run, apart from recorded results');
SELECT is((SELECT count(*)::int FROM inv_runs r JOIN wf.runs w USING (run_id) JOIN wf.definitions d USING (definition_id)
           WHERE w.status = 'completed'
             AND (SELECT array_agg(e.step ORDER BY e.seq) FROM wf.event_log e
                  WHERE e.run_id = r.run_id AND e.type = 'task_completed')
                 IS DISTINCT FROM (SELECT array_agg(s->>'name' ORDER BY o)
                                   FROM jsonb_array_elements(d.spec->'steps') WITH ORDINALITY AS x(s, o))), 0,
          'a completed run completed each of its steps once, in order');
SELECT is((SELECT count(*)::int FROM inv_runs r JOIN wf.runs w USING (run_id)
           WHERE w.definition_name = 'inv_two' AND w.status = 'completed'
             AND w.output IS DISTINCT FROM jsonb_build_object('x', w.context->'steps'->'x'->'output'->'v',
                                                             'y', w.context->'steps'->'y'->'output'->'v')), 0,
          'the output of a completed run is its output mapping over the accepted results');

-- idempotency keys
SELECT is((SELECT count(*)::int FROM (
               SELECT t.run_id, t.step, t.visit FROM wf.tasks t JOIN inv_runs USING (run_id)
               GROUP BY 1, 2, 3 HAVING count(DISTINCT t.idempotency_key) <> 1) AS x), 0,
          'all attempts of a step visit share one idempotency key');
SELECT is((SELECT count(*)::int FROM (
               SELECT c.run_id, c.step FROM inv_claims c
               GROUP BY 1, 2 HAVING count(DISTINCT c.idempotency_key) <> 1) AS x), 0,
          'every delivery of every attempt of a step carried the same idempotency key');
SELECT is((SELECT count(*)::int FROM (
               SELECT t.idempotency_key FROM wf.tasks t JOIN inv_runs USING (run_id)
               GROUP BY 1 HAVING count(DISTINCT (t.run_id, t.step, t.visit)) > 1) AS x), 0,
          'different steps never share an idempotency key');

-- a real lease of 1 ms expires; the tick (the engine worker's job) requeues it
CREATE TEMP TABLE inv_real0 AS SELECT wf.start_run('inv_one', '{"real_lease": true}') AS run_id;
CREATE TEMP TABLE inv_real1 AS SELECT * FROM wf.claim_tasks('inv_q', 'inv-short', 1, '1 millisecond');
SELECT pg_sleep(0.01);
SELECT wf.tick();
CREATE TEMP TABLE inv_real2 AS SELECT * FROM wf.claim_tasks('inv_q', 'inv-long', 1, '5 minutes');
SELECT results_eq($$SELECT a.run_id = (SELECT run_id FROM inv_real0), b.task_id = a.task_id, b.attempt = a.attempt, b.fence = a.fence + 1,
                           wf.complete_task(a.task_id, a.fence), wf.complete_task(b.task_id, b.fence)
                    FROM inv_real1 a, inv_real2 b$$,
                  $$VALUES (true, true, true, true, 'stale'::text, 'accepted'::text)$$,
                  'after a 1 ms lease expired the attempt was re-claimed with fence + 1; the old result is stale');

-- ---------------------------------------------------------------------
-- wf.events is append-only
-- ---------------------------------------------------------------------
SELECT count(*) AS events_before FROM wf.events \gset
SELECT throws_ok($$UPDATE wf.events SET actor = 'mallory' WHERE run_id IN (SELECT run_id FROM inv_runs)$$,
                 '42501', 'wf.events is append-only', 'UPDATE of wf.events is refused');
SELECT throws_ok($$DELETE FROM wf.events WHERE run_id IN (SELECT run_id FROM inv_runs)$$,
                 '42501', 'wf.events is append-only', 'DELETE from wf.events is refused');
SELECT throws_ok($$TRUNCATE wf.events$$,
                 '42501', 'wf.events is append-only', 'TRUNCATE of wf.events is refused');
SELECT is((SELECT count(*) FROM wf.events), :events_before::bigint, 'wf.events is unchanged');

-- ---------------------------------------------------------------------
-- wf.verify_run detects tampering
-- ---------------------------------------------------------------------
SET LOCAL client_min_messages = error;  -- verify_run explains each failure in a WARNING
CREATE TEMP TABLE inv_victims AS
SELECT run_id, row_number() OVER (ORDER BY i) AS k
FROM inv_runs JOIN wf.runs USING (run_id)
WHERE definition_name = 'inv_three' AND status = 'completed';

ALTER TABLE wf.events DISABLE TRIGGER events_append_only;
-- 1: a changed payload
UPDATE wf.events e SET payload = jsonb_set(e.payload, '{output}', '{"v": -1}')
FROM inv_victims v
WHERE v.k = 1 AND e.run_id = v.run_id AND e.type = 'task_completed' AND e.step = 'b';
-- 2: the last event removed
DELETE FROM wf.events e USING inv_victims v
WHERE v.k = 2 AND e.run_id = v.run_id
  AND e.seq = (SELECT max(seq) FROM wf.events WHERE run_id = v.run_id);
-- 3: two events swapped
UPDATE wf.events e SET seq = 1000000 FROM inv_victims v WHERE v.k = 3 AND e.run_id = v.run_id AND e.seq = 2;
UPDATE wf.events e SET seq = 2 FROM inv_victims v WHERE v.k = 3 AND e.run_id = v.run_id AND e.seq = 3;
UPDATE wf.events e SET seq = 3 FROM inv_victims v WHERE v.k = 3 AND e.run_id = v.run_id AND e.seq = 1000000;
-- 4: the last event removed, and the snapshot's seq and last_hash moved back onto the new last event
DELETE FROM wf.events e USING inv_victims v
WHERE v.k = 4 AND e.run_id = v.run_id
  AND e.seq = (SELECT max(seq) FROM wf.events WHERE run_id = v.run_id);
UPDATE wf.runs w SET seq = x.seq, last_hash = x.hash
FROM inv_victims v, LATERAL (SELECT e.seq, e.hash FROM wf.events e WHERE e.run_id = v.run_id
                             ORDER BY e.seq DESC LIMIT 1) x
WHERE v.k = 4 AND w.run_id = v.run_id;
ALTER TABLE wf.events ENABLE TRIGGER events_append_only;
-- 5: a changed snapshot
UPDATE wf.runs w SET context = jsonb_set(w.context, '{input}', w.input || '{"i": -1}')
FROM inv_victims v WHERE v.k = 5 AND w.run_id = v.run_id;
-- 6: a live task the history never scheduled
INSERT INTO wf.tasks (tenant_id, run_id, step, visit, attempt, queue, status, available_at,
                      idempotency_key, input, created_at)
SELECT 'default', v.run_id, 'c', 2, 1, 'inv_nowhere', 'ready', now(), 'forged', '{}', now()
FROM inv_victims v WHERE v.k = 6;
-- 7 is left alone

SELECT cmp_ok((SELECT count(*)::int FROM inv_victims), '>=', 7,
              'there are at least 7 completed three-step runs to tamper with');
SELECT results_eq($$SELECT k::int, wf.verify_run(run_id) FROM inv_victims WHERE k <= 7 ORDER BY k$$,
                  $$VALUES (1, false), (2, false), (3, false), (4, false), (5, false), (6, false), (7, true)$$,
                  'wf.verify_run detects a changed payload, a removed last event, swapped events, a truncated tail with a moved snapshot, a changed snapshot and a stray live task');
SELECT is((SELECT count(*)::int FROM inv_runs r WHERE NOT wf.verify_run(r.run_id)), 6,
          'only the six tampered runs fail verification');

SELECT * FROM finish();
ROLLBACK;
