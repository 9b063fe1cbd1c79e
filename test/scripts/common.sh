# shellcheck shell=bash
# common.sh — helpers shared by test.sh and demo.sh.  Source it, don't run it.
#
#   wf_log MSG...         section header on stdout
#   wf_as_root CMD...     run CMD as root (directly, or through sudo)
#   wf_deps               install missing Debian packages (deps.sh)
#   wf_make ARGS...       make in the repository root, for PostgreSQL 15
#   wf_build, wf_install  `make` as the invoking user, `make install` as root
#   as_unpriv CMD...      run CMD as a non-root user, cwd = a source tree it owns
#   wf_virtualenv CMD...  run CMD against a throw-away PG 15 cluster that
#                         preloads wfengine and pg_cron (pg_virtualenv)
#
# Sourcing it also creates $WF_TMP (scratch space, removed on exit by the
# process that created it; set WF_KEEP_TMP=1 to keep it) and exports it, so a
# script re-invoked inside pg_virtualenv shares the same directory.

WF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WF_PG_MAJOR=15
WF_PG_BINDIR=/usr/lib/postgresql/$WF_PG_MAJOR/bin
export PG_CONFIG=$WF_PG_BINDIR/pg_config
# PG 15's own binaries first (psql for pg_prove, initdb/pg_ctl for TAP tests).
export PATH=$WF_PG_BINDIR:$PATH
# When started from `make test`/`make demo`, don't inherit the outer make's
# flags (jobserver fds, -w directory messages, command-line overrides).
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES

wf_cleanup() {
	if [[ -n ${WF_KEEP_TMP:-} ]]; then
		echo "wfengine: keeping scratch directory $WF_TMP" >&2
	elif [[ -n ${WF_TMP:-} && -d $WF_TMP ]]; then
		rm -rf -- "$WF_TMP"
	fi
}

if [[ -z ${WF_TMP:-} ]]; then
	# as root, as_unpriv's copy of the tree lives in here and must be reachable
	# by postgres: use /tmp, not a TMPDIR that may be private to root
	WF_TMP=$(mktemp -d "$( ((EUID == 0)) && echo /tmp || echo "${TMPDIR:-/tmp}")/wfengine-test.XXXXXX")
	chmod 755 "$WF_TMP"
	export WF_TMP
	trap wf_cleanup EXIT
fi

wf_log() {
	printf '\n==> %s\n' "$*"
}

wf_as_root() {
	if ((EUID == 0)); then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -- "$@"
	else
		echo "wfengine: need root or sudo to run: $*" >&2
		return 1
	fi
}

wf_deps() {
	bash "$WF_ROOT/test/scripts/deps.sh"
}

wf_make() {
	make -C "$WF_ROOT" --no-print-directory PG_CONFIG="$PG_CONFIG" "$@"
}

wf_build() {
	wf_make -j"$(nproc 2>/dev/null || echo 2)"
}

wf_install() {
	wf_as_root make -C "$WF_ROOT" --no-print-directory PG_CONFIG="$PG_CONFIG" install
}

# as_unpriv CMD...: initdb (and so PostgreSQL::Test::Cluster) refuses to run
# as root, and the TAP tests write tmp_check/ into the source tree.  As root,
# run CMD as `postgres` inside a postgres-owned copy of the tree
# ($WF_TMP/unpriv-src, made on first use, without .git and old test output);
# as anybody else, run CMD in the repository itself.
as_unpriv() {
	if ((EUID != 0)); then
		(cd "$WF_ROOT" && "$@")
		return
	fi
	local tree
	tree=$(wf_unpriv_tree)
	(cd "$tree" && runuser -u postgres -- "$@")
}

# Prints the directory as_unpriv runs in (creating the copy when root).
wf_unpriv_tree() {
	if ((EUID != 0)); then
		printf '%s\n' "$WF_ROOT"
		return
	fi
	local tree=$WF_TMP/unpriv-src
	if [[ ! -d $tree ]]; then
		mkdir "$tree"
		tar -C "$WF_ROOT" -cf - \
			--exclude=./.git --exclude=./results --exclude=./output_iso \
			--exclude=./tmp_check --exclude=./tmp_check_iso . |
			tar -C "$tree" -xf -
		chown -R postgres:postgres "$tree"
	fi
	printf '%s\n' "$tree"
}

# wf_bg CMD...: run CMD (a program or function) as a background job and wait
# for it, returning its status.  Unlike a foreground command, this lets a
# trap on INT/TERM run at once instead of after CMD has finished.
wf_bg() {
	local pid rc=0
	"$@" &
	pid=$!
	wait "$pid" || rc=$?
	return "$rc"
}

# wf_kill_tree PID: SIGTERM every descendant of PID, deepest first.  Needed
# on interrupt because `timeout` runs each suite in a process group of its
# own, which a Ctrl-C on the terminal does not reach.  Reads /proc (procps
# may not be installed).
wf_kill_tree() {
	local -A kids=()
	local f stat ppid pid
	for f in /proc/[0-9]*/stat; do
		{ read -r stat <"$f"; } 2>/dev/null || continue
		read -r _ ppid _ <<<"${stat##*) }"
		pid=${f#/proc/}
		kids[$ppid]+=" ${pid%/stat}"
	done
	_wf_kill_below "$1"
}
_wf_kill_below() {
	local child
	for child in ${kids[$1]:-}; do
		_wf_kill_below "$child"
		kill -TERM "$child" 2>/dev/null || true
	done
}

# A fixed approval key for throw-away test clusters only (approval tokens
# are hashed with it); never use it for a real server.  It starts with a
# letter so that postgresql.conf takes it unquoted.
WF_TEST_APPROVAL_KEY=ab112233445566778899aabbccddeeff00112233445566778899aabbccddeeff

# WF_WORKER_ENABLED=off keeps the engine workers idle (wfengine.enabled):
# pg_regress, isolation and pgTAP drive timers with wf.tick(), so that no
# background worker races them (TAP tests start their own nodes).
# free_port: a TCP port of localhost nobody listens on, from 54330 up (for
# a second pg_virtualenv beside the first, which takes 5432 or the next
# free one)
free_port() {
	local port
	for ((port = 54330; port < 54400; port++)); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return 0
		fi
	done
	echo 54399
}

# wf_virtualenv CMD...: CMD must be a program (pg_virtualenv execs it), not a
# shell function; test.sh and demo.sh re-invoke themselves for that.
# -t keeps the cluster in a temporary directory even as root (nothing is
# written to /etc/postgresql, and a leftover 15/regress cluster from an
# interrupted run can't block us).  pg_virtualenv exports PGHOST, PGPORT,
# PGUSER, PGPASSWORD and PGDATABASE for CMD and drops the cluster afterwards;
# stale PG* variables from the caller must not leak into it (WF_VENV_PORT,
# when set, is the port for the cluster: a second one beside the first).
# SIGPIPE is ignored for it (`make demo | head`): otherwise the signal also
# hits pg_virtualenv's own cleanup trap while it prints "Dropping cluster",
# and the cluster is left running; ignored, writes just fail with EPIPE.
wf_virtualenv() {
	(
		trap '' PIPE
		exec env -u PGHOST -u PGHOSTADDR -u PGPORT -u PGUSER -u PGPASSWORD \
			-u PGDATABASE -u PGSERVICE -u PGCLUSTER ${WF_VENV_PORT:+PGPORT=$WF_VENV_PORT} \
			pg_virtualenv -t -v "$WF_PG_MAJOR" \
			-o "shared_preload_libraries=wfengine,pg_cron" \
			-o "cron.database_name=postgres" \
			-o "wfengine.enabled=${WF_WORKER_ENABLED:-on}" \
			-o "wfengine.approval_key=${WF_APPROVAL_KEY:-$WF_TEST_APPROVAL_KEY}" \
			-- "$@"
	)
}
