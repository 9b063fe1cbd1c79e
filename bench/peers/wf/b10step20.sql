-- wf_b10step20: claim 10 steps (one transaction), complete the 10 in one
-- statement (one transaction).
SELECT coalesce(string_agg(task_id::text, ','), '0') AS tids, coalesce(string_agg(fence::text, ','), '0') AS fs FROM wf.claim_tasks('bench20', :client_id::text, 10, '60 seconds')
\gset
SELECT count(wf.complete_task(t, f, '{"ok": true}')) FROM unnest(ARRAY[:tids]::bigint[], ARRAY[:fs]::bigint[]) u(t, f) WHERE t > 0;
