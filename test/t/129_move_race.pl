
# Copyright (c) 2026, wfengine developers

# Moves of one partition that race, and crashes before the target has
# caught up (issue 30).  Three shards and two routers (two router databases,
# each with its own copy of the map, as docs/scale-out.md sets up several
# routers); a load through the first router on the moving tenant
# (acknowledged starts and completions logged).
#   (a) both routers move the same partition at once: to the same shard,
#       then to two different shards.  Exactly one move wins; the other is
#       refused with 55006 naming the move in its way and leaves nothing
#       behind (its router has no move under way, its wfrouter.cancel_move
#       finds nothing to cancel, its move run again finds the partition on
#       the target already: a NOTICE, nothing moved, its map the shards').
#   (b) a move whose target cannot catch up (a session on the target holds
#       the replicated tables in SHARE mode: the subscription's apply waits
#       for it), crashed after the source has given the partition away and
#       before the target reached the source's WAL position: SIGKILL of the
#       target (the move goes on by itself once it is up, or is run again),
#       of the source (then the move is cancelled; 128 runs one again), of
#       the router's session running the move (run again, and cancelled).
# After each: the partition is served by exactly one shard (the tenant's
# calls through both routers succeed, the other shards refuse with 55W01,
# every shard's map and both routers' maps are the same), every
# acknowledged start and completion is on the owner exactly once, every run
# there verifies, nothing of the tenant is left elsewhere, and no
# replication slot, publication or subscription is left.

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

my $t_start = time;
my $db = 'wf';
my ($shardref, $router) = wf_shards(prefix => 'wf_mr', db => $db, partitions => 16,
	conf => "wfengine.naptime = 200\nwal_retrieve_retry_interval = 200\nmax_worker_processes = 16\n"
	  . "max_logical_replication_workers = 8\nmax_sync_workers_per_subscription = 6\n");
my %shard = %$shardref;
my @names = sort keys %shard;
# the router's postmaster restarts its sessions after one is killed
$router->append_conf('postgresql.conf', "restart_after_crash = on\n");
$router->reload;
# the second router: a database of its own, configured without touching the shards
my %rdb = (r1 => 'wfengine_router', r2 => 'wfengine_router2');
$router->safe_psql('postgres', "CREATE DATABASE $rdb{r2}");
$router->safe_psql($rdb{r2}, 'CREATE EXTENSION wfengine_router CASCADE');
my $shards_json = join(', ', map { sprintf('"%s": "host=%s port=%d dbname=%s"', $_, $shard{$_}->host, $shard{$_}->port, $db) } @names);
$router->safe_psql($rdb{r2}, "SELECT wfrouter.configure('{$shards_json}', 16, false)");
sub r_sql { my ($sql, $r) = @_; return $router->safe_psql($rdb{ $r // 'r1' }, $sql); }

my $mt = 'mr1';
for my $n (values %shard)
{
	$n->safe_psql($db, "SELECT wf.create_tenant('$mt'); CREATE ROLE ${mt}_all LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_$mt;");
}
$router->safe_psql('postgres', "CREATE ROLE wf_tenant_$mt NOLOGIN; CREATE ROLE ${mt}_all LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_$mt;");
sub via_router
{
	my ($sql, $r) = @_;
	return $router->psql($rdb{ $r // 'r1' }, "\\set VERBOSITY verbose\n$sql", extra_params => [ '-U', "${mt}_all" ]);
}
my $def = q{{"steps": [{"name": "work", "queue": "work"}, {"name": "more", "queue": "work"}]}};
my ($rc, $out, $err) = via_router("SELECT wf.publish_definition('job', '$def')");
die "publish_definition: $err" if $rc;
my $p = r_sql("SELECT wfrouter.tenant_partition('$mt')");

# the load: one session of the moving tenant through the first router
my (%acked_runs, @acked_done);
my $load;
sub load_connect
{
	$load = $router->background_psql($rdb{r1}, on_error_stop => 0, extra_params => [ '-U', "${mt}_all" ]);
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

# a statement in a session of a router, in the background
sub start_bg
{
	my ($sql, $r) = @_;
	my $m = $router->background_psql($rdb{ $r // 'r1' }, on_error_stop => 0);
	$m->query_until(qr/started/, "\\set VERBOSITY verbose\n\\echo started\n$sql;\n\\echo finished\n");
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
	my ($phase) = @_;
	return r_sql("SELECT count(*) FROM wfrouter.moves WHERE finished IS NULL AND phase = '$phase' AND tables_total > 0") eq '1';
}
sub owner_in { return $_[0]->safe_psql($db, "SELECT shard FROM wfshard.partitions WHERE partition = $p"); }

# the partition is served by exactly one shard, owner, and nothing of a
# move is left
my @tables = split /,/, $shard{s1}->safe_psql($db,
	"SELECT string_agg(t, ',') FROM unnest(wf._partition_tables()) t WHERE t NOT IN ('definitions', 'tenant_policies')");
sub check
{
	my ($owner, $label) = @_;
	my @others = grep { $_ ne $owner } @names;
	load_step() for 1 .. 5;
	for my $r (sort keys %rdb)
	{
		is(r_sql("SELECT count(*) FROM wfrouter.moves WHERE finished IS NULL", $r), '0', "$label: no move is under way on router $r");
		my ($rc, $out, $err) = via_router("SELECT count(*) FROM wf.claim_tasks('none', 'w', 1)", $r);
		ok($rc == 0 && $out eq '0', "$label: the tenant's calls through router $r succeed") or diag $err;
	}
	my $rmap = r_sql('SELECT wfrouter.shard_map()');
	is(r_sql('SELECT wfrouter.shard_map()', 'r2'), $rmap, "$label: both routers have the same map");
	is(r_sql("SELECT wfrouter.tenant_shard('$mt')"), $owner, "$label: ... which gives partition $p to $owner");
	is(join(' ', map { $shard{$_}->safe_psql($db, 'SELECT array_agg(shard ORDER BY partition) FROM wfshard.partitions') } @names),
		join(' ', ($rmap) x @names), "$label: every shard's map is the routers'");
	for my $o (@others)
	{
		my ($rc, $out, $err) = $shard{$o}->psql($db, "\\set VERBOSITY verbose\nSELECT count(*) FROM wf.claim_tasks('none', 'w', 1)",
			extra_params => [ '-U', "${mt}_all" ]);
		like($err, qr/55W01/, "$label: shard $o refuses the tenant with 55W01");
	}
	my $ids = join(',', map { "'$_'" } sort keys %acked_runs);
	my $done = join(',', map { "($_->[0], $_->[1])" } @acked_done);
	my ($starts, $completions, $unverified, $runs) = split /\|/, $shard{$owner}->safe_psql($db, qq{
SELECT (SELECT count(DISTINCT run_id) || '/' || count(*) FROM wf.runs WHERE run_id IN ($ids))
  || '|' || (SELECT count(*) FROM (VALUES $done) a(task_id, fence)
             WHERE (SELECT count(*) FROM wf.events e WHERE e.type = 'task_completed'
                    AND (e.payload->>'task_id')::bigint = a.task_id AND (e.payload->>'fence')::bigint = a.fence) = 1)
  || '|' || (SELECT count(*) FILTER (WHERE NOT wf._verify_moved_run(tenant_id, run_id)) || '|' || count(*)
             FROM wf.runs WHERE tenant_id = '$mt')});
	is($starts, scalar(keys %acked_runs) . '/' . scalar(keys %acked_runs),
		"$label: every acknowledged start (" . scalar(keys %acked_runs) . ") is on $owner once");
	is($completions, scalar(@acked_done), "$label: every acknowledged completion (" . scalar(@acked_done) . ") is in its history once");
	is($unverified, '0', "$label: every run on $owner ($runs) verifies");
	is(join(' ', map { $shard{$_}->safe_psql($db, 'SELECT ' . join(' + ', map { "(SELECT count(*) FROM wf.$_ WHERE tenant_id = '$mt')" } @tables)) } @others),
		join(' ', ('0') x @others), "$label: nothing of the tenant is left on " . join(', ', @others));
	is(join(' ', map { $shard{$_}->safe_psql($db, "SELECT (SELECT count(*) FROM pg_replication_slots) || '/' || (SELECT count(*) FROM pg_publication) || '/' || (SELECT count(*) FROM pg_subscription)") } @names),
		join(' ', ('0/0/0') x @names), "$label: no replication slot, publication or subscription is left");
}

# (a) the two routers move partition p at once, to dst1 and dst2 (the same
# shard or not); the first router's map is the one the second may lack
sub race
{
	my ($dst1, $dst2, $label) = @_;
	my $src = r_sql("SELECT wfrouter.tenant_shard('$mt')");
	note "race $label: partition $p from $src, router r1 to $dst1, router r2 to $dst2";
	my %m = (r1 => start_bg("SELECT 'moved:' || wfrouter.move_partition($p, '$dst1')", 'r1'),
		r2 => start_bg("SELECT 'moved:' || wfrouter.move_partition($p, '$dst2')", 'r2'));
	my %res;
	$res{$_} = [ end_bg($m{$_}, "the move of router $_") ] for sort keys %m;
	my @won = grep { $res{$_}[0] =~ /moved:\d+/ } sort keys %res;
	is(scalar(@won), 1, "$label: exactly one move wins (" . join(', ', @won) . ')')
	  or diag explain \%res;
	my $winner = $won[0] // 'r1';
	my ($loser) = grep { $_ ne $winner } sort keys %res;
	like($res{$loser}[1], qr/ERROR:  55006: partition $p cannot be moved now: shard "\w+" is in another move/,
		"$label: the other ($loser) is refused with 55006, naming the move in its way")
	  or diag $res{$loser}[1];
	my $owner = $winner eq 'r1' ? $dst1 : $dst2;
	# the loser left nothing to cancel, and finds nothing to do
	my ($rc, $out, $err) = $router->psql($rdb{$loser}, "\\set VERBOSITY verbose\nSELECT wfrouter.cancel_move($p)");
	like($err, qr/no move of partition $p is under way/, "$label: router $loser has no move of its own to cancel")
	  or diag "$out $err";
	my $again = $loser eq 'r1' ? $dst1 : $dst2;
	($rc, $out, $err) = $router->psql($rdb{$loser}, "\\set VERBOSITY verbose\nSELECT wfrouter.move_partition($p, '$again')");
	if ($again eq $owner)
	{
		# (done: its map learned from the shards if it was older; a NOTICE)
		is("$rc $out", '0 0', "$label: router $loser, moving again, finds nothing to move") or diag $err;
		like($err, qr/NOTICE:  00000: partition $p is on shard "$owner" already, nothing to move/,
			"$label: ... and says the partition is on $owner already")
		  or diag "$out $err";
		is($router->safe_psql($rdb{$loser}, "SELECT wfrouter.tenant_shard('$mt')"), $owner, "$label: ... and routes the tenant to $owner");
	}
	else
	{
		# a move from the winner's target on: it is the one to make now
		ok($rc == 0, "$label: router $loser, moving again, moves the partition on from $owner to $again") or diag $err;
		$owner = $again;
	}
	check($owner, $label);
}

# (b) the move from the partition's shard to dst, the target's apply held
# back; the source gives the partition away; victim crashed (source, target,
# or router: the mover's backend); then how the move is answered
sub crash_case
{
	my ($victim, $how) = @_;
	my $src = r_sql("SELECT wfrouter.tenant_shard('$mt')");
	my ($dst) = grep { $_ ne $src } @names;
	my $label = "(b) $victim crashed before the target caught up, $how";
	note "case $label: partition $p from $src to $dst";
	# the target's apply held back (a session on the target locks the
	# replicated tables in SHARE mode) as soon as the move, its copy ended,
	# has analyzed the copied tables (the only manual ANALYZE on a shard;
	# it would wait for the lock), so that the catch-up (2 s at most) ends
	# while the target lags and the cut-over comes.  Taken by the target
	# itself, polling every 5 ms: taken from here once the router noted
	# the catch-up, the lock came too late on a loaded machine (make
	# test: the catch-up had ended, and the cut-over too).  The
	# target's apply then waits at the next change of the partition, or,
	# in a quiet moment of the load, its part of the cut-over waits at its
	# first write: either way the source gives the partition away and the
	# target does not take it
	my $holder = $shard{$dst}->background_psql($db, on_error_stop => 0);
	$holder->query_until(qr/holding/, "\\echo holding\nBEGIN;\n"
		  . "DO \$\$ DECLARE t timestamptz := clock_timestamp(); BEGIN\n"
		  . "LOOP PERFORM pg_stat_clear_snapshot(); EXIT WHEN (SELECT count(*) = 3 FROM pg_stat_user_tables WHERE relid IN ('wf.runs'::regclass, 'wf.tasks'::regclass, 'wfshard.moved_runs'::regclass) AND last_analyze >= t);"
		  . " PERFORM pg_sleep(0.005); END LOOP;\n"
		  . "LOCK TABLE wf.runs, wf.events, wf.tasks IN SHARE MODE; END \$\$;\n"
		  . "\\echo held\n");
	my $m = start_bg("SELECT 'moved:' || wfrouter.move_partition($p, '$dst', '2 seconds')");
	my $target_waits = sub {
		$shard{$dst}->safe_psql($db, q{SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
		  AND (backend_type = 'logical replication worker' OR query LIKE '%wf.move_in_cutover(%')}) ne '0';
	};
	wait_for('the target\'s apply or cut-over waiting', $target_waits);
	wait_for('the source giving the partition away', sub { owner_in($shard{$src}) eq $dst });
	ok(owner_in($shard{$dst}) ne $dst && $target_waits->(),
		"$label: the source gave the partition away, the target has not taken it");
	if ($victim eq 'router')
	{
		my $pid = r_sql("SELECT pid FROM pg_stat_activity WHERE query LIKE '%wfrouter.move_partition%' AND pid <> pg_backend_pid()");
		kill('KILL', $pid);
		eval { $load->{run}->kill_kill };
		for (1 .. 500)
		{
			# psql may exit before it has read its statement (the server still
			# in crash recovery refuses the connection): IPC::Run then dies of
			# the broken pipe instead of returning psql's status
			last if (eval { $router->psql($rdb{r1}, 'SELECT 1') } // 1) == 0;
			usleep(20_000);
		}
		load_connect();
		$holder->query_safe('COMMIT');
		$holder->quit;
	}
	else
	{
		my $node = $shard{$victim eq 'source' ? $src : $dst};
		crash($node);
		if ($victim eq 'target')
		{
			eval { $holder->{run}->kill_kill };
		}
		else
		{
			$holder->query_safe('COMMIT');
			$holder->quit;
		}
		load_step() for 1 .. 3;
		$node->start;
	}
	my ($o, $e) = end_bg($m, 'the interrupted move');
	note "the interrupted move: " . ($o =~ /moved:\d+/ ? 'finished' : 'stopped: ' . join(' ', grep { /ERROR|FATAL|server closed/ } split /\n/, $e));
	my $owner = $dst;
	if ($o !~ /moved:\d+/ || r_sql("SELECT count(*) FROM wfrouter.moves WHERE finished IS NULL") ne '0')
	{
		my ($ao, $ae) = end_bg(start_bg($how eq 'resume'
			  ? "SELECT 'moved:' || wfrouter.move_partition($p, '$dst')"
			  : "SELECT 'cancel:' || wfrouter.cancel_move($p)"), $how);
		if ($how eq 'resume')
		{
			like($ao, qr/moved:\d+/, "$label: wfrouter.move_partition again finishes the move") or diag $ae;
		}
		elsif ($ae =~ /55000: partition $p has cut over to shard "$dst" already/)
		{
			# the target's part of the cut-over was under way (waiting at the
			# lock above, the catch-up having ended first) and committed once
			# the lock went: the move cannot be undone, and the router says
			# so; as its hint says, the move is finished by running it again
			like($ae, qr/HINT:  Finish the move with wfrouter.move_partition/,
				"$label: wfrouter.cancel_move refuses a move that has cut over, saying how to finish it");
			my ($fo, $fe) = end_bg(start_bg("SELECT 'moved:' || wfrouter.move_partition($p, '$dst')"), 'the finishing move');
			like($fo, qr/moved:\d+/, "$label: ... and wfrouter.move_partition again finishes it") or diag $fe;
		}
		else
		{
			like($ao, qr/cancel:partition $p stays on shard "$src"/, "$label: wfrouter.cancel_move undoes the move") or diag $ae;
			$owner = $src;
		}
	}
	check($owner, $label);
}

my $t0 = time;
my $home = r_sql("SELECT wfrouter.tenant_shard('$mt')");
my @away = grep { $_ ne $home } @names;
race($away[0], $away[0], '(a) the same target');
$home = r_sql("SELECT wfrouter.tenant_shard('$mt')");
@away = grep { $_ ne $home } @names;
race($away[0], $away[1], '(a) two targets');
note sprintf('the races took %.0f s', time - $t0);

$t0 = time;
crash_case('target', 'resume');
crash_case('source', 'cancel');
crash_case('router', 'resume');
crash_case('router', 'cancel');
note sprintf('the crash cases took %.0f s', time - $t0);
note r_sql("SELECT string_agg(format('%s %s>%s %s, dark %s ms, %s', move_id, from_shard, to_shard, phase, round(dark_ms), note), E'\n' ORDER BY move_id) FROM wfrouter.moves");

$load->quit;
$router->stop;
$_->stop for values %shard;
note sprintf('129_move_race took %.0f s', time - $t_start);
done_testing();
