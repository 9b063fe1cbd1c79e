-- wf_eager20: one step of a 20-step run with eager dispatch, one call and one
-- transaction per step: wf.complete_and_claim reports the lease a client
-- holds and hands it its next one (the same run's next step first).  Only a
-- client that holds nothing claims with wf.claim_tasks.  pgbench variables
-- tid = f = 0 to start with (the cell passes -D tid=0 -D f=0).  A report
-- that gets no lease back answers one row without a task (coalesce), a claim
-- that finds none no row (\aset sets nothing): tid is 0 again either way.
-- The worker's name is the client's number as text (:client_id::text: a
-- constant as sent, a parameter when prepared), not an expression to fold.
\if :tid > 0
\set t :tid
\set tid 0
SELECT coalesce(task_id, 0) AS tid, coalesce(fence, 0) AS f
  FROM wf.complete_and_claim(:t, :f, '{"ok": true}', 'bench20', :client_id::text, 1, '60 seconds') \aset
\else
SELECT task_id AS tid, fence AS f
  FROM wf.claim_tasks('bench20', :client_id::text, 1, '60 seconds') \aset
\endif
