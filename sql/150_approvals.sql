-- scenario: human approval steps with one-time, hashed tokens
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;

-- scenario: one approval of two approvers moves the run on, with the decision's data
SELECT wf.publish_definition('expense', '{"steps": [
  {"name": "approve", "type": "approval", "approvers": ["alice", "bob"],
   "notify_queue": "ap_mail", "expires": "1d"},
  {"name": "pay", "queue": "ap_pay", "input": {"limit": "$.steps.approve.output.decisions[0].data.limit"}}]}');
SELECT wf.start_run('expense', '{"amount": 10}') AS run \gset
SELECT type, step, payload->'approvers' AS approvers, payload->>'needed' AS needed
FROM wf.history(:'run') WHERE type = 'approval_requested';
SELECT approver, status, approve_hash IS NULL AND reject_hash IS NULL AS no_token_yet FROM wf.approvals WHERE run_id = :'run' ORDER BY approver;
-- the notification worker claims its task and gets the tokens, once
SELECT task_id AS t, fence AS f, input->'approvers' AS approvers FROM wf.claim_tasks('ap_mail', 'mailer') \gset
\echo :approvers
SELECT approver, decision, length(token) AS len, left(token, 4) AS prefix, expires_at > now() AS expires_later
FROM wf.issue_approval_tokens(:t, :f) ORDER BY approver, decision;
-- issuing again mints new tokens; the earlier ones stop working
SELECT token AS old_alice FROM wf.issue_approval_tokens(:t, :f) WHERE approver = 'alice' AND decision = 'approve' \gset
CREATE TEMP TABLE expense_tokens AS SELECT * FROM wf.issue_approval_tokens(:t, :f);
SELECT token AS alice FROM expense_tokens WHERE approver = 'alice' AND decision = 'approve' \gset
SELECT token AS bob_unused FROM expense_tokens WHERE approver = 'bob' AND decision = 'reject' \gset
SELECT wf.complete_task(:t, :f, '{"sent": 2}');
SELECT wf.decide(:'old_alice', 'approve', 'alice');
-- a token is bound to its approver; a tampered or made-up token matches nothing
SELECT wf.decide(:'alice', 'approve', 'bob');
SELECT wf.decide(overlay(:'alice' placing CASE WHEN substr(:'alice', 10, 1) = 'A' THEN 'B' ELSE 'A' END
                         from 10 for 1), 'approve', 'alice');
SELECT wf.decide('wfa_' || repeat('x', 43), 'approve', 'alice');
SELECT wf.decide('not a token', 'approve', 'alice');
SELECT wf.decide(:'alice', 'approve', 'alice', 'within budget', '{"limit": 100}');
-- replay: the second use changes nothing; a token is good for its own decision only
SELECT wf.decide(:'alice', 'approve', 'alice');
SELECT wf.decide(:'alice', 'reject', 'alice');
SELECT status, current_step, context->'steps'->'approve'->'output' AS output FROM wf.runs WHERE run_id = :'run';
SELECT input FROM wf.claim_tasks('ap_pay', 'payer');
-- the step is over: the unused token of the other approver no longer counts
SELECT wf.decide(:'bob_unused', 'reject', 'bob');
SELECT seq, type, step, payload->>'outcome' AS outcome FROM wf.history(:'run');
SELECT outcome, approver, decision, run_id IS NOT NULL AS bound FROM wf.approval_attempts ORDER BY attempt_id;
SELECT wf.verify_run(:'run');

-- scenario: one reject ends the step as rejected and fails the run
SELECT wf.start_run('expense', '{"amount": 11}') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('ap_mail', 'mailer') \gset
SELECT token AS bob FROM wf.issue_approval_tokens(:t, :f) WHERE approver = 'bob' AND decision = 'reject' \gset
SELECT wf.decide(:'bob', 'reject', 'bob', 'too expensive');
SELECT status FROM wf.runs WHERE run_id = :'run';
SELECT type, payload->>'reason' AS reason FROM wf.history(:'run') WHERE type IN ('task_cancelled', 'approval_completed', 'run_failed');
-- the notification task was withdrawn: its worker is told to stop
SELECT wf.heartbeat(:t, :f);
SELECT wf.verify_run(:'run');

-- scenario: a quorum of 2 of 3, approvers from the run's input
SELECT wf.publish_definition('board', '{"steps": [
  {"name": "vote", "type": "approval", "approvers": "$.input.board", "policy": {"quorum": 2},
   "notify_queue": "ap_mail"}]}');
SELECT wf.start_run('board', '{"board": ["ann", "ben", "cat", "ann"]}') AS run \gset
SELECT approver FROM wf.approvals WHERE run_id = :'run' ORDER BY approver;
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('ap_mail', 'mailer') \gset
-- who still has to decide, and since when
SELECT definition_name, step, approver, token_issued, age >= interval '0' AS has_age, expires_at
FROM wf.pending_approvals WHERE run_id = :'run' ORDER BY approver;
CREATE TEMP TABLE board_tokens AS SELECT * FROM wf.issue_approval_tokens(:t, :f);
SELECT wf.decide(token, 'approve', approver) FROM board_tokens WHERE approver = 'ann' AND decision = 'approve';
SELECT approver, token_issued FROM wf.pending_approvals WHERE run_id = :'run' ORDER BY approver;
SELECT status, current_step FROM wf.runs WHERE run_id = :'run';
SELECT wf.decide(token, 'approve', approver) FROM board_tokens WHERE approver = 'ann' AND decision = 'approve';
SELECT wf.decide(token, 'approve', approver) FROM board_tokens WHERE approver = 'cat' AND decision = 'approve';
SELECT status, output->>'outcome' AS outcome, jsonb_array_length(output->'decisions') AS decisions
FROM wf.runs WHERE run_id = :'run';
SELECT wf.decide(token, 'approve', approver) FROM board_tokens WHERE approver = 'ben' AND decision = 'approve';
SELECT wf.verify_run(:'run');
-- no approvers found: the run fails and says why
SELECT wf.start_run('board', '{"board": []}') AS run \gset
SELECT status, (SELECT payload->>'reason' FROM wf.history(:'run') WHERE type = 'run_failed') AS reason
FROM wf.runs WHERE run_id = :'run';

-- scenario: an expired token, and expiry routing to another step
SELECT wf.publish_definition('timed', '{"steps": [
  {"name": "ok", "type": "approval", "approvers": ["dan"], "notify_queue": "ap_mail",
   "expires": "200ms", "on_expiry": "escalate"},
  {"name": "done", "queue": "ap_done", "end": true},
  {"name": "escalate", "queue": "ap_escalate"}]}');
SELECT wf.start_run('timed') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('ap_mail', 'mailer') \gset
SELECT token AS dan FROM wf.issue_approval_tokens(:t, :f) WHERE decision = 'approve' \gset
SELECT wf.complete_task(:t, :f, '{}');
SELECT pg_sleep(0.3);
SELECT wf.decide(:'dan', 'approve', 'dan');
SELECT wf.tick();
SELECT status, current_step, context->'steps'->'ok'->'output'->>'outcome' AS outcome
FROM wf.runs WHERE run_id = :'run';
SELECT count(*) AS escalated FROM wf.claim_tasks('ap_escalate', 'w');
SELECT wf.decide(:'dan', 'approve', 'dan');
SELECT wf.verify_run(:'run');

-- scenario: two rejects needed to reject; a token of another tenant is invalid
SELECT wf.publish_definition('lenient', '{"steps": [
  {"name": "ok", "type": "approval", "approvers": ["hal", "ida", "jo"], "rejections": 2,
   "notify_queue": "ap_len"}]}');
SELECT wf.start_run('lenient') AS run \gset
CREATE TEMP TABLE len_tokens AS
SELECT i.* FROM wf.claim_tasks('ap_len', 'mailer') c, wf.issue_approval_tokens(c.task_id, c.fence) i;
SELECT wf.decide(token, 'reject', approver) FROM len_tokens WHERE approver = 'hal' AND decision = 'reject';
SELECT status, current_step FROM wf.runs WHERE run_id = :'run';
-- (as a superuser: move one approver's row to another tenant; its tokens stop working)
UPDATE wf.approvals SET tenant_id = 'other' WHERE run_id = :'run' AND approver = 'jo';
SELECT wf.decide(token, 'approve', approver) FROM len_tokens WHERE approver = 'jo' AND decision = 'approve';
UPDATE wf.approvals SET tenant_id = 'default' WHERE run_id = :'run' AND approver = 'jo';
SELECT wf.decide(token, 'reject', approver) FROM len_tokens WHERE approver = 'ida' AND decision = 'reject';
SELECT status, context->'steps'->'ok'->'output'->>'outcome' AS outcome FROM wf.runs WHERE run_id = :'run';
SELECT wf.verify_run(:'run');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "type": "approval", "approvers": ["x"], "notify_queue": "q", "rejections": 2}]}');

-- scenario: a token acts on its own run and step only
SELECT wf.start_run('lenient') AS run_a \gset
SELECT wf.start_run('lenient') AS run_b \gset
CREATE TEMP TABLE ab_tokens AS
SELECT c.run_id, i.* FROM wf.claim_tasks('ap_len', 'mailer', 2) c, wf.issue_approval_tokens(c.task_id, c.fence) i;
SELECT wf.decide(token, 'approve', approver) FROM ab_tokens
WHERE run_id = :'run_a' AND approver = 'hal' AND decision = 'approve';
SELECT run_id = :'run_a' AS is_a, status, context->'steps'->'ok'->'output'->>'outcome' AS outcome
FROM wf.runs WHERE run_id IN (:'run_a', :'run_b') ORDER BY 1 DESC;
SELECT run_id = :'run_a' AS is_a, count(*) FILTER (WHERE status = 'decided') AS decided
FROM wf.approvals WHERE run_id IN (:'run_a', :'run_b') GROUP BY 1 ORDER BY 1 DESC;

-- scenario: operator commands: revoke, re-issue, replace approvers (each audited)
SELECT wf.publish_definition('ops', '{"steps": [
  {"name": "ok", "type": "approval", "approvers": ["eve", "fay"], "policy": "all", "notify_queue": "ap_ops"}]}');
SELECT wf.start_run('ops') AS run \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('ap_ops', 'mailer') \gset
CREATE TEMP TABLE ops_tokens AS SELECT * FROM wf.issue_approval_tokens(:t, :f);
SELECT wf.revoke_approval_tokens(:'run', 'ok', 'mail server leaked the links');
SELECT wf.decide(token, 'approve', approver) FROM ops_tokens WHERE approver = 'eve' AND decision = 'approve';
-- a re-issue withdraws the old notification task and schedules a new one
SELECT wf.reissue_approval_tokens(:'run', 'ok', 'send again') AS t2 \gset
SELECT wf.heartbeat(:t, :f);
SELECT task_id = :t2 AS same_task, attempt FROM wf.claim_tasks('ap_ops', 'mailer') \gset
\echo :same_task :attempt
CREATE TEMP TABLE ops_tokens2 AS
SELECT i.* FROM wf.tasks k, wf.issue_approval_tokens(k.task_id, k.fence) i WHERE k.task_id = :t2;
SELECT wf.decide(token, 'approve', approver) FROM ops_tokens2 WHERE approver = 'eve' AND decision = 'approve';
-- fay is replaced by gus after her token was issued: her token stops working
SELECT wf.set_approvers(:'run', 'ok', ARRAY['eve', 'gus'], 'fay is on leave');
SELECT wf.decide(token, 'approve', approver) FROM ops_tokens2 WHERE approver = 'fay' AND decision = 'approve';
SELECT approver, status FROM wf.approvals WHERE run_id = :'run' ORDER BY approver;
SELECT wf.reissue_approval_tokens(:'run', 'ok', 'gus needs a token') AS t3 \gset
SELECT fence AS f3 FROM wf.claim_tasks('ap_ops', 'mailer') \gset
SELECT wf.decide(token, 'approve', approver) FROM wf.issue_approval_tokens(:t3, :f3)
WHERE approver = 'gus' AND decision = 'approve';
SELECT status, output->>'outcome' AS outcome,
       (SELECT string_agg(d->>'approver', ',') FROM jsonb_array_elements(output->'decisions') d) AS approvers
FROM wf.runs WHERE run_id = :'run';
SELECT type, actor = current_user AS by_me, payload->>'reason' AS reason, payload->'removed' AS removed,
       payload->'added' AS added
FROM wf.history(:'run') WHERE type IN ('approval_tokens_revoked', 'approvers_changed') ORDER BY seq;
SELECT wf.verify_run(:'run');
-- refusals (run ids vary, so errors naming the run are shown through a helper)
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9a-f]{8}-[0-9a-f-]{27}', '<run>');
END
$$;
SELECT pg_temp.err(format('SELECT wf.revoke_approval_tokens(%L, %L, %L)', :'run', 'ok', 'too late'));
SELECT pg_temp.err(format('SELECT wf.set_approvers(%L, %L, ARRAY[%L], %L)', :'run', 'nope', 'x', 'why'));
SELECT wf.revoke_approval_tokens(:'run', 'ok', '');
SELECT wf.set_approvers(:'run', 'ok', ARRAY[]::text[], 'why');

-- scenario: no raw token is stored anywhere
SELECT count(*) AS tokens_seen FROM (
  SELECT row_to_json(a)::text AS t FROM wf.approvals a
  UNION ALL SELECT row_to_json(e)::text FROM wf.events e
  UNION ALL SELECT row_to_json(k)::text FROM wf.tasks k
  UNION ALL SELECT row_to_json(r)::text FROM wf.runs r
  UNION ALL SELECT row_to_json(x)::text FROM wf.approval_attempts x
  UNION ALL SELECT row_to_json(m)::text FROM wf.timers m) rows,
  (SELECT token FROM board_tokens UNION ALL SELECT token FROM ops_tokens
   UNION ALL SELECT token FROM ops_tokens2 UNION ALL SELECT token FROM len_tokens
   UNION ALL SELECT token FROM ab_tokens UNION ALL SELECT :'alice' UNION ALL SELECT :'bob_unused'
   UNION ALL SELECT :'dan' UNION ALL SELECT :'old_alice') toks
WHERE rows.t LIKE '%' || substr(toks.token, 5) || '%';
-- (the same scan over a table that does hold tokens finds them)
SELECT count(*) AS control_seen FROM (SELECT row_to_json(b)::text AS t FROM board_tokens b) rows,
  (SELECT token FROM board_tokens) toks
WHERE rows.t LIKE '%' || substr(toks.token, 5) || '%';

-- scenario: bad calls are errors and change nothing
SELECT wf.decide(:'dan', 'maybe', 'dan');
SELECT wf.decide(NULL, 'approve', 'dan');
SELECT wf.decide(:'dan', 'approve', '');
SELECT wf.decide(:'dan', 'approve', repeat('x', 256));
SELECT wf.issue_approval_tokens(:t, :f);
SELECT task_id AS t2, fence AS f2 FROM wf.claim_tasks('ap_escalate', 'w') \gset
SELECT wf.start_run('timed') AS run \gset
SELECT task_id AS t3, fence AS f3 FROM wf.claim_tasks('ap_mail', 'mailer') \gset
SELECT wf.issue_approval_tokens(:t3, :f3 + 1);
SELECT wf.issue_approval_tokens(123456, 1);
-- definitions of approval steps are validated
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "type": "approval", "notify_queue": "q"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "type": "approval", "approvers": ["x"]}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "type": "approval", "approvers": ["x"], "notify_queue": "q", "policy": "most"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "type": "approval", "approvers": ["x"], "notify_queue": "q", "policy": {"quorum": 2}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "type": "approval", "approvers": ["x"], "notify_queue": "q", "on_expiry": "b"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "type": "approval", "approvers": ["x"], "notify_queue": "q", "expires": "1h", "on_expiry": "nowhere"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "type": "approval", "approvers": [1], "notify_queue": "q"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "type": "approval", "approvers": ["x"], "notify_queue": "q", "timeout": {"total": "1h"}}]}');
SELECT wf.publish_definition('bad', jsonb_build_object('steps', jsonb_build_array(jsonb_build_object(
  'name', 'a', 'type', 'approval', 'notify_queue', 'q',
  'approvers', (SELECT jsonb_agg('p' || i) FROM generate_series(1, 101) i)))));

-- scenario: a run that stops while an approval waits closes its tokens
SELECT wf.publish_definition('stops', '{"timeout": "150ms", "steps": [
  {"name": "ok", "type": "approval", "approvers": ["kim"], "notify_queue": "ap_stop"}]}');
SELECT wf.start_run('stops') AS run \gset
SELECT token AS kim FROM wf.claim_tasks('ap_stop', 'mailer') c, wf.issue_approval_tokens(c.task_id, c.fence) i
WHERE i.decision = 'approve' \gset
SELECT count(*) AS waiting FROM wf.pending_approvals WHERE run_id = :'run';
SELECT pg_sleep(0.2);
SELECT wf.tick() > 0 AS fired;
SELECT status FROM wf.runs WHERE run_id = :'run';
SELECT count(*) AS waiting FROM wf.pending_approvals WHERE run_id = :'run';
SELECT status FROM wf.approvals WHERE run_id = :'run';
SELECT wf.decide(:'kim', 'approve', 'kim');
-- replacing approvers: duplicates count once
SELECT wf.start_run('lenient') AS run \gset
SELECT wf.set_approvers(:'run', 'ok', ARRAY['hal', 'hal', 'ida'], 'dedupe');
SELECT approver, status FROM wf.approvals WHERE run_id = :'run' ORDER BY approver;

-- scenario: a list of approvers is checked at publish (issue 32): a name
-- listed twice is refused (a visit would drop it, and a quorum or
-- "rejections" counting it could never be met), so is a name longer than
-- wf.decide takes, and a quorum policy without its quorum
SELECT wf.publish_definition('twice', '{"steps": [{"name": "a", "type": "approval",
  "approvers": ["ann", "ann"], "notify_queue": "q"}]}');
SELECT wf.publish_definition('twice', '{"steps": [{"name": "a", "type": "approval",
  "approvers": ["ann", "bob", "ann"], "policy": {"quorum": 3}, "notify_queue": "q"}]}');
SELECT wf.publish_definition('twice', jsonb_build_object('steps', jsonb_build_array(
  jsonb_build_object('name', 'a', 'type', 'approval', 'notify_queue', 'q',
                     'approvers', jsonb_build_array('ann', repeat('x', 256))))));
SELECT wf.publish_definition('twice', '{"steps": [{"name": "a", "type": "approval",
  "approvers": ["ann"], "policy": {}, "notify_queue": "q"}]}');
SELECT count(*) AS none_written FROM wf.definitions WHERE name = 'twice';
-- at the limits: 255 bytes, names that differ only in case
SELECT wf.publish_definition('twice', jsonb_build_object('steps', jsonb_build_array(
  jsonb_build_object('name', 'a', 'type', 'approval', 'notify_queue', 'q',
                     'approvers', jsonb_build_array('ann', 'Ann', repeat('x', 255)))))) AS version;
-- a version published before these checks (its spec put in place under
-- the append-only trigger) still loads in a new session, its repeat dropped
SET session_replication_role = replica;
UPDATE wf.definitions SET spec = '{"steps": [{"name": "a", "type": "approval",
  "approvers": ["ann", "bob", "ann"], "notify_queue": "ap_old"}]}' WHERE name = 'twice';
RESET session_replication_role;
\c
SELECT wf.start_run('twice') AS run \gset
SELECT payload->'approvers' AS approvers FROM wf.history(:'run') WHERE type = 'approval_requested';
SELECT approver FROM wf.approvals WHERE run_id = :'run' ORDER BY approver;

-- tokens of a task that is no approval's notification, live or completed
-- (a completed attempt's row is deleted since 0.3.0: the answer is the same),
-- and of no task at all
CREATE FUNCTION pg_temp.tok_err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, 'task \d+', 'task N');
END
$$;
SELECT wf.publish_definition('ap_plain', '{"steps": [{"name": "p", "queue": "ap_plain"}]}') > 0 AS published;
SELECT wf.start_run('ap_plain', '{}') IS NOT NULL AS started;
SELECT task_id AS pt, fence AS pf FROM wf.claim_tasks('ap_plain', 'w') \gset
SELECT pg_temp.tok_err(format('SELECT * FROM wf.issue_approval_tokens(%s, %s)', :pt, :pf)) AS live;
SELECT wf.complete_task(:pt, :pf, '{}');
SELECT count(*) AS rows_left FROM wf.tasks WHERE task_id = :pt;
SELECT pg_temp.tok_err(format('SELECT * FROM wf.issue_approval_tokens(%s, %s)', :pt, :pf)) AS completed;
SELECT pg_temp.tok_err('SELECT * FROM wf.issue_approval_tokens(999999999999, 1)') AS none;
