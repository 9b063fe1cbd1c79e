#!/usr/bin/env bash
# bench/move_dark.sh — how long a partition is refused while it moves
# between shards (issue 30, docs/scale-out.md "Moving a partition"), for
# partitions of several sizes, over several moves per size.  A
# measurement, never a test.
#
# Three throw-away clusters from the PostgreSQL of PG_CONFIG: two shards
# (wal_level = logical) and a router (wfengine_router, 2 partitions: the
# moving tenant's partition starts on s1).  For each size in SIZES the
# moving tenant gets that many finished one-step runs (three events each,
# made with wf.start_runs and wf.complete_tasks in batches), then a client
# (bench/move_dark.py, one connection to the router as the tenant) starts,
# claims and completes runs without pause while wfrouter.move_partition
# moves the partition to the other shard and back, MOVES times in all
# (both shards vacuumed and analysed before each move, 2 s of load before
# and after it); the client times every span in which its calls were
# refused (40001 or 55W01).  Printed per move: its total time,
# wfrouter.moves.dark_ms, the refused spans within it (count, longest);
# per size: p50, p99 and max of dark_ms and of all the refused spans
# (nearest rank: with 10 spans the p99 is the largest), the client's
# cycles, and the load average before and after.
#
# Environment: SIZES, a list of RUNS:MOVES (default "1000:10 100000:5"; a
# bare RUNS moves 5 times), PORT_BASE (default 5511: ports PORT_BASE to
# PORT_BASE + 2), PG_CONFIG.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)
SIZES=${SIZES:-"1000:10 100000:5"}
PORT_BASE=${PORT_BASE:-5511}
as_owner() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }

DIR=$(mktemp -d /tmp/wf-move-bench.XXXXXX)
chmod 755 "$DIR"
if ((EUID == 0)); then chown postgres: "$DIR"; fi
NODES=(s1 s2 router)
declare -A PORT=([s1]=$PORT_BASE [s2]=$((PORT_BASE + 1)) [router]=$((PORT_BASE + 2)))
cleanup() {
	for n in "${NODES[@]}"; do as_owner "$BIN/pg_ctl" -D "$DIR/$n" -m immediate stop >/dev/null 2>&1 || true; done
	rm -rf "$DIR"
}
trap cleanup EXIT
q() { # q NODE [psql args]: psql as the superuser, unaligned
	local n=$1
	shift
	"$BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$DIR" -p "${PORT[$n]}" -U postgres "$@"
}
for n in "${NODES[@]}"; do
	as_owner "$BIN/initdb" -D "$DIR/$n" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >/dev/null
	{
		echo "port = ${PORT[$n]}"
		echo "unix_socket_directories = '$DIR'"
		echo "listen_addresses = ''"
		echo "shared_buffers = 512MB"
		echo "max_wal_size = 8GB"
		echo "wal_level = logical"
		[[ $n == router ]] || echo "shared_preload_libraries = 'wfengine'"
	} | as_owner tee -a "$DIR/$n/postgresql.conf" >/dev/null
	as_owner "$BIN/pg_ctl" -D "$DIR/$n" -l "$DIR/$n.log" -w start >/dev/null
	q "$n" -d postgres -c "CREATE DATABASE wf"
	if [[ $n == router ]]; then
		q "$n" -d wf -c "CREATE EXTENSION wfengine_router CASCADE" >/dev/null 2>&1
		q "$n" -d wf -c "CREATE ROLE wf_tenant_mover NOLOGIN" >/dev/null
	else
		q "$n" -d wf -c "CREATE EXTENSION wfengine" >/dev/null
		q "$n" -d wf -c "SELECT wf.create_tenant('mover')" >/dev/null
	fi
	q "$n" -d wf -c "CREATE ROLE mover LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_mover" >/dev/null
done
q router -d wf -c "SELECT wfrouter.configure('{\"s1\": \"host=$DIR port=${PORT[s1]} dbname=wf\", \"s2\": \"host=$DIR port=${PORT[s2]} dbname=wf\"}', 2)" >/dev/null
P=$(q router -d wf -c "SELECT wfrouter.tenant_partition('mover')")
"$BIN/psql" -X -q -h "$DIR" -p "${PORT[router]}" -U mover -d wf \
	-c "SELECT wf.publish_definition('hop', '{\"steps\": [{\"name\": \"a\", \"queue\": \"hop_q\"}]}')" >/dev/null

stats() { # stats FILE: "n p50 p99 max" of the numbers in FILE (nearest rank)
	sort -n "$1" | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "0 - - -"; exit }
		i50 = int(NR * 0.5) + 1; if (i50 > NR) i50 = NR
		i99 = int(NR * 0.99) + 1; if (i99 > NR) i99 = NR
		printf "%d %.0f %.0f %.0f\n", NR, v[i50], v[i99], v[NR] }'
}
echo "# $(date -u '+%F %T') UTC, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
have=0
for spec in $SIZES; do
	size=${spec%%:*}
	moves=${spec#*:}
	[[ $spec == *:* ]] || moves=5
	home=$(q router -d wf -c "SELECT wfrouter.tenant_shard('mover')")
	# the partition's runs, finished, in batches of 1,000 on its shard
	t_fill=$(date +%s)
	while ((have < size)); do
		n=$((size - have < 1000 ? size - have : 1000))
		"$BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$DIR" -p "${PORT[$home]}" -U mover -d wf >/dev/null <<-EOS
			SELECT count(*) FROM wf.start_runs('hop', array_fill('{}'::jsonb, ARRAY[$n]));
		EOS
		"$BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$DIR" -p "${PORT[$home]}" -U mover -d wf >/dev/null <<-EOS
			CREATE TEMP TABLE c AS SELECT task_id, fence FROM wf.claim_tasks('hop_q', 'fill', $n);
			SELECT count(*) FROM wf.complete_tasks(ARRAY(SELECT task_id FROM c ORDER BY task_id),
			                                       ARRAY(SELECT fence FROM c ORDER BY task_id));
		EOS
		have=$((have + n))
	done
	load0=$(cut -d' ' -f1-3 /proc/loadavg)
	echo "# $size runs: $moves moves (partition built in $(($(date +%s) - t_fill)) s), load average $load0"
	printf '%-9s %4s %-7s %8s %10s %8s %10s\n' runs move path move_s dark_ms spans "max ms"
	# the client through the router while the partition moves, for all the moves
	/usr/bin/python3 "$BENCH_DIR/move_dark.py" "host=$DIR port=${PORT[router]} dbname=wf user=mover" "$DIR/spans.$size" &
	client=$!
	: >"$DIR/dark.$size"
	: >"$DIR/windows.$size"
	for ((i = 1; i <= moves; i++)); do
		home=$(q router -d wf -c "SELECT wfrouter.tenant_shard('mover')")
		if [[ $home == s1 ]]; then away=s2; else away=s1; fi
		q s1 -d wf -c "VACUUM ANALYZE" >/dev/null
		q s2 -d wf -c "VACUUM ANALYZE" >/dev/null
		sleep 2
		t0=$(date +%s.%N)
		q router -d wf -c "SELECT wfrouter.move_partition($P, '$away', '10 minutes')" >/dev/null
		t1=$(date +%s.%N)
		sleep 2
		dark=$(q router -d wf -c "SELECT round(dark_ms) FROM wfrouter.moves ORDER BY move_id DESC LIMIT 1")
		echo "$dark" >>"$DIR/dark.$size"
		echo "$i $home>$away $t0 $t1 $dark" >>"$DIR/windows.$size"
	done
	kill -INT "$client"
	wait "$client" || true
	# each refused span to the move whose window (plus 2 s after it) holds its start
	while read -r i path t0 t1 dark; do
		read -r n mx < <(awk -v a="$t0" -v b="$t1" '$1 == "span" && $2 >= a && $2 <= b + 2 { n++; if ($3 > m) m = $3 }
			END { printf "%d %.0f\n", n, m }' "$DIR/spans.$size")
		printf '%-9s %4s %-7s %8.1f %10s %8s %10s\n' "$size" "$i" "$path" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
			"$dark" "$n" "$mx"
	done <"$DIR/windows.$size"
	awk '$1 == "span" { print $3 }' "$DIR/spans.$size" >"$DIR/spanms.$size"
	read -r dn d50 d99 dmax < <(stats "$DIR/dark.$size")
	read -r sn s50 s99 smax < <(stats "$DIR/spanms.$size")
	cycles=$(awk '$1 == "cycles" { print $2 }' "$DIR/spans.$size")
	echo "# $size runs, $dn moves: dark_ms p50 $d50 p99 $d99 max $dmax; refused spans ($sn): p50 $s50 ms, p99 $s99 ms, max $smax ms;" \
		"client cycles $cycles; load average $load0 before, $(cut -d' ' -f1-3 /proc/loadavg) after"
	home=$(q router -d wf -c "SELECT wfrouter.tenant_shard('mover')")
	have=$(q "$home" -d wf -c "SELECT count(*) FROM wf.runs WHERE status = 'completed'")
done
