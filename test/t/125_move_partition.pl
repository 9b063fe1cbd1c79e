
# Copyright (c) 2026, wfengine developers

# Moving a partition between live shards (issue 15): three shards and a
# router; the tenants of one partition of shard s1 have runs waiting on a
# task, leased by a worker, at a timer and at an approval, and a worker loop
# on s1 completes tasks while wfrouter.move_partition moves the partition to
# s2.  Afterwards every run of the moved tenants is on s2 only, verifies and
# completes there, the old worker's report is refused on s1 and stale on s2,
# no accepted completion is lost or applied twice, the histories that did not
# change are the same chains, and the other partitions are untouched.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;

my $sharedir = `pg_config --sharedir`;
chomp $sharedir;
plan skip_all => "PL/Proxy is not installed ($sharedir/extension/plproxy.control)"
  unless -f "$sharedir/extension/plproxy.control";
plan skip_all => "dblink is not installed ($sharedir/extension/dblink.control)"
  unless -f "$sharedir/extension/dblink.control";

my $db = 'wf';
my ($shardref, $router) = wf_shards(prefix => 'wf_move', db => $db,
	conf => "wfengine.naptime = 200\n");
my %shard = %$shardref;
my @shards = sort keys %shard;
my $map = $router->safe_psql('wfengine_router', 'SELECT wfrouter.shard_map()');
# wfrouter.configure configured every shard (name, id block, map)

sub r_sql { return $router->safe_psql('wfengine_router', $_[0]); }

# two tenants of one partition of s1 (moved), one of another partition of
# s1 and one of s2 (not moved)
my (%part_of, %by_part);
# (one query: a psql per name made this loop the longest part of the test)
for my $row (split /\n/, r_sql(q{SELECT t || '|' || wfrouter.tenant_partition(t) || '|' || wfrouter.tenant_shard(t)
FROM (SELECT 't' || lpad(i::text, 4, '0') AS t FROM generate_series(1, 2000) i) x ORDER BY t}))
{
	my ($t, $p, $s) = split /\|/, $row;
	$part_of{$t} = [ $p, $s ];
	push @{ $by_part{$p} }, $t;
}
my ($p) = sort { $a <=> $b } grep { $part_of{ $by_part{$_}[0] }[1] eq 's1' && @{ $by_part{$_} } >= 2 } keys %by_part;
my ($ta, $tb) = @{ $by_part{$p} }[ 0, 1 ];
my ($tc) = grep { $part_of{$_}[1] eq 's1' && $part_of{$_}[0] != $p } sort keys %part_of;
my ($td) = grep { $part_of{$_}[1] eq 's2' } sort keys %part_of;
my @moved = ($ta, $tb);
my @all = ($ta, $tb, $tc, $td);
note "partition $p: $ta, $tb; also $tc (s1), $td (s2)";

for my $t (@all)
{
	my $roles = qq{
CREATE ROLE ${t}_app LOGIN IN ROLE wfengine_operator, wf_tenant_$t;
CREATE ROLE ${t}_worker LOGIN IN ROLE wfengine_worker, wf_tenant_$t;
CREATE ROLE ${t}_appr LOGIN IN ROLE wfengine_approver, wf_tenant_$t;
CREATE ROLE ${t}_admin LOGIN IN ROLE wfengine_admin, wf_tenant_$t;};
	$shard{$_}->safe_psql($db, "SELECT wf.create_tenant('$t'); $roles") for @shards;
	r_sql("CREATE ROLE wf_tenant_$t NOLOGIN; $roles");
}

sub via_router
{
	my ($login, $sql) = @_;
	return $router->safe_psql('wfengine_router', $sql, extra_params => [ '-U', $login ]);
}

sub on_shard
{
	my ($name, $login, $sql) = @_;
	return $shard{$name}->safe_psql($db, $sql, extra_params => [ '-U', $login ]);
}

# definitions, through the router on every shard
my %def = (
	job   => q{{"steps": [{"name": "work", "queue": "work"}]}},
	nap   => q{{"steps": [{"name": "nap", "type": "sleep", "duration": "10s"}, {"name": "after", "queue": "work"}]}},
	ok    => q{{"steps": [{"name": "ok", "type": "approval", "approvers": ["boss"], "notify_queue": "mail", "expires": "1h"}]}},
	lease => q{{"steps": [{"name": "slow", "queue": "slow"}]}});
for my $t (@all)
{
	via_router("${t}_admin", "SELECT wf.publish_definition('$_', '$def{$_}')") for sort keys %def;
}

# every tenant: a run on a task, one leased, one at a timer, one at an
# approval (tokens issued by the mail worker)
my (%runs, %lease, %tokens);
for my $t (@all)
{
	my $home = $part_of{$t}[1];
	$runs{$t} = [ split /\n/, via_router("${t}_app", q{
SELECT wf.start_run(d) FROM unnest(ARRAY['job', 'lease', 'nap', 'ok']) WITH ORDINALITY u(d, o) ORDER BY o}) ];
	$lease{$t} = on_shard($home, "${t}_worker", q{SELECT task_id || '|' || fence FROM wf.claim_tasks('slow', 'old', 1, '1h')});
	$tokens{$t} = on_shard($home, "${t}_worker", q{
CREATE TEMP TABLE c AS SELECT * FROM wf.claim_tasks('mail', 'mailer', 1);
SELECT t.token FROM c, wf.issue_approval_tokens(c.task_id, c.fence) t WHERE t.decision = 'approve';
DO $$ BEGIN PERFORM wf.complete_task(c.task_id, c.fence, '{}') FROM c; END $$;});
	like($lease{$t}, qr/^\d+\|\d+$/, "tenant $t: a task leased by a worker on $home");
}

# an event of tenant A for a key no run has declared: buffered on s1, its
# event id recorded (wf.event_ids); a repeat after the move is a duplicate
is(via_router("${ta}_app", q{SELECT outcome FROM wf.send_event('k:moved', 'go', '{}', 'ev-moved')}),
	'buffered', "tenant $ta: an event kept on s1");

# the histories before, as each tenant reads them on its shard
my $heads_sql = q{SELECT string_agg(h.run_id || ':' || h.seq || ':' || h.head_hash, ',' ORDER BY h.run_id) FROM wf.chain_heads() h};
# those of the runs the workload does not touch (the loop takes "work" tasks)
my $still_sql = q{SELECT string_agg(h.run_id || ':' || h.seq || ':' || h.head_hash, ',' ORDER BY h.run_id)
FROM wf.chain_heads() h JOIN wf.runs r USING (run_id) WHERE r.definition_name = 'ok'};
# anchors of every run's chain (wf.verify_run(run, anchor) later: the same
# events up to the anchor, whatever was appended since)
my $anchors_sql = q{SELECT pg_catalog.jsonb_agg(pg_catalog.to_jsonb(h)) FROM wf.chain_heads() h};
my $anchored_sql = sub {
	my $a = shift;
	return qq{SELECT count(*) || ':' || bool_and(wf.verify_run((a->>'run_id')::uuid, a))
FROM jsonb_array_elements('$a'::jsonb) a};
};
my $events_sql = q{SELECT count(*) FROM wf.events};
my (%heads, %events, %still, %anchors);
for my $t (@all)
{
	$heads{$t} = on_shard($part_of{$t}[1], "${t}_app", $heads_sql);
	$still{$t} = on_shard($part_of{$t}[1], "${t}_app", $still_sql);
	$anchors{$t} = on_shard($part_of{$t}[1], "${t}_app", $anchors_sql);
	$events{$t} = on_shard($part_of{$t}[1], "${t}_app", $events_sql);
}

# the workload: 30 runs of tenant A's "job", a worker loop on s1 completing
# them one at a time and recording each accepted completion, counting the
# calls refused once the partition starts moving
via_router("${ta}_app", q{SELECT count(wf.start_run('job')) FROM generate_series(1, 30)});
my $loop_sql = q{DO $$
DECLARE
    refused integer := 0;
    c record;
BEGIN
    FOR i IN 1 .. 400 LOOP
        BEGIN
            FOR c IN SELECT * FROM wf.claim_tasks('work', 'loop', 1) LOOP
                IF wf.complete_task(c.task_id, c.fence, '{"by": "loop"}') = 'accepted' THEN
                    INSERT INTO done VALUES (c.task_id);
                END IF;
            END LOOP;
        -- 40001 while the cut-over holds the partition, 55W01 once it has moved
        EXCEPTION WHEN object_not_in_prerequisite_state OR serialization_failure THEN
            refused := refused + 1;
        END;
        COMMIT;
        EXIT WHEN refused >= 10;
        PERFORM pg_sleep(0.05);
    END LOOP;
    RAISE NOTICE 'refused %', refused;
END $$;};
my ($loop_out, $loop_err) = ('', '');
my $loop = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $shard{s1}->connstr($db) . " user=${ta}_worker", '-c', 'CREATE TEMP TABLE done (task_id bigint)', '-c', $loop_sql,
	  '-c', q{SELECT coalesce(string_agg(task_id::text, ','), '') FROM done} ],
	'>', \$loop_out, '2>', \$loop_err);
# (completions counted by their task_completed events: a completed
# attempt's row is deleted since 0.3.0)
ok($shard{s1}->poll_query_until($db,
		"SELECT count(*) >= 3 FROM wf.events WHERE tenant_id = '$ta' AND type = 'task_completed' AND payload->>'worker' = 'loop'"),
	'the worker loop is completing tasks on s1');

# the move, while the loop runs
is(r_sql("SELECT wfrouter.move_partition($p, 's2', '20 seconds')"), 8 + 30,
	"partition $p moves to s2 with its 38 runs");
$loop->finish;
my ($refused) = $loop_err =~ /refused (\d+)/;
note "worker loop: $loop_err";
ok(defined $refused && $refused >= 10, 'the worker loop was refused on s1 once the partition moved');
my @done = split /,/, $loop_out =~ s/\s+//gr;
ok(@done >= 3, scalar(@done) . ' completions accepted on s1 during the workload');

# the maps
is(r_sql("SELECT wfrouter.tenant_shard('$ta')"), 's2', 'the router sends the tenants to s2');
for my $name (@shards)
{
	is($shard{$name}->safe_psql($db, "SELECT shard FROM wfshard.partitions WHERE partition = $p"),
		's2', "shard $name gives partition $p to s2");
}

# every row of the moved tenants is on s2 only
my $rows_sql = sub {
	my $t = shift;
	return join(' UNION ALL ', map { "SELECT '$_', count(*) FROM wf.$_ WHERE tenant_id = '$t'" }
		qw(runs events tasks timers approvals approval_attempts signals correlations
		  buffered_events event_ids));
};
for my $t (@moved)
{
	is($shard{s1}->safe_psql($db, "SELECT sum(count) FROM (" . $rows_sql->($t) . ") x"), '0',
		"tenant $t: no row left on s1");
	is($shard{s3}->safe_psql($db, "SELECT count(*) FROM wf.runs WHERE tenant_id = '$t'"), '0',
		"tenant $t: nothing on s3");
	is(on_shard('s2', "${t}_app", q{SELECT count(*) || ':' || bool_and(wf.verify_run(run_id)) FROM wf.runs}),
		($t eq $ta ? 34 : 4) . ':true', "tenant $t: every run is on s2 and verifies there");
}

# the event id moved with the partition: the repeat is a duplicate on s2
is(via_router("${ta}_app", q{SELECT outcome FROM wf.send_event('k:moved', 'go', '{}', 'ev-moved')}),
	'duplicate', "tenant $ta: the event id sent before the move is a duplicate after it");
is(on_shard('s2', "${ta}_app", q{SELECT count(*) FROM wf.buffered_events WHERE key = 'k:moved'}),
	'1', "tenant $ta: the event kept on s1 is kept on s2, once");

# no accepted completion lost or applied twice: each is on s2 as completed,
# with exactly one task_completed event (the attempt's row deleted since
# 0.3.0: none left, or one completed)
my $done_list = join(',', @done);
is($shard{s2}->safe_psql($db, qq{
SELECT count(*) FROM unnest(ARRAY[$done_list]::bigint[]) d(task_id)
WHERE (SELECT count(*) FROM wf.events e WHERE e.type = 'task_completed'
       AND (e.payload->>'task_id')::bigint = d.task_id) = 1
  AND NOT EXISTS (SELECT 1 FROM wf.tasks t WHERE t.task_id = d.task_id AND t.status <> 'completed')}),
	scalar(@done), 'every completion accepted on s1 is on s2, once');
is($shard{s2}->safe_psql($db, qq{
SELECT count(*) FROM (SELECT run_id, payload->>'task_id' FROM wf.event_log
  WHERE tenant_id IN ('$ta', '$tb') AND type IN ('task_completed', 'task_scheduled', 'run_started')
  GROUP BY run_id, type, payload->>'task_id' HAVING count(*) > 1) d}),
	'0', 'no event of the moved runs is duplicated');

# the runs that did not change during the move: the same chains and counts
for my $t (@moved)
{
	my $after = on_shard('s2', "${t}_app", $still_sql);
	like($after, qr/^\S+:\d+:\S+$/, "tenant $t: the chain head of its run at an approval");
	is($after, $still{$t}, "tenant $t: the chain head of its run at an approval is the same on s2");
	is(on_shard('s2', "${t}_app", $anchored_sql->($anchors{$t})), '4:true',
		"tenant $t: every run's history on s2 holds the chain exported on s1 (its anchor verifies)");
}

# the old worker's lease: refused on s1, stale on s2
for my $t (@moved)
{
	my ($task, $fence) = split /\|/, $lease{$t};
	my ($rc, $out, $err) = $shard{s1}->psql($db, "SELECT wf.complete_task($task, $fence, '{}')",
		extra_params => [ '-U', "${t}_worker" ]);
	like($err, qr/does not live on shard "s1"/, "tenant $t: the old worker's report to s1 is refused");
	is(on_shard('s2', "${t}_worker", "SELECT wf.complete_task($task, $fence, '{}')"),
		'stale', "tenant $t: its old fence is stale on s2");
}

# everything completes on s2: workers there, the timer, the approval
for my $t (@moved)
{
	my ($task) = split /\|/, $lease{$t};
	my ($old_fence) = (split /\|/, $lease{$t})[1];
	ok($shard{s2}->poll_query_until($db,
			"SELECT status = 'ready' FROM wf.tasks WHERE task_id = $task"),
		"tenant $t: the lease taken over from s1 is given back on s2");
	my $new = on_shard('s2', "${t}_worker", q{
SELECT c.fence || '|' || wf.complete_task(c.task_id, c.fence, '{"on": "s2"}') FROM wf.claim_tasks('slow', 'new', 1) c});
	my ($nf, $res) = split /\|/, $new;
	is($res, 'accepted', "tenant $t: the leased task is delivered again on s2 and completed");
	ok($nf > $old_fence, "tenant $t: its new fence $nf is above the old $old_fence");
	is(via_router("${t}_appr", "SELECT wf.decide('$tokens{$t}', 'approve', 'boss')"), 'accepted',
		"tenant $t: a token issued on s1 decides on s2 through the router");
}
ok($shard{s2}->poll_query_until($db, qq{
SELECT count(*) = 0 FROM wf.timers WHERE tenant_id IN ('$ta', '$tb') AND status = 'pending'}),
	'the sleep timers fire on s2');
# workers on s2 take the rest (the tasks after the timers too)
for my $i (1 .. 60)
{
	on_shard('s2', "${_}_worker", q{
SELECT count(*) FROM wf.claim_tasks('work', 'w2', 50) c, LATERAL wf.complete_task(c.task_id, c.fence, '{}') r})
	  for @moved;
	last if $shard{s2}->safe_psql($db,
		"SELECT count(*) FROM wf.runs WHERE tenant_id IN ('$ta', '$tb') AND status <> 'completed'") eq '0';
	$shard{s2}->safe_psql($db, 'SELECT pg_sleep(0.5)');
}
for my $t (@moved)
{
	is(via_router("${t}_app", "SELECT wf.run_status('$runs{$t}[1]') || ',' || wf.verify_run('$runs{$t}[1]')"),
		'completed,true', "tenant $t: the router serves it from s2");
	is(on_shard('s2', "${t}_app", q{SELECT count(*) FILTER (WHERE status = 'completed') || '/' || count(*) || ':' || bool_and(wf.verify_run(run_id)) FROM wf.runs}),
		($t eq $ta ? '34/34' : '4/4') . ':true', "tenant $t: every run completed on s2 and verifies");
}

# the other partitions are untouched
for my $t ($tc, $td)
{
	my $home = $part_of{$t}[1];
	is(on_shard($home, "${t}_app", $anchored_sql->($anchors{$t})), '4:true',
		"tenant $t: its chains on $home extend those before the move");
	is(on_shard($home, "${t}_app", $still_sql), $still{$t}, "tenant $t: its run at an approval is as before");
	is(on_shard($home, "${t}_app", 'SELECT count(*) FROM wf.runs'), '4', "tenant $t: its runs are on $home");
	is($shard{s2}->safe_psql($db, "SELECT count(*) FROM wf.runs WHERE tenant_id = '$t'"),
		$home eq 's2' ? '4' : '0', "tenant $t: nothing of it moved");
}

# tenants may not move partitions themselves
my ($rc, $out, $err) = $shard{s2}->psql($db, "SELECT wf.move_out_begin($p)",
	extra_params => [ '-U', "${ta}_admin" ]);
like($err, qr/permission denied for function/, 'a tenant cannot publish a partition');
($rc, $out, $err) = $router->psql('wfengine_router', "SELECT wfrouter.move_partition($p, 's1')",
	extra_params => [ '-U', "${ta}_admin" ]);
like($err, qr/permission denied for function/, 'a tenant cannot move a partition');

$router->stop;
$shard{$_}->stop for @shards;
done_testing();
