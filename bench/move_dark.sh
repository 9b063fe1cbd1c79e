#!/usr/bin/env bash
# bench/move_dark.sh — how long a partition is refused while it moves
# between shards (issue 30, docs/scale-out.md "Moving a partition"), for
# partitions of several sizes.  A measurement, never a test.
#
# Three throw-away clusters from the PostgreSQL of PG_CONFIG: two shards
# (wal_level = logical) and a router (wfengine_router, 2 partitions: the
# moving tenant's partition starts on s1).  For each size in SIZES the
# moving tenant gets that many finished one-step runs (three events each,
# made with wf.start_runs and wf.complete_tasks in batches), then a client
# (bench/move_dark.py, one connection to the router as the tenant) starts,
# claims and completes runs without pause while wfrouter.move_partition
# moves the partition to the other shard; it times every span in which its
# calls were refused (40001 or 55W01).  Printed per size: the move's total
# time, wfrouter.moves.dark_ms, and the client's refused spans (count, p50,
# p99, max).  The partition moves back and forth, one move per size.
#
# Environment: SIZES (default "1000 100000"), PG_CONFIG.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)
SIZES=${SIZES:-"1000 100000"}
as_owner() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }

DIR=$(mktemp -d /tmp/wf-move-bench.XXXXXX)
chmod 755 "$DIR"
if ((EUID == 0)); then chown postgres: "$DIR"; fi
NODES=(s1 s2 router)
declare -A PORT=([s1]=5511 [s2]=5512 [router]=5513)
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

printf '%-9s %8s %10s %8s %10s %10s %10s %10s\n' runs move_s dark_ms spans "p50 ms" "p99 ms" "max ms" cycles
have=0
for size in $SIZES; do
	home=$(q router -d wf -c "SELECT wfrouter.tenant_shard('mover')")
	if [[ $home == s1 ]]; then away=s2; else away=s1; fi
	# the partition's runs, finished, in batches of 1,000 on its shard
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
	q "$home" -d wf -c "VACUUM ANALYZE" >/dev/null
	# the client through the router while the partition moves
	/usr/bin/python3 "$BENCH_DIR/move_dark.py" "host=$DIR port=${PORT[router]} dbname=wf user=mover" "$DIR/spans.$size" &
	client=$!
	sleep 2
	t0=$(date +%s.%N)
	q router -d wf -c "SELECT wfrouter.move_partition($P, '$away', '10 minutes')" >/dev/null
	t1=$(date +%s.%N)
	sleep 2
	kill -INT "$client"
	wait "$client" || true
	dark=$(q router -d wf -c "SELECT round(dark_ms) FROM wfrouter.moves ORDER BY move_id DESC LIMIT 1")
	read -r spans p50 p99 max cycles <"$DIR/spans.$size"
	printf '%-9s %8.1f %10s %8s %10s %10s %10s %10s\n' "$size" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
		"$dark" "$spans" "$p50" "$p99" "$max" "$cycles"
	have=$(q "$away" -d wf -c "SELECT count(*) FROM wf.runs WHERE status = 'completed'")
done
