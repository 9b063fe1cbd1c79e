/*-------------------------------------------------------------------------
 *
 * transition.c
 *	  Building one run's transition, and applying to a run what happens to
 *	  it: a task attempt's result, a timer, a passed deadline.
 *
 * A transition is built in memory (WfTransition) while the run is locked
 * (runstore.c): each event is hashed onto the run's chain and applied to
 * the snapshot by the reducer (state.c) as it is appended, and the whole
 * of it, events, the next task attempt, timers and the new snapshot, is
 * written together, in the caller's transaction (WfTransitionWrite).  This file is the
 * engine's part of every transition: task attempts with their retry
 * policy, leases and deadlines, timers and their generations, moving from
 * a step to the next, failing and ending runs.  What a step of a kind
 * does (entering it, what its task's completion means, its own timers)
 * is the step kind's (step_*.c), reached through its WfStepKindOps
 * (stepkind.h); this file names no step kind.  The undoing of a run
 * (compensation) is reached the same way, through WfUndo().
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/transition.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "commands/sequence.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/uuid.h"

#include "claimfloor.h"
#include "crypto.h"
#include "defcompile.h"
#include "definition.h"
#include "duration.h"
#include "guc.h"
#include "jsonutil.h"
#include "notify.h"
#include "runstore.h"
#include "sensitive.h"
#include "spi_util.h"
#include "state.h"
#include "stepkind.h"
#include "tenant.h"
#include "transition.h"
#include "version.h"

/* the statements of transition.c (registered by _PG_init: WfTransitionPlans) */
enum
{
	PLAN_TASK_REQUEUE = 0,
	PLAN_TASK_TIME_OUT,
	PLAN_LAST_HELD_RESULT,
	PLAN_COUNTED_ATTEMPTS
};

static const WfPlanSpec transition_plan_specs[] = {
	[PLAN_TASK_REQUEUE] = {
		"task_requeue",
		"UPDATE wf.tasks t SET status = 'ready', available_at = $2, deadline_at = NULL,"
		" lease_expirations = $3, lease_expires_at = NULL, timeout_at = NULL "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1",
		3, {INT8OID, TIMESTAMPTZOID, INT4OID}
	},
	[PLAN_TASK_TIME_OUT] = {
		"task_time_out",
		"UPDATE wf.tasks t SET status = 'failed', error = $2, finished_at = $3,"
		" deadline_at = NULL, fence = " WF_NEW_FENCE("$4") " "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1 AND t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased']) "
		"RETURNING t.fence",
		4, {INT8OID, JSONBOID, TIMESTAMPTZOID, INT8OID}
	},
	[PLAN_LAST_HELD_RESULT] = {
		"last_held_result",
		"SELECT e.payload FROM wf.events e "
		"WHERE e.run_id OPERATOR(pg_catalog.=) $1 AND e.type OPERATOR(pg_catalog.=) 'result_held' "
		"ORDER BY e.seq DESC LIMIT 1",
		1, {UUIDOID}
	},
	[PLAN_COUNTED_ATTEMPTS] = {
		"counted_attempts",
		"SELECT pg_catalog.count(*)::pg_catalog.int4 FROM wf.tasks t"
		" WHERE t.run_id OPERATOR(pg_catalog.=) $1 AND t.step OPERATOR(pg_catalog.=) $2"
		" AND t.visit OPERATOR(pg_catalog.=) $3"
		" AND (t.deliveries OPERATOR(pg_catalog.>) 0"
		"  OR t.status OPERATOR(pg_catalog.<>) 'cancelled')",
		3, {UUIDOID, TEXTOID, INT4OID}
	},
};

WfPlanTable WfTransitionPlans = WF_PLAN_TABLE("transition", transition_plan_specs);


/* forward declarations */
static int32 task_priority(const WfStepDef *sd, WfTransition *tr);
static void fail_attempt(WfTransition *tr, const WfStepDef *sd, int step_index,
						 const WfTaskResult *res, int32 attempt);
static void fail_run(WfTransition *tr, const char *step, const char *reason,
					 Jsonb *error, int32 attempt);
static Jsonb *timeout_error(const char *which);
static int64 quarantine_delay(int k);

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

	/*
	 * The attempts of the run whose row holds no input (the run's input as
	 * it stood) keep the input they were scheduled with: WfTransitionWrite
	 * writes it into them (WfKeepTaskInputs) before the new input.
	 */
	if (type == WF_EV_CONTEXT_UPDATED && tr->input_before == NULL)
		tr->input_before = WfJsonbGetJsonb(tr->run->context, "input");

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

	WfScheduleTask(tr, sd, WfNextVisit(tr->run, sd->name), attempt, available_at, input);
}

/*
 * same_jsonb is true when a and b are the same bytes (a value copied, not
 * merely an equal one; b NULL: false).
 */
static bool
same_jsonb(const Jsonb *a, const Jsonb *b)
{
	return b != NULL && VARSIZE(a) == VARSIZE(b) && memcmp(a, b, VARSIZE(a)) == 0;
}

/*
 * str_same is true when a and b are both NULL or the same string.
 */
static bool
str_same(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/*
 * WfTaskIdempotencyKey returns the idempotency key of every attempt of
 * visit of step of the run whose id is run_id (text): "<run>/<step>/<visit>".
 * The writer of task_scheduled and wf.history both take it from here.
 */
char *
WfTaskIdempotencyKey(const char *run_id, const char *step, int32 visit)
{
	return psprintf("%s/%s/%d", run_id, step, visit);
}

/*
 * WfScheduleTask schedules attempt of visit of the task step sd (a step of
 * the definition, or a step's compensation).
 */
void
WfScheduleTask(WfTransition *tr, const WfStepDef *sd, int32 visit, int32 attempt,
			   TimestampTz available_at, Jsonb *input)
{
	WfNewTask  *t = &tr->task;
	WfJsonBuilder b;
	char		runid[UUID_LEN * 2 + 5];
	const WfStepDef *dsd;
	int			didx;
	bool		lean;

	if (tr->has_task)
		elog(ERROR, "wfengine transition schedules two tasks");

	t->visit = visit;

	if (input == NULL)
	{
		if (sd->has_input)
			input = WfRunEvaluateMapping(tr, sd->input, sd->n_input);
		else
			input = WfJsonbGetJsonb(tr->run->context, "input");
	}
	/* a value that is sealed already (the run's input, a retry's) stays as it is */
	if (sd->n_sensitive_input > 0)
		input = WfSealKeys(tr->run->tenant_id, input, sd->sensitive_input, sd->n_sensitive_input);

	strlcpy(runid, DatumGetCString(DirectFunctionCall1(uuid_out,
													   UUIDPGetDatum(&tr->run->run_id))),
			sizeof(runid));
	t->task_id = nextval_internal(WfTaskIdSequence(), false);
	t->step = sd->name;
	t->attempt = attempt;
	t->queue = sd->queue;
	t->activity = sd->activity;
	t->available_at = available_at;
	t->idempotency_key = WfTaskIdempotencyKey(runid, sd->name, t->visit);
	t->input = input;
	t->schedule_to_start = sd->timeout.schedule_to_start;
	t->start_to_close = sd->timeout.start_to_close;
	t->heartbeat = sd->timeout.heartbeat;
	t->priority = task_priority(sd, tr);
	tr->has_task = true;

	/*
	 * Since 0.3.0 (issue 31) the event leaves out what the run's definition
	 * and the event itself give, and wf.history puts it back
	 * (WfHistoryFillEvent): the queue and activity when the definition in
	 * force (the run's, as run_started and run_migrated set it) gives the
	 * same for the event's step, the idempotency key (always the default
	 * one, of the run, step and visit) and available_at when it is the
	 * event's time.  A database whose extension is older than 0.3.0 (the
	 * library updated, ALTER EXTENSION UPDATE not run yet) has the
	 * wf.history that shows events as stored: it gets every key, as 0.2.0
	 * wrote them.
	 */
	lean = WfSchemaVersionAtLeast("0.3.0", NULL);
	dsd = (lean && tr->def->definition_id == tr->run->definition_id) ?
		WfTaskStepDef(tr->def, sd->name, &didx) : NULL;
	WfJbBegin(&b);
	WfJbInt(&b, "task_id", t->task_id);
	if (dsd == NULL || !str_same(dsd->queue, t->queue) ||
		!str_same(dsd->activity, t->activity))
	{
		WfJbText(&b, "queue", t->queue);
		WfJbText(&b, "activity", t->activity);
	}
	WfJbInt(&b, "visit", t->visit);
	if (!lean)
		WfJbText(&b, "idempotency_key", t->idempotency_key);
	if (!lean || available_at != tr->now)
		WfJbTimestamp(&b, "available_at", available_at);
	/*
	 * The attempt's input, unless it is the run's input as it stands
	 * (context.input, which the history holds already: run_started and any
	 * context_updated), the case of every step without an input mapping;
	 * since 0.3.0 (issue 31: the copy was a third of a step's WAL).  The
	 * attempt's row then holds no copy either (input NULL: WfRunInputOf).
	 */
	t->input_is_run = same_jsonb(input, WfJsonbGetJsonb(tr->run->context, "input"));
	if (!lean || !t->input_is_run)
		WfJbJsonb(&b, "input", input);
	WfAppendEvent(tr, WF_EV_TASK_SCHEDULED, sd->name, attempt, WfJbEnd(&b));

	/*
	 * A large input of its own (a mapping's, a retry's) is not copied into
	 * the attempt's row as well: the row names the event that holds it
	 * (input_seq, WfTaskInputAt), since 0.3.0 (issue 31).
	 */
	t->input_seq = 0;
	if (lean && !t->input_is_run && VARSIZE(input) >= WF_INPUT_REF_MIN)
		t->input_seq = tr->events[tr->nevents - 1].seq;

	/*
	 * The step's total timeout runs from its first attempt.  Of the steps
	 * that run tasks only task steps may have one (definition.c refuses it
	 * for approval steps and compensations).
	 */
	if (attempt == 1 && sd->timeout.total > 0)
		WfSetTimer(tr, WF_TIMER_STEP_TIMEOUT, sd->name, tr->run->step_generation,
				   tr->now + sd->timeout.total, NULL);
}

/*
 * task_priority returns the priority of a new attempt of sd: its fixed
 * "priority", or the integer its JSONPath finds in the context (clamped to
 * the valid range; 0 when it finds none).
 */
static int32
task_priority(const WfStepDef *sd, WfTransition *tr)
{
	Jsonb	   *found;
	JsonbValue	v;
	double		d;

	if (sd->priority_path == 0)
		return sd->priority;
	found = WfEvaluatePath(sd->priority_path, WfRunContextForPath(tr, sd->priority_path));
	if (found == NULL || !JB_ROOT_IS_SCALAR(found) ||
		!JsonbExtractScalar(&found->root, &v) || v.type != jbvNumeric)
		return 0;
	d = DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v.val.numeric)));
	if (d > WF_MAX_PRIORITY)
		return WF_MAX_PRIORITY;
	if (d < -WF_MAX_PRIORITY)
		return -WF_MAX_PRIORITY;
	return (int32) d;
}

/*
 * WfNextVisit returns the visit number of the next entry into step: one
 * more than its last completed visit.  All attempts of one visit share
 * it, and so share the idempotency key.
 */
int32
WfNextVisit(WfRunState *run, const char *step)
{
	JsonbValue *steps = WfJsonbGet(run->context, "steps");

	if (steps != NULL && steps->type == jbvBinary)
	{
		JsonbValue *s = getKeyJsonValueFromContainer(steps->val.binary.data,
													 step, strlen(step), NULL);

		if (s != NULL && s->type == jbvBinary)
		{
			JsonbValue *vv = getKeyJsonValueFromContainer(s->val.binary.data,
														  "visit", 5, NULL);

			if (vv != NULL && vv->type == jbvNumeric)
				return DatumGetInt32(DirectFunctionCall1(numeric_int4,
														 NumericGetDatum(vv->val.numeric))) + 1;
		}
	}
	return 1;
}

/*
 * WfSetTimer adds a timer to the transition and appends timer_set.  For a
 * retry or a sleep the generation is the seq of that timer_set event: the
 * run waits for exactly this timer.  The timer id is returned.
 */
int64
WfSetTimer(WfTransition *tr, WfTimerKind kind, const char *step,
		   int32 generation, TimestampTz fire_at, Jsonb *payload)
{
	WfNewTimer *t;
	WfJsonBuilder b;

	if (tr->ntimers >= WF_MAX_TRANSITION_TIMERS)
		elog(ERROR, "too many timers in one wfengine transition");
	if (kind == WF_TIMER_RETRY || kind == WF_TIMER_SLEEP)
		generation = tr->run->seq + 1;
	if (payload == NULL)
	{
		WfJbBegin(&b);
		payload = WfJbEnd(&b);
	}

	t = &tr->timers[tr->ntimers++];
	t->timer_id = nextval_internal(WfTimerIdSequence(), false);
	t->kind = kind;
	t->step = step;
	t->generation = generation;
	t->fire_at = fire_at;
	t->payload = payload;

	WfJbBegin(&b);
	WfJbInt(&b, "timer_id", t->timer_id);
	WfJbText(&b, "kind", WfTimerKindName(kind));
	WfJbInt(&b, "generation", generation);
	WfJbTimestamp(&b, "fire_at", fire_at);
	WfAppendEvent(tr, WF_EV_TIMER_SET, step, 0, WfJbEnd(&b));
	return t->timer_id;
}

/*
 * WfEnterStep starts a new visit of the step at step_index, as its kind
 * does it (WfStepKindOps.enter).
 */
void
WfEnterStep(WfTransition *tr, int step_index)
{
	const WfStepDef *sd = &tr->def->steps[step_index];

	WfStepKindFor(sd)->enter(tr, step_index);
}

/*
 * counted_attempts returns how many attempts of visit of the step count
 * against its max_attempts, the failing one included: every attempt but
 * those withdrawn before any worker claimed them (wf.pause_run,
 * wf.migrate_run).  Such an attempt keeps its attempt number (the next
 * one takes the number after it), but it has used up nothing.
 */
static int32
counted_attempts(WfTransition *tr, const char *step, int32 visit)
{
	Datum		values[3];

	values[0] = UUIDPGetDatum(&tr->run->run_id);
	values[1] = CStringGetTextDatum(step);
	values[2] = Int32GetDatum(visit);
	if (WfPlanExec(&WfTransitionPlans, PLAN_COUNTED_ATTEMPTS, values, NULL, false, 1, SPI_OK_SELECT) != 1)
		elog(ERROR, "could not count the attempts of step \"%s\"", step);
	return DatumGetInt32(WfGetDatumNotNull(0, 1));
}

/*
 * fail_attempt records the failure (or timeout) of an attempt, then
 * waits for a retry on a timer or fails the step and the run, following
 * the step's retry policy.  The policy counts attempts that a worker
 * claimed or the engine failed (counted_attempts), not attempt numbers:
 * an attempt a pause withdrew before any claim is not counted, neither
 * against max_attempts nor in the backoff.
 */
static void
fail_attempt(WfTransition *tr, const WfStepDef *sd, int step_index,
			 const WfTaskResult *res, int32 attempt)
{
	const WfRetryPolicy *rp = &sd->retry;
	const WfStepKindOps *ops = WfStepKindFor(sd);
	char	   *code = WfJsonbGetText(res->error, "code");
	const char *reason = NULL;
	TimestampTz next_at = 0;
	WfJsonBuilder b;
	int			i;
	int32		counted = attempt;

	if (tr->run->status == WF_RUN_CANCELLING && !ops->undoes)
		reason = "cancelled";	/* in flight when the run was cancelled */
	else if (!res->retryable)
		reason = "non_retryable";
	else
	{
		for (i = 0; code != NULL && i < rp->n_non_retryable; i++)
			if (strcmp(code, rp->non_retryable[i]) == 0)
				reason = "non_retryable_error";
		if (reason == NULL)
			counted = counted_attempts(tr, sd->name, res->visit);
		if (reason == NULL && counted >= rp->max_attempts)
			reason = "attempts_exhausted";
	}
	if (reason == NULL)
		next_at = tr->now + WfRetryDelay(rp, counted);

	WfJbBegin(&b);
	WfJbTaskResult(&b, res);
	WfJbInt(&b, "visit", res->visit);
	WfJbJsonb(&b, "error", res->error);
	WfJbBool(&b, "retryable", res->retryable);
	if (reason == NULL)
		WfJbTimestamp(&b, "next_attempt_at", next_at);
	else
		WfJbText(&b, "final", reason);
	WfAppendEvent(tr, WF_EV_TASK_FAILED, sd->name, attempt, WfJbEnd(&b));

	if (reason == NULL)
	{
		WfJbBegin(&b);
		WfJbInt(&b, "attempt", attempt + 1);
		WfJbInt(&b, "visit", res->visit);
		/* a large input kept in the history is named, not copied (0.3.0) */
		if (res->input_seq > 0)
			WfJbInt(&b, "input_seq", res->input_seq);
		else
			WfJbJsonb(&b, "input", res->input);
		WfSetTimer(tr, WF_TIMER_RETRY, sd->name, 0, next_at, WfJbEnd(&b));
		return;
	}
	if (strcmp(reason, "cancelled") == 0)
		WfUndo()->settle(tr, NULL, 0);	/* nothing of it to undo */
	else if (ops->task_gave_up != NULL)
		ops->task_gave_up(tr, step_index, reason, res->error, attempt);
	else
		fail_run(tr, sd->name, reason, res->error, attempt);	/* the attempt that failed */
}

/*
 * fail_run ends the run as failed at step, naming attempt of the step as
 * the one it failed at, withdrawing its live task first.  A definition
 * with "on_failure": "compensate" undoes the run's completed steps instead
 * (WfUndo, step_compensate.c).
 */
static void
fail_run(WfTransition *tr, const char *step, const char *reason, Jsonb *error,
		 int32 attempt)
{
	WfJsonBuilder b;

	if (tr->def->compensate_on_failure)
	{
		WfUndo()->compensate_failure(tr, step, attempt, reason, error);
		return;
	}

	WfWithdrawCurrentTask(tr, reason);
	WfJbBegin(&b);
	WfJbText(&b, "step", step);
	WfJbInt(&b, "attempt", attempt);
	WfJbText(&b, "reason", reason);
	WfJbJsonb(&b, "error", error);
	WfAppendEvent(tr, WF_EV_RUN_FAILED, NULL, 0, WfJbEnd(&b));
}

/*
 * WfFailRun ends the run as failed at step (NULL for the run as a whole),
 * withdrawing its live task first.  run_failed names the attempt of the
 * step the run failed at: its live attempt, or, when it has none (it
 * waits for a retry), the last attempt of the step's current visit; 0
 * when the step has no attempt (or the run failed as a whole).
 */
void
WfFailRun(WfTransition *tr, const char *step, const char *reason, Jsonb *error)
{
	int32		attempt = tr->run->current_attempt;

	if (attempt == 0 && step != NULL)
	{
		Datum		values[2];

		values[0] = UUIDPGetDatum(&tr->run->run_id);
		values[1] = CStringGetTextDatum(step);
		if (WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_LAST_TASK_OF_STEP, values, NULL, false, 1, SPI_OK_SELECT) == 1 &&
			DatumGetInt32(WfGetDatumNotNull(0, WF_LAST_TASK_COL_VISIT)) == WfNextVisit(tr->run, step))
			attempt = DatumGetInt32(WfGetDatumNotNull(0, WF_LAST_TASK_COL_ATTEMPT));
	}
	fail_run(tr, step, reason, error, attempt);
}

/*
 * WfWithdrawCurrentTask cancels the run's live task, if it has one.
 */
void
WfWithdrawCurrentTask(WfTransition *tr, const char *reason)
{
	WfJsonBuilder b;

	if (tr->run->current_task == 0)
		return;
	WfJbBegin(&b);
	WfJbInt(&b, "task_id", tr->run->current_task);
	WfJbText(&b, "reason", reason);
	tr->withdraw_task = tr->run->current_task;
	WfAppendEvent(tr, WF_EV_TASK_CANCELLED, tr->run->current_step,
				  tr->run->current_attempt, WfJbEnd(&b));
}

/*
 * WfRetryDelay returns the wait before attempt + 1, in microseconds:
 * exponential backoff capped at max_interval, of which a random share of
 * up to "jitter" is taken off so that retries of many runs spread out.
 */
int64
WfRetryDelay(const WfRetryPolicy *rp, int32 attempt)
{
	double		d = (double) rp->initial_interval *
		pow(rp->backoff_coefficient, (double) (attempt - 1));

	if (d > (double) rp->max_interval || isinf(d))
		d = (double) rp->max_interval;
	d *= 1.0 - rp->jitter * WfRandomFraction();
	return (int64) d;
}

/*
 * WfFinishVisit ends the current visit of the step at step_index, a step
 * that ran no task: type records it with the visit's output (and, when
 * name_next, the step it goes to), and the run moves to next.
 */
void
WfFinishVisit(WfTransition *tr, int step_index, WfEventType type, int32 visit,
			  Jsonb *output, int next, bool name_next)
{
	const char *step = tr->def->steps[step_index].name;
	WfJsonBuilder b;

	WfJbBegin(&b);
	WfJbInt(&b, "visit", visit);
	if (name_next)
		WfJbText(&b, "next", next == WF_STEP_END ? NULL : tr->def->steps[next].name);
	WfJbJsonb(&b, "output", output);
	WfAppendEvent(tr, type, step, 0, WfJbEnd(&b));
	WfAdvanceTo(tr, step_index, next);
}

/*
 * WfAdvance moves the run past the step at from_step (just completed):
 * it schedules the successor or completes the run.  from_step -1 starts
 * the run at its first step.
 */
void
WfAdvance(WfTransition *tr, int from_step)
{
	WfAdvanceTo(tr, from_step,
				(from_step < 0) ? 0 : tr->def->steps[from_step].next);
}

/*
 * WfAdvanceTo moves the run from the step at from_step to the step at
 * next, or completes the run when next is WF_STEP_END.
 */
void
WfAdvanceTo(WfTransition *tr, int from_step, int next)
{
	const WfDefinition *def = tr->def;

	if (next != WF_STEP_END)
	{
		WfEnterStep(tr, next);
		return;
	}
	else
	{
		WfJsonBuilder b;
		Jsonb	   *output;

		if (def->has_output)
			output = WfRunEvaluateMapping(tr, def->output, def->n_output);
		else
		{
			const char *name = def->steps[from_step].name;
			JsonbValue *steps = WfJsonbGet(WfRunContextForStep(tr, name), "steps");
			JsonbValue *last = NULL;

			if (steps != NULL && steps->type == jbvBinary)
			{
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
 * WfJbTaskResult adds what names a reported result to an event payload:
 * the task, the fence of the lease it was reported under, the worker.
 */
void
WfJbTaskResult(WfJsonBuilder *b, const WfTaskResult *res)
{
	WfJbInt(b, "task_id", res->task_id);
	WfJbInt(b, "fence", res->fence);
	WfJbText(b, "worker", res->worker);
}

/*
 * WfTaskCompleted records task_completed for the accepted result of the
 * live attempt of sd (a step of the definition, or a compensation).
 */
void
WfTaskCompleted(WfTransition *tr, const WfStepDef *sd, const WfTaskResult *res)
{
	WfJsonBuilder b;

	WfJbBegin(&b);
	WfJbTaskResult(&b, res);
	WfJbInt(&b, "visit", res->visit);
	WfJbJsonb(&b, "output", res->output);
	WfAppendEvent(tr, WF_EV_TASK_COMPLETED, sd->name, tr->run->current_attempt,
				  WfJbEnd(&b));
}

/*
 * WfApplyResult applies the accepted result of the run's current attempt
 * (of the step at step_index, or of its compensation).  A failure follows
 * the step's retry policy (fail_attempt).  A completion means what the
 * step's kind says (WfStepKindOps.task_completed: an approval's
 * notification task goes on to wait for decisions, a compensation goes on
 * to the next); by default task_completed is recorded and the run moves
 * on.  While the run is being cancelled, the attempt that was in flight
 * when wf.cancel_run() came settles here and the compensations begin.  It
 * serves a worker's report and wf.resume_run() applying a result held
 * while the run was paused.
 */
void
WfApplyResult(WfTransition *tr, int step_index, const WfTaskResult *res)
{
	const WfStepDef *sd = WfTaskStepDef(tr->def, tr->run->current_step, &step_index);
	const WfStepKindOps *ops = WfStepKindFor(sd);

	if (res->is_failure)
	{
		fail_attempt(tr, sd, step_index, res, tr->run->current_attempt);
		return;
	}
	if (ops->task_completed != NULL)
	{
		ops->task_completed(tr, step_index, res);
		return;
	}
	WfTaskCompleted(tr, sd, res);
	if (tr->run->status == WF_RUN_CANCELLING)
		WfUndo()->settle(tr, sd->name, res->visit);	/* it did its work: undo it too */
	else
		WfAdvance(tr, step_index);
}

/*
 * WfApplyHeldResult applies the result held for the run's live task while
 * the run was paused (wf.resume_run, or wf.cancel_run of a paused run);
 * task_status is the task row's ("completed" or "failed").
 */
void
WfApplyHeldResult(WfTransition *tr, int step_index, const char *task_status)
{
	WfRunState *run = tr->run;
	WfLockedTask task;
	WfTaskResult res;
	Datum		values[1];
	Jsonb	   *held;
	JsonbValue *retryable;

	if (!WfReadTask(run->current_task, &task))
		elog(ERROR, "the live task of a run is missing");
	values[0] = UUIDPGetDatum(&run->run_id);
	if (WfPlanExec(&WfTransitionPlans, PLAN_LAST_HELD_RESULT, values, NULL, false, 1, SPI_OK_SELECT) != 1)
		elog(ERROR, "task %lld is \"%s\" but its run holds no result for it",
			 (long long) run->current_task, task_status);
	held = DatumGetJsonbPCopy(WfGetDatumNotNull(0, 1));
	if (WfJsonbGetInt(held, "task_id", 0) != run->current_task)
		elog(ERROR, "the held result is not for task %lld", (long long) run->current_task);
	retryable = WfJsonbGet(held, "retryable");

	res.task_id = run->current_task;
	res.fence = task.fence;
	res.visit = task.visit;
	res.worker = task.worker;
	res.is_failure = strcmp(WfJsonbGetText(held, "report"), "failure") == 0;
	res.output = WfJsonbGetJsonb(held, "output");
	res.error = WfJsonbGetJsonb(held, "error");
	res.retryable = retryable == NULL || retryable->type != jbvBool || retryable->val.boolean;
	res.input = task.input;
	res.input_seq = task.input_seq;
	WfApplyResult(tr, step_index, &res);
}

/*
 * reschedule_withdrawn schedules again the attempt of the step at
 * step_index that a pause (or a poison-task pause, or a migration)
 * withdrew, with the next attempt number, when the run has no retry
 * pending.  same_input: the new attempt gets the input the withdrawn one
 * had (an approval's notification), else its input is mapped again (a
 * wf.update_context() or a wf.migrate_run() while paused takes effect).
 */
static void
reschedule_withdrawn(WfTransition *tr, int step_index, bool same_input)
{
	WfRunState *run = tr->run;
	const WfStepDef *sd = &tr->def->steps[step_index];
	Datum		values[2];

	if (run->wait_generation != 0)
		return;
	values[0] = UUIDPGetDatum(&run->run_id);
	values[1] = CStringGetTextDatum(sd->name);
	if (WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_LAST_TASK_OF_STEP, values, NULL, false, 1, SPI_OK_SELECT) == 1 &&
		(strcmp(WfGetTextOrNull(0, WF_LAST_TASK_COL_STATUS), "cancelled") == 0 ||
		 strcmp(WfGetTextOrNull(0, WF_LAST_TASK_COL_STATUS), "failed") == 0) &&
		DatumGetInt32(WfGetDatumNotNull(0, WF_LAST_TASK_COL_VISIT)) == WfNextVisit(run, sd->name))
	{
		int32		attempt = DatumGetInt32(WfGetDatumNotNull(0, WF_LAST_TASK_COL_ATTEMPT));

		WfScheduleStep(tr, step_index, attempt + 1, tr->now,
					   same_input ? DatumGetJsonbPCopy(WfGetDatumNotNull(0, WF_LAST_TASK_COL_INPUT)) : NULL);
	}
}

/*
 * WfRescheduleWithdrawn: the resume of a task step (WfStepKindOps.resume).
 * The withdrawn attempt is scheduled again with its input mapped again.
 */
void
WfRescheduleWithdrawn(WfTransition *tr, int step_index)
{
	reschedule_withdrawn(tr, step_index, false);
}

/*
 * WfRescheduleWithdrawnAsBefore: the resume of a step whose task's input
 * is fixed when the step is entered (an approval's notification).
 */
void
WfRescheduleWithdrawnAsBefore(WfTransition *tr, int step_index)
{
	reschedule_withdrawn(tr, step_index, true);
}

/*
 * WfResumeStep: wf.resume_run found the paused run at the step at
 * step_index with no live attempt; the step's kind takes up what the
 * pause stopped.
 */
void
WfResumeStep(WfTransition *tr, int step_index)
{
	const WfStepKindOps *ops = WfStepKindFor(&tr->def->steps[step_index]);

	if (ops->resume != NULL)
		ops->resume(tr, step_index);
}

/*
 * WfLeaveStep: the run leaves the step at step_index unfinished (a skip,
 * a cancellation); its kind releases what the visit holds.
 */
void
WfLeaveStep(WfTransition *tr, int step_index, const char *reason)
{
	const WfStepKindOps *ops = WfStepKindFor(&tr->def->steps[step_index]);

	if (ops->leave != NULL)
		ops->leave(tr, step_index, reason);
}

/*
 * WfTerminateRun ends the run at once, without compensation: its live task
 * is withdrawn, its live child runs are terminated, and run_terminated
 * records the reason and the state the run had.
 */
void
WfTerminateRun(WfTransition *tr, const char *reason)
{
	WfJsonBuilder b;
	const char *old_status = WfRunStatusName(tr->run->status);

	WfWithdrawCurrentTask(tr, "terminated");
	tr->stop_children = WF_STOP_TERMINATE;
	WfJbBegin(&b);
	WfJbText(&b, "reason", reason);
	WfJbText(&b, "old_status", old_status);
	WfJbText(&b, "new_status", "terminated");
	WfJbText(&b, "step", tr->run->current_step);
	WfAppendEvent(tr, WF_EV_RUN_TERMINATED, NULL, 0, WfJbEnd(&b));
}

/*
 * timeout_error builds the error recorded for a timed-out attempt.
 */
static Jsonb *
timeout_error(const char *which)
{
	WfJsonBuilder b;
	const char *message;

	if (strcmp(which, "run") == 0)
		message = "the run timeout expired";
	else if (strcmp(which, "total") == 0)
		message = "the total timeout of the step expired";
	else
		message = psprintf("the %s timeout of the attempt expired", which);
	WfJbBegin(&b);
	WfJbText(&b, "code", "timed_out");
	WfJbText(&b, "timeout", which);
	WfJbText(&b, "message", message);
	return WfJbEnd(&b);
}

/*
 * timer_applies decides whether a timer still concerns the locked run: a
 * retry or a sleep only the wait it began (wait_generation), a step's
 * timeout or an approval's expiry only the visit it was set in
 * (step_generation), a child's end only what the step's kind still waits
 * for; the run timeout any live run.  While a run is undone only its
 * compensations are retried.
 */
static bool
timer_applies(WfTransition *tr, WfTimerKind kind, const char *step, int32 generation,
			  Jsonb *payload, const WfStepDef *sd, int idx)
{
	WfRunState *run = tr->run;
	bool		live = run->status == WF_RUN_RUNNING || run->status == WF_RUN_PAUSED;
	bool		at_step = run->current_step != NULL && step != NULL &&
		strcmp(run->current_step, step) == 0;

	switch (kind)
	{
		case WF_TIMER_RETRY:
		case WF_TIMER_SLEEP:
			return sd != NULL &&
				(WF_RUN_UNDOING(run->status) ?
				 kind == WF_TIMER_RETRY && WfStepKindFor(sd)->undoes : live) &&
				run->wait_generation == generation;
		case WF_TIMER_STEP_TIMEOUT:
		case WF_TIMER_APPROVAL_EXPIRY:
			return live && idx >= 0 && run->step_generation == generation && at_step;
		case WF_TIMER_RUN_TIMEOUT:
			return live;
		case WF_TIMER_CHILD_DONE:
			{
				const WfStepKindOps *ops = sd != NULL ? WfStepKindFor(sd) : NULL;

				return live && at_step && ops != NULL && ops->timer_applies != NULL &&
					ops->timer_applies(run, sd, kind, generation, payload);
			}
	}
	elog(ERROR, "a timer has an unknown kind");
	return false;				/* keep compiler quiet */
}

/*
 * retry_input returns the input a retry timer's payload gives its attempt:
 * "input", or, for a large input that its failed attempt kept in the
 * history only, the one the event "input_seq" holds (WfTaskInputAt).
 */
static Jsonb *
retry_input(WfRunState *run, Jsonb *payload)
{
	Jsonb	   *input = WfJsonbGetJsonb(payload, "input");
	int64		seq = WfJsonbGetInt(payload, "input_seq", 0);

	if (input == NULL && seq > 0)
		input = WfTaskInputAt(&run->run_id, run->tenant_id, (int32) seq);
	return input;
}

/*
 * WfApplyTimer applies a due timer to its locked run: timer_fired records
 * it (not for a finished run, whose history it leaves alone) with its
 * outcome, and one that applies does its work: a retry schedules the next
 * attempt, the run timeout fails the run, and the step's own timers (a
 * sleep, the step timeout, an approval's expiry, a child's end) are its
 * kind's (WfStepKindOps.timer_fired); a step timeout no kind takes fails
 * the run.  A paused run decides nothing: a timer that would move it on
 * is held (it stays pending, due never) until wf.resume_run() makes it due.
 */
WfTimerOutcome
WfApplyTimer(WfTransition *tr, int64 timer_id, WfTimerKind kind, const char *step,
			 int32 generation, Jsonb *payload, TimestampTz due_at)
{
	WfRunState *run = tr->run;
	const WfStepDef *sd = NULL;
	int			idx = -1;
	bool		applies;
	WfTimerOutcome outcome;
	WfJsonBuilder b;

	if (step != NULL)
		sd = WfTaskStepDef(tr->def, step, &idx);
	applies = timer_applies(tr, kind, step, generation, payload, sd, idx);
	if (applies && run->status == WF_RUN_PAUSED && kind != WF_TIMER_RUN_TIMEOUT)
		outcome = WF_TIMER_HELD;
	else
		outcome = applies ? WF_TIMER_APPLIED : WF_TIMER_STALE;

	if (run->status == WF_RUN_RUNNING || run->status == WF_RUN_PAUSED ||
		WF_RUN_UNDOING(run->status))
	{
		WfJbBegin(&b);
		WfJbInt(&b, "timer_id", timer_id);
		WfJbText(&b, "kind", WfTimerKindName(kind));
		WfJbInt(&b, "generation", generation);
		WfJbTimestamp(&b, "fire_at", due_at);
		WfJbText(&b, "outcome", outcome == WF_TIMER_APPLIED ? "applied" :
				 outcome == WF_TIMER_HELD ? "held" : "stale");
		WfAppendEvent(tr, WF_EV_TIMER_FIRED, step, 0, WfJbEnd(&b));
	}
	if (outcome != WF_TIMER_APPLIED)
		return outcome;

	if (kind == WF_TIMER_RETRY)
		WfScheduleTask(tr, sd, (int32) WfJsonbGetInt(payload, "visit", 1),
					   (int32) WfJsonbGetInt(payload, "attempt", 2),
					   tr->now, retry_input(run, payload));
	else if (kind == WF_TIMER_RUN_TIMEOUT)
		WfFailRun(tr, run->current_step, "run_timeout", timeout_error("run"));
	else
	{
		const WfStepKindOps *ops = WfStepKindFor(sd);

		if (ops->timer_fired != NULL &&
			ops->timer_fired(tr, idx, kind, payload, due_at))
			return outcome;
		if (kind != WF_TIMER_STEP_TIMEOUT)
			elog(ERROR, "no step kind takes the %s timer of step \"%s\"",
				 WfTimerKindName(kind), step);
		WfFailRun(tr, step, "step_timeout", timeout_error("total"));
	}
	return outcome;
}

/*
 * quarantine_delay returns the k-th delay (0-based) of
 * wfengine.quarantine_delays in microseconds, or -1 past the last one.
 * The setting was validated by its check hook.
 */
static int64
quarantine_delay(int k)
{
	int64		delays[WF_MAX_QUARANTINE_DELAYS];
	int			n = WfParseDurationList(wf_quarantine_delays, delays,
										WF_MAX_QUARANTINE_DELAYS);

	return (k >= 0 && k < n) ? delays[k] : -1;
}

/*
 * time_out_attempt: a timeout of the live attempt passed.  The engine
 * decides this attempt, so it takes the lease over (the fence moves on,
 * and the worker's late result is stale), and the attempt fails as a
 * worker's retryable failure would.
 */
static void
time_out_attempt(WfTransition *tr, const WfStepDef *sd, int idx, WfTaskDeadline *dl)
{
	Datum		values[4];
	WfTaskResult res;

	memset(&res, 0, sizeof(res));
	res.error = timeout_error(dl->timeout);
	values[0] = Int64GetDatum(dl->task_id);
	values[1] = JsonbPGetDatum(res.error);
	values[2] = TimestampTzGetDatum(tr->now);
	values[3] = Int64GetDatum(WfFenceBase());
	if (WfPlanExec(&WfTransitionPlans, PLAN_TASK_TIME_OUT, values, NULL, false, 0,
				   SPI_OK_UPDATE_RETURNING) != 1)
		elog(ERROR, "task %lld changed while locked", (long long) dl->task_id);
	res.task_id = dl->task_id;
	res.fence = DatumGetInt64(WfGetDatumNotNull(0, 1));
	res.visit = dl->visit;
	res.worker = dl->worker;
	res.is_failure = true;
	res.retryable = true;
	res.input = dl->input;
	res.input_seq = dl->input_seq;
	fail_attempt(tr, sd, idx, &res, dl->attempt);
}

/*
 * expire_lease: the lease of the live attempt ended without a result.  The
 * attempt goes back on its queue for a new claim with a new fence, after
 * a quarantine delay once its leases keep expiring
 * (wfengine.poison_threshold, quarantine_delays), and past the last delay
 * it is withdrawn and the run paused for an operator (a compensation's
 * kind gives up instead).
 */
static void
expire_lease(WfTransition *tr, const WfStepDef *sd, int idx, WfTaskDeadline *dl)
{
	WfJsonBuilder b;
	TimestampTz again = tr->now;
	int64		delay = 0;
	bool		pause = false;
	int32		expirations = dl->expirations + 1;

	if (wf_poison_threshold > 0 && expirations >= wf_poison_threshold)
	{
		delay = quarantine_delay(expirations - wf_poison_threshold);
		if (delay < 0)
			pause = true;
		else
			again = tr->now + delay;
	}

	WfJbBegin(&b);
	WfJbInt(&b, "task_id", dl->task_id);
	WfJbInt(&b, "fence", dl->fence);
	WfJbText(&b, "worker", dl->worker);
	WfJbInt(&b, "expirations", expirations);
	if (!pause)
		WfJbTimestamp(&b, "available_at", again);
	WfJbBool(&b, "quarantined", delay > 0 || pause);
	WfAppendEvent(tr, WF_EV_LEASE_EXPIRED, dl->step, dl->attempt, WfJbEnd(&b));

	if (pause)
	{
		char	   *reason = psprintf("task %lld of step \"%s\" lost its lease %d times without a result",
									  (long long) dl->task_id, dl->step, expirations);
		const WfStepKindOps *ops = WfStepKindFor(sd);

		WfJbBegin(&b);
		WfJbInt(&b, "task_id", dl->task_id);
		WfJbText(&b, "reason", "poison_task");
		tr->withdraw_task = dl->task_id;
		tr->withdraw_expirations = expirations;
		WfAppendEvent(tr, WF_EV_TASK_CANCELLED, dl->step, dl->attempt, WfJbEnd(&b));
		if (WF_RUN_UNDOING(tr->run->status) && ops->task_gave_up != NULL)
		{
			/* an undoing task that keeps crashing its workers */
			WfJbBegin(&b);
			WfJbText(&b, "code", "poison_task");
			WfJbText(&b, "message", reason);
			ops->task_gave_up(tr, idx, "poison_task", WfJbEnd(&b), dl->attempt);
		}
		else
		{
			WfJbBegin(&b);
			WfJbText(&b, "reason", reason);
			WfJbText(&b, "step", dl->step);
			WfJbInt(&b, "task_id", dl->task_id);
			WfAppendEvent(tr, WF_EV_RUN_PAUSED, NULL, 0, WfJbEnd(&b));
		}
	}
	else
	{
		Datum		values[3];

		values[0] = Int64GetDatum(dl->task_id);
		values[1] = TimestampTzGetDatum(again);
		values[2] = Int32GetDatum(expirations);
		WfPlanExec(&WfTransitionPlans, PLAN_TASK_REQUEUE, values, NULL, false, 0, SPI_OK_UPDATE);
		WfNoteTaskReady(tr->run->tenant_id, sd->queue);
		WfClaimFloorRescan(tr->run->tenant_id, sd->queue);
	}
}

/*
 * WfApplyDeadline applies a passed deadline of the run's live attempt (the
 * engine worker found it and locked the task and the run): a timeout fails
 * the attempt (and follows the retry policy), an expired lease puts it
 * back on its queue (expire_lease).  The attempt in flight when the run
 * was cancelled is lost instead: nobody knows whether it did its work, so
 * it is compensated as if it had.
 */
void
WfApplyDeadline(WfTransition *tr, WfTaskDeadline *dl)
{
	int			idx;
	const WfStepDef *sd = WfTaskStepDef(tr->def, dl->step, &idx);

	if (sd == NULL || tr->run->current_task != dl->task_id)
		elog(ERROR, "task %lld is not the current task of its run", (long long) dl->task_id);
	if (tr->run->status == WF_RUN_CANCELLING && !WfStepKindFor(sd)->undoes)
	{
		WfJsonBuilder b;

		WfJbBegin(&b);
		WfJbInt(&b, "task_id", dl->task_id);
		WfJbText(&b, "reason", dl->timeout != NULL ? dl->timeout : "lease_expired");
		tr->withdraw_task = dl->task_id;
		WfAppendEvent(tr, WF_EV_TASK_CANCELLED, dl->step, dl->attempt, WfJbEnd(&b));
		WfUndo()->settle(tr, dl->step, dl->visit);
	}
	else if (dl->timeout != NULL)
		time_out_attempt(tr, sd, idx, dl);
	else
		expire_lease(tr, sd, idx, dl);
}
