#!/usr/bin/env bash
# fuzz.sh — what `make fuzz` runs (and the `fuzz` suite of `make test`):
# build the libFuzzer harness test/fuzz/build/wfengine_fuzz.so (test/fuzz/Makefile,
# clang), start a throw-away cluster in which wfengine is not preloaded,
# load the harness there by absolute path and run each fuzz target for a
# while.  See the "Fuzzing" section of docs/testing.md.
#
#   bash test/scripts/fuzz.sh                  every target, FUZZ_SECONDS each
#   bash test/scripts/fuzz.sh --repro T FILE   run FILE once through target T
#                                              (FUZZ_SELFTEST=1: in the
#                                              build with the planted bugs)
#   bash test/scripts/fuzz.sh --selftest       build with the planted bugs
#                                              (WF_FUZZ_SELFTEST) and check
#                                              that both are found within
#                                              FUZZ_SELFTEST_SECONDS (300)
#
# Per target it prints one line "fuzz target T: passed (...)" or "fuzz
# target T: FAILED (...)"; the last line is "fuzz: N passed, N failed" and
# the exit status is non-zero when a target failed.  A target passes when
# libFuzzer ran for its time and reported nothing: no crash, no
# undefined-behaviour trap, no input slower than FUZZ_TIMEOUT, no failed
# invariant, no leak.  A finding is copied to test/fuzz/build/findings/T/, shown
# with a symbolized stack, and the command that reproduces it is printed.
# When clang or the build is missing, every target fails.
#
# Environment knobs: FUZZ_SECONDS (per target, default 10), FUZZ_TARGETS
# (default "definition duration cron mapping envelope jsonset jsontext"), FUZZ_TIMEOUT (seconds one
# input may take, default 10), FUZZ_LEAK_LIMIT_KB (growth of long-lived
# memory that counts as a leak, default 1024), WF_KEEP_TMP=1 (keep the
# scratch directory with the cluster and the logs), CLANG (the compiler,
# default clang).
#
# The corpus each run builds up is kept in test/fuzz/build/corpus/T/ and seeds
# the next run, so repeated long runs go on where the last one stopped.
set -euo pipefail

own_tmp=1
if [[ -n ${WF_TMP:-} ]]; then own_tmp=0; fi
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

FUZZ_SECONDS=${FUZZ_SECONDS:-10}
FUZZ_TARGETS=${FUZZ_TARGETS:-definition duration cron mapping envelope jsonset jsontext}
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-10}
FUZZ_LEAK_LIMIT_KB=${FUZZ_LEAK_LIMIT_KB:-1024}
CLANG=${CLANG:-clang}

FUZZ_DIR=$WF_ROOT/test/fuzz
OUT=$FUZZ_DIR/build # corpus/ and findings/ of past runs
RUN=$WF_TMP/fuzz # cluster, socket, logs, working corpora (owned by the server's user)
PORT=$((20000 + RANDOM % 10000))
started=0
passed=0
failed=0

# run_pg CMD...: run CMD as the user the server runs as (postgres when root).
run_pg() {
	if ((EUID == 0)); then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

fuzz_psql() {
	run_pg psql -X -q -v ON_ERROR_STOP=1 -h "$RUN" -p "$PORT" "$@"
}

stop_cluster() {
	if ((started)); then
		run_pg pg_ctl -D "$RUN/data" -m immediate -w stop >/dev/null 2>&1 || true
		started=0
	fi
}

on_exit() {
	local rc=$?
	stop_cluster
	if ((own_tmp)); then wf_cleanup; fi
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT TERM HUP

# build [SELFTEST]: build the harness (into test/fuzz/build, or test/fuzz/build/selftest
# with the planted bugs); prints the path of the library.
build() {
	local selftest=${1:-0} out=build
	if ((selftest)); then out=build/selftest; fi
	if ! command -v "$CLANG" >/dev/null 2>&1; then
		echo "fuzz.sh: $CLANG not found (install the packages clang and libclang-rt-14-dev)" >&2
		return 1
	fi
	make -s -C "$FUZZ_DIR" --no-print-directory -j"$(nproc 2>/dev/null || echo 2)" \
		PG_CONFIG="$PG_CONFIG" CLANG="$CLANG" BUILD="$out" SELFTEST="$selftest" >&2 || return 1
	echo "$FUZZ_DIR/$out/wfengine_fuzz.so"
}

# start_cluster SO: initdb a scratch cluster (nothing preloaded, unix
# socket in $RUN only), start it, and create wf_fuzz() from a copy of SO.
start_cluster() {
	local so=$1
	mkdir -p "$RUN"
	if ((EUID == 0)); then chown postgres: "$RUN"; fi
	cp "$so" "$RUN/wfengine_fuzz.so"
	chmod 755 "$RUN/wfengine_fuzz.so"
	run_pg initdb -D "$RUN/data" -A trust -U postgres --no-sync >"$WF_TMP/fuzz-initdb.log" 2>&1 || {
		cat "$WF_TMP/fuzz-initdb.log"
		return 1
	}
	run_pg pg_ctl -D "$RUN/data" -l "$RUN/server.log" -w -t 60 \
		-o "-p $PORT -k $RUN -c listen_addresses='' -c fsync=off -c shared_buffers=16MB -c max_connections=10" \
		start >/dev/null || {
		cat "$RUN/server.log"
		return 1
	}
	started=1
	fuzz_psql -U postgres -d postgres -c 'CREATE DATABASE wf_fuzz'
	fuzz_psql -U postgres -d wf_fuzz -c "CREATE FUNCTION wf_fuzz(target text, args text[],
		log_file text DEFAULT NULL, leak_limit_kb int DEFAULT 1024) RETURNS int
		AS '$RUN/wfengine_fuzz.so', 'wf_fuzz' LANGUAGE C"
}

# wait_ready: after a crash the postmaster restarts; wait until it accepts
# connections again.
wait_ready() {
	local tries=60
	while ((tries-- > 0)); do
		if run_pg pg_isready -q -h "$RUN" -p "$PORT" -d wf_fuzz; then return 0; fi
		sleep 1
	done
	return 1
}

# symbolize LOG: print LOG, resolving the frames of our library
# ("(/path/wfengine_fuzz.so+0xOFF)") to function, file and line.
symbolize() {
	local line obj off loc
	while IFS= read -r line; do
		if [[ $line =~ \((/[^+\)]*wfengine_fuzz\.so)\+0x([0-9a-f]+)\)$ ]]; then
			obj=${BASH_REMATCH[1]} off=${BASH_REMATCH[2]}
			loc=$(addr2line -f -i -p -C -e "$obj" "$(printf '0x%x' $((16#$off - 1)))" 2>/dev/null |
				tr '\n' ' ' || true)
			printf '%s  %s\n' "$line" "${loc//$WF_ROOT\//}"
		else
			printf '%s\n' "$line"
		fi
	done <"$1"
}

# run_driver TARGET LOG ARGS...: run wf_fuzz(TARGET, ARGS) in a session of
# its own.  libFuzzer ends the session when it is done, so psql reports a
# lost connection even on success; the outcome is in LOG.
run_driver() {
	local target=$1 log=$2 arr="" a
	shift 2
	for a in "$@"; do arr+="${arr:+,}'${a//\'/\'\'}'"; done
	run_pg touch "$log"
	fuzz_psql -U postgres -d wf_fuzz \
		-c "SELECT wf_fuzz('$target', ARRAY[$arr]::text[], '$log', $FUZZ_LEAK_LIMIT_KB)" \
		>/dev/null 2>&1 || true
	wait_ready
}

# fuzz_target TARGET SECONDS: run one target, report and count the result.
fuzz_target() {
	local t=$1 secs=$2 work=$RUN/corpus/$1 art=$RUN/artifacts/$1/ log=$RUN/$1.log
	local keep=$OUT/corpus/$1 logoff stats f note="" found=()
	local -a args
	mkdir -p "$work" "$art" "$keep"
	cp "$FUZZ_DIR/corpus/$t"/* "$work"/
	cp -r "$keep"/. "$work"/ 2>/dev/null || true
	if ((EUID == 0)); then chown -R postgres: "$RUN/corpus" "$RUN/artifacts"; fi
	args=(-max_total_time="$secs" -timeout="$FUZZ_TIMEOUT" -print_final_stats=1
		-artifact_prefix="$art" -max_len=8192)
	if [[ -f $FUZZ_DIR/$t.dict ]]; then
		cp "$FUZZ_DIR/$t.dict" "$RUN/$t.dict"
		args+=(-dict="$RUN/$t.dict")
	elif [[ $t == mapping ]]; then
		cp "$FUZZ_DIR/definition.dict" "$RUN/$t.dict"
		args+=(-dict="$RUN/$t.dict")
	fi
	logoff=$(stat -c %s "$RUN/server.log")
	run_driver "$t" "$log" "${args[@]}" "$work"

	# what libFuzzer saved, and whether the backend died some other way
	mapfile -t found < <(find "$art" -maxdepth 1 -type f | sort)
	if grep -q '^Done [0-9]* runs in' "$log" && ((${#found[@]} == 0)) &&
		! grep -Eq 'wf_fuzz: FINDING|ERROR: libFuzzer|ALARM: working' "$log" &&
		! tail -c +"$((logoff + 1))" "$RUN/server.log" | grep -Eq 'terminated by signal|exited with exit code [^01]|PANIC|TRAP:'; then
		stats=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 | sed -e 's/[[:space:]]\+/ /g')
		note="$(grep -m1 -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}') runs; ${stats#* DONE }"
		echo "fuzz target $t: passed ($note)"
		passed=$((passed + 1))
	else
		echo "fuzz target $t: FAILED"
		failed=$((failed + 1))
		echo "----- libFuzzer output ($log, last 80 lines, symbolized)"
		symbolize "$log" | tail -n 80
		echo "----- server log since the start of the run (last 20 lines)"
		tail -c +"$((logoff + 1))" "$RUN/server.log" | tail -n 20
		mkdir -p "$OUT/findings/$t"
		cp "$log" "$OUT/findings/$t/"
		for f in "${found[@]}"; do
			cp "$f" "$OUT/findings/$t/"
			echo "finding: ${OUT#"$WF_ROOT"/}/findings/$t/$(basename "$f")"
			echo "  reproduce: bash test/scripts/fuzz.sh --repro $t ${OUT#"$WF_ROOT"/}/findings/$t/$(basename "$f")"
		done
		if ((${#found[@]} == 0)); then
			echo "  (no input was saved: see the output above)"
		fi
	fi
	# keep what this run learnt for the next one
	cp "$work"/* "$keep"/ 2>/dev/null || true
}

# repro TARGET FILE: run FILE once through TARGET and show the output.
repro() {
	local t=$1 file=$2 so log=$RUN/repro.log
	[[ -f $file ]] || {
		echo "fuzz.sh: no such file: $file" >&2
		return 2
	}
	so=$(build "${FUZZ_SELFTEST:-0}") || return 1
	start_cluster "$so" || return 1
	cp "$file" "$RUN/input"
	chmod 644 "$RUN/input"
	run_driver "$t" "$log" -timeout="$FUZZ_TIMEOUT" "$RUN/input"
	symbolize "$log"
	grep -q '^Executed .* in [0-9]* ms' "$log" && ! grep -Eq 'wf_fuzz: FINDING|ERROR: libFuzzer' "$log"
}

# selftest: build with WF_FUZZ_SELFTEST (a NULL dereference behind a
# definition the fuzzer has to construct, a leak behind a duration) and
# check that the harness reports both.
selftest() {
	local so secs=${FUZZ_SELFTEST_SECONDS:-300} ok=1 t
	so=$(build 1) || return 1
	start_cluster "$so" || return 1
	OUT=$FUZZ_DIR/build/selftest
	rm -rf "$OUT/findings" "$OUT/corpus"
	for t in definition duration; do
		fuzz_target "$t" "$secs" | tee "$WF_TMP/selftest-$t.out" || true
	done
	grep -q 'ERROR: libFuzzer: deadly signal' "$RUN/definition.log" || {
		echo "selftest: the planted NULL dereference was not found"
		ok=0
	}
	grep -q 'wf_fuzz: FINDING.*memory leak' "$RUN/duration.log" || {
		echo "selftest: the planted leak was not found"
		ok=0
	}
	if ((ok)); then echo "selftest: both planted bugs were found"; fi
	((ok))
}

main() {
	local so t
	wf_log "fuzz: build the harness (clang, fuzz/Makefile)"
	if ! so=$(build); then
		for t in $FUZZ_TARGETS; do
			echo "fuzz target $t: FAILED (not run: the harness did not build)"
			failed=$((failed + 1))
		done
		echo "fuzz: $passed passed, $failed failed"
		return 1
	fi
	wf_log "fuzz: start a scratch cluster (socket in $RUN, port $PORT)"
	if ! start_cluster "$so"; then
		for t in $FUZZ_TARGETS; do
			echo "fuzz target $t: FAILED (not run: the scratch cluster did not start)"
			failed=$((failed + 1))
		done
		echo "fuzz: $passed passed, $failed failed"
		return 1
	fi
	for t in $FUZZ_TARGETS; do
		wf_log "fuzz: target $t for $FUZZ_SECONDS s"
		fuzz_target "$t" "$FUZZ_SECONDS"
	done
	echo "fuzz: $passed passed, $failed failed"
	((failed == 0))
}

case ${1:-} in
--repro)
	[[ $# -eq 3 ]] || {
		echo "usage: $0 --repro TARGET FILE" >&2
		exit 2
	}
	repro "$2" "$(realpath "$3")"
	;;
--selftest) selftest ;;
"") main ;;
*)
	echo "usage: $0 [--repro TARGET FILE | --selftest]" >&2
	exit 2
	;;
esac
