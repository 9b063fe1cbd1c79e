/*-------------------------------------------------------------------------
 *
 * timer.c
 *	  Durable timers and task deadlines, and the tick that fires them.
 *
 * Nothing in wfengine waits in memory.  Two kinds of rows stand for every
 * wait, and both survive any crash:
 *
 *	 wf.timers	waits of a run: a retry backoff, a sleep step, a step's
 *				total timeout, the run's timeout.  Each timer carries a
 *				generation: for a retry or a sleep the seq of the
 *				timer_set event that began the wait (the run's
 *				wait_generation), for a step timeout the seq that began
 *				the step visit (step_generation), for the run timeout 1.
 *				A timer whose generation no longer matches is recorded
 *				as a stale timer_fired event and changes nothing else.
 *
 *	 wf.tasks.deadline_at  the earliest deadline of a live attempt: its
 *				lease expiry and its schedule-to-start, start-to-close and
 *				heartbeat timeouts.  Claims and heartbeats move it; no
 *				timer row is written on the hot path.
 *
 * WfTimerTick, run by the per-database worker in a short transaction (or
 * by wf.tick()), reads a batch of due timers and deadlines and handles
 * each in its own subtransaction, under the same locks as every other
 * transition (task row, then timer row, then run row).  A timer is
 * consumed by the conditional update of its status, and a deadline is
 * re-read under the task lock, so two workers, a restart or a concurrent
 * report never fire one twice.  A timer whose handling fails is logged,
 * counted and retried later; it does not stop the others.  A timer whose
 * transition max_timers_per_run refused (WfTimerRoom) is retried the same
 * way, and is marked outcome "quota_refused" while it stays pending, so
 * that wf.explain says tenant_quota and the refused timers can be counted.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/timer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "definition.h"
#include "duration.h"
#include "guc.h"
#include "notify.h"
#include "spi_util.h"
#include "state.h"
#include "timer.h"
#include "wfengine.h"

PG_FUNCTION_INFO_V1(wfengine_tick);

/* how long a timer whose handling failed waits before the next try */
#define WF_TIMER_ERROR_DELAY (10 * USECS_PER_SEC)

/* the actor of events the engine causes by itself */
#define WF_SYSTEM_ACTOR "wfengine"

/* forward declarations */
static void fire_timer(int64 timer_id, const char *tenant, TimestampTz now);
static void fire_deadline(int64 task_id, const char *tenant, TimestampTz now);
static int64 quarantine_delay(int k);
static Jsonb *timeout_error(const char *which);
static void put_off_timer(int64 timer_id, TimestampTz retry_at, const char *failure);
static void put_off_deadline(int64 task_id, TimestampTz retry_at, const char *failure);

/* one item of a batch: what fire_item hands to its handler */
typedef struct FireArg
{
	void		(*handler) (int64 id, const char *tenant, TimestampTz now);
	int64		id;
	const char *tenant;
	TimestampTz now;
} FireArg;

static void
fire_item(void *arg)
{
	FireArg    *a = (FireArg *) arg;

	a->handler(a->id, a->tenant, a->now);
}

/*
 * fire_batch reads up to max due items with due_plan and hands each to
 * handler in its own subtransaction.  An item whose handling fails is
 * logged and put off for WF_TIMER_ERROR_DELAY with error_plan; the others
 * go on.  Returns how many items it handled.
 */
static int
fire_batch(WfPlanId due_plan,
		   void (*handler) (int64, const char *, TimestampTz),
		   void (*put_off) (int64, TimestampTz, const char *),
		   const char *what, int max, TimestampTz now)
{
	Datum		values[2];
	uint64		n;
	uint64		i;
	int64	   *ids;
	char	  **tenants;

	values[0] = TimestampTzGetDatum(now);
	values[1] = Int64GetDatum((int64) max);
	n = WfExecPlan(due_plan, values, NULL, false, 0, SPI_OK_SELECT);
	ids = palloc(sizeof(int64) * Max(n, 1));
	tenants = palloc(sizeof(char *) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		ids[i] = DatumGetInt64(WfGetDatumNotNull(i, 1));
		tenants[i] = WfGetTextOrNull(i, 2);
	}
	for (i = 0; i < n; i++)
	{
		FireArg		a = {handler, ids[i], tenants[i], now};
		char	   *failure = NULL;

		CHECK_FOR_INTERRUPTS();
		(void) WfTakeTimerRefusal();
		if (WfTryInSubxact(fire_item, &a, &failure))
			continue;
		ereport(WARNING,
				(errmsg("could not handle %s %lld: %s", what, (long long) ids[i], failure),
				 errhint("It is tried again in 10 seconds.")));
		put_off(ids[i], now + WF_TIMER_ERROR_DELAY, failure);
	}
	return (int) n;
}

/*
 * put_off_timer moves a timer whose handling failed to retry_at, and keeps
 * the error with it.
 */
static void
put_off_timer(int64 timer_id, TimestampTz retry_at, const char *failure)
{
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};

	values[0] = Int64GetDatum(timer_id);
	values[1] = TimestampTzGetDatum(retry_at);
	values[2] = CStringGetTextDatum(failure);
	/* refused by max_timers_per_run: wf.explain answers tenant_quota */
	if (WfTakeTimerRefusal())
		values[3] = CStringGetTextDatum("quota_refused");
	else
		nulls[3] = 'n';
	WfExecPlan(WF_PLAN_TIMER_ERROR, values, nulls, false, 0, SPI_OK_UPDATE);
}

/*
 * put_off_deadline moves the deadline of a task whose handling failed to
 * retry_at; the error is in the log.
 */
static void
put_off_deadline(int64 task_id, TimestampTz retry_at, const char *failure)
{
	Datum		values[2];

	values[0] = Int64GetDatum(task_id);
	values[1] = TimestampTzGetDatum(retry_at);
	WfExecPlan(WF_PLAN_TASK_SET_DEADLINE, values, NULL, false, 0, SPI_OK_UPDATE);
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
 * child_awaited tells whether the child run a child_done timer reports on
 * is one the run's step still waits for: it is the run recorded for its
 * branch, and that branch has no result yet.
 */
static bool
child_awaited(WfRunState *run, const char *step, Jsonb *payload)
{
	Jsonb	   *children = WfJsonbGetJsonb(WfJsonbGetJsonb(run->context, "children"), step);
	Jsonb	   *runs = children ? WfJsonbGetJsonb(children, "runs") : NULL;
	Jsonb	   *statuses = children ? WfJsonbGetJsonb(children, "statuses") : NULL;
	int			branch = (int) WfJsonbGetInt(payload, "branch", -1);
	char	   *child = WfJsonbGetText(payload, "child_run_id");
	JsonbValue *r;
	JsonbValue *st;

	if (runs == NULL || statuses == NULL || child == NULL || branch < 0 ||
		branch >= (int) JB_ROOT_COUNT(runs))
		return false;
	r = getIthJsonbValueFromContainer(&runs->root, branch);
	st = getIthJsonbValueFromContainer(&statuses->root, branch);
	return r != NULL && r->type == jbvString &&
		(size_t) r->val.string.len == strlen(child) &&
		strncmp(r->val.string.val, child, r->val.string.len) == 0 &&
		st != NULL && st->type == jbvNull;
}

/*
 * fire_timer handles one due timer, locking the run's live task (if any),
 * then the timer, then the run.
 */
static void
fire_timer(int64 timer_id, const char *tenant, TimestampTz now)
{
	Datum		values[3];
	WfRunState	run;
	WfTransition tr;
	WfDefinition *def;
	int64		locked_task = 0;
	WfTimerKind kind;
	char	   *step;
	int32		generation;
	Jsonb	   *payload;
	char	   *status;
	TimestampTz due_at;
	bool		applies;
	bool		live;
	bool		held = false;
	const WfStepDef *sd = NULL;
	const char *outcome;
	WfJsonBuilder b;
	int			idx = -1;
	int			tries;

	for (tries = 0;; tries++)
	{
		int64		current_task;
		bool		isnull;
		Datum		d;

		values[0] = Int64GetDatum(timer_id);
		if (WfExecPlan(WF_PLAN_TIMER_PEEK, values, NULL, false, 1, SPI_OK_SELECT) != 1)
			return;				/* the timer or its run is gone */
		d = WfGetDatum(0, 1, &isnull);
		current_task = isnull ? 0 : DatumGetInt64(d);
		if (current_task != 0 && current_task != locked_task)
		{
			values[0] = Int64GetDatum(current_task);
			WfExecPlan(WF_PLAN_TASK_LOCK, values, NULL, false, 0, SPI_OK_SELECT);
			locked_task = current_task;
		}

		values[0] = Int64GetDatum(timer_id);
		if (WfExecPlan(WF_PLAN_LOCK_TIMER_AND_RUN, values, NULL, false, 1, SPI_OK_SELECT) != 1)
			return;
		WfRunStateFromTuple(&run, 0);
		if (run.current_task == 0 || run.current_task == locked_task)
			break;
		if (tries >= 3)
			elog(ERROR, "the live task of run changed while timer %lld was being fired",
				 (long long) timer_id);
	}

	kind = WfTimerKindFromName(WfGetTextOrNull(0, WF_RUN_NCOLUMNS + 1));
	step = WfGetTextOrNull(0, WF_RUN_NCOLUMNS + 2);
	generation = DatumGetInt32(WfGetDatumNotNull(0, WF_RUN_NCOLUMNS + 3));
	payload = DatumGetJsonbPCopy(WfGetDatumNotNull(0, WF_RUN_NCOLUMNS + 4));
	status = WfGetTextOrNull(0, WF_RUN_NCOLUMNS + 5);
	due_at = DatumGetTimestampTz(WfGetDatumNotNull(0, WF_RUN_NCOLUMNS + 6));
	if (strcmp(status, "pending") != 0)
		return;					/* fired or cancelled meanwhile */

	def = WfDefinitionGet(run.definition_id);
	WfTransitionInit(&tr, &run, def, now);
	tr.actor = WF_SYSTEM_ACTOR;
	if (step != NULL)
		sd = WfTaskStepDef(def, step, &idx);
	live = run.status == WF_RUN_RUNNING || run.status == WF_RUN_PAUSED;

	switch (kind)
	{
		case WF_TIMER_RETRY:
		case WF_TIMER_SLEEP:
			/* while a run is undone, only its compensations are retried */
			applies = (WF_RUN_UNDOING(run.status) ?
					   kind == WF_TIMER_RETRY && WfIsCompensation(step) : live) &&
				sd != NULL && run.wait_generation == generation;
			break;
		case WF_TIMER_STEP_TIMEOUT:
		case WF_TIMER_APPROVAL_EXPIRY:
			applies = live && idx >= 0 &&
				run.step_generation == generation && run.current_step != NULL &&
				strcmp(run.current_step, step) == 0;
			break;
		case WF_TIMER_RUN_TIMEOUT:
			applies = run.status == WF_RUN_RUNNING || run.status == WF_RUN_PAUSED;
			break;
		case WF_TIMER_CHILD_DONE:
			/* the child must be one the current visit of the step waits for */
			applies = live && sd != NULL &&
				(sd->type == WF_STEP_SUBWORKFLOW || sd->type == WF_STEP_PARALLEL) &&
				run.current_step != NULL && strcmp(run.current_step, step) == 0 &&
				WfNextVisit(&run, step) == generation &&
				child_awaited(&run, step, payload);
			break;
		default:
			elog(ERROR, "timer %lld has an unknown kind", (long long) timer_id);
	}
	/*
	 * A paused run decides nothing: a timer that would move it on is held
	 * (it stays pending, due never) until wf.resume_run() makes it due.
	 */
	if (applies && run.status == WF_RUN_PAUSED && kind != WF_TIMER_RUN_TIMEOUT)
	{
		applies = false;
		held = true;
	}
	outcome = applies ? "applied" : held ? "held" : "stale";

	/* a timer of a finished run is consumed without touching its history */
	if (live || WF_RUN_UNDOING(run.status))
	{
		WfJbBegin(&b);
		WfJbInt(&b, "timer_id", timer_id);
		WfJbText(&b, "kind", WfTimerKindName(kind));
		WfJbInt(&b, "generation", generation);
		WfJbTimestamp(&b, "fire_at", due_at);
		WfJbText(&b, "outcome", outcome);
		WfAppendEvent(&tr, WF_EV_TIMER_FIRED, step, 0, WfJbEnd(&b));
	}

	if (applies)
	{
		switch (kind)
		{
			case WF_TIMER_RETRY:
				WfScheduleTask(&tr, sd, (int32) WfJsonbGetInt(payload, "visit", 1),
							   (int32) WfJsonbGetInt(payload, "attempt", 2),
							   now, WfJsonbGetJsonb(payload, "input"));
				break;
			case WF_TIMER_SLEEP:
				{
					WfJsonBuilder ob;

					WfJbBegin(&ob);
					WfJbTimestamp(&ob, "until", due_at);
					WfJbBegin(&b);
					WfJbInt(&b, "visit", WfJsonbGetInt(payload, "visit", 1));
					WfJbJsonb(&b, "output", WfJbEnd(&ob));
					WfAppendEvent(&tr, WF_EV_SLEEP_FINISHED, step, 0, WfJbEnd(&b));
					WfAdvance(&tr, idx);
					break;
				}
			case WF_TIMER_STEP_TIMEOUT:
				if (sd->type == WF_STEP_WAIT_EVENT && sd->expiry_next != WF_STEP_END)
				{
					/* the wait's "on_timeout" step takes over */
					WfJsonBuilder ob;

					WfJbBegin(&ob);
					WfJbBool(&ob, "timed_out", true);
					WfJbBegin(&b);
					WfJbInt(&b, "visit", WfNextVisit(&run, step));
					WfJbText(&b, "next", tr.def->steps[sd->expiry_next].name);
					WfJbJsonb(&b, "output", WfJbEnd(&ob));
					WfAppendEvent(&tr, WF_EV_WAIT_TIMED_OUT, step, 0, WfJbEnd(&b));
					WfAdvanceTo(&tr, idx, sd->expiry_next);
				}
				else
					WfFailRun(&tr, step, "step_timeout", timeout_error("total"));
				break;
			case WF_TIMER_RUN_TIMEOUT:
				WfFailRun(&tr, run.current_step, "run_timeout", timeout_error("run"));
				break;
			case WF_TIMER_APPROVAL_EXPIRY:
				WfApprovalExpired(&tr, idx);
				break;
			case WF_TIMER_CHILD_DONE:
				WfChildFinished(&tr, idx, payload);
				break;
		}
	}

	values[0] = Int64GetDatum(timer_id);
	values[1] = TimestampTzGetDatum(now);
	values[2] = CStringGetTextDatum(outcome);
	WfExecPlan(held ? WF_PLAN_TIMER_HOLD : WF_PLAN_TIMER_DONE, values, NULL,
			   false, 0, SPI_OK_UPDATE);
	WfTransitionWrite(&tr);
	if (applies)
		WfNoteRunChange(run.tenant_id, &run.run_id, run.status == WF_RUN_RUNNING ? "timer" :
						WfRunStatusName(run.status));
}

/*
 * fire_deadline handles one live attempt whose deadline has passed: a
 * timeout fails the attempt (and follows the retry policy); an expired
 * lease puts the attempt back on its queue for a new claim with a new
 * fence, or quarantines it when its leases keep expiring without a
 * result, and finally pauses the run for an operator.
 */
static void
fire_deadline(int64 task_id, const char *tenant, TimestampTz now)
{
	Datum		values[4];
	WfRunState	run;
	WfTransition tr;
	WfDefinition *def;
	int			c = WF_RUN_NCOLUMNS;
	WfLockedTask task;
	bool		isnull;
	Datum		d;
	TimestampTz deadline;
	TimestampTz lease_end = 0;
	TimestampTz close_at = 0;
	TimestampTz heartbeat_at = 0;
	TimestampTz start_at = 0;
	int32		expirations;
	const char *which = NULL;
	int			idx;
	const WfStepDef *sd;

	if (!WfLockTaskAndRun(task_id, tenant, &run, &task))
		return;
	d = WfGetDatum(0, c + 8, &isnull);
	if (isnull)
		return;					/* handled meanwhile */
	deadline = DatumGetTimestampTz(d);
	d = WfGetDatum(0, c + 9, &isnull);
	if (!isnull)
		lease_end = DatumGetTimestampTz(d);
	d = WfGetDatum(0, c + 10, &isnull);
	if (!isnull)
		close_at = DatumGetTimestampTz(d);
	d = WfGetDatum(0, c + 11, &isnull);
	if (!isnull)
		heartbeat_at = DatumGetTimestampTz(d);
	d = WfGetDatum(0, c + 12, &isnull);
	if (!isnull)
		start_at = DatumGetTimestampTz(d);
	expirations = DatumGetInt32(WfGetDatumNotNull(0, c + 13));

	if (deadline > now || (strcmp(task.status, "ready") != 0 && strcmp(task.status, "leased") != 0))
		return;					/* moved by a heartbeat, or no longer live */
	if (run.status != WF_RUN_RUNNING && !WF_RUN_UNDOING(run.status))
	{
		/* a paused run decides nothing: wf.resume_run() sets it again */
		values[0] = Int64GetDatum(task_id);
		values[1] = (Datum) 0;
		WfExecPlan(WF_PLAN_TASK_SET_DEADLINE, values, " n", false, 0, SPI_OK_UPDATE);
		return;
	}

	def = WfDefinitionGet(run.definition_id);
	sd = WfTaskStepDef(def, task.step, &idx);
	if (sd == NULL || run.current_task != task_id)
		elog(ERROR, "task %lld is not the current task of its run", (long long) task_id);
	WfTransitionInit(&tr, &run, def, now);
	tr.actor = WF_SYSTEM_ACTOR;

	if (strcmp(task.status, "ready") == 0)
	{
		if (start_at != 0 && start_at <= now)
			which = "schedule_to_start";
	}
	else if (close_at != 0 && close_at <= now)
		which = "start_to_close";
	else if (heartbeat_at != 0 && heartbeat_at <= now)
		which = "heartbeat";

	if (run.status == WF_RUN_CANCELLING && !WfIsCompensation(task.step) &&
		(which != NULL ||
		 (strcmp(task.status, "leased") == 0 && lease_end != 0 && lease_end <= now)))
	{
		/*
		 * The attempt in flight when the run was cancelled is lost: nobody
		 * knows whether it did its work, so it is compensated as if it had.
		 */
		WfJsonBuilder b;

		WfJbBegin(&b);
		WfJbInt(&b, "task_id", task_id);
		WfJbText(&b, "reason", which != NULL ? which : "lease_expired");
		tr.withdraw_task = task_id;
		WfAppendEvent(&tr, WF_EV_TASK_CANCELLED, task.step, task.attempt, WfJbEnd(&b));
		WfStartCompensation(&tr, task.step, task.visit);
	}
	else if (which != NULL)
	{
		Jsonb	   *error = timeout_error(which);

		/*
		 * The engine decides this attempt, so it takes the lease over: the
		 * fence moves on, and the worker's late result is stale.
		 */
		values[0] = Int64GetDatum(task_id);
		values[1] = JsonbPGetDatum(error);
		values[2] = TimestampTzGetDatum(now);
		values[3] = Int64GetDatum(WfFenceBase());
		if (WfExecPlan(WF_PLAN_TASK_TIME_OUT, values, NULL, false, 0,
					   SPI_OK_UPDATE_RETURNING) != 1)
			elog(ERROR, "task %lld changed while locked", (long long) task_id);
		task.fence = DatumGetInt64(WfGetDatumNotNull(0, 1));
		WfFailAttempt(&tr, sd, task_id, task.fence, task.attempt, task.visit, task.worker, error,
					  true, task.input);
	}
	else if (strcmp(task.status, "leased") == 0 && lease_end != 0 && lease_end <= now)
	{
		WfJsonBuilder b;
		TimestampTz again = now;
		int64		delay = 0;
		bool		pause = false;

		expirations++;
		if (wf_poison_threshold > 0 && expirations >= wf_poison_threshold)
		{
			delay = quarantine_delay(expirations - wf_poison_threshold);
			if (delay < 0)
				pause = true;
			else
				again = now + delay;
		}

		WfJbBegin(&b);
		WfJbInt(&b, "task_id", task_id);
		WfJbInt(&b, "fence", task.fence);
		WfJbText(&b, "worker", task.worker);
		WfJbInt(&b, "expirations", expirations);
		if (!pause)
			WfJbTimestamp(&b, "available_at", again);
		WfJbBool(&b, "quarantined", delay > 0 || pause);
		WfAppendEvent(&tr, WF_EV_LEASE_EXPIRED, task.step, task.attempt, WfJbEnd(&b));

		if (pause)
		{
			char	   *reason = psprintf("task %lld of step \"%s\" lost its lease %d times without a result",
										  (long long) task_id, task.step, expirations);

			WfJbBegin(&b);
			WfJbInt(&b, "task_id", task_id);
			WfJbText(&b, "reason", "poison_task");
			tr.withdraw_task = task_id;
			tr.withdraw_expirations = expirations;
			WfAppendEvent(&tr, WF_EV_TASK_CANCELLED, task.step, task.attempt, WfJbEnd(&b));
			if (WF_RUN_UNDOING(run.status))
			{
				/* a compensation that keeps crashing its workers */
				WfJbBegin(&b);
				WfJbText(&b, "code", "poison_task");
				WfJbText(&b, "message", reason);
				WfCompensationFailed(&tr, "poison_task", WfJbEnd(&b));
			}
			else
			{
				WfJbBegin(&b);
				WfJbText(&b, "reason", reason);
				WfJbText(&b, "step", task.step);
				WfJbInt(&b, "task_id", task_id);
				WfAppendEvent(&tr, WF_EV_RUN_PAUSED, NULL, 0, WfJbEnd(&b));
			}
		}
		else
		{
			values[0] = Int64GetDatum(task_id);
			values[1] = TimestampTzGetDatum(again);
			values[2] = Int32GetDatum(expirations);
			WfExecPlan(WF_PLAN_TASK_REQUEUE, values, NULL, false, 0, SPI_OK_UPDATE);
			WfNoteTaskReady(run.tenant_id, sd->queue);
		}
	}
	else
	{
		/* the deadline was the earliest of others that have not passed */
		values[0] = Int64GetDatum(task_id);
		values[1] = TimestampTzGetDatum(Min(lease_end ? lease_end : DT_NOEND,
											Min(close_at ? close_at : DT_NOEND,
												heartbeat_at ? heartbeat_at : DT_NOEND)));
		if (DatumGetTimestampTz(values[1]) == DT_NOEND)
			values[1] = (Datum) 0;
		WfExecPlan(WF_PLAN_TASK_SET_DEADLINE, values,
				   DatumGetTimestampTz(values[1]) == 0 ? " n" : NULL,
				   false, 0, SPI_OK_UPDATE);
		return;
	}

	WfTransitionWrite(&tr);
	WfNoteRunChange(run.tenant_id, &run.run_id, run.status == WF_RUN_RUNNING ? "timer" :
					WfRunStatusName(run.status));
}

/*
 * WfTimerTick: see timer.h.
 */
int
WfTimerTick(int max_fire, TimestampTz *next_due)
{
	TimestampTz now = GetCurrentTimestamp();
	int			handled;
	bool		isnull;
	Datum		d;

	WfApiBegin();
	handled = fire_batch(WF_PLAN_TIMERS_DUE, fire_timer, put_off_timer,
						 "timer", max_fire, now);
	handled += fire_batch(WF_PLAN_DEADLINES_DUE, fire_deadline, put_off_deadline,
						  "the deadline of task", Max(max_fire - handled, 1), now);

	WfExecPlan(WF_PLAN_NEXT_DUE, NULL, NULL, true, 1, SPI_OK_SELECT);
	d = WfGetDatum(0, 1, &isnull);
	*next_due = isnull ? 0 : DatumGetTimestampTz(d);

	WfApiEnd();
	return handled;
}

/*
 * wfengine_tick is wf.tick(max_fire): it fires what is due now and
 * returns how many timers and deadlines it handled.
 */
Datum
wfengine_tick(PG_FUNCTION_ARGS)
{
	int32		max_fire = PG_GETARG_INT32(0);
	TimestampTz next_due;

	if (max_fire < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_fire must be at least 1, not %d", max_fire)));
	PG_RETURN_INT32(WfTimerTick(max_fire, &next_due));
}
