-- scenario: limits on what one call can make the engine store (issue 10, point 7):
-- the size of every text and JSON argument, the shape of run input,
-- max_events_per_run over every event kind a caller can cause, and the
-- throttling of failed wf.decide calls per token and per approver
\set SHOW_CONTEXT never
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
-- every row of every engine table, as one digest
CREATE FUNCTION pg_temp.digest() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    t text;
    d text := '';
    x text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'wf' AND c.relkind = 'r' ORDER BY 1 LOOP
        EXECUTE format('SELECT md5(coalesce(string_agg(r::text, %L ORDER BY r::text), %L)) FROM wf.%I r',
                       E'\n', '', t) INTO x;
        d := d || t || ':' || x || ' ';
    END LOOP;
    RETURN md5(d);
END
$$;

SELECT wf.publish_definition('lim', '{"steps": [
  {"name": "a", "queue": "lim_q"},
  {"name": "ap", "type": "approval", "approvers": ["alice"], "notify_queue": "lim_mail"},
  {"name": "w", "type": "wait_event", "event": "go"}],
  "correlation": {"k": "$.input.k"}}');
SELECT wf.start_run('lim', '{"k": "K1"}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('lim_q', 'w1') \gset
CREATE TEMP TABLE before AS SELECT pg_temp.digest() AS digest;

-- one line per limit: SQLSTATE and message; big values are made inside the call
CREATE TEMP TABLE cases (n serial, what text, q text);
INSERT INTO cases (what, q) VALUES
 -- reasons: 2000 bytes
 ('wf.cancel_run reason (10 MB)', format('SELECT wf.cancel_run(%L, repeat(''x'', 10485760))', :'run')),
 ('wf.terminate_run reason', format('SELECT wf.terminate_run(%L, repeat(''x'', 2001))', :'run')),
 ('wf.pause_run reason', format('SELECT wf.pause_run(%L, repeat(''x'', 2001))', :'run')),
 ('wf.resume_run reason', format('SELECT wf.resume_run(%L, repeat(''x'', 2001))', :'run')),
 ('wf.retry_step reason', format('SELECT wf.retry_step(%L, repeat(''x'', 2001))', :'run')),
 ('wf.skip_step reason', format('SELECT wf.skip_step(%L, ''{}'', repeat(''x'', 2001))', :'run')),
 ('wf.update_context reason', format('SELECT wf.update_context(%L, ''{"a": 1}'', repeat(''x'', 2001))', :'run')),
 ('wf.migrate_run reason', format('SELECT wf.migrate_run(%L, 1, repeat(''x'', 2001))', :'run')),
 ('wf.set_legal_hold reason', format('SELECT wf.set_legal_hold(%L, true, repeat(''x'', 2001))', :'run')),
 ('wf.revoke_approval_tokens reason', format('SELECT wf.revoke_approval_tokens(%L, ''ap'', repeat(''x'', 2001))', :'run')),
 ('wf.reissue_approval_tokens reason', format('SELECT wf.reissue_approval_tokens(%L, ''ap'', repeat(''x'', 2001))', :'run')),
 ('wf.set_approvers reason', format('SELECT wf.set_approvers(%L, ''ap'', ARRAY[''bob''], repeat(''x'', 2001))', :'run')),
 ('wf.cancel_runs reason', 'SELECT count(*) FROM wf.cancel_runs(repeat(''x'', 2001))'),
 ('wf.retry_runs reason', 'SELECT count(*) FROM wf.retry_runs(repeat(''x'', 2001))'),
 ('wf.resume_runs reason', 'SELECT count(*) FROM wf.resume_runs(repeat(''x'', 2001))'),
 ('wf.decide comment', 'SELECT wf.decide(''wfa_x'', ''approve'', ''alice'', repeat(''x'', 2001))'),
 -- names and identifiers: 200 bytes
 ('wf.claim_tasks queue (100 kB)', 'SELECT count(*) FROM wf.claim_tasks(repeat(''q'', 102400), ''w1'')'),
 ('wf.claim_tasks worker (100 kB)', 'SELECT count(*) FROM wf.claim_tasks(''lim_q'', repeat(''w'', 102400))'),
 ('wf.start_run definition', 'SELECT wf.start_run(repeat(''d'', 201))'),
 ('wf.publish_definition name', 'SELECT wf.publish_definition(repeat(''d'', 201), ''{"steps": [{"name": "a", "queue": "q"}]}'')'),
 ('definition activity', format('SELECT wf.publish_definition(''lim_act'', %L)',
     jsonb_build_object('steps', jsonb_build_array(jsonb_build_object('name', 'a', 'queue', 'q', 'activity', repeat('a', 201)))))),
 ('wf.skip_step step', format('SELECT wf.skip_step(%L, ''{}'', ''why'', repeat(''s'', 201))', :'run')),
 ('wf.revoke_approval_tokens step', format('SELECT wf.revoke_approval_tokens(%L, repeat(''s'', 201), ''why'')', :'run')),
 ('wf.schedule name', 'SELECT wf.schedule(repeat(''s'', 201), ''* * * * *'', ''lim'')'),
 ('wf.schedule cron', 'SELECT wf.schedule(''nightly'', repeat(''*'', 201), ''lim'')'),
 ('wf.schedule definition', 'SELECT wf.schedule(''nightly'', ''* * * * *'', repeat(''d'', 201))'),
 ('wf.decide decision', 'SELECT wf.decide(''wfa_x'', repeat(''a'', 201), ''alice'')'),
 -- keys: 255 bytes
 ('wf.start_run idempotency key', 'SELECT wf.start_run(''lim'', ''{}'', repeat(''k'', 256))'),
 ('correlation key of the run', 'SELECT wf.start_run(''lim'', jsonb_build_object(''k'', repeat(''v'', 254)))'),
 ('wf.signal event id', format('SELECT wf.signal(%L, ''go'', ''{}'', repeat(''e'', 256))', :'run')),
 ('wf.send_event correlation key', 'SELECT count(*) FROM wf.send_event(repeat(''k'', 256), ''go'')'),
 ('wf.send_event event id', 'SELECT count(*) FROM wf.send_event(''k:K1'', ''go'', ''{}'', repeat(''e'', 256))'),
 ('wf.decide approver', 'SELECT wf.decide(''wfa_x'', ''approve'', repeat(''a'', 256))'),
 ('wf.set_approvers approver', format('SELECT wf.set_approvers(%L, ''ap'', ARRAY[''bob'', repeat(''a'', 256)], ''why'')', :'run')),
 -- signal names: 63 bytes, as event names of a definition
 ('wf.signal name', format('SELECT wf.signal(%L, repeat(''n'', 64))', :'run')),
 ('wf.send_event name', 'SELECT count(*) FROM wf.send_event(''k:K1'', repeat(''n'', 64))'),
 -- JSON arguments: wfengine.max_payload_size (256 kB)
 ('wf.start_run input', 'SELECT wf.start_run(''lim'', jsonb_build_object(''x'', repeat(''x'', 300000)))'),
 ('wf.schedule input (10 MB)', 'SELECT wf.schedule(''nightly'', ''* * * * *'', ''lim'', jsonb_build_object(''x'', repeat(''x'', 10485760)))'),
 ('wf.signal payload', format('SELECT wf.signal(%L, ''go'', jsonb_build_object(''x'', repeat(''x'', 300000)))', :'run')),
 ('wf.send_event payload', 'SELECT count(*) FROM wf.send_event(''k:K1'', ''go'', jsonb_build_object(''x'', repeat(''x'', 300000)))'),
 ('wf.update_context patch', format('SELECT wf.update_context(%L, jsonb_build_object(''x'', repeat(''x'', 300000)), ''why'')', :'run')),
 ('wf.skip_step output', format('SELECT wf.skip_step(%L, jsonb_build_object(''x'', repeat(''x'', 300000)), ''why'')', :'run')),
 ('wf.complete_task output', format('SELECT wf.complete_task(%s, %s, jsonb_build_object(''x'', repeat(''x'', 300000)))', :t, :f)),
 ('wf.fail_task error', format('SELECT wf.fail_task(%s, %s, jsonb_build_object(''x'', repeat(''x'', 300000)))', :t, :f)),
 ('wf.heartbeat details', format('SELECT wf.heartbeat(%s, %s, jsonb_build_object(''x'', repeat(''x'', 300000)))', :t, :f)),
 ('wf.decide data', 'SELECT wf.decide(''wfa_x'', ''approve'', ''alice'', NULL, jsonb_build_object(''x'', repeat(''x'', 300000)))');
SELECT what, pg_temp.err(q) AS refused FROM cases ORDER BY n;
-- nothing was changed, and values at the limit pass
SELECT digest = pg_temp.digest() AS nothing_changed FROM before;
SELECT wf.heartbeat(:t, :f, jsonb_build_object('worker', repeat('w', 10)));
SELECT count(*) AS claimed FROM wf.claim_tasks('lim_q', repeat('w', 200));
SELECT wf.pause_run(:'run', repeat('r', 2000)), wf.resume_run(:'run', repeat('r', 2000));
SELECT wf.start_run('lim', jsonb_build_object('k', repeat('v', 253)), repeat('k', 255)) IS NOT NULL AS started_at_limits;
SELECT length(key) FROM wf.correlations WHERE length(key) > 200;
-- a child run, started by its parent's transition, goes without a key too long
SELECT wf.publish_definition('lim_child', '{"steps": [{"name": "c", "queue": "lim_c"}],
  "correlation": {"k": "$.input.k"}}');
SELECT wf.publish_definition('lim_parent', '{"steps": [
  {"name": "sub", "type": "subworkflow", "definition": "lim_child", "version": 1, "input": {"k": "$.input.k"}}]}');
SELECT wf.start_run('lim_parent', jsonb_build_object('k', repeat('v', 300))) AS parent \gset
SELECT c.status, (SELECT count(*) FROM wf.correlations x WHERE x.run_id = c.run_id) AS keys
FROM wf.runs c WHERE c.parent_run_id = :'parent';

-- run input is a JSON object; SQL NULL keeps its meaning (refused, 22004)
SELECT shape, pg_temp.err(format('SELECT wf.start_run(''lim'', %L::jsonb)', shape)) AS answer
FROM unnest(ARRAY['[1]', '"s"', 'null', '42', 'true', '{}']) AS shape;
SELECT pg_temp.err('SELECT wf.start_run(''lim'', NULL)') AS sql_null;
SELECT shape, pg_temp.err(format('SELECT wf.schedule(''nightly'', ''* * * * *'', ''lim'', %L::jsonb)', shape)) AS schedule_input
FROM unnest(ARRAY['[1]', 'null']) AS shape;
SELECT pg_temp.err('SELECT wf.schedule(''nightly'', ''* * * * *'', ''lim'', NULL)') AS schedule_null;
-- so is an event's payload (wf.send_event), whether a run declared the key or
-- not; SQL NULL is '{}', as before
SELECT shape, pg_temp.err(format('SELECT * FROM wf.send_event(''k:nobody'', ''go'', %L::jsonb)', shape)) AS send_event
FROM unnest(ARRAY['[1]', '"s"', 'null', '42', 'true']) AS shape;
SELECT * FROM wf.send_event('k:nobody', 'go', '"delivered"');
SELECT count(*) AS kept FROM wf.buffered_events WHERE key = 'k:nobody';
SELECT run_id, outcome FROM wf.send_event('k:nobody', 'go', NULL);

-- max_events_per_run: 200 replays of a used token stop adding events at the
-- limit; they are counted in wf.suppressed_events, the answers do not change
-- and the history still verifies (decide throttling is out of the way here)
SET wfengine.decide_failure_limit = 1000;
SELECT wf.publish_definition('lim_ap', '{"steps": [
  {"name": "ap", "type": "approval", "approvers": ["alice"], "notify_queue": "lim_mail"},
  {"name": "w", "type": "wait_event", "event": "go"}]}');
SELECT wf.start_run('lim_ap') AS aprun \gset
SELECT task_id AS nt, fence AS nf FROM wf.claim_tasks('lim_mail', 'mailer') \gset
SELECT token AS tok FROM wf.issue_approval_tokens(:nt, :nf) WHERE decision = 'approve' \gset
SELECT wf.complete_task(:nt, :nf, '{}');
SELECT wf.decide(:'tok', 'approve', 'alice') AS first_use;
SELECT seq AS events_before FROM wf.runs WHERE run_id = :'aprun';
SELECT max_events_per_run FROM wf.set_tenant_policy('default', '{"max_events_per_run": 20}');
SELECT answer, count(*) FROM (SELECT wf.decide(:'tok', 'approve', 'alice') AS answer
                              FROM generate_series(1, 200)) x GROUP BY answer;
SELECT seq AS events, (SELECT count(*) FROM wf._run_events(r.run_id, r.tenant_id)) AS stored
FROM wf.runs r WHERE run_id = :'aprun';
SELECT type, count, first_at <= last_at AS ordered FROM wf.suppressed_events WHERE run_id = :'aprun';
SELECT count(*) AS attempts_recorded FROM wf.approval_attempts WHERE run_id = :'aprun';
SELECT wf.verify_run(:'aprun');
RESET wfengine.decide_failure_limit;

-- duplicate and stale results beyond the limit: counted, the same answers
SELECT wf.publish_definition('lim_t', '{"steps": [{"name": "a", "queue": "lim_t"},
  {"name": "w", "type": "wait_event", "event": "go"}]}');
SELECT max_events_per_run FROM wf.set_tenant_policy('default', '{"max_events_per_run": 4}');
SELECT wf.start_run('lim_t') AS trun \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('lim_t', 'w1') \gset
SELECT wf.complete_task(:t, :f, '{"n": 1}');
SELECT seq FROM wf.runs WHERE run_id = :'trun';
SELECT wf.complete_task(:t, :f, '{"n": 2}') FROM generate_series(1, 3);
SELECT wf.fail_task(:t, :f, '{"code": "late"}') FROM generate_series(1, 2);
SELECT wf.start_run('lim_t') AS srun \gset
SELECT task_id AS t2, fence AS f2 FROM wf.claim_tasks('lim_t', 'w1') \gset
SELECT wf.terminate_run(:'srun', 'stop it');
SELECT wf.complete_task(:t2, :f2, '{}') FROM generate_series(1, 3);
SELECT r.run_id = :'trun' AS first_run, s.type, s.count
FROM wf.suppressed_events s JOIN wf.runs r USING (run_id)
WHERE r.definition_name = 'lim_t' ORDER BY 1 DESC, 2;
SELECT seq, (SELECT count(*) FROM wf._run_events(r.run_id, r.tenant_id)) AS stored
FROM wf.runs r WHERE definition_name = 'lim_t' ORDER BY created_at;
SELECT wf.verify_run(:'trun') AND wf.verify_run(:'srun') AS verified;

-- signals and the commands that append without moving the run on are
-- refused at the limit; a duplicate signal is counted; ending the run, and
-- placing a legal hold, still work
SELECT max_events_per_run FROM wf.set_tenant_policy('default', '{"max_events_per_run": null}');
SELECT wf.signal(:'trun', 'noise', '{}', 'e1');
SELECT max_events_per_run FROM wf.set_tenant_policy('default', '{"max_events_per_run": 5}');
SELECT wf.signal(:'trun', 'noise', '{}', 'e1') FROM generate_series(1, 2);
SELECT what, pg_temp.err(q) AS refused FROM (VALUES
  (1, 'new signal', format('SELECT wf.signal(%L, ''noise'', ''{}'', ''e2'')', :'trun')),
  (3, 'update_context', format('SELECT wf.update_context(%L, ''{"a": 1}'', ''why'')', :'trun')),
  (4, 'pause_run', format('SELECT wf.pause_run(%L, ''why'')', :'trun')),
  (5, 'migrate_run', format('SELECT wf.migrate_run(%L, 2, ''why'')', :'trun')),
  (6, 'legal hold placed', format('SELECT wf.set_legal_hold(%L, true, ''litigation'')', :'trun')),
  (7, 'legal hold again', format('SELECT wf.set_legal_hold(%L, true, ''again'')', :'trun')),
  (8, 'legal hold released', format('SELECT wf.set_legal_hold(%L, false, ''done'')', :'trun')),
  (9, 'terminate_run', format('SELECT wf.terminate_run(%L, ''enough'')', :'trun'))) AS v(n, what, q)
ORDER BY n;
SELECT type, count FROM wf.suppressed_events WHERE run_id = :'trun' ORDER BY type;
SELECT status, legal_hold, seq FROM wf.runs WHERE run_id = :'trun';
SELECT wf.verify_run(:'trun');
SELECT max_events_per_run FROM wf.set_tenant_policy('default', '{"max_events_per_run": null}');

-- at the limit a paused run is still resumed (a pause before it was refused),
-- and a failed run is not retried, but skipped
SELECT wf.start_run('lim_t') AS prun \gset
SELECT wf.pause_run(:'prun', 'wait');
SELECT wf.start_run('lim_t') AS frun \gset
SELECT task_id AS t4, fence AS f4 FROM wf.claim_tasks('lim_t', 'w1') \gset
SELECT wf.fail_task(:t4, :f4, '{"code": "broken"}', false);
SELECT max_events_per_run FROM wf.set_tenant_policy('default', '{"max_events_per_run": 2}');
SELECT what, pg_temp.err(q) AS refused FROM (VALUES
  (1, 'resume_run', format('SELECT wf.resume_run(%L, ''go on'')', :'prun')),
  (2, 'pause_run', format('SELECT wf.pause_run(%L, ''again'')', :'prun')),
  (3, 'retry_step', format('SELECT wf.retry_step(%L, ''again'')', :'frun')),
  (4, 'skip_step', format('SELECT wf.skip_step(%L, ''{}'', ''move on'')', :'frun'))) AS v(n, what, q)
ORDER BY n;
SELECT status, current_step FROM wf.runs WHERE run_id IN (:'prun', :'frun') ORDER BY created_at;

-- an approval step at the limit takes its decisions, its first tokens, but no
-- new tokens, revocations or approvers
SELECT max_events_per_run FROM wf.set_tenant_policy('default', '{"max_events_per_run": null}');
SELECT wf.publish_definition('lim_ap2', '{"steps": [
  {"name": "ap", "type": "approval", "approvers": ["bea"], "notify_queue": "lim_mail"}]}');
SELECT wf.start_run('lim_ap2') AS ap2 \gset
SELECT max_events_per_run FROM wf.set_tenant_policy('default', '{"max_events_per_run": 3}');
SELECT task_id AS nt, fence AS nf FROM wf.claim_tasks('lim_mail', 'mailer') \gset
SELECT token AS tok2 FROM wf.issue_approval_tokens(:nt, :nf) WHERE decision = 'approve' \gset
SELECT what, pg_temp.err(q) AS refused FROM (VALUES
  (1, 'issue again', format('SELECT count(*) FROM wf.issue_approval_tokens(%s, %s)', :nt, :nf)),
  (2, 'revoke', format('SELECT wf.revoke_approval_tokens(%L, ''ap'', ''why'')', :'ap2')),
  (3, 'reissue', format('SELECT wf.reissue_approval_tokens(%L, ''ap'', ''why'')', :'ap2')),
  (4, 'set_approvers', format('SELECT wf.set_approvers(%L, ''ap'', ARRAY[''bob''], ''why'')', :'ap2'))) AS v(n, what, q)
ORDER BY n;
SELECT wf.decide(:'tok2', 'approve', 'bea') AS decided_at_limit;
SELECT status, seq FROM wf.runs WHERE run_id = :'ap2';
SELECT wf.verify_run(:'prun') AND wf.verify_run(:'frun') AND wf.verify_run(:'ap2') AS verified;
SELECT max_events_per_run FROM wf.set_tenant_policy('default', '{"max_events_per_run": null}');

-- wf.decide failures per approver: the first 10 in the window are recorded;
-- then the approver is throttled, its token not even looked at; when the
-- window is over, calls are taken again
SELECT wf.publish_definition('lim_two', '{"steps": [
  {"name": "ap", "type": "approval", "approvers": ["carol", "dave"], "policy": "all",
   "notify_queue": "lim_mail2"}]}');
SELECT wf.start_run('lim_two') AS two \gset
SELECT task_id AS nt, fence AS nf FROM wf.claim_tasks('lim_mail2', 'mailer') \gset
CREATE TEMP TABLE two_tokens AS SELECT * FROM wf.issue_approval_tokens(:nt, :nf) WHERE decision = 'approve';
SELECT token AS carol FROM two_tokens WHERE approver = 'carol' \gset
SELECT token AS dave FROM two_tokens WHERE approver = 'dave' \gset
SELECT wf.complete_task(:nt, :nf, '{}');
SELECT i, wf.decide('wfa_' || repeat(chr(64 + i), 43), 'approve', 'carol') AS answer
FROM generate_series(1, 12) i;
SELECT wf.decide(:'carol', 'approve', 'carol') AS good_token_while_throttled;
SELECT outcome, count(*) FROM wf.approval_attempts WHERE approver = 'carol' GROUP BY outcome;
SELECT kind, subject, failures, suppressed, throttled FROM wf.decide_failures WHERE kind = 'approver';
-- per token: dave's used token presented for 12 other approvers: all invalid,
-- the first 10 recorded (audit row and event), the rest only counted; dave's
-- own replay is within his limit, but beyond the token's
SELECT wf.decide(:'dave', 'approve', 'dave') AS dave;
SELECT i, wf.decide(:'dave', 'approve', 'x' || i) AS answer FROM generate_series(1, 12) i;
SELECT wf.decide(:'dave', 'approve', 'dave') AS dave_again;
SELECT count(*) FILTER (WHERE approver LIKE 'x%') AS x_attempts,
       count(*) FILTER (WHERE approver = 'dave') AS dave_attempts
FROM wf.approval_attempts WHERE run_id = :'two';
SELECT count(*) AS refused_events FROM wf.events WHERE run_id = :'two' AND type = 'decision_refused';
SELECT failures, suppressed, throttled, run_id = :'two' AS of_the_run
FROM wf.decide_failures WHERE kind = 'token';
-- the windows end (set back here): carol is heard again, and her token decides
UPDATE wf.decide_failures SET window_start = window_start - interval '2 minutes';
SELECT wf.decide(:'carol', 'approve', 'carol') AS carol_after_window;
SELECT wf.decide(:'dave', 'approve', 'x13') AS token_after_window;
SELECT status FROM wf.runs WHERE run_id = :'two';
SELECT kind, CASE kind WHEN 'token' THEN '<hash>' ELSE subject END AS subject,
       failures, suppressed, throttled
FROM wf.decide_failures WHERE subject !~ '^x[0-9]+$' ORDER BY kind, failures, subject;
SELECT count(*) AS x_rows, sum(failures) AS x_failures FROM wf.decide_failures WHERE subject ~ '^x[0-9]+$';
SELECT wf.verify_run(:'two');
-- a smaller limit from the setting, for a superuser only
SET wfengine.decide_failure_limit = 2;
SELECT wf.decide('wfa_' || repeat('z', 43), 'approve', 'erin') FROM generate_series(1, 3);
RESET wfengine.decide_failure_limit;

-- the purge takes the counters of a run with it
SELECT retention FROM wf.set_tenant_policy('default', '{"retention": "1 second"}');
UPDATE wf.decide_failures SET last_at = last_at - interval '1 hour';
SELECT pg_sleep(1.1);
SELECT wf.purge_runs() AS purged;
SELECT run_id = :'trun' AS held_run, type, count FROM wf.suppressed_events ORDER BY type;
SELECT kind, CASE kind WHEN 'token' THEN '<hash>' ELSE subject END AS subject,
       run_id = :'aprun' AS of_aprun
FROM wf.decide_failures ORDER BY kind, subject;
