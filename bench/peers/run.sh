#!/usr/bin/env bash
# bench/peers/run.sh -- what `make bench-peers` runs: the engine side by side
# with the job queues a user would pick instead (graphile-worker, pg-boss,
# and pgmq and Absurd when their SQL is given) and a hand-written floor, in
# one throw-away cluster, one database per system, cells interleaved
# round-robin (A, B, C, A, B, C, ...) so that the noise of a shared machine
# hits every system alike; the ratios are taken per round.  A measurement,
# never a test: it asserts nothing about speed.
#
# The cells are listed in bench/peers/cells (one line each: database, how the
# rate is counted, set-up, script); the ratio lines in bench/peers/ratios.
# The scripts come from ../shared/perf (issue 13's measurement).
#
# Steps:
#   1. make + make install of the tree with PG_CONFIG (as root, or via sudo),
#      unless BENCH_PEERS_INSTALL=0;
#   2. npm ci of bench/peers/package.json (graphile-worker, pg-boss, pg, the
#      versions pinned there and in package-lock.json) into a throw-away
#      directory;
#   3. a throw-away cluster (bench/common.sh's bench_in_virtualenv, as
#      `make bench`: pg_virtualenv for the system PostgreSQL, initdb for a
#      PG_CONFIG elsewhere; or the server PGHOST/PGPORT name), with
#      synchronous_commit = on;
#   4. one database per system (<BENCH_PEERS_DB>_floor, _wf, _graphile,
#      _pgboss, _pgmq, _absurd), then ROUNDS rounds of every cell in order.
#
# Output in $OUT (default bench/results/peers-<stamp>/, latest-peers -> it):
#   cells.tsv    one line per cell and round
#   summary.txt  per-cell medians and the ratio lines (also printed)
#   raw.log      pgbench and driver output
#   machine.txt  the machine and the server settings
#
# Environment knobs:
#   BENCH_PEERS_SECONDS  seconds per cell (default 10; smoke 2)
#   BENCH_PEERS_ROUNDS   rounds (default 3; smoke 1)
#   BENCH_PEERS_CLIENTS  clients per cell (default 8; -j min(clients, 2))
#   BENCH_PEERS_CELLS    cells to run, in this order (default: the "default"
#                        lines of bench/peers/cells)
#   BENCH_PEERS_SMOKE    1 = 1 round of 2 s cells (proves the set-up works)
#   BENCH_PEERS_GW_JOBS  jobs graphile-worker drains per cell (default
#                        2,000 per second of BENCH_PEERS_SECONDS)
#   BENCH_PEERS_INSTALL  0 = do not build and install wfengine first
#   BENCH_PEERS_SETTLE   1 (default) = sync(1) before each cell, so that no
#                        cell pays for the write-back of the one before
#   BENCH_PEERS_HELD     SECONDS: the held-snapshot comparison instead of the
#                        rounds (see held_windows below); its cells are
#                        BENCH_PEERS_HELD_CELLS (default ceil_step_2call
#                        wf_step20 gw_perjob)
#   BENCH_PEERS_DB       database name prefix (default peers)
#   BENCH_PEERS_WAL      1 = also, per pgbench cell and round, the WAL
#                        (pg_stat_wal: records, full-page images, bytes) and
#                        the backends' wait events (pg_stat_activity, sampled
#                        every 0.1 s) per unit of work, in wal.tsv and at the
#                        end of the summary; cluster-wide, so autovacuum and
#                        checkpoints count alike for every system
#   PGMQ_SQL, ABSURD_SQL the SQL of pgmq (pgmq-extension/sql/pgmq.sql) and
#                        Absurd (sql/absurd.sql); not vendored; their cells
#                        are skipped without them
#   OUT                  results directory
set -euo pipefail

PEERS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_DIR=$(dirname "$PEERS_DIR")
ROOT=$(dirname "$BENCH_DIR")
# shellcheck source-path=SCRIPTDIR/.. source=../common.sh
source "$BENCH_DIR/common.sh"
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/$PG_MAJOR/bin/pg_config}
PG_BINDIR=$("$PG_CONFIG" --bindir)
export PATH=$PG_BINDIR:$PATH
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES

if [[ ${BENCH_PEERS_SMOKE:-0} == 1 ]]; then
	SECS=${BENCH_PEERS_SECONDS:-2} ROUNDS=${BENCH_PEERS_ROUNDS:-1}
else
	SECS=${BENCH_PEERS_SECONDS:-10} ROUNDS=${BENCH_PEERS_ROUNDS:-3}
fi
CLIENTS=${BENCH_PEERS_CLIENTS:-8}
THREADS=$((CLIENTS < 2 ? CLIENTS : 2))
GW_JOBS=${BENCH_PEERS_GW_JOBS:-$((2000 * SECS))}
DBP=${BENCH_PEERS_DB:-peers}

# ---------------------------------------------------------------------------
# Outside the cluster: build, install, npm; then run again inside it.
# ---------------------------------------------------------------------------
if [[ -z ${BENCH_PEERS_INNER:-} ]]; then
	stamp=$(date -u +%Y%m%d-%H%M%S)
	if [[ -z ${OUT:-} ]]; then
		OUT=$BENCH_DIR/results/peers-$stamp
		mkdir -p "$OUT"
		ln -sfn "peers-$stamp" "$BENCH_DIR/results/latest-peers"
	fi
	mkdir -p "$OUT"
	OUT=$(cd "$OUT" && pwd)
	export OUT
	if [[ ${BENCH_PEERS_INSTALL:-1} != 0 ]]; then
		echo "bench-peers: make && make install (PG_CONFIG=$PG_CONFIG)"
		make -C "$ROOT" --no-print-directory -j2 PG_CONFIG="$PG_CONFIG" >"$OUT/build.log" 2>&1 ||
			{ tail -20 "$OUT/build.log"; exit 1; }
		if ((EUID == 0)) || [[ -w $("$PG_CONFIG" --pkglibdir) ]]; then
			make -C "$ROOT" --no-print-directory PG_CONFIG="$PG_CONFIG" install >>"$OUT/build.log" 2>&1
		else
			sudo -- make -C "$ROOT" --no-print-directory PG_CONFIG="$PG_CONFIG" install >>"$OUT/build.log" 2>&1
		fi || { tail -20 "$OUT/build.log"; exit 1; }
	fi
	if ! command -v npm >/dev/null 2>&1; then
		echo "bench-peers: npm (Node.js) is needed for graphile-worker and pg-boss" >&2
		exit 1
	fi
	NODE_DIR=$(mktemp -d /tmp/bench-peers-npm.XXXXXX)
	chmod 755 "$NODE_DIR"
	cp "$PEERS_DIR/package.json" "$PEERS_DIR/package-lock.json" "$NODE_DIR/"
	echo "bench-peers: npm ci (graphile-worker, pg-boss, pg) into $NODE_DIR"
	(cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error) >"$OUT/npm.log" 2>&1 ||
		{ tail -20 "$OUT/npm.log"; rm -rf -- "$NODE_DIR"; exit 1; }
	export BENCH_PEERS_NODE_DIR=$NODE_DIR NODE_PATH=$NODE_DIR/node_modules BENCH_PEERS_INNER=1
	trap 'rm -rf -- "$NODE_DIR"' EXIT
	bench_in_virtualenv bench-peers "${BASH_SOURCE[0]}" "$@"
	# a server was given (PGHOST/PGPORT): run here
	trap - EXIT
fi
trap 'rm -rf -- "${BENCH_PEERS_NODE_DIR:-/nonexistent}"' EXIT

# ---------------------------------------------------------------------------
# Inside: the databases, the cells, the summary.
# ---------------------------------------------------------------------------
MAINDB=postgres
PSQL=(psql -X -q -At -v ON_ERROR_STOP=1)
q() { "${PSQL[@]}" -d "$MAINDB" "$@"; }
qdb() {
	local db=$1
	shift
	"${PSQL[@]}" -d "${DBP}_$db" "$@"
}
RAW=$OUT/raw.log
TSV=$OUT/cells.tsv
SUM=$OUT/summary.txt

if ! q -c "SELECT 1" >/dev/null; then
	echo "bench-peers: cannot connect to the server (PGHOST=${PGHOST:-} PGPORT=${PGPORT:-})" >&2
	exit 1
fi
if [[ $(q -c "SELECT rolsuper FROM pg_roles WHERE rolname = current_user") != t ]]; then
	echo "bench-peers: needs a superuser" >&2
	exit 1
fi
if [[ $(q -c "SELECT count(*) FROM pg_available_extensions WHERE name = 'wfengine'") != 1 ]]; then
	echo "bench-peers: extension wfengine is not installed on this server" >&2
	exit 1
fi
q -c "ALTER SYSTEM SET synchronous_commit = on" -c "SELECT pg_reload_conf()" >/dev/null

# Which databases can be set up
declare -A HAVE=([floor]=1 [wf]=1 [graphile]=1 [pgboss]=1)
SKIPPED=()
if [[ -n ${PGMQ_SQL:-} && -r ${PGMQ_SQL:-} ]]; then HAVE[pgmq]=1; else SKIPPED+=("pgmq (set PGMQ_SQL to pgmq-extension/sql/pgmq.sql)"); fi
if [[ -n ${ABSURD_SQL:-} && -r ${ABSURD_SQL:-} ]]; then HAVE[absurd]=1; else SKIPPED+=("absurd (set ABSURD_SQL to sql/absurd.sql)"); fi

# The cells: name run db rate per setup script options...
declare -A C_DB C_RATE C_PER C_SETUP C_SCRIPT C_OPTS C_RUN
ALL_CELLS=()
while read -r name run db rate per setup script opts; do
	[[ -z $name || $name == \#* ]] && continue
	ALL_CELLS+=("$name")
	C_RUN[$name]=$run C_DB[$name]=$db C_RATE[$name]=$rate C_PER[$name]=$per
	C_SETUP[$name]=$setup C_SCRIPT[$name]=$script C_OPTS[$name]=${opts:-}
done <"$PEERS_DIR/cells"
CELLS=()
if [[ -n ${BENCH_PEERS_CELLS:-} ]]; then
	for c in $BENCH_PEERS_CELLS; do
		if [[ -z ${C_DB[$c]:-} ]]; then
			echo "bench-peers: unknown cell $c (see bench/peers/cells)" >&2
			exit 1
		fi
		CELLS+=("$c")
	done
else
	for c in "${ALL_CELLS[@]}"; do [[ ${C_RUN[$c]} == default ]] && CELLS+=("$c"); done
fi
RUN_CELLS=() SKIPPED_CELLS=()
for c in "${CELLS[@]}"; do
	if [[ -n ${HAVE[${C_DB[$c]}]:-} ]]; then RUN_CELLS+=("$c"); else SKIPPED_CELLS+=("$c"); fi
done

# The machine and the settings
{
	echo "date:        $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "git:         $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- src sql bench 2>/dev/null || echo ' (modified)')"
	echo "nproc:       $(nproc)"
	echo "cpu:         $(grep -m1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*:[[:space:]]*//')"
	echo "load:        $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "server:      $(q -c 'SELECT version()')"
	echo "pgbench:     $(pgbench --version)"
	echo "node:        $(node --version); $(cd "${NODE_PATH:-.}/.." 2>/dev/null && for p in graphile-worker pg-boss pg; do printf '%s %s  ' "$p" "$(node -p "require('./node_modules/$p/package.json').version" 2>/dev/null)"; done)"
	q -F ': ' -c "SELECT rpad(name, 30), setting || coalesce(' ' || unit, '')
	              FROM pg_settings
	              WHERE name IN ('shared_buffers', 'fsync', 'synchronous_commit', 'wal_sync_method',
	                             'full_page_writes', 'wal_level', 'max_wal_size', 'autovacuum',
	                             'checkpoint_timeout', 'wal_buffers', 'commit_delay', 'jit',
	                             'shared_preload_libraries', 'max_connections', 'wfengine.enabled')
	              ORDER BY name"
	echo "cells:       ${RUN_CELLS[*]}"
	echo "             $ROUNDS rounds, ${SECS}s per cell, $CLIENTS clients (-j $THREADS), graphile-worker drains $GW_JOBS jobs"
	if ((${#SKIPPED[@]})); then echo "skipped:     ${SKIPPED[*]}"; fi
} >"$OUT/machine.txt"
cat "$OUT/machine.txt"

# The databases
cleanup_dbs() {
	local db
	for db in floor wf graphile pgboss pgmq absurd; do
		q -c "DROP DATABASE IF EXISTS ${DBP}_$db" >/dev/null 2>&1 || true
	done
}
trap 'cleanup_dbs; rm -rf -- "${BENCH_PEERS_NODE_DIR:-/nonexistent}"' EXIT
echo
echo "==> databases"
for db in "${!HAVE[@]}"; do
	q -c "DROP DATABASE IF EXISTS ${DBP}_$db" -c "CREATE DATABASE ${DBP}_$db"
done
qdb floor -f "$PEERS_DIR/floor/schema.sql" >/dev/null
if [[ -n ${HAVE[pgmq]:-} ]]; then
	qdb pgmq -c "SET client_min_messages = warning" -f "$PGMQ_SQL" -c "SELECT pgmq.create('bench')" >/dev/null
fi
if [[ -n ${HAVE[absurd]:-} ]]; then
	qdb absurd -c "SET client_min_messages = warning" -f "$ABSURD_SQL" -c "SELECT absurd.create_queue('bench')" >/dev/null
fi

# ---------------------------------------------------------------------------
# One cell: prints "rate<TAB>tps<TAB>xacts<TAB>seconds<TAB>note"
# ---------------------------------------------------------------------------
pgbench_stat() { sed -n "$1" <<<"$2"; }

run_cell() {
	local cell=$1 db=${C_DB[$1]} rate=${C_RATE[$1]} per=${C_PER[$1]} setup=${C_SETUP[$1]}
	local script=${C_SCRIPT[$1]} opts=${C_OPTS[$1]} file vars v out rc=0 tps xacts secs value note=""
	local -a psqlvars=()
	echo "=== $cell round $round $(date -u +%T)" >>"$RAW"
	if [[ $setup != - ]]; then
		file=${setup%%:*}
		psqlvars=(-v n1=0 -v n20=0 -v small=0 -v noav=0 -v freeze=0 -v taskff=0 -v runff=0)
		if [[ $setup == *:* ]]; then
			IFS=, read -r -a vars <<<"${setup#*:}"
			for v in "${vars[@]}"; do psqlvars+=(-v "$v"); done
		fi
		if ! qdb "$db" "${psqlvars[@]}" -f "$PEERS_DIR/$file" >>"$RAW" 2>&1; then
			printf 'NA\t\t\t\tset-up %s failed (raw.log)\n' "$file"
			return
		fi
	fi
	if [[ $db == wf ]]; then
		# a database with the extension has its engine worker (notification
		# relay, timers); wait for it as a production database would have it
		local i
		for i in $(seq 50); do
			[[ $(qdb wf -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'wfengine worker' AND datname = current_database()") -ge 1 ]] && break
			sleep 0.2
		done
		if [[ $(qdb wf -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'wfengine worker' AND datname = current_database()") -lt 1 ]]; then
			note="no engine worker"
		fi
	fi
	# every cell starts on a quiet disk: what the set-up and the cells
	# before it wrote is flushed first, not written back by the kernel
	# while this cell waits for its WAL flushes (BENCH_PEERS_SETTLE=0: not)
	if [[ ${BENCH_PEERS_SETTLE:-1} == 1 ]]; then sync; fi
	if [[ $rate == node ]]; then
		out=$(cd "$PEERS_DIR" && PGDATABASE="${DBP}_$db" node "${script%%:*}" "${script#*:}" "$GW_JOBS" "$CLIENTS" "$SECS" 2>&1) || rc=$?
		echo "$out" >>"$RAW"
		value=$(tail -1 <<<"$out" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{const j=JSON.parse(s);console.log(j.jobs_per_s+"\t"+j.seconds)}catch(e){console.log("NA\t")}})')
		if [[ $rc != 0 || $value == NA* ]]; then note="${note:+$note; }driver failed (exit $rc, raw.log)"; value="NA	"; fi
		printf '%s\t\t\t%s\t%s\n' "${value%%	*}" "${value#*	}" "$note"
		return
	fi
	local wal0="" sampler=""
	if [[ ${BENCH_PEERS_WAL:-0} == 1 ]]; then
		wal0=$(q -F ' ' -c "SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal")
		: >"$OUT/waits.tmp"
		(
			while :; do
				q -c "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') FROM pg_stat_activity
				      WHERE datname = '${DBP}_$db' AND backend_type = 'client backend' AND state = 'active'
				        AND pid <> pg_backend_pid()" >>"$OUT/waits.tmp" 2>/dev/null || true
				sleep 0.1
			done
		) &
		sampler=$!
	fi
	# shellcheck disable=SC2086 # opts are pgbench options, split on purpose
	out=$(pgbench -n $opts -c "$CLIENTS" -j "$THREADS" -T "$SECS" -f "$PEERS_DIR/$script" "${DBP}_$db" 2>&1) || rc=$?
	if [[ -n $sampler ]]; then
		kill "$sampler" 2>/dev/null || true
		wait "$sampler" 2>/dev/null || true
	fi
	echo "$out" >>"$RAW"
	xacts=$(pgbench_stat 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
	tps=$(pgbench_stat 's/^tps = \([0-9.]*\) .*/\1/p' "$out")
	if [[ $rc != 0 || -z $xacts || -z $tps || $xacts == 0 ]]; then
		printf 'NA\t%s\t%s\t\t%s\n' "$tps" "$xacts" "${note:+$note; }pgbench failed (exit $rc, raw.log)"
		return
	fi
	secs=$(awk -v x="$xacts" -v t="$tps" 'BEGIN { printf "%.2f", x / t }')
	case $rate in
	tps) value=$(awk -v t="$tps" -v p="$per" 'BEGIN { printf "%.1f", t * p }') ;;
	tasks)
		local done left
		# completed attempts from their task_completed events (a completed
		# attempt leaves wf.tasks since 0.3.0)
		read -r done left < <(qdb wf -F ' ' -c "SELECT (SELECT count(*) FROM wf.events WHERE type = 'task_completed'), count(*) FILTER (WHERE status = 'ready') FROM wf.tasks")
		echo "$cell completed=$done ready_left=$left" >>"$RAW"
		value=$(awk -v d="$done" -v s="$secs" 'BEGIN { printf "%.1f", d / s }')
		if [[ $left == 0 ]]; then note="${note:+$note; }supply ran out"; fi
		;;
	esac
	if [[ -n $wal0 ]]; then
		local wal1 units waits
		wal1=$(q -F ' ' -c "SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal")
		units=$(awk -v v="$value" -v s="$secs" 'BEGIN { printf "%.0f", v * s }')
		waits=$(sort "$OUT/waits.tmp" | uniq -c | sort -rn | awk -v n="$(wc -l <"$OUT/waits.tmp")" \
			'NR <= 4 { printf "%s%s %.0f%%", (NR > 1 ? ", " : ""), $2, 100 * $1 / (n ? n : 1) }')
		read -r r0 f0 b0 <<<"$wal0"
		read -r r1 f1 b1 <<<"$wal1"
		awk -v c="$cell" -v rd="$round" -v u="$units" -v r="$((r1 - r0))" -v f="$((f1 - f0))" -v b="$((b1 - b0))" -v w="$waits" \
			'BEGIN { if (u > 0) printf "%s\t%s\t%d\t%.1f\t%.2f\t%.0f\t%s\n", rd, c, u, r / u, f / u, b / u, w }' >>"$OUT/wal.tsv"
	fi
	printf '%s\t%s\t%s\t%s\t%s\n' "$value" "$tps" "$xacts" "$secs" "$note"
}

# ---------------------------------------------------------------------------
# BENCH_PEERS_HELD=SECONDS: instead of the rounds, each of BENCH_PEERS_HELD_CELLS
# (default: the floor's two-call step, wf_step20, gw_perjob) runs for SECONDS
# twice, first alone, then while another session of its database holds a
# REPEATABLE READ snapshot open (so that no dead row version of the run can
# be removed); its rate in 10 s windows is printed for both.  pgbench cells:
# pgbench's progress lines (scripts per second); graphile-worker: the jobs
# that left its table in each window.  Issue 13's "no collapse".
# ---------------------------------------------------------------------------
held_windows() {
	# held_windows CELL SECONDS HOLD(0|1): prints the 10 s rates, space-separated
	local cell=$1 secs=$2 hold=$3 db=${C_DB[$1]} setup=${C_SETUP[$1]} script=${C_SCRIPT[$1]}
	local opts=${C_OPTS[$1]} per=${C_PER[$1]} holder="" file v out w n0 n1 jobs
	local -a psqlvars=(-v n1=0 -v n20=0 -v small=0 -v noav=0 -v freeze=0 -v taskff=0 -v runff=0)
	if [[ $setup != - ]]; then
		file=${setup%%:*}
		IFS=, read -r -a vars <<<"${setup#*:}"
		for v in "${vars[@]}"; do
			# enough supply for the whole run: 20-step runs (300 a second: 6,000
			# steps/s; at 150 a run of 60 s ran out in its last window at 3,500
			# steps/s), and the floor's
			case $v in
			n20=*) v="n20=$((secs * 300))" ;;
			esac
			psqlvars+=(-v "$v")
		done
		qdb "$db" "${psqlvars[@]}" -f "$PEERS_DIR/$file" >>"$RAW" 2>&1 || { echo "set-up failed"; return; }
	fi
	hold_snapshot() {
		"${PSQL[@]}" -d "${DBP}_$db" -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
			-c "SELECT count(*) FROM pg_class" -c "SELECT pg_sleep($secs + 30)" -c "COMMIT" >/dev/null 2>&1 &
		holder=$!
		sleep 1
	}
	if [[ ${C_RATE[$cell]} == node ]]; then
		jobs=$((secs * 2500))
		(cd "$PEERS_DIR" && PGDATABASE="${DBP}_$db" node "${script%%:*}" "${script#*:}" "$jobs" "$CLIENTS" "$secs" >>"$RAW" 2>&1) &
		local drv=$!
		# wait for the bulk enqueue to end (the jobs table stops growing)
		n0=-1
		for w in $(seq 120); do
			sleep 1
			n1=$(qdb "$db" -c "SELECT count(*) FROM graphile_worker._private_jobs" 2>/dev/null || echo -1)
			[[ $n1 -gt 0 ]] && break
		done
		if ((hold)); then hold_snapshot; fi
		n0=$(qdb "$db" -c "SELECT count(*) FROM graphile_worker._private_jobs")
		out=""
		for ((w = 10; w <= secs; w += 10)); do
			sleep 10
			n1=$(qdb "$db" -c "SELECT count(*) FROM graphile_worker._private_jobs")
			out="$out $(((n0 - n1) / 10))"
			n0=$n1
		done
		pkill -P "$drv" node 2>/dev/null || true
		kill "$drv" 2>/dev/null || true
		wait "$drv" 2>/dev/null || true
	else
		if ((hold)); then hold_snapshot; fi
		# shellcheck disable=SC2086 # opts are pgbench options, split on purpose
		out=$(pgbench -n $opts -c "$CLIENTS" -j "$THREADS" -T "$secs" -P 10 -f "$PEERS_DIR/$script" "${DBP}_$db" 2>&1 |
			tee -a "$RAW" | awk -v p="${per/-/1}" '/^progress:/ { printf " %.0f", $4 * p }')
	fi
	if [[ -n $holder ]]; then
		kill "$holder" 2>/dev/null || true
		wait "$holder" 2>/dev/null || true
	fi
	echo "${out# }"
}

if [[ -n ${BENCH_PEERS_HELD:-} ]]; then
	HELD_CELLS=(${BENCH_PEERS_HELD_CELLS:-ceil_step_2call wf_step20 gw_perjob})
	{
		echo "bench-peers, held snapshot: $(sed -n 's/^date: *//p' "$OUT/machine.txt"), git $(sed -n 's/^git: *//p' "$OUT/machine.txt"), ${BENCH_PEERS_HELD}s per cell, $CLIENTS clients, synchronous_commit = on"
		echo "rates in 10 s windows (/s), first alone, then with a REPEATABLE READ snapshot held in the cell's database"
	} | tee "$SUM"
	for cell in "${HELD_CELLS[@]}"; do
		[[ -n ${HAVE[${C_DB[$cell]}]:-} ]] || { echo "  $cell: not set up, skipped" | tee -a "$SUM"; continue; }
		printf '  %-16s alone:         %s\n' "$cell" "$(held_windows "$cell" "$BENCH_PEERS_HELD" 0)" | tee -a "$SUM"
		printf '  %-16s snapshot held: %s\n' "$cell" "$(held_windows "$cell" "$BENCH_PEERS_HELD" 1)" | tee -a "$SUM"
	done
	exit 0
fi

printf 'round\tcell\tdb\tunits_per_s\tpgbench_tps\tpgbench_xacts\tseconds\tnote\tended_at\n' >"$TSV"
if [[ ${BENCH_PEERS_WAL:-0} == 1 ]]; then
	printf 'round\tcell\tunits\twal_records_per_unit\tfpi_per_unit\twal_bytes_per_unit\twait_events\n' >"$OUT/wal.tsv"
fi
echo
echo "==> cells: $ROUNDS rounds of ${#RUN_CELLS[@]} cells, ${SECS}s each, $CLIENTS clients"
for round in $(seq "$ROUNDS"); do
	for cell in "${RUN_CELLS[@]}"; do
		line=$(run_cell "$cell")
		printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$cell" "${C_DB[$cell]}" "$line" "$(date -u +%T)" >>"$TSV"
		value=$(cut -f1 <<<"$line") note=$(cut -f5 <<<"$line")
		printf '  round %s  %-16s %10s /s%s\n' "$round" "$cell" "$value" "${note:+  [$note]}"
	done
done

# ---------------------------------------------------------------------------
# Summary: per-cell medians, then the ratio lines
# ---------------------------------------------------------------------------
{
	echo "bench-peers: $(sed -n 's/^date: *//p' "$OUT/machine.txt"), git $(sed -n 's/^git: *//p' "$OUT/machine.txt"), $ROUNDS rounds x ${SECS}s cells, $CLIENTS clients, synchronous_commit = on"
	echo
	printf '%-16s %-9s %12s   %s\n' cell db "median /s" "rounds"
	awk -F '\t' 'NR > 1 {
			if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2; db[$2] = $3 }
			v[$2] = v[$2] " " $4
		}
		END {
			for (i = 0; i < n; i++) {
				c = order[i]; m = split(substr(v[c], 2), a, " "); k = 0
				for (j = 1; j <= m; j++) if (a[j] != "NA") b[++k] = a[j] + 0
				for (x = 1; x <= k; x++) for (y = x + 1; y <= k; y++) if (b[y] < b[x]) { t = b[x]; b[x] = b[y]; b[y] = t }
				med = (k == 0) ? "NA" : (k % 2) ? sprintf("%.0f", b[(k + 1) / 2]) : sprintf("%.0f", (b[k / 2] + b[k / 2 + 1]) / 2)
				printf "%-16s %-9s %12s   %s\n", c, db[c], med, substr(v[c], 2)
			}
		}' "$TSV"
	ran_out=$(awk -F '\t' 'NR > 1 && $8 ~ /supply ran out/ { print $2 " (round " $1 ")" }' "$TSV" | paste -sd ' ' -)
	if [[ -n $ran_out ]]; then
		echo
		echo "supply ran out (the rate is a lower bound: the cell finished its work early): $ran_out"
	fi
	if ((${#SKIPPED[@]})); then
		echo
		echo "skipped: ${SKIPPED[*]}${SKIPPED_CELLS:+; cells not run: ${SKIPPED_CELLS[*]}}"
	fi
	echo
	echo "ratios (median of the per-round ratios; the per-round ratios, sorted, in brackets):"
	awk -F '\t' 'NR == FNR { if (FNR > 1 && $4 != "NA") r[$2, $1] = $4; rounds[$1] = 1; next }
		/^#/ || NF < 2 { next }
		{
			a = $1; b = $2; desc = $0; sub(/^[^ \t]+[ \t]+[^ \t]+[ \t]+/, "", desc)
			k = 0; s = ""
			for (rd in rounds) if (((a, rd) in r) && ((b, rd) in r) && r[b, rd] > 0) { x[++k] = r[a, rd] / r[b, rd] }
			if (k == 0) next
			for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
			med = (k % 2) ? x[(k + 1) / 2] : (x[k / 2] + x[k / 2 + 1]) / 2
			for (i = 1; i <= k; i++) s = s sprintf("%s%.2f", i > 1 ? " " : "", x[i])
			printf "  %-16s / %-16s %5.2fx  [%s]  %s\n", a, b, med, s, desc
		}' "$TSV" FS=' ' "$PEERS_DIR/ratios"
	if [[ -s $OUT/wal.tsv ]]; then
		echo
		echo "WAL per unit of work and the backends' wait events (BENCH_PEERS_WAL=1; samples of active backends, CPU = none):"
		awk -F '\t' 'NR > 1 { printf "  round %s  %-16s records %6.1f  fpi %5.2f  bytes %7.0f  %s\n", $1, $2, $4, $5, $6, $7 }' "$OUT/wal.tsv"
	fi
} >"$SUM"
echo
echo "==> summary ($OUT)"
cat "$SUM"
