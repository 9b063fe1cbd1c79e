-- wf_batch10step20: claim 10 steps of 20-step runs (one transaction), report
-- the 10 with one wf.complete_tasks (one transaction); an empty claim reports
-- task 0, which answers unknown_task and changes nothing.
SELECT coalesce(string_agg(task_id::text, ','), '0') AS tids, coalesce(string_agg(fence::text, ','), '0') AS fs FROM wf.claim_tasks('bench20', :client_id::text, 10, '60 seconds')
\gset
SELECT count(*) FROM wf.complete_tasks(ARRAY[:tids]::bigint[], ARRAY[:fs]::bigint[]);
