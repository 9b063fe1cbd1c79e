/*-------------------------------------------------------------------------
 *
 * correlate.c
 *	  Correlation keys of runs, and the buffered events a new run takes.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/correlate.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "argcheck.h"
#include "correlate.h"
#include "defcompile.h"
#include "definition.h"
#include "jsonutil.h"
#include "quota.h"
#include "runstore.h"
#include "spi_util.h"
#include "state.h"
#include "step_wait.h"
#include "tenant.h"

/* the statements of correlate.c (registered by _PG_init: WfCorrelatePlans) */
enum
{
	PLAN_CORRELATION_INSERT = 0,
	PLAN_BUFFERED_FOR_KEY,
	PLAN_BUFFERED_DELIVER
};

static const WfPlanSpec correlate_plan_specs[] = {
	[PLAN_CORRELATION_INSERT] = {
		"correlation_insert",
		"INSERT INTO wf.correlations (tenant_id, key, run_id, created_at) "
		"VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
		4, {TEXTOID, TEXTOID, UUIDOID, TIMESTAMPTZOID}
	},
	[PLAN_BUFFERED_FOR_KEY] = {
		"buffered_for_key",
		"SELECT b.buffer_id, b.name, b.event_id, b.payload, b.received_at"
		" FROM wf.buffered_events b"
		" WHERE b.tenant_id OPERATOR(pg_catalog.=) $1 AND b.key OPERATOR(pg_catalog.=) $2"
		" AND b.delivered_at IS NULL AND b.expires_at OPERATOR(pg_catalog.>) $3"
		" AND b.name OPERATOR(pg_catalog.=) ANY ($4) ORDER BY b.received_at, b.buffer_id",
		4, {TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTARRAYOID}
	},
	[PLAN_BUFFERED_DELIVER] = {
		"buffered_deliver",
		"UPDATE wf.buffered_events b SET delivered_at = $2, delivered_to = $3"
		" WHERE b.buffer_id OPERATOR(pg_catalog.=) $1 AND b.delivered_at IS NULL",
		3, {INT8OID, TIMESTAMPTZOID, UUIDOID}
	},
};

WfPlanTable WfCorrelatePlans = WF_PLAN_TABLE("correlate", correlate_plan_specs);

/* the columns of buffered_for_key */
enum
{
	BUFFERED_FOR_KEY_COL_BUFFER_ID = 1,
	BUFFERED_FOR_KEY_COL_NAME,
	BUFFERED_FOR_KEY_COL_EVENT_ID,
	BUFFERED_FOR_KEY_COL_PAYLOAD,
	BUFFERED_FOR_KEY_COL_RECEIVED_AT
};


/* list_sort comparator of correlation keys */
static int
key_cmp(const ListCell *a, const ListCell *b)
{
	return strcmp((const char *) lfirst(a), (const char *) lfirst(b));
}

/*
 * WfWriteCorrelations records the correlation keys of a new run: for each
 * named JSONPath of the definition, "<name>:<value>" for each string or
 * number it finds in {"input": ...}.  A path that finds nothing gives no
 * key.  A key longer than WF_ARG_MAX_KEY is refused for a run a caller
 * starts; a child run (started by its parent's transition, which must not
 * fail for it) is not given that key.  A run a caller starts takes the
 * lock of each key (in key order, so that two starts cannot deadlock)
 * before it declares it, the lock wf.send_event takes before it looks for
 * the runs of a key (events.c).  Returns the keys, sorted, without
 * repeats.
 */
List *
WfWriteCorrelations(const WfDefinition *def, WfRunState *run, Jsonb *input,
					TimestampTz now)
{
	WfJsonBuilder b;
	Jsonb	   *context;
	int			c;
	bool		child = WfJsonbGet(run->context, "parent") != NULL;
	List	   *keys = NIL;
	List	   *unique = NIL;
	ListCell   *lc;

	WfJbBegin(&b);
	WfJbJsonb(&b, "input", input);
	context = WfJbEnd(&b);
	for (c = 0; c < def->n_correlation; c++)
	{
		Jsonb	   *found = WfEvaluatePathAll(def->correlation[c].path, context);
		JsonbIterator *it;
		JsonbValue	v;
		JsonbIteratorToken tok;

		if (found == NULL)
			continue;
		it = JsonbIteratorInit(&found->root);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			char	   *value = NULL;

			if (tok != WJB_ELEM && tok != WJB_VALUE)
				continue;
			if (v.type == jbvString)
				value = pnstrdup(v.val.string.val, v.val.string.len);
			else if (v.type == jbvNumeric)
				value = DatumGetCString(DirectFunctionCall1(numeric_out,
															NumericGetDatum(v.val.numeric)));
			if (value == NULL || value[0] == '\0')
				continue;
			value = psprintf("%s:%s", def->correlation[c].key, value);
			/* too long: refused at wf.start_run; a child run goes without */
			if (child && strlen(value) > WF_ARG_MAX_KEY)
				continue;
			WfCheckCStringArg(value, psprintf("correlation key \"%s\" of the run",
											  def->correlation[c].key), WF_ARG_KEY);
			keys = lappend(keys, value);
		}
	}
	list_sort(keys, key_cmp);
	foreach(lc, keys)
	{
		char	   *value = (char *) lfirst(lc);
		Datum		values[4];

		if (unique != NIL && strcmp((char *) llast(unique), value) == 0)
			continue;
		unique = lappend(unique, value);
		if (!child)
			WfLockCorrelationKey(run->tenant_id, value);
		values[0] = CStringGetTextDatum(run->tenant_id);
		values[1] = CStringGetTextDatum(value);
		values[2] = UUIDPGetDatum(&run->run_id);
		values[3] = TimestampTzGetDatum(now);
		WfPlanExec(&WfCorrelatePlans, PLAN_CORRELATION_INSERT, values, NULL, false, 0, SPI_OK_INSERT);
	}
	return unique;
}

/*
 * WfLockCorrelationKey takes the transaction-level lock of a correlation
 * key of tenant, which wf.send_event and a wf.start_run declaring the key
 * take in turn.  Two keys may share a lock (a hash collision): they then
 * only take turns needlessly.
 */
void
WfLockCorrelationKey(const char *tenant, const char *key)
{
	(void) WfLockTenantKey(tenant, key, WF_LOCK_CORRELATION, true);
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
		n = WfPlanExecFresh(&WfCorrelatePlans, PLAN_BUFFERED_FOR_KEY, values, NULL, 0);
		if (n == 0)
			continue;
		ids = palloc(sizeof(int64) * n);
		evnames = palloc(sizeof(char *) * n);
		event_ids = palloc(sizeof(char *) * n);
		payloads = palloc(sizeof(Jsonb *) * n);
		received = palloc(sizeof(TimestampTz) * n);
		for (r = 0; r < n; r++)
		{
			ids[r] = DatumGetInt64(WfGetDatumNotNull(r, BUFFERED_FOR_KEY_COL_BUFFER_ID));
			evnames[r] = WfGetTextOrNull(r, BUFFERED_FOR_KEY_COL_NAME);
			event_ids[r] = WfGetTextOrNull(r, BUFFERED_FOR_KEY_COL_EVENT_ID);
			payloads[r] = DatumGetJsonbPCopy(WfGetDatumNotNull(r, BUFFERED_FOR_KEY_COL_PAYLOAD));
			received[r] = DatumGetTimestampTz(WfGetDatumNotNull(r, BUFFERED_FOR_KEY_COL_RECEIVED_AT));
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
			if (WfPlanExec(&WfCorrelatePlans, PLAN_BUFFERED_DELIVER, dv, NULL, false, 0, SPI_OK_UPDATE) != 1)
				WfSerializationFailure(key, "An event buffered for the key");
			if (WfDeliverSignal(run_id, evnames[r], payloads[r], event_ids[r],
								key, received[r]) == NULL)
				elog(ERROR, "a buffered event could not be delivered");
		}
	}
}

/*
 * WfSerializationFailure reports that the transaction's snapshot does not
 * show what a concurrent send or start of the key committed.
 */
void
WfSerializationFailure(const char *key, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access to correlation key \"%s\"", key),
			 errdetail("%s committed after this transaction's snapshot was taken.", what),
			 errhint("Retry the transaction.")));
}
