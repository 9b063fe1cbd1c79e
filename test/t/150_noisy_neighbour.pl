
# Copyright (c) 2026, wfengine developers
#
# No tenant can stall another (issue 29): the noisy-neighbour suite.
#
# Tenant B of database n1 runs a steady workload for the whole test
# (test/noisy/tenant_b.py): a 100 ms sleep falls due every 100 ms, a task
# every 100 ms for a waiting claim, a task every 500 ms claimed with a 1 s
# lease and never reported (the engine expires it), and a listener on B's
# run channel and wf_overflow.  Meanwhile tenant A of n1, and tenant X of
# database n2 of the same cluster, do one thing per phase:
#
#   baseline          nothing
#   idle_<call>       a session of A calls <call> on a run of its own that
#                     has something falling due (a sleep, a start-to-close
#                     timeout, an approval's expiry) and then stays idle in
#                     its transaction to the end of the phase: signal,
#                     send_event, decide, pause_run, cancel_run,
#                     complete_task, heartbeat, complete_tasks (a batch)
#   storm             A starts 10,000 runs (wf.start_runs, batches of 1,000)
#   buffered          A sends 100,000 events to keys no run declared
#   flood             A commits 50,000 notifications of its own (pg_notify)
#                     and X starts 3,000 runs in n2
#   payloads          A starts 100 runs with inputs of the largest size
#                     (wfengine.max_payload_size)
#   n2_idle_signal    X holds a run of n2 as A did in idle_signal
#   n2_storm          X starts 10,000 runs in n2
#
# For every phase: B's timers fire with a lag under 250 ms at p99, B's
# waiting claims get their task within 250 ms of its start at p99, B's
# leases expire within 250 ms of their end at p99, and B's listener hears
# of every run B started (or gets an overflow notice).  At the end every
# run of B has ended as it should and verifies, and A's held runs moved on
# once their transactions ended.  The figures of each phase are printed
# (diag) and docs/reliability.md holds them.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;    # (also: initdb from a template)
use IPC::Run;
use JSON::PP;
use Time::HiRes qw(time sleep);

my $PHASE = 3;    # seconds each idle-transaction phase holds

my $node = PostgreSQL::Test::Cluster->new('wf_noisy');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
max_connections = 60
wfengine.approval_key = 'cd0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd'
));
$node->start;

my $psql = $node->installed_command('psql');
my $roles = 'wfengine_app, wfengine_worker, wfengine_approver, wfengine_operator, wfengine_admin';
for my $db (qw(n1 n2))
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION wfengine');
}
$node->safe_psql('n1', qq{
SELECT wf.create_tenant('a');
SELECT wf.create_tenant('b');
CREATE ROLE a_all LOGIN IN ROLE $roles, wf_tenant_a;
CREATE ROLE b_all LOGIN IN ROLE $roles, wf_tenant_b;
SELECT wf.set_tenant_policy('a', '{"max_buffered_events": 200000}');
});
$node->safe_psql('n2', qq{
SELECT wf.create_tenant('x');
CREATE ROLE x_all LOGIN IN ROLE $roles, wf_tenant_x;
});

# runs SQL as a login of a tenant
sub as
{
	my ($db, $login, $sql) = @_;
	return $node->safe_psql($db, "SET SESSION AUTHORIZATION $login; $sql");
}

as('n1', 'b_all', q{
SELECT wf.publish_definition('b_nap', '{"steps": [{"name": "nap", "type": "sleep", "duration": "100ms"}]}');
SELECT wf.publish_definition('b_task', '{"steps": [{"name": "work", "queue": "b_q"}]}');
SELECT wf.publish_definition('b_lease', '{"steps": [{"name": "work", "queue": "b_l"}]}');
});
my $a_defs = q{
SELECT wf.publish_definition('a_nap', '{"steps": [{"name": "nap", "type": "sleep", "duration": "400ms"},
  {"name": "after", "queue": "a_after"}]}');
SELECT wf.publish_definition('a_corr', '{"correlation": {"k": "$.input.k"}, "steps": [
  {"name": "nap", "type": "sleep", "duration": "400ms"},
  {"name": "paid", "type": "wait_event", "event": "paid"}, {"name": "after", "queue": "a_after"}]}');
SELECT wf.publish_definition('a_task', '{"steps": [{"name": "work", "queue": "a_q",
  "timeout": {"start_to_close": "400ms"}, "retry": {"max_attempts": 1}}]}');
SELECT wf.publish_definition('a_appr', '{"steps": [{"name": "ok", "type": "approval", "approvers": ["al", "bo"],
  "notify_queue": "a_notify", "expires": "600ms"}, {"name": "after", "queue": "a_after"}]}');
SELECT wf.publish_definition('a_storm', '{"steps": [{"name": "work", "queue": "a_storm"}]}');
};
as('n1', 'a_all', $a_defs);
as('n2', 'x_all', $a_defs);

# ---------------------------------------------------------------------
# the phases
# ---------------------------------------------------------------------
my @phases;    # [name, start, end]

# a session of $login in $db that runs $call in an open transaction and
# holds it until the returned handle is finished
sub hold
{
	my ($db, $login, $call) = @_;
	my ($o, $e) = ('', '');
	my $h = IPC::Run::start(
		[
			$psql, '-XqAt', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($db),
			'-c', "SET SESSION AUTHORIZATION $login",
			'-c', 'BEGIN', '-c', $call,
			'-c', "SELECT pg_sleep($PHASE)", '-c', 'COMMIT'
		],
		'>', \$o, '2>', \$e);
	return { h => $h, out => \$o, err => \$e };
}

# a run of A (or X) with something due within the phase, and the call
# that the idle transaction makes on it
sub prepare_idle
{
	my ($db, $login, $what) = @_;
	if ($what eq 'signal' || $what eq 'pause_run' || $what eq 'cancel_run')
	{
		my $r = as($db, $login, "SELECT wf.start_run('a_nap')");
		return $r, {
			signal => "SELECT wf.signal('$r', 'hold', '{}')",
			pause_run => "SELECT wf.pause_run('$r', 'noisy')",
			cancel_run => "SELECT wf.cancel_run('$r', 'noisy')" }->{$what};
	}
	if ($what eq 'send_event')
	{
		my $k = "k" . int(rand(1e9));
		my $r = as($db, $login, "SELECT wf.start_run('a_corr', '{\"k\": \"$k\"}')");
		return $r, "SELECT count(*) FROM wf.send_event('k:$k', 'other', '{}', 'ev-$k')";
	}
	if ($what eq 'decide')
	{
		my $r = as($db, $login, "SELECT wf.start_run('a_appr')");
		my $tok = as($db, $login, q{
SELECT token FROM (SELECT task_id, fence FROM wf.claim_tasks('a_notify', 'mailer', 1)) c,
  LATERAL wf.issue_approval_tokens(c.task_id, c.fence) t WHERE approver = 'al' AND decision = 'approve'});
		return $r, "SELECT wf.decide('$tok', 'approve', 'al')";
	}
	# complete_task, heartbeat, complete_tasks: an attempt whose
	# start-to-close timeout (400 ms) falls within the phase
	my $r = as($db, $login, "SELECT wf.start_run('a_task')");
	my ($t, $f) = split /\|/, as($db, $login, q{SELECT task_id, fence FROM wf.claim_tasks('a_q', 'aw', 1, '1 hour')});
	return $r, {
		complete_task => "SELECT wf.complete_task($t, $f, '{}')",
		heartbeat => "SELECT wf.heartbeat($t, $f, '{}')",
		complete_tasks =>
		  "SELECT count(*) FROM wf.complete_tasks(ARRAY[$t]::bigint[], ARRAY[$f]::bigint[], ARRAY['{}']::jsonb[])"
	}->{$what};
}

my %held;    # phase -> [db, run]

sub idle_phase
{
	my ($name, $db, $login, $what) = @_;
	my ($run, $call) = prepare_idle($db, $login, $what);
	my $start = time;
	my $h = hold($db, $login, $call);
	$h->{h}->finish;
	is(${ $h->{err} }, '', "$name: the idle transaction ran");
	push @phases, [ $name, $start, time ];
	$held{$name} = [ $db, $run ];
}

sub phase
{
	my ($name, $code) = @_;
	my $start = time;
	$code->();
	my $took = time - $start;
	sleep(2) if $took < 2;    # at least two seconds of B's workload
	push @phases, [ $name, $start, time ];
}

# B's workload, until it is told to stop (SIGTERM), 300 s at most
my $total = 300;
my $python = -x '/usr/bin/python3' ? '/usr/bin/python3' : 'python3';
my $outfile = $node->basedir . '/tenant_b.json';
my ($bo, $be) = ('', '');
my $driver = IPC::Run::start(
	[
		$python, 'test/noisy/tenant_b.py',
		$node->connstr('n1') . ' user=b_all', $total, $outfile
	],
	'>', \$bo, '2>', \$be);
sleep(2);    # B's timers and claims under way

phase('baseline', sub { sleep 3 });
idle_phase("idle_$_", 'n1', 'a_all', $_)
  for qw(signal send_event decide pause_run cancel_run complete_task heartbeat complete_tasks);
phase('storm', sub {
	as('n1', 'a_all',
		"SELECT count(*) FROM wf.start_runs('a_storm', (SELECT array_agg('{}'::jsonb) FROM generate_series(1, 1000)))")
	  for 1 .. 10;
});
phase('buffered', sub {
	# in transactions of 100 sends: each correlation key a transaction
	# sends to holds a lock of PostgreSQL's shared lock table until it
	# commits (see docs/tenancy.md, Shared resources)
	as('n1', 'a_all', q{
DO $$ BEGIN
  FOR i IN 0 .. 999 LOOP
    PERFORM count(*) FROM generate_series(1, 100) g, wf.send_event('nobody:' || (i * 100 + g), 'e', '{}');
    COMMIT;
  END LOOP;
END $$});
	is($node->safe_psql('n1', "SELECT count(*) FROM wf.buffered_events WHERE tenant_id = 'a'"),
		'100000', 'buffered: A keeps 100,000 events');
});
phase('flood', sub {
	my $batch =
	  "SELECT count(*) FROM wf.start_runs('a_storm', (SELECT array_agg('{}'::jsonb) FROM generate_series(1, 1000)))";
	my $x = IPC::Run::start(
		[
			$psql, '-XqAt', '-d', $node->connstr('n2'), '-c', 'SET SESSION AUTHORIZATION x_all',
			map { ('-c', $batch) } 1 .. 3
		],
		'>', \my $xo, '2>', \my $xe);
	as('n1', 'a_all',
		"SELECT count(pg_notify('a_noise', repeat('n', 100))) FROM generate_series(1, 10000)")
	  for 1 .. 5;
	$x->finish;
});
phase('payloads', sub {
	my $max = $node->safe_psql('n1', "SELECT pg_size_bytes(current_setting('wfengine.max_payload_size'))");
	# an object whose jsonb form is just under the limit
	my $len = $max - 64;
	as('n1', 'a_all',
		"SELECT count(wf.start_run('a_storm', jsonb_build_object('blob', repeat('p', $len)))) FROM generate_series(1, 10)")
	  for 1 .. 10;
});
idle_phase('n2_idle_signal', 'n2', 'x_all', 'signal');
phase('n2_storm', sub {
	as('n2', 'x_all',
		"SELECT count(*) FROM wf.start_runs('a_storm', (SELECT array_agg('{}'::jsonb) FROM generate_series(1, 1000)))")
	  for 1 .. 10;
});
my $end = time;

# B's workload a little longer (the last phase's timers fire), then stopped
sleep(2);
$driver->signal('TERM');
$driver->finish;
ok(-s $outfile, "B's workload wrote its figures") or diag($be);
my $bw = decode_json(do { local (@ARGV, $/) = ($outfile); <> });
is_deeply($bw->{errors}, [], "B's workload met no error");

# ---------------------------------------------------------------------
# the figures
# ---------------------------------------------------------------------
sub p99
{
	my @v = sort { $a <=> $b } @_;
	return 0 unless @v;
	return $v[ int(0.99 * $#v + 0.5) ];
}

sub fmt { sprintf('%.1f', 1000 * $_[0]) }

my @timers = map { [ split /\|/ ] } split /\n/, $node->safe_psql('n1', q{
SELECT extract(epoch FROM due_at), extract(epoch FROM fired_at - due_at)
FROM wf.timers WHERE tenant_id = 'b' AND kind = 'sleep' AND status = 'fired'});
my @leases = map { [ split /\|/ ] } split /\n/, $node->safe_psql('n1', q{
SELECT extract(epoch FROM t.claimed_at + t.lease),
       extract(epoch FROM e.created_at - (t.claimed_at + t.lease))
FROM wf.tasks t JOIN wf.events e ON e.run_id = t.run_id AND e.type = 'lease_expired'
WHERE t.tenant_id = 'b' AND t.queue = 'b_l'});
my %claimed = %{ $bw->{claimed} };
my %started = %{ $bw->{task_runs} };
my %heard;
$heard{ $_->[0] }{ $_->[1] } = 1 for @{ $bw->{heard} };
my @b_runs = (@{ $bw->{nap_runs} }, keys %started, @{ $bw->{lease_runs} });

diag(sprintf('%-16s %8s %8s %8s %8s %8s %8s %6s', 'phase', 'timers', 'lag p99', 'lag max',
	'wake p99', 'wake max', 'lease p99', 'heard'));
for my $p (@phases)
{
	my ($name, $s, $e) = @$p;
	my @lag = map { $_->[1] } grep { $_->[0] >= $s && $_->[0] < $e } @timers;
	my @wake = map { $claimed{$_} - $started{$_} }
	  grep { defined $claimed{$_} && $started{$_} >= $s && $started{$_} < $e } keys %started;
	my @lease = map { $_->[1] } grep { $_->[0] >= $s && $_->[0] < $e } @leases;
	my @in = grep { defined $started{$_} && $started{$_} >= $s && $started{$_} < $e } keys %started;
	my $missed = grep { !$heard{$_}{started} } @in;
	diag(sprintf('%-16s %8d %8s %8s %8s %8s %8s %6s', $name, scalar(@lag), fmt(p99(@lag)),
		fmt((sort { $b <=> $a } @lag)[0] // 0),
		fmt(p99(@wake)), fmt((sort { $b <=> $a } @wake)[0] // 0), fmt(p99(@lease)),
		(@in - $missed) . '/' . scalar(@in)));
	ok(@lag >= 10, "$name: B's timers fell due meanwhile (" . scalar(@lag) . ')');
	cmp_ok(p99(@lag), '<', 0.25, "$name: B's timers fire with a lag under 250 ms at p99");
	cmp_ok(p99(@wake), '<', 0.25, "$name: B's waiting claims get their tasks within 250 ms at p99");
	cmp_ok(p99(@lease), '<', 0.25, "$name: B's leases expire within 250 ms at p99") if @lease;
	ok($missed == 0 || @{ $bw->{overflow} },
		"$name: B's listener hears every run B started ($missed missed, " . scalar(@{ $bw->{overflow} }) . ' overflow notices)');
}

# ---------------------------------------------------------------------
# nothing of B's is lost, and A's held runs moved on
# ---------------------------------------------------------------------
my $ids = join(',', map { "'$_'" } @b_runs);
ok( $node->poll_query_until('n1', qq{
SELECT count(*) FILTER (WHERE d.name = 'b_nap' AND r.status <> 'completed')
     + count(*) FILTER (WHERE d.name = 'b_task' AND r.status <> 'completed') = 0
FROM wf.runs r JOIN wf.definitions d USING (definition_id) WHERE r.run_id IN ($ids)}),
	'every nap and every task run of B completed');
is( $node->safe_psql('n1', qq{
SELECT count(*) FROM wf.runs r WHERE r.run_id IN ($ids)}),
	scalar(@b_runs), 'every run B started is there');
is( as('n1', 'b_all', q{
SELECT count(*) FILTER (WHERE NOT wf.verify_run(run_id)) FROM wf.runs}),
	'0', "every run of B verifies");
for my $name (sort keys %held)
{
	my ($db, $run) = @{ $held{$name} };
	ok( $node->poll_query_until($db, qq{
SELECT (SELECT count(*) FROM wf.timers WHERE run_id = '$run' AND status = 'pending'
        AND fire_at <= clock_timestamp() - interval '2 seconds')
     + (SELECT count(*) FROM wf.tasks WHERE run_id = '$run' AND status IN ('ready', 'leased')
        AND deadline_at <= clock_timestamp() - interval '2 seconds') = 0}),
		"$name: A's held run has nothing overdue once its transaction ended");
}
is( $node->safe_psql('postgres', q{SELECT 1}), '1', 'the server is up');

$node->stop;
done_testing();
