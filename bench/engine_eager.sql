-- bench/engine_eager.sql -- eager dispatch: one call and one transaction per
-- step.  A worker that holds a lease reports its result and gets its next
-- lease in the same call (wf.complete_and_claim): the next step of the same
-- run when it is on this queue, else the next task of the queue.  Only a
-- worker that holds nothing (its first pass, or the queue was empty) claims
-- with wf.claim_tasks.  Compare with engine_cycle.sql: claim and complete,
-- two transactions per step.
-- pgbench variables: queue, and task_id = fence = 0 to start with (run.sh
-- passes -D task_id=0 -D fence=0).  The lease a client holds is kept in its
-- pgbench variables from one transaction to the next; run.sh counts steps
-- from the task_completed events.
\if :task_id > 0
SELECT coalesce(min(task_id), 0) AS task_id, coalesce(min(fence), 0) AS fence
  FROM wf.complete_and_claim(:task_id, :fence, '{"ok": true}', :queue, 'w:' || :client_id, 1) \gset
\else
SELECT coalesce(min(task_id), 0) AS task_id, coalesce(min(fence), 0) AS fence
  FROM wf.claim_tasks(:queue, 'w:' || :client_id, 1) \gset
\endif
