-- wf_eagerb10step20: steps of 20-step runs in batches of 10 with eager
-- dispatch, one call and one transaction per batch:
-- wf.complete_tasks_and_claim reports the (up to) 10 leases a client holds
-- and hands it its next 10, the same runs' next steps first, written leased.
-- A client that holds nothing reports task 0 (verdict unknown_task, which
-- changes nothing) and gets its first 10 from the claim.  pgbench variables
-- tids = fs = 0 to start with (the cell passes -D tids=0 -D fs=0).
SELECT coalesce(string_agg(task_id::text, ','), '0') AS tids, coalesce(string_agg(fence::text, ','), '0') AS fs
  FROM wf.complete_tasks_and_claim(ARRAY[:tids]::bigint[], ARRAY[:fs]::bigint[], NULL, 'bench20', :client_id::text, 10, '60 seconds') \gset
