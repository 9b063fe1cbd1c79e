/*-------------------------------------------------------------------------
 *
 * runstore.c
 *	  Reading, locking and writing runs, tasks and timers: the lock order,
 *	  and the one statement that writes a transition.
 *
 * Transaction boundaries.  Every transition runs inside the caller's
 * transaction while it holds the run row locked (FOR UPDATE), so
 * transitions of one run are serialised and seq is gap-free.  The result
 * recorded in the live task row (or the attempt withdrawn), the new
 * snapshot, the events and the next task attempt (if any; written leased
 * under an eager worker's lease offer) go to their tables row by row,
 * without a statement (the row writer, rowwrite.c: constraints, indexes,
 * triggers and WAL as for a statement, at a fraction of the executor's
 * cost); either all of it commits or none of it.  What else the
 * transition writes (timers, and each step kind's rows:
 * WfStepKindOps.write) follows in the same transaction, in statements.
 * A result report locks its task and run the same way (WfRowLock: the
 * locking of SELECT ... FOR UPDATE).
 *
 * Lock order: task rows before their run row.  A claim locks task rows
 * only (and never waits: SKIP LOCKED); a result report locks its task
 * row and then the run row (WfLockTaskAndRun).  A worker may therefore
 * claim and report in one transaction while a late report for the same
 * task waits: the late report waits for the task row without holding the
 * run row, so the two never wait on each other in opposite orders.
 * Commands lock the run's live task and then the run (WfLockRunAndTask,
 * WfLockRun), and a timer locks the live task, the timer, then the run
 * (WfLockTimerAndRun).  Between runs the order is parent, then child.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/runstore.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "api.h"
#include "claimfloor.h"
#include "jsonutil.h"
#include "metrics.h"
#include "notify.h"
#include "quota.h"
#include "rowwrite.h"
#include "runstore.h"
#include "spi_util.h"
#include "state.h"
#include "stepkind.h"
#include "tenant.h"
#include "version.h"

/*
 * A task attempt's input as a statement reads it: the row's, or, where the
 * row holds none (NULL: the attempt's input is the run's input as it
 * stands, see WfRunInputOf), the run's: context.input, or wf.runs.input
 * where the stored context leaves it out.
 */
#define WF_TASK_INPUT \
	"COALESCE(t.input, (SELECT CASE WHEN s.input_seq IS NULL THEN" \
	" (SELECT COALESCE(r.context OPERATOR(pg_catalog.->) 'input', r.input) FROM wf.runs r" \
	" WHERE r.run_id OPERATOR(pg_catalog.=) t.run_id" \
	" AND r.tenant_id OPERATOR(pg_catalog.=) t.tenant_id)" \
	" ELSE " WF_TASK_INPUT_EVENT " END FROM " WF_TASK_INPUT_SEQ " s))"

/*
 * Since 0.3.0 a large mapped input is not in its attempt's row but in its
 * task_scheduled event, seq t.input_seq (see WfTaskInputAt): read through
 * the row as json, once, so that the statement also prepares on a schema
 * not yet updated (no such column: NULL).  The event is the payload of its
 * own row, or an element [type, step, attempt, payload] of the column more
 * of the row before it.
 */
#define WF_TASK_INPUT_SEQ \
	"(SELECT (pg_catalog.to_jsonb(t) OPERATOR(pg_catalog.->>) 'input_seq')::pg_catalog.int4 AS input_seq)"
#define WF_TASK_INPUT_EVENT \
	"(SELECT CASE WHEN e.seq OPERATOR(pg_catalog.=) s.input_seq" \
	" THEN e.payload OPERATOR(pg_catalog.->) 'input'" \
	" ELSE (((e.more OPERATOR(pg_catalog.->) (s.input_seq OPERATOR(pg_catalog.-) e.seq OPERATOR(pg_catalog.-) 1))" \
	" OPERATOR(pg_catalog.->) 3) OPERATOR(pg_catalog.->) 'input')::pg_catalog.jsonb END" \
	" FROM wf.events e WHERE e.run_id OPERATOR(pg_catalog.=) t.run_id" \
	" AND e.tenant_id OPERATOR(pg_catalog.=) t.tenant_id" \
	" AND e.seq OPERATOR(pg_catalog.<=) s.input_seq" \
	" ORDER BY e.seq DESC LIMIT 1)"

/* the statements of runstore.c (registered by _PG_init: WfRunstorePlans) */
static const WfPlanSpec runstore_plan_specs[] = {
	[WF_RUNSTORE_TIMER_INSERT] = {
		"timer_insert",
		"INSERT INTO wf.timers (timer_id, tenant_id, run_id, kind, step, generation,"
		" due_at, fire_at, payload, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9)",
		9, {INT8OID, TEXTOID, UUIDOID, TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID,
		JSONBOID, TIMESTAMPTZOID}
	},
	[WF_RUNSTORE_TIMERS_CANCEL] = {
		"timers_cancel",
		"UPDATE wf.timers tm SET status = 'cancelled', fired_at = $2, outcome = 'run_finished' "
		"WHERE tm.run_id OPERATOR(pg_catalog.=) $1 AND tm.status OPERATOR(pg_catalog.=) 'pending'",
		2, {UUIDOID, TIMESTAMPTZOID}
	},
	[WF_RUNSTORE_TIMER_PEEK] = {
		"timer_peek",
		"SELECT r.current_task FROM wf.timers tm JOIN wf.runs r"
		" ON r.run_id OPERATOR(pg_catalog.=) tm.run_id AND r.tenant_id OPERATOR(pg_catalog.=) tm.tenant_id "
		"WHERE tm.timer_id OPERATOR(pg_catalog.=) $1 AND tm.tenant_id OPERATOR(pg_catalog.=) $2",
		2, {INT8OID, TEXTOID}
	},
	[WF_RUNSTORE_TASK_LOCK] = {
		"task_lock",
		"SELECT t.status FROM wf.tasks t WHERE t.task_id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
		1, {INT8OID}
	},
	[WF_RUNSTORE_LOCK_TIMER_AND_RUN] = {
		"lock_timer_and_run",
		"SELECT " WF_RUN_COLUMNS ", tm.kind, tm.step, tm.generation, tm.payload, tm.status,"
		" tm.due_at "
		"FROM wf.timers tm JOIN wf.runs r ON r.run_id OPERATOR(pg_catalog.=) tm.run_id"
		" AND r.tenant_id OPERATOR(pg_catalog.=) tm.tenant_id "
		"WHERE tm.timer_id OPERATOR(pg_catalog.=) $1 AND tm.tenant_id OPERATOR(pg_catalog.=) $2 FOR UPDATE OF tm, r",
		2, {INT8OID, TEXTOID}
	},
	[WF_RUNSTORE_RUN_LOCK] = {
		"run_lock",
		"SELECT " WF_RUN_COLUMNS "FROM wf.runs r "
		"WHERE r.run_id OPERATOR(pg_catalog.=) $1 AND r.tenant_id OPERATOR(pg_catalog.=) $2 "
		"FOR UPDATE",
		2, {UUIDOID, TEXTOID}
	},
	[WF_RUNSTORE_RUN_CURRENT_TASK] = {
		"run_current_task",
		"SELECT r.current_task FROM wf.runs r "
		"WHERE r.run_id OPERATOR(pg_catalog.=) $1 AND r.tenant_id OPERATOR(pg_catalog.=) $2",
		2, {UUIDOID, TEXTOID}
	},
	[WF_RUNSTORE_TASK_ROW] = {
		"task_row",
		"SELECT t.status, t.fence, t.visit, t.worker, " WF_TASK_INPUT ", t.output, t.error, t.queue "
		"FROM wf.tasks t WHERE t.task_id OPERATOR(pg_catalog.=) $1",
		1, {INT8OID}
	},
	[WF_RUNSTORE_LAST_TASK_OF_STEP] = {
		"last_task_of_step",
		"SELECT t.status, t.visit, t.attempt, " WF_TASK_INPUT " FROM wf.tasks t "
		"WHERE t.run_id OPERATOR(pg_catalog.=) $1 AND t.step OPERATOR(pg_catalog.=) $2 "
		"ORDER BY t.visit DESC, t.attempt DESC LIMIT 1",
		2, {UUIDOID, TEXTOID}
	},
	[WF_RUNSTORE_TASK_RESUME] = {
		"task_resume",
		"UPDATE wf.tasks t SET deadline_at = $2 "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1 AND t.status OPERATOR(pg_catalog.=) 'leased'",
		2, {INT8OID, TIMESTAMPTZOID}
	},
	[WF_RUNSTORE_RUN_READ] = {
		"run_read",
		"SELECT " WF_RUN_COLUMNS ", r.definition_name, r.definition_version FROM wf.runs r "
		"WHERE r.run_id OPERATOR(pg_catalog.=) $1 AND r.tenant_id OPERATOR(pg_catalog.=) $2",
		2, {UUIDOID, TEXTOID}
	},
	[WF_RUNSTORE_TASK_LOCK_NOWAIT] = {
		"task_lock_nowait",
		"SELECT t.status FROM wf.tasks t WHERE t.task_id OPERATOR(pg_catalog.=) $1 FOR UPDATE NOWAIT",
		1, {INT8OID}
	},
	[WF_RUNSTORE_LOCK_TIMER_AND_RUN_NOWAIT] = {
		"lock_timer_and_run_nowait",
		"SELECT " WF_RUN_COLUMNS ", tm.kind, tm.step, tm.generation, tm.payload, tm.status,"
		" tm.due_at "
		"FROM wf.timers tm JOIN wf.runs r ON r.run_id OPERATOR(pg_catalog.=) tm.run_id"
		" AND r.tenant_id OPERATOR(pg_catalog.=) tm.tenant_id "
		"WHERE tm.timer_id OPERATOR(pg_catalog.=) $1 AND tm.tenant_id OPERATOR(pg_catalog.=) $2 FOR UPDATE OF tm, r NOWAIT",
		2, {INT8OID, TEXTOID}
	},
	[WF_RUNSTORE_RUN_LOCK_NOWAIT] = {
		"run_lock_nowait",
		"SELECT " WF_RUN_COLUMNS "FROM wf.runs r "
		"WHERE r.run_id OPERATOR(pg_catalog.=) $1 AND r.tenant_id OPERATOR(pg_catalog.=) $2 "
		"FOR UPDATE NOWAIT",
		2, {UUIDOID, TEXTOID}
	},
	[WF_RUNSTORE_KEEP_TASK_INPUTS] = {
		"keep_task_inputs",
		"UPDATE wf.tasks t SET input = $2 "
		"WHERE t.run_id OPERATOR(pg_catalog.=) $1 AND t.input IS NULL"
		" AND (pg_catalog.to_jsonb(t) OPERATOR(pg_catalog.->>) 'input_seq') IS NULL",
		2, {UUIDOID, JSONBOID}
	},
	/*
	 * An attempt whose row was deleted when it completed (end_attempt): its
	 * task_completed event, through events_task_completed_idx.
	 */
	[WF_RUNSTORE_COMPLETED_TASK] = {
		"completed_task",
		"SELECT e.run_id, e.step, e.attempt,"
		" (e.payload OPERATOR(pg_catalog.->>) 'fence')::pg_catalog.int8,"
		" (e.payload OPERATOR(pg_catalog.->>) 'visit')::pg_catalog.int4,"
		" e.payload OPERATOR(pg_catalog.->>) 'worker' "
		"FROM wf.events e "
		"WHERE ((e.payload OPERATOR(pg_catalog.->>) 'task_id')::pg_catalog.int8) OPERATOR(pg_catalog.=) $1"
		" AND e.type OPERATOR(pg_catalog.=) 'task_completed'"
		" AND e.tenant_id OPERATOR(pg_catalog.=) $2 "
		"LIMIT 1",
		2, {INT8OID, TEXTOID}
	},
	/* the outputs a run's context refers to (context_with_outputs), by events_pkey */
	[WF_RUNSTORE_EVENT_OUTPUTS] = {
		"event_outputs",
		"SELECT e.seq, e.payload OPERATOR(pg_catalog.->) 'output' FROM wf.events e "
		"WHERE e.run_id OPERATOR(pg_catalog.=) $1 AND e.seq OPERATOR(pg_catalog.=) ANY ($2)"
		" AND e.tenant_id OPERATOR(pg_catalog.=) $3",
		3, {UUIDOID, INT4ARRAYOID, TEXTOID}, false, true
	},
	/*
	 * The row of wf.events that holds event seq $2 of a run: that event's
	 * own row, or the row before it whose column more holds it.
	 */
	[WF_RUNSTORE_EVENT_ROW] = {
		"event_row",
		"SELECT e.seq, e.type, e.payload, e.more FROM wf.events e "
		"WHERE e.run_id OPERATOR(pg_catalog.=) $1 AND e.seq OPERATOR(pg_catalog.<=) $2"
		" AND e.tenant_id OPERATOR(pg_catalog.=) $3 "
		"ORDER BY e.seq DESC LIMIT 1",
		3, {UUIDOID, INT4OID, TEXTOID}, false, true
	},
};

WfPlanTable WfRunstorePlans = WF_PLAN_TABLE("runstore", runstore_plan_specs);


/* how many values WfTaskValues, WfRunValues and task_lease_values fill */
#define WF_TASK_NVALUES 12
#define WF_RUN_NVALUES 11
#define WF_LEASE_NVALUES 9

/* the columns of task_row */
enum
{
	TASK_ROW_COL_STATUS = 1,
	TASK_ROW_COL_FENCE,
	TASK_ROW_COL_VISIT,
	TASK_ROW_COL_WORKER,
	TASK_ROW_COL_INPUT
};

/* the columns of lock_timer_and_run after the run's */
enum
{
	TIMER_COL_KIND = WF_RUN_NCOLUMNS + 1,
	TIMER_COL_STEP,
	TIMER_COL_GENERATION,
	TIMER_COL_PAYLOAD,
	TIMER_COL_STATUS,
	TIMER_COL_DUE_AT
};

/* forward declarations */
static void note_new_task(WfTransition *tr);

/*
 * interval_param sets a parameter to an interval of usec microseconds, or
 * to NULL when usec is 0 (no timeout).
 */
static void
interval_param(int64 usec, Datum *value, char *null)
{
	Interval   *iv;

	if (usec <= 0)
	{
		*null = 'n';
		return;
	}
	iv = palloc0(sizeof(Interval));
	iv->time = usec;
	*value = IntervalPGetDatum(iv);
}

/*
 * WfTaskValues fills values/nulls[0..11] with the new task of the
 * transition (task_id, step, visit, attempt, queue, activity,
 * available_at, idempotency_key, input, schedule_to_start, start_to_close,
 * heartbeat_timeout), or NULLs when there is none.
 */
static void
WfTaskValues(WfTransition *tr, Datum *values, char *nulls)
{
	WfNewTask  *t = &tr->task;
	int			i;

	for (i = 0; i < WF_TASK_NVALUES; i++)
	{
		values[i] = (Datum) 0;
		nulls[i] = tr->has_task ? ' ' : 'n';
	}
	if (!tr->has_task)
		return;
	values[0] = Int64GetDatum(t->task_id);
	values[1] = CStringGetTextDatum(t->step);
	values[2] = Int32GetDatum(t->visit);
	values[3] = Int32GetDatum(t->attempt);
	values[4] = CStringGetTextDatum(t->queue);
	WfSetTextOrNull(values, nulls, 5, t->activity);
	values[6] = TimestampTzGetDatum(t->available_at);
	values[7] = CStringGetTextDatum(t->idempotency_key);
	values[8] = JsonbPGetDatum(t->input);
	nulls[8] = t->input_is_run ? 'n' : ' ';
	interval_param(t->schedule_to_start, &values[9], &nulls[9]);
	interval_param(t->start_to_close, &values[10], &nulls[10]);
	interval_param(t->heartbeat, &values[11], &nulls[11]);
}

/*
 * WfHashDatum returns the run's last hash as a bytea datum.
 */
Datum
WfHashDatum(const uint8 *hash)
{
	bytea	   *h = palloc(VARHDRSZ + WF_HASH_LEN);

	SET_VARSIZE(h, VARHDRSZ + WF_HASH_LEN);
	memcpy(VARDATA(h), hash, WF_HASH_LEN);
	return PointerGetDatum(h);
}

/*
 * stored_context returns the context of run as the run row stores it:
 * without its input while that is, byte for byte, input, the run's input
 * as stored in wf.runs.input (NULL: unknown, the context as it is).  The
 * context's input is the run's until a context_updated changes it, and is
 * left out only while it is; run_state_from puts it back on reading, so
 * that every reader of the snapshot (mappings, choices, commands,
 * wf.verify_run) sees the whole context.  The member is taken out of the
 * binary form without decoding the rest (WfJsonbDropKeyIfSame).
 */
static Jsonb *
stored_context(Jsonb *context, Jsonb *input)
{
	/*
	 * A schema not yet updated to 0.3.0 keeps the layout of 0.2.0, so that
	 * its library can still be put back (docs/upgrading.md).
	 */
	if (input == NULL || !WfSchemaVersionAtLeast("0.3.0", NULL))
		return context;
	return WfJsonbDropKeyIfSame(context, "input", input);
}

/*
 * WfRunValues fills values/nulls[0..10] with the snapshot columns that a
 * transition writes (status, current_step, seq, context, output,
 * last_hash, finished_at, current_attempt, current_task, step_generation,
 * wait_generation); the context as stored_context leaves it for the run's
 * input input.
 */
static void
WfRunValues(const WfRunState *run, Jsonb *input, Datum *values, char *nulls)
{
	int			i;

	for (i = 0; i < WF_RUN_NVALUES; i++)
		nulls[i] = ' ';
	values[0] = CStringGetTextDatum(WfRunStatusName(run->status));
	WfSetTextOrNull(values, nulls, 1, run->current_step);
	values[2] = Int32GetDatum(run->seq);
	values[3] = JsonbPGetDatum(stored_context(run->context, input));
	if (run->output != NULL)
		values[4] = JsonbPGetDatum(run->output);
	else
		nulls[4] = 'n';
	values[5] = WfHashDatum(run->last_hash);
	if (run->finished)
		values[6] = TimestampTzGetDatum(run->finished_at);
	else
		nulls[6] = 'n';
	values[7] = Int32GetDatum(run->current_attempt);
	nulls[7] = run->current_attempt == 0 ? 'n' : ' ';
	values[8] = Int64GetDatum(run->current_task);
	nulls[8] = run->current_task == 0 ? 'n' : ' ';
	values[9] = Int32GetDatum(run->step_generation);
	values[10] = Int32GetDatum(run->wait_generation);
}

/*
 * write_side_effects inserts the timers of the transition and, when the
 * run has finished, cancels the run's pending timers; then each step kind
 * writes its own rows (WfStepKindOps.write: approvals, child runs).
 */
static void
write_side_effects(WfTransition *tr)
{
	WfRunState *run = tr->run;
	int			i;

	for (i = 0; i < tr->ntimers; i++)
	{
		WfNewTimer *t = &tr->timers[i];
		Datum		values[9];
		char		nulls[9];

		if (t->kind != WF_TIMER_CHILD_DONE)
			WfTimerRoom(run->tenant_id, &run->run_id, WfTimerKindName(t->kind),
						t->step, t->generation, tr->now);
		memset(nulls, ' ', sizeof(nulls));
		values[0] = Int64GetDatum(t->timer_id);
		values[1] = CStringGetTextDatum(run->tenant_id);
		values[2] = UUIDPGetDatum(&run->run_id);
		values[3] = CStringGetTextDatum(WfTimerKindName(t->kind));
		WfSetTextOrNull(values, nulls, 4, t->step);
		values[5] = Int32GetDatum(t->generation);
		values[6] = TimestampTzGetDatum(t->fire_at);
		values[7] = JsonbPGetDatum(t->payload);
		values[8] = TimestampTzGetDatum(tr->now);
		WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_TIMER_INSERT, values, nulls, false, 0, SPI_OK_INSERT);
		WfNoteTimer(t->fire_at);
	}
	if (run->finished)
	{
		Datum		values[2];

		values[0] = UUIDPGetDatum(&run->run_id);
		values[1] = TimestampTzGetDatum(tr->now);
		WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_TIMERS_CANCEL, values, NULL, false, 0, SPI_OK_UPDATE);
		if (tr->def->has_children && tr->stop_children == WF_STOP_NONE)
			tr->stop_children = run->status == WF_RUN_TERMINATED ?
				WF_STOP_TERMINATE : WF_STOP_CANCEL;
	}
	/* each step kind's rows; child runs last (the lock order between runs) */
	WfStepKindsWrite(tr);
}

/*
 * offer_lease decides whether the new task of the transition is written
 * leased under its lease offer (eager dispatch: WfLeaseOffer) and, when it
 * is, draws the lease as a claim would: a new fence, the lease's end, the
 * start-to-close timeout and the deadline, the earliest of those and the
 * heartbeat timeout.  A task of another queue, one not claimable yet
 * (available_at in the future), or a tenant that limits its tasks in
 * flight is written ready, for the ordinary claim.
 */
static void
offer_lease(WfTransition *tr)
{
	const WfLeaseOffer *o = tr->offer;
	WfNewTask  *t = &tr->task;
	WfTaskLease *l = &tr->lease;

	tr->task_leased = false;
	if (o == NULL || !tr->has_task || (o->queue != NULL && strcmp(t->queue, o->queue) != 0) ||
		t->available_at > tr->now || WfClaimLimited(tr->run->tenant_id))
		return;
	l->fence = WfFenceBase() + nextval_internal(WfFenceSequence(), false);
	l->expires_at = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
															TimestampTzGetDatum(tr->now),
															IntervalPGetDatum(o->lease)));
	l->deadline_at = l->expires_at;
	l->timeout_at = 0;
	if (t->start_to_close > 0)
	{
		l->timeout_at = tr->now + t->start_to_close;
		l->deadline_at = Min(l->deadline_at, l->timeout_at);
	}
	if (t->heartbeat > 0)
		l->deadline_at = Min(l->deadline_at, tr->now + t->heartbeat);
	tr->task_leased = true;
}

/*
 * task_lease_values fills values/nulls[0..WF_LEASE_NVALUES - 1] with how
 * the new task is written: its status and deadline_at, then fence,
 * deliveries, worker, claimed_at, lease, lease_expires_at and timeout_at,
 * those of its first lease when it is written leased (offer_lease), of an
 * attempt never claimed otherwise (its deadline: the schedule-to-start
 * timeout).
 */
static void
task_lease_values(WfTransition *tr, Datum *values, char *nulls)
{
	WfNewTask  *t = &tr->task;

	memset(values, 0, sizeof(Datum) * WF_LEASE_NVALUES);
	memset(nulls, 'n', WF_LEASE_NVALUES);
	if (!tr->has_task)
		return;
	memset(nulls, ' ', 4);
	values[2] = Int64GetDatum(0);
	values[3] = Int32GetDatum(0);
	if (!tr->task_leased)
	{
		values[0] = CStringGetTextDatum("ready");
		values[1] = TimestampTzGetDatum(t->available_at + t->schedule_to_start);
		nulls[1] = t->schedule_to_start > 0 ? ' ' : 'n';
		return;
	}
	memset(nulls + 4, ' ', 4);
	values[0] = CStringGetTextDatum("leased");
	values[1] = TimestampTzGetDatum(tr->lease.deadline_at);
	values[2] = Int64GetDatum(tr->lease.fence);
	values[3] = Int32GetDatum(1);
	values[4] = CStringGetTextDatum(tr->offer->worker);
	values[5] = TimestampTzGetDatum(tr->now);
	values[6] = IntervalPGetDatum(tr->offer->lease);
	values[7] = TimestampTzGetDatum(tr->lease.expires_at);
	values[8] = TimestampTzGetDatum(tr->lease.timeout_at);
	nulls[8] = tr->lease.timeout_at != 0 ? ' ' : 'n';
}


/* the rows WfTransitionWrite writes (rowwrite.c), columns in the order of the values */
static const char *const event_columns[] = {
	"run_id", "seq", "tenant_id", "type", "step", "attempt", "payload", "actor",
	"created_at", "hash", "more"
};
static WfRowTable events_table = WF_ROW_TABLE("events", event_columns, InvalidOid);

/*
 * The same without "more", for a schema not yet updated to 0.3.0, which
 * this library also serves until ALTER EXTENSION wfengine UPDATE: every
 * event in a row of its own, as the 0.2.0 library reads them.
 */
static WfRowTable events_table_02 = WF_ROW_TABLE_FIRST("events", event_columns,
													  lengthof(event_columns) - 1, InvalidOid);

static const char *const task_columns[] = {
	"task_id", "tenant_id", "run_id", "step", "visit", "attempt", "queue", "activity",
	"status", "available_at", "idempotency_key", "input", "created_at",
	"schedule_to_start", "start_to_close", "heartbeat_timeout", "deadline_at",
	"priority", "fence", "deliveries", "worker", "claimed_at", "lease",
	"lease_expires_at", "timeout_at", "lease_expirations",
	/* written by end_attempt only */
	"output", "error", "finished_at",
	/* read by WfLockTaskAndRun only */
	"last_heartbeat_at",
	/* put back by put_back_task only */
	"heartbeat_details",
	/* since 0.3.0 */
	"input_seq"
};
static WfRowTable tasks_table = WF_ROW_TABLE("tasks", task_columns, F_INT8EQ);

/*
 * The same without input_seq, for a schema not yet updated to 0.3.0: every
 * input that is not the run's is in its attempt's row.
 */
static WfRowTable tasks_table_02 = WF_ROW_TABLE_FIRST("tasks", task_columns,
													 lengthof(task_columns) - 1, F_INT8EQ);

/*
 * task_rows returns the table of the attempts' rows as this database's
 * schema has it.
 */
static WfRowTable *
task_rows(void)
{
	return WfSchemaVersionAtLeast("0.3.0", NULL) ? &tasks_table : &tasks_table_02;
}

/* the columns of task_columns that are read or written by name */
enum
{
	TASK_TENANT_ID = 1,
	TASK_RUN_ID = 2,
	TASK_STEP = 3,
	TASK_VISIT = 4,
	TASK_ATTEMPT = 5,
	TASK_STATUS = 8,
	TASK_INPUT = 11,
	TASK_CREATED_AT = 12,
	TASK_SCHEDULE_TO_START = 13,
	TASK_HEARTBEAT_TIMEOUT = 15,
	TASK_DEADLINE_AT = 16,
	TASK_PRIORITY = 17,
	TASK_FENCE = 18,
	TASK_WORKER = 20,
	TASK_CLAIMED_AT = 21,
	TASK_LEASE_EXPIRES_AT = 23,
	TASK_TIMEOUT_AT = 24,
	TASK_LEASE_EXPIRATIONS = 25,
	TASK_OUTPUT,
	TASK_ERROR,
	TASK_FINISHED_AT,
	TASK_LAST_HEARTBEAT_AT,
	TASK_HEARTBEAT_DETAILS,
	TASK_INPUT_SEQ,
	TASK_NCOLUMNS
};

/*
 * The live attempt a result report took (WfTakeTaskAndLockRun): its row,
 * deleted when read instead of locked, until the report's transition
 * deletes it for good (the attempt completed), or puts it back
 * (end_attempt, WfPutBackTask).  lxid 0: none.
 */
static struct
{
	LocalTransactionId lxid;
	SubTransactionId subid;		/* the subtransaction that took it */
	int64		task_id;
	Datum	   *values;
	bool	   *nulls;
} taken_task;

/* the subtransaction callback of taken_task is registered */
static bool taken_callback = false;

/*
 * taken_subxact follows the subtransaction that took a task row: when it
 * rolls back, so does the delete, and the row is no longer taken; when it
 * commits, the delete belongs to its parent.
 */
static void
taken_subxact(SubXactEvent event, SubTransactionId mySubid,
			  SubTransactionId parentSubid, void *arg)
{
	if (taken_task.lxid == InvalidLocalTransactionId || taken_task.subid != mySubid)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		taken_task.lxid = InvalidLocalTransactionId;
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		taken_task.subid = parentSubid;
}

/* is task_id the attempt that this transaction's report took? */
static bool
task_taken(int64 task_id)
{
	return taken_task.lxid == MyProc->lxid && taken_task.task_id == task_id;
}

/* the columns of WF_RUN_COLUMNS, in its order (WfRunColumn - 1) */
static const char *const run_columns[] = {
	"run_id", "tenant_id", "definition_id", "status", "current_step", "seq", "context",
	"output", "last_hash", "updated_at", "finished_at", "current_attempt",
	"current_task", "step_generation", "wait_generation", "input"
};
static WfRowTable runs_table = WF_ROW_TABLE("runs", run_columns, F_UUID_EQ);

/*
 * completed_in_history: does the transition append task_completed for
 * task_id?  Then the history holds all that a late report needs of the
 * attempt (its run, step, attempt and fence: WfLockCompletedTask), and
 * the attempt's row is deleted instead of being kept finished (issue 31).
 */
static bool
completed_in_history(const WfTransition *tr, int64 task_id)
{
	int			i;

	for (i = 0; i < tr->nevents; i++)
		if (tr->events[i].type == WF_EV_TASK_COMPLETED &&
			WfJsonbGetInt(tr->events[i].payload, "task_id", 0) == task_id)
			return true;
	return false;
}

/*
 * put_back_task inserts the row of the attempt the report took
 * (taken_task) again, with the columns that replace[i] says taken from
 * values[i] (replace NULL: as it was), and forgets it.
 */
static void
put_back_task(WfRowWriter *tasks, const Datum *values, const bool *nulls, const bool *replace)
{
	Datum		row[TASK_NCOLUMNS];
	bool		rownulls[TASK_NCOLUMNS];
	int			i;

	for (i = 0; i < TASK_NCOLUMNS; i++)
	{
		bool		r = replace != NULL && replace[i];

		row[i] = r ? values[i] : taken_task.values[i];
		rownulls[i] = r ? nulls[i] : taken_task.nulls[i];
	}
	taken_task.lxid = InvalidLocalTransactionId;
	WfRowInsert(tasks, row, rownulls);
}

/*
 * WfPutBackTask puts back, as it was, the row of the attempt that this
 * transaction's report took (WfTakeTaskAndLockRun), when the report's
 * transition did not end it (a lost report, or none written); nothing
 * when there is none.  The report's entry points call it before they
 * return.
 */
void
WfPutBackTask(void)
{
	WfRowWriter tasks;

	if (!task_taken(taken_task.task_id))
		return;
	WfRowWriterOpen(&tasks, task_rows());
	put_back_task(&tasks, NULL, NULL, NULL);
	WfRowWriterClose(&tasks);
}

/*
 * end_attempt records how the live attempt task_id ends: status, and its
 * output or error where not NULL (the result a transition accepts:
 * tr->finish_task), or "cancelled" (the attempt it withdraws:
 * tr->withdraw_task).  It applies only to an attempt still ready or
 * leased, and returns whether it did (a withdrawn attempt may have
 * finished already); the lease expirations counted go up, never down.
 * An attempt completed by a result that the transition records in
 * task_completed is deleted instead: its result, fence and identity are
 * in the history, which answers a late report for it (since 0.3.0, issue
 * 31: the finished row's update and its new index entries were an eighth
 * of a step's WAL).  A result held for a paused run (result_held), a
 * failure, an approval's notification and a withdrawn attempt keep their
 * row; for the attempt a report took (its row deleted when read,
 * WfTakeTaskAndLockRun) that row is put back so updated.
 */
static bool
end_attempt(WfTransition *tr, WfRowWriter *tasks, int64 task_id, const char *status,
			Jsonb *output, Jsonb *error, int32 expirations)
{
	Datum		values[TASK_NCOLUMNS];
	bool		nulls[TASK_NCOLUMNS];
	bool		replace[TASK_NCOLUMNS];
	bool		isnull;
	bool		taken = task_taken(task_id);
	int32		old_expirations;

	/*
	 * The attempt the report took (WfTakeTaskAndLockRun) was leased, and
	 * its row is in taken_task; any other is found and must still be live.
	 */
	if (taken)
		old_expirations = DatumGetInt32(taken_task.values[TASK_LEASE_EXPIRATIONS]);
	else
	{
		char	   *old_status;

		if (!WfRowFind(tasks, Int64GetDatum(task_id)))
			return false;
		old_status = TextDatumGetCString(WfRowGet(tasks, TASK_STATUS, &isnull));
		if (strcmp(old_status, "ready") != 0 && strcmp(old_status, "leased") != 0)
			return false;
		old_expirations = DatumGetInt32(WfRowGet(tasks, TASK_LEASE_EXPIRATIONS, &isnull));
	}
	if (strcmp(status, "completed") == 0 &&
		completed_in_history(tr, task_id))
	{
		if (taken)
			taken_task.lxid = InvalidLocalTransactionId;	/* stays deleted */
		else
			WfRowDelete(tasks);
		return true;
	}

	memset(nulls, false, sizeof(nulls));
	memset(replace, false, sizeof(replace));
	replace[TASK_STATUS] = replace[TASK_FINISHED_AT] = true;
	replace[TASK_DEADLINE_AT] = replace[TASK_LEASE_EXPIRATIONS] = true;
	values[TASK_STATUS] = CStringGetTextDatum(status);
	values[TASK_FINISHED_AT] = TimestampTzGetDatum(tr->now);
	nulls[TASK_DEADLINE_AT] = true;
	values[TASK_LEASE_EXPIRATIONS] = Int32GetDatum(Max(old_expirations, expirations));
	replace[TASK_OUTPUT] = output != NULL;
	values[TASK_OUTPUT] = JsonbPGetDatum(output);
	replace[TASK_ERROR] = error != NULL;
	values[TASK_ERROR] = JsonbPGetDatum(error);
	if (!taken)
	{
		WfRowUpdate(tasks, values, nulls, replace);
		return true;
	}

	/*
	 * The taken row goes back, updated so.  An input the transition's
	 * context_updated replaced is kept in it, as keep_task_inputs does for
	 * the rows it finds (it could not find this one).
	 */
	if (taken_task.nulls[TASK_INPUT] && taken_task.nulls[TASK_INPUT_SEQ] &&
		tr->input_before != NULL)
	{
		replace[TASK_INPUT] = true;
		values[TASK_INPUT] = JsonbPGetDatum(tr->input_before);
	}
	put_back_task(tasks, values, nulls, replace);
	return true;
}

/*
 * A run's context below this many bytes is written as it is; from it on,
 * compressed when that saves (WfRowCompress).  The context holds every
 * completed step's output and is rewritten, and WAL-logged, whole on each
 * step; PostgreSQL would compress it only once the row passes about 2 kB
 * (docs/benchmarks.md: the context compressed).
 */
#define WF_CONTEXT_COMPRESS_MIN 256

/*
 * write_run writes the new snapshot into the run row, its context
 * compressed where that saves.
 */
static void
write_run(WfTransition *tr)
{
	WfRowWriter w;
	Datum		values[lengthof(run_columns)];
	char		cnulls[WF_RUN_NVALUES];
	bool		nulls[lengthof(run_columns)];
	bool		replace[lengthof(run_columns)];
	int			i;

	/* where the values of WfRunValues go */
	static const int run_at[WF_RUN_NVALUES] = {
		WF_RUN_COL_STATUS, WF_RUN_COL_CURRENT_STEP, WF_RUN_COL_SEQ, WF_RUN_COL_CONTEXT,
		WF_RUN_COL_OUTPUT, WF_RUN_COL_LAST_HASH, WF_RUN_COL_FINISHED_AT,
		WF_RUN_COL_CURRENT_ATTEMPT, WF_RUN_COL_CURRENT_TASK, WF_RUN_COL_STEP_GENERATION,
		WF_RUN_COL_WAIT_GENERATION
	};
	Datum		rv[WF_RUN_NVALUES];

	WfRunValues(tr->run, tr->run->input, rv, cnulls);
	memset(nulls, false, sizeof(nulls));
	memset(replace, false, sizeof(replace));
	for (i = 0; i < WF_RUN_NVALUES; i++)
	{
		values[run_at[i] - 1] = rv[i];
		nulls[run_at[i] - 1] = cnulls[i] == 'n';
		replace[run_at[i] - 1] = true;
	}
	values[WF_RUN_COL_UPDATED_AT - 1] = TimestampTzGetDatum(tr->now);
	replace[WF_RUN_COL_UPDATED_AT - 1] = true;

	WfRowWriterOpen(&w, &runs_table);
	values[WF_RUN_COL_CONTEXT - 1] = WfRowCompress(&w, WF_RUN_COL_CONTEXT - 1,
												   values[WF_RUN_COL_CONTEXT - 1],
												   WF_CONTEXT_COMPRESS_MIN);
	if (!WfRowFind(&w, UUIDPGetDatum(&tr->run->run_id)))
		elog(ERROR, "run snapshot or live task changed during a wfengine transition");
	WfRowUpdate(&w, values, nulls, replace);
	WfRowWriterClose(&w);
}

/*
 * write_events appends the transition's events: each in a row of its own,
 * but for those that ride along with the event before them (a
 * task_scheduled or run_completed that follows another event of the
 * transition, WfEventRidesAlong), which go into that event's row, column
 * more (WfPackEvents); the row's hash is that of its last event.
 */
static void
write_events(WfTransition *tr, Datum tenant)
{
	WfRunState *run = tr->run;
	Datum		values[lengthof(event_columns)];
	bool		nulls[lengthof(event_columns)];
	WfRowWriter w;
	bool		pack = WfSchemaVersionAtLeast("0.3.0", NULL);
	int			i;
	int			j;

	WfRowWriterOpen(&w, pack ? &events_table : &events_table_02);
	memset(nulls, false, sizeof(nulls));
	values[0] = UUIDPGetDatum(&run->run_id);
	values[2] = tenant;
	values[7] = CStringGetTextDatum(tr->actor);
	values[8] = TimestampTzGetDatum(tr->now);
	for (i = 0; i < tr->nevents; i = j)
	{
		WfEvent    *ev = &tr->events[i];

		for (j = i + 1; pack && j < tr->nevents && WfEventRidesAlong(tr->events[j].type); j++)
			;
		values[1] = Int32GetDatum(ev->seq);
		values[3] = CStringGetTextDatum(WfEventTypeName(ev->type));
		nulls[4] = ev->step == NULL;
		values[4] = nulls[4] ? (Datum) 0 : CStringGetTextDatum(ev->step);
		nulls[5] = ev->attempt == 0;
		values[5] = Int32GetDatum(ev->attempt);
		values[6] = JsonbPGetDatum(ev->payload);
		values[9] = WfHashDatum(tr->events[j - 1].hash);
		if (pack)
		{
			nulls[10] = j == i + 1;
			values[10] = nulls[10] ? (Datum) 0 :
				PointerGetDatum(WfPackEvents(&tr->events[i + 1], j - i - 1));
		}
		WfRowInsert(&w, values, nulls);
	}
	WfRowWriterClose(&w);
}

/*
 * insert_task inserts the transition's new task attempt (the values of
 * WfTaskValues and task_lease_values).
 */
static void
insert_task(WfTransition *tr, WfRowWriter *tasks, Datum tenant)
{
	Datum		values[TASK_NCOLUMNS];
	bool		nulls[TASK_NCOLUMNS];
	Datum		tv[WF_TASK_NVALUES];
	char		tn[WF_TASK_NVALUES];
	Datum		lv[WF_LEASE_NVALUES];
	char		ln[WF_LEASE_NVALUES];
	/* where the values of WfTaskValues and task_lease_values go */
	static const int task_at[WF_TASK_NVALUES] = {0, 3, 4, 5, 6, 7, 9, 10, 11, 13, 14, 15};
	static const int lease_at[WF_LEASE_NVALUES] = {8, 16, 18, 19, 20, 21, 22, 23, 24};
	int			i;

	WfTaskValues(tr, tv, tn);
	task_lease_values(tr, lv, ln);
	memset(nulls, false, sizeof(nulls));
	for (i = 0; i < WF_TASK_NVALUES; i++)
	{
		values[task_at[i]] = tv[i];
		nulls[task_at[i]] = tn[i] == 'n';
	}
	for (i = 0; i < WF_LEASE_NVALUES; i++)
	{
		values[lease_at[i]] = lv[i];
		nulls[lease_at[i]] = ln[i] == 'n';
	}
	values[TASK_TENANT_ID] = tenant;
	values[TASK_RUN_ID] = UUIDPGetDatum(&tr->run->run_id);
	values[TASK_CREATED_AT] = TimestampTzGetDatum(tr->now);
	values[TASK_PRIORITY] = Int32GetDatum(tr->task.priority);
	values[TASK_LEASE_EXPIRATIONS] = Int32GetDatum(0);
	nulls[TASK_OUTPUT] = nulls[TASK_ERROR] = nulls[TASK_FINISHED_AT] = true;
	nulls[TASK_LAST_HEARTBEAT_AT] = nulls[TASK_HEARTBEAT_DETAILS] = true;

	/* a large mapped input stays in its task_scheduled event (WfTaskInputAt) */
	nulls[TASK_INPUT_SEQ] = tr->task.input_seq <= 0;
	values[TASK_INPUT_SEQ] = Int32GetDatum(tr->task.input_seq);
	if (tr->task.input_seq > 0)
		nulls[TASK_INPUT] = true;

	/*
	 * The run's input is not copied (WfRunInputOf), but a schema before
	 * 0.3.0, which this library also serves until ALTER EXTENSION wfengine
	 * UPDATE, has wf.tasks.input NOT NULL: it gets the copy.
	 */
	if (nulls[TASK_INPUT] &&
		TupleDescAttr(RelationGetDescr(tasks->rel), tasks->table->attnums[TASK_INPUT] - 1)->attnotnull)
	{
		values[TASK_INPUT] = JsonbPGetDatum(tr->task.input);
		nulls[TASK_INPUT] = false;
	}
	WfRowInsert(tasks, values, nulls);
}

/*
 * WfRunInputOf returns the input of a task attempt whose row holds none:
 * the run's input as it stands, $.input of its context (or, when the
 * stored context leaves it out, stored: wf.runs.input).  Since 0.3.0 an
 * attempt whose input is the run's input (every step without an input
 * mapping) is written with input NULL rather than a copy (issue 31), and
 * whatever hands out or reads such an attempt's input takes the run's;
 * a context_updated first writes the input it replaces into those rows
 * (keep_task_inputs), so that each keeps the input it was scheduled with.
 */
Jsonb *
WfRunInputOf(Jsonb *context, Jsonb *stored)
{
	Jsonb	   *input = WfJsonbGetJsonb(context, "input");

	/*
	 * A context stored without its input has wf.runs.input as it (the
	 * snapshot leaves it out while it is that); a context read through
	 * the run reader has it put back already (stored NULL).
	 */
	if (input == NULL)
		input = stored;
	if (input == NULL)
		elog(ERROR, "a run's context holds no input");
	return input;
}

/*
 * WfTaskInputAt returns the input of the attempt that event seq of the
 * run (run_id, tenant) scheduled: the "input" of that task_scheduled's
 * payload, read from the history (the event's own row, or the column more
 * of the row before it, WfUnpackEvents).  Since 0.3.0 an input that an
 * input mapping made, of WF_INPUT_REF_MIN bytes or more, is kept there
 * only: the attempt's row holds input NULL and input_seq (insert_task).
 * A claim and the engine worker read it in their own transactions, where
 * the event is committed, or their own.
 */
Jsonb *
WfTaskInputAt(pg_uuid_t *run_id, const char *tenant, int32 seq)
{
	Datum		values[3];
	WfEvent		head;
	WfEvent    *evs;
	int			n;
	bool		isnull;
	Datum		more;
	Jsonb	   *input = NULL;

	values[0] = UUIDPGetDatum(run_id);
	values[1] = Int32GetDatum(seq);
	values[2] = CStringGetTextDatum(tenant);
	if (WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_EVENT_ROW, values, NULL, false, 1,
				   SPI_OK_SELECT) == 1)
	{
		memset(&head, 0, sizeof(head));
		head.seq = DatumGetInt32(WfGetDatumNotNull(0, 1));
		head.type = WfEventTypeFromName(TextDatumGetCString(WfGetDatumNotNull(0, 2)));
		head.payload = DatumGetJsonbP(WfGetDatumNotNull(0, 3));
		more = WfGetDatum(0, 4, &isnull);
		evs = WfUnpackEvents(&head, isnull ? NULL : DatumGetTextPP(more), &n);
		if (seq - head.seq < n && evs[seq - head.seq].type == WF_EV_TASK_SCHEDULED)
			input = WfJsonbGetJsonb(evs[seq - head.seq].payload, "input");
	}
	if (input == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("the history of run %s holds no task input at event %d, which a task attempt refers to",
						DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(run_id))), seq),
				 errhint("Check the run with wf.verify_run.")));
	return DatumGetJsonbPCopy(JsonbPGetDatum(input));
}

/*
 * keep_task_inputs writes the run's input as it was before the
 * transition's context_updated (tr->input_before) into every attempt of
 * the run whose row holds none (WfRunInputOf): the live attempt keeps the
 * input it was scheduled with, and so does one a pause withdrew (it may
 * be scheduled again as it was).  The run's live task is locked already
 * (WfLockRun), the others are finished.
 */
static void
keep_task_inputs(WfTransition *tr)
{
	Datum		values[2];

	values[0] = UUIDPGetDatum(&tr->run->run_id);
	values[1] = JsonbPGetDatum(tr->input_before);
	WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_KEEP_TASK_INPUTS, values, NULL, false, 0,
			   SPI_OK_UPDATE);
}

/*
 * WfTransitionWrite writes the transition of an existing run, row by row
 * without a statement (rowwrite.c): the result it records in the live task
 * row (or the attempt it withdraws), the new snapshot, its events and its
 * new task attempt (written leased when the transition's lease offer is
 * taken); then its timers (rare, so in statements of their own).
 */
void
WfTransitionWrite(WfTransition *tr)
{
	Datum		tenant;
	WfRowWriter tasks;

	if (tr->nevents == 0)
	{
		if (tr->finish_task != 0)
			elog(ERROR, "wfengine transition records a result without an event");
		return;
	}
	offer_lease(tr);
	tenant = CStringGetTextDatum(tr->run->tenant_id);

	/*
	 * The old attempt is finished before the new one is inserted, which the
	 * unique index of attempts (tasks_attempt_key, whose key of a live
	 * attempt is (run_id, step, 0, 0)) would refuse otherwise.
	 */
	if (tr->input_before != NULL)
		keep_task_inputs(tr);
	WfRowWriterOpen(&tasks, task_rows());
	if (tr->withdraw_task != 0)
		(void) end_attempt(tr, &tasks, tr->withdraw_task, "cancelled", NULL, NULL,
						   tr->withdraw_expirations);
	if (tr->finish_task != 0 &&
		!end_attempt(tr, &tasks, tr->finish_task, tr->finish_status,
					 tr->finish_output, tr->finish_error, 0))
		elog(ERROR, "run snapshot or live task changed during a wfengine transition");
	write_run(tr);
	write_events(tr, tenant);
	if (tr->has_task)
		insert_task(tr, &tasks, tenant);
	WfRowWriterClose(&tasks);

	write_side_effects(tr);
	if (tr->has_task)
		note_new_task(tr);
	WfCount(WF_CNT_TRANSITIONS, 1);
	WfCount(WF_CNT_EVENTS, tr->nevents);
}

/*
 * note_new_task asks for the commit-time signals of a new task attempt:
 * waiting claimers of its queue, and the engine worker when the attempt
 * has a schedule-to-start deadline; and tells the queue's claim floor.
 * An attempt written leased only has its lease to watch.
 */
static void
note_new_task(WfTransition *tr)
{
	if (tr->task_leased)
	{
		WfNoteTimer(tr->lease.deadline_at);
		return;
	}
	WfNoteTaskReady(tr->run->tenant_id, tr->task.queue);
	WfClaimFloorNoteTask(tr->run->tenant_id, tr->task.queue, tr->task.priority,
						 tr->task.available_at, tr->task.task_id);
	if (tr->task.schedule_to_start > 0)
		WfNoteTimer(tr->task.available_at + tr->task.schedule_to_start);
}

/*
 * spi_strdup copies s (NULL: NULL) into the memory of the caller of the
 * API call (SPI_palloc).
 */
static char *
spi_strdup(const char *s)
{
	size_t		len;
	char	   *copy;

	if (s == NULL)
		return NULL;
	len = strlen(s) + 1;
	copy = SPI_palloc(len);
	memcpy(copy, s, len);
	return copy;
}

/*
 * WfScheduledTaskOf sets *out to the new task attempt of the written
 * transition tr (task_id 0: none), copied into the memory of the caller of
 * the API call, which outlives the call's SPI connection.
 */
void
WfScheduledTaskOf(const WfTransition *tr, WfScheduledTask *out)
{
	const WfNewTask *t = &tr->task;

	memset(out, 0, sizeof(WfScheduledTask));
	if (!tr->has_task)
		return;
	out->task_id = t->task_id;
	out->leased = tr->task_leased;
	out->queue = spi_strdup(t->queue);
	if (!out->leased)
		return;
	out->run_id = tr->run->run_id;
	out->step = spi_strdup(t->step);
	out->attempt = t->attempt;
	out->idempotency_key = spi_strdup(t->idempotency_key);
	out->input = SPI_palloc(VARSIZE(t->input));
	memcpy(out->input, t->input, VARSIZE(t->input));
	out->activity = spi_strdup(t->activity);
	out->lease = tr->lease;
}

/* the columns of a new run's row, WfRunValues's in its order from NEW_RUN_STATUS */
enum
{
	NEW_RUN_ID,
	NEW_RUN_TENANT_ID,
	NEW_RUN_DEFINITION_ID,
	NEW_RUN_DEFINITION_NAME,
	NEW_RUN_DEFINITION_VERSION,
	NEW_RUN_INPUT,
	NEW_RUN_IDEMPOTENCY_KEY,
	NEW_RUN_INPUT_DIGEST,
	NEW_RUN_CREATED_AT,
	NEW_RUN_UPDATED_AT,
	NEW_RUN_LEGAL_HOLD,
	NEW_RUN_STATUS,
	NEW_RUN_CURRENT_STEP,
	NEW_RUN_SEQ,
	NEW_RUN_CONTEXT,
	NEW_RUN_OUTPUT,
	NEW_RUN_LAST_HASH,
	NEW_RUN_FINISHED_AT,
	NEW_RUN_CURRENT_ATTEMPT,
	NEW_RUN_CURRENT_TASK,
	NEW_RUN_STEP_GENERATION,
	NEW_RUN_WAIT_GENERATION,
	NEW_RUN_NCOLUMNS
};
static const char *const new_run_columns[NEW_RUN_NCOLUMNS] = {
	"run_id", "tenant_id", "definition_id", "definition_name", "definition_version",
	"input", "idempotency_key", "input_digest", "created_at", "updated_at", "legal_hold",
	"status", "current_step", "seq", "context", "output", "last_hash", "finished_at",
	"current_attempt", "current_task", "step_generation", "wait_generation"
};
static WfRowTable new_runs_table = WF_ROW_TABLE("runs", new_run_columns, F_UUID_EQ);

/*
 * start_key_taken takes the transaction-level lock of tenant's idempotency
 * key, which every start with that key takes before it looks for the key
 * and holds until its transaction ends, and then answers whether a run
 * with the key exists: committed by now, or started by this transaction.
 */
static bool
start_key_taken(WfRowWriter *w, Datum tenant, const char *tenant_name, const char *key)
{
	static const int columns[2] = {NEW_RUN_TENANT_ID, NEW_RUN_IDEMPOTENCY_KEY};
	Datum		keys[2];

	(void) WfLockTenantKey(tenant_name, key, WF_LOCK_START_KEY, true);
	keys[0] = tenant;
	keys[1] = CStringGetTextDatum(key);
	return WfRowExists(w, 2, columns, keys);
}

/*
 * WfTransitionWriteNew writes the first transition of a new run, row by
 * row as WfTransitionWrite does: the run row, its events, its first task
 * attempt, then its timers.  With an idempotency key it first takes the
 * key's lock and returns false, writing nothing, when a run with the key
 * exists (the caller then reads it: under REPEATABLE READ a run committed
 * after the snapshot is a serialization failure there).  Starts with the
 * same key thus take turns, and the second finds the first's run once it
 * has committed, as INSERT ... ON CONFLICT DO NOTHING would.
 */
bool
WfTransitionWriteNew(WfTransition *tr, const char *defname, int32 version,
					 Jsonb *input, const char *key)
{
	WfRunState *run = tr->run;
	Datum		tenant = CStringGetTextDatum(run->tenant_id);
	Datum		values[NEW_RUN_NCOLUMNS];
	bool		nulls[NEW_RUN_NCOLUMNS];
	char		cnulls[WF_RUN_NVALUES];
	WfRowWriter w;
	int			i;

	WfRowWriterOpen(&w, &new_runs_table);
	if (key != NULL && start_key_taken(&w, tenant, run->tenant_id, key))
	{
		WfRowWriterClose(&w);
		return false;
	}
	offer_lease(tr);			/* eager start (wf.start_and_claim) */
	memset(nulls, false, sizeof(nulls));
	values[NEW_RUN_ID] = UUIDPGetDatum(&run->run_id);
	values[NEW_RUN_TENANT_ID] = tenant;
	values[NEW_RUN_DEFINITION_ID] = Int64GetDatum(run->definition_id);
	values[NEW_RUN_DEFINITION_NAME] = CStringGetTextDatum(defname);
	values[NEW_RUN_DEFINITION_VERSION] = Int32GetDatum(version);
	values[NEW_RUN_INPUT] = JsonbPGetDatum(input);
	nulls[NEW_RUN_IDEMPOTENCY_KEY] = key == NULL;
	values[NEW_RUN_IDEMPOTENCY_KEY] = key != NULL ? CStringGetTextDatum(key) : (Datum) 0;
	nulls[NEW_RUN_INPUT_DIGEST] = tr->input_digest == NULL;
	values[NEW_RUN_INPUT_DIGEST] = PointerGetDatum(tr->input_digest);
	values[NEW_RUN_CREATED_AT] = values[NEW_RUN_UPDATED_AT] = TimestampTzGetDatum(tr->now);
	values[NEW_RUN_LEGAL_HOLD] = BoolGetDatum(false);
	run->input = input;			/* as run_state_from would read it */
	WfRunValues(run, input, &values[NEW_RUN_STATUS], cnulls);
	for (i = 0; i < WF_RUN_NVALUES; i++)
		nulls[NEW_RUN_STATUS + i] = cnulls[i] == 'n';
	WfRowInsert(&w, values, nulls);
	WfRowWriterClose(&w);

	write_events(tr, tenant);
	if (tr->has_task)
	{
		WfRowWriter tasks;

		WfRowWriterOpen(&tasks, task_rows());
		insert_task(tr, &tasks, tenant);
		WfRowWriterClose(&tasks);
	}
	write_side_effects(tr);
	if (tr->has_task)
		note_new_task(tr);
	WfCount(WF_CNT_RUNS_STARTED, 1);
	WfCount(WF_CNT_TRANSITIONS, 1);
	WfCount(WF_CNT_EVENTS, tr->nevents);
	return true;
}

/* where run_state_from reads the columns of WF_RUN_COLUMNS from */
typedef Datum (*WfColumnGetter) (const void *source, int col, bool *isnull);

/* the columns of a row of the current SPI result (source: its number) */
/*
 * locking returns the statement to lock with: plan, or its NOWAIT form
 * while lock waits are forbidden (WfSetLockWait: the engine worker).
 */
static int
locking(int plan)
{
	if (WfLockWaitAllowed())
		return plan;
	switch (plan)
	{
		case WF_RUNSTORE_TASK_LOCK:
			return WF_RUNSTORE_TASK_LOCK_NOWAIT;
		case WF_RUNSTORE_LOCK_TIMER_AND_RUN:
			return WF_RUNSTORE_LOCK_TIMER_AND_RUN_NOWAIT;
		case WF_RUNSTORE_RUN_LOCK:
			return WF_RUNSTORE_RUN_LOCK_NOWAIT;
		default:
			elog(ERROR, "statement %d of runstore.c does not lock", plan);
	}
	return plan;				/* keep the compiler quiet */
}

static Datum
spi_column(const void *source, int col, bool *isnull)
{
	return WfGetDatum(*(const int *) source, col, isnull);
}

/* the values of a row read by WfRowLock, columns as in WF_RUN_COLUMNS */
typedef struct WfLockedRow
{
	const Datum *values;
	const bool *nulls;
} WfLockedRow;

static Datum
locked_column(const void *source, int col, bool *isnull)
{
	const WfLockedRow *r = source;

	*isnull = r->nulls[col - 1];
	return r->values[col - 1];
}

/* a column that is never NULL */
static Datum
column_not_null(WfColumnGetter get, const void *source, int col)
{
	bool		isnull;
	Datum		d = get(source, col, &isnull);

	if (isnull)
		elog(ERROR, "column %d of a run snapshot is NULL", col);
	return d;
}

/* a text column, as a C string (NULL for NULL) */
static char *
column_text(WfColumnGetter get, const void *source, int col)
{
	bool		isnull;
	Datum		d = get(source, col, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

/*
 * run_state_from reads a snapshot, columns as in WF_RUN_COLUMNS, copied
 * into the current memory context.
 */
static void
run_state_from(WfRunState *run, WfColumnGetter get, const void *src)
{
	bool		isnull;
	Datum		d;
	Jsonb	   *context;
	JsonbValue	member;

	memset(run, 0, sizeof(WfRunState));
	memcpy(&run->run_id, DatumGetUUIDP(column_not_null(get, src, WF_RUN_COL_RUN_ID)), sizeof(pg_uuid_t));
	run->tenant_id = column_text(get, src, WF_RUN_COL_TENANT_ID);
	run->definition_id = DatumGetInt64(column_not_null(get, src, WF_RUN_COL_DEFINITION_ID));
	run->status = WfRunStatusFromName(column_text(get, src, WF_RUN_COL_STATUS));
	run->current_step = column_text(get, src, WF_RUN_COL_CURRENT_STEP);
	run->seq = DatumGetInt32(column_not_null(get, src, WF_RUN_COL_SEQ));
	run->input = DatumGetJsonbPCopy(column_not_null(get, src, WF_RUN_COL_INPUT));
	d = column_not_null(get, src, WF_RUN_COL_CONTEXT);
	context = DatumGetJsonbP(d);	/* detoasted, or the row's own bytes */
	/* stored without the input when it is the run's (stored_context) */
	if (JB_ROOT_IS_OBJECT(context) &&
		getKeyJsonValueFromContainer(&context->root, "input", 5, &member) == NULL)
		run->context = WfJsonbSetKey(context, "input", run->input);	/* a copy */
	else if ((Pointer) context == DatumGetPointer(d))
		run->context = DatumGetJsonbPCopy(d);
	else
		run->context = context;
	d = get(src, WF_RUN_COL_OUTPUT, &isnull);
	run->output = isnull ? NULL : DatumGetJsonbPCopy(d);
	d = column_not_null(get, src, WF_RUN_COL_LAST_HASH);
	if (VARSIZE_ANY_EXHDR(DatumGetByteaPP(d)) != WF_HASH_LEN)
		elog(ERROR, "run snapshot has a malformed last_hash");
	memcpy(run->last_hash, VARDATA_ANY(DatumGetByteaPP(d)), WF_HASH_LEN);
	run->updated_at = DatumGetTimestampTz(column_not_null(get, src, WF_RUN_COL_UPDATED_AT));
	d = get(src, WF_RUN_COL_FINISHED_AT, &isnull);
	run->finished = !isnull;
	run->finished_at = isnull ? 0 : DatumGetTimestampTz(d);
	d = get(src, WF_RUN_COL_CURRENT_ATTEMPT, &isnull);
	run->current_attempt = isnull ? 0 : DatumGetInt32(d);
	d = get(src, WF_RUN_COL_CURRENT_TASK, &isnull);
	run->current_task = isnull ? 0 : DatumGetInt64(d);
	run->step_generation = DatumGetInt32(column_not_null(get, src, WF_RUN_COL_STEP_GENERATION));
	run->wait_generation = DatumGetInt32(column_not_null(get, src, WF_RUN_COL_WAIT_GENERATION));
	/* large outputs by reference in the snapshots of 0.3.0 on, only */
	run->output_refs = WfSchemaVersionAtLeast("0.3.0", NULL);
}

/*
 * context_with_outputs returns run's context with the outputs it refers to
 * of the steps wanted may read (NULL: all) put back (WfContextWithOutputs):
 * those of the events of tr (when not NULL: the transition's own, not
 * written yet), the others read from the run's history by events_pkey, in
 * one statement.  The context itself when it refers to none of them.
 */
static Jsonb *
context_with_outputs(const WfRunState *run, const WfTransition *tr, const WfStepsRead *wanted)
{
	int32	   *seqs;
	int			n = WfContextOutputSeqs(run->context, wanted, &seqs);
	Jsonb	  **outputs;
	bool	   *found;
	Datum	   *missing;
	int			nmissing = 0;
	int			i;
	int			k;

	if (n == 0)
		return run->context;
	outputs = palloc0(sizeof(Jsonb *) * n);
	found = palloc0(sizeof(bool) * n);
	missing = palloc(sizeof(Datum) * n);
	for (i = 0; i < n; i++)
	{
		for (k = 0; tr != NULL && k < tr->nevents && !found[i]; k++)
			if (tr->events[k].seq == seqs[i])
			{
				outputs[i] = WfEventOutput(&tr->events[k]);
				found[i] = true;
			}
		if (!found[i])
			missing[nmissing++] = Int32GetDatum(seqs[i]);
	}
	if (nmissing > 0)
	{
		Datum		values[3];
		uint64		rows;
		uint64		r;

		values[0] = UUIDPGetDatum(&run->run_id);
		values[1] = PointerGetDatum(construct_array(missing, nmissing, INT4OID,
													sizeof(int32), true, TYPALIGN_INT));
		values[2] = CStringGetTextDatum(run->tenant_id);
		/* read-only outside a transition (wf.run_context is STABLE) */
		rows = WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_EVENT_OUTPUTS, values, NULL, tr == NULL, 0,
						  SPI_OK_SELECT);
		for (r = 0; r < rows; r++)
		{
			int32		seq = DatumGetInt32(WfGetDatumNotNull(r, 1));
			bool		isnull;
			Datum		d = WfGetDatum(r, 2, &isnull);

			/* a reference is only ever to an output (of 256 bytes or more) */
			for (i = 0; i < n && !isnull; i++)
				if (seqs[i] == seq && !found[i])
				{
					outputs[i] = DatumGetJsonbPCopy(d);
					found[i] = true;
				}
		}
		for (i = 0; i < n; i++)
			if (!found[i])
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("the history of run %s holds no step output at event %d, which its context refers to",
								DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(&run->run_id))),
								seqs[i]),
						 errhint("Check the run with wf.verify_run.")));
	}
	return WfContextWithOutputs(run->context, n, seqs, outputs);
}

/*
 * run_context returns the context of tr's run as the definition's paths
 * that may read the steps reads says read it: with their outputs kept in
 * the history only put back (record_step_output in state.c), the others'
 * references left as they are.  The whole context (reads->all) is kept for
 * the transition until the context changes.  The callers below have seen
 * that the context may refer to outputs (WfContextMayReferToOutputs).
 */
static Jsonb *
run_context(WfTransition *tr, const WfStepsRead *reads)
{
	if (tr->whole_context_of == tr->run->context)
		return tr->whole_context;
	if (!reads->all)
		return reads->names == NIL && !reads->children ? tr->run->context :
			context_with_outputs(tr->run, tr, reads);
	tr->whole_context = context_with_outputs(tr->run, tr, NULL);
	tr->whole_context_of = tr->run->context;
	return tr->whole_context;
}

/*
 * WfRunContextForPath is the context of tr's run for what the compiled
 * path may read (WfPathStepsRead), WfRunContextForChildren for the branch
 * outputs of $.children, WfRunContextForStep for the entry of one step;
 * WfRunEvaluateMapping evaluates a mapping over the context its paths may
 * read.  A context that refers to no output is the run's, as it is.
 */
Jsonb *
WfRunContextForPath(WfTransition *tr, Datum path)
{
	WfStepsRead reads = {.all = false, .names = NIL, .children = false};

	if (!WfContextMayReferToOutputs(tr->run->context))
		return tr->run->context;
	WfPathStepsRead(path, &reads);
	return run_context(tr, &reads);
}

Jsonb *
WfRunEvaluateMapping(WfTransition *tr, const WfMapping *map, int n)
{
	WfStepsRead reads = {.all = false, .names = NIL, .children = false};
	Jsonb	   *context = tr->run->context;

	if (WfContextMayReferToOutputs(context))
	{
		WfMappingStepsRead(map, n, &reads);
		context = run_context(tr, &reads);
	}
	return WfEvaluateMapping(map, n, context);
}

Jsonb *
WfRunContextForChildren(WfTransition *tr)
{
	WfStepsRead reads = {.all = false, .names = NIL, .children = true};

	if (!WfContextMayReferToOutputs(tr->run->context))
		return tr->run->context;
	return run_context(tr, &reads);
}

Jsonb *
WfRunContextForStep(WfTransition *tr, const char *step)
{
	WfStepsRead reads = {.all = false, .names = list_make1((char *) step), .children = false};

	if (!WfContextMayReferToOutputs(tr->run->context))
		return tr->run->context;
	return run_context(tr, &reads);
}

/*
 * WfRunContextWhole is the whole context of a run read outside a
 * transition (wf.run_context).
 */
Jsonb *
WfRunContextWhole(const WfRunState *run)
{
	if (!WfContextMayReferToOutputs(run->context))
		return run->context;
	return context_with_outputs(run, NULL, NULL);
}

/*
 * WfRunStateFromTuple reads a snapshot from row of the current SPI result,
 * selected with the WF_RUN_COLUMNS list.  The values are copied into the
 * current memory context.
 */
void
WfRunStateFromTuple(WfRunState *run, int row)
{
	run_state_from(run, spi_column, &row);
}

/* a nullable timestamp column of a locked task row: 0 for NULL */
static TimestampTz
task_time(const Datum *values, const bool *nulls, int col)
{
	return nulls[col] ? 0 : DatumGetTimestampTz(values[col]);
}

/* a time plus an interval of a locked task row: 0 when either is NULL */
static TimestampTz
task_time_plus(const Datum *values, const bool *nulls, int time, int interval)
{
	if (nulls[time] || nulls[interval])
		return 0;
	return DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
												   values[time], values[interval]));
}

/*
 * locked_task reads a task row's columns (tv/tn) into *task, and its
 * deadlines into *times when that is not NULL; run is the task's run.
 */
static void
locked_task(const Datum *tv, const bool *tn, const WfRunState *run, WfLockedTask *task,
			WfTaskTimes *times)
{
	task->status = TextDatumGetCString(tv[TASK_STATUS]);
	task->fence = DatumGetInt64(tv[TASK_FENCE]);
	task->step = TextDatumGetCString(tv[TASK_STEP]);
	task->visit = DatumGetInt32(tv[TASK_VISIT]);
	task->attempt = DatumGetInt32(tv[TASK_ATTEMPT]);
	task->worker = tn[TASK_WORKER] ? NULL : TextDatumGetCString(tv[TASK_WORKER]);
	task->input_seq = tn[TASK_INPUT_SEQ] ? 0 : DatumGetInt32(tv[TASK_INPUT_SEQ]);
	if (!tn[TASK_INPUT])
		task->input = DatumGetJsonbP(tv[TASK_INPUT]);
	else if (task->input_seq > 0)
		task->input = NULL;		/* in the history (input_seq) */
	else
		task->input = WfRunInputOf(run->context, NULL);
	if (times != NULL)
	{
		times->deadline = task_time(tv, tn, TASK_DEADLINE_AT);
		times->lease_end = task_time(tv, tn, TASK_LEASE_EXPIRES_AT);
		times->close_at = task_time(tv, tn, TASK_TIMEOUT_AT);
		times->heartbeat_at = task_time_plus(tv, tn, tn[TASK_LAST_HEARTBEAT_AT] ?
											 TASK_CLAIMED_AT : TASK_LAST_HEARTBEAT_AT,
											 TASK_HEARTBEAT_TIMEOUT);
		times->start_at = task_time_plus(tv, tn, TASK_CREATED_AT, TASK_SCHEDULE_TO_START);
		times->expirations = DatumGetInt32(tv[TASK_LEASE_EXPIRATIONS]);
	}
}

/*
 * WfLockTaskAndRun locks task task_id of tenant and then its run (the lock
 * order of this file) as SELECT ... FOR UPDATE would (WfRowLock), and
 * reads both into *run and *task, and the task's deadlines into *times
 * when it is not NULL (the engine worker); false when there is no such
 * task of the tenant.
 */
bool
WfLockTaskAndRun(int64 task_id, const char *tenant, WfRunState *run, WfLockedTask *task,
				 WfTaskTimes *times)
{
	Datum		tv[TASK_NCOLUMNS];
	bool		tn[TASK_NCOLUMNS];
	Datum		rv[lengthof(run_columns)];
	bool		rn[lengthof(run_columns)];
	WfLockedRow r = {rv, rn};

	if (tenant == NULL)
		return false;			/* a caller of no tenant sees no task */
	tn[TASK_INPUT_SEQ] = true;	/* a schema before 0.3.0 has no such column */
	if (!WfRowLock(task_rows(), Int64GetDatum(task_id), tenant, tv, tn) ||
		!WfRowLock(&runs_table, tv[TASK_RUN_ID], tenant, rv, rn))
		return false;
	run_state_from(run, locked_column, &r);
	locked_task(tv, tn, run, task, times);
	return true;
}

/* WfRowTake's test of WfTakeTaskAndLockRun: leased, under the fence */
static bool
leased_under(const Datum *values, const bool *nulls, void *arg)
{
	return DatumGetInt64(values[TASK_FENCE]) == *(const int64 *) arg &&
		strcmp(TextDatumGetCString(values[TASK_STATUS]), "leased") == 0;
}

/*
 * WfTakeTaskAndLockRun is WfLockTaskAndRun for a result report under
 * fence: when the task is leased under that fence (the report wins unless
 * its run says otherwise, and then almost always completes it), its row is
 * deleted as it is read instead of locked (WfRowTake: one WAL record
 * fewer), and stays deleted when the report's transition completes the
 * attempt; end_attempt and WfPutBackTask put it back otherwise.  Its run
 * row is then read without a lock record either (WfRowReadToUpdate).
 * Else, and when the task row is held or changed by another transaction,
 * it locks as WfLockTaskAndRun does.  The order is the same: the task's
 * row, then its run's.
 */
bool
WfTakeTaskAndLockRun(int64 task_id, int64 fence, const char *tenant, WfRunState *run,
					 WfLockedTask *task)
{
	Datum	   *tv;
	bool	   *tn;
	Datum		rv[lengthof(run_columns)];
	bool		rn[lengthof(run_columns)];
	WfLockedRow r = {rv, rn};
	MemoryContext old;
	WfRowTaken	taken;

	if (tenant == NULL)
		return false;
	old = MemoryContextSwitchTo(CurTransactionContext);
	tv = palloc(sizeof(Datum) * TASK_NCOLUMNS);
	tn = palloc(sizeof(bool) * TASK_NCOLUMNS);
	tn[TASK_INPUT_SEQ] = true;	/* a schema before 0.3.0 has no such column */
	taken = WfRowTake(task_rows(), Int64GetDatum(task_id), tenant, leased_under, &fence, tv, tn);
	MemoryContextSwitchTo(old);
	if (taken != WF_ROW_TAKEN)
	{
		pfree(tv);
		pfree(tn);
		return taken == WF_ROW_KEPT && WfLockTaskAndRun(task_id, tenant, run, task, NULL);
	}
	if (!taken_callback)
	{
		RegisterSubXactCallback(taken_subxact, NULL);
		taken_callback = true;
	}
	taken_task.lxid = MyProc->lxid;
	taken_task.subid = GetCurrentSubTransactionId();
	taken_task.task_id = task_id;
	taken_task.values = tv;
	taken_task.nulls = tn;

	/*
	 * The run row is read, not locked: every writer of a run that has a
	 * live attempt takes that attempt's row first (the lock order of this
	 * file), and this transaction holds it deleted; the update finds the
	 * version read, or fails if it changed after all (WfRowReadToUpdate).
	 */
	if (!WfRowReadToUpdate(&runs_table, tv[TASK_RUN_ID], tenant, rv, rn))
		elog(ERROR, "task %lld has no run", (long long) task_id);
	run_state_from(run, locked_column, &r);
	locked_task(tv, tn, run, task, NULL);
	return true;
}

/* the columns of completed_task */
enum
{
	COMPLETED_TASK_COL_RUN_ID = 1,
	COMPLETED_TASK_COL_STEP,
	COMPLETED_TASK_COL_ATTEMPT,
	COMPLETED_TASK_COL_FENCE,
	COMPLETED_TASK_COL_VISIT,
	COMPLETED_TASK_COL_WORKER
};

/*
 * WfFindCompletedTask finds task task_id of tenant among the attempts whose
 * row was deleted when they completed: the history's task_completed event
 * for it (end_attempt deletes the row of such an attempt).  It reads into
 * *task what a late report or heartbeat needs: status "completed", the
 * fence the result was accepted under, step, visit, attempt and worker
 * (no input), and the run's id into *run_id; false when the history
 * completed no such task.  No lock is taken: the event never changes.
 */
bool
WfFindCompletedTask(int64 task_id, const char *tenant, WfLockedTask *task, pg_uuid_t *run_id)
{
	Datum		values[2];
	bool		isnull;
	Datum		d;

	if (tenant == NULL)
		return false;
	values[0] = Int64GetDatum(task_id);
	values[1] = CStringGetTextDatum(tenant);
	if (WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_COMPLETED_TASK, values, NULL, false, 1,
				   SPI_OK_SELECT) != 1)
		return false;
	memset(task, 0, sizeof(WfLockedTask));
	memcpy(run_id, DatumGetUUIDP(WfGetDatumNotNull(0, COMPLETED_TASK_COL_RUN_ID)),
		   sizeof(pg_uuid_t));
	task->status = "completed";
	task->step = WfGetTextOrNull(0, COMPLETED_TASK_COL_STEP);
	task->attempt = DatumGetInt32(WfGetDatumNotNull(0, COMPLETED_TASK_COL_ATTEMPT));
	task->fence = DatumGetInt64(WfGetDatumNotNull(0, COMPLETED_TASK_COL_FENCE));
	d = WfGetDatum(0, COMPLETED_TASK_COL_VISIT, &isnull);
	task->visit = isnull ? 0 : DatumGetInt32(d);
	task->worker = WfGetTextOrNull(0, COMPLETED_TASK_COL_WORKER);
	return true;
}

/*
 * WfLockCompletedTask is WfLockTaskAndRun for an attempt whose row was
 * deleted when it completed (WfFindCompletedTask): it locks the attempt's
 * run (there is no task row to lock first; the history's event never
 * changes) and reads it into *run, and the attempt into *task; false when
 * the history completed no such task of tenant, or its run is gone.
 */
bool
WfLockCompletedTask(int64 task_id, const char *tenant, WfRunState *run, WfLockedTask *task)
{
	pg_uuid_t	run_id;
	Datum		rv[lengthof(run_columns)];
	bool		rn[lengthof(run_columns)];
	WfLockedRow r = {rv, rn};

	if (!WfFindCompletedTask(task_id, tenant, task, &run_id) ||
		!WfRowLock(&runs_table, UUIDPGetDatum(&run_id), tenant, rv, rn))
		return false;
	run_state_from(run, locked_column, &r);
	return true;
}

/*
 * WfLockRunAndTask locks the run's live task (if it has one) and then the
 * run, in the engine's lock order, and reads the run into *run.  A command
 * that may withdraw the live task must hold its row before the run row,
 * or it could deadlock with a worker reporting for that task.  Returns
 * false when the run does not exist for this tenant.
 */
bool
WfLockRunAndTask(pg_uuid_t *run_id, const char *tenant, WfRunState *run)
{
	Datum		values[2];
	int64		locked = 0;
	int			tries;

	values[0] = UUIDPGetDatum(run_id);
	values[1] = CStringGetTextDatum(tenant);
	for (tries = 0;; tries++)
	{
		bool		isnull;
		Datum		d;
		int64		current;

		if (WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_RUN_CURRENT_TASK, values, NULL, false, 1, SPI_OK_SELECT) != 1)
			return false;
		d = WfGetDatum(0, 1, &isnull);
		current = isnull ? 0 : DatumGetInt64(d);
		if (current != 0 && current != locked)
		{
			Datum		tv[1];

			tv[0] = Int64GetDatum(current);
			WfPlanExec(&WfRunstorePlans, locking(WF_RUNSTORE_TASK_LOCK), tv, NULL, false, 0, SPI_OK_SELECT);
			locked = current;
		}
		if (WfPlanExec(&WfRunstorePlans, locking(WF_RUNSTORE_RUN_LOCK), values, NULL, false, 1, SPI_OK_SELECT) != 1)
			return false;
		WfRunStateFromTuple(run, 0);
		if (run->current_task == 0 || run->current_task == locked)
			return true;
		if (tries >= 3)
			elog(ERROR, "the live task of a run kept changing while it was being locked");
	}
}

/*
 * WfLockRun locks a run of the session's tenant for a command that may
 * change it: its live task first, then the run row (the lock order of
 * state.c).  An unknown run, or one of another tenant, is an error.
 */
void
WfLockRun(pg_uuid_t *run_id, WfRunState *run)
{
	if (!WfLockRunAndTask(run_id, WfCurrentTenant(), run))
		WfUnknownRun(run_id);
}

/*
 * WfReadRun reads a run of the session's tenant into *run without a lock,
 * for a command that only looks at it (wf.explain, wf.verify_run); the
 * row read stays in SPI_tuptable, with the name and version of the run's
 * definition after the snapshot (WfRunReadColumn).  An unknown run, or
 * one of another tenant, is an error.
 */
void
WfReadRun(pg_uuid_t *run_id, WfRunState *run)
{
	Datum		values[2];

	values[0] = UUIDPGetDatum(run_id);
	values[1] = CStringGetTextDatum(WfCurrentTenant());
	if (WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_RUN_READ, values, NULL, true, 1,
				   SPI_OK_SELECT) != 1)
		WfUnknownRun(run_id);
	WfRunStateFromTuple(run, 0);
}

/*
 * WfLockLiveRun locks a run of the session's tenant (its live task first,
 * then the run row) for an operator command or a signal, and refuses a run
 * that has ended.  refusal is the error message, with one %s for the run
 * id; hint may be NULL.
 */
void
WfLockLiveRun(pg_uuid_t *run_id, WfRunState *run, const char *refusal, const char *hint)
{
	WfLockRun(run_id, run);
	if (run->status == WF_RUN_CANCELLING)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %s is being cancelled", WfRunIdText(run_id)),
				 errdetail("Its compensations are running; it takes no more signals or changes.")));
	if (run->status == WF_RUN_COMPENSATING)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %s is being compensated", WfRunIdText(run_id)),
				 errdetail("It failed, and the compensations of its completed steps are running; it takes no more signals or changes.")));
	if (run->status != WF_RUN_RUNNING && run->status != WF_RUN_PAUSED)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg(refusal, WfRunIdText(run_id)),
				 errdetail("The run is \"%s\".", WfRunStatusName(run->status)),
				 hint != NULL ? errhint("%s", hint) : 0));
}

/*
 * WfNextAttempt returns the attempt number for a new attempt of visit of
 * the task step named step: one more than the last attempt of that visit,
 * or 1.
 */
int32
WfNextAttempt(pg_uuid_t *run_id, const char *step, int32 visit)
{
	Datum		values[2];

	values[0] = UUIDPGetDatum(run_id);
	values[1] = CStringGetTextDatum(step);
	if (WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_LAST_TASK_OF_STEP, values, NULL, false, 1, SPI_OK_SELECT) == 1 &&
		DatumGetInt32(WfGetDatumNotNull(0, WF_LAST_TASK_COL_VISIT)) == visit)
		return DatumGetInt32(WfGetDatumNotNull(0, WF_LAST_TASK_COL_ATTEMPT)) + 1;
	return 1;
}

/*
 * WfReadTask reads task task_id of a locked run (WF_RUNSTORE_TASK_ROW): its
 * status, fence, visit, worker and input; false when there is none.
 */
bool
WfReadTask(int64 task_id, WfLockedTask *task)
{
	Datum		values[1];

	values[0] = Int64GetDatum(task_id);
	if (WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_TASK_ROW, values, NULL, false, 1, SPI_OK_SELECT) != 1)
		return false;
	memset(task, 0, sizeof(WfLockedTask));
	task->status = WfGetTextOrNull(0, TASK_ROW_COL_STATUS);
	task->fence = DatumGetInt64(WfGetDatumNotNull(0, TASK_ROW_COL_FENCE));
	task->visit = DatumGetInt32(WfGetDatumNotNull(0, TASK_ROW_COL_VISIT));
	task->worker = WfGetTextOrNull(0, TASK_ROW_COL_WORKER);
	task->input = DatumGetJsonbPCopy(WfGetDatumNotNull(0, TASK_ROW_COL_INPUT));
	return true;
}


/*
 * WfLockTimerAndRun locks timer timer_id of tenant and its run, the run's
 * live task (if any) first, and reads them into *run and *timer; false when
 * the timer or its run is gone.  The live task is found before the locks
 * are taken, so it is looked at again under them: a run whose live task
 * changed meanwhile is locked again.  The statements name the whole
 * primary keys, (timer_id, tenant_id) and (run_id, tenant_id): before
 * ANALYZE has seen a table (a bulk start, a restored or moved partition)
 * the planner knows an id alone only by a default selectivity, and joined
 * the timer to a sequential scan of wf.runs (25 ms a timer at 100,000
 * runs, bench/timer_lag.sh with IDLE_SECONDS=5).
 */
bool
WfLockTimerAndRun(int64 timer_id, const char *tenant, WfRunState *run, WfLockedTimer *timer)
{
	Datum		values[2];
	int64		locked_task = 0;
	int			tries;

	values[1] = CStringGetTextDatum(tenant);
	for (tries = 0;; tries++)
	{
		int64		current_task;
		bool		isnull;
		Datum		d;

		values[0] = Int64GetDatum(timer_id);
		if (WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_TIMER_PEEK, values, NULL, false, 1, SPI_OK_SELECT) != 1)
			return false;
		d = WfGetDatum(0, 1, &isnull);
		current_task = isnull ? 0 : DatumGetInt64(d);
		if (current_task != 0 && current_task != locked_task)
		{
			values[0] = Int64GetDatum(current_task);
			WfPlanExec(&WfRunstorePlans, locking(WF_RUNSTORE_TASK_LOCK), values, NULL, false, 0, SPI_OK_SELECT);
			locked_task = current_task;
		}

		values[0] = Int64GetDatum(timer_id);
		if (WfPlanExec(&WfRunstorePlans, locking(WF_RUNSTORE_LOCK_TIMER_AND_RUN), values, NULL, false, 1, SPI_OK_SELECT) != 1)
			return false;
		WfRunStateFromTuple(run, 0);
		if (run->current_task == 0 || run->current_task == locked_task)
			break;
		if (tries >= 3)
			elog(ERROR, "the live task of run changed while timer %lld was being fired",
				 (long long) timer_id);
	}
	timer->kind = WfTimerKindFromName(WfGetTextOrNull(0, TIMER_COL_KIND));
	timer->step = WfGetTextOrNull(0, TIMER_COL_STEP);
	timer->generation = DatumGetInt32(WfGetDatumNotNull(0, TIMER_COL_GENERATION));
	timer->payload = DatumGetJsonbPCopy(WfGetDatumNotNull(0, TIMER_COL_PAYLOAD));
	timer->status = WfGetTextOrNull(0, TIMER_COL_STATUS);
	timer->due_at = DatumGetTimestampTz(WfGetDatumNotNull(0, TIMER_COL_DUE_AT));
	return true;
}
