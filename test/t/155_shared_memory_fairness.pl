
# Copyright (c) 2026, wfengine developers
#
# Shared memory is shared fairly between databases (issue 29).
#
#  1. The notification relay: the engine worker of database t1 is stopped
#     (SIGSTOP) while t1 commits 3 x 1,000 run starts; a listener of
#     database t2 still hears every notification of t2's own runs and
#     queues (each database has a relay of its own), and no overflow.
#  2. t1's drops are counted (wf.worker_status().relay_dropped) for queue
#     and run notifications alike: one commit of 300 runs on 300 queues
#     into an empty relay of 256 drops exactly 600 - 256 = 344.  When t1's
#     worker runs again, t1's listener gets the overflow notice.
#  3. The start-rate buckets: 1,030 tenants of t1 with a slow start rate
#     owe tokens in more buckets than shared memory has (1,024); a tenant
#     of t2 with a rate of one start a minute still gets its bucket (taken
#     from t1, which holds the most) and its second start is refused.
#  4. A tenant made in t1 acts in t2 as it is; wf.create_tenant of it in t2
#     refuses and says so (tenants are roles of the whole cluster).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;    # (also: initdb from a template)
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('wf_fair');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
max_connections = 50
));
$node->start;

for my $db (qw(t1 t2))
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION wfengine');
	$node->safe_psql($db,
		q{SELECT wf.publish_definition('one', '{"steps": [{"name": "a", "queue": "rq"}]}')});
}

sub worker_pid
{
	my ($db) = @_;
	my $pid;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM wf.worker_status() WHERE database = '$db' AND pid IS NOT NULL")
	  or die "no worker for $db";
	return $node->safe_psql('postgres',
		"SELECT pid FROM wf.worker_status() WHERE database = '$db'");
}
# (wf.worker_status() needs the extension in the database it is called in)
$node->safe_psql('postgres', 'CREATE EXTENSION wfengine');
my $t1_worker = worker_pid('t1');
worker_pid('t2');

# the worker of t1 must never stay stopped, whatever happens below
my $stopped = 0;
END { kill 'CONT', $t1_worker if $stopped; }

my $psql = $node->installed_command('psql');

# a listener of $db on its run channel, its queue channel of rq and
# wf_overflow, until $until (SQL) holds; returns the IPC::Run handle and a
# ref to its output
sub listener
{
	my ($db, $until) = @_;
	my $runs = $node->safe_psql($db, "SELECT wf.channel('runs')");
	my $queue = $node->safe_psql($db, "SELECT wf.channel('queue', 'rq')");
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			$psql, '-XqAt', '-d', $node->connstr($db),
			'-c', qq{LISTEN "$runs"; LISTEN "$queue"; LISTEN wf_overflow},
			'-c', qq{DO \$\$ BEGIN
				WHILE NOT ($until) AND clock_timestamp() < now() + interval '3 minutes'
				LOOP PERFORM pg_sleep(0.05); END LOOP; END \$\$},
			'-c', 'SELECT pg_sleep(1)', '-c', 'SELECT 1'
		],
		'>', \$out, '2>', \$err);
	ok( $node->poll_query_until($db,
			"SELECT count(*) = 1 FROM pg_stat_activity WHERE datname = '$db' AND query LIKE 'DO \$\$ BEGIN%'"),
		"the listener of $db listens");
	return ($h, \$out, $runs, $queue);
}

# ---------------------------------------------------------------------
# 1. t1's worker stopped, t1 floods; t2 hears all of its own
# ---------------------------------------------------------------------
my ($l2, $out2, $runs2, $queue2) = listener('t2',
	q{(SELECT count(*) FROM wf.runs) >= 200});
my ($l1, $out1) = listener('t1',
	q{(SELECT count(*) FROM wf.runs) >= 3300 AND (SELECT count(*) FROM wf.runs) >= 0});

kill 'STOP', $t1_worker;
$stopped = 1;
for my $i (1 .. 3)
{
	$node->safe_psql('t1',
		"SELECT count(*) FROM wf.start_runs('one', (SELECT array_agg(jsonb_build_object('i', g)) FROM generate_series(1, 1000) g))"
	);
}
is( $node->safe_psql('postgres',
		"SELECT relay_dropped >= 3000 - 256 FROM wf.worker_status() WHERE database = 't1'"),
	't', "t1's notifications beyond its relay are dropped and counted");

# t2 meanwhile: 200 runs in 20 commits, each with a run and a queue notification
$node->safe_psql('t2',
	"SELECT count(*) FROM wf.start_runs('one', (SELECT array_agg(jsonb_build_object('i', g)) FROM generate_series(1, 10) g))"
) for 1 .. 20;
$l2->finish;
my %uniq = map { $_ => 1 } ($$out2 =~ /"run_id": "([0-9a-f-]+)", "kind": "started"/g);
is(scalar(keys %uniq), 200, "t2's listener hears every one of its 200 runs start while t1's relay is full");
like($$out2, qr/^Asynchronous notification "\Q$queue2\E"/m, 'and its queue notifications');
unlike($$out2, qr/wf_overflow/, 'and no overflow notice in t2');
is( $node->safe_psql('postgres',
		"SELECT relay_dropped FROM wf.worker_status() WHERE database = 't2'"),
	'0', 't2 dropped nothing');

# ---------------------------------------------------------------------
# 2. queue drops count too; the overflow notice after t1's worker resumes
# ---------------------------------------------------------------------
kill 'CONT', $t1_worker;
$stopped = 0;
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE datname = 't1' AND backend_type = 'wfengine worker' AND state = 'active'"),
	"t1's worker runs again");
# the listener of t1 ends when its condition holds: give it the runs
$node->safe_psql('t1',
	"SELECT count(*) FROM wf.start_runs('one', (SELECT array_agg(jsonb_build_object('i', g)) FROM generate_series(1, 300) g))"
);
$l1->finish;
like($$out1, qr/^Asynchronous notification "wf_overflow" with payload "\{"kind": "overflow"\}"/m,
	"t1's listener gets the overflow notice once its worker sends again");

# an empty relay (the worker has sent everything), then the worker stopped
# and one commit of 300 runs, each on a queue of its own: 600 notifications
$node->safe_psql('t1', q{
SELECT wf.publish_definition('q' || g, jsonb_build_object('steps',
  jsonb_build_array(jsonb_build_object('name', 'a', 'queue', 'q' || g)))) FROM generate_series(1, 300) g});
sleep 1;    # the relay of t1 is drained within milliseconds
my $before = $node->safe_psql('postgres',
	"SELECT relay_dropped FROM wf.worker_status() WHERE database = 't1'");
kill 'STOP', $t1_worker;
$stopped = 1;
$node->safe_psql('t1', q{
DO $$ BEGIN PERFORM wf.start_run('q' || g) FROM generate_series(1, 300) g; END $$});
is( $node->safe_psql('postgres',
		"SELECT relay_dropped - $before FROM wf.worker_status() WHERE database = 't1'"),
	'344', 'queue and run notifications that do not fit are counted alike (600 - 256)');
kill 'CONT', $t1_worker;
$stopped = 0;

# ---------------------------------------------------------------------
# 3. start-rate buckets: a database cannot take them all
# ---------------------------------------------------------------------
my $n = 1030;
my $setup = '';
for my $i (1 .. $n)
{
	$setup .= "SELECT wf.create_tenant('r$i');\n"
	  . "CREATE ROLE r${i}_admin LOGIN IN ROLE wfengine_admin, wf_tenant_r$i;\n"
	  . "SELECT wf.set_tenant_policy('r$i', '{\"max_starts_per_second\": 0.001}');\n";
}
$node->safe_psql('t1', $setup);
my $starts = '';
for my $i (1 .. $n)
{
	$starts .= "SET SESSION AUTHORIZATION r${i}_admin;\n"
	  . q{SELECT wf.publish_definition('one', '{"steps": [{"name": "a", "queue": "rq"}]}');} . "\n"
	  . "SELECT wf.start_run('one') IS NOT NULL;\nRESET SESSION AUTHORIZATION;\n";
}
my ($ret, $sout, $serr) = $node->psql('t1', $starts, on_error_stop => 1);
is($ret, 0, "$n tenants of t1 each start a run under a slow rate (each owes a token for 1,000 s)")
  or diag($serr);

$node->safe_psql('t2', q{
SELECT wf.create_tenant('late');
CREATE ROLE late_admin LOGIN IN ROLE wfengine_admin, wf_tenant_late;
SELECT wf.set_tenant_policy('late', '{"max_starts_per_second": 0.0167, "start_burst": 1}');
});
$starts = "SET SESSION AUTHORIZATION late_admin;\n"
  . q{SELECT wf.publish_definition('one', '{"steps": [{"name": "a", "queue": "rq"}]}');} . "\n"
  . "SELECT wf.start_run('one') IS NOT NULL;\n";
($ret, $sout, $serr) = $node->psql('t2', $starts, on_error_stop => 1);
is($ret, 0, "a tenant of t2 starts its first run") or diag($serr);
($ret, $sout, $serr) = $node->psql('t2',
	"SET SESSION AUTHORIZATION late_admin; SELECT wf.start_run('one') IS NOT NULL;");
like($serr, qr/tenant "late" starts runs faster than its limit/,
	'and its second is refused: its rate holds though every bucket was owed');

# ---------------------------------------------------------------------
# 4. a tenant of the cluster acts in a second database as it is (issue 32)
# ---------------------------------------------------------------------
($ret, $sout, $serr) = $node->psql('t2', "SELECT wf.create_tenant('r1')");
like($serr, qr/tenant "r1" exists already.*HINT:  A tenant acts in every database of the cluster/s,
	'wf.create_tenant in a second database says the tenant is ready to use there');
is( $node->safe_psql('t2', q{SET SESSION AUTHORIZATION r1_admin;
SELECT wf.current_tenant();
SELECT wf.publish_definition('one', '{"steps": [{"name": "a", "queue": "rq"}]}');
SELECT wf.start_run('one') IS NOT NULL}),
	"r1\n1\nt", 'and its login acts in the second database with nothing set up there');

$node->stop;
done_testing();
