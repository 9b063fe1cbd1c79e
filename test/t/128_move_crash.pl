
# Copyright (c) 2026, wfengine developers

# Crashes at the cut-over of a move (issue 30): "a move can be cancelled and
# resumed after a crash of either side at any point, leaving the partition
# served by exactly one shard".  A router and two shards; a load through the
# router on the moving tenant (acknowledged starts and completions logged);
# the partition moves back and forth, and each move is crashed at its
# cut-over (docs/scale-out.md, "Moving a partition"):
#   (a) while the source's wf.move_out_cutover waits for the partition lock
#       (a transaction of the moving tenant held open on the source): the
#       source crashes; the target crashes;
#   (b) after the source has given the partition away in its map, while the
#       target's wf.move_in_cutover is held back (a session on the target
#       holds wfshard.partitions in SHARE mode: the cut-over's last step,
#       wf.configure_shard rewriting the map, waits for it; the calls of
#       tenants, which read the map, do not): the target crashes (then the move is run again, and once
#       cancelled); the source crashes; the router's session running
#       wfrouter.move_partition is killed (SIGKILL; then the move is run
#       again, and once cancelled, while the target's cut-over still waits).
# A crash is SIGKILL of the postmaster and all its processes.  After each,
# the crashed node is started again and the move run again or cancelled;
# then: the partition is served by exactly one shard (the tenant's calls
# through the router succeed, the other shard refuses with 55W01, both
# shards' maps are the router's), every acknowledged start and completion
# is on the owner exactly once, every run there verifies, nothing of the
# tenant is left on the other shard, and no replication slot, publication
# or subscription is left.

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

my $db = 'wf';
my ($shardref, $router) = wf_shards(prefix => 'wf_mc', db => $db, partitions => 16,
	names => [qw(s1 s2)],
	# the subscription reconnects to a restarted source without the
	# default 5 s pause; the copy's tables are copied six at a time
	conf => "wfengine.naptime = 200\nwal_retrieve_retry_interval = 200\nmax_worker_processes = 16\n"
	  . "max_logical_replication_workers = 8\nmax_sync_workers_per_subscription = 6\n");
my %shard = %$shardref;
# the router's postmaster restarts its sessions after one is killed (the
# test framework sets restart_after_crash = off)
$router->append_conf('postgresql.conf', "restart_after_crash = on\n");
$router->reload;
sub r_sql { return $router->safe_psql('wfengine_router', $_[0]); }

my $mt = 'mc1';
for my $n (values %shard)
{
	$n->safe_psql($db, "SELECT wf.create_tenant('$mt'); CREATE ROLE ${mt}_all LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_$mt;");
}
r_sql("CREATE ROLE wf_tenant_$mt NOLOGIN; CREATE ROLE ${mt}_all LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_$mt;");
sub via_router
{
	my ($sql) = @_;
	return $router->psql('wfengine_router', "\\set VERBOSITY verbose\n$sql", extra_params => [ '-U', "${mt}_all" ]);
}
my $def = q{{"steps": [{"name": "work", "queue": "work"}, {"name": "more", "queue": "work"}]}};
my ($rc, $out, $err) = via_router("SELECT wf.publish_definition('job', '$def')");
die "publish_definition: $err" if $rc;
my $p = r_sql("SELECT wfrouter.tenant_partition('$mt')");

# the load: one session of the moving tenant through the router starts runs,
# claims and completes; every acknowledged call is logged
my (%acked_runs, @acked_done);
my $load;
sub load_connect
{
	$load = $router->background_psql('wfengine_router', on_error_stop => 0,
		extra_params => [ '-U', "${mt}_all" ]);
}
load_connect();
sub load_step
{
	my $out = $load->query(q{SELECT 'run:' || wf.start_run('job');
SELECT 'done:' || c.task_id || ':' || c.fence || ':' || wf.complete_task(c.task_id, c.fence, '{"ok": true}')
FROM wf.claim_tasks('work', 'w', 4) c;});
	my $err = $load->{stderr} // '';
	$load->{stderr} = '';
	for (split /\n/, $out)
	{
		$acked_runs{$1} = 1 if /^run:(\S+)$/;
		push @acked_done, [ $1, $2 ] if /^done:(\d+):(\d+):accepted$/;
	}
	# refused during the cut-over (40001), or a shard down (08006)
	die "the load failed with something else than a refusal or a shard down: $err"
	  if $err =~ /ERROR/ && $err !~ /is moving to another shard|cannot be reached/;
}
load_step() for 1 .. 20;

# SIGKILL of the postmaster and every process of the server
sub crash
{
	my ($node) = @_;
	my $pm = $node->{_pid};
	my @kids = server_children($pm);
	$node->kill9;
	kill('KILL', @kids);
	for (1 .. 500)
	{
		last unless grep { -e "/proc/$_" } ($pm, @kids);
		usleep(10_000);
	}
}

# the router's session running a move (or any statement), in the background
sub start_bg
{
	my ($sql) = @_;
	my $m = $router->background_psql('wfengine_router', on_error_stop => 0);
	$m->query_until(qr/started/, "\\echo started\nSELECT pg_backend_pid() AS mover \\gset\n$sql;\n\\echo finished\n");
	return $m;
}
# waits for it, with the load going on; returns (stdout, stderr)
sub end_bg
{
	my ($m, $what) = @_;
	my $t0 = time;
	while (time - $t0 < 60)
	{
		eval { $m->{run}->pump_nb };
		last if ($m->{stdout} // '') =~ /finished/ || !$m->{run}->pumpable;
		load_step();
		usleep(20_000);
	}
	my ($o, $e) = ($m->{stdout} // '', $m->{stderr} // '');
	die "$what did not end in 60 s: $o $e" unless $o =~ /finished/ || !$m->{run}->pumpable;
	eval { $m->quit };
	return ($o, $e);
}
sub wait_for
{
	my ($what, $cond) = @_;
	my $t0 = time;
	until ($cond->())
	{
		die "timed out waiting for $what: " . r_sql("SELECT coalesce(string_agg(m::text, E'\\n'), 'no move') FROM wfrouter.moves m WHERE finished IS NULL")
		  if time - $t0 > 60;
		load_step();
		usleep(20_000);
	}
}
sub move_phase
{
	my ($phase, $also) = @_;
	return r_sql("SELECT count(*) FROM wfrouter.moves WHERE finished IS NULL AND phase = '$phase' AND tables_total > 0 AND "
		  . ($also // 'true')) eq '1';
}
sub owner_in { return $_[0]->safe_psql($db, "SELECT shard FROM wfshard.partitions WHERE partition = $p"); }

# the partition is served by exactly one shard, owner, and nothing of the
# move is left
my @tables = split /,/, $shard{s1}->safe_psql($db,
	"SELECT string_agg(t, ',') FROM unnest(wf._partition_tables()) t WHERE t NOT IN ('definitions', 'tenant_policies')");
sub check
{
	my ($owner, $label) = @_;
	my ($other) = grep { $_ ne $owner } sort keys %shard;
	load_step() for 1 .. 5;
	my ($unfinished, $rmap, $rshard) = split /\|/,
	  r_sql("SELECT (SELECT count(*) FROM wfrouter.moves WHERE finished IS NULL) || '|' || wfrouter.shard_map()::text || '|' || wfrouter.tenant_shard('$mt')");
	is($unfinished, '0', "$label: no move is under way");
	my ($rc, $out, $err) = via_router("SELECT count(*) FROM wf.claim_tasks('none', 'w', 1)");
	ok($rc == 0 && $out eq '0', "$label: the tenant's calls through the router succeed") or diag $err;
	($rc, $out, $err) = $shard{$other}->psql($db, "\\set VERBOSITY verbose\nSELECT count(*) FROM wf.claim_tasks('none', 'w', 1)",
		extra_params => [ '-U', "${mt}_all" ]);
	like($err, qr/55W01/, "$label: shard $other refuses the tenant with 55W01");
	($rc, $out, $err) = $shard{$owner}->psql($db, "SELECT count(*) FROM wf.claim_tasks('none', 'w', 1)",
		extra_params => [ '-U', "${mt}_all" ]);
	ok($rc == 0, "$label: shard $owner serves the tenant directly") or diag $err;

	# on the owner: its map, the acknowledged starts and completions, and
	# whether every run verifies
	my $ids = join(',', map { "'$_'" } sort keys %acked_runs);
	my $done = join(',', map { "($_->[0], $_->[1])" } @acked_done);
	my ($omap, $starts, $completions, $unverified, $runs) = split /\|/, $shard{$owner}->safe_psql($db, qq{
SELECT (SELECT array_agg(shard ORDER BY partition) FROM wfshard.partitions)::text
  || '|' || (SELECT count(DISTINCT run_id) || '/' || count(*) FROM wf.runs WHERE run_id IN ($ids))
  || '|' || (SELECT count(*) FROM (VALUES $done) a(task_id, fence)
             WHERE (SELECT count(*) FROM wf.events e WHERE e.type = 'task_completed'
                    AND (e.payload->>'task_id')::bigint = a.task_id AND (e.payload->>'fence')::bigint = a.fence) = 1)
  || '|' || (SELECT count(*) FILTER (WHERE NOT wf._verify_moved_run(tenant_id, run_id)) || '|' || count(*)
             FROM wf.runs WHERE tenant_id = '$mt')});
	# on the other shard: its map, what is left of the tenant
	my ($xmap, $left) = split /\|/, $shard{$other}->safe_psql($db,
		"SELECT (SELECT array_agg(shard ORDER BY partition) FROM wfshard.partitions)::text || '|' || ("
		  . join(' + ', map { "(SELECT count(*) FROM wf.$_ WHERE tenant_id = '$mt')" } @tables) . ')');
	is("$omap $xmap", "$rmap $rmap", "$label: both shards' maps are the router's")
	  and is($rshard, $owner, "$label: ... which gives partition $p to $owner");
	is($starts, scalar(keys %acked_runs) . '/' . scalar(keys %acked_runs),
		"$label: every acknowledged start (" . scalar(keys %acked_runs) . ") is on $owner once");
	is($completions, scalar(@acked_done), "$label: every acknowledged completion (" . scalar(@acked_done) . ") is in its history once");
	is($unverified, '0', "$label: every run on $owner ($runs) verifies");
	is($left, '0', "$label: nothing of the tenant is left on $other");
	is(join(' ', map { $shard{$_}->safe_psql($db, "SELECT (SELECT count(*) FROM pg_replication_slots) || '/' || (SELECT count(*) FROM pg_publication) || '/' || (SELECT count(*) FROM pg_subscription)") } sort keys %shard),
		'0/0/0 0/0/0', "$label: no replication slot, publication or subscription is left");
}

# one crash case: the move from the partition's shard to the other, held
# at the cut-over (a: the source's lock; b: the target's transaction),
# victim crashed (source, target, or router: the mover's backend), the
# crashed node started again, and how the move is answered
sub crash_case
{
	my ($hold, $victim, $how) = @_;
	my $src = r_sql("SELECT wfrouter.tenant_shard('$mt')");
	my ($dst) = grep { $_ ne $src } sort keys %shard;
	my $label = "($hold) $victim crashed, $how";
	note "case $label: partition $p from $src to $dst";
	my $holder;
	if ($hold eq 'a')
	{
		# a transaction of the moving tenant open on the source
		$holder = $shard{$src}->background_psql($db, on_error_stop => 0, extra_params => [ '-U', "${mt}_all" ]);
		$holder->query_safe("BEGIN; SELECT count(*) FROM wf.claim_tasks('held_q', 'holder', 1)");
	}
	else
	{
		# hold the target's map from before the move begins (nothing of the
		# move writes it before the cut-over): the cut-over's last step
		# (wf.configure_shard, rewriting wfshard.partitions) waits.  Taken
		# once the copy had begun, it could come after a quick move had
		# ended ("no move")
		$holder = $shard{$dst}->background_psql($db, on_error_stop => 0);
		$holder->query_safe('BEGIN; LOCK TABLE wfshard.partitions IN SHARE MODE');
	}
	my $m = start_bg("SELECT 'moved:' || wfrouter.move_partition($p, '$dst')");
	if ($hold eq 'a')
	{
		wait_for('the cut-over waiting for the source\'s lock', sub { move_phase('cutting over', "note LIKE 'waiting for pid%'") });
	}
	else
	{
		# (the copy and the catch-up are behind it then)
		wait_for('the source giving the partition away and the target\'s cut-over waiting',
			sub {
				owner_in($shard{$src}) eq $dst && owner_in($shard{$dst}) eq $src
				  && $shard{$dst}->safe_psql($db, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT wf.move_in_cutover%' AND wait_event_type = 'Lock'") eq '1';
			});
	}
	my $node = $victim eq 'source' ? $shard{$src} : $victim eq 'target' ? $shard{$dst} : undef;
	if ($node)
	{
		crash($node);
		eval { $holder->{run}->kill_kill } if $node == ($hold eq 'a' ? $shard{$src} : $shard{$dst});
		load_step() for 1 .. 3;
		if ($hold eq 'b' && $victim eq 'source')
		{
			# the target's cut-over commits while the source is down
			$holder->query_safe('COMMIT');
			$holder->quit;
			wait_for('the target taking the partition', sub { owner_in($shard{$dst}) eq $dst });
		}
		$node->start;
	}
	else
	{
		# SIGKILL of the router's backend running the move (the router
		# restarts every session; the target's cut-over goes on waiting)
		my $pid = r_sql("SELECT pid FROM pg_stat_activity WHERE query LIKE '%wfrouter.move_partition%' AND pid <> pg_backend_pid()");
		kill('KILL', $pid);
		eval { $load->{run}->kill_kill };
		for (1 .. 500)
		{
			# psql may exit before it has read its statement (the server still
			# in crash recovery refuses the connection): IPC::Run then dies of
			# the broken pipe instead of returning psql's status
			last if (eval { $router->psql('wfengine_router', 'SELECT 1') } // 1) == 0;
			usleep(20_000);
		}
		load_connect();
	}
	# the tenant's open transaction on the source ends (case a)
	eval { $holder->query_safe('COMMIT'); $holder->quit; } if $hold eq 'a' && $victim ne 'source';
	# the mover's session: what it said
	my ($o, $e) = end_bg($m, 'the interrupted move');
	note "the interrupted move: " . ($o =~ /moved:\d+/ ? 'finished' : 'stopped: ' . join(' ', grep { /ERROR|FATAL|server closed/ } split /\n/, $e));
	my $owner = $dst;
	if ($o !~ /moved:\d+/ || r_sql("SELECT count(*) FROM wfrouter.moves WHERE finished IS NULL") ne '0')
	{
		# run again or cancelled; after the router's crash, while the
		# target's cut-over of the killed session still waits, which ends
		# half a second later
		my $sql = $how eq 'resume'
		  ? "SELECT 'moved:' || wfrouter.move_partition($p, '$dst')"
		  : "SELECT 'cancel:' || wfrouter.cancel_move($p)";
		my $ans = start_bg($sql);
		if ($victim eq 'router')
		{
			usleep(500_000);
			load_step() for 1 .. 3;
			$holder->query_safe('COMMIT');
			$holder->quit;
		}
		my ($ao, $ae) = end_bg($ans, $how);
		if ($how eq 'resume')
		{
			like($ao, qr/moved:\d+/, "$label: wfrouter.move_partition again finishes the move") or diag $ae;
		}
		else
		{
			like($ao, qr/cancel:partition $p stays on shard "$src"/, "$label: wfrouter.cancel_move undoes the move") or diag $ae;
			$owner = $src;
		}
	}
	elsif ($victim eq 'router')
	{
		$holder->query_safe('COMMIT');
		$holder->quit;
	}
	check($owner, $label);
	# the next case moves the partition back
}

my $t0 = time;
crash_case('a', 'source', 'resume');
crash_case('a', 'target', 'resume');
crash_case('b', 'target', 'resume');
crash_case('b', 'target', 'cancel');
crash_case('b', 'source', 'resume');
crash_case('b', 'router', 'resume');
crash_case('b', 'router', 'cancel');
note sprintf('the crash cases took %.0f s', time - $t0);
note r_sql("SELECT string_agg(format('%s %s>%s %s, dark %s ms, %s', move_id, from_shard, to_shard, phase, round(dark_ms), note), E'\n' ORDER BY move_id) FROM wfrouter.moves");

$load->quit;
$router->stop;
$_->stop for values %shard;
done_testing();
