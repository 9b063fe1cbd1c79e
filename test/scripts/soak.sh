#!/usr/bin/env bash
# soak.sh — what `make soak` runs: the crash loop of test/t/100_crash_loop.pl
# with SOAK_KILLS kills of the postmaster under load (default 1000; `make
# test` runs it with 20).  Installs missing packages, builds and installs
# like `make test`; as root, the TAP test runs as postgres in a copy of the
# tree (initdb refuses root).  The last line is prove's "Result: PASS/FAIL".
#
# Usage: make soak [SOAK_KILLS=N]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

kills=${SOAK_KILLS:-1000}
wf_log "dependencies"
wf_deps
wf_log "build and install"
wf_build
wf_install
wf_log "crash loop: $kills kills"
start=$SECONDS
as_unpriv env WF_CRASH_KILLS="$kills" make --no-print-directory PG_CONFIG="$PG_CONFIG" \
	prove_installcheck PROVE_TESTS=test/t/100_crash_loop.pl PROVE_FLAGS=-v
echo "soak: $kills kills in $((SECONDS - start)) s"
