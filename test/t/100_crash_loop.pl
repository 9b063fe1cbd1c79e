
# Copyright (c) 2026, wfengine developers

# The crash loop (docs/reliability.md): a steady workload, and the
# postmaster killed with SIGKILL again and again.
#
# The workload is two pgbench clients calling test_step(), 200 times a
# second in all (pgbench -R 200): each
# call is one transaction that starts a run of "loop" (a task, a 1-second
# sleep, a task; the task retried up to 3 times) and claims up to 10 tasks
# for 3 seconds, of which it loses about 1 in 20 (never reports, the lease
# expires), fails about 1 in 10 (retryable: a retry timer) and completes
# the rest: one by one, or, in half the calls, in one
# wf.complete_tasks_and_claim whose up to two new leases it completes one by
# one (or loses, 1 in 20).  The engine worker fires the sleep and retry timers and the
# lease expiries.  The test's own tables are written in the same
# transactions: test_starts (one row per start), test_ledger (one row per
# accepted completion, the "side effect"; no unique key, so that a
# completion applied twice would show).
#
# Each round: the workload runs for 0.2 to 1 second, then the postmaster
# and every process of the server are killed with SIGKILL (nothing is shut
# down), the server is started again (crash recovery), and it is checked
# that
#   - every run changed since the last round verifies (wf.verify_run);
#   - nothing was applied twice: no step visit with two task_completed
#     events, no timer fired twice, no completion in the ledger twice;
#   - no state went backward: no run has a lower seq than the last round
#     saw, no run left a final status, no run that existed is gone;
#   - the counts add up: one run per start, one ledger row per
#     task_completed event.
# At the end the workload stops, every run is driven to its end, and
# every run verifies.
#
# WF_CRASH_KILLS sets the number of kills (default 20, about a minute);
# `make soak` runs 1,000.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;
use Time::HiRes qw(time usleep);

my $kills = $ENV{WF_CRASH_KILLS} // 20;
die "WF_CRASH_KILLS must be a positive integer, not \"$kills\"" unless $kills =~ /^[1-9][0-9]*$/;
my $started = time;

my $node = PostgreSQL::Test::Cluster->new('wf_crash_loop');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
restart_after_crash = on
max_worker_processes = 16
wfengine.naptime = '1s'
wfengine.launcher_naptime = '1s'
log_min_messages = warning
));
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE wf');
$node->safe_psql('wf', 'CREATE EXTENSION wfengine');

$node->safe_psql(
	'wf', q{
SELECT wf.publish_definition('loop', '{"steps": [
  {"name": "a", "queue": "loop_q", "retry": {"max_attempts": 3, "initial_interval": "1s", "jitter": 0}},
  {"name": "nap", "type": "sleep", "duration": "1s"},
  {"name": "b", "queue": "loop_q", "retry": {"max_attempts": 3, "initial_interval": "1s", "jitter": 0}}]}');
CREATE TABLE test_starts (run_id uuid PRIMARY KEY);
CREATE TABLE test_ledger (task_id bigint NOT NULL, fence bigint NOT NULL, run_id uuid NOT NULL,
                          step text NOT NULL, idempotency_key text NOT NULL);
CREATE TABLE test_seen (run_id uuid PRIMARY KEY, seq integer NOT NULL, status text NOT NULL);
CREATE TABLE test_round (last_check timestamptz NOT NULL);
INSERT INTO test_round VALUES ('-infinity');

CREATE FUNCTION test_step(starts integer, tasks integer) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    r record;
    x float8;
    n integer := 0;
    batch boolean := random() < 0.5;   -- half the calls report in one batch
    ids bigint[] := '{}';
    d_runs uuid[] := '{}';
    d_steps text[] := '{}';
    d_keys text[] := '{}';
    fences bigint[] := '{}';
    answers text[];
    k integer;
BEGIN
    INSERT INTO test_starts
    SELECT wf.start_run('loop', jsonb_build_object('i', i)) FROM generate_series(1, starts) i;
    FOR r IN SELECT * FROM wf.claim_tasks('loop_q', 'w-' || pg_backend_pid(), tasks, '3 seconds') LOOP
        x := random();
        IF x < 0.05 THEN
            CONTINUE;               -- the worker is lost: the lease expires
        ELSIF x < 0.15 THEN
            PERFORM wf.fail_task(r.task_id, r.fence, '{"code": "flaky"}');
        ELSIF batch THEN
            ids := ids || r.task_id;
            d_runs := d_runs || r.run_id;
            d_steps := d_steps || r.step;
            d_keys := d_keys || r.idempotency_key;
            fences := fences || r.fence;
        ELSIF wf.complete_task(r.task_id, r.fence, jsonb_build_object('by', pg_backend_pid())) = 'accepted' THEN
            INSERT INTO test_ledger VALUES (r.task_id, r.fence, r.run_id, r.step, r.idempotency_key);
            n := n + 1;
        END IF;
    END LOOP;
    IF batch THEN
        -- the completions in one wf.complete_tasks_and_claim, whose new
        -- leases (up to 2) are completed one by one, or lost
        FOR r IN SELECT * FROM wf.complete_tasks_and_claim(ids, fences, NULL, 'loop_q',
                                                          'w-' || pg_backend_pid(), 2, '3 seconds') LOOP
            IF answers IS NULL THEN
                answers := r.answers;
                FOR k IN 1 .. coalesce(array_length(answers, 1), 0) LOOP
                    IF answers[k] = 'accepted' THEN
                        INSERT INTO test_ledger VALUES (ids[k], fences[k], d_runs[k], d_steps[k], d_keys[k]);
                        n := n + 1;
                    END IF;
                END LOOP;
            END IF;
            IF r.task_id IS NOT NULL AND random() >= 0.05
               AND wf.complete_task(r.task_id, r.fence, '{"by": "handed on"}') = 'accepted' THEN
                INSERT INTO test_ledger VALUES (r.task_id, r.fence, r.run_id, r.step, r.idempotency_key);
                n := n + 1;
            END IF;
        END LOOP;
    END IF;
    RETURN n;
END
$$;

-- the checks of one round: every count must be 0
CREATE FUNCTION test_check() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    since timestamptz := (SELECT last_check FROM test_round) - interval '5 seconds';
    res text;
BEGIN
    -- the runs changed since the last round: a second application of
    -- anything (completion, timer, ledger row) would have changed its run
    CREATE TEMP TABLE changed ON COMMIT DROP AS
    SELECT r.run_id FROM wf.runs r
    WHERE r.updated_at >= since OR NOT EXISTS (SELECT 1 FROM test_seen s WHERE s.run_id = r.run_id);
    SELECT 'unverified=' || (SELECT count(*) FROM changed c WHERE NOT wf.verify_run(c.run_id))
        || ' twice_completed=' || (SELECT count(*) FROM (SELECT 1 FROM changed c JOIN wf.events e USING (run_id)
                                                         JOIN wf.tasks t ON t.task_id = (e.payload->>'task_id')::bigint
                                                         WHERE e.type = 'task_completed'
                                                         GROUP BY t.run_id, t.step, t.visit HAVING count(*) > 1) x)
        || ' twice_fired=' || (SELECT count(*) FROM (SELECT 1 FROM changed c JOIN wf.events e USING (run_id)
                                                     WHERE e.type = 'timer_fired'
                                                     GROUP BY e.payload->>'timer_id' HAVING count(*) > 1) x)
        || ' twice_ledger=' || (SELECT count(*) FROM (SELECT 1 FROM changed c JOIN test_ledger l USING (run_id)
                                                      GROUP BY l.run_id, l.step HAVING count(*) > 1) x)
        || ' backward=' || (SELECT count(*) FROM test_seen s LEFT JOIN wf.runs r USING (run_id)
                            WHERE r.run_id IS NULL OR r.seq < s.seq
                               OR (s.status IN ('completed', 'failed') AND r.status <> s.status))
        || ' starts_vs_runs=' || ((SELECT count(*) FROM test_starts) - (SELECT count(*) FROM wf.runs))
        || ' ledger_vs_events=' || ((SELECT count(*) FROM test_ledger)
                                    - (SELECT count(*) FROM wf.events WHERE type = 'task_completed'))
    INTO res;
    INSERT INTO test_seen SELECT r.run_id, r.seq, r.status FROM changed c JOIN wf.runs r USING (run_id)
    ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, status = excluded.status;
    UPDATE test_round SET last_check = clock_timestamp();
    RETURN res;
END
$$;
});
my $clean = 'unverified=0 twice_completed=0 twice_fired=0 twice_ledger=0 backward=0 starts_vs_runs=0 ledger_vs_events=0';

my $script = "$PostgreSQL::Test::Utils::tmp_check/crash_loop_step.sql";
PostgreSQL::Test::Utils::append_to_file($script, "SELECT test_step(1, 10);\n");

my ($bad_rounds, $recovery_secs_max, $recovery_secs_sum) = (0, 0, 0);
for my $round (1 .. $kills)
{
	my ($out, $err) = ('', '');
	my $load = IPC::Run::start(
		[
			'pgbench', '-n', '-c', '2', '-R', '200', '-T', '3600', '-f', $script,
			'-h', $node->host, '-p', $node->port, 'wf'
		],
		'>', \$out, '2>', \$err);
	usleep(200_000 + int(rand(800_000)));

	my $pm_pid = $node->{_pid};
	my @kids = server_children($pm_pid);
	$node->kill9;
	kill('KILL', @kids);
	for (1 .. 200)
	{
		last unless grep { -e "/proc/$_" } ($pm_pid, @kids);
		usleep(50_000);
	}
	die "round $round: the killed server's processes did not go away"
	  if grep { -e "/proc/$_" } ($pm_pid, @kids);
	$load->kill_kill;

	my $t0 = time;
	$node->start;
	my $result = $node->safe_psql('wf', 'SELECT test_check()');
	my $secs = time - $t0;
	$recovery_secs_max = $secs if $secs > $recovery_secs_max;
	$recovery_secs_sum += $secs;
	if ($result ne $clean)
	{
		$bad_rounds++;
		diag("round $round: $result");
	}
	# one assertion per round would be 1,000 in `make soak`: report the
	# first bad round and every 50th
	is($result, $clean, "round $round: after kill -9 of the postmaster every check holds")
	  if $result ne $clean || $round % 50 == 0 || $round == $kills;
}
is($bad_rounds, 0, "$kills kills of the postmaster under load, no round found a problem");

# ---------------------------------------------------------------------
# the end: drive every run to its end
# ---------------------------------------------------------------------
$node->safe_psql(
	'wf', q{
CREATE FUNCTION test_drive() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT * FROM wf.claim_tasks('loop_q', 'w-end', 1000, '1 minute') LOOP
        IF wf.complete_task(r.task_id, r.fence, '{"by": "end"}') = 'accepted' THEN
            INSERT INTO test_ledger VALUES (r.task_id, r.fence, r.run_id, r.step, r.idempotency_key);
        END IF;
    END LOOP;
    RETURN (SELECT count(*) FROM wf.runs WHERE status NOT IN ('completed', 'failed'));
END
$$;
});
ok($node->poll_query_until('wf', 'SELECT test_drive()', '0'),
	'after the last kill every run reaches its end');
is($node->safe_psql('wf', 'SELECT test_check()'), $clean, 'every check holds at the end');
my ($runs, $completed, $failed, $verified, $ledger) = split /\|/, $node->safe_psql(
	'wf', q{
SELECT count(*), count(*) FILTER (WHERE status = 'completed'), count(*) FILTER (WHERE status = 'failed'),
       count(*) FILTER (WHERE wf.verify_run(run_id)), (SELECT count(*) FROM test_ledger)
FROM wf.runs});
is($verified, $runs, "wf.verify_run holds for all $runs runs");
is( $node->safe_psql(
		'wf', q{
SELECT count(*) FROM wf.runs r LEFT JOIN (SELECT run_id, count(*) AS n FROM test_ledger GROUP BY run_id) l USING (run_id)
WHERE r.status = 'completed' AND l.n IS DISTINCT FROM 2}),
	'0',
	'every completed run has exactly its two completions in the ledger');
my ($fired, $expired, $retries) = split /\|/, $node->safe_psql(
	'wf', q{
SELECT count(*) FILTER (WHERE type = 'timer_fired'), count(*) FILTER (WHERE type = 'lease_expired'),
       count(*) FILTER (WHERE type = 'task_failed') FROM wf.events});
# the workload did its work, through both kinds of report
my ($batched, $handed_on) = split /\|/, $node->safe_psql(
	'wf', q{
SELECT count(*) FILTER (WHERE payload->'output' = '{}'),
       count(*) FILTER (WHERE payload->'output'->>'by' = 'handed on')
FROM wf.events WHERE type = 'task_completed'});
cmp_ok($runs, '>=', 10 * $kills, "the workload started runs between the kills ($runs)");
cmp_ok($batched, '>', 0, "completions went through wf.complete_tasks_and_claim ($batched)");
cmp_ok($handed_on, '>', 0, "leases it handed out were completed ($handed_on)");
diag(sprintf('crash loop: %d kills of the postmaster in %.0f s; restart and check %.2f s on average, %.2f s at most',
		$kills, time - $started, $recovery_secs_sum / $kills, $recovery_secs_max));
diag("crash loop: $runs runs ($completed completed, $failed failed after 3 attempts), "
	  . "$ledger completions, $fired timers fired, $expired leases expired, $retries failed attempts; "
	  . 'nothing applied twice, nothing went backward, every run verifies');

$node->stop;
done_testing();
