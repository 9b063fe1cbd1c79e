#!/usr/bin/env bash
# apifuzz.sh — what `make fuzz-api` runs: the model-based fuzzer of the SQL
# API (test/apifuzz/apifuzz.py, docs/testing.md "The API fuzzer") for a long
# time, in throw-away clusters (pg_virtualenv, wfengine and pg_cron
# preloaded, the test approval key).  Installs missing packages, builds and
# installs like `make test`.
#
# Environment knobs:
#   FUZZ_API_SECONDS    how long to fuzz, in all (default 3600)
#   FUZZ_API_SEQUENCES  a number of sequences instead (per phase)
#   FUZZ_API_SEED       the base seed (default: from the clock; printed)
#   FUZZ_API_STEPS      steps per sequence (default 50)
#   FUZZ_API_WORKER     off: wf.tick() drives time (the engine worker off,
#                       as in make test); on: the engine worker runs and the
#                       fuzzer waits for it after each step; both (default):
#                       half the time each, in two clusters
#
# A failing sequence is shrunk and printed as SQL per session, and saved as
# JSON under test/apifuzz/findings/ (apifuzz.py --replay FILE runs it again
# against a server).  The last line is the fuzzer's summary of the last
# phase; the exit status is non-zero when a sequence failed.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

seconds=${FUZZ_API_SECONDS:-3600}
seed=${FUZZ_API_SEED:-$(($(date +%s) % 100000))}
steps=${FUZZ_API_STEPS:-50}
worker=${FUZZ_API_WORKER:-both}
findings=$WF_ROOT/test/apifuzz/findings

# python3 that has psycopg 3 (Debian's python3-psycopg)
py=
for cand in /usr/bin/python3 python3; do
	if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import psycopg' 2>/dev/null; then
		py=$cand
		break
	fi
done

if [[ ${1:-} == --in-virtualenv ]]; then
	shift
	# as root, the server's user must be able to read the tree: the fuzzer
	# is a client, it runs as the invoking user
	exec "$py" "$WF_ROOT/test/apifuzz/apifuzz.py" --database wf_apifuzz "$@"
fi

wf_log "dependencies"
wf_deps
if [[ -z $py ]]; then
	echo "apifuzz: no python3 with psycopg 3 (python3-psycopg)" >&2
	exit 1
fi
wf_log "build and install"
wf_build
wf_install
mkdir -p "$findings"

case $worker in
off | on) phases=("$worker") ;;
both) phases=(off on) ;;
*)
	echo "FUZZ_API_WORKER must be off, on or both, not $worker" >&2
	exit 2
	;;
esac
limit=(--seconds "$((seconds / ${#phases[@]}))")
if [[ -n ${FUZZ_API_SEQUENCES:-} ]]; then limit=(--sequences "$FUZZ_API_SEQUENCES"); fi

rc=0
for phase in "${phases[@]}"; do
	wf_log "API fuzzer, engine worker $phase, seed $seed, ${limit[*]}, $steps steps per sequence"
	WF_WORKER_ENABLED=$phase wf_bg wf_virtualenv bash "$WF_ROOT/test/scripts/apifuzz.sh" --in-virtualenv \
		--seed "$seed" "${limit[@]}" --steps "$steps" --save "$findings" --stats || rc=$?
	seed=$((seed + 1))
done
exit "$rc"
