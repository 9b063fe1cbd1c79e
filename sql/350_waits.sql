-- scenario: nothing waits without saying why.  A change of approvers re-evaluates the
-- approval policy at once; wf.explain names what every live run waits for; a timer
-- refused by max_timers_per_run says so and can be counted
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
-- the tokens of a run's approval step: its notification worker issues them (the
-- worker drains the queue: the notifications of other runs are sent without tokens)
CREATE FUNCTION pg_temp.tokens(r uuid) RETURNS TABLE (approver text, decision text, token text)
LANGUAGE plpgsql AS $$
DECLARE t record;
BEGIN
    FOR t IN SELECT * FROM wf.claim_tasks('w_mail', 'mailer', 100) LOOP
        IF t.run_id = r THEN
            RETURN QUERY SELECT i.approver, i.decision, i.token FROM wf.issue_approval_tokens(t.task_id, t.fence) i;
        END IF;
        PERFORM wf.complete_task(t.task_id, t.fence, '{}');
    END LOOP;
END
$$;
-- one line per run: status, step, what it waits for, and the outcome of its approval
CREATE FUNCTION pg_temp.state(r uuid) RETURNS TABLE (status text, step text, waiting_for text, outcome text, reason text)
LANGUAGE sql AS $$
    SELECT x.status, x.current_step, wf.explain(r)->>'waiting_for',
           (SELECT e.payload->'output'->>'outcome' FROM wf.history(r) e
            WHERE e.type = 'approval_completed' ORDER BY e.seq DESC LIMIT 1),
           (SELECT e.payload->>'reason' FROM wf.history(r) e WHERE e.type = 'run_failed')
    FROM wf.runs x WHERE x.run_id = r
$$;

-- 1. wf.set_approvers re-evaluates the policy in the same transition
SELECT wf.publish_definition('w_all', '{"steps": [
  {"name": "ok", "type": "approval", "approvers": "$.input.who", "policy": "all", "notify_queue": "w_mail"},
  {"name": "after", "queue": "w_after"}]}');
SELECT wf.publish_definition('w_any', '{"steps": [
  {"name": "ok", "type": "approval", "approvers": "$.input.who", "policy": "any", "rejections": 2,
   "notify_queue": "w_mail"},
  {"name": "after", "queue": "w_after"}]}');
SELECT wf.publish_definition('w_quorum', '{"steps": [
  {"name": "ok", "type": "approval", "approvers": "$.input.who", "policy": {"quorum": 2},
   "rejections": 2, "notify_queue": "w_mail"},
  {"name": "after", "queue": "w_after"}]}');

-- all: ann approved, then bob (the last one left) is removed: the step is approved at once
SELECT wf.start_run('w_all', '{"who": ["ann", "bob"]}') AS run \gset
CREATE TEMP TABLE tok AS SELECT * FROM pg_temp.tokens(:'run');
SELECT wf.decide((SELECT token FROM tok WHERE approver = 'ann' AND decision = 'approve'), 'approve', 'ann');
SELECT * FROM pg_temp.state(:'run');
SELECT wf.set_approvers(:'run', 'ok', ARRAY['ann'], 'bob left');
SELECT * FROM pg_temp.state(:'run');
SELECT type, step FROM wf.history(:'run') WHERE seq > (SELECT seq FROM wf.history(:'run') WHERE type = 'approvers_changed')
ORDER BY seq;
SELECT approver, status FROM wf.approvals WHERE run_id = :'run' ORDER BY approver;
-- bob's token is dead, and so is the step
SELECT wf.decide((SELECT token FROM tok WHERE approver = 'bob' AND decision = 'approve'), 'approve', 'bob');
SELECT wf.verify_run(:'run');
DROP TABLE tok;

-- all: nobody decided yet; removing one approver leaves the step waiting for the other
SELECT wf.start_run('w_all', '{"who": ["ann", "bob"]}') AS run \gset
CREATE TEMP TABLE tok AS SELECT * FROM pg_temp.tokens(:'run');
SELECT wf.set_approvers(:'run', 'ok', ARRAY['bob'], 'ann left');
SELECT * FROM pg_temp.state(:'run');
SELECT wf.explain(:'run')->'details'->'approval'->'pending' AS pending;
SELECT wf.decide((SELECT token FROM tok WHERE approver = 'bob' AND decision = 'approve'), 'approve', 'bob');
SELECT * FROM pg_temp.state(:'run');
SELECT wf.verify_run(:'run');
DROP TABLE tok;

-- any with rejections 2: ann rejected; removing the others leaves only her reject: rejected
SELECT wf.start_run('w_any', '{"who": ["ann", "bob", "cat"]}') AS run \gset
CREATE TEMP TABLE tok AS SELECT * FROM pg_temp.tokens(:'run');
SELECT wf.decide((SELECT token FROM tok WHERE approver = 'ann' AND decision = 'reject'), 'reject', 'ann');
SELECT * FROM pg_temp.state(:'run');
SELECT wf.set_approvers(:'run', 'ok', ARRAY['ann'], 'only ann is left');
SELECT * FROM pg_temp.state(:'run');
SELECT payload->'error'->>'message' AS message FROM wf.history(:'run') WHERE type = 'run_failed';
SELECT wf.verify_run(:'run');
DROP TABLE tok;

-- any: a new approver added to a step still waits (nothing decided)
SELECT wf.start_run('w_any', '{"who": ["ann"]}') AS run \gset
SELECT wf.set_approvers(:'run', 'ok', ARRAY['ann', 'dan'], 'dan too');
SELECT * FROM pg_temp.state(:'run');
SELECT wf.verify_run(:'run');

-- quorum 2 of ann, bob, cat, rejections 2: ann approves, bob rejects; the step waits for cat
SELECT wf.start_run('w_quorum', '{"who": ["ann", "bob", "cat"]}') AS run \gset
CREATE TEMP TABLE tok AS SELECT * FROM pg_temp.tokens(:'run');
SELECT wf.decide((SELECT token FROM tok WHERE approver = 'ann' AND decision = 'approve'), 'approve', 'ann');
SELECT wf.decide((SELECT token FROM tok WHERE approver = 'bob' AND decision = 'reject'), 'reject', 'bob');
SELECT * FROM pg_temp.state(:'run');
-- cat removed: ann's approve and bob's reject left, the quorum of 2 can no longer be met
SELECT wf.set_approvers(:'run', 'ok', ARRAY['ann', 'bob'], 'cat left');
SELECT * FROM pg_temp.state(:'run');
SELECT wf.verify_run(:'run');
DROP TABLE tok;

SELECT wf.start_run('w_quorum', '{"who": ["ann", "bob", "cat"]}') AS run \gset
CREATE TEMP TABLE tok AS SELECT * FROM pg_temp.tokens(:'run');
SELECT wf.decide((SELECT token FROM tok WHERE approver = 'ann' AND decision = 'approve'), 'approve', 'ann');
SELECT wf.decide((SELECT token FROM tok WHERE approver = 'bob' AND decision = 'approve'), 'approve', 'bob');
SELECT * FROM pg_temp.state(:'run');
SELECT wf.verify_run(:'run');
DROP TABLE tok;

-- quorum 2, nobody decided: one approver left cannot meet it, the run fails and says why
SELECT wf.start_run('w_quorum', '{"who": ["ann", "bob", "cat"]}') AS run \gset
SELECT wf.set_approvers(:'run', 'ok', ARRAY['cat'], 'ann and bob left');
SELECT * FROM pg_temp.state(:'run');
SELECT payload->'error' AS error FROM wf.history(:'run') WHERE type = 'run_failed';
SELECT approver, status FROM wf.approvals WHERE run_id = :'run' ORDER BY approver;
SELECT count(*) AS live_tasks FROM wf.tasks WHERE run_id = :'run' AND status IN ('ready', 'leased');
SELECT wf.verify_run(:'run');

-- 3. a timer refused by max_timers_per_run (the limit lowered under a live run) says so
SELECT wf.publish_definition('w_naps', '{"timeout": "1d", "steps": [
  {"name": "nap1", "type": "sleep", "duration": "100ms"},
  {"name": "nap2", "type": "sleep", "duration": "1h"}]}');
SELECT wf.start_run('w_naps') AS naps \gset
SELECT max_timers_per_run FROM wf.set_tenant_policy('default', '{"max_timers_per_run": 1}');
SELECT pg_sleep(0.2);
-- the tick's warning names the run: not shown
SET client_min_messages = error;
SELECT wf.tick() AS handled;
RESET client_min_messages;
SELECT kind, step, status, outcome, errors, fire_at > now() + interval '5 s' AS tried_again_later,
       regexp_replace(last_error, '[0-9a-f]{8}-[0-9a-f-]{27}', '<run>') AS last_error
FROM wf.timers WHERE run_id = :'naps' ORDER BY timer_id;
SELECT e->>'status' AS status, e->>'step' AS step, e->>'waiting_for' AS waiting_for,
       e->'details'->>'quota' AS quota, e->'details'->>'max_timers_per_run' AS lim,
       e->'details'->>'pending_timers' AS pending, e->'details'->'timer'->>'kind' AS kind,
       e->'details'->'timer'->>'tries' AS tries, e->'details'->'refused_wait'->>'waiting_for' AS refused_wait
FROM wf.explain(:'naps') e;
SELECT e->'details'->>'reason' AS reason, e->'details'->>'way_out' AS way_out,
       e->'commands' ? 'wf.set_tenant_policy' AND e->'commands' ? 'wf.migrate_run'
         AND e->'commands' ? 'wf.terminate_run' AS commands
FROM wf.explain(:'naps') e;
-- countable: the refused timers of the database, for a metrics view
SELECT tenant_id, count(*) AS quota_refused_timers FROM wf.timers
WHERE status = 'pending' AND outcome = 'quota_refused' GROUP BY tenant_id;
-- the way out: the limit raised, the next try applies the transition
SELECT max_timers_per_run FROM wf.set_tenant_policy('default', '{"max_timers_per_run": null}');
UPDATE wf.timers SET fire_at = now() WHERE run_id = :'naps' AND outcome = 'quota_refused';
SELECT wf.tick() AS handled;
SELECT kind, step, status, outcome FROM wf.timers WHERE run_id = :'naps' ORDER BY timer_id;
SELECT e->>'step' AS step, e->>'waiting_for' AS waiting_for FROM wf.explain(:'naps') e;
SELECT wf.verify_run(:'naps');

-- 2. wf.explain never answers waiting_for null for a live run: runs in every kind of
-- step and state (running, paused, cancelling), each asked
SELECT wf.publish_definition('w_task', '{"steps": [
  {"name": "a", "queue": "w_q", "compensate": {"queue": "w_undo_t"},
   "retry": {"max_attempts": 3, "initial_interval": "1h"}},
  {"name": "b", "queue": "w_q2", "compensate": {"queue": "w_undo_t", "retry": {"max_attempts": 2, "initial_interval": "1h"}}},
  {"name": "c", "queue": "w_q3"}]}');
SELECT wf.publish_definition('w_sleep', '{"steps": [{"name": "a", "queue": "w_first", "compensate": {"queue": "w_undo"}},
  {"name": "z", "type": "sleep", "duration": "1h"}]}');
SELECT wf.publish_definition('w_wait', '{"steps": [{"name": "a", "queue": "w_first", "compensate": {"queue": "w_undo"}},
  {"name": "w", "type": "wait_event", "event": "go", "timeout": {"total": "1h"}}]}');
SELECT wf.publish_definition('w_appr', '{"steps": [{"name": "a", "queue": "w_first", "compensate": {"queue": "w_undo"}},
  {"name": "ok", "type": "approval", "approvers": ["ann", "bob"], "policy": "all", "notify_queue": "w_mail2", "expires": "1d"}]}');
SELECT wf.publish_definition('w_sub', '{"steps": [{"name": "a", "queue": "w_first", "compensate": {"queue": "w_undo"}},
  {"name": "c", "type": "subworkflow", "definition": "w_wait", "version": 1}]}');
SELECT wf.publish_definition('w_par', '{"steps": [{"name": "p", "type": "parallel", "branches": [
  {"steps": [{"name": "w", "type": "wait_event", "event": "go"}]}, {"steps": [{"name": "t", "queue": "w_q4"}]}]}]}');
CREATE TEMP TABLE probe (label text, run uuid);
-- a task step: ready, leased, in retry backoff, in quarantine
INSERT INTO probe SELECT 'task leased', wf.start_run('w_task', '{"n": 2}');
INSERT INTO probe SELECT 'task backoff', wf.start_run('w_task', '{"n": 3}');
INSERT INTO probe SELECT 'task quarantine', wf.start_run('w_task', '{"n": 4}');
SELECT count(*) AS claimed FROM (
  SELECT CASE t.input->>'n' WHEN '3' THEN wf.fail_task(t.task_id, t.fence, '{"code": "x"}') ELSE 'left' END
  FROM wf.claim_tasks('w_q', 'w', 3) t) x;
-- quarantine as the engine leaves it after leases kept expiring (test/t covers the real one)
UPDATE wf.tasks SET available_at = now() + interval '1 h', status = 'ready', lease_expires_at = NULL, lease_expirations = 3
WHERE run_id = (SELECT run FROM probe WHERE label = 'task quarantine');
-- the other kinds of steps, each behind a first task step
INSERT INTO probe SELECT v.label, wf.start_run(v.d, jsonb_build_object('k', v.label))
FROM (VALUES ('sleep', 'w_sleep'), ('wait_event', 'w_wait'), ('approval', 'w_appr'),
             ('subworkflow', 'w_sub'), ('paused task', 'w_task'), ('paused sleep', 'w_sleep'),
             ('paused wait_event', 'w_wait'), ('paused approval', 'w_appr'), ('paused subworkflow', 'w_sub'),
             ('cancelling sleep', 'w_sleep'), ('cancelling wait_event', 'w_wait'),
             ('cancelling approval', 'w_appr'), ('cancelling subworkflow', 'w_sub'),
             ('cancelling in flight', 'w_task'), ('cancelling backoff', 'w_task')) v(label, d);
INSERT INTO probe SELECT 'parallel', wf.start_run('w_par');
SELECT count(*) AS first_steps_done FROM (
  SELECT wf.complete_task(t.task_id, t.fence, '{}') FROM wf.claim_tasks('w_first', 'w', 100) t) x;
-- an approval step with its tokens issued, its notification worker still at work (the
-- worker takes every notification of the queue)
INSERT INTO probe SELECT 'approval tokens issued', wf.start_run('w_appr', '{"k": "decided"}');
SELECT count(*) FROM (SELECT wf.complete_task(t.task_id, t.fence, '{}') FROM wf.claim_tasks('w_first', 'w', 100) t) x;
SELECT count(*) > 0 AS issued FROM (SELECT i.* FROM wf.claim_tasks('w_mail2', 'mailer', 100) t,
  wf.issue_approval_tokens(t.task_id, t.fence) i) x;
-- cancelling with the compensation's attempt in flight, and in its retry backoff
SELECT count(*) FROM (SELECT wf.complete_task(t.task_id, t.fence, '{}') FROM wf.claim_tasks('w_q', 'w', 100) t
  WHERE t.run_id IN (SELECT run FROM probe WHERE label IN ('cancelling in flight', 'cancelling backoff'))) x;
SELECT count(*) FROM (SELECT wf.complete_task(t.task_id, t.fence, '{}') FROM wf.claim_tasks('w_q2', 'w', 100) t
  WHERE t.run_id IN (SELECT run FROM probe WHERE label IN ('cancelling in flight', 'cancelling backoff'))) x;
SELECT wf.pause_run(run, 'look') IS NULL FROM probe WHERE label LIKE 'paused%';
SELECT wf.cancel_run(run, 'undo') IS NULL FROM probe WHERE label LIKE 'cancelling%';
SELECT count(*) AS compensations_claimed FROM (
  SELECT CASE WHEN t.run_id = (SELECT run FROM probe WHERE label = 'cancelling backoff')
              THEN wf.fail_task(t.task_id, t.fence, '{"code": "x"}') END
  FROM wf.claim_tasks('w_undo_t', 'w', 100) t) x;
-- ann decided and bob is removed while the step waits: before the fix, the run waited for nothing
INSERT INTO probe SELECT 'approval by set_approvers', wf.start_run('w_appr', '{"k": "removed"}');
SELECT count(*) FROM (SELECT wf.complete_task(t.task_id, t.fence, '{}') FROM wf.claim_tasks('w_first', 'w', 100) t) x;
-- (its notification worker is the only one of the queue now: it sends the tokens and is done)
SELECT t.task_id AS nt, t.fence AS nf FROM wf.claim_tasks('w_mail2', 'mailer') t
WHERE t.run_id = (SELECT run FROM probe WHERE label = 'approval by set_approvers') \gset
CREATE TEMP TABLE tok2 AS SELECT * FROM wf.issue_approval_tokens(:nt, :nf);
SELECT wf.complete_task(:nt, :nf, '{}');
SELECT wf.decide((SELECT token FROM tok2 WHERE approver = 'ann' AND decision = 'approve'), 'approve', 'ann');
SELECT wf.set_approvers((SELECT run FROM probe WHERE label = 'approval by set_approvers'), 'ok', ARRAY['ann'], 'bob left');
-- the run with the refused timer, again refused
INSERT INTO probe SELECT 'refused timer', wf.start_run('w_naps');
SELECT max_timers_per_run FROM wf.set_tenant_policy('default', '{"max_timers_per_run": 1}');
SELECT pg_sleep(0.2);
SET client_min_messages = error;
SELECT wf.tick() >= 1 AS ticked;
RESET client_min_messages;
SELECT max_timers_per_run FROM wf.set_tenant_policy('default', '{"max_timers_per_run": null}');
-- a run whose sleep timer was lost (a damaged database): it still says it needs an operator
INSERT INTO probe SELECT 'lost timer', wf.start_run('w_sleep', '{"k": "lost"}');
SELECT count(*) FROM (SELECT wf.complete_task(t.task_id, t.fence, '{}') FROM wf.claim_tasks('w_first', 'w', 100) t) x;
UPDATE wf.timers SET status = 'cancelled' WHERE run_id = (SELECT run FROM probe WHERE label = 'lost timer');
-- a task no worker has claimed yet
INSERT INTO probe SELECT 'task ready', wf.start_run('w_task', '{"n": 1}');
-- the child runs of subworkflow and parallel steps are asked too
INSERT INTO probe SELECT 'child of ' || p.label, r.run_id FROM wf.runs r JOIN probe p ON p.run = r.parent_run_id;

SELECT p.label, r.status, r.current_step AS step, e->>'waiting_for' AS waiting_for
FROM probe p JOIN wf.runs r ON r.run_id = p.run, wf.explain(p.run) e ORDER BY p.label;
-- the assertion: no live run of the database answers null
SELECT r.status, count(*) AS runs, count(*) FILTER (WHERE wf.explain(r.run_id)->>'waiting_for' IS NULL) AS null_answers
FROM wf.runs r WHERE r.status IN ('running', 'paused', 'cancelling', 'compensating') GROUP BY r.status ORDER BY r.status;
SELECT e->'details' AS details FROM wf.explain((SELECT run FROM probe WHERE label = 'lost timer')) e;
