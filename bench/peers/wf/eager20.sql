-- wf_eager20: one step of a 20-step run with eager dispatch, one call and one
-- transaction per step: wf.complete_and_claim reports the lease a client
-- holds and hands it its next one (the same run's next step first).  Only a
-- client that holds nothing claims with wf.claim_tasks.  pgbench variables
-- tid = f = 0 to start with (the cell passes -D tid=0 -D f=0).
\if :tid > 0
SELECT coalesce(min(task_id), 0) AS tid, coalesce(min(fence), 0) AS f
  FROM wf.complete_and_claim(:tid, :f, '{"ok": true}', 'bench20', 'w:' || :client_id, 1, '60 seconds') \gset
\else
SELECT coalesce(min(task_id), 0) AS tid, coalesce(min(fence), 0) AS f
  FROM wf.claim_tasks('bench20', 'w:' || :client_id, 1, '60 seconds') \gset
\endif
