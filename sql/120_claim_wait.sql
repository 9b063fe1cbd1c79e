-- scenario: claims that wait for work (wait => ...)
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('waiter', '{"steps": [{"name": "w", "queue": "wait_q"}]}');

-- scenario: a task is there: a wait returns it at once
SELECT wf.start_run('waiter', '{"n": 1}') IS NOT NULL AS started;
SELECT clock_timestamp() AS t0 \gset
SELECT step, input FROM wf.claim_tasks('wait_q', 'w1', wait => '10 seconds');
SELECT clock_timestamp() - :'t0' < interval '5 seconds' AS returned_at_once;

-- scenario: nothing to claim: empty after the wait, not before
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) FROM wf.claim_tasks('wait_q', 'w1', wait => '200 milliseconds');
SELECT clock_timestamp() - :'t0' >= interval '200 milliseconds' AS waited,
       clock_timestamp() - :'t0' < interval '5 seconds' AS not_much_longer;

-- scenario: a task that becomes available later is claimed then, with no
-- commit to wake the claimer (the sleep ends at the task's available_at)
SELECT wf.start_run('waiter', '{"n": 2}') IS NOT NULL AS started;
SELECT clock_timestamp() + interval '300 milliseconds' AS avail \gset
UPDATE wf.tasks SET available_at = :'avail' WHERE queue = 'wait_q' AND status = 'ready';
SELECT step, input FROM wf.claim_tasks('wait_q', 'w1', wait => '20 seconds');
SELECT claimed_at >= :'avail' AS not_before_available,
       claimed_at < :'avail'::timestamptz + interval '10 seconds' AS long_before_the_deadline
FROM wf.tasks WHERE queue = 'wait_q' AND run_id IN (SELECT run_id FROM wf.runs WHERE input->>'n' = '2');

-- scenario: no wait (NULL, zero, omitted) claims once and returns
SELECT count(*) FROM wf.claim_tasks('wait_q', 'w1', 1, '30 seconds', NULL);
SELECT count(*) FROM wf.claim_tasks('wait_q', 'w1', wait => '0');
SELECT count(*) FROM wf.claim_tasks('wait_q', 'w1');

-- scenario: a wait inside a READ COMMITTED transaction block works
BEGIN;
SELECT count(*) FROM wf.claim_tasks('wait_q', 'w1', wait => '50 milliseconds');
COMMIT;

-- scenario: statement_timeout ends a wait
SET statement_timeout = '100ms';
SELECT count(*) FROM wf.claim_tasks('wait_q', 'w1', wait => '30 seconds');
RESET statement_timeout;

-- scenario: argument errors
SELECT count(*) FROM wf.claim_tasks('wait_q', 'w1', wait => '5 minutes 1 second');
SELECT count(*) FROM wf.claim_tasks('wait_q', 'w1', wait => '-1 second');
SELECT count(*) FROM wf.claim_tasks('wait_q', 'w1', wait => '1 month');
-- a NULL in another argument claims nothing, as if the function were STRICT
SELECT count(*) FROM wf.claim_tasks(NULL, 'w1');
SELECT count(*) FROM wf.claim_tasks('wait_q', NULL);
SELECT count(*) FROM wf.claim_tasks('wait_q', 'w1', NULL);
SELECT count(*) FROM wf.claim_tasks('wait_q', 'w1', 1, NULL);
-- a snapshot that cannot change cannot see new tasks: refused
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM wf.claim_tasks('wait_q', 'w1', wait => '1 second');
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT count(*) FROM wf.claim_tasks('wait_q', 'w1', wait => '1 second');
ROLLBACK;
-- without a wait, those isolation levels claim as before
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM wf.claim_tasks('wait_q', 'w1', wait => '0');
ROLLBACK;

DROP EXTENSION wfengine;
