#!/usr/bin/env bash
# bench/router_latency.sh — what the PL/Proxy router (router/, docs/scale-out.md)
# adds to a call.  A measurement, never a test.
#
# Two throw-away clusters from the PostgreSQL of PG_CONFIG (wfengine and
# PL/Proxy installed): a shard (database wf, wfengine preloaded) and a
# router (database wfengine_router with the extension wfengine_router,
# configured with that one shard).  The same calls, one client, SECONDS s
# each, pgbench -M prepared, are made directly on the shard and through the
# router, alternating ROUNDS times: wf.run_status (a read) and wf.start_run
# (a write and a durable commit).  Prints pgbench's average latency of each.
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)
SECONDS_PER=${BENCH_SECONDS:-10}
ROUNDS=${ROUNDS:-3}
as_owner() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }
[[ -f $("$PG_CONFIG" --sharedir)/extension/plproxy.control ]] ||
	{ echo "router_latency.sh: PL/Proxy is not installed (postgresql-15-plproxy)" >&2; exit 1; }

DIR=$(mktemp -d /tmp/wf-router-bench.XXXXXX)
chmod 755 "$DIR"
if ((EUID == 0)); then chown postgres: "$DIR"; fi
cleanup() {
	for n in shard router; do as_owner "$BIN/pg_ctl" -D "$DIR/$n" -m immediate stop >/dev/null 2>&1 || true; done
	rm -rf "$DIR"
}
trap cleanup EXIT

start() {
	local name=$1 port=$2 preload=$3
	as_owner "$BIN/initdb" -D "$DIR/$name" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >/dev/null
	{
		echo "port = $port"
		echo "unix_socket_directories = '$DIR'"
		echo "listen_addresses = ''"
		echo "shared_buffers = 256MB"
		if [[ -n $preload ]]; then echo "shared_preload_libraries = '$preload'"; fi
	} | as_owner tee -a "$DIR/$name/postgresql.conf" >/dev/null
	as_owner "$BIN/pg_ctl" -D "$DIR/$name" -l "$DIR/$name.log" -w start >/dev/null
}
SP=5461 RP=5462
start shard $SP wfengine
start router $RP ""
q() { "$BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$DIR" -U postgres "$@"; }
q -p $SP -d postgres -c "CREATE DATABASE wf"
q -p $SP -d wf -c "CREATE EXTENSION wfengine" >/dev/null
q -p $SP -d wf -c "SELECT wf.publish_definition('lat', '{\"steps\": [{\"name\": \"a\", \"queue\": \"lat_q\"}]}')" >/dev/null
run=$(q -p $SP -d wf -c "SELECT wf.start_run('lat')")
q -p $RP -d postgres -c "CREATE DATABASE wfengine_router"
q -p $RP -d wfengine_router -c "CREATE EXTENSION wfengine_router CASCADE" >/dev/null
q -p $RP -d wfengine_router -c "SELECT wfrouter.configure('{\"s1\": \"host=$DIR port=$SP dbname=wf\"}', 64)" >/dev/null
# the router answers as the shard does
[[ $(q -p $RP -d wfengine_router -c "SELECT wf.run_status('$run')") == running ]] ||
	{ echo "router_latency.sh: the router does not reach the shard" >&2; exit 1; }

echo "SELECT wf.run_status('$run');" >"$DIR/read.sql"
echo "SELECT wf.start_run('lat');" >"$DIR/write.sql"
# the PL/Proxy call alone, without the layer that learns maps and maps
# connection failures to 08006 (issue 30)
echo "SELECT wfrouter.\"p:run_status\"('$run');" >"$DIR/read_raw.sql"
echo "SELECT wfrouter.\"p:start_run\"('lat');" >"$DIR/write_raw.sql"
lat() { # lat PORT DB SCRIPT: "p50 p99" in ms, from pgbench's per-transaction log
	local port=$1 db=$2 script=$3
	rm -f "$DIR"/lat.*
	(cd "$DIR" && "$BIN/pgbench" -n -M prepared -c 1 -T "$SECONDS_PER" -h "$DIR" -p "$port" -U postgres \
		-l --log-prefix=lat -f "$DIR/$script" "$db" >/dev/null 2>&1)
	# field 3 of the log: the transaction's latency in microseconds
	cat "$DIR"/lat.* | awk '{ print $3 }' | sort -n |
		awk '{ v[NR] = $1 } END { printf "%.3f %.3f\n", v[int(NR * 0.5) + 1] / 1000, v[int(NR * 0.99) + 1] / 1000 }'
}
echo "call   round    direct p50   p99 (ms)    router p50   p99 (ms)   added p50   p99    PL/Proxy alone p50  p99"
for ((r = 1; r <= ROUNDS; r++)); do
	for s in read write; do
		read -r d50 d99 < <(lat $SP wf $s.sql)
		read -r t50 t99 < <(lat $RP wfengine_router $s.sql)
		read -r x50 x99 < <(lat $RP wfengine_router ${s}_raw.sql)
		printf '%-5s  %d     %10s %8s     %10s %8s    %8s %8s    %10s %8s\n' "$s" "$r" "$d50" "$d99" "$t50" "$t99" \
			"$(awk -v a="$t50" -v b="$d50" 'BEGIN { printf "%.3f", a - b }')" \
			"$(awk -v a="$t99" -v b="$d99" 'BEGIN { printf "%.3f", a - b }')" "$x50" "$x99"
	done
done
