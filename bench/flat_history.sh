#!/usr/bin/env bash
# bench/flat_history.sh — does the cost of a step stay flat as history
# piles up, and under a long-held snapshot?  A measurement, never a test.
#
#  1. History.  Two databases in one cluster: wf_flat_empty holds only the
#     work, wf_flat_full the same work plus
#       - PARKED runs (default 1,000,000) that wait on a sleep a week away,
#         started by wf.start_run: their events and pending timers, task-
#         free;
#       - FINISHED finished 20-step runs (default 240,000: 42 events each,
#         10,080,000 events, and their 20 completed attempts each in
#         wf.tasks).  The engine runs TEMPLATE of them (default 200) to the
#         end itself (wf.claim_tasks + wf.complete_tasks in batches);
#         bench/flat_history_copy.py copies those rows into FINISHED runs
#         with fresh run ids, task ids, fences and times and their hash
#         chains computed again, and the script checks that wf.verify_run
#         holds on a sample of the copies and that a copy's rows have the
#         template's sizes.
#     Rounds of claim + complete of 20-step runs (two transactions per step,
#     CLIENTS clients, SECONDS s) alternate between the two, ROUNDS times;
#     then (HELD=1, the default) ROUNDS more while another session of each
#     database holds a REPEATABLE READ snapshot from before the first of
#     them to after the last.  Per round: steps/s of each database and the
#     load average; the median of each side and full / empty, per phase.
#  2. A long snapshot (SNAPSHOT_SECONDS, default 120; 0 skips it).  In
#     wf_flat_empty, another session holds a REPEATABLE READ snapshot open
#     (so vacuum can remove nothing) while the same workload runs; the
#     steps completed in each 10 s window are printed, with the same
#     windows without the snapshot before it for comparison.
#
# Server: with PGHOST/PGPORT set that server is used; otherwise a
# throw-away cluster (bench/common.sh).  Knobs: PARKED, FINISHED, TEMPLATE,
# FLAT_COPY_JOBS (2 copy processes), ROUNDS (3), BENCH_SECONDS (10),
# CLIENTS (8), HELD (1), SNAPSHOT_SECONDS (120).  FINISHED=0 HELD=0 is the
# shape of issue 13's measurement.  FLAT_KEEP=1 keeps the databases;
# FLAT_REUSE=1 measures again in them without setting up.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$BENCH_DIR/common.sh"
export PATH=/usr/lib/postgresql/15/bin:$PATH
PARKED=${PARKED:-1000000}
FINISHED=${FINISHED:-240000}
TEMPLATE=${TEMPLATE:-200}
ROUNDS=${ROUNDS:-3}
SECONDS_PER=${BENCH_SECONDS:-10}
CLIENTS=${CLIENTS:-8}
HELD=${HELD:-1}
SNAPSHOT_SECONDS=${SNAPSHOT_SECONDS:-120}

bench_in_virtualenv flat_history "${BASH_SOURCE[0]}" "$@"

q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }
THREADS=$((CLIENTS < 2 ? CLIENTS : 2))
SUPPLY=$((((1 + HELD) * ROUNDS * SECONDS_PER + SNAPSHOT_SECONDS * 2) * 4000 / 20 + 1000))

step_script=$(mktemp)
cat >"$step_script" <<'EOF'
SELECT coalesce(max(task_id), 0) AS tid, coalesce(max(fence), 0) AS f FROM wf.claim_tasks('flat', 'w:' || :client_id, 1, '60 seconds')
\gset
\if :tid > 0
SELECT wf.complete_task(:tid, :f, '{"ok": true}');
\endif
EOF
trap 'rm -f "$step_script"' EXIT

# start_parked DB N: N parked runs, in slices, so that no single statement
# holds a million new rows
start_parked() {
	local db=$1 parked=$2 i t0=$SECONDS
	for ((i = 0; i < parked; i += 100000)); do
		q -d "$db" -c "SELECT count(wf.start_run('parked', jsonb_build_object('n', g))) FROM generate_series(1, LEAST(100000, $parked - $i)) g" >/dev/null
	done
	echo "   $db: $parked parked runs started in $((SECONDS - t0)) s"
}

# finish_template DB N: the engine runs N 20-step runs of 'flat' to the end
# (claims of up to 1000 and their completions, one statement a batch)
finish_template() {
	local db=$1 n=$2 done_now
	q -d "$db" -c "SELECT count(*) FROM wf.start_runs('flat', ARRAY(SELECT jsonb_build_object('n', g) FROM generate_series(1, $n) g))" >/dev/null
	while :; do
		done_now=$(q -d "$db" -c "WITH c AS (SELECT array_agg(task_id) AS ids, array_agg(fence) AS fs FROM wf.claim_tasks('flat', 'w:gen', 1000, '10 minutes'))
			SELECT count(*) FROM c, wf.complete_tasks(c.ids, c.fs, array_fill('{\"ok\": true}'::jsonb, ARRAY[cardinality(c.ids)])) WHERE c.ids IS NOT NULL")
		((done_now > 0)) || break
	done
	if [[ $(q -d "$db" -c "SELECT count(*) FROM wf.runs WHERE definition_name = 'flat' AND status = 'completed'") != "$n" ]]; then
		echo "flat_history: the template runs did not all finish" >&2
		exit 1
	fi
}

# copy_finished DB N: N finished runs copied from the template (see the
# head of bench/flat_history_copy.py), with ids reserved in the sequences;
# then wf.verify_run on 200 random copies, and the rows per run and their
# sizes, template against 1,000 random copies
copy_finished() {
	local db=$1 n=$2 stride tbase fbase bad tstart
	tstart=$(q -d "$db" -c "SELECT min(created_at) FROM wf.runs WHERE definition_name = 'flat'")
	# task ids (and fences) a run holds: in its attempts' rows and in its
	# history (a completed attempt has no row since 0.3.0); an upper bound
	stride=$(q -d "$db" -c "SELECT max(c) FROM (SELECT count(x) AS c FROM (
		SELECT run_id, e.payload->>'task_id' AS x FROM wf.events e WHERE e.payload ? 'task_id'
		UNION ALL SELECT run_id, e.payload->>'fence' FROM wf.events e WHERE e.payload ? 'fence'
		UNION ALL SELECT run_id, t.task_id::text FROM wf.tasks t) u
		WHERE run_id IN (SELECT run_id FROM wf.runs WHERE definition_name = 'flat' AND status = 'completed') GROUP BY run_id) s")
	tbase=$(q -d "$db" -c "SELECT setval('wf.task_id_seq', nextval('wf.task_id_seq') + $n::bigint * $stride) - $n::bigint * $stride + 1")
	fbase=$(q -d "$db" -c "SELECT setval('wf.fence_seq', nextval('wf.fence_seq') + $n::bigint * $stride) - $n::bigint * $stride + 1")
	# copy k finishes 20 ms after copy k-1: 240,000 runs over 80 minutes
	python3 "$BENCH_DIR/flat_history_copy.py" "$db" flat "$n" "$tbase" "$stride" "$fbase" "$stride" 20000
	bad=$(q -d "$db" -c "SELECT count(*) FILTER (WHERE NOT wf.verify_run(run_id)) || ' of ' || count(*)
		FROM (SELECT run_id FROM wf.runs WHERE definition_name = 'flat' AND status = 'completed' AND created_at < '$tstart' ORDER BY random() LIMIT 200) s")
	echo "   wf.verify_run on random copies: $bad fail"
	if [[ $bad != 0\ of\ 200 ]]; then
		echo "flat_history: copies that do not verify" >&2
		exit 1
	fi
	q -d "$db" -c "WITH tpl AS (SELECT run_id, true AS tpl FROM wf.runs WHERE definition_name = 'flat' AND created_at >= '$tstart'),
			cp AS (SELECT run_id, false AS tpl FROM wf.runs WHERE definition_name = 'flat' AND created_at < '$tstart' ORDER BY random() LIMIT 1000),
			s AS (SELECT * FROM tpl UNION ALL SELECT * FROM cp),
			r AS (SELECT 'runs' AS t, s.tpl, s.run_id, pg_column_size(x.*) AS b FROM s JOIN wf.runs x USING (run_id)
				UNION ALL SELECT 'events', s.tpl, s.run_id, pg_column_size(x.*) FROM s JOIN wf.events x USING (run_id)
				UNION ALL SELECT 'tasks', s.tpl, s.run_id, pg_column_size(x.*) FROM s JOIN wf.tasks x USING (run_id))
		SELECT '   ' || t || ' per finished run, template: ' || round(count(*) FILTER (WHERE tpl)::numeric / count(DISTINCT run_id) FILTER (WHERE tpl), 2)
			|| ' rows of ' || round(avg(b) FILTER (WHERE tpl), 1) || ' B; copies: '
			|| round(count(*) FILTER (WHERE NOT tpl)::numeric / count(DISTINCT run_id) FILTER (WHERE NOT tpl), 2)
			|| ' rows of ' || round(avg(b) FILTER (WHERE NOT tpl), 1) || ' B'
		FROM r GROUP BY t ORDER BY t"
}

setup() {
	local db=$1 parked=$2 finished=$3 t0=$SECONDS bg=
	q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
	q -d "$db" -c "CREATE EXTENSION wfengine" >/dev/null
	q -d "$db" -c "SELECT wf.publish_definition('flat', jsonb_build_object('steps',
		(SELECT jsonb_agg(jsonb_build_object('name', 's' || g, 'queue', 'flat')) FROM generate_series(1, 20) g)))" >/dev/null
	q -d "$db" -c "SELECT wf.publish_definition('parked', '{\"steps\": [{\"name\": \"wait\", \"type\": \"sleep\", \"duration\": \"7d\"}, {\"name\": \"after\", \"queue\": \"later\"}]}')" >/dev/null
	if ((parked > 0)); then
		# alongside the finished runs: they share no row
		start_parked "$db" "$parked" &
		bg=$!
	fi
	if ((finished > 0)); then
		local t1=$SECONDS
		finish_template "$db" "$TEMPLATE"
		echo "   $db: $TEMPLATE template runs finished by the engine in $((SECONDS - t1)) s"
		t1=$SECONDS
		copy_finished "$db" "$finished"
		echo "   $db: $finished finished runs copied in $((SECONDS - t1)) s"
	fi
	if [[ -n $bg ]]; then wait "$bg"; fi
	q -d "$db" -c "SELECT count(wf.start_run('flat', jsonb_build_object('n', g))) FROM generate_series(1, $SUPPLY) g" >/dev/null
	q -d "$db" -c "VACUUM ANALYZE" -c "CHECKPOINT"
	echo "   $db: set up in $((SECONDS - t0)) s (with the work's $SUPPLY runs and VACUUM ANALYZE)"
}

# completed_since DB T: steps completed since time T, from their
# task_completed events (a completed attempt leaves wf.tasks since 0.3.0),
# through events_completed_at_idx, so the rest of the history is neither
# counted nor scanned; the copies' events are all older than T
completed_since() { q -d "$1" -c "SELECT count(*) FROM wf.events WHERE type = 'task_completed' AND created_at >= '$2'"; }

run_round() {
	local db=$1 secs=$2 t0
	t0=$(q -d "$db" -c "SELECT clock_timestamp()")
	pgbench -n -c "$CLIENTS" -j "$THREADS" -T "$secs" -f "$step_script" "$db" >/dev/null 2>&1
	echo $(($(completed_since "$db" "$t0") / secs))
}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
loadavg() { cut -d' ' -f1 /proc/loadavg; }

# hold_snapshot DB SECS: a session of DB that holds a REPEATABLE READ
# snapshot for at most SECS s (release_snapshots ends it); returns once the
# snapshot is taken
hold_snapshot() {
	PGAPPNAME=flat_history_holder psql -X -q -d "$1" -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
		-c "SELECT 1 FROM wf.runs LIMIT 1" -c "SELECT pg_sleep($2)" -c "COMMIT" >/dev/null 2>&1 &
	until [[ $(q -d "$1" -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'flat_history_holder' AND datname = current_database() AND backend_xmin IS NOT NULL") -gt 0 ]]; do
		sleep 0.2
	done
}
release_snapshots() {
	q -d postgres -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'flat_history_holder'" >/dev/null
	wait
}

# phase LABEL: ROUNDS rounds alternating empty / full; prints each round,
# the medians, their ratio and the median of the rounds' ratios
phase() {
	local label=$1 r e f l0 l1 me mf empty=() full=() ratios=()
	echo "== $label: $ROUNDS rounds of ${SECONDS_PER} s a side, $CLIENTS clients, claim + complete (2 xacts per step), alternating"
	for ((r = 1; r <= ROUNDS; r++)); do
		l0=$(loadavg)
		e=$(run_round wf_flat_empty "$SECONDS_PER")
		f=$(run_round wf_flat_full "$SECONDS_PER")
		l1=$(loadavg)
		empty+=("$e") full+=("$f") ratios+=("$(echo "scale=3; $f / $e" | bc)")
		echo "   round $r: empty $e steps/s, full $f steps/s, full / empty $(echo "scale=2; $f / $e" | bc) (load average $l0 before, $l1 after)"
	done
	me=$(printf '%s\n' "${empty[@]}" | median)
	mf=$(printf '%s\n' "${full[@]}" | median)
	echo "   median: empty $me, full $mf steps/s; full / empty = $(echo "scale=2; $mf / $me" | bc); median of the rounds' ratios $(printf '%s\n' "${ratios[@]}" | median)"
}

echo "== setting up: wf_flat_empty, and wf_flat_full with $PARKED parked and $FINISHED finished runs (load average $(loadavg))"
if [[ -n ${FLAT_REUSE:-} ]]; then
	echo "   FLAT_REUSE: the databases of an earlier FLAT_KEEP run, as they are"
else
	setup wf_flat_empty 0 0
	setup wf_flat_full "$PARKED" "$FINISHED"
fi
for db in wf_flat_empty wf_flat_full; do
	q -d "$db" -c "SELECT '   $db: ' || (SELECT count(*) FROM wf.runs) || ' runs (' || (SELECT count(*) FROM wf.runs WHERE status = 'completed') || ' finished), '
		|| (SELECT count(*) FROM wf.events) || ' events, ' || (SELECT count(*) FROM wf.tasks) || ' task rows, '
		|| (SELECT count(*) FROM wf.timers WHERE status = 'pending') || ' pending timers; ' || pg_size_pretty(pg_database_size(current_database()))
		|| ' (wf.events ' || pg_size_pretty(pg_total_relation_size('wf.events')) || ', wf.tasks ' || pg_size_pretty(pg_total_relation_size('wf.tasks'))
		|| ', wf.runs ' || pg_size_pretty(pg_total_relation_size('wf.runs')) || ', wf.timers ' || pg_size_pretty(pg_total_relation_size('wf.timers')) || ')'"
done

phase "no snapshot held"
if ((HELD)); then
	hold_snapshot wf_flat_empty $((4 * ROUNDS * SECONDS_PER + 600))
	hold_snapshot wf_flat_full $((4 * ROUNDS * SECONDS_PER + 600))
	phase "a REPEATABLE READ snapshot held in each database through all its rounds"
	release_snapshots
fi

# windows DB SECS: steps/s of DB in each 10 s window
windows() {
	local db=$1 secs=$2 c0 c1 w t0
	t0=$(q -d "$db" -c "SELECT clock_timestamp()")
	c0=0
	for ((w = 10; w <= secs; w += 10)); do
		sleep 10
		c1=$(completed_since "$db" "$t0")
		printf ' %d' $(((c1 - c0) / 10))
		c0=$c1
	done
	echo
}

# claim_profile DB: what one claim and one completion read, in buffers
# (EXPLAIN (ANALYZE, BUFFERS) counts every buffer the call touches, inside
# the engine's own statements too), after 20 warm-up steps in the session:
# independent of the machine's load, unlike the rates above
claim_profile() {
	local db=$1 out
	out=$({ for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		echo "SELECT wf.complete_task(task_id, fence, '{\"ok\": true}') FROM wf.claim_tasks('flat', 'probe', 1);"
	done
	for i in 1 2 3 4 5; do
		echo "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT task_id, fence FROM wf.claim_tasks('flat', 'probe', 1);"
		echo "SELECT task_id AS pt, fence AS pf FROM wf.tasks WHERE worker = 'probe' AND status = 'leased' ORDER BY task_id DESC LIMIT 1 \\gset"
		echo "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT wf.complete_task(:pt, :pf, '{\"ok\": true}');"
	done; } | q -d "$db" 2>&1 | grep -E '^ *Buffers:' | sed -E 's/^ *Buffers: //' | paste -sd'|' -)
	echo "   $db: claim | complete buffers, 5 pairs: $out"
}
echo "== buffers of one claim and one completion (after the rounds)"
claim_profile wf_flat_empty
claim_profile wf_flat_full
echo "   wf.tasks of wf_flat_full: $(q -d wf_flat_full -c "SELECT n_live_tup || ' live, ' || n_dead_tup || ' dead, autovacuums ' || autovacuum_count || ', size ' || pg_size_pretty(pg_total_relation_size('wf.tasks')) FROM pg_stat_user_tables WHERE relid = 'wf.tasks'::regclass")"

if ((SNAPSHOT_SECONDS > 0)); then
	echo "== ${SNAPSHOT_SECONDS} s in 10 s windows (steps/s), wf_flat_empty"
	pgbench -n -c "$CLIENTS" -j "$THREADS" -T "$SNAPSHOT_SECONDS" -f "$step_script" wf_flat_empty >/dev/null 2>&1 &
	bg=$!
	printf '   without a held snapshot:'
	windows wf_flat_empty "$SNAPSHOT_SECONDS"
	wait "$bg" || true
	hold_snapshot wf_flat_empty $((SNAPSHOT_SECONDS + 15))
	pgbench -n -c "$CLIENTS" -j "$THREADS" -T "$SNAPSHOT_SECONDS" -f "$step_script" wf_flat_empty >/dev/null 2>&1 &
	bg=$!
	printf '   with a REPEATABLE READ snapshot held: '
	windows wf_flat_empty "$SNAPSHOT_SECONDS"
	wait "$bg" || true
	release_snapshots
fi
if [[ -z ${FLAT_KEEP:-} ]]; then
	q -d postgres -c "DROP DATABASE wf_flat_empty" -c "DROP DATABASE wf_flat_full" 2>/dev/null || true
fi
