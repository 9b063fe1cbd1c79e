
# Copyright (c) 2026, wfengine developers

# A logical backup holds the engine's rows and works after a restore
# (docs/upgrading.md, "Backups"); crypto-shredding reaches it once the old
# master key is retired (docs/tenancy.md, issue 6).
#
# Tenant acme starts runs with a sealed card number, one attempt leased.
# pg_dump -Fc of the database is restored into a new database of the same
# server: every run verifies, the sealed value opens for a member of
# wfengine_sensitive, the tenant's LISTEN channel keeps its name, and the
# worker's report with its fence is accepted.  Then, in the original
# database, the tenant's data keys are destroyed and the master key is
# rotated (new key first, re-wrap, old key removed).  The old dump,
# restored once more, still holds the wrapped keys, but they no longer
# open: the card cannot be read; with the old master key configured again
# it could (the control that shows the test can fail).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;    # (also: initdb from a template)

my $k1 = 'k1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
my $k2 = 'k2:1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100';

my $node = PostgreSQL::Test::Cluster->new('wf_backup');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
wfengine.master_keys = '$k1'
));
$node->start;

sub set_master_keys
{
	my ($keys) = @_;
	$node->append_conf('postgresql.conf', "wfengine.master_keys = '$keys'\n");
	$node->reload;
	# the new value reaches new sessions after the reload is processed
	$node->poll_query_until('postgres',
		"SELECT current_setting('wfengine.master_keys') = '$keys'")
	  or die "the master keys were not reloaded";
}

# as a login of tenant acme
sub acme
{
	my ($db, $sql) = @_;
	return $node->safe_psql($db, $sql, extra_params => [ '-U', 'acme_app' ]);
}

$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', q{
CREATE EXTENSION wfengine;
SELECT wf.create_tenant('acme');
CREATE ROLE acme_app LOGIN IN ROLE wfengine_admin, wfengine_worker, wfengine_sensitive, wf_tenant_acme;
});
acme('app', q{
SELECT wf.publish_definition('pay', '{"sensitive": {"input": ["card"]},
  "steps": [{"name": "charge", "queue": "pay_q"}, {"name": "mail", "queue": "mail_q"}]}');
SELECT wf.start_run('pay', '{"card": "4111111111111111", "amount": 10}', 'order-1');
SELECT wf.start_run('pay', '{"card": "5500000000000004", "amount": 20}', 'order-2');
});
my ($task, $fence) = split /\|/, acme('app', q{
SELECT task_id, fence FROM wf.claim_tasks('pay_q', 'w1', 1, '1 hour')});
my $channel = acme('app', q{SELECT wf.channel('queue', 'pay_q')});
is( $node->safe_psql('app', q{SELECT count(*) FROM wf.runs WHERE input->>'card' LIKE 'wfenc:v1:%'}),
	'2', 'the cards are stored sealed');

my $dump = $node->basedir . '/app.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('app') ],
	'pg_dump of the database');

# restore into a new database
$node->safe_psql('postgres', 'CREATE DATABASE app2');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('app2'), $dump ],
	'pg_restore into a new database');
is(acme('app2', q{SELECT count(*) FILTER (WHERE wf.verify_run(run_id)) || '/' || count(*) FROM wf.runs}),
	'2/2', 'every restored run verifies');
is(acme('app2', q{SELECT wf.decrypt(input)->>'card' FROM wf.runs WHERE idempotency_key = 'order-1'}),
	'4111111111111111', 'a sealed value opens after the restore');
is(acme('app2', q{SELECT wf.channel('queue', 'pay_q')}), $channel,
	'the tenant keeps its channel name');
is(acme('app2', "SELECT wf.complete_task($task, $fence, '{}')"),
	'accepted', 'the worker that held the lease reports with its fence');
is(acme('app2', q{SELECT wf.start_run('pay', '{"card": "4111111111111111", "amount": 10}', 'order-1')
                  = (SELECT run_id FROM wf.runs WHERE idempotency_key = 'order-1')}),
	't', 'a repeated start finds the restored run by its key');

# crypto-shredding in the original database, then the master key retired
is($node->safe_psql('app', q{SELECT wf.destroy_tenant_keys('acme')}),
	'1', 'the tenant\'s data key is destroyed');
my ($ret, $out, $err) = $node->psql('app',
	q{SELECT wf.decrypt(input) FROM wf.runs LIMIT 1}, extra_params => [ '-U', 'acme_app' ]);
like($err, qr/was destroyed/, 'in the database, the sealed values no longer open');
set_master_keys("$k2,$k1");
$node->safe_psql('app', q{SELECT wf.rewrap_tenant_keys()});
$node->safe_psql('app2', q{SELECT wf.rewrap_tenant_keys()});
set_master_keys($k2);

# the old dump, restored now
$node->safe_psql('postgres', 'CREATE DATABASE app3');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('app3'), $dump ],
	'the dump from before the shredding restores');
is( $node->safe_psql('app3', q{SELECT count(*) FROM wf.tenant_keys WHERE wrapped IS NOT NULL}),
	'1', 'it still holds the wrapped data key');
($ret, $out, $err) = $node->psql('app3',
	q{SELECT wf.decrypt(input) FROM wf.runs LIMIT 1}, extra_params => [ '-U', 'acme_app' ]);
like($err, qr/master key "k1" is not configured/,
	'its sealed values do not open: the master key they were wrapped under is retired');
is(acme('app3', q{SELECT count(*) FILTER (WHERE wf.verify_run(run_id)) FROM wf.runs}),
	'2', 'the rest of the restored runs is intact');

# the control: with the old master key still configured, the backup would open
set_master_keys("$k2,$k1");
is(acme('app3', q{SELECT wf.decrypt(input)->>'card' FROM wf.runs WHERE idempotency_key = 'order-2'}),
	'5500000000000004', 'with the old master key configured the backup would open');
# and the re-wrapped copy restored before the shredding still opens under k2 alone
set_master_keys($k2);
is(acme('app2', q{SELECT wf.decrypt(input)->>'card' FROM wf.runs WHERE idempotency_key = 'order-2'}),
	'5500000000000004', 'a database whose keys were re-wrapped opens under the new master key');

$node->stop;
done_testing();
