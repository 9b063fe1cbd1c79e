
# Copyright (c) 2026, wfengine developers

# The Python worker library (clients/python/wfengine_worker.py) through a
# real move of its tenant's partition (issue 30).  Two shards and a router;
# a Worker given the shard list [s1, s2] runs as a subprocess (as a worker
# deployment runs it) on the tenant's queue while the test starts runs of
# three steps through the router, before, during and after
# wfrouter.move_partition moves the tenant's partition from s1 to s2.  The
# move refuses the worker on s1 (55W01) or cuts its leases off (stale on
# s2); the worker moves to s2 by itself.  Then: every acknowledged start is
# a run on s2, once, completed, with each of its three steps completed once
# in its history, and wf.verify_run holds for each; the worker's output
# shows its move to s2.  The other way round: a worker given only [s1]
# completes nothing after the move (every claim refused with 55W01).
# WF_TEST_WORKER_S1_ONLY=1 gives the first worker only [s1] too, to see the
# checks fail.

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
plan skip_all => 'python3 with psycopg 3 is not installed'
  unless system('python3', '-c', 'import psycopg') == 0;

my $t_start = time;
my $db = 'wf';
my ($shardref, $router) = wf_shards(prefix => 'wf_mw', db => $db, partitions => 16,
	names => [qw(s1 s2)],
	conf => "wfengine.naptime = 200\nwal_retrieve_retry_interval = 200\nmax_worker_processes = 16\n"
	  . "max_logical_replication_workers = 8\nmax_sync_workers_per_subscription = 6\n");
my %shard = %$shardref;
sub r_sql { return $router->safe_psql('wfengine_router', $_[0]); }

# a tenant whose partition the router's map gives to s1
my ($mt, $p);
for my $i (1 .. 50)
{
	my ($part, $owner) = split /\|/, r_sql("SELECT wfrouter.tenant_partition('mw$i') || '|' || wfrouter.tenant_shard('mw$i')");
	if ($owner eq 's1') { ($mt, $p) = ("mw$i", $part); last; }
}
die 'no tenant of s1 among mw1 .. mw50' unless defined $mt;
for my $n (values %shard)
{
	$n->safe_psql($db, "SELECT wf.create_tenant('$mt'); CREATE ROLE ${mt}_all LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_$mt;");
}
r_sql("CREATE ROLE wf_tenant_$mt NOLOGIN; CREATE ROLE ${mt}_all LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_$mt;");
my $def = q{{"steps": [{"name": "a", "queue": "mwq"}, {"name": "b", "queue": "mwq"}, {"name": "c", "queue": "mwq"}]}};
my ($rc, $out, $err) = $router->psql('wfengine_router', "SELECT wf.publish_definition('job', '$def')",
	extra_params => [ '-U', "${mt}_all" ]);
die "publish_definition: $err" if $rc;

# the worker: a subprocess running wfengine_worker.Worker on the given
# shards until SIGTERM; it prints a line per task handled and per report,
# and at its end how often it moved and the shard it ended on
my $lib = "$FindBin::RealBin/../../clients/python";
my $script = "${PostgreSQL::Test::Utils::tmp_check}/move_worker.py";
open(my $fh, '>', $script) or die "$script: $!";
print $fh <<'PY';
import json, logging, sys, time
sys.path.insert(0, sys.argv[1])
from wfengine_worker import Worker

logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(message)s")
shards = sys.argv[2:]

def handle(task):
    print(json.dumps({"handled": str(task.run_id), "step": task.step, "attempt": task.attempt,
                      "task_id": task.task_id}), flush=True)
    time.sleep(0.02)           # in flight for a while: some leases meet the cut-over
    return {"step": task.step}

w = Worker(shards, ["mwq"], handle, name="mw", concurrency=3, lease=5.0, wait=1.0)
w.run()
for task, answer in w.answers:
    print(json.dumps({"report": task.task_id, "answer": answer.value}), flush=True)
print(json.dumps({"moves": w.moves, "ended_on": shards.index(w.conninfo) if w.conninfo in shards else -1}), flush=True)
PY
close $fh;
my %conninfo = map { $_ => sprintf('host=%s port=%d dbname=%s user=%s_all', $shard{$_}->host, $shard{$_}->port, $db, $mt) } keys %shard;
sub start_worker
{
	my ($tag, @shards) = @_;
	# its output to files: a pipe that the test does not read while it
	# waits would fill and stop the worker
	(my $name = "worker $tag") =~ s/[^\w -]//g;    # the tag only: tmp_check's path may hold dots
	$name =~ s/ /_/g;
	my $f = "${PostgreSQL::Test::Utils::tmp_check}/$name";
	my $h = IPC::Run::start([ 'python3', $script, $lib, map { $conninfo{$_} } @shards ],
		'<', \undef, '>', "$f.out", '2>', "$f.err");
	return { h => $h, out => "$f.out", err => "$f.err", tag => $tag };
}
sub stop_worker
{
	my ($w) = @_;
	$w->{h}->signal('TERM');
	my $t0 = time;
	$w->{h}->finish;
	my ($out, $err) = (slurp_file($w->{out}), slurp_file($w->{err}));
	note "worker $w->{tag}: exit " . ($w->{h}->result // 'none') . "; its log:\n"
	  . join("\n", grep { /moving|refused|stale|error|Traceback/i } split /\n/, $err);
	return ($out, $err);
}

# starts runs through the router; every acknowledged start is logged
my %acked;
my $app = $router->background_psql('wfengine_router', on_error_stop => 0, extra_params => [ '-U', "${mt}_all" ]);
sub start_runs
{
	my ($n) = @_;
	my $out = $app->query(join("\n", map { q{SELECT 'run:' || wf.start_run('job');} } 1 .. $n));
	my $err = $app->{stderr} // '';
	$app->{stderr} = '';
	$acked{$_} = 1 for ($out =~ /^run:(\S+)$/mg);
	die "a start failed with something else than a refusal of the cut-over: $err"
	  if $err =~ /ERROR/ && $err !~ /is moving to another shard/;
}

my @worker_shards = $ENV{WF_TEST_WORKER_S1_ONLY} ? qw(s1) : qw(s1 s2);
my $w = start_worker('[' . join(', ', @worker_shards) . ']', @worker_shards);
start_runs(10);
# the move, in the background, with starts going on
my $mover = $router->background_psql('wfengine_router', on_error_stop => 0);
$mover->query_until(qr/started/, "\\echo started\nSELECT 'moved:' || wfrouter.move_partition($p, 's2');\n\\echo finished\n");
my $t0 = time;
my $moves_out = '';
while (time - $t0 < 60)
{
	eval { $mover->{run}->pump_nb };
	last if ($mover->{stdout} // '') =~ /finished/;
	start_runs(2);
	usleep(50_000);
}
like($mover->{stdout}, qr/moved:\d+/, "partition $p of tenant $mt moved from s1 to s2 with the worker at work")
  or diag $mover->{stderr};
$mover->quit;
start_runs(10);
my $ids = join(',', map { "'$_'" } sort keys %acked);
my $n = scalar(keys %acked);
note "$n runs started, " . sprintf('%.1f', time - $t0) . ' s from the move\'s start to its end';

# every acknowledged start completes (on s2), in at most 30 s
$t0 = time;
my $completed;
while (time - $t0 < 30)
{
	$completed = $shard{s2}->safe_psql($db, "SELECT count(*) FROM wf.runs WHERE run_id IN ($ids) AND status = 'completed'");
	last if $completed == $n;
	usleep(200_000);
}
my ($wout, $werr) = stop_worker($w);
is($completed, $n, "every acknowledged start ($n) is a completed run on s2")
  or diag "the runs not completed, their tasks, and what the worker saw of them:\n" . $shard{s2}->safe_psql($db, qq{
SELECT string_agg(format('%s %s %s: %s', r.run_id, r.status, r.current_step,
         (SELECT string_agg(format('task %s %s %s fence %s lease %s', t.task_id, t.step, t.status, t.fence, t.lease_expires_at), '; ') FROM wf.tasks t WHERE t.run_id = r.run_id)), E'\n')
FROM wf.runs r WHERE r.run_id IN ($ids) AND r.status <> 'completed'})
  . "\nall runs of the tenant on s2: " . $shard{s2}->safe_psql($db, "SELECT count(*) FROM wf.runs WHERE tenant_id = '$mt'")
  . "\nworker output lines: " . scalar(split /\n/, $wout);
is($shard{s2}->safe_psql($db, "SELECT count(DISTINCT run_id) || '/' || count(*) FROM wf.runs WHERE run_id IN ($ids)"),
	"$n/$n", 'each run is on s2 once');
is($shard{s1}->safe_psql($db, "SELECT count(*) FROM wf.runs WHERE tenant_id = '$mt'"), '0', 'nothing of the tenant is left on s1');
is($shard{s2}->safe_psql($db, qq{
SELECT count(*) FROM wf.runs r
WHERE r.run_id IN ($ids)
  AND ((SELECT count(*) FROM wf.event_log e WHERE e.run_id = r.run_id AND e.type = 'task_completed') <> 3
       OR (SELECT count(*) FROM wf.event_log e WHERE e.run_id = r.run_id AND e.type = 'run_completed') <> 1)}),
	'0', 'each run has three completed tasks and one run_completed event in its history');
my ($vrc, $vout, $verr) = $router->psql('wfengine_router',
	"SELECT count(*) FILTER (WHERE wf.verify_run(r::uuid)) FROM unnest(ARRAY[$ids]) r", extra_params => [ '-U', "${mt}_all" ]);
is($vout, $n, "wf.verify_run (through the router) holds for every run") or diag $verr;

my ($moves, $ended_on) = $wout =~ /\{"moves": (\d+), "ended_on": (-?\d+)\}/ ? ($1, $2) : (undef, undef);
ok(defined $moves && $moves >= 1 && $ended_on == 1, "the worker moved to s2 (moves: " . ($moves // 'none') . ', ended on shard ' . ($ended_on // '?') . ')')
  or diag $werr;
like($werr, qr/moving from shard '[^']*port=\Q$shard{s1}->{_port}\E[^']*' to '[^']*port=\Q$shard{s2}->{_port}\E/,
	'its log shows the move from s1 to s2');
my %answers;
$answers{$1}++ for ($wout =~ /"answer": "(\w+)"/g);
note 'the worker\'s reports: ' . join(', ', map { "$_ $answers{$_}" } sort keys %answers);
my @handled = ($wout =~ /"handled": "([^"]+)", "step": "(\w+)"/g);
my %steps;
for (my $i = 0; $i < @handled; $i += 2) { $steps{"$handled[$i] $handled[$i + 1]"} = 1; }
is(scalar(keys %steps), 3 * $n, "the worker handled each step of each run (" . 3 * $n . ')');

# a worker given only [s1]: after the move it claims nothing
my $w1 = start_worker('[s1]', 's1');
%acked = ();
start_runs(5);
$ids = join(',', map { "'$_'" } sort keys %acked);
sleep 3;
($wout, $werr) = stop_worker($w1);
is($shard{s2}->safe_psql($db, "SELECT count(*) FROM wf.runs WHERE run_id IN ($ids) AND status = 'completed'"), '0',
	'a worker given only [s1] completes none of the runs started after the move');
unlike($wout, qr/"handled"/, '... it handled no task');
like($werr, qr/claim refused \(55W01/, '... every claim of it is refused with 55W01');
like($wout, qr/\{"moves": 0, "ended_on": 0\}/, '... and it did not move');

note sprintf('the test took %.0f s', time - $t_start);
$app->quit;
$router->stop;
$_->stop for values %shard;
done_testing();
