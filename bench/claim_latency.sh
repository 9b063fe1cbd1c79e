#!/usr/bin/env bash
# bench/claim_latency.sh — enqueue-to-claim latency of wf.claim_tasks with
# wait => ... (the backend sleeps on a condition variable and is woken by
# the commit that makes a task claimable), against client-side polling.
# A measurement, never a test: it prints a table and writes
# bench/results/latency-<stamp>/.
#
# A producer (pgbench -R, Poisson arrivals at a fixed mean rate) starts
# one-step runs; each start commits one ready task on queue "latq".  N
# consumers (pgbench clients) loop: claim one task, complete it, claim
# again.  Consumers either
#
#   wait   call wf.claim_tasks(..., wait => '5 seconds'): an empty claim
#          sleeps in the server until a commit wakes it (or 5 s pass);
#   poll   call wf.claim_tasks(...) without a wait and sleep BENCH_POLL_MS
#          in the client when it comes back empty.
#
# "CPU" is the busy CPU time of the whole machine during the case divided
# by the tasks claimed (meaningful on a quiet machine only).
#
# Latency of a task = claimed_at - created_at from wf.tasks: from the
# moment wf.start_run() began (before the producer's commit and its WAL
# flush) to the moment the claim statement began that got it.  "Calls" is
# the number of claim calls the consumers made per task (pgbench counts one
# transaction per call).
#
# Server: with PGHOST or PGPORT set, that server is used (wfengine
# preloaded, superuser).  Otherwise the script re-runs itself inside a
# throw-away pg_virtualenv cluster with fsync=on, synchronous_commit=on.
#
# Environment knobs:
#   BENCH_RATES        producer rates in runs/s (default "20 200 1000")
#   BENCH_CONSUMERS    consumer clients (default 4)
#   BENCH_DURATION     seconds per case (default 20)
#   BENCH_WARMUP       seconds the producer runs first, whose tasks are left
#                      out of the figures (default 2): the first starts of a
#                      fresh database and backend prepare their statements and
#                      compile the definition; 0 counts every task
#   BENCH_MODES        "wait poll" (default)
#   BENCH_POLL_MS      client sleep of a polling consumer after an empty claim (default 100)
#   BENCH_DB           database created and dropped (default wflatency)
#   BENCH_RESULTS      results directory (default bench/results)
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$BENCH_DIR/common.sh"
PG_BINDIR=/usr/lib/postgresql/$PG_MAJOR/bin
export PATH=$PG_BINDIR:$PATH

RATES=${BENCH_RATES:-"20 200 1000"}
CONSUMERS=${BENCH_CONSUMERS:-4}
DURATION=${BENCH_DURATION:-20}
WARMUP=${BENCH_WARMUP:-2}
MODES=${BENCH_MODES:-"wait poll"}
POLL_MS=${BENCH_POLL_MS:-100}
DB=${BENCH_DB:-wflatency}
RESULTS_BASE=${BENCH_RESULTS:-$BENCH_DIR/results}

bench_in_virtualenv claim_latency "${BASH_SOURCE[0]}" "$@"

qdb() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" "$@"; }
cleanup() { psql -X -q -d "$MAINDB" -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true; }


if [[ $(q -c "SELECT count(*) FROM pg_available_extensions WHERE name = 'wfengine'") != 1 ]]; then
	echo "claim_latency: extension wfengine is not installed on this server" >&2
	exit 1
fi
if ! q -c "SHOW shared_preload_libraries" | grep -q wfengine; then
	echo "claim_latency: warning: wfengine is not preloaded; waits fall back to 100 ms latch steps" >&2
fi

stamp=$(date -u +%Y%m%d-%H%M%S)
RES=$RESULTS_BASE/latency-$stamp
mkdir -p "$RES"
trap cleanup EXIT

{
	echo "date:      $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "nproc:     $(nproc)"
	echo "cpu:       $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*:[[:space:]]*//')"
	echo "server:    $(q -c 'SELECT version()')"
	q -F ': ' -c "SELECT rpad(name, 24), setting FROM pg_settings
	              WHERE name IN ('fsync', 'synchronous_commit', 'shared_buffers',
	                             'shared_preload_libraries', 'wfengine.enabled')
	              ORDER BY name"
	echo "cases:     rates $RATES runs/s; $CONSUMERS consumers; ${DURATION}s each after a ${WARMUP}s warm-up; modes $MODES; poll ${POLL_MS} ms"
} >"$RES/machine.txt"
cat "$RES/machine.txt"

# the pgbench scripts
cat >"$RES/producer.sql" <<'EOF'
SELECT wf.start_run('lat', '{}');
EOF
cat >"$RES/consumer_wait.sql" <<'EOF'
SELECT coalesce(min(task_id), 0) AS task_id, coalesce(min(fence), 0) AS fence
  FROM wf.claim_tasks('latq', 'c' || :client_id, 1, '30 seconds', wait => '5 seconds') \gset
\if :task_id > 0
INSERT INTO bench_lat SELECT task_id, created_at, claimed_at FROM wf.tasks WHERE task_id = :task_id;
SELECT wf.complete_task(:task_id, :fence);
\endif
EOF
cat >"$RES/consumer_poll.sql" <<EOF
SELECT coalesce(min(task_id), 0) AS task_id, coalesce(min(fence), 0) AS fence
  FROM wf.claim_tasks('latq', 'c' || :client_id, 1, '30 seconds') \\gset
\\if :task_id > 0
INSERT INTO bench_lat SELECT task_id, created_at, claimed_at FROM wf.tasks WHERE task_id = :task_id;
SELECT wf.complete_task(:task_id, :fence);
\\else
\\sleep $POLL_MS ms
\\endif
EOF

SUMMARY=$RES/summary.tsv
printf 'mode\trate\tachieved\ttasks\tp50_ms\tp90_ms\tp99_ms\tmax_ms\tcalls_per_task\tleft\tcpu_us_per_task\n' >"$SUMMARY"

run_case() {
	local mode=$1 rate=$2
	local name=$mode.r$rate
	q -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
	qdb -c "SET client_min_messages = warning" -c "CREATE EXTENSION wfengine" \
		-c "SELECT wf.publish_definition('lat', '{\"steps\": [{\"name\": \"s\", \"queue\": \"latq\"}]}')" \
		-c "CREATE TABLE bench_lat (task_id bigint, created_at timestamptz, claimed_at timestamptz)" >/dev/null

	# consumers first (they run 2 s longer, so that they drain the queue)
	pgbench -n -M prepared -c "$CONSUMERS" -j "$((CONSUMERS < 2 ? CONSUMERS : 2))" -T "$((DURATION + 2))" \
		-f "$RES/consumer_$mode.sql" "$DB" >"$RES/$name.consumers.log" 2>&1 &
	local cpid=$! cpu0 cpu1 since
	sleep 1
	# the tasks counted: created from the end of the warm-up on
	since=$(qdb -c "SELECT clock_timestamp() + make_interval(secs => $WARMUP)")
	cpu0=$(cpu_busy_ticks)
	pgbench -n -M prepared -c 1 -j 1 -R "$rate" -T "$((DURATION + WARMUP))" \
		-f "$RES/producer.sql" "$DB" >"$RES/$name.producer.log" 2>&1
	wait "$cpid" || true
	cpu1=$(cpu_busy_ticks)
	# the five slowest tasks of the case, warm-up included, and when they were
	# created (seconds after the producer began)
	qdb -F $'\t' -c "
		SELECT round((extract(epoch FROM created_at) - extract(epoch FROM '$since'::timestamptz) + $WARMUP)::numeric, 3),
		       round((extract(epoch FROM claimed_at - created_at) * 1000)::numeric, 2)
		FROM bench_lat ORDER BY claimed_at - created_at DESC LIMIT 5" \
		>"$RES/$name.slowest.tsv"

	local calls achieved
	calls=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$RES/$name.consumers.log")
	achieved=$(sed -n 's/^tps = \([0-9]*\).*/\1/p' "$RES/$name.producer.log")
	qdb -F $'\t' -c "
		SELECT '$mode', $rate, ${achieved:-0}, count(*),
		       round((extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY claimed_at - created_at)) * 1000)::numeric, 2),
		       round((extract(epoch FROM percentile_cont(0.9) WITHIN GROUP (ORDER BY claimed_at - created_at)) * 1000)::numeric, 2),
		       round((extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY claimed_at - created_at)) * 1000)::numeric, 2),
		       round((extract(epoch FROM max(claimed_at - created_at)) * 1000)::numeric, 2),
		       round(${calls:-0}::numeric / greatest(all_claimed, 1), 2),
		       (SELECT count(*) FROM wf.tasks WHERE status = 'ready'),
		       round($((cpu1 - cpu0)) * 1e6 / $CLK_TCK / greatest(all_claimed, 1))
		FROM bench_lat,
		     (SELECT count(*) AS all_claimed FROM bench_lat) AS a
		WHERE created_at >= '$since'
		GROUP BY all_claimed" | tee -a "$SUMMARY"
}

echo
printf 'mode\trate\tachieved\ttasks\tp50_ms\tp90_ms\tp99_ms\tmax_ms\tcalls_per_task\tleft\tcpu_us_per_task\n'
for rate in $RATES; do
	for mode in $MODES; do
		run_case "$mode" "$rate"
	done
done

{
	echo "| consumers | target runs/s | achieved runs/s | tasks | p50 ms | p90 ms | p99 ms | max ms | claim calls per task | CPU µs per task |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	awk -F '\t' -v poll="$POLL_MS" 'NR > 1 {
		m = ($1 == "wait") ? "wait => 5 s" : "poll every " poll " ms"
		printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m, $2, $3, $4, $5, $6, $7, $8, $9, $11
	}' "$SUMMARY"
} >"$RES/summary.md"
echo
cat "$RES/summary.md"
echo "claim_latency: results in $RES"
