-- scenario: wf.send_event to a correlation key no live run has declared yet keeps
-- the event (wf.buffered_events) for the first run that declares the key and waits
-- for its name; bounded by max_buffered_events and by the retention given at send
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('checkout', '{
  "correlation": {"order": "$.input.order"},
  "steps": [
    {"name": "paid", "type": "wait_event", "event": "payment.received"},
    {"name": "ship", "queue": "co_ship", "end": true}]}');
SELECT wf.publish_definition('invoice', '{
  "correlation": {"order": "$.input.order"},
  "steps": [
    {"name": "draft", "queue": "co_draft"},
    {"name": "paid", "type": "wait_event", "event": "payment.received"},
    {"name": "send", "queue": "co_send", "end": true}]}');
SELECT wf.publish_definition('audit', '{
  "correlation": {"order": "$.input.order"},
  "steps": [{"name": "log", "queue": "co_log", "end": true}]}');

-- scenario: the payment comes before the order's run exists: kept, not dropped
SELECT run_id, outcome FROM wf.send_event('order:O-1', 'payment.received', '{"amount": 5}', 'pay-1');
-- the same event id again is a duplicate; another name for the key is kept too
SELECT run_id, outcome FROM wf.send_event('order:O-1', 'payment.received', '{"amount": 5}', 'pay-1');
SELECT run_id, outcome FROM wf.send_event('order:O-1', 'refund.requested', '{}', 'ref-1');
SELECT key, name, event_id, payload, delivered_to IS NULL AS undelivered,
       expires_at - received_at AS kept_for, sent_by = current_user AS by_sender
FROM wf.buffered_events ORDER BY buffer_id;

-- scenario: a run that declares the key but waits for no event takes nothing
SELECT wf.start_run('audit', '{"order": "O-1"}') AS audit_run \gset
SELECT count(*) AS delivered FROM wf.buffered_events WHERE delivered_to IS NOT NULL;
-- (it is live now: a send reaches it, and is not buffered)
SELECT run_id = :'audit_run' AS to_audit, outcome FROM wf.send_event('order:O-1', 'note', '{}', 'n-1');
SELECT wf.terminate_run(:'audit_run', 'test');

-- scenario: the first run that declares the key and waits for the name gets the event,
-- consumed at once by its wait_event step
SELECT wf.start_run('checkout', '{"order": "O-1"}') AS r1 \gset
SELECT status, current_step, context->'steps'->'paid'->'output' AS paid FROM wf.runs WHERE run_id = :'r1';
SELECT seq, type, step, CASE WHEN type = 'signal_received' THEN payload - 'buffered_at' END AS payload,
       (payload->>'buffered_at')::timestamptz < now() AS buffered_before
FROM wf.history(:'r1') ORDER BY seq;
SELECT name, delivered_to = :'r1' AS to_r1, delivered_at IS NOT NULL AS delivered
FROM wf.buffered_events ORDER BY buffer_id;
-- delivered once: a second run of the key waits for its own payment
SELECT wf.start_run('checkout', '{"order": "O-1"}') AS r2 \gset
SELECT status, current_step FROM wf.runs WHERE run_id = :'r2';
SELECT wf.terminate_run(:'r2', 'test');
-- the delivered event id stays a duplicate while it was to be kept (no live run now)
SELECT wf.complete_task(task_id, fence, '{}') FROM wf.claim_tasks('co_ship', 'w', 10);
SELECT run_id, outcome FROM wf.send_event('order:O-1', 'payment.received', '{"amount": 5}', 'pay-1');

-- scenario: a run that gets to its wait_event step later finds the event kept (stored),
-- and consumes it there
SELECT run_id, outcome FROM wf.send_event('order:O-2', 'payment.received', '{"amount": 7}', 'pay-2');
SELECT wf.start_run('invoice', '{"order": "O-2"}') AS r3 \gset
SELECT payload->>'outcome' AS outcome, payload->>'buffered_key' AS buffered_key
FROM wf.history(:'r3') WHERE type = 'signal_received';
SELECT count(wf.complete_task(task_id, fence, '{}')) FROM wf.claim_tasks('co_draft', 'w', 10);
SELECT status, current_step, context->'steps'->'paid'->'output' AS paid FROM wf.runs WHERE run_id = :'r3';

-- scenario: an event past its retention is not delivered, and wf.purge_runs removes it
SELECT outcome FROM wf.send_event('order:O-3', 'payment.received', '{}', 'pay-3', keep => '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT wf.start_run('checkout', '{"order": "O-3"}') AS r4 \gset
SELECT status, current_step FROM wf.runs WHERE run_id = :'r4';
SELECT count(*) AS expired FROM wf.buffered_events WHERE expires_at <= now();
SELECT wf.purge_runs() >= 0 AS purged;
SELECT count(*) AS expired FROM wf.buffered_events WHERE expires_at <= now();
-- an expired event id can be sent again
SELECT outcome FROM wf.send_event('order:O-9', 'payment.received', '{}', 'pay-9', keep => '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT outcome FROM wf.send_event('order:O-9', 'payment.received', '{}', 'pay-9');

-- scenario: the tenant's limit of undelivered events; 0 drops them
SELECT max_buffered_events FROM wf.set_tenant_policy('default', '{"max_buffered_events": 3}');
SELECT pg_sleep(1.1);
SELECT count(*) AS buffered FROM wf.buffered_events WHERE delivered_at IS NULL AND expires_at > now();
SELECT outcome FROM wf.send_event('order:O-10', 'payment.received', '{}', 'pay-10');
SELECT outcome FROM wf.send_event('order:O-11', 'payment.received', '{}', 'pay-11');
-- at the limit a repeated event id is still a duplicate, not a refusal
SELECT outcome FROM wf.send_event('order:O-10', 'payment.received', '{}', 'pay-10');
-- a delivered event no longer counts
SELECT wf.start_run('checkout', '{"order": "O-10"}') AS r5 \gset
SELECT outcome FROM wf.send_event('order:O-11', 'payment.received', '{}', 'pay-11');
SELECT max_buffered_events FROM wf.set_tenant_policy('default', '{"max_buffered_events": 0}');
SELECT pg_sleep(1.1);
SELECT run_id, outcome FROM wf.send_event('order:O-12', 'payment.received', '{}', 'pay-12');
SELECT max_buffered_events FROM wf.set_tenant_policy('default', '{"max_buffered_events": null}');
SELECT wf.set_tenant_policy('default', '{"max_buffered_events": -1}');
SELECT wf.set_tenant_policy('default', '{"max_buffered_events": 1.5}');

-- errors: keep must be positive and at most 30 days
SELECT * FROM wf.send_event('order:O-1', 'x', '{}', NULL, '0');
SELECT * FROM wf.send_event('order:O-1', 'x', '{}', NULL, '31 days');
SELECT * FROM wf.send_event('order:O-1', 'x', '{}', NULL, NULL);
-- a payload that passes for a sealed value is refused, buffered or not
SELECT * FROM wf.send_event('order:O-77', 'x', '{"card": "wfenc:1:abc"}');

SELECT bool_and(wf.verify_run(run_id)) AS verified FROM wf.runs;
