
# Copyright (c) 2026, wfengine developers

# Crash and restart: what a committed transaction wrote survives a crash
# of the server, what an uncommitted one wrote does not, leases survive
# the restart (and expire on time), and every run can be driven to its
# end afterwards with a history that verifies.
#
#  1. 50 runs of a 3-step definition; some tasks completed, some failed
#     (to be retried), some leased with a short lease (the worker "dies"),
#     one leased with a long lease.
#  2. A backend completes the long-leased task without committing and is
#     killed with SIGKILL: the postmaster reinitialises, and the
#     completion is gone, the task still leased under the same fence.
#  3. The server is stopped in immediate mode (a crash) and started: every
#     committed row is there, unchanged, and every run verifies.
#  4. The short leases expire and the tasks are claimed again with a new,
#     higher fence that no claim before the crash was given (fences come
#     from a sequence, which a crash restarts past every value handed out),
#     never before their lease expired; the long lease is respected.
#  5. Every run is driven to completion and verifies.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;    # (also: initdb from a template)

my $node = PostgreSQL::Test::Cluster->new('wf_restart');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
restart_after_crash = on
# The engine worker stays idle: this test compares committed state across
# crashes and fires timers and lease expiries itself with wf.tick() (the
# worker's own crash test is 020_timers_crash.pl).
wfengine.enabled = off
));
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION wfengine');
is($node->safe_psql('postgres', 'SELECT wf.preloaded()'),
	't', 'wfengine is loaded through shared_preload_libraries');

# ---------------------------------------------------------------------
# 1. committed state
# ---------------------------------------------------------------------
$node->safe_psql(
	'postgres', q{
SELECT wf.publish_definition('restart3', '{"steps": [
    {"name": "a", "queue": "rq", "input": {"n": "$.input.n"},
     "retry": {"max_attempts": 3, "initial_interval": "10ms", "max_interval": "20ms"}},
    {"name": "b", "queue": "rq", "input": {"a": "$.steps.a.output"}},
    {"name": "c", "queue": "rq"}]}');
SELECT count(wf.start_run('restart3', jsonb_build_object('n', n), 'restart-' || n))
FROM generate_series(1, 50) AS n;

-- bookkeeping of the test, outside the engine's schema
CREATE TABLE test_claims (task_id bigint PRIMARY KEY, fence bigint NOT NULL,
                          lease_expires_at timestamptz NOT NULL, role text NOT NULL);

-- complete 30 tasks and fail 5 (retryable, attempt 1 of 3)
WITH c AS (SELECT * FROM wf.claim_tasks('rq', 'w-done', 35, '5 minutes'))
INSERT INTO test_claims
SELECT task_id, fence, lease_expires_at,
       CASE WHEN row_number() OVER (ORDER BY task_id) <= 30 THEN 'complete' ELSE 'fail' END
FROM c;
SELECT count(*) FILTER (WHERE v = 'accepted') FROM (
    SELECT CASE role
             WHEN 'complete' THEN wf.complete_task(task_id, fence, jsonb_build_object('by', 'w-done'))
             ELSE wf.fail_task(task_id, fence, '{"code": "transient"}')
           END AS v
    FROM test_claims ORDER BY task_id) AS x;
});

# ten tasks whose worker dies: a short lease that nobody renews
$node->safe_psql('postgres', q{
INSERT INTO test_claims
SELECT task_id, fence, lease_expires_at, 'abandoned'
FROM wf.claim_tasks('rq', 'w-dies', 10, '3 seconds');
});
# one task leased for long: its result is reported in the killed backend
$node->safe_psql('postgres', q{
INSERT INTO test_claims
SELECT task_id, fence, lease_expires_at, 'inflight'
FROM wf.claim_tasks('rq', 'w-inflight', 1, '10 minutes');
});

is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(role || '=' || n, ',' ORDER BY role) FROM (
    SELECT role, count(*) AS n FROM test_claims GROUP BY role) AS x}),
	'abandoned=10,complete=30,fail=5,inflight=1',
	'claimed 46 tasks: 30 to complete, 5 to fail, 10 abandoned, 1 in flight');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM wf.tasks t JOIN test_claims c USING (task_id)
WHERE c.role IN ('abandoned', 'inflight') AND t.status = 'leased' AND t.fence = c.fence}),
	'11',
	'the abandoned and the in-flight tasks are leased');

# A digest of every committed engine row, to compare across crashes.
my $digest_sql = q{
SELECT (SELECT count(*) FROM wf.runs) || ' runs, '
    || (SELECT count(*) FROM wf.events) || ' events, '
    || (SELECT count(*) FROM wf.tasks) || ' tasks, '
    || (SELECT md5(string_agg(run_id || ':' || seq || ':' || type || ':' || encode(hash, 'hex'), ',' ORDER BY run_id, seq))
        FROM wf.events) || ' '
    || (SELECT md5(string_agg(run_id || ':' || status || ':' || seq || ':' || encode(last_hash, 'hex')
                              || ':' || coalesce(current_task, 0), ',' ORDER BY run_id))
        FROM wf.runs) || ' '
    || (SELECT md5(string_agg(task_id || ':' || status || ':' || fence || ':' || coalesce(worker, '')
                              || ':' || coalesce(output::text, '') || ':' || available_at, ',' ORDER BY task_id))
        FROM wf.tasks)
};
# the attempts: the rows of wf.tasks, and the completed attempts, whose row
# is deleted since 0.3.0 (their task_completed events)
my $counts_sql = q{
SELECT (SELECT count(*) FROM wf.runs) || '/' || (SELECT count(*) FROM wf.event_log) || '/'
    || (SELECT count(*) FROM wf.tasks)
       + (SELECT count(*) FROM wf.event_log e WHERE e.type = 'task_completed'
          AND NOT EXISTS (SELECT 1 FROM wf.tasks t WHERE t.task_id = (e.payload->>'task_id')::bigint))
};
my $verify_sql = q{SELECT count(*) FILTER (WHERE wf.verify_run(run_id)) || '/' || count(*) FROM wf.runs};

my $digest_before = $node->safe_psql('postgres', $digest_sql);
my $counts_before = $node->safe_psql('postgres', $counts_sql);
# 50 runs; events: 2 per start + 2 per completion (task_completed,
# task_scheduled) + 2 per failure (task_failed, timer_set: the retry waits
# on a durable timer); tasks: 50 first attempts + 30 second steps.
is($counts_before, '50/170/80', 'committed state before the crashes: 50 runs, 170 events, 80 task attempts');
is($node->safe_psql('postgres', $verify_sql), '50/50', 'every run verifies before the crashes');

# ---------------------------------------------------------------------
# 2. SIGKILL of a backend with an uncommitted completion
# ---------------------------------------------------------------------
my ($inflight_task, $inflight_fence) = split /\|/,
  $node->safe_psql('postgres', q{SELECT task_id, fence FROM test_claims WHERE role = 'inflight'});

my $bg = $node->background_psql('postgres', on_error_stop => 0);
my $bg_pid = $bg->query_safe('SELECT pg_backend_pid()');
$bg->query_safe('BEGIN');
is( $bg->query_safe(
		"SELECT wf.complete_task($inflight_task, $inflight_fence, '{\"inflight\": true}')"),
	'accepted',
	'the in-flight completion is accepted inside its open transaction');
is( $node->safe_psql(
		'postgres', "SELECT status || '/' || fence FROM wf.tasks WHERE task_id = $inflight_task"),
	"leased/$inflight_fence",
	'another session still sees the in-flight task leased');

ok(kill('KILL', $bg_pid), 'killed the backend of the in-flight completion with SIGKILL');
# the postmaster notices, terminates every backend and reinitialises
$node->poll_query_until('postgres', 'SELECT true')
  or die 'the server did not come back after SIGKILL of a backend';
eval { $bg->quit; };
ok( $node->log_contains(qr/server process \(PID $bg_pid\) was terminated by signal 9/),
	'the postmaster saw the backend die and reinitialised');

is( $node->safe_psql(
		'postgres', "SELECT status || '/' || fence || '/' || coalesce(output::text, 'null') FROM wf.tasks WHERE task_id = $inflight_task"),
	"leased/$inflight_fence/null",
	'after SIGKILL the in-flight task is still leased under the same fence, without output');
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM wf.event_log WHERE payload->'output' ? 'inflight'}),
	'0',
	'after SIGKILL no event of the uncommitted completion exists');
is($node->safe_psql('postgres', $digest_sql),
	$digest_before, 'after SIGKILL every committed row is unchanged, and nothing else was added');

# ---------------------------------------------------------------------
# 3. immediate shutdown (crash) and restart
# ---------------------------------------------------------------------
my ($max_task_before, $crash_time) = split /\|/,
  $node->safe_psql('postgres',
	q{SELECT max((payload->>'task_id')::bigint), clock_timestamp() FROM wf.event_log WHERE type = 'task_scheduled'});
$node->stop('immediate');
$node->start;

is($node->safe_psql('postgres', $counts_sql),
	$counts_before, 'after the crash the counts of runs, events and tasks are unchanged');
is($node->safe_psql('postgres', $digest_sql),
	$digest_before, 'after the crash every committed row is unchanged');
is($node->safe_psql('postgres', $verify_sql), '50/50', 'after the crash every run verifies');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM wf.tasks t JOIN test_claims c USING (task_id)
WHERE c.role IN ('abandoned', 'inflight') AND t.status = 'leased' AND t.fence = c.fence
  AND t.lease_expires_at = c.lease_expires_at}),
	'11',
	'after the crash the leases are unchanged');

# ---------------------------------------------------------------------
# 4. expired leases are claimable again
# ---------------------------------------------------------------------
# A recovery worker claims everything that is claimable and records it;
# poll until the ten abandoned tasks have been claimed again.
$node->safe_psql(
	'postgres', q{
CREATE TABLE test_reclaimed (task_id bigint PRIMARY KEY, fence bigint NOT NULL, attempt integer NOT NULL,
                             claimed_at timestamptz NOT NULL, done boolean NOT NULL DEFAULT false);
});
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION test_reclaim() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    -- what the engine worker does: expire the leases that are due
    PERFORM wf.tick();
    INSERT INTO test_reclaimed (task_id, fence, attempt, claimed_at)
    SELECT c.task_id, c.fence, c.attempt, c.lease_expires_at - interval '5 minutes'
    FROM wf.claim_tasks('rq', 'w-recovery', 100, '5 minutes') AS c;
    RETURN (SELECT count(*) FROM test_reclaimed r JOIN test_claims USING (task_id)
            WHERE role = 'abandoned') = 10;
END
$$;
});
$node->poll_query_until('postgres', 'SELECT test_reclaim()')
  or die 'the abandoned tasks never became claimable again';

is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM test_reclaimed r JOIN test_claims c USING (task_id) JOIN wf.tasks t USING (task_id)
WHERE c.role = 'abandoned' AND r.fence > c.fence AND t.attempt = r.attempt
  AND t.worker = 'w-recovery' AND r.claimed_at >= c.lease_expires_at}),
	'10',
	'each abandoned task was claimed again with a higher fence, only after its lease expired');
is( $node->safe_psql(
		'postgres',
		'SELECT count(*) FROM test_reclaimed r WHERE r.fence IN (SELECT c.fence FROM test_claims c)'),
	'0',
	'no fence handed out before the crash is handed out again after it');
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM test_reclaimed JOIN test_claims USING (task_id) WHERE role = 'inflight'}),
	'0',
	'the unexpired lease of the in-flight task was not claimed again');

# the dead worker's late result is stale, the in-flight worker's retried
# report (same fence, its lease is still valid) is accepted
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(DISTINCT wf.complete_task(task_id, fence, '{"by": "w-dies"}'), ',')
FROM test_claims WHERE role = 'abandoned'}),
	'stale',
	'the late results of the abandoned leases are stale');
is( $node->safe_psql(
		'postgres', "SELECT wf.complete_task($inflight_task, $inflight_fence, '{\"by\": \"w-inflight\"}')"),
	'accepted',
	'the in-flight worker reports again after the crash and is accepted');

# ---------------------------------------------------------------------
# 5. drive every run to its end
# ---------------------------------------------------------------------
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION test_drive() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    PERFORM wf.tick();
    FOR r IN SELECT * FROM test_reclaimed WHERE NOT done ORDER BY task_id LOOP
        IF wf.complete_task(r.task_id, r.fence, '{"by": "w-recovery"}') <> 'accepted' THEN
            RAISE EXCEPTION 'result of task % not accepted', r.task_id;
        END IF;
        UPDATE test_reclaimed SET done = true WHERE task_id = r.task_id;
    END LOOP;
    FOR r IN SELECT * FROM wf.claim_tasks('rq', 'w-finish', 200, '5 minutes') LOOP
        IF wf.complete_task(r.task_id, r.fence, '{"by": "w-finish"}') <> 'accepted' THEN
            RAISE EXCEPTION 'result of task % not accepted', r.task_id;
        END IF;
    END LOOP;
    RETURN (SELECT count(*) FROM wf.runs WHERE status <> 'completed');
END
$$;
});
$node->poll_query_until('postgres', 'SELECT test_drive()', '0')
  or die 'the runs could not be driven to their end';

is( $node->safe_psql('postgres', q{SELECT status || '=' || count(*) FROM wf.runs GROUP BY status}),
	'completed=50', 'every run completed after the crashes');
is($node->safe_psql('postgres', $verify_sql), '50/50', 'every run verifies at its end');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM (SELECT run_id FROM wf.event_log GROUP BY run_id
                      HAVING min(seq) <> 1 OR max(seq) <> count(*)) AS x}),
	'0',
	'the history of every run is gap-free');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM (SELECT run_id, step FROM wf.event_log WHERE type = 'task_completed'
                      GROUP BY run_id, step HAVING count(*) <> 1) AS x}),
	'0',
	'every step of every run was completed exactly once');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM wf.runs r
WHERE (SELECT e.type FROM wf.event_log e WHERE e.run_id = r.run_id ORDER BY e.seq DESC LIMIT 1) <> 'run_completed'}),
	'0',
	'run_completed is the last event of every run');
# 50 first attempts + 5 retries, 50 "b" and 50 "c" tasks; 8 events per
# run, 4 per failure (task_failed, timer_set, timer_fired and the retry's
# task_scheduled), one
# lease_expired per abandoned lease and one result_stale per late result
# of a dead worker
is( $node->safe_psql(
		'postgres', qq{
SELECT count(*) FILTER (WHERE created_at > '$crash_time') || '/'
    || count(*) FILTER (WHERE created_at > '$crash_time' AND (payload->>'task_id')::bigint > $max_task_before)
FROM wf.event_log WHERE type = 'task_scheduled'}),
	'75/75',
	'the 75 tasks scheduled after the crashes got new task ids');
is($node->safe_psql('postgres', $counts_sql),
	'50/440/155',
	'in the end: 50 runs, 440 events, 155 task attempts');

$node->stop;
done_testing();
