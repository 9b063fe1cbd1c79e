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
#include "metrics.h"
#include "notify.h"
#include "quota.h"
#include "runstore.h"
#include "shard.h"
#include "spi_util.h"
#include "state.h"
#include "timer.h"
#include "transition.h"

PG_FUNCTION_INFO_V1(wfengine_tick);

/* the statements of timer.c (registered by _PG_init: WfTimerPlans) */
enum
{
	PLAN_TIMERS_DUE = 0,
	PLAN_DEADLINES_DUE,
	PLAN_NEXT_DUE,
	PLAN_TIMER_DONE,
	PLAN_TIMER_ERROR,
	PLAN_TASK_SET_DEADLINE,
	PLAN_TIMER_HOLD
};

static const WfPlanSpec timer_plan_specs[] = {
	[PLAN_TIMERS_DUE] = {
		"timers_due",
		"SELECT tm.timer_id, tm.tenant_id FROM wf.timers tm "
		"WHERE tm.status OPERATOR(pg_catalog.=) 'pending' AND tm.fire_at OPERATOR(pg_catalog.<=) $1 "
		"ORDER BY tm.fire_at, tm.timer_id LIMIT $2",
		2, {TIMESTAMPTZOID, INT8OID}
	},
	[PLAN_DEADLINES_DUE] = {
		"deadlines_due",
		"SELECT t.task_id, t.tenant_id FROM wf.tasks t "
		"WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased']) AND t.deadline_at IS NOT NULL "
		"AND t.deadline_at OPERATOR(pg_catalog.<=) $1 "
		"ORDER BY t.deadline_at LIMIT $2",
		2, {TIMESTAMPTZOID, INT8OID}
	},
	[PLAN_NEXT_DUE] = {
		"next_due",
		"SELECT LEAST("
		" (SELECT pg_catalog.min(tm.fire_at) FROM wf.timers tm"
		"  WHERE tm.status OPERATOR(pg_catalog.=) 'pending'),"
		" (SELECT pg_catalog.min(t.deadline_at) FROM wf.tasks t"
		"  WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased']) AND t.deadline_at IS NOT NULL))",
		0, {InvalidOid}
	},
	[PLAN_TIMER_DONE] = {
		"timer_done",
		"UPDATE wf.timers tm SET status = 'fired', fired_at = $2, outcome = $3 "
		"WHERE tm.timer_id OPERATOR(pg_catalog.=) $1",
		3, {INT8OID, TIMESTAMPTZOID, TEXTOID}
	},
	[PLAN_TIMER_ERROR] = {
		"timer_error",
		/* $4: 'quota_refused' when max_timers_per_run refused it, else NULL */
		"UPDATE wf.timers tm SET errors = tm.errors OPERATOR(pg_catalog.+) 1, last_error = $3,"
		" fire_at = $2, outcome = $4 "
		"WHERE tm.timer_id OPERATOR(pg_catalog.=) $1 AND tm.status OPERATOR(pg_catalog.=) 'pending'",
		4, {INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID}
	},
	[PLAN_TASK_SET_DEADLINE] = {
		"task_set_deadline",
		"UPDATE wf.tasks t SET deadline_at = $2 "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1 AND t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased'])",
		2, {INT8OID, TIMESTAMPTZOID}
	},
	[PLAN_TIMER_HOLD] = {
		"timer_hold",
		"UPDATE wf.timers tm SET fire_at = 'infinity', outcome = 'held' "
		"WHERE tm.timer_id OPERATOR(pg_catalog.=) $1",
		1, {INT8OID}
	},
};

WfPlanTable WfTimerPlans = WF_PLAN_TABLE("timer", timer_plan_specs);

/* the columns of timers_due and deadlines_due */
enum
{
	DUE_COL_ID = 1,
	DUE_COL_TENANT_ID
};


/* how long a timer whose handling failed waits before the next try */
#define WF_TIMER_ERROR_DELAY (10 * USECS_PER_SEC)
/* how soon the worker looks again at due items of a moving partition */
#define WF_TIMER_SKIP_DELAY (1 * USECS_PER_SEC)

/* due items this tick left to another shard (WfShardTenantElsewhere) */
static int	timer_skipped = 0;

/* the actor of events the engine causes by itself */
#define WF_SYSTEM_ACTOR "wfengine"

/* forward declarations */
static void fire_timer(int64 timer_id, const char *tenant, TimestampTz now);
static void fire_deadline(int64 task_id, const char *tenant, TimestampTz now);
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
 * go on.  Returns how many items it handled (not those it left to
 * another shard).
 */
static int
fire_batch(int due_plan,
		   void (*handler) (int64, const char *, TimestampTz),
		   void (*put_off) (int64, TimestampTz, const char *),
		   const char *what, int max, TimestampTz now)
{
	Datum		values[2];
	uint64		n;
	uint64		i;
	int64	   *ids;
	char	  **tenants;
	uint64		skipped = 0;

	values[0] = TimestampTzGetDatum(now);
	values[1] = Int64GetDatum((int64) max);
	n = WfPlanExec(&WfTimerPlans, due_plan, values, NULL, false, 0, SPI_OK_SELECT);
	ids = palloc(sizeof(int64) * Max(n, 1));
	tenants = palloc(sizeof(char *) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		ids[i] = DatumGetInt64(WfGetDatumNotNull(i, DUE_COL_ID));
		tenants[i] = WfGetTextOrNull(i, DUE_COL_TENANT_ID);
	}
	for (i = 0; i < n; i++)
	{
		FireArg		a = {handler, ids[i], tenants[i], now};
		char	   *failure = NULL;

		CHECK_FOR_INTERRUPTS();
		/* a tenant of a partition moved (or moving) to another shard */
		if (WfShardTenantElsewhere(tenants[i]))
		{
			timer_skipped++;
			skipped++;
			continue;
		}
		(void) WfTakeTimerRefusal();
		if (WfTryInSubxact(fire_item, &a, &failure))
			continue;
		ereport(WARNING,
				(errmsg("could not handle %s %lld: %s", what, (long long) ids[i], failure),
				 errhint("It is tried again in 10 seconds.")));
		put_off(ids[i], now + WF_TIMER_ERROR_DELAY, failure);
	}
	/* items left to another shard are not handled: a batch of them is not full */
	return (int) (n - skipped);
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
	WfPlanExec(&WfTimerPlans, PLAN_TIMER_ERROR, values, nulls, false, 0, SPI_OK_UPDATE);
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
	WfPlanExec(&WfTimerPlans, PLAN_TASK_SET_DEADLINE, values, NULL, false, 0, SPI_OK_UPDATE);
}

/*
 * fire_timer handles one due timer: it locks the run's live task (if any),
 * the timer and the run (WfLockTimerAndRun), lets the run core apply it
 * (WfApplyTimer), and consumes the timer, or holds it for a paused run.
 */
static void
fire_timer(int64 timer_id, const char *tenant, TimestampTz now)
{
	Datum		values[3];
	WfRunState	run;
	WfLockedTimer timer;
	WfTransition tr;
	WfTimerOutcome outcome;

	if (!WfLockTimerAndRun(timer_id, &run, &timer))
		return;					/* the timer or its run is gone */
	if (strcmp(timer.status, "pending") != 0)
		return;					/* fired or cancelled meanwhile */

	WfTransitionInit(&tr, &run, WfDefinitionGet(run.definition_id), now);
	tr.actor = WF_SYSTEM_ACTOR;
	outcome = WfApplyTimer(&tr, timer_id, timer.kind, timer.step, timer.generation,
						   timer.payload, timer.due_at);

	values[0] = Int64GetDatum(timer_id);
	values[1] = TimestampTzGetDatum(now);
	values[2] = CStringGetTextDatum(outcome == WF_TIMER_APPLIED ? "applied" :
									outcome == WF_TIMER_HELD ? "held" : "stale");
	WfPlanExec(&WfTimerPlans, outcome == WF_TIMER_HELD ? PLAN_TIMER_HOLD : PLAN_TIMER_DONE,
			   values, NULL, false, 0, SPI_OK_UPDATE);
	WfTransitionWrite(&tr);
	if (outcome != WF_TIMER_HELD)
	{
		WfCount(outcome == WF_TIMER_APPLIED ? WF_CNT_TIMERS_FIRED : WF_CNT_TIMERS_STALE, 1);
		WfObserve(WF_HIST_TIMER_LAG, timer.due_at, now);
	}
	if (outcome == WF_TIMER_APPLIED)
		WfNoteRunChange(run.tenant_id, &run.run_id, run.status == WF_RUN_RUNNING ? "timer" :
						WfRunStatusName(run.status));
}

/*
 * earliest_other_deadline moves the task's deadline to the earliest of its
 * deadlines that have not passed (none: NULL).
 */
static void
earliest_other_deadline(int64 task_id, const WfTaskTimes *t)
{
	Datum		values[2];
	TimestampTz next = Min(t->lease_end ? t->lease_end : DT_NOEND,
						   Min(t->close_at ? t->close_at : DT_NOEND,
							   t->heartbeat_at ? t->heartbeat_at : DT_NOEND));

	values[0] = Int64GetDatum(task_id);
	values[1] = TimestampTzGetDatum(next);
	WfPlanExec(&WfTimerPlans, PLAN_TASK_SET_DEADLINE, values, next == DT_NOEND ? " n" : NULL,
			   false, 0, SPI_OK_UPDATE);
}

/*
 * fire_deadline handles one live attempt whose deadline has passed: under
 * the task and run locks it finds which of the attempt's deadlines passed
 * and lets the run core apply it (WfApplyDeadline): a timeout fails the
 * attempt, an expired lease puts it back on its queue.
 */
static void
fire_deadline(int64 task_id, const char *tenant, TimestampTz now)
{
	Datum		values[2];
	WfRunState	run;
	WfTransition tr;
	WfLockedTask task;
	WfTaskTimes t;
	WfTaskDeadline dl;

	if (!WfLockTaskAndRun(task_id, tenant, &run, &task, &t))
		return;
	if (t.deadline == 0)
		return;					/* handled meanwhile */
	if (t.deadline > now ||
		(strcmp(task.status, "ready") != 0 && strcmp(task.status, "leased") != 0))
		return;					/* moved by a heartbeat, or no longer live */
	if (run.status != WF_RUN_RUNNING && !WF_RUN_UNDOING(run.status))
	{
		/* a paused run decides nothing: wf.resume_run() sets it again */
		values[0] = Int64GetDatum(task_id);
		values[1] = (Datum) 0;
		WfPlanExec(&WfTimerPlans, PLAN_TASK_SET_DEADLINE, values, " n", false, 0, SPI_OK_UPDATE);
		return;
	}

	memset(&dl, 0, sizeof(dl));
	dl.task_id = task_id;
	dl.step = task.step;
	dl.visit = task.visit;
	dl.attempt = task.attempt;
	dl.fence = task.fence;
	dl.worker = task.worker;
	dl.input = task.input;
	dl.expirations = t.expirations;
	dl.leased = strcmp(task.status, "leased") == 0;
	if (!dl.leased)
	{
		if (t.start_at != 0 && t.start_at <= now)
			dl.timeout = "schedule_to_start";
	}
	else if (t.close_at != 0 && t.close_at <= now)
		dl.timeout = "start_to_close";
	else if (t.heartbeat_at != 0 && t.heartbeat_at <= now)
		dl.timeout = "heartbeat";
	dl.lease_expired = dl.timeout == NULL && dl.leased && t.lease_end != 0 &&
		t.lease_end <= now;
	if (dl.timeout == NULL && !dl.lease_expired)
	{
		/* the deadline was the earliest of others that have not passed */
		earliest_other_deadline(task_id, &t);
		return;
	}

	WfTransitionInit(&tr, &run, WfDefinitionGet(run.definition_id), now);
	tr.actor = WF_SYSTEM_ACTOR;
	WfApplyDeadline(&tr, &dl);
	WfTransitionWrite(&tr);
	WfCount(WF_CNT_DEADLINES_FIRED, 1);
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
	timer_skipped = 0;
	handled = fire_batch(PLAN_TIMERS_DUE, fire_timer, put_off_timer,
						 "timer", max_fire, now);
	handled += fire_batch(PLAN_DEADLINES_DUE, fire_deadline, put_off_deadline,
						  "the deadline of task", Max(max_fire - handled, 1), now);

	WfPlanExec(&WfTimerPlans, PLAN_NEXT_DUE, NULL, NULL, true, 1, SPI_OK_SELECT);
	d = WfGetDatum(0, 1, &isnull);
	*next_due = isnull ? 0 : DatumGetTimestampTz(d);
	/* items of a moving partition stay due: look again in a second, not at once */
	if (timer_skipped > 0 && (*next_due == 0 || *next_due < now + WF_TIMER_SKIP_DELAY))
		*next_due = now + WF_TIMER_SKIP_DELAY;

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
