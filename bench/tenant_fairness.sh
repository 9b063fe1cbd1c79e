#!/usr/bin/env bash
# bench/tenant_fairness.sh — does one tenant's flood slow another tenant's
# claims on a queue of the same name?  A measurement, never a test: it
# prints a table and writes bench/results/fairness-<stamp>/.
#
# Two tenants, "a" and "b", each with a one-step definition on queue
# "shared".  Tenant b's producer (pgbench -R) starts runs at a fixed rate;
# b's consumers claim with wait => '5 seconds' and complete.  The latency
# of a b task is claimed_at - created_at.  It is measured twice:
#
#   quiet   nothing else runs;
#   flood   tenant a has 100,000 ready tasks on its queue "shared" (started
#           before the case) and BENCH_A_CONSUMERS clients of a claim and
#           complete them as fast as they can during the case.
#
# Claims are per tenant: the claim index leads with the tenant, so b's
# claim never reads a's rows.  What the flood costs b is the machine's
# CPU and WAL shared with a's workers.
#
# Server: with PGHOST or PGPORT set, that server is used (wfengine
# preloaded, superuser).  Otherwise the script re-runs itself inside a
# throw-away pg_virtualenv cluster with fsync=on.
#
# Environment knobs:
#   BENCH_RATE          b's runs per second (default 50)
#   BENCH_DURATION      seconds per case (default 20)
#   BENCH_FLOOD         a's ready tasks (default 100000)
#   BENCH_A_CONSUMERS   a's consumer clients during the flood (default 4)
#   BENCH_B_CONSUMERS   b's consumer clients (default 2)
#   BENCH_DB            database created and dropped (default wffair)
#   BENCH_RESULTS       results directory (default bench/results)
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$BENCH_DIR/common.sh"
export PATH=/usr/lib/postgresql/$PG_MAJOR/bin:$PATH

RATE=${BENCH_RATE:-50}
DURATION=${BENCH_DURATION:-20}
FLOOD=${BENCH_FLOOD:-100000}
A_CONSUMERS=${BENCH_A_CONSUMERS:-4}
B_CONSUMERS=${BENCH_B_CONSUMERS:-2}
DB=${BENCH_DB:-wffair}
RESULTS_BASE=${BENCH_RESULTS:-$BENCH_DIR/results}

bench_in_virtualenv tenant_fairness "${BASH_SOURCE[0]}" "$@"

qdb() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" "$@"; }

stamp=$(date -u +%Y%m%d-%H%M%S)
RES=$RESULTS_BASE/fairness-$stamp
mkdir -p "$RES"
trap 'q -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true' EXIT

# every pgbench transaction acts as the tenant's role (the session user decides the tenant)
for t in a b; do
	cat >"$RES/producer_$t.sql" <<EOF
SET SESSION AUTHORIZATION bench_fair_$t;
SELECT wf.start_run('job', '{}');
RESET SESSION AUTHORIZATION;
EOF
	cat >"$RES/consumer_$t.sql" <<EOF
SET SESSION AUTHORIZATION bench_fair_$t;
SELECT coalesce(min(task_id), 0) AS task_id, coalesce(min(fence), 0) AS fence
  FROM wf.claim_tasks('shared', 'c' || :client_id, 1, '30 seconds', wait => '5 seconds') \gset
\if :task_id > 0
INSERT INTO public.bench_lat SELECT tenant_id, task_id, created_at, claimed_at FROM wf.tasks WHERE task_id = :task_id;
SELECT wf.complete_task(:task_id, :fence);
\endif
RESET SESSION AUTHORIZATION;
EOF
done

setup() {
	q -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
	qdb -c "CREATE EXTENSION wfengine" -c "
		DO \$\$ BEGIN
		  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'wf_tenant_a') THEN PERFORM wf.create_tenant('a'); END IF;
		  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'wf_tenant_b') THEN PERFORM wf.create_tenant('b'); END IF;
		  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bench_fair_a') THEN
		    CREATE ROLE bench_fair_a IN ROLE wfengine_admin, wfengine_worker, wf_tenant_a;
		  END IF;
		  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bench_fair_b') THEN
		    CREATE ROLE bench_fair_b IN ROLE wfengine_admin, wfengine_worker, wf_tenant_b;
		  END IF;
		END \$\$" \
		-c "CREATE TABLE public.bench_lat (tenant_id text, task_id bigint, created_at timestamptz, claimed_at timestamptz)" \
		-c "GRANT INSERT ON public.bench_lat TO PUBLIC" \
		-c "SET SESSION AUTHORIZATION bench_fair_a" \
		-c "SELECT wf.publish_definition('job', '{\"steps\": [{\"name\": \"s\", \"queue\": \"shared\"}]}')" \
		-c "SET SESSION AUTHORIZATION bench_fair_b" \
		-c "SELECT wf.publish_definition('job', '{\"steps\": [{\"name\": \"s\", \"queue\": \"shared\"}]}')" >/dev/null
}

printf 'case\ta_ready_at_start\ta_claimed\tb_tasks\tb_p50_ms\tb_p90_ms\tb_p99_ms\tb_max_ms\n' >"$RES/summary.tsv"
run_case() {
	local name=$1 apid=""
	setup
	if [[ $name == flood ]]; then
		qdb -c "SET SESSION AUTHORIZATION bench_fair_a" \
			-c "SELECT count(wf.start_run('job', '{}')) FROM generate_series(1, $FLOOD)" >/dev/null
		qdb -c "VACUUM ANALYZE wf.tasks"
	fi
	local a_ready
	a_ready=$(qdb -c "SELECT count(*) FROM wf.tasks WHERE tenant_id = 'a' AND status = 'ready'")
	pgbench -n -M prepared -c "$B_CONSUMERS" -j 1 -T "$((DURATION + 2))" \
		-f "$RES/consumer_b.sql" "$DB" >"$RES/$name.b_consumers.log" 2>&1 &
	local bpid=$!
	if [[ $name == flood ]]; then
		pgbench -n -M prepared -c "$A_CONSUMERS" -j 2 -T "$((DURATION + 2))" \
			-f "$RES/consumer_a.sql" "$DB" >"$RES/$name.a_consumers.log" 2>&1 &
		apid=$!
	fi
	sleep 1
	pgbench -n -M prepared -c 1 -j 1 -R "$RATE" -T "$DURATION" \
		-f "$RES/producer_b.sql" "$DB" >"$RES/$name.b_producer.log" 2>&1
	wait "$bpid" || true
	[[ -n $apid ]] && { wait "$apid" || true; }
	qdb -F $'\t' -c "
		SELECT '$name', $a_ready,
		       (SELECT count(*) FROM bench_lat WHERE tenant_id = 'a'),
		       count(*),
		       round((extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY claimed_at - created_at)) * 1000)::numeric, 2),
		       round((extract(epoch FROM percentile_cont(0.9) WITHIN GROUP (ORDER BY claimed_at - created_at)) * 1000)::numeric, 2),
		       round((extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY claimed_at - created_at)) * 1000)::numeric, 2),
		       round((extract(epoch FROM max(claimed_at - created_at)) * 1000)::numeric, 2)
		FROM bench_lat WHERE tenant_id = 'b'" | tee -a "$RES/summary.tsv"
}

echo "tenant_fairness: b at $RATE runs/s, $B_CONSUMERS b consumers; flood: $FLOOD ready a tasks, $A_CONSUMERS a consumers; ${DURATION}s per case"
printf 'case\ta_ready_at_start\ta_claimed\tb_tasks\tb_p50_ms\tb_p90_ms\tb_p99_ms\tb_max_ms\n'
run_case quiet
run_case flood
{
	echo "| case | a's ready tasks at the start | a's tasks claimed meanwhile | b's tasks | b p50 ms | b p90 ms | b p99 ms | b max ms |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|"
	awk -F '\t' 'NR > 1 { printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$RES/summary.tsv"
} >"$RES/summary.md"
echo
cat "$RES/summary.md"
echo "tenant_fairness: results in $RES"
