# WfTestUtil.pm -- helpers shared by the TAP tests in test/t (not a test:
# prove runs test/t/*.pl only).  Load it with
#   use FindBin;
#   use lib $FindBin::RealBin;
#   use WfTestUtil;
package WfTestUtil;

use strict;
use warnings;
use Exporter 'import';

our @EXPORT = qw(server_children);

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

1;
