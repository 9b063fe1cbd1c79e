-- scenario: priorities within a queue: higher first, then oldest first; a priority can
-- come from the run's input
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('bulk', '{"steps": [{"name": "mail", "queue": "mail", "priority": -10}]}');
SELECT wf.publish_definition('vip', '{"steps": [{"name": "mail", "queue": "mail", "priority": 50}]}');
SELECT wf.publish_definition('any', '{"steps": [{"name": "mail", "queue": "mail", "priority": "$.input.prio"}]}');
SELECT count(wf.start_run('bulk', jsonb_build_object('n', 'bulk ' || i))) FROM generate_series(1, 3) i;
SELECT count(wf.start_run('any', '{"n": "any 7", "prio": 7}'));
SELECT count(wf.start_run('vip', '{"n": "vip"}'));
SELECT count(wf.start_run('any', '{"n": "any none"}'));
SELECT count(wf.start_run('any', '{"n": "any 1000", "prio": 1000}'));
SELECT t.priority, r.input->>'n' AS run FROM wf.tasks t JOIN wf.runs r USING (run_id) ORDER BY t.task_id;
-- explain counts the tasks that go first
SELECT e->'details'->>'ahead' AS ahead, e->'details'->>'priority' AS priority
FROM wf.runs r, wf.explain(r.run_id) e WHERE r.input->>'n' = 'any none';
-- one claim at a time: the highest priority first, the oldest first within one
SELECT g AS claim, (SELECT c.input->>'n' FROM wf.claim_tasks('mail', 'w' || g, 1) c) AS run
FROM generate_series(1, 8) g;
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "priority": 101}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "priority": 1.5}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "priority": "$.input.["}]}');
