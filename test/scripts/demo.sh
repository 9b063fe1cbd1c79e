#!/usr/bin/env bash
# demo.sh — what `make demo` runs: install missing packages, build, install,
# then, in a throw-away cluster with wfengine and pg_cron preloaded:
# CREATE EXTENSION wfengine, publish test/demo/order.json as "order", start a
# run, let the bundled worker (test/demo/worker.sh) drive it to the end
# (giving up after WF_DEMO_TIMEOUT seconds, default 60), and print the run's
# history, final status and wf.verify_run().
# Exits non-zero unless the run completed and verified.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

DEMO_DIR=$WF_ROOT/test/demo

# psql for scripts: no psqlrc, stop at the first error, bare values out.
PSQL=(psql -X -v ON_ERROR_STOP=1)
PSQL_VALUE=("${PSQL[@]}" -A -t -q)

in_virtualenv() {
	local run status verified spec worker_rc=0
	local input='{"amount": 42.50, "currency": "EUR", "customer": "alice@example.com", "sku": "WIDGET-7"}'

	wf_log "CREATE EXTENSION wfengine"
	"${PSQL[@]}" -q -c 'CREATE EXTENSION wfengine'
	"${PSQL[@]}" -c "SELECT extversion AS wfengine,
	                        current_setting('shared_preload_libraries') AS shared_preload_libraries
	                 FROM pg_extension WHERE extname = 'wfengine'"

	wf_log "publish definition 'order' from test/demo/order.json"
	spec=$(<"$DEMO_DIR/order.json")
	"${PSQL_VALUE[@]}" -v spec="$spec" <<'SQL'
SELECT format('published order version %s', wf.publish_definition('order', :'spec'::jsonb));
SQL

	wf_log "start a run"
	run=$("${PSQL_VALUE[@]}" -v input="$input" <<'SQL'
SELECT wf.start_run('order', :'input'::jsonb, 'demo-order-1001');
SQL
)
	echo "run $run, input $input"

	wf_log "worker: test/demo/worker.sh payments warehouse email"
	bash "$DEMO_DIR/worker.sh" --run "$run" --timeout "${WF_DEMO_TIMEOUT:-60}" \
		--name demo-worker payments warehouse email || worker_rc=$?

	wf_log "SELECT * FROM wf.history('$run')"
	# wrapped: long payloads wrap inside their column instead of the line
	local cols=200
	if [[ -t 1 ]]; then cols=$(tput cols 2>/dev/null || echo 200); fi
	((cols >= 120)) || cols=120
	"${PSQL[@]}" -P pager=off -P format=wrapped -P columns="$cols" \
		-v run="$run" <<'SQL'
SELECT * FROM wf.history(:'run'::uuid);
SQL

	status=$("${PSQL_VALUE[@]}" -v run="$run" <<'SQL'
SELECT wf.run_status(:'run'::uuid);
SQL
)
	verified=$("${PSQL_VALUE[@]}" -v run="$run" <<'SQL'
SELECT wf.verify_run(:'run'::uuid);
SQL
)
	wf_log "result"
	echo "wf.run_status('$run') = $status"
	echo "wf.verify_run('$run') = $verified"
	if [[ $status == completed && $verified == t && $worker_rc == 0 ]]; then
		echo "demo OK"
	else
		echo "demo FAILED (status $status, verified $verified, worker exit $worker_rc)"
		return 1
	fi
}

main() {
	wf_log "dependencies"
	wf_deps
	wf_log "build (make PG_CONFIG=$PG_CONFIG)"
	wf_build
	wf_log "install (make install)"
	wf_install
	wf_log "throw-away cluster (pg_virtualenv, shared_preload_libraries=wfengine,pg_cron)"
	wf_virtualenv bash "$WF_ROOT/test/scripts/demo.sh" --in-virtualenv
}

case ${1:-} in
--in-virtualenv) in_virtualenv ;;
"") main ;;
*)
	echo "usage: $0" >&2
	exit 2
	;;
esac
