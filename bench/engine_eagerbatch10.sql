-- bench/engine_eagerbatch10.sql -- batches of 10 with eager dispatch: one
-- call and one transaction per 10 steps.  A worker reports the (up to) 10
-- leases it holds and gets its next 10 in the same call
-- (wf.complete_tasks_and_claim): the next steps of the same runs first,
-- written leased, then the next tasks of the queue.  A worker that holds
-- nothing reports an empty batch, which is a claim without a wait.
-- Compare with engine_batch10.sql: two transactions per 10 steps.
-- pgbench variables: queue, and ids = fences = '{}' to start with (run.sh
-- passes -D ids={} -D fences={}; -M prepared makes them parameters).
SELECT coalesce(array_agg(task_id) FILTER (WHERE task_id IS NOT NULL), '{}') AS ids,
       coalesce(array_agg(fence) FILTER (WHERE task_id IS NOT NULL), '{}') AS fences
  FROM wf.complete_tasks_and_claim(:ids::bigint[], :fences::bigint[], NULL, :queue,
                                   'w:' || :client_id, 10) \gset
