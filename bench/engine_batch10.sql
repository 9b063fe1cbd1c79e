-- bench/engine_batch10.sql -- batches of 10: one claim of up to 10 tasks
-- (one transaction), then one wf.complete_tasks of all of them (one
-- transaction): two commits per 10 steps, as a worker that works on ten
-- tasks at once does.  Compare with engine_cycle.sql (two per step).
-- pgbench variable: queue.  An empty claim completes nothing.
SELECT coalesce(array_agg(task_id), '{}') AS ids, coalesce(array_agg(fence), '{}') AS fences
  FROM wf.claim_tasks(:queue, 'w:' || :client_id, 10) \gset
SELECT count(*) FROM wf.complete_tasks(:ids::bigint[], :fences::bigint[]);
