
# Copyright (c) 2026, wfengine developers

# An interrupted version publish (fault class 9 of docs/reliability.md).
#
# Definition "order" has a parallel step whose two branches are published
# as definitions of their own ("order:ship:0", "order:ship:1") in the same
# transaction as the parent, before it.  Version 1 is published and five
# runs of it are in flight (branch tasks leased).  Then the publish of the
# next version, whose branch 0 changed, is interrupted four ways:
#
#  1. rolled back (ROLLBACK, and ROLLBACK TO SAVEPOINT in a transaction
#     that commits);
#  2. its connection terminated mid-transaction (pg_terminate_backend);
#  3. its backend killed with SIGKILL (the postmaster reinitialises);
#  4. the postmaster and all its processes killed with SIGKILL, and the
#     server started again (crash recovery).
#
# In 2 to 4 the publish is stopped inside wf.publish_definition itself:
# a test trigger on wf.definitions sleeps before the parent's row is
# inserted, after the new branch version was written, and the interruption
# comes while it sleeps.
#
# After each: no half-published version (the parent's versions and each
# branch's are 1..n without a gap, and every parent version finds each of
# its branches as a definition with the same steps), the interrupted
# version is not there, the same publish then succeeds with the next
# number, and the runs of version 1 are unaffected: at the end they are
# driven to completion on version 1, and every run verifies.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;

my $node = PostgreSQL::Test::Cluster->new('wf_publish');
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

sub spec
{
	my ($pick_queue) = @_;
	return qq({"steps": [
  {"name": "ship", "type": "parallel", "branches": [
     {"steps": [{"name": "pick", "queue": "$pick_queue"}]},
     {"steps": [{"name": "label", "queue": "label_q"}]}]},
  {"name": "bill", "queue": "bill_q"}]});
}

is($node->safe_psql('wf', "SELECT wf.publish_definition('order', '" . spec('pick_q') . "')"),
	'1', 'version 1 is published');
$node->safe_psql(
	'wf', q{
SELECT count(wf.start_run('order', jsonb_build_object('n', n))) FROM generate_series(1, 5) n;
CREATE TABLE test_leases AS SELECT task_id, fence FROM wf.claim_tasks('pick_q', 'w-old', 10, '1 hour');
CREATE FUNCTION test_stall() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.name = 'order' AND current_setting('test.stall', true) = 'on' THEN
        PERFORM pg_sleep(300);
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER test_stall BEFORE INSERT ON wf.definitions FOR EACH ROW EXECUTE FUNCTION test_stall();
});
ok( $node->poll_query_until(
		'wf', q{SELECT count(*) = 10 FROM wf.runs WHERE definition_name LIKE 'order:ship:%'}),
	'five runs of version 1 started their branches');
$node->safe_psql('wf', 'CREATE TABLE test_old AS SELECT run_id FROM wf.runs');
my $old_runs_sql = q{
SELECT string_agg(run_id || ':' || status || ':' || definition_version || ':' || seq, ' ' ORDER BY run_id)
FROM wf.runs WHERE run_id IN (SELECT run_id FROM test_old)};
my $old_runs = $node->safe_psql('wf', $old_runs_sql);

# the invariants of wf.definitions for "order" after $versions versions
sub check_definitions
{
	my ($versions, $what) = @_;
	is( $node->safe_psql(
			'wf', q{
SELECT string_agg(name || '=' || n || '/' || maxv, ' ' ORDER BY name)
FROM (SELECT name, count(*) AS n, max(version) AS maxv FROM wf.definitions GROUP BY name) x}),
		"order=$versions/$versions order:ship:0=$versions/$versions order:ship:1=1/1",
		"$what: $versions versions of the parent and of the changed branch, numbered without a gap, one of the unchanged branch"
	);
	is( $node->safe_psql(
			'wf', q{
SELECT count(*) FROM wf.definitions p, jsonb_array_elements(p.spec->'steps'->0->'branches') WITH ORDINALITY AS b(branch, i)
WHERE p.name = 'order'
  AND NOT EXISTS (SELECT 1 FROM wf.definitions c
                  WHERE c.name = 'order:ship:' || (b.i - 1) AND c.spec->'steps' = b.branch->'steps'
                    AND c.definition_id < p.definition_id)}),
		'0',
		"$what: every version of the parent finds each of its branches, published before it");
}

# publish the spec that was interrupted: it gets the next number
sub publish_next
{
	my ($queue, $version, $what) = @_;
	is($node->safe_psql('wf', "SELECT wf.publish_definition('order', '" . spec($queue) . "')"),
		$version, "$what: the same publish then succeeds as version $version");
	$node->safe_psql('wf', "SELECT wf.start_run('order', '{\"v\": $version}')");
	is( $node->safe_psql(
			'wf', "SELECT string_agg(definition_version::text, ',') FROM wf.runs WHERE definition_name = 'order' AND input->>'v' = '$version'"),
		$version,
		"$what: a run of version $version starts");
}

# a publish stopped in the test trigger; returns the session and its pid
sub stalled_publish
{
	my ($queue) = @_;
	my $bg = $node->background_psql('wf', on_error_stop => 0);
	my $pid = $bg->query_safe('SELECT pg_backend_pid()');
	$bg->query_safe("SET test.stall = 'on'");
	$bg->query_until(qr/^$/, "SELECT wf.publish_definition('order', '" . spec($queue) . "');\n");
	$node->poll_query_until('wf',
		"SELECT wait_event = 'PgSleep' FROM pg_stat_activity WHERE pid = $pid")
	  or die 'the publish did not reach the trigger';
	is( $node->safe_psql(
			'wf', "SELECT count(*) FROM wf.definitions WHERE name = 'order:ship:0'"),
		$node->safe_psql('wf', "SELECT count(*) FROM wf.definitions WHERE name = 'order'"),
		"publish of $queue: stalled inside wf.publish_definition, its new branch version is not visible");
	return ($bg, $pid);
}

# ---------------------------------------------------------------------
# 1. rolled back
# ---------------------------------------------------------------------
is( $node->safe_psql(
		'wf', "BEGIN; SELECT wf.publish_definition('order', '" . spec('pick_2') . "'); ROLLBACK;"),
	'2', 'a publish returns version 2 in a transaction that is rolled back');
$node->safe_psql(
	'wf', "BEGIN; SAVEPOINT p; SELECT wf.publish_definition('order', '" . spec('pick_2') . "');
           ROLLBACK TO SAVEPOINT p; SELECT wf.start_run('order', '{\"savepoint\": true}'); COMMIT;");
check_definitions(1, 'rolled back');
publish_next('pick_2', 2, 'rolled back');
check_definitions(2, 'after the publish');

# ---------------------------------------------------------------------
# 2. connection terminated mid-transaction
# ---------------------------------------------------------------------
my ($bg, $pid) = stalled_publish('pick_3');
is($node->safe_psql('wf', "SELECT pg_terminate_backend($pid)"),
	't', 'the connection of the stalled publish is terminated');
eval { $bg->quit; };
$node->poll_query_until('wf', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid");
check_definitions(2, 'terminated');
publish_next('pick_3', 3, 'terminated');

# ---------------------------------------------------------------------
# 3. backend killed with SIGKILL
# ---------------------------------------------------------------------
($bg, $pid) = stalled_publish('pick_4');
ok(kill('KILL', $pid), 'the backend of the stalled publish is killed with SIGKILL');
eval { $bg->quit; };
$node->poll_query_until('wf', 'SELECT true')
  or die 'the server did not come back after SIGKILL of a backend';
ok($node->log_contains(qr/server process \(PID $pid\) was terminated by signal 9/),
	'the postmaster reinitialised');
check_definitions(3, 'backend killed');
publish_next('pick_4', 4, 'backend killed');

# ---------------------------------------------------------------------
# 4. postmaster killed with SIGKILL, then restarted
# ---------------------------------------------------------------------
($bg, $pid) = stalled_publish('pick_5');
my $postmaster = $node->safe_psql('wf', 'SELECT pg_postmaster_start_time()');
my $pm_pid = $node->{_pid};
my @kids = server_children($pm_pid);
$node->kill9;
kill('KILL', @kids);
eval { $bg->quit; };
for (1 .. 100)
{
	last unless grep { -e "/proc/$_" } ($pm_pid, @kids);
	select(undef, undef, undef, 0.1);
}
ok(!(grep { -e "/proc/$_" } ($pm_pid, @kids)), 'the postmaster and its ' . scalar(@kids) . ' processes are gone');
$node->start;
isnt($node->safe_psql('wf', 'SELECT pg_postmaster_start_time()'), $postmaster, 'the server started again');
check_definitions(4, 'postmaster killed');
publish_next('pick_5', 5, 'postmaster killed');

# ---------------------------------------------------------------------
# the runs of version 1
# ---------------------------------------------------------------------
is($node->safe_psql('wf', $old_runs_sql),
	$old_runs,
	'the runs of version 1 and their branches are unchanged');
is( $node->safe_psql(
		'wf', q{SELECT count(*) FILTER (WHERE wf.complete_task(task_id, fence, '{}') = 'accepted') FROM test_leases}),
	'5',
	'the leases taken before the publishes are still good');
$node->safe_psql('wf', 'DROP TRIGGER test_stall ON wf.definitions');
$node->safe_psql(
	'wf', q{
CREATE FUNCTION test_drive() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT * FROM wf.claim_tasks('label_q', 'w', 100, '1 minute') LOOP
        PERFORM wf.complete_task(r.task_id, r.fence, '{}');
    END LOOP;
    FOR r IN SELECT * FROM wf.claim_tasks('bill_q', 'w', 100, '1 minute') LOOP
        PERFORM wf.complete_task(r.task_id, r.fence, '{}');
    END LOOP;
    RETURN (SELECT count(*) FROM wf.runs WHERE definition_name = 'order' AND definition_version = 1
                                          AND status <> 'completed' AND NOT input ? 'savepoint');
END
$$;
});
ok($node->poll_query_until('wf', 'SELECT test_drive()', '0'),
	'the five runs of version 1 complete');
is( $node->safe_psql(
		'wf', q{
SELECT count(*) FROM wf.events e JOIN wf.runs r USING (run_id)
JOIN wf.definitions d ON d.definition_id = r.definition_id
WHERE r.definition_name = 'order:ship:0' AND r.definition_version = 1 AND e.type = 'task_completed'
  AND e.step || ' pick_q' = ANY (d.task_queues)}),
	'5',
	'on version 1 of their branches (queue pick_q; a completed attempt is in the history, its row deleted)');
is( $node->safe_psql(
		'wf', q{SELECT count(*) FILTER (WHERE wf.verify_run(run_id)) || '/' || count(*) FROM wf.runs}),
	$node->safe_psql('wf', 'SELECT count(*) || \'/\' || count(*) FROM wf.runs'),
	'wf.verify_run holds for every run');

$node->stop;
done_testing();
