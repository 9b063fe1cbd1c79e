
# Copyright (c) 2026, wfengine developers

# Queue backlog (fault class 8 of docs/reliability.md): a backlog of
# 100,000 ready tasks, 10,000 due timers and 3,000 expired leases, all
# there at once, drained the way workers and the engine worker drain it:
# one short transaction per round, wf.tick(1000) then one claim of 100 per
# queue, each claimed task completed.
#
#  1. The backlog: 100,000 runs of "bulk" (one task each, priorities 0, 10
#     and 20 from the run input), 10,000 runs of "naps" whose sleep ends at
#     times that are a permutation of their order of creation (so that
#     firing by timer id would be out of order), and 3,000 runs of "leasy"
#     whose tasks a worker claimed for 1 second and never reported.
#  2. The drain, by a procedure that commits after each round and records
#     every claim and the time each claim call took.
#  3. Order: every queue is claimed in claim order (priority first, then
#     oldest available, then task id); the 100,000 are claimed exactly in
#     that order, 100 at a time; timers fire in fire_at order; leases
#     expire in the order they ran out.
#  4. Completeness: every run completed, each task completed once, each
#     timer fired once, each expired lease redelivered once with a newer
#     fence, and the dead worker's late results are stale.
#  5. Claim time at the start, the middle and the end of the drain is
#     reported (diag), not asserted: timings depend on the machine.
#
# The engine worker is off (wfengine.enabled = off): the test drives the
# tick itself, so that the order of firings is the test's to check.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;    # (also: initdb from a template)
use Time::HiRes qw(time);

my $started = time;
my $node = PostgreSQL::Test::Cluster->new('wf_backlog');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
wfengine.enabled = off
max_worker_processes = 16
shared_buffers = 256MB
max_wal_size = 2GB
checkpoint_timeout = 30min
));
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE wf');
$node->safe_psql('wf', 'CREATE EXTENSION wfengine');

# ---------------------------------------------------------------------
# 1. the backlog
# ---------------------------------------------------------------------
$node->safe_psql(
	'wf', q{
SELECT wf.publish_definition('bulk', '{"steps": [{"name": "a", "queue": "bulk_q", "priority": "$.input.p"}]}');
SELECT wf.publish_definition('naps', '{"steps": [
  {"name": "nap", "type": "sleep", "until": "$.input.at"},
  {"name": "after", "queue": "nap_q"}]}');
SELECT wf.publish_definition('leasy', '{"steps": [{"name": "a", "queue": "lease_q"}]}');

CREATE TABLE test_dead (task_id bigint PRIMARY KEY, fence bigint NOT NULL,
                        lease_expires_at timestamptz NOT NULL);
-- (the claimed attempt's priority and available_at, read at the claim: a
-- completed attempt's row is deleted since 0.3.0)
CREATE TABLE test_claims (task_id bigint NOT NULL, fence bigint NOT NULL,
                          deliveries integer NOT NULL, queue text NOT NULL,
                          round integer NOT NULL, priority integer NOT NULL,
                          available_at timestamptz NOT NULL, PRIMARY KEY (task_id, fence));
CREATE TABLE test_calls (round integer NOT NULL, queue text NOT NULL,
                         claimed integer NOT NULL, ms float8 NOT NULL);
});

# the leases: claimed for 1 second, in 30 claims, by a worker that dies
$node->safe_psql(
	'wf', q{
SELECT count(wf.start_run('leasy', jsonb_build_object('n', n))) FROM generate_series(1, 3000) n;
});
for (1 .. 30)
{
	$node->safe_psql(
		'wf', q{
INSERT INTO test_dead SELECT task_id, fence, lease_expires_at
FROM wf.claim_tasks('lease_q', 'w-dead', 100, '1 second');
});
}
# the timers: due 1 to 2 seconds from now, in an order unrelated to creation
$node->safe_psql(
	'wf', q{
SELECT count(wf.start_run('naps', jsonb_build_object(
         'at', clock_timestamp() + interval '1 second' + ((n * 7919) % 10000) * interval '100 microseconds')))
FROM generate_series(1, 10000) n;
});
my $t0 = time;
$node->safe_psql(
	'wf', q{
SELECT count(wf.start_run('bulk', jsonb_build_object('n', n, 'p', (n % 3) * 10)))
FROM generate_series(1, 100000) n;
});
my $start_secs = time - $t0;
$node->safe_psql('wf', 'VACUUM ANALYZE');
$node->poll_query_until('wf',
	q{SELECT max(fire_at) < clock_timestamp() AND (SELECT max(lease_expires_at) FROM test_dead) < clock_timestamp() FROM wf.timers})
  or die 'the backlog did not come due';

is( $node->safe_psql(
		'wf', q{
SELECT (SELECT count(*) FROM wf.tasks WHERE queue = 'bulk_q' AND status = 'ready') || '/' ||
       (SELECT count(*) FROM wf.timers WHERE status = 'pending' AND fire_at <= clock_timestamp()) || '/' ||
       (SELECT count(*) FROM wf.tasks WHERE queue = 'lease_q' AND status = 'leased'
                                          AND lease_expires_at <= clock_timestamp())}),
	'100000/10000/3000',
	'the backlog: 100,000 ready tasks, 10,000 due timers, 3,000 expired leases');

# ---------------------------------------------------------------------
# 2. the drain
# ---------------------------------------------------------------------
$node->safe_psql(
	'wf', q{
CREATE PROCEDURE test_drain() LANGUAGE plpgsql AS $$
DECLARE
    r integer := 0;
    q text;
    t0 timestamptz;
    ids bigint[];
    fences bigint[];
    dels integer[];
    busy boolean;
BEGIN
    LOOP
        r := r + 1;
        busy := wf.tick(1000) > 0;
        FOREACH q IN ARRAY ARRAY['bulk_q', 'nap_q', 'lease_q'] LOOP
            t0 := clock_timestamp();
            SELECT array_agg(c.task_id), array_agg(c.fence), array_agg(c.deliveries)
              INTO ids, fences, dels
              FROM wf.claim_tasks(q, 'w-drain', 100, '5 minutes') c;
            INSERT INTO test_calls
            VALUES (r, q, coalesce(cardinality(ids), 0),
                    extract(epoch FROM clock_timestamp() - t0) * 1000);
            IF ids IS NOT NULL THEN
                busy := true;
                INSERT INTO test_claims SELECT u.i, u.f, u.d, q, r, t.priority, t.available_at
                FROM unnest(ids, fences, dels) u(i, f, d) JOIN wf.tasks t ON t.task_id = u.i;
                IF (SELECT count(*) FROM unnest(ids, fences) u(i, f)
                    WHERE wf.complete_task(u.i, u.f, jsonb_build_object('round', r)) <> 'accepted') > 0 THEN
                    RAISE EXCEPTION 'a completion of round % was not accepted', r;
                END IF;
            END IF;
        END LOOP;
        COMMIT;
        EXIT WHEN NOT busy;
    END LOOP;
END
$$;
});
$t0 = time;
$node->safe_psql('wf', 'CALL test_drain()');
my $drain_secs = time - $t0;

# ---------------------------------------------------------------------
# 3. order
# ---------------------------------------------------------------------
# rank of each claimed task in claim order; batches must follow each other
my $order_sql = q{
WITH k AS (
  SELECT t.queue, t.round,
         rank() OVER (PARTITION BY t.queue ORDER BY t.priority DESC, t.available_at, t.task_id) AS rk
  FROM test_claims t WHERE t.queue = '%s'),
b AS (SELECT round, min(rk) AS lo, max(rk) AS hi FROM k GROUP BY round)
SELECT count(*) FROM (SELECT lo, lag(hi) OVER (ORDER BY round) AS prev_hi FROM b) x WHERE lo < prev_hi
};
for my $q ('bulk_q', 'nap_q', 'lease_q')
{
	is($node->safe_psql('wf', sprintf($order_sql, $q)),
		'0', "$q: every claim took tasks after those of the claim before (priority, then oldest, then id)");
}
is( $node->safe_psql(
		'wf', q{
WITH k AS (
  SELECT t.round, rank() OVER (ORDER BY t.priority DESC, t.available_at, t.task_id) AS rk,
         dense_rank() OVER (ORDER BY t.round) AS batch
  FROM test_claims t WHERE t.queue = 'bulk_q')
SELECT count(*) || '/' || count(*) FILTER (WHERE (rk - 1) / 100 + 1 = batch) || '/' || max(batch) FROM k}),
	'100000/100000/1000',
	'the 100,000 were claimed exactly in order, 100 per claim, in 1,000 claims');
is( $node->safe_psql(
		'wf', q{
SELECT string_agg(priority || ':' || n, ' ' ORDER BY first_round) FROM (
  SELECT t.priority, count(*) AS n, min(t.round) AS first_round
  FROM test_claims t WHERE t.queue = 'bulk_q' GROUP BY t.priority) x}),
	'20:33333 10:33334 0:33333',
	'priority 20 first, then 10, then 0');
is( $node->safe_psql(
		'wf', q{
WITH f AS (SELECT fired_at, min(fire_at) AS lo, max(fire_at) AS hi, count(*) AS n
           FROM wf.timers WHERE kind = 'sleep' GROUP BY fired_at)
SELECT count(*) || '/' || count(*) FILTER (WHERE lo < prev_hi) FROM
  (SELECT lo, lag(hi) OVER (ORDER BY fired_at) AS prev_hi FROM f) x}),
	'10/0',
	'the 10,000 timers fired in fire_at order, 1,000 per tick, in 10 ticks');
is( $node->safe_psql(
		'wf', q{
WITH e AS (SELECT e.created_at, d.lease_expires_at
           FROM wf.events e JOIN test_dead d ON d.task_id = (e.payload->>'task_id')::bigint
           WHERE e.type = 'lease_expired'),
f AS (SELECT created_at, min(lease_expires_at) AS lo, max(lease_expires_at) AS hi FROM e GROUP BY created_at)
SELECT count(*) FILTER (WHERE lo < prev_hi) FROM
  (SELECT lo, lag(hi) OVER (ORDER BY created_at) AS prev_hi FROM f) x}),
	'0',
	'the 3,000 leases expired in the order they ran out');

# ---------------------------------------------------------------------
# 4. completeness
# ---------------------------------------------------------------------
is( $node->safe_psql(
		'wf', q{
SELECT definition_name || '=' || count(*) FROM wf.runs WHERE status = 'completed'
GROUP BY definition_name ORDER BY definition_name}),
	"bulk=100000\nleasy=3000\nnaps=10000",
	'every run completed');
is($node->safe_psql('wf', q{SELECT count(*) FROM wf.runs WHERE status <> 'completed'}),
	'0', 'no run is left');
is( $node->safe_psql(
		'wf', q{
SELECT count(*) || '/' || count(DISTINCT run_id || step) FROM wf.events WHERE type = 'task_completed'}),
	'113000/113000',
	'113,000 completions, one per step of a run');
is( $node->safe_psql(
		'wf', q{
SELECT count(*) || '/' || count(DISTINCT payload->>'timer_id') FROM wf.events WHERE type = 'timer_fired'}),
	'10000/10000',
	'each timer fired once');
is( $node->safe_psql(
		'wf', q{
SELECT count(*) FILTER (WHERE c.fence > d.fence AND c.deliveries = 2) || '/' || count(*)
FROM test_dead d JOIN test_claims c USING (task_id)}),
	'3000/3000',
	'each expired lease was delivered once more, with a newer fence');
is( $node->safe_psql(
		'wf', q{
SELECT count(*) FILTER (WHERE wf.complete_task(task_id, fence, '{"late": true}') = 'stale') FROM test_dead}),
	'3000',
	'the late results of the dead worker are stale');
is( $node->safe_psql(
		'wf', q{
SELECT count(*) FILTER (WHERE NOT wf.verify_run(run_id)) || '/' || count(*) FROM wf.runs
WHERE definition_name <> 'bulk' OR hashtext(run_id::text) % 20 = 0}),
	'0/' . $node->safe_psql('wf',
		q{SELECT count(*) FROM wf.runs WHERE definition_name <> 'bulk' OR hashtext(run_id::text) % 20 = 0}),
	'wf.verify_run holds for every naps and leasy run and one bulk run in 20');

# ---------------------------------------------------------------------
# 5. claim time at the start, middle and end (reported, not asserted)
# ---------------------------------------------------------------------
my $times = $node->safe_psql(
	'wf', q{
WITH b AS (SELECT row_number() OVER (ORDER BY round) AS i, ms FROM test_calls
           WHERE queue = 'bulk_q' AND claimed = 100)
SELECT w, round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2), round(max(ms)::numeric, 2)
FROM (SELECT CASE WHEN i <= 50 THEN 'start' WHEN i BETWEEN 476 AND 525 THEN 'middle'
                  WHEN i > 950 THEN 'end' END AS w, ms FROM b) x
WHERE w IS NOT NULL GROUP BY w ORDER BY min(CASE w WHEN 'start' THEN 1 WHEN 'middle' THEN 2 ELSE 3 END)});
for my $line (split /\n/, $times)
{
	my ($w, $median, $max) = split /\|/, $line;
	diag(sprintf('claim of 100 from bulk_q at the %-6s of the drain (50 claims): median %s ms, max %s ms',
			$w, $median, $max));
}
diag(sprintf('started 100,000 runs in %.1f s; drained 113,000 tasks and 10,000 timers in %.1f s (%.0f tasks/s); test %.0f s',
		$start_secs, $drain_secs, 113000 / $drain_secs, time - $started));

$node->stop;
done_testing();
