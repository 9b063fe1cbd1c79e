-- scenario: sealed values give no oracle and cannot be forged: a repeated keyed start
-- compares a keyed digest (for wfengine_sensitive) or the readable part of the input
-- (for everyone else), never an opened value; strings beginning with "wfenc:" are refused
-- wherever a caller gives JSON; a damaged sealed value fails only its own task
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
DROP ROLE IF EXISTS regress_seal_app, regress_seal_auditor, regress_seal_worker,
    regress_seal_clerk, regress_seal_admin, regress_seal_approver;
DROP ROLE IF EXISTS wf_tenant_sealco;
RESET client_min_messages;
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    d text;
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ': ' || SQLERRM || coalesce(E'\n' || nullif(d, ''), '');
END
$$;
-- the message and the hint of an error
CREATE FUNCTION pg_temp.hint(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    h text;
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS h = PG_EXCEPTION_HINT;
    RETURN SQLSTATE || ': ' || SQLERRM || E'\nHINT: ' || h;
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.err(text), pg_temp.hint(text) TO PUBLIC;
SELECT wf.create_tenant('sealco');
CREATE ROLE regress_seal_app IN ROLE wfengine_app, wf_tenant_sealco;
CREATE ROLE regress_seal_auditor IN ROLE wfengine_app, wfengine_sensitive, wf_tenant_sealco;
CREATE ROLE regress_seal_worker IN ROLE wfengine_worker, wfengine_sensitive, wf_tenant_sealco;
CREATE ROLE regress_seal_clerk IN ROLE wfengine_worker, wf_tenant_sealco;
CREATE ROLE regress_seal_admin IN ROLE wfengine_admin, wf_tenant_sealco;
CREATE ROLE regress_seal_approver IN ROLE wfengine_approver, wf_tenant_sealco;
SET wfengine.master_keys = 'k1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SET SESSION AUTHORIZATION regress_seal_admin;
SELECT wf.publish_definition('pay', '{
  "sensitive": {"input": ["card"]},
  "steps": [{"name": "charge", "queue": "seal_q", "retry": {"max_attempts": 3},
             "input": {"card": "$.input.card", "amount": "$.input.amount"}}]}');
SELECT wf.publish_definition('refund', '{"steps": [{"name": "back", "queue": "seal_r"}]}');
RESET SESSION AUTHORIZATION;

-- scenario: the guessing oracle is gone.  A login without wfengine_sensitive repeats a
-- keyed start with a wrong and with the right card number: the same answer, the first run
SET SESSION AUTHORIZATION regress_seal_app;
SELECT wf.start_run('pay', '{"card": "4111111111111111", "amount": 5}', 'order-1') AS r1 \gset
SELECT wf.start_run('pay', '{"card": "4111111111110000", "amount": 5}', 'order-1') = :'r1' AS wrong_card_same_run,
       wf.start_run('pay', '{"card": "4111111111111111", "amount": 5}', 'order-1') = :'r1' AS right_card_same_run;
-- a different readable value is a different request, whatever the card: 23505 both times
SELECT pg_temp.err('SELECT wf.start_run(''pay'', ''{"card": "4111111111110000", "amount": 6}'', ''order-1'')') AS wrong_card;
SELECT pg_temp.err('SELECT wf.start_run(''pay'', ''{"card": "4111111111111111", "amount": 6}'', ''order-1'')') AS right_card;
-- a sensitive key left out, or given for a run that had it null, differs in what is readable
SELECT pg_temp.err('SELECT wf.start_run(''pay'', ''{"amount": 5}'', ''order-1'')') AS card_left_out;
SELECT wf.start_run('pay', '{"card": null, "amount": 7}', 'order-null') AS rnull \gset
SELECT pg_temp.err('SELECT wf.start_run(''pay'', ''{"card": "4111111111111111", "amount": 7}'', ''order-null'')') AS card_for_null;
SELECT wf.start_run('pay', '{"card": null, "amount": 7}', 'order-null') = :'rnull' AS null_again_same_run;
-- the same key for another definition or version names what differs
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_seal_admin;
SELECT wf.publish_definition('pay', '{
  "sensitive": {"input": ["card"]},
  "steps": [{"name": "charge", "queue": "seal_q", "retry": {"max_attempts": 4},
             "input": {"card": "$.input.card", "amount": "$.input.amount"}}]}') AS pay_v2;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_seal_app;
SELECT pg_temp.err('SELECT wf.start_run(''refund'', ''{"card": "4111111111111111", "amount": 5}'', ''order-1'')') AS other_definition;
SELECT pg_temp.err('SELECT wf.start_run(''pay'', ''{"card": "4111111111111111", "amount": 5}'', ''order-1'', 2)') AS other_version;
SELECT wf.start_run('pay', '{"card": "4111111111111111", "amount": 5}', 'order-1', 1) = :'r1' AS same_version_same_run;
RESET SESSION AUTHORIZATION;
-- a member of wfengine_sensitive may read the card: the digest tells a wrong one
SET SESSION AUTHORIZATION regress_seal_auditor;
SELECT pg_temp.err('SELECT wf.start_run(''pay'', ''{"card": "4111111111110000", "amount": 5}'', ''order-1'')') AS sensitive_wrong_card;
SELECT wf.start_run('pay', '{"card": "4111111111111111", "amount": 5}', 'order-1') = :'r1' AS sensitive_right_card;
-- the digest is of the value: the order of keys and trailing zeros of numbers do not count
SELECT wf.start_run('pay', '{"amount": 5.00, "card": "4111111111111111"}', 'order-1') = :'r1' AS same_value_same_run;
SELECT pg_temp.err('SELECT wf.start_run(''pay'', ''{"card": "4111111111111111", "amount": 6}'', ''order-1'')') AS sensitive_other_amount;
RESET SESSION AUTHORIZATION;
-- the digest: 32 bytes, recorded by run_started, only for keyed runs, and bound to its run
-- (two runs with one input have different digests, so they cannot be compared)
SET SESSION AUTHORIZATION regress_seal_app;
SELECT wf.start_run('pay', '{"card": "4111111111111111", "amount": 5}', 'order-2') AS r2 \gset
SELECT wf.start_run('pay', '{"card": "4111111111111111", "amount": 5}') AS r3 \gset
SELECT (SELECT octet_length(input_digest) FROM wf.runs WHERE run_id = :'r1') AS digest_bytes,
       (SELECT input_digest FROM wf.runs WHERE run_id = :'r1')
         <> (SELECT input_digest FROM wf.runs WHERE run_id = :'r2') AS digests_differ_per_run,
       (SELECT input_digest IS NULL FROM wf.runs WHERE run_id = :'r3') AS no_digest_without_key,
       (SELECT e.payload->>'input_digest' = encode(r.input_digest, 'hex')
        FROM wf.events e JOIN wf.runs r USING (run_id)
        WHERE e.run_id = :'r1' AND e.type = 'run_started') AS recorded_at_start;
SELECT count(*) AS clear_cards FROM wf.runs WHERE input::text ~ '4111';
SELECT wf.verify_run(:'r1') AS r1_verifies;
RESET SESSION AUTHORIZATION;
-- a changed digest is noticed by wf.verify_run
UPDATE wf.runs SET input_digest = '\x00' WHERE run_id = :'r2';
SET SESSION AUTHORIZATION regress_seal_app;
SELECT wf.verify_run(:'r2') AS r2_verifies_after_change;
RESET SESSION AUTHORIZATION;
UPDATE wf.runs r SET input_digest = decode(e.payload->>'input_digest', 'hex')
FROM wf.events e WHERE e.run_id = r.run_id AND e.type = 'run_started' AND r.run_id = :'r2';
SET SESSION AUTHORIZATION regress_seal_app;
SELECT wf.verify_run(:'r2') AS r2_verifies_again;
RESET SESSION AUTHORIZATION;

-- scenario: strings beginning with "wfenc:" are reserved for sealed values; every entry
-- point that stores JSON a caller gives refuses them, with the path of the value
SET SESSION AUTHORIZATION regress_seal_app;
SELECT pg_temp.hint('SELECT wf.start_run(''pay'', ''{"note": "wfenc:v1:1:AAAA"}'')') AS start_run;
SELECT pg_temp.err('SELECT wf.start_run(''pay'', ''{"items": [{"x": 1}, {"tags": ["a", "wfenc:x"]}]}'')') AS nested;
SELECT pg_temp.err('SELECT wf.start_run(''pay'', ''{"my key": {"2nd": "wfenc:"}}'')') AS odd_keys;
SELECT pg_temp.err('SELECT wf.start_run(''pay'', ''{"card": "wfenc:v1:1:AAAA"}'', ''order-9'')') AS at_a_sensitive_key;
-- (the check itself, wf._refuse_sealed_lookalikes, is internal: a superuser calls it here)
RESET SESSION AUTHORIZATION;
SELECT pg_temp.err('SELECT wf._refuse_sealed_lookalikes(''"wfenc:v2:x"'', ''value'', ''a test'')') AS scalar;
-- a long path is named by its two ends
SELECT pg_temp.err(format('SELECT wf._refuse_sealed_lookalikes(%L, ''value'', ''a test'')',
                          repeat('{"k": [0, ', 40) || '"wfenc:"' || repeat(']}', 40))) AS deep;
SET SESSION AUTHORIZATION regress_seal_app;
-- keys may begin with it, and values that only hold it, or differ in case, are fine
SELECT wf.start_run('pay', '{"wfenc:k": 1, "a": "x wfenc:ok", "b": "WFENC:v1", "c": "wfenc"}') IS NOT NULL AS accepted;
SELECT pg_temp.err(format('SELECT wf.signal(%L, ''go'', ''{"p": ["wfenc:v1:1:AAAA"]}'')', :'r1')) AS signal;
SELECT pg_temp.err('SELECT * FROM wf.send_event(''nobody:1'', ''go'', ''{"p": "wfenc:v1:1:AAAA"}'')') AS send_event;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_seal_worker;
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('seal_q', 'w', 1) \gset
SELECT pg_temp.err(format('SELECT wf.complete_task(%s, %s, ''{"receipt": "wfenc:v1:1:AAAA"}'')', :t, :f)) AS complete_task;
SELECT pg_temp.err(format('SELECT wf.fail_task(%s, %s, ''{"code": "x", "details": {"raw": "wfenc:v1:9:AAAA"}}'', false)', :t, :f)) AS fail_task;
SELECT pg_temp.err(format('SELECT wf.heartbeat(%s, %s, ''{"progress": [1, "wfenc:"]}'')', :t, :f)) AS heartbeat;
SELECT wf.complete_task(:t, :f, '{"receipt": "r-1"}') AS completed_after_refusals;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_seal_admin;
SELECT pg_temp.err(format('SELECT wf.update_context(%L, ''{"note": "wfenc:v1:1:AAAA"}'', ''r'')', :'r2')) AS update_context;
SELECT pg_temp.err(format('SELECT wf.skip_step(%L, ''{"receipt": "wfenc:v1:1:AAAA"}'', ''r'')', :'r2')) AS skip_step;
SELECT pg_temp.err('SELECT wf.schedule(''nightly'', ''0 3 * * *'', ''pay'', ''{"card": "wfenc:v1:1:AAAA"}'')') AS schedule;
SELECT pg_temp.err('SELECT wf.publish_definition(''forged'', ''{"steps": [{"name": "a", "queue": "q", "input": {"k": "wfenc:v1:1:AAAA"}}]}'')') AS publish_definition;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_seal_approver;
SELECT pg_temp.err('SELECT wf.decide(''wfa_x'', ''approve'', ''ann'', NULL, ''{"why": "wfenc:v1:1:AAAA"}'')') AS decide_data;
SELECT pg_temp.err('SELECT wf.decide(''wfa_x'', ''approve'', ''ann'', ''wfenc:v1:1:AAAA'')') AS decide_comment;
RESET SESSION AUTHORIZATION;
-- nothing was stored for any of them
SELECT count(*) AS stored_lookalikes FROM wf.event_log
WHERE payload::text ~ 'wfenc:(v1:[19]:AAAA|x|v2|")';

-- scenario: a damaged sealed value fails only its own task.  Five runs wait on seal_q;
-- a superuser damages the sealed card of three task inputs: a flipped character in the
-- middle of the ciphertext, a malformed envelope, an envelope naming a data key the
-- tenant does not have
-- (the runs of the first part leave the queue first)
SET SESSION AUTHORIZATION regress_seal_worker;
SELECT count(*) AS earlier_tasks FROM (
    SELECT wf.complete_task(task_id, fence, '{}') FROM wf.claim_tasks('seal_q', 'w', 10)) x;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_seal_app;
SELECT wf.start_run('pay', '{"card": "4000000000000001", "amount": 1}') AS b1,
       wf.start_run('pay', '{"card": "4000000000000002", "amount": 2}') AS b2,
       wf.start_run('pay', '{"card": "4000000000000003", "amount": 3}') AS b3,
       wf.start_run('pay', '{"card": "4000000000000004", "amount": 4}') AS b4,
       wf.start_run('pay', '{"card": "4000000000000005", "amount": 5}') AS b5 \gset
RESET SESSION AUTHORIZATION;
-- the rows to damage are given their own copy of the input first (a row
-- without one, NULL, has the run's input as it stands)
UPDATE wf.tasks t SET input = coalesce(r.context->'input', r.input) FROM wf.runs r
WHERE r.run_id = t.run_id AND t.input IS NULL AND t.run_id IN (:'b2', :'b3', :'b4');
UPDATE wf.tasks SET input = jsonb_set(input, '{card}', to_jsonb(
    overlay(input->>'card' PLACING CASE WHEN substr(input->>'card', length(input->>'card') / 2, 1) = 'A'
                                        THEN 'B' ELSE 'A' END
            FROM length(input->>'card') / 2 FOR 1)))
WHERE run_id = :'b2';
UPDATE wf.tasks SET input = jsonb_set(input, '{card}', '"wfenc:v1:1:AAAA"') WHERE run_id = :'b3';
UPDATE wf.tasks SET input = jsonb_set(input, '{card}', to_jsonb(replace(input->>'card', 'wfenc:v1:1:', 'wfenc:v1:77:')))
WHERE run_id = :'b4';
SELECT count(*) AS damaged FROM wf.tasks WHERE run_id IN (:'b2', :'b3', :'b4') AND status = 'ready';
-- the batch: the good tasks are handed out with their cards, the damaged ones are not
SET SESSION AUTHORIZATION regress_seal_worker;
SELECT input->>'amount' AS amount, input->>'card' AS card FROM wf.claim_tasks('seal_q', 'w', 10) ORDER BY 1;
RESET SESSION AUTHORIZATION;
-- each damaged task's attempt failed with the code, and was not retried (max_attempts 4)
SELECT r.input->>'amount' AS amount, t.attempt, t.status, t.error->>'code' AS code, t.error->>'message' AS message
FROM wf.tasks t JOIN wf.runs r USING (run_id)
WHERE t.run_id IN (:'b1', :'b2', :'b3', :'b4', :'b5') ORDER BY 1, t.attempt;
SELECT r.input->>'amount' AS amount, r.status, e.payload->>'retryable' AS retryable,
       e.payload->'error'->>'code' AS failed_with
FROM wf.runs r LEFT JOIN wf.events e ON e.run_id = r.run_id AND e.type = 'task_failed'
WHERE r.run_id IN (:'b1', :'b2', :'b3', :'b4', :'b5') ORDER BY 1;
-- every run of the tenant still verifies
SET SESSION AUTHORIZATION regress_seal_app;
SELECT count(*) AS runs, count(*) FILTER (WHERE wf.verify_run(run_id)) AS verified FROM wf.runs;
RESET SESSION AUTHORIZATION;
-- a worker without wfengine_sensitive opens nothing, so a damaged value changes nothing
-- for it: it gets the envelope as it is
SET SESSION AUTHORIZATION regress_seal_app;
SELECT wf.start_run('pay', '{"card": "4000000000000006", "amount": 6}') AS b6 \gset
RESET SESSION AUTHORIZATION;
UPDATE wf.tasks t SET input = coalesce(r.context->'input', r.input) FROM wf.runs r
WHERE r.run_id = t.run_id AND t.input IS NULL AND t.run_id = :'b6';
UPDATE wf.tasks SET input = jsonb_set(input, '{card}', '"wfenc:v1:1:AAAA"') WHERE run_id = :'b6';
SET SESSION AUTHORIZATION regress_seal_clerk;
SELECT input->>'card' AS card_as_stored FROM wf.claim_tasks('seal_q', 'c', 10);
RESET SESSION AUTHORIZATION;

-- scenario: wf.decrypt of a damaged value is a data exception (22P02), never XX001
SET SESSION AUTHORIZATION regress_seal_auditor;
SELECT pg_temp.err('SELECT wf.decrypt(''{"c": "wfenc:v1:1:AAAA"}'')') AS malformed;
SELECT pg_temp.err(format('SELECT wf.decrypt(%L)', (SELECT input FROM wf.tasks WHERE run_id = :'b2'))) AS changed;
SELECT pg_temp.err(format('SELECT wf.decrypt(%L)', (SELECT input FROM wf.tasks WHERE run_id = :'b4'))) AS unknown_key;
SELECT pg_temp.err('SELECT wf.decrypt(''"wfenc:v1:0:AAAA"'')') AS key_id_zero;
SELECT wf.decrypt(input)->>'card' AS good_card FROM wf.runs WHERE run_id = :'b1';
RESET SESSION AUTHORIZATION;
-- a missing master key is configuration, not data: 55000, as before
RESET wfengine.master_keys;
SET SESSION AUTHORIZATION regress_seal_auditor;
SELECT pg_temp.err(format('SELECT wf.decrypt(input) FROM wf.runs WHERE run_id = %L', :'b1')) AS no_master_key;
RESET SESSION AUTHORIZATION;

SET client_min_messages = warning;
DROP ROLE regress_seal_app, regress_seal_auditor, regress_seal_worker, regress_seal_clerk,
    regress_seal_admin, regress_seal_approver;
DROP ROLE wf_tenant_sealco;
RESET client_min_messages;
