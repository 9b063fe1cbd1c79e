-- wf_step20: one step of a 20-step run as a worker does it, two transactions:
-- wf.claim_tasks (the lease commits), then wf.complete_task.  An empty claim
-- does nothing (the rate is counted from task_completed events).
\set tid 0
SELECT task_id AS tid, fence AS f FROM wf.claim_tasks('bench20', :client_id::text, 1, '60 seconds')
\aset
\if :tid > 0
SELECT wf.complete_task(:tid, :f, '{"ok": true}');
\endif
