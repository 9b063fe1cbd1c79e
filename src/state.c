/*-------------------------------------------------------------------------
 *
 * state.c
 *	  The run state machine: the reducer that applies one event to a run
 *	  snapshot, and the transition writer that appends events and
 *	  rewrites the snapshot in one statement.
 *
 * Event sourcing discipline.  A live transition never changes the
 * snapshot directly.  It builds each event's payload, hashes the event
 * onto the chain and hands it to WfApplyEvent, the one function that
 * changes a WfRunState.  wf.verify_run replays the stored events through
 * the same function, so a snapshot that the live path wrote and the one
 * that replay rebuilds can differ only if the history or the snapshot was
 * changed behind the engine's back.
 *
 * Transaction boundaries.  Every transition runs inside the caller's
 * transaction while it holds the run row locked (FOR UPDATE), so
 * transitions of one run are serialised and seq is gap-free.  The events,
 * the next task attempt (if any) and the new snapshot go to the database
 * in a single statement (WF_PLAN_TRANSITION); either all of it commits or
 * none of it.
 *
 * Lock order: task rows before their run row.  A claim locks task rows
 * only (and never waits: SKIP LOCKED); a result report locks its task
 * row and then the run row.  A worker may therefore claim and report in
 * one transaction while a late report for the same task waits: the late
 * report waits for the task row without holding the run row, so the two
 * never wait on each other in opposite orders.  Commands that touch
 * several tasks of a run must lock those task rows before the run row.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/state.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"

#include "crypto.h"
#include "spi_util.h"
#include "state.h"

/* names of the run states, indexed by WfRunStatus */
static const char *const run_status_names[] = {
	[WF_RUN_NONE] = "none",
	[WF_RUN_RUNNING] = "running",
	[WF_RUN_COMPLETED] = "completed",
	[WF_RUN_FAILED] = "failed",
};

/* names of the event types, indexed by WfEventType */
static const char *const event_type_names[] = {
	[WF_EV_RUN_STARTED] = "run_started",
	[WF_EV_TASK_SCHEDULED] = "task_scheduled",
	[WF_EV_TASK_COMPLETED] = "task_completed",
	[WF_EV_TASK_FAILED] = "task_failed",
	[WF_EV_RESULT_DUPLICATE] = "result_duplicate",
	[WF_EV_RESULT_STALE] = "result_stale",
	[WF_EV_RUN_COMPLETED] = "run_completed",
	[WF_EV_RUN_FAILED] = "run_failed",
};

/* forward declarations */
static Jsonb *context_set_step(Jsonb *context, const char *step, Jsonb *value);
static Datum make_array(Datum *elems, bool *nulls, int n, Oid elemtype);

/*
 * WfRunStatusName returns the stored name of a run status.
 */
const char *
WfRunStatusName(WfRunStatus status)
{
	if (status < WF_RUN_NONE || status > WF_RUN_FAILED)
		elog(ERROR, "invalid run status %d", (int) status);
	return run_status_names[status];
}

/*
 * WfRunStatusFromName maps a stored status name back, or WF_RUN_NONE.
 */
WfRunStatus
WfRunStatusFromName(const char *name)
{
	int			i;

	for (i = WF_RUN_RUNNING; i <= WF_RUN_FAILED; i++)
		if (strcmp(run_status_names[i], name) == 0)
			return (WfRunStatus) i;
	return WF_RUN_NONE;
}

/*
 * WfEventTypeName returns the stored name of an event type.
 */
const char *
WfEventTypeName(WfEventType type)
{
	if (type < WF_EV_RUN_STARTED || type > WF_EV_RUN_FAILED)
		elog(ERROR, "invalid event type %d", (int) type);
	return event_type_names[type];
}

/*
 * WfEventTypeFromName maps a stored event type name back, or 0.
 */
WfEventType
WfEventTypeFromName(const char *name)
{
	int			i;

	for (i = WF_EV_RUN_STARTED; i <= WF_EV_RUN_FAILED; i++)
		if (strcmp(event_type_names[i], name) == 0)
			return (WfEventType) i;
	return (WfEventType) 0;
}

/*
 * context_set_step returns context with $.steps.<step> set to value.
 */
static Jsonb *
context_set_step(Jsonb *context, const char *step, Jsonb *value)
{
	Datum		path[2];
	ArrayType  *patharr;

	path[0] = CStringGetTextDatum("steps");
	path[1] = CStringGetTextDatum(step);
	patharr = construct_array(path, 2, TEXTOID, -1, false, TYPALIGN_INT);
	return DatumGetJsonbP(DirectFunctionCall4(jsonb_set,
											  JsonbPGetDatum(context),
											  PointerGetDatum(patharr),
											  JsonbPGetDatum(value),
											  BoolGetDatum(true)));
}

/* ----------------------------------------------------------------
 *		the reducer
 * ----------------------------------------------------------------
 */

/*
 * WfApplyEvent applies one event to a run snapshot.  It is the only code
 * that changes a WfRunState, for live transitions and replay alike.  It
 * returns NULL, or a description of why the event cannot follow the
 * current state (which only a tampered or corrupt history can cause).
 */
const char *
WfApplyEvent(WfRunState *run, const WfEvent *ev)
{
	Jsonb	   *p = ev->payload;

	if (ev->seq != run->seq + 1)
		return psprintf("event %d follows event %d", ev->seq, run->seq);
	if (run->status == WF_RUN_NONE && ev->type != WF_EV_RUN_STARTED)
		return psprintf("the first event is \"%s\", not \"run_started\"",
						WfEventTypeName(ev->type));

	switch (ev->type)
	{
		case WF_EV_RUN_STARTED:
			{
				WfJsonBuilder b;
				Jsonb	   *input = WfJsonbGetJsonb(p, "input");
				Jsonb	   *steps;

				if (run->status != WF_RUN_NONE)
					return "\"run_started\" after the run had started";
				if (input == NULL)
					return "\"run_started\" without input";
				WfJbBegin(&b);
				steps = WfJbEnd(&b);
				WfJbBegin(&b);
				WfJbJsonb(&b, "input", input);
				WfJbJsonb(&b, "steps", steps);
				run->context = WfJbEnd(&b);
				run->definition_id = WfJsonbGetInt(p, "definition_id", 0);
				run->status = WF_RUN_RUNNING;
				run->output = NULL;
				break;
			}

		case WF_EV_TASK_SCHEDULED:
			if (run->status != WF_RUN_RUNNING || ev->step == NULL || ev->attempt <= 0)
				return "\"task_scheduled\" while the run is not running";
			run->current_step = pstrdup(ev->step);
			run->current_attempt = ev->attempt;
			run->current_task = WfJsonbGetInt(p, "task_id", 0);
			break;

		case WF_EV_TASK_COMPLETED:
			{
				WfJsonBuilder b;

				if (run->status != WF_RUN_RUNNING || run->current_step == NULL ||
					ev->step == NULL || strcmp(run->current_step, ev->step) != 0 ||
					ev->attempt != run->current_attempt)
					return "\"task_completed\" for a step or attempt that is not the current one";
				WfJbBegin(&b);
				WfJbJsonb(&b, "output", WfJsonbGetJsonb(p, "output"));
				WfJbInt(&b, "attempt", ev->attempt);
				WfJbInt(&b, "visit", WfJsonbGetInt(p, "visit", 1));
				run->context = context_set_step(run->context, ev->step, WfJbEnd(&b));
				run->current_step = NULL;
				run->current_attempt = 0;
				run->current_task = 0;
				break;
			}

		case WF_EV_TASK_FAILED:
			if (run->status != WF_RUN_RUNNING || run->current_step == NULL ||
				ev->step == NULL || strcmp(run->current_step, ev->step) != 0 ||
				ev->attempt != run->current_attempt)
				return "\"task_failed\" for a step or attempt that is not the current one";
			/* the step stays current: a retry or run_failed follows */
			run->current_attempt = 0;
			run->current_task = 0;
			break;

		case WF_EV_RESULT_DUPLICATE:
		case WF_EV_RESULT_STALE:
			/* recorded, never applied */
			break;

		case WF_EV_RUN_COMPLETED:
			if (run->status != WF_RUN_RUNNING || run->current_task != 0)
				return "\"run_completed\" while a task is live";
			run->status = WF_RUN_COMPLETED;
			run->output = WfJsonbGetJsonb(p, "output");
			run->current_step = NULL;
			run->finished = true;
			run->finished_at = ev->created_at;
			break;

		case WF_EV_RUN_FAILED:
			if (run->status != WF_RUN_RUNNING || run->current_task != 0)
				return "\"run_failed\" while a task is live";
			run->status = WF_RUN_FAILED;
			run->current_step = WfJsonbGetText(p, "step");
			run->finished = true;
			run->finished_at = ev->created_at;
			break;

		default:
			return psprintf("unknown event type %d", (int) ev->type);
	}

	run->seq = ev->seq;
	memcpy(run->last_hash, ev->hash, WF_HASH_LEN);
	run->updated_at = ev->created_at;
	return NULL;
}

/*
 * WfHashEventFor computes ev->hash, chained onto the run's last hash.
 */
void
WfHashEventFor(const WfRunState *run, WfEvent *ev)
{
	WfEventHashInput in;
	char	   *text = JsonbToCString(NULL, &ev->payload->root,
									  VARSIZE(ev->payload));

	in.prev_hash = run->last_hash;
	in.run_id = &run->run_id;
	in.tenant_id = run->tenant_id;
	in.seq = ev->seq;
	in.type = WfEventTypeName(ev->type);
	in.step = ev->step;
	in.attempt = ev->attempt;
	in.actor = ev->actor;
	in.created_at = ev->created_at;
	in.payload = text;
	in.payload_len = strlen(text);
	WfHashEvent(&in, ev->hash);
	pfree(text);
}

/* ----------------------------------------------------------------
 *		transitions
 * ----------------------------------------------------------------
 */

/*
 * WfTransitionInit starts a transition of run, at time now.
 */
void
WfTransitionInit(WfTransition *tr, WfRunState *run, const WfDefinition *def,
				 TimestampTz now)
{
	memset(tr, 0, sizeof(WfTransition));
	tr->run = run;
	tr->def = def;
	tr->actor = WfCurrentActor();
	tr->now = now;
}

/*
 * WfAppendEvent appends one event to the transition and applies it to the
 * snapshot.  The payload must already hold everything the reducer needs.
 */
void
WfAppendEvent(WfTransition *tr, WfEventType type, const char *step,
			  int32 attempt, Jsonb *payload)
{
	WfEvent    *ev;
	const char *problem;

	if (tr->nevents >= WF_MAX_TRANSITION_EVENTS)
		elog(ERROR, "too many events in one wfengine transition");
	ev = &tr->events[tr->nevents++];
	ev->seq = tr->run->seq + 1;
	ev->type = type;
	ev->step = step;
	ev->attempt = attempt;
	ev->payload = payload;
	ev->actor = tr->actor;
	ev->created_at = tr->now;
	WfHashEventFor(tr->run, ev);

	problem = WfApplyEvent(tr->run, ev);
	if (problem != NULL)
		elog(ERROR, "wfengine state machine produced an illegal event: %s", problem);
}

/*
 * WfScheduleStep schedules attempt of the step at step_index: it fixes the
 * task id and idempotency key, computes the input (unless given, as for a
 * retry) and appends task_scheduled.
 */
void
WfScheduleStep(WfTransition *tr, int step_index, int32 attempt,
			   TimestampTz available_at, Jsonb *input)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	WfNewTask  *t = &tr->task;
	WfJsonBuilder b;
	JsonbValue *prev;
	char		runid[UUID_LEN * 2 + 5];

	if (tr->has_task)
		elog(ERROR, "wfengine transition schedules two tasks");

	/*
	 * The visit: one more than the last completed visit of this step.  All
	 * attempts of one visit share it, and so share the idempotency key.
	 */
	t->visit = 1;
	prev = WfJsonbGet(tr->run->context, "steps");
	if (prev != NULL && prev->type == jbvBinary)
	{
		JsonbValue *s = getKeyJsonValueFromContainer(prev->val.binary.data,
													 sd->name, strlen(sd->name), NULL);

		if (s != NULL && s->type == jbvBinary)
		{
			JsonbValue *vv = getKeyJsonValueFromContainer(s->val.binary.data,
														  "visit", 5, NULL);

			if (vv != NULL && vv->type == jbvNumeric)
				t->visit = DatumGetInt32(DirectFunctionCall1(numeric_int4,
															 NumericGetDatum(vv->val.numeric))) + 1;
		}
	}

	if (input == NULL)
	{
		if (sd->has_input)
			input = WfEvaluateMapping(sd->input, sd->n_input, tr->run->context);
		else
			input = WfJsonbGetJsonb(tr->run->context, "input");
	}

	strlcpy(runid, DatumGetCString(DirectFunctionCall1(uuid_out,
													   UUIDPGetDatum(&tr->run->run_id))),
			sizeof(runid));
	t->task_id = nextval_internal(WfTaskIdSequence(), false);
	t->step = sd->name;
	t->attempt = attempt;
	t->queue = sd->queue;
	t->activity = sd->activity;
	t->available_at = available_at;
	t->idempotency_key = psprintf("%s/%s/%d", runid, sd->name, t->visit);
	t->input = input;
	tr->has_task = true;

	WfJbBegin(&b);
	WfJbInt(&b, "task_id", t->task_id);
	WfJbText(&b, "queue", t->queue);
	WfJbText(&b, "activity", t->activity);
	WfJbInt(&b, "visit", t->visit);
	WfJbText(&b, "idempotency_key", t->idempotency_key);
	WfJbTimestamp(&b, "available_at", available_at);
	WfJbJsonb(&b, "input", input);
	WfAppendEvent(tr, WF_EV_TASK_SCHEDULED, sd->name, attempt, WfJbEnd(&b));
}

/*
 * WfAdvance moves the run past the step at from_step (just completed):
 * it schedules the successor or completes the run.  from_step -1 starts
 * the run at its first step.
 */
void
WfAdvance(WfTransition *tr, int from_step)
{
	const WfDefinition *def = tr->def;
	int			next = (from_step < 0) ? 0 : def->steps[from_step].next;

	if (next != WF_STEP_END)
	{
		WfScheduleStep(tr, next, 1, tr->now, NULL);
		return;
	}
	else
	{
		WfJsonBuilder b;
		Jsonb	   *output;

		if (def->has_output)
			output = WfEvaluateMapping(def->output, def->n_output, tr->run->context);
		else
		{
			JsonbValue *steps = WfJsonbGet(tr->run->context, "steps");
			JsonbValue *last = NULL;

			if (steps != NULL && steps->type == jbvBinary)
			{
				const char *name = def->steps[from_step].name;
				JsonbValue *s = getKeyJsonValueFromContainer(steps->val.binary.data,
															 name, strlen(name), NULL);

				if (s != NULL && s->type == jbvBinary)
					last = getKeyJsonValueFromContainer(s->val.binary.data,
														"output", 6, NULL);
			}
			output = last ? JsonbValueToJsonb(last) : NULL;
		}
		WfJbBegin(&b);
		WfJbJsonb(&b, "output", output);
		WfAppendEvent(tr, WF_EV_RUN_COMPLETED, NULL, 0, WfJbEnd(&b));
	}
}

/*
 * make_array builds a one-dimensional array datum with optional NULLs.
 */
static Datum
make_array(Datum *elems, bool *nulls, int n, Oid elemtype)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			dims[1];
	int			lbs[1];

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	dims[0] = n;
	lbs[0] = 1;
	return PointerGetDatum(construct_md_array(elems, nulls, 1, dims, lbs,
											  elemtype, typlen, typbyval, typalign));
}

/*
 * WfEventArrays fills values[0..5] with the parallel arrays (seq, type,
 * step, attempt, payload, hash) of the transition's events, as both
 * WF_PLAN_TRANSITION and WF_PLAN_RUN_INSERT take them.
 */
void
WfEventArrays(WfTransition *tr, Datum *values)
{
	int			n = tr->nevents;
	Datum	   *seq = palloc(sizeof(Datum) * n);
	Datum	   *type = palloc(sizeof(Datum) * n);
	Datum	   *step = palloc(sizeof(Datum) * n);
	bool	   *step_null = palloc(sizeof(bool) * n);
	Datum	   *attempt = palloc(sizeof(Datum) * n);
	bool	   *attempt_null = palloc(sizeof(bool) * n);
	Datum	   *payload = palloc(sizeof(Datum) * n);
	Datum	   *hash = palloc(sizeof(Datum) * n);
	int			i;

	for (i = 0; i < n; i++)
	{
		WfEvent    *ev = &tr->events[i];
		bytea	   *h = palloc(VARHDRSZ + WF_HASH_LEN);

		SET_VARSIZE(h, VARHDRSZ + WF_HASH_LEN);
		memcpy(VARDATA(h), ev->hash, WF_HASH_LEN);
		seq[i] = Int32GetDatum(ev->seq);
		type[i] = CStringGetTextDatum(WfEventTypeName(ev->type));
		step_null[i] = (ev->step == NULL);
		step[i] = step_null[i] ? (Datum) 0 : CStringGetTextDatum(ev->step);
		attempt_null[i] = (ev->attempt == 0);
		attempt[i] = Int32GetDatum(ev->attempt);
		payload[i] = JsonbPGetDatum(ev->payload);
		hash[i] = PointerGetDatum(h);
	}
	values[0] = make_array(seq, NULL, n, INT4OID);
	values[1] = make_array(type, NULL, n, TEXTOID);
	values[2] = make_array(step, step_null, n, TEXTOID);
	values[3] = make_array(attempt, attempt_null, n, INT4OID);
	values[4] = make_array(payload, NULL, n, JSONBOID);
	values[5] = make_array(hash, NULL, n, BYTEAOID);
}

/*
 * WfTaskValues fills values/nulls[0..8] with the new task of the
 * transition (task_id, step, visit, attempt, queue, activity,
 * available_at, idempotency_key, input), or NULLs when there is none.
 */
void
WfTaskValues(WfTransition *tr, Datum *values, char *nulls)
{
	WfNewTask  *t = &tr->task;
	int			i;

	if (!tr->has_task)
	{
		for (i = 0; i < 9; i++)
		{
			values[i] = (Datum) 0;
			nulls[i] = 'n';
		}
		return;
	}
	for (i = 0; i < 9; i++)
		nulls[i] = ' ';
	values[0] = Int64GetDatum(t->task_id);
	values[1] = CStringGetTextDatum(t->step);
	values[2] = Int32GetDatum(t->visit);
	values[3] = Int32GetDatum(t->attempt);
	values[4] = CStringGetTextDatum(t->queue);
	if (t->activity != NULL)
		values[5] = CStringGetTextDatum(t->activity);
	else
		nulls[5] = 'n';
	values[6] = TimestampTzGetDatum(t->available_at);
	values[7] = CStringGetTextDatum(t->idempotency_key);
	values[8] = JsonbPGetDatum(t->input);
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
 * WfTransitionWrite writes the transition of an existing run: its events,
 * its new task attempt and the new snapshot, in one statement.
 */
void
WfTransitionWrite(WfTransition *tr)
{
	WfRunState *run = tr->run;
	Datum		values[28];
	char		nulls[28];

	if (tr->nevents == 0)
		return;
	memset(nulls, ' ', sizeof(nulls));
	values[0] = UUIDPGetDatum(&run->run_id);
	values[1] = CStringGetTextDatum(run->tenant_id);
	values[2] = CStringGetTextDatum(tr->actor);
	values[3] = TimestampTzGetDatum(tr->now);
	WfEventArrays(tr, &values[4]);
	WfTaskValues(tr, &values[10], &nulls[10]);
	values[19] = CStringGetTextDatum(WfRunStatusName(run->status));
	if (run->current_step != NULL)
		values[20] = CStringGetTextDatum(run->current_step);
	else
		nulls[20] = 'n';
	values[21] = Int32GetDatum(run->seq);
	values[22] = JsonbPGetDatum(run->context);
	if (run->output != NULL)
		values[23] = JsonbPGetDatum(run->output);
	else
		nulls[23] = 'n';
	values[24] = WfHashDatum(run->last_hash);
	if (run->finished)
		values[25] = TimestampTzGetDatum(run->finished_at);
	else
		nulls[25] = 'n';
	WfCurrentValues(run, &values[26], &nulls[26]);

	if (WfExecPlan(WF_PLAN_TRANSITION, values, nulls, false, 0, SPI_OK_UPDATE) != 1)
		elog(ERROR, "run snapshot vanished during a wfengine transition");
}

/*
 * WfRunStateFromTuple reads a snapshot from row of the current SPI result,
 * selected with the WF_RUN_COLUMNS list.  The values are copied into the
 * current memory context.
 */
void
WfRunStateFromTuple(WfRunState *run, int row)
{
	bool		isnull;
	Datum		d;

	memset(run, 0, sizeof(WfRunState));
	memcpy(&run->run_id, DatumGetUUIDP(WfGetDatumNotNull(row, 1)), sizeof(pg_uuid_t));
	run->tenant_id = WfGetTextOrNull(row, 2);
	run->definition_id = DatumGetInt64(WfGetDatumNotNull(row, 3));
	run->status = WfRunStatusFromName(WfGetTextOrNull(row, 4));
	run->current_step = WfGetTextOrNull(row, 5);
	run->seq = DatumGetInt32(WfGetDatumNotNull(row, 6));
	run->context = DatumGetJsonbPCopy(WfGetDatumNotNull(row, 7));
	d = WfGetDatum(row, 8, &isnull);
	run->output = isnull ? NULL : DatumGetJsonbPCopy(d);
	d = WfGetDatumNotNull(row, 9);
	if (VARSIZE_ANY_EXHDR(DatumGetByteaPP(d)) != WF_HASH_LEN)
		elog(ERROR, "run snapshot has a malformed last_hash");
	memcpy(run->last_hash, VARDATA_ANY(DatumGetByteaPP(d)), WF_HASH_LEN);
	run->updated_at = DatumGetTimestampTz(WfGetDatumNotNull(row, 10));
	d = WfGetDatum(row, 11, &isnull);
	run->finished = !isnull;
	run->finished_at = isnull ? 0 : DatumGetTimestampTz(d);
	d = WfGetDatum(row, 12, &isnull);
	run->current_attempt = isnull ? 0 : DatumGetInt32(d);
	d = WfGetDatum(row, 13, &isnull);
	run->current_task = isnull ? 0 : DatumGetInt64(d);
}

/*
 * WfCurrentValues fills values/nulls[0..1] with the current attempt and
 * task of the snapshot, NULL when there is none.
 */
void
WfCurrentValues(const WfRunState *run, Datum *values, char *nulls)
{
	values[0] = Int32GetDatum(run->current_attempt);
	nulls[0] = run->current_attempt == 0 ? 'n' : ' ';
	values[1] = Int64GetDatum(run->current_task);
	nulls[1] = run->current_task == 0 ? 'n' : ' ';
}
