
# Copyright (c) 2026, wfengine developers

# Success with a lost response (fault class 4 of docs/reliability.md),
# against a stand-in downstream that deduplicates by idempotency key, the
# way a payment API does.  The engine worker expires the leases and fires
# the retries (no wf.tick()).
#
# The downstream is the table test_payments, keyed by the idempotency key
# the engine hands out with each task: a charge is
# INSERT ... ON CONFLICT (idempotency_key) DO NOTHING, and a repeated call
# answers with the charge made the first time.  Every call is logged in
# test_calls, so the test sees how often the downstream was asked.
#
#  A. Lease expiry: a worker claims 10 charge tasks for 2 seconds, charges
#     each downstream (committed there), then loses its responses: for 5
#     of them it never reports, for the other 5 it reports inside a
#     transaction that dies with its connection (pg_terminate_backend).
#     The engine worker expires the leases; a second worker gets the same
#     tasks with the same idempotency keys, charges again and is answered
#     with the first charge; it completes the step.
#  B. A timed-out call: a worker charges 5 tasks, the call succeeds
#     downstream but the worker sees a timeout and reports a retryable
#     failure; the engine worker fires the retry, attempt 2 carries the
#     same idempotency key, is deduplicated downstream and completes.
#
# For all 15: the downstream was called twice, charged once; the step
# completed once with the first charge's id; the history shows both
# deliveries (A: lease_expired, B: task_failed and a second attempt); the
# first worker's late result is stale; every run completes and verifies.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;    # (also: initdb from a template)

my $node = PostgreSQL::Test::Cluster->new('wf_lost_response');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
max_worker_processes = 16
));
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE wf');
$node->safe_psql('wf', 'CREATE EXTENSION wfengine');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'wfengine worker' AND datname = 'wf'"
	),
	'the engine worker of the database runs');

$node->safe_psql(
	'wf', q{
SELECT wf.publish_definition('pay', '{"steps": [
  {"name": "charge", "queue": "pay_q",
   "retry": {"max_attempts": 3, "initial_interval": "1s", "jitter": 0}},
  {"name": "receipt", "queue": "receipt_q"}]}');

-- the downstream stand-in: a payment API that deduplicates by idempotency key
CREATE TABLE test_payments (idempotency_key text PRIMARY KEY, charge_id bigserial UNIQUE,
                            amount integer NOT NULL, charged_at timestamptz NOT NULL);
CREATE TABLE test_calls (call_id bigserial PRIMARY KEY, idempotency_key text NOT NULL,
                         worker text NOT NULL, charge_id bigint NOT NULL, replayed boolean NOT NULL);
CREATE FUNCTION test_charge(key text, amount integer, worker text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    id bigint;
    replayed boolean := false;
BEGIN
    INSERT INTO test_payments (idempotency_key, amount, charged_at)
    VALUES (key, amount, clock_timestamp())
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING charge_id INTO id;
    IF id IS NULL THEN
        SELECT p.charge_id INTO STRICT id FROM test_payments p WHERE p.idempotency_key = key;
        replayed := true;
    END IF;
    INSERT INTO test_calls (idempotency_key, worker, charge_id, replayed) VALUES (key, worker, id, replayed);
    RETURN jsonb_build_object('charge_id', id, 'replayed', replayed);
END
$$;
-- what each worker was handed (the run and step too: a completed attempt's
-- row is deleted, its result is in the history)
CREATE TABLE test_deliveries (task_id bigint NOT NULL, fence bigint NOT NULL, attempt integer NOT NULL,
                              idempotency_key text NOT NULL, worker text NOT NULL, grp text NOT NULL,
                              run_id uuid NOT NULL, step text NOT NULL);
SELECT count(wf.start_run('pay', jsonb_build_object('amount', 100 + n))) FROM generate_series(1, 15) n;
});

# ---------------------------------------------------------------------
# A. the worker charges, then its connection dies before the result commits
# ---------------------------------------------------------------------
my $w1 = $node->background_psql('wf', on_error_stop => 0);
my $w1_pid = $w1->query_safe('SELECT pg_backend_pid()');
$w1->query_safe(
	q{INSERT INTO test_deliveries
SELECT task_id, fence, attempt, idempotency_key, 'w-1', 'A', run_id, step
FROM wf.claim_tasks('pay_q', 'w-1', 10, '2 seconds')});
# B's worker claims the other 5 at once (for a minute)
$node->safe_psql(
	'wf', q{
INSERT INTO test_deliveries
SELECT task_id, fence, attempt, idempotency_key, 'w-3', 'B', run_id, step
FROM wf.claim_tasks('pay_q', 'w-3', 10, '1 minute');
});
is( $node->safe_psql('wf', q{SELECT count(*) FROM test_deliveries WHERE worker = 'w-3'}),
	'5', 'a third worker gets the other 5 tasks');
is( $w1->query_safe(
		q{SELECT count(test_charge(d.idempotency_key, (coalesce(t.input, r.input)->>'amount')::integer, 'w-1'))
FROM test_deliveries d JOIN wf.tasks t USING (task_id) JOIN wf.runs r ON r.run_id = t.run_id WHERE d.worker = 'w-1'}),
	'10',
	'worker 1 charged 10 payments downstream');
$w1->query_safe('BEGIN');
is( $w1->query_safe(
		q{SELECT string_agg(DISTINCT wf.complete_task(d.task_id, d.fence,
                            jsonb_build_object('charge_id', c.charge_id)), ',')
FROM (SELECT * FROM test_deliveries WHERE worker = 'w-1' ORDER BY task_id LIMIT 5) d
JOIN test_calls c USING (idempotency_key)}),
	'accepted',
	'it reports 5 of them in a transaction that does not commit yet');
is( $node->safe_psql('wf', "SELECT pg_terminate_backend($w1_pid)"),
	't', 'worker 1 loses its connection before the commit');
eval { $w1->quit; };
is( $node->safe_psql(
		'wf', q{SELECT count(*) FROM wf.tasks JOIN test_deliveries d USING (task_id) WHERE d.grp = 'A' AND status = 'leased'}),
	'10',
	'none of the 10 results arrived: the tasks are still leased');

ok( $node->poll_query_until(
		'wf',
		q{SELECT count(*) = 10 FROM wf.tasks t JOIN test_deliveries d USING (task_id)
          WHERE d.grp = 'A' AND t.status = 'ready' AND t.lease_expirations = 1}),
	'the engine worker expires the 10 leases');

# ---------------------------------------------------------------------
# B. the call succeeds downstream, the worker sees a timeout and fails
# ---------------------------------------------------------------------
is( $node->safe_psql(
		'wf', q{
SELECT count(*) FILTER (WHERE test_charge(d.idempotency_key, (coalesce(t.input, r.input)->>'amount')::integer, 'w-3') IS NOT NULL
                         AND wf.fail_task(d.task_id, d.fence, '{"code": "timeout", "message": "no answer from the payment API"}') = 'accepted')
FROM test_deliveries d JOIN wf.tasks t USING (task_id) JOIN wf.runs r ON r.run_id = t.run_id WHERE d.worker = 'w-3'}),
	'5',
	'it charges them, sees a timeout and reports 5 retryable failures');

# ---------------------------------------------------------------------
# the second delivery: same idempotency key, deduplicated downstream
# ---------------------------------------------------------------------
$node->safe_psql(
	'wf', q{
CREATE FUNCTION test_work(w text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT * FROM wf.claim_tasks('pay_q', w, 20, '1 minute') LOOP
        INSERT INTO test_deliveries
        SELECT r.task_id, r.fence, r.attempt, r.idempotency_key, w,
               (SELECT d.grp FROM test_deliveries d
                WHERE d.run_id = r.run_id AND d.step = r.step LIMIT 1), r.run_id, r.step;
        IF wf.complete_task(r.task_id, r.fence,
                            test_charge(r.idempotency_key, (r.input->>'amount')::integer, w)) <> 'accepted' THEN
            RAISE EXCEPTION 'the completion of task % was not accepted', r.task_id;
        END IF;
    END LOOP;
    FOR r IN SELECT * FROM wf.claim_tasks('receipt_q', w, 20, '1 minute') LOOP
        PERFORM wf.complete_task(r.task_id, r.fence, '{}');
    END LOOP;
    RETURN (SELECT count(*) FROM wf.runs WHERE status <> 'completed');
END
$$;
});
ok($node->poll_query_until('wf', q{SELECT test_work('w-2')}, '0'),
	'a second worker gets every task again (the retries fired by the engine worker) and every run completes');

is( $node->safe_psql(
		'wf', q{
SELECT count(*) FROM (
  SELECT d.run_id FROM test_deliveries d
  GROUP BY d.run_id, d.step
  HAVING count(*) = 2 AND count(DISTINCT d.idempotency_key) = 1
     AND bool_and(d.idempotency_key = (SELECT e.payload->>'idempotency_key' FROM wf.history(d.run_id) e
                                       WHERE e.type = 'task_scheduled' AND e.step = d.step LIMIT 1))) x}),
	'15',
	'each charge step was delivered twice, both times with the same idempotency key');
is( $node->safe_psql(
		'wf', q{
SELECT (SELECT count(*) FROM test_calls) || ' calls/' ||
       (SELECT count(*) FROM test_calls WHERE replayed) || ' replayed/' ||
       (SELECT count(*) FROM test_payments) || ' charges/' ||
       (SELECT count(*) FROM (SELECT idempotency_key FROM test_calls GROUP BY 1 HAVING count(*) = 2) x) || ' keys called twice'}),
	'30 calls/15 replayed/15 charges/15 keys called twice',
	'the downstream was called twice per payment and charged once: the side effect happened exactly once');
is( $node->safe_psql(
		'wf', q{
SELECT count(*) FROM test_payments p JOIN wf.runs r ON (r.input->>'amount')::integer = p.amount
WHERE p.idempotency_key = (SELECT e.payload->>'idempotency_key' FROM wf.history(r.run_id) e
                           WHERE e.type = 'task_scheduled' AND e.step = 'charge' LIMIT 1)}),
	'15',
	'each charge is the amount of its own run');
is( $node->safe_psql(
		'wf', q{
SELECT count(*) FROM wf.runs r
WHERE (SELECT count(*) FROM wf.events e WHERE e.run_id = r.run_id AND e.type = 'task_completed' AND e.step = 'charge') = 1
  AND (r.context->'steps'->'charge'->'output'->>'charge_id')::bigint =
      (SELECT p.charge_id FROM test_payments p JOIN test_deliveries d USING (idempotency_key)
       WHERE d.run_id = r.run_id AND d.step = 'charge' LIMIT 1)}),
	'15',
	'each charge step completed once, with the id of the first (and only) charge');
is( $node->safe_psql(
		'wf', q{
SELECT string_agg(DISTINCT h, ' | ') FROM (
  SELECT d.grp, (SELECT string_agg(e.type || coalesce(':' || e.attempt, ''), ' ' ORDER BY e.seq)
                 FROM wf.history(d.run_id) e WHERE e.step = 'charge') AS h
  FROM test_deliveries d) x}),
	'task_scheduled:1 lease_expired:1 task_completed:1 | '
	  . 'task_scheduled:1 task_failed:1 timer_set timer_fired task_scheduled:2 task_completed:2',
	'the history shows both deliveries: a lease that expired, or a failed attempt and its retry');
is( $node->safe_psql(
		'wf', q{
SELECT count(*) FROM test_deliveries d
WHERE d.worker = 'w-2' AND (SELECT count(*) FROM test_deliveries x WHERE x.task_id = d.task_id) = 2
      AND d.fence > (SELECT min(fence) FROM test_deliveries WHERE task_id = d.task_id)
   OR d.worker = 'w-2' AND d.attempt = 2}),
	'15',
	'the second delivery had a newer fence (A) or was the next attempt (B)');
is( $node->safe_psql(
		'wf', q{
SELECT string_agg(DISTINCT grp || ':' || wf.complete_task(task_id, fence, '{"charge_id": 0}'), ' ')
FROM test_deliveries WHERE worker IN ('w-1', 'w-3')}),
	'A:stale B:duplicate',
	'a late report of the first delivery changes nothing: stale (A), or a duplicate of its failure (B)');
is( $node->safe_psql(
		'wf', q{SELECT count(*) FILTER (WHERE wf.verify_run(run_id)) || '/' || count(*) FROM wf.runs}),
	'15/15',
	'wf.verify_run holds for every run');

$node->stop;
done_testing();
