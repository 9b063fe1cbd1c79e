#!/usr/bin/env bash
# test.sh — what `make test` runs: install missing packages, build, install,
# then every test suite, counting results per individual test:
#
#   in throw-away clusters (pg_virtualenv, wfengine + pg_cron preloaded),
#   group a in one:
#     regress     pg_regress over the Makefile's REGRESS list
#     isolation   pg_isolation_regress over test/isolation/specs/*.spec
#     pgtap       pg_prove over test/pgtap/*.sql
#     schema      test/definitions/check.py: the JSON Schema of definitions
#                 against the C validator, one test per definition file
#     apifuzz     test/apifuzz/apifuzz.py: the model-based API fuzzer with a
#                 fixed seed (APIFUZZ_SEED, default 1), APIFUZZ_SEQUENCES
#                 (default 200) sequences of APIFUZZ_STEPS (default 30)
#                 steps, in a database of its own; TAP, one test per
#                 sequence
#   group b in a second one, at the same time (these mostly wait):
#     docs        test/scripts/doctest.pl: the ```sql blocks of README.md and
#                 docs/*.md, each file in a fresh database, output compared
#                 with the ```text block after each; one test per block
#     clients     test/scripts/clients.sh: the end-to-end test of each worker
#                 library in clients/ (python, c, node, go), one test per
#                 language; a language whose toolchain is missing is
#                 skipped (named in the note), not passed
#   outside them, started first and run in the background while the groups
#   run (their output shown when they are done):
#     fuzz        test/scripts/fuzz.sh: each libFuzzer target (definition,
#                 duration, cron, mapping, envelope, jsonset, jsontext) for
#                 FUZZ_SECONDS (default 10) in a scratch cluster of its own;
#                 one test per target
#     tap         as a non-root user: prove -j3 over test/t/*.pl, the
#                 slowest first (TAP_SLOW_FIRST; PostgreSQL::Test::Cluster
#                 runs its own clusters, and initdb refuses root)
#
# `make installcheck` stops at its first failing half, so regress and
# isolation are run as two invocations of it (ISOLATION= / REGRESS= on the
# command line) and a regress failure does not hide the isolation results.
# Every suite runs even when an earlier one failed.  A suite that could not
# even start (build/install failure, server did not start, time budget gone)
# counts as 1 failed test.
#
# The last line printed is exactly "N passed, N failed"; the exit status is
# non-zero when anything failed.
#
# Environment knobs: TAP_JOBS (TAP test files run at once, default 3),
# WF_TEST_BUDGET (seconds for the whole run, default 1500),
# WF_KEEP_TMP=1 (keep the scratch directory with the logs).
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

RESULTS=$WF_TMP/results # suite <TAB> passed <TAB> failed <TAB> note
STARTED=$WF_TMP/virtualenv-started

# per-suite time caps (seconds); all are also bounded by the overall budget
CAP_REGRESS=600
CAP_ISOLATION=300
CAP_PGTAP=300
CAP_SCHEMA=120
CAP_DOCS=300
CAP_CLIENTS=900
CAP_APIFUZZ=240
CAP_FUZZ=240
CAP_TAP=1200

record() {
	printf '%s\t%d\t%d\t%s\n' "$1" "$2" "$3" "${4:-}" >>"$RESULTS"
}

recorded() {
	[[ -s $RESULTS ]] && cut -f1 "$RESULTS" | grep -qx -- "$1"
}

have_isolation() { compgen -G "$WF_ROOT/test/isolation/specs/*.spec" >/dev/null; }
have_pgtap() { compgen -G "$WF_ROOT/test/pgtap/*.sql" >/dev/null; }
have_tap() { compgen -G "$WF_ROOT/test/t/*.pl" >/dev/null; }
have_docs() { [[ -f $WF_ROOT/test/scripts/doctest.pl ]]; }
have_clients() { [[ -f $WF_ROOT/test/scripts/clients.sh ]]; }
have_apifuzz() { [[ -f $WF_ROOT/test/apifuzz/apifuzz.py ]]; }

# python3 that has psycopg 3 (Debian's python3-psycopg), as clients.sh finds it
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

# Suites run inside pg_virtualenv, in order.
virtualenv_suites() { # virtualenv_suites [GROUP]: the suites of group a, b, or both
	if [[ ${1:-a} == a ]]; then
		echo regress
		if have_isolation; then echo isolation; fi
		if have_pgtap; then echo pgtap; fi
		echo schema
		if have_apifuzz; then echo apifuzz; fi
	fi
	if [[ ${1:-b} == b ]]; then
		if have_docs; then echo docs; fi
		if have_clients; then echo clients; fi
	fi
}

# Seconds a suite may take: its cap, bounded by what is left of the budget.
suite_timeout() {
	local cap=$1 left
	left=$((WF_DEADLINE - $(date +%s)))
	if ((left < cap)); then cap=$left; fi
	echo "$cap"
}

# count_pg_regress LOG: prints "PASSED FAILED".  pg_regress and
# pg_isolation_regress (PG 15) print one line per test:
#   "test 001_install                 ... ok           12 ms"
#   "     name                        ... FAILED       30 ms"   (parallel group)
#   "test name                        ... failed (ignored) ..."
# An ignored failure does not fail the run, so it is counted as passed.
count_pg_regress() {
	awk '
		/^(test +|     +)?[^ ]+ +\.\.\. +ok( |$)/ { p++; next }
		/^(test +|     +)?[^ ]+ +\.\.\. +failed \(ignored\)/ { p++; next }
		/^(test +|     +)?[^ ]+ +\.\.\. +(FAILED|failed)/ { f++; next }
		END { printf "%d %d\n", p, f }
	' "$1"
}

# count_tap LOG: prints "PASSED FAILED" from the summary that prove and
# pg_prove (both TAP::Harness) print at the end of a non-verbose run:
#
#   Test Summary Report
#   -------------------
#   t/b.pl (Wstat: 256 (exited 1) Tests: 3 Failed: 1)
#     Parse errors: Bad plan.  You planned 5 tests but ran 2.
#   Files=5, Tests=10,  0 wallclock secs (...)
#
# "Tests=M" is the number of assertions that ran in all files.  For every file
# of the summary report, "Failed: F" failed assertions, plus the planned ones
# that never ran (a "Bad plan" parse error); a file that exited non-zero or
# has TAP parse errors but no such count (died before any test, no plan)
# counts as 1 failed.  Files that only list "TODO passed" are not failures.
# passed = M - sum(F).  This relies only on the final summary, which TAP::Harness
# always prints, not on per-test lines (which need --verbose and can be mixed
# up with the tests' own stderr).  No "Files=" line at all means the harness
# never got to run: "0 0", and the caller turns the non-zero exit into 1 failure.
count_tap() {
	awk '
		function flush() {
			if (!infile) return
			extra = planned - ran; if (extra < 0) extra = 0
			n = ff + extra
			if (n == 0 && (wstat != 0 || perr)) n = 1
			failed += n; failedasserts += ff
			infile = 0
		}
		/ \(Wstat: [0-9]+.* Tests: [0-9]+ Failed: [0-9]+\)$/ {
			flush()
			infile = 1; perr = 0; planned = 0; ran = 0
			match($0, /Wstat: [0-9]+/); wstat = substr($0, RSTART + 7, RLENGTH - 7) + 0
			match($0, /Failed: [0-9]+\)$/); ff = substr($0, RSTART + 8, RLENGTH - 9) + 0
			next
		}
		infile && /^  Parse errors:/ {
			perr = 1
			if (match($0, /You planned [0-9]+ tests but ran [0-9]+/)) {
				split(substr($0, RSTART, RLENGTH), w, " ")
				planned = w[3] + 0; ran = w[7] + 0
			}
			next
		}
		/^Files=[0-9]+, Tests=[0-9]+/ {
			flush()
			match($0, /Tests=[0-9]+/); total = substr($0, RSTART + 6, RLENGTH - 6) + 0
			seen = 1
		}
		END {
			flush()
			if (!seen) { print "0 0"; exit }
			p = total - failedasserts; if (p < 0) p = 0
			printf "%d %d\n", p, failed
		}
	' "$1"
}

# count_fuzz LOG: prints "PASSED FAILED" from the lines fuzz.sh prints per
# target, "fuzz target NAME: passed (...)" or "fuzz target NAME: FAILED ...".
count_fuzz() {
	awk '
		/^fuzz target [^ ]+: passed/ { p++; next }
		/^fuzz target [^ ]+: FAILED/ { f++; next }
		END { printf "%d %d\n", p, f }
	' "$1"
}

# count_doctest LOG: prints "PASSED FAILED" from the lines doctest.pl prints
# per documentation file, "doc FILE: N blocks, P passed, F failed".
count_doctest() {
	awk '
		/^doc [^ ]+: [0-9]+ blocks, [0-9]+ passed, [0-9]+ failed$/ { p += $5; f += $7 }
		END { printf "%d %d\n", p, f }
	' "$1"
}

# count_clients LOG: prints "PASSED FAILED NOTE" from the lines clients.sh
# prints per language, "client NAME: passed", "client NAME: FAILED ..." or
# "client NAME: skipped (why)"; NOTE names the skipped languages.
count_clients() {
	awk '
		/^client [^ ]+: passed$/ { p++; next }
		/^client [^ ]+: FAILED/ { f++; next }
		/^client [^ ]+: skipped/ { sub(/:$/, "", $2); s = s (s ? ", " : "") $2 }
		END { printf "%d %d%s\n", p, f, s ? " skipped: " s : "" }
	' "$1"
}

# Names of the test files a TAP summary reports as failed (one per line).
tap_failed_files() {
	awk '/ \(Wstat: [0-9]+.* Tests: [0-9]+ Failed: [0-9]+\)$/ &&
		!/\(Wstat: 0 Tests: [0-9]+ Failed: 0\)$/ { print $1 }' "$1"
}

# show_file head|tail FILE MAXLINES: print (the first or last lines of) FILE.
show_file() {
	local n
	n=$(wc -l <"$2")
	if ((n > $3)); then
		echo "----- $2 ($n lines, $1 $3)"
	else
		echo "----- $2 ($n lines)"
	fi
	"$1" -n "$3" "$2"
}

# Diagnostics printed after a failed suite: the start of regression.diffs
# (where the first differing test is), the end of each failed TAP test's
# regress_log_* (where it died), and the lines of its servers' logs that
# say a process died or the server stopped (a node's log is gone with the
# scratch directory, and the test framework sets restart_after_crash off:
# one crashed backend stops the node).
diagnose() {
	local suite=$1 log=$2 dir f name
	case $suite in
	regress | isolation)
		local -a diffs=("$WF_ROOT/results/regression.diffs" "$WF_ROOT/regression.diffs")
		[[ $suite == isolation ]] && diffs=("$WF_ROOT/output_iso/regression.diffs")
		for f in "${diffs[@]}"; do
			if [[ -s $f ]]; then show_file head "$f" 300; fi
		done
		;;
	tap)
		dir=$(wf_unpriv_tree)/tmp_check/log
		local -a failed_files
		mapfile -t failed_files < <(tap_failed_files "$log")
		if ((${#failed_files[@]} == 0)); then failed_files=("$dir"/regress_log_*); fi
		for f in "${failed_files[@]}"; do
			name=$(basename "$f" .pl)
			name=${name#regress_log_}
			if [[ -s $dir/regress_log_$name ]]; then show_file tail "$dir/regress_log_$name" 80; fi
			for f in "$dir/${name}"_*.log; do
				[[ -s $f ]] || continue
				if grep -qE 'terminated by signal|exited with exit code|PANIC|TRAP:|shutting down|database system is shut down' "$f"; then
					echo "----- $f: processes that died, and the server's stops"
					grep -E -B3 'terminated by signal|exited with exit code|PANIC|TRAP:|shutting down|database system is shut down' "$f" | tail -40
				fi
			done
		done
		;;
	esac
}

# run_suite NAME KIND CMD...: run CMD (stdin closed, output shown and logged),
# count its results with count_KIND, record them; diagnose on failure.
run_suite() {
	local name=$1 kind=$2 log=$WF_TMP/$1.log rc p f note="" start=$SECONDS
	shift 2
	wf_log "suite $name"
	# In the background (see wf_bg), so an interrupt is handled at once.
	rm -f "$log.rc"
	{
		rc=0
		"$@" </dev/null 2>&1 || rc=$?
		echo "$rc" >"$log.rc"
	} | tee "$log" &
	wait $! || true
	rc=$(cat "$log.rc" 2>/dev/null || echo 130)
	read -r p f note < <("count_$kind" "$log")
	if ((rc == 124 || rc == 137)); then
		f=$((f + 1)) note="timed out${note:+; $note}"
	elif ((rc != 0 && f == 0)); then
		f=1 note="exit status $rc"
		if ((p == 0)); then note="did not run (exit status $rc)"; fi
	elif ((rc == 0 && p + f == 0)); then
		note="no tests found"
	fi
	record "$name" "$p" "$f" "$note"
	echo "--- $name: $p passed, $f failed${note:+ ($note)} in $((SECONDS - start)) s"
	if ((f > 0)); then diagnose "$name" "$log" || true; fi
	return 0
}

# Runs a suite unless the time budget is gone; budget-exhausted suites fail.
timed_suite() { # timed_suite NAME KIND CAP CMD...
	local name=$1 kind=$2 secs
	secs=$(suite_timeout "$3")
	shift 3
	if ((secs < 20)); then
		record "$name" 0 1 "not run: time budget exhausted"
		return 0
	fi
	if [[ $1 == as_unpriv ]]; then # a function: the timeout goes inside it
		shift
		run_suite "$name" "$kind" as_unpriv timeout -k 30 "$secs" "$@"
	else
		run_suite "$name" "$kind" timeout -k 30 "$secs" "$@"
	fi
}

# PostgreSQL::Test::Cluster stops its nodes from an END block, which never
# runs when a test is killed (timeout, crash of the perl process), and pg_ctl
# detaches the postmasters from our process group: stop any node still
# running under tmp_check/ so it does not outlive the run.
stop_leftover_nodes() {
	local dir=$WF_ROOT/tmp_check pidfile
	if ((EUID == 0)); then dir=$WF_TMP/unpriv-src/tmp_check; fi
	[[ -d $dir ]] || return 0
	while IFS= read -r -d '' pidfile; do
		echo "stopping leftover TAP node in ${pidfile%/postmaster.pid}"
		as_unpriv pg_ctl -D "${pidfile%/postmaster.pid}" -m immediate -w stop || true
	done < <(find "$dir" -name postmaster.pid -print0 2>/dev/null)
}

# ---------------------------------------------------------------------------
# Inside pg_virtualenv (re-invoked by main, once per group): the suites of
# virtualenv_suites GROUP.
in_virtualenv() { # in_virtualenv GROUP: the suites of that group (virtualenv_suites)
	local group=$1
	: "${WF_DEADLINE:=$(($(date +%s) + ${WF_TEST_BUDGET:-1500}))}"
	: >"$STARTED.$group"
	echo "cluster ($group): PostgreSQL $(psql -XAtqc 'SHOW server_version') on $PGHOST:$PGPORT," \
		"shared_preload_libraries=$(psql -XAtqc 'SHOW shared_preload_libraries')"
	if [[ $group == b ]]; then
		in_virtualenv_b
	else
		in_virtualenv_a
	fi
	# A failure makes pg_virtualenv print the tail of the server log.
	! awk -F '\t' -v g="$(virtualenv_suites "$group" | tr '\n' ' ')" \
		'index(" " g, " " $1 " ") && $3 > 0 { bad = 1 } END { exit !bad }' "$RESULTS"
}

# group a: pg_regress, isolation, pgTAP, the schema check, the API fuzzer
in_virtualenv_a() {
	rm -rf "$WF_ROOT/results" "$WF_ROOT/output_iso" "$WF_ROOT/regression.diffs" \
		"$WF_ROOT/regression.out"

	timed_suite regress pg_regress $CAP_REGRESS \
		make -C "$WF_ROOT" --no-print-directory PG_CONFIG="$PG_CONFIG" installcheck ISOLATION=

	if have_isolation; then
		timed_suite isolation pg_regress $CAP_ISOLATION \
			make -C "$WF_ROOT" --no-print-directory PG_CONFIG="$PG_CONFIG" installcheck REGRESS=
	fi

	if have_pgtap; then
		# pg_prove runs each file through psql in PGDATABASE: give it a fresh
		# database with pgTAP installed.
		if psql -XqAt -v ON_ERROR_STOP=1 -c 'CREATE DATABASE wf_pgtap' &&
			PGDATABASE=wf_pgtap psql -XqAt -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION pgtap'; then
			PGDATABASE=wf_pgtap timed_suite pgtap tap $CAP_PGTAP \
				make -C "$WF_ROOT" --no-print-directory PG_CONFIG="$PG_CONFIG" pgtap \
				PG_PROVE="pg_prove --failures"
		else
			record pgtap 0 1 "not run: could not create database wf_pgtap"
		fi
	fi

	# docs/definition.schema.json against the C validator: every definition
	# under test/definitions/ through both (TAP, one test per file).
	timed_suite schema tap $CAP_SCHEMA \
		prove --exec python3 "$WF_ROOT/test/definitions/check.py"
	if have_apifuzz; then
		# The model-based API fuzzer, a fixed seed: TAP through prove, one
		# test per sequence.  It needs python3 with psycopg 3 (deps.sh).
		local py
		py=$(python_with_psycopg) || py=/usr/bin/python3
		timed_suite apifuzz tap $CAP_APIFUZZ \
			prove --exec "$py" "$WF_ROOT/test/apifuzz/apifuzz.py" :: --tap \
			--database wf_apifuzz --seed "${APIFUZZ_SEED:-1}" \
			--sequences "${APIFUZZ_SEQUENCES:-200}" --steps "${APIFUZZ_STEPS:-30}" \
			--save "$WF_TMP/apifuzz-findings"
	fi
}

# group b, in a cluster of its own beside group a's (these suites mostly
# wait: on notifications, on workers draining): the docs and the clients
in_virtualenv_b() {
	if have_docs; then
		# Each documentation file in a database of its own (doctest.pl makes
		# and drops them), as the superuser pg_virtualenv gives us.
		timed_suite docs doctest $CAP_DOCS perl "$WF_ROOT/test/scripts/doctest.pl"
	fi
	if have_clients; then
		# The worker libraries of clients/, each driving the order workflow.
		timed_suite clients clients $CAP_CLIENTS bash "$WF_ROOT/test/scripts/clients.sh"
	fi
}

# check_released: every released install or upgrade script listed in
# sql/released.sha256 is byte for byte what was released (a released script
# never changes; schema changes go into the next upgrade script).  One test
# per listed script.
check_released() {
	local p=0 f=0 line
	while read -r line; do
		if [[ $line == *': OK' ]]; then
			p=$((p + 1))
		else
			f=$((f + 1))
			echo "*** released script changed: $line"
		fi
	done < <(cd "$WF_ROOT/sql" && sha256sum -c released.sha256 2>&1 || true)
	record released "$p" "$f" "$(wc -l <"$WF_ROOT/sql/released.sha256") frozen script(s)"
}

# prepare_prev_release: the source of every release of sql/releases, as
# `git archive` of its commit, for the TAP tests that build one (they run
# in a copy of the tree without .git): $WF_RELEASE_TARS/wfengine-<version>.tar
# (test/t/120_upgrade.pl builds 0.1.0), and the last one also as
# WF_PREV_RELEASE_TAR (test/t/127_rolling_upgrade.pl).  Without git or a
# commit (a tarball of `make dist`) the tests that need it say they are
# skipped.
prepare_prev_release() {
	local version commit
	mkdir -p "$WF_TMP/releases"
	chmod 755 "$WF_TMP/releases"
	export WF_RELEASE_TARS=$WF_TMP/releases
	while IFS=$'\t' read -r version commit _; do
		[[ $version =~ ^[0-9] ]] || continue
		if git -C "$WF_ROOT" -c safe.directory='*' cat-file -e "$commit^{commit}" 2>/dev/null; then
			git -C "$WF_ROOT" -c safe.directory='*' archive -o "$WF_RELEASE_TARS/wfengine-$version.tar" "$commit"
			chmod 644 "$WF_RELEASE_TARS/wfengine-$version.tar"
			export WF_PREV_RELEASE_TAR=$WF_RELEASE_TARS/wfengine-$version.tar
		else
			unset WF_PREV_RELEASE_TAR
			echo "the commit of release $version ($commit) is not in this checkout: its build is skipped"
		fi
	done <"$WF_ROOT/sql/releases"
}

# The TAP test files that take longest, longest first (as measured with
# prove --timer in a clean-clone make test on a 2-core machine, the other
# suites running beside them; issue 32).  prove -j starts the files in the
# order given, so a long one started last would run on alone at the end;
# these start first and the short ones fill in.
TAP_SLOW_FIRST="129_move_deadline 100_crash_loop 150_noisy_neighbour 126_grow 080_backlog_drain
	140_failover 120_upgrade 129_move_race 128_move_crash 010_worker 127_rolling_upgrade
	125_move_partition 120_shards 155_shared_memory_fairness 030_standby 130_pgbouncer"

# tap_test_order: the TAP test files (relative to the tree), those of
# TAP_SLOW_FIRST first in its order, then every other in name order.
tap_test_order() {
	local name f
	local -A listed=()
	for name in $TAP_SLOW_FIRST; do
		f=test/t/$name.pl
		if [[ -f $WF_ROOT/$f ]]; then
			echo "$f"
			listed[$f]=1
		fi
	done
	for f in "$WF_ROOT"/test/t/*.pl; do
		f=test/t/${f##*/}
		if [[ -z ${listed[$f]:-} ]]; then echo "$f"; fi
	done
}

# run_tap_suite: the TAP suite, as a non-root user, three test files at a
# time (TAP_JOBS), the slowest first (tap_test_order), then any node left
# running is stopped.  main() runs it in the background while the other
# suites run.
run_tap_suite() {
	prepare_prev_release
	local who tests
	who=$(id -un)
	if ((EUID == 0)); then who=postgres; fi
	tests=$(tap_test_order | tr '\n' ' ')
	wf_log "TAP tests as $who in $(wf_unpriv_tree), ${TAP_JOBS:-3} at a time"
	timed_suite tap tap $CAP_TAP \
		as_unpriv make --no-print-directory PG_CONFIG="$PG_CONFIG" prove_installcheck \
		PROVE_FLAGS="-j${TAP_JOBS:-3} --timer" PROVE_TESTS="${tests% }"
	stop_leftover_nodes
}

# ---------------------------------------------------------------------------
main() {
	export WF_DEADLINE=$(($(date +%s) + ${WF_TEST_BUDGET:-1500}))
	local start=$SECONDS built=1 vrc=0 s
	: >"$RESULTS"
	local -a all_suites
	mapfile -t all_suites < <(virtualenv_suites)
	all_suites+=(fuzz)
	if have_tap; then all_suites+=(tap); fi

	wf_log "released scripts unchanged (sql/released.sha256)"
	check_released

	wf_log "dependencies"
	wf_deps || echo "deps.sh failed; trying to build anyway"

	wf_log "build (make PG_CONFIG=$PG_CONFIG)"
	if ! wf_build; then
		built=0
		echo "*** build failed"
	else
		wf_log "install (make install)"
		if ! wf_install; then
			built=0
			echo "*** make install failed"
		fi
	fi

	if ((built)); then
		# The TAP tests run their own clusters: they start first, in the
		# background (three files at a time), while the other suites run, and
		# their output is shown when they are done (run_tap_suite).
		local tap_pid=""
		if have_tap; then
			run_tap_suite >"$WF_TMP/tap.out" 2>&1 &
			tap_pid=$!
		fi

		# The libFuzzer targets, in their own cluster without wfengine
		# preloaded, also in the background (fails when clang is missing)
		local fuzz_pid
		timed_suite fuzz fuzz $CAP_FUZZ bash "$WF_ROOT/test/scripts/fuzz.sh" >"$WF_TMP/fuzz.out" 2>&1 &
		fuzz_pid=$!

		# The other suites in two clusters side by side (group b's suites
		# mostly wait); group b's output is shown when group a is done
		local b_pid brc=0
		rm -f "$STARTED".*
		export WF_WORKER_ENABLED=off
		WF_VENV_PORT=$(free_port) wf_virtualenv bash "$WF_ROOT/test/scripts/test.sh" --in-virtualenv b \
			>"$WF_TMP/virtualenv-b.out" 2>&1 &
		b_pid=$!
		wf_log "pg_virtualenv: regress, isolation, pgtap, schema, apifuzz (docs and clients beside them)"
		wf_bg wf_virtualenv bash "$WF_ROOT/test/scripts/test.sh" --in-virtualenv a || vrc=$?
		wait "$b_pid" || brc=$?
		wf_log "pg_virtualenv: docs, clients (run beside the suites above)"
		cat "$WF_TMP/virtualenv-b.out"
		for s in $(virtualenv_suites); do
			recorded "$s" && continue
			local g=a rc=$vrc
			if virtualenv_suites b | grep -qx -- "$s"; then g=b rc=$brc; fi
			if [[ ! -e $STARTED.$g ]]; then
				record "$s" 0 1 "not run: server did not start (pg_virtualenv exit $rc)"
			else
				record "$s" 0 1 "not run: test.sh --in-virtualenv $g exited with status $rc"
			fi
		done

		wf_log "fuzz: libFuzzer targets, ${FUZZ_SECONDS:-10} s each (run beside the suites above)"
		wait "$fuzz_pid" || true
		cat "$WF_TMP/fuzz.out"
		recorded fuzz || record fuzz 0 1 "not run: the background fuzz run ended without a result"

		if [[ -n $tap_pid ]]; then
			wf_log "TAP tests (started before the other suites, in the background)"
			wait "$tap_pid" || true
			cat "$WF_TMP/tap.out"
			recorded tap || record tap 0 1 "not run: the background TAP run ended without a result"
		fi
	else
		for s in "${all_suites[@]}"; do
			record "$s" 0 1 "not run: build/install failed"
		done
	fi

	local passed=0 failed=0 name p f note
	wf_log "summary ($((SECONDS - start)) s)"
	printf '%-10s %7s %7s  %s\n' suite passed failed note
	while IFS=$'\t' read -r name p f note; do
		printf '%-10s %7d %7d  %s\n' "$name" "$p" "$f" "$note"
		passed=$((passed + p)) failed=$((failed + f))
	done <"$RESULTS"
	for s in released regress isolation pgtap schema docs clients apifuzz fuzz tap; do
		recorded "$s" || printf '%-10s %7s %7s  %s\n' "$s" - - "skipped: no test files"
	done
	echo "$passed passed, $failed failed"
	((failed == 0))
}

# Ctrl-C / SIGTERM: stop the running suite (and everything under it), let
# pg_virtualenv drop its cluster, stop TAP nodes, remove the scratch dir.
on_signal() {
	trap '' INT TERM HUP
	echo "*** test.sh interrupted; stopping the running suite" >&2
	wf_kill_tree $$
	wait || true
	stop_leftover_nodes >/dev/null 2>&1 || true
	exit 130
}
trap on_signal INT TERM HUP

case ${1:-} in
--in-virtualenv) in_virtualenv "${2:-a}" ;;
"") main ;;
*)
	echo "usage: $0" >&2
	exit 2
	;;
esac
