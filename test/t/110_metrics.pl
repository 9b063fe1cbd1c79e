
# Copyright (c) 2026, wfengine developers

# Monitoring (issue 14.2): the engine counters across restarts, a claim
# woken by another session's commit, and the Prometheus metrics that
# prometheus-postgres-exporter serves from monitoring/queries.yaml.
#
#  1. A waiting wf.claim_tasks in one session is woken by a run started in
#     another: claim_wakeups and the wake-to-claim histogram count it.
#  2. A clean restart keeps every counter (written to
#     pg_stat/wfengine_metrics.stat at shutdown, read back at start); a
#     crash (immediate stop) starts them from zero, as PostgreSQL's own
#     cumulative statistics do.
#  3. prometheus-postgres-exporter with --extend.query-path pointed at
#     monitoring/queries.yaml, connected as a login in wfengine_monitor only
#     (issue 29, docs/monitoring.md): a scrape of /metrics holds every
#     wfengine metric the dashboard uses, with the values of the views and
#     counters for both tenants, no run's input, and reports no failed
#     query.
#  4. With wfengine.metrics_databases = 2, a third database counts
#     nothing until one of the others is dropped: the launcher gives the
#     dropped database's entry back and the third one takes it.

use strict;
use warnings;

use HTTP::Tiny;
use IPC::Run;
use Time::HiRes qw(usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;    # (also: initdb from a template)

my $node = PostgreSQL::Test::Cluster->new('wf_metrics');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
restart_after_crash = on
wfengine.enabled = off
));
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION wfengine');
$node->safe_psql(
	'postgres', q{
SELECT wf.publish_definition('m', '{"steps": [{"name": "a", "queue": "mq"}, {"name": "b", "queue": "mq2"}]}');
});

sub counter
{
	my ($name) = @_;
	return $node->safe_psql('postgres',
		"SELECT value FROM wf.engine_counters() WHERE name = '$name'");
}

# ---------------------------------------------------------------------
# 1. a claim woken by a commit
# ---------------------------------------------------------------------
my ($out, $err) = ('', '');
my $claimer = IPC::Run::start(
	[
		'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c',
		"SELECT count(*) FROM wf.claim_tasks('mq', 'waiter', 1, '30 seconds', '20 seconds')"
	],
	'>', \$out, '2>', \$err);
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE '%claim_tasks(''mq'', ''waiter''%' AND state = 'active'"
	),
	'a claim waits');
# let it get to its sleep on the condition variable
sleep 1;
$node->safe_psql('postgres', "SELECT wf.start_run('m', '{}', NULL, NULL, '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01')");
$claimer->finish;
is($out, "1\n", 'the woken claim got the task');
is(counter('claim_wakeups') >= 1 ? 1 : 0, 1, 'the wake-up is counted');
is(counter('wake_to_claim_count'), '1', 'the time from the waking commit to the claim is observed');
is( $node->safe_psql(
		'postgres', "SELECT count FROM wf.claim_latency_histogram() WHERE le = 'Infinity'"),
	'1',
	'... in the histogram');

my $task = $node->safe_psql('postgres',
	"SELECT task_id || ' ' || fence FROM wf.tasks WHERE queue = 'mq' AND status = 'leased'");
my ($tid, $fence) = split / /, $task;
$node->safe_psql('postgres', "SELECT wf.complete_task($tid, $fence, '{}')");
$node->safe_psql('postgres', "SELECT wf.complete_task($tid, $fence, '{}')");

# ---------------------------------------------------------------------
# 2. restarts
# ---------------------------------------------------------------------
my $all = "SELECT string_agg(name || '=' || value, ',' ORDER BY name) FROM wf.engine_counters()";
my $before = $node->safe_psql('postgres', $all);
is(counter('results_duplicate'), '1', 'a duplicate is counted');
$node->restart;
is($node->safe_psql('postgres', $all), $before, 'a clean restart keeps every counter');
ok(!-e $node->data_dir . '/pg_stat/wfengine_metrics.stat',
	'the file of the shutdown is removed once read');
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', "SELECT sum(value) FROM wf.engine_counters()"),
	'0', 'after a crash the counters start from zero');
$node->safe_psql('postgres', "SELECT wf.start_run('m')");
is(counter('runs_started'), '1', 'and count again');

# ---------------------------------------------------------------------
# 3. the exporter
# ---------------------------------------------------------------------
my $exporter = '/usr/bin/prometheus-postgres-exporter';
SKIP:
{
	skip "prometheus-postgres-exporter is not installed (test/scripts/deps.sh installs it)", 13
	  unless -x $exporter;

	# something in every view: a ready task, a pending timer, an approval;
	# of two tenants (default, as the superuser, and acme)
	$node->safe_psql(
		'postgres', q{
SELECT wf.publish_definition('ap', '{"steps": [{"name": "ok", "type": "approval", "approvers": ["alice"],
  "notify_queue": "mail", "expires": "1h"}]}');
SELECT wf.start_run('ap');
SELECT wf.publish_definition('sl', '{"steps": [{"name": "nap", "type": "sleep", "duration": "1h"}]}');
SELECT wf.start_run('sl');
SELECT wf.create_tenant('acme');
CREATE ROLE acme_app LOGIN IN ROLE wfengine_admin;
SELECT wf.add_tenant_member('acme', 'acme_app');
SET SESSION AUTHORIZATION acme_app;
SELECT wf.publish_definition('ap', '{"steps": [{"name": "ok", "type": "approval", "approvers": ["alice"],
  "notify_queue": "mail", "expires": "1h"}]}');
SELECT wf.start_run('ap', '{"ssn": "078-05-1120"}');
RESET SESSION AUTHORIZATION;
-- the exporter's login, as docs/monitoring.md says: wfengine_monitor only
CREATE ROLE wf_exporter LOGIN IN ROLE wfengine_monitor;
});
	# a second database with the extension, scraped by the same exporter
	$node->safe_psql('postgres', 'CREATE DATABASE m2');
	$node->safe_psql('m2', q{CREATE EXTENSION wfengine;
SELECT wf.publish_definition('sl', '{"steps": [{"name": "nap", "type": "sleep", "duration": "1h"}]}');
SELECT wf.start_run('sl');});

	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $root = $ENV{TESTDIR} // '.';
	my $queries = "$root/monitoring/queries.yaml";
	$queries = 'monitoring/queries.yaml' unless -e $queries;
	# one exporter, two databases: a comma-separated list of DSNs
	local $ENV{DATA_SOURCE_NAME} = join(',', map {
		sprintf('host=%s port=%d user=wf_exporter dbname=%s sslmode=disable', $node->host, $node->port, $_)
	} qw(postgres m2));
	my ($eout, $eerr) = ('', '');
	my $h = IPC::Run::start(
		[
			$exporter, "--web.listen-address=127.0.0.1:$port",
			"--extend.query-path=$queries", '--disable-settings-metrics',
			# two databases of one server: the exporter's own server-wide
			# metrics would collide (docs/monitoring.md)
			'--disable-default-metrics', '--no-collector.bgwriter', '--no-collector.database'
		],
		'>', \$eout, '2>', \$eerr);

	my $http = HTTP::Tiny->new(timeout => 10);
	my $body = '';
	for (1 .. 100)
	{
		my $r = $http->get("http://127.0.0.1:$port/metrics");
		if ($r->{success} && $r->{content} =~ /^wf_engine_runs_started_total/m)
		{
			$body = $r->{content};
			last;
		}
		usleep(200_000);
	}
	$h->kill_kill;
	$h->finish;
	ok($body ne '', 'the exporter serves /metrics') or diag($eerr);

	my @names = qw(
	  wf_queue_ready wf_queue_leased wf_queue_oldest_ready_age_seconds wf_queue_claims_1m
	  wf_queue_completions_1m wf_queue_failures_1m wf_queue_expired_leases
	  wf_run_running wf_run_paused wf_run_undoing wf_run_completed_5m wf_run_failed_5m
	  wf_run_stopped_5m wf_run_duration_p50_seconds wf_run_duration_p95_seconds
	  wf_run_failure_rate_5m wf_run_retries_5m wf_run_retries_per_step_5m
	  wf_timer_pending wf_timer_due wf_timer_held wf_timer_firing_lag_seconds
	  wf_approval_open wf_approval_runs wf_approval_without_token wf_approval_oldest_age_seconds
	  wf_engine_runs_started_total wf_engine_transitions_total wf_engine_events_appended_total
	  wf_engine_claim_calls_total wf_engine_tasks_claimed_total wf_engine_claim_wakeups_total
	  wf_engine_results_accepted_total wf_engine_results_cancel_requested_total
	  wf_engine_results_duplicate_total wf_engine_results_stale_total
	  wf_engine_timers_fired_total wf_engine_timers_stale_total wf_engine_deadlines_fired_total
	  wf_engine_due_lock_skips_total
	  wf_worker_due_locked wf_worker_due_locked_age_seconds wf_worker_relay_dropped_total
	  wf_worker_ticks_total wf_worker_fired_total
	  wf_engine_timer_lag_seconds_count wf_engine_timer_lag_seconds_sum
	  wf_engine_wake_to_claim_seconds_count wf_engine_wake_to_claim_seconds_sum
	  wf_engine_timer_lag_seconds_bucket wf_engine_wake_to_claim_seconds_bucket);
	my @missing = grep { $body !~ /^\Q$_\E[{ ]/m } @names;
	is_deeply(\@missing, [], 'every wfengine metric is served');

	# the names the dashboard uses are all served
	my $dash = do { local (@ARGV, $/) = ("$root/monitoring/grafana-dashboard.json"); <> } // '';
	my %used = map { $_ => 1 } ($dash =~ /\b(wf_[a-z0-9_]+)/g);
	my @unknown = grep { !/^wf_engine_[a-z_]+_bucket$/ && $body !~ /^\Q$_\E[{ ]/m } sort keys %used;
	ok(%used > 10, 'the dashboard uses the metrics');
	is_deeply(\@unknown, [], 'every metric of the dashboard is served');

	like($body, qr/^wf_queue_ready\{[^}]*queue="mail"[^}]*tenant_id="default"[^}]*\} 1$/m,
		'a view\'s value, with its labels');
	like($body, qr/^wf_queue_ready\{[^}]*queue="mail"[^}]*tenant_id="acme"[^}]*\} 1$/m,
		'... of every tenant, to a login in wfengine_monitor');
	unlike($body, qr/078-05-1120/, 'and no run\'s input');
	like($body, qr/^wf_engine_timer_lag_seconds_bucket\{[^}]*le="\+Inf"[^}]*\} \d+$/m,
		'histogram buckets carry le, the last +Inf');
	like($body, qr/^wf_engine_runs_started_total\{[^}]*database="postgres"[^}]*\} \d+$/m,
		'every series carries its database');
	like($body, qr/^wf_engine_runs_started_total\{[^}]*database="m2"[^}]*\} 1$/m,
		'... and one exporter serves several databases without their series colliding');
	like($body, qr/^wf_timer_pending\{[^}]*database="m2"[^}]*\} 1$/m, '... the views too');
	like($body, qr/^pg_exporter_user_queries_load_error\{[^}\n]*\} 0$/m, 'the queries file loads');
	like($body, qr/^pg_exporter_last_scrape_error 0$/m, 'no query failed');
}

# ---------------------------------------------------------------------
# 4. the entries of dropped databases are given back
# ---------------------------------------------------------------------
# two entries (wfengine.metrics_databases): postgres takes one, d1 the
# other; d2 finds none and counts nothing; once d1 is dropped the launcher
# gives its entry back at its next read of pg_database and d2 counts.
# (An immediate stop first: the counters and their entries start empty.)
$node->append_conf('postgresql.conf', "wfengine.metrics_databases = 2\n");
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', 'SHOW wfengine.metrics_databases'), '2', 'wfengine.metrics_databases is 2');
$node->safe_psql('postgres', "SELECT wf.start_run('m')");
for my $d (qw(d1 d2))
{
	$node->safe_psql('postgres', "CREATE DATABASE $d");
	$node->safe_psql($d, q{CREATE EXTENSION wfengine;
SELECT wf.publish_definition('m', '{"steps": [{"name": "a", "queue": "mq"}]}')});
	$node->safe_psql($d, "SELECT wf.start_run('m')");
}
my $counts = sub {
	my ($d) = @_;
	return $node->safe_psql($d, q{SELECT string_agg(name || '=' || value, ',' ORDER BY name) FROM wf.engine_counters()
	  WHERE name IN ('runs_started', 'metrics_dropped_databases')});
};
like($counts->('d1'), qr/runs_started=1$/, 'd1 takes the second entry and counts');
like($counts->('d2'), qr/^metrics_dropped_databases=[1-9]\d*,runs_started=0$/,
	'd2 finds no entry: it counts nothing, and the commits it could not count are counted');
$node->safe_psql('postgres', 'DROP DATABASE d1 WITH (FORCE)');
$node->safe_psql('postgres', 'SELECT wf._wake_launcher()');
my $ok = 0;
for (1 .. 100)
{
	$node->safe_psql('d2', "SELECT wf.start_run('m')");
	if ($counts->('d2') =~ /runs_started=[1-9]/) { $ok = 1; last; }
	usleep(200_000);
}
ok($ok, 'once d1 is dropped the launcher gives its entry back, and d2 counts with it');
like($counts->('postgres'), qr/runs_started=1$/, 'the entry of postgres is kept, its counts unchanged');

$node->stop;
done_testing();
