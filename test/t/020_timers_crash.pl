
# Copyright (c) 2026, wfengine developers

# Durable timers and leases across a crash, fired by the engine worker
# (issue 3).  Nothing here calls wf.tick(): every timer must be fired by
# the background worker.
#
#  1. Runs that sleep 3 to 5 seconds (a fixed "duration", and an "until"
#     taken from the run input), task attempts that failed and wait for a
#     2-second retry backoff, and task attempts leased for 2 seconds whose
#     worker never reports.
#  2. Right away, the server is stopped in immediate mode (a crash: no
#     shutdown checkpoint) and started again.
#  3. Every sleep and retry timer fires exactly once, not before its time
#     and late by no more than the restart; every run passes its sleep
#     exactly once; every failed attempt is retried exactly once.
#  4. Every expired lease makes its task claimable again, with the next
#     fence, never before the lease expired.
#  5. Every run is driven to its end; wf.verify_run holds for every run.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;    # (also: initdb from a template)

my $node = PostgreSQL::Test::Cluster->new('wf_timers_crash');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
restart_after_crash = on
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

# ---------------------------------------------------------------------
# 1. pending timers and held leases
# ---------------------------------------------------------------------
$node->safe_psql(
	'wf', q{
SELECT wf.publish_definition('nap3', '{"steps": [
  {"name": "nap", "type": "sleep", "duration": "3s"},
  {"name": "after", "queue": "after_q"}]}');
SELECT wf.publish_definition('napat', '{"steps": [
  {"name": "nap", "type": "sleep", "until": "$.input.at"},
  {"name": "after", "queue": "after_q"}]}');
SELECT wf.publish_definition('flaky', '{"steps": [
  {"name": "call", "queue": "flaky_q",
   "retry": {"max_attempts": 3, "initial_interval": "2s", "jitter": 0}}]}');
SELECT wf.publish_definition('work', '{"steps": [{"name": "call", "queue": "lease_q"}]}');

-- bookkeeping of the test, outside the engine's schema
CREATE TABLE test_leases (task_id bigint PRIMARY KEY, fence bigint NOT NULL,
                          lease_expires_at timestamptz NOT NULL,
                          new_fence bigint, deliveries integer, reclaimed_at timestamptz);
});
$node->safe_psql(
	'wf', q{
SELECT count(wf.start_run('nap3', jsonb_build_object('n', n))) FROM generate_series(1, 20) AS n;
SELECT count(wf.start_run('napat', jsonb_build_object(
           'at', clock_timestamp() + make_interval(secs => 3 + n % 3))))
FROM generate_series(1, 20) AS n;
SELECT count(wf.start_run('flaky', jsonb_build_object('n', n))) FROM generate_series(1, 10) AS n;
SELECT count(wf.start_run('work', jsonb_build_object('n', n))) FROM generate_series(1, 10) AS n;
SELECT count(*) FILTER (WHERE wf.fail_task(task_id, fence, '{"code": "transient"}') = 'accepted')
FROM wf.claim_tasks('flaky_q', 'w-fails', 10, '5 minutes');
INSERT INTO test_leases (task_id, fence, lease_expires_at)
SELECT task_id, fence, lease_expires_at FROM wf.claim_tasks('lease_q', 'w-dies', 10, '2 seconds');
});
is( $node->safe_psql(
		'wf',
		"SELECT kind || '=' || count(*) FROM wf.timers WHERE status = 'pending' GROUP BY kind ORDER BY kind"
	),
	"retry=10\nsleep=40",
	'40 sleep timers and 10 retry timers are pending');
is($node->safe_psql('wf', 'SELECT count(*) FROM test_leases'),
	'10', '10 tasks are leased for 2 seconds');

# ---------------------------------------------------------------------
# 2. crash right away
# ---------------------------------------------------------------------
$node->stop('immediate');
$node->start;

# ---------------------------------------------------------------------
# 3. every timer fires exactly once
# ---------------------------------------------------------------------
ok( $node->poll_query_until(
		'wf',
		"SELECT count(*) = 0 FROM wf.timers WHERE status = 'pending' AND kind IN ('sleep', 'retry')"
	),
	'the worker fires every sleep and retry timer after the crash');
is( $node->safe_psql(
		'wf',
		"SELECT kind || '=' || count(*) FROM wf.timers WHERE status = 'fired' GROUP BY kind ORDER BY kind"
	),
	"retry=10\nsleep=40",
	'all 50 were fired (none cancelled or lost)');
is( $node->safe_psql(
		'wf', q{
SELECT count(*) FROM (SELECT payload->>'timer_id' FROM wf.events WHERE type = 'timer_fired'
                      GROUP BY 1 HAVING count(*) <> 1) AS x}),
	'0',
	'no timer fired twice');
is( $node->safe_psql(
		'wf', q{
SELECT count(*) FROM wf.timers t
WHERE t.kind IN ('sleep', 'retry')
  AND NOT EXISTS (SELECT 1 FROM wf.events e WHERE e.type = 'timer_fired'
                  AND e.run_id = t.run_id AND (e.payload->>'timer_id')::bigint = t.timer_id)}),
	'0',
	'every timer has its timer_fired event');
is( $node->safe_psql(
		'wf',
		"SELECT count(*) FROM wf.timers WHERE status = 'fired' AND fired_at < fire_at"),
	'0',
	'no timer fired before its time');
is( $node->safe_psql(
		'wf',
		"SELECT count(*) FROM wf.timers WHERE status = 'fired' AND fired_at > fire_at + interval '20 seconds'"
	),
	'0',
	'every timer fired late by the restart only');
ok( $node->poll_query_until(
		'wf', q{
SELECT count(*) = 0 FROM wf.runs r
WHERE r.definition_name IN ('nap3', 'napat')
  AND (SELECT count(*) FROM wf.events e
       WHERE e.run_id = r.run_id AND e.type = 'sleep_finished') <> 1}),
	'every run passed its sleep exactly once');
is( $node->safe_psql(
		'wf', q{
SELECT count(*) FROM wf.runs r
WHERE r.definition_name = 'flaky'
  AND (SELECT count(*) FROM wf.tasks t WHERE t.run_id = r.run_id AND t.attempt = 2) <> 1}),
	'0',
	'every failed attempt was retried exactly once');
is( $node->safe_psql(
		'wf',
		"SELECT sum(fired) > 0 FROM wf.worker_status() WHERE database = 'wf'"),
	't',
	'the worker did the firing');

# ---------------------------------------------------------------------
# 4. expired leases are delivered again
# ---------------------------------------------------------------------
$node->safe_psql(
	'wf', q{
CREATE FUNCTION test_reclaim() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT * FROM wf.claim_tasks('lease_q', 'w-recovery', 10, '5 minutes') LOOP
        UPDATE test_leases SET new_fence = r.fence, deliveries = r.deliveries,
                               reclaimed_at = clock_timestamp()
        WHERE task_id = r.task_id AND new_fence IS NULL;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'task % was delivered again unexpectedly', r.task_id;
        END IF;
    END LOOP;
    RETURN (SELECT count(*) FROM test_leases WHERE new_fence IS NULL);
END
$$;
});
ok($node->poll_query_until('wf', 'SELECT test_reclaim()', '0'),
	'every expired lease is claimable again');
is( $node->safe_psql(
		'wf',
		'SELECT count(*) FROM test_leases WHERE new_fence > fence AND deliveries = 2'),
	'10',
	'each with a higher fence');
is( $node->safe_psql(
		'wf',
		'SELECT count(*) FROM test_leases WHERE new_fence IN (SELECT fence FROM test_leases)'),
	'0',
	'none of them a fence handed out before the crash');
is( $node->safe_psql(
		'wf',
		'SELECT count(*) FROM test_leases WHERE reclaimed_at < lease_expires_at'),
	'0',
	'none before its lease expired');
is( $node->safe_psql(
		'wf', q{
SELECT count(*) FROM (SELECT run_id FROM wf.events WHERE type = 'lease_expired'
                      GROUP BY run_id HAVING count(*) > 1) AS x}),
	'0',
	'no lease expired twice');
is( $node->safe_psql(
		'wf', q{
SELECT count(*) FROM test_leases l JOIN wf.tasks t USING (task_id)
WHERE wf.complete_task(l.task_id, l.fence, '{"by": "w-dies"}') <> 'stale'}),
	'0',
	'the late results of the dead worker are stale');

# ---------------------------------------------------------------------
# 5. every run reaches its end and verifies
# ---------------------------------------------------------------------
$node->safe_psql(
	'wf', q{
CREATE FUNCTION test_drive() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT l.task_id, l.new_fence FROM test_leases l JOIN wf.tasks t USING (task_id)
             WHERE t.status = 'leased' LOOP
        PERFORM wf.complete_task(r.task_id, r.new_fence, '{"by": "w-recovery"}');
    END LOOP;
    FOR r IN SELECT * FROM wf.claim_tasks('after_q', 'w-after', 100, '5 minutes') LOOP
        PERFORM wf.complete_task(r.task_id, r.fence, '{}');
    END LOOP;
    FOR r IN SELECT * FROM wf.claim_tasks('flaky_q', 'w-flaky', 100, '5 minutes') LOOP
        PERFORM wf.complete_task(r.task_id, r.fence, '{}');
    END LOOP;
    RETURN (SELECT count(*) FROM wf.runs WHERE status <> 'completed');
END
$$;
});
ok($node->poll_query_until('wf', 'SELECT test_drive()', '0'),
	'every run completes');
is( $node->safe_psql(
		'wf', 'SELECT count(*) FILTER (WHERE wf.verify_run(run_id)) || \'/\' || count(*) FROM wf.runs'),
	'60/60',
	'wf.verify_run holds for every run');

$node->stop;
done_testing();
