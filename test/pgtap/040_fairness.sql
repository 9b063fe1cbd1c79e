-- test/pgtap/040_fairness.sql
--
-- A flood of one tenant does not stand in front of another (issue 6):
-- tenant f_a has 20,000 ready tasks on queue "shared", tenant f_b then
-- starts 3 runs on its queue of the same name.  f_b's claim gets its 3
-- tasks, in its own FIFO order, and reads a handful of rows to do it
-- (counted from pg_stat_xact_user_tables: index fetches of wf.tasks in
-- this transaction), not f_a's backlog; wf.explain shows nothing ahead of
-- f_b's tasks; f_a's tasks are all still ready.  No timing is asserted
-- (bench/tenant_fairness.sh measures the latency).
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
SELECT plan(5);

SELECT wf.create_tenant(t) FROM unnest(ARRAY['f_a', 'f_b']) t;
CREATE ROLE tap_f_a IN ROLE wfengine_admin, wfengine_worker, wf_tenant_f_a;
CREATE ROLE tap_f_b IN ROLE wfengine_admin, wfengine_worker, wf_tenant_f_b;
CREATE TEMP TABLE fb_runs (n integer, run_id uuid);
GRANT ALL ON fb_runs TO PUBLIC;

SET LOCAL SESSION AUTHORIZATION tap_f_a;
SELECT wf.publish_definition('job', '{"steps": [{"name": "s", "queue": "shared"}]}');
SELECT count(wf.start_run('job', jsonb_build_object('i', i))) FROM generate_series(1, 20000) i;
SET LOCAL SESSION AUTHORIZATION tap_f_b;
SELECT wf.publish_definition('job', '{"steps": [{"name": "s", "queue": "shared"}]}');
INSERT INTO fb_runs SELECT i, wf.start_run('job', jsonb_build_object('i', i)) FROM generate_series(1, 3) i;
RESET SESSION AUTHORIZATION;


CREATE FUNCTION pg_temp.fb_ahead() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    res text;
BEGIN
    SET LOCAL SESSION AUTHORIZATION tap_f_b;
    SELECT string_agg(wf.explain(run_id)->'details'->>'ahead', ',' ORDER BY n) INTO res FROM fb_runs;
    RESET SESSION AUTHORIZATION;
    RETURN res;
END
$$;
SELECT is(pg_temp.fb_ahead(), '0,1,2', 'f_b''s tasks have only its own ahead of them, not f_a''s 20,000');

CREATE TEMP TABLE fetched AS
SELECT coalesce(idx_tup_fetch, 0) AS before FROM pg_stat_xact_user_tables WHERE relid = 'wf.tasks'::regclass;
CREATE FUNCTION pg_temp.fb_claim() RETURNS TABLE (n integer) LANGUAGE plpgsql AS $$
BEGIN
    SET LOCAL SESSION AUTHORIZATION tap_f_b;
    RETURN QUERY SELECT f.n FROM wf.claim_tasks('shared', 'fb-worker', 10) c JOIN fb_runs f USING (run_id)
                 ORDER BY c.task_id;
    RESET SESSION AUTHORIZATION;
END
$$;
CREATE TEMP TABLE fb_claimed AS SELECT * FROM pg_temp.fb_claim();
CREATE TEMP TABLE fetched_by_claim AS
SELECT coalesce(s.idx_tup_fetch, 0) - f.before AS n FROM pg_stat_xact_user_tables s, fetched f
WHERE s.relid = 'wf.tasks'::regclass;
SELECT is((SELECT string_agg(n::text, ',') FROM fb_claimed), '1,2,3',
          'f_b''s claim gets its three tasks, oldest first, past f_a''s flood');
SELECT diag('task rows fetched by index during the claim: ' || n) FROM fetched_by_claim;
SELECT cmp_ok((SELECT n FROM fetched_by_claim), '<=', 20::bigint,
              'and fetches a handful of task rows by index to do it, not the backlog');
SELECT is((SELECT count(*) FROM wf.tasks WHERE tenant_id = 'f_a' AND status = 'ready'), 20000::bigint,
          'f_a''s 20,000 tasks are all still ready');
SELECT is((SELECT count(*) FROM wf.tasks WHERE tenant_id = 'f_b' AND status = 'leased'), 3::bigint,
          'f_b''s three are leased');

SELECT * FROM finish();
ROLLBACK;
