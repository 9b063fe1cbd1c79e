#!/usr/bin/env bash
# bench/shards.sh — throughput of one wfengine server against three shards
# (issue 15, docs/scale-out.md) on this machine.  A measurement, never a test.
#
# Four throw-away clusters from the PostgreSQL of PG_CONFIG (wfengine
# preloaded, durable commits, shared_buffers=256MB, max_wal_size=4GB, Unix
# sockets only): "one", an unsharded install holding every tenant, and
# s1, s2, s3, the shards of a 64-partition map dealt out in turn (what
# wfrouter.configure does; wf.configure_shard on each shard, so the shard
# check runs on every call).  Eight tenants, chosen so that s1 and s2 hold
# three each and s3 two; every cluster has all eight and their logins (the
# shards refuse the tenants they do not hold).
#
# A client is one pgbench process (-c 1 -j 1 -M prepared) logged in as one
# tenant, running cycles of the script cycle.sql below: wf.start_run of a
# one-step run, wf.claim_tasks, wf.complete_task, three transactions.  Each
# cell runs the eight clients together for SECONDS s, either all against
# "one" or each against its tenant's shard (3 + 3 + 2); the cells alternate,
# ROUNDS times, the order swapped every round.  A cycle is a completed task,
# counted in the clusters before and after the cell.  Every cluster
# shares this machine's CPUs: the figure says what splitting the data over
# three servers does on the same cores, not what three machines would do.
#
# A fifth cluster, "router", runs wfengine_router (PL/Proxy) over s1, s2,
# s3 (wfrouter.configure, which also configures the shards: their names,
# id blocks and the map); the third kind of cell runs the same eight
# clients against the router, which routes every call (start, claim,
# complete) to the tenant's shard.
#
# Environment: BENCH_SECONDS (default 10), ROUNDS (default 3), PG_CONFIG.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$BENCH_DIR/common.sh" # cpu_busy_ticks, CLK_TCK
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)
SECONDS_PER=${BENCH_SECONDS:-10}
ROUNDS=${ROUNDS:-3}
as_owner() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }

DIR=$(mktemp -d /tmp/wf-shards-bench.XXXXXX)
chmod 755 "$DIR"
if ((EUID == 0)); then chown postgres: "$DIR"; fi
NODES=(one s1 s2 s3 router)
declare -A PORT=([one]=5501 [s1]=5502 [s2]=5503 [s3]=5504 [router]=5505)
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
		echo "shared_buffers = 256MB"
		echo "max_wal_size = 4GB"
		echo "shared_preload_libraries = 'wfengine'"
	} | as_owner tee -a "$DIR/$n/postgresql.conf" >/dev/null
	as_owner "$BIN/pg_ctl" -D "$DIR/$n" -l "$DIR/$n.log" -w start >/dev/null
	q "$n" -d postgres -c "CREATE DATABASE wf"
	if [[ $n == router ]]; then
		q "$n" -d wf -c "CREATE EXTENSION wfengine_router CASCADE" >/dev/null 2>&1
	else
		q "$n" -d wf -c "CREATE EXTENSION wfengine" >/dev/null
	fi
done

# the map: partition p to shard s((p mod 3) + 1), as wfrouter.configure deals them
MAP=$(q one -d wf -c "SELECT array_agg('s' || (p % 3 + 1) ORDER BY p) FROM generate_series(0, 63) p")
# eight tenants: three on s1, three on s2, two on s3
declare -A HOME_OF
TENANTS=()
declare -A WANT=([s1]=3 [s2]=3 [s3]=2) HAVE=([s1]=0 [s2]=0 [s3]=0)
for ((i = 1; ${#TENANTS[@]} < 8; i++)); do
	t=$(printf 't%03d' "$i")
	s=s$(($(q one -d wf -c "SELECT wf.tenant_partition('$t', 64)") % 3 + 1))
	((HAVE[$s] < WANT[$s])) || continue
	TENANTS+=("$t")
	HOME_OF[$t]=$s
	HAVE[$s]=$((HAVE[$s] + 1))
done
for n in "${NODES[@]}"; do
	for t in "${TENANTS[@]}"; do
		if [[ $n == router ]]; then
			q "$n" -d wf -c "CREATE ROLE wf_tenant_$t NOLOGIN" >/dev/null
		else
			q "$n" -d wf -c "SELECT wf.create_tenant('$t')" >/dev/null
		fi
		q "$n" -d wf -c "CREATE ROLE ${t}_w LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_$t" >/dev/null
	done
done
# the router configures the shards: names, id blocks, the map
q router -d wf -c "SELECT wfrouter.configure('{\"s1\": \"host=$DIR port=${PORT[s1]} dbname=wf\", \"s2\": \"host=$DIR port=${PORT[s2]} dbname=wf\", \"s3\": \"host=$DIR port=${PORT[s3]} dbname=wf\"}', 64)" >/dev/null
[[ $(q router -d wf -c "SELECT wfrouter.shard_map()") == "$MAP" ]] || { echo "shards.sh: the router's map is not $MAP" >&2; exit 1; }
# each tenant's definition where it lives (the unsharded install, its shard)
for t in "${TENANTS[@]}"; do
	for n in one "${HOME_OF[$t]}"; do
		"$BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$DIR" -p "${PORT[$n]}" -U "${t}_w" -d wf \
			-c "SELECT wf.publish_definition('cyc', '{\"steps\": [{\"name\": \"a\", \"queue\": \"q\"}]}')" >/dev/null
	done
done
# a tenant's login is refused on a shard that does not hold it
for t in "${TENANTS[@]}"; do
	for s in s1 s2 s3; do
		[[ $s == "${HOME_OF[$t]}" ]] && continue
		if "$BIN/psql" -X -q -h "$DIR" -p "${PORT[$s]}" -U "${t}_w" -d wf -c "SELECT wf.start_run('cyc')" >/dev/null 2>&1; then
			echo "shards.sh: shard $s served tenant $t of ${HOME_OF[$t]}" >&2
			exit 1
		fi
	done
done

cat >"$DIR/cycle.sql" <<'EOS'
SELECT wf.start_run('cyc');
SELECT coalesce(min(task_id), 0) AS task_id, coalesce(min(fence), 0) AS fence
  FROM wf.claim_tasks('q', 'w:' || :client_id, 1) \gset
\if :task_id > 0
SELECT wf.complete_task(:task_id, :fence, '{"ok": true}');
\endif
EOS

completed() { # completed NODE...: completed tasks in those clusters
	local sum=0 n
	# from their task_completed events: a completed attempt leaves wf.tasks
	for n in "$@"; do sum=$((sum + $(q "$n" -d wf -c "SELECT count(*) FROM wf.events WHERE type = 'task_completed'"))); done
	echo "$sum"
}
# cell MODE: prints "cycles/s cpu%" for the eight clients against "one",
# their shards ("three") or the router ("router")
cell() {
	local mode=$1 t n before after b0 b1 pids=()
	local -a used
	if [[ $mode == one ]]; then used=(one); else used=(s1 s2 s3); fi
	for n in "${used[@]}"; do q "$n" -d wf -c CHECKPOINT; done
	before=$(completed "${used[@]}")
	b0=$(cpu_busy_ticks)
	for t in "${TENANTS[@]}"; do
		case $mode in
		one) n=one ;;
		router) n=router ;;
		*) n=${HOME_OF[$t]} ;;
		esac
		"$BIN/pgbench" -n -M prepared -c 1 -j 1 -T "$SECONDS_PER" -h "$DIR" -p "${PORT[$n]}" \
			-U "${t}_w" -f "$DIR/cycle.sql" wf >"$DIR/pgbench.$t.log" 2>&1 &
		pids+=($!)
	done
	wait "${pids[@]}"
	b1=$(cpu_busy_ticks)
	after=$(completed "${used[@]}")
	awk -v c=$((after - before)) -v s="$SECONDS_PER" -v t=$((b1 - b0)) -v hz="$CLK_TCK" \
		'BEGIN { printf "%.0f %.0f\n", c / s, 100 * t / hz / s }'
}

echo "8 clients (one pgbench each, one tenant each), ${SECONDS_PER} s cells, $(nproc) CPUs shared by every cluster"
echo "tenants: $(for t in "${TENANTS[@]}"; do printf '%s:%s ' "$t" "${HOME_OF[$t]}"; done)"
printf '%-7s %16s %8s %16s %8s %17s %8s\n' round "one (cycles/s)" "cpu %" "three (cycles/s)" "cpu %" "router (cycles/s)" "cpu %"
ones=() threes=() routers=()
for ((r = 1; r <= ROUNDS; r++)); do
	if ((r % 2)); then
		read -r o oc < <(cell one)
		read -r th tc < <(cell three)
		read -r ro rc < <(cell router)
	else
		read -r ro rc < <(cell router)
		read -r th tc < <(cell three)
		read -r o oc < <(cell one)
	fi
	ones+=("$o") threes+=("$th") routers+=("$ro")
	printf '%-7s %16s %8s %16s %8s %17s %8s\n' "$r" "$o" "$oc" "$th" "$tc" "$ro" "$rc"
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mo=$(median "${ones[@]}")
mt=$(median "${threes[@]}")
mr=$(median "${routers[@]}")
echo "median: one $mo cycles/s, three shards $mt cycles/s, three/one = $(awk -v a="$mt" -v b="$mo" 'BEGIN { printf "%.2f", a / b }')"
echo "median: three shards through the router $mr cycles/s, router/one = $(awk -v a="$mr" -v b="$mo" 'BEGIN { printf "%.2f", a / b }'), router/direct = $(awk -v a="$mr" -v b="$mt" 'BEGIN { printf "%.2f", a / b }')"
