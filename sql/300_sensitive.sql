-- scenario: sensitive fields: sealed per tenant with XChaCha20-Poly1305 the moment they
-- enter, ciphertext in every table and the history, opened only for wfengine_sensitive;
-- keys rotate, master keys too, and destroying a tenant's keys shreds its values
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
DROP ROLE IF EXISTS regress_pay_admin, regress_pay_worker, regress_pay_clerk, regress_pay_auditor;
DROP ROLE IF EXISTS wf_tenant_payco;
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
GRANT EXECUTE ON FUNCTION pg_temp.err(text) TO PUBLIC;
-- the card number and the token appear nowhere in the clear (read as superuser)
CREATE FUNCTION pg_temp.clear_copies() RETURNS bigint LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM wf.runs x WHERE x::text ~ '4111111111111111|4111222233334444|4111222233339999|4111000011110000|tok-9f2')
         + (SELECT count(*) FROM wf.events x WHERE x::text ~ '4111111111111111|4111222233334444|4111222233339999|4111000011110000|tok-9f2')
         + (SELECT count(*) FROM wf.tasks x WHERE x::text ~ '4111111111111111|4111222233334444|4111222233339999|4111000011110000|tok-9f2')
$$;
SELECT wf.create_tenant('payco');
CREATE ROLE regress_pay_admin IN ROLE wfengine_admin, wf_tenant_payco;
CREATE ROLE regress_pay_worker IN ROLE wfengine_worker, wfengine_sensitive, wf_tenant_payco;
CREATE ROLE regress_pay_clerk IN ROLE wfengine_worker, wf_tenant_payco;
CREATE ROLE regress_pay_auditor IN ROLE wfengine_app, wfengine_sensitive, wf_tenant_payco;
SET SESSION AUTHORIZATION regress_pay_admin;
SELECT wf.publish_definition('pay', '{
  "sensitive": {"input": ["card"]},
  "steps": [
    {"name": "charge", "queue": "pay_q", "input": {"card": "$.input.card", "amount": "$.input.amount"},
     "sensitive": {"output": ["token"]}},
    {"name": "receipt", "queue": "pay_q2", "input": {"token": "$.steps.charge.output.token",
                                                     "last4": "$.steps.charge.output.last4"}}]}');
-- without a master key nothing is started, and nothing is lost
SELECT pg_temp.err('SELECT wf.start_run(''pay'', ''{"card": "4111111111111111", "amount": 12}'')');
RESET SESSION AUTHORIZATION;
-- (a superuser setting: in postgresql.conf in production)
SET wfengine.master_keys = 'k1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SET SESSION AUTHORIZATION regress_pay_admin;
SELECT wf.start_run('pay', '{"card": "4111111111111111", "amount": 12}') AS run \gset
SELECT input->>'amount' AS amount, input->>'card' LIKE 'wfenc:v1:1:%' AS card_sealed FROM wf.runs WHERE run_id = :'run';
RESET SESSION AUTHORIZATION;
SELECT tenant_id, key_id, master_key_id, octet_length(wrapped) AS wrapped_bytes FROM wf.tenant_keys;
-- a start repeated with its idempotency key finds its run (the seals differ, the values do not)
SET SESSION AUTHORIZATION regress_pay_admin;
SELECT wf.start_run('pay', '{"card": "4111222233334444", "amount": 5}', 'order-77') AS keyed \gset
SELECT wf.start_run('pay', '{"card": "4111222233334444", "amount": 5}', 'order-77') = :'keyed' AS same_run;
-- (regress_pay_admin may not read cards, so a different card is no different request for it:
-- the answer must not depend on a sealed value; see 320_sealed_inputs)
SELECT pg_temp.err('SELECT wf.start_run(''pay'', ''{"card": "4111222233339999", "amount": 5}'', ''order-77'')');
SELECT wf.terminate_run(:'keyed', 'test done') IS NOT NULL AS ended;
RESET SESSION AUTHORIZATION;

-- a worker in wfengine_sensitive gets the card; one without gets the envelope
SET SESSION AUTHORIZATION regress_pay_worker;
SELECT task_id AS t, fence AS f, input->>'card' AS card, input->>'amount' AS amount
FROM wf.claim_tasks('pay_q', 'w') \gset
SELECT :'card' AS card_seen_by_worker, :'amount' AS amount;
-- the output's token is sealed before it is stored; last4 is not sensitive
SELECT wf.complete_task(:t, :f, '{"token": "tok-9f2", "last4": "1111"}');
RESET SESSION AUTHORIZATION;
SELECT pg_temp.clear_copies() AS clear_copies;
SELECT context->'steps'->'charge'->'output'->>'last4' AS last4,
       context->'steps'->'charge'->'output'->>'token' LIKE 'wfenc:v1:1:%' AS token_sealed
FROM wf.runs WHERE run_id = :'run';
-- the next step maps the sealed token; a worker without the role sees the envelope
SET SESSION AUTHORIZATION regress_pay_clerk;
SELECT input->>'last4' AS last4, input->>'token' LIKE 'wfenc:v1:%' AS token_sealed FROM wf.claim_tasks('pay_q2', 'c');
SELECT pg_temp.err(format('SELECT wf.decrypt(%L)', '{"x": 1}'));
-- an auditor in wfengine_sensitive opens a whole value with wf.decrypt
SET SESSION AUTHORIZATION regress_pay_auditor;
SELECT wf.decrypt(context->'steps'->'charge'->'output') AS output, wf.decrypt(input) AS input
FROM wf.runs WHERE run_id = :'run';
SELECT wf.verify_run(:'run');
RESET SESSION AUTHORIZATION;

-- a step's input: the keys named by the step's "sensitive": {"input": [...]} are sealed
-- when the attempt is scheduled, whatever they were mapped from
SET SESSION AUTHORIZATION regress_pay_admin;
SELECT wf.publish_definition('kyc', '{"steps": [
  {"name": "lookup", "queue": "kyc_q1"},
  {"name": "notify", "queue": "kyc_q2", "input": {"phone": "$.steps.lookup.output.phone", "msg": "$.input.msg"},
   "sensitive": {"input": ["phone"]}}]}');
SELECT wf.start_run('kyc', '{"msg": "hello"}') AS kyc1, wf.start_run('kyc', '{"msg": "hi"}') AS kyc2 \gset
SET SESSION AUTHORIZATION regress_pay_worker;
SELECT wf.complete_task(task_id, fence, jsonb_build_object('phone', '+64-555-' || (input->>'msg')))
FROM wf.claim_tasks('kyc_q1', 'w', 2);
RESET SESSION AUTHORIZATION;
SELECT input->>'phone' LIKE 'wfenc:v1:1:%' AS phone_sealed, input->>'msg' AS msg
FROM wf.tasks WHERE step = 'notify' ORDER BY task_id;
SELECT count(*) FILTER (WHERE pg_catalog.strpos(payload::text, '+64-555-') > 0) AS scheduled_events_with_phone,
       count(*) AS scheduled_events
FROM wf.event_log WHERE type = 'task_scheduled' AND step = 'notify';
-- a worker in wfengine_sensitive gets the phone; one without gets the envelope
SET SESSION AUTHORIZATION regress_pay_worker;
SELECT input->>'phone' AS phone, input->>'msg' AS msg FROM wf.claim_tasks('kyc_q2', 'w', 1);
SET SESSION AUTHORIZATION regress_pay_clerk;
SELECT input->>'phone' LIKE 'wfenc:v1:1:%' AS clerk_sees_envelope, input->>'msg' AS msg FROM wf.claim_tasks('kyc_q2', 'w', 1);
RESET SESSION AUTHORIZATION;

-- an operator's output for a skipped step is sealed like the worker's would be
SET SESSION AUTHORIZATION regress_pay_admin;
SELECT wf.start_run('pay', '{"card": "4111222233334444", "amount": 5}') AS run3 \gset
SELECT wf.skip_step(:'run3', '{"token": "tok-skip", "last4": "4444"}', 'card charged by phone');
RESET SESSION AUTHORIZATION;
SELECT context->'steps'->'charge'->'output'->>'token' LIKE 'wfenc:v1:1:%' AS token_sealed,
       context->'steps'->'charge'->'output'->>'last4' AS last4
FROM wf.runs WHERE run_id = :'run3';
SELECT count(*) AS events_with_token FROM wf.event_log WHERE run_id = :'run3' AND payload::text ~ 'tok-skip';
-- and so is a new value of a sensitive input key given to wf.update_context
SET SESSION AUTHORIZATION regress_pay_admin;
SELECT wf.update_context(:'run3', '{"card": "5500000000000004", "note": "new card"}', 'card replaced')->>'note' AS note;
SELECT wf.verify_run(:'run3') AS verifies;
RESET SESSION AUTHORIZATION;
SELECT context->'input'->>'card' LIKE 'wfenc:v1:1:%' AS card_sealed FROM wf.runs WHERE run_id = :'run3';
SELECT count(*) AS events_with_new_card FROM wf.event_log WHERE run_id = :'run3' AND payload::text ~ '5500000000000004';

-- rotation: a new data key seals new values; the old one still opens old ones
SELECT wf.rotate_tenant_key('payco') AS new_key;
SET SESSION AUTHORIZATION regress_pay_admin;
SELECT wf.start_run('pay', '{"card": "4111000011110000", "amount": 3}') AS run2 \gset
SELECT input->>'card' LIKE 'wfenc:v1:2:%' AS under_key_2 FROM wf.runs WHERE run_id = :'run2';
SET SESSION AUTHORIZATION regress_pay_auditor;
SELECT wf.decrypt(input)->>'card' AS old_card FROM wf.runs WHERE run_id = :'run';
RESET SESSION AUTHORIZATION;
-- a backup taken now holds the data keys wrapped under master key k1
CREATE TEMP TABLE backup_keys AS SELECT * FROM wf.tenant_keys;
-- a new master key: data keys are re-wrapped under it and the old one can go
SET wfengine.master_keys = 'k2:1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100,k1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT wf.rewrap_tenant_keys() AS rewrapped;
SELECT key_id, master_key_id FROM wf.tenant_keys ORDER BY key_id;
SET wfengine.master_keys = 'k2:1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100';
SET SESSION AUTHORIZATION regress_pay_auditor;
SELECT wf.decrypt(input)->>'card' AS card_after_rewrap FROM wf.runs WHERE run_id = :'run2';
RESET SESSION AUTHORIZATION;
-- a wrong or missing master key is an error that changes nothing
SET wfengine.master_keys = 'k2:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff';
SET SESSION AUTHORIZATION regress_pay_auditor;
SELECT pg_temp.err(format('SELECT wf.decrypt(input) FROM wf.runs WHERE run_id = %L', :'run2'));
RESET SESSION AUTHORIZATION;
SET wfengine.master_keys = 'k9:1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100';
SET SESSION AUTHORIZATION regress_pay_auditor;
SELECT pg_temp.err(format('SELECT wf.decrypt(input) FROM wf.runs WHERE run_id = %L', :'run2'));
RESET SESSION AUTHORIZATION;
SET wfengine.master_keys = 'k2:1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100';
SET SESSION AUTHORIZATION regress_pay_auditor;
-- a changed envelope does not open (a character inside it, not the last, whose low bits
-- may be padding)
SELECT pg_temp.err(format('SELECT wf.decrypt(%L)', jsonb_build_object('card',
    (SELECT overlay(input->>'card' PLACING CASE WHEN substr(input->>'card', length(input->>'card') - 10, 1) = 'A'
                                                THEN 'B' ELSE 'A' END
                    FROM length(input->>'card') - 10 FOR 1)
     FROM wf.runs WHERE run_id = :'run2'))));
RESET SESSION AUTHORIZATION;

-- crypto-shredding: the tenant's keys are destroyed; its sealed values are gone for good,
-- the rest of its runs stays readable
SELECT wf.destroy_tenant_keys('payco') AS destroyed;
SELECT key_id, wrapped IS NULL AS wrapped_gone, destroyed_at IS NOT NULL AS destroyed FROM wf.tenant_keys ORDER BY 1;
SET SESSION AUTHORIZATION regress_pay_auditor;
SELECT pg_temp.err(format('SELECT wf.decrypt(input) FROM wf.runs WHERE run_id = %L', :'run'));
SELECT input->>'amount' AS amount_still_readable FROM wf.runs WHERE run_id = :'run';
SELECT wf.verify_run(:'run') AS history_intact;
RESET SESSION AUTHORIZATION;
-- and in backups: the backup's key rows, restored, are wrapped under k1, which is retired
UPDATE wf.tenant_keys k SET wrapped = b.wrapped, master_key_id = b.master_key_id, destroyed_at = NULL
FROM backup_keys b WHERE b.tenant_id = k.tenant_id AND b.key_id = k.key_id;
SET SESSION AUTHORIZATION regress_pay_auditor;
SELECT pg_temp.err(format('SELECT wf.decrypt(input) FROM wf.runs WHERE run_id = %L', :'run')) AS from_backup;
RESET SESSION AUTHORIZATION;
-- (had k1 not been retired, the backup would open it: retiring the old master key is the step)
SET wfengine.master_keys = 'k2:1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100,k1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SET SESSION AUTHORIZATION regress_pay_auditor;
SELECT wf.decrypt(input)->>'card' AS opened_with_k1_still_configured FROM wf.runs WHERE run_id = :'run';
RESET SESSION AUTHORIZATION;
SET wfengine.master_keys = 'k2:1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100';

-- definition errors
SELECT wf.publish_definition('bad', '{"sensitive": ["card"], "steps": [{"name": "a", "queue": "q"}]}');
SELECT wf.publish_definition('bad', '{"sensitive": {"input": []}, "steps": [{"name": "a", "queue": "q"}]}');
SELECT wf.publish_definition('bad', '{"sensitive": {"output": ["x"]}, "steps": [{"name": "a", "queue": "q"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "sensitive": {"secret": ["x"]}}]}');
RESET wfengine.master_keys;
SET client_min_messages = warning;
DROP ROLE regress_pay_admin, regress_pay_worker, regress_pay_clerk, regress_pay_auditor;
DROP ROLE wf_tenant_payco;
RESET client_min_messages;
