-- scenario: child runs: a subworkflow step runs a named definition (pinned version) as a
-- child run; a parallel step runs its branches at once as child runs and joins them
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
CREATE FUNCTION pg_temp.ids(t text) RETURNS text LANGUAGE sql AS $$
    SELECT regexp_replace(t, '[0-9a-f]{8}-[0-9a-f-]{27}', '<run>', 'g')
$$;
-- complete every claimable task of the given queues with {"<step>": "<queue>"}, then fire due timers
CREATE FUNCTION pg_temp.work(queues text[]) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    q text;
    t record;
    done text[] := '{}';
BEGIN
    FOREACH q IN ARRAY queues LOOP
        FOR t IN SELECT * FROM wf.claim_tasks(q, 'w', 10) LOOP
            PERFORM wf.complete_task(t.task_id, t.fence, jsonb_build_object(t.step, q));
            done := done || t.step;
        END LOOP;
    END LOOP;
    PERFORM wf.tick();
    RETURN array_to_string(done, ', ');
END
$$;
SELECT wf.publish_definition('kyc', '{"steps": [{"name": "check", "queue": "kyc_q"}],
  "output": {"ok": "$.steps.check.output", "who": "$.input.name"}}');
SELECT wf.publish_definition('onboard', '{"steps": [
  {"name": "verify", "type": "subworkflow", "definition": "kyc", "version": 1, "input": {"name": "$.input.name"}},
  {"name": "ship", "type": "parallel", "branches": [
     {"steps": [{"name": "pack", "queue": "ob_pack"}, {"name": "label", "queue": "ob_label"}],
      "output": {"label": "$.steps.label.output"}},
     {"steps": [{"name": "invoice", "queue": "ob_inv"}]}]},
  {"name": "done", "queue": "ob_done", "input": {"kyc": "$.steps.verify.output", "ship": "$.steps.ship.output"}}]}');
-- each branch is a definition of its own, published with its parent
SELECT name, version, jsonb_array_length(spec->'steps') AS steps FROM wf.definitions ORDER BY definition_id;

-- the subworkflow: the parent waits for its child run
SELECT wf.start_run('onboard', '{"name": "ann"}') AS run \gset
SELECT definition_name, status, current_step, parent_run_id = :'run' AS is_child FROM wf.runs ORDER BY definition_name;
SELECT e->>'waiting_for' AS waiting_for, pg_temp.ids((e->'details')::text) AS details FROM wf.explain(:'run') e;
SELECT pg_temp.work('{kyc_q}');
-- the branches run at once; the parent joins when both are done
SELECT definition_name, status, current_step FROM wf.runs ORDER BY definition_name;
SELECT pg_temp.work('{ob_pack,ob_inv}');
SELECT context->'children'->'ship'->'statuses' AS statuses FROM wf.runs WHERE run_id = :'run';
SELECT pg_temp.work('{ob_label}');
SELECT input FROM wf.claim_tasks('ob_done', 'w');
SELECT seq, type, step, pg_temp.ids(payload::text) AS payload FROM wf.history(:'run')
WHERE type IN ('children_started', 'child_finished', 'children_joined') ORDER BY seq;
SELECT count(*) AS runs, bool_and(wf.verify_run(run_id)) AS verified FROM wf.runs;

-- join {"first": 1}: the first branch to complete wins; the other is cancelled (and compensates)
SELECT wf.publish_definition('quote', '{"steps": [
  {"name": "ask", "type": "parallel", "join": {"first": 1}, "branches": [
     {"steps": [{"name": "hold", "queue": "qa_hold", "compensate": {"queue": "qa_undo"}},
                {"name": "a", "queue": "qa_a"}]},
     {"steps": [{"name": "b", "queue": "qa_b"}]}]}]}');
SELECT wf.start_run('quote') AS run \gset
SELECT pg_temp.work('{qa_hold,qa_b}');
SELECT definition_name, status FROM wf.runs WHERE definition_name LIKE 'quote%' ORDER BY definition_name;
SELECT pg_temp.work('{qa_undo}');
SELECT definition_name, status FROM wf.runs WHERE definition_name LIKE 'quote%' ORDER BY definition_name;
SELECT output FROM wf.runs WHERE run_id = :'run';
SELECT bool_and(wf.verify_run(run_id)) AS verified FROM wf.runs WHERE definition_name LIKE 'quote%';

-- a branch fails: by default the step fails, the other branch is cancelled, the run fails
SELECT wf.publish_definition('pair', '{"steps": [
  {"name": "both", "type": "parallel", "branches": [
     {"steps": [{"name": "x", "queue": "pr_x", "retry": {"max_attempts": 1}}]},
     {"steps": [{"name": "y", "queue": "pr_y"}]}]}]}');
SELECT wf.start_run('pair') AS run \gset
SELECT wf.fail_task(task_id, fence, '{"code": "broken"}', false) FROM wf.claim_tasks('pr_x', 'w');
SELECT wf.tick();
SELECT definition_name, status FROM wf.runs WHERE definition_name LIKE 'pair%' ORDER BY definition_name;
SELECT payload->>'reason' AS reason, payload->'error'->>'code' AS code, payload->'error'->>'status' AS child_status
FROM wf.history(:'run') WHERE type = 'run_failed';
-- with "on_branch_failure": "ignore" and {"first": 1}, the other branch can still win
SELECT wf.publish_definition('pair2', '{"steps": [
  {"name": "both", "type": "parallel", "join": {"first": 1}, "on_branch_failure": "ignore", "branches": [
     {"steps": [{"name": "x", "queue": "pr2_x", "retry": {"max_attempts": 1}}]},
     {"steps": [{"name": "y", "queue": "pr2_y"}]}]}]}');
SELECT wf.start_run('pair2') AS run \gset
SELECT wf.fail_task(task_id, fence, '{"code": "broken"}', false) FROM wf.claim_tasks('pr2_x', 'w');
SELECT wf.tick();
SELECT wf.run_status(:'run');
SELECT pg_temp.work('{pr2_y}');
SELECT status, output FROM wf.runs WHERE run_id = :'run';

-- a subworkflow whose child fails fails the step
SELECT wf.publish_definition('kyc_wrap', '{"steps": [{"name": "k", "type": "subworkflow", "definition": "kyc", "version": 1}]}');
SELECT wf.start_run('kyc_wrap', '{"name": "bob"}') AS run \gset
SELECT wf.fail_task(task_id, fence, '{"code": "fraud"}', false) FROM wf.claim_tasks('kyc_q', 'w');
SELECT wf.tick();
SELECT status, current_step FROM wf.runs WHERE run_id = :'run';
SELECT payload->>'reason' AS reason, payload->'error'->>'status' AS child_status,
       payload->'error'->'error'->>'code' AS child_error FROM wf.history(:'run') WHERE type = 'run_failed';

-- cancelling or terminating the parent stops its children; a paused parent holds their results
SELECT wf.start_run('kyc_wrap', '{"name": "cy"}') AS run \gset
SELECT wf.cancel_run(:'run', 'customer left');
SELECT definition_name, status FROM wf.runs WHERE parent_run_id = :'run' OR run_id = :'run' ORDER BY 1;
SELECT wf.start_run('kyc_wrap', '{"name": "dee"}') AS run \gset
SELECT wf.terminate_run(:'run', 'stop everything');
SELECT definition_name, status FROM wf.runs WHERE parent_run_id = :'run' OR run_id = :'run' ORDER BY 1;
SELECT wf.start_run('kyc_wrap', '{"name": "eve"}') AS run \gset
SELECT wf.pause_run(:'run', 'audit');
SELECT pg_temp.work('{kyc_q}');
SELECT status, current_step, (SELECT count(*) FROM wf.timers t WHERE t.run_id = :'run' AND t.outcome = 'held') AS held
FROM wf.runs WHERE run_id = :'run';
SELECT wf.resume_run(:'run', 'audit done');
SELECT wf.tick();
SELECT status, output FROM wf.runs WHERE run_id = :'run';
SELECT bool_and(wf.verify_run(run_id)) AS verified FROM wf.runs;

-- a 20-step process: a choice, a parallel block of three branches and a subworkflow, to the end
SELECT wf.publish_definition('big', '{"steps": [
  {"name": "s1", "queue": "big"}, {"name": "s2", "queue": "big"}, {"name": "s3", "queue": "big"},
  {"name": "route", "type": "choice", "choices": [{"when": "$.input.express == true", "next": "fast"}], "default": "slow"},
  {"name": "slow", "queue": "big", "next": "fan"},
  {"name": "fast", "queue": "big", "next": "fan"},
  {"name": "fan", "type": "parallel", "branches": [
     {"steps": [{"name": "b1", "queue": "big"}, {"name": "b2", "queue": "big"}, {"name": "b3", "queue": "big"}]},
     {"steps": [{"name": "c1", "queue": "big"}, {"name": "c2", "queue": "big"}]},
     {"steps": [{"name": "d1", "queue": "big"}, {"name": "d2", "queue": "big"}]}]},
  {"name": "check", "type": "subworkflow", "definition": "kyc", "version": 1, "input": {"name": "$.input.name"}},
  {"name": "s9", "queue": "big"}, {"name": "s10", "queue": "big"}, {"name": "s11", "queue": "big"},
  {"name": "s12", "queue": "big"}, {"name": "s13", "queue": "big"}],
  "output": {"fan": "$.steps.fan.output", "check": "$.steps.check.output"}}');
SELECT wf.start_run('big', '{"express": true, "name": "zed"}') AS run \gset
SELECT jsonb_array_length(spec->'steps') + (SELECT sum(jsonb_array_length(b->'steps')) FROM jsonb_array_elements(spec->'steps'->6->'branches') b) AS steps
FROM wf.definitions WHERE name = 'big';
SELECT count(*) FILTER (WHERE pg_temp.work('{big,kyc_q}') <> '') AS rounds FROM generate_series(1, 16);
SELECT status, output FROM wf.runs WHERE run_id = :'run';
SELECT string_agg(step, ' ' ORDER BY seq) AS path FROM wf.history(:'run')
WHERE type IN ('task_scheduled', 'choice_made', 'children_started');
SELECT count(*) AS runs, bool_and(wf.verify_run(run_id)) AS verified
FROM wf.runs WHERE run_id = :'run' OR parent_run_id = :'run';

-- errors
SELECT wf.publish_definition('bad_sub', '{"steps": [{"name": "k", "type": "subworkflow", "definition": "kyc"}]}');
SELECT wf.publish_definition('bad_sub', '{"steps": [{"name": "k", "type": "subworkflow", "definition": "kyc", "version": 7}]}');
SELECT wf.publish_definition('bad_par', '{"steps": [{"name": "p", "type": "parallel", "branches": [{"steps": [{"name": "a", "queue": "q"}]}]}]}');
SELECT wf.publish_definition('bad_par', '{"steps": [{"name": "p", "type": "parallel", "join": {"first": 3},
  "branches": [{"steps": [{"name": "a", "queue": "q"}]}, {"steps": [{"name": "b", "queue": "q"}]}]}]}');
SELECT wf.publish_definition('bad_par', '{"steps": [{"name": "p", "type": "parallel", "on_branch_failure": "retry",
  "branches": [{"steps": [{"name": "a", "queue": "q"}]}, {"steps": [{"name": "b", "queue": "q"}]}]}]}');
SELECT wf.publish_definition('bad_par', '{"steps": [{"name": "p", "type": "parallel",
  "branches": [{"steps": [{"name": "a", "queue": "q"}]}, {"stps": []}]}]}');
SELECT wf.publish_definition('bad_par', '{"steps": [{"name": "p", "type": "parallel",
  "branches": [{"steps": [{"name": "a", "queue": "q", "next": "nowhere"}]}, {"steps": [{"name": "b", "queue": "q"}]}]}]}');
-- 20 steps across all branches at most
SELECT wf.publish_definition('too_big', jsonb_build_object('steps', jsonb_build_array(
  jsonb_build_object('name', 'p', 'type', 'parallel', 'branches', jsonb_build_array(
    jsonb_build_object('steps', (SELECT jsonb_agg(jsonb_build_object('name', 'a' || i, 'queue', 'q')) FROM generate_series(1, 10) i)),
    jsonb_build_object('steps', (SELECT jsonb_agg(jsonb_build_object('name', 'b' || i, 'queue', 'q')) FROM generate_series(1, 10) i)))))));
-- parallel steps nest three deep at most
SELECT wf.publish_definition('deep', '{"steps": [{"name": "p", "type": "parallel", "branches": [
  {"steps": [{"name": "q", "type": "parallel", "branches": [
     {"steps": [{"name": "r", "type": "parallel", "branches": [
        {"steps": [{"name": "s", "type": "parallel", "branches": [{"steps": [{"name": "x", "queue": "q"}]}, {"steps": [{"name": "y", "queue": "q"}]}]}]},
        {"steps": [{"name": "z", "queue": "q"}]}]}]},
     {"steps": [{"name": "w", "queue": "q"}]}]}]},
  {"steps": [{"name": "v", "queue": "q"}]}]}]}');

-- the graphs show which definition a subworkflow runs and how a parallel step joins
SELECT wf.definition_graph('onboard') \g (format=unaligned tuples_only)
SELECT wf.definition_graph('quote', format => 'dot') \g (format=unaligned tuples_only)
SELECT pg_catalog.replace(wf.run_graph(:'run'), :'run', '<run>') \g (format=unaligned tuples_only)
