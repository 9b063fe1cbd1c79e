#!/usr/bin/env bash
# bench/run.sh — what `make bench` runs: pgbench, the engine against the same
# writes hand-written as plain SQL.  A measurement, never a test: it prints a
# table and writes bench/results/<stamp>/, it asserts nothing about speed.
#
# A "cycle" is one claim plus one accepted completion of a task attempt.
# Cases (each at 1 and at 8 clients, each on a fresh copy of one template
# database, so engine and SQL start from identical rows):
#
#   cycle-1     1-step runs: claim (1 transaction), complete (1 transaction);
#               every completion finishes its run
#   cycle-20    20-step runs on one queue: the same two transactions; 19 of 20
#               completions schedule the next step
#   onecall-1   1-step runs, claim and complete in one statement and one
#               transaction (see engine_onecall.sql)
#   eager-20    20-step runs, one call and one transaction per step:
#               wf.complete_and_claim hands the worker its next lease
#               (engine_eager.sql; engine only, not in the default cases)
#   batch10-20  20-step runs, a claim of 10 and one wf.complete_tasks of
#               the 10: two transactions per 10 steps (engine_batch10.sql;
#               engine only, not in the default cases)
#   eagerbatch10-20  20-step runs, one wf.complete_tasks_and_claim per 10
#               steps: one transaction (engine_eagerbatch10.sql; engine
#               only, not in the default cases)
#
#   engine      bench/engine_*.sql, through wf.claim_tasks/wf.complete_task
#   sql         bench/raw_*.sql, the same rows written by hand-written
#               statements into schema bench_raw (same table shapes, indexes
#               and triggers; no hashing, no validation)
#
# The supply of work is pre-started (wf.start_run) in the template, so a case
# measures claim and complete only.  Cycles are counted from the completed
# task rows afterwards, not from pgbench's transaction count (a pgbench
# transaction whose claim came back empty is not a cycle).
#
# Server: with PGHOST or PGPORT set, the server they point to is used (e.g.
# inside pg_virtualenv; needs wfengine installed, CREATEDB, and superuser for
# CHECKPOINT).  Otherwise the script re-runs itself inside a throw-away
# pg_virtualenv cluster (wfengine, pg_cron, pg_stat_statements preloaded,
# shared_buffers=1GB, max_wal_size=4GB, default durability: pg_virtualenv
# turns fsync off unless told otherwise, so fsync=on is passed explicitly).
# Works as root and as a normal user.
#
# Environment knobs:
#   BENCH_DURATION   seconds per pgbench case (default 20)
#   BENCH_CLIENTS    client counts (default "1 8"; -j is min(clients, 2))
#   BENCH_CASES      cases to run (default "cycle-1 cycle-20 onecall-1")
#   BENCH_MAX_RATE   cycles/s the pre-started supply is sized for (default 6000)
#   BENCH_ATTRIBUTE  1 (default) = afterwards, short runs with
#                    pg_stat_statements.track=all to attribute the time per
#                    statement, when pg_stat_statements is preloaded; 0 = skip
#   BENCH_ATTRIBUTE_SECONDS  seconds per attribution run (default 5)
#   BENCH_DB         prefix of the databases created and dropped (default wfbench)
#   BENCH_RESULTS    results directory (default bench/results)
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$BENCH_DIR/common.sh"
ROOT=$(dirname "$BENCH_DIR")
PG_BINDIR=/usr/lib/postgresql/$PG_MAJOR/bin
export PATH=$PG_BINDIR:$PATH
PG_CONFIG=${PG_CONFIG:-$PG_BINDIR/pg_config}

DURATION=${BENCH_DURATION:-20}
CLIENTS=${BENCH_CLIENTS:-"1 8"}
CASES=${BENCH_CASES:-"cycle-1 cycle-20 onecall-1"}
MAX_RATE=${BENCH_MAX_RATE:-6000}
ATTRIBUTE=${BENCH_ATTRIBUTE:-1}
DB=${BENCH_DB:-wfbench}
RESULTS_BASE=${BENCH_RESULTS:-$BENCH_DIR/results}

# ---------------------------------------------------------------------------
# No server given: start a throw-away one and run again inside it.
# ---------------------------------------------------------------------------
# pg_stat_statements, when installed, for the per-statement attribution
BENCH_EXTRA_OPTS=()
if [[ -e $("$PG_CONFIG" --pkglibdir)/pg_stat_statements.so ]]; then
	BENCH_PRELOAD=pg_stat_statements
	BENCH_EXTRA_OPTS=(-o "pg_stat_statements.track=none")
fi
bench_in_virtualenv bench "${BASH_SOURCE[0]}" "$@"

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
TPL=${DB}_tpl
CASEDB=${DB}_case

qdb() {
	local db=$1
	shift
	psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"
}
log() { printf '\n==> %s\n' "$*"; }

cleanup() {
	psql -X -q -d "$MAINDB" -c "DROP DATABASE IF EXISTS $CASEDB" >/dev/null 2>&1 || true
	psql -X -q -d "$MAINDB" -c "DROP DATABASE IF EXISTS $TPL" >/dev/null 2>&1 || true
}

# cores, to turn busy ticks (common.sh) into a share of the machine
NPROC=$(nproc 2>/dev/null || echo 1)

# ---------------------------------------------------------------------------
# Preconditions
# ---------------------------------------------------------------------------
if ! q -c "SELECT 1" >/dev/null; then
	echo "bench: cannot connect to the server (PGHOST=${PGHOST:-} PGPORT=${PGPORT:-})" >&2
	exit 1
fi
server_major=$(q -c "SELECT current_setting('server_version_num')::int / 10000")
if [[ $server_major != "$PG_MAJOR" ]]; then
	echo "bench: server is PostgreSQL $server_major, expected $PG_MAJOR" >&2
	exit 1
fi
if [[ $(q -c "SELECT count(*) FROM pg_available_extensions WHERE name = 'wfengine'") != 1 ]]; then
	echo "bench: extension wfengine is not installed on this server; run 'make install' first" >&2
	exit 1
fi
if [[ $(q -c "SELECT rolsuper FROM pg_roles WHERE rolname = current_user") != t ]]; then
	echo "bench: needs a superuser (CREATE DATABASE, CHECKPOINT, pg_stat_statements)" >&2
	exit 1
fi

stamp=$(date -u +%Y%m%d-%H%M%S)
RES=$RESULTS_BASE/$stamp
mkdir -p "$RES"
ln -sfn "$stamp" "$RESULTS_BASE/latest"
trap cleanup EXIT

# Which build is measured: the installed library, compared with the tree's.
installed_so=$("$PG_CONFIG" --pkglibdir)/wfengine.so
so_note="installed $installed_so"
if [[ -r $installed_so ]]; then
	so_note="$so_note (md5 $(md5sum <"$installed_so" | cut -c1-12), $(date -u -r "$installed_so" '+%Y-%m-%d %H:%M:%S UTC'))"
	if [[ -r $ROOT/wfengine.so ]] && ! cmp -s "$installed_so" "$ROOT/wfengine.so"; then
		echo "bench: warning: the installed wfengine.so differs from $ROOT/wfengine.so (run 'make install' to measure the tree)" >&2
		so_note="$so_note; differs from the tree's wfengine.so"
	fi
fi

# ---------------------------------------------------------------------------
# The machine and the settings
# ---------------------------------------------------------------------------
{
	echo "date:        $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "git:         $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet -- src sql 2>/dev/null || echo ' (src/sql modified)')"
	echo "nproc:       $(nproc)"
	echo "cpu:         $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*:[[:space:]]*//')"
	echo "ram:         $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
	echo "kernel:      $(uname -r)"
	echo "server:      $(q -c 'SELECT version()')"
	echo "wfengine:    $so_note"
	echo "pgbench:     $(pgbench --version)"
	q -F ': ' -c "SELECT rpad(name, 30), setting || coalesce(' ' || unit, '')
	              FROM pg_settings
	              WHERE name IN ('shared_buffers', 'fsync', 'synchronous_commit',
	                             'wal_sync_method', 'full_page_writes', 'wal_level',
	                             'max_wal_size', 'checkpoint_timeout', 'wal_buffers',
	                             'commit_delay', 'work_mem', 'jit',
	                             'shared_preload_libraries', 'max_connections')
	              ORDER BY name"
	echo "cases:       $CASES; clients $CLIENTS; ${DURATION}s each; pgbench -M prepared"
} >"$RES/machine.txt"
log "machine"
cat "$RES/machine.txt"

# ---------------------------------------------------------------------------
# Template: the supply of work, for the engine and copied for bench_raw
# ---------------------------------------------------------------------------
runs1=$((MAX_RATE * DURATION))
runs20=$((MAX_RATE * DURATION / 20 + 1))
log "template $TPL: $runs1 1-step runs, $runs20 20-step runs (supply for $MAX_RATE cycles/s over ${DURATION}s)"
t0=$(date +%s)
q -c "DROP DATABASE IF EXISTS $CASEDB" -c "DROP DATABASE IF EXISTS $TPL" -c "CREATE DATABASE $TPL"
qdb "$TPL" -v runs1="$runs1" -v runs20="$runs20" -f "$BENCH_DIR/setup.sql" >"$RES/setup.log"
qdb "$TPL" -c "VACUUM (FREEZE, ANALYZE)"
echo "built in $(($(date +%s) - t0))s"

# ---------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------
SUMMARY=$RES/summary.tsv
printf 'case\timpl\tclients\tcycles_per_s\tcycles\tpgbench_tps\tpgbench_xacts\tlatency_ms\tcpu_us_per_cycle\twal_bytes_per_cycle\tmean_step\tleft_ready\tbusy_before_pct\tnote\n' >"$SUMMARY"
failures=0

# run_case CASE IMPL CLIENTS
run_case() {
	local kase=$1 impl=$2 clients=$3
	local queue nsteps script schema threads name out
	case $kase in
	cycle-1) queue=q1 nsteps=1 script=cycle ;;
	cycle-20) queue=q20 nsteps=20 script=cycle ;;
	onecall-1) queue=q1 nsteps=1 script=onecall ;;
	eager-20) queue=q20 nsteps=20 script=eager ;;
	batch10-20) queue=q20 nsteps=20 script=batch10 ;;
	eagerbatch10-20) queue=q20 nsteps=20 script=eagerbatch10 ;;
	*)
		echo "bench: unknown case $kase" >&2
		return 1
		;;
	esac
	if [[ $impl == engine ]]; then schema=wf; else schema=bench_raw; fi
	threads=$((clients < 2 ? clients : 2))
	name=$kase.$impl.c$clients
	out=$RES/$name.log

	q -c "DROP DATABASE IF EXISTS $CASEDB" -c "CREATE DATABASE $CASEDB TEMPLATE $TPL STRATEGY FILE_COPY"
	q -c "CHECKPOINT"

	local rc=0 cpu0 cpu1 wal0 wal1 bg
	# what else is running: busy share of all CPUs over half a second
	cpu0=$(cpu_busy_ticks)
	sleep 0.5
	cpu1=$(cpu_busy_ticks)
	bg=$(awk -v b="$((cpu1 - cpu0))" -v hz="$CLK_TCK" -v n="$NPROC" 'BEGIN { printf "%.0f", 100 * b / (0.5 * hz * n) }')
	wal0=$(q -c "SELECT wal_bytes FROM pg_stat_wal")
	cpu0=$(cpu_busy_ticks)
	pgbench -n -r -M prepared -c "$clients" -j "$threads" -T "$DURATION" \
		-D queue="$queue" -D nsteps="$nsteps" -D task_id=0 -D fence=0 -D ids={} -D fences={} \
		-f "$BENCH_DIR/${impl/sql/raw}_$script.sql" "$CASEDB" >"$out" 2>&1 || rc=$?
	cpu1=$(cpu_busy_ticks)

	local xacts tps lat cycles mean_step left note=""
	xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$out")
	lat=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$out")
	# the engine's completed attempts are counted from their task_completed
	# events (a completed attempt leaves wf.tasks since 0.3.0); the raw
	# implementation keeps its completed rows
	if [[ $schema == wf ]]; then
		read -r cycles mean_step left < <(qdb "$CASEDB" -F ' ' -c "
			SELECT count(*), coalesce(round(avg(substr(step, 2)::int), 1), 0),
			       (SELECT count(*) FROM wf.tasks WHERE status = 'ready' AND queue = '$queue')
			FROM wf.events WHERE type = 'task_completed'")
	else
		read -r cycles mean_step left < <(qdb "$CASEDB" -F ' ' -c "
			SELECT count(*) FILTER (WHERE status = 'completed'),
			       coalesce(round(avg(substr(step, 2)::int) FILTER (WHERE status = 'completed'), 1), 0),
			       count(*) FILTER (WHERE status = 'ready' AND queue = '$queue')
			FROM $schema.tasks")
	fi
	sleep 0.5 # the backends of pgbench report their WAL statistics as they exit
	wal1=$(q -c "SELECT wal_bytes FROM pg_stat_wal")
	local rate=0 cpu_us="" wal_b=""
	if [[ $rc != 0 || -z $xacts || -z $tps ]]; then
		note="pgbench failed (exit $rc), see $name.log"
		failures=$((failures + 1))
	elif [[ $xacts == 0 ]]; then
		note="no transactions"
		failures=$((failures + 1))
	else
		# elapsed = xacts / tps (pgbench's own clock, connection time excluded)
		rate=$(awk -v c="$cycles" -v x="$xacts" -v t="$tps" 'BEGIN { printf "%.0f", c * t / x }')
		if ((cycles > 0)); then
			cpu_us=$(awk -v b="$((cpu1 - cpu0))" -v hz="$CLK_TCK" -v c="$cycles" 'BEGIN { printf "%.0f", b * 1e6 / hz / c }')
			wal_b=$(awk -v w0="$wal0" -v w1="$wal1" -v c="$cycles" 'BEGIN { printf "%.0f", (w1 - w0) / c }')
		fi
		if [[ $left == 0 ]]; then note="supply ran out: raise BENCH_MAX_RATE"; fi
		if ((bg > 15)); then note="${note:+$note; }machine ${bg}% busy before the case"; fi
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$kase" "$impl" "$clients" "$rate" \
		"$cycles" "${tps%.*}" "${xacts:-0}" "${lat:-}" "$cpu_us" "$wal_b" "$mean_step" "$left" "$bg" "$note" >>"$SUMMARY"
	printf '  %-10s %-6s c=%-2s %6s cycles/s  (%s cycles, pgbench %s tps, %s ms/xact, %s us CPU, %s B WAL per cycle)%s\n' \
		"$kase" "$impl" "$clients" "$rate" "$cycles" "${tps%.*}" "${lat:-?}" "${cpu_us:-?}" "${wal_b:-?}" "${note:+  [$note]}"
}

log "cases (${DURATION}s each)"
for kase in $CASES; do
	for clients in $CLIENTS; do
		for impl in engine sql; do
			# the eager and batch cases have no hand-written equivalent
			case $kase/$impl in eager-*/sql | batch10-*/sql | eagerbatch10-*/sql) continue ;; esac
			run_case "$kase" "$impl" "$clients"
		done
	done
done

# ---------------------------------------------------------------------------
# Table: engine vs hand-written SQL
# ---------------------------------------------------------------------------
{
	echo "| case | clients | engine cycles/s | SQL cycles/s | engine / SQL | CPU µs/cycle engine / SQL | WAL B/cycle engine / SQL |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	awk -F '\t' '
		NR > 1 {
			k = $1 "\t" $3
			r[k "\t" $2] = $4; cpu[k "\t" $2] = $9; wal[k "\t" $2] = $10
			if (!seen[k]++) order[n++] = k
		}
		END {
			for (i = 0; i < n; i++) {
				split(order[i], f, "\t")
				e = r[order[i] "\tengine"]; s = r[order[i] "\tsql"]
				ratio = (s > 0) ? sprintf("%.0f%%", 100 * e / s) : "-"
				printf "| %s | %s | %s | %s | %s | %s / %s | %s / %s |\n", f[1], f[2], e, s, ratio,
					cpu[order[i] "\tengine"], cpu[order[i] "\tsql"],
					wal[order[i] "\tengine"], wal[order[i] "\tsql"]
			}
		}' "$SUMMARY"
} >"$RES/summary.md"
log "results (cycles per second; a cycle = claim + accepted completion)"
cat "$RES/summary.md"

# ---------------------------------------------------------------------------
# Attribution: where the time goes, per statement (pg_stat_statements with
# track=all also records the statements the engine runs through SPI; "plans"
# equal to "calls" means the statement is planned again on every call)
# ---------------------------------------------------------------------------
ATTR_SECONDS=${BENCH_ATTRIBUTE_SECONDS:-5}
if [[ $ATTRIBUTE == 1 ]] && q -c "SHOW shared_preload_libraries" | grep -q pg_stat_statements; then
	log "attribution: pg_stat_statements (track=all, track_planning=on), 1 client, ${ATTR_SECONDS}s each"
	for kase in cycle-20 cycle-1; do
		if [[ $kase == cycle-20 ]]; then queue=q20 nsteps=20; else queue=q1 nsteps=1; fi
		for impl in engine sql; do
			q -c "DROP DATABASE IF EXISTS $CASEDB" -c "CREATE DATABASE $CASEDB TEMPLATE $TPL STRATEGY FILE_COPY"
			qdb "$CASEDB" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" \
				-c "SELECT pg_stat_statements_reset()" >/dev/null
			PGOPTIONS="-c pg_stat_statements.track=all -c pg_stat_statements.track_planning=on -c pg_stat_statements.track_utility=off" \
				pgbench -n -r -M prepared -c 1 -j 1 -T "$ATTR_SECONDS" -D queue=$queue -D nsteps=$nsteps \
				-f "$BENCH_DIR/${impl/sql/raw}_cycle.sql" "$CASEDB" >"$RES/attribution.$kase.$impl.log" 2>&1 || true
			{
				echo "## $kase, $impl: $(sed -n 's/^tps = \([0-9]*\).*/\1/p' "$RES/attribution.$kase.$impl.log") cycles/s with pg_stat_statements on"
				echo
				qdb "$CASEDB" -F ' | ' -c "
					SELECT '| ' || CASE WHEN toplevel THEN 'top' ELSE 'nested' END,
					       calls, plans,
					       round((mean_plan_time * 1000)::numeric, 1),
					       round((mean_exec_time * 1000)::numeric, 1),
					       round(shared_blks_hit::numeric / calls, 1),
					       regexp_replace(left(query, 90), '\s+', ' ', 'g') || ' |'
					FROM pg_stat_statements
					WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
					  AND query !~* 'pg_stat_statements' AND calls > 10
					ORDER BY toplevel DESC, total_exec_time + total_plan_time DESC" |
					sed '1i | level | calls | plans | plan µs | exec µs | buffers/call | statement |\n|---|---:|---:|---:|---:|---:|---|'
				echo
			} >>"$RES/attribution.md"
		done
	done
	cat "$RES/attribution.md"
fi

echo
echo "bench: results in $RES"
if ((failures > 0)); then
	echo "bench: $failures case(s) failed" >&2
	exit 1
fi
