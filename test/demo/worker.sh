#!/usr/bin/env bash
# worker.sh — a small wfengine worker in bash + psql, used by `make demo`.
#
# Polls wf.claim_tasks() on each QUEUE, "performs" the activity of every task
# it gets, and reports back with wf.complete_task() (or wf.fail_task()):
#
#   charge_card   (payments)   -> {"charge_id": "ch_<hash of idempotency key>", ...}
#   reserve_stock (warehouse)  -> {"reservation_id": "rsv_<hash>", ...}
#   send_receipt  (email)      -> {"message_id": "msg_<hash>@demo.invalid", ...}
#
# (by the task's activity; a task without one goes by its queue).
# The activity named by --fail-once (default charge_card) fails its first
# attempt with a retryable {"code": "timeout"} error, to show a retry.
# Anything else is failed as non-retryable "unknown_activity".
#
# Usage: worker.sh [--run UUID] [--timeout SECONDS] [--name WORKER]
#                  [--fail-once ACTIVITY|none] [--batch N] [--lease INTERVAL] QUEUE...
# Connects with the usual libpq variables (PGHOST, PGPORT, PGDATABASE, ...).
# Stops when the run given with --run is no longer 'running' (exit 0), or at
# the deadline (exit 1 if a --run was given and had not finished, else 0).
#
# Values only ever reach SQL as psql variables (:'name'), never spliced into
# the query text, and every psql call reads its SQL from a quoted here-doc.
set -euo pipefail

run=""
timeout=60
worker="demo-worker-$$"
fail_once=charge_card
batch=10
lease="30 seconds"
queues=()

usage() {
	sed -n '/^# Usage:/,/^# the deadline/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while (($#)); do
	case $1 in
	--run) run=${2:?}; shift 2 ;;
	--timeout) timeout=${2:?}; shift 2 ;;
	--name) worker=${2:?}; shift 2 ;;
	--fail-once) fail_once=${2:?}; shift 2 ;;
	--batch) batch=${2:?}; shift 2 ;;
	--lease) lease=${2:?}; shift 2 ;;
	-h | --help) usage ;;
	-*) echo "worker.sh: unknown option $1" >&2; usage ;;
	*) queues+=("$1"); shift ;;
	esac
done
((${#queues[@]})) || usage
[[ $timeout =~ ^[0-9]+$ ]] || { echo "worker.sh: --timeout wants whole seconds" >&2; exit 2; }

US=$'\x1f' # field separator of psql's unaligned output: never in our fields
PSQL=(psql -X -A -t -q -v ON_ERROR_STOP=1 -F "$US" -v worker="$worker")

declare -A failed_once=()

log() {
	printf '%(%H:%M:%S)T  %s\n' -1 "$*"
}

# claim QUEUE: one line per claimed task, fields separated by $US:
#   task_id fence run_id step attempt activity key_hash key input
# Text fields have $US/newlines flattened; jsonb text output never has raw
# control characters, so every task is exactly one line.
claim() {
	"${PSQL[@]}" -v queue="$1" -v batch="$batch" -v lease="$lease" <<'SQL'
SELECT c.task_id,
       c.fence,
       c.run_id,
       translate(c.step, E'\x1f\n\r', '   '),
       c.attempt,
       translate(coalesce(c.activity, ''), E'\x1f\n\r', '   '),
       left(md5(coalesce(c.idempotency_key, c.task_id::text)), 16),
       translate(coalesce(c.idempotency_key, ''), E'\x1f\n\r', '   '),
       c.input::text
  FROM wf.claim_tasks(:'queue', :'worker', :'batch'::integer, :'lease'::interval) AS c;
SQL
}

# complete TASK FENCE ACTIVITY HASH INPUT: build the activity's output in SQL
# from psql variables and hand it to wf.complete_task(); prints its answer.
complete() {
	local output_sql
	case $3 in
	charge_card)
		output_sql="jsonb_build_object('charge_id', 'ch_' || :'hash',
		                               'amount', (:'input'::jsonb) -> 'amount',
		                               'customer', (:'input'::jsonb) -> 'customer',
		                               'status', 'captured')" ;;
	reserve_stock)
		output_sql="jsonb_build_object('reservation_id', 'rsv_' || :'hash',
		                               'sku', (:'input'::jsonb) -> 'sku',
		                               'charge', (:'input'::jsonb) -> 'charge')" ;;
	send_receipt)
		output_sql="jsonb_build_object('message_id', 'msg_' || :'hash' || '@demo.invalid',
		                               'to', (:'input'::jsonb) -> 'customer',
		                               'reservation', (:'input'::jsonb) -> 'reservation')" ;;
	*) return 1 ;;
	esac
	# output_sql is one of the constant expressions above, not data.
	printf 'SELECT wf.complete_task(:%s::bigint, :%s::bigint, %s);\n' \
		"'task'" "'fence'" "$output_sql" |
		"${PSQL[@]}" -v task="$1" -v fence="$2" -v hash="$4" -v input="$5"
}

# fail TASK FENCE CODE MESSAGE RETRYABLE: wf.fail_task(); prints its answer.
fail() {
	"${PSQL[@]}" -v task="$1" -v fence="$2" -v code="$3" -v message="$4" \
		-v retryable="$5" <<'SQL'
SELECT wf.fail_task(:'task'::bigint, :'fence'::bigint,
                    jsonb_build_object('code', :'code', 'message', :'message'),
                    :'retryable'::boolean);
SQL
}

run_status() {
	"${PSQL[@]}" -v run="$run" <<'SQL'
SELECT wf.run_status(:'run'::uuid);
SQL
}

# handle QUEUE LINE: perform one claimed task and report the result.
handle() {
	local queue=$1 task fence run_id step attempt activity hash key input answer
	IFS=$US read -r task fence run_id step attempt activity hash key input <<<"$2"
	if [[ -z $activity ]]; then # no activity in the definition: go by queue
		case $queue in
		payments) activity=charge_card ;;
		warehouse) activity=reserve_stock ;;
		email) activity=send_receipt ;;
		esac
	fi
	local what="task $task  run ${run_id:0:8}  $step#$attempt  $activity"
	if [[ $activity == "$fail_once" && $attempt == 1 && -z ${failed_once[$run_id/$step]:-} ]]; then
		failed_once[$run_id/$step]=1
		if answer=$(fail "$task" "$fence" timeout \
			"simulated timeout: $activity gateway did not answer (idempotency key $key)" true); then
			log "$what -> fail_task(timeout, retryable): $answer"
		else
			log "$what -> fail_task FAILED (see error above)"
		fi
		return
	fi
	if answer=$(complete "$task" "$fence" "$activity" "$hash" "$input"); then
		log "$what -> complete_task: $answer"
	elif [[ $activity != charge_card && $activity != reserve_stock && $activity != send_receipt ]]; then
		answer=$(fail "$task" "$fence" unknown_activity \
			"worker.sh does not know activity '$activity'" false) || answer="error"
		log "$what -> fail_task(unknown_activity, non-retryable): $answer"
	else
		log "$what -> complete_task FAILED (see error above)"
	fi
}

log "worker $worker polling queues: ${queues[*]}${run:+ until run $run finishes} (max ${timeout}s)"
deadline=$((SECONDS + timeout))
while ((SECONDS < deadline)); do
	if [[ -n $run ]]; then
		status=$(run_status) || status=""
		if [[ -n $status && $status != running ]]; then
			log "run $run is $status; worker stops"
			exit 0
		fi
	fi
	got=0
	for q in "${queues[@]}"; do
		rows=()
		if out=$(claim "$q"); then
			[[ -n $out ]] && mapfile -t rows <<<"$out"
		else
			log "claim on queue $q failed (see error above)"
		fi
		for row in "${rows[@]}"; do
			handle "$q" "$row"
			got=$((got + 1))
		done
	done
	((got > 0)) || sleep 0.2
done

if [[ -n $run ]]; then
	log "deadline of ${timeout}s passed; run $run is still ${status:-unknown}"
	exit 1
fi
log "deadline of ${timeout}s passed; worker stops"
