-- bench/engine_onecall.sql -- claim and complete in ONE server-side call and
-- one transaction: the API has no combined function, so one statement feeds
-- wf.claim_tasks() into wf.complete_task().  One commit per cycle instead of
-- two (the lease is never durable on its own: fine for work that is done
-- inside the transaction, e.g. a step that only moves data in the database).
-- pgbench variable: queue.  An empty claim completes nothing.
SELECT count(wf.complete_task(c.task_id, c.fence, '{"ok": true}'))
  FROM wf.claim_tasks(:queue, 'w:' || :client_id, 1) AS c;
