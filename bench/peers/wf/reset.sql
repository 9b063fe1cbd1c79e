-- bench/peers/wf/reset.sql -- a fresh engine in the wf database before each
-- wf cell (as ../shared/perf/wfcmp/reset_wf.sql): the extension dropped and
-- created again, the two definitions, :n1 ready 1-step runs (queue bench1)
-- and :n20 ready 20-step runs (queue bench20), VACUUM ANALYZE, CHECKPOINT.
--
-- psql variables (a cell's setup column: wf/reset.sql:n20=4000,small=0,...):
--   n1, n20   runs to pre-start
--   small     1 = start the runs with the input of bench/setup.sql
--             ({"n": i}) instead of the 200-byte payload of the peers' jobs
--   noav      1 = autovacuum off on the engine's tables, as bench/setup.sql
--   freeze    1 = VACUUM (FREEZE, ANALYZE) as bench/run.sh, not VACUUM ANALYZE
--   taskff, runff  the fillfactor of wf.tasks and wf.runs, set before the
--             runs start; 0 (the default) leaves the extension's (wf.runs
--             70 since 0.3.0, wf.tasks PostgreSQL's 100)
\set ON_ERROR_STOP on
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
SELECT :taskff > 0 AS set_taskff, :runff > 0 AS set_runff \gset
\if :set_taskff
ALTER TABLE wf.tasks SET (fillfactor = :taskff);
\endif
\if :set_runff
ALTER TABLE wf.runs SET (fillfactor = :runff);
\endif
SELECT wf.publish_definition('bench1', '{"steps":[{"name":"only","type":"task","queue":"bench1"}]}');
SELECT wf.publish_definition('bench20', jsonb_build_object('steps',
  (SELECT jsonb_agg(jsonb_build_object('name', 's' || g, 'type', 'task', 'queue', 'bench20')) FROM generate_series(1, 20) g)));
\if :small
SELECT count(wf.start_run('bench1', jsonb_build_object('n', g))) FROM generate_series(1, :n1) g;
SELECT count(wf.start_run('bench20', jsonb_build_object('n', g))) FROM generate_series(1, :n20) g;
\else
SELECT count(wf.start_run('bench1', '{"step":"charge_card","attempt":1,"worker":"worker-07","output":{"status":"ok","amount_cents":12999,"currency":"EUR","provider_ref":"ch_3NfA9e2eZvKYlo2C1x8QxYzA","captured":true},"duration_ms":42}'::jsonb)) FROM generate_series(1, :n1) g;
SELECT count(wf.start_run('bench20', '{"step":"charge_card","attempt":1,"worker":"worker-07","output":{"status":"ok","amount_cents":12999,"currency":"EUR","provider_ref":"ch_3NfA9e2eZvKYlo2C1x8QxYzA","captured":true},"duration_ms":42}'::jsonb)) FROM generate_series(1, :n20) g;
\endif
\if :noav
ALTER TABLE wf.runs SET (autovacuum_enabled = off);
ALTER TABLE wf.events SET (autovacuum_enabled = off);
ALTER TABLE wf.tasks SET (autovacuum_enabled = off);
ALTER TABLE wf.timers SET (autovacuum_enabled = off);
\endif
\if :freeze
VACUUM (FREEZE, ANALYZE);
\else
VACUUM ANALYZE;
\endif
CHECKPOINT;
