-- scenario: batches and eager dispatch (issue 13): a result and the next
-- claim in one call, many results and many starts in one statement
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('bt_flow', '{"steps": [
  {"name": "s1", "queue": "bt_q"},
  {"name": "s2", "queue": "bt_q", "retry": {"max_attempts": 3, "initial_interval": "1ms", "jitter": 0}},
  {"name": "s3", "queue": "bt_other"}]}');
SELECT wf.publish_definition('bt_slow_retry', '{"steps": [
  {"name": "s1", "queue": "bt_slow", "retry": {"max_attempts": 2, "initial_interval": "1h", "jitter": 0}}]}');

-- a history without what differs between two runs driven alike (ids,
-- fences, times), for comparing runs
CREATE FUNCTION pg_temp.shape(r uuid) RETURNS text LANGUAGE sql AS $$
  SELECT string_agg(e.type || ' ' || coalesce(e.step, '-') || ' ' || coalesce(e.attempt::text, '-') || ' '
                    || (e.payload - ARRAY['task_id', 'fence', 'current_fence', 'available_at',
                                          'idempotency_key', 'input_digest', 'timer_id', 'fire_at',
                                          'next_attempt_at'])::text,
                    E'\n' ORDER BY e.seq)
  FROM wf._run_events(r, (SELECT x.tenant_id FROM wf.runs x WHERE x.run_id = r)) e
$$;

-- scenario: eager dispatch; the next step of the same run on the same queue
-- is leased to the completing worker, ahead of older tasks of the queue
SELECT run_id AS r1 FROM wf.start_runs('bt_flow', ARRAY['{"n": 1}']::jsonb[]) \gset
SELECT run_id AS r2 FROM wf.start_runs('bt_flow', ARRAY['{"n": 2}']::jsonb[]) \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('bt_q', 'w1') WHERE run_id = :'r1' \gset
SELECT answer, run_id = :'r1' AS same_run, step, attempt, fence > :f AS new_fence, queue, deliveries,
       lease_expires_at > now() AS leased
FROM wf.complete_and_claim(:t, :f, '{"s1": "done"}', 'bt_q', 'w1') \gset
\echo :answer :same_run :step :attempt :new_fence :queue :deliveries :leased
SELECT status, worker, lease = '30 seconds' AS default_lease FROM wf.tasks
WHERE run_id = :'r1' AND step = 's2';
-- the run's other task (r2's s1) is still ready: nothing scanned it
SELECT status FROM wf.tasks WHERE run_id = :'r2';

-- the same report again: complete_task's verdict, and the claim goes on
-- (r2's s1, the only claimable task; max_tasks 5 returns what there is)
SELECT answer, run_id = :'r2' AS other_run, step FROM wf.complete_and_claim(:t, :f, '{}', 'bt_q', 'w1', 5);

-- the next step is on another queue: nothing to continue with, and the queue
-- asked for is empty: one row with the answer
SELECT task_id AS t, fence AS f FROM wf.tasks WHERE run_id = :'r1' AND step = 's2' \gset
SELECT t.task_id AS t2, t.fence AS f2 FROM wf.tasks t WHERE t.run_id = :'r2' AND t.status = 'leased' \gset
SELECT answer, run_id = :'r2' AS same_run, step FROM wf.complete_and_claim(:t2, :f2, '{}', 'bt_q', 'w2');
SELECT answer, task_id IS NULL AS nothing FROM wf.complete_and_claim(:t, :f, '{}', 'bt_q', 'w1');
SELECT answer, step, run_id = :'r1' AS same_run, lease_expires_at > now() + interval '50 seconds' AS long_lease
FROM wf.complete_and_claim(:t, :f, '{}', 'bt_other', 'w1', lease => '1 minute');
SELECT wf.verify_run(:'r1') AS r1_verified, wf.verify_run(:'r2') AS r2_verified;

-- a retry waits for its backoff timer: there is nothing to continue with
SELECT run_id AS rs FROM wf.start_runs('bt_slow_retry', ARRAY['{}']::jsonb[]) \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('bt_slow', 'w1') \gset
SELECT answer, task_id IS NULL AS nothing FROM wf.fail_and_claim(:t, :f, '{"code": "later"}', true, 'bt_slow', 'w1');
SELECT attempt, status FROM wf.tasks WHERE run_id = :'rs' ORDER BY attempt;
SELECT kind, status, fire_at > now() + interval '50 minutes' AS later FROM wf.timers WHERE run_id = :'rs';

-- refusals of eager dispatch: those of complete_task and of claim_tasks,
-- before anything is reported
SELECT * FROM wf.complete_and_claim(123456789, 1, '{}', 'bt_q', 'w1');
SELECT * FROM wf.complete_and_claim(:t, :f + 1000, '{}', 'bt_q', 'w1');
SELECT * FROM wf.complete_and_claim(NULL, 1, '{}', 'bt_q', 'w1');
SELECT * FROM wf.complete_and_claim(1, 1, '{}', NULL, 'w1');
SELECT * FROM wf.complete_and_claim(1, 1, '{}', 'bt_q', '');
SELECT * FROM wf.complete_and_claim(1, 1, '{}', 'bt_q', 'w1', 0);
SELECT * FROM wf.complete_and_claim(1, 1, '{}', 'bt_q', 'w1', 1, '0 seconds');
SELECT * FROM wf.fail_and_claim(1, 1, NULL, true, 'bt_q', 'w1');
SELECT * FROM wf.fail_and_claim(1, 1, '{}', NULL, 'bt_q', 'w1');

-- scenario: a batch of N results gives the same history as N single calls
CREATE TEMP TABLE driven (kind text, run_id uuid);
INSERT INTO driven SELECT 'single', run_id FROM wf.start_runs('bt_flow',
  ARRAY['{"n": 10}', '{"n": 11}', '{"n": 12}', '{"n": 13}']::jsonb[]);
INSERT INTO driven SELECT 'batch', run_id FROM wf.start_runs('bt_flow',
  ARRAY['{"n": 10}', '{"n": 11}', '{"n": 12}', '{"n": 13}']::jsonb[]);
-- three rounds: s1 completed, s2 failed once (retried at once), s2 completed
CREATE TEMP TABLE rounds (round int, payload jsonb, failure boolean);
INSERT INTO rounds VALUES (1, '{"s1": "ok"}', false), (2, '{"code": "flaky"}', true), (3, '{"s2": "ok"}', false);
CREATE TEMP TABLE batch_answers (round int, answer text);
DO $$
DECLARE
    rnd record;
    t record;
    single_runs uuid[] := (SELECT array_agg(run_id) FROM driven WHERE kind = 'single');
    batch_runs uuid[] := (SELECT array_agg(run_id) FROM driven WHERE kind = 'batch');
    ids bigint[];
    fences bigint[];
    payloads jsonb[];
BEGIN
    FOR rnd IN SELECT * FROM rounds ORDER BY round LOOP
        PERFORM pg_sleep(0.01);     -- the retries' 1 ms backoff,
        PERFORM wf.tick();          -- whose timers schedule them
        -- one claim for both halves, so that both are claimed alike
        CREATE TEMP TABLE claimed ON COMMIT DROP AS SELECT * FROM wf.claim_tasks('bt_q', 'w', 10);
        -- singles: one call per task
        FOR t IN SELECT * FROM claimed c WHERE c.run_id = ANY (single_runs) LOOP
            IF rnd.failure THEN
                PERFORM wf.fail_task(t.task_id, t.fence, rnd.payload || jsonb_build_object('n', t.input->'n'), true);
            ELSE
                PERFORM wf.complete_task(t.task_id, t.fence, rnd.payload || jsonb_build_object('n', t.input->'n'));
            END IF;
        END LOOP;
        -- the batch: one statement (in another order than the claim's)
        SELECT array_agg(c.task_id ORDER BY c.task_id DESC), array_agg(c.fence ORDER BY c.task_id DESC),
               array_agg(rnd.payload || jsonb_build_object('n', c.input->'n') ORDER BY c.task_id DESC)
          INTO ids, fences, payloads
          FROM claimed c WHERE c.run_id = ANY (batch_runs);
        IF rnd.failure THEN
            INSERT INTO batch_answers SELECT rnd.round, b.answer FROM wf.fail_tasks(ids, fences, payloads) b;
        ELSE
            INSERT INTO batch_answers SELECT rnd.round, b.answer FROM wf.complete_tasks(ids, fences, payloads) b;
        END IF;
        DROP TABLE claimed;
    END LOOP;
END
$$;
SELECT round, answer, count(*) FROM batch_answers GROUP BY 1, 2 ORDER BY 1;
SELECT count(*) AS pairs,
       count(*) FILTER (WHERE pg_temp.shape(rs.run_id) = pg_temp.shape(rb.run_id)) AS same_history,
       bool_and(wf.verify_run(rs.run_id) AND wf.verify_run(rb.run_id)) AS verified,
       count(*) FILTER (WHERE rs.status = rb.status AND rs.current_step = rb.current_step
                        AND rs.seq = rb.seq AND rs.context = rb.context) AS same_snapshot
FROM driven s JOIN wf.runs rs ON rs.run_id = s.run_id,
     driven b JOIN wf.runs rb ON rb.run_id = b.run_id
WHERE s.kind = 'single' AND b.kind = 'batch' AND rs.input = rb.input;
SELECT pg_temp.shape(r.run_id) FROM driven d JOIN wf.runs r USING (run_id)
WHERE d.kind = 'batch' AND r.input = '{"n": 10}';

-- scenario: a batch with good and bad elements: each gets its own answer,
-- in the order of the input
SELECT run_id AS rb FROM wf.start_runs('bt_flow', ARRAY['{"n": 20}']::jsonb[]) \gset
SELECT run_id AS rc FROM wf.start_runs('bt_flow', ARRAY['{"n": 21}']::jsonb[]) \gset
SELECT run_id AS rd FROM wf.start_runs('bt_flow', ARRAY['{"n": 22}']::jsonb[]) \gset
SELECT run_id AS re FROM wf.start_runs('bt_flow', ARRAY['{"n": 23}']::jsonb[]) \gset
SELECT task_id AS tb, fence AS fb FROM wf.claim_tasks('bt_q', 'w1') WHERE run_id = :'rb' \gset
SELECT task_id AS tc, fence AS fc FROM wf.claim_tasks('bt_q', 'w1') WHERE run_id = :'rc' \gset
SELECT ord, b.task_id = :tb AS is_tb, b.task_id = :tc AS is_tc, b.answer
FROM wf.complete_tasks(ARRAY[:tc, :tb, 987654321, :tb, :tc, :tb],
                       ARRAY[:fc + 1000, :fb, 1, :fb, :fc, :fb - 1],
                       ARRAY['{"bad": "fence"}', '{"ok": 1}', '{}', '{"again": 1}', NULL, '{"old": 1}']::jsonb[])
     WITH ORDINALITY AS b(task_id, answer, ord)
ORDER BY ord;
-- what was recorded: tb completed once (then a duplicate and a stale),
-- tc completed with JSON null; the unknown task and fence changed nothing
SELECT e.run_id = :'rb' AS is_rb, e.type, e.payload->'output' AS output
FROM wf.events e WHERE e.run_id IN (:'rb', :'rc') AND e.type IN ('task_completed', 'result_duplicate', 'result_stale')
ORDER BY e.run_id = :'rb' DESC, e.seq;
SELECT wf.verify_run(:'rb') AND wf.verify_run(:'rc') AS verified;

-- failures in a batch: retryables given per element, or all retryable
CREATE TEMP TABLE leased AS SELECT * FROM wf.claim_tasks('bt_q', 'w1', 10);
SELECT count(*) AS leased FROM leased;
SELECT task_id AS tb, fence AS fb FROM leased WHERE run_id = :'rb' \gset
SELECT task_id AS tc, fence AS fc FROM leased WHERE run_id = :'rc' \gset
SELECT task_id AS td, fence AS fd FROM leased WHERE run_id = :'rd' \gset
SELECT task_id AS te, fence AS fe FROM leased WHERE run_id = :'re' \gset
SELECT b.task_id = :tb AS is_tb, b.answer
FROM wf.fail_tasks(ARRAY[:tb, :tc], ARRAY[:fb, :fc],
                   ARRAY['{"code": "declined"}', '{"code": "busy"}']::jsonb[], ARRAY[false, true]) b;
SELECT answer FROM wf.fail_tasks(ARRAY[:td], ARRAY[:fd], ARRAY['{"code": "busy"}']::jsonb[]);
SELECT r.run_id = :'rb' AS is_rb, r.status, r.current_step,
       (SELECT string_agg(t.kind || ' ' || t.status, ', ') FROM wf.timers t WHERE t.run_id = r.run_id) AS timers
FROM wf.runs r WHERE r.run_id IN (:'rb', :'rc', :'rd') ORDER BY r.input->>'n';
-- an empty batch
SELECT count(*) FROM wf.complete_tasks('{}', '{}');

-- refusals of batches of results: the whole batch, before anything is applied
SELECT * FROM wf.complete_tasks(ARRAY[1, 2], ARRAY[1]);
SELECT * FROM wf.complete_tasks(ARRAY[1], ARRAY[1], ARRAY['{}', '{}']::jsonb[]);
SELECT * FROM wf.complete_tasks(ARRAY[1, NULL], ARRAY[1, 1]);
SELECT * FROM wf.complete_tasks(ARRAY[1], ARRAY[NULL::bigint]);
SELECT * FROM wf.complete_tasks(NULL, ARRAY[1]);
SELECT * FROM wf.complete_tasks(ARRAY[1], NULL);
SELECT * FROM wf.complete_tasks(ARRAY[[1], [2]], ARRAY[[1], [1]]);
SELECT * FROM wf.complete_tasks(array_fill(1::bigint, ARRAY[1001]), array_fill(1::bigint, ARRAY[1001]));
SELECT * FROM wf.fail_tasks(ARRAY[1], ARRAY[1], ARRAY[NULL::jsonb]);
SELECT * FROM wf.fail_tasks(ARRAY[1], ARRAY[1], NULL);
SELECT * FROM wf.fail_tasks(ARRAY[1], ARRAY[1], ARRAY['{}'::jsonb], ARRAY[NULL::boolean]);
SELECT * FROM wf.fail_tasks(ARRAY[1], ARRAY[1], ARRAY['{}'::jsonb], ARRAY[true, false]);
-- a payload the single call refuses fails the batch, naming the element
SELECT * FROM wf.complete_tasks(ARRAY[:te, :te], ARRAY[:fe, :fe],
                                ARRAY['{}', '{"x": ["wfenc:v1:1:AAAA"]}']::jsonb[]);
SELECT status FROM wf.tasks WHERE task_id = :te;

-- scenario: a batch of starts, one run id per input, keys as in wf.start_run
CREATE TEMP TABLE started AS
SELECT * FROM wf.start_runs('bt_flow', ARRAY['{"k": 1}', '{"k": 2}', '{"k": 1}', '{"k": 3}']::jsonb[],
                            ARRAY['bk-1', NULL, 'bk-1', 'bk-3']) WITH ORDINALITY AS s(run_id, ord);
SELECT s.ord, r.input, r.idempotency_key,
       s.run_id = first_value(s.run_id) OVER (ORDER BY s.ord) AS same_as_first
FROM started s JOIN wf.runs r ON r.run_id = s.run_id ORDER BY s.ord;
SELECT count(DISTINCT s.run_id) AS runs, count(*) AS answers,
       count(*) FILTER (WHERE s.run_id = (SELECT run_id FROM wf.runs WHERE idempotency_key = 'bk-1')) AS keyed_bk1
FROM wf.start_runs('bt_flow', ARRAY['{"k": 1}', '{"k": 4}', '{"k": 1}']::jsonb[],
                   ARRAY['bk-1', 'bk-4', 'bk-1']) s;
SELECT (SELECT wf.start_run('bt_flow', '{"k": 3}', 'bk-3')) = r.run_id AS single_finds_batch_run
FROM wf.runs r WHERE r.idempotency_key = 'bk-3';
SELECT count(*) AS keyed_runs FROM wf.runs WHERE idempotency_key LIKE 'bk-%';
-- the same history as wf.start_run
SELECT pg_temp.shape((SELECT run_id FROM wf.start_runs('bt_flow', ARRAY['{"same": 1}']::jsonb[])))
     = pg_temp.shape(wf.start_run('bt_flow', '{"same": 1}')) AS same_history;
-- a version pinned for all
SELECT wf.publish_definition('bt_flow', '{"steps": [{"name": "v2", "queue": "bt_q"}]}');
CREATE TEMP TABLE pinned AS SELECT * FROM wf.start_runs('bt_flow', ARRAY['{}', '{}']::jsonb[], NULL, 1);
CREATE TEMP TABLE latest AS SELECT * FROM wf.start_runs('bt_flow', ARRAY['{}']::jsonb[]);
SELECT r.definition_version, count(*) FROM pinned s JOIN wf.runs r ON r.run_id = s.run_id GROUP BY 1;
SELECT r.definition_version, count(*) FROM latest s JOIN wf.runs r ON r.run_id = s.run_id GROUP BY 1;

-- refusals of batches of starts: malformed input, and any element's error
-- (the batch is one statement: nothing of it stays)
SELECT count(*) AS runs_before FROM wf.runs \gset
SELECT * FROM wf.start_runs('bt_flow', ARRAY['{}', NULL]::jsonb[]);
SELECT * FROM wf.start_runs('bt_flow', ARRAY['{}']::jsonb[], ARRAY['a', 'b']);
SELECT * FROM wf.start_runs('bt_flow', NULL);
SELECT * FROM wf.start_runs(NULL, ARRAY['{}']::jsonb[]);
SELECT * FROM wf.start_runs('bt_nope', ARRAY['{}']::jsonb[]);
SELECT * FROM wf.start_runs('bt_flow', ARRAY['{}', '{}']::jsonb[], NULL, 9);
SELECT * FROM wf.start_runs('bt_flow', ARRAY['{"k": 1}', '{"k": 9}']::jsonb[], ARRAY['bk-9', 'bk-1']);
SELECT * FROM wf.start_runs('bt_flow', ARRAY['{}']::jsonb[], ARRAY['']);
SELECT count(*) = :runs_before AS nothing_started FROM wf.runs;

-- scenario: the continuation is written leased (one row version, no claim
-- statement), with what a claim would have written: one delivery, a new
-- fence, the worker and lease asked for, and the deadline of the earliest
-- of lease end, start-to-close and heartbeat timeouts
SELECT wf.publish_definition('bt_timed', '{"steps": [
  {"name": "a", "queue": "bt_timed"},
  {"name": "b", "queue": "bt_timed", "timeout": {"start_to_close": "20s", "heartbeat": "5s"}},
  {"name": "c", "queue": "bt_timed", "timeout": {"start_to_close": "2m"}}]}');
SELECT run_id AS rt FROM wf.start_runs('bt_timed', ARRAY['{}']::jsonb[]) \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('bt_timed', 'wt') \gset
SELECT task_id AS tb, fence AS fb FROM wf.complete_and_claim(:t, :f, '{}', 'bt_timed', 'wt', lease => '1 minute') \gset
SELECT step, status, worker, deliveries, fence = :fb AS same_fence, fence > :f AS newer_fence,
       claimed_at = created_at AS leased_at_once, lease = '1 minute' AS lease,
       lease_expires_at = claimed_at + interval '1 minute' AS lease_end,
       timeout_at = claimed_at + interval '20 seconds' AS timeout_at,
       deadline_at = claimed_at + interval '5 seconds' AS deadline_is_heartbeat,
       last_heartbeat_at IS NULL AS no_heartbeat
FROM wf.tasks WHERE task_id = :tb;
SELECT task_id AS tc FROM wf.complete_and_claim(:tb, :fb, '{}', 'bt_timed', 'wt', lease => '1 minute') \gset
SELECT step, deadline_at = lease_expires_at AS deadline_is_lease_end,
       timeout_at = claimed_at + interval '2 minutes' AS timeout_at
FROM wf.tasks WHERE task_id = :tc;
-- the attempts it finished: completed, result recorded in the history, and
-- their rows deleted (since 0.3.0)
SELECT e.step, e.type, e.payload->'output' AS output, t.task_id IS NULL AS row_deleted
FROM wf.events e LEFT JOIN wf.tasks t ON t.task_id = (e.payload->>'task_id')::bigint
WHERE e.run_id = :'rt' AND e.type = 'task_completed' ORDER BY e.seq;
SELECT wf.verify_run(:'rt') AS verified;

-- a tenant that limits its tasks in flight gets its continuation through
-- the claim (counted against the limit), not written leased
SELECT max_tasks_in_flight FROM wf.set_tenant_policy('default', '{"max_tasks_in_flight": 2}');
SELECT run_id AS rt2 FROM wf.start_runs('bt_timed', ARRAY['{}']::jsonb[]) \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('bt_timed', 'wl') WHERE run_id = :'rt2' \gset
SELECT run_id = :'rt2' AS same_run, step FROM wf.complete_and_claim(:t, :f, '{}', 'bt_timed', 'wl');
SELECT step, status, claimed_at >= created_at AS claimed, deliveries FROM wf.tasks
WHERE run_id = :'rt2' ORDER BY task_id;
SELECT max_tasks_in_flight FROM wf.set_tenant_policy('default', '{"max_tasks_in_flight": null}');

-- scenario: a batch with eager dispatch: many results and the next claim
-- in one call and transaction; the next steps the reports scheduled on the
-- queue come first, written leased, at most max_tasks of them; the rest of
-- them stay ready for any worker
SELECT wf.publish_definition('bt_eb', '{"steps": [
  {"name": "a", "queue": "bt_eb"},
  {"name": "b", "queue": "bt_eb", "retry": {"max_attempts": 2, "initial_interval": "1h", "jitter": 0}},
  {"name": "c", "queue": "bt_eb_other"}]}');
SELECT count(*) FROM wf.start_runs('bt_eb', ARRAY['{"i": 1}', '{"i": 2}', '{"i": 3}']::jsonb[]);
SELECT array_agg(task_id ORDER BY task_id) AS ebt, array_agg(fence ORDER BY task_id) AS ebf
FROM wf.claim_tasks('bt_eb', 'we', 3) \gset
CREATE TEMP TABLE eb AS
SELECT * FROM wf.complete_tasks_and_claim(:'ebt', :'ebf', ARRAY['{"x": 1}', '{"x": 2}', NULL]::jsonb[],
                                          'bt_eb', 'we', 2);
SELECT eb.answers, eb.step, eb.attempt, eb.deliveries, eb.fence = t.fence AS fence, t.worker, t.status,
       t.claimed_at = t.created_at AS leased_at_once, eb.run_id = t.run_id AS same_run
FROM eb JOIN wf.tasks t USING (task_id) ORDER BY task_id;
-- the third run's next step was written ready: it waits for any worker
SELECT step, status, worker IS NULL AS no_worker FROM wf.tasks
WHERE step = 'b' AND status = 'ready' AND run_id IN (SELECT run_id FROM wf.runs WHERE definition_name = 'bt_eb');
-- the outputs went to their runs in the order of the input (NULL: JSON null)
SELECT r.input, e.payload->'output' AS output FROM wf.events e JOIN wf.runs r USING (run_id)
WHERE e.type = 'task_completed' AND (e.payload->>'task_id')::bigint = ANY (:'ebt')
ORDER BY (e.payload->>'task_id')::bigint;
-- reports the batch does not apply get their verdicts; the claim goes on in
-- the queue (the ready step b), and the steps c went to another queue
SELECT array_agg(task_id ORDER BY task_id) AS ebt2, array_agg(fence ORDER BY task_id) AS ebf2
FROM wf.tasks WHERE status = 'leased' AND worker = 'we' \gset
SELECT answers, step, deliveries FROM wf.complete_tasks_and_claim(
  :'ebt2'::bigint[] || ARRAY[(:'ebt'::bigint[])[1], 987654321],
  :'ebf2'::bigint[] || ARRAY[(:'ebf'::bigint[])[1], 1], NULL, 'bt_eb', 'we2', 5);
SELECT step, queue, status, count(*) FROM wf.tasks
WHERE run_id IN (SELECT run_id FROM wf.runs WHERE definition_name = 'bt_eb')
GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
-- a tenant that limits its tasks in flight: the batch's continuations are
-- written ready and leased by their ids while the limit leaves room, counted
-- against it; the queue's other ready task waits
SELECT wf.publish_definition('bt_lim', '{"steps": [
  {"name": "a", "queue": "bt_lim"}, {"name": "b", "queue": "bt_lim"}]}');
SELECT count(*) FROM wf.start_runs('bt_lim', ARRAY['{"l": 1}', '{"l": 2}', '{"l": 3}']::jsonb[]);
SELECT max_tasks_in_flight FROM wf.set_tenant_policy('default', '{"max_tasks_in_flight": 2}');
SELECT array_agg(task_id ORDER BY task_id) AS lt, array_agg(fence ORDER BY task_id) AS lf
FROM wf.claim_tasks('bt_lim', 'wl2', 5) \gset
SELECT cardinality(:'lt'::bigint[]) AS claimed_at_the_limit;
SELECT answers, step, input FROM wf.complete_tasks_and_claim(:'lt', :'lf', NULL, 'bt_lim', 'wl2', 5)
ORDER BY task_id;
SELECT t.step, coalesce(t.input, r.context->'input', r.input) AS input, t.status, t.worker
FROM wf.tasks t JOIN wf.runs r USING (run_id) WHERE t.queue = 'bt_lim' AND t.status <> 'completed'
ORDER BY t.task_id;
SELECT max_tasks_in_flight FROM wf.set_tenant_policy('default', '{"max_tasks_in_flight": null}');
-- refusals: those of the batch and of the claim, before anything is applied
SELECT task_id AS t, fence AS f FROM wf.tasks WHERE status = 'leased' AND worker = 'we2' \gset
SELECT * FROM wf.complete_tasks_and_claim(ARRAY[1, 2], ARRAY[1], NULL, 'bt_eb', 'we');
SELECT * FROM wf.complete_tasks_and_claim(ARRAY[:t], ARRAY[:f], NULL, 'bt_eb', 'we', 0);
SELECT * FROM wf.complete_tasks_and_claim(ARRAY[:t], ARRAY[:f], NULL, 'bt_eb', NULL);
SELECT * FROM wf.fail_tasks_and_claim(ARRAY[:t], ARRAY[:f], ARRAY['{}']::jsonb[], ARRAY[NULL]::boolean[],
                                      'bt_eb', 'we');
SELECT * FROM wf.fail_tasks_and_claim(ARRAY[:t], ARRAY[:f], ARRAY['{}']::jsonb[], NULL, '', 'we');
SELECT status, attempt FROM wf.tasks WHERE task_id = :t;
-- a failure in a batch with eager dispatch: the retry waits for its timer,
-- nothing to continue with, and the queue is empty: one row of verdicts
SELECT answers, task_id IS NULL AS nothing FROM wf.fail_tasks_and_claim(
  ARRAY[:t], ARRAY[:f], ARRAY['{"code": "later"}']::jsonb[], NULL, 'bt_eb', 'we2');
SELECT answers FROM wf.fail_tasks_and_claim(ARRAY[]::bigint[], ARRAY[]::bigint[], ARRAY[]::jsonb[],
                                            ARRAY[]::boolean[], 'bt_eb', 'we2');
SELECT bool_and(wf.verify_run(run_id)) AS verified FROM wf.runs WHERE definition_name = 'bt_eb';

-- scenario: the worker role may report and claim in batches, the
-- application role may start in batches
SELECT r.rolname, p.proname, has_function_privilege(r.rolname, p.oid, 'EXECUTE') AS may
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace,
     (VALUES ('wfengine_app'), ('wfengine_worker')) AS r(rolname)
WHERE n.nspname = 'wf' AND p.proname IN ('complete_and_claim', 'fail_and_claim', 'complete_tasks',
                                         'fail_tasks', 'start_runs', 'complete_tasks_and_claim',
                                         'fail_tasks_and_claim')
ORDER BY 1, 2;

DROP EXTENSION wfengine CASCADE;
