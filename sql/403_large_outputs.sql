-- scenario: a step output of 256 bytes or more is written once, in the history:
-- the run's context (wf.runs.context) keeps the seq of the event that holds it
-- ("output_seq"; a parallel step's branch outputs: "output_seqs") instead of a
-- copy, so that later steps do not write it again;
-- mappings, choices, priorities, sleeps, approvers, compensations and the run's
-- output read it as if it were copied, wf.run_context(run) gives the context
-- whole, and wf.verify_run compares the outputs, not how the snapshot holds them
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9a-f]{8}-[0-9a-f-]{27}', '<run>', 'g');
END
$$;
-- an output of about n bytes: a blob, and small members to map and test
CREATE FUNCTION pg_temp.big(n int, extra jsonb DEFAULT '{}') RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('blob', repeat('x', n)) || extra
$$;
-- how $.steps holds each step's output: "copy", "ref" (output_seq) or "none"
CREATE FUNCTION pg_temp.held(r uuid) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(k || ':' || CASE WHEN v ? 'output_seq' THEN 'ref'
                                       WHEN v ? 'output' THEN 'copy' ELSE 'none' END, ' ' ORDER BY k)
    FROM wf.runs, jsonb_each(context->'steps') AS s(k, v) WHERE run_id = r
$$;
-- the context whole equals the outputs the history recorded, step by step
CREATE FUNCTION pg_temp.whole_matches(r uuid) RETURNS boolean LANGUAGE sql AS $$
    SELECT bool_and(wf.run_context(r)->'steps'->h.step->'output' = h.payload->'output')
    FROM (SELECT DISTINCT ON (step) step, payload FROM wf.history(r)
          WHERE payload ? 'output' AND type NOT IN ('run_completed', 'approval_notified')
          ORDER BY step, seq DESC) h
    WHERE step IS NOT NULL
$$;

SELECT wf.publish_definition('big_out', '{"steps": [
  {"name": "fetch", "queue": "bo_q"},
  {"name": "use", "queue": "bo_q", "priority": "$.steps.fetch.output.prio",
     "input": {"n": "$.steps.fetch.output.n", "blob": "$.steps.fetch.output.blob"}},
  {"name": "route", "type": "choice",
     "choices": [{"when": "$.steps.use.output.n == 2", "next": "nap"}], "default": "other"},
  {"name": "other", "queue": "bo_q", "end": true},
  {"name": "nap", "type": "sleep", "until": "$.steps.fetch.output.at"},
  {"name": "vote", "type": "approval", "approvers": "$.steps.use.output.who", "notify_queue": "bo_mail", "skippable": true},
  {"name": "last", "queue": "bo_q"}],
  "output": {"fetched": "$.steps.fetch.output.n", "used": "$.steps.use.output.n"}}');
SELECT wf.start_run('big_out', '{"order": 7}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('bo_q', 'w') \gset
SELECT wf.complete_task(:t, :f, pg_temp.big(300, '{"n": 1, "prio": 9, "at": "2000-01-01T00:00:00Z"}'));
-- the output is in the history once, and the context refers to it
SELECT pg_temp.held(:'run');
SELECT context->'steps'->'fetch' AS fetch FROM wf.runs WHERE run_id = :'run';
SELECT type, length(payload->'output'->>'blob') AS blob FROM wf.history(:'run')
WHERE seq = (SELECT (context->'steps'->'fetch'->>'output_seq')::int FROM wf.runs WHERE run_id = :'run');
-- the next step maps it, and takes its priority from it
SELECT task_id AS t, fence AS f, input->'n' AS n, length(input->>'blob') AS blob FROM wf.claim_tasks('bo_q', 'w') \gset
SELECT :n AS n, :blob AS blob;
SELECT priority FROM wf.tasks WHERE task_id = :t;
-- a choice tests it, a sleep reads its time from it (past: the sleep ends at
-- the next tick), an approval its approvers
SELECT wf.complete_task(:t, :f, pg_temp.big(400, '{"n": 2, "who": ["ann", "bo"]}'));
SELECT pg_temp.held(:'run');
SELECT context->'steps'->'route'->'output' AS route, current_step FROM wf.runs WHERE run_id = :'run';
SELECT wf.tick() >= 0 AS ticked;
SELECT current_step, context->'steps'->'nap'->'output' AS nap FROM wf.runs WHERE run_id = :'run';
SELECT payload->'approvers' AS approvers FROM wf.history(:'run') WHERE type = 'approval_requested';
SELECT wf.verify_run(:'run');
-- wf.run_context gives the context whole: the input, every output
SELECT wf.run_context(:'run')->'input' AS input,
       wf.run_context(:'run')->'steps'->'use'->'output'->'who' AS who,
       length(wf.run_context(:'run')->'steps'->'fetch'->'output'->>'blob') AS blob,
       wf.run_context(:'run')->'steps'->'route' = (SELECT context->'steps'->'route' FROM wf.runs WHERE run_id = :'run') AS small_as_stored,
       pg_temp.whole_matches(:'run') AS whole_matches;
-- an operator's wf.skip_step with a large output is held the same way
SELECT wf.skip_step(:'run', pg_temp.big(500, '{"skipped_by": "ops"}'), 'approvers away');
SELECT pg_temp.held(:'run');
SELECT wf.run_context(:'run')->'steps'->'vote'->'output'->'skipped_by' AS skipped_by,
       wf.run_context(:'run')->'steps'->'vote'->'skipped' AS skipped;
-- the output mapping reads the outputs it needs; the last step's large
-- output is not the run's output then
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('bo_q', 'w') \gset
SELECT wf.complete_task(:t, :f, pg_temp.big(600));
SELECT status, output FROM wf.runs WHERE run_id = :'run';
SELECT pg_temp.held(:'run');
SELECT wf.verify_run(:'run');
SELECT pg_temp.whole_matches(:'run') AS whole_matches;

-- without an output mapping the run's output is its last step's, whole
SELECT wf.publish_definition('big_last', '{"steps": [{"name": "one", "queue": "bl_q"}, {"name": "two", "queue": "bl_q"}]}');
SELECT wf.start_run('big_last', '{}') AS run2 \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('bl_q', 'w') \gset
SELECT wf.complete_task(:t, :f, '{"small": true}');
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('bl_q', 'w') \gset
SELECT wf.complete_task(:t, :f, pg_temp.big(1000, '{"k": "v"}'));
SELECT status, output->'k' AS k, length(output->>'blob') AS blob FROM wf.runs WHERE run_id = :'run2';
SELECT pg_temp.held(:'run2');
SELECT wf.verify_run(:'run2');

-- a saga's compensation gets the step's output whole in its default input
SELECT wf.publish_definition('big_saga', '{"on_failure": "compensate", "steps": [
  {"name": "book", "queue": "bs_q", "compensate": {"queue": "bs_undo"}},
  {"name": "pay", "queue": "bs_q", "retry": {"max_attempts": 1}}]}');
SELECT wf.start_run('big_saga', '{"trip": 1}') AS run3 \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('bs_q', 'w') \gset
SELECT wf.complete_task(:t, :f, pg_temp.big(700, '{"booking": "B-1"}'));
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('bs_q', 'w') \gset
SELECT wf.fail_task(:t, :f, '{"code": "declined"}', false);
SELECT step, input->'output'->'booking' AS booking, length(input->'output'->>'blob') AS blob,
       input->'input' AS run_input
FROM wf.claim_tasks('bs_undo', 'w');
SELECT wf.verify_run(:'run3');

-- a path is given the outputs it may read: the steps it names, with those a
-- filter names too, or every step when it reads $.steps otherwise
SELECT wf.publish_definition('big_paths', '{"steps": [
  {"name": "a", "queue": "bp_q"}, {"name": "b", "queue": "bp_q"},
  {"name": "c", "queue": "bp_q", "input": {
     "same": "$.steps.a.output.n ? (@ == $.steps.b.output.n)",
     "any": "$.steps.*.output.k",
     "keys": "$.steps.keyvalue().key",
     "root": "$.input.order"}}]}');
SELECT wf.start_run('big_paths', '{"order": 5}') AS run5 \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('bp_q', 'w') \gset
SELECT wf.complete_task(:t, :f, pg_temp.big(300, '{"n": 4}'));
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('bp_q', 'w') \gset
SELECT wf.complete_task(:t, :f, pg_temp.big(300, '{"n": 4, "k": "from b"}'));
SELECT pg_temp.held(:'run5');
SELECT step, input FROM wf.claim_tasks('bp_q', 'w');

-- a parallel step's branch outputs: a large one stays in its child_finished
-- event ($.children.<step>.output_seqs), the join and the paths over
-- $.children get it whole
SELECT wf.publish_definition('big_fan', '{"steps": [
  {"name": "fan", "type": "parallel", "branches": [
     {"steps": [{"name": "x", "queue": "bf_x"}]},
     {"steps": [{"name": "y", "queue": "bf_y"}]},
     {"steps": [{"name": "z", "queue": "bf_z"}]}]},
  {"name": "after", "queue": "bf_after", "input": {
     "second": "$.children.fan.outputs[1].n", "n": "$.steps.fan.output.size()"}}]}');
SELECT wf.start_run('big_fan', '{}') AS run6 \gset
SELECT count(wf.complete_task(task_id, fence, pg_temp.big(400, '{"n": 2}'))) FROM wf.claim_tasks('bf_y', 'w');
SELECT wf.tick() >= 0 AS ticked;
SELECT count(wf.complete_task(task_id, fence, '{"n": 1}')) FROM wf.claim_tasks('bf_x', 'w');
SELECT wf.tick() >= 0 AS ticked;
-- after two branches: y's output by reference, x's copied
SELECT context->'children'->'fan'->'output_seqs' IS NOT NULL AS refers,
       context->'children'->'fan'->'outputs' AS outputs,
       wf.run_context(run_id)->'children'->'fan'->'outputs'->1->'n' AS second,
       wf.run_context(run_id)->'children'->'fan' ? 'output_seqs' AS whole_keeps_refs
FROM wf.runs WHERE run_id = :'run6';
SELECT wf.verify_run(:'run6');
SELECT count(wf.complete_task(task_id, fence, pg_temp.big(500, '{"n": 3}'))) FROM wf.claim_tasks('bf_z', 'w');
SELECT wf.tick() >= 0 AS ticked;
-- the join's output holds every branch's output whole
SELECT jsonb_array_length(payload->'output') AS branches,
       length(payload->'output'->1->>'blob') AS y_blob, length(payload->'output'->2->>'blob') AS z_blob,
       payload->'output'->0 AS x
FROM wf.history(:'run6') WHERE type = 'children_joined';
SELECT pg_temp.held(:'run6');
SELECT step, input FROM wf.claim_tasks('bf_after', 'w');
SELECT wf.verify_run(:'run6');
SELECT pg_temp.whole_matches(:'run6') AS whole_matches;

-- outputs under 256 bytes stay copied in the context, as before
SELECT wf.start_run('big_last', '{}') AS run4 \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('bl_q', 'w') \gset
SELECT wf.complete_task(:t, :f, pg_temp.big(200));
SELECT pg_temp.held(:'run4');
SELECT length(context->'steps'->'one'->'output'->>'blob') AS blob FROM wf.runs WHERE run_id = :'run4';

-- a snapshot whose reference is changed no longer matches its history
UPDATE wf.runs SET context = jsonb_set(context, '{steps,fetch,output_seq}',
    to_jsonb((context->'steps'->'use'->>'output_seq')::int)) WHERE run_id = :'run';
SELECT wf.verify_run(:'run');
-- and one that refers to an event without an output says so, and
-- wf.run_context refuses it
UPDATE wf.runs SET context = jsonb_set(context, '{steps,fetch,output_seq}', '1') WHERE run_id = :'run';
SELECT wf.verify_run(:'run');
SELECT pg_temp.err(format('SELECT wf.run_context(%L)', :'run'));
-- a branch output's reference changed to a seq that cannot be: reported, no more
UPDATE wf.runs SET context = jsonb_set(context, '{children,fan,output_seqs,1}', '-3') WHERE run_id = :'run6';
SELECT wf.verify_run(:'run6');
SELECT pg_temp.err(format('SELECT wf.run_context(%L)', :'run6'));
-- and a step's reference changed to a number no seq can be
UPDATE wf.runs SET context = jsonb_set(context, '{steps,two,output_seq}', '1e20') WHERE run_id = :'run2';
SELECT wf.verify_run(:'run2');
-- wf.run_context of a run that does not exist (or another tenant's)
SELECT pg_temp.err('SELECT wf.run_context(''00000000-0000-0000-0000-000000000000'')');
SELECT wf.run_context(NULL) IS NULL AS strict;

-- scenario: a large mapped input written once.  A step whose input mapping
-- gives it the step before's whole output (256 bytes or more) has its
-- input in its task_scheduled event only: the attempt's row holds input
-- NULL and input_seq, the seq of that event, and every reader takes the
-- input from there: the eager hand-out, wf.claim_tasks, a retry after a
-- failure, a pause's withdrawal and the resume.  A context update leaves
-- it as scheduled.  A small mapped input is copied into the row as ever.
SELECT wf.publish_definition('mapped_in', '{"steps": [
  {"name": "a", "queue": "mq"},
  {"name": "b", "queue": "mq", "input": {"prev": "$.steps.a.output"},
   "retry": {"max_attempts": 3, "initial_interval": "10ms"}},
  {"name": "c", "queue": "mq", "input": {"x": "$.steps.b.output.k"}}]}') IS NOT NULL AS published;
SELECT wf.start_run('mapped_in', '{"n": 1}') AS mrun \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('mq', 'w') \gset
SELECT answer, task_id AS t2, fence AS f2, input->'prev'->>'k' AS handed_out,
       pg_column_size(input) > 600 AS whole
FROM wf.complete_and_claim(:t, :f, jsonb_build_object('k', 'v1', 'blob', repeat('x0123456789abcdef', 40)), 'mq', 'w') \gset
SELECT :'answer' AS answer, :'handed_out' AS handed_out, :'whole' AS whole;
SELECT t.input IS NULL AS input_null, t.input_seq,
       e.type, e.payload->'input'->'prev'->>'k' AS event_input
FROM wf.tasks t JOIN wf.history(:'mrun') e ON e.seq = t.input_seq
WHERE t.run_id = :'mrun';
-- a failure: the retry's attempt names its own task_scheduled
SELECT wf.fail_task(:t2, :f2, '{"why": "flaky"}', true);
-- the retry's timer names that event too, rather than copying the input
SELECT payload ? 'input' AS copied, (payload->>'input_seq')::int AS input_seq
FROM wf.timers WHERE run_id = :'mrun' AND kind = 'retry';
SELECT pg_sleep(0.05);
SELECT wf.tick() >= 0 AS ticked;
SELECT attempt, status, input IS NULL AS input_null, input_seq FROM wf.tasks
WHERE run_id = :'mrun' ORDER BY attempt;
-- a context update keeps the attempt's input; the claim reads it back
SELECT wf.update_context(:'mrun', '{"input": {"n": 2}}', 'regress') IS NOT NULL AS updated;
SELECT task_id AS t3, fence AS f3, input->'prev'->>'k' AS k3, attempt FROM wf.claim_tasks('mq', 'w') \gset
SELECT :'k3' AS claimed_input, :attempt AS attempt;
SELECT wf.complete_task(:t3, :f3, '{"k": "done"}');
-- c's mapped input is small: copied into its row
SELECT input, input_seq FROM wf.tasks WHERE run_id = :'mrun' AND status = 'ready';
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('mq', 'w') \gset
SELECT wf.complete_task(:t, :f, '{}');
SELECT status FROM wf.runs WHERE run_id = :'mrun';
-- a pause withdraws a ready attempt whose input is in the history; the
-- resume schedules it again with that input
SELECT wf.start_run('mapped_in', '{"n": 3}') AS mrun2 \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('mq', 'w') \gset
SELECT wf.complete_task(:t, :f, jsonb_build_object('k', 'v2', 'blob', repeat('y0123456789abcdef', 40)));
SELECT wf.pause_run(:'mrun2', 'regress');
SELECT wf.resume_run(:'mrun2', 'regress');
SELECT status, input IS NULL AS input_null, input_seq IS NOT NULL AS in_history
FROM wf.tasks WHERE run_id = :'mrun2' AND step = 'b' ORDER BY task_id;
SELECT input->'prev'->>'k' AS resumed_input FROM wf.claim_tasks('mq', 'w');
SELECT wf.verify_run(:'mrun') AS verified, wf.verify_run(:'mrun2') AS verified2;
