/*-------------------------------------------------------------------------
 *
 * quota.c
 *	  Per-tenant quotas: live runs, the start rate, tasks in flight per
 *	  queue, events and timers per run, and the size and depth of the
 *	  definitions a tenant publishes.
 *
 * The limits are columns of wf.tenant_policies (wf.set_tenant_policy).  A
 * backend reads its tenant's row at most once a second, so a change takes
 * effect within a second and starting a run costs no extra statement in
 * between.  A limit that is exceeded either refuses the call with SQLSTATE
 * 54000 (program_limit_exceeded), changing nothing, or makes the excess
 * wait:
 *
 *	max_live_runs			refused: wf.start_run counts the tenant's running,
 *							paused, cancelling and compensating runs (up to the limit, so
 *							the check costs at most that many index entries),
 *							after the tenant's lock for it, so that starts
 *							at the same time take turns.
 *							Child runs of subworkflow and parallel steps are
 *							not checked: their parent is.
 *	max_starts_per_second	refused: a token bucket per (database, tenant) in
 *	start_burst				shared memory, refilled at the rate and holding
 *							at most start_burst tokens (default: one second's
 *							worth).  Needs the library preloaded; without it
 *							the rate is not enforced.
 *	max_tasks_in_flight		waits: wf.claim_tasks hands out no more than
 *							this many leased tasks of one queue to the
 *							tenant; the rest stay ready (wf.explain shows
 *							tenant_quota) until an attempt ends.  Claims of
 *							one tenant's queue then take turns on a
 *							transaction-level lock, so the limit holds
 *							under concurrency.
 *	max_definition_steps	refused by wf.publish_definition, counting every
 *	max_definition_bytes	branch; the depth is how deeply parallel steps
 *	max_definition_depth	nest (1 = no parallel step).
 *	max_timers_per_run		refused by wf.publish_definition when the
 *							definition could need more pending timers than
 *							this (see WfDefinitionTimerBound).  At run time a
 *							new timer supersedes the pending ones of the same
 *							kind and step (they could only fire stale), so a
 *							loop does not pile them up.  A transition still
 *							over the limit is refused; when a timer caused
 *							it, the timer stays pending with outcome
 *							"quota_refused" (wf.explain: tenant_quota) and
 *							is tried again every 10 seconds.
 *	max_events_per_run		covers every event a caller can cause, in three
 *							classes (WfCheckEventQuota, WfSuppressAuditEvent):
 *							- refused: commands that append to a run without
 *							  moving it on, which a caller can repeat without
 *							  bound: wf.signal (and so wf.send_event),
 *							  wf.update_context, wf.pause_run,
 *							  wf.migrate_run, wf.retry_step, the approval
 *							  token commands, a re-issue of tokens by
 *							  wf.issue_approval_tokens, and wf.set_legal_hold
 *							  but for placing a hold on a run without one;
 *							- counted, not appended: events that only record
 *							  a refusal (result_duplicate, result_stale,
 *							  decision_refused, signal_received of a
 *							  duplicate): once the run has the limit, each
 *							  adds to its row of wf.suppressed_events instead,
 *							  and the caller gets the same answer;
 *							- never refused: worker results, engine
 *							  transitions (bounded by the definition),
 *							  accepted decisions, and the commands that end
 *							  or move on a run or undo a refused one
 *							  (wf.terminate_run, wf.cancel_run,
 *							  wf.skip_step, wf.resume_run, placing a hold),
 *							  so that a run at the limit can always be
 *							  finished.  Each of the last two needs a refused
 *							  command before it, so they add at most one
 *							  event each beyond the limit.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/quota.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "common/hashfn.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "api.h"
#include "quota.h"
#include "shmem.h"
#include "spi_util.h"
#include "state.h"
#include "tenant.h"

/* the statements of quota.c (registered by _PG_init: WfQuotaPlans) */
enum
{
	PLAN_TENANT_POLICY = 0,
	PLAN_LIVE_RUNS,
	PLAN_TASKS_IN_FLIGHT,
	PLAN_TIMERS_PENDING,
	PLAN_TIMERS_SUPERSEDE,
	PLAN_SUPPRESSED_EVENT,
	PLAN_BUFFERED_COUNT
};

static const WfPlanSpec quota_plan_specs[] = {
	[PLAN_TENANT_POLICY] = {
		"tenant_policy",
		"SELECT p.max_live_runs, p.max_starts_per_second, p.start_burst,"
		" p.max_definition_steps, p.max_definition_bytes, p.max_events_per_run,"
		" p.max_tasks_in_flight, p.max_timers_per_run, p.max_definition_depth,"
		" p.max_buffered_events "
		"FROM wf.tenant_policies p WHERE p.tenant_id OPERATOR(pg_catalog.=) $1",
		1, {TEXTOID}
	},
	[PLAN_LIVE_RUNS] = {
		"live_runs",
		"SELECT pg_catalog.count(*) FROM (SELECT 1 FROM wf.runs r"
		" WHERE r.tenant_id OPERATOR(pg_catalog.=) $1"
		" AND r.status OPERATOR(pg_catalog.=) ANY (ARRAY['running', 'paused', 'cancelling', 'compensating']) LIMIT $2) x",
		2, {TEXTOID, INT4OID}
	},
	[PLAN_TASKS_IN_FLIGHT] = {
		"tasks_in_flight",
		"SELECT pg_catalog.count(*) FROM (SELECT 1 FROM wf.tasks t"
		" WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.queue OPERATOR(pg_catalog.=) $2"
		" AND t.status OPERATOR(pg_catalog.=) 'leased' LIMIT $3) x",
		3, {TEXTOID, TEXTOID, INT4OID}
	},
	[PLAN_TIMERS_PENDING] = {
		"timers_pending",
		"SELECT pg_catalog.count(*) FROM wf.timers tm"
		" WHERE tm.run_id OPERATOR(pg_catalog.=) $1 AND tm.status OPERATOR(pg_catalog.=) 'pending'"
		" AND tm.kind OPERATOR(pg_catalog.<>) 'child_done'",
		1, {UUIDOID}
	},
	[PLAN_TIMERS_SUPERSEDE] = {
		"timers_supersede",
		/* earlier timers of the same kind and step: stale once a new one is set */
		"UPDATE wf.timers tm SET status = 'cancelled', fired_at = $5, outcome = 'superseded' "
		"WHERE tm.run_id OPERATOR(pg_catalog.=) $1 AND tm.status OPERATOR(pg_catalog.=) 'pending'"
		" AND tm.kind OPERATOR(pg_catalog.=) $2 AND (tm.step OPERATOR(pg_catalog.=) $3 OR (tm.step IS NULL AND $3 IS NULL))"
		" AND tm.generation OPERATOR(pg_catalog.<) $4",
		5, {UUIDOID, TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID}
	},
	[PLAN_SUPPRESSED_EVENT] = {
		"suppressed_event",
		"INSERT INTO wf.suppressed_events AS s (tenant_id, run_id, type, count, first_at, last_at) "
		"VALUES ($1, $2, $3, 1, $4, $4) ON CONFLICT (run_id, type) DO UPDATE SET"
		" count = s.count OPERATOR(pg_catalog.+) 1, last_at = $4",
		4, {TEXTOID, UUIDOID, TEXTOID, TIMESTAMPTZOID}
	},
	[PLAN_BUFFERED_COUNT] = {
		"buffered_count",
		"SELECT pg_catalog.count(*) FROM wf.buffered_events b"
		" WHERE b.tenant_id OPERATOR(pg_catalog.=) $1 AND b.delivered_at IS NULL"
		" AND b.expires_at OPERATOR(pg_catalog.>) $2",
		2, {TEXTOID, TIMESTAMPTZOID}
	},
};

WfPlanTable WfQuotaPlans = WF_PLAN_TABLE("quota", quota_plan_specs);

/* the columns of tenant_policy */
enum
{
	POLICY_COL_MAX_LIVE_RUNS = 1,
	POLICY_COL_MAX_STARTS_PER_SECOND,
	POLICY_COL_START_BURST,
	POLICY_COL_MAX_DEFINITION_STEPS,
	POLICY_COL_MAX_DEFINITION_BYTES,
	POLICY_COL_MAX_EVENTS_PER_RUN,
	POLICY_COL_MAX_TASKS_IN_FLIGHT,
	POLICY_COL_MAX_TIMERS_PER_RUN,
	POLICY_COL_MAX_DEFINITION_DEPTH,
	POLICY_COL_MAX_BUFFERED_EVENTS
};

/* how long a backend trusts the policy it read */
#define WF_POLICY_TTL_USEC 1000000

/* max_buffered_events of a tenant that did not set it */
#define WF_DEFAULT_MAX_BUFFERED_EVENTS 10000

/* the cached policy of one tenant; 0 = no limit */
typedef struct WfPolicy
{
	char	   *tenant;			/* TopMemoryContext */
	TimestampTz read_at;
	int32		max_live_runs;
	double		max_starts_per_second;
	int32		start_burst;
	int32		max_definition_steps;
	int32		max_definition_bytes;
	int32		max_events_per_run;
	int32		max_tasks_in_flight;
	int32		max_timers_per_run;
	int32		max_definition_depth;
	int32		max_buffered_events;	/* -1: not set (the default) */
} WfPolicy;

static void WfQuotaReset(void);

static WfPolicy policy;

/* forward declarations */
static const WfPolicy *tenant_policy(const char *tenant);
static bool quota_lock(const char *tenant, const char *what, bool wait);
static bool take_start_token(const char *tenant, double rate, int32 burst, double *wait_ms);

/*
 * WfQuotaReset forgets the cached policy (a new install).
 */
static void
WfQuotaReset(void)
{
	policy.read_at = 0;
}

/*
 * policy_int reads integer column col of the policy row; 0 (no limit) for
 * NULL.
 */
static int32
policy_int(int col)
{
	bool		isnull;
	Datum		d = WfGetDatum(0, col, &isnull);

	return isnull ? 0 : DatumGetInt32(d);
}

/*
 * tenant_policy returns the policy of tenant, read again when it is older
 * than WF_POLICY_TTL_USEC.  Inside an API call.
 */
static const WfPolicy *
tenant_policy(const char *tenant)
{
	TimestampTz now = GetCurrentTimestamp();
	Datum		values[1];
	bool		isnull;
	Datum		d;

	if (policy.tenant != NULL && strcmp(policy.tenant, tenant) == 0 &&
		policy.read_at != 0 && now - policy.read_at < WF_POLICY_TTL_USEC)
		return &policy;

	if (policy.tenant != NULL)
		pfree(policy.tenant);
	memset(&policy, 0, sizeof(policy));
	policy.tenant = MemoryContextStrdup(TopMemoryContext, tenant);
	policy.read_at = now;
	values[0] = CStringGetTextDatum(tenant);
	if (WfPlanExec(&WfQuotaPlans, PLAN_TENANT_POLICY, values, NULL, true, 1, SPI_OK_SELECT) == 1)
	{
		policy.max_live_runs = policy_int(POLICY_COL_MAX_LIVE_RUNS);
		d = WfGetDatum(0, POLICY_COL_MAX_STARTS_PER_SECOND, &isnull);
		policy.max_starts_per_second = isnull ? 0 : DatumGetFloat8(d);
		policy.start_burst = policy_int(POLICY_COL_START_BURST);
		policy.max_definition_steps = policy_int(POLICY_COL_MAX_DEFINITION_STEPS);
		policy.max_definition_bytes = policy_int(POLICY_COL_MAX_DEFINITION_BYTES);
		policy.max_events_per_run = policy_int(POLICY_COL_MAX_EVENTS_PER_RUN);
		policy.max_tasks_in_flight = policy_int(POLICY_COL_MAX_TASKS_IN_FLIGHT);
		policy.max_timers_per_run = policy_int(POLICY_COL_MAX_TIMERS_PER_RUN);
		policy.max_definition_depth = policy_int(POLICY_COL_MAX_DEFINITION_DEPTH);
		d = WfGetDatum(0, POLICY_COL_MAX_BUFFERED_EVENTS, &isnull);
		policy.max_buffered_events = isnull ? -1 : DatumGetInt32(d);
	}
	else
		policy.max_buffered_events = -1;
	return &policy;
}

/*
 * quota_lock takes the transaction-level lock of a tenant's quota (what: a
 * queue, or "live runs"), which claims or starts of the tenant take in
 * turn before they count.  With wait false it only tries: false when
 * another transaction holds it.
 */
static bool
quota_lock(const char *tenant, const char *what, bool wait)
{
	return WfLockTenantKey(tenant, what, WF_LOCK_QUOTA, wait);
}

/*
 * rate_bucket_to_take returns the bucket a new (database, tenant) takes
 * when none is free: of the database that holds the most buckets, the one
 * that will be full soonest (the least owed to it), so that one database
 * can never take every bucket from the others, and the tenant that loses
 * its bucket loses the least: it starts again with a full bucket, at most
 * start_burst starts early.  The caller holds rate_lock.
 */
static WfRateBucket *
rate_bucket_to_take(void)
{
	Oid			dbs[WF_MAX_DB_WORKERS];
	int			counts[WF_MAX_DB_WORKERS];
	int			ndbs = 0;
	Oid			most = InvalidOid;
	int			most_count = 0;
	WfRateBucket *victim = NULL;
	int			i;
	int			j;

	for (i = 0; i < WF_RATE_BUCKETS; i++)
	{
		Oid			db = WfShmem->rate[i].dboid;

		for (j = 0; j < ndbs && dbs[j] != db; j++)
			;
		if (j == ndbs)
		{
			if (ndbs == WF_MAX_DB_WORKERS)
				continue;		/* more databases than that: count the first */
			dbs[ndbs] = db;
			counts[ndbs++] = 0;
		}
		if (++counts[j] > most_count)
		{
			most_count = counts[j];
			most = db;
		}
	}
	for (i = 0; i < WF_RATE_BUCKETS; i++)
	{
		WfRateBucket *x = &WfShmem->rate[i];

		if (x->dboid == most && (victim == NULL || x->full_at < victim->full_at))
			victim = x;
	}
	return victim;
}

/*
 * take_start_token takes one token from the bucket of (database, tenant);
 * false, with the wait until the next token in *wait_ms, when it is empty.
 * Every tenant with a rate has a bucket: a free one, one that has refilled
 * completely (as good as new), or, when all WF_RATE_BUCKETS are owed
 * tokens, one taken from the database that holds the most
 * (rate_bucket_to_take).
 */
static bool
take_start_token(const char *tenant, double rate, int32 burst, double *wait_ms)
{
	TimestampTz now = GetCurrentTimestamp();
	double		cap = burst > 0 ? burst : Max(rate, 1.0);
	uint64		key = hash_bytes_extended((const unsigned char *) tenant, strlen(tenant), 0);
	WfRateBucket *b = NULL;
	WfRateBucket *free_b = NULL;
	bool		ok;
	int			i;

	if (WfShmem == NULL)
		return true;			/* not preloaded: not enforced (documented) */

	SpinLockAcquire(&WfShmem->rate_lock);
	for (i = 0; i < WF_RATE_BUCKETS; i++)
	{
		WfRateBucket *x = &WfShmem->rate[i];

		if (x->dboid == MyDatabaseId && x->tenant_key == key)
		{
			b = x;
			break;
		}
		/* a free bucket, or one that has refilled completely: reusing it loses nothing */
		if (free_b == NULL && (x->dboid == InvalidOid || x->full_at <= now))
			free_b = x;
	}
	if (b == NULL)
	{
		b = free_b != NULL ? free_b : rate_bucket_to_take();
		b->dboid = MyDatabaseId;
		b->tenant_key = key;
		b->tokens = cap;
		b->refilled_at = now;
	}
	b->tokens = Min(cap, b->tokens + rate * (double) (now - b->refilled_at) / 1000000.0);
	b->refilled_at = now;
	ok = b->tokens >= 1.0;
	if (ok)
		b->tokens -= 1.0;
	else
		*wait_ms = ceil((1.0 - b->tokens) / rate * 1000.0);
	b->full_at = now + (TimestampTz) ceil((cap - b->tokens) / rate * 1000000.0);
	SpinLockRelease(&WfShmem->rate_lock);
	return ok;
}

/*
 * WfStartQuotaSet tells whether the tenant limits its starts.  Inside an
 * API call.
 */
bool
WfStartQuotaSet(const char *tenant)
{
	const WfPolicy *p = tenant_policy(tenant);

	return p->max_live_runs > 0 || p->max_starts_per_second > 0;
}

/*
 * WfCheckStartQuota refuses a start that would exceed the tenant's
 * max_live_runs or start rate.  Inside an API call.
 */
void
WfCheckStartQuota(const char *tenant)
{
	const WfPolicy *p = tenant_policy(tenant);
	double		wait_ms = 0;

	if (p->max_live_runs > 0)
	{
		Datum		values[2];
		int64		live;

		/*
		 * Starts of the tenant take turns, so that two at once cannot both
		 * take the last place; the count runs with the latest snapshot, which
		 * sees the runs of the start we waited for under every isolation
		 * level (a REPEATABLE READ transaction's own snapshot would not).
		 */
		quota_lock(tenant, "live runs", true);
		values[0] = CStringGetTextDatum(tenant);
		values[1] = Int32GetDatum(p->max_live_runs);
		WfPlanExecFresh(&WfQuotaPlans, PLAN_LIVE_RUNS, values, NULL, 1);
		live = DatumGetInt64(WfGetDatumNotNull(0, 1));
		if (live >= p->max_live_runs)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("tenant \"%s\" has %d live runs, its limit", tenant, p->max_live_runs),
					 errdetail("Running, paused, cancelling and compensating runs count against max_live_runs of wf.tenant_policies."),
					 errhint("Start the run when one of them has finished, or ask an administrator to raise the limit.")));
	}
	if (p->max_starts_per_second > 0 &&
		!take_start_token(tenant, p->max_starts_per_second, p->start_burst, &wait_ms))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("tenant \"%s\" starts runs faster than its limit of %g per second",
						tenant, p->max_starts_per_second),
				 errhint("Retry in %.0f ms.", wait_ms)));
}

/* how long a counted bound of a tenant's buffered events is trusted */
#define WF_BUFFER_BOUND_TTL (10 * USECS_PER_SEC)

/*
 * buffer_bound_entry returns the entry of bounds[] of (database, tenant
 * key): a direct-mapped cache, so the entry may hold another (database,
 * tenant).  The caller holds bound_lock.
 */
static WfBufferBound *
buffer_bound_entry(uint64 key)
{
	uint32		h = (uint32) (key ^ (key >> 32)) ^ murmurhash32((uint32) MyDatabaseId);

	return &WfShmem->bounds[h % WF_BUFFER_BOUNDS];
}

/*
 * buffer_bound_take tells whether the cached upper bound of the tenant's
 * buffered events (counted at most WF_BUFFER_BOUND_TTL ago, plus one for
 * every send since) leaves room for one more under limit, and counts the
 * one more when it does.  Deliveries and expiries only lower the true
 * number, so the bound stays an upper bound; a rolled-back send leaves it
 * one too high, which is safe.  The caller holds the tenant's quota lock,
 * so no other send of the tenant counts meanwhile.
 */
static bool
buffer_bound_take(uint64 key, int32 limit, TimestampTz now)
{
	WfBufferBound *b;
	bool		ok = false;

	if (WfShmem == NULL)
		return false;
	SpinLockAcquire(&WfShmem->bound_lock);
	b = buffer_bound_entry(key);
	if (b->dboid == MyDatabaseId && b->tenant_key == key &&
		now - b->counted_at < WF_BUFFER_BOUND_TTL && b->upper < limit)
	{
		b->upper++;
		ok = true;
	}
	SpinLockRelease(&WfShmem->bound_lock);
	return ok;
}

/*
 * buffer_bound_set records that the tenant has upper buffered events
 * (counted at now, the send under way included).
 */
static void
buffer_bound_set(uint64 key, int64 upper, TimestampTz now)
{
	WfBufferBound *b;

	if (WfShmem == NULL)
		return;
	SpinLockAcquire(&WfShmem->bound_lock);
	b = buffer_bound_entry(key);
	b->dboid = MyDatabaseId;
	b->tenant_key = key;
	b->upper = upper;
	b->counted_at = now;
	SpinLockRelease(&WfShmem->bound_lock);
}

/*
 * WfCheckBufferQuota returns the number of events that tenant may keep
 * buffered (max_buffered_events, WF_DEFAULT_MAX_BUFFERED_EVENTS when not
 * set; 0: none), and refuses a new one when that many are buffered,
 * unexpired and undelivered at now.  Buffering sends of the tenant take
 * turns on the quota's lock and count with the latest snapshot, as starts
 * do for max_live_runs, but only when the cached upper bound of the count
 * (buffer_bound_take) does not leave room already: counting the whole
 * buffer at every send made a send cost O(buffered events).  Inside an
 * API call.
 */
int32
WfCheckBufferQuota(const char *tenant, TimestampTz now)
{
	const WfPolicy *p = tenant_policy(tenant);
	int32		limit = p->max_buffered_events < 0 ?
		WF_DEFAULT_MAX_BUFFERED_EVENTS : p->max_buffered_events;
	Datum		values[2];
	int64		buffered;
	uint64		key = hash_bytes_extended((const unsigned char *) tenant, strlen(tenant), 0);

	if (limit == 0)
		return 0;
	quota_lock(tenant, "buffered events", true);
	/* well under the limit at the last count: no need to count again */
	if (buffer_bound_take(key, limit, now))
		return limit;
	values[0] = CStringGetTextDatum(tenant);
	values[1] = TimestampTzGetDatum(now);
	WfPlanExecFresh(&WfQuotaPlans, PLAN_BUFFERED_COUNT, values, NULL, 1);
	buffered = DatumGetInt64(WfGetDatumNotNull(0, 1));
	if (buffered < limit)
		buffer_bound_set(key, buffered + 1, now);
	if (buffered >= limit)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("tenant \"%s\" has %d buffered events, its limit", tenant, limit),
				 errdetail("Events sent to a correlation key no live run has declared are kept in wf.buffered_events until a run declares the key or they expire; max_buffered_events of wf.tenant_policies limits them."),
				 errhint("Send it again later or with a shorter keep, start the runs that wait for these events, or ask an administrator to raise the limit.")));
	return limit;
}

/*
 * WfEventsAtLimit tells whether a run has max_events_per_run events of its
 * tenant already.  Inside an API call.
 */
bool
WfEventsAtLimit(const WfRunState *run)
{
	const WfPolicy *p = tenant_policy(run->tenant_id);

	return p->max_events_per_run > 0 && run->seq >= p->max_events_per_run;
}

/*
 * WfCheckEventQuota refuses a command that would append to a run that has
 * max_events_per_run events already, with hint saying what the run no
 * longer takes.  Inside an API call, with the run locked.
 */
void
WfCheckEventQuota(WfRunState *run, const char *hint)
{
	if (WfEventsAtLimit(run))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("run %s has %d events, the limit of tenant \"%s\"",
						WfRunIdText(&run->run_id), run->seq, run->tenant_id),
				 errhint("%s", hint)));
}

/*
 * WfSuppressAuditEvent is called instead of appending an event that only
 * records a refusal (see the top of this file): when the run has
 * max_events_per_run events already, the event is counted in its row of
 * wf.suppressed_events and true is returned, and the caller appends
 * nothing; otherwise false.  Inside an API call, with the run locked.
 */
bool
WfSuppressAuditEvent(const WfRunState *run, WfEventType type, TimestampTz now)
{
	Datum		values[4];

	if (!WfEventsAtLimit(run))
		return false;
	values[0] = CStringGetTextDatum(run->tenant_id);
	values[1] = UUIDPGetDatum(&run->run_id);
	values[2] = CStringGetTextDatum(WfEventTypeName(type));
	values[3] = TimestampTzGetDatum(now);
	WfPlanExec(&WfQuotaPlans, PLAN_SUPPRESSED_EVENT, values, NULL, false, 0, SPI_OK_INSERT);
	return true;
}

/*
 * WfCheckDefinitionQuota refuses a definition larger or deeper than the
 * tenant's limits, or one that could need more pending timers per run.
 * Inside an API call.
 */
void
WfCheckDefinitionQuota(const char *tenant, const char *name, int steps, Size bytes,
					   int depth, int timers)
{
	const WfPolicy *p = tenant_policy(tenant);

	if (p->max_definition_steps > 0 && steps > p->max_definition_steps)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("definition \"%s\" has %d steps across its branches, more than the limit of %d of tenant \"%s\"",
						name, steps, p->max_definition_steps, tenant)));
	if (p->max_definition_bytes > 0 && bytes > (Size) p->max_definition_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("definition \"%s\" is %zu bytes, more than the limit of %d bytes of tenant \"%s\"",
						name, bytes, p->max_definition_bytes, tenant)));
	if (p->max_definition_depth > 0 && depth > p->max_definition_depth)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("definition \"%s\" nests parallel steps %d deep, more than the limit of %d of tenant \"%s\"",
						name, depth, p->max_definition_depth, tenant),
				 errdetail("A definition without parallel steps has depth 1; each level of parallel branches adds one.")));
	if (p->max_timers_per_run > 0 && timers > p->max_timers_per_run)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a run of definition \"%s\" can have %d pending timers, more than the limit of %d of tenant \"%s\"",
						name, timers, p->max_timers_per_run, tenant),
				 errdetail("Each step timeout, retry backoff, sleep and approval expiry of a step, and the run timeout, can be pending at once."),
				 errhint("Drop timeouts or retries the process does not need, or ask an administrator to raise max_timers_per_run.")));
}

/*
 * WfClaimLimited tells whether the tenant limits its tasks in flight per
 * queue.  Inside an API call.
 */
bool
WfClaimLimited(const char *tenant)
{
	return tenant_policy(tenant)->max_tasks_in_flight > 0;
}

/*
 * WfClaimRoom returns how many of want tasks of queue the tenant may claim
 * now: want, or fewer (perhaps 0) when max_tasks_in_flight is set and
 * attempts of the queue are leased already.  With the limit set it first
 * takes the transaction-level lock of (tenant, queue), so that concurrent
 * claims count each other's leases: wait = true blocks for it, false only
 * tries (0 when another claim holds it).  Inside an API call.
 */
int32
WfClaimRoom(const char *tenant, const char *queue, int32 want, bool wait)
{
	const WfPolicy *p = tenant_policy(tenant);
	Datum		values[3];
	int64		leased;

	if (p->max_tasks_in_flight <= 0)
		return want;

	if (!quota_lock(tenant, queue, wait))
		return 0;

	/* the latest snapshot sees the leases of the claim we waited for */
	values[0] = CStringGetTextDatum(tenant);
	values[1] = CStringGetTextDatum(queue);
	values[2] = Int32GetDatum(p->max_tasks_in_flight);
	WfPlanExecFresh(&WfQuotaPlans, PLAN_TASKS_IN_FLIGHT, values, NULL, 1);
	leased = DatumGetInt64(WfGetDatumNotNull(0, 1));
	SPI_freetuptable(SPI_tuptable);
	return (int32) Min((int64) want, Max((int64) 0, p->max_tasks_in_flight - leased));
}

/* set when WfTimerRoom refuses a transition, until WfTakeTimerRefusal */
static bool timer_refused = false;

/*
 * WfTakeTimerRefusal tells whether WfTimerRoom has refused a transition
 * since the last call, and clears it.  The timer tick clears it before
 * each timer and reads it when the timer's handling failed.
 */
bool
WfTakeTimerRefusal(void)
{
	bool		refused = timer_refused;

	timer_refused = false;
	return refused;
}

/*
 * WfTimerRoom makes room for a new timer of a run when the tenant limits
 * its pending timers: at the limit, the pending timers of the same kind
 * and step with an earlier generation (stale the moment the new one is
 * written) are cancelled as "superseded"; if the run is still at the
 * limit, the transition is refused.  Child-done timers are not counted:
 * a child run writes its own, one per child.  Inside an API call.
 */
void
WfTimerRoom(const char *tenant, pg_uuid_t *run_id, const char *kind,
			const char *step, int32 generation, TimestampTz now)
{
	const WfPolicy *p = tenant_policy(tenant);
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	int64		pending;

	if (p->max_timers_per_run <= 0)
		return;
	/* not read-only: it must see the timers this transition has written */
	values[0] = UUIDPGetDatum(run_id);
	WfPlanExec(&WfQuotaPlans, PLAN_TIMERS_PENDING, values, NULL, false, 1, SPI_OK_SELECT);
	pending = DatumGetInt64(WfGetDatumNotNull(0, 1));
	SPI_freetuptable(SPI_tuptable);
	if (pending < p->max_timers_per_run)
		return;

	values[1] = CStringGetTextDatum(kind);
	WfSetTextOrNull(values, nulls, 2, step);
	values[3] = Int32GetDatum(generation);
	values[4] = TimestampTzGetDatum(now);
	pending -= WfPlanExec(&WfQuotaPlans, PLAN_TIMERS_SUPERSEDE, values, nulls, false, 0, SPI_OK_UPDATE);
	if (pending >= p->max_timers_per_run)
	{
		timer_refused = true;
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("run %s has %lld pending timers, the limit of tenant \"%s\"",
						WfRunIdText(run_id), (long long) pending, tenant),
				 step != NULL ?
				 errdetail("The transition would set a %s timer of step \"%s\".", kind, step) :
				 errdetail("The transition would set a %s timer.", kind),
				 errhint("Raise max_timers_per_run of the tenant's policy, or migrate the run to a version published under it.")));
	}
}

PG_FUNCTION_INFO_V1(wfengine_policy_changed);



/*
 * wfengine_policy_changed is wf._policy_changed(): wf.set_tenant_policy()
 * calls it so that its own backend sees the change at once (others within
 * a second).
 */
Datum
wfengine_policy_changed(PG_FUNCTION_ARGS)
{
	WfQuotaReset();
	PG_RETURN_VOID();
}

/*
 * WfQuotaInit asks the plan cache to forget the cached policies with its plans (a new
 * install of the extension).  Called from _PG_init.
 */
void
WfQuotaInit(void)
{
	WfRegisterResetCallback(WfQuotaReset);
}
