
# Copyright (c) 2026, wfengine developers

# A fence names one delivery across a failover (issue 11): a claim that
# the old primary committed after the standby's last replayed WAL is lost
# with the promotion, and the promoted standby does not hand out its fence
# again.
#
#  1. A primary and a streaming standby; 40 runs wait at a task step, and
#     the standby has replayed all of it.
#  2. The standby stops (it will never see what follows).  On the primary
#     a worker claims all 40 tasks (committed), so the primary's fence
#     sequence runs past what the standby last replayed.
#  3. The primary stops; the standby starts without a primary and is
#     promoted (a new timeline).  The 40 claims are lost: the tasks are
#     ready, their fences those of before the claims.
#  4. The old holder's result is refused (its fence was never issued on
#     this history); a new claim hands out 40 fences, none of them a fence
#     of the lost claims, each higher than every fence of the old primary;
#     the old holder's result is then stale, the new holder's accepted,
#     and every run verifies.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;    # (also: initdb from a template)

# the timeline of the server's current WAL
my $timeline_q =
  "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int";

my $primary = PostgreSQL::Test::Cluster->new('wf_fence_primary');
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
SELECT wf.publish_definition('ship', '{"steps": [{"name": "ship", "queue": "ship_q"}]}');
SELECT count(wf.start_run('ship', jsonb_build_object('n', n))) FROM generate_series(1, 40) AS n;
});

$primary->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('wf_fence_standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);
is($standby->safe_psql('wf', "SELECT count(*) FROM wf.tasks WHERE status = 'ready'"),
	'40', 'the standby has the 40 ready tasks');

# ---------------------------------------------------------------------
# 2. claims the standby never sees
# ---------------------------------------------------------------------
$standby->stop;
my $old_tli = $primary->safe_psql('wf', $timeline_q);
my %old_fence = map { split /\|/ } split /\n/, $primary->safe_psql('wf',
	"SELECT task_id, fence FROM wf.claim_tasks('ship_q', 'w-old-primary', 40, '1 hour')");
is(scalar(keys %old_fence), 40, 'the old primary leased 40 tasks (committed)');
my ($max_old) = sort { $b <=> $a } values %old_fence;
$primary->stop;

# ---------------------------------------------------------------------
# 3. promotion of a standby that missed the claims
# ---------------------------------------------------------------------
$standby->append_conf('postgresql.conf', "primary_conninfo = ''");
$standby->start;
$standby->promote;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	'f', 'the standby is promoted');
is( $standby->safe_psql(
		'wf', "SELECT count(*) FROM wf.tasks WHERE status = 'ready' AND fence = 0 AND deliveries = 0"),
	'40',
	'the claims are lost with the failover');

# ---------------------------------------------------------------------
# 4. the lost claims' fences are not handed out again
# ---------------------------------------------------------------------
my ($t1) = sort { $a <=> $b } keys %old_fence;
my ($ret, $out, $err) = $standby->psql('wf',
	"SELECT wf.complete_task($t1, $old_fence{$t1}, '{\"by\": \"w-old-primary\"}')");
like($err, qr/fence \d+ was never issued for task $t1/,
	'the old holder\'s result is refused before any new claim');

my %new_fence = map { split /\|/ } split /\n/, $standby->safe_psql('wf',
	"SELECT task_id, fence FROM wf.claim_tasks('ship_q', 'w-new-primary', 40, '1 hour')");
is(scalar(keys %new_fence), 40, 'the new primary leases the 40 tasks again');
my %old_values = map { $_ => 1 } values %old_fence;
is(scalar(grep { $old_values{$_} } values %new_fence),
	0, 'no fence of a lost claim is handed out again, for any task');
is(scalar(grep { $_ <= $max_old } values %new_fence),
	0, 'every new fence is above every fence of the old primary');
cmp_ok($standby->safe_psql('wf', $timeline_q),
	'>', $old_tli, 'the promoted standby is on a higher timeline');

is( $standby->safe_psql('wf',
		"SELECT wf.complete_task($t1, $old_fence{$t1}, '{\"by\": \"w-old-primary\"}')"),
	'stale', 'after the new claim the old holder\'s result is stale');
my $accepted = 0;
for my $t (sort keys %new_fence)
{
	$accepted++
	  if $standby->safe_psql('wf',
		"SELECT wf.complete_task($t, $new_fence{$t}, '{\"by\": \"w-new-primary\"}')") eq
	  'accepted';
}
is($accepted, 40, 'every new holder\'s result is accepted');
is( $standby->safe_psql(
		'wf',
		"SELECT count(*) FROM wf.runs WHERE status = 'completed' AND output->>'by' = 'w-new-primary'"),
	'40',
	'every run completed with the new holder\'s result');
is( $standby->safe_psql(
		'wf',
		"SELECT count(*) FILTER (WHERE wf.verify_run(run_id)) || '/' || count(*) FROM wf.runs"),
	'40/40',
	'every run verifies');

$standby->stop;
done_testing();
