
# Copyright (c) 2026, wfengine developers

# Tenants sharded over several servers behind a PL/Proxy router (issue 15).
#
# Three shard clusters, each an ordinary wfengine install with its engine
# worker, and a router cluster with wfengine_router.  Eight tenants are
# chosen so that every shard has some; each has its own logins (app,
# worker, approver, admin) on every cluster.  Everything an application,
# an approver or an operator does goes through the router; the workers
# claim and complete on their tenant's shard directly, finding it in
# wfrouter.shards().  Every run completes (or is cancelled by an operator)
# and verifies on the shard it lives on, no shard holds a row of another
# shard's tenant, and a call that reaches the wrong shard -- directly, or
# through a router whose map is stale -- is refused.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;

# the router needs PL/Proxy (Debian's postgresql-15-plproxy, test/scripts/deps.sh)
my $sharedir = `pg_config --sharedir`;
chomp $sharedir;
plan skip_all => "PL/Proxy is not installed ($sharedir/extension/plproxy.control)"
  unless -f "$sharedir/extension/plproxy.control";

my $db = 'wf';
my ($shardref, $router) = wf_shards(prefix => 'wf_shard', db => $db);
my %shard = %$shardref;    # name -> node
my @shards = sort keys %shard;
pass('the router has three shards');
my $map = $router->safe_psql('wfengine_router', 'SELECT wfrouter.shard_map()');
for my $name (@shards)
{
	is($shard{$name}->safe_psql($db, "SELECT wf.configure_shard('$name', '$map')"),
		$name eq 's1' ? '22' : '21', "shard $name owns its share of the 64 partitions");
}

# eight tenants, at least two on each shard
my (@tenants, %home, %count);
for my $i (1 .. 200)
{
	my $t = sprintf('t%03d', $i);
	my $s = $router->safe_psql('wfengine_router', "SELECT wfrouter.tenant_shard('$t')");
	next if ($count{$s} // 0) >= 3;
	push @tenants, $t;
	$home{$t} = $s;
	$count{$s}++;
	last if @tenants == 8;
}
is(scalar(@tenants), 8, 'eight tenants');
is(scalar(grep { ($count{$_} // 0) >= 2 } @shards), 3, 'every shard has at least two of them');

# the same roles on every cluster: a tenant role and four logins per tenant
for my $t (@tenants)
{
	for my $name (@shards)
	{
		$shard{$name}->safe_psql($db, qq{
SELECT wf.create_tenant('$t');
CREATE ROLE ${t}_app LOGIN IN ROLE wfengine_operator, wf_tenant_$t;
CREATE ROLE ${t}_worker LOGIN IN ROLE wfengine_worker, wf_tenant_$t;
CREATE ROLE ${t}_appr LOGIN IN ROLE wfengine_approver, wf_tenant_$t;
CREATE ROLE ${t}_admin LOGIN IN ROLE wfengine_admin, wf_tenant_$t;
});
	}
	$router->safe_psql('wfengine_router', qq{
CREATE ROLE wf_tenant_$t NOLOGIN;
CREATE ROLE ${t}_app LOGIN IN ROLE wfengine_operator, wf_tenant_$t;
CREATE ROLE ${t}_worker LOGIN IN ROLE wfengine_worker, wf_tenant_$t;
CREATE ROLE ${t}_appr LOGIN IN ROLE wfengine_approver, wf_tenant_$t;
CREATE ROLE ${t}_admin LOGIN IN ROLE wfengine_admin, wf_tenant_$t;
});
}

# The router's EXECUTE sets (issue 29): in schemas wf, wfrouter and plproxy
# of the router database, each role is granted exactly what the table of
# docs/scale-out.md ("router privileges") lists, and may execute, through
# its memberships, exactly the union of its roles' lists; PUBLIC may
# execute nothing there nor use schema plproxy, so a login of no job role
# cannot read the shards' connection strings.  (The routed calls below show
# that the job roles keep working.)
{
	my $root = $ENV{TESTDIR} // '.';
	my $file = -e "$root/docs/scale-out.md" ? "$root/docs/scale-out.md" : 'docs/scale-out.md';
	open(my $fh, '<', $file) or die "cannot read $file: $!";
	my $doc = do { local $/; <$fh> };
	close $fh;
	my ($block) = $doc =~ /<!-- router privileges: begin.*?-->\n(.*?)<!-- router privileges: end -->/s;
	my (%doc_fns, %doc_member);
	my $norm = sub { my $x = shift; $x =~ s/\s*([,()])\s*/$1/g; return $x; };
	for my $line (split /\n/, $block // '')
	{
		next unless $line =~ /^\| `([a-z_]+)` \|([^|]*)\|([^|]*)\|/;
		my ($role, $member, $fns) = ($1, $2, $3);
		$doc_member{$role} = [ sort ($member =~ /`([a-z_]+)`/g) ];
		$doc_fns{$role} = { map { $norm->($_) => 1 } ($fns =~ /`((?:wf|wfrouter|plproxy)\.(?:[a-z_]+|"[a-z_:]+")\([^`]*\))`/g) };
	}
	my @doc_roles = sort keys %doc_fns;
	is(scalar(@doc_roles), 5, 'docs/scale-out.md: the router privileges of five roles are read');

	my $schemas = q{n.nspname IN ('wf', 'wfrouter', 'plproxy')};
	# the grants, role by role
	my (%granted);
	for my $row (split /\n/, $router->safe_psql('wfengine_router', qq{
SELECT a.grantee::regrole || '|' || p.oid::regprocedure
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace,
     aclexplode(COALESCE(p.proacl, acldefault('f', p.proowner))) a
WHERE $schemas AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
ORDER BY 1}))
	{
		my ($role, $fn) = split /\|/, $row, 2;
		$granted{$role}{ $norm->($fn) } = 1;
	}
	my @extra = map { my $r = $_; map { "$r: $_" } grep { !($doc_fns{$r} && $doc_fns{$r}{$_}) } sort keys %{ $granted{$r} } }
	  sort keys %granted;
	is_deeply(\@extra, [], 'no role is granted a function of wf, wfrouter or plproxy the docs do not list for it');
	my @missing = map { my $r = $_; map { "$r: $_" } grep { !($granted{$r} && $granted{$r}{$_}) } sort keys %{ $doc_fns{$r} } }
	  @doc_roles;
	is_deeply(\@missing, [], 'every function the docs list for a role is granted to it');

	# the memberships among these roles, and the whole sets through them
	my @bad_member;
	for my $r (@doc_roles)
	{
		my @actual = split /\n/, $router->safe_psql('wfengine_router', qq{
SELECT m.roleid::regrole FROM pg_auth_members m
WHERE m.member = '$r'::regrole AND m.roleid::regrole::text IN ('} . join("', '", @doc_roles) . q{')
ORDER BY 1});
		push @bad_member, "$r: @actual" if "@actual" ne "@{ $doc_member{$r} }";
	}
	is_deeply(\@bad_member, [], 'each role is a member of the roles the docs say');
	my @wrong;
	for my $r (@doc_roles)
	{
		my %want;
		my @todo = ($r);
		while (my $x = shift @todo)
		{
			$want{$_} = 1 for keys %{ $doc_fns{$x} };
			push @todo, @{ $doc_member{$x} // [] };
		}
		my %have = map { $norm->($_) => 1 } split /\n/, $router->safe_psql('wfengine_router', qq{
SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE $schemas AND has_function_privilege('$r', p.oid, 'EXECUTE')});
		push @wrong, map { "$r may: $_" } grep { !$want{$_} } sort keys %have;
		push @wrong, map { "$r may not: $_" } grep { !$have{$_} } sort keys %want;
	}
	is_deeply(\@wrong, [], 'every role may execute exactly its documented set, with its memberships');

	is( $router->safe_psql('wfengine_router', qq{
SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace,
     aclexplode(COALESCE(p.proacl, acldefault('f', p.proowner))) a
WHERE $schemas AND a.grantee = 0}) . ','
		  . $router->safe_psql('wfengine_router', q{
SELECT count(*) FROM pg_namespace n, aclexplode(COALESCE(n.nspacl, acldefault('n', n.nspowner))) a
WHERE n.nspname = 'plproxy' AND a.grantee = 0}),
		'0,0', 'PUBLIC may execute nothing in wf, wfrouter and plproxy, nor use schema plproxy');

	$router->safe_psql('wfengine_router', 'CREATE ROLE nobody_login LOGIN');
	my ($rc, $out, $err) = $router->psql('wfengine_router',
		"SELECT * FROM plproxy.get_cluster_partitions('wfengine')",
		extra_params => [ '-U', 'nobody_login' ]);
	like($err, qr/permission denied for schema plproxy/,
		'a login of no job role cannot read the connection strings through PL/Proxy\'s configuration');
	is($out, '', '... and gets none');
	($rc, $out, $err) = $router->psql('wfengine_router', 'SELECT * FROM wfrouter.shards()',
		extra_params => [ '-U', 'nobody_login' ]);
	like($err, qr/permission denied for (schema wfrouter|function shards)/, '... nor through wfrouter.shards()');
}

# psql as a login of a tenant, on the router or on a shard
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

# the shard list a worker reads from the router
my %listed;
for my $row (split /\n/, via_router("$tenants[0]_worker", 'SELECT shard, connstr FROM wfrouter.shards()'))
{
	my ($name, $connstr) = split /\|/, $row;
	$listed{$name} = $connstr;
}
is_deeply([ sort keys %listed ], \@shards, 'wfrouter.shards() lists the three shards');
is(via_router("$tenants[0]_app", 'SELECT wf.current_tenant()'), $tenants[0],
	'the router finds the tenant of a login');

# a definition with a task, an approval, a signal and a last task, published
# through the router (on every shard)
my $spec = q{{"steps": [
  {"name": "work", "queue": "work"},
  {"name": "ok", "type": "approval", "approvers": ["boss"], "notify_queue": "mail", "expires": "1h"},
  {"name": "go", "type": "wait_event", "event": "go"},
  {"name": "finish", "queue": "work"}]}};
for my $t (@tenants)
{
	is( via_router("${t}_admin",
			"SELECT wf.publish_definition('order', '$spec') || ',' || wf.publish_definition('extra', "
			  . q{'{"steps": [{"name": "x", "queue": "other"}]}')}),
		'1,1', "tenant $t publishes through the router");
}

# runs started through the router: four per tenant, the last of another definition
my %runs;
for my $t (@tenants)
{
	$runs{$t} = [ split /\n/, via_router("${t}_app", q{
SELECT wf.start_run(CASE WHEN i < 4 THEN 'order' ELSE 'extra' END, jsonb_build_object('n', i))
FROM generate_series(1, 4) i ORDER BY i}) ];
}
is(scalar(map { @{ $runs{$_} } } @tenants), 32, 'thirty-two runs started through the router');

# each run is on its tenant's shard and nowhere else
my $misplaced = 0;
for my $t (@tenants)
{
	for my $name (@shards)
	{
		my $n = $shard{$name}->safe_psql($db, "SELECT count(*) FROM wf.runs WHERE tenant_id = '$t'");
		$misplaced++ if ($name eq $home{$t}) != ($n == 4);
	}
}
is($misplaced, 0, 'every tenant\'s runs are on its shard and on no other');

# operator commands through the router: run 3 paused and resumed, run 4
# cancelled by a batch command (a filter on its definition), run 3 then too
for my $t (@tenants)
{
	my ($r1, $r2, $r3, $r4) = @{ $runs{$t} };
	is( via_router("${t}_app", qq{
SELECT wf.pause_run('$r3', 'hold on') || ',' || wf.run_status('$r3') || ',' ||
       wf.resume_run('$r3', 'go on') || ',' || wf.run_status('$r3')}),
		'paused,paused,running,running', "tenant $t pauses and resumes a run through the router");
	is( via_router("${t}_app",
			q{SELECT string_agg(outcome, ',') FROM wf.cancel_runs('batch', '{"definition": "extra"}')}),
		'done', "tenant $t cancels a run with a batch command through the router");
	is(via_router("${t}_app", "SELECT wf.cancel_run('$r3', 'not needed')"),
		'cancelled', "tenant $t cancels a run through the router");
}

# the merged queue statistics, as a superuser of the router: every tenant
# with its ready work tasks, on its own shard
my %qs = map { my ($t, $s, $ready) = split /\|/; ($t => "$s/$ready") } split /\n/,
  $router->safe_psql('wfengine_router',
	"SELECT tenant_id, shard, ready FROM wf.queue_stats WHERE queue = 'work'");
is_deeply(\%qs, { map { ($_ => "$home{$_}/2") } @tenants },
	'wf.queue_stats on the router: every shard\'s tenants, two ready tasks each');

# workers on every shard, directly: the first task, then the approval mail
for my $t (@tenants)
{
	my $s = $home{$t};
	is( on_shard($s, "${t}_worker", q{
SELECT count(*) FROM wf.claim_tasks('work', 'w', 10) c,
       LATERAL wf.complete_task(c.task_id, c.fence, '{"done": true}') r
WHERE r = 'accepted'}),
		'2', "tenant $t: two tasks claimed and completed on shard $s");
}

# the approval: the worker of the mail queue issues the tokens on the shard,
# the approver decides through the router
for my $t (@tenants)
{
	my $s = $home{$t};
	my @tokens = split /\n/, on_shard($s, "${t}_worker", q{
CREATE TEMP TABLE c AS SELECT * FROM wf.claim_tasks('mail', 'mailer', 10);
SELECT t.token FROM c, wf.issue_approval_tokens(c.task_id, c.fence) t WHERE t.decision = 'approve';
DO $$ BEGIN PERFORM wf.complete_task(c.task_id, c.fence, '{"sent": 1}') FROM c; END $$;
});
	is(scalar(@tokens), 2, "tenant $t: two approval tokens issued on shard $s");
	is(join(',', map { via_router("${t}_appr", "SELECT wf.decide('$_', 'approve', 'boss')") } @tokens),
		'accepted,accepted', "tenant $t: the approver decides through the router");
}

# the signals through the router, then the last tasks on the shard
for my $t (@tenants)
{
	my ($r1, $r2) = @{ $runs{$t} };
	is( via_router("${t}_app", "SELECT wf.signal('$r1', 'go') || ',' || wf.signal('$r2', 'go', '{}', 'e2')"),
		'consumed,consumed', "tenant $t signals its runs through the router");
	is( on_shard($home{$t}, "${t}_worker", q{
SELECT count(*) FROM wf.claim_tasks('work', 'w', 10) c,
       LATERAL wf.complete_task(c.task_id, c.fence, '{"finished": true}') r
WHERE r = 'accepted'}),
		'2', "tenant $t: the last tasks claimed and completed on shard $home{$t}");
}

# the cancelled runs finish cancelling on their shards
for my $name (@shards)
{
	ok($shard{$name}->poll_query_until($db,
			"SELECT count(*) = 0 FROM wf.runs WHERE status NOT IN ('completed', 'cancelled')"),
		"shard $name: every run has ended");
}

# every run ended where it lives, and verifies there and through the router
for my $t (@tenants)
{
	my $s = $home{$t};
	my ($r1, $r2, $r3, $r4) = @{ $runs{$t} };
	is( via_router("${t}_app", qq{
SELECT string_agg(wf.run_status(r) || ':' || wf.verify_run(r), ',' ORDER BY o)
FROM unnest(ARRAY['$r1', '$r2', '$r3', '$r4']::uuid[]) WITH ORDINALITY AS u(r, o)}),
		'completed:true,completed:true,cancelled:true,cancelled:true',
		"tenant $t: two runs completed, two cancelled, all verify (through the router)");
	is( on_shard($s, "${t}_app", q{
SELECT bool_and(wf.verify_run(run_id)) AND count(*) = 4 FROM wf.runs}),
		't', "tenant $t: its runs verify on shard $s");
	like(via_router("${t}_app", "SELECT count(*) FROM wf.history('$r1')"), qr/^\d+$/,
		"tenant $t reads a history through the router");
}

# no shard holds a row of another shard's tenant
for my $name (@shards)
{
	my @seen = split /\n/, $shard{$name}->safe_psql($db, q{
SELECT DISTINCT tenant_id FROM (
    SELECT tenant_id FROM wf.runs UNION ALL SELECT tenant_id FROM wf.tasks
    UNION ALL SELECT tenant_id FROM wf.events UNION ALL SELECT tenant_id FROM wf.timers
    UNION ALL SELECT tenant_id FROM wf.signals UNION ALL SELECT tenant_id FROM wf.approvals) x
ORDER BY 1});
	is_deeply(\@seen, [ sort grep { $home{$_} eq $name } @tenants ],
		"shard $name holds runs, tasks, events, timers, signals and approvals of its own tenants only");
}

# a call that reaches the wrong shard is refused: directly ...
my $t = $tenants[0];
my ($wrong) = grep { $_ ne $home{$t} } @shards;
my ($rc, $out, $err) = $shard{$wrong}->psql($db, "SELECT wf.start_run('order')",
	extra_params => [ '-U', "${t}_app" ]);
isnt($rc, 0, 'a start on the wrong shard fails');
like($err, qr/tenant "$t" does not live on shard "$wrong"/, '... refused by the shard check');
like($err, qr/which the shard map \(version \d+\) gives to shard "$home{$t}"/, '... naming the right shard and the map version');
($rc, $out, $err) = $shard{$wrong}->psql($db, "SELECT * FROM wf.claim_tasks('work', 'w')",
	extra_params => [ '-U', "${t}_worker" ]);
like($err, qr/does not live on shard/, 'a claim on the wrong shard is refused');
($rc, $out, $err) = $shard{$wrong}->psql($db, "SELECT * FROM wf.list_runs()",
	extra_params => [ '-U', "${t}_app" ]);
like($err, qr/does not live on shard "$wrong"/, 'wf.list_runs on the wrong shard is refused too');
is($shard{$wrong}->safe_psql($db, "SELECT count(*) FROM wf.runs WHERE tenant_id = '$t'"),
	'0', '... and nothing was written there');

# ... and through a router whose map is stale (the tenant's partition
# pointed at another shard): that shard refuses it with 55W01, the router
# learns the shard's newer map and serves the call on the right shard
my $part = $router->safe_psql('wfengine_router', "SELECT wfrouter.tenant_partition('$t')");
$router->safe_psql('wfengine_router',
	"UPDATE wfrouter.partitions SET shard = '$wrong' WHERE partition = $part");
($rc, $out, $err) = $router->psql('wfengine_router', "SELECT wf.run_status(wf.start_run('order'))",
	extra_params => [ '-U', "${t}_app" ]);
is($rc, 0, 'a stale router is refused by the wrong shard, learns the map and serves the call');
is($router->safe_psql('wfengine_router', "SELECT shard FROM wfrouter.partitions WHERE partition = $part"),
	$home{$t}, '... and keeps the learned map');
# a map that is not newer is not learned: the call is refused, retryable
$router->safe_psql('wfengine_router',
	"UPDATE wfrouter.partitions SET shard = '$wrong' WHERE partition = $part; UPDATE wfrouter.config SET map_version = 1000");
($rc, $out, $err) = $router->psql('wfengine_router', "\\set VERBOSITY verbose\nSELECT wf.start_run('order')",
	extra_params => [ '-U', "${t}_app" ]);
like($err, qr/40001: tenant "$t" is moving to another shard/, 'a router whose map is newer than the shard\'s answers 40001');
like($err, qr/does not live on shard "$wrong"/, '... with the shard\'s refusal');
$router->safe_psql('wfengine_router',
	"UPDATE wfrouter.partitions SET shard = '$home{$t}' WHERE partition = $part; UPDATE wfrouter.config SET map_version = 0");
like(via_router("${t}_app", "SELECT wf.start_run('order')"), qr/^[0-9a-f-]{36}$/,
	'with the map put right, the router reaches the right shard again');

# the shard check follows the map: a shard that is given the partition
# takes the tenant (a new backend and an existing one alike)
my $session = $shard{$wrong}->background_psql($db, on_error_stop => 0,
	extra_params => [ '-U', "${t}_app" ]);
like($session->query("SELECT wf.run_status('$runs{$t}[0]')"), qr/^$/, 'refused before');
my @moved = split /,/, $map =~ s/[{}]//gr;
$moved[$part] = $wrong;
$shard{$wrong}->safe_psql($db, "SELECT wf.configure_shard('$wrong', '{" . join(',', @moved) . "}')");
like($session->query("SELECT wf.current_tenant() || ':' || count(*) FROM wf.runs"),
	qr/^$t:0$/, 'an existing backend sees the new map');
is(on_shard($wrong, "${t}_app", "SELECT count(*) FROM wf.cancel_runs('x')"),
	'0', 'a new backend too: the call is served (no runs here)');
$session->quit;
$shard{$wrong}->safe_psql($db, "SELECT wf.configure_shard('$wrong', '$map')");

# a non-sharded install does no check
$shard{$wrong}->safe_psql($db, "SELECT wf.configure_shard(NULL, NULL)");
is(on_shard($wrong, "${t}_app", "SELECT wf.start_run('order') IS NOT NULL; SELECT count(*) FROM wf.runs"),
	"t\n1", 'without a map every tenant is served');

$router->stop;
$shard{$_}->stop for @shards;
done_testing();
