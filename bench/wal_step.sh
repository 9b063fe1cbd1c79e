#!/usr/bin/env bash
# bench/wal_step.sh -- the WAL an eager step writes (issue 31), by record
# type and by relation: a measurement, never a test.
#
# On the server of PGHOST/PGPORT/PGUSER (wal_level as it is; a superuser;
# pg_waldump from PG_CONFIG's bindir, run on the server's pg_wal: the script
# must run on the server's machine, as a user that can read PGDATA): a
# database $DB made afresh with bench/peers/wf/reset.sql (20-step runs, the
# peers' 200-byte payload as input), one client that claims one task and
# then calls wf.complete_and_claim WARMUP times, a CHECKPOINT, then STEPS
# more; the WAL of those STEPS is summed per record type and per relation,
# records and full-page images apart, and divided by STEPS.
#
# Environment: PGDATA (required), DB (default wal_step), STEPS (2000),
# WARMUP (1000), BATCH (1: wf.complete_and_claim; N > 1: batches of N
# with wf.complete_tasks_and_claim, as the wf_eagerb10step20 cell), MODE
# (eager; cycle: the wf_cycle_b1 cell's start_run + claim_tasks +
# complete_task of a 1-step run, three transactions, per cycle),
# MAPPED (1: every step after the first has the input mapping
# {"prev": "$.steps.<the step before>.output"}, so that its input is the
# step before's whole output; 0, the default: no mappings, as the cells),
# TASKFF and RUNFF (the fillfactor of wf.tasks and wf.runs; 0, the default:
# the extension's), OUTPUT (the output each eager step reports; default
# {"ok": true}; OUTPUT_BYTES=N instead: an object of about N bytes of hex
# digits, new for each step, which compress about as well as real
# identifiers and hashes), PG_CONFIG.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}
bin=$("$PG_CONFIG" --bindir)
DB=${DB:-wal_step}
STEPS=${STEPS:-2000}
WARMUP=${WARMUP:-1000}
BATCH=${BATCH:-1}
MODE=${MODE:-eager}
OUTPUT="'${OUTPUT:-{\"ok\": true\}}'"
if [[ -n ${OUTPUT_BYTES:-} ]]; then
	OUTPUT="(SELECT pg_catalog.jsonb_build_object('blob', string_agg(md5(random()::text), '')) FROM generate_series(1, $((OUTPUT_BYTES / 32))))"
fi
: "${PGDATA:?set PGDATA to the data directory of the server}"
runs=$(( (STEPS + WARMUP) / 20 + 100 ))
psql() { "$bin/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }

psql -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
if [[ ${MAPPED:-0} == 1 ]]; then
	# bench20 again, each step after the first given the step before's whole
	# output as its input ({"prev": <output>}); the runs started on it
	psql -d "$DB" -v n1=0 -v n20=0 -v small=0 -v noav=0 -v freeze=0 -v taskff="${TASKFF:-0}" -v runff="${RUNFF:-0}" \
		-f "$here/peers/wf/reset.sql" >/dev/null
	psql -d "$DB" >/dev/null <<-SQL
		SELECT wf.publish_definition('bench20', jsonb_build_object('steps', (SELECT jsonb_agg(
		  jsonb_build_object('name', 's' || g, 'type', 'task', 'queue', 'bench20')
		  || CASE WHEN g > 1 THEN jsonb_build_object('input', jsonb_build_object('prev', '\$.steps.s' || (g - 1) || '.output'))
		          ELSE '{}' END) FROM generate_series(1, 20) g)));
		SELECT count(wf.start_run('bench20', '{"step":"charge_card","attempt":1,"worker":"worker-07","output":{"status":"ok","amount_cents":12999,"currency":"EUR","provider_ref":"ch_3NfA9e2eZvKYlo2C1x8QxYzA","captured":true},"duration_ms":42}'::jsonb)) FROM generate_series(1, $runs);
		VACUUM ANALYZE;
		CHECKPOINT;
	SQL
else
	psql -d "$DB" -v n1=0 -v n20="$runs" -v small=0 -v noav=0 -v freeze=0 -v taskff="${TASKFF:-0}" -v runff="${RUNFF:-0}" \
		-f "$here/peers/wf/reset.sql" >/dev/null
fi
walk() { # walk N: N eager steps, one client (BATCH > 1: N / BATCH batches)
	if [[ $MODE == cycle ]]; then
		{
			for ((i = 0; i < $1; i++)); do
				echo "SELECT wf.start_run('bench1', '{\"step\":\"charge_card\",\"attempt\":1,\"worker\":\"worker-07\",\"output\":{\"status\":\"ok\",\"amount_cents\":12999,\"currency\":\"EUR\",\"provider_ref\":\"ch_3NfA9e2eZvKYlo2C1x8QxYzA\",\"captured\":true},\"duration_ms\":42}'::jsonb) IS NOT NULL AS started \\gset"
				echo "SELECT task_id AS tid, fence AS f FROM wf.claim_tasks('bench1', 'w1', 1, '60 seconds') \\gset"
				echo "SELECT wf.complete_task(:tid, :f, '{\"ok\": true}') IS NOT NULL AS done \\gset"
			done
		} | psql -d "$DB" >/dev/null
		return
	fi
	if ((BATCH > 1)); then
		{
			echo "SELECT string_agg(task_id::text, ',') AS tids, string_agg(fence::text, ',') AS fs FROM wf.claim_tasks('bench20', 'w1', $BATCH, '60 seconds') \\gset"
			for ((i = 0; i < $1 / BATCH; i++)); do
				echo "SELECT string_agg(task_id::text, ',') AS tids, string_agg(fence::text, ',') AS fs FROM wf.complete_tasks_and_claim(ARRAY[:tids]::bigint[], ARRAY[:fs]::bigint[], NULL, 'bench20', 'w1', $BATCH, '60 seconds') \\gset"
			done
		} | psql -d "$DB" >/dev/null
		return
	fi
	{
		echo "SELECT task_id AS tid, fence AS f FROM wf.claim_tasks('bench20', 'w1', 1, '60 seconds') \\gset"
		for ((i = 0; i < $1; i++)); do
			echo "SELECT task_id AS tid, fence AS f FROM wf.complete_and_claim(:tid, :f, $OUTPUT, 'bench20', 'w1', 1, '60 seconds') \\gset"
		done
	} | psql -d "$DB" >/dev/null
}
walk "$WARMUP"
psql -d "$DB" -c CHECKPOINT
start=$(psql -d "$DB" -At -c 'SELECT pg_current_wal_insert_lsn()')
walk "$STEPS"
end=$(psql -d "$DB" -At -c 'SELECT pg_current_wal_insert_lsn()')
declare -A rel
while IFS='|' read -r node name; do rel[$node]=$name; done < <(psql -d "$DB" -At -F '|' -c \
	"SELECT relfilenode, relname FROM pg_class WHERE relnamespace = 'wf'::regnamespace AND relfilenode <> 0
	 UNION ALL SELECT c.relfilenode, 'toast:' || t.relname FROM pg_class t JOIN pg_class c ON c.oid = t.reltoastrelid
	 WHERE t.relnamespace = 'wf'::regnamespace
	 UNION ALL SELECT i.relfilenode, 'toast_index:' || t.relname FROM pg_class t JOIN pg_index x ON x.indrelid = t.reltoastrelid
	 JOIN pg_class i ON i.oid = x.indexrelid WHERE t.relnamespace = 'wf'::regnamespace")
if [[ $MODE == cycle ]]; then echo "WAL of $STEPS cycles ($start .. $end), per cycle:"; else echo "WAL of $STEPS eager steps, batches of $BATCH ($start .. $end), per step:"; fi
"$bin/pg_waldump" -p "$PGDATA/pg_wal" -s "$start" -e "$end" 2>/dev/null |
	awk -v steps="$STEPS" -v map="$(for k in "${!rel[@]}"; do printf '%s=%s,' "$k" "${rel[$k]}"; done)" '
	BEGIN { n = split(map, kv, ","); for (i = 1; i <= n; i++) { split(kv[i], p, "="); name[p[1]] = p[2] } }
	{
		type = $2; for (i = 1; i <= NF; i++) if ($i == "desc:") type = $2 "/" $(i + 1)
		r = "-"; if (match($0, /rel [0-9]+\/[0-9]+\/[0-9]+/)) { split(substr($0, RSTART + 4, RLENGTH - 4), q, "/"); r = (q[3] in name) ? name[q[3]] : q[3] }
		match($0, /len \(rec\/tot\): +[0-9]+\/ +[0-9]+/); l = substr($0, RSTART, RLENGTH); gsub(/[^0-9\/]/, "", l); split(l, a, "/")
		k = type " " r; cnt[k]++; rec[k] += a[2]; fpi[k] += a[3] - a[2]; R += a[2]; F += a[3] - a[2]; N++
	}
	END {
		printf "%-34s %-28s %8s %9s %9s\n", "record", "relation", "records", "bytes", "fpi bytes"
		for (k in cnt) { split(k, z, " "); printf "%-34s %-28s %8.2f %9.0f %9.0f\n", z[1], z[2], cnt[k] / steps, rec[k] / steps, fpi[k] / steps }
		printf "%-34s %-28s %8.2f %9.0f %9.0f\n", "total", "", N / steps, R / steps, F / steps
	}' | sort -k4 -n -r
