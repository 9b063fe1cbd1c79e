-- bench/notify_cycle.sql -- one claim-and-complete cycle for
-- bench/notify_throughput.sh: the claim commits (it notifies nothing), then
-- the completion commits (it notifies the run channel, and the next step's
-- queue when there is one).  pgbench variable: queue.
SELECT coalesce(min(task_id), 0) AS task_id, coalesce(min(fence), 0) AS fence
  FROM wf.claim_tasks(:queue, 'w:' || :client_id, 1) \gset
\if :task_id > 0
SELECT wf.complete_task(:task_id, :fence, '{"ok": true}');
\endif
