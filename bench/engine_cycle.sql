-- bench/engine_cycle.sql -- one claim-and-complete cycle through the engine's API.
-- Two transactions, as a worker does them: the claim commits (the lease is
-- durable while the work runs), then the result commits.
-- pgbench variable: queue (-D queue=q1).  An empty claim does nothing; run.sh
-- counts cycles from the task_completed events, not from pgbench transactions.
SELECT coalesce(min(task_id), 0) AS task_id, coalesce(min(fence), 0) AS fence
  FROM wf.claim_tasks(:queue, 'w:' || :client_id, 1) \gset
\if :task_id > 0
SELECT wf.complete_task(:task_id, :fence, '{"ok": true}');
\endif
