-- scenario: wf.send_event routes one outside event to the runs that declared its
-- correlation key; a wait_event step with on_timeout goes elsewhere when nothing comes
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('parcel', '{
  "correlation": {"shipment": "$.input.shipment", "order": "$.input.orders[*]"},
  "steps": [
    {"name": "label", "queue": "pc_label"},
    {"name": "delivered", "type": "wait_event", "event": "carrier.delivered",
     "timeout": {"total": "150ms"}, "on_timeout": "chase"},
    {"name": "done", "queue": "pc_done", "end": true},
    {"name": "chase", "queue": "pc_chase"}]}');
SELECT wf.start_run('parcel', '{"shipment": "SH-1", "orders": [11, 12]}') AS a \gset
SELECT wf.start_run('parcel', '{"shipment": "SH-2", "orders": [12]}') AS b \gset
SELECT wf.start_run('parcel', '{"orders": []}') AS c \gset
SELECT key, count(*) FROM wf.correlations GROUP BY key ORDER BY key;

-- an event that comes before run a reaches the step is kept for it
SELECT outcome FROM wf.send_event('shipment:SH-1', 'carrier.delivered', '{"at": "door"}', 'dhl-1');
SELECT outcome FROM wf.send_event('shipment:SH-1', 'carrier.delivered', '{"at": "door"}', 'dhl-1');
SELECT count(wf.complete_task(task_id, fence, '{}')) FROM wf.claim_tasks('pc_label', 'w', 10);
SELECT CASE run_id WHEN :'a' THEN 'a' WHEN :'b' THEN 'b' ELSE 'c' END AS run, status, current_step
FROM wf.runs ORDER BY 1;
SELECT context->'steps'->'delivered'->'output' AS delivered FROM wf.runs WHERE run_id = :'a';
-- one event, several runs: order 12 is in runs a and b; a has ended its wait already
SELECT CASE run_id WHEN :'a' THEN 'a' WHEN :'b' THEN 'b' ELSE 'c' END AS run, outcome
FROM wf.send_event('order:12', 'carrier.delivered', '{"at": "locker"}', 'ups-7') ORDER BY 1;
SELECT CASE run_id WHEN :'a' THEN 'a' WHEN :'b' THEN 'b' ELSE 'c' END AS run, status, current_step
FROM wf.runs ORDER BY 1;
-- no run declared the key: kept for the first that will (370_buffered_events)
SELECT run_id, outcome FROM wf.send_event('shipment:SH-404', 'carrier.delivered');
-- run c waits; nothing comes within 150ms: it goes on to "chase"
SELECT pg_sleep(0.2);
SELECT wf.tick() > 0 AS fired;
SELECT status, current_step, context->'steps'->'delivered'->'output' AS output FROM wf.runs WHERE run_id = :'c';
SELECT type, step, payload->>'next' AS next FROM wf.history(:'c') WHERE type IN ('wait_timed_out', 'timer_fired');
SELECT bool_and(wf.verify_run(run_id)) AS verified FROM wf.runs;
-- a run that has ended is not sent to: no live run has the key, it is kept
SELECT wf.terminate_run(:'b', 'test');
SELECT run_id, outcome FROM wf.send_event('shipment:SH-2', 'carrier.delivered');

-- errors
SELECT * FROM wf.send_event('', 'x');
SELECT * FROM wf.send_event('k', NULL);
SELECT wf.publish_definition('bad_corr', '{"correlation": {"shipment": "SH-1"}, "steps": [{"name": "a", "queue": "q"}]}');
SELECT wf.publish_definition('bad_corr', '{"correlation": {}, "steps": [{"name": "a", "queue": "q"}]}');
SELECT wf.publish_definition('bad_corr', '{"correlation": {"bad-name": "$.input.x"}, "steps": [{"name": "a", "queue": "q"}]}');
SELECT wf.publish_definition('bad_wait', '{"steps": [{"name": "w", "type": "wait_event", "event": "e", "on_timeout": "a"}, {"name": "a", "queue": "q"}]}');
SELECT wf.publish_definition('bad_wait', '{"steps": [{"name": "w", "type": "wait_event", "event": "e", "timeout": {"total": "1h"}, "on_timeout": "nowhere"}]}');

-- the graph shows the timeout route, and the route run c took
SELECT wf.definition_graph('parcel') \g (format=unaligned tuples_only)
SELECT pg_catalog.replace(wf.run_graph(:'c'), :'c', '<run>') \g (format=unaligned tuples_only)
