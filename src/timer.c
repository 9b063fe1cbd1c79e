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
 * Never waiting for a client.  The tick serves every tenant of the
 * database, so it must not wait for a lock that a client transaction
 * holds: a tenant's session idle in a transaction after wf.signal would
 * otherwise stop every other tenant's timers.  The due items are read
 * with FOR UPDATE ... SKIP LOCKED on the item and its run, so an item
 * whose run a transaction holds is passed over and the items behind it
 * are fired; everything the handling of an item then locks (the live
 * task, child runs, a tenant's quota or correlation key) is locked
 * without waiting (WfSetLockWait), and a lock that is not free fails the
 * item's subtransaction with ERRCODE_LOCK_NOT_AVAILABLE, which leaves the
 * item as it was.  A short lock_timeout bounds any other wait of the
 * handlers.  Items left so stay due: the tick counts them (WfTickStats:
 * wf.worker_status() shows them, and the counter due_lock_skips), and asks
 * for the next tick within a back-off that starts at
 * WF_LOCK_RETRY_MIN_MS and doubles to WF_LOCK_RETRY_MAX_MS while items
 * stay locked, so a held lock neither spins the worker nor delays the
 * items much after it is released.  An item can also be passed over again
 * and again by a stream of short transactions on its run; once it is
 * WF_LOCK_PATIENCE_MS overdue, a tick (at most one every
 * WF_LOCK_PATIENCE_MS) tries the most overdue of them waiting for its
 * locks, but no longer than WF_LOCK_PATIENCE_WAIT_MS, so that it is not
 * starved forever.
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
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "definition.h"
#include "metrics.h"
#include "notify.h"
#include "quota.h"
#include "runstore.h"
#include "shard.h"
#include "spi_util.h"
#include "state.h"
#include "tenant.h"
#include "timer.h"
#include "transition.h"

PG_FUNCTION_INFO_V1(wfengine_tick);

/* the statements of timer.c (registered by _PG_init: WfTimerPlans) */
enum
{
	PLAN_TIMERS_DUE = 0,
	PLAN_DEADLINES_DUE,
	PLAN_TIMERS_OVERDUE,
	PLAN_DEADLINES_OVERDUE,
	PLAN_NEXT_DUE,
	PLAN_TIMER_DONE,
	PLAN_TIMER_ERROR,
	PLAN_TASK_SET_DEADLINE,
	PLAN_TIMER_HOLD
};

static const WfPlanSpec timer_plan_specs[] = {
	[PLAN_TIMERS_DUE] = {
		"timers_due",
		/* due timers whose timer and run rows are free, locked; not those held back ($3) */
		"SELECT tm.timer_id, tm.tenant_id FROM wf.timers tm"
		" JOIN wf.runs r ON r.run_id OPERATOR(pg_catalog.=) tm.run_id"
		" AND r.tenant_id OPERATOR(pg_catalog.=) tm.tenant_id "
		"WHERE tm.status OPERATOR(pg_catalog.=) 'pending' AND tm.fire_at OPERATOR(pg_catalog.<=) $1"
		" AND tm.timer_id OPERATOR(pg_catalog.<>) ALL ($3) "
		"ORDER BY tm.fire_at, tm.timer_id LIMIT $2 FOR UPDATE OF tm, r SKIP LOCKED",
		3, {TIMESTAMPTZOID, INT8OID, INT8ARRAYOID}
	},
	[PLAN_DEADLINES_DUE] = {
		"deadlines_due",
		/* live attempts past a deadline whose task and run rows are free, locked; not $3 */
		"SELECT t.task_id, t.tenant_id FROM wf.tasks t"
		" JOIN wf.runs r ON r.run_id OPERATOR(pg_catalog.=) t.run_id"
		" AND r.tenant_id OPERATOR(pg_catalog.=) t.tenant_id "
		"WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased']) AND t.deadline_at IS NOT NULL "
		"AND t.deadline_at OPERATOR(pg_catalog.<=) $1 AND t.task_id OPERATOR(pg_catalog.<>) ALL ($3) "
		"ORDER BY t.deadline_at LIMIT $2 FOR UPDATE OF t, r SKIP LOCKED",
		3, {TIMESTAMPTZOID, INT8OID, INT8ARRAYOID}
	},
	[PLAN_TIMERS_OVERDUE] = {
		"timers_overdue",
		/* the most overdue timers, locked or not (the patient try) */
		"SELECT tm.timer_id, tm.tenant_id FROM wf.timers tm "
		"WHERE tm.status OPERATOR(pg_catalog.=) 'pending' AND tm.fire_at OPERATOR(pg_catalog.<=) $1 "
		"ORDER BY tm.fire_at, tm.timer_id LIMIT $2",
		2, {TIMESTAMPTZOID, INT8OID}
	},
	[PLAN_DEADLINES_OVERDUE] = {
		"deadlines_overdue",
		"SELECT t.task_id, t.tenant_id FROM wf.tasks t "
		"WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased']) AND t.deadline_at IS NOT NULL "
		"AND t.deadline_at OPERATOR(pg_catalog.<=) $1 "
		"ORDER BY t.deadline_at LIMIT $2",
		2, {TIMESTAMPTZOID, INT8OID}
	},
	[PLAN_NEXT_DUE] = {
		"next_due",
		/*
		 * After a tick: the earliest due time ahead of $1, and the items
		 * still due at $1 (those the tick passed over: locked), how many
		 * (counted up to $2) and the due time of the oldest.
		 */
		"SELECT LEAST("
		" (SELECT pg_catalog.min(tm.fire_at) FROM wf.timers tm"
		"  WHERE tm.status OPERATOR(pg_catalog.=) 'pending' AND tm.fire_at OPERATOR(pg_catalog.>) $1),"
		" (SELECT pg_catalog.min(t.deadline_at) FROM wf.tasks t"
		"  WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased']) AND t.deadline_at IS NOT NULL"
		"  AND t.deadline_at OPERATOR(pg_catalog.>) $1)),"
		" (SELECT pg_catalog.count(*) FROM (SELECT 1 FROM wf.timers tm"
		"  WHERE tm.status OPERATOR(pg_catalog.=) 'pending' AND tm.fire_at OPERATOR(pg_catalog.<=) $1"
		"  LIMIT $2) x) OPERATOR(pg_catalog.+)"
		" (SELECT pg_catalog.count(*) FROM (SELECT 1 FROM wf.tasks t"
		"  WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased']) AND t.deadline_at IS NOT NULL"
		"  AND t.deadline_at OPERATOR(pg_catalog.<=) $1 LIMIT $2) y),"
		" LEAST("
		" (SELECT pg_catalog.min(tm.fire_at) FROM wf.timers tm"
		"  WHERE tm.status OPERATOR(pg_catalog.=) 'pending' AND tm.fire_at OPERATOR(pg_catalog.<=) $1),"
		" (SELECT pg_catalog.min(t.deadline_at) FROM wf.tasks t"
		"  WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased']) AND t.deadline_at IS NOT NULL"
		"  AND t.deadline_at OPERATOR(pg_catalog.<=) $1))",
		2, {TIMESTAMPTZOID, INT8OID}
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

/* due items passed over for a lock: see the file header */
#define WF_LOCK_RETRY_MIN_MS		10	/* first back-off */
#define WF_LOCK_RETRY_MAX_MS		1000	/* longest back-off */
#define WF_LOCK_TIMEOUT_MS			10	/* lock_timeout of the handlers */
#define WF_LOCK_PATIENCE_MS			1000	/* overdue this long: a patient try */
#define WF_LOCK_PATIENCE_WAIT_MS	20	/* how long a patient try waits */
#define WF_LOCK_PATIENT_ITEMS		2	/* items of a patient try */
#define WF_LOCKED_COUNT_LIMIT		100000	/* locked items counted up to */

/* due items this tick left to another shard (WfShardTenantElsewhere) */
static int	timer_skipped = 0;

/* the back-off after a tick that left items for a lock (0: none left) */
static int	lock_retry_ms = 0;

/* when the last patient try began */
static TimestampTz last_patient_try = 0;

/*
 * Items held back: due items that a handler found locked, or that belong
 * to another shard, are left out of the next ticks' batches until
 * retry_at, so that the items behind them are fired (the statement's
 * SKIP LOCKED sees only the item's own rows and its run's).  At most
 * WF_HELD_MAX of each kind are remembered; further ones are simply read
 * again by the next tick.  Backend-local: wf.tick() forgets them.
 */
#define WF_HELD_MAX 10000

typedef struct HeldItem
{
	int64		id;				/* timer_id or task_id */
	TimestampTz retry_at;		/* left out of batches until then */
} HeldItem;

/* one kind of due item: timers, or the deadlines of live attempts */
typedef struct FireKind
{
	const char *what;			/* for messages */
	int			due_plan;		/* the free ones, locked; $3: held back */
	int			overdue_plan;	/* the most overdue, unlocked */
	void		(*handler) (int64 id, const char *tenant, TimestampTz now);
	void		(*put_off) (int64 id, TimestampTz retry_at, const char *failure);
	HeldItem   *held;			/* TopMemoryContext, WF_HELD_MAX */
	int			nheld;
} FireKind;

/* the actor of events the engine causes by itself */
#define WF_SYSTEM_ACTOR "wfengine"

/* forward declarations */
static void fire_timer(int64 timer_id, const char *tenant, TimestampTz now);
static void fire_deadline(int64 task_id, const char *tenant, TimestampTz now);
static void put_off_timer(int64 timer_id, TimestampTz retry_at, const char *failure);
static void put_off_deadline(int64 task_id, TimestampTz retry_at, const char *failure);

static FireKind timer_kind = {"timer", PLAN_TIMERS_DUE, PLAN_TIMERS_OVERDUE,
fire_timer, put_off_timer, NULL, 0};
static FireKind deadline_kind = {"the deadline of task", PLAN_DEADLINES_DUE,
PLAN_DEADLINES_OVERDUE, fire_deadline, put_off_deadline, NULL, 0};

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
 * held_back returns the ids of kind k held back at now, as the int8[] of
 * its due statement, and forgets those whose retry_at has come.
 */
static Datum
held_back(FireKind *k, TimestampTz now)
{
	Datum	   *ids = palloc(sizeof(Datum) * Max(k->nheld, 1));
	int			n = 0;
	int			i;

	for (i = 0; i < k->nheld; i++)
	{
		if (k->held[i].retry_at <= now)
			continue;
		k->held[n] = k->held[i];
		ids[n++] = Int64GetDatum(k->held[i].id);
	}
	k->nheld = n;
	return PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64),
										   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * hold_back leaves item id of kind k out of the batches until retry_at.
 */
static void
hold_back(FireKind *k, int64 id, TimestampTz retry_at)
{
	if (k->held == NULL)
		k->held = MemoryContextAlloc(TopMemoryContext, sizeof(HeldItem) * WF_HELD_MAX);
	if (k->nheld >= WF_HELD_MAX)
		return;
	k->held[k->nheld].id = id;
	k->held[k->nheld].retry_at = retry_at;
	k->nheld++;
}

/*
 * fire_batch reads up to max items of kind k due by due_by with plan
 * (k's due_plan, which leaves locked and held-back items out, or its
 * overdue_plan) and hands each (at now) to k's handler in its own
 * subtransaction.  An item whose handling fails is logged and put off for
 * WF_TIMER_ERROR_DELAY; the others go on.  An item whose handling found a
 * lock taken is left as it was, and held back until retry_at, as is one
 * of another shard (for WF_TIMER_SKIP_DELAY).  Returns how many items it
 * handled (not those it left).
 */
static int
fire_batch(FireKind *k, int plan, int max, TimestampTz due_by, TimestampTz now,
		   TimestampTz retry_at)
{
	Datum		values[3];
	uint64		n;
	uint64		i;
	int64	   *ids;
	char	  **tenants;
	uint64		skipped = 0;

	values[0] = TimestampTzGetDatum(due_by);
	values[1] = Int64GetDatum((int64) max);
	if (plan == k->due_plan)
		values[2] = held_back(k, now);
	n = WfPlanExec(&WfTimerPlans, plan, values, NULL, false, 0, SPI_OK_SELECT);
	ids = palloc(sizeof(int64) * Max(n, 1));
	tenants = palloc(sizeof(char *) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		ids[i] = DatumGetInt64(WfGetDatumNotNull(i, DUE_COL_ID));
		tenants[i] = WfGetTextOrNull(i, DUE_COL_TENANT_ID);
	}
	for (i = 0; i < n; i++)
	{
		FireArg		a = {k->handler, ids[i], tenants[i], now};
		char	   *failure = NULL;
		int			sqlerrcode = 0;

		CHECK_FOR_INTERRUPTS();
		/* a tenant of a partition moved (or moving) to another shard */
		if (WfShardTenantElsewhere(tenants[i]))
		{
			timer_skipped++;
			skipped++;
			hold_back(k, ids[i], now + WF_TIMER_SKIP_DELAY);
			continue;
		}
		(void) WfTakeTimerRefusal();
		if (WfTryInSubxactCode(fire_item, &a, &failure, &sqlerrcode))
			continue;
		if (sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
		{
			/* a transaction holds what it needs: it stays due, see the header */
			skipped++;
			hold_back(k, ids[i], retry_at);
			continue;
		}
		ereport(WARNING,
				(errmsg("could not handle %s %lld: %s", k->what, (long long) ids[i], failure),
				 errhint("It is tried again in 10 seconds.")));
		k->put_off(ids[i], now + WF_TIMER_ERROR_DELAY, failure);
	}
	/* items left to another shard or for a lock: a batch of them is not full */
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

	if (!WfLockTimerAndRun(timer_id, tenant, &run, &timer))
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
	dl.input_seq = task.input_seq;
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
 * retry_delay_ms is how long an item found locked now is held back: the
 * back-off that the tick will ask for.
 */
static int
retry_delay_ms(void)
{
	return lock_retry_ms == 0 ? WF_LOCK_RETRY_MIN_MS :
		Min(lock_retry_ms * 2, WF_LOCK_RETRY_MAX_MS);
}

/*
 * fire_due fires what is due at now: the timers, then the deadlines, the
 * free ones only (SKIP LOCKED, and not those held back), up to max_fire
 * in all; returns how many it handled.
 */
static int
fire_due(int max_fire, TimestampTz now)
{
	TimestampTz retry_at = TimestampTzPlusMilliseconds(now, retry_delay_ms());
	int			handled;

	handled = fire_batch(&timer_kind, timer_kind.due_plan, max_fire, now, now, retry_at);
	handled += fire_batch(&deadline_kind, deadline_kind.due_plan, Max(max_fire - handled, 1),
						  now, now, retry_at);
	return handled;
}

/*
 * fire_patiently tries the most overdue items (WF_LOCK_PATIENCE_MS overdue
 * or more) once more, waiting for their locks, but no longer than
 * WF_LOCK_PATIENCE_WAIT_MS each: an item that short transactions keep
 * locked is fired in a gap between them.  Returns how many it handled.
 */
static int
fire_patiently(TimestampTz now)
{
	TimestampTz overdue = now - WF_LOCK_PATIENCE_MS * INT64CONST(1000);
	TimestampTz retry_at = TimestampTzPlusMilliseconds(now, retry_delay_ms());
	bool		old_wait = WfSetLockWait(true);
	int			guc_level = NewGUCNestLevel();
	int			handled = 0;
	char		timeout[32];

	snprintf(timeout, sizeof(timeout), "%d", WF_LOCK_PATIENCE_WAIT_MS);
	(void) set_config_option("lock_timeout", timeout, PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	PG_TRY();
	{
		handled = fire_batch(&timer_kind, timer_kind.overdue_plan, WF_LOCK_PATIENT_ITEMS,
							 overdue, now, retry_at);
		handled += fire_batch(&deadline_kind, deadline_kind.overdue_plan, WF_LOCK_PATIENT_ITEMS,
							  overdue, now, retry_at);
	}
	PG_FINALLY();
	{
		(void) WfSetLockWait(old_wait);
	}
	PG_END_TRY();
	AtEOXact_GUC(true, guc_level);
	return handled;
}

/*
 * read_next_due reads, after the tick, the earliest due time ahead of now
 * into *next (0: none), and the items still due at now (left for a lock,
 * or to another shard) into *stats.
 */
static void
read_next_due(TimestampTz now, TimestampTz *next, WfTickStats *stats)
{
	Datum		values[2];
	bool		isnull;
	Datum		d;

	values[0] = TimestampTzGetDatum(now);
	values[1] = Int64GetDatum(WF_LOCKED_COUNT_LIMIT);
	WfPlanExec(&WfTimerPlans, PLAN_NEXT_DUE, values, NULL, false, 1, SPI_OK_SELECT);
	d = WfGetDatum(0, 1, &isnull);
	*next = isnull ? 0 : DatumGetTimestampTz(d);
	stats->locked = DatumGetInt64(WfGetDatumNotNull(0, 2));
	d = WfGetDatum(0, 3, &isnull);
	stats->locked_since = isnull ? 0 : DatumGetTimestampTz(d);
	/* the items of a moving partition are not locked */
	stats->locked = Max(stats->locked - timer_skipped, 0);
	if (stats->locked == 0)
		stats->locked_since = 0;
}

/*
 * WfTimerTick: see timer.h and the header of this file.
 */
int
WfTimerTick(int max_fire, TimestampTz *next_due, WfTickStats *stats)
{
	TimestampTz now = GetCurrentTimestamp();
	WfTickStats found = {true, 0, 0};
	int			handled;
	bool		old_wait;
	int			guc_level;
	char		timeout[32];

	WfApiBegin();
	timer_skipped = 0;

	/* never wait for a client: no lock waits, and a short lock_timeout */
	old_wait = WfSetLockWait(false);
	guc_level = NewGUCNestLevel();
	snprintf(timeout, sizeof(timeout), "%d", WF_LOCK_TIMEOUT_MS);
	(void) set_config_option("lock_timeout", timeout, PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	PG_TRY();
	{
		handled = fire_due(max_fire, now);
		read_next_due(now, next_due, &found);
		if (found.locked > 0 && handled < max_fire &&
			found.locked_since <= now - WF_LOCK_PATIENCE_MS * INT64CONST(1000) &&
			now - last_patient_try >= WF_LOCK_PATIENCE_MS * INT64CONST(1000))
		{
			int			patient;

			last_patient_try = now;
			patient = fire_patiently(now);
			if (patient > 0)
			{
				handled += patient;
				read_next_due(now, next_due, &found);
			}
		}
	}
	PG_FINALLY();
	{
		(void) WfSetLockWait(old_wait);
	}
	PG_END_TRY();
	AtEOXact_GUC(true, guc_level);

	if (handled >= max_fire)
	{
		/* a full batch: what is still due may just not have fit */
		found.known = false;
		found.locked = 0;
		found.locked_since = 0;
		lock_retry_ms = 0;
	}
	else if (found.locked > 0)
	{
		TimestampTz retry_at;

		/* look again soon, then less and less often while they stay locked */
		lock_retry_ms = retry_delay_ms();
		retry_at = TimestampTzPlusMilliseconds(now, lock_retry_ms);
		if (*next_due == 0 || retry_at < *next_due)
			*next_due = retry_at;
		WfCount(WF_CNT_DUE_LOCK_SKIPS, (uint64) found.locked);
	}
	else
		lock_retry_ms = 0;

	/* items of a moving partition stay due: look again in a second, not at once */
	if (timer_skipped > 0 && (*next_due == 0 || *next_due > now + WF_TIMER_SKIP_DELAY))
		*next_due = now + WF_TIMER_SKIP_DELAY;

	if (stats != NULL)
		*stats = found;
	WfApiEnd();
	return handled;
}

/*
 * WfTimerForgetHeld forgets the items held back (see HeldItem), so that
 * the next tick tries every due item again.
 */
void
WfTimerForgetHeld(void)
{
	timer_kind.nheld = 0;
	deadline_kind.nheld = 0;
}

/*
 * wfengine_tick is wf.tick(max_fire): it fires what is due now (every due
 * item whose locks are free: an explicit call forgets the items an
 * earlier call found locked) and returns how many timers and deadlines
 * it handled.
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
	WfTimerForgetHeld();
	PG_RETURN_INT32(WfTimerTick(max_fire, &next_due, NULL));
}
