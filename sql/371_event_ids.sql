-- scenario: wf.send_event's event id is idempotent per (tenant, correlation key)
-- for keep, across runs and across the live and buffered paths: a repeat is
-- answered duplicate and delivered to no run, whatever ended or started meanwhile
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('zz', '{
  "correlation": {"k": "$.input.k"},
  "steps": [{"name": "w", "type": "wait_event", "event": "ping"}]}');
SELECT wf.publish_definition('zz_other', '{
  "correlation": {"k": "$.input.k"},
  "steps": [{"name": "w", "type": "wait_event", "event": "other"}]}');
SELECT wf.publish_definition('zz_note', '{
  "correlation": {"k": "$.input.k"},
  "steps": [{"name": "first", "queue": "zz_first"},
            {"name": "w", "type": "wait_event", "event": "ping"}]}');
-- the signals a run received: name, event id, outcome
CREATE FUNCTION pg_temp.received(run uuid) RETURNS text LANGUAGE sql AS $$
  SELECT coalesce(string_agg(format('%s/%s/%s', payload->>'name', payload->>'event_id', payload->>'outcome'),
                             ', ' ORDER BY seq), '-')
  FROM wf.history(run) WHERE type = 'signal_received' $$;

-- scenario: the issue's sequence.  Run A declared k:zz and consumes ev-zz, which
-- completes it; the sender lost the answer and retries after run B declared the
-- key: B does not get ev-zz, the answer is duplicate
SELECT wf.start_run('zz', '{"k": "zz"}') AS a \gset
SELECT run_id = :'a' AS to_a, outcome FROM wf.send_event('k:zz', 'ping', '{}', 'ev-zz');
SELECT wf.run_status(:'a') AS a_status;
SELECT wf.start_run('zz', '{"k": "zz"}') AS b \gset
SELECT run_id, outcome FROM wf.send_event('k:zz', 'ping', '{}', 'ev-zz');
SELECT wf.run_status(:'b') AS b_status, pg_temp.received(:'b') AS b_received;
-- a new event id for the key still reaches B
SELECT run_id = :'b' AS to_b, outcome FROM wf.send_event('k:zz', 'ping', '{"n": 2}', 'ev-zz-2');
SELECT wf.run_status(:'b') AS b_status, pg_temp.received(:'b') AS b_received;
-- no live run of the key now: the repeat is not kept for a later run either
SELECT run_id, outcome FROM wf.send_event('k:zz', 'ping', '{}', 'ev-zz');
SELECT count(*) AS buffered FROM wf.buffered_events WHERE key = 'k:zz';
SELECT wf.start_run('zz', '{"k": "zz"}') AS c \gset
SELECT wf.run_status(:'c') AS c_status, pg_temp.received(:'c') AS c_received;
SELECT wf.terminate_run(:'c', 'test');

-- scenario: the other way round.  Buffered first (no run), taken by the first run
-- that declares the key, which completes; a repeat while run E (of a definition
-- that is not at its wait yet) is live is a duplicate, not a second signal to E
SELECT run_id, outcome FROM wf.send_event('k:yy', 'ping', '{}', 'ev-yy');
SELECT wf.start_run('zz', '{"k": "yy"}') AS d \gset
SELECT wf.run_status(:'d') AS d_status, pg_temp.received(:'d') AS d_received;
SELECT wf.start_run('zz_note', '{"k": "yy"}') AS e \gset
SELECT run_id, outcome FROM wf.send_event('k:yy', 'ping', '{}', 'ev-yy');
SELECT pg_temp.received(:'e') AS e_received,
       (SELECT count(*) FROM wf.signals WHERE run_id = :'e') AS e_signals;
SELECT wf.terminate_run(:'e', 'test');
-- buffered, then the repeat while the event still waits in the buffer and a run
-- that declared the key but waits for another event (so took nothing) is live:
-- duplicate, not also a signal to that run; the buffered event goes to one run
SELECT run_id, outcome FROM wf.send_event('k:yy', 'ping', '{}', 'ev-yy-2');
SELECT wf.start_run('zz_other', '{"k": "yy"}') AS f \gset
SELECT run_id, outcome FROM wf.send_event('k:yy', 'ping', '{}', 'ev-yy-2');
SELECT pg_temp.received(:'f') AS f_received;
SELECT wf.start_run('zz', '{"k": "yy"}') AS g \gset
SELECT wf.run_status(:'g') AS g_status, pg_temp.received(:'g') AS g_received;
SELECT wf.terminate_run(:'f', 'test');

-- scenario: the record of each event id: per (tenant, key, event id), until keep
-- passes; a send without an event id records nothing (every such send is new)
SELECT tenant_id, key, event_id, expires_at - sent_at AS kept_for
FROM wf.event_ids ORDER BY key, event_id;
SELECT count(*) AS sends FROM wf.send_event('k:xx', 'ping') UNION ALL
SELECT count(*) FROM wf.send_event('k:xx', 'ping');
SELECT count(*) AS records FROM wf.event_ids WHERE key = 'k:xx';
-- the same event id for another key is another event
SELECT run_id, outcome FROM wf.send_event('k:ww', 'ping', '{}', 'ev-zz', keep => '2 days');
SELECT key, expires_at - sent_at AS kept_for FROM wf.event_ids WHERE event_id = 'ev-zz' ORDER BY key;

-- scenario: once keep has passed the event id is new again; wf.purge_runs deletes
-- the expired records
SELECT wf.start_run('zz', '{"k": "vv"}') AS v1 \gset
SELECT run_id = :'v1' AS to_v1, outcome FROM wf.send_event('k:vv', 'ping', '{}', 'ev-vv', keep => '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT wf.start_run('zz', '{"k": "vv"}') AS v2 \gset
SELECT run_id = :'v2' AS to_v2, outcome FROM wf.send_event('k:vv', 'ping', '{}', 'ev-vv', keep => '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT count(*) AS expired FROM wf.event_ids WHERE expires_at <= now();
SELECT wf.purge_runs() >= 0 AS purged;
SELECT count(*) AS expired FROM wf.event_ids WHERE expires_at <= now();

-- scenario: a dropped event (max_buffered_events 0) keeps its event id too: the
-- repeat is a duplicate, not delivered to a run that declared the key since
SELECT max_buffered_events FROM wf.set_tenant_policy('default', '{"max_buffered_events": 0}');
SELECT pg_sleep(1.1);
SELECT run_id, outcome FROM wf.send_event('k:uu', 'ping', '{}', 'ev-uu');
SELECT wf.start_run('zz', '{"k": "uu"}') AS h \gset
SELECT run_id, outcome FROM wf.send_event('k:uu', 'ping', '{}', 'ev-uu');
SELECT wf.run_status(:'h') AS h_status;
SELECT max_buffered_events FROM wf.set_tenant_policy('default', '{"max_buffered_events": null}');
SELECT wf.terminate_run(:'h', 'test');

-- scenario: a send that is rolled back recorded nothing: its retry is delivered
SELECT wf.start_run('zz', '{"k": "tt"}') AS i \gset
BEGIN;
SELECT run_id = :'i' AS to_i, outcome FROM wf.send_event('k:tt', 'ping', '{}', 'ev-tt');
ROLLBACK;
SELECT count(*) AS records FROM wf.event_ids WHERE key = 'k:tt';
SELECT run_id = :'i' AS to_i, outcome FROM wf.send_event('k:tt', 'ping', '{}', 'ev-tt');

SELECT bool_and(wf.verify_run(run_id)) AS verified FROM wf.runs;

-- errors of the internal step, called directly (wf.send_event checks first)
SELECT wf._event_runs(NULL, 'e', '1 day');
SELECT wf._event_runs('k:zz', 'e', NULL);
SELECT wf._event_runs('k:zz', '', '1 day');
SELECT wf._event_runs('k:zz', 'e', '31 days');
SELECT count(*) AS records FROM wf.event_ids WHERE event_id IN ('e', '');
-- without an event id it records nothing and returns the live runs
SELECT wf._event_runs('k:zz', NULL, '1 day') = '{}' AS no_live_run;
