# WfTestUtil.pm -- helpers shared by the TAP tests in test/t (not a test:
# prove runs test/t/*.pl only).  Load it with
#   use FindBin;
#   use lib $FindBin::RealBin;
#   use WfTestUtil;
package WfTestUtil;

use strict;
use warnings;
use Exporter 'import';

our @EXPORT = qw(server_children wf_shard_node wf_shards);

# server_children(PPID): the pids of the processes whose parent is PPID
# (the server's processes other than the postmaster), read from /proc, so
# that a test can kill -9 all of them at once with the postmaster.
sub server_children
{
	my ($ppid) = @_;
	my @kids;
	opendir(my $dh, '/proc') or die "cannot read /proc: $!";
	for my $pid (grep { /^\d+$/ } readdir $dh)
	{
		open(my $fh, '<', "/proc/$pid/stat") or next;
		my $stat = <$fh>;
		close $fh;
		push @kids, $pid if defined $stat && $stat =~ /^\d+ \(.*\) \S (\d+)/ && $1 == $ppid;
	}
	closedir $dh;
	return @kids;
}

# wf_shards(prefix => P, db => DB, conf => EXTRA, id_blocks => 0|1): three
# shard clusters s1, s2, s3 (wfengine and pg_cron preloaded, EXTRA appended
# to postgresql.conf, database DB with the extension; with id_blocks, shard
# n takes id block n) and a router cluster with database wfengine_router and
# the extension wfengine_router, configured with the three shards and 64
# partitions.  Returns (\%shard (name -> node), $router).
# wf_shard_node(name, extra conf): a started node as a shard needs it
# (wfengine and pg_cron preloaded, the tests' approval key, logical
# replication for moves)
sub wf_shard_node
{
	my ($name, $conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf(
		'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
wfengine.approval_key = 'cd0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd'
wal_level = logical
max_wal_senders = 10
max_replication_slots = 10
) . ($conf // ''));
	$node->start;
	return $node;
}

sub wf_shards
{
	my (%o) = @_;
	my $db = $o{db} // 'wf';
	my %shard;
	for my $name (@{ $o{names} // [qw(s1 s2 s3)] })
	{
		my $node = wf_shard_node("$o{prefix}_$name", $o{conf});
		$node->safe_psql('postgres', "CREATE DATABASE $db");
		$node->safe_psql($db, 'CREATE EXTENSION wfengine');
		$shard{$name} = $node;
	}
	my $router = PostgreSQL::Test::Cluster->new("$o{prefix}_router");
	$router->init;
	$router->start;
	$router->safe_psql('postgres', 'CREATE DATABASE wfengine_router');
	$router->safe_psql('wfengine_router', 'CREATE EXTENSION wfengine_router CASCADE');
	my $shards_json = join(', ',
		map { sprintf('"%s": "host=%s port=%d dbname=%s"', $_, $shard{$_}->host, $shard{$_}->port, $db) }
		  sort keys %shard);
	# the router configures every shard (name, id block, map) as it goes
	my $n = $router->safe_psql('wfengine_router', "SELECT wfrouter.configure('{$shards_json}', " . ($o{partitions} // 64) . ")");
	die "the router has $n shards, not 3" unless $n eq '3';
	return (\%shard, $router);
}

1;
