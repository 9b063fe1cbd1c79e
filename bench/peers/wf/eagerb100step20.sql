-- wf_eagerb100step20: wf_eagerb10step20 with batches of 100: one
-- wf.complete_tasks_and_claim per 100 steps reports the (up to) 100 leases a
-- client holds and hands it its next 100, the same runs' next steps first,
-- written leased.  pgbench variables tids = fs = 0 to start with.
SELECT coalesce(string_agg(task_id::text, ','), '0') AS tids, coalesce(string_agg(fence::text, ','), '0') AS fs
  FROM wf.complete_tasks_and_claim(ARRAY[:tids]::bigint[], ARRAY[:fs]::bigint[], NULL, 'bench20', :client_id::text, 100, '60 seconds') \gset
