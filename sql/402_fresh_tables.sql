-- scenario: timers and deadlines are fired by index before ANALYZE has seen the tables
-- (a bulk start, a restored or moved partition): the primary keys of
-- wf.runs, wf.timers and wf.tasks are (id, tenant_id), so an id alone is
-- not unique to the planner, and without statistics it took a default
-- selectivity and joined each due timer to a sequential scan of wf.runs
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
-- no statistics for the length of the test
ALTER TABLE wf.runs SET (autovacuum_enabled = false);
ALTER TABLE wf.timers SET (autovacuum_enabled = false);
ALTER TABLE wf.tasks SET (autovacuum_enabled = false);
SELECT wf.create_tenant('ft');
CREATE ROLE regress_ft LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_ft;
SET SESSION AUTHORIZATION regress_ft;
SELECT wf.publish_definition('ft', '{"steps": [
  {"name": "nap", "type": "sleep", "until": "$.input.at"},
  {"name": "after", "queue": "ft_q"}]}') AS version;
-- 8,000 runs asleep until tomorrow, then 5 whose sleep is over
DO $$ BEGIN FOR i IN 1..8 LOOP
  PERFORM wf.start_runs('ft', array_fill(jsonb_build_object('at', now() + interval '1 day'), ARRAY[1000]));
END LOOP; END $$;
SELECT count(*) AS started
FROM (SELECT wf.start_run('ft', jsonb_build_object('at', now() - interval '1 second')) FROM generate_series(1, 5)) s;
RESET SESSION AUTHORIZATION;
SELECT count(*) AS never_analysed FROM pg_stats
WHERE schemaname = 'wf' AND tablename IN ('runs', 'timers', 'tasks');
BEGIN;
SELECT pg_stat_get_xact_blocks_fetched('wf.runs'::regclass) AS before \gset
SELECT wf.tick() AS fired;
-- a scan of wf.runs for each timer would read every page of it (over 200)
-- five times
SELECT pg_stat_get_xact_blocks_fetched('wf.runs'::regclass) - :before < 100 AS read_by_index,
       pg_relation_size('wf.runs') / 8192 > 200 AS table_is_larger;
COMMIT;
SELECT count(*) AS past_their_sleep FROM wf.tasks WHERE queue = 'ft_q' AND status = 'ready';
-- a lease that expires: the deadline is fired by index too
SET SESSION AUTHORIZATION regress_ft;
SELECT count(*) AS claimed FROM wf.claim_tasks('ft_q', 'w', 5, '1 second');
RESET SESSION AUTHORIZATION;
SELECT pg_sleep(1.1);
BEGIN;
SELECT pg_stat_get_xact_blocks_fetched('wf.runs'::regclass) AS before \gset
SELECT wf.tick() AS fired;
SELECT pg_stat_get_xact_blocks_fetched('wf.runs'::regclass) - :before < 100 AS read_by_index;
COMMIT;
SELECT count(*) AS delivered_again FROM wf.tasks WHERE queue = 'ft_q' AND status = 'ready' AND lease_expirations = 1;
ALTER TABLE wf.runs RESET (autovacuum_enabled);
ALTER TABLE wf.timers RESET (autovacuum_enabled);
ALTER TABLE wf.tasks RESET (autovacuum_enabled);
DROP OWNED BY regress_ft;
DROP ROLE regress_ft;
DROP ROLE wf_tenant_ft;
