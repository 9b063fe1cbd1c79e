#!/usr/bin/env bash
# clients.sh — the end-to-end test of each worker library in clients/ (the
# order workflow of test/demo driven by the library's worker loop), one test
# per language, each in a fresh database with wfengine created:
#
#   python   clients/python/test_e2e.py          (python3 + psycopg 3)
#   c        clients/c: make test                (libpq, pthreads)
#   node     clients/node: npm test              (node + pg from package-lock.json)
#   go       clients/go: go test                 (Go + pgx v4 from Debian, GOPATH mode)
#
# and then, in another fresh database, the shared conformance scenario
# (test/conformance/run.sh with the language's driver: python
# clients/python/conformance.py, c clients/c/conformance.c, node
# clients/node/test/conformance.js, go TestConformance), whose history must
# be test/conformance/expected.txt; and, in the first database, test/scripts/client_exit.sh with the
# language's exit probe (clients/python/exit_probe.py, clients/node/test/
# exit_probe.js, clients/go/exitprobe, clients/c/exit_probe.c): the worker's
# PROCESS stops on SIGTERM, idle within 1 s and busy after its task, within
# the drain timeout (issue 32).  A language passes when all three pass.
#
# Connects with the libpq environment (test.sh runs it inside pg_virtualenv,
# as a superuser: the tests publish definitions and call wf.tick()).  Prints
# one line per language, "client NAME: passed", "client NAME: FAILED" or
# "client NAME: skipped (why)" — a language whose toolchain is missing is
# skipped, not passed — and exits non-zero when one failed.
#
# Usage: bash test/scripts/clients.sh [LANGUAGE...]
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLIENTS=$ROOT/clients
if [[ -n ${WF_TMP:-} ]]; then
	SCRATCH=$WF_TMP/clients
else
	SCRATCH=$(mktemp -d)
	trap 'rm -rf -- "$SCRATCH"' EXIT
fi
mkdir -p "$SCRATCH"
STEP_TIMEOUT=${WF_CLIENT_TIMEOUT:-300}
PSQL=(psql -X -q -v ON_ERROR_STOP=1)
failed=0

# python3 that has psycopg 3: Debian's (python3-psycopg), or the first on PATH
python_with_psycopg() {
	local py
	for py in /usr/bin/python3 python3; do
		if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import psycopg' 2>/dev/null; then
			echo "$py"
			return 0
		fi
	done
	return 1
}

# Each prereq_LANG prints why it cannot run and fails, or succeeds.
prereq_python() {
	python_with_psycopg >/dev/null || { echo "no python3 with psycopg 3 (python3-psycopg)"; return 1; }
}
prereq_c() {
	command -v cc >/dev/null || { echo "no C compiler"; return 1; }
	command -v pg_config >/dev/null && [[ -f $(pg_config --includedir)/libpq-fe.h ]] ||
		{ echo "no libpq-fe.h (libpq-dev)"; return 1; }
}
prereq_node() {
	command -v node >/dev/null || { echo "no node (nodejs)"; return 1; }
	command -v npm >/dev/null || { echo "no npm"; return 1; }
	if [[ ! -d $CLIENTS/node/node_modules/pg ]] &&
		! (cd "$CLIENTS/node" && timeout 120 npm ci --no-audit --no-fund >"$SCRATCH/npm-ci.log" 2>&1); then
		echo "npm ci could not install pg from the npm registry (see npm-ci.log)"
		return 1
	fi
}
prereq_go() {
	command -v go >/dev/null || { echo "no go (golang-go)"; return 1; }
	[[ -d /usr/share/gocode/src/github.com/jackc/pgx/v4 ]] ||
		{ echo "no pgx v4 sources (golang-github-jackc-pgx-v4-dev)"; return 1; }
}

# Each cmd_LANG sets cmd to the command of the test (a program, for timeout)
# and probe to the exit probe's (the program itself, to be signalled; cmd
# builds it where it needs building); each conf_LANG sets cmd to the
# language's conformance driver.
cmd_python() {
	cmd=("$(python_with_psycopg)" "$CLIENTS/python/test_e2e.py")
	probe=("$(python_with_psycopg)" "$CLIENTS/python/exit_probe.py")
}
cmd_c() {
	cmd=(make -C "$CLIENTS/c" --no-print-directory BUILD="$SCRATCH/c" test "$SCRATCH/c/exit_probe")
	probe=("$SCRATCH/c/exit_probe")
}
cmd_node() {
	cmd=(bash -c 'cd "$1" && node test/e2e.js' _ "$CLIENTS/node")
	probe=(node "$CLIENTS/node/test/exit_probe.js")
}
cmd_go() {
	# GOPATH mode, offline: pgx v4 from Debian's /usr/share/gocode, and the
	# package itself under a GOPATH of its own.
	mkdir -p "$SCRATCH/gopath/src/wfengine"
	ln -sfn "$CLIENTS/go" "$SCRATCH/gopath/src/wfengine/worker"
	cmd=(env GOCACHE="$SCRATCH/gocache" GO111MODULE=off GOPROXY=off
		GOPATH="$SCRATCH/gopath:/usr/share/gocode"
		bash -c 'cd "$1" && go vet . ./example ./exitprobe && go test -count=1 -v . &&
			go build -o "$2" ./exitprobe' _ "$SCRATCH/gopath/src/wfengine/worker" "$SCRATCH/go-exitprobe")
	probe=("$SCRATCH/go-exitprobe")
}

conf_python() { cmd=("$(python_with_psycopg)" "$CLIENTS/python/conformance.py"); }
conf_c() {
	cmd=(bash -c 'make -s -C "$1" --no-print-directory BUILD="$2" "$2/conformance" && "$2/conformance"'
		_ "$CLIENTS/c" "$SCRATCH/c")
}
conf_node() { cmd=(bash -c 'cd "$1" && node test/conformance.js' _ "$CLIENTS/node"); }
conf_go() {
	cmd_go
	cmd=("${cmd[@]:0:${#cmd[@]}-4}" 'cd "$1" && go test -count=1 -run "^TestConformance$" .' _ "$SCRATCH/gopath/src/wfengine/worker")
}

# fresh_db DB: drops and creates DB with wfengine
fresh_db() {
	"${PSQL[@]}" -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" &&
		PGDATABASE=$1 "${PSQL[@]}" -c 'CREATE EXTENSION wfengine'
}

langs=("$@")
((${#langs[@]})) || langs=(python c node go)
for lang in "${langs[@]}"; do
	if ! why=$("prereq_$lang"); then
		echo "client $lang: skipped ($why)"
		continue
	fi
	db=wf_client_$lang
	cdb=wf_conformance_$lang
	if ! fresh_db "$db" || ! fresh_db "$cdb"; then
		echo "client $lang: FAILED (could not create database $db or $cdb)"
		failed=1
		continue
	fi
	echo "--- client $lang"
	"cmd_$lang"
	PGDATABASE=$db timeout -k 10 "$STEP_TIMEOUT" "${cmd[@]}"
	rc=$?
	erc=0
	if ((rc == 0)); then
		echo "--- client $lang: exit on SIGTERM"
		PGDATABASE=$db timeout -k 10 "$STEP_TIMEOUT" bash "$ROOT/test/scripts/client_exit.sh" "${probe[@]}"
		erc=$?
	fi
	echo "--- client $lang: conformance"
	"conf_$lang"
	PGDATABASE=$cdb timeout -k 10 "$STEP_TIMEOUT" bash "$ROOT/test/conformance/run.sh" "$lang" "${cmd[@]}"
	crc=$?
	if ((rc == 0 && erc == 0 && crc == 0)); then
		echo "client $lang: passed"
	elif ((rc != 0)); then
		echo "client $lang: FAILED (exit status $rc$( ((crc)) && echo "; conformance: exit status $crc"))"
		failed=1
	elif ((erc != 0)); then
		echo "client $lang: FAILED (exit on SIGTERM, test/scripts/client_exit.sh$( ((crc)) && echo "; conformance: exit status $crc"))"
		failed=1
	else
		echo "client $lang: FAILED (conformance: exit status $crc)"
		failed=1
	fi
	"${PSQL[@]}" -c "DROP DATABASE IF EXISTS $db" -c "DROP DATABASE IF EXISTS $cdb" || true
done
exit $failed
