/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  Lease-based claiming of task attempts (FOR UPDATE SKIP LOCKED).
 *
 * A task attempt is claimable when its status is "ready" and its
 * available_at has passed.  One partial index, tasks_claim_idx on
 * (tenant_id, queue, priority DESC, available_at, task_id) WHERE status =
 * 'ready', serves every claim in its order: the highest priority first,
 * and within one priority FIFO by availability.  An attempt whose lease
 * expired is not claimable
 * by itself: the engine worker (timer.c) puts it back to "ready" and
 * records lease_expired, so that lost leases are counted and poison tasks
 * quarantined.
 *
 * A claim is no statement (claim_scan, through rowwrite.c): it reads the
 * claim index of its queue in its order, with the tenant and queue as
 * keys, and locks each ready, available attempt as SELECT ... FOR UPDATE
 * SKIP LOCKED would (WfRowScanNext: a row another claim holds is passed
 * over, so concurrent claimers never block on, or receive, the same row;
 * a row changed since the claim's snapshot is looked at again in its
 * latest version).  Each attempt locked is leased at once (lease_task): a
 * new fencing token, one delivery more, and the attempt's deadline (the
 * earliest of lease expiry, start-to-close and heartbeat timeouts), which
 * wakes the engine worker at commit if it sleeps past it.  A fence is
 * drawn from wf.fence_seq with the server's timeline in its high bits
 * (WfFenceBase), and is never below the attempt's last fence plus one:
 * it is unique per delivery even when a claim rolls back, the server
 * crashes, or a standby that never saw a claim is promoted, and it is
 * higher than every earlier fence of the task.  A re-claim after an
 * expired lease is the same attempt with a higher fence; the old holder's
 * late result then carries an old fence and is recorded as stale, and a
 * fence of a claim that never committed is older than the next claim's
 * (stale) or newer than the task's current fence (never issued).  Claims
 * are not run events: the task row is the record of each delivery (worker, fence,
 * deliveries), and the event that accepts a result names the lease that
 * produced it.
 *
 * The claim floor.  A queue of one priority is claimed from the queue's
 * claim floor (the least (available_at, task_id) its last claim took) on:
 * the same scan, its range starting there (priority and available_at as
 * keys), so that it does not walk over the entries of the attempts
 * claimed before, which no vacuum can remove while some snapshot still
 * sees them; claim_queue asks claimfloor.c where to read from and tells it
 * what was claimed, and how many index entries the scan read.
 *
 * Sealed values.  A worker in wfengine_sensitive gets the task input with
 * its envelopes opened.  An envelope that does not open (changed, or
 * malformed) fails only its own task: that attempt is failed at once,
 * not retryable, with the error code "sealed_value_damaged" (result.c's
 * report path, as if the worker had reported it), and the other tasks of
 * the batch are handed out.  A missing master key or a destroyed data key
 * is an error of the whole claim: it is configuration, and nothing is
 * claimed.
 *
 * Waiting claims.  With a wait, a claim that finds nothing sleeps inside
 * the server and tries again after every wake-up, returning as soon as it
 * claims something, or empty at the deadline.  It sleeps on the condition
 * variable of the queue's wait bucket (shmem.h), which notify.c bumps and
 * broadcasts after a commit that made a task of that queue claimable.
 * Lost wake-ups are excluded by the order of operations: the claimer puts
 * itself on the wait list (ConditionVariablePrepareToSleep), reads the
 * bucket's generation, and only then takes the snapshot of its try.  A
 * commit that the snapshot missed bumps the generation after becoming
 * visible, so either the claimer sees the new generation before it sleeps
 * and retries at once, or the broadcast finds it on the list.
 * The sleep is also cut short at the earliest available_at of a ready task
 * of the queue (a task written for the future needs no commit to become
 * claimable), and rows locked by a concurrent claim are looked at again
 * after WF_CLAIM_RECHECK_MS (that claim may roll back without a signal).
 * A commit wakes every claimer waiting in its bucket, and all but one of
 * the claimers of a queue then find nothing (a bucket is also shared by
 * several queues).  Such a wake-up costs one try of the claim: the look at
 * the queue's next available_at is repeated at most every WF_CLAIM_LOOK_MS,
 * and a sleep that skipped it ends WF_CLAIM_LOOK_MS after the last look.
 *
 * Each try takes a new snapshot in READ COMMITTED, as a new statement
 * would.  Under REPEATABLE READ or SERIALIZABLE every try would see the
 * transaction's first snapshot and could never find the task it was woken
 * for, so a wait is refused there.  Without shared_preload_libraries there
 * are no condition variables: the claimer then sleeps on its latch in
 * steps of WF_CLAIM_RECHECK_MS and tries again after each.  Interrupts are
 * served throughout (statement_timeout, pg_cancel_backend).  A waiting
 * claim holds the snapshot of the statement that called it, like any
 * running statement, which
 * holds back the xmin horizon for at most the wait: keep waits short (tens
 * of seconds) and loop.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/claim.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"
#include "utils/wait_event.h"

#include "api.h"
#include "argcheck.h"
#include "claim.h"
#include "claimfloor.h"
#include "guc.h"
#include "metrics.h"
#include "notify.h"
#include "quota.h"
#include "result.h"
#include "rowwrite.h"
#include "runstore.h"
#include "sensitive.h"
#include "shard.h"
#include "shmem.h"
#include "spi_util.h"
#include "tenant.h"
#include "version.h"

PG_FUNCTION_INFO_V1(wfengine_claim_tasks);
PG_FUNCTION_INFO_V1(wfengine_claim_tasks_any);

/* the statements of claim.c (registered by _PG_init: WfClaimPlans) */
enum
{
	PLAN_NEXT_AVAILABLE = 0
};

static const WfPlanSpec claim_plan_specs[] = {
	[PLAN_NEXT_AVAILABLE] = {
		"next_available",
		"SELECT pg_catalog.min(t.available_at) FROM wf.tasks t"
		" WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.queue OPERATOR(pg_catalog.=) $2"
		" AND t.status OPERATOR(pg_catalog.=) 'ready'",
		2, {TEXTOID, TEXTOID}
	},
};

WfPlanTable WfClaimPlans = WF_PLAN_TABLE("claim", claim_plan_specs);


/*
 * The columns of wf.tasks a claim reads and writes (rowwrite.c): first
 * those wf.claim_tasks returns, in its order, then deadline_at (the
 * engine worker is told of it), then the rest.
 */
static const char *const claim_columns[] = {
	"task_id", "run_id", "step", "attempt", "fence", "idempotency_key", "input",
	"lease_expires_at", "queue", "activity", "deliveries",
	"deadline_at",
	"priority", "available_at", "tenant_id", "status", "start_to_close",
	"heartbeat_timeout", "worker", "claimed_at", "lease", "last_heartbeat_at", "timeout_at",
	/* since 0.3.0 */
	"input_seq"
};
static WfRowTable claim_table = WF_ROW_TABLE("tasks", claim_columns, F_INT8EQ);

/* the same without input_seq, for a schema not yet updated to 0.3.0 */
static WfRowTable claim_table_02 = WF_ROW_TABLE_FIRST("tasks", claim_columns,
													 lengthof(claim_columns) - 1, F_INT8EQ);

/* the claim's table as this database's schema has it */
static WfRowTable *
claim_rows(void)
{
	return WfSchemaVersionAtLeast("0.3.0", NULL) ? &claim_table : &claim_table_02;
}

/* the columns of claim_columns */
enum
{
	CT_TASK_ID,
	CT_RUN_ID,
	CT_STEP,
	CT_ATTEMPT,
	CT_FENCE,
	CT_IDEMPOTENCY_KEY,
	CT_INPUT,
	CT_LEASE_EXPIRES_AT,
	CT_QUEUE,
	CT_ACTIVITY,
	CT_DELIVERIES,
	CT_DEADLINE_AT,
	CT_PRIORITY,
	CT_AVAILABLE_AT,
	CT_TENANT_ID,
	CT_STATUS,
	CT_START_TO_CLOSE,
	CT_HEARTBEAT_TIMEOUT,
	CT_WORKER,
	CT_CLAIMED_AT,
	CT_LEASE,
	CT_LAST_HEARTBEAT_AT,
	CT_TIMEOUT_AT,
	CT_INPUT_SEQ,
	CT_NCOLUMNS
};

/*
 * The run rows a claim reads for the attempts whose row holds no input
 * (the run's input as it stands, WfRunInputOf), by primary key (WfRowRead).
 */
static const char *const run_input_columns[] = {"run_id", "context", "input"};
static WfRowTable run_input_table = WF_ROW_TABLE("runs", run_input_columns, F_UUID_EQ);

/* the claim index, in the order it serves claims (see the file header) */
#define WF_CLAIM_INDEX "tasks_claim_idx"

#define WF_CLAIM_COLUMNS 11		/* the columns of wf.claim_tasks */
StaticAssertDecl(CT_DEADLINE_AT == WF_CLAIM_COLUMNS,
				 "claim_columns must start with the columns of wf.claim_tasks, then deadline_at");
#define WF_CLAIM_MAX_LEAD 1		/* leading columns of WfClaimNow's callers */

/* what one claim asks of one queue */
typedef struct ClaimArgs
{
	const char *tenant;
	const char *queue;
	int32		want;			/* attempts at the most */
	Datum		worker;			/* text */
	TimestampTz now;
	Interval   *lease;
	int64		fence_base;		/* WfFenceBase() */
	/* reading from the claim floor (claimfloor.c): from (floor_at, floor_task) on */
	bool		use_floor;
	int32		floor_priority;
	TimestampTz floor_at;
	int64		floor_task;
} ClaimArgs;

/*
 * An attempt a claim leased, as it is handed out: the columns of
 * wf.claim_tasks, then deadline_at; and where it stood in the claim index.
 */
typedef struct ClaimedTask
{
	Datum		cols[WF_CLAIM_COLUMNS + 1];
	bool		nulls[WF_CLAIM_COLUMNS + 1];
	int32		priority;
	TimestampTz available_at;
	int32		input_seq;		/* > 0: the input is in the history
								 * (WfTaskInputAt), the row's is NULL */
} ClaimedTask;

#define WF_MAX_LEASE ((int64) 7 * USECS_PER_DAY)

/* the longest wait of one claim */
#define WF_MAX_CLAIM_WAIT ((int64) 5 * SECS_PER_MINUTE * USECS_PER_SEC)
/* latch step without preload; recheck of rows a concurrent claim locked */
#define WF_CLAIM_RECHECK_MS 100
/* how often a waiting claim looks for the queue's next available task */
#define WF_CLAIM_LOOK_MS 1000

/* on a shard, a waiting claim looks for a move's cut-over this often */
#define WF_CLAIM_SHARD_LOOK_MS 100

/* backend state of waiting claims: their wait event */
static uint32 claim_wait_event = 0;

/* forward declarations */
static int64 claim_wait_us(FunctionCallInfo fcinfo);
static TimestampTz claim_next_wake(Datum tenant, Datum queue, TimestampTz now);
static uint32 claim_wait_event_info(void);
static uint64 claim_queue(const ClaimArgs *a, ClaimedTask *rows);
static void claim_learn(WfClaimFloor *cf, TimestampTz now, int wanted,
						const ClaimedTask *rows, uint64 n, int64 entries_read,
						int64 index_blocks);

/*
 * claim_wait_us validates the wait argument of wf.claim_tasks (the fifth;
 * NULL or zero means no wait) and returns it in microseconds.
 */
static int64
claim_wait_us(FunctionCallInfo fcinfo)
{
	double		us = WfIntervalArg(fcinfo, 4, true, (double) WF_MAX_CLAIM_WAIT,
								   "wait must be between 0 and 5 minutes",
								   "Wait for a few seconds to a minute and claim again in a loop.");

	if (us > 0 && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot wait for tasks in a %s transaction",
						IsolationIsSerializable() ? "SERIALIZABLE" : "REPEATABLE READ"),
				 errdetail("Every claim in the transaction uses its first snapshot, which can never show a task committed later."),
				 errhint("Claim with a wait in a READ COMMITTED transaction, or without a wait.")));
	return (int64) us;
}

/*
 * claim_next_wake returns when a waiting claim that found nothing at now
 * must look again even if no commit wakes it: when the earliest ready task
 * of the queue becomes available, WF_CLAIM_RECHECK_MS from now when one is
 * available already (a concurrent claim holds its row lock), or DT_NOEND
 * when the queue has no ready task.  Called connected to SPI.
 */
static TimestampTz
claim_next_wake(Datum tenant, Datum queue, TimestampTz now)
{
	Datum		values[2];
	TimestampTz until = DT_NOEND;
	bool		isnull;
	Datum		d;

	values[0] = tenant;
	values[1] = queue;
	if (WfPlanExec(&WfClaimPlans, PLAN_NEXT_AVAILABLE, values, NULL, true, 1, SPI_OK_SELECT) != 1)
		elog(ERROR, "could not read the next available task");
	d = WfGetDatum(0, 1, &isnull);
	if (!isnull)
	{
		TimestampTz avail = DatumGetTimestampTz(d);

		until = avail <= now ? now + WF_CLAIM_RECHECK_MS * INT64CONST(1000) : avail;
	}
	SPI_freetuptable(SPI_tuptable);
	return until;
}

/*
 * claim_wait_event_info returns the wait event a waiting claim reports in
 * pg_stat_activity.
 */
static uint32
claim_wait_event_info(void)
{
	return WfNamedWaitEvent("WfengineClaimWait", &claim_wait_event);
}

/*
 * text_is compares a text datum with a C string.
 */
static bool
text_is(Datum d, const char *s)
{
	text	   *t = DatumGetTextPP(d);
	size_t		len = strlen(s);

	return VARSIZE_ANY_EXHDR(t) == len && memcmp(VARDATA_ANY(t), s, len) == 0;
}

/*
 * claimable is the filter of a claim's scan (WfRowScanNext): is the
 * attempt in w->found one that the claim of a (a ClaimArgs) takes?  Ready,
 * of the tenant and queue, available by now, and, read from the claim
 * floor, not before it.  It is asked before the row is locked and again
 * after, of the latest version, when the row changed meanwhile.
 */
static bool
claimable(WfRowWriter *w, void *arg)
{
	const ClaimArgs *a = arg;
	bool		isnull;
	Datum		d;
	TimestampTz at;

	d = WfRowGet(w, CT_STATUS, &isnull);
	if (isnull || !text_is(d, "ready"))
		return false;
	at = DatumGetTimestampTz(WfRowGet(w, CT_AVAILABLE_AT, &isnull));
	if (isnull || at > a->now)
		return false;
	d = WfRowGet(w, CT_TENANT_ID, &isnull);
	if (isnull || !text_is(d, a->tenant))
		return false;
	d = WfRowGet(w, CT_QUEUE, &isnull);
	if (isnull || !text_is(d, a->queue))
		return false;
	if (a->use_floor)
	{
		int64		task = DatumGetInt64(WfRowGet(w, CT_TASK_ID, &isnull));

		if (DatumGetInt32(WfRowGet(w, CT_PRIORITY, &isnull)) != a->floor_priority ||
			at < a->floor_at || (at == a->floor_at && task < a->floor_task))
			return false;
	}
	return true;
}

/*
 * copy_column copies a column of the row in w->found into the current
 * memory context, for ct's column c.
 */
static void
copy_column(WfRowWriter *w, int column, ClaimedTask *ct, int c, bool byval, int16 len)
{
	Datum		d = WfRowGet(w, column, &ct->nulls[c]);

	ct->cols[c] = ct->nulls[c] ? (Datum) 0 : datumCopy(d, byval, len);
}

/*
 * plus_interval returns at + the interval column of the row in w->found,
 * as timestamptz + interval does; *isnull when the column is NULL.
 */
static TimestampTz
plus_interval(WfRowWriter *w, int column, TimestampTz at, bool *isnull)
{
	Datum		d = WfRowGet(w, column, isnull);

	if (*isnull)
		return 0;
	return DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
												   TimestampTzGetDatum(at), d));
}

/*
 * lease_task leases the attempt in w->found (locked, and claimable) to the
 * claim's worker, into ct: status leased, a new fence (the next of
 * wf.fence_seq on the timeline bits, and above the attempt's last), one
 * delivery more, the lease's end, the start-to-close timeout, and the
 * deadline, the earliest of those and the heartbeat timeout.
 */
static void
lease_task(WfRowWriter *w, const ClaimArgs *a, ClaimedTask *ct)
{
	Datum		values[CT_NCOLUMNS];
	bool		nulls[CT_NCOLUMNS];
	bool		replace[CT_NCOLUMNS];
	bool		isnull;
	bool		no_timeout;
	bool		no_heartbeat;
	int64		fence;
	TimestampTz expires;
	TimestampTz timeout;
	TimestampTz heartbeat;
	TimestampTz deadline;

	fence = a->fence_base + nextval_internal(WfFenceSequence(), false);
	fence = Max(fence, DatumGetInt64(WfRowGet(w, CT_FENCE, &isnull)) + 1);
	expires = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													  TimestampTzGetDatum(a->now),
													  IntervalPGetDatum(a->lease)));
	timeout = plus_interval(w, CT_START_TO_CLOSE, a->now, &no_timeout);
	heartbeat = plus_interval(w, CT_HEARTBEAT_TIMEOUT, a->now, &no_heartbeat);
	deadline = expires;
	if (!no_timeout)
		deadline = Min(deadline, timeout);
	if (!no_heartbeat)
		deadline = Min(deadline, heartbeat);

	/* what is handed out, copied before the row is written */
	copy_column(w, CT_TASK_ID, ct, CT_TASK_ID, true, 8);
	copy_column(w, CT_RUN_ID, ct, CT_RUN_ID, false, UUID_LEN);
	copy_column(w, CT_STEP, ct, CT_STEP, false, -1);
	copy_column(w, CT_ATTEMPT, ct, CT_ATTEMPT, true, 4);
	copy_column(w, CT_IDEMPOTENCY_KEY, ct, CT_IDEMPOTENCY_KEY, false, -1);
	copy_column(w, CT_INPUT, ct, CT_INPUT, false, -1);
	ct->input_seq = 0;
	if (w->table == &claim_table)
	{
		Datum		seq = WfRowGet(w, CT_INPUT_SEQ, &isnull);

		if (!isnull)
			ct->input_seq = DatumGetInt32(seq);
	}
	copy_column(w, CT_QUEUE, ct, CT_QUEUE, false, -1);
	copy_column(w, CT_ACTIVITY, ct, CT_ACTIVITY, false, -1);
	ct->cols[CT_FENCE] = Int64GetDatum(fence);
	ct->nulls[CT_FENCE] = false;
	ct->cols[CT_LEASE_EXPIRES_AT] = TimestampTzGetDatum(expires);
	ct->nulls[CT_LEASE_EXPIRES_AT] = false;
	ct->cols[CT_DELIVERIES] = Int32GetDatum(DatumGetInt32(WfRowGet(w, CT_DELIVERIES, &isnull)) + 1);
	ct->nulls[CT_DELIVERIES] = false;
	ct->cols[CT_DEADLINE_AT] = TimestampTzGetDatum(deadline);
	ct->nulls[CT_DEADLINE_AT] = false;
	ct->priority = DatumGetInt32(WfRowGet(w, CT_PRIORITY, &isnull));
	ct->available_at = DatumGetTimestampTz(WfRowGet(w, CT_AVAILABLE_AT, &isnull));

	memset(replace, false, sizeof(replace));
	memset(nulls, false, sizeof(nulls));
#define SET(col, value) (replace[col] = true, values[col] = (value))
	SET(CT_STATUS, CStringGetTextDatum("leased"));
	SET(CT_FENCE, ct->cols[CT_FENCE]);
	SET(CT_DELIVERIES, ct->cols[CT_DELIVERIES]);
	SET(CT_WORKER, a->worker);
	SET(CT_CLAIMED_AT, TimestampTzGetDatum(a->now));
	SET(CT_LEASE, IntervalPGetDatum(a->lease));
	SET(CT_LAST_HEARTBEAT_AT, (Datum) 0);
	nulls[CT_LAST_HEARTBEAT_AT] = true;
	SET(CT_LEASE_EXPIRES_AT, ct->cols[CT_LEASE_EXPIRES_AT]);
	SET(CT_TIMEOUT_AT, TimestampTzGetDatum(timeout));
	nulls[CT_TIMEOUT_AT] = no_timeout;
	SET(CT_DEADLINE_AT, ct->cols[CT_DEADLINE_AT]);
#undef SET
	WfRowUpdate(w, values, nulls, replace);
}

/*
 * claim_scan leases up to a->want claimable attempts of the queue, read
 * from the claim index in its order (from the claim floor on when
 * a->use_floor), locked as FOR UPDATE SKIP LOCKED locks them, into rows;
 * returns how many, and in *entries the index entries it read.
 */
static uint64
claim_scan(WfRowWriter *w, const ClaimArgs *a, ClaimedTask *rows, int64 *entries,
		   int64 *index_blocks)
{
	WfRowScanKey keys[5];
	int			nkeys = 0;
	WfRowScan	scan;
	uint64		n = 0;

#define KEY(col, strat, v) (keys[nkeys].column = (col), keys[nkeys].strategy = (strat), \
							keys[nkeys].value = (v), nkeys++)
	KEY(CT_TENANT_ID, BTEqualStrategyNumber, CStringGetTextDatum(a->tenant));
	KEY(CT_QUEUE, BTEqualStrategyNumber, CStringGetTextDatum(a->queue));
	if (a->use_floor)
	{
		KEY(CT_PRIORITY, BTEqualStrategyNumber, Int32GetDatum(a->floor_priority));
		KEY(CT_AVAILABLE_AT, BTGreaterEqualStrategyNumber, TimestampTzGetDatum(a->floor_at));
	}
	KEY(CT_AVAILABLE_AT, BTLessEqualStrategyNumber, TimestampTzGetDatum(a->now));
#undef KEY

	WfRowScanBegin(&scan, w, WF_CLAIM_INDEX, nkeys, keys);
	while (n < (uint64) a->want && WfRowScanNext(&scan, claimable, (void *) a))
		lease_task(w, a, &rows[n++]);
	*entries = scan.entries;
	*index_blocks = scan.index_blocks;
	WfRowScanEnd(&scan);
	return n;
}

/*
 * claim_queue runs the claim of a (tenant, queue, want, worker, now,
 * lease, fence base; the floor fields are its own) and returns the number
 * of attempts it leased, into rows (a->want of them).  It reads the claim
 * index from the queue's claim floor when claimfloor.c says it may, and
 * from the start of the queue otherwise or when that finds nothing;
 * either teaches the floor what it found.
 */
static uint64
claim_queue(const ClaimArgs *args, ClaimedTask *rows)
{
	ClaimArgs	a = *args;
	WfRowWriter w;
	WfClaimFloor cf;
	uint64		n;
	int64		entries;
	int64		index_blocks;

	WfClaimFloorPlan(a.tenant, a.queue, a.now, &cf);
	WfRowWriterOpen(&w, claim_rows());
	a.use_floor = cf.use_floor;
	if (cf.use_floor)
	{
		a.floor_priority = cf.priority;
		a.floor_at = cf.floor_at;
		a.floor_task = cf.floor_task;
		n = claim_scan(&w, &a, rows, &entries, &index_blocks);
		if (n > 0)
		{
			WfRowWriterClose(&w);
			claim_learn(&cf, a.now, a.want, rows, n, -1, -1);
			return n;
		}
		/* nothing from the floor on: from the start, which may find more */
		cf.use_floor = false;
		a.use_floor = false;
	}
	n = claim_scan(&w, &a, rows, &entries, &index_blocks);
	WfRowWriterClose(&w);
	claim_learn(&cf, a.now, a.want, rows, n, entries, index_blocks);
	return n;
}

/*
 * claim_learn tells the claim floor of cf what the n attempts in rows
 * that a claim at now leased of the wanted were: their priorities and the
 * least (available_at, task_id); entries_read, the entries of the claim
 * index the claim read, and index_blocks, the buffers the index gave them
 * from (-1: not known).
 */
static void
claim_learn(WfClaimFloor *cf, TimestampTz now, int wanted, const ClaimedTask *rows,
			uint64 n, int64 entries_read, int64 index_blocks)
{
	bool		uniform = true;
	TimestampTz least_at = DT_NOEND;
	int64		least_task = PG_INT64_MAX;
	uint64		i;

	for (i = 0; i < n; i++)
	{
		TimestampTz at = rows[i].available_at;
		int64		id = DatumGetInt64(rows[i].cols[CT_TASK_ID]);

		if (rows[i].priority != rows[0].priority)
			uniform = false;
		if (at < least_at || (at == least_at && id < least_task))
		{
			least_at = at;
			least_task = id;
		}
	}
	WfClaimFloorLearn(cf, now, wanted, (int) n, uniform, n > 0 ? rows[0].priority : 0,
					  least_at, least_task, entries_read, index_blocks);
}

/*
 * claim_within_limit claims for a tenant whose policy limits the tasks in
 * flight per queue (see quota.c): at most the room WfClaimRoom leaves.
 * A claim that may wait makes each try in a subtransaction, so that a try
 * that claims nothing gives the lock of (tenant, queue) back before the
 * claim sleeps; such a try only takes the lock if it is free.  *held_back
 * tells that the limit or the lock kept the try from claiming anything.
 */
static uint64
claim_within_limit(const ClaimArgs *args, ClaimedTask *rows, bool may_wait, bool *held_back)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	ClaimArgs	a = *args;
	int32		room;
	uint64		n = 0;

	if (!may_wait)
	{
		room = WfClaimRoom(a.tenant, a.queue, a.want, true);
		*held_back = room == 0;
		if (room == 0)
			return 0;
		a.want = room;
		return claim_queue(&a, rows);
	}

	/* an error propagates and aborts the subtransaction with the transaction */
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	room = WfClaimRoom(a.tenant, a.queue, a.want, false);
	*held_back = room == 0;
	if (room > 0)
	{
		a.want = room;
		n = claim_queue(&a, rows);
	}
	if (n > 0)
		ReleaseCurrentSubTransaction();
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(oldcxt);
	CurrentResourceOwner = oldowner;
	return n;
}

/* a waiting claim between its tries */
typedef struct ClaimWait
{
	TimestampTz deadline;		/* the end of the wait */
	ConditionVariable *cv;		/* of the queue's wait bucket; NULL: none */
	pg_atomic_uint64 *gen_counter;	/* ... and its generation */
	uint32		bucket;			/* the bucket's number */
	TimestampTz woken_at;		/* a commit's wake-up ended the last sleep */
	TimestampTz next_wake;		/* from the last look at the queue */
	TimestampTz looked_at;		/* when that look was */
	bool		timed_out;		/* the last sleep ran to its end */
	bool		cv_prepared;	/* on the wait list of cv */
} ClaimWait;

/*
 * claim_arguments reads and checks the arguments of wf.claim_tasks; false
 * when one of the first four is NULL (the call returns no rows).
 */
static bool
claim_arguments(FunctionCallInfo fcinfo, WfClaimRequest *req)
{
	int			i;

	/*
	 * The function is not STRICT, because a NULL wait means "no wait"; a NULL
	 * in any other argument returns no rows, as STRICT would.
	 */
	for (i = 0; i < 4; i++)
		if (PG_ARGISNULL(i))
			return false;
	req->queue = WfTextArg(fcinfo, 0, "queue name", WF_ARG_NAME);
	req->worker = WfTextArg(fcinfo, 1, "worker name", WF_ARG_NAME);
	req->max_tasks = PG_GETARG_INT32(2);
	req->lease = PG_GETARG_INTERVAL_P(3);
	WfCheckClaimRequest(req);
	req->wait_us = claim_wait_us(fcinfo);
	return true;
}

/*
 * WfCheckClaimRequest refuses a claim request (queue, worker, max_tasks,
 * lease; the names' lengths were checked as they were read) that
 * wf.claim_tasks would refuse.  Called by wf.claim_tasks and by the
 * eager-dispatch entry points (batch.c) before they change anything.
 */
void
WfCheckClaimRequest(const WfClaimRequest *req)
{
	double		lease_us;

	if (strlen(req->queue) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queue name must not be empty")));
	if (strlen(req->worker) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("worker name must not be empty"),
				 errhint("Name the worker so that leases and results can be traced to it.")));
	if (req->max_tasks < 1 || req->max_tasks > wf_max_claim_batch)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_tasks must be between 1 and %d, not %d",
						wf_max_claim_batch, req->max_tasks),
				 errhint("The upper bound is set by wfengine.max_claim_batch.")));
	lease_us = WfIntervalUsec(req->lease);
	if (lease_us <= 0 || lease_us > (double) WF_MAX_LEASE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease must be positive and at most 7 days"),
				 errhint("A lease covers one delivery of a task; when it expires the task can be claimed again.")));
}

/*
 * claim_wait_begin starts the wait of a claim: its deadline, and, with
 * shared memory, the claimer on the wait list of the queue's bucket before
 * its first try (see the file header).
 */
static void
claim_wait_begin(ClaimWait *w, const WfClaimRequest *req)
{
	memset(w, 0, sizeof(ClaimWait));
	if (req->wait_us == 0)
		return;
	w->deadline = GetCurrentTimestamp() + req->wait_us;
	if (WfShmem != NULL)
	{
		uint32		b = WfQueueBucket(WfCurrentTenant(), req->queue);

		w->bucket = b;
		w->cv = &WfShmem->queue_cv[b];
		w->gen_counter = &WfShmem->queue_gen[b];
		ConditionVariablePrepareToSleep(w->cv);
		w->cv_prepared = true;
	}
}

/*
 * claim_sleep sleeps after a try at now that claimed nothing, read with
 * the bucket's generation gen, until a commit may have made a task
 * claimable, the queue's next task becomes available, or the wait ends.
 * held_back: the tenant's limit kept the try from claiming.  Returns false
 * when it did not sleep because a commit came since gen was read (the
 * claim tries again at once).
 */
static bool
claim_sleep(ClaimWait *w, Datum tenant, Datum queue, TimestampTz now, uint64 gen,
			bool held_back)
{
	TimestampTz until;
	long		sleep_ms;

	if (w->timed_out || w->next_wake <= now ||
		now - w->looked_at >= WF_CLAIM_LOOK_MS * INT64CONST(1000))
	{
		w->next_wake = claim_next_wake(tenant, queue, now);
		w->looked_at = now;
	}
	until = Min(w->deadline, w->next_wake);
	if (w->looked_at != now)	/* the look was skipped: not for long */
		until = Min(until, w->looked_at + WF_CLAIM_LOOK_MS * INT64CONST(1000));
	/* the tenant's limit held tasks back: look again in a while */
	if (held_back)
		until = Min(w->deadline, Max(until, now + WF_CLAIM_RECHECK_MS * INT64CONST(1000)));
	/* round up: waking a little late is harmless, early costs a retry */
	sleep_ms = Max((long) ((until - now + 999) / 1000), 1);
	/* a shard: look for a waiting cut-over (WfShardCutoverWaiting) often */
	if (WfShardSharded())
		sleep_ms = Min(sleep_ms, WF_CLAIM_SHARD_LOOK_MS);

	w->timed_out = false;
	w->woken_at = 0;
	if (w->cv != NULL && !held_back)
	{
		if (!w->cv_prepared)
		{
			ConditionVariablePrepareToSleep(w->cv);
			w->cv_prepared = true;
		}
		/* a commit since the generation was read: try again at once */
		pg_memory_barrier();
		if (pg_atomic_read_u64(w->gen_counter) != gen)
			return false;
		w->timed_out = ConditionVariableTimedSleep(w->cv, sleep_ms, claim_wait_event_info());
		/* woken by a commit during this sleep: for the wake-to-claim time */
		if (!w->timed_out)
		{
			TimestampTz woken = WfMetricsWokenAt(w->bucket);

			WfCount(WF_CNT_CLAIM_WAKEUPS, 1);
			if (woken >= now)
				w->woken_at = woken;
		}
	}
	else
	{
		/*
		 * New tasks of the queue do not make room under the tenant's limit:
		 * off the condition variable, so that they do not wake this claim.
		 */
		if (w->cv_prepared)
		{
			ConditionVariableCancelSleep();
			w->cv_prepared = false;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(sleep_ms, WF_CLAIM_RECHECK_MS), claim_wait_event_info());
		ResetLatch(MyLatch);
		w->timed_out = true;
	}
	return true;
}

/*
 * run_input returns the input of the run run_id as it stands (WfRunInputOf):
 * the input of a claimed attempt whose row holds none, from the run row
 * read by primary key (WfRowRead).  The run row is read in its latest
 * version; no transaction can change the run's input meanwhile without
 * first writing the old one into the attempt's row (keep_task_inputs in
 * runstore.c), which would have to lock that row, which the claim holds.
 */
static Datum
run_input(Datum run_id)
{
	bool		isnull[2];
	Datum		v[2];

	if (!WfRowRead(&run_input_table, run_id, 1, 2, v, isnull))
		elog(ERROR, "the run of a claimed task attempt is missing");
	if (isnull[0] || isnull[1])
		elog(ERROR, "the run of a claimed task attempt has no context or input");
	return JsonbPGetDatum(WfRunInputOf(DatumGetJsonbP(v[0]), DatumGetJsonbP(v[1])));
}

/*
 * hand_out returns the n attempts of rows that a claim leased as the
 * function's rows: their sealed values opened for a worker entitled to
 * them, and the engine worker told when each lease can expire.  An
 * attempt whose input does not open is failed instead
 * (WfFailDamagedTask), once the rows are put.  Each row starts with the
 * nlead columns lead (lead_nulls) of the caller (none for
 * wf.claim_tasks).  Returns the number of rows it put.
 */
static uint64
hand_out(ReturnSetInfo *rsinfo, const ClaimedTask *rows, uint64 n,
		 int nlead, const Datum *lead, const bool *lead_nulls)
{
	bool		open_sealed = n > 0 && WfMaySeeSensitive(WfApiCaller());
	int			ndamaged = 0;	/* claimed tasks whose input does not open */
	int64	   *damaged_task = NULL;
	int64	   *damaged_fence = NULL;
	char	  **damaged_why = NULL;
	uint64		i;
	uint64		put = 0;

	Assert(nlead >= 0 && nlead <= WF_CLAIM_MAX_LEAD);
	for (i = 0; i < n; i++)
	{
		const ClaimedTask *ct = &rows[i];
		Datum		row[WF_CLAIM_MAX_LEAD + WF_CLAIM_COLUMNS];
		bool		rownulls[WF_CLAIM_MAX_LEAD + WF_CLAIM_COLUMNS];
		Datum	   *out = row + nlead;
		int			c;

		for (c = 0; c < nlead; c++)
		{
			row[c] = lead[c];
			rownulls[c] = lead_nulls[c];
		}
		memcpy(out, ct->cols, sizeof(Datum) * WF_CLAIM_COLUMNS);
		memcpy(rownulls + nlead, ct->nulls, sizeof(bool) * WF_CLAIM_COLUMNS);
		/*
		 * An attempt whose row holds no input has the one its task_scheduled
		 * event holds (WfTaskInputAt), or else the run's (WfRunInputOf).
		 */
		if (ct->nulls[CT_INPUT] && !ct->nulls[CT_RUN_ID])
		{
			out[CT_INPUT] = ct->input_seq > 0 ?
				JsonbPGetDatum(WfTaskInputAt(DatumGetUUIDP(ct->cols[CT_RUN_ID]),
											 WfCurrentTenant(), ct->input_seq)) :
				run_input(ct->cols[CT_RUN_ID]);
			rownulls[nlead + CT_INPUT] = false;
		}
		/* sealed values of the input, opened for a worker entitled to them */
		if (open_sealed && !rownulls[nlead + CT_INPUT])
		{
			char	   *damage = NULL;
			Jsonb	   *opened = WfOpenForCaller(WfCurrentTenant(), WfApiCaller(),
												 DatumGetJsonbP(out[CT_INPUT]),
												 &damage);

			if (opened == NULL)
			{
				/* failed below, once the rows of this claim are put */
				if (damaged_task == NULL)
				{
					damaged_task = palloc(sizeof(int64) * n);
					damaged_fence = palloc(sizeof(int64) * n);
					damaged_why = palloc(sizeof(char *) * n);
				}
				damaged_task[ndamaged] = DatumGetInt64(ct->cols[CT_TASK_ID]);
				damaged_fence[ndamaged] = DatumGetInt64(ct->cols[CT_FENCE]);
				damaged_why[ndamaged] = damage;
				ndamaged++;
				continue;
			}
			out[CT_INPUT] = JsonbPGetDatum(opened);
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, rownulls);
		put++;

		/* the engine worker must look at this lease when it can expire */
		if (!ct->nulls[CT_DEADLINE_AT])
			WfNoteTimer(DatumGetTimestampTz(ct->cols[CT_DEADLINE_AT]));
	}
	for (i = 0; i < (uint64) ndamaged; i++)
		WfFailDamagedTask(damaged_task[i], damaged_fence[i], damaged_why[i]);
	return put;
}

/*
 * hand_out_leased returns the attempt that a report's transition wrote
 * already leased (eager dispatch, WfScheduledTask) as hand_out returns a
 * claimed one: the same columns, as the claim would have returned them.
 */
static uint64
hand_out_leased(ReturnSetInfo *rsinfo, const WfScheduledTask *t, int nlead,
				const Datum *lead, const bool *lead_nulls)
{
	ClaimedTask ct;

	memset(ct.nulls, false, sizeof(ct.nulls));
	ct.cols[CT_TASK_ID] = Int64GetDatum(t->task_id);
	ct.cols[CT_RUN_ID] = UUIDPGetDatum(&t->run_id);
	ct.cols[CT_STEP] = CStringGetTextDatum(t->step);
	ct.cols[CT_ATTEMPT] = Int32GetDatum(t->attempt);
	ct.cols[CT_FENCE] = Int64GetDatum(t->lease.fence);
	ct.cols[CT_IDEMPOTENCY_KEY] = CStringGetTextDatum(t->idempotency_key);
	ct.cols[CT_INPUT] = JsonbPGetDatum(t->input);
	ct.cols[CT_LEASE_EXPIRES_AT] = TimestampTzGetDatum(t->lease.expires_at);
	ct.cols[CT_QUEUE] = CStringGetTextDatum(t->queue);
	ct.cols[CT_ACTIVITY] = t->activity != NULL ? CStringGetTextDatum(t->activity) : (Datum) 0;
	ct.nulls[CT_ACTIVITY] = t->activity == NULL;
	ct.cols[CT_DELIVERIES] = Int32GetDatum(1);
	ct.cols[CT_DEADLINE_AT] = TimestampTzGetDatum(t->lease.deadline_at);
	ct.priority = 0;
	ct.input_seq = 0;
	ct.available_at = 0;
	return hand_out(rsinfo, &ct, 1, nlead, lead, lead_nulls);
}

/*
 * claim_args fills a with what a claim of req asks at now, for the
 * current tenant.
 */
static void
claim_args(ClaimArgs *a, const WfClaimRequest *req, TimestampTz now)
{
	memset(a, 0, sizeof(ClaimArgs));
	a->tenant = WfCurrentTenant();
	a->queue = req->queue;
	a->want = req->max_tasks;
	a->worker = CStringGetTextDatum(req->worker);
	a->now = now;
	a->lease = req->lease;
	a->fence_base = WfFenceBase();
}

/*
 * wfengine_claim_tasks is wf.claim_tasks(queue, worker, max_tasks, lease,
 * wait): it leases up to max_tasks claimable attempts of queue to worker
 * and returns them.  With a wait and nothing to claim, it sleeps until it
 * can claim something or the wait is over (see the file header).
 */
Datum
wfengine_claim_tasks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	WfClaimRequest req;
	ClaimWait	w;
	ClaimArgs	a;
	ClaimedTask *rows;
	Datum		tenant;
	Datum		queue;
	uint64		n;
	bool		limited;		/* the tenant limits tasks in flight */
	bool		held_back = false;	/* ... and that kept the last try from claiming */

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (!claim_arguments(fcinfo, &req))
		return (Datum) 0;

	WfApiBegin();

	claim_args(&a, &req, 0);
	tenant = CStringGetTextDatum(a.tenant);
	queue = CStringGetTextDatum(a.queue);
	rows = palloc(sizeof(ClaimedTask) * req.max_tasks);
	limited = WfClaimLimited(a.tenant);

	claim_wait_begin(&w, &req);
	for (;;)
	{
		uint64		gen = 0;
		TimestampTz now;

		/* the generation is read before the claim takes its snapshot */
		if (w.gen_counter != NULL)
		{
			gen = pg_atomic_read_u64(w.gen_counter);
			pg_memory_barrier();
		}
		now = GetCurrentTimestamp();
		a.now = now;
		if (!limited)
			n = claim_queue(&a, rows);
		else
			n = claim_within_limit(&a, rows, req.wait_us > 0, &held_back);
		if (n > 0 || req.wait_us == 0 || now >= w.deadline)
			break;
		/* a move's cut-over waits for this tenant's partition: end the wait */
		if (WfShardCutoverWaiting())
			break;
		if (claim_sleep(&w, tenant, queue, now, gen, held_back))
			CHECK_FOR_INTERRUPTS();
	}
	if (w.cv_prepared)
		ConditionVariableCancelSleep();

	WfCount(WF_CNT_CLAIM_CALLS, 1);
	WfCount(WF_CNT_TASKS_CLAIMED, n);
	if (n > 0 && w.woken_at != 0)
		WfObserve(WF_HIST_WAKE_TO_CLAIM, w.woken_at, GetCurrentTimestamp());
	(void) hand_out(rsinfo, rows, n, 0, NULL, NULL);
	WfApiEnd();
	return (Datum) 0;
}

/* ---- claims on several queues ---- */

/* the most queues one wf.claim_tasks_any names */
#define WF_CLAIM_MAX_QUEUES 64

/*
 * claim_queues reads the queues of wf.claim_tasks_any (argument 0): a
 * one-dimensional array of 1 to WF_CLAIM_MAX_QUEUES names, none NULL or
 * empty; a name given twice counts once, where it is first.
 */
static char **
claim_queues(FunctionCallInfo fcinfo, int *nqueues)
{
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			k = 0;
	int			i;
	char	  **queues;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("queues must be a one-dimensional array")));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n < 1 || n > WF_CLAIM_MAX_QUEUES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queues must name between 1 and %d queues, not %d", WF_CLAIM_MAX_QUEUES, n),
				 errhint("Run one worker per group of queues.")));
	queues = palloc(sizeof(char *) * n);
	for (i = 0; i < n; i++)
	{
		char	   *q;
		int			j;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("queues[%d] must not be NULL", i + 1)));
		q = TextDatumGetCString(elems[i]);
		if (q[0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("queues[%d] must not be empty", i + 1)));
		WfCheckCStringArg(q, "queue name", WF_ARG_NAME);
		for (j = 0; j < k; j++)
			if (strcmp(queues[j], q) == 0)
				break;
		if (j == k)
			queues[k++] = q;
	}
	*nqueues = k;
	return queues;
}

/*
 * claim_any_next_wake returns when a waiting wf.claim_tasks_any that found
 * nothing at now must look again without a commit: the earliest of its
 * queues' claim_next_wake.
 */
static TimestampTz
claim_any_next_wake(Datum tenant, char **queues, int nqueues, TimestampTz now)
{
	TimestampTz until = DT_NOEND;
	int			i;

	for (i = 0; i < nqueues; i++)
		until = Min(until, claim_next_wake(tenant, CStringGetTextDatum(queues[i]), now));
	return until;
}

/*
 * wfengine_claim_tasks_any is wf.claim_tasks_any(queues, worker,
 * max_tasks, lease, wait): wf.claim_tasks over several queues, so that one
 * connection serves a worker of many.  It leases up to max_tasks attempts,
 * from the queues in the order given (all it can from the first, then from
 * the next); with a wait and nothing to claim, it sleeps until a commit
 * makes a task of one of them claimable, one becomes available, or the wait
 * ends.  A claim on one queue sleeps on its bucket's condition variable
 * (see the file header); one on several sleeps on the condition variable
 * that notify.c broadcasts with every bucket's, and looks at its own
 * buckets' generations: it is on the wait list before it reads them, so a
 * wake-up is never lost, and a commit to another queue costs it only a
 * look at those counters.
 */
Datum
wfengine_claim_tasks_any(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	WfClaimRequest req;
	char	  **queues;
	int			nq;
	ClaimArgs	a;
	ClaimedTask *rows;
	Datum		tenant;
	uint64		put = 0;
	bool		limited;
	bool		prepared = false;
	pg_atomic_uint64 **counters = NULL;
	uint64	   *gens;
	TimestampTz deadline = 0;
	TimestampTz next_wake = 0;
	TimestampTz looked_at = 0;
	int			i;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	/* not STRICT for wait (NULL: no wait); a NULL elsewhere is refused */
	WfRequireArg(fcinfo, 0, "queues", NULL);
	WfRequireArg(fcinfo, 1, "worker", NULL);
	WfRequireArg(fcinfo, 2, "max_tasks", NULL);
	WfRequireArg(fcinfo, 3, "lease", NULL);
	queues = claim_queues(fcinfo, &nq);
	req.queue = queues[0];
	req.worker = WfTextArg(fcinfo, 1, "worker name", WF_ARG_NAME);
	req.max_tasks = PG_GETARG_INT32(2);
	req.lease = PG_GETARG_INTERVAL_P(3);
	WfCheckClaimRequest(&req);
	req.wait_us = claim_wait_us(fcinfo);

	WfApiBegin();
	claim_args(&a, &req, 0);
	tenant = CStringGetTextDatum(a.tenant);
	rows = palloc(sizeof(ClaimedTask) * req.max_tasks);
	limited = WfClaimLimited(a.tenant);
	gens = palloc0(sizeof(uint64) * nq);
	if (req.wait_us > 0)
	{
		deadline = GetCurrentTimestamp() + req.wait_us;
		if (WfShmem != NULL)
		{
			counters = palloc(sizeof(pg_atomic_uint64 *) * nq);
			for (i = 0; i < nq; i++)
				counters[i] = &WfShmem->queue_gen[WfQueueBucket(WfCurrentTenant(), queues[i])];
			ConditionVariablePrepareToSleep(&WfShmem->any_queue_cv);
			prepared = true;
		}
	}

	for (;;)
	{
		TimestampTz now;
		TimestampTz until;
		bool		held_back = false;
		bool		changed = false;
		long		sleep_ms;

		/* the generations are read before the tries take their snapshots */
		if (counters != NULL)
		{
			for (i = 0; i < nq; i++)
				gens[i] = pg_atomic_read_u64(counters[i]);
			pg_memory_barrier();
		}
		now = GetCurrentTimestamp();
		a.now = now;
		for (i = 0; i < nq && put < (uint64) req.max_tasks; i++)
		{
			int32		want = req.max_tasks - (int32) put;
			uint64		n;
			bool		held = false;

			a.queue = queues[i];
			a.want = want;
			if (!limited)
				n = claim_queue(&a, rows);
			else
				n = claim_within_limit(&a, rows, req.wait_us > 0, &held);
			held_back |= held;
			if (n > 0)
				put += hand_out(rsinfo, rows, n, 0, NULL, NULL);
		}
		if (put > 0 || req.wait_us == 0 || now >= deadline)
			break;
		if (WfShardCutoverWaiting())
			break;

		if (next_wake <= now || now - looked_at >= WF_CLAIM_LOOK_MS * INT64CONST(1000))
		{
			next_wake = claim_any_next_wake(tenant, queues, nq, now);
			looked_at = now;
		}
		until = Min(deadline, Min(next_wake, looked_at + WF_CLAIM_LOOK_MS * INT64CONST(1000)));
		if (held_back)
			until = Min(deadline, Max(until, now + WF_CLAIM_RECHECK_MS * INT64CONST(1000)));
		sleep_ms = Max((long) ((until - now + 999) / 1000), 1);
		if (WfShardSharded())
			sleep_ms = Min(sleep_ms, WF_CLAIM_SHARD_LOOK_MS);
		if (prepared && !held_back)
		{
			/* a commit to one of the queues since the generations were read */
			pg_memory_barrier();
			for (i = 0; i < nq && !changed; i++)
				changed = pg_atomic_read_u64(counters[i]) != gens[i];
			if (!changed &&
				!ConditionVariableTimedSleep(&WfShmem->any_queue_cv, sleep_ms,
											 claim_wait_event_info()))
				WfCount(WF_CNT_CLAIM_WAKEUPS, 1);
		}
		else
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 Min(sleep_ms, WF_CLAIM_RECHECK_MS), claim_wait_event_info());
			ResetLatch(MyLatch);
		}
		CHECK_FOR_INTERRUPTS();
	}
	if (prepared)
		ConditionVariableCancelSleep();

	WfCount(WF_CNT_CLAIM_CALLS, 1);
	WfCount(WF_CNT_TASKS_CLAIMED, put);
	WfApiEnd();
	return (Datum) 0;
}

/* ---- eager dispatch (issue 13) ---- */

/*
 * claim_continuation leases the attempt task_id that the caller's
 * transaction has just scheduled (eager dispatch for a tenant with
 * max_tasks_in_flight, for which the transition writes it ready), into
 * row, if it is claimable in the queue of a.  No other transaction can
 * see the row yet, so there is nothing to lock or skip.
 */
static bool
claim_continuation(const ClaimArgs *a, int64 task_id, ClaimedTask *row)
{
	WfRowWriter w;
	bool		claimed = false;

	WfRowWriterOpen(&w, claim_rows());
	if (WfRowFind(&w, Int64GetDatum(task_id)) && claimable(&w, (void *) a))
	{
		lease_task(&w, a, row);
		claimed = true;
	}
	WfRowWriterClose(&w);
	return claimed;
}

/*
 * WfClaimNow leases to req->worker up to req->max_tasks claimable attempts
 * of req->queue, without waiting (req->wait_us is ignored), and puts them
 * as rows of rsinfo, each after the caller's nlead leading columns (see
 * hand_out).  It is the claim of wf.claim_tasks, for the entry points that
 * report results and claim in one call (batch.c).  The ncontinuations
 * attempts of continuations (those the caller's transaction has just
 * scheduled; task_id 0: none) come first, in their order: one the
 * transition wrote leased to this worker (WfLeaseOffer) is handed out as
 * it is, always (the caller offers the lease to at most max_tasks
 * transitions), another is leased if it is claimable in the queue
 * (claim_continuation) while there is room; the rest in claim order
 * (claim_queue).  The tenant's limit of tasks in flight applies to both (a
 * transition does not write a task leased for a tenant with a limit).
 * Called outside an API frame (it opens its own); returns the number of
 * rows it put.
 */
uint64
WfClaimNow(ReturnSetInfo *rsinfo, const WfClaimRequest *req,
		   const WfScheduledTask *continuations, int ncontinuations, int nlead,
		   const Datum *lead, const bool *lead_nulls)
{
	ClaimArgs	a;
	ClaimedTask *rows;
	uint64		n;
	uint64		put = 0;
	int			i;

	WfApiBegin();
	claim_args(&a, req, GetCurrentTimestamp());
	rows = palloc(sizeof(ClaimedTask) * req->max_tasks);
	if (WfClaimLimited(a.tenant))
		a.want = WfClaimRoom(a.tenant, a.queue, a.want, true);
	for (i = 0; i < ncontinuations; i++)
	{
		const WfScheduledTask *c = &continuations[i];

		if (c->leased)
		{
			put += hand_out_leased(rsinfo, c, nlead, lead, lead_nulls);
			a.want = Max(a.want - 1, 0);
		}
		else if (a.want > 0 && c->task_id != 0 && claim_continuation(&a, c->task_id, rows))
		{
			put += hand_out(rsinfo, rows, 1, nlead, lead, lead_nulls);
			a.want--;
		}
	}
	if (a.want > 0)
	{
		n = claim_queue(&a, rows);
		put += hand_out(rsinfo, rows, n, nlead, lead, lead_nulls);
	}
	WfCount(WF_CNT_CLAIM_CALLS, 1);
	WfCount(WF_CNT_TASKS_CLAIMED, put);
	WfApiEnd();
	return put;
}

/*
 * WfClaimStarted puts the row of wf.start_and_claim (batch.c) into rsinfo:
 * the first task attempt of the run run_id that the caller's transaction
 * has just started, first (WfStartRunEager), leased to req->worker, in the
 * columns of wf.claim_tasks.  One the start wrote leased is handed out as
 * it is; one written ready (a tenant that limits its tasks in flight) is
 * leased if it is claimable and the tenant has room; no other task is
 * ever claimed.  Without an attempt to hand out (the first step is not a
 * task, the run existed already, no room), the row has the run's id and
 * NULLs.  Called outside an API frame (it opens its own).
 */
void
WfClaimStarted(ReturnSetInfo *rsinfo, const WfClaimRequest *req,
			   const WfScheduledTask *first, const pg_uuid_t *run_id)
{
	ClaimArgs	a;
	ClaimedTask row;
	uint64		put = 0;

	WfApiBegin();
	if (first->leased)
		put = hand_out_leased(rsinfo, first, 0, NULL, NULL);
	else if (first->task_id != 0)
	{
		claim_args(&a, req, GetCurrentTimestamp());
		a.queue = first->queue;
		a.want = 1;
		if (WfClaimLimited(a.tenant))
			a.want = WfClaimRoom(a.tenant, a.queue, a.want, true);
		if (a.want > 0 && claim_continuation(&a, first->task_id, &row))
			put = hand_out(rsinfo, &row, 1, 0, NULL, NULL);
	}
	if (put == 0)
	{
		Datum		values[WF_CLAIM_COLUMNS];
		bool		nulls[WF_CLAIM_COLUMNS];

		memset(values, 0, sizeof(values));
		memset(nulls, true, sizeof(nulls));
		values[CT_RUN_ID] = UUIDPGetDatum(run_id);
		nulls[CT_RUN_ID] = false;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	WfCount(WF_CNT_CLAIM_CALLS, 1);
	WfCount(WF_CNT_TASKS_CLAIMED, put);
	WfApiEnd();
}
