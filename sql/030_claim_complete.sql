-- scenario: a three-step run claimed and completed to the end
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('fulfil', '{
  "steps": [
    {"name": "charge", "queue": "pay", "activity": "charge_card",
     "input": {"amount": "$.input.order.amount", "customer": "$.input.customer", "currency": "EUR",
               "literal_dollar": "$$5", "missing": "$.input.nope"}},
    {"name": "reserve", "queue": "stock", "input": {"sku": "$.input.order.sku", "charge": "$.steps.charge.output.charge_id"}},
    {"name": "notify", "queue": "mail", "input": {"reservation": "$.steps.reserve.output.id"}}
  ],
  "output": {"charge": "$.steps.charge.output.charge_id", "reservation": "$.steps.reserve.output.id"}}');
SELECT wf.start_run('fulfil', '{"customer": "c-1", "order": {"amount": 42.5, "sku": "SKU-9"}}') AS run \gset

-- nothing on other queues
SELECT count(*) FROM wf.claim_tasks('stock', 'w1');
-- claim the first step
SELECT task_id AS t1, fence AS f1, idempotency_key = :'run' || '/charge/1' AS key_ok,
       step, attempt, fence, input, queue, activity, deliveries,
       lease_expires_at > now() AS leased
FROM wf.claim_tasks('pay', 'worker-1', 10, '1 minute') \gset
\echo :key_ok :step :attempt :fence :queue :activity :deliveries :leased
\echo :input
-- a claimed task is not handed out twice
SELECT count(*) FROM wf.claim_tasks('pay', 'worker-2');
SELECT status, worker, fence FROM wf.tasks WHERE task_id = :t1;
SELECT wf.complete_task(:t1, :f1, '{"charge_id": "ch_77"}');
SELECT wf.run_status(:'run'), current_step FROM wf.runs WHERE run_id = :'run';

SELECT task_id AS t2, fence AS f2, input FROM wf.claim_tasks('stock', 'worker-1') \gset
\echo :input
SELECT wf.complete_task(:t2, :f2, '{"id": "res-5"}');
SELECT task_id AS t3, fence AS f3, input FROM wf.claim_tasks('mail', 'worker-1') \gset
\echo :input
SELECT wf.complete_task(:t3, :f3);
SELECT status, current_step, output, finished_at IS NOT NULL AS finished, seq
FROM wf.runs WHERE run_id = :'run';
SELECT seq, type, step, attempt FROM wf.history(:'run');
SELECT wf.verify_run(:'run');
-- the context holds each step's output, attempt and visit
SELECT jsonb_pretty(context) FROM wf.runs WHERE run_id = :'run';

-- scenario: claims are FIFO within a queue and respect max_tasks
SELECT wf.publish_definition('fifo', '{"steps": [{"name": "only", "queue": "fifo_q", "input": {"n": "$.input.n"}}]}');
SELECT wf.start_run('fifo', jsonb_build_object('n', i)) FROM generate_series(1, 5) i \g /dev/null
SELECT input->>'n' AS n FROM wf.claim_tasks('fifo_q', 'w', 2) ORDER BY task_id;
SELECT input->>'n' AS n FROM wf.claim_tasks('fifo_q', 'w', 2) ORDER BY task_id;
SELECT input->>'n' AS n FROM wf.claim_tasks('fifo_q', 'w', 2) ORDER BY task_id;
SELECT count(*) FROM wf.claim_tasks('fifo_q', 'w', 2);
-- the claim statement is served by the claim index in its order (no sort): priority, then FIFO
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT t.task_id FROM wf.tasks t
WHERE t.tenant_id = 'default' AND t.queue = 'fifo_q' AND t.status = 'ready'
  AND t.available_at <= now() ORDER BY t.priority DESC, t.available_at, t.task_id LIMIT 10 FOR UPDATE SKIP LOCKED;
RESET enable_seqscan;
