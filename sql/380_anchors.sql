-- scenario: the hash chain alone does not notice a rolled-back tail (a superuser
-- deletes the last transition's events and restores the older snapshot and task
-- rows); an anchor exported with wf.chain_heads() before does, with
-- wf.verify_run(run, anchor); a signed anchor cannot be forged without the key
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('ledger', '{
  "steps": [{"name": "book", "queue": "an_book"}, {"name": "pay", "queue": "an_pay", "end": true}]}');
SELECT wf.start_run('ledger', '{"amount": 100}') AS r \gset
SELECT count(wf.complete_task(task_id, fence, '{"booked": true}')) FROM wf.claim_tasks('an_book', 'w', 1);

-- scenario: the heads of the caller's tenant: last seq and the hash of that event
SELECT tenant_id, run_id = :'r' AS the_run, seq, length(head_hash) AS hex_len, signature
FROM wf.chain_heads();
SELECT h.head_hash = e.hash AS is_event_hash
FROM wf.chain_heads() h JOIN LATERAL wf.history(h.run_id) e ON e.seq = h.seq;
-- the auditor exports anchor a1; the superuser keeps the rows of this state
SELECT to_jsonb(h) AS a1 FROM wf.chain_heads() h WHERE h.run_id = :'r' \gset
CREATE TEMP TABLE old_run AS SELECT * FROM wf.runs WHERE run_id = :'r';
CREATE TEMP TABLE old_tasks AS SELECT * FROM wf.tasks WHERE run_id = :'r';
CREATE TEMP TABLE old_timers AS SELECT * FROM wf.timers WHERE run_id = :'r';

-- the run goes on: the payment is made, the run completes; anchor a2 is exported
SELECT count(wf.complete_task(task_id, fence, '{"paid": 100}')) FROM wf.claim_tasks('an_pay', 'w', 1);
SELECT status FROM wf.runs WHERE run_id = :'r';
SELECT to_jsonb(h) AS a2 FROM wf.chain_heads() h WHERE h.run_id = :'r' \gset
SELECT wf.verify_run(:'r') AS plain, wf.verify_run(:'r', :'a1') AS extends_a1,
       wf.verify_run(:'r', :'a2') AS extends_a2;

-- scenario: a superuser rolls the tail back: the payment's events go, the older
-- snapshot, task and timer rows come back
SET session_replication_role = replica;
DELETE FROM wf.events WHERE run_id = :'r' AND seq > (SELECT seq FROM old_run);
RESET session_replication_role;
DELETE FROM wf.tasks WHERE run_id = :'r';
INSERT INTO wf.tasks SELECT * FROM old_tasks;
DELETE FROM wf.timers WHERE run_id = :'r';
INSERT INTO wf.timers SELECT * FROM old_timers;
DELETE FROM wf.runs WHERE run_id = :'r';
INSERT INTO wf.runs SELECT * FROM old_run;
SELECT status, current_step FROM wf.runs WHERE run_id = :'r';
-- the chain alone verifies; so does the older anchor (a rollback after the last
-- export is not detected); the newer anchor detects it
SELECT wf.verify_run(:'r') AS plain;
SELECT wf.verify_run(:'r', :'a1') AS extends_a1;
SELECT wf.verify_run(:'r', :'a2') AS extends_a2;
-- the rolled-back run goes on with another payment: its new tail is not the exported one
SELECT count(wf.complete_task(task_id, fence, '{"paid": 1}')) FROM wf.claim_tasks('an_pay', 'w', 1);
SELECT wf.verify_run(:'r') AS plain;
SELECT wf.verify_run(:'r', :'a2') AS extends_a2;

-- scenario: signed anchors (wfengine.anchor_key): a forged one is detected
ALTER SYSTEM SET wfengine.anchor_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT pg_reload_conf();
SELECT pg_sleep(0.3);
SELECT to_jsonb(h) AS s1 FROM wf.chain_heads() h WHERE h.run_id = :'r' \gset
SELECT length(:'s1'::jsonb->>'signature') AS signature_hex_len;
SELECT wf.verify_run(:'r', :'s1') AS signed_ok;
-- a forger changes the head (to hide a rollback) without the key: detected
SELECT wf.verify_run(:'r', jsonb_set(:'s1'::jsonb, '{head_hash}',
       to_jsonb(encode(sha256('x'), 'hex')))) AS forged_head;
SELECT wf.verify_run(:'r', jsonb_set(:'s1'::jsonb, '{seq}', '1')) AS forged_seq;
-- the same head signed for another run does not pass for this one
SELECT wf.start_run('ledger', '{}') AS r2 \gset
SELECT wf.verify_run(:'r2', jsonb_set(:'s1'::jsonb, '{run_id}', to_jsonb(:'r2'::text))) AS other_run;
-- an unsigned anchor is taken as it is
SELECT wf.verify_run(:'r', :'s1'::jsonb - 'signature') AS unsigned;
-- another key: the old signatures no longer match
ALTER SYSTEM SET wfengine.anchor_key = 'ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT pg_reload_conf();
SELECT pg_sleep(0.3);
SELECT wf.verify_run(:'r', :'s1') AS other_key;
ALTER SYSTEM RESET wfengine.anchor_key;
SELECT pg_reload_conf();
SELECT pg_sleep(0.3);
SELECT count(*) FILTER (WHERE signature IS NOT NULL) AS signed FROM wf.chain_heads();
-- a signed anchor cannot be checked without the key
SELECT wf.verify_run(:'r', :'s1');

-- errors: anchors that are not rows of wf.chain_heads()
SELECT wf.verify_run(:'r', '[1]');
SELECT wf.verify_run(:'r', '{"head_hash": "00"}');
SELECT wf.verify_run(:'r', '{"seq": 0, "head_hash": "00"}');
-- a seq out of the range of event numbers is just as invalid
SELECT wf.verify_run(:'r', '{"seq": 2147483648, "head_hash": "00"}');
SELECT wf.verify_run(:'r', '{"seq": 99999999999999999999999, "head_hash": "00"}');
SELECT wf.verify_run(:'r', '{"seq": -99999999999999999999999, "head_hash": "00"}');
SELECT wf.verify_run(:'r', '{"seq": -1, "head_hash": "00"}');
SELECT wf.verify_run(:'r', '{"seq": 1e400, "head_hash": "00"}');
SELECT wf.verify_run(:'r', '{"seq": 1.5, "head_hash": "00"}');
SELECT wf.verify_run(:'r', '{"seq": 1, "head_hash": "zz"}');
\set VERBOSITY terse
SELECT wf.verify_run(:'r', jsonb_set(:'a1'::jsonb, '{run_id}', to_jsonb(:'r2'::text)));
\set VERBOSITY default
SELECT wf.verify_run(:'r', jsonb_set(:'a1'::jsonb, '{tenant_id}', '"other"'));
SELECT wf.verify_run(:'r', jsonb_set(:'a1'::jsonb, '{signature}', '"abc"'));
SELECT wf.verify_run(:'r', NULL) IS NULL AS strict;
-- an unknown run
SELECT wf.verify_run('00000000-0000-0000-0000-000000000000', :'a1'::jsonb - 'run_id');
