#!/usr/bin/env bash
# bench/experiments/layout_free_ab.sh -- issue 31's layout-free experiment:
# the floor's one-call step and the eager step (wf_eager20's script) as it
# is, with the layout freed, and with the two guarantee indexes dropped too,
# interleaved round by round on the server of PGHOST/PGPORT/PGUSER (a
# superuser; wfengine preloaded, with layout_free.patch applied and
# installed: without the opt-in the patched library behaves as the tree).
# A measurement, never a test.  Steps per second are counted from the
# task_completed events of each window, not pgbench's transactions (a
# claim that finds nothing is a transaction too).
#
# Environment: ROUNDS (6), SECS (10), N20 (8,000 20-step runs per window,
# enough for 10 s at 12,000 steps/s), CLIENTS (8).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
peers=$here/../peers
ROUNDS=${ROUNDS:-6} SECS=${SECS:-10} N20=${N20:-8000} CLIENTS=${CLIENTS:-8}
P="psql -X -q -v ON_ERROR_STOP=1"
for db in lf_floor lf_plain lf_free lf_bound; do
	$P -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
done
$P -d lf_floor -f "$peers/floor/schema.sql" >/dev/null
wal() { $P -At -d postgres -c "SELECT wal_bytes FROM pg_stat_wal"; }
for r in $(seq 1 "$ROUNDS"); do
	$P -d lf_floor -v nruns=100000 -f "$peers/floor/seed.sql" >/dev/null
	sync
	f=$(pgbench -n -c "$CLIENTS" -j 2 -T "$SECS" -f "$peers/floor/step_fn.sql" lf_floor 2>&1 |
		awk '/^tps/ {print int($3)}')
	line="round $r: floor $f"
	for v in plain:reset:0 free:free:0 bound:free:1; do
		IFS=: read -r name reset drop2 <<<"$v"
		file=$peers/wf/reset.sql
		[[ $reset == free ]] && file=$here/layout_free_reset.sql
		$P -d "lf_$name" -v n1=0 -v n20="$N20" -v small=0 -v noav=0 -v freeze=0 -v taskff=0 \
			-v runff=0 -v drop2="$drop2" -f "$file" >/dev/null 2>&1
		sync
		w0=$(wal)
		pgbench -n -c "$CLIENTS" -j 2 -T "$SECS" -f "$peers/wf/eager20.sql" -D tid=0 -D f=0 "lf_$name" >/dev/null 2>&1
		w1=$(wal)
		steps=$($P -At -d "lf_$name" -c "SELECT count(*) FROM wf.events WHERE type = 'task_completed'")
		s=$((steps / SECS))
		line="$line | $name $s ($(awk -v a="$s" -v b="$f" 'BEGIN {printf "%.2f", a / b}')) $(((w1 - w0) / steps)) B"
	done
	echo "$line"
done
