/*-------------------------------------------------------------------------
 *
 * events.c
 *	  Buffered correlated events: wf.send_event to a key no live run has
 *	  declared yet.
 *
 * wf.send_event(correlation_key, name, payload, event_id, keep) delivers
 * an outside event to the live runs that declared the correlation key
 * (wf.correlations, written by wf.start_run).  When none has, the event is
 * kept in wf.buffered_events for keep (1 day by default, at most 30 days)
 * and delivered to the first run that declares the key at wf.start_run
 * and whose definition has a wait_event step for the event's name: it
 * becomes a signal of that run (signal_received, with buffered_key and
 * buffered_at), consumed at once when the run waits for it, kept in
 * wf.signals otherwise, as wf.signal does.  A delivered row stays until it
 * expires, marked delivered_at/delivered_to, so that a repeated event id
 * is a duplicate for as long as the event was to be kept.  Expired rows
 * are ignored at once and deleted by wf.purge_runs.  Each tenant keeps at
 * most max_buffered_events undelivered, unexpired events (10000 when not
 * set; 0 drops them, the answer "dropped").
 *
 * The race of a send and a start declaring the key at the same time is
 * decided by a transaction-level lock of (database, tenant, key), which
 * the send takes before it looks for the runs of the key and keeps until
 * it has buffered the event, and the start takes before it declares the
 * key and looks for buffered events.  Whichever comes second waits for the
 * first to commit and then reads with the latest snapshot: the send finds
 * the run, or the start finds the event (isolation spec send_start_race).
 * Under REPEATABLE READ and SERIALIZABLE the transaction's snapshot may
 * not show what the latest one does; then the call fails with a
 * serialization failure (40001) to be retried, never loses the event.
 * Child runs declare their keys without the lock and take no buffered
 * events: they are started inside their parent's transition.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/events.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "argcheck.h"
#include "crypto.h"
#include "definition.h"
#include "sensitive.h"
#include "spi_util.h"
#include "state.h"
#include "wfengine.h"

PG_FUNCTION_INFO_V1(wfengine_event_runs);
PG_FUNCTION_INFO_V1(wfengine_buffer_event);

/* lock tag field 4 of the correlation key locks: apart from SQL's and quota.c's */
#define WF_CORRELATION_LOCK 0x5747

/*
 * WfLockCorrelationKey takes the transaction-level lock of a correlation
 * key of tenant, which wf.send_event and a wf.start_run declaring the key
 * take in turn.  Two keys may share a lock (a hash collision): they then
 * only take turns needlessly.
 */
void
WfLockCorrelationKey(const char *tenant, const char *key)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId,
						 hash_bytes((const unsigned char *) tenant, strlen(tenant)),
						 hash_bytes((const unsigned char *) key, strlen(key)),
						 WF_CORRELATION_LOCK);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/*
 * serialization_failure reports that the transaction's snapshot does not
 * show what a concurrent send or start of the key committed.
 */
static void
serialization_failure(const char *key, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access to correlation key \"%s\"", key),
			 errdetail("%s committed after this transaction's snapshot was taken.", what),
			 errhint("Retry the transaction.")));
}

/*
 * wfengine_event_runs is wf._event_runs(correlation_key), for
 * wf.send_event: it takes the key's lock and returns the running and
 * paused runs of the session's tenant that declared the key, in run id
 * order, read with the latest snapshot, as an array.
 */
Datum
wfengine_event_runs(PG_FUNCTION_ARGS)
{
	char	   *key = text_to_cstring(PG_GETARG_TEXT_PP(0));
	const char *tenant = WfCurrentTenant();
	Datum		values[2];
	uint64		n;
	uint64		i;
	pg_uuid_t  *runs;
	Datum	   *elems;
	ArrayType  *result;

	WfCheckCStringArg(key, "correlation key", WF_ARG_KEY);

	WfApiBegin();
	WfLockCorrelationKey(tenant, key);
	values[0] = CStringGetTextDatum(tenant);
	values[1] = CStringGetTextDatum(key);
	n = WfExecPlanFresh(WF_PLAN_EVENT_RUNS, values, NULL, 0);
	runs = SPI_palloc(sizeof(pg_uuid_t) * Max(n, 1));
	for (i = 0; i < n; i++)
		memcpy(&runs[i], DatumGetUUIDP(WfGetDatumNotNull(i, 1)), sizeof(pg_uuid_t));

	/* a run the transaction's snapshot does not show cannot be signalled */
	if (IsolationUsesXactSnapshot())
	{
		uint64		m = WfExecPlan(WF_PLAN_EVENT_RUNS, values, NULL, true, 0, SPI_OK_SELECT);

		if (m != n)
			serialization_failure(key, "A run that declared the key");
		for (i = 0; i < m; i++)
			if (memcmp(&runs[i], DatumGetUUIDP(WfGetDatumNotNull(i, 1)), sizeof(pg_uuid_t)) != 0)
				serialization_failure(key, "A run that declared the key");
	}
	WfApiEnd();

	elems = palloc(sizeof(Datum) * Max(n, 1));
	for (i = 0; i < n; i++)
		elems[i] = UUIDPGetDatum(&runs[i]);
	result = construct_array(elems, (int) n, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR);
	PG_RETURN_ARRAYTYPE_P(result);
}

/*
 * wfengine_buffer_event is wf._buffer_event(correlation_key, name,
 * payload, event_id, keep), for wf.send_event after it found no live run
 * of the key (with the key's lock held): it keeps the event until now +
 * keep and answers "buffered", or "duplicate" for an event id the key has
 * kept already (and not expired), or "dropped" for a tenant whose
 * max_buffered_events is 0.  A tenant at its limit is refused (54000).
 * A null event id is a fresh one.  The arguments were checked by
 * wf.send_event.
 */
Datum
wfengine_buffer_event(PG_FUNCTION_ARGS)
{
	const char *tenant = WfCurrentTenant();
	char	   *key;
	char	   *name;
	Jsonb	   *payload;
	char	   *event_id;
	Interval   *keep;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz expires;
	Datum		values[8];
	const char *outcome;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(4))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("correlation key, name and keep must not be null")));
	key = WfTextArg(fcinfo, 0, "correlation key", WF_ARG_KEY);
	name = WfTextArg(fcinfo, 1, "signal name", WF_ARG_SIGNAL);
	if (key[0] == '\0' || name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a correlation key and a signal name must not be empty")));
	WfSignalPayloadAndId(fcinfo, 2, name, &payload, &event_id);
	keep = PG_GETARG_INTERVAL_P(4);
	expires = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													  TimestampTzGetDatum(now),
													  IntervalPGetDatum(keep)));
	if (expires <= now || expires > now + (TimestampTz) 30 * USECS_PER_DAY)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("keep must be between 1 microsecond and 30 days")));

	WfApiBegin();
	/* the sender holds the key's lock (wf._event_runs) */
	WfLockCorrelationKey(tenant, key);
	values[0] = CStringGetTextDatum(tenant);
	values[1] = CStringGetTextDatum(key);
	values[2] = CStringGetTextDatum(event_id);
	values[3] = TimestampTzGetDatum(now);
	/* a repeat is a duplicate also at the limit (and with none) */
	if (WfExecPlanFresh(WF_PLAN_BUFFERED_EXISTS, values, NULL, 1) == 1)
		outcome = "duplicate";
	else if (WfCheckBufferQuota(tenant, now) == 0)
		outcome = "dropped";
	else
	{
		values[2] = CStringGetTextDatum(name);
		values[3] = CStringGetTextDatum(event_id);
		values[4] = JsonbPGetDatum(payload);
		values[5] = CStringGetTextDatum(WfCurrentActor());
		values[6] = TimestampTzGetDatum(now);
		values[7] = TimestampTzGetDatum(expires);
		outcome = WfExecPlan(WF_PLAN_BUFFERED_INSERT, values, NULL, false, 0,
							 SPI_OK_INSERT_RETURNING) == 1 ? "buffered" : "duplicate";
	}
	WfApiEnd();
	PG_RETURN_TEXT_P(cstring_to_text(outcome));
}

/*
 * WfDeliverBufferedEvents delivers to run run_id, just started by
 * wf.start_run with the correlation keys keys (their locks held), the
 * buffered events of those keys whose name a wait_event step of def waits
 * for, oldest first: each is marked delivered to the run and signalled to
 * it (WfDeliverSignal).  Stops when the run has ended, or reached its
 * event limit (the rest stays buffered).  Inside an API call.
 */
void
WfDeliverBufferedEvents(const WfDefinition *def, pg_uuid_t *run_id, const char *tenant,
						List *keys)
{
	Datum	   *names;
	int			nnames = 0;
	ArrayType  *name_array;
	ListCell   *lc;
	int			i;
	TimestampTz now = GetCurrentTimestamp();

	if (keys == NIL)
		return;
	names = palloc(sizeof(Datum) * Max(def->nsteps, 1));
	for (i = 0; i < def->nsteps; i++)
		if (def->steps[i].type == WF_STEP_WAIT_EVENT && def->steps[i].event_name != NULL)
			names[nnames++] = CStringGetTextDatum(def->steps[i].event_name);
	if (nnames == 0)
		return;					/* the run waits for no event */
	name_array = construct_array(names, nnames, TEXTOID, -1, false, TYPALIGN_INT);

	foreach(lc, keys)
	{
		char	   *key = (char *) lfirst(lc);
		Datum		values[4];
		uint64		n;
		uint64		r;
		int64	   *ids;
		char	  **evnames;
		char	  **event_ids;
		Jsonb	  **payloads;
		TimestampTz *received;

		values[0] = CStringGetTextDatum(tenant);
		values[1] = CStringGetTextDatum(key);
		values[2] = TimestampTzGetDatum(now);
		values[3] = PointerGetDatum(name_array);
		n = WfExecPlanFresh(WF_PLAN_BUFFERED_FOR_KEY, values, NULL, 0);
		if (n == 0)
			continue;
		ids = palloc(sizeof(int64) * n);
		evnames = palloc(sizeof(char *) * n);
		event_ids = palloc(sizeof(char *) * n);
		payloads = palloc(sizeof(Jsonb *) * n);
		received = palloc(sizeof(TimestampTz) * n);
		for (r = 0; r < n; r++)
		{
			ids[r] = DatumGetInt64(WfGetDatumNotNull(r, 1));
			evnames[r] = WfGetTextOrNull(r, 2);
			event_ids[r] = WfGetTextOrNull(r, 3);
			payloads[r] = DatumGetJsonbPCopy(WfGetDatumNotNull(r, 4));
			received[r] = DatumGetTimestampTz(WfGetDatumNotNull(r, 5));
		}
		for (r = 0; r < n; r++)
		{
			WfRunState	run;
			Datum		dv[3];

			/* the run may have ended or paused at the previous signal */
			WfLockRun(run_id, &run);
			if (run.status != WF_RUN_RUNNING && run.status != WF_RUN_PAUSED)
				return;
			if (WfEventsAtLimit(&run))
				return;
			dv[0] = Int64GetDatum(ids[r]);
			dv[1] = TimestampTzGetDatum(now);
			dv[2] = UUIDPGetDatum(run_id);
			if (WfExecPlan(WF_PLAN_BUFFERED_DELIVER, dv, NULL, false, 0, SPI_OK_UPDATE) != 1)
				serialization_failure(key, "An event buffered for the key");
			if (WfDeliverSignal(run_id, evnames[r], payloads[r], event_ids[r],
								key, received[r]) == NULL)
				elog(ERROR, "a buffered event could not be delivered");
		}
	}
}
