-- scenario: choice steps route a run by conditions over its context
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;

SELECT wf.publish_definition('route', '{"steps": [
  {"name": "size", "type": "choice",
   "choices": [{"when": "$.input.amount > 1000", "next": "review"},
               {"when": "$.input.country == \"NZ\"", "next": "end"}],
   "default": "pay"},
  {"name": "review", "queue": "ch_review", "next": "pay"},
  {"name": "pay", "queue": "ch_pay"}]}');

-- the first condition that holds wins
SELECT wf.start_run('route', '{"amount": 5000, "country": "NZ"}') AS big \gset
SELECT current_step, context->'steps'->'size'->'output' AS choice FROM wf.runs WHERE run_id = :'big';
-- no condition holds: the default
SELECT wf.start_run('route', '{"amount": 10, "country": "FR"}') AS small \gset
SELECT current_step, context->'steps'->'size'->'output' AS choice FROM wf.runs WHERE run_id = :'small';
-- a branch may end the run
SELECT wf.start_run('route', '{"amount": 10, "country": "NZ"}') AS done \gset
SELECT status, output FROM wf.runs WHERE run_id = :'done';
-- a condition that cannot be evaluated (no amount) does not hold
SELECT wf.start_run('route', '{}') AS odd \gset
SELECT current_step FROM wf.runs WHERE run_id = :'odd';
SELECT wf.verify_run(:'big') AND wf.verify_run(:'small') AND wf.verify_run(:'done') AND wf.verify_run(:'odd') AS verified;
SELECT type, step, payload->'output' AS output FROM wf.history(:'big') WHERE type = 'choice_made';

-- scenario: a loop with a way out: poll until the task reports done
SELECT wf.publish_definition('poll', '{"steps": [
  {"name": "check", "queue": "ch_poll"},
  {"name": "again", "type": "choice",
   "choices": [{"when": "$.steps.check.output.done == true", "next": "end"}],
   "default": "check"}]}');
SELECT wf.start_run('poll') AS run \gset
SELECT task_id AS t, fence AS f, idempotency_key AS k1 FROM wf.claim_tasks('ch_poll', 'w') \gset
SELECT wf.complete_task(:t, :f, '{"done": false}');
SELECT task_id AS t, fence AS f, idempotency_key AS k2 FROM wf.claim_tasks('ch_poll', 'w') \gset
-- each visit of the step has its own idempotency key
SELECT right(:'k1', 8) AS first_key, right(:'k2', 8) AS second_key;
SELECT wf.complete_task(:t, :f, '{"done": true}');
SELECT status, context->'steps'->'check' AS check_step FROM wf.runs WHERE run_id = :'run';
SELECT seq, type, step FROM wf.history(:'run');
SELECT wf.verify_run(:'run');

-- scenario: choice steps are validated
SELECT wf.publish_definition('bad', '{"steps": [{"name": "c", "type": "choice", "choices": [{"when": "$.x", "next": "end"}]}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "c", "type": "choice", "choices": [], "default": "end"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "c", "type": "choice", "choices": [{"when": "$.x ==", "next": "end"}], "default": "end"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "c", "type": "choice", "choices": [{"when": "$.x", "next": "nowhere"}], "default": "end"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "c", "type": "choice", "choices": [{"when": "$.x", "goto": "end"}], "default": "end"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "c", "type": "choice", "choices": [{"when": "$.x", "next": "end"}], "default": "end", "queue": "q"}]}');
SELECT wf.publish_definition('bad', '{"steps": [
  {"name": "a", "type": "choice", "choices": [{"when": "$.x", "next": "b"}], "default": "end"},
  {"name": "b", "type": "choice", "choices": [{"when": "$.y", "next": "a"}], "default": "end"}]}');
SELECT wf.publish_definition('bad', '{"steps": [
  {"name": "a", "queue": "q"},
  {"name": "b", "type": "choice", "choices": [{"when": "$.y", "next": "a"}], "default": "a"}]}');
