#!/usr/bin/env bash
# bench/flat_history.sh — does the cost of a step stay flat as history
# piles up, and under a long-held snapshot?  A measurement, never a test.
#
#  1. Parked history.  Two databases in one cluster: wf_flat_empty holds
#     only the work, wf_flat_full the same work plus PARKED runs (default
#     1,000,000) that wait on a sleep a week away, with their events, task-
#     free.  Rounds of claim + complete of 20-step runs (two transactions
#     per step, CLIENTS clients, SECONDS s) alternate between the two,
#     ROUNDS times; the median steps/s of each and their ratio are printed.
#  2. A long snapshot.  In wf_flat_empty, another session holds a
#     REPEATABLE READ snapshot open (so vacuum can remove nothing) while
#     the same workload runs for SNAPSHOT_SECONDS (default 120); the steps
#     completed in each 10 s window are printed, with the same windows
#     without the snapshot before it for comparison.
#
# Server: with PGHOST/PGPORT set that server is used; otherwise a
# throw-away cluster (bench/common.sh).  Knobs: PARKED, ROUNDS (3), BENCH_SECONDS
# (10), CLIENTS (8), SNAPSHOT_SECONDS (120).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$BENCH_DIR/common.sh"
export PATH=/usr/lib/postgresql/15/bin:$PATH
PARKED=${PARKED:-1000000}
ROUNDS=${ROUNDS:-3}
SECONDS_PER=${BENCH_SECONDS:-10}
CLIENTS=${CLIENTS:-8}
SNAPSHOT_SECONDS=${SNAPSHOT_SECONDS:-120}

bench_in_virtualenv flat_history "${BASH_SOURCE[0]}" "$@"

q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }
THREADS=$((CLIENTS < 2 ? CLIENTS : 2))
SUPPLY=$(( (ROUNDS * SECONDS_PER + SNAPSHOT_SECONDS * 2) * 4000 / 20 + 1000 ))

step_script=$(mktemp)
cat >"$step_script" <<'EOF'
SELECT coalesce(max(task_id), 0) AS tid, coalesce(max(fence), 0) AS f FROM wf.claim_tasks('flat', 'w:' || :client_id, 1, '60 seconds')
\gset
\if :tid > 0
SELECT wf.complete_task(:tid, :f, '{"ok": true}');
\endif
EOF
trap 'rm -f "$step_script"' EXIT

setup() {
	local db=$1 parked=$2
	q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
	q -d "$db" -c "CREATE EXTENSION wfengine" >/dev/null
	q -d "$db" -c "SELECT wf.publish_definition('flat', jsonb_build_object('steps',
		(SELECT jsonb_agg(jsonb_build_object('name', 's' || g, 'queue', 'flat')) FROM generate_series(1, 20) g)))" >/dev/null
	q -d "$db" -c "SELECT wf.publish_definition('parked', '{\"steps\": [{\"name\": \"wait\", \"type\": \"sleep\", \"duration\": \"7d\"}, {\"name\": \"after\", \"queue\": \"later\"}]}')" >/dev/null
	if ((parked > 0)); then
		local t0=$SECONDS
		# in slices, so that no single statement holds a million new rows
		for ((i = 0; i < parked; i += 100000)); do
			q -d "$db" -c "SELECT count(wf.start_run('parked', jsonb_build_object('n', g))) FROM generate_series(1, LEAST(100000, $parked - $i)) g" >/dev/null
		done
		echo "   $db: $parked parked runs started in $((SECONDS - t0)) s"
	fi
	q -d "$db" -c "SELECT count(wf.start_run('flat', jsonb_build_object('n', g))) FROM generate_series(1, $SUPPLY) g" >/dev/null
	q -d "$db" -c "VACUUM ANALYZE" -c "CHECKPOINT"
}

completed() { q -d "$1" -c "SELECT count(*) FROM wf.tasks WHERE queue = 'flat' AND status = 'completed'"; }

run_round() {
	local db=$1 secs=$2 c0 c1
	c0=$(completed "$db")
	pgbench -n -c "$CLIENTS" -j "$THREADS" -T "$secs" -f "$step_script" "$db" >/dev/null 2>&1
	c1=$(completed "$db")
	echo $(((c1 - c0) / secs))
}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

echo "== setting up: wf_flat_empty, and wf_flat_full with $PARKED parked runs"
setup wf_flat_empty 0
setup wf_flat_full "$PARKED"
q -d wf_flat_full -c "SELECT 'wf_flat_full: ' || (SELECT count(*) FROM wf.runs) || ' runs, ' || (SELECT count(*) FROM wf.events) || ' events, ' || (SELECT count(*) FROM wf.timers WHERE status = 'pending') || ' pending timers, ' || pg_size_pretty(pg_database_size(current_database()))"

echo "== $ROUNDS rounds of ${SECONDS_PER} s, $CLIENTS clients, claim + complete (2 xacts per step), alternating"
empty=() full=()
for ((r = 1; r <= ROUNDS; r++)); do
	e=$(run_round wf_flat_empty "$SECONDS_PER")
	f=$(run_round wf_flat_full "$SECONDS_PER")
	empty+=("$e") full+=("$f")
	echo "   round $r: empty $e steps/s, full $f steps/s"
done
me=$(printf '%s\n' "${empty[@]}" | median)
mf=$(printf '%s\n' "${full[@]}" | median)
echo "   median: empty $me, full $mf steps/s; full / empty = $(echo "scale=2; $mf / $me" | bc)"

windows() {
	local db=$1 secs=$2 c0 c1 w
	for ((w = 10; w <= secs; w += 10)); do
		c0=$(completed "$db")
		sleep 10
		c1=$(completed "$db")
		printf ' %d' $(((c1 - c0) / 10))
	done
	echo
}

echo "== ${SNAPSHOT_SECONDS} s in 10 s windows (steps/s), wf_flat_empty"
pgbench -n -c "$CLIENTS" -j "$THREADS" -T "$SNAPSHOT_SECONDS" -f "$step_script" wf_flat_empty >/dev/null 2>&1 &
bg=$!
printf '   without a held snapshot:'
windows wf_flat_empty "$SNAPSHOT_SECONDS"
wait "$bg" || true
psql -X -q -d wf_flat_empty -c "BEGIN ISOLATION LEVEL REPEATABLE READ" -c "SELECT count(*) FROM wf.runs" \
	-c "SELECT pg_sleep($SNAPSHOT_SECONDS + 15)" -c "COMMIT" >/dev/null 2>&1 &
holder=$!
sleep 2
pgbench -n -c "$CLIENTS" -j "$THREADS" -T "$SNAPSHOT_SECONDS" -f "$step_script" wf_flat_empty >/dev/null 2>&1 &
bg=$!
printf '   with a REPEATABLE READ snapshot held: '
windows wf_flat_empty "$SNAPSHOT_SECONDS"
wait "$bg" || true
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
q -d postgres -c "DROP DATABASE wf_flat_empty" -c "DROP DATABASE wf_flat_full" 2>/dev/null || true
