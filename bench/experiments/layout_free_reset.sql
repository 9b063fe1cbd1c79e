-- bench/experiments/layout_free_reset.sql -- bench/peers/wf/reset.sql, then
-- the schema side of issue 31's layout-free experiment (see
-- layout_free.patch, whose library must be installed).  psql variables: those
-- of reset.sql, and drop2 (1 = also drop the two indexes that carry
-- guarantees, for a bound).  Measurement only: the engine is not whole after
-- this.
\ir ../peers/wf/reset.sql
ALTER TABLE wf.tasks ALTER COLUMN idempotency_key DROP NOT NULL;
DROP INDEX wf.tasks_leased_idx;
\if :drop2
DROP INDEX wf.tasks_deadline_idx;
DROP INDEX wf.events_task_completed_idx;
\endif
SELECT pg_catalog.format('ALTER DATABASE %I SET wfexp.noctx = on', pg_catalog.current_database()) \gexec
CHECKPOINT;
