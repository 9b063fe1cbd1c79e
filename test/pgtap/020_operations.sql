-- test/pgtap/020_operations.sql
--
-- Invariants of the engine over runs driven at random through operator
-- commands and flow steps: pause, resume, cancel (with compensation, of
-- running and of failed runs), sagas that compensate their failures
-- ("on_failure": "compensate"), terminate, skip, retry after failure,
-- results held while paused,
-- timers held while paused, subworkflow and parallel child runs, and
-- duplicate and stale reports on the way.  After the drive:
--
--   * wf.verify_run is true for every run, events are gap-free;
--   * no finished or paused run has a claimable attempt;
--   * a timer is held only for a paused run;
--   * a cancelled or compensated run has no compensation left, its
--     compensations ran newest work first, and each undid a visit that
--     did work;
--   * a saga never ends failed, and a compensated run records its failure;
--   * a step visit has at most one accepted completion;
--   * a finished parent has no child that is still running or paused;
--   * operators' events all carry a reason and an actor.
--
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
SET LOCAL wfengine.poison_threshold = 0;
SELECT plan(16);
SELECT setseed(0.42);

SELECT wf.publish_definition('ops_child', $${"steps": [{"name": "k", "queue": "ops_q"}]}$$) AS child \gset
SELECT wf.publish_definition('ops_saga', $${"steps": [
  {"name": "a", "queue": "ops_q", "compensate": {"queue": "ops_undo"}, "retry": {"max_attempts": 2, "initial_interval": "1ms"}},
  {"name": "b", "queue": "ops_q", "compensate": {"queue": "ops_undo", "retry": {"max_attempts": 2, "initial_interval": "1ms"}}},
  {"name": "nap", "type": "sleep", "duration": "1ms"},
  {"name": "fan", "type": "parallel", "branches": [
     {"steps": [{"name": "x", "queue": "ops_q"}]},
     {"steps": [{"name": "y", "queue": "ops_q"}, {"name": "z", "queue": "ops_q"}]}]},
  {"name": "sub", "type": "subworkflow", "definition": "ops_child", "version": 1},
  {"name": "c", "queue": "ops_q", "compensate": {"queue": "ops_undo"}, "retry": {"max_attempts": 1}}]}$$) AS saga \gset

-- the same steps, as a saga: a failure undoes the completed steps
SELECT wf.publish_definition('ops_sagaf', (SELECT d.spec || '{"on_failure": "compensate"}'
                                           FROM wf.definitions d WHERE d.name = 'ops_saga')) AS sagaf \gset

SELECT count(wf.start_run('ops_saga', jsonb_build_object('i', i))) FROM generate_series(1, 40) i;
SELECT count(wf.start_run('ops_sagaf', jsonb_build_object('i', i))) FROM generate_series(1, 20) i;

-- the driver: rounds of random worker reports and operator commands
CREATE FUNCTION pg_temp.drive(rounds integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t record;
    r record;
    k integer;
    dice float8;
BEGIN
    FOR k IN 1 .. rounds LOOP
        -- workers: complete most, fail some, report some twice
        FOR t IN SELECT * FROM wf.claim_tasks('ops_q', 'w', 100) UNION ALL
                 SELECT * FROM wf.claim_tasks('ops_undo', 'w', 100) LOOP
            dice := random();
            -- step c (one attempt) fails often: failed runs, and sagas that compensate
            IF dice < 0.12 OR (t.step = 'c' AND dice < 0.5) THEN
                PERFORM wf.fail_task(t.task_id, t.fence, '{"code": "flaky"}', true);
            ELSIF dice < 0.35 THEN
                NULL;       -- keeps its lease: in flight across the next commands
            ELSE
                PERFORM wf.complete_task(t.task_id, t.fence, jsonb_build_object('by', t.step));
                IF dice > 0.95 THEN
                    PERFORM wf.complete_task(t.task_id, t.fence, '{"again": true}');
                END IF;
            END IF;
        END LOOP;
        -- workers still holding a lease report now and then
        FOR t IN SELECT task_id, fence FROM wf.tasks WHERE status = 'leased' AND random() < 0.5 LOOP
            PERFORM wf.complete_task(t.task_id, t.fence, '{"late": true}');
        END LOOP;
        -- operators
        FOR r IN SELECT x.run_id, x.status, x.current_step,
                        EXISTS (SELECT 1 FROM wf.tasks lt WHERE lt.task_id = x.current_task
                                AND lt.status = 'leased') AS in_flight
                 FROM wf.runs x
                 WHERE x.definition_name IN ('ops_saga', 'ops_sagaf') ORDER BY x.run_id LOOP
            dice := random();
            BEGIN
                IF r.status = 'running' AND (dice < 0.08 OR (r.in_flight AND dice < 0.4)) THEN
                    PERFORM wf.pause_run(r.run_id, 'random pause');
                ELSIF r.status = 'paused' AND dice < 0.5 THEN
                    PERFORM wf.resume_run(r.run_id, 'random resume');
                ELSIF r.status IN ('running', 'paused') AND dice > 0.97 THEN
                    PERFORM wf.cancel_run(r.run_id, 'random cancel');
                ELSIF r.status = 'running' AND dice BETWEEN 0.5 AND 0.52 THEN
                    PERFORM wf.skip_step(r.run_id, '{"skipped": true}', 'random skip');
                ELSIF r.status IN ('failed', 'compensation_failed') AND dice < 0.3 THEN
                    PERFORM wf.retry_step(r.run_id, 'random retry');
                ELSIF r.status = 'failed' AND dice > 0.8 AND left(r.run_id::text, 1) < '8' THEN
                    -- half the runs may be cancelled once failed; the others stay failed
                    PERFORM wf.cancel_run(r.run_id, 'random cancel of a failed run');
                ELSIF r.status = 'running' AND dice BETWEEN 0.7 AND 0.705 THEN
                    PERFORM wf.terminate_run(r.run_id, 'random terminate');
                END IF;
            EXCEPTION WHEN object_not_in_prerequisite_state THEN
                NULL;       -- e.g. skipping an approval-like step that refuses
            END;
        END LOOP;
        -- time passes: backoffs, sleeps and child_done timers come due
        UPDATE wf.timers SET fire_at = now() - interval '1 ms'
        WHERE status = 'pending' AND fire_at > now() AND fire_at < 'infinity' AND kind <> 'run_timeout';
        PERFORM wf.tick(1000);
    END LOOP;
END
$$;
SELECT pg_temp.drive(40);
-- then everything paused resumes and everything runs out
SELECT count(wf.resume_run(run_id, 'wrap up')) >= 0 FROM wf.runs WHERE status = 'paused';
CREATE FUNCTION pg_temp.finish(rounds integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t record;
    k integer;
BEGIN
    FOR k IN 1 .. rounds LOOP
        FOR t IN SELECT * FROM wf.claim_tasks('ops_q', 'w', 1000) UNION ALL
                 SELECT * FROM wf.claim_tasks('ops_undo', 'w', 1000) LOOP
            PERFORM wf.complete_task(t.task_id, t.fence, jsonb_build_object('by', t.step));
        END LOOP;
        FOR t IN SELECT task_id, fence FROM wf.tasks WHERE status = 'leased' LOOP
            PERFORM wf.complete_task(t.task_id, t.fence, '{"late": true}');
        END LOOP;
        UPDATE wf.timers SET fire_at = now() - interval '1 ms'
        WHERE status = 'pending' AND fire_at > now() AND fire_at < 'infinity' AND kind <> 'run_timeout';
        PERFORM wf.tick(1000);
    END LOOP;
END
$$;
SELECT pg_temp.finish(20);

SELECT is((SELECT count(*) FROM wf.runs WHERE status IN ('running', 'paused', 'cancelling', 'compensating')), 0::bigint,
          'every run has run out');
SELECT ok((SELECT count(DISTINCT status) FROM wf.runs WHERE definition_name IN ('ops_saga', 'ops_sagaf')) >= 3,
          'the drive ended runs in several ways');
SELECT ok((SELECT bool_and(wf.verify_run(run_id)) FROM wf.runs), 'wf.verify_run holds for every run');
SELECT is((SELECT count(*) FROM (SELECT run_id FROM wf.event_log GROUP BY run_id
                                 HAVING max(seq) <> count(*) OR min(seq) <> 1) g), 0::bigint,
          'events are gap-free per run');
SELECT is((SELECT count(*) FROM wf.tasks t JOIN wf.runs r USING (run_id)
           WHERE t.status IN ('ready', 'leased') AND r.status NOT IN ('running', 'cancelling', 'compensating')), 0::bigint,
          'no finished or paused run has a live attempt');
SELECT is((SELECT count(*) FROM wf.timers tm JOIN wf.runs r USING (run_id)
           WHERE tm.status = 'pending' AND tm.outcome = 'held' AND r.status <> 'paused'), 0::bigint,
          'a timer is held only for a paused run');
SELECT is((SELECT count(*) FROM wf.runs
           WHERE status IN ('cancelled', 'compensated') AND jsonb_array_length(context->'compensation'->'pending') > 0), 0::bigint,
          'a cancelled or compensated run has no compensation left');
-- compensations ran newest work first: the order of compensate:<s> visits is the
-- reverse of the order in which those visits completed (or were lost) before the cancel
SELECT is((SELECT count(*) FROM wf.runs r
           WHERE r.status IN ('cancelled', 'compensated')
             AND (SELECT coalesce(jsonb_agg(d->'step' ORDER BY o), '[]') FROM jsonb_array_elements(r.context->'compensation'->'done') WITH ORDINALITY x(d, o))
                 IS DISTINCT FROM
                 (SELECT coalesce(jsonb_agg(p->'step' ORDER BY o), '[]') FROM jsonb_array_elements(
                      (SELECT e.payload->'pending' FROM wf.events e WHERE e.run_id = r.run_id
                       AND e.type = 'compensation_started')) WITH ORDINALITY y(p, o))), 0::bigint,
          'each cancelled or compensated run ran its compensations in the order fixed at compensation_started');
SELECT is((SELECT count(*) FROM wf.runs
           WHERE (definition_name = 'ops_sagaf' AND status = 'failed')
              OR (definition_name <> 'ops_sagaf' AND status IN ('compensating', 'compensated'))), 0::bigint,
          'a saga never ends failed, and only a saga compensates a failure by itself');
SELECT is((SELECT count(*) FROM wf.runs r
           WHERE r.status = 'compensated'
             AND (NOT r.context ? 'failure' OR NOT EXISTS (
                      SELECT 1 FROM wf.events e WHERE e.run_id = r.run_id AND e.type = 'compensation_requested'
                        AND e.payload->>'reason' = r.context->'failure'->>'reason'))), 0::bigint,
          'a compensated run records the failure it undid');
SELECT ok((SELECT count(*) FROM wf.runs WHERE status = 'compensated') > 0,
          'the drive compensated some sagas');
SELECT ok(EXISTS (SELECT 1 FROM wf.events WHERE type = 'cancel_requested' AND payload->>'old_status' = 'failed'),
          'the drive cancelled some failed runs');
SELECT is((SELECT count(*) FROM wf.runs r, jsonb_array_elements(
               (SELECT e.payload->'pending' FROM wf.events e WHERE e.run_id = r.run_id AND e.type = 'compensation_started')) p
           WHERE NOT EXISTS (SELECT 1 FROM wf.tasks t WHERE t.run_id = r.run_id AND t.step = p->>'step'
                               AND t.visit = (p->>'visit')::int AND t.status IN ('completed', 'cancelled'))
             -- a completed attempt's row is deleted (since 0.3.0): its task_completed
             AND NOT EXISTS (SELECT 1 FROM wf.events c WHERE c.run_id = r.run_id AND c.type = 'task_completed'
                               AND c.step = p->>'step' AND (c.payload->>'visit')::int = (p->>'visit')::int)),
          0::bigint, 'every compensation undoes a visit whose attempt completed or was lost');
SELECT is((SELECT count(*) FROM (SELECT run_id, step, payload->'visit' FROM wf.events
                                 WHERE type = 'task_completed' GROUP BY 1, 2, 3 HAVING count(*) > 1) d), 0::bigint,
          'a step visit has at most one accepted completion');
SELECT is((SELECT count(*) FROM wf.runs c JOIN wf.runs p ON p.run_id = c.parent_run_id
           WHERE p.finished_at IS NOT NULL AND c.status IN ('running', 'paused')), 0::bigint,
          'a finished parent has no running or paused child');
SELECT is((SELECT count(*) FROM wf.events
           WHERE type IN ('run_paused', 'run_resumed', 'cancel_requested', 'step_skipped', 'step_retried', 'run_terminated')
             AND (coalesce(payload->>'reason', '') = '' OR actor IS NULL)), 0::bigint,
          'every operator event records a reason and an actor');

SELECT * FROM finish();
ROLLBACK;
