
# Copyright (c) 2026, wfengine developers

# The launcher and the per-database engine workers (issue 3).
#
#  1. With wfengine preloaded the launcher runs ("wfengine launcher" in
#     pg_stat_activity).  The launcher naptime is set to an hour, so every
#     worker below must be started by a wake-up, not by a periodic scan.
#  2. CREATE EXTENSION in a new database: its worker appears promptly, and
#     wf.worker_status() shows the launcher and the worker.
#  3. DROP EXTENSION: the worker exits and is not started again; CREATE
#     EXTENSION again: it is back.
#  4. DROP DATABASE and ALTER DATABASE RENAME succeed while the worker runs;
#     the renamed database gets its worker back.
#  5. SIGHUP: a reload after ALTER SYSTEM SET wfengine.naptime is picked up
#     by the running worker at once (not at the end of its current sleep).
#  6. wfengine.enabled = off: the worker keeps running but fires nothing;
#     on again, it fires what is due.
#  7. A tick that fails (the timers table renamed away) is logged and
#     retried; the worker survives and recovers.
#  8. SIGTERM (pg_terminate_backend): the worker exits and the launcher
#     starts a new one.  kill -9: the postmaster reinitialises and the
#     launcher and the worker come back.
#  9. Without shared_preload_libraries, CREATE EXTENSION warns and no
#     worker runs; wf.worker_status() returns nothing.
# 10. The relay: with the worker asleep for a minute, a listener on the run
#     channel hears every run started by 300 commits of two sessions at
#     once, each notification sent by the worker (its pid), none lost to
#     the batching of the relay (the worker sends at most every few
#     milliseconds), and no overflow.
# 11. A session idle in a transaction after wf.signal holds a run whose
#     sleep falls due: the worker does not wait for it (never a Lock wait
#     in pg_stat_activity), fires another run's sleep on time,
#     wf.worker_status() shows the held item (due_locked, due_locked_since)
#     and the counter due_lock_skips grows; a wf.send_event to the held run
#     that times out waiting for it (lock_timeout) changes nothing; when the
#     transaction ends, the held sleep fires, once.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;    # (also: initdb from a template)
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('wf_worker');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
restart_after_crash = on
max_worker_processes = 16
wfengine.launcher_naptime = '1h'
));
$node->start;

# the pid of the worker of a database, '' when it has none
sub worker_pid
{
	my ($db) = @_;
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'wfengine worker' AND datname = '$db'"
	);
}

# waits until the next_due of wfc's worker compares with $cond (SQL)
sub wfc_worker_sleeps
{
	my ($cond) = @_;
	return $node->poll_query_until('wfc',
		"SELECT next_due $cond FROM wf.worker_status() WHERE database = 'wfc'");
}

sub worker_count_is
{
	my ($db, $n) = @_;
	return $node->poll_query_until('postgres',
		"SELECT count(*) = $n FROM pg_stat_activity WHERE backend_type = 'wfengine worker' AND datname = '$db'"
	);
}

# ---------------------------------------------------------------------
# 1. the launcher
# ---------------------------------------------------------------------
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'wfengine launcher'"
	),
	'the launcher runs');
is( $node->safe_psql(
		'postgres',
		"SELECT application_name, datname IS NULL FROM pg_stat_activity WHERE backend_type = 'wfengine launcher'"
	),
	'wfengine launcher|t',
	'the launcher reports its name and is connected to no database');
my $launcher_pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'wfengine launcher'");

# ---------------------------------------------------------------------
# 2. CREATE EXTENSION starts a worker promptly
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE wfa');
my $log_offset = -s $node->logfile;
my $t0 = time();
$node->safe_psql('wfa', 'CREATE EXTENSION wfengine');
ok(worker_count_is('wfa', 1), 'CREATE EXTENSION starts a worker for the database');
cmp_ok(time() - $t0, '<', 30, 'promptly, although the launcher naptime is an hour');
$node->wait_for_log(qr/LOG:  wfengine worker started for database "wfa"/, $log_offset);
pass('the worker logs its start');
is( $node->safe_psql(
		'postgres',
		"SELECT application_name FROM pg_stat_activity WHERE backend_type = 'wfengine worker' AND datname = 'wfa'"
	),
	'wfengine worker',
	'the worker reports its application name');

# the database without the extension has no worker (its probe exits)
ok(worker_count_is('postgres', 0),
	'no worker stays in a database without the extension');

my $pid_a = worker_pid('wfa');
ok( $node->poll_query_until(
		'wfa', "SELECT ticks > 0 FROM wf.worker_status() WHERE role = 'worker' AND database = 'wfa'"),
	'the worker ticks');
is( $node->safe_psql(
		'wfa', qq{
SELECT role, coalesce(database, '-'), pid, started_at IS NOT NULL, next_due > now(), ticks > 0, fired
FROM wf.worker_status() ORDER BY role, database}),
	"launcher|-|$launcher_pid|t|t|t|2\nworker|wfa|$pid_a|t|t|t|0",
	'wf.worker_status() shows the launcher (2 workers started: postgres, wfa) and the worker');

# ---------------------------------------------------------------------
# 3. DROP EXTENSION stops the worker; CREATE EXTENSION brings it back
# ---------------------------------------------------------------------
$log_offset = -s $node->logfile;
$node->safe_psql('wfa', 'DROP EXTENSION wfengine');
ok(worker_count_is('wfa', 0), 'DROP EXTENSION stops the worker');
$node->wait_for_log(
	qr/wfengine worker for database "wfa" is stopping: extension "wfengine" is not installed/,
	$log_offset);
pass('the worker says why it stops');

# wake the launcher through another database: its scan must leave wfa alone
$node->safe_psql('postgres', 'CREATE DATABASE wfb');
$node->safe_psql('wfb', 'CREATE EXTENSION wfengine');
ok(worker_count_is('wfb', 1), 'CREATE EXTENSION in another database starts its worker');
is( $node->safe_psql(
		'wfb', "SELECT count(*) FROM wf.worker_status() WHERE database = 'wfa'"),
	'0',
	'the launcher does not restart the worker of a database without the extension');

$node->safe_psql('wfa', 'CREATE EXTENSION wfengine');
ok(worker_count_is('wfa', 1), 'CREATE EXTENSION again: the worker is back');
isnt(worker_pid('wfa'), $pid_a, 'it is a new process');

# ---------------------------------------------------------------------
# 4. DROP DATABASE and ALTER DATABASE RENAME while the worker runs
# ---------------------------------------------------------------------
my ($ret, $stdout, $stderr) = $node->psql('postgres', 'DROP DATABASE wfa');
is($ret, 0, 'DROP DATABASE succeeds while the worker runs');
is($stderr, '', 'without complaint');
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM pg_database WHERE datname = 'wfa'"),
	'0',
	'the database is gone');
ok(worker_count_is('wfa', 0), 'so is its worker');

my $pid_b = worker_pid('wfb');
($ret, $stdout, $stderr) =
  $node->psql('postgres', 'ALTER DATABASE wfb RENAME TO wfc');
is($ret, 0, 'ALTER DATABASE RENAME succeeds while the worker runs');
ok(worker_count_is('wfc', 1), 'the renamed database gets its worker back');
isnt(worker_pid('wfc'), $pid_b, 'a new worker');

# ---------------------------------------------------------------------
# 5. SIGHUP
# ---------------------------------------------------------------------
my $pid_c = worker_pid('wfc');
ok(wfc_worker_sleeps("> now() + interval '30 seconds'"),
	'with the default naptime the worker sleeps long');
$log_offset = -s $node->logfile;
$node->safe_psql('postgres', "ALTER SYSTEM SET wfengine.naptime = '1s'");
my $t_reload = time();
$node->reload;
ok(wfc_worker_sleeps("< now() + interval '5 seconds'"),
	'after a reload the worker sleeps by the new naptime');
# (the sleep it was in still had more than 30 s to go)
cmp_ok(time() - $t_reload, '<', 20,
	'at once, not at the end of the sleep chosen under the old naptime');
my $ticks = $node->safe_psql('wfc',
	"SELECT ticks FROM wf.worker_status() WHERE database = 'wfc'");
ok( $node->poll_query_until(
		'wfc',
		"SELECT ticks >= $ticks + 2 FROM wf.worker_status() WHERE database = 'wfc'"),
	'and ticks on');
is(worker_pid('wfc'), $pid_c, 'the same worker process');
unlike(
	slurp_file($node->logfile, $log_offset),
	qr/(ERROR|FATAL|PANIC):/,
	'the reload logged no error');

# ---------------------------------------------------------------------
# 6. wfengine.enabled = off
# ---------------------------------------------------------------------
$node->safe_psql(
	'wfc', q{
SELECT wf.publish_definition('nap', '{"steps": [
  {"name": "nap", "type": "sleep", "duration": "1s"},
  {"name": "after", "queue": "nap_q"}]}');
});
$node->safe_psql('postgres', 'ALTER SYSTEM SET wfengine.enabled = off');
$node->reload;
# the reload reaches the worker within a tick or two (naptime 1 s)
$ticks = $node->safe_psql('wfc',
	"SELECT ticks FROM wf.worker_status() WHERE database = 'wfc'");
ok( $node->poll_query_until(
		'wfc',
		"SELECT ticks >= $ticks + 3 FROM wf.worker_status() WHERE database = 'wfc'"),
	'the worker ticks with wfengine.enabled = off');
my $fired = $node->safe_psql('wfc',
	"SELECT fired FROM wf.worker_status() WHERE database = 'wfc'");
my $run = $node->safe_psql('wfc', "SELECT wf.start_run('nap')");
ok( $node->poll_query_until(
		'wfc',
		"SELECT fire_at < clock_timestamp() FROM wf.timers WHERE run_id = '$run'"),
	'the sleep timer becomes due');
$ticks = $node->safe_psql('wfc',
	"SELECT ticks FROM wf.worker_status() WHERE database = 'wfc'");
ok( $node->poll_query_until(
		'wfc',
		"SELECT ticks >= $ticks + 3 FROM wf.worker_status() WHERE database = 'wfc'"),
	'the worker keeps ticking');
is( $node->safe_psql(
		'wfc', "SELECT status FROM wf.timers WHERE run_id = '$run'"),
	'pending',
	'but fires nothing while disabled');
is( $node->safe_psql(
		'wfc', "SELECT fired FROM wf.worker_status() WHERE database = 'wfc'"),
	$fired,
	'its fired counter stands still');
is(worker_pid('wfc'), $pid_c, 'the worker kept running');

$node->safe_psql('postgres', 'ALTER SYSTEM SET wfengine.enabled = on');
$node->reload;
ok( $node->poll_query_until(
		'wfc',
		"SELECT count(*) = 1 FROM wf.events WHERE run_id = '$run' AND type = 'sleep_finished'"
	),
	'enabled again, the worker fires the due timer');
is( $node->safe_psql(
		'wfc',
		"SELECT status FROM wf.timers WHERE run_id = '$run'"),
	'fired',
	'the timer is fired');
is( $node->safe_psql(
		'wfc',
		"SELECT fired > $fired FROM wf.worker_status() WHERE database = 'wfc'"),
	't',
	'wf.worker_status() counts it');
is($node->safe_psql('wfc', "SELECT wf.verify_run('$run')"),
	't', 'the run verifies');

# ---------------------------------------------------------------------
# 7. a failing tick does not kill the worker
# ---------------------------------------------------------------------
$log_offset = -s $node->logfile;
$node->safe_psql('wfc', 'ALTER TABLE wf.timers RENAME TO timers_away');
$node->wait_for_log(
	qr/wfengine worker tick in database "wfc"/,
	$log_offset);
pass('a failing tick is logged with its database');
$ticks = $node->safe_psql('wfc',
	"SELECT ticks FROM wf.worker_status() WHERE database = 'wfc'");
$node->safe_psql('wfc', 'ALTER TABLE wf.timers_away RENAME TO timers');
$node->wait_for_log(
	qr/wfengine worker for database "wfc" recovered after \d+ failed ticks/,
	$log_offset);
pass('the worker recovers when the tick works again');
is(worker_pid('wfc'), $pid_c, 'the same worker process throughout');
ok( $node->poll_query_until(
		'wfc',
		"SELECT ticks > $ticks FROM wf.worker_status() WHERE database = 'wfc'"),
	'and it ticks again');

# ---------------------------------------------------------------------
# 8. SIGTERM and kill -9
# ---------------------------------------------------------------------
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid_c)");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'wfengine worker' AND datname = 'wfc' AND pid <> $pid_c"
	),
	'after SIGTERM the launcher starts a new worker');

my $pid_killed = worker_pid('wfc');
$log_offset = -s $node->logfile;
kill 'KILL', $pid_killed;
$node->wait_for_log(qr/all server processes terminated; reinitializing/,
	$log_offset);
pass('kill -9 of the worker makes the postmaster reinitialise');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'wfengine launcher'"
	),
	'the launcher is back');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'wfengine worker' AND datname = 'wfc' AND pid <> $pid_killed"
	),
	'the worker is back');
$run = $node->safe_psql('wfc', "SELECT wf.start_run('nap')");
ok( $node->poll_query_until(
		'wfc',
		"SELECT count(*) = 1 FROM wf.events WHERE run_id = '$run' AND type = 'sleep_finished'"
	),
	'and fires timers');

# ---------------------------------------------------------------------
# 10. the relay: every notification of many commits, sent by the worker
# ---------------------------------------------------------------------
{
	# the default naptime again (a minute): no tick sends them in passing,
	# only the relay
	$node->safe_psql('postgres', 'ALTER SYSTEM RESET wfengine.naptime');
	$node->reload;
	ok(wfc_worker_sleeps("> now() + interval '30 seconds'"),
		'the worker sleeps long again');
	my $wpid = worker_pid('wfc');
	my $channel = $node->safe_psql('wfc', "SELECT wf.channel('runs')");
	$node->safe_psql('wfc',
		q{SELECT wf.publish_definition('relayq', '{"steps": [{"name": "only", "queue": "relay_q"}]}')});
	my $psql = $node->installed_command('psql');
	my ($lo, $le) = ('', '');

	# psql prints the notifications a command received after it; the second
	# command waits until the 300 runs exist, the third gives the worker
	# time to send the last of them
	my $listener = IPC::Run::start(
		[
			$psql, '-XqAt', '-d', $node->connstr('wfc'),
			'-c', qq{LISTEN "$channel"},
			'-c', q{DO $$ BEGIN
				WHILE (SELECT count(*) FROM wf.runs r JOIN wf.definitions d USING (definition_id)
					   WHERE d.name = 'relayq') < 300
					  AND clock_timestamp() < now() + interval '3 minutes'
				LOOP PERFORM pg_sleep(0.05); END LOOP;
				END $$},
			'-c', 'SELECT pg_sleep(2)', '-c', 'SELECT 1'
		],
		'>', \$lo, '2>', \$le);
	ok( $node->poll_query_until('wfc',
			"SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE 'DO \$\$ BEGIN%relayq%'"),
		'the listener listens');
	my $sql = "SELECT wf.start_run('relayq') IS NOT NULL;\n" x 150;
	# (each its own copy: IPC::Run consumes the input it writes)
	my @writers = map {
		my $in = $sql;
		IPC::Run::start([ $psql, '-XqAt', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('wfc') ],
			'<', \$in, '>', \my $out, '2>', \my $err)
	} 1 .. 2;
	$_->finish for @writers;
	$listener->finish;
	is($le, '', 'the listener saw no error');
	my @heard = ($lo =~ /^Asynchronous notification "\Q$channel\E" with payload "(.*)" received from server process with PID (\d+)\.$/mg);
	my (%runs, %pids);
	while (my ($payload, $pid) = splice(@heard, 0, 2))
	{
		$pids{$pid}++;
		$runs{$1}++ if $payload =~ /"run_id": "([0-9a-f-]+)", "kind": "started"/;
	}
	is(scalar(keys %runs), 300, 'every one of the 300 runs started is heard of once');
	is_deeply([ keys %pids ], [$wpid], 'all of them sent by the engine worker');
	unlike($lo, qr/wf_overflow/, 'none dropped');
}

# ---------------------------------------------------------------------
# 11. an idle transaction holds a run: the worker does not wait for it
# ---------------------------------------------------------------------
{
	$node->safe_psql('wfc', q{
SELECT wf.publish_definition('held', '{"correlation": {"k": "$.input.k"}, "steps": [
  {"name": "nap", "type": "sleep", "duration": "1500ms"},
  {"name": "after", "queue": "held_q"}]}');
});
	my $skips0 = $node->safe_psql('wfc',
		"SELECT value FROM wf.engine_counters() WHERE name = 'due_lock_skips'");
	# The holder: a session of its own that signals the run in a transaction
	# and keeps it open until the test commits it (not for a fixed time,
	# which a loaded machine can use up before the checks below are done).
	# The run's sleep must fall due after the holder has locked the run: if
	# it fired before (the holder's start took longer than the sleep), the
	# scenario is tried again with a new run.
	my ($x, $k, $holder, $holder_pid);
	my $he = '';
	for my $attempt (1 .. 5)
	{
		$k = "x$attempt";
		$x = $node->safe_psql('wfc', qq{SELECT wf.start_run('held', '{"k": "$k"}')});
		$holder = $node->background_psql('wfc', on_error_stop => 0);
		$holder_pid = $holder->query('SELECT pg_backend_pid()');
		$holder->query('BEGIN');
		$holder->query(qq{SELECT wf.signal('$x', 'hold', '{}')});
		$he .= $holder->{stderr};
		$holder->{stderr} = '';
		last if $node->safe_psql('wfc', "SELECT status FROM wf.timers WHERE run_id = '$x'") eq 'pending';
		note "attempt $attempt: the sleep of run $x fired before the holder locked it; again";
		$holder->query('COMMIT');
		$holder->quit;
	}
	ok( $node->poll_query_until('wfc',
			"SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = $holder_pid AND state = 'idle in transaction'"
			  . " AND backend_xid IS NOT NULL AND (SELECT status = 'pending' FROM wf.timers WHERE run_id = '$x')"),
		'a session holds the run in an open transaction');
	my $y = $node->safe_psql('wfc', "SELECT wf.start_run('held')");
	ok( $node->poll_query_until('wfc',
			"SELECT status = 'fired' FROM wf.timers WHERE run_id = '$y'"),
		"another run's sleep fires while the transaction is open");
	cmp_ok(
		$node->safe_psql('wfc',
			"SELECT extract(epoch FROM fired_at - due_at) FROM wf.timers WHERE run_id = '$y'"),
		'<', 0.25, 'on time (lag under 250 ms)');
	ok( $node->poll_query_until('wfc',
			"SELECT due_locked = 1 AND due_locked_since IS NOT NULL FROM wf.worker_status() WHERE database = 'wfc'"),
		'wf.worker_status() shows the held item');
	my $waits = $node->safe_psql('wfc', q{
SELECT count(*) FROM generate_series(1, 20) i,
  LATERAL (SELECT pg_sleep(0.05), (SELECT count(*) FROM pg_stat_activity
           WHERE backend_type = 'wfengine worker' AND datname = 'wfc'
             AND wait_event_type = 'Lock') AS n) s
WHERE s.n > 0});
	is($waits, '0', 'the worker never waits for the lock (20 samples)');
	is($node->safe_psql('wfc', "SELECT status FROM wf.timers WHERE run_id = '$x'"),
		'pending', 'the held run\'s sleep is left due');
	cmp_ok(
		$node->safe_psql('wfc',
			"SELECT value FROM wf.engine_counters() WHERE name = 'due_lock_skips'"),
		'>', $skips0, 'the counter due_lock_skips grows');
	# a send to the held run that gives up waiting changes nothing (it is
	# not taken for a run that ended, nor buffered for a later run)
	my ($sret, $sout, $serr) = $node->psql('wfc',
		"SET lock_timeout = '50ms'; SELECT * FROM wf.send_event('k:$k', 'go', '{}', 'e-held')");
	like($serr, qr/canceling statement due to lock timeout/,
		'a send to the held run times out waiting for it');
	is( $node->safe_psql('wfc',
			"SELECT (SELECT count(*) FROM wf.buffered_events WHERE event_id = 'e-held')"
			  . " + (SELECT count(*) FROM wf.event_ids WHERE event_id = 'e-held')"),
		'0', 'and leaves nothing: no buffered event, no event id');
	$holder->query('COMMIT');
	$he .= $holder->{stderr};
	$holder->quit;
	is($he, '', 'the holder saw no error');
	ok( $node->poll_query_until('wfc',
			"SELECT status = 'fired' FROM wf.timers WHERE run_id = '$x'"),
		'the transaction ended: the held sleep fires');
	is( $node->safe_psql('wfc',
			"SELECT count(*) FROM wf.events WHERE run_id = '$x' AND type = 'sleep_finished'"),
		'1', 'once');
	ok( $node->poll_query_until('wfc',
			"SELECT due_locked = 0 AND due_locked_since IS NULL FROM wf.worker_status() WHERE database = 'wfc'"),
		'and nothing is held any more');
	is($node->safe_psql('wfc', "SELECT wf.verify_run('$x') AND wf.verify_run('$y')"),
		't', 'both runs verify');
}

# ---------------------------------------------------------------------
# 9. without preload: the same cluster restarted without
#    shared_preload_libraries (an initdb of its own costs seconds), in a
#    database of its own
# ---------------------------------------------------------------------
$node->append_conf('postgresql.conf', "shared_preload_libraries = ''\n");
$node->restart;
my $plain = $node;
$plain->safe_psql('postgres', 'CREATE DATABASE plain');
is($plain->safe_psql('plain', 'SHOW shared_preload_libraries'), '', 'the server runs without preload');
($ret, $stdout, $stderr) = $plain->psql('plain', 'CREATE EXTENSION wfengine');
is($ret, 0, 'CREATE EXTENSION works without preload');
like(
	$stderr,
	qr/WARNING:  wfengine is not loaded through shared_preload_libraries/,
	'and warns that wfengine is not preloaded');
is( $plain->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'wfengine%'"),
	'0',
	'no wfengine process runs');
is($plain->safe_psql('plain', 'SELECT count(*) FROM wf.worker_status()'),
	'0', 'wf.worker_status() returns no rows');
$plain->stop;

done_testing();
