-- scenario: a run's history is read by index, whatever size wf.tasks had when the kept plan was made
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.create_tenant('lp');
CREATE ROLE regress_lp LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_lp;
SET SESSION AUTHORIZATION regress_lp;
SELECT wf.publish_definition('lp', '{"steps": [{"name": "a", "queue": "lp_q"}]}') AS version;
SELECT wf.start_run('lp', '{}') AS run \gset
-- analysed and verified ten times while wf.tasks holds one row: the plan
-- cache keeps a generic plan of each statement, which for a one-page table
-- would be a scan of the whole table (the online verification of a moved
-- partition, 1,000,000 runs, read all of wf.tasks for every run that way)
RESET SESSION AUTHORIZATION;
ANALYZE wf.tasks;
SET SESSION AUTHORIZATION regress_lp;
SELECT count(*) FILTER (WHERE wf.verify_run(:'run')) AS verified FROM generate_series(1, 10);
-- the table grows (5,000 attempts); nothing plans again
DO $$ BEGIN FOR i IN 1..5 LOOP PERFORM wf.start_runs('lp', array_fill('{}'::jsonb, ARRAY[1000])); END LOOP; END $$;
SELECT count(*) AS runs FROM wf.list_runs('{}', 10000);
BEGIN;
SELECT pg_stat_get_xact_blocks_fetched('wf.tasks'::regclass) AS before \gset
SELECT wf.verify_run(:'run') AS verified;
-- a scan of the table would read every page of it (over 50)
SELECT pg_stat_get_xact_blocks_fetched('wf.tasks'::regclass) - :before < 10 AS read_by_index,
       pg_relation_size('wf.tasks') / 8192 > 50 AS table_is_larger;
COMMIT;
RESET SESSION AUTHORIZATION;
DROP OWNED BY regress_lp;
DROP ROLE regress_lp;
DROP ROLE wf_tenant_lp;
