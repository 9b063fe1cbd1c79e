
# Copyright (c) 2026, wfengine developers

# A sharded cluster that grows (issue 30), as docs/scale-out.md sets it up:
# a router and three shards (wfrouter.configure configures each shard: its
# name, its id block, the map), six tenants routed through the router, a
# load that starts runs and claims and completes their tasks through the
# router while a partition moves there, back and back again on logical
# replication, a fourth shard added (wfrouter.add_shard) and the cluster
# rebalanced onto it, a second router serving the same tenants (it learns
# the map from the shards), and a shard stopped (08006 naming it).
# Afterwards: no id on two shards, every acknowledged run present once and
# verified, every acknowledged completion in its run's history, and the
# moving tenant refused only within the cut-overs (their length is
# bench/move_dark.sh's to measure, not a test's).

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
my ($shardref, $router) = wf_shards(prefix => 'wf_grow', db => $db, partitions => 16,
	conf => "wfengine.naptime = 200\n");
my %shard = %$shardref;
sub r_sql { return $router->safe_psql('wfengine_router', $_[0]); }

# every shard was configured by wfrouter.configure: its own id block
is(join(',', map { $shard{$_}->safe_psql($db, 'SELECT wf._id_block()') } sort keys %shard),
	'1,2,3', 'wfrouter.configure gave each shard its own id block');

# a fourth shard, created now, added later
my $s4 = wf_shard_node('wf_grow_s4', "wfengine.naptime = 200\n");
$s4->safe_psql('postgres', "CREATE DATABASE $db");
$s4->safe_psql($db, 'CREATE EXTENSION wfengine');
my @nodes = (map({ [ $_, $shard{$_} ] } sort keys %shard), [ 's4', $s4 ]);

# six tenants, each with one login for the application and its worker
my @tenants = map { "g$_" } 1 .. 6;
for my $t (@tenants)
{
	my $roles = "CREATE ROLE ${t}_all LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_$t;";
	$_->[1]->safe_psql($db, "SELECT wf.create_tenant('$t'); $roles") for @nodes;
	r_sql("CREATE ROLE wf_tenant_$t NOLOGIN; $roles");
}
sub via_router
{
	my ($t, $sql) = @_;
	return $router->safe_psql('wfengine_router', $sql, extra_params => [ '-U', "${t}_all" ]);
}
my $def = q{{"steps": [{"name": "work", "queue": "work"}, {"name": "more", "queue": "work"}]}};
via_router($_, "SELECT wf.publish_definition('job', '$def')") for @tenants;

# the workers' lookups work for the job roles
like(via_router($tenants[0], "SELECT wfrouter.tenant_shard('$tenants[0]') || wfrouter.tenant_partition('$tenants[0]') || cardinality(wfrouter.shard_map())"),
	qr/^s\d\d+16$/, 'a worker login reads tenant_shard, tenant_partition and shard_map');

# the tenant that moves
my $mt = $tenants[0];
my $p = r_sql("SELECT wfrouter.tenant_partition('$mt')");
my $home = r_sql("SELECT wfrouter.tenant_shard('$mt')");
my ($away) = grep { $_ ne $home } sort keys %shard;
note "tenant $mt, partition $p, on $home; moves to $away and back";

# the load: one session of the moving tenant through the router starts runs,
# claims and completes; every acknowledged call is logged, and every span of
# refused calls timed
my (%acked_runs, @acked_done, @spans, @outer, $refused_since, $refused_first_back, $refused_last_sent);
my $unreachable = 0;
my $load = $router->background_psql('wfengine_router', on_error_stop => 0,
	extra_params => [ '-U', "${mt}_all" ]);
# (the session lives for the whole test: its timeout counts per query, not
# from its start, which a loaded machine took past 180 s)
$load->set_query_timer_restart;
sub load_step
{
	# a span is the time the tenant was surely refused: from the return of
	# the first refused call to the sending of the last one (the cut-over
	# held the partition when the first arrived, and still when the last
	# did).  The outer span, from the sending of the first refused call to
	# that of the first accepted one, also counts the calls' own latency
	# (on a loaded 2-core machine a refused round trip through the router
	# took hundreds of ms: 1,132 ms outer for a cut-over the router
	# measured under a second); it is reported, not bounded
	my $sent = time;
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
	if ($err =~ /ERROR/ && $err =~ /cannot be reached/)
	{
		# a shard crashed on purpose (below): not a cut-over's refusal
		$unreachable++;
	}
	elsif ($err =~ /ERROR/)
	{
		die "the load failed with something else than a retryable refusal: $err"
		  unless $err =~ /is moving to another shard|40001|serialization/;
		$refused_since //= $sent;
		$refused_first_back //= time;
		$refused_last_sent = $sent;
	}
	elsif (defined $refused_since)
	{
		my $surely = $refused_last_sent - $refused_first_back;
		push @spans, $surely > 0 ? $surely : 0;
		push @outer, $sent - $refused_since;
		undef $refused_since;
		undef $refused_first_back;
	}
}
# what a run that does not verify looks like on every node
sub diag_run
{
	my ($run, $to) = @_;
	for my $n (@nodes)
	{
		diag "== $n->[0]: tasks\n" . $n->[1]->safe_psql($db, "SELECT task_id, step, attempt, status, fence, xmin FROM wf.tasks WHERE run_id = '$run' ORDER BY task_id")
		  . "\n== events\n" . $n->[1]->safe_psql($db, "SELECT seq, type, step, payload->>'task_id', payload->>'fence', xmin FROM wf.events WHERE run_id = '$run' ORDER BY seq")
		  . "\n== run\n" . $n->[1]->safe_psql($db, "SELECT status, current_step, updated_at, xmin FROM wf.runs WHERE run_id = '$run'");
	}
}

sub load_while_moving
{
	my ($to, $sql) = @_;
	$sql //= "SELECT 'moved:' || wfrouter.move_partition($p, '$to')";
	my $mover = $router->background_psql('wfengine_router', on_error_stop => 0);
	$mover->query_until(qr/started/, "\\echo started\n$sql;\n\\echo finished\n");
	my $t0 = time;
	while (time - $t0 < 120)
	{
		load_step();
		$mover->{run}->pump_nb;
		last if ($mover->{stdout} // '') =~ /finished/;
		usleep(5_000);
	}
	my $out = $mover->{stdout};
	my $err = $mover->{stderr};
	$mover->quit;
	like($out, qr/moved:\d+/, "$sql: done under load") or diag $err;
	diag_run($1, $to) if ($err // '') =~ /run ([0-9a-f-]{36}) .* does not verify/;
	load_step() for 1 .. 5;
}
load_step() for 1 .. 20;
load_while_moving($away);
is(r_sql("SELECT wfrouter.tenant_shard('$mt')"), $away, "the router sends $mt to $away");
load_while_moving($home);
load_while_moving($away);
is(r_sql("SELECT phase FROM wfrouter.moves ORDER BY move_id DESC LIMIT 1"), 'done', 'wfrouter.moves shows the move done');
# (how long a cut-over takes is measured by bench/move_dark.sh, not bounded
# here: a test asserts no timing, and on a loaded 2-core machine a
# cut-over the router measures at 200 ms alone took 1,370 ms)
ok(r_sql("SELECT bool_and(dark_ms > 0 AND tables_total > 0) FROM wfrouter.moves WHERE phase = 'done'") eq 't',
	'every move reports its tables and how long its cut-over refused the partition');

# a move interrupted: the router's session dies while the partition is
# being copied; the partition stays served by its source, the move is
# cancelled (the target's copy and the replication objects go), and a
# second try, interrupted again, is resumed by running it once more
sub start_move
{
	my ($to) = @_;
	my $m = $router->background_psql('wfengine_router', on_error_stop => 0);
	$m->query_until(qr/started/, "\\echo started\nSELECT pg_backend_pid() AS mover \\gset\nSELECT wfrouter.move_partition($p, '$to');\n");
	return $m;
}
sub wait_phase
{
	my ($phase, $also, $quiet) = @_;
	$also //= 'true';
	my $t0 = time;
	until (r_sql("SELECT count(*) FROM wfrouter.moves WHERE finished IS NULL AND phase = '$phase' AND tables_total > 0 AND $also") eq '1')
	{
		die "no move reached phase $phase: " . r_sql("SELECT m::text FROM wfrouter.moves m WHERE finished IS NULL")
		  . "\n" . $shard{ r_sql("SELECT wfrouter.tenant_shard('$mt')") }->safe_psql($db, "SELECT string_agg(pid || ' ' || state || ' ' || coalesce(backend_xid::text, '-') || ' ' || left(query, 60), E'\\n') FROM pg_stat_activity WHERE datname = 'wf'")
		  if time - $t0 > 60;
		load_step() unless $quiet;
		usleep(20_000);
	}
}
# a session on the target that locks wf.signals (SHARE, which the load
# never writes) as soon as the move's subscription exists, in a
# transaction left open: that table's synchronisation waits for it, so the
# move stays in phase copying until release_copy (a small partition is
# otherwise copied before a poll of wfrouter.moves sees the phase: a fast
# machine's make test, "no move reached phase copying")
sub hold_copy
{
	my ($node) = @_;
	my $h = $node->background_psql($db, on_error_stop => 0);
	$h->query_until(qr/holding/, "\\echo holding\nBEGIN;\n"
		  . "DO \$\$ BEGIN LOOP EXIT WHEN EXISTS (SELECT FROM pg_subscription WHERE subname = 'wf_move_$p'); PERFORM pg_sleep(0.005); END LOOP;\n"
		  . "LOCK TABLE wf.signals IN SHARE MODE; END \$\$;\n");
	return $h;
}
sub release_copy
{
	my ($h) = @_;
	eval { $h->query_safe('COMMIT'); $h->quit; };
	eval { $h->{run}->kill_kill } if $@;
}
sub kill_mover_in
{
	my ($phase, $also, $quiet) = @_;
	wait_phase($phase, $also, $quiet);
	r_sql(q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	        WHERE query LIKE 'SELECT wfrouter.move_partition%' AND pid <> pg_backend_pid()});
}
my $src = r_sql("SELECT wfrouter.tenant_shard('$mt')");
my ($dst) = grep { $_ ne $src } sort keys %shard;
my $held = hold_copy($shard{$dst});
my $m = start_move($dst);
kill_mover_in('copying');
eval { $m->quit };
release_copy($held);
load_step() for 1 .. 10;
is(r_sql("SELECT wfrouter.tenant_shard('$mt')"), $src, 'a move whose router session died leaves the partition on its source');
like(r_sql("SELECT wfrouter.cancel_move($p)"), qr/stays on shard "$src"/, 'wfrouter.cancel_move undoes it');
is($shard{$dst}->safe_psql($db, "SELECT (SELECT count(*) FROM pg_subscription) || '/' || (SELECT count(*) FROM wf.runs WHERE tenant_id = '$mt')")
	  . '/' . $shard{$src}->safe_psql($db, 'SELECT count(*) FROM pg_publication'),
	'0/0/0', '... the target keeps no subscription and no row of the tenant, the source no publication');
# a transaction of the moving tenant left open on the source holds the
# cut-over back (never another tenant): the move says whom it waits for;
# its router session dies there, and the move run again finishes
my $holder = $shard{$src}->background_psql($db, on_error_stop => 0, extra_params => [ '-U', "${mt}_all" ]);
$holder->query_safe("BEGIN; SELECT count(*) FROM wf.claim_tasks('held_q', 'holder', 1)");
$m = start_move($dst);
kill_mover_in('cutting over', "note LIKE 'waiting for pid%'", 1);
like(r_sql("SELECT note FROM wfrouter.moves WHERE finished IS NULL"), qr/^waiting for pid \d+ \(${mt}_all, in a transaction for [\d.]+ s\)$/,
	'the cut-over names the transaction of the moving tenant it waits for');
eval { $m->quit };
$holder->query_safe('COMMIT');
$holder->quit;
undef $refused_since;
load_step() for 1 .. 5;
load_while_moving($dst);
is(r_sql("SELECT wfrouter.tenant_shard('$mt')"), $dst, 'a move interrupted while its cut-over waited is finished by running it again');
is(r_sql("SELECT string_agg(phase, ',' ORDER BY move_id) FROM wfrouter.moves WHERE move_id > (SELECT max(move_id) - 2 FROM wfrouter.moves)"),
	'cancelled,done', 'wfrouter.moves: the cancelled move and the resumed one');

# a crash of the target, then of the source, while the partition is being
# copied: the partition stays served, and the move either goes on by itself
# (the shard is back within the move's wait) or stops with the error and
# running it again finishes it
for my $victim ('target', 'source')
{
	$src = r_sql("SELECT wfrouter.tenant_shard('$mt')");
	($dst) = grep { $_ ne $src } sort keys %shard;
	my $node = $shard{ $victim eq 'target' ? $dst : $src };
	$held = hold_copy($shard{$dst});
	$m = start_move($dst);
	wait_phase('copying');
	$node->stop('immediate');
	$node->start;
	release_copy($held);
	eval { $m->quit };
	load_step() for 1 .. 10;
	# A shard back within the move's wait does not end the move (a copy
	# that polls an unreachable shard gives up only after wait): the move
	# may have gone on to its end by itself, else it stopped with the
	# error.  Either way it is run again, as after any failure: a move
	# that finished is done (a NOTICE, 0 runs moved by the second call),
	# else the second call finishes it.
	my $by_itself = r_sql("SELECT phase FROM wfrouter.moves ORDER BY move_id DESC LIMIT 1") eq 'done';
	note "the move through a crash of its $victim " . ($by_itself ? 'went on to its end by itself' : 'stopped: ' . ($m->{stderr} // ''));
	if ($by_itself)
	{
		is(r_sql("SELECT wfrouter.tenant_shard('$mt')"), $dst, "the move through a crash of its $victim went on to its end by itself");
		my ($rc, $out, $err) = $router->psql('wfengine_router', "SELECT 'moved:' || wfrouter.move_partition($p, '$dst')");
		is("$rc $out", '0 moved:0', "... and run again it is done (moved:0)") or diag $err;
		like($err, qr/NOTICE:  partition $p is on shard "$dst" already, nothing to move\nDETAIL:  Its move from shard "$src" finished at /,
			'... with a NOTICE that names the finished move');
	}
	else
	{
		load_while_moving($dst);
	}
	is(r_sql("SELECT wfrouter.tenant_shard('$mt')"), $dst, "a move through a crash of its $victim is finished, by itself or by running it again");
	is($shard{$dst}->safe_psql($db, "SELECT shard FROM wfshard.partitions WHERE partition = $p") . ' '
		  . $shard{$src}->safe_psql($db, "SELECT shard FROM wfshard.partitions WHERE partition = $p"),
		"$dst $dst", "... the maps of the target and the source give the partition to the target");
}

# a call refused by the shard its route named (55W01), when the router's
# map names another shard by the time the refusal comes back (the move's
# map flip, or another session that learned the map): made once more, not
# refused with 40001 (the map is not newer on any shard)
is(via_router($mt, q{SELECT wfrouter._retry(0, '55W01', 'tenant "} . $mt . q{" does not live on shard "s9"', NULL, NULL)}), '1',
	'a refusal from a shard the router\'s map no longer names is tried again');

# a fourth shard and a rebalance onto it
my $s4connstr = sprintf('host=%s port=%d dbname=%s', $s4->host, $s4->port, $db);
is(r_sql("SELECT wfrouter.add_shard('s4', '$s4connstr')"), '4', 'wfrouter.add_shard: s4 takes id block 4');
is($s4->safe_psql($db, "SELECT count(*) FROM wf.definitions WHERE name = 'job'"), '6',
	'... and every tenant\'s definitions');
my $plan = r_sql("SELECT string_agg(partition || ':' || from_shard || '>' || to_shard, ' ') FROM wfrouter.rebalance()");
like($plan, qr/>s4/, "the dry run plans moves onto s4: $plan");
is(r_sql("SELECT count(*) FROM wfrouter.moves WHERE finished IS NULL"), '0', '... and makes none');
load_step() for 1 .. 5;
r_sql("SELECT count(*) FROM wfrouter.rebalance(false)");
ok(r_sql("SELECT count(*) FROM wfrouter.partitions WHERE shard = 's4'") > 0, 's4 owns partitions after the rebalance')
  or diag r_sql("SELECT string_agg(m::text, E'\n') FROM wfrouter.moves m") . "\n" . r_sql("SELECT c::text FROM wfrouter.config c") . "\n" . $s4->safe_psql($db, 'SELECT s::text FROM wfshard.self s');
load_step() for 1 .. 20;

# a second router (a database of its own, configured without touching the
# shards) learns the map from the shards' refusals
$router->safe_psql('postgres', 'CREATE DATABASE wfengine_router2');
$router->safe_psql('wfengine_router2', 'CREATE EXTENSION wfengine_router CASCADE');
my $shards_json = join(', ', map { sprintf('"%s": "host=%s port=%d dbname=%s"', $_, $shard{$_}->host, $shard{$_}->port, $db) } sort keys %shard);
$router->safe_psql('wfengine_router2', "SELECT wfrouter.configure('{$shards_json}', 16, false); SELECT wfrouter.add_shard('s4', '$s4connstr');");
for my $t (@tenants)
{
	my $n = $router->safe_psql('wfengine_router2', "SELECT count(*) FROM wf.claim_tasks('none', 'w', 1)",
		extra_params => [ '-U', "${t}_all" ]);
	is($n, '0', "the second router serves tenant $t");
}
is($router->safe_psql('wfengine_router2', 'SELECT wfrouter.shard_map()'), r_sql('SELECT wfrouter.shard_map()'),
	'... and has learned the same map as the first');

# drain s4 again, under load
my $s4parts = r_sql("SELECT count(*) FROM wfrouter.partitions WHERE shard = 's4'");
load_while_moving('s4', "SELECT 'moved:' || wfrouter.remove_shard('s4')");
is(r_sql("SELECT count(*) FROM wfrouter.partitions WHERE shard = 's4'") . '/' . r_sql("SELECT count(*) FROM wfrouter.shards WHERE shard = 's4'"),
	'0/0', "wfrouter.remove_shard drained s4 ($s4parts partitions) and took it out of the list");
is($s4->safe_psql($db, 'SELECT count(*) FROM wf.runs'), '0', '... and s4 holds no run');
note r_sql("SELECT string_agg(format('%s %s>%s %s runs, dark %s ms', partition, from_shard, to_shard, runs, round(dark_ms)), E'\n' ORDER BY move_id) FROM wfrouter.moves");

# finish the load's runs, then check the cluster
for (1 .. 40) { load_step(); last unless r_sql('SELECT 1') ne '1'; }
$load->quit;

# no id on two shards (definitions aside: a moved run's definition is
# copied with its id to the target, and the copies are the same definition)
for my $q (
	[ 'runs', 'run_id::text' ], [ 'tasks', 'task_id::text' ], [ 'timers', 'timer_id::text' ],
	[ 'approvals', 'approval_id::text' ], [ 'signals', 'signal_id::text' ],
	[ 'events', "run_id || ':' || seq" ])
{
	my %where;
	my @dup;
	for my $n (@nodes)
	{
		for my $id (split /\n/, $n->[1]->safe_psql($db, "SELECT $q->[1] FROM wf.$q->[0]"))
		{
			push @dup, "$id ($where{$id}, $n->[0])" if exists $where{$id};
			$where{$id} = $n->[0];
		}
	}
	is(scalar(@dup), 0, "no id of wf.$q->[0] on two shards") or diag join(', ', grep { defined } @dup[ 0 .. 4 ]);
}

# every acknowledged run present once, on its tenant's shard, and verified
my $final = r_sql("SELECT wfrouter.tenant_shard('$mt')");
my %node = map { $_->[0] => $_->[1] } @nodes;
my $ids = join(',', map { "'$_'" } sort keys %acked_runs);
my $found = 0;
$found += $_->[1]->safe_psql($db, "SELECT count(*) FROM wf.runs WHERE run_id IN ($ids)") for @nodes;
is($found, scalar(keys %acked_runs), scalar(keys %acked_runs) . ' acknowledged starts: every run present once in the cluster');
is($node{$final}->safe_psql($db, "SELECT count(*) FROM wf.runs WHERE run_id IN ($ids) AND wf._verify_moved_run(tenant_id, run_id)"),
	scalar(keys %acked_runs), "... all on $final, and every one verifies");
my $done = join(',', map { "($_->[0], $_->[1])" } @acked_done);
# (the task_completed events counted per task and fence once, joined: a
# subquery per acknowledged completion scanned the events thousands of
# times, 24 s of a loaded machine)
is($node{$final}->safe_psql($db, qq{SELECT count(*) FROM (VALUES $done) a(task_id, fence)
JOIN (SELECT (e.payload->>'task_id')::bigint AS task_id, (e.payload->>'fence')::bigint AS fence, count(*) AS n
      FROM wf.events e WHERE e.type = 'task_completed' GROUP BY 1, 2) c USING (task_id, fence)
WHERE c.n = 1}),
	scalar(@acked_done), scalar(@acked_done) . ' acknowledged completions: each in its history exactly once');

# the moving tenant was refused only during cut-overs
my ($longest) = sort { $b <=> $a } (@spans, 0);
note sprintf('refused spans of %s (surely refused / outer bound): %s', $mt,
	join(', ', map { sprintf('%.0f/%.0f ms', $spans[$_] * 1000, $outer[$_] * 1000) } 0 .. $#spans));
# refused only while a cut-over held the partition: each span in which
# the tenant was surely refused lies within a cut-over, so it is no longer
# than the longest cut-over the router measured (and 250 ms for the
# clocks of two processes); a refusal outside the cut-overs (a stale map,
# a shard refusing after the move) makes a longer one
my $darkest = r_sql("SELECT max(dark_ms) FROM wfrouter.moves WHERE phase = 'done'") / 1000;
cmp_ok($longest, '<=', $darkest + 0.25, sprintf('the longest span in which %s was surely refused, %.0f ms, within the longest cut-over, %.0f ms',
	$mt, $longest * 1000, $darkest * 1000));

# a shard that cannot be reached: 08006, naming the shard
my ($victim) = grep { $_ ne $final } sort keys %shard;
my ($vt) = grep { r_sql("SELECT wfrouter.tenant_shard('$_')") eq $victim } @tenants;
SKIP:
{
	skip "no tenant on $victim", 2 unless defined $vt;
	$shard{$victim}->stop('immediate');
	my ($rc, $out, $err) = $router->psql('wfengine_router', "\\set VERBOSITY verbose\nSELECT wf.start_run('job')",
		extra_params => [ '-U', "${vt}_all" ]);
	like($err, qr/08006: shard "$victim" of tenant "$vt" cannot be reached/, 'a stopped shard: 08006 naming it');
	unlike($err, qr/XX000/, '... never XX000');
}

$router->stop;
$_->[1]->stop for grep { $_->[1]->{_pid} } @nodes;
done_testing();
