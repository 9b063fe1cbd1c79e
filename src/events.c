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
 * Event ids.  An event id is idempotent per (tenant, correlation key) for
 * keep, whichever way the event went: wf.send_event records it in
 * wf.event_ids (primary key tenant, key, event id; expires_at = now +
 * keep) under the key's lock, before it looks for runs
 * (wf._event_runs(key, event_id, keep)), and a send that finds the record
 * unexpired answers "duplicate" and delivers to no run.  Without it a
 * repeat after the run that took the event had ended went into the buffer
 * (and to the next run of the key), and one after another run had
 * declared the key went to that run: wf.signal's own duplicate check is
 * per run.  The record is written whatever the outcome (consumed, stored,
 * ended, buffered or dropped), and not at all when the call fails (it is
 * undone with it) or has no event id (every such send is new).  Two sends
 * of one event id take the key's lock in turn, and the second reads the
 * record with the latest snapshot; the primary key decides even without
 * the lock (INSERT ... ON CONFLICT: a REPEATABLE READ send that conflicts
 * with a record its snapshot does not show fails with 40001).  Only API
 * calls take the key's lock, never the engine worker.  A record is kept
 * until its expires_at, then wf.purge_runs deletes it (skipping a row a
 * transaction holds, which only a send re-using the expired id does).
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

#include "api.h"
#include "argcheck.h"
#include "correlate.h"
#include "events.h"
#include "quota.h"
#include "spi_util.h"
#include "tenant.h"

PG_FUNCTION_INFO_V1(wfengine_event_runs);
PG_FUNCTION_INFO_V1(wfengine_buffer_event);

/* the statements of events.c (registered by _PG_init: WfEventsPlans) */
enum
{
	PLAN_EVENT_RUNS = 0,
	PLAN_BUFFERED_EXISTS,
	PLAN_BUFFERED_INSERT,
	PLAN_EVENT_ID_SEEN,
	PLAN_EVENT_ID_RECORD
};

static const WfPlanSpec events_plan_specs[] = {
	[PLAN_EVENT_RUNS] = {
		"event_runs",
		"SELECT c.run_id FROM wf.correlations c JOIN wf.runs r"
		" ON r.run_id OPERATOR(pg_catalog.=) c.run_id"
		" WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.key OPERATOR(pg_catalog.=) $2"
		" AND r.tenant_id OPERATOR(pg_catalog.=) $1"
		" AND r.status OPERATOR(pg_catalog.=) ANY (ARRAY['running', 'paused'])"
		" ORDER BY c.run_id",
		2, {TEXTOID, TEXTOID}
	},
	[PLAN_BUFFERED_EXISTS] = {
		"buffered_exists",
		"SELECT 1 FROM wf.buffered_events b"
		" WHERE b.tenant_id OPERATOR(pg_catalog.=) $1 AND b.key OPERATOR(pg_catalog.=) $2"
		" AND b.event_id OPERATOR(pg_catalog.=) $3 AND b.expires_at OPERATOR(pg_catalog.>) $4",
		4, {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID}
	},
	[PLAN_BUFFERED_INSERT] = {
		"buffered_insert",
		/* an expired row of the same event id is as good as none */
		"INSERT INTO wf.buffered_events AS x (tenant_id, key, name, event_id, payload,"
		" sent_by, received_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
		"ON CONFLICT (tenant_id, key, event_id) DO UPDATE SET name = excluded.name,"
		" payload = excluded.payload, sent_by = excluded.sent_by,"
		" received_at = excluded.received_at, expires_at = excluded.expires_at,"
		" delivered_at = NULL, delivered_to = NULL"
		" WHERE x.expires_at OPERATOR(pg_catalog.<=) excluded.received_at "
		"RETURNING x.buffer_id",
		8, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},
	[PLAN_EVENT_ID_SEEN] = {
		"event_id_seen",
		"SELECT 1 FROM wf.event_ids e"
		" WHERE e.tenant_id OPERATOR(pg_catalog.=) $1 AND e.key OPERATOR(pg_catalog.=) $2"
		" AND e.event_id OPERATOR(pg_catalog.=) $3 AND e.expires_at OPERATOR(pg_catalog.>) $4",
		4, {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID}
	},
	[PLAN_EVENT_ID_RECORD] = {
		"event_id_record",
		/* an expired record of the same event id is as good as none */
		"INSERT INTO wf.event_ids AS x (tenant_id, key, event_id, sent_at, expires_at)"
		" VALUES ($1, $2, $3, $4, $5) "
		"ON CONFLICT (tenant_id, key, event_id) DO UPDATE SET sent_at = excluded.sent_at,"
		" expires_at = excluded.expires_at"
		" WHERE x.expires_at OPERATOR(pg_catalog.<=) excluded.sent_at "
		"RETURNING 1",
		5, {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},
};

WfPlanTable WfEventsPlans = WF_PLAN_TABLE("events", events_plan_specs);



/*
 * event_expiry returns now + keep, the end of a buffered event's and of an
 * event id's retention, after checking that keep is more than 0 and at
 * most 30 days (wf.send_event checked it already, with its own message).
 */
static TimestampTz
event_expiry(TimestampTz now, Interval *keep)
{
	TimestampTz expires;

	expires = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													  TimestampTzGetDatum(now),
													  IntervalPGetDatum(keep)));
	if (expires <= now || expires > now + (TimestampTz) 30 * USECS_PER_DAY)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("keep must be between 1 microsecond and 30 days")));
	return expires;
}

/*
 * record_event_id records event_id for the correlation key key of tenant
 * until expires (wf.event_ids), the caller holding the key's lock inside
 * an API call.  Returns false, recording nothing, when the key has the
 * event id already and it has not expired: the send is a duplicate.  The
 * record is read with the latest snapshot, which shows every send of the
 * key that committed before the lock was granted; the insert's ON CONFLICT
 * decides between sends that do not take the lock.
 */
static bool
record_event_id(const char *tenant, const char *key, const char *event_id,
				TimestampTz now, TimestampTz expires)
{
	Datum		values[5];

	values[0] = CStringGetTextDatum(tenant);
	values[1] = CStringGetTextDatum(key);
	values[2] = CStringGetTextDatum(event_id);
	values[3] = TimestampTzGetDatum(now);
	if (WfPlanExecFresh(&WfEventsPlans, PLAN_EVENT_ID_SEEN, values, NULL, 1) == 1)
		return false;
	values[4] = TimestampTzGetDatum(expires);
	return WfPlanExec(&WfEventsPlans, PLAN_EVENT_ID_RECORD, values, NULL, false, 0,
					  SPI_OK_INSERT_RETURNING) == 1;
}

/*
 * wfengine_event_runs is wf._event_runs(correlation_key) and, since 0.2.0,
 * wf._event_runs(correlation_key, event_id, keep), for wf.send_event: it
 * takes the key's lock and returns the running and paused runs of the
 * session's tenant that declared the key, in run id order, read with the
 * latest snapshot, as an array.  The three-argument form first records
 * event_id for the key until now + keep (record_event_id) and returns NULL,
 * looking for no run, when the key has had the event id within its keep;
 * a NULL event_id records nothing (each such send is a new event).
 */
Datum
wfengine_event_runs(PG_FUNCTION_ARGS)
{
	char	   *key;
	const char *tenant = WfCurrentTenant();
	char	   *event_id = NULL;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz expires = 0;
	Datum		values[2];
	uint64		n;
	uint64		i;
	pg_uuid_t  *runs;
	Datum	   *elems;
	ArrayType  *result;

	/* the one-argument form is STRICT, the three-argument one is not */
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("correlation key must not be null")));
	key = text_to_cstring(PG_GETARG_TEXT_PP(0));
	WfCheckCStringArg(key, "correlation key", WF_ARG_KEY);
	if (PG_NARGS() >= 3)
	{
		if (PG_ARGISNULL(2))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("keep must not be null")));
		event_id = WfTextArg(fcinfo, 1, "event id", WF_ARG_KEY);
		if (event_id != NULL && event_id[0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("an event id must have 1 to %d bytes", WF_ARG_MAX_KEY)));
		expires = event_expiry(now, PG_GETARG_INTERVAL_P(2));
	}

	WfApiBegin();
	WfLockCorrelationKey(tenant, key);
	if (event_id != NULL && !record_event_id(tenant, key, event_id, now, expires))
	{
		WfApiEnd();
		PG_RETURN_NULL();		/* a repeat: delivered to no run */
	}
	values[0] = CStringGetTextDatum(tenant);
	values[1] = CStringGetTextDatum(key);
	n = WfPlanExecFresh(&WfEventsPlans, PLAN_EVENT_RUNS, values, NULL, 0);
	runs = SPI_palloc(sizeof(pg_uuid_t) * Max(n, 1));
	for (i = 0; i < n; i++)
		memcpy(&runs[i], DatumGetUUIDP(WfGetDatumNotNull(i, 1)), sizeof(pg_uuid_t));

	/* a run the transaction's snapshot does not show cannot be signalled */
	if (IsolationUsesXactSnapshot())
	{
		uint64		m = WfPlanExec(&WfEventsPlans, PLAN_EVENT_RUNS, values, NULL, true, 0, SPI_OK_SELECT);

		if (m != n)
			WfSerializationFailure(key, "A run that declared the key");
		for (i = 0; i < m; i++)
			if (memcmp(&runs[i], DatumGetUUIDP(WfGetDatumNotNull(i, 1)), sizeof(pg_uuid_t)) != 0)
				WfSerializationFailure(key, "A run that declared the key");
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
	expires = event_expiry(now, PG_GETARG_INTERVAL_P(4));

	WfApiBegin();
	/* the sender holds the key's lock (wf._event_runs) */
	WfLockCorrelationKey(tenant, key);
	values[0] = CStringGetTextDatum(tenant);
	values[1] = CStringGetTextDatum(key);
	values[2] = CStringGetTextDatum(event_id);
	values[3] = TimestampTzGetDatum(now);
	/* a repeat is a duplicate also at the limit (and with none) */
	if (WfPlanExecFresh(&WfEventsPlans, PLAN_BUFFERED_EXISTS, values, NULL, 1) == 1)
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
		outcome = WfPlanExec(&WfEventsPlans, PLAN_BUFFERED_INSERT, values, NULL, false, 0,
							 SPI_OK_INSERT_RETURNING) == 1 ? "buffered" : "duplicate";
	}
	WfApiEnd();
	PG_RETURN_TEXT_P(cstring_to_text(outcome));
}
