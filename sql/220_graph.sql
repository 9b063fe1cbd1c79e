-- scenario: wf.definition_graph and wf.run_graph draw definitions and runs
-- as Mermaid flowcharts and Graphviz DOT digraphs
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
\pset format unaligned
\pset tuples_only on

-- scenario: a linear definition: fall-through, next, "end": true, every
-- shape of step; an older version by number, the latest by default
SELECT wf.publish_definition('graph_linear', '{"steps": [
  {"name": "charge", "queue": "graph_pay"},
  {"name": "pack", "queue": "graph_pack", "next": "paid"},
  {"name": "cool_off", "type": "sleep", "duration": "1h", "end": true},
  {"name": "paid", "type": "wait_event", "event": "payment_received", "next": "cool_off"}]}') AS v1;
SELECT wf.publish_definition('graph_linear', '{"steps": [
  {"name": "charge", "queue": "graph_pay"},
  {"name": "ship", "queue": "graph_pack"}]}') AS v2;
SELECT wf.definition_graph('graph_linear', 1);
SELECT wf.definition_graph('graph_linear', 1, 'dot');
SELECT wf.definition_graph('graph_linear');

-- scenario: a choice with branches, a default and a loop back; the
-- conditions hold the characters each format must escape
SELECT wf.publish_definition('graph_choice', '{"steps": [
  {"name": "check", "queue": "graph_check"},
  {"name": "route", "type": "choice",
   "choices": [{"when": "$.steps.check.output.amount > 1000 && $.input.country != \"NZ\"", "next": "review"},
               {"when": "exists($.steps.check.output.items[*] ? (@.sku like_regex \"^A|B\\\\d\" flag \"i\"))", "next": "end"},
               {"when": "$.steps.check.output.note == \"#1 <b>$$</b> `{x}`; style: direction LR\"", "next": "check"}],
   "default": "pay"},
  {"name": "review", "queue": "graph_review", "next": "pay"},
  {"name": "pay", "queue": "graph_pay"}]}');
SELECT wf.definition_graph('graph_choice');
SELECT wf.definition_graph('graph_choice', format => 'dot');

-- scenario: approvals: on_expiry to another step (a loop), and an expiry
-- that fails the run (drawn to a "fail" node)
SELECT wf.publish_definition('graph_approval', '{"steps": [
  {"name": "submit", "queue": "graph_submit"},
  {"name": "approve", "type": "approval", "approvers": ["ann", "bob"], "notify_queue": "graph_mail",
   "expires": "10ms", "on_expiry": "remind"},
  {"name": "sign", "type": "approval", "approvers": ["cfo"], "notify_queue": "graph_mail",
   "expires": "2d", "on_expiry": "fail"},
  {"name": "pay", "queue": "graph_pay", "end": true},
  {"name": "remind", "queue": "graph_submit", "next": "approve"}]}');
SELECT wf.definition_graph('graph_approval');
SELECT wf.definition_graph('graph_approval', format => 'dot');

-- scenario: a completed run: the loop taken once, then the default
SELECT wf.start_run('graph_choice', '{"country": "FR"}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('graph_check', 'w') \gset
SELECT wf.complete_task(:t, :f, '{"note": "#1 <b>$$</b> `{x}`; style: direction LR"}');
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('graph_check', 'w') \gset
SELECT wf.complete_task(:t, :f, '{"amount": 5}');
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('graph_pay', 'w') \gset
SELECT wf.complete_task(:t, :f, '{}');
SELECT status FROM wf.runs WHERE run_id = :'run';
SELECT pg_catalog.replace(wf.run_graph(:'run'), :'run', '<run>');
SELECT pg_catalog.replace(wf.run_graph(:'run', 'dot'), :'run', '<run>');

-- scenario: a run mid-way: the path so far and the current step
SELECT wf.start_run('graph_choice', '{"country": "FR"}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('graph_check', 'w') \gset
SELECT wf.complete_task(:t, :f, '{"amount": 5000}');
SELECT status, current_step FROM wf.runs WHERE run_id = :'run';
SELECT pg_catalog.replace(wf.run_graph(:'run'), :'run', '<run>');
-- terminated there: the step where it stopped
SELECT wf.terminate_run(:'run', 'graph test');
SELECT pg_catalog.replace(wf.run_graph(:'run'), :'run', '<run>');

-- scenario: an approval that expires goes to its on_expiry step and back
SELECT wf.start_run('graph_approval') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('graph_submit', 'w') \gset
SELECT wf.complete_task(:t, :f, '{}');
SELECT pg_sleep(0.05);
SELECT wf.tick() >= 1 AS fired;
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('graph_submit', 'w') \gset
SELECT wf.complete_task(:t, :f, '{}');
SELECT status, current_step FROM wf.runs WHERE run_id = :'run';
SELECT pg_catalog.replace(wf.run_graph(:'run'), :'run', '<run>');
SELECT pg_catalog.replace(wf.run_graph(:'run', 'dot'), :'run', '<run>');

-- scenario: failed runs: a final task failure, and an expiry that fails the run
SELECT wf.start_run('graph_linear', version => 1) AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('graph_pay', 'w') \gset
SELECT wf.complete_task(:t, :f, '{}');
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('graph_pack', 'w') \gset
SELECT wf.fail_task(:t, :f, '{"code": "no_stock"}', false);
SELECT status FROM wf.runs WHERE run_id = :'run';
SELECT pg_catalog.replace(wf.run_graph(:'run'), :'run', '<run>');
SELECT wf.publish_definition('graph_deadline', '{"steps": [
  {"name": "sign", "type": "approval", "approvers": ["cfo"], "notify_queue": "graph_mail", "expires": "10ms"},
  {"name": "file", "queue": "graph_file"}]}');
SELECT wf.start_run('graph_deadline') AS run \gset
SELECT pg_sleep(0.05);
SELECT wf.tick() >= 1 AS fired;
SELECT status, (SELECT payload->>'reason' FROM wf.history(:'run') WHERE type = 'run_failed') AS reason
FROM wf.runs WHERE run_id = :'run';
SELECT pg_catalog.replace(wf.run_graph(:'run'), :'run', '<run>');
SELECT pg_catalog.replace(wf.run_graph(:'run', 'dot'), :'run', '<run>');

-- scenario: errors
SELECT wf.definition_graph('graph_nosuch');
SELECT wf.definition_graph('graph_linear', 3);
SELECT wf.definition_graph('graph_linear', format => 'svg');
SELECT wf.definition_graph('graph_linear', format => NULL);
SELECT wf.run_graph('00000000-0000-0000-0000-000000000000');
SELECT wf.run_graph(:'run', 'png');
-- a definition or a run of another tenant does not exist for this one
-- (as a superuser: write rows of another tenant, in a transaction)
BEGIN;
INSERT INTO wf.definitions (tenant_id, name, version, digest, spec)
VALUES ('other', 'graph_linear', 3, '\x00', '{"steps": [{"name": "other", "queue": "q"}]}');
SELECT wf.definition_graph('graph_linear') LIKE '%graph_linear v2%' AS latest_is_ours;
SELECT wf.definition_graph('graph_linear', 3);
ROLLBACK;
SELECT pg_catalog.set_config('graph.run', :'run', false) AS ignore \g /dev/null
BEGIN;
UPDATE wf.runs SET tenant_id = 'other' WHERE run_id = :'run';
DO $$
BEGIN
    PERFORM wf.run_graph(pg_catalog.current_setting('graph.run')::uuid);
EXCEPTION WHEN undefined_object THEN
    RAISE NOTICE 'undefined_object: %',
        pg_catalog.replace(SQLERRM, pg_catalog.current_setting('graph.run'), '<run>');
END
$$;
ROLLBACK;

-- leave no run waiting (with a due timer) behind
SELECT count(wf.terminate_run(run_id, 'graph test done')) FROM wf.runs
WHERE definition_name LIKE 'graph\_%' AND status IN ('running', 'paused');

-- scenario: a cancelled run is marked where wf.cancel_run found it; its compensations are not steps
SELECT wf.publish_definition('graph_cancel', '{"steps": [
  {"name": "book", "queue": "graph_cq", "compensate": {"activity": "unbook"}},
  {"name": "pay", "queue": "graph_cq2"}]}') AS v;
SELECT wf.start_run('graph_cancel') AS run \gset
SELECT wf.complete_task(task_id, fence, '{}') FROM wf.claim_tasks('graph_cq', 'w');
SELECT wf.cancel_run(:'run', 'graph test');
SELECT wf.complete_task(task_id, fence, '{}') FROM wf.claim_tasks('graph_cq', 'w');
SELECT wf.run_status(:'run');
SELECT pg_catalog.replace(wf.run_graph(:'run'), :'run', '<run>');
