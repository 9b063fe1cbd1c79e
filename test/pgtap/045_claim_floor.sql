-- test/pgtap/045_claim_floor.sql
--
-- The claim floor (src/claimfloor.c, issue 13): a claim of a queue of one
-- priority reads the claim index from where the queue's last claim was,
-- so that the entries of attempts claimed before it, which nothing can
-- remove while a snapshot that still sees them is open, are not visited.
--
-- Everything happens inside one transaction that is rolled back, which is
-- itself such a snapshot: every attempt this transaction claims leaves an
-- index entry behind that no scan can mark dead before it ends.  Counted
-- from pg_stat_get_xact_tuples_returned of tasks_claim_idx: the entries
-- the index returned to the claims of this transaction, dead or not.
--
--   * after 300 attempts were claimed, a claim reads a handful of entries,
--     not the 300 left behind (the least of five claims is taken: one
--     claim a second reads from the start on purpose);
--   * an attempt of a higher priority scheduled on the queue afterwards is
--     claimed first, before the older ones of the lower priority;
--   * an attempt moved behind the floor behind the engine's back (its
--     available_at set a day back) is still claimed, and the queue drains
--     completely: no attempt is lost behind a floor.
--
-- No timing is asserted.

\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
SET LOCAL client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS wfengine;
SELECT plan(5);

-- a queue of its own (the floor of a queue lives in shared memory and
-- outlasts this rolled-back transaction)
SELECT set_config('floor.q', 'floor_q_' || txid_current(), true) AS q \gset
SELECT wf.publish_definition('floor_one', jsonb_build_object('steps',
    jsonb_build_array(jsonb_build_object('name', 's', 'queue', :'q')))) \gset
SELECT wf.publish_definition('floor_urgent', jsonb_build_object('steps',
    jsonb_build_array(jsonb_build_object('name', 's', 'queue', :'q', 'priority', 5)))) \gset
SELECT count(wf.start_run('floor_one', jsonb_build_object('i', i))) FROM generate_series(1, 400) i \gset

-- 300 claims of one attempt each, each completed
DO $$
DECLARE
    c record;
BEGIN
    FOR i IN 1 .. 300 LOOP
        SELECT * INTO c FROM wf.claim_tasks(current_setting('floor.q'), 'floor-w', 1, '5 minutes');
        PERFORM wf.complete_task(c.task_id, c.fence, '{}');
    END LOOP;
END
$$;

CREATE FUNCTION pg_temp.claim_reads() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    before bigint := pg_stat_get_xact_tuples_returned('wf.tasks_claim_idx'::regclass);
    c record;
BEGIN
    SELECT * INTO c FROM wf.claim_tasks(current_setting('floor.q'), 'floor-w', 1, '5 minutes');
    PERFORM wf.complete_task(c.task_id, c.fence, '{}');
    RETURN pg_stat_get_xact_tuples_returned('wf.tasks_claim_idx'::regclass) - before;
END
$$;
CREATE TEMP TABLE reads AS SELECT pg_temp.claim_reads() AS n FROM generate_series(1, 5);
SELECT diag('claim index entries read by the least of five claims: ' || min(n)
            || ' (the most: ' || max(n) || ')') FROM reads;
SELECT cmp_ok((SELECT min(n) FROM reads), '<=', 20::bigint,
              'after 300 claims, a claim reads a handful of index entries, not the 300 left behind');
SELECT is((SELECT count(*) FROM wf.events e JOIN wf.runs r USING (run_id)
           WHERE e.type = 'task_completed' AND r.definition_name IN ('floor_one', 'floor_urgent')), 305::bigint,
          'and 305 attempts were claimed and completed, one each time');

-- a higher priority on the same queue goes first
SELECT wf.start_run('floor_urgent', '{"urgent": true}') AS urgent_run \gset
SELECT is((SELECT run_id FROM wf.claim_tasks(current_setting('floor.q'), 'floor-w', 1, '5 minutes')), :'urgent_run'::uuid,
          'an attempt of a higher priority scheduled later is claimed before the older ones');

-- an attempt moved behind the floor is not lost
UPDATE wf.tasks SET available_at = now() - interval '1 day'
WHERE task_id = (SELECT max(task_id) FROM wf.tasks WHERE queue = :'q' AND status = 'ready')
RETURNING task_id AS hidden_task \gset
CREATE TEMP TABLE drained (task_id bigint);
DO $$
DECLARE
    n bigint;
BEGIN
    LOOP
        INSERT INTO drained SELECT c.task_id FROM wf.claim_tasks(current_setting('floor.q'), 'floor-w', 10, '5 minutes') c;
        GET DIAGNOSTICS n = ROW_COUNT;
        EXIT WHEN n = 0;
    END LOOP;
END
$$;
SELECT ok(EXISTS (SELECT 1 FROM drained WHERE task_id = :hidden_task),
          'an attempt moved behind the floor behind the engine''s back is still claimed');
SELECT is((SELECT count(*) FROM wf.tasks WHERE queue = :'q' AND status = 'ready'), 0::bigint,
          'the queue drains completely: nothing is left behind a floor');

SELECT * FROM finish();
ROLLBACK;
