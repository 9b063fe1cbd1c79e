#!/usr/bin/env bash
# bench/timer_lag.sh — timer lag and idle cost of the engine worker.
# A measurement, never a test: it prints numbers, it asserts nothing.
#
#  1. Pending backlog: BACKLOG runs (default 100000) each wait on a sleep
#     timer far in the future (a day), like runs waiting days for people.
#  2. Idle: with that backlog and nothing due, the per-database worker's CPU
#     time is read from /proc over IDLE_SECONDS (default 60).
#  3. Lag: DUE runs (default 2000) sleep until instants spread over the next
#     SPREAD seconds (default 30); when all have fired, the lag of each timer
#     (wf.timers.fired_at - fire_at) is reported as p50/p99/max.
#
# Server: with PGHOST/PGPORT set that server is used (wfengine must be
# preloaded and wfengine.enabled on); otherwise the script re-runs itself in
# a throw-away pg_virtualenv cluster with default durability.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$BENCH_DIR/common.sh"
export PATH=/usr/lib/postgresql/15/bin:$PATH
BACKLOG=${BACKLOG:-100000}
DUE=${DUE:-2000}
SPREAD=${SPREAD:-30}
IDLE_SECONDS=${IDLE_SECONDS:-60}

bench_in_virtualenv timer_lag "${BASH_SOURCE[0]}" "$@"

db=wf_timer_lag
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
export PGDATABASE=$db
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }

q -c "CREATE EXTENSION wfengine"
q -c "SELECT wf.publish_definition('lag', '{\"steps\": [{\"name\": \"nap\", \"type\": \"sleep\", \"until\": \"\$.input.at\"}, {\"name\": \"after\", \"queue\": \"lag_after\"}]}')" >/dev/null

echo "== starting $BACKLOG runs that wait a day"
t0=$(date +%s.%N)
q -c "SELECT count(wf.start_run('lag', jsonb_build_object('at', now() + interval '1 day' + i * interval '1 ms'))) FROM generate_series(1, $BACKLOG) i" >/dev/null
t1=$(date +%s.%N)
echo "   started in $(echo "$t1 - $t0" | bc) s; pending timers: $(q -c "SELECT count(*) FROM wf.timers WHERE status = 'pending'")"

# the worker of this database
pid=""
for _ in $(seq 1 100); do
	pid=$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'wfengine worker' AND datname = '$db'")
	[[ -n $pid ]] && break
	sleep 0.1
done
if [[ -z $pid ]]; then
	echo "no wfengine worker runs for $db: is wfengine preloaded and wfengine.enabled on?" >&2
	exit 1
fi
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

echo "== idle: $BACKLOG pending timers, none due, for $IDLE_SECONDS s (worker pid $pid)"
tick=$(getconf CLK_TCK)
c0=$(cpu "$pid")
sleep "$IDLE_SECONDS"
c1=$(cpu "$pid")
idle_ms=$(( (c1 - c0) * 1000 / tick ))
echo "   worker CPU time: ${idle_ms} ms in ${IDLE_SECONDS} s"

echo "== lag: $DUE runs sleeping until instants spread over ${SPREAD} s"
q -c "SELECT count(wf.start_run('lag', jsonb_build_object('at', now() + interval '2 s' + (i::float8 / $DUE) * $SPREAD * interval '1 s'))) FROM generate_series(1, $DUE) i" >/dev/null
c0=$(cpu "$pid")
deadline=$(( $(date +%s) + SPREAD + 60 ))
while :; do
	left=$(q -c "SELECT count(*) FROM wf.timers WHERE status = 'pending' AND fire_at < now() + interval '1 hour'")
	[[ $left == 0 ]] && break
	if (( $(date +%s) > deadline )); then
		echo "   $left timers still pending after the spread + 60 s" >&2
		break
	fi
	sleep 1
done
c1=$(cpu "$pid")
q -F ' ' -c "
SELECT 'fired', count(*),
       'p50_ms', round((percentile_cont(0.5) WITHIN GROUP (ORDER BY lag))::numeric, 1),
       'p99_ms', round((percentile_cont(0.99) WITHIN GROUP (ORDER BY lag))::numeric, 1),
       'max_ms', round(max(lag)::numeric, 1)
FROM (SELECT extract(epoch FROM fired_at - fire_at) * 1000 AS lag
      FROM wf.timers WHERE status = 'fired' AND kind = 'sleep') s"
echo "   worker CPU time while firing: $(( (c1 - c0) * 1000 / tick )) ms"
q -c "SELECT 'runs past their sleep: ' || count(*) FROM wf.tasks WHERE queue = 'lag_after'"
psql -X -q -d postgres -c "DROP DATABASE $db" 2>/dev/null || true
