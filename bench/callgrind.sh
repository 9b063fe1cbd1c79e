#!/usr/bin/env bash
# bench/callgrind.sh — instructions per claim + complete cycle, counted
# exactly by callgrind (valgrind), independent of the machine's load.
# A measurement, never a test.
#
# It initdb's a scratch cluster from the PostgreSQL of PG_CONFIG (where
# wfengine must be installed), loads bench/setup.sql (20-step runs on queue
# q20), stops it, then runs a single-user backend (postgres --single,
# wfengine preloaded, worker off) under callgrind twice, over copies of
# that data directory: N1 and N2 cycles.  The marginal cost of a cycle,
# (Ir(N2) - Ir(N1)) / (N2 - N1), leaves out start-up and the first plan
# preparations.  Callgrind files stay in the scratch directory for
# callgrind_annotate.
#
# Usage: bash bench/callgrind.sh [one|two|eager|floor|start|cycle|pgmq]   (default one)
#   one  the cycle in one statement:
#        SELECT wf.complete_task(...) FROM (SELECT * FROM wf.claim_tasks(...)) t
#   two  claim and complete as two statements (two transactions)
#   eager  wf.complete_and_claim, one statement per step: the lease a step
#        hands out is kept in two session settings for the next one
#   floor  the hand-written floor's one-call step (bench/peers/floor,
#        wf_step(run, payload)), for the ratio of instructions per step
#   start  wf.start_run of a 1-step run with the peers' 200-byte payload
#        (its own transaction), the first third of the wf_cycle_b1 cell
#   cycle  the whole wf_cycle_b1 cell: that start, a claim of one task of
#        queue q1, its completion (three transactions)
#   pgmq  the pgmq_b1 cell's cycle, for comparison: pgmq.send + pgmq.read +
#        pgmq.delete of the same payload (needs PGMQ_SQL, pgmq's SQL, as
#        for make bench-peers)
# Environment: PG_CONFIG, CG_N1 (50), CG_N2 (250), CG_PRE (SQL run first,
# e.g. to try a schema change), CG_STMT and CG_ACCEPT (the statement of a
# cycle instead of the mode's, and what its output shows once per accepted
# cycle), CG_KEEP=1 keeps the scratch directory.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)
N1=${CG_N1:-50} N2=${CG_N2:-250}
MODE=${1:-one}
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
as_owner() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }

DIR=$(mktemp -d /tmp/wf-callgrind.XXXXXX)
chmod 755 "$DIR"
if ((EUID == 0)); then chown postgres: "$DIR"; fi
cleanup() { as_owner "$BIN/pg_ctl" -D "$DIR/tpl" -m immediate stop >/dev/null 2>&1 || true; [[ ${CG_KEEP:-0} == 1 ]] || rm -rf "$DIR"; }
trap cleanup EXIT

as_owner "$BIN/initdb" -D "$DIR/tpl" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >/dev/null
printf "port = 5499\nunix_socket_directories = '%s'\nlisten_addresses = ''\nshared_preload_libraries = 'wfengine'\nwfengine.enabled = off\n" "$DIR" |
	as_owner tee -a "$DIR/tpl/postgresql.conf" >/dev/null
as_owner "$BIN/pg_ctl" -D "$DIR/tpl" -l "$DIR/tpl.log" -w start >/dev/null
"$BIN/psql" -XqAt -h "$DIR" -p 5499 -U postgres -d postgres -c "CREATE DATABASE cg"
"$BIN/psql" -XqAt -h "$DIR" -p 5499 -U postgres -d cg -v ON_ERROR_STOP=1 -v runs1=10 -v runs20=2000 \
	-f "$ROOT/bench/setup.sql" >/dev/null
"$BIN/psql" -XqAt -h "$DIR" -p 5499 -U postgres -d cg -c "VACUUM (FREEZE, ANALYZE)"

if [[ $MODE == floor ]]; then
	"$BIN/psql" -XqAt -h "$DIR" -p 5499 -U postgres -d cg -v ON_ERROR_STOP=1 -v nruns=100000 \
		-f "$ROOT/bench/peers/floor/schema.sql" -f "$ROOT/bench/peers/floor/seed.sql" >/dev/null
fi
if [[ $MODE == pgmq ]]; then
	[[ -n ${PGMQ_SQL:-} ]] || { echo "callgrind.sh: mode pgmq needs PGMQ_SQL" >&2; exit 1; }
	"$BIN/psql" -XqAt -h "$DIR" -p 5499 -U postgres -d cg -v ON_ERROR_STOP=1 -f "$PGMQ_SQL" >/dev/null
	"$BIN/psql" -XqAt -h "$DIR" -p 5499 -U postgres -d cg -c "SELECT pgmq.create('bench')" >/dev/null
	"$BIN/psql" -XqAt -h "$DIR" -p 5499 -U postgres -d cg -v ON_ERROR_STOP=1 -v backlog=1000 \
		-f "$ROOT/bench/peers/pgmq/reset.sql" >/dev/null
fi
as_owner "$BIN/pg_ctl" -D "$DIR/tpl" -m fast -w stop >/dev/null

ACCEPT='"accepted"'
if [[ $MODE == floor ]]; then
	ACCEPT='wf_step'
	STMT="SELECT 'wf_step', wf_step((random() * 99999)::bigint + 1, '{\"step\":\"charge_card\",\"attempt\":1,\"worker\":\"worker-07\",\"output\":{\"status\":\"ok\",\"amount_cents\":12999,\"currency\":\"EUR\",\"provider_ref\":\"ch_3NfA9e2eZvKYlo2C1x8QxYzA\",\"captured\":true},\"duration_ms\":42}'::jsonb);"
elif [[ $MODE == start ]]; then
	ACCEPT='start_run'
	STMT="SELECT 'start_run', wf.start_run('bench_one', '{\"step\":\"charge_card\",\"attempt\":1,\"worker\":\"worker-07\",\"output\":{\"status\":\"ok\",\"amount_cents\":12999,\"currency\":\"EUR\",\"provider_ref\":\"ch_3NfA9e2eZvKYlo2C1x8QxYzA\",\"captured\":true},\"duration_ms\":42}'::jsonb) IS NOT NULL;"
elif [[ $MODE == pgmq ]]; then
	ACCEPT='deleted'
	STMT="SELECT pgmq.send('bench', '{\"step\":\"charge_card\",\"attempt\":1,\"worker\":\"worker-07\",\"output\":{\"status\":\"ok\",\"amount_cents\":12999,\"currency\":\"EUR\",\"provider_ref\":\"ch_3NfA9e2eZvKYlo2C1x8QxYzA\",\"captured\":true},\"duration_ms\":42}'::jsonb);
SELECT set_config('cg.m', msg_id::text, false) FROM pgmq.read('bench', 30, 1);
SELECT 'deleted', pgmq.delete('bench', current_setting('cg.m')::bigint);"
elif [[ $MODE == cycle ]]; then
	ACCEPT='"accepted"'
	STMT="SELECT wf.start_run('bench_one', '{\"step\":\"charge_card\",\"attempt\":1,\"worker\":\"worker-07\",\"output\":{\"status\":\"ok\",\"amount_cents\":12999,\"currency\":\"EUR\",\"provider_ref\":\"ch_3NfA9e2eZvKYlo2C1x8QxYzA\",\"captured\":true},\"duration_ms\":42}'::jsonb) IS NOT NULL;
SELECT set_config('cg.t', task_id::text, false), set_config('cg.f', fence::text, false) FROM wf.claim_tasks('q1', 'w', 1);
SELECT wf.complete_task(current_setting('cg.t')::bigint, current_setting('cg.f')::bigint, '{\"ok\": true}');"
elif [[ $MODE == eager ]]; then
	PRE="SELECT set_config('cg.t', task_id::text, false), set_config('cg.f', fence::text, false) FROM wf.claim_tasks('q20', 'w', 1);"
	STMT="SELECT c.answer, set_config('cg.t', c.task_id::text, false), set_config('cg.f', c.fence::text, false) FROM wf.complete_and_claim(current_setting('cg.t')::bigint, current_setting('cg.f')::bigint, '{\"ok\": true}', 'q20', 'w', 1) c;"
elif [[ $MODE == two ]]; then
	STMT="SELECT count(*) FROM wf.claim_tasks('q20', 'w', 1);
SELECT wf.complete_task(t.task_id, t.fence, '{\"ok\": true}') FROM wf.tasks t WHERE t.status = 'leased' AND t.worker = 'w' LIMIT 1;"
else
	STMT="SELECT wf.complete_task(t.task_id, t.fence, '{\"ok\": true}') FROM (SELECT * FROM wf.claim_tasks('q20', 'w', 1)) t;"
fi
# CG_STMT replaces the mode's statement (CG_ACCEPT: what its output shows
# once per accepted cycle), e.g. to compare two forms of one call
if [[ -n ${CG_STMT:-} ]]; then STMT=$CG_STMT; ACCEPT=${CG_ACCEPT:-$ACCEPT}; fi

count() {
	local n=$1 d=$DIR/run$1
	as_owner cp -a "$DIR/tpl" "$d"
	{ [[ -n ${CG_PRE:-} ]] && echo "$CG_PRE"; [[ -n ${PRE:-} ]] && echo "$PRE"; for _ in $(seq 1 "$n"); do echo "$STMT"; done; } >"$DIR/in$n.sql"
	as_owner valgrind --tool=callgrind --callgrind-out-file="$DIR/callgrind.$n.out" \
		"$BIN/postgres" --single -D "$d" cg <"$DIR/in$n.sql" >"$DIR/out$n.log" 2>&1
	if [[ $(grep -c "$ACCEPT" "$DIR/out$n.log") -lt "$n" ]]; then
		echo "callgrind.sh: not every cycle was accepted in the $n-cycle run (see $DIR/out$n.log)" >&2
		CG_KEEP=1
		exit 1
	fi
	sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$DIR/out$n.log" | tail -1
}
i1=$(count "$N1")
i2=$(count "$N2")
echo "mode $MODE: $N1 cycles $i1 Ir, $N2 cycles $i2 Ir; per cycle $(((i2 - i1) / (N2 - N1))) instructions"
[[ ${CG_KEEP:-0} == 1 ]] && echo "callgrind files in $DIR"
