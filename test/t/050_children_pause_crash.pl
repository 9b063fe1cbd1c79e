
# Copyright (c) 2026, wfengine developers

# Child runs and paused runs across a crash (issue 5), with the engine
# worker doing the firing (no wf.tick()).
#
#  1. Parents with a parallel step (two branches) and a subworkflow step;
#     every branch task is completed, and the server crashes (immediate
#     stop) right after, so the child_done timers that tell the parents
#     are due but may not have fired.  After the restart the engine
#     worker joins every parallel step and moves every parent on.
#  2. A paused run whose retry backoff ran out (a held timer), and a
#     paused run whose worker reported while it was paused (a held
#     result), are still paused after a crash, still hold them, and go on
#     when they are resumed.
#  3. wf.verify_run holds for every run.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;    # (also: initdb from a template)

my $node = PostgreSQL::Test::Cluster->new('wf_children_crash');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
restart_after_crash = on
max_worker_processes = 16
));
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE wf');
$node->safe_psql('wf', 'CREATE EXTENSION wfengine');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'wfengine worker' AND datname = 'wf'"
	),
	'the engine worker of the database runs');

$node->safe_psql(
	'wf', q{
SELECT wf.publish_definition('kid', '{"steps": [{"name": "k", "queue": "kid_q"}]}');
SELECT wf.publish_definition('fam', '{"steps": [
  {"name": "both", "type": "parallel", "branches": [
     {"steps": [{"name": "l", "queue": "fam_q"}]}, {"steps": [{"name": "r", "queue": "fam_q"}]}]},
  {"name": "sub", "type": "subworkflow", "definition": "kid", "version": 1},
  {"name": "last", "queue": "last_q"}]}');
SELECT count(wf.start_run('fam', jsonb_build_object('i', i))) FROM generate_series(1, 20) i;
SELECT wf.publish_definition('held', '{"steps": [
  {"name": "a", "queue": "held_q", "retry": {"max_attempts": 3, "initial_interval": "1s", "jitter": 0}},
  {"name": "b", "queue": "held_b"}]}');
});

# 2. the paused run: attempt 1 failed (a 1 s backoff), paused, then the backoff runs out
my $held = $node->safe_psql(
	'wf', q{
SELECT wf.start_run('held', '{}');
});
$node->safe_psql('wf',
	q{SELECT wf.fail_task(task_id, fence, '{"code": "busy"}', true) FROM wf.claim_tasks('held_q', 'w')});
$node->safe_psql('wf', qq{SELECT wf.pause_run('$held', 'maintenance')});
ok( $node->poll_query_until(
		'wf',
		qq{SELECT count(*) = 1 FROM wf.timers WHERE run_id = '$held' AND outcome = 'held' AND status = 'pending'}
	),
	'the backoff that ran out while the run is paused is held');

# 2. a second paused run: its attempt was in flight and its worker reported
my $held2 = $node->safe_psql('wf', q{SELECT wf.start_run('held', '{"n": 2}')});
$node->safe_psql('wf', q{SELECT count(*) FROM wf.claim_tasks('held_q', 'w2', 1, '1 hour')});
$node->safe_psql('wf', qq{SELECT wf.pause_run('$held2', 'review')});
is( $node->safe_psql(
		'wf',
		qq{SELECT wf.complete_task(task_id, fence, '{"done": 2}') FROM wf.tasks WHERE run_id = '$held2' AND status = 'leased'}
	),
	'accepted', 'a result reported while the run is paused is accepted (held)');

# 1. complete every branch task with the workers told to fire nothing, so
# that the crash finds every child_done timer pending; they fire again
# after the restart (the setting is back on then)
$node->safe_psql('postgres', 'ALTER SYSTEM SET wfengine.enabled = off');
$node->reload;
$node->safe_psql('wf', 'SELECT pg_sleep(0.5)');
$node->safe_psql('wf',
	q{SELECT count(wf.complete_task(task_id, fence, '{"done": true}')) FROM wf.claim_tasks('fam_q', 'w', 100)});
is( $node->safe_psql(
		'wf', q{SELECT count(*) FROM wf.timers WHERE kind = 'child_done' AND status = 'pending'}),
	'40', 'every branch that ended left a child_done timer for its parent');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET wfengine.enabled');
$node->stop('immediate');
$node->start;

ok( $node->poll_query_until(
		'wf',
		q{SELECT count(*) = 20 FROM wf.runs WHERE definition_name = 'fam' AND current_step = 'sub'}),
	'after the crash every parallel step joined and every parent started its subworkflow');
is( $node->safe_psql(
		'wf', q{
SELECT count(*) FROM wf.runs p WHERE p.definition_name = 'fam'
  AND jsonb_array_length(p.context->'steps'->'both'->'output') = 2
  AND p.context->'steps'->'both'->'output'->0->>'done' = 'true'
  AND p.context->'steps'->'both'->'output'->1->>'done' = 'true'}),
	'20', 'each join holds both branch outputs');
$node->safe_psql('wf',
	q{SELECT count(wf.complete_task(task_id, fence, '{"kid": true}')) FROM wf.claim_tasks('kid_q', 'w', 100)});
ok( $node->poll_query_until(
		'wf', q{SELECT count(*) = 20 FROM wf.runs WHERE definition_name = 'fam' AND current_step = 'last'}),
	'every subworkflow ended and every parent went on');
is( $node->safe_psql(
		'wf', q{SELECT count(*) FROM wf.timers WHERE kind = 'child_done' AND outcome = 'applied'}),
	'60', 'each child told its parent once (40 branches, 20 subworkflows)');

# 2. the paused run after the crash: still paused, still holding
is($node->safe_psql('wf', qq{SELECT status FROM wf.runs WHERE run_id = '$held'}),
	'paused', 'the paused run is still paused after the crash');
is( $node->safe_psql(
		'wf',
		qq{SELECT count(*) FROM wf.timers WHERE run_id = '$held' AND outcome = 'held' AND status = 'pending'}
	),
	'1', 'its held timer is still held');
is($node->safe_psql('wf', qq{SELECT status FROM wf.runs WHERE run_id = '$held2'}),
	'paused', 'the run with the held result is still paused after the crash');
is($node->safe_psql('wf', qq{SELECT wf.resume_run('$held2', 'review done')}),
	'running', 'it resumes');
is( $node->safe_psql(
		'wf',
		qq{SELECT string_agg(type, ' ' ORDER BY seq) FROM wf.history('$held2') WHERE seq > 2}),
	'run_paused result_held run_resumed task_completed task_scheduled',
	'the result held across the crash is applied on resume and the run goes on');
$node->safe_psql('wf', qq{SELECT wf.resume_run('$held', 'maintenance over')});
ok( $node->poll_query_until(
		'wf', q{SELECT count(*) = 1 FROM wf.tasks WHERE queue = 'held_q' AND attempt = 2 AND status = 'ready'}),
	'after the resume the held backoff fires and attempt 2 is scheduled');

is( $node->safe_psql('wf', q{SELECT count(*) FILTER (WHERE NOT wf.verify_run(run_id)) FROM wf.runs}),
	'0', 'wf.verify_run holds for every run');

$node->stop;
done_testing();
