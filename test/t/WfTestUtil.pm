# WfTestUtil.pm -- helpers shared by the TAP tests in test/t (not a test:
# prove runs test/t/*.pl only).  Load it with
#   use FindBin;
#   use lib $FindBin::RealBin;
#   use WfTestUtil;
package WfTestUtil;

use strict;
use warnings;
use Exporter 'import';
use Fcntl qw(:flock);
use File::Basename qw(dirname);
use Digest::MD5 qw(md5_hex);
use PostgreSQL::Test::Utils ();

our @EXPORT = qw(server_children wf_shard_node wf_shards wf_release_root wf_clone_root wf_install_current);

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

# wf_shards(prefix => P, db => DB, conf => EXTRA, names => [...]): three
# shard clusters s1, s2, s3, or those of names (wfengine and pg_cron preloaded, EXTRA appended
# to postgresql.conf, database DB with the extension) and a router cluster
# with database wfengine_router and the extension wfengine_router,
# configured with those shards and 64 partitions (or partitions => N).  Returns (\%shard (name -> node), $router).
# wf_shard_node(name, extra conf): a started node as a shard needs it
# (wfengine and pg_cron preloaded, the tests' approval key, logical
# replication for moves)
sub wf_shard_node
{
	my ($name, $conf, %o) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name,
		$o{install_path} ? (install_path => $o{install_path}) : ());
	$node->init;
	$node->append_conf(
		'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
wfengine.approval_key = 'cd0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd'
wal_level = logical
max_wal_senders = 10
max_replication_slots = 10
# a move's copy: six tables at once instead of two (PostgreSQL's default;
# a move copies some fifteen tables, each a table synchronisation worker
# that starts, copies and catches up: seconds per move on a loaded machine)
max_worker_processes = 20
max_logical_replication_workers = 10
max_sync_workers_per_subscription = 6
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
	die "the router has $n shards, not " . scalar(keys %shard) unless $n eq scalar(keys %shard);
	return (\%shard, $router);
}

# The PostgreSQL installation the tests run (pg_config of PATH): its
# directories, as pg_config names them.
sub pg_dirs
{
	my %d;
	for my $k (qw(bindir sharedir pkglibdir pkgincludedir))
	{
		my $v = `pg_config --$k`;
		chomp $v;
		die "pg_config --$k failed" unless $v;
		$d{$k} = $v;
	}
	return %d;
}

# wf_release_root(NAME, version => V): an installation of PostgreSQL of its
# own (a copy of the one the tests run, under tmp_check/NAME, the same
# directories below it, so that its pg_config and postgres find their files
# relative to themselves) with wfengine's release V (default: the last line
# of sql/releases) built from its commit and installed in it, as
# docs/upgrading.md ("Releases") tells an operator to.  The release's
# source is $ENV{WF_RELEASE_TARS}/wfengine-V.tar, or for the last release
# $ENV{WF_PREV_RELEASE_TAR}, when there (test/scripts/test.sh writes them
# with git archive, since the tests run in a copy of the tree without
# .git), otherwise `git archive` of the commit in the tree the tests run
# from.  Returns (install_path for PostgreSQL::Test::Cluster, version,
# commit), or (undef, reason) when the release's source cannot be had.
sub wf_release_root
{
	my ($name, %o) = @_;
	open(my $fh, '<', 'sql/releases') or die "sql/releases: $!";
	my ($version, $commit, $last);
	while (<$fh>)
	{
		next unless /^(\d+\.\d+\.\d+)\t([0-9a-f]{40})\t/;
		$last = $1;
		($version, $commit) = ($1, $2) if !defined $o{version} || $o{version} eq $1;
	}
	close $fh;
	die 'sql/releases lists no release' . ($o{version} ? " $o{version}" : '') unless $version;

	my $base = "${PostgreSQL::Test::Utils::tmp_check}/$name";
	my $src = "$base-src";
	mkdir $src or die "mkdir $src: $!";
	my $tar = $ENV{WF_RELEASE_TARS} ? "$ENV{WF_RELEASE_TARS}/wfengine-$version.tar" : undef;
	$tar = $ENV{WF_PREV_RELEASE_TAR} if !($tar && -f $tar) && $version eq $last;
	if ($tar && -f $tar)
	{
		system('tar', '-x', '-f', $tar, '-C', $src) == 0 or die "tar -x $tar failed";
	}
	elsif (system("git -c safe.directory='*' cat-file -e $commit^{commit} 2>/dev/null") == 0)
	{
		system("git -c safe.directory='*' archive $commit | tar -x -C '$src'") == 0
		  or die "git archive $commit failed";
	}
	else
	{
		return (undef, "the source of release $version ($commit) is not at hand: no git history here, and no "
			  . ($version eq $last ? 'WF_PREV_RELEASE_TAR or ' : '') . "WF_RELEASE_TARS/wfengine-$version.tar");
	}

	# the installation: the same directories under $base
	my %d = pg_dirs();
	my $inst = $d{bindir};
	$inst =~ s{/bin$}{} or die "bindir $d{bindir} does not end in /bin";
	for my $dir ($inst, $d{sharedir}, $d{pkgincludedir})
	{
		my $parent = "$base$dir";
		$parent =~ s{/[^/]+$}{};
		system('mkdir', '-p', $parent) == 0 or die "mkdir -p $parent failed";
		system('cp', '-a', $dir, $parent) == 0 or die "cp -a $dir $parent failed";
	}
	# no wfengine of the running tree in it: the release's own, or none
	system("rm -rf '$base$d{pkglibdir}'/wfengine.so '$base$d{pkglibdir}'/bitcode/wfengine* '$base$d{sharedir}'/extension/wfengine*") == 0
	  or die 'removing wfengine from the copy failed';

	# built without LLVM bitcode (only JIT inlining reads it) and without
	# optimisation: a third of the compiler's time (17 s of CPU instead of
	# 45 s on the test machine), the same SQL and the same behaviour
	my $pgc = "$base$d{bindir}/pg_config";
	my $log = "$base-build.log";
	my $flags = "PG_CONFIG='$pgc' with_llvm=no COPT=-O0";
	system("make -C '$src' -j2 $flags >'$log' 2>&1 && make -C '$src' $flags install >>'$log' 2>&1") == 0
	  or die "building release $version failed: see $log";
	return ("$base$inst", $version, $commit);
}

# wf_clone_root(INSTALL_PATH, NAME): a copy, under tmp_check/NAME, of an
# installation wf_release_root made; returns its install_path.
sub wf_clone_root
{
	my ($inst, $name) = @_;
	my %d = pg_dirs();
	my $sysinst = $d{bindir};
	$sysinst =~ s{/bin$}{};
	(my $base = $inst) =~ s{\Q$sysinst\E$}{} or die "$inst is not an installation of wf_release_root";
	my $to = "${PostgreSQL::Test::Utils::tmp_check}/$name";
	system('cp', '-a', $base, $to) == 0 or die "cp -a $base $to failed";
	return "$to$sysinst";
}

# wf_install_current(INSTALL_PATH): installs the wfengine of the tests'
# installation (the version in development: the library, its bitcode and
# the extension's scripts and control files, what `make install` puts
# there) into the installation made by wf_release_root, replacing the
# release's; the router's files too with router => 1.
sub wf_install_current
{
	my ($inst, %o) = @_;
	my %d = pg_dirs();
	my $sysinst = $d{bindir};
	$sysinst =~ s{/bin$}{};
	(my $base = $inst) =~ s{\Q$sysinst\E$}{} or die "$inst is not an installation of wf_release_root";
	if ($o{router})
	{
		system("rm -f '$base$d{sharedir}'/extension/wfengine_router*") == 0 or die 'removing the router failed';
		for my $f (glob("$d{sharedir}/extension/wfengine_router*"))
		{
			system('cp', '-a', $f, "$base$d{sharedir}/extension/") == 0 or die "cp $f failed";
		}
	}
	system("rm -rf '$base$d{pkglibdir}'/wfengine.so '$base$d{pkglibdir}'/bitcode/wfengine.index.bc '$base$d{pkglibdir}'/bitcode/wfengine '$base$d{sharedir}'/extension/wfengine--* '$base$d{sharedir}'/extension/wfengine.control") == 0
	  or die 'removing the release failed';
	my @files = ("$d{pkglibdir}/wfengine.so", glob("$d{sharedir}/extension/wfengine--*.sql"), "$d{sharedir}/extension/wfengine.control");
	push @files, "$d{pkglibdir}/bitcode/wfengine.index.bc", "$d{pkglibdir}/bitcode/wfengine"
	  if -e "$d{pkglibdir}/bitcode/wfengine.index.bc";
	for my $f (@files)
	{
		(my $to = "$base$f") =~ s{/[^/]+$}{};
		system('cp', '-a', $f, "$to/") == 0 or die "cp $f $to failed";
	}
	return;
}

# ---------------------------------------------------------------------
# initdb template cache (issue 32: the TAP suite's wall time)
#
# Every PostgreSQL::Test::Cluster->init runs initdb, which costs seconds
# of a loaded 2-core machine, and the suite inits some forty clusters.
# PostgreSQL 16's Cluster.pm copies a template made once instead
# (INITDB_TEMPLATE); 15's does not, so loading this module makes it do
# the same: a plain initdb (-D DIR -A trust -N, or --no-sync, nothing
# else: what init runs without "extra", and what 140_failover.pl runs
# itself) is served by copying a data directory that initdb made once per
# installation into tmp_check/initdb_template (made under a lock, so two
# test files running at once share it).  Everything init does after
# initdb (pg_regress --config-auth, the settings it appends) is done to
# the copy as before.  An installation is known by the version, size and
# modification time of its postgres and initdb and of its postgres.bki,
# so the copies of an installation that wf_release_root and wf_clone_root
# make (cp -a) share a template, and an installation with another
# postgres gets a template of its own.  The clusters made so share their
# database system identifier, as PostgreSQL 16's do; nothing of wfengine
# reads it.  WF_NO_INITDB_TEMPLATE=1 turns the cache off.
# ---------------------------------------------------------------------
my $wf_system_or_bail = \&PostgreSQL::Test::Utils::system_or_bail;
{
	no warnings 'redefine';
	*PostgreSQL::Test::Utils::system_or_bail = \&wf_initdb_or_system;
}

# system_or_bail, but a plain initdb (see above) from the template
sub wf_initdb_or_system
{
	my @cmd = @_;
	if (   !$ENV{WF_NO_INITDB_TEMPLATE}
		&& @cmd == 6
		&& $cmd[0] =~ m{(^|/)initdb$}
		&& $cmd[1] eq '-D'
		&& $cmd[3] eq '-A'
		&& $cmd[4] eq 'trust'
		&& ($cmd[5] eq '-N' || $cmd[5] eq '--no-sync'))
	{
		wf_initdb_from_template($cmd[0], $cmd[2]);
		return;
	}
	return $wf_system_or_bail->(@cmd);
}

# wf_initdb_key(INITDB): what tells an installation's initdb output apart
sub wf_initdb_key
{
	my ($initdb) = @_;
	if ($initdb !~ m{/})
	{
		($initdb) = grep { -x } map { "$_/initdb" } split /:/, $ENV{PATH};
		die 'initdb is not in PATH' unless $initdb;
	}
	my $bindir = dirname($initdb);
	my $sharedir = `'$bindir/pg_config' --sharedir`;
	chomp $sharedir;
	my $version = `'$initdb' --version`;
	my @id = ($version);
	for my $f ("$bindir/postgres", $initdb, "$sharedir/postgres.bki")
	{
		my @st = stat $f or die "stat $f: $!";
		push @id, "$st[7]/$st[9]";
	}
	return md5_hex(join("\n", @id));
}

# wf_initdb_from_template(INITDB, PGDATA): PGDATA as INITDB -D PGDATA -A
# trust -N makes it, copied from the template (made first if need be)
sub wf_initdb_from_template
{
	my ($initdb, $pgdata) = @_;
	my $dir = "${PostgreSQL::Test::Utils::tmp_check}/initdb_template";
	mkdir $dir;
	my $template = "$dir/" . wf_initdb_key($initdb);
	open(my $lock, '>', "$template.lock") or die "$template.lock: $!";
	flock($lock, LOCK_EX) or die "flock $template.lock: $!";
	if (!-d $template)
	{
		system('rm', '-rf', "$template.tmp");
		$wf_system_or_bail->($initdb, '-D', "$template.tmp", '-A', 'trust', '-N');
		rename("$template.tmp", $template) or die "rename $template.tmp: $!";
	}
	close $lock;
	system('cp', '-a', $template, $pgdata) == 0
	  or Test::More::BAIL_OUT("copying the initdb template $template to $pgdata failed");
	return;
}

1;
