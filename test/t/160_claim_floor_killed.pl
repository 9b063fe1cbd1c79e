
# Copyright (c) 2026, wfengine developers

# The claim floor over killed index entries (issue 31).  Every attempt a
# claim takes leaves its entry in tasks_claim_idx.  Once no snapshot can
# see that version any more, the next scan that passes the entry marks it
# killed (LP_DEAD), and later scans skip it without returning it; but they
# still walk its page, and the page keeps it until a VACUUM (an insert
# cleans only the page it goes to, at the end of the queue).  A busy queue
# between two VACUUMs therefore grows a head of pages of killed entries that
# every claim from the start of the queue walks.  The claim floor
# (src/claimfloor.c) must take over there too: by the index's buffers a
# claim read (WF_FLOOR_DRAG_BLOCKS), not only by the entries it was given,
# which do not count killed ones.
#
#  1. 6,000 one-step runs wait on one queue; autovacuum is off, so nothing
#     removes the entries during the test.  Commits are synchronous (fsync
#     off only for speed): a scan kills an entry only when the row version's
#     hint bits say it is dead, and an asynchronous commit keeps them unset
#     until its WAL is flushed, so that such entries are returned, not
#     skipped, and the older rule (WF_FLOOR_DRAG_ENTRIES) saw them.
#  2. 4,000 claims, each completed, each in a transaction of its own (a DO
#     block that commits): the entries they leave are dead to everyone,
#     and the scans kill them, some 30 pages of the index.
#  3. Ten claims, each in a transaction that is rolled back, each counted by
#     pg_stat_get_xact_blocks_fetched of tasks_claim_idx: the least of them
#     reads a handful of the index's blocks (one a second reads from the
#     start on purpose, so the least is taken), not the pages of killed
#     entries.  Before WF_FLOOR_DRAG_BLOCKS every claim walked them (35 to
#     40 blocks here).
#  4. The queue then drains completely: nothing stays hidden behind the
#     floor.
#
# No timing is asserted.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use WfTestUtil;    # (also: initdb from a template)

my $node = PostgreSQL::Test::Cluster->new('wf_floor_killed');
$node->init;
$node->append_conf(
	'postgresql.conf', qq(
shared_preload_libraries = 'wfengine,pg_cron'
cron.database_name = 'postgres'
fsync = off
autovacuum = off
));
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE wf');
$node->safe_psql('wf', 'CREATE EXTENSION wfengine');
$node->safe_psql(
	'wf', q{
SELECT wf.publish_definition('one', '{"steps": [{"name": "s", "queue": "killed_q"}]}');
SELECT count(wf.start_run('one', jsonb_build_object('n', n))) FROM generate_series(1, 6000) AS n;
});

# claims of one attempt each, completed and committed one by one: $n of
# them, or (undef) until the queue is empty
sub claim_and_complete
{
	my ($n) = @_;
	my $limit = defined $n ? $n : 'NULL';
	$node->safe_psql(
		'wf', qq{
DO \$\$
DECLARE
    c record;
    i integer := 0;
BEGIN
    LOOP
        EXIT WHEN i = $limit;
        SELECT * INTO c FROM wf.claim_tasks('killed_q', 'w', 1, '5 minutes');
        EXIT WHEN c.task_id IS NULL;
        PERFORM wf.complete_task(c.task_id, c.fence, '{}');
        COMMIT;
        i := i + 1;
    END LOOP;
END
\$\$;
});
	return;
}

# 2. 4,000 claims, each completed and committed on its own
claim_and_complete(4000);
is($node->safe_psql('wf', "SELECT count(*) FROM wf.runs WHERE status = 'completed'"),
	'4000', '4,000 runs completed one claim at a time');
my $pages = $node->safe_psql('wf',
	"SELECT pg_relation_size('wf.tasks_claim_idx') / current_setting('block_size')::int");
cmp_ok($pages, '>', 24, "the claim index holds the killed entries' pages ($pages pages)");

# 3. what a claim reads of the index now
my @blocks;
for my $i (1 .. 10)
{
	my $out = $node->safe_psql(
		'wf', q{
BEGIN;
SELECT count(*) FROM wf.claim_tasks('killed_q', 'probe', 1, '5 minutes');
SELECT pg_stat_get_xact_blocks_fetched('wf.tasks_claim_idx'::regclass);
ROLLBACK;
});
	my ($got, $read) = split /\n/, $out;
	is($got, '1', "probe claim $i leased one attempt") if $i == 1;
	push @blocks, $read;
}
my ($least) = sort { $a <=> $b } @blocks;
cmp_ok($least, '<=', 8,
	"a claim reads from the floor, not over the killed entries (index blocks per claim: @blocks)");

# 4. the rest drains, and nothing is left behind the floor
claim_and_complete(undef);
is($node->safe_psql('wf',
		"SELECT count(*) FILTER (WHERE status = 'completed') || '/' || count(*) FROM wf.runs"),
	'6000/6000', 'every run completed: no attempt hidden behind the floor');
is($node->safe_psql('wf', "SELECT count(*) FROM wf.tasks WHERE status IN ('ready', 'leased')"),
	'0', 'no attempt left in the queue');

$node->stop;
done_testing();
