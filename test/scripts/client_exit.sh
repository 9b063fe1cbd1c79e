#!/usr/bin/env bash
# client_exit.sh — does a worker library's PROCESS stop on SIGTERM?  (issue 32)
#
# Starts a probe program of one worker library (clients/*/exit_probe*) as a
# process of its own against the database of the libpq environment (with
# wfengine created), sends it SIGTERM and measures when the process exits:
#
#   idle   the queue is empty, the worker waits in its claim: the process
#          exits within 1 s, status 0
#   busy   the handler holds its task 2 s (drain timeout 8 s); SIGTERM once
#          the task is leased: the process exits after the handler finished
#          and its completion was accepted, within 4 s (2 s after the
#          handler's end; a pending drain timer would make it 8 s), and
#          nothing more was claimed after SIGTERM (neither the run's next
#          step, which eager dispatch could lease, nor a run started then)
#   late   the handler holds its task 10 s, drain timeout 1 s: the process
#          exits within 2 s; what became of the task is printed ("task
#          after drain: ...") — every library leaves it to its lease
#
# The probe reads WF_PROBE_HOLD (seconds its handler holds a task; it gives
# up early, failing the attempt, when the library marks the task cancelled)
# and WF_PROBE_DRAIN (the drain timeout, seconds); it works the queue
# "exitprobe" as worker "exitprobe", concurrency 2, lease 30 s, wait 10 s.
# The probe must be the process itself (exec it), not a shell around it.
#
# Usage: bash test/scripts/client_exit.sh PROBE-COMMAND...
# Prints "ok"/"NOT OK" lines with the measured times; exits non-zero when a
# check failed.
set -uo pipefail

PSQL=(psql -X -q -At -v ON_ERROR_STOP=1)
failures=0
probe_pid=

check() { # check OK-STATUS WHAT
	if [[ $1 == 0 ]]; then
		echo "ok     $2"
	else
		echo "NOT OK $2"
		failures=$((failures + 1))
	fi
}
sql() { "${PSQL[@]}" -c "$1"; }
now_ms() { date +%s%3N; }
cleanup() { [[ -n $probe_pid ]] && kill -KILL "$probe_pid" 2>/dev/null; }
trap cleanup EXIT

sql "SELECT wf.publish_definition('exitprobe', '{\"steps\": [
  {\"name\": \"first\", \"queue\": \"exitprobe\"},
  {\"name\": \"second\", \"queue\": \"exitprobe\"}]}')" >/dev/null || exit 1
sql "DELETE FROM wf.tasks WHERE queue = 'exitprobe' AND status = 'ready'" >/dev/null || exit 1

# start HOLD DRAIN: starts the probe in the background (probe_pid)
start() {
	local hold=$1 drain=$2
	shift 2
	WF_PROBE_HOLD=$hold WF_PROBE_DRAIN=$drain "${probe[@]}" &
	probe_pid=$!
}

# waitfor WHAT SECONDS SQL: polls until SQL answers t
waitfor() {
	local i
	for ((i = 0; i < $2 * 20; i++)); do
		[[ $(sql "$3") == t ]] && return 0
		if ! kill -0 "$probe_pid" 2>/dev/null; then
			echo "NOT OK the probe ended while waiting for $1"
			return 1
		fi
		sleep 0.05
	done
	echo "NOT OK no $1 within $2 s"
	return 1
}

# term_and_wait LIMIT [COMMAND...]: SIGTERM to the probe, COMMAND (while it
# drains), then waits up to LIMIT + 5 s for its exit; sets elapsed_ms and
# status (status 999: killed, it did not exit)
term_and_wait() {
	local t0 i limit=$1
	shift
	t0=$(now_ms)
	kill -TERM "$probe_pid"
	"$@"
	for ((i = 0; i < (limit + 5) * 100; i++)); do
		kill -0 "$probe_pid" 2>/dev/null || break
		sleep 0.01
	done
	elapsed_ms=$(($(now_ms) - t0))
	if kill -0 "$probe_pid" 2>/dev/null; then
		kill -KILL "$probe_pid"
		wait "$probe_pid" 2>/dev/null
		status=999
	else
		wait "$probe_pid"
		status=$?
	fi
	probe_pid=
}

# a claim of the probe's worker, waiting in this database
claiming="SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity
  WHERE datname = current_database() AND state = 'active'
    AND query ~ 'claim_tasks' AND query !~ 'pg_stat_activity')"

# no_claim_left PHASE: the probe's claim ended on the server too (a claim
# cut off only on the client goes on waiting there and leases a task that
# nobody runs); waits for it up to 1 s
no_claim_left() {
	local i
	for ((i = 0; i < 20; i++)); do
		[[ $(sql "$claiming") == f ]] && break
		sleep 0.05
	done
	[[ $(sql "$claiming") == f ]]
	check $? "$1: no claim of the probe left waiting on the server after its exit"
	# one left would lease the next phase's task: ended, the phases stay apart
	sql "SELECT count(pg_catalog.pg_terminate_backend(pid)) FROM pg_catalog.pg_stat_activity
	  WHERE datname = current_database() AND state = 'active'
	    AND query ~ 'claim_tasks' AND query !~ 'pg_stat_activity'" >/dev/null
}

probe=("$@")
secs() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

# ---- idle ----
start 2 5
if waitfor "waiting claim" 30 "$claiming"; then
	sleep 0.3
	term_and_wait 1
	echo "idle: exit status $status after $(secs "$elapsed_ms") s"
	[[ $status == 0 && $elapsed_ms -le 1000 ]]
	check $? "idle: the process exited with status 0 within 1 s of SIGTERM ($(secs "$elapsed_ms") s, status $status)"
	no_claim_left idle
else
	failures=$((failures + 1))
	cleanup
	probe_pid=
fi

# ---- busy ----
run=$(sql "SELECT wf.start_run('exitprobe', '{}')")
start 2 8
if waitfor "lease of the first step" 30 \
	"SELECT status = 'leased' FROM wf.tasks WHERE run_id = '$run' AND step = 'first'"; then
	# the lease's time, read while the attempt has its row (a completed
	# attempt's row is deleted since 0.3.0)
	claimed=$(sql "SELECT claimed_at FROM wf.tasks WHERE run_id = '$run' AND step = 'first'")
	start_late() { late=$(sql "SELECT wf.start_run('exitprobe', '{\"late\": true}')"); }
	term_and_wait 8 start_late
	echo "busy: exit status $status after $(secs "$elapsed_ms") s"
	[[ $status == 0 && $elapsed_ms -le 4000 ]]
	check $? "busy: the process exited with status 0 within 2 s of its 2 s handler's end, well within the 8 s drain timeout ($(secs "$elapsed_ms") s, status $status)"
	no_claim_left busy
	# each attempt: its row's status and deliveries, or, completed (no row
	# since 0.3.0), its task_completed event and the lease expiries before it
	steps=$(sql "SELECT string_agg(s.step || ':' || CASE WHEN c.seq IS NULL THEN t.status || '/' || t.deliveries
	    ELSE 'completed/' || (1 + (SELECT count(*) FROM wf.event_log x WHERE x.run_id = s.run_id
	                               AND x.type = 'lease_expired' AND x.step = s.step AND x.attempt = s.attempt)) END,
	    ',' ORDER BY s.seq)
	  FROM wf.event_log s LEFT JOIN wf.tasks t ON t.task_id = (s.payload->>'task_id')::bigint
	  LEFT JOIN wf.event_log c ON c.run_id = s.run_id AND c.type = 'task_completed' AND c.payload->>'task_id' = s.payload->>'task_id'
	  WHERE s.run_id = '$run' AND s.type = 'task_scheduled'")
	[[ $steps == 'first:completed/1,second:ready/0' ]]
	check $? "busy: the task in flight completed, the next step not claimed after SIGTERM ($steps)"
	hist=$(sql "SELECT count(*) FROM wf.history('$run') WHERE type = 'task_completed' AND step = 'first'")
	[[ $hist == 1 ]]
	check $? "busy: the completion was accepted: task_completed of the first step in the run's history ($hist)"
	fin=$(sql "SELECT extract(epoch FROM created_at - '$claimed'::timestamptz)::numeric(6,3) FROM wf.event_log
	  WHERE run_id = '$run' AND type = 'task_completed' AND step = 'first'")
	awk -v f="$fin" 'BEGIN { exit !(f >= 1.9) }'
	check $? "busy: the handler held the task its 2 s ($fin s from lease to completion)"
	other=$(sql "SELECT string_agg(status || '/' || deliveries, ',') FROM wf.tasks WHERE run_id = '$late'")
	[[ $other == ready/0 ]]
	check $? "busy: a run started after SIGTERM was not claimed ($other)"
	sql "DELETE FROM wf.tasks WHERE queue = 'exitprobe' AND status = 'ready'" >/dev/null
else
	failures=$((failures + 1))
	cleanup
	probe_pid=
fi

# ---- late: a handler longer than the drain timeout ----
run=$(sql "SELECT wf.start_run('exitprobe', '{}')")
start 10 1
if waitfor "lease of the first step" 30 \
	"SELECT status = 'leased' FROM wf.tasks WHERE run_id = '$run' AND step = 'first'"; then
	term_and_wait 2
	echo "late: exit status $status after $(secs "$elapsed_ms") s"
	[[ $status == 0 && $elapsed_ms -le 2000 ]]
	check $? "late: the process exited with status 0 within drain timeout + 1 s, 2 s ($(secs "$elapsed_ms") s, status $status)"
	no_claim_left late
	sleep 0.5
	task=$(sql "SELECT status || '/' || deliveries || coalesce('/' || (error->>'code'), '')
	    || CASE WHEN status = 'leased' AND lease_expires_at > now() THEN '/lease left' ELSE '' END
	  FROM wf.tasks WHERE run_id = '$run' ORDER BY task_id LIMIT 1")
	echo "late: task after drain: $task"
	[[ $task == 'leased/1/lease left' ]]
	check $? "late: the task still running at the drain's end is left to its lease ($task)"
else
	failures=$((failures + 1))
fi

exit $((failures > 0))
