
# Copyright (c) 2026, wfengine developers

# Every wait of a move ends (issue 30): the copy of wfrouter.move_partition
# waited, with no end, for the target's subscription to have every table
# 'ready'.  Two shards and a router; a load through the router on the
# moving tenant (acknowledged starts and completions logged).  In each case
# the copy of one table is held back on the target (a session there locks
# wf.events as soon as the move's subscription exists: its table
# synchronisation waits, in state 'd'), then:
#   (a) nothing more: the copy's deadline (copy_wait) ends the move with
#       55000 "the copy did not end in ..."; the move run again (the lock
#       gone) finishes;
#   (b) the target is killed (SIGKILL of the postmaster and every process)
#       and stays down: the move ends within wait with 08006 naming the
#       shard; the target started again, the move run again finishes;
#   (c) the target's table synchronisation fails (a CHECK constraint every
#       copied row of wf.events breaks; the target tries it again and again):
#       the move ends within wait with 55000 "its copy keeps failing",
#       naming the table; wfrouter.cancel_move undoes it;
#   (d) the target freezes (SIGSTOP of the postmaster and every process: a
#       server that accepts connections and answers none) while a poll of
#       the copy waits there for its answer (held by a lock on the target's
#       pg_subscription_rel), wfrouter.shard_timeout 4 s: the poll's shard
#       answers no SELECT 1 on a new connection either, and the move ends
#       with 08006; run again while the target is still frozen, the move is
#       refused after the router's connect timeout (10 s); the target
#       thawed, the move run again finishes.  Before the poll's timeout
#       (router before it) the move waited for ever.
#   (e) the table synchronisation of wf.signals, copied (state 'f') and
#       waiting for the apply worker (held by a lock on wf.runs, which the
#       load writes), loses its replication slot on the source (dropped):
#       it can never go on.  The move restarts its copy and finishes by
#       itself, its note saying so.  Without the restart (router before
#       it) the move waits for copy_wait (1 hour): it does not end within
#       this test's 90 s.
#   (f) the target freezes in the cut-over (its wf.move_in_cutover waiting
#       for a lock there), wfrouter.shard_timeout 3 s: the move ends with
#       08006 saying that both shards refuse the partition until the target
#       answers; the target thawed, the move run again finishes.  Before
#       wfrouter.shard_timeout the move waited for ever.  Bad values of the
#       setting are refused first.
# In (a) to (d) each error names the partition and the shard and hints at
# wfrouter.move_partition and wfrouter.cancel_move; the move stays under way
# (wfrouter.moves) with the partition on its source.  After each case the
# partition is served by exactly one shard (the other refuses with 55W01,
# both maps are the router's), every acknowledged start and completion is
# on the owner once, every run there verifies, nothing of the tenant is
# left on the other shard, and no replication slot, publication or
# subscription is left.  Without the deadline (router before this change)
# (a), (c) and (d) wait until this test's own limit, and (b) ends at once
# with dblink's "could not establish connection".

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
# the failing table synchronisation is tried again every 200 ms
my ($shardref, $router) = wf_shards(prefix => 'wf_md', db => $db, partitions => 16, names => [qw(s1 s2)],
	conf => "wfengine.naptime = 200\nwal_retrieve_retry_interval = 200\n");
my %shard = %$shardref;
my @names = sort keys %shard;
sub r_sql { return $router->safe_psql('wfengine_router', $_[0]); }

my $mt = 'md1';
for my $n (values %shard)
{
	$n->safe_psql($db, "SELECT wf.create_tenant('$mt'); CREATE ROLE ${mt}_all LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_$mt;");
}
$router->safe_psql('postgres', "CREATE ROLE wf_tenant_$mt NOLOGIN; CREATE ROLE ${mt}_all LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_$mt;");
sub via_router
{
	my ($sql) = @_;
	return $router->psql('wfengine_router', "\\set VERBOSITY verbose\n$sql", extra_params => [ '-U', "${mt}_all" ]);
}
my $def = q{{"steps": [{"name": "work", "queue": "work"}, {"name": "more", "queue": "work"}]}};
my ($rc, $out, $err) = via_router("SELECT wf.publish_definition('job', '$def')");
die "publish_definition: $err" if $rc;
my $p = r_sql("SELECT wfrouter.tenant_partition('$mt')");
# some finished runs, so that there is something to copy
$shard{ r_sql("SELECT wfrouter.tenant_shard('$mt')") }->safe_psql($db, q{
CREATE TEMP TABLE s AS SELECT * FROM wf.start_runs('job', array_fill('{}'::jsonb, ARRAY[300]));
CREATE TEMP TABLE c AS SELECT task_id, fence FROM wf.claim_tasks('work', 'fill', 300);
SELECT count(*) FROM wf.complete_tasks(ARRAY(SELECT task_id FROM c ORDER BY task_id), ARRAY(SELECT fence FROM c ORDER BY task_id));},
	extra_params => [ '-U', "${mt}_all" ]);

# the load: one session of the moving tenant through the router
my (%acked_runs, @acked_done);
my $load = $router->background_psql('wfengine_router', on_error_stop => 0, extra_params => [ '-U', "${mt}_all" ]);
# (the session lives for the whole test: its timeout counts per query, not
# from its start, which a loaded machine takes past 180 s)
$load->set_query_timer_restart;
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
	die "the load failed with something else than a refusal: $err"
	  if $err =~ /ERROR/ && $err !~ /is moving to another shard/;
}
load_step() for 1 .. 20;

# the processes of a server: its postmaster and every child
sub server_pids
{
	my ($node) = @_;
	my $pm = $node->{_pid};
	return ($pm, server_children($pm));
}
# SIGKILL of the postmaster and every process of the server
sub crash
{
	my ($node) = @_;
	my @pids = server_pids($node);
	$node->kill9;
	kill('KILL', @pids);
	for (1 .. 500)
	{
		last unless grep { -e "/proc/$_" } @pids;
		usleep(10_000);
	}
}
# a frozen server is thawed whatever happens, so that it can be stopped
my @frozen;
END { kill('CONT', @frozen) if @frozen; }

# a statement in a session of the router, in the background
sub start_bg
{
	my ($sql) = @_;
	my $m = $router->background_psql('wfengine_router', on_error_stop => 0);
	$m->query_until(qr/started/, "\\set VERBOSITY verbose\n\\echo started\n$sql;\n\\echo finished\n");
	return $m;
}
# waits for it at most limit seconds, with the load going on; returns
# (stdout, stderr, whether it ended)
sub end_bg
{
	my ($m, $limit, $no_load) = @_;
	my $t0 = time;
	while (time - $t0 < $limit)
	{
		eval { $m->{run}->pump_nb };
		last if ($m->{stdout} // '') =~ /finished/ || !$m->{run}->pumpable;
		load_step() unless $no_load;
		usleep(20_000);
	}
	my ($o, $e) = ($m->{stdout} // '', $m->{stderr} // '');
	my $ended = $o =~ /finished/ || !$m->{run}->pumpable;
	if ($ended) { eval { $m->quit }; }
	else        { eval { $m->{run}->kill_kill }; }
	return ($o, $e, $ended);
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
		usleep(50_000);
	}
}

# a session on the target that locks table (SHARE) as soon as the move's
# subscription exists, in a transaction left open: the table's
# synchronisation waits for it, in state 'd' ("copying").  wf.signals,
# which the load does not write: the apply worker, which would wait for
# the lock at the load's first change of the table, goes on, and so do the
# other tables.  With break, it also adds a CHECK constraint that every
# copied row of the table breaks.
sub hold_copy
{
	my ($node, $table, $break) = @_;
	my $h = $node->background_psql($db, on_error_stop => 0);
	$h->query_until(qr/holding/, "\\echo holding\nBEGIN;\n"
		  . "DO \$\$ BEGIN LOOP EXIT WHEN EXISTS (SELECT FROM pg_subscription WHERE subname = 'wf_move_$p'); PERFORM pg_sleep(0.005); END LOOP;\n"
		  . "LOCK TABLE $table IN SHARE MODE; END \$\$;\n"
		  . ($break ? "ALTER TABLE $table ADD CONSTRAINT wf_md_broken CHECK (false) NOT VALID;\n" : '')
		  . "\\echo held\n");
	return $h;
}
sub held
{
	my ($h) = @_;
	eval { $h->{run}->pump_nb };
	return ($h->{stdout} // '') =~ /held/;
}
sub copy_held
{
	my ($node, $table) = @_;
	return r_sql("SELECT count(*) FROM wfrouter.moves WHERE finished IS NULL AND phase = 'copying' AND tables_total > tables_copied") eq '1'
	  && $node->safe_psql($db, "SELECT count(*) FROM pg_subscription_rel WHERE srrelid = '$table'::regclass AND srsubstate = 'd'") eq '1'
	  && $node->safe_psql($db, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'logical replication worker' AND wait_event_type = 'Lock'") eq '1';
}
sub owner_in { return $_[0]->safe_psql($db, "SELECT shard FROM wfshard.partitions WHERE partition = $p"); }

# the partition is served by exactly one shard, owner, and nothing of a
# move is left
my @tables = split /,/, $shard{s1}->safe_psql($db,
	"SELECT string_agg(t, ',') FROM unnest(wf._partition_tables()) t WHERE t NOT IN ('definitions', 'tenant_policies')");
sub check
{
	my ($owner, $label) = @_;
	my ($other) = grep { $_ ne $owner } @names;
	load_step() for 1 .. 5;
	is(r_sql("SELECT count(*) FROM wfrouter.moves WHERE finished IS NULL"), '0', "$label: no move is under way");
	my ($rc, $out, $err) = via_router("SELECT count(*) FROM wf.claim_tasks('none', 'w', 1)");
	ok($rc == 0 && $out eq '0', "$label: the tenant's calls through the router succeed") or diag $err;
	my $rmap = r_sql('SELECT wfrouter.shard_map()');
	is(r_sql("SELECT wfrouter.tenant_shard('$mt')"), $owner, "$label: the router gives partition $p to $owner");
	is(join(' ', map { $shard{$_}->safe_psql($db, 'SELECT array_agg(shard ORDER BY partition) FROM wfshard.partitions') } @names),
		join(' ', ($rmap) x @names), "$label: every shard's map is the router's");
	($rc, $out, $err) = $shard{$other}->psql($db, "\\set VERBOSITY verbose\nSELECT count(*) FROM wf.claim_tasks('none', 'w', 1)",
		extra_params => [ '-U', "${mt}_all" ]);
	like($err, qr/55W01/, "$label: shard $other refuses the tenant with 55W01");
	my $ids = join(',', map { "'$_'" } sort keys %acked_runs);
	my $done = join(',', map { "($_->[0], $_->[1])" } @acked_done);
	my ($starts, $completions, $unverified, $runs) = split /\|/, $shard{$owner}->safe_psql($db, qq{
SELECT (SELECT count(DISTINCT run_id) || '/' || count(*) FROM wf.runs WHERE run_id IN ($ids))
  || '|' || (SELECT count(*) FROM (VALUES $done) a(task_id, fence)
             JOIN (SELECT (e.payload->>'task_id')::bigint AS task_id, (e.payload->>'fence')::bigint AS fence, count(*) AS n
                   FROM wf.events e WHERE e.type = 'task_completed' AND e.tenant_id = '$mt' GROUP BY 1, 2) c USING (task_id, fence)
             WHERE c.n = 1)
  || '|' || (SELECT count(*) FILTER (WHERE NOT wf._verify_moved_run(tenant_id, run_id)) || '|' || count(*)
             FROM wf.runs WHERE tenant_id = '$mt')});
	is($starts, scalar(keys %acked_runs) . '/' . scalar(keys %acked_runs),
		"$label: every acknowledged start (" . scalar(keys %acked_runs) . ") is on $owner once");
	is($completions, scalar(@acked_done), "$label: every acknowledged completion (" . scalar(@acked_done) . ") is in its history once");
	is($unverified, '0', "$label: every run on $owner ($runs) verifies");
	is($shard{$other}->safe_psql($db, 'SELECT ' . join(' + ', map { "(SELECT count(*) FROM wf.$_ WHERE tenant_id = '$mt')" } @tables)),
		'0', "$label: nothing of the tenant is left on $other");
	is(join(' ', map { $shard{$_}->safe_psql($db, "SELECT (SELECT count(*) FROM pg_replication_slots) || '/' || (SELECT count(*) FROM pg_publication) || '/' || (SELECT count(*) FROM pg_subscription)") } @names),
		join(' ', ('0/0/0') x @names), "$label: no replication slot, publication or subscription is left");
}

# the move stopped with an error; it stays under way with the partition on
# src.  limit: the deadline plus 20 s for a loaded machine (each poll of the
# copy connects to both shards; the table synchronisation, 25 s: the other
# tables are copied first, and each one copied starts the count again);
# the router before the deadline waited until end_bg gave up (60 or 90 s)
sub stopped
{
	my ($label, $src, $dst, $e, $ended, $took, $limit, $re) = @_;
	ok($ended && $took <= $limit, sprintf('%s: the move ends, %.1f s after the fault (at most %d s)', $label, $took, $limit))
	  or diag "the move did not end in time: $e";
	like($e, $re, "$label: with the error naming the partition, the shard and what failed") or diag $e;
	like($e, qr/HINT:  .*The move stays under way and partition $p stays on shard "$src": run wfrouter.move_partition\($p, '$dst'\) again .* or undo the move with wfrouter.cancel_move\($p\)/,
		"$label: the hint names wfrouter.move_partition and wfrouter.cancel_move") or diag $e;
	is(r_sql("SELECT phase || ' ' || from_shard || '>' || to_shard || ' ' || (note IS NOT NULL) FROM wfrouter.moves WHERE finished IS NULL"),
		"copying $src>$dst true", "$label: the move stays under way in wfrouter.moves, with a note");
	is(owner_in($shard{$src}), $src, "$label: the source still owns the partition");
}
sub resume
{
	my ($label, $dst) = @_;
	my ($o, $e, $ended) = end_bg(start_bg("SELECT 'moved:' || wfrouter.move_partition($p, '$dst')"), 120);
	like($o, qr/moved:\d+/, "$label: wfrouter.move_partition run again finishes the move") or diag $e;
}

my $wait = 5;
my $src = r_sql("SELECT wfrouter.tenant_shard('$mt')");
my ($dst) = grep { $_ ne $src } @names;

# (a) the copy's deadline
{
	my $label = '(a) a copy held past copy_wait';
	my $h = hold_copy($shard{$dst}, 'wf.signals', 0);
	my $m = start_bg("SELECT 'moved:' || wfrouter.move_partition($p, '$dst', '$wait seconds', '8 seconds')");
	my $t0 = time;
	wait_for('the copy held', sub { copy_held($shard{$dst}, 'wf.signals') });
	my ($o, $e, $ended) = end_bg($m, 60);
	stopped($label, $src, $dst, $e, $ended, time - $t0, 8 + 20,
		qr/ERROR:  55000: cannot copy partition $p to shard "$dst": the copy did not end in 00:00:08\nDETAIL:  \d+ of \d+ tables copied, \d+ rows in the copies under way; not copied yet: .*wf.signals \(copying\)/);
	$h->query_safe('COMMIT');
	$h->quit;
	resume($label, $dst);
	check($dst, $label);
}
($src, $dst) = ($dst, $src);

# (b) the target crashes during the copy, and stays down
{
	my $label = '(b) the target killed during the copy';
	my $h = hold_copy($shard{$dst}, 'wf.signals', 0);
	my $m = start_bg("SELECT 'moved:' || wfrouter.move_partition($p, '$dst', '$wait seconds')");
	wait_for('the copy held', sub { copy_held($shard{$dst}, 'wf.signals') });
	crash($shard{$dst});
	eval { $h->{run}->kill_kill };
	my $t0 = time;
	my ($o, $e, $ended) = end_bg($m, 60);
	stopped($label, $src, $dst, $e, $ended, time - $t0, $wait + 20,
		qr/ERROR:  08006: cannot copy partition $p to shard "$dst": shard "$dst" cannot be reached\nDETAIL:  Not for [\d.]+ s: /);
	# run again while the target is down: refused at once, nothing changed
	($rc, $out, $err) = $router->psql('wfengine_router', "SELECT wfrouter.move_partition($p, '$dst', '$wait seconds')");
	like($err, qr/could not establish connection|cannot be reached/, "$label: run again while the target is down, the move is refused");
	$shard{$dst}->start;
	resume($label, $dst);
	check($dst, $label);
}
($src, $dst) = ($dst, $src);

# (c) the target's table synchronisation fails, again and again
{
	my $label = '(c) the table synchronisation failing';
	my $h = hold_copy($shard{$dst}, 'wf.events', 1);
	my $m = start_bg("SELECT 'moved:' || wfrouter.move_partition($p, '$dst', '$wait seconds')");
	wait_for('the constraint added', sub { held($h) });
	$h->query_safe('COMMIT');
	$h->quit;
	my $t0 = time;
	my ($o, $e, $ended) = end_bg($m, 60);
	stopped($label, $src, $dst, $e, $ended, time - $t0, $wait + 25,
		qr/ERROR:  55000: cannot copy partition $p to shard "$dst": its copy keeps failing on shard "$dst"\nDETAIL:  The workers of subscription "wf_move_$p" have failed again and again for [\d.]+ s \(\d+ errors in all, pg_stat_subscription_stats\), and no table was copied meanwhile. Not copied yet: .*wf.events \(copying\).*\.\nHINT:  The errors are in the server log of shard "$dst"\./);
	ok($shard{$dst}->log_contains(qr/violates check constraint "wf_md_broken"/), "$label: the target's log has the error of its table synchronisation");
	my ($co, $ce) = end_bg(start_bg("SELECT 'cancel:' || wfrouter.cancel_move($p)"), 60);
	like($co, qr/cancel:partition $p stays on shard "$src"/, "$label: wfrouter.cancel_move undoes the move") or diag $ce;
	$shard{$dst}->safe_psql($db, 'ALTER TABLE wf.events DROP CONSTRAINT wf_md_broken');
	check($src, $label);
}

# (d) the target freezes during the copy
{
	my $label = '(d) the target frozen during the copy';
	my $h = hold_copy($shard{$dst}, 'wf.signals', 0);
	my $m = start_bg("SET wfrouter.shard_timeout = '4s';\nSELECT 'moved:' || wfrouter.move_partition($p, '$dst', '$wait seconds')");
	wait_for('the copy held', sub { copy_held($shard{$dst}, 'wf.signals') });
	# frozen with a poll of the copy on its way: the target's catalog of
	# table states locked, the mover's statement there waits for it, and
	# then the target freezes.  (Frozen while the mover slept between its
	# polls, the next poll's connection times out instead, after 4 s.)
	# Before the poll's own timeout the mover waited for the answer for
	# ever: dblink waits uninterruptibly on PostgreSQL 15 and a Unix
	# socket has no keepalive; on a loaded machine most of its time is
	# spent in its polls, so the window was not narrow (make test)
	my $cat = $shard{$dst}->background_psql($db, on_error_stop => 0);
	$cat->query_safe('BEGIN; LOCK TABLE pg_catalog.pg_subscription_rel IN ACCESS EXCLUSIVE MODE');
	wait_for('a poll of the copy waiting on the target', sub {
		$shard{$dst}->safe_psql($db, q{SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
		                              AND query LIKE '%pg_stat_subscription_stats%' AND pid <> pg_backend_pid()}) eq '1' });
	@frozen = server_pids($shard{$dst});
	kill('STOP', @frozen);
	my $t0 = time;
	my ($o, $e, $ended) = end_bg($m, 90);
	my $took = time - $t0;
	# run again while the target is still frozen: its connection to the
	# target gives up after the connect timeout (10 s), nothing changed
	my $t1 = time;
	($rc, $out, $err) = $router->psql('wfengine_router', "SELECT wfrouter.move_partition($p, '$dst', '$wait seconds')");
	my $took1 = time - $t1;
	ok($rc != 0 && $err =~ /timeout expired/ && $took1 <= 10 + 20,
		sprintf('%s: run again while the target is frozen, the move is refused after the connect timeout (%.1f s, at most 30 s)', $label, $took1))
	  or diag $err;
	kill('CONT', @frozen);
	@frozen = ();
	stopped($label, $src, $dst, $e, $ended, $took, $wait + 10 + 20,
		qr/ERROR:  08006: cannot copy partition $p to shard "$dst": shard "$dst" cannot be reached\nDETAIL:  Not for [\d.]+ s: shard "$dst" did not answer within 00:00:04/);
	$cat->query_safe('COMMIT');
	$cat->quit;
	$h->query_safe('COMMIT');
	$h->quit;
	resume($label, $dst);
	check($dst, $label);
}

# (e) a table synchronisation whose slot is gone from the source (the
# source crashed while the target dropped it, or it was dropped by hand):
# the table stays in state 'f' and its synchronisation fails for ever
# ("replication slot ... does not exist", not counted in
# pg_stat_subscription_stats); the move restarts its copy by itself and
# finishes
($src, $dst) = ($dst, $src);
{
	my $label = '(e) a table synchronisation whose slot is gone';
	# wf.signals (which the load does not write) held in 'd' while the
	# other tables are copied
	my $ha = hold_copy($shard{$dst}, 'wf.signals', 0);
	my $m = start_bg("SELECT 'moved:' || wfrouter.move_partition($p, '$dst', '$wait seconds')");
	wait_for('every other table copied', sub {
		r_sql("SELECT count(*) FROM wfrouter.moves WHERE finished IS NULL AND phase = 'copying' AND tables_total = tables_copied + 1") eq '1'
		  && copy_held($shard{$dst}, 'wf.signals') });
	# the apply worker held (wf.runs, which the load writes, locked): the
	# synchronisation of wf.signals, once copied, waits for it in state 'f'
	my $hb = $shard{$dst}->background_psql($db, on_error_stop => 0);
	$hb->query_safe('BEGIN; LOCK TABLE wf.runs IN SHARE MODE');
	wait_for('the apply worker held', sub {
		$shard{$dst}->safe_psql($db, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'logical replication worker' AND wait_event_type = 'Lock'") eq '2' });
	$ha->query_safe('COMMIT');
	$ha->quit;
	wait_for('wf.signals copied', sub {
		$shard{$dst}->safe_psql($db, "SELECT count(*) FROM pg_subscription_rel WHERE srrelid = 'wf.signals'::regclass AND srsubstate = 'f'") eq '1' });
	# its slot (pg_<subscription oid>_sync_<table oid>_<target's system id>) dropped on the source
	my $slot = $shard{$dst}->safe_psql($db, "SELECT format('pg_%s_sync_%s_%s', s.oid, 'wf.signals'::regclass::oid, (pg_control_system()).system_identifier) FROM pg_subscription s WHERE s.subname = 'wf_move_$p'");
	is($shard{$src}->safe_psql($db, "SELECT count(pg_terminate_backend(active_pid, 5000)) FROM pg_replication_slots WHERE slot_name = '$slot' AND active_pid IS NOT NULL;
SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots WHERE slot_name = '$slot'"), "0\n1", "$label: the slot $slot dropped on $src");
	$hb->query_safe('COMMIT');
	$hb->quit;
	my $t0 = time;
	my ($o, $e, $ended) = end_bg($m, 90);
	like($o, qr/moved:\d+/, sprintf('%s: the move finishes by itself (%.1f s after the slot went)', $label, time - $t0)) or diag $e;
	ok($shard{$dst}->log_contains(qr/replication slot "$slot" does not exist/), "$label: the target's log has the error of its table synchronisation");
	like(r_sql("SELECT note FROM wfrouter.moves ORDER BY move_id DESC LIMIT 1"),
		qr/the copy was restarted 1 time: the synchronisation of table wf\.signals \(copied\) on shard "$dst" cannot go on: its replication slot "$slot" is gone from shard "$src"/,
		"$label: wfrouter.moves notes the copy restarted, and why") or diag r_sql("SELECT m::text FROM wfrouter.moves m ORDER BY move_id DESC LIMIT 1");
	check($dst, $label);
}

# (f) the target freezes in the cut-over, with wfrouter.shard_timeout set
# to 3 s: the source has given the partition away and the target's
# wf.move_in_cutover waits (for a lock a session there holds on
# wfshard.partitions, whose map its last step rewrites) when the target
# freezes.  The
# move ends within the timeout twice over (the statement, then the end of
# the cut-over it tries on the target) plus 20 s, with 08006 saying that
# the partition is refused by both shards until the target answers; the
# target thawed and the lock gone, the move run again finishes.  Before
# the timeout (router before it) the move waited for ever.  No load runs
# while the target is frozen: its calls would wait for the frozen target
# as long as their own statement_timeout lets them (the load has none).
($src, $dst) = ($dst, $src);
{
	my $label = '(f) the target frozen in the cut-over';
	($rc, $out, $err) = $router->psql('wfengine_router', "SET wfrouter.shard_timeout = 'banana'; SELECT wfrouter.move_partition($p, '$src')");
	like($err, qr/invalid value for wfrouter.shard_timeout: "banana"/, "$label: a wfrouter.shard_timeout that is no interval is refused");
	($rc, $out, $err) = $router->psql('wfengine_router', "SET wfrouter.shard_timeout = '100ms'; SELECT wfrouter.move_partition($p, '$src')");
	like($err, qr/invalid value for wfrouter.shard_timeout: "100ms"/, "$label: a wfrouter.shard_timeout under 1 s is refused");
	is(r_sql("SELECT count(*) FROM wfrouter.moves WHERE finished IS NULL"), '0', "$label: neither started a move");
	my $h = $shard{$dst}->background_psql($db, on_error_stop => 0);
	$h->query_until(qr/holding/, "\\echo holding\nBEGIN;\n"
		  . "DO \$\$ BEGIN LOOP EXIT WHEN EXISTS (SELECT FROM pg_subscription s WHERE s.subname = 'wf_move_$p'\n"
		  . "  AND (SELECT count(*) FILTER (WHERE r.srsubstate = 'r') = count(*) AND count(*) > 0 FROM pg_subscription_rel r WHERE r.srsubid = s.oid));\n"
		  . "  PERFORM pg_sleep(0.005); END LOOP;\n"
		  . "LOCK TABLE wfshard.partitions IN SHARE MODE; END \$\$;\n\\echo held\n");
	my $m = start_bg("SET wfrouter.shard_timeout = '3s';\nSELECT 'moved:' || wfrouter.move_partition($p, '$dst', '$wait seconds')");
	wait_for('the cut-over waiting on the target', sub {
		$shard{$dst}->safe_psql($db, q{SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
		                              AND query LIKE 'SELECT wf.move\_in\_cutover(%'}) eq '1' });
	@frozen = server_pids($shard{$dst});
	kill('STOP', @frozen);
	my $t0 = time;
	my ($o, $e, $ended) = end_bg($m, 90, 1);
	my $took = time - $t0;
	ok($ended && $took <= 3 + 3 + 20, sprintf('%s: the move ends, %.1f s after the freeze (at most 26 s)', $label, $took))
	  or diag "the move did not end in time: $e";
	like($e, qr/ERROR:  08006: cannot cut partition $p over to shard "$dst": shard "$dst" does not answer\nDETAIL:  Shard "$src" gave the partition away; whether shard "$dst" took it is known only once it answers, and until then both refuse the partition\. shard "$dst" did not answer within 00:00:03\nHINT:  Run wfrouter.move_partition\($p, '$dst'\) again once shard "$dst" answers: it finishes the move\./,
		"$label: with 08006 naming the partition and the shard, and saying that the partition is refused meanwhile") or diag $e;
	is(owner_in($shard{$src}), $dst, "$label: the source gave the partition away");
	is(r_sql("SELECT phase FROM wfrouter.moves WHERE finished IS NULL"), 'cutting over', "$label: the move stays under way in wfrouter.moves, cutting over");
	kill('CONT', @frozen);
	@frozen = ();
	$h->query_safe('COMMIT');
	$h->quit;
	resume($label, $dst);
	check($dst, $label);
}

note r_sql("SELECT string_agg(format('%s %s>%s %s, dark %s ms, %s', move_id, from_shard, to_shard, phase, round(dark_ms), note), E'\n' ORDER BY move_id) FROM wfrouter.moves");
$load->quit;
$router->stop;
$_->stop for values %shard;
note sprintf('129_move_deadline took %.0f s', time - $t_start);
done_testing();
