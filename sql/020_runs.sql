-- scenario: starting runs, idempotency keys and version pinning
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('signup', '{"steps": [
  {"name": "create_account", "queue": "accounts", "input": {"email": "$.input.email"}},
  {"name": "welcome", "queue": "mail"}]}');

-- a run starts at its first step, pinned to the latest version
SELECT wf.start_run('signup', '{"email": "a@example.com"}') AS run1 \gset
SELECT status, current_step, current_attempt, seq, definition_name, definition_version,
       input, context, output, finished_at IS NULL AS unfinished
FROM wf.runs WHERE run_id = :'run1';
SELECT wf.run_status(:'run1');
-- run ids are UUIDv7: version 7, RFC variant, time-ordered
SELECT substr(:'run1', 15, 1) AS uuid_version, substr(:'run1', 20, 1) IN ('8', '9', 'a', 'b') AS rfc_variant;
SELECT wf.start_run('signup', '{"email": "b@example.com"}') > :'run1' AS later_id_sorts_after;
-- its first task is ready on the step's queue, with the mapped input; a
-- mapping that gives the run's input as it stands is not copied into the
-- attempt's row (input NULL: the run's, which the claim hands out)
SELECT step, attempt, visit, queue, status, fence,
       coalesce(t.input, (SELECT coalesce(r.context->'input', r.input) FROM wf.runs r WHERE r.run_id = t.run_id)) AS input,
       t.input IS NULL AS no_copy, idempotency_key = :'run1' || '/create_account/1' AS key_ok
FROM wf.tasks t WHERE run_id = :'run1';

-- the same idempotency key returns the same run and starts nothing new
SELECT wf.start_run('signup', '{"email": "c@example.com"}', 'signup:c') AS run2 \gset
SELECT wf.start_run('signup', '{"email": "c@example.com"}', 'signup:c') = :'run2' AS same_run;
SELECT count(*) AS runs_with_key FROM wf.runs WHERE idempotency_key = 'signup:c';
SELECT count(*) AS tasks_of_run FROM wf.tasks WHERE run_id = :'run2';
SELECT count(*) AS events_of_run FROM wf.history(:'run2');
-- the same key for a different request is refused
SELECT wf.start_run('signup', '{"email": "other@example.com"}', 'signup:c');
SELECT wf.publish_definition('other', '{"steps": [{"name": "x", "queue": "q"}]}');
SELECT wf.start_run('other', '{"email": "c@example.com"}', 'signup:c');

-- version pinning: a new version does not move existing runs
SELECT wf.publish_definition('signup', '{"steps": [
  {"name": "create_account", "queue": "accounts"},
  {"name": "verify_email", "queue": "mail"},
  {"name": "welcome", "queue": "mail"}]}');
SELECT definition_version FROM wf.runs WHERE run_id = :'run1';
SELECT wf.start_run('signup', '{}') AS run3 \gset
SELECT definition_version FROM wf.runs WHERE run_id = :'run3';
SELECT wf.start_run('signup', '{}', NULL, 1) AS run4 \gset
SELECT definition_version FROM wf.runs WHERE run_id = :'run4';
-- an idempotent start that names a version must match the first start's version
SELECT wf.start_run('signup', '{}', 'pinned', 1) AS run5 \gset
SELECT wf.start_run('signup', '{}', 'pinned', 1) = :'run5' AS same_run;
SELECT wf.start_run('signup', '{}', 'pinned') = :'run5' AS same_run_without_version;
SELECT wf.start_run('signup', '{}', 'pinned', 2);

-- bad starts change nothing
SELECT count(*) AS runs_before FROM wf.runs \gset
SELECT wf.start_run('nosuch');
SELECT wf.start_run('signup', '{}', NULL, 9);
SELECT wf.start_run(NULL);
SELECT wf.start_run('signup', NULL);
SELECT wf.start_run('signup', '{}', '');
SELECT wf.start_run('signup', '{}', repeat('k', 256));
SET wfengine.max_payload_size = '1kB';
SELECT wf.start_run('signup', jsonb_build_object('blob', repeat('x', 2000)));
RESET wfengine.max_payload_size;
SELECT count(*) = :runs_before AS nothing_written FROM wf.runs;
SELECT wf.run_status('00000000-0000-0000-0000-000000000000');

-- scenario: the snapshot's context is stored without the input while it is
-- the run's input (wf.runs.input); every reader sees it put back
SELECT wf.start_run('signup', '{"email": "d@example.com"}') AS run6 \gset
SELECT context ? 'input' AS input_stored, context FROM wf.runs WHERE run_id = :'run6';
SELECT task_id AS t6, fence AS f6, input FROM wf.claim_tasks('accounts', 'w6', 100) WHERE run_id = :'run6' \gset
SELECT :'input' AS mapped_from_input;
-- a context_updated makes it the context's own: stored in the context
SELECT wf.update_context(:'run6', '{"email": "e@example.com"}', 'address corrected');
SELECT context ? 'input' AS input_stored, context->'input' AS context_input, input FROM wf.runs WHERE run_id = :'run6';
SELECT wf.complete_task(:t6, :f6, '{"account": 6}');
-- the next step is given the input as it stands
SELECT step, coalesce(t.input, (SELECT coalesce(r.context->'input', r.input) FROM wf.runs r WHERE r.run_id = t.run_id)) AS input
FROM wf.tasks t WHERE run_id = :'run6' AND status = 'ready';
SELECT wf.verify_run(:'run6');
-- back to the run's input: left out again at the next write
SELECT wf.update_context(:'run6', '{"email": "d@example.com"}', 'address was right');
SELECT context ? 'input' AS input_stored FROM wf.runs WHERE run_id = :'run6';
SELECT wf.verify_run(:'run6');
-- a tampered wf.runs.input shows in the context it is put back into
BEGIN;
UPDATE wf.runs SET input = '{"email": "mallory@example.com"}' WHERE run_id = :'run6';
SELECT wf.verify_run(:'run6');
ROLLBACK;
