#!/usr/bin/env bash
# bench/notify_throughput.sh — what the commit-time NOTIFYs cost: the
# engine's claim + complete cycle (pgbench, 8 clients) without and with a
# LISTENing subscriber.  A measurement, never a test: it prints a table and
# writes bench/results/notify-<stamp>/.
#
# A cycle is one claim transaction plus one completion transaction
# (bench/notify_cycle.sql).  Claims notify nothing; every completion does:
#
#   q20   20-step runs: 19 of 20 completions schedule the next step, so the
#         completion sends one queue notification (queue q20) and one run
#         notification (step_done) — the heaviest case;
#   q1    1-step runs: every completion finishes its run and sends one run
#         notification (completed).
#
# Subscribers:
#   none     nobody LISTENs.  PostgreSQL still writes every notification to
#            its queue, under a lock that serialises notifying commits.
#   listen   one psql session LISTENs on the channels of queues q20 and q1
#            and of runs (wf.channel(...))
#            and reads its notifications every 50 ms (psql prints them after
#            each statement); the number it received is reported.
#
# Each case runs on a fresh copy of one template database.
#
# The engine without NOTIFY: build a copy of the tree whose
# send_notifications() (src/notify.c) returns at once, start the server
# with that library in shared_preload_libraries (by its full path), and set
# BENCH_LIBRARY to the same path: the template's functions are then bound
# to it instead of $libdir/wfengine (two different copies of the library
# must never be loaded into one backend).  docs/notifications.md, "Cost",
# has the numbers.
#
# Server: with PGHOST or PGPORT set, that server is used (wfengine
# preloaded, superuser).  Otherwise a throw-away pg_virtualenv cluster with
# fsync=on, synchronous_commit=on.
#
# Environment knobs:
#   BENCH_DURATION  seconds per case (default 20)
#   BENCH_CLIENTS   pgbench clients (default 8; -j is min(clients, 2))
#   BENCH_QUEUES    "q20 q1" (default)
#   BENCH_SUBS      "none listen" (default)
#   BENCH_MAX_RATE  cycles/s the pre-started supply is sized for (default 3000)
#   BENCH_LIBRARY   full path of the wfengine library to bind the functions to
#   BENCH_DB        prefix of the databases created and dropped (default wfnotify)
#   BENCH_RESULTS   results directory (default bench/results)
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$BENCH_DIR/common.sh"
PG_BINDIR=/usr/lib/postgresql/$PG_MAJOR/bin
export PATH=$PG_BINDIR:$PATH

DURATION=${BENCH_DURATION:-20}
CLIENTS=${BENCH_CLIENTS:-8}
QUEUES=${BENCH_QUEUES:-"q20 q1"}
SUBS=${BENCH_SUBS:-"none listen"}
MAX_RATE=${BENCH_MAX_RATE:-3000}
LIBRARY=${BENCH_LIBRARY:-}
DB=${BENCH_DB:-wfnotify}
RESULTS_BASE=${BENCH_RESULTS:-$BENCH_DIR/results}

bench_in_virtualenv notify_throughput "${BASH_SOURCE[0]}" "$@"

TPL=${DB}_tpl
CASEDB=${DB}_case
qdb() {
	local db=$1
	shift
	psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"
}
LISTENER_PID=
cleanup() {
	if [[ -n $LISTENER_PID ]]; then kill "$LISTENER_PID" 2>/dev/null || true; fi
	psql -X -q -d "$MAINDB" -c "DROP DATABASE IF EXISTS $CASEDB" >/dev/null 2>&1 || true
	psql -X -q -d "$MAINDB" -c "DROP DATABASE IF EXISTS $TPL" >/dev/null 2>&1 || true
}

if [[ $(q -c "SELECT count(*) FROM pg_available_extensions WHERE name = 'wfengine'") != 1 ]]; then
	echo "notify_throughput: extension wfengine is not installed on this server" >&2
	exit 1
fi

stamp=$(date -u +%Y%m%d-%H%M%S)
RES=$RESULTS_BASE/notify-$stamp
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
	echo "library:   ${LIBRARY:-\$libdir/wfengine}"
	echo "cases:     queues $QUEUES; subscribers $SUBS; $CLIENTS clients; ${DURATION}s each"
} >"$RES/machine.txt"
cat "$RES/machine.txt"

# the supply of work, started once in a template
runs1=$((MAX_RATE * DURATION))
runs20=$((MAX_RATE * DURATION / 20 + 1))
echo "template: $runs1 1-step runs, $runs20 20-step runs"
q -c "DROP DATABASE IF EXISTS $CASEDB" -c "DROP DATABASE IF EXISTS $TPL" -c "CREATE DATABASE $TPL"
qdb "$TPL" -c "SET client_min_messages = warning" -c "CREATE EXTENSION wfengine" >/dev/null
if [[ -n $LIBRARY ]]; then
	qdb "$TPL" -v lib="$LIBRARY" >/dev/null <<'EOF'
UPDATE pg_catalog.pg_proc SET probin = :'lib' WHERE probin = '$libdir/wfengine';
EOF
fi
qdb "$TPL" >/dev/null <<EOF
SELECT wf.publish_definition('n1', '{"steps": [{"name": "s01", "queue": "q1"}]}');
SELECT wf.publish_definition('n20', jsonb_build_object('steps',
    (SELECT jsonb_agg(jsonb_build_object('name', format('s%s', lpad(i::text, 2, '0')), 'queue', 'q20')
                      ORDER BY i) FROM generate_series(1, 20) AS i)));
SELECT count(wf.start_run('n1', jsonb_build_object('n', i))) FROM generate_series(1, $runs1) AS i;
SELECT count(wf.start_run('n20', jsonb_build_object('n', i))) FROM generate_series(1, $runs20) AS i;
EOF
qdb "$TPL" -c "VACUUM (FREEZE, ANALYZE)"

SUMMARY=$RES/summary.tsv
printf 'queue\tsubscriber\tclients\tcycles_per_s\tcycles\tnotifications_received\n' >"$SUMMARY"

run_case() {
	local queue=$1 sub=$2
	local name=$queue.$sub
	q -c "DROP DATABASE IF EXISTS $CASEDB" -c "CREATE DATABASE $CASEDB TEMPLATE $TPL"
	q -c "CHECKPOINT"
	if [[ $sub == listen ]]; then
		# one statement every 50 ms: psql prints what arrived after each
		{
			# the channels of the tenant of this login (their names carry a tag)
			psql -X -q -At -d "$CASEDB" -c "SELECT format('LISTEN %I;', wf.channel('queue', q))
				FROM unnest(ARRAY['q20', 'q1']) q UNION ALL SELECT format('LISTEN %I;', wf.channel('runs'))"
			yes 'SELECT pg_sleep(0.05);' | head -n "$(((DURATION + 10) * 20))"
		} | psql -X -q -At -d "$CASEDB" >"$RES/$name.listener.log" 2>&1 &
		LISTENER_PID=$!
		sleep 1
	fi
	pgbench -n -M prepared -c "$CLIENTS" -j "$((CLIENTS < 2 ? CLIENTS : 2))" -T "$DURATION" \
		-D queue="$queue" -f "$BENCH_DIR/notify_cycle.sql" "$CASEDB" >"$RES/$name.log" 2>&1
	local received=-
	if [[ -n $LISTENER_PID ]]; then
		sleep 1
		kill "$LISTENER_PID" 2>/dev/null || true
		wait "$LISTENER_PID" 2>/dev/null || true
		LISTENER_PID=
		received=$(grep -c 'Asynchronous notification' "$RES/$name.listener.log" || true)
	fi
	local xacts tps cycles rate
	xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$RES/$name.log")
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$RES/$name.log")
	# completed attempts, from their task_completed events (a completed
	# attempt leaves wf.tasks since 0.3.0; the case's database has one queue)
	cycles=$(qdb "$CASEDB" -c "SELECT count(*) FROM wf.events WHERE type = 'task_completed'")
	rate=$(awk -v c="$cycles" -v x="$xacts" -v t="$tps" 'BEGIN { printf "%.0f", (x > 0) ? c * t / x : 0 }')
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$queue" "$sub" "$CLIENTS" "$rate" "$cycles" "$received" | tee -a "$SUMMARY"
}

printf 'queue\tsubscriber\tclients\tcycles_per_s\tcycles\tnotifications_received\n'
for queue in $QUEUES; do
	for sub in $SUBS; do
		run_case "$queue" "$sub"
	done
done

{
	echo "| queue | subscriber | clients | cycles/s | notifications received |"
	echo "|---|---|---:|---:|---:|"
	awk -F '\t' 'NR > 1 { printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $6 }' "$SUMMARY"
} >"$RES/summary.md"
echo
cat "$RES/summary.md"
echo "notify_throughput: results in $RES"
