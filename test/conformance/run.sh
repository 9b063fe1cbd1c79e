#!/usr/bin/env bash
# run.sh — the conformance scenario against one worker library
# (test/conformance/README.md).
#
#   bash test/conformance/run.sh LANGUAGE COMMAND...
#
# In the database of the libpq environment (wfengine created, as a
# superuser): publishes definition.json as "conformance", starts its three
# runs and creates wf_conformance_poll() (setup.sql), runs COMMAND (the
# library's driver) with WF_CONFORMANCE=1, then dumps the runs' history
# normalised (history.sql) and compares it with expected.txt.  Prints
# "conformance LANGUAGE: ok", or the difference; exits non-zero when the
# driver failed or the history differs.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lang=$1
shift
PSQL=(psql -X -q -v ON_ERROR_STOP=1)
out=$(mktemp)
trap 'rm -f -- "$out"' EXIT

if ! "${PSQL[@]}" -o /dev/null -v definition="$(cat "$HERE/definition.json")" -f "$HERE/setup.sql"; then
	echo "conformance $lang: FAILED (setup)"
	exit 1
fi
WF_CONFORMANCE=1 timeout -k 5 90 "$@"
rc=$?
if ! "${PSQL[@]}" -At -f "$HERE/history.sql" >"$out"; then
	echo "conformance $lang: FAILED (could not read the history)"
	exit 1
fi
if ! diff -u --label expected.txt --label "$lang" "$HERE/expected.txt" "$out"; then
	echo "conformance $lang: FAILED (the history differs from test/conformance/expected.txt)"
	exit 1
fi
if ((rc != 0)); then
	echo "conformance $lang: FAILED (the driver exited with status $rc)"
	exit 1
fi
echo "conformance $lang: ok"
