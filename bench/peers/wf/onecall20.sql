-- wf_onecall20: claim + complete of one step of a 20-step run in one statement
-- and one transaction.
SELECT wf.complete_task(c.task_id, c.fence, '{"ok": true}') FROM wf.claim_tasks('bench20', :client_id::text, 1, '60 seconds') c;
