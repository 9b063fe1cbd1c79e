
# Copyright (c) 2026, wfengine developers

# A streaming standby runs no engine worker and fires nothing; after
# promotion it fires what is due (issue 3).
#
#  1. A primary with wfengine preloaded, and a streaming standby made from
#     its base backup (same configuration).
#  2. On the standby neither the launcher nor a worker runs, and
#     wf.worker_status() is empty.
#  3. Timers that fall due on the primary are fired by the primary's
#     worker; the standby receives the result through replication, and
#     reads a run's context whole (wf.run_context, with a large output
#     kept in the history only).
#  4. With the primary's worker disabled (wfengine.enabled = off, set with
#     ALTER SYSTEM, which is not replicated), more timers fall due: the
#     standby has them, due, and fires none of them.
#  5. The primary stops; the standby is promoted: its launcher and worker
#     start and fire every due timer exactly once; every run verifies.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;    # (also: initdb from a template)

my $primary = PostgreSQL::Test::Cluster->new('wf_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
max_worker_processes = 16
wfengine.naptime = '1s'
));
$primary->start;
$primary->safe_psql('postgres', 'CREATE DATABASE wf');
$primary->safe_psql('wf', 'CREATE EXTENSION wfengine');
$primary->safe_psql(
	'wf', q{
SELECT wf.publish_definition('nap', '{"steps": [
  {"name": "nap", "type": "sleep", "duration": "1s"},
  {"name": "after", "queue": "after_q"}]}');
});
ok( $primary->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'wfengine worker' AND datname = 'wf'"
	),
	'the primary runs a worker');

$primary->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('wf_standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);

# ---------------------------------------------------------------------
# 2. nothing runs on the standby
# ---------------------------------------------------------------------
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', 'the standby is in recovery');
is($standby->safe_psql('wf', 'SELECT wf.preloaded()'),
	't', 'wfengine is preloaded on the standby too');
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'wfengine%'"),
	'0',
	'no wfengine launcher or worker runs on the standby');
is($standby->safe_psql('wf', 'SELECT count(*) FROM wf.worker_status()'),
	'0', 'wf.worker_status() is empty on the standby');

# ---------------------------------------------------------------------
# 3. the primary fires what falls due
# ---------------------------------------------------------------------
$primary->safe_psql('wf',
	"SELECT count(wf.start_run('nap', jsonb_build_object('n', n))) FROM generate_series(1, 5) AS n"
);
ok( $primary->poll_query_until(
		'wf', "SELECT count(*) = 5 FROM wf.events WHERE type = 'sleep_finished'"),
	'the primary fires its due timers');
$primary->wait_for_catchup($standby);
is( $standby->safe_psql(
		'wf',
		"SELECT count(*) FROM wf.timers WHERE status = 'fired'"),
	'5',
	'the standby sees them fired');
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'wfengine%'"),
	'0',
	'still no wfengine process on the standby');
# a run whose last step returns a large output (kept in the history only,
# its context refers to it): the standby reads the context whole
my ($bt, $bf, $big_run) = split /\|/,
  $primary->safe_psql('wf', q{SELECT task_id, fence, run_id FROM wf.claim_tasks('after_q', 'w', 1)});
is( $primary->safe_psql('wf',
		"SELECT wf.complete_task($bt, $bf, jsonb_build_object('pad', repeat('p', 300)))"),
	'accepted', 'a run completes with a large output');
$primary->wait_for_catchup($standby);
is( $standby->safe_psql(
		'wf',
		"SELECT (r.context->'steps'->'after' ? 'output_seq')::text || ' '"
		  . " || length(wf.run_context(r.run_id)->'steps'->'after'->'output'->>'pad')"
		  . " FROM wf.runs r WHERE r.run_id = '$big_run'"),
	'true 300',
	'the standby reads its context whole with wf.run_context');

# ---------------------------------------------------------------------
# 4. due timers the primary does not fire
# ---------------------------------------------------------------------
$primary->safe_psql('postgres', 'ALTER SYSTEM SET wfengine.enabled = off');
$primary->reload;
my $ticks = $primary->safe_psql('wf',
	"SELECT ticks FROM wf.worker_status() WHERE database = 'wf'");
ok( $primary->poll_query_until(
		'wf',
		"SELECT ticks >= $ticks + 3 FROM wf.worker_status() WHERE database = 'wf'"),
	'the primary worker has taken the reload');
$primary->safe_psql('wf',
	"SELECT count(wf.start_run('nap', jsonb_build_object('n', n))) FROM generate_series(6, 15) AS n"
);
$primary->wait_for_catchup($standby);
ok( $standby->poll_query_until(
		'wf',
		"SELECT count(*) = 10 FROM wf.timers WHERE status = 'pending' AND fire_at < clock_timestamp()"
	),
	'the standby has 10 due timers');
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'wfengine%'"),
	'0',
	'and no process that would fire them');
is( $primary->safe_psql(
		'wf', "SELECT count(*) FROM wf.timers WHERE status = 'pending'"),
	'10',
	'the disabled primary has not fired them either');

# ---------------------------------------------------------------------
# 5. promotion
# ---------------------------------------------------------------------
$primary->stop;
$standby->promote;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	'f', 'the standby is promoted');
ok( $standby->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'wfengine launcher'"
	),
	'after promotion the launcher starts');
ok( $standby->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'wfengine worker' AND datname = 'wf'"
	),
	'and the worker of the database');
ok( $standby->poll_query_until(
		'wf', "SELECT count(*) = 0 FROM wf.timers WHERE status = 'pending'"),
	'the promoted standby fires every due timer');
is( $standby->safe_psql(
		'wf', q{
SELECT count(*) FROM wf.runs r
WHERE (SELECT count(*) FROM wf.events e
       WHERE e.run_id = r.run_id AND e.type = 'sleep_finished') <> 1}),
	'0',
	'every run passed its sleep exactly once');
is( $standby->safe_psql(
		'wf',
		"SELECT sum(fired) >= 10 FROM wf.worker_status() WHERE database = 'wf'"),
	't',
	'fired by the new primary\'s worker');
is( $standby->safe_psql(
		'wf',
		"SELECT count(*) FILTER (WHERE wf.verify_run(run_id)) || '/' || count(*) FROM wf.runs"),
	'15/15',
	'every run verifies');

$standby->stop;
done_testing();
