#!/usr/bin/perl
# doctest.pl — run the SQL examples of the documentation and compare their
# output with what the documentation shows (the "docs" suite of make test;
# docs/testing.md, "Docs that run").
#
# Usage: perl test/scripts/doctest.pl [--show] [FILE.md ...]
#   (default: README.md and docs/*.md, relative to the repository root)
#   --show   also print the whole actual output of every differing block
#
# Connects with psql through the usual libpq environment (PGHOST, PGPORT,
# PGUSER: a superuser); $PSQL names the psql binary (default: psql on the
# PATH).  Per documentation file:
#
#   - a fresh database wf_doctest_<file> is created (without the extension:
#     a file creates it itself, in a hidden setup block if need be), and the
#     file's ```sql blocks run in order in one psql session (psql reads them
#     from standard input, so psql variables set with \gset carry over);
#   - a ```sql block followed by a ```text block, with nothing but blank
#     lines between them, is compared: psql's standard output and standard
#     error, merged, against the text block, after masking (below);
#   - a ```sql block without such a text block must run without an ERROR;
#   - afterwards the database is dropped, and so is every role the file
#     created (roles are global to the cluster).
#
# Directives, HTML comments that Markdown renders as nothing:
#   <!-- doctest: norun REASON -->   the next ```sql block is not run
#   <!-- doctest: new-database -->   drop and re-create the file's database
#                                    here, and reconnect
#   <!-- doctest setup               SQL run at this point (hidden from
#   SQL ...                          readers); its output is not compared
#   -->                              but must hold no ERROR
#
# Masking, applied alike to the expected and the actual output, line by
# line, and nothing else is masked:
#   UUIDs                                  -> <uuid>
#   timestamps (a date with a time of day,
#     optional fraction and zone)          -> <timestamp>
#   times/intervals with a fraction of a
#     second (00:00:01.234567)             -> <interval>
#   "Time: 1.234 ms" and "123.456 ms"      -> <ms>
#   hex strings of 16 or more digits with at
#     least one of a-f, with or without a
#     bytea \x (hashes and their prefixes,
#     keys)                                -> <hex>
#   approval tokens: wfa_ and 8 to 43
#     base64url characters (a whole token,
#     or the start a doc shows of one)     -> <token>
#   the tenant tag of a LISTEN channel
#     (wfq.<12 hex>.queue, wf_runs.<12 hex>) -> wfq.<tag>, wf_runs.<tag>
# Then trailing blanks go, every run of blanks becomes one blank, and every
# run of dashes in a psql table rule (a line of - and +) becomes one dash,
# so that column widths that follow from masked values do not matter.
#
# Prints one line per file, "doc FILE: N blocks, P passed, F failed", after
# a diff of each failed block; exits 1 when any block failed.
use strict;
use warnings;
use File::Basename qw(basename dirname);
use File::Spec;
use File::Temp qw(tempdir);
use Cwd qw(abs_path);

my $show = 0;
my @files;
for my $a (@ARGV) {
	if ($a eq '--show') { $show = 1; }
	elsif ($a =~ /^-/) { die "usage: $0 [--show] [FILE.md ...]\n"; }
	else { push @files, $a; }
}
my $root = abs_path(dirname(abs_path($0)) . '/../..');
if (!@files) {
	@files = ("$root/README.md", sort glob("$root/docs/*.md"));
}
my $psql = $ENV{PSQL} || 'psql';
$ENV{PGTZ} = 'UTC';
$ENV{PGAPPNAME} = 'doctest';
delete $ENV{PGDATABASE};
my $tmp = tempdir('doctest.XXXXXX', TMPDIR => 1, CLEANUP => 1);

# parse FILE: a list of items
#   {kind => 'sql', code, line, norun, expect (text or undef), eline}
#   {kind => 'setup', code, line}
#   {kind => 'newdb', line}
sub parse {
	my ($file) = @_;
	open(my $fh, '<', $file) or die "$file: $!\n";
	my @lines = <$fh>;
	close $fh;
	my (@items, $norun, $last_sql);
	my $i = 0;
	while ($i < @lines) {
		my $l = $lines[$i];
		if ($l =~ /^\s*<!--\s*doctest:\s*norun\b/) {
			$norun = $i + 1;
		} elsif ($l =~ /^\s*<!--\s*doctest:\s*new-database\s*-->/) {
			push @items, { kind => 'newdb', line => $i + 1 };
			$last_sql = undef;
		} elsif ($l =~ /^\s*<!--\s*doctest\s+setup\s*$/) {
			my $start = $i + 1;
			my $code = '';
			$i++;
			while ($i < @lines && $lines[$i] !~ /^\s*-->\s*$/) {
				$code .= $lines[$i++];
			}
			die "$file:$start: unterminated doctest setup comment\n" if $i >= @lines;
			push @items, { kind => 'setup', code => $code, line => $start };
			$last_sql = undef;
		} elsif ($l =~ /^\s*<!--\s*doctest\b/) {
			die "$file:" . ($i + 1) . ": unknown doctest directive: $l";
		} elsif ($l =~ /^( *)(```+|~~~+)\s*([^\s`]*)/) {
			my ($indent, $fence, $lang) = (length($1), $2, $3);
			my $start = $i + 1;
			my $body = '';
			$i++;
			while ($i < @lines && $lines[$i] !~ /^ *\Q$fence\E\s*$/) {
				my $b = $lines[$i++];
				$b =~ s/^ {0,$indent}//;
				$body .= $b;
			}
			die "$file:$start: unterminated code block\n" if $i >= @lines;
			if ($lang eq 'sql') {
				my $item = { kind => 'sql', code => $body, line => $start,
							 norun => (defined $norun && $norun == $start - 1 ? 1 : 0) };
				if (defined $norun && !$item->{norun}) {
					die "$file:$norun: doctest: norun must be on the line just before a ```sql block\n";
				}
				$norun = undef;
				push @items, $item;
				$last_sql = $item->{norun} ? undef : $item;
				$i++;
				next;
			} elsif ($lang eq 'text' && $last_sql) {
				$last_sql->{expect} = $body;
				$last_sql->{eline} = $start;
			}
			$last_sql = undef;
		} elsif ($l !~ /^\s*$/) {
			$last_sql = undef;
		}
		$i++;
	}
	die "$file:$norun: doctest: norun is not followed by a ```sql block\n" if defined $norun;
	return @items;
}

# a block must not leave a statement open: it would swallow the next one
sub unterminated {
	my ($code) = @_;
	my @l = grep { !/^\s*$/ && !/^\s*--/ } split /\n/, $code;
	return 0 unless @l;
	my $last = $l[-1];
	$last =~ s/\s+--.*$//;
	$last =~ s/\s+$//;
	return 0 if $last =~ /;$/;
	return 0 if $last =~ /^\s*\\/;        # a psql command
	return 0 if $last =~ /\\g\w*(\s.*)?$/;  # \g, \gset, \gx, \gexec
	return 1;
}

sub mask {
	my ($text) = @_;
	my @out;
	for my $l (split /\n/, $text, -1) {
		$l =~ s/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/<uuid>/g;
		$l =~ s/\b\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d(?::?\d\d)?\b)?/<timestamp>/g;
		$l =~ s/(?<![\w:])\d+:\d\d:\d\d\.\d+\b/<interval>/g;
		$l =~ s/\bTime: \d+(?:\.\d+)? ms\b.*/Time: <ms>/g;
		$l =~ s/\b\d+\.\d+ ms\b/<ms>/g;
		$l =~ s/(?:\\{1,2}x|\b)(?=[0-9]*[a-f])[0-9a-f]{16,}\b/<hex>/g;
		$l =~ s/\b(wfq|wf_runs)\.[0-9a-f]{12}\b/$1.<tag>/g;
		$l =~ s/\bwfa_[A-Za-z0-9_-]{8,43}(?![A-Za-z0-9_-])/<token>/g;
		$l =~ s/\s+$//;
		$l =~ s/^(\s*)//;
		my $lead = $1;
		$l =~ s/\s+/ /g;
		$l =~ s/-+/-/g if $l =~ /^[-+]+$/;
		push @out, $l;
	}
	pop @out while @out && $out[-1] eq '';
	shift @out while @out && $out[0] eq '';
	return join("\n", @out) . "\n";
}

sub psql_cmd {
	my ($db, @args) = @_;
	my @cmd = ($psql, '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $db, @args);
	my $out = `@{[join ' ', map { shell_quote($_) } @cmd]} 2>&1`;
	die "psql failed: @cmd\n$out" if $?;
	return $out;
}

sub shell_quote {
	my ($s) = @_;
	$s =~ s/'/'\\''/g;
	return "'$s'";
}

sub quote_ident {
	my ($s) = @_;
	$s =~ s/"/""/g;
	return "\"$s\"";
}

sub roles {
	return map { chomp; $_ } split /\n/, psql_cmd('postgres', '-At', '-c',
		'SELECT rolname FROM pg_roles ORDER BY 1');
}

# run_file FILE: returns (passed, failed, blocks)
sub run_file {
	my ($file) = @_;
	my $rel = File::Spec->abs2rel(abs_path($file), $root);
	my @items = parse($file);
	my @sql = grep { $_->{kind} eq 'sql' && !$_->{norun} } @items;
	return (0, 0, 0) unless @sql || grep { $_->{kind} eq 'setup' } @items;

	(my $db = "wf_doctest_" . lc(basename($file, '.md'))) =~ s/[^a-z0-9_]/_/g;
	my $qdb = quote_ident($db);
	my %before = map { $_ => 1 } roles();
	psql_cmd('postgres', '-c', "DROP DATABASE IF EXISTS $qdb WITH (FORCE)",
			 '-c', "CREATE DATABASE $qdb");

	my $script = "$tmp/" . basename($file) . ".sql";
	open(my $sf, '>', $script) or die "$script: $!\n";
	my $n = 0;
	my (%block, @fail);
	for my $it (@items) {
		if ($it->{kind} eq 'newdb') {
			print $sf "\\set QUIET on\n\\c postgres\nDROP DATABASE $qdb WITH (FORCE);\n"
				. "CREATE DATABASE $qdb;\n\\c $db\n\\set QUIET off\n";
			next;
		}
		next if $it->{kind} eq 'sql' && $it->{norun};
		$n++;
		$block{$n} = $it;
		if ($it->{code} =~ /\bALTER\s+SYSTEM\b/i) {
			push @fail, [$it, "the block changes the server's configuration (ALTER SYSTEM): mark it <!-- doctest: norun ... -->"];
			print $sf "\\echo '\@\@doctest $n\@\@'\n";
			next;
		}
		if (unterminated($it->{code})) {
			push @fail, [$it, "the block ends inside a statement (no ';'): it would swallow the next block"];
		}
		print $sf "\\echo '\@\@doctest $n\@\@'\n", $it->{code};
		print $sf "\n" unless $it->{code} =~ /\n$/;
		print $sf "\\set QUIET on\n\\r\n\\set QUIET off\n";
	}
	print $sf "\\echo '\@\@doctest end\@\@'\n";
	close $sf;

	my $pid = open(my $ph, '-|');
	die "fork: $!\n" unless defined $pid;
	if ($pid == 0) {
		chdir($tmp) or die "chdir $tmp: $!\n";	# files a doc writes (\copy ... TO) land there
		open(STDIN, '<', $script) or die "$script: $!\n";
		open(STDERR, '>&', \*STDOUT) or die "dup: $!\n";
		exec($psql, '-X', '-d', $db) or die "exec $psql: $!\n";
	}
	my %out;
	my $cur;
	my $pre = '';
	while (my $l = <$ph>) {
		if ($l =~ /^\@\@doctest (\d+|end)\@\@$/) {
			$cur = $1;
			$out{$cur} //= "";
			next;
		}
		if (defined $cur) { $out{$cur} .= $l; } else { $pre .= $l; }
	}
	close $ph;
	my $rc = $? >> 8;

	my ($passed, $failed) = (0, 0);
	my %failed_block = map { $_->[0] => 1 } @fail;
	for my $f (@fail) {
		print "*** $rel:$f->[0]{line}: $f->[1]\n";
	}
	if ($pre ne '' || !exists $out{end} || ($out{end} // '') ne '' || $rc) {
		print "*** $rel: psql exited with status $rc" . ($pre . ($out{end} // '') ne '' ? ":\n$pre" . ($out{end} // '') : "\n");
		$failed++;
	}
	for my $k (sort { $a <=> $b } keys %block) {
		my $it = $block{$k};
		my $actual = $out{$k} // '';
		my $ok;
		if ($it->{kind} eq 'sql' && defined $it->{expect}) {
			my ($e, $a) = (mask($it->{expect}), mask($actual));
			$ok = $e eq $a;
			if (!$ok) {
				print "*** $rel:$it->{line}: output differs from the text block at line $it->{eline}:\n";
				print diff($e, $a);
			}
		} else {
			$ok = $actual !~ /^(ERROR|FATAL|PANIC):|^psql:|^\\/m;
			if (!$ok) {
				my $what = $it->{kind} eq 'setup' ? 'setup block' : 'block (no output shown)';
				print "*** $rel:$it->{line}: $what raised an error:\n$actual";
			}
		}
		if ($show && !$ok) {
			print "----- actual output of $rel:$it->{line}:\n$actual-----\n";
		}
		$ok = 0 if $failed_block{$it};
		if ($ok) { $passed++; } else { $failed++; }
	}

	psql_cmd('postgres', '-c', "DROP DATABASE IF EXISTS $qdb WITH (FORCE)");
	for my $r (grep { !$before{$_} } roles()) {
		my $q = quote_ident($r);
		my $o = `@{[join ' ', map { shell_quote($_) } ($psql, '-X', '-q', '-d', 'postgres', '-c', "DROP ROLE $q")]} 2>&1`;
		print "*** $rel: could not drop role $r that it created: $o" if $?;
	}
	return ($passed, $failed, scalar(keys %block));
}

sub diff {
	my ($e, $a) = @_;
	my ($ef, $af) = ("$tmp/expected", "$tmp/actual");
	for ([$ef, $e], [$af, $a]) {
		open(my $f, '>', $_->[0]) or die "$_->[0]: $!\n";
		print $f $_->[1];
		close $f;
	}
	my $d = `diff -u --label expected --label actual '$ef' '$af'`;
	return $d;
}

my ($tp, $tf) = (0, 0);
for my $file (@files) {
	my $rel = File::Spec->abs2rel(abs_path($file), $root);
	my ($p, $f, $n) = eval { run_file($file) };
	if ($@) {
		print "*** $rel: $@";
		($p, $f, $n) = (0, 1, 0);
	}
	next if !$n && !$f;
	printf "doc %s: %d blocks, %d passed, %d failed\n", $rel, $n, $p, $f;
	$tp += $p;
	$tf += $f;
}
print "docs: $tp passed, $tf failed\n";
exit($tf ? 1 : 0);
