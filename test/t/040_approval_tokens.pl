
# Copyright (c) 2026, wfengine developers

# No raw approval token is written anywhere by the engine (issue 4).
#
# A full approval flow runs on a server that logs at DEBUG1 with the
# engine worker firing its timers: a step with three approvers whose
# tokens are issued twice (the first set is superseded), used, replayed,
# presented for the wrong approver and the wrong decision, and decided
# after the step ended; a second run whose tokens expire.  Then every
# row of every table of schema wf, the event payloads, and the whole
# server log are searched for every token that was handed out: none may
# appear.  (The scan is shown to work on the client-side copy first.)

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;    # (also: initdb from a template)

my $node = PostgreSQL::Test::Cluster->new('wf_tokens');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
wfengine.approval_key = 'cd0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd'
log_min_messages = debug1
log_error_verbosity = verbose
));
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION wfengine;
SELECT wf.publish_definition('spend', '{"steps": [
  {"name": "ok", "type": "approval", "approvers": ["ann", "ben", "cat"],
   "policy": {"quorum": 2}, "notify_queue": "mail", "expires": "1h"},
  {"name": "pay", "queue": "pay"}]}');
SELECT wf.publish_definition('late', '{"steps": [
  {"name": "ok", "type": "approval", "approvers": ["dan"], "notify_queue": "mail",
   "expires": "1s"}]}');
CREATE TABLE seen_tokens (approver text, decision text, token text);
});

# first run: issue twice, keep both sets
my $run = $node->safe_psql('postgres', q{SELECT wf.start_run('spend')});
$node->safe_psql('postgres', q{
CREATE TEMP TABLE c AS SELECT * FROM wf.claim_tasks('mail', 'mailer');
INSERT INTO seen_tokens SELECT t.approver, t.decision, t.token FROM c, wf.issue_approval_tokens(c.task_id, c.fence) t;
INSERT INTO seen_tokens SELECT t.approver, t.decision, t.token FROM c, wf.issue_approval_tokens(c.task_id, c.fence) t;
SELECT wf.complete_task(c.task_id, c.fence, '{"sent": 3}') FROM c;
});
is($node->safe_psql('postgres', 'SELECT count(*) FROM seen_tokens'), '12',
	'two issues of an approve and a reject token for three approvers');

# use the latest tokens: wrong approver, wrong decision, two approvals, replay, after the end
my @answers = split /\n/, $node->safe_psql('postgres', q{
WITH latest AS (SELECT DISTINCT ON (approver, decision) approver, decision, token
                FROM seen_tokens ORDER BY approver, decision, ctid DESC)
SELECT wf.decide((SELECT token FROM latest WHERE approver = 'ann' AND decision = 'approve'), 'approve', 'ben')
UNION ALL
SELECT wf.decide((SELECT token FROM latest WHERE approver = 'ann' AND decision = 'approve'), 'reject', 'ann')
});
is_deeply(\@answers, [ 'invalid', 'invalid' ], 'a token is bound to its approver and its decision');
my $decided = $node->safe_psql('postgres', q{
WITH latest AS (SELECT DISTINCT ON (approver, decision) approver, decision, token
                FROM seen_tokens ORDER BY approver, decision, ctid DESC)
SELECT string_agg(wf.decide(token, decision, approver), ',' ORDER BY approver)
FROM latest WHERE decision = 'approve' AND approver IN ('ann', 'cat')});
is($decided, 'accepted,accepted', 'two approvals meet the quorum');
is($node->safe_psql('postgres', q{
SELECT string_agg(answer || '=' || n, ',' ORDER BY answer)
FROM (SELECT wf.decide(token, decision, approver) AS answer, count(*) AS n
      FROM seen_tokens GROUP BY 1) x}),
	'already_decided=6,invalid=6',
	'after the step: the superseded tokens are invalid, the latest ones already decided');
is($node->safe_psql('postgres', "SELECT status || '/' || current_step FROM wf.runs WHERE run_id = '$run'"),
	'running/pay', 'the run went on to its next step');

# second run: the worker fires the expiry; the token then answers expired
my $late = $node->safe_psql('postgres', q{SELECT wf.start_run('late')});
$node->safe_psql('postgres', q{
CREATE TEMP TABLE c AS SELECT * FROM wf.claim_tasks('mail', 'mailer');
INSERT INTO seen_tokens SELECT t.approver, t.decision, t.token FROM c, wf.issue_approval_tokens(c.task_id, c.fence) t;
});
ok( $node->poll_query_until('postgres', "SELECT status = 'failed' FROM wf.runs WHERE run_id = '$late'"),
	'the engine worker fired the expiry and the run failed');
is( $node->safe_psql('postgres', q{
SELECT wf.decide(token, decision, approver) FROM seen_tokens WHERE approver = 'dan' AND decision = 'approve'}),
	'expired', 'a token used after the expiry answers expired');
is($node->safe_psql('postgres', "SELECT wf.verify_run('$run') AND wf.verify_run('$late')"),
	't', 'both runs verify');

# the scan
my @tokens = split /\n/, $node->safe_psql('postgres', 'SELECT token FROM seen_tokens');
is(scalar(@tokens), 14, '14 tokens were handed out');
my $scan = q{
SELECT count(*) FROM seen_tokens s,
  (SELECT row_to_json(x)::text AS t FROM wf.approvals x
   UNION ALL SELECT row_to_json(x)::text FROM wf.approval_attempts x
   UNION ALL SELECT row_to_json(x)::text FROM wf.events x
   UNION ALL SELECT row_to_json(x)::text FROM wf.tasks x
   UNION ALL SELECT row_to_json(x)::text FROM wf.runs x
   UNION ALL SELECT row_to_json(x)::text FROM wf.timers x
   UNION ALL SELECT row_to_json(x)::text FROM wf.definitions x
   UNION ALL SELECT row_to_json(x)::text FROM wf.signals x
   UNION ALL SELECT row_to_json(x)::text FROM wf.correlations x
   UNION ALL SELECT row_to_json(x)::text FROM wf.secrets x
   UNION ALL SELECT row_to_json(x)::text FROM wf.tenant_policies x
   UNION ALL SELECT row_to_json(x)::text FROM wf.tenant_keys x
   UNION ALL SELECT row_to_json(x)::text FROM wf.suppressed_events x
   UNION ALL SELECT row_to_json(x)::text FROM wf.decide_failures x
   UNION ALL SELECT row_to_json(x)::text FROM wf.buffered_events x
   UNION ALL SELECT row_to_json(x)::text FROM wf.event_ids x
   UNION ALL SELECT row_to_json(x)::text FROM %s x) rows
WHERE position(s.token IN rows.t) > 0};
is($node->safe_psql('postgres', sprintf($scan, 'seen_tokens')), '14',
	'the scan finds every token where it is stored (the test table itself)');
is($node->safe_psql('postgres', sprintf($scan, 'wf.schedules')), '0',
	'no token in any engine table or event payload');
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'wf' AND c.relkind = 'r'
  AND c.relname NOT IN ('approvals', 'approval_attempts', 'events', 'tasks', 'runs',
                        'timers', 'definitions', 'signals', 'schedules', 'correlations',
                        'secrets', 'tenant_policies', 'tenant_keys', 'suppressed_events',
                        'decide_failures', 'buffered_events', 'event_ids')}),
	'0', 'the scan covers every table of schema wf');

my $log = slurp_file($node->logfile);
ok(length($log) > 0, 'the server log was written');
my @in_log = grep { index($log, $_) >= 0 } @tokens;
is(scalar(@in_log), 0, 'no token appears in the server log');

$node->stop;
done_testing();
