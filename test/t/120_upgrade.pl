
# Copyright (c) 2026, wfengine developers

# Versions and upgrades (issue 14; docs/upgrading.md, "What is tested").
#
# The server runs in an installation of its own with release 0.1.0 built
# from its commit (sql/releases; WfTestUtil's wf_release_root), so that
# the runs of database "up" are made by the 0.1.0 library.  Then the
# library is swapped as an operator swaps it: the server stopped, this
# tree's library and scripts installed over the release's
# (wf_install_current), the server started; what follows in a database
# still on 0.1.0 is the new library serving the released 0.1.0 script.
# Skipped, saying why, when the release's source is not at hand (no git
# history, and no WF_RELEASE_TARS from test/scripts/test.sh).
#
#  1. The released script: the installed sql/wfengine--0.1.0.sql (the one
#     CREATE EXTENSION ... VERSION '0.1.0' runs, of the release's build) is the file of the tree,
#     has the checksum of sql/released.sha256 and, when git and the tag are
#     at hand, is byte-identical to `git show v0.1.0:sql/wfengine--0.1.0.sql`.
#  2. Database "up": CREATE EXTENSION wfengine VERSION '0.1.0', and runs in
#     every state the engine has, of two tenants (default and acme): a task
#     ready and a task leased, a retry backoff and a sleep timer, an
#     approval with its tokens issued, a parent waiting on its child run, a
#     wait_event step waiting for a signal, paused (with a result held),
#     failed, cancelling and compensating with their compensation pending.
#     Each verifies.  Then the library is swapped, and ALTER EXTENSION
#     wfengine UPDATE.
#  3. The schema of "up" equals that of "fresh", a new CREATE EXTENSION
#     wfengine (0.1.0 plus the chain): pg_dump --schema-only --binary-upgrade
#     of both, compared after normalising only what must differ (see
#     normalise_dump).
#  4. After the upgrade every run still verifies (with the post-upgrade
#     check of docs/upgrading.md, as a superuser, tenants included; the
#     naive query it replaces fails as a superuser once a tenant has runs),
#     and every run is driven to its end by the API and the engine worker:
#     tasks completed (the leased one with its pre-upgrade fence), the
#     approval decided with its pre-upgrade token, the signal sent, the
#     paused run resumed, the failed run retried, the compensations done,
#     timers fired.  Every run verifies at the end.  Issue 31: an attempt
#     completed after the update has no row, one completed before keeps
#     its row, and late and doubled reports and heartbeats of both get the
#     answers of 0.2.0 (duplicate, stale, a fence never issued refused),
#     recorded in the history; wf.queue_stats counts the completion.  The
#     runs' contexts keep their input through the update (read as they
#     are) and lose it at their next change when it is wf.runs.input; a
#     run whose input wf.update_context changed keeps it in its context.
#     A large step output recorded before the update stays copied in the
#     context; one recorded after it is referred to, and wf.run_context
#     gives it.
#  5. Database "old" stays on 0.1.0: the library works there (API calls;
#     its engine worker fires its timers), since 0.1.0 is not older than
#     WF_MIN_SCHEMA_VERSION.  To see the refusal, its pg_extension row is
#     made to say 0.0.9, a schema older than the library's minimum: API
#     calls refuse with 55000 "wfengine schema version 0.0.9 is older than
#     the loaded library 0.2.0" (hint: ALTER EXTENSION wfengine UPDATE),
#     also in a session that had cached the version before (the syscache
#     callback); calls that need no schema (wf.current_tenant) go on; the
#     engine worker logs that once, fires nothing and stays (same pid, no
#     restarts); back at 0.1.0 it logs that it resumes and fires the timer.
#  6. A schedule made under 0.1.0 (the release's library) by a login of
#     wfengine_admin, in the pg_cron database: the update rewrites its job's command from
#     wf._fire_schedule, which no role may execute from 0.2.0 on (issue 29),
#     to wf.fire_schedule, which then starts the run as that login; the old
#     command would be refused to it.

use strict;
use warnings;

use Digest::SHA;
use File::Compare;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;

# release 0.1.0, built from its commit
my ($inst, $rel_version, $rel_commit) = wf_release_root('wf_upgrade_0.1.0', version => '0.1.0');
plan skip_all => "release 0.1.0 cannot be built: $rel_version" unless $inst;
note "release $rel_version built from $rel_commit";

my $node = PostgreSQL::Test::Cluster->new('wf_upgrade', install_path => $inst);
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
wfengine.approval_key = 'cd0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd'
wfengine.naptime = '300ms'
wfengine.enabled = off
));
$node->start;

# the library's version is default_version of the control file
my ($lib_version) = slurp_file('wfengine.control') =~ /^default_version\s*=\s*'([^']+)'/m;
my ($base) = sort map { m{wfengine--([0-9.]+)\.sql$} ? $1 : () } glob('sql/wfengine--*.sql');
is($base, '0.1.0', 'the base script is 0.1.0');
isnt($lib_version, $base, "the library ($lib_version) is newer than the base script");

sub sq
{
	my ($db, $sql) = @_;
	return $node->safe_psql($db, $sql);
}

# as acme_app, a login of tenant acme
sub acme
{
	my ($db, $sql) = @_;
	return $node->safe_psql($db, $sql, extra_params => [ '-U', 'acme_app' ]);
}

# ---------------------------------------------------------------------
# 1. the released script
# ---------------------------------------------------------------------
my $sharedir = $node->config_data('--sharedir');
my $released = slurp_file('sql/wfengine--0.1.0.sql');
is(compare('sql/wfengine--0.1.0.sql', "$sharedir/extension/wfengine--0.1.0.sql"),
	0, 'the installed 0.1.0 script is the one of the tree');
my ($sum) = slurp_file('sql/released.sha256') =~ /^([0-9a-f]{64})\s+wfengine--0\.1\.0\.sql$/m;
is(Digest::SHA::sha256_hex($released), $sum, 'it has the checksum of sql/released.sha256');
SKIP:
{
	# the tree may be a copy owned by another user: safe.directory for this
	# one read-only command
	my ($out, $err) = ('', '');
	my $have = eval {
		IPC::Run::run([ 'git', '-c', 'safe.directory=*', 'rev-parse', '--verify', '-q', 'v0.1.0^{commit}' ],
			'>', \$out, '2>', \$err);
	};
	skip "git or the tag v0.1.0 is not available here: byte-for-byte check against the tag skipped", 1
	  unless $have;
	my $tagged = '';
	IPC::Run::run([ 'git', '-c', 'safe.directory=*', 'show', 'v0.1.0:sql/wfengine--0.1.0.sql' ],
		'>', \$tagged, '2>', \$err)
	  or die "git show failed: $err";
	ok($tagged eq $released, 'sql/wfengine--0.1.0.sql is byte-identical to the one tagged v0.1.0');
}

# ---------------------------------------------------------------------
# 2. database "up" on 0.1.0, with runs in every state
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE up');
sq('up', q{
CREATE EXTENSION wfengine VERSION '0.1.0';
SELECT wf.create_tenant('acme');
CREATE ROLE acme_app LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_acme;
});
is(sq('up', q{SELECT extversion FROM pg_extension WHERE extname = 'wfengine'}),
	'0.1.0', 'database up is on 0.1.0');

# One definition per label, each with queues of its own, so that a claim
# of one label's queue never takes another's task.
my %def = (
	task_ready => '{"steps": [{"name": "a", "queue": "task_ready_a"}, {"name": "b", "queue": "task_ready_b"}]}',
	task_leased => '{"steps": [{"name": "a", "queue": "task_leased_a"}, {"name": "b", "queue": "task_leased_b"}]}',
	backoff => '{"steps": [{"name": "a", "queue": "backoff_a",
		"retry": {"max_attempts": 3, "initial_interval": "1s", "jitter": 0}}]}',
	sleep => '{"steps": [{"name": "z", "type": "sleep", "duration": "1s"}, {"name": "e", "queue": "sleep_e"}]}',
	approval => '{"steps": [{"name": "ok", "type": "approval", "approvers": ["ann"],
		"notify_queue": "approval_mail", "expires": "1d"}, {"name": "pay", "queue": "approval_pay"}]}',
	kid => '{"steps": [{"name": "k", "queue": "kid_k"}]}',
	parent => '{"steps": [{"name": "sub", "type": "subworkflow", "definition": "kid", "version": 1},
		{"name": "last", "queue": "parent_last"}]}',
	signal => '{"steps": [{"name": "w", "type": "wait_event", "event": "go"}, {"name": "after", "queue": "signal_after"}]}',
	paused => '{"steps": [{"name": "a", "queue": "paused_a"}, {"name": "b", "queue": "paused_b"}]}',
	failed => '{"steps": [{"name": "a", "queue": "failed_a", "retry": {"max_attempts": 1}},
		{"name": "b", "queue": "failed_b"}]}',
	cancelling => '{"steps": [{"name": "a", "queue": "cancelling_a", "compensate": {"queue": "cancelling_undo"}},
		{"name": "b", "queue": "cancelling_b"}]}',
	compensating => '{"on_failure": "compensate", "steps": [
		{"name": "a", "queue": "compensating_a", "compensate": {"queue": "compensating_undo"}},
		{"name": "b", "queue": "compensating_b", "retry": {"max_attempts": 1}}]}',);
for my $name (sort keys %def)
{
	sq('up', "SELECT wf.publish_definition('$name', '$def{$name}')");
}
acme('up', qq{SELECT wf.publish_definition('task_ready', '$def{task_ready}')});
acme('up', qq{SELECT wf.publish_definition('signal', '$def{signal}')});

my %run;    # label => run id
my %tenant_of = (acme_ready => 'acme', acme_signal => 'acme');
for my $label (qw(task_ready task_leased backoff sleep approval parent signal paused failed cancelling compensating))
{
	$run{$label} = sq('up', qq{SELECT wf.start_run('$label', '{"label": "$label"}')});
}
$run{acme_ready} = acme('up', q{SELECT wf.start_run('task_ready', '{"label": "acme_ready"}')});
$run{acme_signal} = acme('up', q{SELECT wf.start_run('signal', '{"label": "acme_signal"}')});
$run{child} = sq('up', qq{SELECT run_id FROM wf.runs WHERE parent_run_id = '$run{parent}'});

# Issue 31: a completed attempt's row is deleted (0.3.0), so the rows of
# the attempts of database "up" are copied into test_rows, once it exists
# (section 4: a table of its own would differ from the fresh install's
# schema), before they complete: what wf.history's task_scheduled is
# compared with.  The input as the row hands it out: its own, or the run's
# as it stands (NULL, since 0.3.0).
my $copy_rows = 0;
sub copy_rows_sql
{
	my ($where) = @_;
	return qq{INSERT INTO test_rows
SELECT t.task_id, t.queue, t.activity, t.idempotency_key, t.available_at,
       COALESCE(t.input, (SELECT h.payload->'input' FROM wf.history(t.run_id) h WHERE h.seq = t.input_seq),
                r.context->'input', r.input)
FROM wf.tasks t JOIN wf.runs r ON r.run_id = t.run_id WHERE $where ON CONFLICT DO NOTHING};
}

# work(db, queue, output): claims every task of queue and completes each
sub work
{
	my ($db, $queue, $output, $as) = @_;
	$output //= '{}';
	my $sql = qq{SELECT count(wf.complete_task(task_id, fence, '$output')) FROM wf.claim_tasks('$queue', 'w', 100)};
	$sql = qq{CREATE TEMP TABLE claimed AS SELECT task_id, fence FROM wf.claim_tasks('$queue', 'w', 100);
} . copy_rows_sql('t.task_id IN (SELECT task_id FROM claimed)') . qq{;
SELECT count(wf.complete_task(task_id, fence, '$output')) FROM claimed}
	  if $copy_rows && !$as && $db eq 'up';
	return $as ? $as->($db, $sql) : sq($db, $sql);
}

# a task leased for an hour, its fence kept for after the upgrade
my ($leased_task, $leased_fence) =
  split /\|/, sq('up', q{SELECT task_id, fence FROM wf.claim_tasks('task_leased_a', 'w1', 1, '1 hour')});
# attempt 1 failed, attempt 2 waits for its backoff timer
sq('up', q{SELECT wf.fail_task(task_id, fence, '{"code": "busy"}', true) FROM wf.claim_tasks('backoff_a', 'w')});
# the approval's notification sent, ann's token kept for after the upgrade
my ($nt, $nf) = split /\|/, sq('up', q{SELECT task_id, fence FROM wf.claim_tasks('approval_mail', 'mailer')});
my $token = sq('up',
	qq{SELECT token FROM wf.issue_approval_tokens($nt, $nf) WHERE approver = 'ann' AND decision = 'approve'});
is(sq('up', qq{SELECT wf.complete_task($nt, $nf, '{"sent": 1}')}), 'accepted', 'the approval notification is sent');
# paused with its attempt in flight
my ($paused_task, $paused_fence) =
  split /\|/, sq('up', q{SELECT task_id, fence FROM wf.claim_tasks('paused_a', 'w1', 1, '1 hour')});
is(sq('up', qq{SELECT wf.pause_run('$run{paused}', 'maintenance')}), 'paused', 'a run is paused');
# failed for good at step a
sq('up', q{SELECT wf.fail_task(task_id, fence, '{"code": "broken"}', false) FROM wf.claim_tasks('failed_a', 'w')});
# cancelled after step a: its compensation is pending.  Step a's output is
# large (0.3.0 keeps such an output in the history only): 0.1.0 copies it
# into the context, and into the compensation's input.
my $big = '{"pad": "' . ('p' x 300) . '"}';
is(work('up', 'cancelling_a', $big), '1', 'step a of the run to cancel completes');
is(sq('up', qq{SELECT length(context->'steps'->'a'->'output'->>'pad') FROM wf.runs WHERE run_id = '$run{cancelling}'}),
	'300', 'before the update a large output is copied into the context');
sq('up', qq{SELECT wf.cancel_run('$run{cancelling}', 'customer left')});
# a saga whose step b failed: step a's compensation is pending
is(work('up', 'compensating_a'), '1', 'step a of the saga completes');
sq('up', q{SELECT wf.fail_task(task_id, fence, '{"code": "declined"}', false) FROM wf.claim_tasks('compensating_b', 'w')});

# an attempt completed before the upgrade (0.1.0 keeps its row 'completed'):
# its task and fence, for the doubled report after the upgrade
my ($done_task, $done_fence) = split /\|/,
  sq('up', qq{SELECT task_id, fence FROM wf.tasks WHERE run_id = '$run{cancelling}' AND step = 'a'});
my $completed_rows = sq('up', q{SELECT count(*) FROM wf.tasks WHERE status = 'completed'});
cmp_ok($done_fence, '>', 1, 'it has an older fence than its own to report with');

# where every run stands before the upgrade
my %expect_before = (
	task_ready => 'running a ready',
	task_leased => 'running a leased',
	backoff => 'running a timer',
	sleep => 'running z timer',
	approval => 'running ok timer',
	parent => 'running sub none',
	child => 'running k ready',
	signal => 'running w none',
	paused => 'paused a leased',
	failed => 'failed a none',
	cancelling => 'cancelling compensate:a ready',
	compensating => 'compensating compensate:a ready',
	acme_ready => 'running a ready',
	acme_signal => 'running w none',);

# the run's status, current step and what it waits on: its live task's
# status, else a pending timer, else none (read as a superuser: all tenants)
sub where_is
{
	my ($id) = @_;
	return sq(
		'up', qq{
SELECT r.status || ' ' || coalesce(r.current_step, '-') || ' ' ||
       coalesce((SELECT t.status FROM wf.tasks t WHERE t.run_id = r.run_id AND t.status IN ('ready', 'leased')),
                (SELECT 'timer' FROM wf.timers m WHERE m.run_id = r.run_id AND m.status = 'pending' LIMIT 1),
                'none')
FROM wf.runs r WHERE r.run_id = '$id'});
}
for my $label (sort keys %expect_before)
{
	is(where_is($run{$label}), $expect_before{$label}, "before the upgrade: $label");
}
is(sq('up', q{SELECT count(*) FROM wf.runs}), scalar(keys %run), 'no other runs');

# The post-upgrade check of docs/upgrading.md, as a superuser: each
# tenant's runs are verified as a role of that tenant (wf.verify_run acts
# for the session's tenant; a superuser's is "default").  Prints
# "tenant runs verified" lines.
my $check_sql = q{
BEGIN;
CREATE ROLE wf_upgrade_check NOLOGIN IN ROLE wfengine_app;
DO $$
DECLARE
    t text;
    recent uuid[];
    verified int;
BEGIN
    FOR t IN SELECT DISTINCT tenant_id FROM wf.runs ORDER BY 1 LOOP
        SELECT array_agg(run_id) INTO recent FROM (
            SELECT run_id FROM wf.runs WHERE tenant_id = t ORDER BY created_at DESC LIMIT 100) AS r;
        IF t <> 'default' THEN
            PERFORM wf.add_tenant_member(t, 'wf_upgrade_check');
            SET SESSION AUTHORIZATION wf_upgrade_check;
        END IF;
        SELECT count(*) FILTER (WHERE wf.verify_run(run_id)) INTO verified FROM unnest(recent) AS run_id;
        RESET SESSION AUTHORIZATION;
        IF t <> 'default' THEN
            PERFORM wf.remove_tenant_member(t, 'wf_upgrade_check');
        END IF;
        RAISE NOTICE 'tenant %: % runs, % verified', t, cardinality(recent), verified;
    END LOOP;
END
$$;
ROLLBACK;
};
sub post_upgrade_check
{
	my ($db) = @_;
	my ($ret, $out, $err) = $node->psql($db, $check_sql, on_error_stop => 1);
	die "the post-upgrade check failed: $err" if $ret != 0;
	return join("\n", $err =~ /NOTICE:  (tenant .*)$/mg);
}
my $all_verified = "tenant acme: 2 runs, 2 verified\ntenant default: 12 runs, 12 verified";
is(post_upgrade_check('up'), $all_verified, 'before the upgrade every run of every tenant verifies');

# 6, first half: a schedule made under 0.1.0 in the pg_cron database
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pg_cron;
CREATE EXTENSION wfengine VERSION '0.1.0';
SELECT wf.create_tenant('sched');
CREATE ROLE sched_admin LOGIN IN ROLE wfengine_admin, wf_tenant_sched;
GRANT USAGE ON SCHEMA cron TO sched_admin;
});
$node->safe_psql('postgres',
	q{SELECT wf.publish_definition('yearly', '{"steps": [{"name": "a", "queue": "yearly_q"}]}')},
	extra_params => [ '-U', 'sched_admin' ]);
my $job = $node->safe_psql('postgres', q{SELECT wf.schedule('yearly', '0 0 1 1 *', 'yearly')},
	extra_params => [ '-U', 'sched_admin' ]);
my $old_cmd = $node->safe_psql('postgres', "SELECT command FROM cron.job WHERE jobid = $job");
like($old_cmd, qr/^SELECT wf\._fire_schedule\('\d+'\)$/, 'under 0.1.0 the job calls wf._fire_schedule');

# ---------------------------------------------------------------------
# 2, on: the library swapped as an operator does: the server stopped, the
# new release's library and scripts installed, the server started
# ---------------------------------------------------------------------
is(sq('postgres', q{SELECT default_version FROM pg_available_extensions WHERE name = 'wfengine'}),
	'0.1.0', 'until now the server ran release 0.1.0 (its control file and library)');
$node->stop;
wf_install_current($inst);
$node->start;
is(sq('postgres', q{SELECT default_version FROM pg_available_extensions WHERE name = 'wfengine'}),
	$lib_version, "the server runs the library of $lib_version now");
is(sq('up', q{SELECT extversion FROM pg_extension WHERE extname = 'wfengine'}),
	'0.1.0', 'database up is still on 0.1.0');
for my $label (sort keys %expect_before)
{
	is(where_is($run{$label}), $expect_before{$label}, "with the new library, before the upgrade: $label");
}
is(post_upgrade_check('up'), $all_verified, 'with the new library every run still verifies before the upgrade');

# wf.history of every run of tenant default as the released wf.history
# shows it (issue 31: from 0.3.0 a C function that puts back what a
# task_scheduled event leaves out; the events before the update have it all)
my $history_sql = q{
SELECT string_agg(r.run_id || ' ' || h.seq || ' ' || h.type || ' ' || h.payload::text || ' ' || h.hash,
                  E'\n' ORDER BY r.run_id, h.seq)
FROM wf.runs r, wf.history(r.run_id) h WHERE r.tenant_id = 'default'};
my $history_before = sq('up', $history_sql);

# ---------------------------------------------------------------------
# 5, first half: database "old" stays on 0.1.0 and is served by the new
# library (0.1.0 is not older than the library's minimum)
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE old');
sq('old', q{
CREATE EXTENSION wfengine VERSION '0.1.0';
SELECT wf.publish_definition('nap', '{"steps": [{"name": "z", "type": "sleep", "duration": "1h"}, {"name": "e", "queue": "old_e"}]}');
SELECT wf.publish_definition('one', '{"steps": [{"name": "a", "queue": "old_a"}]}');
});
my $old_run = sq('old', q{SELECT wf.start_run('one', '{}')});
is(sq('old', qq{SELECT input FROM wf.tasks WHERE run_id = '$old_run'}),
	'{}', 'on 0.1.0 (input NOT NULL) the new library writes the attempt with its copy of the input');
is(work('old', 'old_a'), '1', 'on 0.1.0 the new library claims and completes a task');
is(sq('old', qq{SELECT wf.run_status('$old_run') || ' ' || wf.verify_run('$old_run')}),
	'completed true', 'and the run completes and verifies');
# its wf.history is 0.1.0's, which shows events as stored: the new library
# writes task_scheduled with every key there
is( sq('old',
		qq{SELECT string_agg((SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(e.payload) k), ' ')
           FROM wf.events e WHERE e.run_id = '$old_run' AND e.type = 'task_scheduled'}),
	'activity,available_at,idempotency_key,input,queue,task_id,visit',
	'on 0.1.0 the new library writes task_scheduled with every key');
# and the run's context with its input (0.2.0's layout, until the update)
is(sq('old', qq{SELECT context->'input' = input FROM wf.runs WHERE run_id = '$old_run'}),
	't', 'on 0.1.0 the new library writes the run\'s context with its input');

# ---------------------------------------------------------------------
# 2, end: the upgrade
# ---------------------------------------------------------------------
is(sq('up', q{SELECT count(*) FILTER (WHERE context->'input' = input) || ' of ' || count(*) FROM wf.runs}),
	sq('up', q{SELECT count(*) || ' of ' || count(*) FROM wf.runs}),
	'before the update every run\'s context holds its input');
sq('up', 'ALTER EXTENSION wfengine UPDATE');
my $updated_at = sq('up', 'SELECT clock_timestamp()');
is(sq('up', q{SELECT extversion FROM pg_extension WHERE extname = 'wfengine'}),
	$lib_version, "ALTER EXTENSION wfengine UPDATE brings up to $lib_version");

# Issue 31: the two unique indexes of attempts became one, built on the
# rows in flight; it still refuses a second live attempt of a step.
ok(sq('up', q{SELECT count(*) FROM wf.tasks WHERE status IN ('ready', 'leased')}) > 0,
	'live attempts were in flight across the update');
{
	my ($ret, $out, $err) = $node->psql('up',
		q{INSERT INTO wf.tasks SELECT (jsonb_populate_record(t, jsonb_build_object(
		     'task_id', nextval('wf.task_id_seq'), 'attempt', t.attempt + 1))).*
		  FROM wf.tasks t WHERE t.status IN ('ready', 'leased') LIMIT 1});
	like($err, qr/duplicate key value violates unique constraint "tasks_attempt_key"/,
		'after the update a second live attempt of a step is refused');
}

# ---------------------------------------------------------------------
# 3. the upgraded schema equals a fresh install
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
sq('fresh', 'CREATE EXTENSION wfengine');
is(sq('fresh', q{SELECT extversion FROM pg_extension WHERE extname = 'wfengine'}),
	$lib_version, "a fresh CREATE EXTENSION installs $lib_version");

# A plain pg_dump --schema-only shows an extension as its one CREATE
# EXTENSION line, hiding every object in it; --binary-upgrade (what
# pg_upgrade uses) dumps each member object with its definition, owner,
# privileges and membership.  What must differ between two databases, and
# nothing else, is normalised:
#  - the \restrict/\unrestrict lines, whose key is random per dump;
#  - OIDs: of the next type, relation, toast and index
#    (binary_upgrade_set_next_*), of the configuration tables in
#    binary_upgrade_create_empty_extension's array, and of the relation in
#    each "WHERE oid = ..." of the relfrozenxid updates;
#  - relfrozenxid/relminmxid, the transaction ids the tables were made in;
#  - the LSNs of binary_upgrade_set_next_attribute_versions (where the
#    columns were created in the WAL);
#  - the positions of the sequences (setval), which --binary-upgrade dumps
#    even with --schema-only: data, and "up" has runs.
sub normalise_dump
{
	my ($dump) = @_;
	my @out;
	for (split /\n/, $dump)
	{
		next if /^\\(un)?restrict /;
		s/binary_upgrade_(set_next_[a-z_]+)\('[0-9]+'::pg_catalog\.oid\)/binary_upgrade_$1(<oid>)/;
		s/^(SELECT pg_catalog\.binary_upgrade_create_empty_extension\(.*?)'\{[0-9,]+\}'/$1'{<oids>}'/;
		s/'\{[0-9A-F\/,]+\}'::pg_catalog\.pg_lsn\[\]/'{<lsns>}'::pg_catalog.pg_lsn[]/;
		s/relfrozenxid = '[0-9]+', relminmxid = '[0-9]+'/relfrozenxid = <xid>, relminmxid = <mxid>/;
		s/^WHERE oid = '[0-9]+';$/WHERE oid = <oid>;/;
		s/^(SELECT pg_catalog\.setval\('[a-z_.]+', )[0-9]+, (true|false)\);$/$1<value>);/;
		push @out, $_;
	}
	return join("\n", @out) . "\n";
}

sub schema_dump
{
	my ($db) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'pg_dump', '--schema-only', '--binary-upgrade', '-d', $node->connstr($db) ],
		'>', \$out, '2>', \$err)
	  or die "pg_dump of $db failed: $err";
	return normalise_dump($out);
}
my $dump_up = schema_dump('up');
my $dump_fresh = schema_dump('fresh');
like($dump_fresh, qr/CREATE TABLE wf\.runs/, 'the dump holds the extension\'s objects');
my $same = $dump_up eq $dump_fresh;
ok($same, 'the upgraded schema equals a fresh install of the new version');
if (!$same)
{
	my $dir = $node->basedir;
	PostgreSQL::Test::Utils::append_to_file("$dir/up.sql", $dump_up);
	PostgreSQL::Test::Utils::append_to_file("$dir/fresh.sql", $dump_fresh);
	my $diff = '';
	IPC::Run::run([ 'diff', '-u', "$dir/fresh.sql", "$dir/up.sql" ], '>', \$diff);
	diag(substr($diff, 0, 4000));
}
# the control: the comparison sees a difference when there is one
sq('fresh', q{ALTER FUNCTION wf.current_tenant() SET work_mem = '1MB'});
isnt(schema_dump('fresh'), $dump_up, 'the comparison notices a changed function');
sq('fresh', q{ALTER FUNCTION wf.current_tenant() RESET work_mem});
is(schema_dump('fresh'), $dump_fresh, 'and the undone change');
sq('up', q{CREATE TABLE test_rows (task_id bigint PRIMARY KEY, queue text, activity text, idempotency_key text,
                                  available_at timestamptz, input jsonb)});
$copy_rows = 1;

# ---------------------------------------------------------------------
# 4. every run verifies and goes on to its end
# ---------------------------------------------------------------------
is(post_upgrade_check('up'), $all_verified, 'after the upgrade every run of every tenant verifies');
is(sq('up', q{SELECT count(*) FILTER (WHERE NOT context ? 'input') FROM wf.runs}), '0',
	'after the upgrade the contexts are as they were: each with its input, read as it is');
is(sq('up', $history_sql), $history_before, 'after the upgrade wf.history shows every event as before');
# issue 31: a context whose input is not the run's own keeps it
is(sq('up', qq{SELECT wf.update_context('$run{sleep}', '{"note": "after the update"}', 'test')->>'note'}),
	'after the update', 'the sleeping run\'s input is changed by wf.update_context');
{
	# the check it replaces: as a superuser, wf.verify_run finds no run of
	# another tenant
	my ($ret, $out, $err) = $node->psql('up', q{
SELECT count(*) AS runs, count(*) FILTER (WHERE wf.verify_run(run_id)) AS verified
FROM (SELECT run_id FROM wf.runs ORDER BY created_at DESC LIMIT 100) AS recent});
	like($err, qr/ERROR:  run [0-9a-f-]+ does not exist/,
		'the naive check fails as a superuser once a tenant has runs');
}

# the engine worker fires the timers from here on
$node->safe_psql('postgres', 'ALTER SYSTEM SET wfengine.enabled = on');
$node->reload;

is(sq('up', qq{SELECT wf.complete_task($leased_task, $leased_fence, '{"late": true}')}),
	'accepted', 'the attempt leased before the upgrade reports with its fence');

# Issue 31: an attempt completed from 0.3.0 on is deleted from wf.tasks
# (its result is in the history); one completed before the update keeps
# its row.  Late and doubled reports and heartbeats of either get the
# answers of 0.2.0, and both are counted by wf.queue_stats.
is(sq('up', q{SELECT count(*) FROM wf.tasks WHERE status = 'completed'}),
	$completed_rows, 'the rows of attempts completed before the update stay');
is(sq('up', qq{SELECT count(*) FROM wf.tasks WHERE task_id = $leased_task}),
	'0', 'the attempt completed after the update has no row');
is( sq('up',
		qq{SELECT wf.complete_task($leased_task, $leased_fence, '{"again": true}') || ' '
		   || wf.heartbeat($leased_task, $leased_fence)}),
	'duplicate stale', 'its doubled report is a duplicate, a heartbeat stale');
{
	my ($ret, $out, $err) = $node->psql('up', qq{SELECT wf.complete_task($leased_task, $leased_fence + 1, '{}')});
	like($err, qr/fence \d+ was never issued for task $leased_task/, 'a fence never issued is refused');
}
is( sq('up',
		qq{SELECT wf.complete_task($done_task, $done_fence, '{"again": true}') || ' '
		   || wf.fail_task($done_task, $done_fence - 1, '{"code": "late"}', true) || ' '
		   || wf.heartbeat($done_task, $done_fence)}),
	'duplicate stale stale', 'so are those of an attempt completed before the update');
is( sq('up',
		qq{SELECT string_agg(type || ':' || (payload->>'task_id'), ' ' ORDER BY seq) FROM wf.events
		   WHERE type IN ('result_duplicate', 'result_stale')
		     AND (payload->>'task_id')::bigint IN ($leased_task, $done_task)}),
	"result_duplicate:$leased_task result_duplicate:$done_task result_stale:$done_task",
	'each recorded in its run\'s history (heartbeats are not)');
is( sq('up',
		q{SELECT string_agg(queue || ' ' || completions_1m, ', ' ORDER BY queue) FROM wf.queue_stats
		   WHERE queue IN ('task_leased_a')}),
	'task_leased_a 1', 'wf.queue_stats counts the completion from the history');
is(work('up', 'task_leased_b'), '1', 'and its run goes on');
# issue 31: the attempt written before the upgrade keeps its copy of the
# run's input; the next one holds none (NULL: the run's input) and is
# claimed with the run's
is(sq('up', qq{SELECT input FROM wf.tasks WHERE run_id = '$run{task_ready}' AND step = 'a'}),
	'{"label": "task_ready"}', 'the ready attempt keeps its copy of the input through the upgrade');
is(work('up', 'task_ready_a', $big), '1', 'the ready task runs');
# a large output recorded after the update stays in the history only
is( sq('up',
		qq{SELECT (context->'steps'->'a' ? 'output_seq')::text || ' ' || length(wf.run_context(run_id)->'steps'->'a'->'output'->>'pad')
           FROM wf.runs WHERE run_id = '$run{task_ready}'}),
	'true 300', 'after the update a large output is referred to from the context, and wf.run_context gives it');
is(sq('up', qq{SELECT input IS NULL FROM wf.tasks WHERE run_id = '$run{task_ready}' AND step = 'b'}),
	't', 'the attempt scheduled after the upgrade holds no copy of the run\'s input');
my ($rt, $rf, $rin) =
  split /\|/, sq('up', q{SELECT task_id, fence, input FROM wf.claim_tasks('task_ready_b', 'w', 1)});
is($rin, '{"label": "task_ready"}', 'and is claimed with the run\'s input');
sq('up', copy_rows_sql("t.task_id = $rt"));
is(sq('up', qq{SELECT wf.complete_task($rt, $rf, '{}')}), 'accepted', 'and its run goes on');
is(work('up', 'task_ready_a', '{}', \&acme) . work('up', 'task_ready_b', '{}', \&acme),
	'11', 'the ready task of tenant acme runs');
ok( $node->poll_query_until(
		'up', qq{SELECT count(*) = 1 FROM wf.tasks WHERE run_id = '$run{backoff}' AND attempt = 2 AND status = 'ready'}),
	'the backoff timer set before the upgrade fires');
is(work('up', 'backoff_a'), '1', 'and attempt 2 runs');
ok( $node->poll_query_until('up', qq{SELECT current_step = 'e' FROM wf.runs WHERE run_id = '$run{sleep}'}),
	'the sleep timer set before the upgrade fires');
is(work('up', 'sleep_e'), '1', 'and the step after the sleep runs');
is(sq('up', qq{SELECT wf.decide('$token', 'approve', 'ann')}), 'accepted',
	'the token issued before the upgrade decides the approval');
is(work('up', 'approval_pay'), '1', 'and the step after the approval runs');
is(work('up', 'kid_k'), '1', 'the child run\'s task runs');
ok( $node->poll_query_until('up', qq{SELECT current_step = 'last' FROM wf.runs WHERE run_id = '$run{parent}'}),
	'the parent learns that its child completed');
is(work('up', 'parent_last'), '1', 'and goes on');
is(sq('up', qq{SELECT wf.signal('$run{signal}', 'go', '{"n": 1}')}), 'consumed',
	'the signal reaches the run waiting since before the upgrade');
is(acme('up', qq{SELECT wf.signal('$run{acme_signal}', 'go', '{"n": 2}')}), 'consumed',
	'and that of tenant acme');
is(work('up', 'signal_after') . work('up', 'signal_after', '{}', \&acme), '11', 'both go on');
is(sq('up', qq{SELECT wf.complete_task($paused_task, $paused_fence, '{"held": true}')}),
	'accepted', 'the paused run\'s attempt in flight reports (the result is held)');
is(sq('up', qq{SELECT status FROM wf.tasks WHERE task_id = $paused_task}), 'completed',
	'a result held for a paused run keeps its row');
is(sq('up', qq{SELECT wf.resume_run('$run{paused}', 'maintenance over')}), 'running', 'the paused run resumes');
is(sq('up', qq{SELECT wf.complete_task($paused_task, $paused_fence, '{"held": true}')}),
	'duplicate', 'a doubled report of the held result is a duplicate');
is(work('up', 'paused_b'), '1', 'with the held result applied, it goes on');
is(sq('up', qq{SELECT wf.retry_step('$run{failed}', 'fixed')}), 'running', 'the failed run is retried');
is(work('up', 'failed_a') . work('up', 'failed_b'), '11', 'and completes its steps');
my ($ct, $cf, $cpad) = split /\|/,
  sq('up', q{SELECT task_id, fence, length(input->'output'->>'pad') FROM wf.claim_tasks('cancelling_undo', 'w', 1)});
is($cpad, '300', 'the compensation scheduled before the update is claimed with the large output in its input');
sq('up', copy_rows_sql("t.task_id = $ct"));
is(sq('up', qq{SELECT wf.complete_task($ct, $cf, '{}')}), 'accepted', 'the cancelled run\'s compensation runs');
is(work('up', 'compensating_undo'), '1', 'the saga\'s compensation runs');
# a large input made after the update stays in its task_scheduled event
# only (wf.tasks.input_seq, which the update adds): the compensation of a
# run cancelled after a large output, claimed with it
my $crun = sq('up', q{SELECT wf.start_run('cancelling', '{"label": "cancelling_after"}')});
is(work('up', 'cancelling_a', $big), '1', 'step a of a run started after the update completes');
sq('up', qq{SELECT wf.cancel_run('$crun', 'customer left')});
is( sq('up',
		qq{SELECT (input IS NULL)::text || ' ' || (input_seq IS NOT NULL)::text FROM wf.tasks
           WHERE run_id = '$crun' AND status = 'ready'}),
	'true true', 'after the update the compensation\'s large input is not copied into its row');
($ct, $cf, $cpad) = split /\|/,
  sq('up', q{SELECT task_id, fence, length(input->'output'->>'pad') FROM wf.claim_tasks('cancelling_undo', 'w', 1)});
is($cpad, '300', 'and it is claimed with the input its task_scheduled event holds');
sq('up', copy_rows_sql("t.task_id = $ct"));
is(sq('up', qq{SELECT wf.complete_task($ct, $cf, '{}')}), 'accepted', 'and its run ends');

my %expect_after = map { $_ => 'completed' } keys %run;
$expect_after{cancelling} = 'cancelled';
$expect_after{compensating} = 'compensated';
for my $label (sort keys %expect_after)
{
	is(sq('up', qq{SELECT status FROM wf.runs WHERE run_id = '$run{$label}'}),
		$expect_after{$label}, "after the upgrade: $label ends $expect_after{$label}");
}
# (and the run started after the update, whose compensation ran above)
$all_verified =~ s/tenant default: 12 runs, 12 verified/tenant default: 13 runs, 13 verified/;
is(post_upgrade_check('up'), $all_verified, 'every run of every tenant verifies at its end');
# issue 31: a run changed after the update stores its context without the
# input while that is wf.runs.input; the sleeping run's changed input stays
my ($dropped, $changed) = split / /, sq(
		'up', qq{
SELECT count(*) FILTER (WHERE updated_at > '$updated_at' AND NOT context ? 'input') || ' ' ||
       count(*) FILTER (WHERE updated_at > '$updated_at' AND run_id <> '$run{sleep}')
FROM wf.runs});
ok($changed > 5, "runs changed after the update ($changed)");
is($dropped, $changed, 'each stores its context without the input, its own');
is(sq('up', qq{SELECT context->'input'->>'note' FROM wf.runs WHERE run_id = '$run{sleep}'}),
	'after the update', 'the sleeping run\'s context keeps its changed input');
{
	my %now = map { $_ => 1 } split /\n/, sq('up', $history_sql);
	my @gone = grep { !$now{$_} } split /\n/, $history_before;
	is(scalar(@gone), 0, 'at their end, wf.history still shows the events of before the update as before')
	  or diag(join("\n", @gone[0 .. ($#gone < 4 ? $#gone : 4)]));
}
# the attempts scheduled after the update: wf.events keeps their
# task_scheduled without what the definition and the event give, and
# wf.history shows it as 0.2.0 wrote it, the values of the attempt's row
# (copied into test_rows before it completed, above; the rows still
# there copied now)
sq('up', copy_rows_sql("t.tenant_id = 'default'"));
my ($lean, $whole, $scheduled) = split / /, sq(
		'up', qq{
SELECT count(*) FILTER (WHERE NOT e.payload ? 'queue' AND NOT e.payload ? 'idempotency_key') || ' ' ||
       count(*) FILTER (WHERE h.payload->>'queue' = t.queue
                          AND h.payload->>'activity' IS NOT DISTINCT FROM t.activity
                          AND h.payload->>'idempotency_key' = t.idempotency_key
                          AND h.payload->'input' = t.input
                          AND (h.payload->>'available_at')::timestamptz = t.available_at) || ' ' ||
       count(*)
FROM wf.runs r CROSS JOIN LATERAL wf.history(r.run_id) h
JOIN wf.event_log e ON e.run_id = r.run_id AND e.seq = h.seq
LEFT JOIN test_rows t ON t.task_id = (h.payload->>'task_id')::bigint
WHERE r.tenant_id = 'default' AND h.type = 'task_scheduled' AND e.created_at > '$updated_at'});
ok($scheduled > 5, "attempts scheduled after the update ($scheduled)");
is($lean, $scheduled, 'wf.events keeps their task_scheduled without queue and idempotency key');
is($whole, $scheduled, 'wf.history shows each with the queue, activity, key, time and input of its attempt');
# and, written after the update, most of them in the row of the event
# before them (wf.events.more): runs in flight go on in the new layout
is( sq('up',
		qq{SELECT count(*) FILTER (WHERE e.more IS NOT NULL) > 0
                  AND bool_and(e.more IS NULL) FILTER (WHERE e.created_at <= '$updated_at')
           FROM wf.events e WHERE e.tenant_id = 'default'}),
	't', 'after the update a task_scheduled rides in the row of the event before it; none before');

# ---------------------------------------------------------------------
# 5, second half: a schema older than the library needs
# ---------------------------------------------------------------------
my $nap = sq('old', q{SELECT wf.start_run('nap', '{}')});
my $log_offset = -s $node->logfile;
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'wfengine worker' AND datname = 'old'}),
	'database old has its engine worker');
my $old_pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'wfengine worker' AND datname = 'old'});

# One session: the version is read and cached by the first call, then
# pg_extension is made to say 0.0.9 (standing for a schema older than
# WF_MIN_SCHEMA_VERSION) and the same session refuses: its cache was
# forgotten.  0.0.9 stays for what follows.
my ($ret, $out, $err) = $node->psql(
	'old', qq{
\\set VERBOSITY verbose
SELECT wf.run_status('$nap');
UPDATE pg_extension SET extversion = '0.0.9' WHERE extname = 'wfengine';
SELECT wf.run_status('$nap');
SELECT wf.current_tenant();
}, on_error_stop => 0);
is($out, "running\ndefault", 'a call works, the next one refuses, and a call needing no schema goes on');
like(
	$err,
	qr/ERROR:  55000: wfengine schema version 0\.0\.9 is older than the loaded library \Q$lib_version\E\nDETAIL:  The library needs schema version 0\.1\.0 or later\.\nHINT:  Run ALTER EXTENSION wfengine UPDATE\./,
	'the refusal: 55000, both versions, the version needed and the hint');
($ret, $out, $err) = $node->psql('old', q{SELECT count(*) FROM wf.claim_tasks('old_e', 'w')});
like($err, qr/wfengine schema version 0\.0\.9 is older than the loaded library/, 'a new session refuses too');

ok( $node->wait_for_log(
		qr/LOG:  wfengine schema version 0\.0\.9 is older than the loaded library \Q$lib_version\E\n.*DETAIL:  The engine worker of database "old" fires no timers/,
		$log_offset),
	'the engine worker of database old says it fires nothing');
# a few more ticks of that worker (naptime 300 ms)
my $ticks = $node->safe_psql('up',
	q{SELECT ticks FROM wf.worker_status() WHERE role = 'worker' AND database = 'old'});
ok( $node->poll_query_until(
		'up', qq{SELECT ticks >= $ticks + 5 FROM wf.worker_status() WHERE role = 'worker' AND database = 'old'}),
	'and goes on ticking');
my $log = substr(slurp_file($node->logfile), $log_offset);
# (the two sessions' refusals above are in the log too, as ERRORs)
my $worker_said = () = $log =~ /LOG:  wfengine schema version 0\.0\.9 is older/g;
is($worker_said, 1, 'the worker says it once');
is( $node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'wfengine worker' AND datname = 'old'}),
	$old_pid, 'the same worker process: it neither exits nor fails');
unlike($log, qr/\[$old_pid\] (ERROR|FATAL|PANIC):/, 'no tick of it failed');
is(sq('up', qq{SELECT count(*) FROM wf.timers WHERE status = 'pending' AND due_at < clock_timestamp()}), '0',
	'meanwhile the worker of database up fires its timers');
# The run's sleep (an hour) falls due now, while the schema says 0.0.9: a
# sleep of a second from the start fired before 0.0.9 was set when the
# machine was loaded.
sq('old', qq{UPDATE wf.timers SET due_at = clock_timestamp(), fire_at = clock_timestamp() WHERE run_id = '$nap' AND status = 'pending'});
$node->safe_psql('postgres', 'SELECT pg_sleep(1.2)');
my $pending = $node->safe_psql('old',
	q{SELECT count(*) FROM wf.timers WHERE status = 'pending' AND due_at < clock_timestamp()});
is($pending, '1', 'the sleep timer of database old is due and not fired');

# back at 0.1.0: the worker resumes, the API works again
sq('old', q{UPDATE pg_extension SET extversion = '0.1.0' WHERE extname = 'wfengine'});
ok($node->wait_for_log(qr/wfengine worker for database "old" resumes: schema version 0\.1\.0/, $log_offset),
	'back at 0.1.0 the worker says it resumes');
ok($node->poll_query_until('old', qq{SELECT current_step = 'e' FROM wf.runs WHERE run_id = '$nap'}),
	'and fires the sleep timer');
is(work('old', 'old_e'), '1', 'the API works again');
sq('old', 'ALTER EXTENSION wfengine UPDATE');
is( sq('old', qq{SELECT extversion || ' ' || wf.run_status('$nap') || ' ' || wf.verify_run('$nap')
                  FROM pg_extension WHERE extname = 'wfengine'}),
	"$lib_version completed true", 'database old updates, and its run verifies');

# ---------------------------------------------------------------------
# 6. a schedule of 0.1.0 in the pg_cron database fires after the update
# ---------------------------------------------------------------------
# (made under 0.1.0, before the library was swapped)
$node->safe_psql('postgres', 'ALTER EXTENSION wfengine UPDATE');
my $new_cmd = $node->safe_psql('postgres', "SELECT command FROM cron.job WHERE jobid = $job");
is($new_cmd, $old_cmd =~ s/wf\._fire_schedule/wf.fire_schedule/r, 'the update rewrites it to wf.fire_schedule');
# the command as pg_cron runs it: as the role that made the schedule
my $fired = $node->safe_psql('postgres', $new_cmd, extra_params => [ '-U', 'sched_admin' ]);
like($fired, qr/^[0-9a-f-]{36}$/, 'which starts the run of the current instant as that role');
is( $node->safe_psql('postgres',
		"SELECT tenant_id || ' ' || (SELECT actor FROM wf.events WHERE run_id = '$fired' AND seq = 1) FROM wf.runs WHERE run_id = '$fired'"),
	'sched sched_admin', '... of its tenant, with it as the actor');
($ret, $out, $err) = $node->psql('postgres', $old_cmd, extra_params => [ '-U', 'sched_admin' ]);
like($err, qr/permission denied for function _fire_schedule/, 'the old command would be refused to it');

$node->stop;
done_testing();
