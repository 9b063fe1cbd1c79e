#!/usr/bin/env bash
# bench/common.sh — sourced by the bench scripts: the server they measure
# on, and the psql and CPU helpers they share.  Defines functions and
# settings only; running it does nothing.

PG_MAJOR=15

# bench_in_virtualenv NAME SCRIPT [ARGS...]: returns at once when PGHOST or
# PGPORT names a server to use.  Otherwise runs SCRIPT ARGS again inside a
# throw-away pg_virtualenv cluster (-t: a temporary directory, also as
# root) with wfengine and pg_cron preloaded and durable commits
# (pg_virtualenv turns fsync off unless told), shared_buffers=1GB and
# max_wal_size=4GB.  BENCH_PRELOAD adds libraries to preload; the array
# BENCH_EXTRA_OPTS adds pg_virtualenv options (-o name=value).  Stale PG*
# variables must not leak into the cluster, so they are unset.
bench_in_virtualenv() {
	local name=$1 script=$2 bindir
	shift 2
	if [[ -n ${PGHOST:-} || -n ${PGPORT:-} ]]; then
		return 0
	fi
	# pg_virtualenv only knows /usr/lib/postgresql/<major>: a PG_CONFIG that
	# names another installation gets a throw-away initdb cluster of its own
	bindir=$("${PG_CONFIG:-pg_config}" --bindir 2>/dev/null || true)
	if [[ -n $bindir && $bindir != "/usr/lib/postgresql/$PG_MAJOR/bin" ]]; then
		bench_in_initdb_cluster "$name" "$bindir" "$script" "$@"
	fi
	if ! command -v pg_virtualenv >/dev/null 2>&1; then
		echo "$name: neither PGHOST/PGPORT nor pg_virtualenv (postgresql-common) is available" >&2
		exit 1
	fi
	echo "$name: starting a throw-away PostgreSQL $PG_MAJOR cluster (pg_virtualenv)"
	exec env -u PGHOST -u PGHOSTADDR -u PGPORT -u PGUSER -u PGPASSWORD \
		-u PGDATABASE -u PGSERVICE -u PGCLUSTER \
		pg_virtualenv -t -v "$PG_MAJOR" \
		-o "shared_preload_libraries=wfengine,pg_cron${BENCH_PRELOAD:+,$BENCH_PRELOAD}" \
		-o "cron.database_name=postgres" \
		-o "fsync=on" -o "synchronous_commit=on" -o "full_page_writes=on" \
		-o "shared_buffers=1GB" -o "max_wal_size=4GB" \
		${BENCH_EXTRA_OPTS[@]+"${BENCH_EXTRA_OPTS[@]}"} \
		-- bash "$script" "$@"
}

# bench_in_initdb_cluster NAME BINDIR SCRIPT [ARGS...]: what
# bench_in_virtualenv does, for a PostgreSQL installation outside
# /usr/lib/postgresql (a private copy, PG_CONFIG=...): initdb from BINDIR into
# a temporary directory (as postgres through runuser when root), the same
# settings, a Unix socket only, SCRIPT ARGS run against it, then the cluster
# is stopped and removed.  Does not return.
bench_in_initdb_cluster() {
	local name=$1 bindir=$2 script=$3
	shift 3
	local dir port rc=0 opt
	local -a settings=("shared_preload_libraries=wfengine,pg_cron${BENCH_PRELOAD:+,$BENCH_PRELOAD}"
		"cron.database_name=postgres" "fsync=on" "synchronous_commit=on" "full_page_writes=on"
		"shared_buffers=1GB" "max_wal_size=4GB" "listen_addresses=")
	for opt in ${BENCH_EXTRA_OPTS[@]+"${BENCH_EXTRA_OPTS[@]}"}; do
		[[ $opt == -o ]] || settings+=("$opt")
	done
	as_cluster_owner() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }
	dir=$(mktemp -d /tmp/"$name"-cluster.XXXXXX)
	chmod 755 "$dir"
	if ((EUID == 0)); then chown postgres: "$dir"; fi
	for port in $(seq 5470 5498); do [[ -e /tmp/.s.PGSQL.$port || -e $dir/.s.PGSQL.$port ]] || break; done
	echo "$name: starting a throw-away PostgreSQL $PG_MAJOR cluster from $bindir (initdb, port $port, socket $dir)"
	as_cluster_owner "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
	{
		echo "port = $port"
		echo "unix_socket_directories = '$dir'"
		for opt in "${settings[@]}"; do echo "${opt%%=*} = '${opt#*=}'"; done
	} | as_cluster_owner tee -a "$dir/data/postgresql.conf" >/dev/null
	as_cluster_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
	env -u PGHOSTADDR -u PGPASSWORD -u PGDATABASE -u PGSERVICE -u PGCLUSTER \
		PGHOST="$dir" PGPORT="$port" PGUSER=postgres PATH="$bindir:$PATH" \
		bash "$script" "$@" || rc=$?
	as_cluster_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
	rm -rf -- "$dir"
	exit "$rc"
}

# q: psql on the maintenance database, unaligned, stopping at the first error.
MAINDB=${PGDATABASE:-postgres}
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$MAINDB" "$@"; }
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"

# Busy CPU ticks of the whole machine (user+nice+system+irq+softirq+steal):
# server, pgbench and anything else running, so meaningful on a quiet box.
# shellcheck disable=SC2034 # used by the scripts that source this file
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
cpu_busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
