# Copyright (c) 2026, wfengine developers

# Workers behind pgbouncer (issue 14, docs/workers.md "Behind a pooler").
# One pgbouncer (Debian's package) in front of the cluster, with two pools
# of the same database: "wf_tx" in transaction mode with two server
# connections, "wf_session" in session mode.
#
#  1. Through transaction pooling, four clients drive claim + complete
#     loops to the end: every run completes and verifies.  Nothing of the
#     engine lives in the session between calls.
#  2. A waiting claim holds its server connection for the whole wait: with
#     both connections of the pool in waiting claims, a third client waits
#     in pgbouncer (SHOW POOLS: cl_waiting), and gets its turn when a claim
#     returns.  Size the pool for the waiting claims plus the other work.
#  3. A waiting claim behind the pooler is woken by a commit elsewhere: it
#     returns the task long before its wait ends.
#  4. LISTEN is session state: through the session-mode pool a listener gets
#     the queue's notification.  (Through a transaction-mode pool the LISTEN
#     stays on whichever server connection that transaction got, and which
#     client is attached to it when a notification arrives is chance; that
#     is pgbouncer's documented behaviour and not tested here.)
#  5. Prepared statements: pgbouncer 1.18 (Debian 12) does not carry
#     protocol-level prepared statements across transactions.  A psycopg 3
#     worker with prepare_threshold=None works through the transaction
#     pool; with psycopg's default (prepare after 5 executions) the claim
#     fails with "prepared statement ... does not exist" or "already
#     exists" once the statement moves to another server connection.  (Run
#     when python3-psycopg is installed; skipped otherwise.)

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;    # (also: initdb from a template)
use IPC::Run;
use Time::HiRes qw(time);

my $pgbouncer = '/usr/sbin/pgbouncer';
plan skip_all => 'pgbouncer is not installed (apt-get install pgbouncer)' unless -x $pgbouncer;

my $node = PostgreSQL::Test::Cluster->new('wf_pgbouncer');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
wfengine.approval_key = 'ab112233445566778899aabbccddeeff00112233445566778899aabbccddeeff'
));
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE wf');
$node->safe_psql('wf', 'CREATE EXTENSION wfengine');
$node->safe_psql('wf', q{
SELECT wf.publish_definition('two', '{"steps": [
  {"name": "a", "queue": "pool_q"}, {"name": "b", "queue": "pool_q"}]}');
});

# --- pgbouncer -------------------------------------------------------------
my $dir = PostgreSQL::Test::Utils::tempdir;
my $bport = PostgreSQL::Test::Cluster::get_free_port();
my $host = $node->host;
my $port = $node->port;
my $user = 'postgres';
$user = $ENV{USER} if defined $ENV{USER} && $ENV{USER} ne '';
$user = getpwuid($<) // $user;
open(my $fh, '>', "$dir/users.txt") or die;
print $fh qq("$user" ""\n);
close $fh;
open($fh, '>', "$dir/pgbouncer.ini") or die;
print $fh qq([databases]
wf_tx = host=$host port=$port dbname=wf pool_mode=transaction pool_size=2
wf_session = host=$host port=$port dbname=wf pool_mode=session pool_size=2

[pgbouncer]
listen_addr =
listen_port = $bport
unix_socket_dir = $dir
auth_type = trust
auth_file = $dir/users.txt
admin_users = $user
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
max_client_conn = 50
default_pool_size = 2
ignore_startup_parameters = extra_float_digits
server_reset_query =
);
close $fh;
system($pgbouncer, '-d', "$dir/pgbouncer.ini") == 0 or die "pgbouncer did not start";
END
{
	# stop pgbouncer without touching the test's exit status
	local $?;
	if (defined $dir && open(my $pf, '<', "$dir/pgbouncer.pid"))
	{
		my $pid = <$pf>;
		close $pf;
		chomp $pid if defined $pid;
		kill 'TERM', $pid if defined $pid && $pid =~ /^\d+$/;
	}
}
# wait for its socket
for (1 .. 50) { last if -S "$dir/.s.PGSQL.$bport"; select(undef, undef, undef, 0.1); }
ok(-S "$dir/.s.PGSQL.$bport", 'pgbouncer listens');

my $psql = $node->installed_command('psql');
# bq(DB, SQL): one psql call through pgbouncer; returns (rc, stdout, stderr)
sub bq
{
	my ($db, $sql) = @_;
	my ($out, $err) = ('', '');
	my $rc = IPC::Run::run([ $psql, '-XAtq', '-h', $dir, '-p', $bport, '-U', $user, '-d', $db,
			'-v', 'ON_ERROR_STOP=1', '-c', $sql ], '>', \$out, '2>', \$err);
	chomp $out;
	return ($rc, $out, $err);
}
my ($rc, $out, $err) = bq('wf_tx', 'SELECT wf.current_tenant()');
ok($rc, "a call through the transaction pool works ($out$err)");

# --- 1. claim + complete loops through transaction pooling ----------------
$node->safe_psql('wf', "SELECT count(wf.start_run('two', jsonb_build_object('n', n))) FROM generate_series(1, 40) n");
my $loop = q{
DO $$
DECLARE t record; n int := 0;
BEGIN
  LOOP
    SELECT * INTO t FROM wf.claim_tasks('pool_q', 'w', 1);
    EXIT WHEN t.task_id IS NULL;
    PERFORM wf.complete_task(t.task_id, t.fence, '{"ok": true}');
    n := n + 1;
    EXIT WHEN n >= 5;
  END LOOP;
END $$;
};
my @clients;
for my $c (1 .. 4)
{
	my ($o, $e) = ('', '');
	# each client runs up to 10 short transactions (up to 5 steps each)
	# through the pool: 200 steps for the 80 there are, since a transaction
	# ends early when every ready task is another's (SKIP LOCKED) for the
	# moment; with 5 each (100 for 80) a full run once ended with 34 runs
	# of 40 completed
	push @clients,
	  IPC::Run::start([ $psql, '-XAtq', '-h', $dir, '-p', $bport, '-U', $user, '-d', 'wf_tx',
			'-v', 'ON_ERROR_STOP=1', '-c', $loop x 10 ], '>', \$o, '2>', \$e);
}
$_->finish for @clients;
is($node->safe_psql('wf', "SELECT count(*) FROM wf.runs WHERE status = 'completed'"), '40',
	'four clients through a pool of two connections complete all 40 runs');
is($node->safe_psql('wf', "SELECT bool_and(wf.verify_run(run_id)) FROM wf.runs"), 't',
	'and every run verifies');

# --- 2. waiting claims hold their server connections -----------------------
my @waiters;
for my $c (1 .. 2)
{
	my ($o, $e) = ('', '');
	push @waiters,
	  IPC::Run::start([ $psql, '-XAtq', '-h', $dir, '-p', $bport, '-U', $user, '-d', 'wf_tx',
			'-c', "SELECT count(*) FROM wf.claim_tasks('idle_q', 'w$c', 1, wait => '4 s')" ], '>', \$o,
		'2>', \$e);
}
select(undef, undef, undef, 1.0);
my ($o3, $e3) = ('', '');
my $t0 = time();
my $third = IPC::Run::start([ $psql, '-XAtq', '-h', $dir, '-p', $bport, '-U', $user, '-d', 'wf_tx',
		'-c', 'SELECT 1' ], '>', \$o3, '2>', \$e3);
select(undef, undef, undef, 0.8);
my ($arc, $pools) = bq('pgbouncer', 'SHOW POOLS');
my ($waiting) = map { (split /\|/)[3] } grep { /^wf_tx\|/ } split /\n/, $pools;
ok(defined $waiting && $waiting >= 1,
	"with both server connections in waiting claims, a third client waits in pgbouncer (cl_waiting $waiting)")
  or diag($pools);
$third->finish;
chomp $o3;
my $took = time() - $t0;
is($o3, '1', 'the third client gets its turn when a claim returns');
cmp_ok($took, '>=', 1.5, sprintf('... after the waits (%.1f s)', $took));
$_->finish for @waiters;

# --- 3. a waiting claim behind the pooler is woken by a commit -------------
{
	my ($o, $e) = ('', '');
	my $w = IPC::Run::start([ $psql, '-XAtq', '-h', $dir, '-p', $bport, '-U', $user, '-d', 'wf_tx',
			'-c', "SELECT step FROM wf.claim_tasks('wake_q', 'w', 1, wait => '20 s')" ], '>', \$o, '2>', \$e);
	select(undef, undef, undef, 0.5);
	$node->safe_psql('wf', q{
		SELECT wf.publish_definition('one', '{"steps": [{"name": "only", "queue": "wake_q"}]}');
		SELECT wf.start_run('one');
	});
	my $t = time();
	$w->finish;
	chomp $o;
	is($o, 'only', 'the waiting claim returns the task');
	cmp_ok(time() - $t, '<', 10, 'long before its 20 s wait ends');
}

# --- 4. LISTEN through the session pool --------------------------------------
my $channel = $node->safe_psql('wf', "SELECT wf.channel('queue', 'listen_q')");
{
	my ($o, $e) = ('', '');
	# psql prints an asynchronous notification after the next command
	my $l = IPC::Run::start([ $psql, '-Xq', '-h', $dir, '-p', $bport, '-U', $user, '-d', 'wf_session',
			'-c', qq{LISTEN "$channel"}, '-c', 'SELECT pg_sleep(1.5)', '-c', 'SELECT 1' ], '>', \$o,
		'2>', \$e);
	select(undef, undef, undef, 0.5);
	$node->safe_psql('wf', q{
		SELECT wf.publish_definition('lq', '{"steps": [{"name": "only", "queue": "listen_q"}]}');
		SELECT wf.start_run('lq');
	});
	$l->finish;
	like($o, qr/Asynchronous notification "\Q$channel\E"/,
		"through the session pool the listener is told of the queue's notification");
}

# --- 5. psycopg's prepared statements --------------------------------------
SKIP:
{
	my $py = `/usr/bin/python3 -c 'import psycopg; print(psycopg.__version__)' 2>/dev/null`;
	skip 'python3-psycopg is not installed', 2 unless $py;
	$node->safe_psql('wf', "SELECT count(wf.start_run('two', jsonb_build_object('n', n))) FROM generate_series(1, 30) n");
	my $script = qq{
import sys, psycopg
threshold = None if sys.argv[1] == 'none' else 5
conns = [psycopg.connect(host='$dir', port=$bport, user='$user', dbname='wf_tx',
                         autocommit=True, prepare_threshold=threshold) for _ in range(3)]
done = 0
try:
    for i in range(40):
        c = conns[i % 3]
        row = c.execute("SELECT task_id, fence FROM wf.claim_tasks(%s, %s, 1)", ('pool_q', 'py')).fetchone()
        if row is None:
            break
        c.execute("SELECT wf.complete_task(%s, %s, %s::jsonb)", (row[0], row[1], '{}'))
        done += 1
    print('ok', done)
except psycopg.Error as e:
    print('error', e.sqlstate, str(e).splitlines()[0])
};
	my ($o, $e) = ('', '');
	IPC::Run::run([ '/usr/bin/python3', '-c', $script, 'none' ], '>', \$o, '2>', \$e);
	chomp $o;
	like($o, qr/^ok \d+/, "psycopg with prepare_threshold=None works through the transaction pool ($o)");
	($o, $e) = ('', '');
	IPC::Run::run([ '/usr/bin/python3', '-c', $script, 'default' ], '>', \$o, '2>', \$e);
	chomp $o;
	like($o, qr/^error 26000|^error 42P05/,
		"psycopg's default prepare_threshold breaks behind transaction pooling ($o)");
}

done_testing();
