
# Copyright (c) 2026, wfengine developers

# A rolling upgrade of a sharded cluster (issue 30, "Across shards";
# docs/scale-out.md, "A rolling upgrade"), as an operator does it.
#
# The last release (the last line of sql/releases, built from its commit
# as docs/upgrading.md "Releases" says) is installed on a router and two
# shards, each an installation of its own.  Eight tenants are routed; each
# leaves runs in flight through the router: a task leased, an approval with
# its tokens issued, a run asleep on a timer.  Two of them (one per shard)
# keep a load going through the router (start, claim, complete) for the
# whole test.  Then one shard at a time: stop it, install the version in
# development there (library and scripts, what `make install` puts in
# place), start it (the new library serves the old schema), ALTER
# EXTENSION wfengine UPDATE.  While the shards are on two versions, and at
# the end, the router (still the release's) serves every tenant: the leased
# task completes with its fence from before, the token from before decides
# the approval, the timer fires, wf.list_runs lists.  At the end every run
# is driven to its end, every acknowledged start and completion is present
# once, and every run verifies.  Last the router is given the router
# extension in development and updated (ALTER EXTENSION wfengine_router
# UPDATE), and routes what the new shards added (wf.start_and_claim,
# wf.run_context).  A shard being restarted is refused with
# 08006 (naming it), never anything else.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;

my $sharedir = `pg_config --sharedir`;
chomp $sharedir;
plan skip_all => "PL/Proxy is not installed ($sharedir/extension/plproxy.control)"
  unless -f "$sharedir/extension/plproxy.control";

my ($inst_s1, $release, $commit) = wf_release_root('roll_s1');
plan skip_all => $release unless defined $inst_s1;
my ($current) = slurp_file('wfengine.control') =~ /default_version\s*=\s*'([^']+)'/;
note "rolling from $release ($commit) to $current";
isnt($release, $current, "the last release ($release) is not the version in development ($current)");
my %inst = (s1 => $inst_s1, s2 => wf_clone_root($inst_s1, 'roll_s2'));
my $inst_router = wf_clone_root($inst_s1, 'roll_router');

my $db = 'wf';
my %shard;
for my $n (qw(s1 s2))
{
	$shard{$n} = wf_shard_node("wf_roll_$n", "wfengine.naptime = 200\n", install_path => $inst{$n});
	$shard{$n}->safe_psql('postgres', "CREATE DATABASE $db");
	$shard{$n}->safe_psql($db, 'CREATE EXTENSION wfengine');
}
sub extversion
{
	my ($node, $d, $ext) = @_;
	return $node->safe_psql($d, "SELECT extversion FROM pg_extension WHERE extname = '$ext'");
}
is(join(',', map { extversion($shard{$_}, $db, 'wfengine') } qw(s1 s2)), "$release,$release",
	"both shards start on the release's library and schema");

my $router = PostgreSQL::Test::Cluster->new('wf_roll_router', install_path => $inst_router);
$router->init;
$router->start;
$router->safe_psql('postgres', 'CREATE DATABASE wfengine_router');
$router->safe_psql('wfengine_router', 'CREATE EXTENSION wfengine_router CASCADE');
my $router_version = extversion($router, 'wfengine_router', 'wfengine_router');
sub r_sql { return $router->safe_psql('wfengine_router', $_[0]); }
my $shards_json = join(', ',
	map { sprintf('"%s": "host=%s port=%d dbname=%s"', $_, $shard{$_}->host, $shard{$_}->port, $db) } qw(s1 s2));
r_sql("SELECT wfrouter.configure('{$shards_json}', 4)");

# eight tenants, each with one login for everything (each node's share
# in one psql: a psql costs a fraction of a second of a loaded machine)
my @tenants = map { "u$_" } 1 .. 8;
my %roles = map { $_ => "CREATE ROLE ${_}_all LOGIN IN ROLE wfengine_admin, wfengine_worker, wfengine_approver, wf_tenant_$_;" } @tenants;
$shard{$_}->safe_psql($db, join("\n", map { "SELECT wf.create_tenant('$_'); $roles{$_}" } @tenants)) for qw(s1 s2);
r_sql(join("\n", map { "CREATE ROLE wf_tenant_$_ NOLOGIN; $roles{$_}" } @tenants));
my %home = map { split /\|/ } split /\n/, r_sql(join("\n", map { "SELECT '$_|' || wfrouter.tenant_shard('$_');" } @tenants));
my %on = (s1 => [ grep { $home{$_} eq 's1' } @tenants ], s2 => [ grep { $home{$_} eq 's2' } @tenants ]);
ok(@{ $on{s1} } && @{ $on{s2} }, "tenants on both shards (s1: @{$on{s1}}; s2: @{$on{s2}})");

sub as_tenant
{
	my ($t, $sql) = @_;
	return $router->safe_psql('wfengine_router', $sql, extra_params => [ '-U', "${t}_all" ]);
}

# per tenant, in one psql through the router (one statement after the
# other, each its own transaction, as separate calls): its definitions,
# and runs in flight, left by the release: a task leased (its id and
# fence kept), an approval with its token (kept), a run asleep; the lines
# wanted are tagged "name:"
my (%leased, %token, %asleep);
for my $t (@tenants)
{
	my %got = map { /^(\w+):(.*)$/ ? ($1 => $2) : () } split /\n/, as_tenant($t, q{
SELECT wf.publish_definition('job', '{"steps": [{"name": "work", "queue": "work"},
  {"name": "nap", "type": "sleep", "duration": "1s"}, {"name": "more", "queue": "work"}]}') IS NOT NULL;
SELECT wf.publish_definition('ok', '{"steps": [{"name": "ok", "type": "approval", "approvers": ["ann"],
  "notify_queue": "approvals"}, {"name": "after", "queue": "work"}]}') IS NOT NULL;
SELECT wf.publish_definition('load', '{"steps": [{"name": "one", "queue": "load"}]}') IS NOT NULL;
SELECT wf.start_run('job') IS NOT NULL;
SELECT 'leased:' || task_id || '|' || fence FROM wf.claim_tasks('work', 'w', 1, '1 hour');
SELECT wf.start_run('ok') IS NOT NULL;
SELECT c.task_id AS nt, c.fence AS nf, tk.token AS tok
FROM wf.claim_tasks('approvals', 'mailer', 1) c, LATERAL wf.issue_approval_tokens(c.task_id, c.fence) tk
WHERE tk.decision = 'approve' \gset
SELECT wf.complete_task(:nt, :nf, '{}') IS NOT NULL;
SELECT 'token:' || :'tok';
SELECT 'asleep:' || wf.start_run('job', '{"sleeper": true}');
-- the one left ready ("work" of the sleeper) is completed: it sleeps
SELECT 'first:' || string_agg(wf.complete_task(task_id, fence, '{}'), ',') FROM wf.claim_tasks('work', 'w', 5);
});
	$leased{$t} = [ split /\|/, $got{leased} // '' ];
	$token{$t} = $got{token};
	$asleep{$t} = $got{asleep};
	is($got{first}, 'accepted', "$t: the sleeper's first step done (and only that)");
}
like(join(',', map { $token{$_} } @tenants), qr/^(wfa_[A-Za-z0-9_-]{43},?){8}$/, 'an approval token per tenant, issued by the release');

# the load: a tenant of each shard, through the router, for the whole test
my (%acked_runs, @acked_done, %refused, @odd);
my %load = map {
	my $t = $on{$_}[0];
	($t => $router->background_psql('wfengine_router', on_error_stop => 0, extra_params => [ '-U', "${t}_all" ]))
} qw(s1 s2);
sub load_step
{
	for my $t (sort keys %load)
	{
		my $s = $load{$t};
		my $out = $s->query(q{SELECT 'run:' || wf.start_run('load');
SELECT 'done:' || c.task_id || ':' || c.fence || ':' || wf.complete_task(c.task_id, c.fence, '{"ok": true}')
FROM wf.claim_tasks('load', 'w', 4) c;});
		my $err = $s->{stderr} // '';
		$s->{stderr} = '';
		for (split /\n/, $out)
		{
			$acked_runs{$1} = $t if /^run:(\S+)$/;
			push @acked_done, [ $t, $1, $2 ] if /^done:(\d+):(\d+):accepted$/;
		}
		next unless $err =~ /ERROR/;
		if ($err =~ /ERROR:\s+08006: .*shard "(s\d)"/ || $err =~ /ERROR:.*shard "(s\d)" cannot be reached/)
		{
			$refused{$1}++;
		}
		elsif ($err =~ /40001|55P03|57P01|terminating connection/)
		{
			$refused{other}++;
		}
		else
		{
			push @odd, $err;
		}
	}
}
for my $t (sort keys %load)
{
	# (for the whole test: the timeout counts per query, not from the start)
	$load{$t}->set_query_timer_restart;
	$load{$t}->query_safe('\set VERBOSITY verbose');
}
load_step() for 1 .. 10;

# one shard at a time
for my $n (qw(s1 s2))
{
	my $other = $n eq 's1' ? 's2' : 's1';
	$shard{$n}->stop('fast');
	load_step() for 1 .. 5;
	ok($refused{$n}, "while $n is down the router answers 08006 naming it ($refused{$n} refused calls)");
	wf_install_current($inst{$n});
	$shard{$n}->start;
	load_step() for 1 .. 5;
	is(extversion($shard{$n}, $db, 'wfengine'), $release, "$n: the new library serves the release's schema");
	for my $t (@{ $on{$n} })
	{
		is(as_tenant($t, q{SELECT count(*) FROM wf.list_runs('{"definition": "job"}')}), '2',
			"$t on $n: routed calls served by the new library on the old schema");
	}
	$shard{$n}->safe_psql($db, 'ALTER EXTENSION wfengine UPDATE');
	load_step() for 1 .. 5;
	is(extversion($shard{$n}, $db, 'wfengine'), $current, "$n updated to $current");
	is(extversion($shard{$other}, $db, 'wfengine'), $n eq 's1' ? $release : $current,
		"$other is on " . ($n eq 's1' ? $release : $current));

	# what the release left on the rolled shard goes on
	for my $t (@{ $on{$n} })
	{
		is(as_tenant($t, "SELECT wf.complete_task($leased{$t}[0], $leased{$t}[1], '{}')"), 'accepted',
			"$t on $n: the task leased before the roll completes with its fence");
		is(as_tenant($t, "SELECT wf.decide('$token{$t}', 'approve', 'ann')"), 'accepted',
			"$t on $n: the token issued before the roll decides the approval");
	}
	# and the shard not rolled yet still serves its tenants through the router
	for my $t (@{ $on{$other} })
	{
		is(as_tenant($t, q{SELECT count(*) FROM wf.list_runs('{}')}) >= 3 ? 'ok' : 'no', 'ok',
			"$t on $other: served while $n is on the other version");
	}
}
is(extversion($router, 'wfengine_router', 'wfengine_router'), $router_version,
	"the router stayed the release's ($router_version) throughout");

# every run to its end
my $deadline = time + 90;
my $left;
while (time < $deadline)
{
	load_step();
	for my $t (@tenants)
	{
		as_tenant($t, q{SELECT wf.complete_task(c.task_id, c.fence, '{}') FROM wf.claim_tasks('work', 'w', 10) c;
SELECT wf.complete_task(c.task_id, c.fence, '{}') FROM wf.claim_tasks('load', 'w', 10) c});
	}
	$left = 0;
	$left += $shard{$_}->safe_psql($db, q{SELECT count(*) FROM wf.runs WHERE status <> 'completed'}) for qw(s1 s2);
	last if $left == 0;
	usleep(200_000);
}
$_->quit for values %load;
is($left, 0, 'every run ended completed (the asleep ones woke on the new library)');
is(scalar(@odd), 0, 'the load saw no error but a shard down or a retryable one') or diag join("\n", @odd[ 0 .. 4 ]);

# every acknowledged start and completion once, every run verifies
my $ids = join(',', map { "'$_'" } sort keys %acked_runs);
my $found = 0;
$found += $shard{$_}->safe_psql($db, "SELECT count(*) FROM wf.runs WHERE run_id IN ($ids)") for qw(s1 s2);
is($found, scalar(keys %acked_runs), scalar(keys %acked_runs) . ' acknowledged starts: each present once');
my $done_ok = 0;
for my $n (qw(s1 s2))
{
	my @mine = grep { $home{ $_->[0] } eq $n } @acked_done;
	next unless @mine;
	my $vals = join(',', map { "($_->[1], $_->[2])" } @mine);
	$done_ok += $shard{$n}->safe_psql($db, qq{SELECT count(*) FROM (VALUES $vals) a(task_id, fence)
WHERE (SELECT count(*) FROM wf.events e WHERE e.type = 'task_completed'
       AND (e.payload->>'task_id')::bigint = a.task_id AND (e.payload->>'fence')::bigint = a.fence) = 1});
}
is($done_ok, scalar(@acked_done), scalar(@acked_done) . ' acknowledged completions: each in its history once');
for my $n (qw(s1 s2))
{
	is($shard{$n}->safe_psql($db, q{SELECT count(*) FILTER (WHERE NOT wf._verify_moved_run(tenant_id, run_id)) || '/' || count(*) FROM wf.runs}) =~ /^0\/\d+$/ ? 'ok' : 'no',
		'ok', "$n: every run verifies");
}
note sprintf('refused calls: %s', join(', ', map { "$_ $refused{$_}" } sort keys %refused));

# last, the router: the version in development's router extension
# installed there and updated, which routes what the new shards added
wf_install_current($inst_router, router => 1);
$router->restart;
$router->safe_psql('wfengine_router', 'ALTER EXTENSION wfengine_router UPDATE');
my ($router_current) = slurp_file('router/wfengine_router.control') =~ /default_version\s*=\s*'([^']+)'/;
is(extversion($router, 'wfengine_router', 'wfengine_router'), $router_current, "the router updated to $router_current");
for my $n (qw(s1 s2))
{
	my $t = $on{$n}[1] // $on{$n}[0];
	my ($step, $deliveries, $task, $fence, $run) = split /\|/, as_tenant($t,
		q{SELECT step || '|' || deliveries || '|' || task_id || '|' || fence || '|' || run_id FROM wf.start_and_claim('load', '{}', 'eager')});
	is("$step:$deliveries", 'one:1', "$t on $n: wf.start_and_claim through the updated router");
	# an output large enough to be kept in the history only (0.3.0)
	is(as_tenant($t, "SELECT wf.complete_task($task, $fence, jsonb_build_object('pad', repeat('p', 300)))"),
		'accepted', '... its lease completes');
	is(as_tenant($t, "SELECT length(wf.run_context('$run')->'steps'->'one'->'output'->>'pad')"), '300',
		'... and wf.run_context, routed, gives its output whole');
	is($shard{$n}->safe_psql($db, qq{SELECT count(*) FILTER (WHERE NOT wf._verify_moved_run(tenant_id, run_id) OR status <> 'completed') FROM wf.runs WHERE tenant_id = '$t'}),
		'0', "... and its run completes and verifies");
}

done_testing();
