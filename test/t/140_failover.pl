
# Copyright (c) 2026, wfengine developers

# Automatic failover with pg_auto_failover (issue 15): a monitor, a primary
# and a synchronous standby, each run by its own `pg_autoctl run`; the
# primary dies (kill -9 of its postmaster, its backends and its pg_autoctl
# keeper, so that nothing restarts it) under a steady workload, and the
# monitor promotes the standby.  test/t/065_fence_failover.pl is the same
# question with a manual promotion of a standby that missed the last claims.
#
#  1. The formation: `pg_autoctl create monitor`, then `create postgres` for
#     n1 (primary) and n2 (standby, pg_basebackup'd by pg_autoctl), Unix
#     sockets in one directory, TCP on localhost, --auth trust, --no-ssl;
#     wfengine and pg_cron preloaded on the data nodes, the engine worker
#     on.  The monitor's health checks and demote timeout are shortened so
#     that the failover takes seconds (production keeps the defaults).
#     Replication is synchronous: synchronous_standby_names = 'ANY 1
#     (pgautofailover_standby_2)', and n2 is a quorum standby.
#  2. Two worker loops (perl, one psql per call, each connecting with
#     `host=S,S port=P1,P2 target_session_attrs=read-write`), and a third
#     through a router (wfengine_router, one shard s1 whose connection
#     string is that multi-host string; issue 30), start runs of
#     a definition with three task steps and a 2 s sleep step, claim their
#     tasks with 5 s leases and complete them, and log every call the
#     server acknowledged: each run id started, each claim (task, fence),
#     each completion and its verdict.
#  3. Three single-task runs on another queue, which no loop serves: C is
#     claimed (committed) with a 1 hour lease; D is claimed (committed) with
#     a 3 s lease just before the kill, so its lease expires only after the
#     primary is gone; U is claimed inside a transaction that is still open
#     when the primary dies (the client saw a fence that never committed).
#  4. n1 dies with runs asleep; the monitor promotes n2 (a new timeline).
#  5. On n2: U's fence was never issued; D's lease expired there (a task
#     deadline fired by n2's engine worker) and the task is delivered again;
#     a new claim of U and D hands out fences of the new timeline; then U's
#     and D's old results are stale, C's result (a claim committed on n1
#     and replicated synchronously) is accepted, and so are the new
#     holders'.  Sleep timers set on n1 fire on n2; the loops carry on on n2
#     through their multi-host strings; every run completes.
#  6. Nothing acknowledged is lost: every acknowledged start is a run with
#     its run_started event, every acknowledged 'accepted' completion is a
#     task_completed event with that task and fence, every acknowledged
#     claim's fence is at most the task's fence on n2; every run verifies.
#  7. n1's keeper is started again: pg_autoctl rewinds n1 and it rejoins as
#     n2's synchronous standby with the same history.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;

# pg_auto_failover: Debian's postgresql-15-auto-failover (the extension of
# the monitor) and pg-auto-failover-cli (pg_autoctl); test/scripts/deps.sh
my ($autoctl) = grep { -x } map { "$_/pg_autoctl" } split /:/, $ENV{PATH};
plan skip_all => 'pg_autoctl is not installed (postgresql-15-auto-failover)' unless $autoctl;
my $bindir = `pg_config --bindir`;
chomp $bindir;
my $sharedir = `pg_config --sharedir`;
chomp $sharedir;
plan skip_all => "pg_auto_failover's extension is not installed ($sharedir/extension/pgautofailover.control)"
  unless -f "$sharedir/extension/pgautofailover.control";

my $t_start = time;
my $base = PostgreSQL::Test::Utils::tempdir;
my $sock = $PostgreSQL::Test::Cluster::test_pghost;    # a short directory, the nodes' sockets
my $logdir = $PostgreSQL::Test::Utils::log_path;
my $user = getpwuid($<);

# pg_autoctl keeps its configuration and state under the XDG directories
$ENV{XDG_CONFIG_HOME} = "$base/config";
$ENV{XDG_DATA_HOME} = "$base/share";
$ENV{XDG_RUNTIME_DIR} = "$base/run";
mkdir "$base/run" or die "mkdir $base/run: $!";
$ENV{PGHOST} = $sock;
delete $ENV{PGPORT};
$ENV{PGUSER} = $user;

my %port = map { $_ => PostgreSQL::Test::Cluster::get_free_port() } qw(monitor n1 n2);
my %pgdata = map { $_ => "$base/$_" } qw(monitor n1 n2);
my %keeper;    # node -> IPC::Run harness of its `pg_autoctl run`

# psql on a node of the formation (Unix socket), unaligned: (ok, stdout, stderr)
sub try_node
{
	my ($node, $sql, $db) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[ "$bindir/psql", '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1',
			'-h', $sock, '-p', $port{$node}, '-d', $db // 'wf', '-c', $sql ],
		'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	chomp $out;
	return ($ok, $out, $err);
}

# the same, returning stdout; dies on error
sub q_node
{
	my ($node, $sql, $db) = @_;
	my ($ok, $out, $err) = try_node($node, $sql, $db);
	die "psql on $node failed: $sql\n$err" unless $ok;
	return $out;
}

# poll(what, seconds, sub): until the sub returns true; false after the time
sub poll
{
	my ($what, $secs, $cond) = @_;
	my $until = time + $secs;
	while (time < $until)
	{
		my $r = eval { $cond->() };
		return 1 if $r;
		usleep(100_000);
	}
	diag("timed out after $secs s waiting for $what");
	return 0;
}

# the monitor's view: "name:reported/assigned" for every node
sub formation_state
{
	return q_node('monitor',
		q{SELECT string_agg(nodename || ':' || reportedstate || '/' || goalstate, ' ' ORDER BY nodename)
		  FROM pgautofailover.node}, 'pg_auto_failover');
}

sub start_keeper
{
	my ($node) = @_;
	$keeper{$node} = IPC::Run::start(
		[ $autoctl, 'run', '--pgdata', $pgdata{$node} ],
		'<', \undef, '>>', "$logdir/140_autoctl_$node.log", '2>&1');
}

# stop every process this test started, also when it dies half-way
END
{
	for my $node (sort keys %keeper)
	{
		eval { $keeper{$node}->kill_kill(grace => 10) };
	}
	for my $node (sort keys %pgdata)
	{
		next unless -f "$pgdata{$node}/postmaster.pid";
		my ($pid) = split /\n/, PostgreSQL::Test::Utils::slurp_file("$pgdata{$node}/postmaster.pid");
		system("$bindir/pg_ctl", '-D', $pgdata{$node}, '-m', 'immediate', 'stop') if kill(0, $pid);
	}
}

# ---------------------------------------------------------------------
# 1. the formation
# ---------------------------------------------------------------------
PostgreSQL::Test::Utils::system_or_bail("$bindir/initdb", '-D', $pgdata{monitor}, '-A', 'trust',
	'--no-sync');
PostgreSQL::Test::Utils::append_to_file("$pgdata{monitor}/postgresql.conf", qq(
unix_socket_directories = '$sock'
shared_buffers = '32MB'
# notice a dead primary in about 2 s and do not wait 30 s for it to demote
pgautofailover.health_check_period = 1000
pgautofailover.health_check_timeout = 1000
pgautofailover.health_check_max_retries = 1
pgautofailover.health_check_retry_delay = 500
pgautofailover.node_considered_unhealthy_timeout = 2000
pgautofailover.primary_demote_timeout = 3000
));
PostgreSQL::Test::Utils::system_or_bail($autoctl, 'create', 'monitor', '--pgdata', $pgdata{monitor},
	'--pgport', $port{monitor}, '--pgctl', "$bindir/pg_ctl", '--hostname', 'localhost',
	'--auth', 'trust', '--no-ssl');
# TCP on the loopback interface only (pg_autoctl starts its servers with -h)
PostgreSQL::Test::Utils::system_or_bail($autoctl, 'config', 'set', '--pgdata', $pgdata{monitor},
	'postgresql.listen_addresses', 'localhost');
start_keeper('monitor');
ok(poll('the monitor', 30, sub { q_node('monitor', 'SELECT 1', 'pg_auto_failover') eq '1' }),
	'the monitor runs');
my $monitor_uri = "postgres://autoctl_node\@localhost:$port{monitor}/pg_auto_failover?sslmode=disable";

# n1's data directory is made here, so that its settings come after the
# include of postgresql-auto-failover.conf (pg_autoctl's, at the top) and
# win; n2 gets them with pg_autoctl's base backup
PostgreSQL::Test::Utils::system_or_bail("$bindir/initdb", '-D', $pgdata{n1}, '-A', 'trust',
	'--no-sync');
PostgreSQL::Test::Utils::append_to_file("$pgdata{n1}/postgresql.conf", qq(
unix_socket_directories = '$sock'
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
max_worker_processes = 16
wfengine.enabled = on
wfengine.naptime = '1s'
wfengine.approval_key = 'cd0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd'
shared_buffers = '64MB'
wal_keep_size = '256MB'
));

sub create_node
{
	my ($node) = @_;
	PostgreSQL::Test::Utils::system_or_bail($autoctl, 'create', 'postgres', '--pgdata', $pgdata{$node},
		'--pgport', $port{$node}, '--pghost', $sock, '--pgctl', "$bindir/pg_ctl",
		'--username', $user, '--hostname', 'localhost', '--listen', 'localhost', '--name', $node,
		'--monitor', $monitor_uri, '--auth', 'trust', '--no-ssl');
	start_keeper($node);
}
create_node('n1');
ok(poll('n1 single', 30, sub { formation_state() eq 'n1:single/single' }), 'n1 is a single primary');
create_node('n2');
ok( poll('n1 primary, n2 secondary', 60,
		sub { formation_state() eq 'n1:primary/primary n2:secondary/secondary' }),
	'n1 is primary and n2 its secondary');
my $old_tli = q_node('n1', 'SELECT timeline_id FROM pg_control_checkpoint()', 'postgres');
note(sprintf('formation up in %.1f s', time - $t_start));

# synchronous: a commit on n1 is acknowledged once n2 has it
is(q_node('n1', 'SHOW synchronous_standby_names', 'postgres'),
	'ANY 1 (pgautofailover_standby_2)', 'n1 commits synchronously to its standby');
ok( poll('a quorum standby', 30,
		sub { q_node('n1', 'SELECT string_agg(sync_state, \',\') FROM pg_stat_replication', 'postgres') eq 'quorum' }),
	'n2 streams as a quorum standby');
is(q_node('n2', 'SELECT pg_is_in_recovery()', 'postgres'), 't', 'n2 is a standby');

q_node('n1', 'CREATE DATABASE wf', 'postgres');
q_node('n1', 'CREATE EXTENSION wfengine');
q_node('n1', q{
SELECT wf.publish_definition('flow', '{"steps": [
  {"name": "a", "queue": "work"},
  {"name": "nap", "type": "sleep", "duration": "2s"},
  {"name": "b", "queue": "work"},
  {"name": "c", "queue": "work"}]}');
SELECT wf.publish_definition('held', '{"steps": [{"name": "h", "queue": "held"}]}');
SELECT wf.publish_definition('longnap', '{"steps": [{"name": "z", "type": "sleep", "duration": "6s"}]}');
});
my @held = split /\n/, q_node('n1',
	q{SELECT wf.start_run('held', jsonb_build_object('n', n)) FROM generate_series(1, 3) n ORDER BY n});
is(scalar(@held), 3, 'three runs wait on queue held');
ok(poll('the engine worker on n1', 30, sub { q_node('n1', 'SELECT count(*) FROM wf.worker_status()') >= 1 }),
	'n1 runs an engine worker');

# ---------------------------------------------------------------------
# 2. the worker loops
# ---------------------------------------------------------------------
my $loop_code = <<'EOC';
use strict;
use warnings;
use Time::HiRes qw(usleep);
my ($psql, $connstr, $name, $log, $stop_starting, $stop, $max_runs) = @ARGV;
open(my $lf, '>>', $log) or die "$log: $!";
# the errors of every call, with their SQLSTATE (VERBOSITY verbose)
open(STDERR, '>>', "$log.err") or die "$log.err: $!";
$lf->autoflush(1);
# one call, one connection (libpq picks the read-write host); returns the
# output lines, or undef when the call was not acknowledged
sub call
{
	my ($sql) = @_;
	open(my $fh, '-|', 'timeout', '20', $psql, '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose',
		'-d', $connstr, '-c', $sql) or return undef;
	my @out = <$fh>;
	close $fh;
	if ($? != 0) { print $lf "fail\n"; return undef; }
	chomp @out;
	return \@out;
}
my $started = 0;
until (-e $stop)
{
	my $busy = 0;
	if (!-e $stop_starting && $started < $max_runs)
	{
		my $r = call("SELECT wf.start_run('flow', jsonb_build_object('by', '$name', 'n', $started))"
			  . " || ' ' || current_setting('port')");
		if ($r && @$r == 1) { print $lf "start $r->[0]\n"; $started++; $busy = 1; }
	}
	my $c = call("SELECT task_id || ' ' || fence || ' ' || current_setting('port')"
		  . " FROM wf.claim_tasks('work', '$name', 8, '5 seconds')");
	if (!$c) { usleep(200_000); next; }
	for my $row (@$c)
	{
		print $lf "claim $row\n";
		my ($task, $fence) = split / /, $row;
		my $d = call("SELECT wf.complete_task($task, $fence, '{\"by\": \"$name\"}')"
			  . " || ' ' || current_setting('port')");
		print $lf "complete $task $fence $d->[0]\n" if $d && @$d == 1;
		$busy = 1;
	}
	usleep(50_000) unless $busy;
}
EOC
my $connstr = "host=$sock,$sock port=$port{n1},$port{n2} dbname=wf user=$user"
  . " target_session_attrs=read-write connect_timeout=2";

# a router in front of the formation: one shard, the multi-host string
# (wfrouter.configure configures the shard on n1 through it)
my $router = PostgreSQL::Test::Cluster->new('failover_router');
$router->init;
$router->start;
$router->safe_psql('postgres', 'CREATE DATABASE wfengine_router');
$router->safe_psql('wfengine_router', 'CREATE EXTENSION wfengine_router CASCADE');
$router->safe_psql('wfengine_router', qq{SELECT wfrouter.configure('{"s1": "host=$sock,$sock port=$port{n1},$port{n2} dbname=wf target_session_attrs=read-write connect_timeout=2"}', 64)});
my $router_connstr = sprintf('host=%s port=%d dbname=wfengine_router user=%s', $router->host, $router->port, $user);
is($router->safe_psql('wfengine_router', "SELECT wf.run_status('$held[0]')", extra_params => [ '-U', $user ]),
	'running', 'the router reads a run on the formation\'s primary');

my %loop;
my %via = (w1 => $connstr, w2 => $connstr, w3 => $router_connstr);
for my $w (qw(w1 w2 w3))
{
	$loop{$w} = IPC::Run::start(
		[ $^X, '-e', $loop_code, "$bindir/psql", $via{$w}, $w, "$base/$w.log",
			"$base/stop_starting", "$base/stop", 300 ],
		'<', \undef, '>>', "$logdir/140_loop_$w.log", '2>&1');
}

# what the loops were acknowledged: lists of [fields]
sub acked
{
	my ($kind) = @_;
	my @rows;
	for my $w (qw(w1 w2 w3))
	{
		open(my $fh, '<', "$base/$w.log") or next;
		while (<$fh>)
		{
			chomp;
			my ($k, @f) = split / /;
			push @rows, \@f if $k eq $kind && @f >= 1;
		}
		close $fh;
	}
	return @rows;
}

ok( poll('the loops at work on n1', 60, sub {
		(grep { $_->[2] eq 'accepted' && $_->[3] eq $port{n1} } acked('complete')) >= 40
		  && q_node('n1', q{SELECT count(*) FROM wf.timers WHERE kind = 'sleep' AND status = 'pending'}) >= 3 }),
	'the loops complete tasks on n1, and runs are asleep');

# ---------------------------------------------------------------------
# 3. three leases of queue held
# ---------------------------------------------------------------------
my ($c_task, $c_fence) = split / /, q_node('n1',
	q{SELECT task_id || ' ' || fence FROM wf.claim_tasks('held', 'w-committed', 1, '1 hour')});

my ($u_in, $u_out, $u_err) = ('', '', '');
my $u_session = IPC::Run::start(
	[ "$bindir/psql", '-X', '-A', '-t', '-q', '-h', $sock, '-p', $port{n1}, '-d', 'wf' ],
	'<', \$u_in, '>', \$u_out, '2>', \$u_err);
$u_in .= "BEGIN;\nSELECT 'claimed ' || task_id || ' ' || fence"
  . " FROM wf.claim_tasks('held', 'w-uncommitted', 1, '1 hour');\n";
ok( pump_until($u_session, IPC::Run::timer(30), \$u_out, qr/claimed \d+ \d+\n/),
	'a claim in a transaction that is still open on n1');
my ($u_task, $u_fence) = $u_out =~ /claimed (\d+) (\d+)/;

# runs asleep (the loops keep starting runs; on a loaded machine the ones
# seen asleep above may all have woken since): waited for before D's short
# lease starts, so that the wait cannot let it expire on n1
my $asleep_q = q{SELECT timer_id FROM wf.timers WHERE kind = 'sleep' AND status = 'pending'};
my @sleeping;
ok(poll('a run asleep on n1', 30, sub { @sleeping = split /\n/, q_node('n1', $asleep_q); @sleeping > 0 }),
	'runs are asleep on n1 just before it dies');

my ($d_task, $d_fence, $d_expires, $kill_at) = split / /, q_node('n1',
	q{SELECT task_id || ' ' || fence || ' ' || extract(epoch FROM lease_expires_at) || ' ' || extract(epoch FROM now())
	  FROM wf.claim_tasks('held', 'w-deadline', 1, '3 seconds')});
is(scalar(keys %{ { map { $_ => 1 } $c_task, $u_task, $d_task } }), 3, 'C, U and D are three tasks');

# ---------------------------------------------------------------------
# 4. n1 dies: its keeper (so that nothing restarts it), its postmaster and
#    every server process at once
# ---------------------------------------------------------------------
# the runs asleep at the kill itself (those seen before D's claim may have
# woken meanwhile; 2 s sleeps)
{
	my @now = split /\n/, q_node('n1', $asleep_q);
	@sleeping = @now if @now;
}
# and one run that surely sleeps through the kill: the loops' 2 s sleeps
# may all wake between the list above and the kill on a loaded machine
# (seen in CI: 41 starts in the whole test, none asleep at the kill); a
# 6 s sleep started now is due after the kill and, n2 taking seconds to be
# promoted, can only fire there
my $long_run = q_node('n1', q{SELECT wf.start_run('longnap', '{}')});
my ($long_timer, $long_due) = split / /, q_node('n1', qq{
SELECT timer_id || ' ' || extract(epoch FROM due_at) FROM wf.timers
 WHERE run_id = '$long_run' AND kind = 'sleep'});
push @sleeping, $long_timer;
my $keeper_pid = $keeper{n1}->{KIDS}[0]{PID};
my $postmaster = (split /\n/, PostgreSQL::Test::Utils::slurp_file("$pgdata{n1}/postmaster.pid"))[0];
my @victims = ($keeper_pid, server_children($keeper_pid), $postmaster, server_children($postmaster));
# (a backend of a loop's call may have exited on its own meanwhile)
kill('KILL', @victims);
my $t_kill = time;
eval { $keeper{n1}->finish };
delete $keeper{n1};
eval { $u_session->finish };
ok(poll('n1 gone', 10, sub { !grep { kill(0, $_) } $keeper_pid, $postmaster, server_children($keeper_pid) }),
	'kill -9 of n1\'s keeper, postmaster and server processes: nothing of n1 runs');
note(sprintf('n1 killed with %d runs asleep', scalar(@sleeping)));
cmp_ok($t_kill, '<', $long_due, 'the kill came before the 6 s sleep started just before it was due');

ok( poll('n2 promoted', 60, sub {
		q_node('n2', 'SELECT pg_is_in_recovery()', 'postgres') eq 'f'
		  && formation_state() =~ /n2:(wait_primary|primary)\/(wait_primary|primary)/ }),
	'the monitor promotes n2');
my $t_promoted = time;
note(sprintf('failover: n2 accepts writes %.1f s after the kill (state %s)', $t_promoted - $t_kill,
	formation_state()));
my $new_tli = q_node('n2', 'SELECT timeline_id FROM pg_control_checkpoint()', 'postgres');
cmp_ok($new_tli, '>', $old_tli, 'n2 is on a new timeline');

# ---------------------------------------------------------------------
# 5. the leases of queue held on n2
# ---------------------------------------------------------------------
my ($ok, $out, $err) = try_node('n2', "SELECT wf.complete_task($u_task, $u_fence, '{}')");
like($err, qr/fence $u_fence was never issued for task $u_task/,
	'U: the fence of the claim that never committed was never issued on n2');
cmp_ok($d_expires, '>', $kill_at, 'D\'s lease ended after n1 died');
ok( poll('D\'s lease expiry on n2', 30, sub {
		q_node('n2', "SELECT count(*) FROM wf.events WHERE type = 'lease_expired' AND actor = 'wfengine'"
			  . " AND (payload->>'task_id')::bigint = $d_task AND (payload->>'fence')::bigint = $d_fence") eq '1' }),
	'D: n2\'s engine worker expired the lease (a task deadline fired on the new primary)');
my %new_fence = map { split / / } split /\n/, q_node('n2',
	q{SELECT task_id || ' ' || fence FROM wf.claim_tasks('held', 'w-new', 10, '1 hour')});
is_deeply([ sort { $a <=> $b } keys %new_fence ], [ sort { $a <=> $b } $u_task, $d_task ],
	'U and D are delivered again on n2 (C is still leased)');
is(scalar(grep { $_ < ($new_tli - 1) * 2**44 } values %new_fence), 0, 'their new fences are of n2\'s timeline');
is(q_node('n2', "SELECT wf.complete_task($u_task, $u_fence, '{\"by\": \"w-uncommitted\"}')"),
	'stale', 'U: the result under the fence that never committed is stale');
is(q_node('n2', "SELECT wf.complete_task($d_task, $d_fence, '{\"by\": \"w-deadline\"}')"),
	'stale', 'D: the result under the expired lease is stale');
is(q_node('n2', "SELECT wf.complete_task($c_task, $c_fence, '{\"by\": \"w-committed\"}')"),
	'accepted', 'C: the result of the claim committed (and replicated) before the failover is accepted');
is( join(',', map { q_node('n2', "SELECT wf.complete_task($_, $new_fence{$_}, '{\"by\": \"w-new\"}')") }
		  sort keys %new_fence),
	'accepted,accepted',
	'the new holders\' results are accepted');

# ---------------------------------------------------------------------
# the loops carry on on n2; every run completes
# ---------------------------------------------------------------------
ok( poll('the loops on n2', 60, sub {
		(grep { $_->[2] eq 'accepted' && $_->[3] eq $port{n2} } acked('complete')) >= 20
		  && (grep { $_->[1] eq $port{n2} } acked('start')) >= 5 }),
	'the loops start runs and complete tasks on n2 through their multi-host strings');
PostgreSQL::Test::Utils::append_to_file("$base/stop_starting", '');
ok( poll('every run finished', 90, sub {
		q_node('n2', q{SELECT count(*) FROM wf.runs WHERE status <> 'completed'}) eq '0' }),
	'every run completes')
  or diag(q_node('n2', q{SELECT string_agg(run_id || ' ' || status || ' ' || coalesce(current_step, '-'), E'\n') FROM wf.runs WHERE status <> 'completed'}));
PostgreSQL::Test::Utils::append_to_file("$base/stop", '');
for my $w (sort keys %loop)
{
	$loop{$w}->finish;
}
my $t_done = time;

# the loop through the router: it went on after the failover with no help,
# and what it was refused while the primary was gone said so retryably
my $w3 = PostgreSQL::Test::Utils::slurp_file("$base/w3.log");
my @w3_done = $w3 =~ /^complete \d+ \d+ accepted/mg;
my $w3_err = PostgreSQL::Test::Utils::slurp_file("$base/w3.log.err");
my @w3_codes = $w3_err =~ /ERROR:  ([0-9A-Z]{5}):/g;
note sprintf('through the router: %d accepted completions; refused with %s', scalar(@w3_done),
	join(', ', map { my $c = $_; "$c x" . scalar(grep { $_ eq $c } @w3_codes) } sort keys %{ { map { $_ => 1 } @w3_codes } }) || 'nothing');
ok(scalar(@w3_done) >= 10, 'the loop through the router completed tasks, before and after the failover');
ok(scalar(grep { /^08/ } @w3_codes) >= 1, 'while the primary was gone the router answered 08006, naming the shard')
  or diag $w3_err;
is(scalar(grep { !/^(08...|40001|57P01)$/ } @w3_codes), 0, 'and nothing the router answered was XX000 or another non-retryable error')
  or diag $w3_err;
my @w3_lines = split /\n/, $w3;
my ($first_fail) = grep { $w3_lines[$_] eq 'fail' } 0 .. $#w3_lines;
my ($last_done) = reverse grep { $w3_lines[$_] =~ /^complete \d+ \d+ accepted/ } 0 .. $#w3_lines;
ok(defined $first_fail && defined $last_done && $last_done > $first_fail,
	'the router served the loop again after the failover, without intervention');

my $sleepers = join(',', @sleeping) || 'NULL';    # none: the checks below fail, not the SQL
is( q_node('n2', "SELECT count(*) FROM wf.timers WHERE timer_id IN ($sleepers) AND status = 'fired' AND outcome = 'applied'"),
	scalar(@sleeping), 'every sleep timer pending on n1 just before it died has fired');
my $timers_fired = q_node('n2', sprintf(q{
SELECT count(*) FROM wf.timers WHERE timer_id IN (%s) AND fired_at > to_timestamp(%.6f)}, $sleepers, $t_kill));
cmp_ok($timers_fired, '>=', 1, "sleep timers set on n1 fired on n2 ($timers_fired of them)");

# ---------------------------------------------------------------------
# 6. nothing acknowledged is lost
# ---------------------------------------------------------------------
my @starts = acked('start');
my @claims = acked('claim');
my @accepted = grep { $_->[2] eq 'accepted' } acked('complete');
my $n_before = scalar(grep { $_->[1] eq $port{n1} } @starts);
note(sprintf('acknowledged: %d starts (%d on n1), %d claims, %d accepted completions (%d on n1)',
	scalar(@starts), $n_before, scalar(@claims), scalar(@accepted),
	scalar(grep { $_->[3] eq $port{n1} } @accepted)));

my $runs = join(',', map { "'$_->[0]'" } @starts);
is( q_node('n2', "SELECT count(*) FROM wf.events WHERE seq = 1 AND type = 'run_started' AND run_id IN ($runs)"),
	scalar(@starts), 'every acknowledged start is on n2, with its run_started event');
my $completions = join(',', map { "($_->[0], $_->[1])" } @accepted);
is( q_node('n2', "SELECT count(*) FROM (VALUES $completions) a(task, fence) WHERE EXISTS (
  SELECT FROM wf.events e WHERE e.type = 'task_completed'
    AND (e.payload->>'task_id')::bigint = a.task AND (e.payload->>'fence')::bigint = a.fence)"),
	scalar(@accepted), 'every acknowledged accepted completion is on n2, with its task and fence');
my $leases = join(',', map { "($_->[0], $_->[1])" } @claims);
is( q_node('n2', "SELECT count(*) FROM (VALUES $leases) c(task, fence) JOIN wf.tasks t ON t.task_id = c.task
  WHERE t.fence >= c.fence"),
	scalar(@claims), 'every acknowledged claim is on n2 (the task\'s fence is at least the claim\'s)');
my ($verified, $all_runs) = split /\//, q_node('n2',
	q{SELECT count(*) FILTER (WHERE wf.verify_run(run_id)) || '/' || count(*) FROM wf.runs});
is($verified, $all_runs, "every run verifies ($all_runs runs)");
note(sprintf('%d run(s) whose start committed but was not acknowledged', $all_runs - 3 - scalar(@starts)));

# ---------------------------------------------------------------------
# 7. n1 rejoins as n2's standby
# ---------------------------------------------------------------------
start_keeper('n1');
ok( poll('n1 secondary', 60, sub { formation_state() eq 'n1:secondary/secondary n2:primary/primary' }),
	'n1\'s keeper rewinds it, and it rejoins as n2\'s secondary');
ok( poll('n2 synchronous to n1', 30,
		sub { q_node('n2', 'SHOW synchronous_standby_names', 'postgres') eq 'ANY 1 (pgautofailover_standby_1)' }),
	'n2 commits synchronously to n1');
my $history_n2 = q_node('n2', q{SELECT count(*) || ' ' || md5(string_agg(hash::text, '' ORDER BY run_id, seq)) FROM wf.events});
ok( poll('n1 replays n2', 30, sub {
		q_node('n1', q{SELECT count(*) || ' ' || md5(string_agg(hash::text, '' ORDER BY run_id, seq)) FROM wf.events})
		  eq $history_n2 }),
	'n1 has the history of n2');
is(q_node('n1', 'SELECT pg_is_in_recovery()', 'postgres'), 't', 'n1 is a standby');

note(sprintf('timings: formation %.1f s, failover %.1f s, drain after failover %.1f s, total %.1f s',
	$t_kill - $t_start, $t_promoted - $t_kill, $t_done - $t_promoted, time - $t_start));
done_testing();
